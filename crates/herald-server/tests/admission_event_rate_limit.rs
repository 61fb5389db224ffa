//! EventRateLimit's semantics table, over HTTP on 127.0.0.1 against a live server whose
//! clock is a `FakeClock` (time moves only when a test moves it): each limit type, both API
//! groups, create, update and patch (keyed on the patched object), dry runs exempt, LRU
//! eviction, tokens spent in every bucket even when another refuses, upstream's messages,
//! and Herald's `Retry-After`.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use herald_core::clock::FakeClock;
use herald_server::api::admission::{AdmissionOptions, AdmissionPlugin};
use herald_server::api::auth::{AuthOptions, AuthorizationMode};
use herald_server::server::{Server, ServerOptions};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};

/// A guard on every network wait, so a broken server fails the test instead of hanging it.
const GUARD: Duration = Duration::from_secs(20);
const ALICE: &str = "alice-token";
const BOB: &str = "bob-token";

struct Env {
    server: Server,
    clock: Arc<FakeClock>,
    client: Client<HttpConnector, Full<Bytes>>,
    _dir: tempfile::TempDir,
}

struct Resp {
    status: u16,
    headers: http::HeaderMap,
    body: Value,
}

impl Resp {
    /// Asserts a 429 `Status` with `message`, `Retry-After: secs` and
    /// `details.retryAfterSeconds: secs`.
    fn refused(&self, message: &str, secs: u32) {
        assert_eq!(self.status, 429, "{}", self.body);
        assert_eq!(self.body["kind"], "Status", "{}", self.body);
        assert_eq!(self.body["status"], "Failure", "{}", self.body);
        assert_eq!(self.body["reason"], "TooManyRequests", "{}", self.body);
        assert_eq!(self.body["code"], 429, "{}", self.body);
        assert_eq!(self.body["message"], message, "{}", self.body);
        assert_eq!(
            self.body["details"]["retryAfterSeconds"], secs,
            "{}",
            self.body
        );
        assert_eq!(
            self.headers
                .get(http::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok()),
            Some(secs.to_string().as_str())
        );
    }

    fn ok(&self) -> &Value {
        assert!(
            self.status == 200 || self.status == 201,
            "{} {}",
            self.status,
            self.body
        );
        &self.body
    }
}

/// A server with EventRateLimit and `limits` (YAML list items), token users alice and bob,
/// every request allowed.
async fn start(limits: &str) -> Env {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(&tokens, format!("{ALICE},alice,1\n{BOB},bob,2\n")).unwrap();
    std::fs::write(
        dir.path().join("limits.yaml"),
        format!(
            "apiVersion: eventratelimit.admission.k8s.io/v1alpha1\nkind: Configuration\nlimits:\n{limits}"
        ),
    )
    .unwrap();
    let admission = dir.path().join("admission.yaml");
    std::fs::write(
        &admission,
        "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- name: EventRateLimit\n  path: limits.yaml\n",
    )
    .unwrap();
    let clock = Arc::new(FakeClock::new("2026-11-22T00:00:00Z".parse().unwrap()));
    let server = Server::start(ServerOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        sweep_interval: Duration::from_secs(3600),
        clock: clock.clone(),
        auth: AuthOptions {
            token_auth_file: Some(tokens),
            authorization_mode: Some(AuthorizationMode::AlwaysAllow),
            ..AuthOptions::default()
        },
        admission: AdmissionOptions {
            enable_plugins: vec![AdmissionPlugin::EventRateLimit],
            config_file: Some(admission),
        },
        ..ServerOptions::default()
    })
    .await
    .expect("server starts");
    Env {
        server,
        clock,
        client: Client::builder(TokioExecutor::new()).build_http(),
        _dir: dir,
    }
}

fn core(ns: &str) -> String {
    format!("/api/v1/namespaces/{ns}/events")
}

fn v1(ns: &str) -> String {
    format!("/apis/events.k8s.io/v1/namespaces/{ns}/events")
}

/// A core/v1 event from `component` on `host` about pod `pod` in `ns`.
fn core_event(ns: &str, component: &str, host: &str, pod: &str) -> Value {
    json!({
        "metadata": {"generateName": "e-"},
        "involvedObject": {"kind": "Pod", "namespace": ns, "name": pod, "uid": format!("uid-{pod}"), "apiVersion": "v1"},
        "reason": "Started", "message": "started", "type": "Normal",
        "source": {"component": component, "host": host},
    })
}

