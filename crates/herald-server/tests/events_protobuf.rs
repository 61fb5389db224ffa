//! Protobuf clients over real HTTP, as client-go configured with
//! `ContentType: application/vnd.kubernetes.protobuf` talks: bodies wrapped in `k8s\0` +
//! `runtime.Unknown`, protobuf answers (objects, lists, `Status`es) and length-framed watches.
//! The client side here is written against `k8s-pb` directly, not the server's codec; every
//! protobuf answer is checked against the same object read as JSON.

mod events_support;

use events_support::*;
use k8s_pb::api::core::v1 as pc;
use k8s_pb::api::events::v1 as pe;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as pm;
use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
use prost::Message;
use serde_json::{Value, json};

const PB: &str = "application/vnd.kubernetes.protobuf";
/// client-go's typed clientset.
const PB_JSON: &str = "application/vnd.kubernetes.protobuf,application/json";

fn wrap(api_version: &str, kind: &str, msg: &impl Message) -> Vec<u8> {
    let u = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some(api_version.into()),
            kind: Some(kind.into()),
        }),
        raw: Some(msg.encode_to_vec()),
        content_encoding: None,
        content_type: None,
    };
    let mut out = b"k8s\0".to_vec();
    out.extend(u.encode_to_vec());
    out
}

/// `(apiVersion, kind, raw)` of a protobuf answer.
fn unwrap(r: &Resp) -> (String, String, Vec<u8>) {
    assert_eq!(
        r.headers["content-type"],
        PB,
        "status {}: {}",
        r.status,
        r.text()
    );
    unwrap_bytes(&r.body)
}

fn unwrap_bytes(b: &[u8]) -> (String, String, Vec<u8>) {
    let rest = b.strip_prefix(b"k8s\0").expect("the k8s magic");
    let u = Unknown::decode(rest).expect("a runtime.Unknown");
    let tm = u.type_meta.unwrap_or_default();
    (
        tm.api_version.unwrap_or_default(),
        tm.kind.unwrap_or_default(),
        u.raw.unwrap_or_default(),
    )
}

fn pb_status(r: &Resp, code: u16, reason: &str) -> pm::Status {
    assert_eq!(r.status, code, "{:?}", r.body);
    let (av, kind, raw) = unwrap(r);
    assert_eq!((av.as_str(), kind.as_str()), ("v1", "Status"));
    let s = pm::Status::decode(&raw[..]).unwrap();
    assert_eq!(s.code, Some(i32::from(code)), "{s:?}");
    assert_eq!(s.reason.as_deref(), Some(reason), "{s:?}");
    s
}

fn time(seconds: i64) -> Option<pm::Time> {
    Some(pm::Time {
        seconds: Some(seconds),
        nanos: Some(0),
    })
}

fn core_pb(name: &str, ns: &str) -> pc::Event {
    pc::Event {
        metadata: Some(pm::ObjectMeta {
            name: Some(name.into()),
            namespace: Some(ns.into()),
            labels: [("app".to_string(), "web".to_string())].into(),
            ..Default::default()
        }),
        involved_object: Some(pc::ObjectReference {
            kind: Some("Pod".into()),
            name: Some("web-0".into()),
            namespace: Some(ns.into()),
            api_version: Some("v1".into()),
            uid: Some("p-1".into()),
            ..Default::default()
        }),
        reason: Some("BackOff".into()),
        message: Some("Back-off restarting failed container".into()),
        source: Some(pc::EventSource {
            component: Some("kubelet".into()),
            host: Some("node-1".into()),
        }),
        // 2026-11-21T23:59:00Z and 23:59:30Z.
        first_timestamp: time(1_795_305_540),
        last_timestamp: time(1_795_305_570),
        count: Some(4),
        r#type: Some("Warning".into()),
        // Go's zero time, as client-go sends an unset `metav1.MicroTime` value.
        event_time: Some(pm::MicroTime::default()),
        ..Default::default()
    }
}

async fn send_pb(http: &Http, method: &str, path: &str, accept: &str, body: Vec<u8>) -> Resp {
    http.send(method, path, Some(PB), Some(accept), body).await
}

