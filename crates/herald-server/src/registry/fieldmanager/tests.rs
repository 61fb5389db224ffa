use super::updated;
use super::*;
use herald_core::event::convert::normalize_core;
use serde_json::json;

fn t(secs: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + secs).unwrap()
}

fn core(v: Value) -> CoreEvent {
    normalize_core(serde_json::from_value(v).unwrap())
}

fn from_json(group: ApiGroup, v: Value) -> CoreEvent {
    herald_wire::body::decode_body(group, v, None).unwrap()
}

fn entries(e: &CoreEvent) -> Value {
    let mut v =
        serde_json::to_value(e.metadata.managed_fields.clone().unwrap_or_default()).unwrap();
    for e in v.as_array_mut().unwrap() {
        e.as_object_mut().unwrap().remove("time");
    }
    v
}

fn kubelet_event() -> CoreEvent {
    core(json!({
        "metadata": {"name": "web-1.1", "namespace": "default", "uid": "u", "labels": {"a": "b"}},
        "involvedObject": {"kind": "Pod", "name": "web-1", "namespace": "default"},
        "reason": "BackOff", "message": "Back-off", "type": "Warning", "count": 1,
        "source": {"component": "kubelet", "host": "node-1"},
        "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:00:00Z",
    }))
}

#[test]
fn create_records_the_writers_fields_like_kube() {
    let mut e = kubelet_event();
    track_update(ApiGroup::Core, None, &mut e, "kubelet", t(0));
    assert_eq!(
        entries(&e),
        json!([{
            "apiVersion": "v1", "fieldsType": "FieldsV1", "manager": "kubelet", "operation": "Update",
            "fieldsV1": {
                "f:count": {}, "f:firstTimestamp": {}, "f:involvedObject": {}, "f:lastTimestamp": {},
                "f:message": {}, "f:metadata": {"f:labels": {".": {}, "f:a": {}}}, "f:reason": {},
                "f:source": {"f:component": {}, "f:host": {}}, "f:type": {},
            },
        }])
    );
    let time = &e.metadata.managed_fields.as_ref().unwrap()[0].time;
    assert_eq!(time.as_ref().map(|t| t.0), Some(t(0)));
}

#[test]
fn an_update_takes_changed_fields_from_other_managers_and_keeps_its_time_when_idle() {
    let mut live = kubelet_event();
    track_update(ApiGroup::Core, None, &mut live, "kubelet", t(0));
    let mut new = live.clone();
    new.message = Some("patched".into());
    track_update(ApiGroup::Core, Some(&live), &mut new, "kubectl-patch", t(5));
    let mf = entries(&new);
    assert_eq!(mf[1]["manager"], "kubectl-patch");
    assert_eq!(mf[1]["fieldsV1"], json!({"f:message": {}}));
    assert!(mf[0]["fieldsV1"].get("f:message").is_none());

    // Writing the same object again takes nothing: no new entry, no time change.
    let mut same = new.clone();
    track_update(ApiGroup::Core, Some(&new), &mut same, "other", t(9));
    assert_eq!(same.metadata.managed_fields, new.metadata.managed_fields);
}

#[test]
fn sent_managed_fields_replace_or_reset_the_stored_ones() {
    let mut live = kubelet_event();
    track_update(ApiGroup::Core, None, &mut live, "kubelet", t(0));
    let mut reset = live.clone();
    reset.metadata.managed_fields = Some(vec![ManagedFieldsEntry::default()]);
    track_update(ApiGroup::Core, Some(&live), &mut reset, "x", t(1));
    assert_eq!(reset.metadata.managed_fields, None);

    let mut garbage = live.clone();
    garbage.metadata.managed_fields = Some(vec![ManagedFieldsEntry {
        operation: Some("Sideways".into()),
        ..ManagedFieldsEntry::default()
    }]);
    track_update(ApiGroup::Core, Some(&live), &mut garbage, "x", t(1));
    assert_eq!(
        garbage.metadata.managed_fields,
        live.metadata.managed_fields
    );
}

fn applied(name: &str, message: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": name, "namespace": "default"},
        "involvedObject": {"kind": "Pod", "name": "web-1", "namespace": "default"},
        "reason": "Started", "message": message, "type": "Normal",
    })
}

