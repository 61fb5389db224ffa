//! `KubeSink` against a small HTTP fake of the core/v1 events API on 127.0.0.1: the exact
//! requests it sends, how it classifies the server's answers, and a storm written through it.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{patch, post};
use herald_runtime::record::*;
use k8s_openapi::api::core::v1::{Event, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Value, json};

#[derive(Default)]
struct Fake {
    events: BTreeMap<(String, String), Value>,
    /// Canned answers for the next requests, before the real handling.
    script: VecDeque<(u16, String)>,
    requests: Vec<String>,
    revision: u64,
}

type Shared = Arc<Mutex<Fake>>;

fn status(code: u16, reason: &str, message: &str) -> (u16, String) {
    let body = json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
        "message": message, "reason": reason, "code": code});
    (code, body.to_string())
}

fn reply(code: u16, body: String) -> Response {
    (
        StatusCode::from_u16(code).unwrap(),
        [("content-type", "application/json")],
        body,
    )
        .into_response()
}

fn scripted(fake: &mut Fake, what: String) -> Option<Response> {
    fake.requests.push(what);
    fake.script.pop_front().map(|(c, b)| reply(c, b))
}

async fn create(State(s): State<Shared>, Path(ns): Path<String>, body: Bytes) -> Response {
    let mut f = s.lock().unwrap();
    if let Some(r) = scripted(&mut f, format!("POST {ns}")) {
        return r;
    }
    let mut v: Value = serde_json::from_slice(&body).unwrap();
    let name = v["metadata"]["name"].as_str().unwrap().to_string();
    let key = (ns, name.clone());
    if f.events.contains_key(&key) {
        let (c, b) = status(
            409,
            "AlreadyExists",
            &format!("events \"{name}\" already exists"),
        );
        return reply(c, b);
    }
    f.revision += 1;
    v["metadata"]["resourceVersion"] = json!(f.revision.to_string());
    f.events.insert(key, v.clone());
    reply(201, v.to_string())
}