#[tokio::test]
async fn a_protobuf_client_creates_reads_updates_and_deletes_core_events() {
    let (server, _clock) = memory().await;
    let http = Http::new(&server);
    let path = core_path("ns1");

    let created = send_pb(
        &http,
        "POST",
        &path,
        PB_JSON,
        wrap("v1", "Event", &core_pb("web-0.1", "ns1")),
    )
    .await;
    assert_eq!(created.status, 201, "{}", created.text());
    let (av, kind, raw) = unwrap(&created);
    assert_eq!((av.as_str(), kind.as_str()), ("v1", "Event"));
    let created = pc::Event::decode(&raw[..]).unwrap();
    let meta = created.metadata.clone().unwrap();
    assert!(meta.uid.as_deref().is_some_and(|u| !u.is_empty()));
    assert!(meta.creation_timestamp.is_some());

    // The same event as JSON: every field the protobuf body carried was stored.
    let json = http.get(&format!("{path}/web-0.1")).await.json();
    assert_eq!(json["reason"], "BackOff");
    assert_eq!(json["message"], "Back-off restarting failed container");
    assert_eq!(json["count"], 4);
    assert_eq!(json["type"], "Warning");
    assert_eq!(json["firstTimestamp"], "2026-11-21T23:59:00Z");
    assert_eq!(json["lastTimestamp"], "2026-11-21T23:59:30Z");
    assert_eq!(json["eventTime"], Value::Null, "a zero MicroTime is unset");
    assert_eq!(json["involvedObject"]["name"], "web-0");
    assert_eq!(json["source"]["host"], "node-1");
    assert_eq!(json["metadata"]["labels"]["app"], "web");
    assert_eq!(json["metadata"]["uid"], meta.uid.clone().unwrap());
    assert_eq!(
        json["metadata"]["resourceVersion"],
        meta.resource_version.clone().unwrap()
    );

    // Read back as protobuf only: the same message the create answered.
    let got = http.get_accept(&format!("{path}/web-0.1"), PB).await;
    let (_, _, raw) = unwrap(&got);
    assert_eq!(pc::Event::decode(&raw[..]).unwrap(), created);

    // A list.
    let list = http.get_accept(&path, PB_JSON).await;
    let (av, kind, raw) = unwrap(&list);
    assert_eq!((av.as_str(), kind.as_str()), ("v1", "EventList"));
    let list = pc::EventList::decode(&raw[..]).unwrap();
    assert_eq!(list.items, vec![created.clone()]);
    assert!(list.metadata.unwrap().resource_version.is_some());

    // An update (PUT) with a protobuf body.
    let mut changed = created.clone();
    changed.count = Some(5);
    changed.message = Some("still failing".into());
    let updated = send_pb(
        &http,
        "PUT",
        &format!("{path}/web-0.1"),
        PB_JSON,
        wrap("v1", "Event", &changed),
    )
    .await;
    assert_eq!(updated.status, 200, "{}", updated.text());
    let (_, _, raw) = unwrap(&updated);
    let updated = pc::Event::decode(&raw[..]).unwrap();
    assert_eq!(updated.count, Some(5));
    assert_eq!(
        http.get(&format!("{path}/web-0.1")).await.json()["message"],
        "still failing"
    );

    // A stale update is the 409, as a protobuf Status.
    let stale = send_pb(
        &http,
        "PUT",
        &format!("{path}/web-0.1"),
        PB_JSON,
        wrap("v1", "Event", &changed),
    )
    .await;
    let s = pb_status(&stale, 409, "Conflict");
    assert!(
        s.message.unwrap().contains("the object has been modified"),
        "the standard message"
    );

    // Delete with protobuf DeleteOptions: a wrong UID precondition is refused…
    let opts = |uid: &str| pm::DeleteOptions {
        preconditions: Some(pm::Preconditions {
            uid: Some(uid.into()),
            resource_version: None,
        }),
        ..Default::default()
    };
    let refused = send_pb(
        &http,
        "DELETE",
        &format!("{path}/web-0.1"),
        PB_JSON,
        wrap("v1", "DeleteOptions", &opts("not-the-uid")),
    )
    .await;
    pb_status(&refused, 409, "Conflict");
    assert_eq!(http.get(&format!("{path}/web-0.1")).await.status, 200);
    // …the right one deletes.
    let deleted = send_pb(
        &http,
        "DELETE",
        &format!("{path}/web-0.1"),
        PB_JSON,
        wrap("v1", "DeleteOptions", &opts(meta.uid.as_deref().unwrap())),
    )
    .await;
    assert_eq!(deleted.status, 200);
    let (_, kind, raw) = unwrap(&deleted);
    assert_eq!(kind, "Status");
    let s = pm::Status::decode(&raw[..]).unwrap();
    assert_eq!(s.status.as_deref(), Some("Success"));
    assert_eq!(s.details.unwrap().name.as_deref(), Some("web-0.1"));

    let gone = http.get_accept(&format!("{path}/web-0.1"), PB_JSON).await;
    pb_status(&gone, 404, "NotFound");
}