/// The events.k8s.io/v1 event with the same source and object as [`core_event`].
fn v1_event(ns: &str, controller: &str, instance: &str, pod: &str) -> Value {
    json!({
        "metadata": {"generateName": "e-"},
        "eventTime": "2026-11-22T00:00:00.000000Z",
        "reportingController": controller, "reportingInstance": instance,
        "action": "Start", "reason": "Started", "note": "started", "type": "Normal",
        "regarding": {"kind": "Pod", "namespace": ns, "name": pod, "uid": format!("uid-{pod}"), "apiVersion": "v1"},
    })
}

impl Env {
    async fn send(&self, token: &str, method: &str, path: &str, ct: &str, body: &Value) -> Resp {
        let req = http::Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.server.url()))
            .header(http::header::AUTHORIZATION, format!("Bearer {token}"))
            .header(http::header::CONTENT_TYPE, ct)
            .body(Full::new(Bytes::from(serde_json::to_vec(body).unwrap())))
            .unwrap();
        let resp = tokio::time::timeout(GUARD, self.client.request(req))
            .await
            .expect("response in time")
            .expect("request sent");
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let bytes = tokio::time::timeout(GUARD, resp.into_body().collect())
            .await
            .expect("body in time")
            .unwrap()
            .to_bytes();
        let body = serde_json::from_slice(&bytes)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&bytes)));
        Resp {
            status,
            headers,
            body,
        }
    }

    async fn post(&self, token: &str, path: &str, body: &Value) -> Resp {
        self.send(token, "POST", path, "application/json", body)
            .await
    }

    /// Creates a core/v1 event in `ns` as alice (from kubelet on node-1 about pod web).
    async fn create(&self, ns: &str) -> Resp {
        self.post(
            ALICE,
            &core(ns),
            &core_event(ns, "kubelet", "node-1", "web"),
        )
        .await
    }

    /// `herald_apiserver_admission_rejections_total` of `limit_type`.
    fn rejections(&self, limit_type: &str) -> u64 {
        let want = format!(
            r#"herald_apiserver_admission_rejections_total{{plugin="EventRateLimit",limit_type="{limit_type}"}} "#
        );
        self.server
            .metrics()
            .encode()
            .lines()
            .find_map(|l| l.strip_prefix(&want).map(|n| n.parse().unwrap()))
            .unwrap_or(0)
    }
}

fn ns_refusal(ns: &str) -> String {
    format!("Too many requests: Too many requests: limit reached on type Namespace for key {ns}")
}

#[tokio::test]
async fn namespace_limits_count_writes_per_url_namespace_in_both_groups() {
    let env = start("- {type: Namespace, qps: 1, burst: 2}\n").await;
    env.create("a").await.ok();
    // events.k8s.io/v1 writes draw on the same bucket (upstream does not limit them).
    env.post(BOB, &v1("a"), &v1_event("a", "kubelet", "node-1", "web"))
        .await
        .ok();
    env.create("a").await.refused(&ns_refusal("a"), 1);
    env.post(BOB, &v1("a"), &v1_event("a", "kubelet", "node-1", "web"))
        .await
        .refused(&ns_refusal("a"), 1);
    env.create("b").await.ok();
    assert_eq!(env.rejections("Namespace"), 2);
    // The Retry-After is honest: one token a second.
    env.clock.advance(Duration::from_millis(999));
    env.create("a").await.refused(&ns_refusal("a"), 1);
    env.clock.advance(Duration::from_millis(1));
    env.create("a").await.ok();
    env.create("a").await.refused(&ns_refusal("a"), 1);
    // Refills up to burst, no further.
    env.clock.advance(Duration::from_secs(60));
    env.create("a").await.ok();
    env.create("a").await.ok();
    env.create("a").await.refused(&ns_refusal("a"), 1);
}

#[tokio::test]
async fn user_limits_count_writes_per_authenticated_user() {
    let env = start("- {type: User, qps: 1, burst: 1}\n").await;
    env.create("a").await.ok();
    env.post(ALICE, &core("b"), &core_event("b", "x", "y", "z"))
        .await
        .refused(
            "Too many requests: Too many requests: limit reached on type User for key alice",
            1,
        );
    env.post(
        BOB,
        &core("a"),
        &core_event("a", "kubelet", "node-1", "web"),
    )
    .await
    .ok();
    assert_eq!(env.rejections("User"), 1);
}

