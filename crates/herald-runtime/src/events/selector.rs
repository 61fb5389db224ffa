//! client-go's `tools/events.GetFieldSelector`: the field selector that lists the events
//! about one object, in the vocabulary of the events API version being read.

use std::collections::BTreeMap;

/// The events API version given to [`field_selector`] is none of `events.k8s.io/v1`,
/// `events.k8s.io/v1beta1` or `v1` (core).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown version {0}")]
pub struct UnknownVersion(pub String);

/// The field selector terms that select the events about one object when reading events of
/// `events_group_version` (`events.k8s.io/v1` or `…/v1beta1`: `regarding.*`; core `v1`:
/// `involvedObject.*`). A term is added for each non-empty argument: `.name`, `.kind`,
/// `.apiVersion` (the object's group/version) and `.uid`.
///
/// ```
/// use herald_runtime::events::field_selector;
/// let terms = field_selector("events.k8s.io/v1", "apps/v1", "Deployment", "web", "").unwrap();
/// let text: Vec<String> = terms.iter().map(|(k, v)| format!("{k}={v}")).collect();
/// assert_eq!(text.join(","), "regarding.apiVersion=apps/v1,regarding.kind=Deployment,regarding.name=web");
/// assert!(field_selector("v1alpha1", "", "", "", "").is_err());
/// ```
pub fn field_selector(
    events_group_version: &str,
    regarding_api_version: &str,
    regarding_kind: &str,
    name: &str,
    uid: &str,
) -> Result<BTreeMap<String, String>, UnknownVersion> {
    let prefix = match events_group_version {
        "events.k8s.io/v1" | "events.k8s.io/v1beta1" => "regarding",
        "v1" => "involvedObject",
        other => return Err(UnknownVersion(other.to_string())),
    };
    let mut terms = BTreeMap::new();
    for (field, value) in [
        ("name", name),
        ("kind", regarding_kind),
        ("apiVersion", regarding_api_version),
        ("uid", uid),
    ] {
        if !value.is_empty() {
            terms.insert(format!("{prefix}.{field}"), value.to_string());
        }
    }
    Ok(terms)
}