#[tokio::test]
async fn a_protobuf_client_writes_events_k8s_io_events() {
    let (server, _clock) = memory().await;
    let http = Http::new(&server);
    let ev = pe::Event {
        metadata: Some(pm::ObjectMeta {
            name: Some("web.1".into()),
            namespace: Some("ns1".into()),
            ..Default::default()
        }),
        event_time: Some(pm::MicroTime {
            seconds: Some(1_795_305_540),
            nanos: Some(123_456_000),
        }),
        series: Some(pe::EventSeries {
            count: Some(2),
            last_observed_time: Some(pm::MicroTime {
                seconds: Some(1_795_305_570),
                nanos: Some(0),
            }),
        }),
        reporting_controller: Some("example.com/ctl".into()),
        reporting_instance: Some("ctl-1".into()),
        action: Some("Scaling".into()),
        reason: Some("ScaledUp".into()),
        regarding: Some(pc::ObjectReference {
            kind: Some("Deployment".into()),
            name: Some("web".into()),
            namespace: Some("ns1".into()),
            api_version: Some("apps/v1".into()),
            ..Default::default()
        }),
        note: Some("scaled up to 3".into()),
        r#type: Some("Normal".into()),
        ..Default::default()
    };
    let created = send_pb(
        &http,
        "POST",
        &v1_path("ns1"),
        PB_JSON,
        wrap("events.k8s.io/v1", "Event", &ev),
    )
    .await;
    assert_eq!(created.status, 201, "{}", created.text());
    let (av, _, raw) = unwrap(&created);
    assert_eq!(av, "events.k8s.io/v1");
    let back = pe::Event::decode(&raw[..]).unwrap();
    assert_eq!(back.note, ev.note);
    assert_eq!(back.series, ev.series);
    assert_eq!(back.event_time, ev.event_time);
    // The create answers (encoded from the stored event) what a protobuf read gives.
    let got = http
        .get_accept(&format!("{}/web.1", v1_path("ns1")), PB)
        .await;
    let (_, _, raw) = unwrap(&got);
    assert_eq!(pe::Event::decode(&raw[..]).unwrap(), back);

    let v1 = http.get(&format!("{}/web.1", v1_path("ns1"))).await.json();
    assert_eq!(v1["eventTime"], "2026-11-21T23:59:00.123456Z");
    assert_eq!(
        v1["series"]["lastObservedTime"],
        "2026-11-21T23:59:30.000000Z"
    );
    let core = http
        .get(&format!("{}/web.1", core_path("ns1")))
        .await
        .json();
    assert_eq!(core["message"], "scaled up to 3");
    assert_eq!(core["involvedObject"]["kind"], "Deployment");

    // The URL's group decides: a core/v1 envelope sent to events.k8s.io is refused as kube
    // refuses the JSON one.
    let wrong = send_pb(
        &http,
        "POST",
        &v1_path("ns1"),
        PB,
        wrap("v1", "Event", &core_pb("x.1", "ns1")),
    )
    .await;
    let s = pb_status(&wrong, 400, "BadRequest");
    assert!(
        s.message
            .unwrap()
            .contains("the API version in the data (v1) does not match"),
        "names the mismatch"
    );

    // events.k8s.io validation applies to protobuf bodies too.
    let mut invalid = ev.clone();
    invalid.metadata.as_mut().unwrap().name = Some("web.2".into());
    invalid.reporting_controller = None;
    let r = send_pb(
        &http,
        "POST",
        &v1_path("ns1"),
        PB_JSON,
        wrap("events.k8s.io/v1", "Event", &invalid),
    )
    .await;
    let s = pb_status(&r, 422, "Invalid");
    let causes = s.details.unwrap().causes;
    assert!(
        causes
            .iter()
            .any(|c| c.field.as_deref() == Some("reportingController")),
        "{causes:?}"
    );
}

