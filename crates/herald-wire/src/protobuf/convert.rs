//! Field-by-field conversion between the `k8s-openapi` types Herald works in and the
//! `k8s-pb` (prost) messages of Kubernetes' protobuf encoding, for the types the events API
//! exchanges: `Event` in both groups, `ObjectMeta`, `ListMeta`, `Status` and
//! `DeleteOptions`.
//!
//! Times follow `k8s.io/apimachinery`'s `Time.Marshal`: Go's zero time is an empty message,
//! and an empty message (no `seconds`) reads back as "unset".
//!
//! Decoding reads a message as Go does: gogo-protobuf writes every non-pointer field, empty
//! strings and zero counts included, and Go's JSON leaves the `omitempty` ones out. So an
//! empty string or zero count in such a field is absent here, and the event stores and
//! renders as the same event sent as JSON would. Pointer fields (`deletionGracePeriodSeconds`,
//! `series`, `related`, everything in `DeleteOptions`) keep their presence.

use herald_core::event::convert::{GO_ZERO_TIME, is_zero_time};
use k8s_openapi::api::core::v1 as oc;
use k8s_openapi::api::events::v1 as oe;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as om;
use k8s_openapi::jiff::Timestamp;
use k8s_pb::api::core::v1 as pc;
use k8s_pb::api::events::v1 as pe;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as pm;

/// Go's `Unix()` seconds (floored) and the nanoseconds past them (never negative); jiff
/// counts a time before 1970 toward zero, with negative nanoseconds.
fn stamp_to_pb(t: Timestamp) -> (Option<i64>, Option<i32>) {
    if is_zero_time(t) {
        return (None, None);
    }
    let (seconds, nanos) = (t.as_second(), t.subsec_nanosecond());
    if nanos < 0 {
        (Some(seconds - 1), Some(nanos + 1_000_000_000))
    } else {
        (Some(seconds), Some(nanos))
    }
}

/// An empty message is Go's zero time (unset); any field present makes it a time, the absent
/// one 0, as Go's `time.Unix(seconds, nanos)` reads it.
fn stamp_from_pb(seconds: Option<i64>, nanos: Option<i32>) -> Option<Timestamp> {
    if seconds.is_none() && nanos.is_none() {
        return None;
    }
    // An out-of-range time from a client cannot be stored; it reads as unset, as a zero
    // time does.
    Timestamp::new(seconds.unwrap_or(0), nanos.unwrap_or(0)).ok()
}

/// `Time` is whole seconds on the wire: Go writes `nanos` as 0 and ignores it when reading.
/// The seconds are floored, as the JSON text keeps them, so a time within a second after
/// Go's zero time is that zero time (an empty message), as its text reads back.
fn time_to_pb(t: om::Time) -> pm::Time {
    match stamp_to_pb(t.0) {
        (Some(seconds), _) if seconds != GO_ZERO_TIME.as_second() => pm::Time {
            seconds: Some(seconds),
            nanos: Some(0),
        },
        _ => pm::Time::default(),
    }
}

fn time_from_pb(t: pm::Time) -> Option<om::Time> {
    stamp_from_pb(t.seconds, t.nanos.map(|_| 0)).map(om::Time)
}

fn micro_to_pb(t: om::MicroTime) -> pm::MicroTime {
    let (seconds, nanos) = stamp_to_pb(t.0);
    pm::MicroTime { seconds, nanos }
}

fn micro_from_pb(t: pm::MicroTime) -> Option<om::MicroTime> {
    stamp_from_pb(t.seconds, t.nanos).map(om::MicroTime)
}

/// A string of a Go field tagged `omitempty`: gogo-protobuf writes such fields even when
/// empty, and Go's JSON then leaves them out, so an empty one is absent.
fn omit_empty(s: Option<String>) -> Option<String> {
    s.filter(|s| !s.is_empty())
}

/// An integer of a Go field tagged `omitempty` (see [`omit_empty`]).
fn omit_zero<T: Default + PartialEq>(n: Option<T>) -> Option<T> {
    n.filter(|n| *n != T::default())
}

fn non_empty<T>(v: Vec<T>) -> Option<Vec<T>> {
    (!v.is_empty()).then_some(v)
}

fn non_empty_map(
    m: std::collections::BTreeMap<String, String>,
) -> Option<std::collections::BTreeMap<String, String>> {
    (!m.is_empty()).then_some(m)
}

