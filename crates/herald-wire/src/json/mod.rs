//! The exact JSON kube-apiserver writes for an event in each group.
//!
//! `k8s-openapi` drops absent fields, while Go writes a zero `Time`/`MicroTime` as `null`
//! even under `omitempty` (and writes empty structs as `{}`). Clients accept either, but
//! byte-level comparisons with a real cluster (and people reading `-o json`) see the
//! difference, so the server renders through these functions: canonical shape
//! ([`herald_core::event::convert`]), `apiVersion`/`kind` set, zero times as `null`.

pub mod write;

use serde_json::{Map, Value};

use herald_core::event::convert::{core_to_events_v1, normalize_core, normalize_events_v1};
use herald_core::event::{ApiGroup, CoreEvent, EventsV1Event};

/// How Go's zero `MicroTime` would be serialized by `k8s-openapi`; rendered as `null`, and
/// what a missing or `null` required `MicroTime` decodes to (Go's decoder leaves the zero
/// value, which validation then reports as `Required`).
pub const ZERO_MICRO: &str = "0001-01-01T00:00:00.000000Z";

/// The annotation of the bookmark that ends the initial events of a watch-list.
pub const INITIAL_EVENTS_END_ANNOTATION: &str = "k8s.io/initial-events-end";

fn object(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

fn null_if_absent(m: &mut Map<String, Value>, keys: &[&str]) {
    for k in keys {
        m.entry(k.to_string()).or_insert(Value::Null);
    }
}

fn with_type_meta(group: ApiGroup, body: Map<String, Value>) -> Value {
    let mut m = Map::with_capacity(body.len() + 2);
    m.insert("kind".into(), Value::String("Event".into()));
    m.insert(
        "apiVersion".into(),
        Value::String(group.api_version().into()),
    );
    m.extend(body);
    Value::Object(m)
}

/// The core/v1 JSON of a stored event, as `/api/v1` returns it: `involvedObject`, `source`,
/// `reportingComponent` and `reportingInstance` always present; `firstTimestamp`,
/// `lastTimestamp` and `eventTime` `null` when unset.
pub fn core_v1_json(event: &CoreEvent) -> Value {
    let norm = normalize_core(event.clone());
    let mut m = object(serde_json::to_value(&norm).unwrap_or(Value::Null));
    null_if_absent(&mut m, &["firstTimestamp", "lastTimestamp", "eventTime"]);
    if let Some(Value::Object(series)) = m.get_mut("series") {
        null_if_absent(series, &["lastObservedTime"]);
    }
    with_type_meta(ApiGroup::Core, m)
}

/// The `events.k8s.io/v1` JSON of a stored event, as `/apis/events.k8s.io/v1` returns it:
/// `regarding` and `deprecatedSource` always present; `eventTime`,
/// `deprecatedFirstTimestamp`, `deprecatedLastTimestamp` and a zero
/// `series.lastObservedTime` as `null`.
pub fn events_v1_json(event: &CoreEvent) -> Value {
    events_v1_json_of(&core_to_events_v1(event.clone()))
}

/// [`events_v1_json`] for an event already in the `events.k8s.io/v1` shape.
pub fn events_v1_json_of(event: &EventsV1Event) -> Value {
    let norm = normalize_events_v1(event.clone());
    let mut m = object(serde_json::to_value(&norm).unwrap_or(Value::Null));
    null_if_absent(
        &mut m,
        &[
            "eventTime",
            "deprecatedFirstTimestamp",
            "deprecatedLastTimestamp",
        ],
    );
    if let Some(Value::Object(series)) = m.get_mut("series")
        && series.get("lastObservedTime").and_then(Value::as_str) == Some(ZERO_MICRO)
    {
        series.insert("lastObservedTime".into(), Value::Null);
    }
    with_type_meta(ApiGroup::EventsV1, m)
}

/// The JSON of a stored event in `group`'s shape.
pub fn event_json(group: ApiGroup, event: &CoreEvent) -> Value {
    match group {
        ApiGroup::Core => core_v1_json(event),
        ApiGroup::EventsV1 => events_v1_json(event),
    }
}

/// Appends the `events.k8s.io/v1` JSON of a stored event as a list item: the bytes
/// [`events_v1_json`] renders, less `kind` and `apiVersion` (list items carry neither), with
/// keys in the same (sorted) order, written straight from the event instead of through a
/// `Value` tree, which cost a 100,000-event list most of its second. Takes the event by
/// value: a list owns the events it decodes.
pub fn write_events_v1_item(out: &mut Vec<u8>, event: CoreEvent) -> serde_json::Result<()> {
    let e = normalize_events_v1(core_to_events_v1(event));
    serde_json::to_writer(
        out,
        &V1Item {
            event: &e,
            type_meta: false,
        },
    )
}

/// Appends the `events.k8s.io/v1` JSON of a stored event as an object of its own (a GET or
/// a write's answer): exactly the bytes of [`events_v1_json`], without building a `Value`.
pub fn write_events_v1_object(out: &mut Vec<u8>, event: CoreEvent) -> serde_json::Result<()> {
    let e = normalize_events_v1(core_to_events_v1(event));
    serde_json::to_writer(
        out,
        &V1Item {
            event: &e,
            type_meta: true,
        },
    )
}

/// An `events.k8s.io/v1` event as [`events_v1_json_of`] writes it, keys sorted: `k8s-openapi`
/// writes each nested object's fields in sorted order already, and `fieldsV1` and maps are
/// sorted maps. `kind` and `apiVersion` take their sorted places when `type_meta` is set.
struct V1Item<'a> {
    event: &'a EventsV1Event,
    type_meta: bool,
}

