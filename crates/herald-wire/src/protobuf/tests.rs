//! Unit tests of the protobuf codec. The golden byte strings are assembled by hand from the
//! field numbers in `k8s.io/apimachinery`'s and `k8s.io/api`'s `generated.proto`, not by prost,
//! so they check the wire format itself.

use super::convert::*;
use super::*;
use serde_json::json;

/// A varint, as the protobuf wire format writes it.
fn varint(mut n: u64) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let b = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(b);
            return out;
        }
        out.push(b | 0x80);
    }
}

/// Field `tag` as a length-delimited value (wire type 2).
fn ld(tag: u64, bytes: &[u8]) -> Vec<u8> {
    let mut out = varint(tag << 3 | 2);
    out.extend(varint(bytes.len() as u64));
    out.extend_from_slice(bytes);
    out
}

/// Field `tag` as a varint value (wire type 0).
fn vi(tag: u64, n: u64) -> Vec<u8> {
    let mut out = varint(tag << 3);
    out.extend(varint(n));
    out
}

#[test]
fn the_envelope_is_magic_then_runtime_unknown() {
    let got = wrap("v1", "Event", vec![0xAA]);
    let mut want = b"k8s\0".to_vec();
    // Unknown: typeMeta = 1 {apiVersion = 1, kind = 2}, raw = 2, contentEncoding = 3,
    // contentType = 4 (kube-apiserver writes the empty strings too).
    let type_meta = [ld(1, b"v1"), ld(2, b"Event")].concat();
    want.extend([ld(1, &type_meta), ld(2, &[0xAA]), ld(3, b""), ld(4, b"")].concat());
    assert_eq!(got, want);
    let u = unwrap(&got, "Event").unwrap();
    assert_eq!((u.api_version.as_str(), u.kind.as_str()), ("v1", "Event"));
    assert_eq!(u.raw, vec![0xAA]);
}

#[test]
fn a_watch_frame_is_a_big_endian_length_then_a_bare_watch_event() {
    let got = watch_frame("ADDED", vec![1, 2, 3]);
    // WatchEvent: type = 1, object = 2 (RawExtension: raw = 1).
    let body = [ld(1, b"ADDED"), ld(2, &ld(1, &[1, 2, 3]))].concat();
    let mut want = (body.len() as u32).to_be_bytes().to_vec();
    want.extend(body);
    assert_eq!(got, want);
}

/// A core/v1 Event as client-go would send it, assembled field by field.
fn hand_made_core_event() -> Vec<u8> {
    let t = 1_700_000_000u64;
    let meta = [
        ld(1, b"pod-a.1"),
        ld(3, b"ns"),
        ld(11, &[ld(1, b"app"), ld(2, b"web")].concat()),
    ]
    .concat();
    let involved = [ld(1, b"Pod"), ld(3, b"pod-a"), ld(2, b"ns")].concat();
    [
        ld(1, &meta),
        ld(2, &involved),
        ld(3, b"Started"),
        ld(4, b"Started container"),
        ld(5, &ld(1, b"kubelet")),
        ld(6, &vi(1, t)),
        // lastTimestamp: Go's zero time is an empty message.
        ld(7, b""),
        vi(8, 3),
        ld(9, b"Normal"),
        ld(10, &[vi(1, t), vi(2, 123_456_000)].concat()),
    ]
    .concat()
}

#[test]
fn a_hand_made_core_event_decodes_to_its_json() {
    let body = wrap("v1", "Event", hand_made_core_event());
    let json: Value =
        serde_json::from_slice(&event_body_json(ApiGroup::Core, &body).unwrap()).unwrap();
    assert_eq!(json["apiVersion"], "v1");
    assert_eq!(json["kind"], "Event");
    assert_eq!(json["metadata"]["name"], "pod-a.1");
    assert_eq!(json["metadata"]["namespace"], "ns");
    assert_eq!(json["metadata"]["labels"]["app"], "web");
    assert_eq!(json["involvedObject"]["kind"], "Pod");
    assert_eq!(json["involvedObject"]["name"], "pod-a");
    assert_eq!(json["reason"], "Started");
    assert_eq!(json["message"], "Started container");
    assert_eq!(json["source"]["component"], "kubelet");
    assert_eq!(json["firstTimestamp"], "2023-11-14T22:13:20Z");
    assert!(
        json.get("lastTimestamp").is_none_or(Value::is_null),
        "{json}"
    );
    assert_eq!(json["count"], 3);
    assert_eq!(json["type"], "Normal");
    assert_eq!(json["eventTime"], "2023-11-14T22:13:20.123456Z");
}

