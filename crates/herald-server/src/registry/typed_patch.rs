//! A recorder's repeat patch applied straight to the typed event.
//!
//! A merge or strategic-merge patch is applied to the event's JSON in the request's shape,
//! and the result decoded again ([`super::write`]): the JSON tree of the stored event, the
//! merge and the decode of the whole patched tree are most of a patch's handler. The patches
//! recorders send on a repeat of an event set a few top-level fields: client-go's `record`
//! package `count`, `lastTimestamp` and `message` on core/v1 (every repeat it does not
//! aggregate); client-go's `events` package a `series` on events.k8s.io/v1 (the first
//! repeat, then one per 30 minutes); some add an annotation. [`apply`] sets those on a copy
//! of the typed event instead, and normalizes it as the decode does. (kube-rs's Recorder
//! merges the whole event with its series: that takes the general path.)
//!
//! It answers only for patches whose every member it reads exactly as the decode would:
//! top-level strings, counts and times of the event (by the request's field names), `null`
//! for any of them, an events.k8s.io `series` of `count` and `lastObservedTime`, and
//! `metadata` holding only `labels` and `annotations` of strings (or `null`s). Anything else
//! (another field, a directive, a value of another type, a time the decoder rejects) is
//! `None`, and the caller takes the general path, which also says what is wrong with it. The
//! property test below holds the answer equal to that path's.

use std::collections::BTreeMap;

use herald_core::event::convert::{GO_ZERO_TIME, normalize_core};
use herald_core::event::{ApiGroup, CoreEvent};
use k8s_openapi::api::core::v1::EventSeries;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::patch::PatchKind;
use herald_wire::body::drop_empty_maps;

/// `old` (a stored event) with `patch`, the object of a merge or strategic-merge patch in
/// `group`'s shape, applied and normalized as [`decode_body`](herald_wire::body::decode_body)
/// leaves an event; `None` for any other patch (see the module docs).
pub fn apply(
    group: ApiGroup,
    kind: PatchKind,
    patch: &Value,
    old: &CoreEvent,
) -> Option<CoreEvent> {
    if !matches!(kind, PatchKind::Merge | PatchKind::StrategicMerge) {
        return None;
    }
    let Value::Object(patch) = patch else {
        return None;
    };
    let mut e = old.clone();
    for (key, v) in patch {
        let field = match group {
            ApiGroup::Core => core_field(key),
            ApiGroup::EventsV1 => v1_field(key),
        }?;
        match field {
            Field::Text(f) => *f(&mut e) = text(v)?,
            Field::Count(f) => *f(&mut e) = typed::<i32>(v)?,
            Field::Time(f) => *f(&mut e) = typed::<Time>(v)?,
            Field::Series => e.series = series(e.series.take(), v)?,
            Field::Metadata => metadata(&mut e, v)?,
        }
    }
    Some(drop_empty_maps(normalize_core(e)))
}

/// What a top-level member of a patch sets, and how its value is read.
enum Field {
    Text(fn(&mut CoreEvent) -> &mut Option<String>),
    Count(fn(&mut CoreEvent) -> &mut Option<i32>),
    Time(fn(&mut CoreEvent) -> &mut Option<Time>),
    Series,
    Metadata,
}

/// The fields of both shapes that keep their names.
fn shared_field(key: &str) -> Option<Field> {
    Some(match key {
        "action" => Field::Text(|e| &mut e.action),
        "reason" => Field::Text(|e| &mut e.reason),
        "type" => Field::Text(|e| &mut e.type_),
        "metadata" => Field::Metadata,
        _ => return None,
    })
}

fn core_field(key: &str) -> Option<Field> {
    Some(match key {
        "message" => Field::Text(|e| &mut e.message),
        "count" => Field::Count(|e| &mut e.count),
        "firstTimestamp" => Field::Time(|e| &mut e.first_timestamp),
        "lastTimestamp" => Field::Time(|e| &mut e.last_timestamp),
        _ => return shared_field(key),
    })
}

fn v1_field(key: &str) -> Option<Field> {
    Some(match key {
        "note" => Field::Text(|e| &mut e.message),
        "deprecatedCount" => Field::Count(|e| &mut e.count),
        "deprecatedFirstTimestamp" => Field::Time(|e| &mut e.first_timestamp),
        "deprecatedLastTimestamp" => Field::Time(|e| &mut e.last_timestamp),
        "series" => Field::Series,
        _ => return shared_field(key),
    })
}

