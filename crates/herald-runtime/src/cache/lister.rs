//! Typed, read-only listers over an [`Indexer`].

use std::sync::Arc;

use kube::Resource;
use kube::core::{Selector, SelectorExt};

use super::indexer::{Indexer, NAMESPACE_INDEX};

/// A lookup that found nothing, rendered like kube-apiserver's `NotFound` message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{resource} \"{name}\" not found")]
pub struct NotFound {
    /// The qualified plural resource (`configmaps`, `events.events.k8s.io`).
    pub resource: String,
    /// The name that was looked up.
    pub name: String,
}

/// A typed, read-only view of an [`Indexer`]: list with a label selector, get by name, and
/// per-namespace listing through the namespace index. Cheap to clone.
///
/// ```
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use herald_runtime::cache::{Indexer, Lister};
///
/// let idx: Indexer<ConfigMap> = Indexer::new();
/// let mut cm = ConfigMap::default();
/// cm.metadata.name = Some("a".into());
/// cm.metadata.namespace = Some("ns1".into());
/// idx.add(Arc::new(cm));
/// let lister = Lister::new(idx);
/// assert!(lister.namespaced("ns1").get("a").is_ok());
/// assert_eq!(
///     lister.namespaced("ns2").get("a").unwrap_err().to_string(),
///     "configmaps \"a\" not found"
/// );
/// ```
pub struct Lister<K> {
    indexer: Indexer<K>,
    resource: Arc<str>,
}

impl<K> Clone for Lister<K> {
    fn clone(&self) -> Self {
        Self {
            indexer: self.indexer.clone(),
            resource: self.resource.clone(),
        }
    }
}

fn matches<K: Resource>(selector: &Selector, obj: &K) -> bool {
    if selector.selects_all() {
        return true;
    }
    let empty = Default::default();
    selector.matches(obj.meta().labels.as_ref().unwrap_or(&empty))
}

impl<K> Lister<K>
where
    K: Resource,
    K::DynamicType: Default,
{
    /// A lister over `indexer`, naming `K`'s resource in `NotFound` errors.
    pub fn new(indexer: Indexer<K>) -> Self {
        let dt = K::DynamicType::default();
        let group = K::group(&dt);
        let plural = K::plural(&dt);
        let resource = if group.is_empty() {
            plural.to_string()
        } else {
            format!("{plural}.{group}")
        };
        Self {
            indexer,
            resource: resource.into(),
        }
    }
}

impl<K: Resource> Lister<K> {
    /// Every cached object whose labels match `selector` (`Selector::default()` matches all).
    pub fn list(&self, selector: &Selector) -> Vec<Arc<K>> {
        let mut out = self.indexer.list();
        out.retain(|o| matches(selector, o.as_ref()));
        out
    }

    /// A cluster-scoped object by name.
    pub fn get(&self, name: &str) -> Result<Arc<K>, NotFound> {
        self.indexer.get_by_key(name).ok_or_else(|| NotFound {
            resource: self.resource.to_string(),
            name: name.to_owned(),
        })
    }

    /// The lister of one namespace.
    pub fn namespaced(&self, namespace: &str) -> NamespaceLister<K> {
        NamespaceLister {
            lister: self.clone(),
            namespace: namespace.to_owned(),
        }
    }
}

/// A [`Lister`] narrowed to one namespace.
pub struct NamespaceLister<K> {
    lister: Lister<K>,
    namespace: String,
}

impl<K: Resource> NamespaceLister<K> {
    /// Objects of this namespace whose labels match `selector`, found through the namespace
    /// index (no full scan).
    pub fn list(&self, selector: &Selector) -> Vec<Arc<K>> {
        let mut out = match self
            .lister
            .indexer
            .by_index(NAMESPACE_INDEX, &self.namespace)
        {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!(error = %e, "namespace index missing; scanning the whole cache");
                self.lister
                    .indexer
                    .list()
                    .into_iter()
                    .filter(|o| o.meta().namespace.as_deref() == Some(self.namespace.as_str()))
                    .collect()
            }
        };
        out.retain(|o| matches(selector, o.as_ref()));
        out
    }

    /// The object `name` in this namespace.
    pub fn get(&self, name: &str) -> Result<Arc<K>, NotFound> {
        self.lister
            .indexer
            .get_by_key(&format!("{}/{name}", self.namespace))
            .ok_or_else(|| NotFound {
                resource: self.lister.resource.to_string(),
                name: name.to_owned(),
            })
    }
}
