//! The exact JSON kube-apiserver writes for an event in each group ([`herald_wire::json`]).

use herald_core::event::convert::core_to_events_v1;
use herald_core::event::{ApiGroup, CoreEvent};
use herald_wire::json::{core_v1_json, event_json, events_v1_json, events_v1_json_of};
use k8s_openapi::api::core::v1::EventSeries as CoreSeries;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

/// An event with the times and counts the events.k8s.io/v1 shape renames set.
fn counted() -> CoreEvent {
    let at = |s: &str| s.parse::<Timestamp>().unwrap();
    CoreEvent {
        count: Some(7),
        event_time: Some(MicroTime(at("2026-01-02T03:04:05.123456Z"))),
        series: Some(CoreSeries {
            count: Some(5),
            last_observed_time: Some(MicroTime(at("2026-01-02T03:09:05.654321Z"))),
        }),
        ..Default::default()
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
    let full = events_v1_json_of(&core_to_events_v1(counted()));
    assert_eq!(full["eventTime"], "2026-01-02T03:04:05.123456Z");
    assert_eq!(
        full["series"]["lastObservedTime"],
        "2026-01-02T03:09:05.654321Z"
    );
    assert_eq!(full["deprecatedCount"], 7);
}