/// A string member: `null` unsets it.
fn text(v: &Value) -> Option<Option<String>> {
    match v {
        Value::Null => Some(None),
        Value::String(s) => Some(Some(s.clone())),
        _ => None,
    }
}

/// A member read by its type's own decoder, as the decode of the patched event reads it:
/// `null` unsets it, a value the decoder rejects is `None`.
fn typed<T: for<'de> Deserialize<'de>>(v: &Value) -> Option<Option<T>> {
    match v {
        Value::Null => Some(None),
        v => T::deserialize(v).ok().map(Some),
    }
}

/// An events.k8s.io `series` merged into the stored one. Go's decoder leaves a missing or
/// `null` member of a series zero (`count` 0, `lastObservedTime` the zero time), and so does
/// the general path before validation sees it.
fn series(old: Option<EventSeries>, v: &Value) -> Option<Option<EventSeries>> {
    let patch = match v {
        Value::Null => return Some(None),
        Value::Object(m) => m,
        _ => return None,
    };
    // The stored series as the events.k8s.io shape shows it: absent, or both members.
    let (mut count, mut observed) = match old {
        Some(s) => (s.count.unwrap_or(0), s.last_observed_time),
        None => (0, None),
    };
    for (key, v) in patch {
        match key.as_str() {
            "count" => count = typed::<i32>(v)?.unwrap_or(0),
            "lastObservedTime" => observed = typed::<MicroTime>(v)?,
            _ => return None,
        }
    }
    Some(Some(EventSeries {
        count: Some(count),
        last_observed_time: Some(observed.unwrap_or(MicroTime(GO_ZERO_TIME))),
    }))
}

/// `metadata` holding only `labels` and `annotations`, merged key by key.
fn metadata(e: &mut CoreEvent, v: &Value) -> Option<()> {
    let Value::Object(patch) = v else {
        return None;
    };
    for (key, v) in patch {
        let map = match key.as_str() {
            "labels" => &mut e.metadata.labels,
            "annotations" => &mut e.metadata.annotations,
            _ => return None,
        };
        merge_strings(map, v)?;
    }
    Some(())
}