async fn patch_event(
    State(s): State<Shared>,
    Path((ns, name)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let mut f = s.lock().unwrap();
    let ct = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    if let Some(r) = scripted(&mut f, format!("PATCH {ns}/{name} {ct}")) {
        return r;
    }
    assert_eq!(ct, "application/strategic-merge-patch+json");
    let patch: Value = serde_json::from_slice(&body).unwrap();
    f.revision += 1;
    let rv = f.revision.to_string();
    let Some(v) = f.events.get_mut(&(ns, name.clone())) else {
        let (c, b) = status(404, "NotFound", &format!("events \"{name}\" not found"));
        return reply(c, b);
    };
    json_patch::merge(v, &patch);
    v["metadata"]["resourceVersion"] = json!(rv);
    reply(200, v.to_string())
}

async fn start() -> (Shared, kube::Client) {
    start_with(true).await
}

/// `kube_retry: false` turns off kube's own retry layer (it retries 429/503/504 with a
/// real-time backoff), so a test sees every answer the server gives.
async fn start_with(kube_retry: bool) -> (Shared, kube::Client) {
    let state: Shared = Arc::default();
    let app = Router::new()
        .route("/api/v1/namespaces/{ns}/events", post(create))
        .route("/api/v1/namespaces/{ns}/events/{name}", patch(patch_event))
        .with_state(state.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let mut config = kube::Config::new(format!("http://{addr}").parse().unwrap());
    config.default_retry = kube_retry;
    (state, kube::Client::try_from(config).unwrap())
}

fn event(name: &str, count: i32) -> Event {
    Event {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("prod".into()),
            ..ObjectMeta::default()
        },
        count: Some(count),
        message: Some("hello".into()),
        reason: Some("Test".into()),
        ..Event::default()
    }
}

#[tokio::test]
async fn creates_and_patches_with_strategic_merge() {
    let (state, client) = start().await;
    let sink = KubeSink::new(client);
    let created = sink.create(&event("e1", 1)).await.unwrap();
    assert_eq!(created.metadata.resource_version.as_deref(), Some("1"));
    let patched = sink
        .patch(&event("e1", 2), br#"{"count":2,"message":"again"}"#)
        .await
        .unwrap();
    assert_eq!(patched.count, Some(2));
    assert_eq!(patched.message.as_deref(), Some("again"));
    let missing = sink
        .patch(&event("nope", 2), br#"{"count":2}"#)
        .await
        .unwrap_err();
    assert!(missing.is_not_found(), "{missing:?}");
    let f = state.lock().unwrap();
    assert_eq!(
        f.requests,
        [
            "POST prod",
            "PATCH prod/e1 application/strategic-merge-patch+json",
            "PATCH prod/nope application/strategic-merge-patch+json"
        ]
    );
}

#[tokio::test]
async fn classifies_server_answers() {
    let (state, client) = start_with(false).await;
    {
        let mut f = state.lock().unwrap();
        f.script
            .push_back(status(500, "InternalError", "etcd is sad"));
        let mut throttled =
            serde_json::from_str::<Value>(&status(429, "TooManyRequests", "slow down").1).unwrap();
        throttled["details"] = json!({"retryAfterSeconds": 7});
        f.script.push_back((429, throttled.to_string()));
        let mut terminating = serde_json::from_str::<Value>(
            &status(403, "Forbidden", "namespace prod is being terminated").1,
        )
        .unwrap();
        terminating["details"] = json!({"causes":[{"reason":"NamespaceTerminating","message":"x","field":"metadata.namespace"}]});
        f.script.push_back((403, terminating.to_string()));
        f.script
            .push_back(status(422, "Invalid", "Event \"e\" is invalid"));
        f.script.push_back((201, "this is not an event".into()));
    }
    let sink = KubeSink::new(client);
    let e = event("e", 1);
    let err = sink.create(&e).await.unwrap_err();
    assert_eq!(err.retry_class(), RetryClass::Retry(None), "{err:?}");
    let err = sink.create(&e).await.unwrap_err();
    assert_eq!(
        err.retry_class(),
        RetryClass::Throttled(std::time::Duration::from_secs(7)),
        "{err:?}"
    );
    let err = sink.create(&e).await.unwrap_err();
    assert_eq!(err.retry_class(), RetryClass::GiveUpQuietly, "{err:?}");
    let err = sink.create(&e).await.unwrap_err();
    assert_eq!(err.retry_class(), RetryClass::GiveUp, "{err:?}");
    let err = sink.create(&e).await.unwrap_err();
    assert!(matches!(err, SinkError::UnexpectedObject(_)), "{err:?}");
    // And now the real thing: created.
    assert!(sink.create(&e).await.is_ok());
    let err = sink.create(&e).await.unwrap_err();
    assert_eq!(
        err.retry_class(),
        RetryClass::GiveUpQuietly,
        "AlreadyExists: {err:?}"
    );
}

#[tokio::test]
async fn unreachable_server_is_a_transport_error() {
    // Bind and drop a listener to get a port nobody listens on.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut config = kube::Config::new(format!("http://127.0.0.1:{port}").parse().unwrap());
    config.default_retry = false;
    let sink = KubeSink::new(kube::Client::try_from(config).unwrap());
    let err = sink.create(&event("e", 1)).await.unwrap_err();
    assert!(matches!(err, SinkError::Transport(_)), "{err:?}");
    assert_eq!(err.retry_class(), RetryClass::Retry(None));
}

/// A storm recorded through the whole pipeline into the fake server: the stored count equals
/// the number of events emitted, with writes bounded by the spam budget (25 + the final
/// flush at shutdown).
#[tokio::test]
async fn storm_through_kube_sink_stores_exact_count() {
    let (state, client) = start().await;
    let b = EventBroadcaster::new(BroadcasterOptions::default());
    b.start_recording_to_sink(KubeSink::new(client));
    let recorder = b.new_recorder(EventSource::new("storm", "node-1"));
    let pod = Pod {
        metadata: ObjectMeta {
            name: Some("web-1".into()),
            namespace: Some("prod".into()),
            uid: Some("u1".into()),
            ..ObjectMeta::default()
        },
        ..Pod::default()
    };
    for _ in 0..10_000 {
        recorder.event(
            &pod,
            EventType::Warning,
            "BackOff",
            "Back-off restarting failed container",
        );
        tokio::task::yield_now().await;
    }
    b.shutdown().await;
    let stats = b.stats();
    assert_eq!(stats.unaccounted(0), 0, "{stats:?}");
    let f = state.lock().unwrap();
    assert_eq!(f.events.len(), 1);
    let stored = f.events.values().next().unwrap();
    assert_eq!(stored["count"], 10_000);
    assert!(f.requests.len() <= 26, "{} requests", f.requests.len());
}
