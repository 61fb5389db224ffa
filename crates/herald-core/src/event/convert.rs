//! Conversion between the core/v1 and `events.k8s.io/v1` shapes of one stored event.
//!
//! kube-apiserver converts both versions through an internal Go type whose strings, counts
//! and times have no "absent" state: `""`, `0` and the zero time all mean "unset". The JSON it
//! then writes follows each version's tags: some fields are dropped when empty, some are
//! always written (`reportingComponent`, `reportingInstance` and the `source` /
//! `deprecatedSource` and `involvedObject` / `regarding` structs), zero times are `null`.
//!
//! The conversions here produce the *canonical* value of the target shape: what
//! kube-apiserver would send back, expressed in `k8s-openapi` types (a zero time is `None`,
//! an omitted empty string is `None`, an always-written empty string is `Some("")`). Nothing
//! is synthesised: a legacy event without `eventTime` converts to an `events.k8s.io/v1`
//! event whose `eventTime` is `None`.
//!
//! Round trips are exact on canonical values and otherwise equal the canonical form:
//! `events_v1_to_core(core_to_events_v1(e)) == normalize_core(e)` and
//! `core_to_events_v1(events_v1_to_core(e)) == normalize_events_v1(e)`.
//!
//! One shape cannot be expressed: `events.k8s.io/v1` `series.lastObservedTime` is a required
//! field in `k8s-openapi`, so a series without one (possible only through core/v1, which does
//! not validate it) carries [`GO_ZERO_TIME`], which every function here reads as "unset".

use k8s_openapi::api::core::v1::{EventSeries as CoreSeries, EventSource, ObjectReference};
use k8s_openapi::api::events::v1::EventSeries as V1Series;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
use k8s_openapi::jiff::Timestamp;

use super::{CoreEvent, EventsV1Event};

/// Go's zero `time.Time` (`0001-01-01T00:00:00Z`): an unset timestamp.
pub const GO_ZERO_TIME: Timestamp = Timestamp::constant(-62_135_596_800, 0);

/// True when `t` is Go's zero time, i.e. the timestamp is unset.
pub fn is_zero_time(t: Timestamp) -> bool {
    t == GO_ZERO_TIME
}

/// True when a `Time` is absent or zero.
pub fn time_is_unset(t: Option<&Time>) -> bool {
    t.is_none_or(|t| is_zero_time(t.0))
}

/// True when a `MicroTime` is absent or zero.
pub fn micro_time_is_unset(t: Option<&MicroTime>) -> bool {
    t.is_none_or(|t| is_zero_time(t.0))
}

fn nonempty(s: Option<String>) -> Option<String> {
    s.filter(|s| !s.is_empty())
}

fn always(s: Option<String>) -> Option<String> {
    Some(s.unwrap_or_default())
}

fn nonzero(n: Option<i32>) -> Option<i32> {
    n.filter(|n| *n != 0)
}

fn time(t: Option<Time>) -> Option<Time> {
    t.filter(|t| !is_zero_time(t.0))
}

fn micro(t: Option<MicroTime>) -> Option<MicroTime> {
    t.filter(|t| !is_zero_time(t.0))
}

/// An object reference with every empty string dropped (all its fields are `omitempty`).
pub fn normalize_reference(r: ObjectReference) -> ObjectReference {
    ObjectReference {
        api_version: nonempty(r.api_version),
        field_path: nonempty(r.field_path),
        kind: nonempty(r.kind),
        name: nonempty(r.name),
        namespace: nonempty(r.namespace),
        resource_version: nonempty(r.resource_version),
        uid: nonempty(r.uid),
    }
}

fn normalize_source(s: Option<EventSource>) -> Option<EventSource> {
    let s = s.unwrap_or_default();
    Some(EventSource {
        component: nonempty(s.component),
        host: nonempty(s.host),
    })
}

fn core_series(s: CoreSeries) -> CoreSeries {
    CoreSeries {
        count: nonzero(s.count),
        last_observed_time: micro(s.last_observed_time),
    }
}