#[test]
fn apply_conflicts_with_an_updater_unless_forced() {
    let first = apply(
        ApiGroup::Core,
        None,
        &applied("x", "one"),
        "kubectl",
        false,
        t(0),
    )
    .unwrap();
    let live = from_json(ApiGroup::Core, first);
    assert_eq!(
        entries(&live)[0]["fieldsV1"],
        json!({"f:involvedObject": {}, "f:message": {}, "f:reason": {}, "f:type": {}})
    );
    let mut patched = live.clone();
    patched.message = Some("patched".into());
    track_update(
        ApiGroup::Core,
        Some(&live),
        &mut patched,
        "kubectl-patch",
        t(1),
    );

    // Re-applying the same configuration changes .message, which kubectl-patch owns now.
    let err = apply(
        ApiGroup::Core,
        Some(&patched),
        &applied("x", "one"),
        "kubectl",
        false,
        t(2),
    )
    .unwrap_err();
    assert_eq!(err.code, 409);
    assert_eq!(err.reason, Reason::Conflict);
    assert_eq!(
        err.message,
        "Apply failed with 1 conflict: conflict with \"kubectl-patch\" using v1: .message"
    );
    assert_eq!(
        err.causes,
        vec![FieldCause {
            reason: "FieldManagerConflict".into(),
            message: "conflict with \"kubectl-patch\" using v1".into(),
            field: ".message".into(),
        }]
    );

    // Applying the live value is no conflict: both own it.
    let shared = apply(
        ApiGroup::Core,
        Some(&patched),
        &applied("x", "patched"),
        "kubectl",
        false,
        t(2),
    )
    .unwrap();
    let shared = from_json(ApiGroup::Core, shared);
    let mf = entries(&shared);
    assert_eq!(mf.as_array().unwrap().len(), 2);
    assert!(mf[0]["fieldsV1"].get("f:message").is_some());
    assert!(mf[1]["fieldsV1"].get("f:message").is_some());

    // Forcing takes the field: kubectl-patch owns nothing any more and its entry goes.
    let forced = apply(
        ApiGroup::Core,
        Some(&patched),
        &applied("x", "one"),
        "kubectl",
        true,
        t(3),
    )
    .unwrap();
    let forced = from_json(ApiGroup::Core, forced);
    assert_eq!(forced.message.as_deref(), Some("one"));
    let mf = entries(&forced);
    assert_eq!(mf.as_array().unwrap().len(), 1);
    assert_eq!(mf[0]["manager"], "kubectl");
    assert_eq!(mf[0]["operation"], "Apply");
}

#[test]
fn apply_removes_what_the_applier_stopped_applying_unless_someone_else_owns_it() {
    let mut config = applied("x", "one");
    config["metadata"]["labels"] = json!({"a": "1", "b": "2"});
    let live = from_json(
        ApiGroup::Core,
        apply(ApiGroup::Core, None, &config, "kubectl", false, t(0)).unwrap(),
    );
    // Another manager sets label b to the same value: it co-owns b.
    let mut co = live.clone();
    co.metadata
        .labels
        .as_mut()
        .unwrap()
        .insert("c".into(), "3".into());
    track_update(ApiGroup::Core, Some(&live), &mut co, "labeler", t(1));
    let mut config2 = applied("x", "one");
    config2["metadata"]["labels"] = json!({});
    config2.as_object_mut().unwrap().remove("type");
    let after = from_json(
        ApiGroup::Core,
        apply(ApiGroup::Core, Some(&co), &config2, "kubectl", false, t(2)).unwrap(),
    );
    let labels = after.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels.into_iter().collect::<Vec<_>>(),
        vec![("c".to_string(), "3".to_string())],
        "a and b were only the applier's; c is the labeler's"
    );
    assert_eq!(after.type_, None, "type was only the applier's");
}