#[test]
fn the_envelope_names_the_type() {
    let e =
        event_body_json(ApiGroup::Core, &wrap("v1", "Pod", hand_made_core_event())).unwrap_err();
    assert_eq!(e.code, 400);
    assert_eq!(
        e.message,
        "the kind in the data (Pod) does not match the expected kind (Event)"
    );
    let e = event_body_json(
        ApiGroup::EventsV1,
        &wrap("v1", "Event", hand_made_core_event()),
    )
    .unwrap_err();
    assert_eq!(
        e.message,
        "the API version in the data (v1) does not match the expected API version (events.k8s.io/v1)"
    );
    // An envelope without a type is read as the URL's.
    let untyped = wrap("", "", hand_made_core_event());
    let json: Value =
        serde_json::from_slice(&event_body_json(ApiGroup::Core, &untyped).unwrap()).unwrap();
    assert_eq!(
        (&json["apiVersion"], &json["kind"]),
        (&json!("v1"), &json!("Event"))
    );
    assert_eq!(json["reason"], "Started");
}

#[test]
fn bodies_that_are_not_protobuf_are_400s_that_say_why() {
    let e = unwrap(br#"{"kind":"Event"}"#, "Event").unwrap_err();
    assert_eq!(e.code, 400);
    assert_eq!(
        e.message,
        r#"the object provided is unrecognized (must be of type Event): provided data does not appear to be a protobuf message, expected prefix [107 56 115 0] ({"kind":"Event"})"#
    );
    let long: Vec<u8> = (0u8..40).collect();
    let e = unwrap(&long, "DeleteOptions").unwrap_err();
    assert!(
        e.message.ends_with(
            "(must be of type DeleteOptions): provided data does not appear to be a protobuf message, expected prefix [107 56 115 0] (000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d ...)"
        ),
        "{}",
        e.message
    );
    assert!(
        unwrap(b"", "Event")
            .unwrap_err()
            .message
            .ends_with("(<empty>)")
    );

    let mut truncated = b"k8s\0".to_vec();
    truncated.extend([0x0a, 0x7f, 0x01]);
    let e = unwrap(&truncated, "Event").unwrap_err();
    assert_eq!(e.code, 400);
    assert!(e.message.contains("not a runtime.Unknown"), "{}", e.message);

    let mut gz = b"k8s\0".to_vec();
    gz.extend([ld(2, b"x"), ld(3, b"gzip")].concat());
    let e = unwrap(&gz, "Event").unwrap_err();
    assert!(
        e.message.contains("contentEncoding \"gzip\""),
        "{}",
        e.message
    );

    // The envelope is fine but its raw bytes are not an Event.
    let e = event_body_json(
        ApiGroup::EventsV1,
        &wrap("events.k8s.io/v1", "Event", vec![0x0a, 0x09]),
    )
    .unwrap_err();
    assert_eq!(e.code, 400);
    assert!(
        e.message
            .starts_with("Event in version \"v1\" cannot be handled as a Event"),
        "{}",
        e.message
    );
}

const CORE_JSON: &str = r#"{
  "apiVersion": "v1", "kind": "Event",
  "metadata": {
    "name": "pod-a.1", "namespace": "ns", "uid": "u-1", "resourceVersion": "42",
    "generateName": "pod-a.", "generation": 2,
    "creationTimestamp": "2024-01-02T03:04:05Z",
    "deletionTimestamp": "2024-01-02T03:04:06Z", "deletionGracePeriodSeconds": 0,
    "labels": {"a": "1"}, "annotations": {"b": "2"}, "finalizers": ["example.com/hold"],
    "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "pod-a", "uid": "p-1", "controller": true}],
    "managedFields": [{"manager": "kubectl", "operation": "Update", "apiVersion": "v1",
      "time": "2024-01-02T03:04:05Z", "fieldsType": "FieldsV1",
      "fieldsV1": {"f:reason": {}, "f:count": {}}}]
  },
  "involvedObject": {"kind": "Pod", "namespace": "ns", "name": "pod-a", "uid": "p-1",
    "apiVersion": "v1", "resourceVersion": "7", "fieldPath": "spec.containers{c}"},
  "reason": "BackOff", "message": "Back-off restarting failed container",
  "source": {"component": "kubelet", "host": "node-1"},
  "firstTimestamp": "2024-01-02T03:04:05Z", "lastTimestamp": "2024-01-02T03:05:05Z",
  "count": 5, "type": "Warning", "eventTime": "2024-01-02T03:04:05.123456Z",
  "series": {"count": 4, "lastObservedTime": "2024-01-02T03:05:05.654321Z"},
  "action": "Restart",
  "related": {"kind": "Node", "name": "node-1"},
  "reportingComponent": "kubelet", "reportingInstance": "node-1"
}"#;

