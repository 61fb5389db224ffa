//! `EventBroadcasterAdapter` and the kube-rs drop-in against a small HTTP fake of an API
//! server on 127.0.0.1: discovery decides which events API is written (events.k8s.io/v1 when
//! `/apis/events.k8s.io/v1` lists `events`, core/v1 when it is 404), and the requests go to
//! that API's paths.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use herald_runtime::events::{
    EventBroadcasterAdapter, EventType, EventsApiChoice, Recorder, serves_events_v1,
};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use serde_json::{Value, json};

#[derive(Default)]
struct Fake {
    /// Whether `/apis/events.k8s.io/v1` is served.
    events_v1: bool,
    /// `METHOD path` of every request, in order.
    requests: Vec<String>,
    /// Bodies of the writes, in order.
    bodies: Vec<Value>,
}

type Shared = Arc<Mutex<Fake>>;

fn reply(code: u16, body: Value) -> Response {
    (
        StatusCode::from_u16(code).unwrap(),
        [("content-type", "application/json")],
        body.to_string(),
    )
        .into_response()
}

async fn discovery(State(s): State<Shared>) -> Response {
    let mut f = s.lock().unwrap();
    f.requests.push("GET /apis/events.k8s.io/v1".into());
    if f.events_v1 {
        reply(
            200,
            json!({"kind":"APIResourceList","apiVersion":"v1","groupVersion":"events.k8s.io/v1",
                "resources":[{"name":"events","singularName":"event","namespaced":true,
                "kind":"Event","verbs":["create","get","list","patch"]}]}),
        )
    } else {
        reply(
            404,
            json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
                "message":"the server could not find the requested resource","reason":"NotFound","code":404}),
        )
    }
}

/// Stores nothing: echoes a write back with a resourceVersion (enough for the recorders).
async fn write(
    State(s): State<Shared>,
    method: Method,
    uri: Uri,
    Path(_ns): Path<String>,
    body: Bytes,
) -> Response {
    let mut f = s.lock().unwrap();
    f.requests.push(format!("{method} {}", uri.path()));
    let mut v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    f.bodies.push(v.clone());
    if v.is_object() && v.get("metadata").is_some() {
        v["metadata"]["resourceVersion"] = json!("1");
        reply(201, v)
    } else {
        reply(
            200,
            json!({"apiVersion":"events.k8s.io/v1","kind":"Event","metadata":{"name":"x","namespace":"ns","resourceVersion":"2"},"eventTime":null}),
        )
    }
}

async fn serve(events_v1: bool) -> (Shared, kube::Client) {
    let state: Shared = Arc::new(Mutex::new(Fake {
        events_v1,
        ..Fake::default()
    }));
    let app = Router::new()
        .route("/apis/events.k8s.io/v1", get(discovery))
        .route("/apis/events.k8s.io/v1/namespaces/{ns}/events", post(write))
        .route(
            "/apis/events.k8s.io/v1/namespaces/{ns}/events/{name}",
            axum::routing::patch(
                |s: State<Shared>,
                 m: Method,
                 u: Uri,
                 Path((ns, _)): Path<(String, String)>,
                 b: Bytes| { write(s, m, u, Path(ns), b) },
            ),
        )
        .route("/api/v1/namespaces/{ns}/events", post(write))
        .with_state(state.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let url = format!("http://{addr}").parse().unwrap();
    let client = kube::Client::try_from(kube::Config::new(url)).unwrap();
    (state, client)
}

fn pod() -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some("web-1".into()),
            namespace: Some("ns".into()),
            uid: Some("u".into()),
            ..ObjectMeta::default()
        },
        ..Pod::default()
    }
}