#[test]
fn managers_of_the_other_version_see_their_own_paths() {
    let v1_config = json!({
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": "x", "namespace": "default"},
        "regarding": {"kind": "Pod", "name": "web-1"},
        "reason": "Started", "note": "one", "type": "Normal", "action": "Start",
        "reportingController": "c", "reportingInstance": "i",
        "eventTime": "2026-01-01T00:00:00.000000Z",
    });
    let live = from_json(
        ApiGroup::EventsV1,
        apply(ApiGroup::EventsV1, None, &v1_config, "rs", false, t(0)).unwrap(),
    );
    assert_eq!(entries(&live)[0]["apiVersion"], "events.k8s.io/v1");
    let mut patched = live.clone();
    patched.message = Some("core says".into());
    track_update(
        ApiGroup::Core,
        Some(&live),
        &mut patched,
        "kubectl-patch",
        t(1),
    );
    let mf = entries(&patched);
    assert_eq!(mf[0]["manager"], "rs");
    assert!(mf[0]["fieldsV1"].get("f:note").is_none(), "{mf}");
    assert_eq!(mf[1]["fieldsV1"], json!({"f:message": {}}));
    let err = apply(
        ApiGroup::EventsV1,
        Some(&patched),
        &v1_config,
        "rs",
        false,
        t(2),
    )
    .unwrap_err();
    assert_eq!(
        err.message,
        "Apply failed with 1 conflict: conflict with \"kubectl-patch\" using v1: .message"
    );
}

#[test]
fn apply_checks_version_and_managed_fields() {
    let mut c = applied("x", "m");
    c["apiVersion"] = json!("events.k8s.io/v1");
    let e = apply(ApiGroup::Core, None, &c, "m", false, t(0)).unwrap_err();
    assert_eq!(e.code, 400);
    assert!(
        e.message
            .contains("Specified patch version: events.k8s.io/v1, expected: v1")
    );
    let mut c = applied("x", "m");
    c["metadata"]["managedFields"] = json!([]);
    let e = apply(ApiGroup::Core, None, &c, "m", false, t(0)).unwrap_err();
    assert_eq!(e.message, "metadata.managedFields must be nil");
}

#[test]
fn many_conflicts_are_listed_per_manager() {
    let live = from_json(
        ApiGroup::Core,
        apply(
            ApiGroup::Core,
            None,
            &applied("x", "one"),
            "kubectl",
            false,
            t(0),
        )
        .unwrap(),
    );
    let mut p = live.clone();
    p.message = Some("two".into());
    p.reason = Some("Other".into());
    track_update(ApiGroup::Core, Some(&live), &mut p, "b-mgr", t(1));
    let e = apply(
        ApiGroup::Core,
        Some(&p),
        &applied("x", "one"),
        "kubectl",
        false,
        t(2),
    )
    .unwrap_err();
    assert_eq!(
        e.message,
        "Apply failed with 2 conflicts: conflicts with \"b-mgr\" using v1:\n- .message\n- .reason"
    );
    assert_eq!(e.causes.len(), 2);
}

#[test]
fn update_entries_are_capped() {
    let mut e = kubelet_event();
    track_update(ApiGroup::Core, None, &mut e, "m0", t(0));
    for i in 1..=12 {
        let live = e.clone();
        e.metadata
            .labels
            .get_or_insert_default()
            .insert(format!("m{i}"), "x".into());
        track_update(ApiGroup::Core, Some(&live), &mut e, &format!("m{i}"), t(i));
    }
    let mf = entries(&e);
    let names: Vec<&str> = mf
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["manager"].as_str().unwrap())
        .collect();
    // The three oldest (m0..m3) are merged into one bucket entry holding all their fields.
    assert_eq!(
        names,
        [
            ANCIENT_CHANGES,
            "m4",
            "m5",
            "m6",
            "m7",
            "m8",
            "m9",
            "m10",
            "m11",
            "m12"
        ]
    );
    let bucket = &mf[0]["fieldsV1"];
    assert!(bucket.get("f:message").is_some(), "{bucket}");
    assert!(
        bucket["f:metadata"]["f:labels"].get("f:m3").is_some(),
        "{bucket}"
    );
}

#[test]
fn manager_names() {
    assert_eq!(manager_name(Some("mine"), Some("kubectl/v1.32")), "mine");
    assert_eq!(
        manager_name(None, Some("kubectl/v1.32.4 (linux/amd64)")),
        "kubectl"
    );
    assert_eq!(manager_name(Some(""), None), "unknown");
    assert!(
        field_manager_causes(&"x".repeat(129))[0]
            .message
            .starts_with("Too long")
    );
    assert!(field_manager_causes("ok").is_empty());
    assert_eq!(field_manager_causes("a\u{7}b").len(), 1);
}