#[tokio::test]
async fn a_server_limit_is_one_bucket_for_everything() {
    let env = start("- {type: Server, qps: 1, burst: 2}\n").await;
    env.create("a").await.ok();
    env.post(BOB, &v1("b"), &v1_event("b", "c", "d", "e"))
        .await
        .ok();
    env.post(BOB, &core("c"), &core_event("c", "f", "g", "h"))
        .await
        .refused(
            "Too many requests: Too many requests: limit reached on type Server for key ",
            1,
        );
}

#[tokio::test]
async fn source_and_object_keys_on_source_and_involved_object_in_both_groups() {
    let env = start("- {type: SourceAndObject, qps: 1, burst: 1}\n").await;
    let key = "kubeletnode-1Podawebuid-webv1";
    let refusal = format!(
        "Too many requests: Too many requests: limit reached on type SourceAndObject for key {key}"
    );
    env.create("a").await.ok();
    env.create("a").await.refused(&refusal, 1);
    // events.k8s.io/v1: reportingController, reportingInstance and regarding make the same
    // key, so the same bucket.
    env.post(BOB, &v1("a"), &v1_event("a", "kubelet", "node-1", "web"))
        .await
        .refused(&refusal, 1);
    // Any other source or object is another bucket.
    env.post(
        ALICE,
        &core("a"),
        &core_event("a", "kubelet", "node-2", "web"),
    )
    .await
    .ok();
    env.post(
        ALICE,
        &core("a"),
        &core_event("a", "kubelet", "node-1", "db"),
    )
    .await
    .ok();
    env.post(BOB, &v1("a"), &v1_event("a", "scheduler", "node-1", "web"))
        .await
        .ok();
    assert_eq!(env.rejections("SourceAndObject"), 2);
}

