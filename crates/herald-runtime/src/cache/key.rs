//! Object keys: `namespace/name` for namespaced objects, `name` for cluster-scoped ones.

use kube::Resource;

use super::error::KeyError;

/// The cache key of `obj`: `"<namespace>/<name>"`, or `"<name>"` when the object has no
/// (or an empty) namespace. Same format as client-go's `MetaNamespaceKeyFunc`.
///
/// ```
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use herald_runtime::cache::object_key;
/// let mut cm = ConfigMap::default();
/// cm.metadata.name = Some("cfg".into());
/// assert_eq!(object_key(&cm), "cfg");
/// cm.metadata.namespace = Some("prod".into());
/// assert_eq!(object_key(&cm), "prod/cfg");
/// ```
pub fn object_key<K: Resource>(obj: &K) -> String {
    let meta = obj.meta();
    let name = meta.name.as_deref().unwrap_or_default();
    match meta.namespace.as_deref() {
        Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
        _ => name.to_owned(),
    }
}

/// Splits a key made by [`object_key`] into `(namespace, name)`; the namespace is `None`
/// for a cluster-scoped key. Errors on any other shape (more than one `/`).
///
/// ```
/// use herald_runtime::cache::split_key;
/// assert_eq!(split_key("prod/cfg").unwrap(), (Some("prod"), "cfg"));
/// assert_eq!(split_key("node-1").unwrap(), (None, "node-1"));
/// assert!(split_key("a/b/c").is_err());
/// ```
pub fn split_key(key: &str) -> Result<(Option<&str>, &str), KeyError> {
    let mut parts = key.split('/');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(name), None, None) => Ok((None, name)),
        (Some(ns), Some(name), None) => Ok((Some(ns), name)),
        _ => Err(KeyError::UnexpectedFormat(key.to_owned())),
    }
}

/// The object's `metadata.resourceVersion`, or `""` when it has none.
pub(crate) fn resource_version<K: Resource>(obj: &K) -> &str {
    obj.meta().resource_version.as_deref().unwrap_or_default()
}
