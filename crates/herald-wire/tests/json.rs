//! The exact JSON kube-apiserver writes for an event in each group ([`herald_wire::json`]).

use herald_core::event::convert::core_to_events_v1;
use herald_core::event::{ApiGroup, CoreEvent};
use herald_wire::json::{core_v1_json, event_json, events_v1_json, events_v1_json_of};
use k8s_openapi::api::core::v1::{EventSeries as CoreSeries, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

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
fn core_json_matches_kube_apiserver_shape() {
    let legacy = CoreEvent {
        metadata: ObjectMeta {
            name: Some("n".into()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        reason: Some("Started".into()),
        ..Default::default()
    };
    let v = core_v1_json(&legacy);
    assert_eq!(v["kind"], "Event");
    assert_eq!(v["apiVersion"], "v1");
    assert_eq!(v["involvedObject"], json!({}));
    assert_eq!(v["source"], json!({}));
    assert_eq!(v["reportingComponent"], "");
    assert_eq!(v["reportingInstance"], "");
    assert_eq!(v["firstTimestamp"], Value::Null);
    assert_eq!(v["lastTimestamp"], Value::Null);
    assert_eq!(v["eventTime"], Value::Null);
    assert!(v.as_object().unwrap().contains_key("eventTime"));
    assert!(v.get("count").is_none());
    assert!(v.get("series").is_none());
    assert!(v.get("related").is_none());
    assert_eq!(event_json(ApiGroup::Core, &legacy), v);
}

#[test]
fn events_v1_json_matches_kube_apiserver_shape() {
    let legacy = CoreEvent {
        reason: Some("Started".into()),
        series: Some(CoreSeries {
            count: Some(3),
            last_observed_time: None,
        }),
        ..Default::default()
    };
    let v = events_v1_json(&legacy);
    assert_eq!(v["apiVersion"], "events.k8s.io/v1");
    assert_eq!(v["kind"], "Event");
    assert_eq!(v["regarding"], json!({}));
    assert_eq!(v["deprecatedSource"], json!({}));
    assert_eq!(v["eventTime"], Value::Null);
    assert_eq!(v["deprecatedFirstTimestamp"], Value::Null);
    assert_eq!(v["deprecatedLastTimestamp"], Value::Null);
    assert_eq!(v["series"], json!({"count": 3, "lastObservedTime": null}));
    assert!(v.get("reportingController").is_none());
    assert!(v.get("involvedObject").is_none());
    assert_eq!(event_json(ApiGroup::EventsV1, &legacy), v);
    // Set times are written as usual.
    let full = events_v1_json_of(&core_to_events_v1(full_core()));
    assert_eq!(full["eventTime"], "2026-01-02T03:04:05.123456Z");
    assert_eq!(
        full["series"]["lastObservedTime"],
        "2026-01-02T03:09:05.654321Z"
    );
    assert_eq!(full["deprecatedCount"], 7);
}
