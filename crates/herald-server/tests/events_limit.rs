//! `max_events` (`herald serve --max-events`): a store holding its limit refuses creates with
//! a 429 `TooManyRequests` and `Retry-After`, in every way an event can be created (POST, a PUT
//! of a missing name, server-side apply), while updates, patches, deletes and dry runs still
//! work; room comes back as events are deleted or expire. On SQLite the count survives a
//! restart. Nothing refused is stored, nothing stored is lost.

mod events_support;

use std::time::Duration;

use events_support::*;
use herald_core::clock::FakeClock;
use herald_server::registry::RegistryOptions;
use herald_server::server::{Server, ServerOptions, StoreKind};
use serde_json::json;
use std::sync::Arc;

const TTL: Duration = Duration::from_secs(600);

async fn limited(store: StoreKind, clock: Arc<FakeClock>, max: usize) -> Server {
    limited_with_ttl(store, clock, max, Some(TTL)).await
}

async fn limited_with_ttl(
    store: StoreKind,
    clock: Arc<FakeClock>,
    max: usize,
    ttl: Option<Duration>,
) -> Server {
    let cfg = ServerOptions {
        store,
        listen: "127.0.0.1:0".parse().unwrap(),
        event_ttl: ttl,
        sweep_interval: Duration::from_secs(3600),
        registry: RegistryOptions {
            max_events: Some(max),
            ..RegistryOptions::default()
        },
        clock,
        ..ServerOptions::default()
    };
    Server::start(cfg).await.expect("server starts")
}

/// Asserts `r` is the store-full 429 for `name`.
fn assert_full(r: &Resp, name: &str) {
    let s = r.status_failure(429, "TooManyRequests");
    assert_eq!(
        s["message"],
        format!(
            "events {name:?} cannot be created: the event store is at its limit of 3 events (max-events); room is made as events expire (600s after their last write)"
        ),
        "{s}"
    );
    assert_eq!(s["details"]["name"], name, "{s}");
    assert_eq!(s["details"]["retryAfterSeconds"], 1, "{s}");
    assert_eq!(r.headers["retry-after"], "1");
}

async fn names(http: &Http) -> Vec<String> {
    let list = http.get("/api/v1/events").await.json();
    let mut names: Vec<String> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    names
}

async fn refuses_creates_at_the_limit(store: StoreKind) {
    let clock = fake_clock();
    let server = limited(store, clock.clone(), 3).await;
    let http = Http::new(&server);
    let cp = core_path("default");
    for name in ["a", "b", "c"] {
        http.create_core("default", name, "R").await;
    }

    // Every way of creating a fourth is refused.
    assert_full(&http.post(&cp, &core_event("d", "default", "R")).await, "d");
    assert_full(
        &http
            .put(&format!("{cp}/d"), &core_event("d", "default", "R"))
            .await,
        "d",
    );
    let apply = http
        .send(
            "PATCH",
            &format!("{cp}/d?fieldManager=m"),
            Some("application/apply-patch+yaml"),
            None,
            serde_json::to_vec(&core_event("d", "default", "R")).unwrap(),
        )
        .await;
    assert_full(&apply, "d");
    let generated = http
        .post(
            &v1_path("default"),
            &json!({
                "apiVersion": "events.k8s.io/v1", "kind": "Event",
                "metadata": {"generateName": "gen-"},
                "eventTime": "2026-11-22T00:00:00.000000Z",
                "reportingController": "x.io/c", "reportingInstance": "i",
                "action": "Act", "reason": "R", "type": "Normal",
                "regarding": {"kind": "Pod", "name": "p", "namespace": "default"}
            }),
        )
        .await;
    let s = generated.status_failure(429, "TooManyRequests");
    assert!(
        s["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("events.events.k8s.io \"gen-")),
        "{s}"
    );
    // A name that is taken is a 409 whatever the room: no wait would make it succeed.
    let taken = http.post(&cp, &core_event("a", "default", "R")).await;
    taken.status_failure(409, "AlreadyExists");

    // Writes to what is stored still work, and a dry run stores nothing, so it is allowed.
    let mut a = http.get(&format!("{cp}/a")).await.json();
    a["message"] = json!("updated at the limit");
    assert_eq!(http.put(&format!("{cp}/a"), &a).await.status, 200);
    let patched = http
        .patch(
            &format!("{cp}/b"),
            "application/merge-patch+json",
            &json!({"count": 7}),
        )
        .await;
    assert_eq!(patched.status, 200, "{}", patched.text());
    let dry = http
        .send(
            "POST",
            &format!("{cp}?dryRun=All"),
            Some("application/json"),
            None,
            serde_json::to_vec(&core_event("d", "default", "R")).unwrap(),
        )
        .await;
    assert_eq!(dry.status, 201, "{}", dry.text());
    assert_eq!(names(&http).await, ["a", "b", "c"]);

    // A delete makes room for exactly one.
    assert_eq!(http.delete(&format!("{cp}/a"), "").await.status, 200);
    http.create_core("default", "d", "R").await;
    assert_full(&http.post(&cp, &core_event("e", "default", "R")).await, "e");

    // Expiry makes room too (the fake clock stood still, so b, c and d expire together).
    clock.advance(TTL);
    assert_eq!(server.registry().backend().expire_due().await.unwrap(), 3);
    for name in ["e", "f", "g"] {
        http.create_core("default", name, "R").await;
    }
    assert_full(&http.post(&cp, &core_event("h", "default", "R")).await, "h");
    assert_eq!(names(&http).await, ["e", "f", "g"]);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn memory_refuses_creates_at_the_limit() {
    refuses_creates_at_the_limit(StoreKind::Memory).await;
}

#[tokio::test]
async fn sqlite_refuses_creates_at_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    refuses_creates_at_the_limit(StoreKind::Sqlite {
        dir: dir.path().to_path_buf(),
    })
    .await;
}

#[tokio::test]
async fn sqlite_counts_the_events_it_reopens_with() {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreKind::Sqlite {
        dir: dir.path().to_path_buf(),
    };
    let clock = fake_clock();
    let server = limited(store.clone(), clock.clone(), 3).await;
    let http = Http::new(&server);
    let cp = core_path("default");
    for name in ["a", "b", "c"] {
        http.create_core("default", name, "R").await;
    }
    server.shutdown().await.unwrap();

    let server = limited(store, clock, 3).await;
    let http = Http::new(&server);
    assert_full(&http.post(&cp, &core_event("d", "default", "R")).await, "d");
    assert_eq!(names(&http).await, ["a", "b", "c"]);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn without_a_ttl_only_deletes_make_room_so_no_retry_is_suggested() {
    let server = limited_with_ttl(StoreKind::Memory, fake_clock(), 1, None).await;
    let http = Http::new(&server);
    let cp = core_path("default");
    http.create_core("default", "a", "R").await;
    let r = http.post(&cp, &core_event("b", "default", "R")).await;
    let s = r.status_failure(429, "TooManyRequests");
    assert_eq!(
        s["message"],
        "events \"b\" cannot be created: the event store is at its limit of 1 event (max-events); events do not expire here, so delete some to make room",
        "{s}"
    );
    assert!(s["details"].get("retryAfterSeconds").is_none(), "{s}");
    assert!(r.headers.get("retry-after").is_none());
    assert_eq!(http.delete(&format!("{cp}/a"), "").await.status, 200);
    http.create_core("default", "b", "R").await;
    server.shutdown().await.unwrap();
}