#[tokio::test]
async fn the_adapter_writes_events_k8s_io_when_discovery_lists_it() {
    let (fake, client) = serve(true).await;
    assert!(serves_events_v1(&client).await);
    let adapter = EventBroadcasterAdapter::new(client).await;
    assert_eq!(adapter.api(), EventsApiChoice::EventsV1);
    let recorder = adapter.new_recorder("c", "c-0");
    recorder.eventf(
        &pod(),
        None::<&Node>,
        EventType::Warning,
        "FailedMount",
        "Mounting",
        format_args!("not ready"),
    );
    adapter.shutdown().await;
    let f = fake.lock().unwrap();
    assert_eq!(
        f.requests.last().map(String::as_str),
        Some("POST /apis/events.k8s.io/v1/namespaces/ns/events"),
        "{:?}",
        f.requests
    );
    let body = f.bodies.last().unwrap();
    assert_eq!(body["action"], "Mounting");
    assert_eq!(body["reportingController"], "c");
    assert_eq!(body["note"], "not ready");
    assert_eq!(adapter.stats().unaccounted(0), 0);
}

#[tokio::test]
async fn the_adapter_falls_back_to_core_v1_when_events_k8s_io_is_404() {
    let (fake, client) = serve(false).await;
    let adapter = EventBroadcasterAdapter::new(client).await;
    assert_eq!(adapter.api(), EventsApiChoice::CoreV1);
    let recorder = adapter.new_recorder("c", "c-0");
    recorder.eventf(
        &pod(),
        None::<&Node>,
        EventType::Warning,
        "FailedMount",
        "Mounting",
        format_args!("not ready"),
    );
    adapter.shutdown().await;
    let f = fake.lock().unwrap();
    assert_eq!(
        f.requests,
        [
            "GET /apis/events.k8s.io/v1",
            "POST /api/v1/namespaces/ns/events"
        ]
    );
    let body = &f.bodies[0];
    // core/v1: the note is the message, the controller and instance the source; no action.
    assert_eq!(body["message"], "not ready");
    assert_eq!(body["source"]["component"], "c");
    assert_eq!(body["source"]["host"], "c-0");
    assert!(body.get("action").is_none(), "{body}");
}

/// The kube-rs drop-in: kube-rs's `Event` and `Reporter`, `publish` through the series
/// pipeline: ten repeats are one create and one series patch, and the final count at
/// shutdown.
#[tokio::test]
async fn the_kube_rs_drop_in_publishes_through_series() {
    use kube::runtime::events::{Event, EventType as KubeEventType, Reporter};
    let (fake, client) = serve(true).await;
    let recorder = Recorder::new(
        client,
        Reporter {
            controller: "kube-ctl".into(),
            instance: None,
        },
    );
    let reference = pod().object_ref(&());
    for i in 0..10 {
        recorder
            .publish(
                &Event {
                    type_: KubeEventType::Normal,
                    reason: "Synced".into(),
                    note: Some(format!("sync {i}")),
                    action: "Reconciling".into(),
                    secondary: None,
                },
                &reference,
            )
            .await
            .unwrap();
        tokio::task::yield_now().await;
    }
    recorder.shutdown().await;
    let f = fake.lock().unwrap();
    let posts = f.requests.iter().filter(|r| r.starts_with("POST")).count();
    let patches: Vec<&Value> = f
        .requests
        .iter()
        .zip(&f.bodies)
        .filter(|(r, _)| r.starts_with("PATCH"))
        .map(|(_, b)| b)
        .collect();
    assert_eq!(posts, 1, "{:?}", f.requests);
    assert!(
        !patches.is_empty() && patches.len() <= 2,
        "{:?}",
        f.requests
    );
    assert_eq!(patches.last().unwrap()["series"]["count"], 10);
    let created = &f.bodies[0];
    assert_eq!(created["reportingController"], "kube-ctl");
    // kube-rs's default instance: the controller name.
    assert_eq!(created["reportingInstance"], "kube-ctl");
    assert_eq!(created["note"], "sync 0");
    let stats = recorder.stats();
    assert_eq!(stats.emitted, 10);
    assert_eq!(stats.unaccounted(0), 0);
}
