//! HTTP-level tests of the static router: exact content types, Status bodies, caching
//! headers, and how another module's routes plug in.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use axum::routing::get;
use herald_core::clock::FakeClock;
use herald_server::api::health::{HealthChecks, check_fn};
use herald_server::api::{self, ApiState};
use serde_json::Value;
use tower::ServiceExt;

const AGG: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";

fn state() -> ApiState {
    ApiState::new(Arc::new(FakeClock::new(
        "2024-05-10T12:00:00Z".parse().unwrap(),
    )))
}

struct Resp {
    status: StatusCode,
    headers: axum::http::HeaderMap,
    body: Vec<u8>,
}

impl Resp {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
    fn header(&self, name: header::HeaderName) -> &str {
        self.headers
            .get(&name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }
}

async fn call(app: &Router, method: &str, uri: &str, accept: Option<&str>) -> Resp {
    let mut req = Request::builder()
        .method(method)
        .uri(uri)
        .header(header::HOST, "127.0.0.1:6443");
    if let Some(a) = accept {
        req = req.header(header::ACCEPT, a);
    }
    let resp = app
        .clone()
        .oneshot(req.body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = resp.status();
    let headers = resp.headers().clone();
    let body = axum::body::to_bytes(resp.into_body(), 16 << 20)
        .await
        .unwrap()
        .to_vec();
    Resp {
        status,
        headers,
        body,
    }
}

fn assert_status(r: &Resp, code: u16, reason: &str) {
    assert_eq!(r.status.as_u16(), code, "{}", r.text());
    assert_eq!(r.header(header::CONTENT_TYPE), "application/json");
    let v = r.json();
    assert_eq!(v["kind"], "Status");
    assert_eq!(v["apiVersion"], "v1");
    assert_eq!(v["status"], "Failure");
    assert_eq!(v["code"], code);
    assert_eq!(v["reason"], reason);
}

#[tokio::test]
async fn version_endpoint() {
    let app = api::router(state());
    let r = call(
        &app,
        "GET",
        "/version?timeout=5s",
        Some("application/json, */*"),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.header(header::CONTENT_TYPE), "application/json");
    let v = r.json();
    assert_eq!(
        (v["major"].as_str(), v["minor"].as_str()),
        (Some("1"), Some("32"))
    );
    assert_eq!(v["gitVersion"], "v1.32.4+herald");
}

#[tokio::test]
async fn aggregated_discovery_only_when_asked_with_exact_content_type() {
    let app = api::router(state());
    let r = call(&app, "GET", "/api?timeout=32s", Some(AGG)).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(
        r.header(header::CONTENT_TYPE),
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    );
    assert_eq!(r.header(header::VARY), "Accept");
    let v = r.json();
    assert_eq!(v["kind"], "APIGroupDiscoveryList");
    let res = &v["items"][0]["versions"][0]["resources"][0];
    assert_eq!(res["resource"], "events");
    assert_eq!(res["responseKind"]["kind"], "Event");

    let r = call(&app, "GET", "/apis", Some(AGG)).await;
    assert_eq!(
        r.header(header::CONTENT_TYPE),
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    );
    assert_eq!(r.json()["items"][0]["metadata"]["name"], "events.k8s.io");

    let beta = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList";
    let r = call(&app, "GET", "/apis", Some(beta)).await;
    assert_eq!(r.header(header::CONTENT_TYPE), beta);
    assert_eq!(r.json()["apiVersion"], "apidiscovery.k8s.io/v2beta1");

    // Indented (`pretty=true`, or curl's user agent), it is still the negotiated type:
    // client-go reads a plain `application/json` answer as legacy discovery.
    let r = call(&app, "GET", "/apis?pretty=true", Some(AGG)).await;
    assert_eq!(
        r.header(header::CONTENT_TYPE),
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    );
    assert!(r.text().starts_with("{\n  \""), "{}", r.text());
    assert_eq!(r.json()["kind"], "APIGroupDiscoveryList");
}

#[tokio::test]
async fn legacy_discovery_documents() {
    let app = api::router(state());
    for accept in [None, Some("application/json, */*"), Some("*/*")] {
        let r = call(&app, "GET", "/api", accept).await;
        assert_eq!(r.header(header::CONTENT_TYPE), "application/json");
        let v = r.json();
        assert_eq!(v["kind"], "APIVersions");
        assert_eq!(v["versions"], serde_json::json!(["v1"]));
        assert_eq!(
            v["serverAddressByClientCIDRs"][0]["serverAddress"],
            "127.0.0.1:6443"
        );
    }
    let v = call(&app, "GET", "/apis", Some("application/json"))
        .await
        .json();
    assert_eq!(v["kind"], "APIGroupList");
    assert_eq!(
        v["groups"][0]["preferredVersion"]["groupVersion"],
        "events.k8s.io/v1"
    );

    let v = call(
        &app,
        "GET",
        "/api/v1?timeout=32s",
        Some("application/json, */*"),
    )
    .await
    .json();
    assert_eq!(v["kind"], "APIResourceList");
    assert_eq!(v["groupVersion"], "v1");
    assert_eq!(v["resources"][0]["shortNames"][0], "ev");

    let v = call(&app, "GET", "/apis/events.k8s.io/v1", None)
        .await
        .json();
    assert_eq!(v["groupVersion"], "events.k8s.io/v1");
    assert_eq!(v["resources"][0]["storageVersionHash"], "r2yiGXH7wu8=");

    let v = call(&app, "GET", "/apis/events.k8s.io", None).await.json();
    assert_eq!(v["kind"], "APIGroup");
    assert_eq!(v["name"], "events.k8s.io");
}

#[tokio::test]
async fn unacceptable_discovery_is_a_406_status() {
    let app = api::router(state());
    let r = call(&app, "GET", "/api", Some("application/xml")).await;
    assert_status(&r, 406, "NotAcceptable");
}

/// Herald encodes events, their lists and `Status`es as protobuf; other documents go out as
/// JSON even to a protobuf-only Accept, labelled so (client-go decodes by Content-Type).
#[tokio::test]
async fn protobuf_only_discovery_is_answered_in_json() {
    let app = api::router(state());
    let r = call(
        &app,
        "GET",
        "/api",
        Some("application/vnd.kubernetes.protobuf"),
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.headers["content-type"], "application/json");
    assert_eq!(r.json()["kind"], "APIVersions");
}

#[tokio::test]
async fn unknown_paths_and_methods_are_status_errors() {
    let app = api::router(state());
    let r = call(&app, "GET", "/api/v1/widgets", None).await;
    assert_status(&r, 404, "NotFound");
    assert_eq!(
        r.json()["message"],
        "the server could not find the requested resource"
    );
    let r = call(&app, "POST", "/version", None).await;
    assert_status(&r, 405, "MethodNotAllowed");
    let r = call(&app, "DELETE", "/api", None).await;
    assert_status(&r, 405, "MethodNotAllowed");
}

#[tokio::test]
async fn openapi_v3_index_documents_and_hash_urls() {
    let app = api::router(state());
    let r = call(
        &app,
        "GET",
        "/openapi/v3?timeout=32s",
        Some("application/json, */*"),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK);
    let idx = r.json();
    for gv in ["api/v1", "apis/events.k8s.io/v1"] {
        let url = idx["paths"][gv]["serverRelativeURL"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(url.starts_with(&format!("/openapi/v3/{gv}?hash=")), "{url}");
        let r = call(
            &app,
            "GET",
            &format!("{url}&timeout=32s"),
            Some("application/json"),
        )
        .await;
        assert_eq!(r.status, StatusCode::OK, "{url}");
        assert_eq!(r.header(header::CACHE_CONTROL), "public, immutable");
        let hash = url.split("hash=").nth(1).unwrap();
        assert_eq!(r.header(header::ETAG), format!("\"{hash}\""));
        let doc = r.json();
        assert_eq!(doc["openapi"], "3.0.0");
        assert!(doc["components"]["schemas"].as_object().unwrap().len() > 10);

        let stale = call(&app, "GET", &format!("/openapi/v3/{gv}?hash=0000"), None).await;
        assert_eq!(stale.status, StatusCode::MOVED_PERMANENTLY);
        assert_eq!(stale.header(header::LOCATION), url);

        let plain = call(&app, "GET", &format!("/openapi/v3/{gv}"), None).await;
        assert_eq!(plain.status, StatusCode::OK);
        assert_eq!(plain.header(header::CACHE_CONTROL), "no-cache, private");
        assert_eq!(plain.body, r.body);
    }
    let r = call(&app, "GET", "/openapi/v3/apis/apps/v1", None).await;
    assert_status(&r, 404, "NotFound");
    let r = call(
        &app,
        "GET",
        "/openapi/v2?timeout=32s",
        Some("application/com.github.proto-openapi.spec.v2@v1.0+protobuf"),
    )
    .await;
    assert_status(&r, 404, "NotFound");
}

#[tokio::test]
async fn health_probes() {
    let ready = Arc::new(AtomicBool::new(false));
    let flag = ready.clone();
    let health = HealthChecks::default().with_readiness(check_fn("storage", move || {
        if flag.load(Ordering::SeqCst) {
            Ok(())
        } else {
            Err("opening".into())
        }
    }));
    let app = api::router(state().with_health(health));

    let r = call(&app, "GET", "/livez", None).await;
    assert_eq!((r.status, r.text().as_str()), (StatusCode::OK, "ok"));
    assert_eq!(r.header(header::CONTENT_TYPE), "text/plain; charset=utf-8");
    let r = call(&app, "GET", "/livez?verbose", None).await;
    assert_eq!(r.text(), "[+]ping ok\n[+]log ok\nlivez check passed\n");

    let r = call(&app, "GET", "/readyz", None).await;
    assert_eq!(r.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(
        r.text(),
        "[+]ping ok\n[+]log ok\n[-]storage failed: reason withheld\nreadyz check failed\n"
    );
    let r = call(&app, "GET", "/readyz/storage", None).await;
    assert_eq!(r.status, StatusCode::INTERNAL_SERVER_ERROR);
    let r = call(&app, "GET", "/livez/storage", None).await;
    assert_status(&r, 404, "NotFound");

    // Readiness checks are not /healthz's (as in kube-apiserver): a store that is not ready
    // leaves the server healthy.
    let r = call(&app, "GET", "/healthz?verbose=true", None).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.text(), "[+]ping ok\n[+]log ok\nhealthz check passed\n");

    ready.store(true, Ordering::SeqCst);
    let r = call(&app, "GET", "/readyz?verbose=true", None).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(
        r.text(),
        "[+]ping ok\n[+]log ok\n[+]storage ok\nreadyz check passed\n"
    );
    let r = call(&app, "GET", "/readyz/storage", None).await;
    assert_eq!((r.status, r.text().as_str()), (StatusCode::OK, "ok"));
    let r = call(&app, "GET", "/readyz/nope", None).await;
    assert_status(&r, 404, "NotFound");
}

#[tokio::test]
async fn events_routes_plug_in_with_router_with() {
    let events = Router::new().route(
        "/api/v1/namespaces/{ns}/events",
        get(|axum::extract::Path(ns): axum::extract::Path<String>| async move { ns }),
    );
    let app = api::router_with(state(), events);
    let r = call(
        &app,
        "GET",
        "/api/v1/namespaces/kube-system/events?&limit=1",
        None,
    )
    .await;
    assert_eq!(
        (r.status, r.text().as_str()),
        (StatusCode::OK, "kube-system")
    );
    // The static routes are still there, and the Status fallbacks cover both sets.
    assert_eq!(
        call(&app, "GET", "/api/v1", None).await.json()["kind"],
        "APIResourceList"
    );
    let r = call(&app, "PATCH", "/api/v1/namespaces/x/events", None).await;
    assert_status(&r, 405, "MethodNotAllowed");
    let r = call(&app, "GET", "/api/v1/namespaces/x/widgets", None).await;
    assert_status(&r, 404, "NotFound");
}

/// The kinds events are about are in discovery without verbs (so kubectl can resolve
/// `--for pod/NAME`), and their own paths are a 405 that says why.
#[tokio::test]
async fn referenced_kinds_are_listed_without_verbs_and_refused() {
    let app = api::router(state());
    let core = call(&app, "GET", "/api/v1", None).await.json();
    let pods = core["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "pods")
        .expect("pods in /api/v1");
    assert_eq!(pods["kind"], "Pod");
    assert_eq!(pods["namespaced"], true);
    assert_eq!(pods["verbs"], serde_json::json!([]));
    assert_eq!(pods["shortNames"], serde_json::json!(["po"]));
    assert_eq!(core["resources"][0]["name"], "events");

    let agg = call(&app, "GET", "/apis", Some(AGG)).await.json();
    let groups: Vec<&str> = agg["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(groups[0], "events.k8s.io");
    assert!(
        groups.contains(&"apps") && groups.contains(&"batch"),
        "{groups:?}"
    );
    let apps = &agg["items"][groups.iter().position(|g| *g == "apps").unwrap()];
    let deploy = apps["versions"][0]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["resource"] == "deployments")
        .unwrap();
    assert_eq!(
        deploy["responseKind"],
        serde_json::json!({"group": "apps", "version": "v1", "kind": "Deployment"})
    );
    assert_eq!(deploy["verbs"], serde_json::json!([]));
    let agg_core = call(&app, "GET", "/api", Some(AGG)).await.json();
    let nodes = agg_core["items"][0]["versions"][0]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["resource"] == "nodes")
        .unwrap();
    assert_eq!(nodes["scope"], "Cluster");

    let legacy = call(&app, "GET", "/apis", Some("application/json"))
        .await
        .json();
    assert!(
        legacy["groups"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["preferredVersion"]["groupVersion"] == "apps/v1")
    );
    let v = call(&app, "GET", "/apis/apps/v1", None).await.json();
    assert_eq!(v["kind"], "APIResourceList");
    assert_eq!(v["groupVersion"], "apps/v1");
    assert_eq!(
        call(&app, "GET", "/apis/batch", None).await.json()["kind"],
        "APIGroup"
    );

    for (method, path) in [
        ("GET", "/api/v1/pods"),
        ("GET", "/api/v1/namespaces/default/pods"),
        ("GET", "/api/v1/namespaces/default/pods/web-1"),
        ("GET", "/api/v1/namespaces/default/pods/web-1/log"),
        ("DELETE", "/api/v1/nodes/n1"),
        ("GET", "/api/v1/namespaces/default"),
        ("POST", "/apis/apps/v1/namespaces/default/deployments"),
    ] {
        let r = call(&app, method, path, None).await;
        assert_status(&r, 405, "MethodNotAllowed");
        assert!(
            r.json()["message"]
                .as_str()
                .unwrap()
                .contains("herald-server stores only events"),
            "{path}: {}",
            r.text()
        );
    }
}

#[tokio::test]
async fn serve_over_tcp_and_shut_down() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(api::serve(listener, api::router(state()), async {
        let _ = rx.await;
    }));
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET /version HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut buf = Vec::new();
    tokio::time::timeout(std::time::Duration::from_secs(10), s.read_to_end(&mut buf))
        .await
        .expect("response within bound")
        .unwrap();
    let text = String::from_utf8_lossy(&buf);
    assert!(text.starts_with("HTTP/1.1 200 OK"), "{text}");
    assert!(text.contains("\"minor\":\"32\""), "{text}");
    tx.send(()).unwrap();
    tokio::time::timeout(std::time::Duration::from_secs(10), task)
        .await
        .expect("serve returns after shutdown")
        .unwrap()
        .unwrap();
}

/// A writer the test's subscriber logs into.
#[derive(Clone, Default)]
struct LogBuf(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for LogBuf {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A 5xx reaches the operator's log with the request and the Status message; a 4xx is the
/// client's business and is not logged.
#[tokio::test(flavor = "current_thread")]
async fn server_failures_are_logged_with_the_request() {
    let buf = LogBuf::default();
    let sink = buf.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || sink.clone())
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let failing = Router::new().route(
        "/api/v1/namespaces/{ns}/events",
        get(|| async {
            api::StatusError(herald_core::status::ApiError::internal("disk I/O error"))
        }),
    );
    let app = api::router_with(state(), failing);
    let r = call(&app, "GET", "/api/v1/namespaces/a/events?limit=1", None).await;
    assert_status(&r, 500, "InternalError");
    let missing = call(&app, "GET", "/api/v1/namespaces/a/widgets", None).await;
    assert_status(&missing, 404, "NotFound");

    let log = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 1, "{log}");
    let line = lines[0];
    assert!(line.contains("ERROR"), "{line}");
    assert!(line.contains("request failed"), "{line}");
    assert!(line.contains("method=GET"), "{line}");
    assert!(
        line.contains("path=\"/api/v1/namespaces/a/events\""),
        "{line}"
    );
    assert!(line.contains("status=500"), "{line}");
    assert!(line.contains("disk I/O error"), "{line}");
    let audit_id = r.header(http::HeaderName::from_static("audit-id"));
    assert!(!audit_id.is_empty());
    assert!(line.contains(audit_id), "{line}");
}

/// 504s are the client's doing (a body sent slowly past the request deadline, a read at a
/// resourceVersion the store has not reached) and can come by the thousand: they are logged
/// at most once per interval, the line counting the others. (The only 504s of this test
/// binary are these, so the process-wide throttle starts fresh.)
#[tokio::test(flavor = "current_thread")]
async fn timeouts_are_logged_once_per_interval() {
    let buf = LogBuf::default();
    let sink = buf.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || sink.clone())
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let timing_out = Router::new().route(
        "/api/v1/namespaces/{ns}/events",
        get(|| async {
            api::StatusError(herald_core::status::ApiError::new(
                504,
                herald_core::status::Reason::Timeout,
                "Too large resource version: 99, current: 7",
            ))
        }),
    );
    let app = api::router_with(state(), timing_out);
    for _ in 0..5 {
        let r = call(
            &app,
            "GET",
            "/api/v1/namespaces/a/events?resourceVersion=99",
            None,
        )
        .await;
        assert_status(&r, 504, "Timeout");
    }
    let log = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 1, "{log}");
    assert!(lines[0].contains("status=504"), "{log}");
    assert!(lines[0].contains("Too large resource version"), "{log}");
    assert!(lines[0].contains("more_504s_since_last_line=0"), "{log}");
}