/// Merges a patch of a string map: `null` removes the map, or one key of it.
fn merge_strings(map: &mut Option<BTreeMap<String, String>>, v: &Value) -> Option<()> {
    let patch: &Map<String, Value> = match v {
        Value::Null => {
            *map = None;
            return Some(());
        }
        Value::Object(m) => m,
        _ => return None,
    };
    if patch.keys().any(|k| k.starts_with('$')) {
        // A strategic-merge directive.
        return None;
    }
    let map = map.get_or_insert_default();
    for (key, v) in patch {
        match v {
            Value::Null => {
                map.remove(key);
            }
            Value::String(s) => {
                map.insert(key.clone(), s.clone());
            }
            _ => return None,
        }
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use herald_wire::json::event_json;
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;
    use crate::registry::patch::{self, PatchDoc};
    use herald_wire::body::decode_body;
    use herald_wire::schema::GroupVersion;
    use herald_wire::schema::openapi::unknown_fields;
    use herald_wire::stored::{decode_at, encode};

    /// The general path: the patch applied to the event's JSON, decoded again.
    fn general(
        group: ApiGroup,
        kind: PatchKind,
        doc: &Value,
        old: &CoreEvent,
    ) -> Option<CoreEvent> {
        let mut v = event_json(group, old);
        patch::apply(kind, &PatchDoc::Object(doc.clone()), &mut v).ok()?;
        decode_body(group, v, None).ok()
    }

    fn stored(e: &CoreEvent) -> CoreEvent {
        decode_at(&encode(e), 7).expect("decodes")
    }

    fn kubelet_event() -> CoreEvent {
        stored(
            &serde_json::from_value(json!({
                "metadata": {"name": "web-1.1", "namespace": "default", "uid": "u"},
                "involvedObject": {"kind": "Pod", "name": "web-1", "namespace": "default"},
                "reason": "BackOff", "message": "Back-off", "type": "Warning", "count": 1,
                "source": {"component": "kubelet", "host": "node-1"},
                "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:00:00Z",
            }))
            .expect("event"),
        )
    }

    #[test]
    fn a_recorders_repeat_is_applied_to_the_typed_event() {
        let old = kubelet_event();
        // client-go's `record` package (with the annotation `herald bench` adds), and its
        // `events` package.
        let record = json!({
            "count": 2, "lastTimestamp": "2026-01-01T00:01:00Z", "message": "Back-off again",
            "metadata": {"annotations": {"a": "1"}},
        });
        let events = json!({
            "series": {"count": 2, "lastObservedTime": "2026-01-01T00:01:00.000000Z"},
        });
        for kind in [PatchKind::StrategicMerge, PatchKind::Merge] {
            let typed = apply(ApiGroup::Core, kind, &record, &old).expect("typed");
            assert_eq!(typed.count, Some(2));
            assert_eq!(typed.message.as_deref(), Some("Back-off again"));
            assert_eq!(Some(typed), general(ApiGroup::Core, kind, &record, &old));

            let typed = apply(ApiGroup::EventsV1, kind, &events, &old).expect("typed");
            assert_eq!(typed.series.as_ref().and_then(|s| s.count), Some(2));
            assert_eq!(
                Some(typed),
                general(ApiGroup::EventsV1, kind, &events, &old)
            );
        }
    }

    #[test]
    fn other_patches_take_the_general_path() {
        let old = kubelet_event();
        for doc in [
            json!({"involvedObject": {"kind": "Node"}}),
            json!({"metadata": {"resourceVersion": "1"}}),
            json!({"metadata": {"labels": {"$patch": "replace"}}}),
            json!({"metadata": {"labels": {"a": 1}}}),
            json!({"count": "2"}),
            json!({"count": 1.5}),
            json!({"lastTimestamp": "yesterday"}),
            json!({"note": "core/v1 has no note"}),
            json!({"series": {"count": 2}}),
            json!({"$patch": "replace", "count": 2}),
            json!({"metadata": {"$patch": "replace"}}),
        ] {
            for kind in [PatchKind::Merge, PatchKind::StrategicMerge] {
                assert_eq!(apply(ApiGroup::Core, kind, &doc, &old), None, "{doc:?}");
            }
        }
        for doc in [
            json!({"message": "events.k8s.io/v1 has no message"}),
            json!({"series": 3}),
            json!({"series": {"count": 2, "other": 1}}),
            json!({"series": {"$patch": "delete"}}),
            json!({"series": {"count": 2.0}}),
            json!({"deprecatedCount": 1e2}),
            json!({"eventTime": "2026-01-01T00:00:00.000000Z"}),
            json!({"regarding": {"kind": "Node"}}),
        ] {
            for kind in [PatchKind::Merge, PatchKind::StrategicMerge] {
                assert_eq!(apply(ApiGroup::EventsV1, kind, &doc, &old), None, "{doc:?}");
            }
        }
        // The same members under another patch kind.
        let record = json!({"count": 2, "message": "Back-off again"});
        for kind in [PatchKind::Json, PatchKind::Apply { force: false }] {
            assert_eq!(apply(ApiGroup::Core, kind, &record, &old), None, "{kind:?}");
        }
    }

    /// A value for a string member: mostly strings, sometimes of another type.
    fn text_value() -> impl Strategy<Value = Value> {
        prop_oneof![
            2 => Just(Value::Null),
            2 => Just(json!("")),
            6 => "[a-b]{1,2}".prop_map(Value::from),
            1 => Just(json!(1)),
        ]
    }

    fn count_value() -> impl Strategy<Value = Value> {
        prop_oneof![
            2 => Just(Value::Null),
            6 => (-1i64..3).prop_map(Value::from),
            1 => Just(json!(3_000_000_000_i64)),
            1 => Just(json!(1.5)),
            1 => Just(json!("2")),
        ]
    }

    fn time_value() -> impl Strategy<Value = Value> {
        prop_oneof![
            2 => Just(Value::Null),
            4 => Just(json!("2026-01-01T00:00:00Z")),
            2 => Just(json!("2026-01-01T00:00:00.123456Z")),
            2 => Just(json!("0001-01-01T00:00:00Z")),
            2 => Just(json!("0001-01-01T00:00:00.000000Z")),
            1 => Just(json!("yesterday")),
            1 => Just(json!(5)),
        ]
    }

    /// A patch of a string map: mostly strings and `null`s, sometimes another type or a
    /// directive.
    fn string_map() -> impl Strategy<Value = Value> {
        let key = prop_oneof![8 => "[a-c]", 1 => Just("$patch".to_string())];
        let value = prop_oneof![
            3 => Just(Value::Null),
            6 => "[x-y]".prop_map(Value::from),
            1 => Just(json!(1)),
        ];
        prop_oneof![
            1 => Just(Value::Null),
            1 => Just(json!("x")),
            8 => proptest::collection::btree_map(key, value, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    }

    fn series_value() -> impl Strategy<Value = Value> {
        let member = prop_oneof![
            4 => Just("count"),
            4 => Just("lastObservedTime"),
            1 => Just("other"),
        ];
        let value = prop_oneof![count_value(), time_value()];
        prop_oneof![
            2 => Just(Value::Null),
            1 => Just(json!(3)),
            8 => proptest::collection::btree_map(member, value, 0..3).prop_map(|m| json!(m)),
        ]
    }

    fn metadata_value() -> impl Strategy<Value = Value> {
        let member = prop_oneof![
            4 => Just("labels"),
            4 => Just("annotations"),
            1 => Just("name"),
        ];
        prop_oneof![
            1 => Just(Value::Null),
            8 => proptest::collection::btree_map(member, string_map(), 0..3)
                .prop_map(|m| json!(m)),
        ]
    }

    /// A patch in `group`'s shape of the members recorders set (values mostly of their
    /// types), now and then with a member of another shape or one the typed patch leaves.
    fn patch_doc(group: ApiGroup) -> impl Strategy<Value = Value> {
        let names = match group {
            ApiGroup::Core => ["message", "count", "firstTimestamp", "lastTimestamp"],
            ApiGroup::EventsV1 => [
                "note",
                "deprecatedCount",
                "deprecatedFirstTimestamp",
                "deprecatedLastTimestamp",
            ],
        };
        let [message, count, first, last] = names;
        let member = prop_oneof![
            3 => prop_oneof![Just("action"), Just("reason"), Just("type"), Just(message)]
                .prop_flat_map(|k| (Just(k), text_value().boxed())),
            2 => (Just(count), count_value().boxed()),
            2 => prop_oneof![Just(first), Just(last)]
                .prop_flat_map(|k| (Just(k), time_value().boxed())),
            2 => (Just("metadata"), metadata_value().boxed()),
            2 => (Just("series"), series_value().boxed()),
            1 => prop_oneof![Just("eventTime"), Just("reportingComponent"), Just("note"), Just("message")]
                .prop_flat_map(|k| (Just(k), text_value().boxed())),
        ];
        proptest::collection::vec(member, 0..4).prop_map(|members| {
            Value::Object(
                members
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v))
                    .collect(),
            )
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1024))]

        /// Whenever the typed patch answers, it is what the general path makes of the same
        /// patch, for both shapes and both patch kinds.
        #[test]
        fn a_typed_patch_is_the_general_one(
            e in herald_wire::testing::event(),
            maps in proptest::array::uniform2(proptest::option::of(
                proptest::collection::btree_map("[a-c]", "[x-y]", 0..3),
            )),
            core in patch_doc(ApiGroup::Core),
            v1 in patch_doc(ApiGroup::EventsV1),
        ) {
            // Labels and annotations with the keys the patches name.
            let mut e = e;
            [e.metadata.labels, e.metadata.annotations] = maps;
            let old = stored(&e);
            for (group, doc) in [(ApiGroup::Core, core), (ApiGroup::EventsV1, v1)] {
                for kind in [PatchKind::Merge, PatchKind::StrategicMerge] {
                    if let Some(typed) = apply(group, kind, &doc, &old) {
                        // The write checks the patch's fields instead of the patched
                        // object's: neither has an unknown one.
                        prop_assert!(unknown_fields(GroupVersion::of(group), &doc).is_empty());
                        let mut patched = event_json(group, &old);
                        let object = PatchDoc::Object(doc.clone());
                        prop_assert!(patch::apply(kind, &object, &mut patched).is_ok());
                        prop_assert!(unknown_fields(GroupVersion::of(group), &patched).is_empty());
                        prop_assert_eq!(
                            Some(typed),
                            general(group, kind, &doc, &old),
                            "{:?} {:?} {}", group, kind, doc
                        );
                    }
                }
            }
        }
    }
}