/// The canonical core/v1 form of `e`: what kube-apiserver returns on `/api/v1` after storing
/// it (empty strings, zero counts and zero times unset; `reportingComponent`,
/// `reportingInstance` and `source` always present). `metadata` is left untouched.
pub fn normalize_core(e: CoreEvent) -> CoreEvent {
    CoreEvent {
        action: nonempty(e.action),
        count: nonzero(e.count),
        event_time: micro(e.event_time),
        first_timestamp: time(e.first_timestamp),
        involved_object: normalize_reference(e.involved_object),
        last_timestamp: time(e.last_timestamp),
        message: nonempty(e.message),
        metadata: e.metadata,
        reason: nonempty(e.reason),
        related: e.related.map(normalize_reference),
        reporting_component: always(e.reporting_component),
        reporting_instance: always(e.reporting_instance),
        series: e.series.map(core_series),
        source: normalize_source(e.source),
        type_: nonempty(e.type_),
    }
}

/// The canonical `events.k8s.io/v1` form of `e`: what kube-apiserver returns on that group
/// (empty strings, zero counts and zero times unset; `regarding` and `deprecatedSource`
/// always present). `metadata` is left untouched.
pub fn normalize_events_v1(e: EventsV1Event) -> EventsV1Event {
    EventsV1Event {
        action: nonempty(e.action),
        deprecated_count: nonzero(e.deprecated_count),
        deprecated_first_timestamp: time(e.deprecated_first_timestamp),
        deprecated_last_timestamp: time(e.deprecated_last_timestamp),
        deprecated_source: normalize_source(e.deprecated_source),
        event_time: micro(e.event_time),
        metadata: e.metadata,
        note: nonempty(e.note),
        reason: nonempty(e.reason),
        regarding: Some(normalize_reference(e.regarding.unwrap_or_default())),
        related: e.related.map(normalize_reference),
        reporting_controller: nonempty(e.reporting_controller),
        reporting_instance: nonempty(e.reporting_instance),
        series: e.series,
        type_: nonempty(e.type_),
    }
}

/// Converts a stored (core/v1) event to its canonical `events.k8s.io/v1` shape:
/// `involvedObject`→`regarding`, `message`→`note`, `source`→`deprecatedSource`,
/// `firstTimestamp`/`lastTimestamp`/`count`→`deprecated*`, `reportingComponent`→
/// `reportingController`; `series`, `eventTime`, `action`, `reason`, `related`,
/// `reportingInstance`, `type` and `metadata` keep their names.
pub fn core_to_events_v1(e: CoreEvent) -> EventsV1Event {
    EventsV1Event {
        action: nonempty(e.action),
        deprecated_count: nonzero(e.count),
        deprecated_first_timestamp: time(e.first_timestamp),
        deprecated_last_timestamp: time(e.last_timestamp),
        deprecated_source: normalize_source(e.source),
        event_time: micro(e.event_time),
        metadata: e.metadata,
        note: nonempty(e.message),
        reason: nonempty(e.reason),
        regarding: Some(normalize_reference(e.involved_object)),
        related: e.related.map(normalize_reference),
        reporting_controller: nonempty(e.reporting_component),
        reporting_instance: nonempty(e.reporting_instance),
        series: e.series.map(|s| V1Series {
            count: s.count.unwrap_or(0),
            last_observed_time: micro(s.last_observed_time).unwrap_or(MicroTime(GO_ZERO_TIME)),
        }),
        type_: nonempty(e.type_),
    }
}

/// Converts an `events.k8s.io/v1` event to the canonical core/v1 (storage) shape; the inverse
/// of [`core_to_events_v1`].
pub fn events_v1_to_core(e: EventsV1Event) -> CoreEvent {
    CoreEvent {
        action: nonempty(e.action),
        count: nonzero(e.deprecated_count),
        event_time: micro(e.event_time),
        first_timestamp: time(e.deprecated_first_timestamp),
        involved_object: normalize_reference(e.regarding.unwrap_or_default()),
        last_timestamp: time(e.deprecated_last_timestamp),
        message: nonempty(e.note),
        metadata: e.metadata,
        reason: nonempty(e.reason),
        related: e.related.map(normalize_reference),
        reporting_component: always(e.reporting_controller),
        reporting_instance: always(e.reporting_instance),
        series: e.series.map(|s| {
            core_series(CoreSeries {
                count: Some(s.count),
                last_observed_time: Some(s.last_observed_time),
            })
        }),
        source: normalize_source(e.deprecated_source),
        type_: nonempty(e.type_),
    }
}