#[test]
fn every_core_field_survives_the_round_trip() {
    let e: oc::Event = serde_json::from_str(CORE_JSON).unwrap();
    let bytes = core_event_to_pb(e.clone()).encode_to_vec();
    let back = core_event_from_pb(k8s_pb::api::core::v1::Event::decode(&bytes[..]).unwrap());
    assert_eq!(back, e);
}

#[test]
fn every_events_v1_field_survives_the_round_trip() {
    let e: oe::Event = serde_json::from_str(
        r#"{
          "apiVersion": "events.k8s.io/v1", "kind": "Event",
          "metadata": {"name": "x.1", "namespace": "ns", "labels": {"a": "1"}},
          "eventTime": "2024-01-02T03:04:05.123456Z",
          "series": {"count": 2, "lastObservedTime": "2024-01-02T03:05:05.000001Z"},
          "reportingController": "example.com/ctl", "reportingInstance": "ctl-1",
          "action": "Sync", "reason": "Synced",
          "regarding": {"kind": "Deployment", "name": "web", "namespace": "ns"},
          "related": {"kind": "ReplicaSet", "name": "web-1"},
          "note": "synced", "type": "Normal",
          "deprecatedSource": {"component": "ctl"},
          "deprecatedFirstTimestamp": "2024-01-02T03:04:05Z",
          "deprecatedLastTimestamp": "2024-01-02T03:04:06Z",
          "deprecatedCount": 3
        }"#,
    )
    .unwrap();
    let bytes = events_event_to_pb(e.clone()).encode_to_vec();
    let back = events_event_from_pb(k8s_pb::api::events::v1::Event::decode(&bytes[..]).unwrap());
    assert_eq!(back, e);
}

#[test]
fn go_zero_time_is_an_empty_message_and_reads_back_as_unset() {
    let mut e: oc::Event = serde_json::from_str(CORE_JSON).unwrap();
    e.first_timestamp = Some(om::Time(herald_core::event::convert::GO_ZERO_TIME));
    let pb = core_event_to_pb(e);
    assert_eq!(pb.first_timestamp, Some(pm::Time::default()));
    assert!(pb.encode_to_vec().windows(2).any(|w| w == [6 << 3 | 2, 0]));
    assert_eq!(core_event_from_pb(pb).first_timestamp, None);
}