#[tokio::test]
async fn malformed_protobuf_bodies_are_400s_and_lose_nothing() {
    let (server, _clock) = memory().await;
    let http = Http::new(&server);
    let path = core_path("ns1");
    http.create_core("ns1", "keep.1", "Started").await;
    // JSON labelled as protobuf, a truncated message, raw bytes that are not an Event.
    let mut truncated = wrap("v1", "Event", &core_pb("t.1", "ns1"));
    truncated.truncate(truncated.len() - 5);
    let mut not_an_event = b"k8s\0".to_vec();
    not_an_event.extend(
        Unknown {
            type_meta: None,
            raw: Some(vec![0x0a, 0x05, 0x01]),
            content_encoding: None,
            content_type: None,
        }
        .encode_to_vec(),
    );
    for (body, says) in [
        (
            serde_json::to_vec(&core_event("j.1", "ns1", "Started")).unwrap(),
            "does not appear to be a protobuf message",
        ),
        (truncated, "not a runtime.Unknown"),
        (not_an_event, "cannot be handled as a Event"),
    ] {
        let r = send_pb(&http, "POST", &path, "application/json", body).await;
        let v = r.status_failure(400, "BadRequest");
        assert!(v["message"].as_str().unwrap().contains(says), "{v}");
    }
    // A bad DeleteOptions body deletes nothing.
    let r = send_pb(
        &http,
        "DELETE",
        &format!("{path}/keep.1"),
        PB_JSON,
        b"nope".to_vec(),
    )
    .await;
    pb_status(&r, 400, "BadRequest");
    let list = http.get(&path).await.json();
    let names: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["keep.1"]);
}

#[tokio::test]
async fn transforms_and_json_first_clients_still_get_json() {
    let (server, _clock) = memory().await;
    let http = Http::new(&server);
    let path = core_path("ns1");
    http.create_core("ns1", "a.1", "Started").await;

    // client-go's metadata client: protobuf PartialObjectMetadataList first, then JSON.
    let meta = http
        .get_accept(
            &path,
            "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
        )
        .await;
    assert_eq!(meta.headers["content-type"], "application/json");
    assert_eq!(meta.json()["kind"], "PartialObjectMetadataList");

    let table = http.get_accept(&path, TBL).await;
    assert_eq!(table.json()["kind"], "Table");

    let json_first = http
        .get_accept(
            &path,
            "application/json,application/vnd.kubernetes.protobuf",
        )
        .await;
    assert_eq!(json_first.json()["kind"], "EventList");
}

/// Reads length-framed protobuf watch events.
struct Frames(Watch);

