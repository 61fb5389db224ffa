//! Building core/v1 events: object references, event types and sources, and `make_event`.

use std::collections::BTreeMap;

use herald_core::naming::{event_name, event_namespace};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Event, EventSource as CoreEventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::Resource;

/// The type of an event. Kubernetes accepts exactly these two.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    /// Something expected happened.
    Normal,
    /// Something may need attention.
    Warning,
}

impl EventType {
    /// The wire string (`Normal`, `Warning`).
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }

    /// Parses the exact (case-sensitive) wire string, like client-go's `ValidateEventType`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "Normal" => Some(EventType::Normal),
            "Warning" => Some(EventType::Warning),
            _ => None,
        }
    }
}

impl std::fmt::Display for EventType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who reports events: the component (controller name) and the host (instance) it runs on.
/// Also fills `reportingComponent` and `reportingInstance`, as client-go does since 2023.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventSource {
    /// `source.component`, e.g. `my-controller`.
    pub component: String,
    /// `source.host`, e.g. the node or pod name; may be empty.
    pub host: String,
}

impl EventSource {
    /// A source for `component` running on `host`.
    pub fn new(component: impl Into<String>, host: impl Into<String>) -> Self {
        Self {
            component: component.into(),
            host: host.into(),
        }
    }
}

/// A reference to `obj` as an event's `involvedObject`: kind, apiVersion, namespace, name,
/// uid and resourceVersion from the object, `fieldPath` as given.
pub fn object_reference<K>(obj: &K, field_path: Option<&str>) -> ObjectReference
where
    K: Resource,
    K::DynamicType: Default,
{
    let mut r = obj.object_ref(&K::DynamicType::default());
    // client-go puts the object's resourceVersion in the reference; kube's object_ref does not.
    r.resource_version.clone_from(&obj.meta().resource_version);
    r.field_path = field_path.map(str::to_string);
    r
}

/// Everything the recorder needs to build one event.
#[derive(Debug, Clone)]
pub(crate) struct EventSpec<'a> {
    pub reference: ObjectReference,
    pub type_: &'a str,
    pub reason: &'a str,
    pub message: String,
    pub annotations: Option<BTreeMap<String, String>>,
}

/// The metadata of a new event about `reference` (both recorders): namespace from the
/// reference (or `default`), name `<object>.<hex name_nanos>` (a UUID when that is not a
/// valid name), and `annotations`.
pub(crate) fn new_event_meta(
    reference: &ObjectReference,
    annotations: Option<BTreeMap<String, String>>,
    t: Timestamp,
    name_nanos: i128,
) -> ObjectMeta {
    let namespace = event_namespace(reference.namespace.as_deref()).to_string();
    let stamp = Timestamp::from_nanosecond(name_nanos).unwrap_or(t);
    ObjectMeta {
        name: Some(event_name(reference.name.as_deref().unwrap_or(""), stamp)),
        namespace: Some(namespace),
        annotations,
        ..ObjectMeta::default()
    }
}

/// Builds the event client-go's `makeEvent` builds, at time `t` (one clock read per event):
/// namespace from the reference (or `default`), name `<object>.<hex name_nanos>` (UUID when
/// that is not a valid name), count 1, first = last timestamp = `t`. `name_nanos` is `t` in
/// nanoseconds unless that was already used (see the recorder).
pub(crate) fn make_event(
    spec: EventSpec<'_>,
    source: &EventSource,
    t: Timestamp,
    name_nanos: i128,
) -> Event {
    Event {
        metadata: new_event_meta(&spec.reference, spec.annotations, t, name_nanos),
        involved_object: spec.reference,
        reason: Some(spec.reason.to_string()),
        message: Some(spec.message),
        type_: Some(spec.type_.to_string()),
        first_timestamp: Some(Time(t)),
        last_timestamp: Some(Time(t)),
        count: Some(1),
        source: Some(CoreEventSource {
            component: non_empty(&source.component),
            host: non_empty(&source.host),
        }),
        reporting_component: Some(source.component.clone()),
        reporting_instance: Some(source.host.clone()),
        ..Event::default()
    }
}

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

/// `namespace/name` of the involved object (just `name` when it has no namespace), the way
/// kubectl and client-go's structured log show it.
pub(crate) fn object_key(r: &ObjectReference) -> String {
    match (r.namespace.as_deref(), r.name.as_deref().unwrap_or("")) {
        (Some(ns), name) if !ns.is_empty() => format!("{ns}/{name}"),
        (_, name) => name.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;

    fn pod(ns: Option<&str>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("foo".into()),
                namespace: ns.map(str::to_string),
                uid: Some("bar".into()),
                resource_version: Some("7".into()),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        }
    }

    #[test]
    fn reference_from_a_typed_object() {
        let r = object_reference(&pod(Some("baz")), Some("spec.containers[2]"));
        assert_eq!(r.kind.as_deref(), Some("Pod"));
        assert_eq!(r.api_version.as_deref(), Some("v1"));
        assert_eq!(r.namespace.as_deref(), Some("baz"));
        assert_eq!(r.name.as_deref(), Some("foo"));
        assert_eq!(r.uid.as_deref(), Some("bar"));
        assert_eq!(r.resource_version.as_deref(), Some("7"));
        assert_eq!(r.field_path.as_deref(), Some("spec.containers[2]"));
        assert_eq!(object_key(&r), "baz/foo");
    }

    #[test]
    fn make_event_defaults_namespace_and_names() {
        let t: Timestamp = "2023-01-01T12:00:00Z".parse().unwrap();
        let spec = EventSpec {
            reference: object_reference(&pod(None), None),
            type_: "Normal",
            reason: "Started",
            message: "m".into(),
            annotations: None,
        };
        let e = make_event(spec, &EventSource::new("c1", "i1"), t, t.as_nanosecond());
        assert_eq!(e.metadata.namespace.as_deref(), Some("default"));
        assert_eq!(e.metadata.name.as_deref(), Some("foo.17362d8e1c698000"));
        assert_eq!(e.count, Some(1));
        assert_eq!(e.first_timestamp, e.last_timestamp);
        assert_eq!(e.reporting_component.as_deref(), Some("c1"));
        assert_eq!(e.reporting_instance.as_deref(), Some("i1"));
        assert_eq!(object_key(&e.involved_object), "foo");
    }

    #[test]
    fn only_normal_and_warning() {
        assert_eq!(EventType::parse("Normal"), Some(EventType::Normal));
        assert_eq!(EventType::parse("Warning"), Some(EventType::Warning));
        assert_eq!(EventType::parse("warning"), None);
        assert_eq!(EventType::parse("Error"), None);
    }
}