pub(super) fn object_meta_to_pb(m: om::ObjectMeta) -> pm::ObjectMeta {
    pm::ObjectMeta {
        name: m.name,
        generate_name: m.generate_name,
        namespace: m.namespace,
        self_link: m.self_link,
        uid: m.uid,
        resource_version: m.resource_version,
        generation: m.generation,
        creation_timestamp: m.creation_timestamp.map(time_to_pb),
        deletion_timestamp: m.deletion_timestamp.map(time_to_pb),
        deletion_grace_period_seconds: m.deletion_grace_period_seconds,
        labels: m.labels.unwrap_or_default(),
        annotations: m.annotations.unwrap_or_default(),
        owner_references: m
            .owner_references
            .unwrap_or_default()
            .into_iter()
            .map(|o| pm::OwnerReference {
                api_version: Some(o.api_version),
                kind: Some(o.kind),
                name: Some(o.name),
                uid: Some(o.uid),
                controller: o.controller,
                block_owner_deletion: o.block_owner_deletion,
            })
            .collect(),
        finalizers: m.finalizers.unwrap_or_default(),
        managed_fields: m
            .managed_fields
            .unwrap_or_default()
            .into_iter()
            .map(|f| pm::ManagedFieldsEntry {
                manager: f.manager,
                operation: f.operation,
                api_version: f.api_version,
                time: f.time.map(time_to_pb),
                fields_type: f.fields_type,
                fields_v1: f.fields_v1.map(|v| pm::FieldsV1 {
                    raw: serde_json::to_vec(&v.0).ok(),
                }),
                subresource: f.subresource,
            })
            .collect(),
    }
}

pub(super) fn object_meta_from_pb(m: pm::ObjectMeta) -> om::ObjectMeta {
    om::ObjectMeta {
        name: omit_empty(m.name),
        generate_name: omit_empty(m.generate_name),
        namespace: omit_empty(m.namespace),
        self_link: omit_empty(m.self_link),
        uid: omit_empty(m.uid),
        resource_version: omit_empty(m.resource_version),
        generation: omit_zero(m.generation),
        creation_timestamp: m.creation_timestamp.and_then(time_from_pb),
        deletion_timestamp: m.deletion_timestamp.and_then(time_from_pb),
        deletion_grace_period_seconds: m.deletion_grace_period_seconds,
        labels: non_empty_map(m.labels),
        annotations: non_empty_map(m.annotations),
        owner_references: non_empty(
            m.owner_references
                .into_iter()
                .map(|o| om::OwnerReference {
                    api_version: o.api_version.unwrap_or_default(),
                    kind: o.kind.unwrap_or_default(),
                    name: o.name.unwrap_or_default(),
                    uid: o.uid.unwrap_or_default(),
                    controller: o.controller,
                    block_owner_deletion: o.block_owner_deletion,
                })
                .collect(),
        ),
        finalizers: non_empty(m.finalizers),
        managed_fields: non_empty(
            m.managed_fields
                .into_iter()
                .map(|f| om::ManagedFieldsEntry {
                    manager: omit_empty(f.manager),
                    operation: omit_empty(f.operation),
                    api_version: omit_empty(f.api_version),
                    time: f.time.and_then(time_from_pb),
                    fields_type: omit_empty(f.fields_type),
                    // Raw bytes that are not JSON are dropped: the entry keeps its manager.
                    fields_v1: f
                        .fields_v1
                        .and_then(|v| v.raw)
                        .and_then(|raw| serde_json::from_slice(&raw).ok())
                        .map(om::FieldsV1),
                    subresource: omit_empty(f.subresource),
                })
                .collect(),
        ),
    }
}

fn reference_to_pb(r: oc::ObjectReference) -> pc::ObjectReference {
    pc::ObjectReference {
        kind: r.kind,
        namespace: r.namespace,
        name: r.name,
        uid: r.uid,
        api_version: r.api_version,
        resource_version: r.resource_version,
        field_path: r.field_path,
    }
}

fn reference_from_pb(r: pc::ObjectReference) -> oc::ObjectReference {
    oc::ObjectReference {
        kind: omit_empty(r.kind),
        namespace: omit_empty(r.namespace),
        name: omit_empty(r.name),
        uid: omit_empty(r.uid),
        api_version: omit_empty(r.api_version),
        resource_version: omit_empty(r.resource_version),
        field_path: omit_empty(r.field_path),
    }
}

fn source_to_pb(s: oc::EventSource) -> pc::EventSource {
    pc::EventSource {
        component: s.component,
        host: s.host,
    }
}

fn source_from_pb(s: pc::EventSource) -> oc::EventSource {
    oc::EventSource {
        component: omit_empty(s.component),
        host: omit_empty(s.host),
    }
}

/// A core/v1 `Event` as its protobuf message.
pub(super) fn core_event_to_pb(e: oc::Event) -> pc::Event {
    pc::Event {
        metadata: Some(object_meta_to_pb(e.metadata)),
        involved_object: Some(reference_to_pb(e.involved_object)),
        reason: e.reason,
        message: e.message,
        source: e.source.map(source_to_pb),
        first_timestamp: e.first_timestamp.map(time_to_pb),
        last_timestamp: e.last_timestamp.map(time_to_pb),
        count: e.count,
        r#type: e.type_,
        event_time: e.event_time.map(micro_to_pb),
        series: e.series.map(|s| pc::EventSeries {
            count: s.count,
            last_observed_time: s.last_observed_time.map(micro_to_pb),
        }),
        action: e.action,
        related: e.related.map(reference_to_pb),
        reporting_component: e.reporting_component,
        reporting_instance: e.reporting_instance,
    }
}