impl Frames {
    async fn next(&mut self) -> Option<(String, (String, String, Vec<u8>))> {
        let frame = self
            .0
            .next_message(|buf| {
                let len = u32::from_be_bytes(buf.get(..4)?.try_into().ok()?) as usize;
                (buf.len() >= 4 + len).then_some(4 + len)
            })
            .await?;
        let ev = pm::WatchEvent::decode(&frame[4..]).expect("a WatchEvent frame");
        let raw = ev.object.and_then(|o| o.raw).unwrap_or_default();
        Some((ev.r#type.unwrap_or_default(), unwrap_bytes(&raw)))
    }

    async fn expect_event(&mut self, ty: &str) -> pc::Event {
        let (got, (av, kind, raw)) = self.next().await.expect("another frame");
        assert_eq!(got, ty);
        assert_eq!((av.as_str(), kind.as_str()), ("v1", "Event"));
        pc::Event::decode(&raw[..]).unwrap()
    }
}

async fn watch_pb(http: &Http, path: &str) -> Frames {
    let w = http.watch(path, Some(PB_JSON)).await;
    assert_eq!(w.status, 200);
    assert_eq!(
        w.headers["content-type"],
        "application/vnd.kubernetes.protobuf;stream=watch"
    );
    Frames(w)
}

#[tokio::test]
async fn watches_stream_length_framed_watch_events() {
    let (server, _clock) = memory().await;
    let http = Http::new(&server);
    let path = core_path("ns1");
    http.create_core("ns1", "old.1", "Started").await;

    // The initial events, then the end-of-initial-events bookmark.
    let mut w = watch_pb(
        &http,
        &format!("{path}?watch=true&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan"),
    )
    .await;
    let old = w.expect_event("ADDED").await;
    assert_eq!(old.metadata.unwrap().name.as_deref(), Some("old.1"));
    let (ty, (_, _, raw)) = w.next().await.unwrap();
    assert_eq!(ty, "BOOKMARK");
    let bm = pc::Event::decode(&raw[..]).unwrap().metadata.unwrap();
    assert_eq!(
        bm.annotations
            .get("k8s.io/initial-events-end")
            .map(String::as_str),
        Some("true")
    );

    // A second watcher without selectors shares the frames of live changes.
    let mut w2 = watch_pb(
        &http,
        &format!(
            "{path}?watch=true&resourceVersion={}",
            bm.resource_version.unwrap()
        ),
    )
    .await;

    let created = http
        .post(&path, &core_event("new.1", "ns1", "Pulled"))
        .await
        .json();
    let mut patched = created.clone();
    patched["count"] = json!(2);
    assert_eq!(
        http.put(&format!("{path}/new.1"), &patched).await.status,
        200
    );
    assert_eq!(http.delete(&format!("{path}/new.1"), "").await.status, 200);
    for w in [&mut w, &mut w2] {
        let added = w.expect_event("ADDED").await;
        assert_eq!(added.reason.as_deref(), Some("Pulled"));
        assert_eq!(
            added.metadata.as_ref().unwrap().resource_version.as_deref(),
            created["metadata"]["resourceVersion"].as_str()
        );
        assert_eq!(w.expect_event("MODIFIED").await.count, Some(2));
        let deleted = w.expect_event("DELETED").await;
        assert_eq!(deleted.metadata.unwrap().name.as_deref(), Some("new.1"));
    }
}

#[tokio::test]
async fn a_watch_past_the_history_gets_an_error_frame_with_a_410_status() {
    let (server, _clock) = memory().await;
    let http = Http::new(&server);
    let path = core_path("ns1");
    let first = http
        .post(&path, &core_event("a.1", "ns1", "Started"))
        .await
        .json();
    let r0 = rv(&first);
    for i in 2..5 {
        let name = format!("a.{i}");
        http.create_core("ns1", &name, "Started").await;
    }
    server.registry().backend().compact(r0 + 2).await.unwrap();
    let mut w = watch_pb(&http, &format!("{path}?watch=true&resourceVersion={r0}")).await;
    let (ty, (av, kind, raw)) = w.next().await.unwrap();
    assert_eq!(ty, "ERROR");
    assert_eq!((av.as_str(), kind.as_str()), ("v1", "Status"));
    let s = pm::Status::decode(&raw[..]).unwrap();
    assert_eq!((s.code, s.reason.as_deref()), (Some(410), Some("Expired")));
    assert!(w.next().await.is_none(), "the stream ends after the error");
}

/// `e` as client-go's gogo-protobuf writes it: every non-pointer field present, empty or
/// zero when unset.
fn go_style(mut e: pc::Event) -> pc::Event {
    fn fill(s: &mut Option<String>) {
        s.get_or_insert_with(String::new);
    }
    let m = e.metadata.get_or_insert_with(Default::default);
    for s in [
        &mut m.name,
        &mut m.generate_name,
        &mut m.namespace,
        &mut m.self_link,
        &mut m.uid,
        &mut m.resource_version,
    ] {
        fill(s);
    }
    m.generation.get_or_insert(0);
    m.creation_timestamp.get_or_insert_with(Default::default);
    let r = e.involved_object.get_or_insert_with(Default::default);
    for s in [
        &mut r.kind,
        &mut r.namespace,
        &mut r.name,
        &mut r.uid,
        &mut r.api_version,
        &mut r.resource_version,
        &mut r.field_path,
    ] {
        fill(s);
    }
    let src = e.source.get_or_insert_with(Default::default);
    fill(&mut src.component);
    fill(&mut src.host);
    for s in [
        &mut e.reason,
        &mut e.message,
        &mut e.r#type,
        &mut e.action,
        &mut e.reporting_component,
        &mut e.reporting_instance,
    ] {
        fill(s);
    }
    e.count.get_or_insert(0);
    e.first_timestamp.get_or_insert_with(Default::default);
    e.last_timestamp.get_or_insert_with(Default::default);
    e.event_time.get_or_insert_with(Default::default);
    e
}

#[tokio::test]
async fn a_go_written_message_stores_as_its_json_twin_does() {
    let (server, _clock) = memory().await;
    let http = Http::new(&server);
    let path = core_path("ns1");
    let pb = send_pb(
        &http,
        "POST",
        &path,
        PB_JSON,
        wrap("v1", "Event", &go_style(core_pb("twin.1", "ns1"))),
    )
    .await;
    assert_eq!(pb.status, 201, "{}", pb.text());
    let twin = json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": "twin.2", "namespace": "ns1", "labels": {"app": "web"}},
        "involvedObject": {"kind": "Pod", "name": "web-0", "namespace": "ns1", "apiVersion": "v1", "uid": "p-1"},
        "reason": "BackOff", "message": "Back-off restarting failed container",
        "source": {"component": "kubelet", "host": "node-1"},
        "firstTimestamp": "2026-11-21T23:59:00Z", "lastTimestamp": "2026-11-21T23:59:30Z",
        "count": 4, "type": "Warning"
    });
    assert_eq!(http.post(&path, &twin).await.status, 201);
    let strip = |mut v: Value| {
        let m = v["metadata"].as_object_mut().unwrap();
        for k in ["name", "uid", "resourceVersion"] {
            assert!(m.remove(k).is_some(), "{k} is set");
        }
        v
    };
    let one = strip(http.get(&format!("{path}/twin.1")).await.json());
    let two = strip(http.get(&format!("{path}/twin.2")).await.json());
    assert_eq!(one, two);
    assert!(one["metadata"].get("generateName").is_none(), "{one}");
    assert!(one["metadata"].get("generation").is_none(), "{one}");
}