#[test]
fn a_repeat_patch_is_read_from_the_typed_events() {
    // What client-go's `record` package patches on a repeat, and its `events` package's
    // series patch.
    let old = kubelet_event();
    let mut new = old.clone();
    new.count = Some(2);
    new.last_timestamp = Some(Time(t(60)));
    new.message = Some("Back-off again".into());
    let typed = updated::compare(ApiGroup::Core, &old, &new).expect("a typed comparison");
    assert_eq!(
        typed.changed().to_fields_v1(),
        json!({"f:count": {}, "f:lastTimestamp": {}, "f:message": {}})
    );
    assert!(typed.removed.is_empty());
    new.series = Some(k8s_openapi::api::core::v1::EventSeries {
        count: Some(2),
        last_observed_time: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(
            t(60),
        )),
    });
    let typed = updated::compare(ApiGroup::EventsV1, &old, &new).expect("a typed comparison");
    assert_eq!(
        typed.added.to_fields_v1(),
        json!({"f:series": {".": {}, "f:count": {}, "f:lastObservedTime": {}}})
    );
    assert_eq!(
        typed.modified.to_fields_v1(),
        json!({"f:deprecatedCount": {}, "f:deprecatedLastTimestamp": {}, "f:note": {}})
    );
    // More precision than the JSON keeps: left to the generic comparison.
    new.last_timestamp = Some(Time(t(60) + jiff::SignedDuration::from_millis(1)));
    assert_eq!(updated::compare(ApiGroup::Core, &old, &new), None);
}