#[test]
fn json_responses_transcode_by_kind() {
    // A Status, as every error is sent.
    let err = ApiError::bad_request("nope");
    let json = serde_json::to_vec(&err.to_json()).unwrap();
    let pb = transcode_json(&json).unwrap();
    let u = unwrap(&pb, "Status").unwrap();
    assert_eq!((u.api_version.as_str(), u.kind.as_str()), ("v1", "Status"));
    let status = pm::Status::decode(&u.raw[..]).unwrap();
    assert_eq!(status.code, Some(400));
    assert_eq!(status.reason.as_deref(), Some("BadRequest"));
    assert_eq!(status.message.as_deref(), Some("nope"));

    // An events.k8s.io list whose series has no lastObservedTime (written as null).
    let list = br#"{"kind":"EventList","apiVersion":"events.k8s.io/v1","metadata":{"resourceVersion":"9","continue":"c"},
      "items":[{"metadata":{"name":"a"},"eventTime":null,"series":{"count":2,"lastObservedTime":null}}]}"#;
    let u = unwrap(&transcode_json(list).unwrap(), "EventList").unwrap();
    assert_eq!(u.kind, "EventList");
    let l = k8s_pb::api::events::v1::EventList::decode(&u.raw[..]).unwrap();
    let meta = l.metadata.unwrap();
    assert_eq!(meta.resource_version.as_deref(), Some("9"));
    assert_eq!(meta.r#continue.as_deref(), Some("c"));
    assert_eq!(l.items.len(), 1);
    let series = l.items[0].series.unwrap();
    assert_eq!(series.count, Some(2));
    assert_eq!(series.last_observed_time, Some(pm::MicroTime::default()));

    // What is not an event, a list of them or a Status stays JSON.
    assert!(transcode_json(br#"{"kind":"APIResourceList","apiVersion":"v1"}"#).is_none());
    assert!(transcode_json(b"not json").is_none());
}

#[test]
fn delete_options_decode_to_their_json() {
    let opts = pm::DeleteOptions {
        preconditions: Some(pm::Preconditions {
            uid: Some("u-1".into()),
            resource_version: None,
        }),
        propagation_policy: Some("Background".into()),
        dry_run: vec!["All".into()],
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    let body = wrap("v1", "DeleteOptions", opts.encode_to_vec());
    let v: Value = serde_json::from_slice(&delete_options_json(&body).unwrap()).unwrap();
    assert_eq!(v["preconditions"]["uid"], "u-1");
    assert_eq!(v["propagationPolicy"], "Background");
    assert_eq!(v["dryRun"], serde_json::json!(["All"]));
    assert_eq!(v["gracePeriodSeconds"], 0);

    let e = delete_options_json(&wrap("v1", "Event", Vec::new())).unwrap_err();
    assert_eq!(e.code, 400);
    assert!(
        e.message
            .contains("(Event) does not match the expected kind (DeleteOptions)")
    );
}

#[test]
fn a_bookmark_carries_only_its_resource_version_and_the_end_annotation() {
    let u = unwrap(&bookmark_object(ApiGroup::Core, "17", true), "Event").unwrap();
    let e = k8s_pb::api::core::v1::Event::decode(&u.raw[..]).unwrap();
    let meta = e.metadata.unwrap();
    assert_eq!(meta.resource_version.as_deref(), Some("17"));
    assert_eq!(
        meta.annotations
            .get(INITIAL_EVENTS_END_ANNOTATION)
            .map(String::as_str),
        Some("true")
    );
    assert_eq!(e.involved_object, None);
}

#[test]
fn time_is_whole_seconds_and_micro_time_keeps_its_fraction() {
    let mut e: oc::Event = serde_json::from_str(CORE_JSON).unwrap();
    let t = k8s_openapi::jiff::Timestamp::new(1_700_000_000, 123_456_789).unwrap();
    e.first_timestamp = Some(om::Time(t));
    e.event_time = Some(om::MicroTime(t));
    let pb = core_event_to_pb(e);
    let first = pb.first_timestamp.unwrap();
    assert_eq!((first.seconds, first.nanos), (Some(1_700_000_000), Some(0)));
    let event_time = pb.event_time.unwrap();
    assert_eq!(event_time.nanos, Some(123_456_789));
    // Go ignores a Time's nanos when reading; so does Herald.
    let back = core_event_from_pb(k8s_pb::api::core::v1::Event {
        first_timestamp: Some(pm::Time {
            seconds: Some(1_700_000_000),
            nanos: Some(999),
        }),
        ..Default::default()
    });
    assert_eq!(back.first_timestamp.unwrap().0.subsec_nanosecond(), 0);
}

/// Go writes `Unix()` (floored) and a non-negative `Nanosecond()`; jiff counts a time
/// before 1970 toward zero. Half a second before the epoch is -1 s + 0.5 s on the wire.
#[test]
fn a_time_before_1970_has_floored_seconds_and_positive_nanos() {
    let mut e: oc::Event = serde_json::from_str(CORE_JSON).unwrap();
    let t = k8s_openapi::jiff::Timestamp::new(0, -500_000_000).unwrap();
    e.event_time = Some(om::MicroTime(t));
    let pb = core_event_to_pb(e);
    let event_time = pb.event_time.unwrap();
    assert_eq!(
        (event_time.seconds, event_time.nanos),
        (Some(-1), Some(500_000_000))
    );
    assert_eq!(core_event_from_pb(pb).event_time, Some(om::MicroTime(t)));
}

#[test]
fn a_time_with_any_field_is_a_time_and_an_empty_one_is_unset() {
    let read = |time: pm::Time, micro: pm::MicroTime| {
        core_event_from_pb(k8s_pb::api::core::v1::Event {
            first_timestamp: Some(time),
            event_time: Some(micro),
            ..Default::default()
        })
    };
    // Go: `time.Unix(seconds, nanos)` once the message has any bytes, so nanos alone is the
    // epoch (plus the nanos for a MicroTime; a Time drops them).
    let e = read(
        pm::Time {
            seconds: None,
            nanos: Some(5_000),
        },
        pm::MicroTime {
            seconds: None,
            nanos: Some(5_000),
        },
    );
    let first = e.first_timestamp.unwrap().0;
    assert_eq!((first.as_second(), first.subsec_nanosecond()), (0, 0));
    let event_time = e.event_time.unwrap().0;
    assert_eq!(
        (event_time.as_second(), event_time.subsec_nanosecond()),
        (0, 5_000)
    );
    // An empty message is Go's zero time: unset.
    let e = read(pm::Time::default(), pm::MicroTime::default());
    assert_eq!((e.first_timestamp, e.event_time), (None, None));
}

#[test]
fn an_empty_body_or_the_magic_alone_is_kubes_empty_data_or_empty_body() {
    let message = |body: &[u8]| unwrap(body, "Event").unwrap_err().message;
    assert_eq!(
        message(b""),
        "the object provided is unrecognized (must be of type Event): empty data (<empty>)"
    );
    assert_eq!(
        message(b"k8s\0"),
        "the object provided is unrecognized (must be of type Event): empty body (6b387300)"
    );
}

/// A protobuf body decoded straight to the event equals what the JSON path makes of it.
fn direct_and_through_json(group: ApiGroup, body: &[u8]) -> (CoreEvent, CoreEvent) {
    let direct = match event_body(group, body).unwrap() {
        EventBody::Event(e) => e,
        EventBody::Json(_) => panic!("{group:?}: a body in range went to JSON"),
    };
    let json = event_body_json(group, body).unwrap();
    let through_json = crate::body::decode_json_body(group, std::str::from_utf8(&json).unwrap())
        .expect("the JSON path decodes it");
    (direct, through_json)
}

fn pb_bodies(e: &CoreEvent) -> [(ApiGroup, Vec<u8>); 2] {
    [
        (
            ApiGroup::Core,
            wrap("v1", "Event", core_event_to_pb(e.clone()).encode_to_vec()),
        ),
        (
            ApiGroup::EventsV1,
            wrap(
                "events.k8s.io/v1",
                "Event",
                events_event_to_pb(core_to_events_v1(e.clone())).encode_to_vec(),
            ),
        ),
    ]
}

#[test]
fn micro_times_keep_whole_microseconds_as_through_json() {
    use k8s_openapi::jiff::Timestamp;
    for (secs, nanos) in [
        (1_700_000_000, 123_456_789),
        (0, -500),              // just before the epoch
        (-62_135_596_800, 999), // 999 ns after Go's zero time: unset, as its text is
    ] {
        let t = Timestamp::new(secs, nanos).unwrap();
        let mut e = CoreEvent {
            event_time: Some(om::MicroTime(t)),
            series: Some(oc::EventSeries {
                count: Some(2),
                last_observed_time: Some(om::MicroTime(t)),
            }),
            ..serde_json::from_str(CORE_JSON).unwrap()
        };
        // As kube's components send events: without managedFields.
        e.metadata.managed_fields = None;
        for (group, body) in pb_bodies(&e) {
            let (direct, through_json) = direct_and_through_json(group, &body);
            assert_eq!(direct, through_json, "{group:?} {t}");
        }
    }
}

/// Times just after Go's zero time, as a client may send them: the answer from the event
/// equals the transcoded JSON answer (whose text has whole seconds or microseconds).
#[test]
fn answers_near_go_zero_time_are_the_transcoded_json_answers() {
    use herald_core::event::convert::GO_ZERO_TIME;
    use k8s_openapi::jiff::{SignedDuration, Timestamp};
    let after = |nanos: i64| -> Timestamp { GO_ZERO_TIME + SignedDuration::from_nanos(nanos) };
    let mut e: CoreEvent = serde_json::from_str(CORE_JSON).unwrap();
    e.event_time = Some(om::MicroTime(after(5)));
    e.series = Some(oc::EventSeries {
        count: Some(2),
        last_observed_time: Some(om::MicroTime(after(999))),
    });
    e.first_timestamp = Some(om::Time(after(500_000_000)));
    e.metadata.creation_timestamp = Some(om::Time(after(1)));
    for group in [ApiGroup::Core, ApiGroup::EventsV1] {
        let json = serde_json::to_vec(&crate::json::event_json(group, &e)).unwrap();
        let want = transcode_json(&json).expect("transcodes");
        assert!(event_object(group, &e) == want, "{group:?}");
    }
}

/// `managedFields` are read by the JSON path inside the event (its nesting limit, `null` as
/// a reset), so a body with them goes there, nested or not.
#[test]
fn a_body_with_managed_fields_goes_through_json() {
    let mut e: CoreEvent = serde_json::from_str(CORE_JSON).unwrap();
    let mut deep = json!({});
    for _ in 0..126 {
        deep = json!({ "f:a": deep });
    }
    e.metadata.managed_fields = Some(vec![om::ManagedFieldsEntry {
        fields_v1: Some(om::FieldsV1(deep)),
        manager: Some("m".into()),
        ..Default::default()
    }]);
    for (group, body) in pb_bodies(&e) {
        assert!(
            matches!(event_body(group, &body).unwrap(), EventBody::Json(_)),
            "{group:?}"
        );
    }
    // Shallow ones too.
    let e: CoreEvent = serde_json::from_str(CORE_JSON).unwrap();
    assert!(e.metadata.managed_fields.is_some());
    for (group, body) in pb_bodies(&e) {
        assert!(
            matches!(event_body(group, &body).unwrap(), EventBody::Json(_)),
            "{group:?}"
        );
    }
}

#[test]
fn a_time_outside_years_0_to_9999_goes_through_json() {
    // Only the start of the range needs a check: jiff's latest time is in year 9999.
    let last = k8s_openapi::jiff::Timestamp::MAX;
    assert!(last.to_string().starts_with("9999-") && in_text_range(last));
    assert!(!in_text_range(k8s_openapi::jiff::Timestamp::constant(
        -62_167_219_200,
        -1
    )));
    let t = k8s_openapi::jiff::Timestamp::new(-62_167_219_201, 0).unwrap();
    let e = CoreEvent {
        first_timestamp: Some(om::Time(t)),
        ..serde_json::from_str(CORE_JSON).unwrap()
    };
    let [(group, body), _] = pb_bodies(&e);
    assert!(matches!(
        event_body(group, &body).unwrap(),
        EventBody::Json(_)
    ));
}

proptest::proptest! {
    #[test]
    fn any_protobuf_body_decodes_as_through_json(e in crate::any_event()) {
        // With managedFields a body goes through JSON (tested above).
        let mut e = e;
        e.metadata.managed_fields = None;
        for (group, body) in pb_bodies(&e) {
            let (direct, through_json) = direct_and_through_json(group, &body);
            proptest::prop_assert_eq!(direct, through_json);
        }
    }
}

proptest::proptest! {
    /// A handler that answers a protobuf client from the event (a create, update, patch or
    /// held delete) sends what the output layer would make of its JSON answer.
    #[test]
    fn an_answer_from_the_event_is_the_transcoded_json_answer(
        e in crate::any_event(),
        revision in 1u64..u64::MAX,
    ) {
        // As a write handler has it: the written event in memory, its times as the client
        // sent them (to the nanosecond), its resourceVersion set.
        let mut e = e;
        e.metadata.resource_version = Some(revision.to_string());
        for group in [ApiGroup::Core, ApiGroup::EventsV1] {
            let json = serde_json::to_vec(&crate::json::event_json(group, &e)).unwrap();
            let want = transcode_json(&json).expect("an event's JSON transcodes");
            proptest::prop_assert!(event_object(group, &e) == want, "{:?}", group);
        }
    }
}
