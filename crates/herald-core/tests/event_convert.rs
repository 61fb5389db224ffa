//! Conversion between core/v1 and events.k8s.io/v1 events: field mapping, the empty-value
//! rules of kube's internal type, and round trips both ways.

use herald_core::event::convert::{
    GO_ZERO_TIME, core_to_events_v1, events_v1_to_core, normalize_core, normalize_events_v1,
};
use herald_core::event::{CoreEvent, EventsV1Event};
use k8s_openapi::api::core::v1::{EventSeries as CoreSeries, EventSource, ObjectReference};
use k8s_openapi::api::events::v1::EventSeries as V1Series;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use proptest::prelude::*;
use serde_json::json;

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn pod_ref() -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        field_path: Some("spec.containers{web}".into()),
        kind: Some("Pod".into()),
        name: Some("web-0".into()),
        namespace: Some("team-a".into()),
        resource_version: Some("4711".into()),
        uid: Some("1a2b".into()),
    }
}

/// A fully populated legacy-plus-new core event (every field set).
fn full_core() -> CoreEvent {
    CoreEvent {
        action: Some("Pulling".into()),
        count: Some(7),
        event_time: Some(MicroTime(ts("2026-01-02T03:04:05.123456Z"))),
        first_timestamp: Some(Time(ts("2026-01-02T03:04:05Z"))),
        involved_object: pod_ref(),
        last_timestamp: Some(Time(ts("2026-01-02T03:09:05Z"))),
        message: Some("Back-off pulling image".into()),
        metadata: ObjectMeta {
            name: Some("web-0.17a".into()),
            namespace: Some("team-a".into()),
            resource_version: Some("12".into()),
            ..Default::default()
        },
        reason: Some("BackOff".into()),
        related: Some(ObjectReference {
            kind: Some("Node".into()),
            name: Some("node-1".into()),
            ..Default::default()
        }),
        reporting_component: Some("kubelet".into()),
        reporting_instance: Some("node-1".into()),
        series: Some(CoreSeries {
            count: Some(5),
            last_observed_time: Some(MicroTime(ts("2026-01-02T03:09:05.654321Z"))),
        }),
        source: Some(EventSource {
            component: Some("kubelet".into()),
            host: Some("node-1".into()),
        }),
        type_: Some("Warning".into()),
    }
}

#[test]
fn core_to_events_v1_maps_every_field() {
    let v1 = core_to_events_v1(full_core());
    assert_eq!(v1.regarding, Some(pod_ref()));
    assert_eq!(v1.note.as_deref(), Some("Back-off pulling image"));
    assert_eq!(v1.reporting_controller.as_deref(), Some("kubelet"));
    assert_eq!(v1.reporting_instance.as_deref(), Some("node-1"));
    assert_eq!(v1.deprecated_count, Some(7));
    assert_eq!(
        v1.deprecated_first_timestamp,
        Some(Time(ts("2026-01-02T03:04:05Z")))
    );
    assert_eq!(
        v1.deprecated_last_timestamp,
        Some(Time(ts("2026-01-02T03:09:05Z")))
    );
    assert_eq!(
        v1.deprecated_source,
        Some(EventSource {
            component: Some("kubelet".into()),
            host: Some("node-1".into()),
        })
    );
    assert_eq!(
        v1.series,
        Some(V1Series {
            count: 5,
            last_observed_time: MicroTime(ts("2026-01-02T03:09:05.654321Z")),
        })
    );
    assert_eq!(
        v1.event_time,
        Some(MicroTime(ts("2026-01-02T03:04:05.123456Z")))
    );
    assert_eq!(v1.action.as_deref(), Some("Pulling"));
    assert_eq!(v1.reason.as_deref(), Some("BackOff"));
    assert_eq!(v1.type_.as_deref(), Some("Warning"));
    assert_eq!(
        v1.related.as_ref().and_then(|r| r.name.as_deref()),
        Some("node-1")
    );
    assert_eq!(v1.metadata.name.as_deref(), Some("web-0.17a"));
    assert_eq!(v1.metadata.resource_version.as_deref(), Some("12"));
}