/// The typed fast paths (creates, updates) against the generic comparison of JSON trees.
mod fast_paths_equal_the_generic_comparison {
    use super::super::created::{CreatedKey, created_fields};
    use super::super::updated;
    use super::*;
    use herald_core::event::convert::GO_ZERO_TIME;
    use k8s_openapi::api::core::v1::{EventSeries, EventSource, ObjectReference};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, OwnerReference};
    use proptest::prelude::*;

    fn opt_str() -> impl Strategy<Value = Option<String>> {
        prop_oneof![
            Just(None),
            Just(Some(String::new())),
            "[a-c]{1,2}".prop_map(Some)
        ]
    }

    fn time() -> impl Strategy<Value = Option<Timestamp>> {
        prop_oneof![
            4 => Just(None),
            2 => Just(Some(GO_ZERO_TIME)),
            8 => (0i64..3).prop_map(|s| Some(t(s))),
            // Before 1970, where a fraction of a second is negative.
            1 => (-2i64..0).prop_map(|s| Timestamp::from_second(s).ok()),
            1 => Just(Timestamp::from_second(-1).ok().map(|t| t + jiff::SignedDuration::from_millis(500))),
            // More precision than a `Time` (or a `MicroTime`) keeps.
            1 => (0i64..3).prop_map(|ms| Some(t(0) + jiff::SignedDuration::from_millis(ms))),
            1 => Just(Some(t(0) + jiff::SignedDuration::from_nanos(1))),
        ]
    }

    fn reference() -> impl Strategy<Value = ObjectReference> {
        herald_wire::testing::reference_from(opt_str())
    }

    fn map() -> impl Strategy<Value = Option<std::collections::BTreeMap<String, String>>> {
        proptest::option::of(proptest::collection::btree_map("[a-c]", "[x-z]", 0..3))
    }

    prop_compose! {
        fn event()(
            action in opt_str(), reason in opt_str(), message in opt_str(), type_ in opt_str(),
            rc in opt_str(), ri in opt_str(),
            count in proptest::option::of(0i32..3),
            first in time(), last in time(), event_time in time(),
            involved in reference(), related in proptest::option::of(reference()),
            source in proptest::option::of((opt_str(), opt_str())),
            series in proptest::option::of((proptest::option::of(0i32..3), time())),
            labels in map(), annotations in map(),
            finalizers in proptest::option::of(proptest::collection::vec("[a-b]/f", 0..3)),
            owners in proptest::option::of(proptest::collection::vec("[1-2]", 0..3)),
            generate_name in opt_str(),
            grace in proptest::option::of(0i64..2), deleted in time(),
        ) -> CoreEvent {
            let mut e = CoreEvent {
                action, reason, message, type_, count,
                reporting_component: rc, reporting_instance: ri,
                first_timestamp: first.map(Time), last_timestamp: last.map(Time),
                event_time: event_time.map(MicroTime),
                involved_object: involved, related,
                source: source.map(|(component, host)| EventSource { component, host }),
                series: series.map(|(count, t)| EventSeries {
                    count, last_observed_time: t.map(MicroTime),
                }),
                ..CoreEvent::default()
            };
            e.metadata.name = Some("x".into());
            e.metadata.namespace = Some("ns".into());
            e.metadata.uid = Some("u".into());
            e.metadata.labels = labels;
            e.metadata.annotations = annotations;
            e.metadata.finalizers = finalizers;
            e.metadata.generate_name = generate_name;
            e.metadata.deletion_grace_period_seconds = grace;
            e.metadata.deletion_timestamp = deleted.map(Time);
            e.metadata.owner_references = owners.map(|uids| {
                uids.into_iter()
                    .map(|uid| OwnerReference { uid, name: "o".into(), kind: "K".into(),
                        api_version: "v1".into(), ..OwnerReference::default() })
                    .collect()
            });
            e
        }
    }

    /// Copies one field of an event into another.
    type Take = fn(&mut CoreEvent, &CoreEvent);

    /// Every field [`event`] varies, and the identity and server-set metadata (which nobody
    /// owns, so no comparison may mention).
    const FIELDS: [Take; 28] = [
        |n, b| n.action = b.action.clone(),
        |n, b| n.count = b.count,
        |n, b| n.event_time = b.event_time.clone(),
        |n, b| n.first_timestamp = b.first_timestamp.clone(),
        |n, b| n.last_timestamp = b.last_timestamp.clone(),
        // Field by field, so that references differing in one field are common.
        |n, b| n.involved_object.api_version = b.involved_object.api_version.clone(),
        |n, b| n.involved_object.field_path = b.involved_object.field_path.clone(),
        |n, b| n.involved_object.kind = b.involved_object.kind.clone(),
        |n, b| n.involved_object.name = b.involved_object.name.clone(),
        |n, b| n.involved_object.namespace = b.involved_object.namespace.clone(),
        |n, b| n.involved_object.resource_version = b.involved_object.resource_version.clone(),
        |n, b| n.involved_object.uid = b.involved_object.uid.clone(),
        |n, b| n.message = b.message.clone(),
        |n, b| n.reason = b.reason.clone(),
        |n, b| n.related = b.related.clone(),
        |n, b| n.reporting_component = b.reporting_component.clone(),
        |n, b| n.reporting_instance = b.reporting_instance.clone(),
        |n, b| n.type_ = b.type_.clone(),
        |n, b| n.series = b.series.clone(),
        |n, b| n.source = b.source.clone(),
        |n, b| n.metadata.labels = b.metadata.labels.clone(),
        |n, b| n.metadata.annotations = b.metadata.annotations.clone(),
        |n, b| n.metadata.finalizers = b.metadata.finalizers.clone(),
        |n, b| n.metadata.owner_references = b.metadata.owner_references.clone(),
        |n, b| n.metadata.generate_name = b.metadata.generate_name.clone(),
        |n, b| n.metadata.deletion_grace_period_seconds = b.metadata.deletion_grace_period_seconds,
        |n, b| n.metadata.deletion_timestamp = b.metadata.deletion_timestamp.clone(),
        |n, _| {
            n.metadata.name = Some("y".into());
            n.metadata.namespace = Some("other".into());
            n.metadata.uid = Some("v".into());
            n.metadata.resource_version = Some("9".into());
            n.metadata.generation = Some(2);
            n.metadata.creation_timestamp = Some(Time(t(5)));
            n.metadata.self_link = Some("/x".into());
            n.metadata.managed_fields = Some(vec![ManagedFieldsEntry::default()]);
        },
    ];

    prop_compose! {
        /// A stored event and what a write makes of it: each field of the new event is the
        /// old one's or another event's (so most are equal, as in a patch), and some pairs
        /// have no `ownerReferences`, which the typed comparison leaves to the generic one.
        /// The stored event has `managedFields`, as it does in a write.
        fn update()(
            old in event(), other in event(), take in any::<u32>(), owners in any::<bool>(),
        ) -> (CoreEvent, CoreEvent) {
            let mut old = old;
            old.metadata.managed_fields = Some(vec![ManagedFieldsEntry {
                manager: Some("m".into()),
                ..ManagedFieldsEntry::default()
            }]);
            let mut new = old.clone();
            for (i, f) in FIELDS.iter().enumerate() {
                if take & (1 << i) != 0 {
                    f(&mut new, &other);
                }
            }
            if !owners {
                old.metadata.owner_references = None;
                new.metadata.owner_references = None;
            }
            (old, new)
        }
    }

    proptest! {
        // Less than half the pairs have neither more precise times nor owner references,
        // which the typed comparison answers for: more cases than the default 256 (fast
        // enough for the create properties too).
        #![proptest_config(ProptestConfig::with_cases(1024))]

        /// The typed comparison of an update (what a patch takes) equals the generic one of
        /// the two events' JSON, in both versions, whenever it answers.
        #[test]
        fn an_update_reads_as_the_generic_comparison((old, new) in update()) {
            for group in [ApiGroup::Core, ApiGroup::EventsV1] {
                let generic = typed::compare(
                    schema::event(group),
                    &without_managed_fields(event_json(group, &old)),
                    &event_json(group, &new),
                )
                .without(&STRIPPED);
                let typed = updated::compare(group, &old, &new);
                // It answers for everything but what the module docs leave to the generic one.
                let owners = old.metadata.owner_references.is_some()
                    || new.metadata.owner_references.is_some();
                prop_assert_eq!(
                    typed.is_some(),
                    !owners && updated::exact(&old) && updated::exact(&new)
                );
                if let Some(typed) = typed {
                    prop_assert_eq!(typed, generic, "{:?}", group);
                }
            }
        }

        /// The create fast path of `track_update` (one entry, per-thread `fieldsV1` cache)
        /// writes what the general merge writes, for every event and both versions; the
        /// second create of each event is answered from the cache.
        #[test]
        fn the_create_fast_path_equals_the_general_one(e in event()) {
            // Mid-second: entries keep whole seconds.
            let now = t(7) + jiff::SignedDuration::from_millis(500);
            for group in [ApiGroup::Core, ApiGroup::EventsV1] {
                let mut general = e.clone();
                track_update_general(group, None, &mut general, "m", now);
                for _ in 0..2 {
                    let mut fast = e.clone();
                    track_update(group, None, &mut fast, "m", now);
                    prop_assert_eq!(
                        &fast.metadata.managed_fields,
                        &general.metadata.managed_fields,
                        "{:?}", group
                    );
                }
            }
        }

        /// A remembered key answers for an event exactly when the event's own key is equal
        /// (and so is its field set).
        #[test]
        fn a_created_key_matches_exactly_its_events(a in event(), b in event()) {
            for group in [ApiGroup::Core, ApiGroup::EventsV1] {
                let key = CreatedKey::of(group, &a);
                prop_assert!(key.matches(group, &a));
                prop_assert_eq!(key.matches(group, &b), key == CreatedKey::of(group, &b));
                if key.matches(group, &b) {
                    prop_assert_eq!(created_fields(group, &a), created_fields(group, &b));
                }
            }
            prop_assert!(!CreatedKey::of(ApiGroup::Core, &a).matches(ApiGroup::EventsV1, &a));
            // One more key in any metadata map or list: another key.
            let mut variants = vec![a.clone(), a.clone(), a.clone(), a.clone()];
            variants[0].metadata.labels.get_or_insert_default().insert("zz".into(), String::new());
            variants[1].metadata.annotations.get_or_insert_default().insert("zz".into(), String::new());
            variants[2].metadata.finalizers.get_or_insert_default().push("z/f".into());
            variants[3].metadata.owner_references.get_or_insert_default().push(OwnerReference {
                uid: "9".into(),
                ..OwnerReference::default()
            });
            let key = CreatedKey::of(ApiGroup::Core, &a);
            for v in &variants {
                prop_assert!(!key.matches(ApiGroup::Core, v));
                prop_assert_ne!(created_fields(ApiGroup::Core, &a), created_fields(ApiGroup::Core, v));
            }
        }

        #[test]
        fn for_both_versions(e in event()) {
            for group in [ApiGroup::Core, ApiGroup::EventsV1] {
                let generic = typed::compare(schema::event(group), zero(group), &event_json(group, &e))
                    .without(&STRIPPED);
                prop_assert!(generic.removed.is_empty(), "{group:?}: {:?}", generic.removed);
                prop_assert_eq!(
                    created_fields(group, &e).to_fields_v1(),
                    generic.changed().to_fields_v1(),
                    "{:?}", group
                );
            }
        }
    }
}
