//! The exact JSON kube-apiserver writes for an event in each group.
//!
//! `k8s-openapi` drops absent fields, while Go writes a zero `Time`/`MicroTime` as `null`
//! even under `omitempty` (and writes empty structs as `{}`). Clients accept either, but
//! byte-level comparisons with a real cluster (and people reading `-o json`) see the
//! difference, so the server renders through these functions: canonical shape
//! ([`super::convert`]), `apiVersion`/`kind` set, zero times as `null`.

use serde_json::{Map, Value};

use super::convert::{core_to_events_v1, normalize_core, normalize_events_v1};
use super::{ApiGroup, CoreEvent, EventsV1Event};

/// How Go's zero `MicroTime` would be serialized by `k8s-openapi`; rendered as `null`, and
/// what a missing or `null` required `MicroTime` decodes to (Go's decoder leaves the zero
/// value, which validation then reports as `Required`).
pub const ZERO_MICRO: &str = "0001-01-01T00:00:00.000000Z";

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