#[test]
fn wire_json_of_a_converted_event_uses_events_v1_names() {
    let v = serde_json::to_value(core_to_events_v1(full_core())).unwrap();
    assert_eq!(v["regarding"]["name"], "web-0");
    assert_eq!(v["note"], "Back-off pulling image");
    assert_eq!(v["reportingController"], "kubelet");
    assert_eq!(v["deprecatedCount"], 7);
    assert_eq!(v["deprecatedFirstTimestamp"], "2026-01-02T03:04:05Z");
    assert_eq!(v["deprecatedLastTimestamp"], "2026-01-02T03:09:05Z");
    assert_eq!(
        v["deprecatedSource"],
        json!({"component": "kubelet", "host": "node-1"})
    );
    assert_eq!(v["series"]["count"], 5);
    assert_eq!(
        v["series"]["lastObservedTime"],
        "2026-01-02T03:09:05.654321Z"
    );
    assert_eq!(v["eventTime"], "2026-01-02T03:04:05.123456Z");
    for core_only in [
        "involvedObject",
        "message",
        "reportingComponent",
        "count",
        "source",
    ] {
        assert!(
            v.get(core_only).is_none(),
            "{core_only} leaked into events.k8s.io/v1"
        );
    }
}

#[test]
fn events_v1_to_core_maps_every_field() {
    let v1 = core_to_events_v1(full_core());
    let back = events_v1_to_core(v1);
    assert_eq!(back, full_core());
}

#[test]
fn events_v1_body_from_json_converts_to_core() {
    let body = json!({
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "x.1", "namespace": "ns"},
        "eventTime": "2026-03-01T10:00:00.000001Z",
        "reportingController": "example.com/ctl",
        "reportingInstance": "ctl-1",
        "action": "Reconcile",
        "reason": "Synced",
        "regarding": {"kind": "Deployment", "name": "api", "namespace": "ns"},
        "note": "ok",
        "type": "Normal",
        "series": {"count": 3, "lastObservedTime": "2026-03-01T10:05:00.000002Z"}
    });
    let v1: EventsV1Event = serde_json::from_value(body).unwrap();
    let core = events_v1_to_core(v1);
    let v = serde_json::to_value(&core).unwrap();
    assert_eq!(
        v["involvedObject"],
        json!({"kind": "Deployment", "name": "api", "namespace": "ns"})
    );
    assert_eq!(v["message"], "ok");
    assert_eq!(v["reportingComponent"], "example.com/ctl");
    assert_eq!(v["reportingInstance"], "ctl-1");
    assert_eq!(
        v["series"],
        json!({"count": 3, "lastObservedTime": "2026-03-01T10:05:00.000002Z"})
    );
    assert_eq!(v["eventTime"], "2026-03-01T10:00:00.000001Z");
    // Nothing is synthesised: no count, no first/last timestamp, an empty source.
    assert!(v.get("count").is_none());
    assert!(v.get("firstTimestamp").is_none());
    assert!(v.get("lastTimestamp").is_none());
    assert_eq!(v["source"], json!({}));
}

