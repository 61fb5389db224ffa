//! `KubeListerWatcher` against a scripted HTTP API server on 127.0.0.1: the wire parameters
//! it sends and how responses, corrupt objects and `Status` errors are classified.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;
use futures::StreamExt;
use herald_runtime::cache::{
    InformerOptions, KubeListerWatcher, ListRequest, ListWatchError, ListerWatcher,
    ReflectorOptions, SharedInformer, WatchEvent, WatchRequest,
};
use k8s_openapi::api::core::v1::ConfigMap;
use serde_json::json;

#[derive(Default)]
struct Script {
    responses: VecDeque<(u16, String)>,
    queries: Vec<String>,
}

type Shared = Arc<Mutex<Script>>;

async fn serve(State(s): State<Shared>, RawQuery(q): RawQuery) -> impl IntoResponse {
    let mut g = s.lock().unwrap();
    g.queries.push(q.unwrap_or_default());
    let (code, body) = g.responses.pop_front().unwrap_or((200, String::new()));
    (StatusCode::from_u16(code).unwrap(), body)
}

async fn server() -> (kube::Api<ConfigMap>, Shared) {
    let state: Shared = Arc::default();
    let app = Router::new()
        .route("/api/v1/namespaces/{ns}/configmaps", get(serve))
        .with_state(state.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let config = kube::Config::new(format!("http://{addr}").parse().unwrap());
    let client = kube::Client::try_from(config).unwrap();
    (kube::Api::namespaced(client, "ns"), state)
}

fn cm_json(name: &str, rv: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": "ns", "resourceVersion": rv}})
}

fn status(code: u16, reason: &str, message: &str) -> String {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": message, "reason": reason, "code": code})
    .to_string()
}

fn push(s: &Shared, code: u16, body: String) {
    s.lock().unwrap().responses.push_back((code, body));
}

fn query(s: &Shared, i: usize) -> Vec<String> {
    let mut v: Vec<String> = s.lock().unwrap().queries[i]
        .split('&')
        .map(str::to_owned)
        .collect();
    v.sort();
    v
}

#[tokio::test]
async fn list_sends_client_go_parameters_and_skips_corrupt_items() {
    let (api, s) = server().await;
    let list = json!({"kind": "ConfigMapList", "apiVersion": "v1",
        "metadata": {"resourceVersion": "10", "continue": "tok/1"},
        "items": [cm_json("a", "7"), {"metadata": {"name": 5}}]});
    push(&s, 200, list.to_string());
    push(
        &s,
        410,
        status(410, "Expired", "The provided continue parameter is too old"),
    );
    let lw = KubeListerWatcher::new(api)
        .labels("app=web")
        .fields("metadata.name!=x");
    let page = lw
        .list(ListRequest {
            resource_version: "0".into(),
            limit: Some(500),
            ..ListRequest::default()
        })
        .await
        .unwrap();
    assert_eq!(page.items.len(), 1);
    assert_eq!(page.items[0].metadata.name.as_deref(), Some("a"));
    assert_eq!(page.corrupt.len(), 1);
    assert_eq!(page.resource_version, "10");
    assert_eq!(page.continue_token.as_deref(), Some("tok/1"));
    assert_eq!(
        query(&s, 0),
        vec![
            "fieldSelector=metadata.name%21%3Dx",
            "labelSelector=app%3Dweb",
            "limit=500",
            "resourceVersion=0"
        ]
    );
    let err = lw
        .list(ListRequest {
            limit: Some(500),
            continue_token: Some("tok/1".into()),
            ..ListRequest::default()
        })
        .await
        .unwrap_err();
    assert!(matches!(err, ListWatchError::Expired(_)), "{err:?}");
    // A continue request carries no resourceVersion.
    assert_eq!(
        query(&s, 1),
        vec![
            "continue=tok%2F1",
            "fieldSelector=metadata.name%21%3Dx",
            "labelSelector=app%3Dweb",
            "limit=500"
        ]
    );
}

#[tokio::test]
async fn status_errors_are_classified() {
    // (kube's client itself retries 429/503/504 before we see them; those classes are
    // covered by `ListWatchError::from_status` in the reflector tests.)
    let (api, s) = server().await;
    push(&s, 500, status(500, "InternalError", "boom"));
    push(&s, 200, "{not json".into());
    push(
        &s,
        422,
        status(422, "Invalid", "sendInitialEvents is forbidden"),
    );
    push(
        &s,
        410,
        status(410, "Expired", "too old resource version: 5 (13)"),
    );
    let lw = KubeListerWatcher::new(api);
    let mut errs = Vec::new();
    for _ in 0..4 {
        errs.push(lw.list(ListRequest::default()).await.unwrap_err());
    }
    assert!(
        matches!(errs[0], ListWatchError::Internal(_)),
        "{:?}",
        errs[0]
    );
    assert!(
        matches!(errs[1], ListWatchError::Decode(_)),
        "{:?}",
        errs[1]
    );
    assert!(
        matches!(errs[2], ListWatchError::Invalid { code: 422, .. }),
        "{:?}",
        errs[2]
    );
    assert!(
        matches!(errs[3], ListWatchError::Expired(_)),
        "{:?}",
        errs[3]
    );
    // Quorum read: no resourceVersion at all.
    assert_eq!(s.lock().unwrap().queries[0], "");
    assert_eq!(
        ListWatchError::from_status(429, "TooManyRequests", "slow down", []),
        ListWatchError::TooManyRequests {
            message: "slow down".into(),
            retry_after: None
        }
    );
}

#[tokio::test]
async fn streaming_watch_parameters_events_bookmarks_and_in_stream_errors() {
    let (api, s) = server().await;
    let lines = [
        json!({"type": "ADDED", "object": cm_json("a", "11")}),
        json!({"type": "MODIFIED", "object": {"metadata": "corrupt"}}),
        json!({"type": "BOOKMARK", "object": {"kind": "ConfigMap", "apiVersion": "v1",
            "metadata": {"resourceVersion": "12",
                         "annotations": {"k8s.io/initial-events-end": "true"}}}}),
        json!({"type": "DELETED", "object": cm_json("a", "13")}),
        json!({"type": "ERROR", "object": serde_json::from_str::<serde_json::Value>(
            &status(410, "Expired", "too old resource version: 5 (13)")).unwrap()}),
    ];
    let body: String = lines.iter().map(|l| format!("{l}\n")).collect();
    push(&s, 200, body);
    let lw = KubeListerWatcher::new(api);
    let stream = lw
        .watch(WatchRequest {
            resource_version: String::new(),
            timeout_seconds: 321,
            allow_bookmarks: true,
            send_initial_events: true,
        })
        .await
        .unwrap();
    let got: Vec<_> = stream.collect().await;
    assert_eq!(got.len(), 5);
    assert!(matches!(&got[0], Ok(WatchEvent::Added(c)) if c.metadata.name.as_deref() == Some("a")));
    assert!(
        matches!(&got[1], Err(ListWatchError::Decode(_))),
        "{:?}",
        got[1]
    );
    match &got[2] {
        Ok(WatchEvent::Bookmark(b)) => {
            assert_eq!(b.resource_version, "12");
            assert!(b.initial_events_end);
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(&got[3], Ok(WatchEvent::Deleted(_))));
    assert!(
        matches!(&got[4], Err(ListWatchError::Expired(_))),
        "{:?}",
        got[4]
    );
    let q = query(&s, 0);
    for p in [
        "allowWatchBookmarks=true",
        "resourceVersionMatch=NotOlderThan",
        "sendInitialEvents=true",
        "timeoutSeconds=321",
        "watch=true",
    ] {
        assert!(q.contains(&p.to_string()), "{p} missing from {q:?}");
    }
}

#[tokio::test]
async fn informer_syncs_through_kube_against_a_plain_list_watch_server() {
    let (api, s) = server().await;
    // Streaming list rejected as by a server without it, then a plain list and a watch.
    push(
        &s,
        422,
        status(422, "Invalid", "sendInitialEvents is forbidden"),
    );
    let list = json!({"kind": "ConfigMapList", "apiVersion": "v1",
        "metadata": {"resourceVersion": "10"}, "items": [cm_json("a", "7"), cm_json("b", "8")]});
    push(&s, 200, list.to_string());
    let inf = SharedInformer::for_api(
        api,
        InformerOptions {
            reflector: ReflectorOptions {
                seed: Some(1),
                ..ReflectorOptions::default()
            },
            ..InformerOptions::default()
        },
    );
    let token = tokio_util::sync::CancellationToken::new();
    let task = inf.spawn(token.clone());
    let synced = tokio::time::timeout(Duration::from_secs(60), inf.wait_for_cache_sync()).await;
    assert_eq!(synced, Ok(true));
    let mut keys = inf.indexer().list_keys();
    keys.sort();
    assert_eq!(keys, vec!["ns/a", "ns/b"]);
    token.cancel();
    task.await.unwrap().unwrap();
    let q = query(&s, 1);
    assert_eq!(q, vec!["limit=500", "resourceVersion=0"]);
}