impl serde::Serialize for V1Item<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        let e = self.event;
        let mut m = s.serialize_map(None)?;
        if let Some(v) = &e.action {
            m.serialize_entry("action", v)?;
        }
        if self.type_meta {
            m.serialize_entry("apiVersion", ApiGroup::EventsV1.api_version())?;
        }
        if let Some(v) = &e.deprecated_count {
            m.serialize_entry("deprecatedCount", v)?;
        }
        // These three are `null` when unset, as Go writes a zero time.
        m.serialize_entry("deprecatedFirstTimestamp", &e.deprecated_first_timestamp)?;
        m.serialize_entry("deprecatedLastTimestamp", &e.deprecated_last_timestamp)?;
        if let Some(v) = &e.deprecated_source {
            m.serialize_entry("deprecatedSource", v)?;
        }
        m.serialize_entry("eventTime", &e.event_time)?;
        if self.type_meta {
            m.serialize_entry("kind", "Event")?;
        }
        m.serialize_entry("metadata", &e.metadata)?;
        if let Some(v) = &e.note {
            m.serialize_entry("note", v)?;
        }
        if let Some(v) = &e.reason {
            m.serialize_entry("reason", v)?;
        }
        if let Some(v) = &e.regarding {
            m.serialize_entry("regarding", v)?;
        }
        if let Some(v) = &e.related {
            m.serialize_entry("related", v)?;
        }
        if let Some(v) = &e.reporting_controller {
            m.serialize_entry("reportingController", v)?;
        }
        if let Some(v) = &e.reporting_instance {
            m.serialize_entry("reportingInstance", v)?;
        }
        if let Some(series) = &e.series {
            m.serialize_entry("series", &V1Series(series))?;
        }
        if let Some(v) = &e.type_ {
            m.serialize_entry("type", v)?;
        }
        m.end()
    }
}

/// A series, with Go's zero `lastObservedTime` as `null`.
struct V1Series<'a>(&'a k8s_openapi::api::events::v1::EventSeries);

impl serde::Serialize for V1Series<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        let last = serde_json::to_value(&self.0.last_observed_time).unwrap_or(Value::Null);
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("count", &self.0.count)?;
        if last.as_str() == Some(ZERO_MICRO) {
            m.serialize_entry("lastObservedTime", &Value::Null)?;
        } else {
            m.serialize_entry("lastObservedTime", &last)?;
        }
        m.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The direct writer and the `Value` path agree byte for byte on events with every
    /// optional part present, absent and zero.
    #[test]
    fn events_v1_items_are_written_as_the_value_path_renders_them() {
        let full: CoreEvent = serde_json::from_value(json!({
            "metadata": {
                "name": "a.1", "namespace": "ns", "uid": "u-1", "resourceVersion": "7",
                "creationTimestamp": "2026-11-21T23:59:00Z", "generateName": "a.",
                "labels": {"z": "1", "a": "2"}, "annotations": {"k": "v"},
                "finalizers": ["f"], "deletionTimestamp": "2026-11-22T00:00:00Z",
                "deletionGracePeriodSeconds": 0,
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u",
                    "controller": true, "blockOwnerDeletion": false}],
                "managedFields": [{"manager": "m", "operation": "Apply", "apiVersion": "v1",
                    "time": "2026-11-21T23:59:00Z", "fieldsType": "FieldsV1", "subresource": "s",
                    "fieldsV1": {"f:reason": {}, "f:metadata": {"f:labels": {".": {}}}}}],
            },
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": "ns", "uid": "u",
                "apiVersion": "v1", "resourceVersion": "3", "fieldPath": "spec.containers{a}"},
            "related": {"kind": "Node", "name": "n"},
            "reason": "BackOff", "message": "m \"quoted\" \u{e9}", "count": 4, "action": "Act",
            "firstTimestamp": "2026-11-21T23:59:00Z", "lastTimestamp": "2026-11-21T23:59:30Z",
            "eventTime": "2026-11-21T23:59:00.123456Z",
            "series": {"count": 2, "lastObservedTime": "2026-11-21T23:59:30.654321Z"},
            "source": {"component": "kubelet", "host": "node-1"}, "type": "Warning",
            "reportingComponent": "kubelet", "reportingInstance": "node-1",
        }))
        .unwrap();
        let zero_series: CoreEvent = serde_json::from_value(json!({
            "metadata": {"name": "b.1"},
            "involvedObject": {},
            "series": {"count": 1, "lastObservedTime": ZERO_MICRO},
        }))
        .unwrap();
        for e in [full, zero_series, CoreEvent::default()] {
            let mut object = Vec::new();
            write_events_v1_object(&mut object, e.clone()).unwrap();
            assert_eq!(
                String::from_utf8(object).unwrap(),
                serde_json::to_string(&events_v1_json(&e)).unwrap()
            );
            let mut want = events_v1_json(&e);
            if let Some(m) = want.as_object_mut() {
                m.remove("kind");
                m.remove("apiVersion");
            }
            let mut got = Vec::new();
            write_events_v1_item(&mut got, e).unwrap();
            assert_eq!(
                String::from_utf8(got).unwrap(),
                serde_json::to_string(&want).unwrap()
            );
        }
    }
}
