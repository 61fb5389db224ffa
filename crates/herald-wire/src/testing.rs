//! Strategies for property tests that want any event the API can hold (feature `testing`,
//! and this crate's own tests): the generators the transcoders' property tests run against,
//! shared with the server's fast-path tests.

use herald_core::event::CoreEvent;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{EventSeries, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    FieldsV1, ManagedFieldsEntry, MicroTime, ObjectMeta, OwnerReference, Time,
};
use proptest::prelude::*;

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        "[a-z0-9./-]{1,20}",
        any::<String>(),
        "[\\x00-\\x7f]{0,40}",
    ]
}

fn opt_text() -> impl Strategy<Value = Option<String>> {
    proptest::option::of(text())
}

fn instant() -> impl Strategy<Value = Timestamp> {
    (-62_135_596_800i64..253_402_207_199, 0i32..1_000_000_000)
        .prop_map(|(s, n)| Timestamp::new(s, n).unwrap())
}

fn reference() -> impl Strategy<Value = ObjectReference> {
    reference_from(opt_text())
}

/// An object reference, each of its fields drawn from `field`.
pub fn reference_from(
    field: impl Strategy<Value = Option<String>>,
) -> impl Strategy<Value = ObjectReference> {
    proptest::array::uniform7(field).prop_map(
        |[
            api_version,
            field_path,
            kind,
            name,
            namespace,
            resource_version,
            uid,
        ]| {
            ObjectReference {
                api_version,
                field_path,
                kind,
                name,
                namespace,
                resource_version,
                uid,
            }
        },
    )
}

fn meta() -> impl Strategy<Value = ObjectMeta> {
    let maps = (
        proptest::option::of(proptest::collection::btree_map(text(), text(), 0..4)),
        proptest::option::of(proptest::collection::btree_map(text(), text(), 0..4)),
        proptest::option::of(proptest::collection::vec(text(), 0..3)),
    );
    let scalars = (
        opt_text(),
        opt_text(),
        opt_text(),
        proptest::option::of(instant()),
        proptest::option::of(any::<i64>()),
    );
    let deletion = (
        opt_text(),
        opt_text(),
        proptest::option::of(instant()),
        proptest::option::of(any::<i64>()),
    );
    let entries = proptest::option::of(proptest::collection::vec(
        (
            opt_text(),
            proptest::option::of(instant()),
            text(),
            opt_text(),
        )
            .prop_map(|(manager, at, field, subresource)| ManagedFieldsEntry {
                api_version: Some("v1".into()),
                fields_type: Some("FieldsV1".into()),
                fields_v1: Some(FieldsV1(serde_json::json!({ field: {}, "f:x": {"k": {}} }))),
                manager,
                operation: Some("Update".into()),
                subresource,
                time: at.map(Time),
            }),
        0..3,
    ));
    let owners = proptest::option::of(proptest::collection::vec(
        (text(), text(), proptest::option::of(any::<bool>())).prop_map(|(kind, name, c)| {
            OwnerReference {
                api_version: "v1".into(),
                block_owner_deletion: c.map(|c| !c),
                controller: c,
                kind,
                name,
                uid: "u".into(),
            }
        }),
        0..2,
    ));
    (maps, scalars, deletion, entries, owners).prop_map(
        |(
            (labels, annotations, finalizers),
            (name, namespace, uid, created, generation),
            (generate_name, self_link, deleted, grace),
            managed_fields,
            owner_references,
        )| {
            ObjectMeta {
                annotations,
                creation_timestamp: created.map(Time),
                deletion_grace_period_seconds: grace,
                deletion_timestamp: deleted.map(Time),
                finalizers,
                generate_name,
                generation,
                labels,
                managed_fields,
                name,
                namespace,
                owner_references,
                resource_version: None,
                self_link,
                uid,
            }
        },
    )
}

/// Any event, with the strings, times and nesting stored events can have.
pub fn event() -> impl Strategy<Value = CoreEvent> {
    let strings = (
        opt_text(),
        opt_text(),
        opt_text(),
        opt_text(),
        opt_text(),
        opt_text(),
    );
    let times = (
        proptest::option::of(instant()),
        proptest::option::of(instant()),
        proptest::option::of(instant()),
        proptest::option::of(any::<i32>()),
    );
    let nested = (
        meta(),
        reference(),
        proptest::option::of(reference()),
        proptest::option::of((opt_text(), opt_text())),
        proptest::option::of((
            proptest::option::of(any::<i32>()),
            proptest::option::of(instant()),
        )),
    );
    (strings, times, nested).prop_map(
        |(
            (action, message, reason, rc, ri, type_),
            (first, last, et, count),
            (metadata, io, related, src, series),
        )| {
            CoreEvent {
                action,
                count,
                event_time: et.map(MicroTime),
                first_timestamp: first.map(Time),
                involved_object: io,
                last_timestamp: last.map(Time),
                message,
                metadata,
                reason,
                related,
                reporting_component: rc,
                reporting_instance: ri,
                series: series.map(|(count, t)| EventSeries {
                    count,
                    last_observed_time: t.map(MicroTime),
                }),
                source: src.map(|(component, host)| EventSource { component, host }),
                type_,
            }
        },
    )
}