#[test]
fn legacy_core_event_reads_back_without_event_time() {
    let core = CoreEvent {
        metadata: ObjectMeta {
            name: Some("old".into()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        involved_object: ObjectReference {
            kind: Some("Node".into()),
            name: Some("n1".into()),
            ..Default::default()
        },
        count: Some(2),
        reason: Some("NodeReady".into()),
        ..Default::default()
    };
    let v1 = core_to_events_v1(core);
    assert_eq!(v1.event_time, None);
    assert_eq!(v1.deprecated_count, Some(2));
    assert_eq!(v1.reporting_controller, None);
    assert_eq!(v1.deprecated_source, Some(EventSource::default()));
    let v = serde_json::to_value(&v1).unwrap();
    assert_eq!(v["deprecatedSource"], json!({}));
    assert_eq!(v["regarding"], json!({"kind": "Node", "name": "n1"}));
}

#[test]
fn empty_values_follow_go_semantics() {
    // "", 0 and the zero time are "unset" in kube's internal type.
    let core = CoreEvent {
        action: Some(String::new()),
        count: Some(0),
        first_timestamp: Some(Time(GO_ZERO_TIME)),
        event_time: Some(MicroTime(GO_ZERO_TIME)),
        message: Some(String::new()),
        involved_object: ObjectReference {
            name: Some(String::new()),
            kind: Some("Pod".into()),
            ..Default::default()
        },
        reporting_component: None,
        reporting_instance: None,
        source: None,
        series: Some(CoreSeries {
            count: Some(0),
            last_observed_time: None,
        }),
        ..Default::default()
    };
    let norm = normalize_core(core.clone());
    assert_eq!(norm.action, None);
    assert_eq!(norm.count, None);
    assert_eq!(norm.first_timestamp, None);
    assert_eq!(norm.event_time, None);
    assert_eq!(norm.message, None);
    assert_eq!(norm.involved_object.name, None);
    assert_eq!(norm.involved_object.kind.as_deref(), Some("Pod"));
    // core/v1 always writes these two strings and the source struct.
    assert_eq!(norm.reporting_component.as_deref(), Some(""));
    assert_eq!(norm.reporting_instance.as_deref(), Some(""));
    assert_eq!(norm.source, Some(EventSource::default()));
    assert_eq!(
        norm.series,
        Some(CoreSeries {
            count: None,
            last_observed_time: None
        })
    );
    // A series without lastObservedTime has to carry Go's zero time on events.k8s.io/v1.
    let v1 = core_to_events_v1(core.clone());
    assert_eq!(
        v1.series,
        Some(V1Series {
            count: 0,
            last_observed_time: MicroTime(GO_ZERO_TIME)
        })
    );
    assert_eq!(events_v1_to_core(v1), norm);
}

#[test]
fn round_trip_core_is_exact_on_canonical_values() {
    let canonical = normalize_core(full_core());
    assert_eq!(canonical, full_core());
    assert_eq!(
        events_v1_to_core(core_to_events_v1(canonical.clone())),
        canonical
    );
}

#[test]
fn round_trip_events_v1_is_exact_on_canonical_values() {
    let v1 = EventsV1Event {
        action: Some("Scale".into()),
        deprecated_count: Some(4),
        deprecated_first_timestamp: Some(Time(ts("2026-05-05T05:05:05Z"))),
        deprecated_last_timestamp: Some(Time(ts("2026-05-05T06:05:05Z"))),
        deprecated_source: Some(EventSource {
            component: Some("legacy".into()),
            host: None,
        }),
        event_time: Some(MicroTime(ts("2026-05-05T05:05:05.000007Z"))),
        metadata: ObjectMeta {
            name: Some("a".into()),
            ..Default::default()
        },
        note: Some("scaled".into()),
        reason: Some("ScalingReplicaSet".into()),
        regarding: Some(pod_ref()),
        related: None,
        reporting_controller: Some("deployment-controller".into()),
        reporting_instance: Some("kcm-1".into()),
        series: Some(V1Series {
            count: 2,
            last_observed_time: MicroTime(ts("2026-05-05T06:05:05.5Z")),
        }),
        type_: Some("Normal".into()),
    };
    assert_eq!(normalize_events_v1(v1.clone()), v1);
    let core = events_v1_to_core(v1.clone());
    assert_eq!(core.count, Some(4));
    assert_eq!(
        core.source.as_ref().and_then(|s| s.component.as_deref()),
        Some("legacy")
    );
    assert_eq!(
        core.reporting_component.as_deref(),
        Some("deployment-controller")
    );
    assert_eq!(core_to_events_v1(core), v1);
}

#[test]
fn missing_regarding_becomes_empty_involved_object() {
    let v1 = EventsV1Event::default();
    let core = events_v1_to_core(v1.clone());
    assert_eq!(core.involved_object, ObjectReference::default());
    let back = core_to_events_v1(core);
    assert_eq!(back.regarding, Some(ObjectReference::default()));
    assert_eq!(back, normalize_events_v1(v1));
}

fn opt_str() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        Just(None),
        Just(Some(String::new())),
        "[a-z]{1,6}".prop_map(Some)
    ]
}