#[tokio::test]
async fn updates_and_patches_take_tokens_keyed_on_the_object_as_written() {
    let env = start("- {type: SourceAndObject, qps: 1, burst: 1}\n").await;
    let created = env
        .post(ALICE, &core("a"), &core_event("a", "first", "h", "web"))
        .await;
    let name = created.ok()["metadata"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    let one = format!("{}/{name}", core("a"));
    let refusal = |component: &str| {
        format!(
            "Too many requests: Too many requests: limit reached on type SourceAndObject for key {component}hPodawebuid-webv1"
        )
    };
    // A merge patch that changes the source: judged on the patched event, whose bucket
    // ("second…") is full, not on the stored one ("first…", empty).
    let to_second = json!({"source": {"component": "second"}});
    env.send(
        ALICE,
        "PATCH",
        &one,
        "application/merge-patch+json",
        &to_second,
    )
    .await
    .ok();
    // The next patch of the same event keys on "second…" too, now empty.
    env.send(
        ALICE,
        "PATCH",
        &one,
        "application/merge-patch+json",
        &json!({"count": 2}),
    )
    .await
    .refused(&refusal("second"), 1);
    // A strategic-merge patch to a third source, and a JSON patch back to the second.
    env.send(
        ALICE,
        "PATCH",
        &one,
        "application/strategic-merge-patch+json",
        &json!({"source": {"component": "third"}}),
    )
    .await
    .ok();
    env.send(
        ALICE,
        "PATCH",
        &one,
        "application/json-patch+json",
        &json!([{"op": "replace", "path": "/source/component", "value": "second"}]),
    )
    .await
    .refused(&refusal("second"), 1);
    // A PUT is judged on the object it stores too.
    let mut replaced = env
        .send(ALICE, "GET", &one, "application/json", &json!({}))
        .await
        .ok()
        .clone();
    replaced["source"]["component"] = json!("fourth");
    env.send(ALICE, "PUT", &one, "application/json", &replaced)
        .await
        .ok();
    replaced["metadata"]["resourceVersion"] = json!(null);
    replaced["count"] = json!(5);
    env.send(ALICE, "PUT", &one, "application/json", &replaced)
        .await
        .refused(&refusal("fourth"), 1);
    // Nothing refused was stored.
    let stored = env
        .send(ALICE, "GET", &one, "application/json", &json!({}))
        .await;
    assert_eq!(stored.ok()["source"]["component"], "fourth");
    assert_ne!(stored.body["count"], 2, "{}", stored.body);
    assert_ne!(stored.body["count"], 5, "{}", stored.body);
    // events.k8s.io/v1 patches are limited as well, keyed on reportingController,
    // reportingInstance and regarding.
    let created = env
        .post(BOB, &v1("a"), &v1_event("a", "ctl", "inst", "db"))
        .await;
    let name = created.ok()["metadata"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    env.send(
        BOB,
        "PATCH",
        &format!("{}/{name}", v1("a")),
        "application/merge-patch+json",
        &json!({"series": {"count": 2, "lastObservedTime": "2026-11-22T00:00:01.000000Z"}}),
    )
    .await
    .refused(
        "Too many requests: Too many requests: limit reached on type SourceAndObject for key ctlinstPodadbuid-dbv1",
        1,
    );
}

#[tokio::test]
async fn dry_runs_take_no_token_and_are_never_refused() {
    let env = start("- {type: Namespace, qps: 1, burst: 1}\n").await;
    let dry = format!("{}?dryRun=All", core("a"));
    for _ in 0..3 {
        env.post(ALICE, &dry, &core_event("a", "kubelet", "node-1", "web"))
            .await
            .ok();
    }
    let created = env.create("a").await;
    let name = created.ok()["metadata"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    env.create("a").await.refused(&ns_refusal("a"), 1);
    // The bucket is empty, and dry runs still pass, in both groups, for every verb.
    env.post(ALICE, &dry, &core_event("a", "kubelet", "node-1", "web"))
        .await
        .ok();
    env.post(
        BOB,
        &format!("{}?dryRun=All", v1("a")),
        &v1_event("a", "kubelet", "node-1", "web"),
    )
    .await
    .ok();
    env.send(
        ALICE,
        "PATCH",
        &format!("{}/{name}?dryRun=All", core("a")),
        "application/merge-patch+json",
        &json!({"count": 3}),
    )
    .await
    .ok();
    assert_eq!(env.rejections("Namespace"), 1);
}

#[tokio::test]
async fn a_key_evicted_from_the_lru_comes_back_with_a_full_bucket() {
    let env = start("- {type: Namespace, qps: 1, burst: 1, cacheSize: 2}\n").await;
    env.create("a").await.ok();
    env.create("a").await.refused(&ns_refusal("a"), 1);
    env.create("b").await.ok();
    // Still cached (b and a): a stays empty.
    env.create("a").await.refused(&ns_refusal("a"), 1);
    env.create("b").await.refused(&ns_refusal("b"), 1);
    // c evicts the least recently used, a (b was used last).
    env.create("c").await.ok();
    env.create("b").await.refused(&ns_refusal("b"), 1);
    // a is back, full, with no time passed; that evicted c.
    env.create("a").await.ok();
    env.create("c").await.ok();
}

#[tokio::test]
async fn every_limit_takes_its_token_even_when_another_refuses() {
    let env =
        start("- {type: Namespace, qps: 1, burst: 1}\n- {type: User, qps: 1, burst: 3}\n").await;
    env.create("a").await.ok(); // a: 0, alice: 2
    env.create("a").await.refused(&ns_refusal("a"), 1); // a: 0, alice: 1
    env.create("b").await.ok(); // b: 0, alice: 0
    // Had the refused write not taken alice's token, she would have one left.
    env.create("c").await.refused(
        "Too many requests: Too many requests: limit reached on type User for key alice",
        1,
    );
    assert_eq!(
        (env.rejections("Namespace"), env.rejections("User")),
        (1, 1)
    );
}

#[tokio::test]
async fn several_refusing_limits_are_aggregated_as_kube_does() {
    let env = start(
        "- {type: Server, qps: 1, burst: 1}\n- {type: Namespace, qps: 1, burst: 1}\n- {type: Namespace, qps: 2, burst: 1}\n",
    )
    .await;
    env.create("a").await.ok();
    // Three refusals, two of them the same message: said once.
    env.create("a").await.refused(
        "Too many requests: [Too many requests: limit reached on type Server for key , Too many requests: limit reached on type Namespace for key a]",
        1,
    );
    assert_eq!(
        (env.rejections("Server"), env.rejections("Namespace")),
        (1, 2)
    );
    // After half a second the qps-2 bucket has its token again, the others not; after a
    // second (the Retry-After), all of them.
    env.clock.advance(Duration::from_millis(500));
    env.create("a").await.refused(
        "Too many requests: [Too many requests: limit reached on type Server for key , Too many requests: limit reached on type Namespace for key a]",
        1,
    );
    env.clock.advance(Duration::from_millis(500));
    env.create("a").await.ok();
}

#[test]
fn retry_after_rounds_up_to_whole_seconds_at_least_one() {
    use herald_server::api::admission::event_rate_limit::retry_after_seconds;
    for (ms, secs) in [(0, 1), (1, 1), (999, 1), (1000, 1), (1001, 2), (2500, 3)] {
        assert_eq!(
            retry_after_seconds(Duration::from_millis(ms)),
            secs,
            "{ms} ms"
        );
    }
}