#[tokio::test]
async fn patches_deprecated_watch_paths_and_deletecollection_speak_protobuf() {
    let (server, _clock) = memory().await;
    let http = Http::new(&server);
    let path = core_path("ns1");
    let first = http
        .post(&path, &core_event("a.1", "ns1", "Started"))
        .await
        .json();

    // A merge patch (JSON body, as every patch is) answered in protobuf.
    let patched = http
        .send(
            "PATCH",
            &format!("{path}/a.1"),
            Some("application/merge-patch+json"),
            Some(PB_JSON),
            br#"{"count":7}"#.to_vec(),
        )
        .await;
    assert_eq!(patched.status, 200, "{:?}", patched.body);
    let (_, kind, raw) = unwrap(&patched);
    assert_eq!(kind, "Event");
    assert_eq!(pc::Event::decode(&raw[..]).unwrap().count, Some(7));

    // The deprecated watch path streams frames to a protobuf client…
    let mut w = watch_pb(
        &http,
        &format!(
            "/api/v1/watch/namespaces/ns1/events/b.1?resourceVersion={}",
            rv(&first)
        ),
    )
    .await;
    http.create_core("ns1", "b.1", "Pulled").await;
    assert_eq!(
        w.expect_event("ADDED").await.reason.as_deref(),
        Some("Pulled")
    );
    // …and an error before the stream starts is a protobuf Status.
    let bad = http
        .get_accept(
            "/api/v1/watch/namespaces/ns1/events/b.1?fieldSelector=metadata.name%3Dz",
            PB_JSON,
        )
        .await;
    pb_status(&bad, 400, "BadRequest");

    // deletecollection with protobuf DeleteOptions: a dry run deletes nothing.
    let dry = pm::DeleteOptions {
        dry_run: vec!["All".into()],
        ..Default::default()
    };
    let r = send_pb(
        &http,
        "DELETE",
        &path,
        PB_JSON,
        wrap("v1", "DeleteOptions", &dry),
    )
    .await;
    let (_, kind, raw) = unwrap(&r);
    assert_eq!(kind, "EventList");
    assert_eq!(pc::EventList::decode(&raw[..]).unwrap().items.len(), 2);
    assert_eq!(
        http.get(&path).await.json()["items"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let r = send_pb(
        &http,
        "DELETE",
        &path,
        PB_JSON,
        wrap("v1", "DeleteOptions", &pm::DeleteOptions::default()),
    )
    .await;
    assert_eq!(r.status, 200);
    assert!(
        http.get(&path).await.json()["items"]
            .as_array()
            .unwrap()
            .is_empty()
    );
}

/// Mutated protobuf bodies (bytes changed, dropped or added after the magic) get answers
/// below 500, every failure a `Status`, and the server keeps serving.
#[tokio::test]
async fn mutated_protobuf_bodies_never_break_the_server() {
    let (server, _clock) = memory().await;
    let http = Http::new(&server);
    let path = core_path("ns1");
    let v1 = pe::Event {
        metadata: Some(pm::ObjectMeta {
            name: Some("fz".into()),
            ..Default::default()
        }),
        reporting_controller: Some("c".into()),
        ..Default::default()
    };
    let seeds = [
        wrap("v1", "Event", &go_style(core_pb("fz", "ns1"))),
        wrap("events.k8s.io/v1", "Event", &v1),
        wrap(
            "v1",
            "DeleteOptions",
            &pm::DeleteOptions {
                dry_run: vec!["All".into()],
                ..Default::default()
            },
        ),
    ];
    let targets = [
        ("POST", path.clone()),
        ("POST", v1_path("ns1")),
        ("PUT", format!("{path}/fz")),
        ("DELETE", format!("{path}/fz?dryRun=All")),
        ("DELETE", format!("{path}?dryRun=All")),
    ];
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut rnd = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut accepted = 0;
    for i in 0..400 {
        let mut body = seeds[i % seeds.len()].clone();
        for _ in 0..=(rnd() % 4) {
            // Keep the magic: the decoder behind it is what is under test.
            let pos = 4 + (rnd() as usize) % (body.len() - 3);
            match rnd() % 3 {
                0 if pos < body.len() => body[pos] = (rnd() % 256) as u8,
                1 if pos < body.len() => {
                    body.remove(pos);
                }
                _ => body.insert(pos, (rnd() % 256) as u8),
            }
        }
        let (method, target) = &targets[(rnd() as usize) % targets.len()];
        let r = http
            .send(method, target, Some(PB), None, body.clone())
            .await;
        assert!(
            r.status < 500,
            "{method} {target} {body:?}: {} {}",
            r.status,
            r.text()
        );
        if r.status >= 400 {
            assert_eq!(r.json()["kind"], "Status", "{}", r.text());
        } else {
            accepted += 1;
        }
    }
    assert!(accepted > 0, "some mutations still decode");
    assert_eq!(http.get("/readyz").await.status, 200);
    assert_eq!(http.get(&path).await.status, 200);
}

/// `(namespace, name, resourceVersion, the item's protobuf bytes)` of each item of a protobuf
/// `EventList` of `group`'s shape, sorted.
fn pb_list_items(raw: &[u8], core: bool) -> Vec<(String, String, String, Vec<u8>)> {
    let decoded: Vec<(Option<pm::ObjectMeta>, Vec<u8>)> = if core {
        let items = pc::EventList::decode(raw).unwrap().items;
        items
            .iter()
            .map(|e| (e.metadata.clone(), e.encode_to_vec()))
            .collect()
    } else {
        let items = pe::EventList::decode(raw).unwrap().items;
        items
            .iter()
            .map(|e| (e.metadata.clone(), e.encode_to_vec()))
            .collect()
    };
    let mut items: Vec<_> = decoded
        .into_iter()
        .map(|(m, bytes)| {
            let m = m.unwrap_or_default();
            let (ns, name) = (m.namespace.unwrap_or_default(), m.name.unwrap_or_default());
            (ns, name, m.resource_version.unwrap_or_default(), bytes)
        })
        .collect();
    items.sort();
    items
}

/// An unpaged protobuf list longer than a page is not held whole: it is read twice at its
/// revision (for the envelope's length, then to send it page by page). It holds what the
/// same list paged by the client holds, byte for byte, in both groups, for a namespace and
/// for all, with and without selectors; and a list of one page is as before.
#[tokio::test]
async fn a_protobuf_list_longer_than_a_page_is_sent_a_page_at_a_time() {
    use herald_server::server::Server;

    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(paged_sqlite(dir.path(), 5)).await.unwrap();
    let http = Http::new(&server);
    create_many(&server, "ns-s", "Pulled", 17).await;
    create_many(&server, "ns-t", "Pulled", 3).await;
    for i in [2, 5, 6, 11, 16] {
        let r = http
            .patch(
                &format!("{}/e.{i:05}", core_path("ns-s")),
                "application/merge-patch+json",
                &json!({"reason": "BackOff"}),
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
    }
    for (base, core) in [
        (core_path("ns-s"), true),
        (v1_path("ns-s"), false),
        ("/api/v1/events".to_string(), true),
        ("/apis/events.k8s.io/v1/events".to_string(), false),
    ] {
        for (query, want) in [
            ("", 17),
            ("?fieldSelector=reason%3DBackOff", 5),
            ("?fieldSelector=reason%21%3DBackOff", 12),
            ("?fieldSelector=metadata.name%3De.00001", 1),
        ] {
            let path = format!("{base}{query}");
            let whole = http.get_accept(&path, PB).await;
            assert_eq!(whole.status, 200, "{path}: {:?}", whole.body);
            let (_, kind, raw) = unwrap(&whole);
            assert_eq!(kind, "EventList", "{path}");
            let items = pb_list_items(&raw, core);

            let sep = if query.is_empty() { '?' } else { '&' };
            let mut paged = Vec::new();
            let mut next = format!("{path}{sep}limit=4");
            loop {
                let page = http.get_accept(&next, PB).await;
                assert_eq!(page.status, 200, "{next}: {:?}", page.body);
                let (_, _, raw) = unwrap(&page);
                let meta = if core {
                    pc::EventList::decode(&raw[..]).unwrap().metadata
                } else {
                    pe::EventList::decode(&raw[..]).unwrap().metadata
                };
                paged.extend(pb_list_items(&raw, core));
                match meta.and_then(|m| m.r#continue) {
                    Some(c) if !c.is_empty() => next = format!("{path}{sep}limit=4&continue={c}"),
                    _ => break,
                }
            }
            paged.sort();
            assert_eq!(items, paged, "{path}");
            // ns-t's three events (one of them e.00001) are in the lists of every namespace.
            let others = match (base.ends_with("/v1/events"), want) {
                (false, _) | (true, 5) => 0,
                (true, 1) => 1,
                (true, _) => 3,
            };
            assert_eq!(items.len(), want + others, "{path}");
        }
    }
}

/// A protobuf list of several pages sent by `render::streamed_protobuf_list` is byte for
/// byte what `protobuf_list` makes of the whole list, in both groups, and of one snapshot (a
/// write between its two reads is in neither); a second read at another revision, or one
/// that encodes to another length, ends the body with an error.
#[tokio::test]
async fn streamed_protobuf_lists_are_the_whole_list() {
    use futures::StreamExt as _;
    use herald_core::clock::FakeClock;
    use herald_core::event::{ApiGroup, CoreEvent};
    use herald_server::api::events::render::{protobuf_list, streamed_protobuf_list};
    use herald_server::registry::{EventRegistry, ListParams, RegistryOptions, WriteOptions};
    use herald_server::storage::{HistoryOptions, MemoryBackend};
    use std::sync::Arc;

    let clock = Arc::new(FakeClock::new("2026-01-01T00:00:00Z".parse().unwrap()));
    let backend = Arc::new(MemoryBackend::new(clock.clone(), HistoryOptions::default()));
    let opts = RegistryOptions {
        list_page_items: 3,
        ..RegistryOptions::default()
    };
    let reg = EventRegistry::new(backend, clock, opts);
    async fn create(reg: &EventRegistry, ns: &str, name: String) {
        let e: CoreEvent = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": ns},
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": ns},
            "reason": "R", "message": "m",
        }))
        .unwrap();
        reg.create(ApiGroup::Core, ns, e, &WriteOptions::default())
            .await
            .unwrap();
    }
    for i in 0..10 {
        create(&reg, "ns", format!("e.{i:02}")).await;
    }
    for i in 0..4 {
        create(&reg, "other", format!("o.{i:02}")).await;
    }
    let unpaged = ListParams::default();
    let exact = |rv: &str| ListParams {
        resource_version: Some(rv.to_owned()),
        resource_version_match: Some("Exact".into()),
        ..ListParams::default()
    };
    // Sends the list of "ns", its second read of `ns` by `p` (the first's revision, exactly,
    // when `None`), after creating the event `write` when there is one.
    let send =
        |group: ApiGroup, ns: &'static str, p: Option<ListParams>, write: Option<&'static str>| {
            let reg = reg.clone();
            async move {
                let (first, rest) = reg
                    .list_streamed(group, Some("ns"), &ListParams::default())
                    .await
                    .unwrap();
                let p = p.unwrap_or_else(|| exact(&first.resource_version));
                let again = reg.clone();
                let body =
                    streamed_protobuf_list(group, first, rest.unwrap(), move || async move {
                        if let Some(name) = write {
                            create(&again, "ns", format!("{name}.{group:?}")).await;
                        }
                        again.list_streamed(group, Some(ns), &p).await
                    });
                body.collect::<Vec<_>>().await
            }
        };
    for group in [ApiGroup::Core, ApiGroup::EventsV1] {
        let whole = reg.list(group, Some("ns"), &unpaged).await.unwrap();
        let want: Vec<u8> = protobuf_list(group, whole).await.unwrap().concat();
        let got: Vec<u8> = send(group, "ns", None, Some("late"))
            .await
            .into_iter()
            .map(|r| r.unwrap().to_vec())
            .collect::<Vec<_>>()
            .concat();
        assert!(got == want, "{group:?}");
    }

    // The second read at the current revision, after a write: nothing sent but the error.
    let parts = send(ApiGroup::Core, "ns", Some(unpaged.clone()), Some("later")).await;
    assert!(matches!(&parts[..], [Err(_)]), "{parts:?}");

    // A second read of other events at the same revision: the body breaks.
    let parts = send(ApiGroup::Core, "other", None, None).await;
    assert!(
        parts.len() > 1 && parts.last().is_some_and(|p| p.is_err()),
        "{parts:?}"
    );
}