fn opt_count() -> impl Strategy<Value = Option<i32>> {
    prop_oneof![Just(None), Just(Some(0)), (1i32..100).prop_map(Some)]
}

fn opt_secs() -> impl Strategy<Value = Option<Timestamp>> {
    prop_oneof![
        Just(None),
        Just(Some(GO_ZERO_TIME)),
        (0i64..2_000_000_000).prop_map(|s| Some(Timestamp::from_second(s).unwrap())),
    ]
}

fn opt_micros() -> impl Strategy<Value = Option<Timestamp>> {
    prop_oneof![
        Just(None),
        Just(Some(GO_ZERO_TIME)),
        (0i64..2_000_000_000_000_000).prop_map(|us| Some(Timestamp::from_microsecond(us).unwrap())),
    ]
}

fn reference() -> impl Strategy<Value = ObjectReference> {
    (
        opt_str(),
        opt_str(),
        opt_str(),
        opt_str(),
        opt_str(),
        opt_str(),
        opt_str(),
    )
        .prop_map(|(a, f, k, n, ns, rv, u)| ObjectReference {
            api_version: a,
            field_path: f,
            kind: k,
            name: n,
            namespace: ns,
            resource_version: rv,
            uid: u,
        })
}

fn core_event() -> impl Strategy<Value = CoreEvent> {
    let strings = (
        opt_str(),
        opt_str(),
        opt_str(),
        opt_str(),
        opt_str(),
        opt_str(),
    );
    let times = (opt_secs(), opt_secs(), opt_micros(), opt_count());
    let refs = (
        reference(),
        proptest::option::of(reference()),
        proptest::option::of((opt_str(), opt_str())),
        proptest::option::of((opt_count(), opt_micros())),
    );
    (strings, times, refs).prop_map(
        |(
            (action, message, reason, rc, ri, ty),
            (first, last, et, count),
            (io, related, src, series),
        )| CoreEvent {
            action,
            count,
            event_time: et.map(MicroTime),
            first_timestamp: first.map(Time),
            involved_object: io,
            last_timestamp: last.map(Time),
            message,
            metadata: ObjectMeta::default(),
            reason,
            related,
            reporting_component: rc,
            reporting_instance: ri,
            series: series.map(|(c, t)| CoreSeries {
                count: c,
                last_observed_time: t.map(MicroTime),
            }),
            source: src.map(|(component, host)| EventSource { component, host }),
            type_: ty,
        },
    )
}

proptest! {
    #[test]
    fn core_round_trip_equals_normal_form(e in core_event()) {
        let norm = normalize_core(e.clone());
        prop_assert_eq!(events_v1_to_core(core_to_events_v1(e)), norm.clone());
        // The normal form is a fixed point.
        prop_assert_eq!(normalize_core(norm.clone()), norm);
    }

    #[test]
    fn events_v1_round_trip_equals_normal_form(e in core_event()) {
        let v1 = core_to_events_v1(e);
        // Perturb into a non-canonical events.k8s.io/v1 value as a client might send it.
        let mut sent = v1.clone();
        if sent.reporting_controller.is_none() { sent.reporting_controller = Some(String::new()); }
        if sent.deprecated_count.is_none() { sent.deprecated_count = Some(0); }
        prop_assert_eq!(core_to_events_v1(events_v1_to_core(sent.clone())), normalize_events_v1(sent));
        prop_assert_eq!(core_to_events_v1(events_v1_to_core(v1.clone())), v1);
    }
}