/// A core/v1 `Event` from its protobuf message.
pub(super) fn core_event_from_pb(e: pc::Event) -> oc::Event {
    oc::Event {
        metadata: e.metadata.map(object_meta_from_pb).unwrap_or_default(),
        involved_object: e.involved_object.map(reference_from_pb).unwrap_or_default(),
        reason: omit_empty(e.reason),
        message: omit_empty(e.message),
        source: e.source.map(source_from_pb),
        first_timestamp: e.first_timestamp.and_then(time_from_pb),
        last_timestamp: e.last_timestamp.and_then(time_from_pb),
        count: omit_zero(e.count),
        type_: omit_empty(e.r#type),
        event_time: e.event_time.and_then(micro_from_pb),
        series: e.series.map(|s| oc::EventSeries {
            count: omit_zero(s.count),
            last_observed_time: s.last_observed_time.and_then(micro_from_pb),
        }),
        action: omit_empty(e.action),
        related: e.related.map(reference_from_pb),
        reporting_component: e.reporting_component,
        reporting_instance: e.reporting_instance,
    }
}

/// An `events.k8s.io/v1` `Event` as its protobuf message.
pub(super) fn events_event_to_pb(e: oe::Event) -> pe::Event {
    pe::Event {
        metadata: Some(object_meta_to_pb(e.metadata)),
        event_time: e.event_time.map(micro_to_pb),
        series: e.series.map(|s| pe::EventSeries {
            count: Some(s.count),
            last_observed_time: Some(micro_to_pb(s.last_observed_time)),
        }),
        reporting_controller: e.reporting_controller,
        reporting_instance: e.reporting_instance,
        action: e.action,
        reason: e.reason,
        regarding: e.regarding.map(reference_to_pb),
        related: e.related.map(reference_to_pb),
        note: e.note,
        r#type: e.type_,
        deprecated_source: e.deprecated_source.map(source_to_pb),
        deprecated_first_timestamp: e.deprecated_first_timestamp.map(time_to_pb),
        deprecated_last_timestamp: e.deprecated_last_timestamp.map(time_to_pb),
        deprecated_count: e.deprecated_count,
    }
}

/// An `events.k8s.io/v1` `Event` from its protobuf message. A series without a count or a
/// last-observed time gets Go's zero values, as kube-apiserver's decoder gives it, and
/// validation then names the field.
pub(super) fn events_event_from_pb(e: pe::Event) -> oe::Event {
    oe::Event {
        metadata: e.metadata.map(object_meta_from_pb).unwrap_or_default(),
        event_time: e.event_time.and_then(micro_from_pb),
        series: e.series.map(|s| oe::EventSeries {
            count: s.count.unwrap_or(0),
            last_observed_time: s
                .last_observed_time
                .and_then(micro_from_pb)
                .unwrap_or(om::MicroTime(GO_ZERO_TIME)),
        }),
        reporting_controller: omit_empty(e.reporting_controller),
        reporting_instance: omit_empty(e.reporting_instance),
        action: omit_empty(e.action),
        reason: omit_empty(e.reason),
        regarding: e.regarding.map(reference_from_pb),
        related: e.related.map(reference_from_pb),
        note: omit_empty(e.note),
        type_: omit_empty(e.r#type),
        deprecated_source: e.deprecated_source.map(source_from_pb),
        deprecated_first_timestamp: e.deprecated_first_timestamp.and_then(time_from_pb),
        deprecated_last_timestamp: e.deprecated_last_timestamp.and_then(time_from_pb),
        deprecated_count: omit_zero(e.deprecated_count),
    }
}

pub(super) fn list_meta_to_pb(m: om::ListMeta) -> pm::ListMeta {
    pm::ListMeta {
        self_link: m.self_link,
        resource_version: m.resource_version,
        r#continue: m.continue_,
        remaining_item_count: m.remaining_item_count,
    }
}

/// A `Status` as its protobuf message.
pub(super) fn status_to_pb(s: om::Status) -> pm::Status {
    pm::Status {
        metadata: Some(list_meta_to_pb(s.metadata)),
        status: s.status,
        message: s.message,
        reason: s.reason,
        details: s.details.map(|d| pm::StatusDetails {
            name: d.name,
            group: d.group,
            kind: d.kind,
            uid: d.uid,
            causes: d
                .causes
                .unwrap_or_default()
                .into_iter()
                .map(|c| pm::StatusCause {
                    reason: c.reason,
                    message: c.message,
                    field: c.field,
                })
                .collect(),
            retry_after_seconds: d.retry_after_seconds,
        }),
        code: s.code,
    }
}

/// `DeleteOptions` from its protobuf message.
pub(super) fn delete_options_from_pb(d: pm::DeleteOptions) -> om::DeleteOptions {
    om::DeleteOptions {
        grace_period_seconds: d.grace_period_seconds,
        preconditions: d.preconditions.map(|p| om::Preconditions {
            uid: p.uid,
            resource_version: p.resource_version,
        }),
        orphan_dependents: d.orphan_dependents,
        propagation_policy: d.propagation_policy,
        dry_run: non_empty(d.dry_run),
        ignore_store_read_error_with_cluster_breaking_potential: d
            .ignore_store_read_error_with_cluster_breaking_potential,
        ..om::DeleteOptions::default()
    }
}
