//! Watches over real HTTP (and a few at the registry level under paused tokio time):
//! from a revision, from now, watch-list with the initial-events-end bookmark, 410 ERROR
//! events, TTL expiry, selector transitions, Tables, kube-runtime's watcher, SQLite.

mod events_support;

use std::sync::Arc;
use std::time::Duration;

use events_support::*;
use futures::StreamExt;
use herald_core::clock::{Clock, FakeClock};
use herald_core::event::{ApiGroup, CoreEvent};
use herald_server::registry::watch::decoded;
use herald_server::registry::{
    DecodedItem, EventRegistry, ListParams, RegistryOptions, WriteOptions,
};
use herald_server::server::{Server, StoreKind};
use herald_server::storage::{HistoryOptions, INITIAL_REVISION as R0, MemoryBackend};
use serde_json::json;

async fn changes_from_rv(server: &Server) {
    let http = Http::new(server);
    let first = http
        .post(&core_path("default"), &core_event("w.1", "default", "R"))
        .await
        .json();
    let rv1 = rv(&first);
    let mut w = http
        .watch(
            &format!("{}?watch=true&resourceVersion={rv1}", core_path("default")),
            None,
        )
        .await;
    assert_eq!(w.status, 200);
    assert_eq!(w.headers["content-type"], "application/json");
    assert_eq!(w.headers["transfer-encoding"], "chunked");

    let created = http
        .post(&core_path("default"), &core_event("w.2", "default", "R"))
        .await
        .json();
    let (ty, obj) = w.expect().await;
    assert_eq!(ty, "ADDED");
    assert_eq!(obj["metadata"]["name"], "w.2");
    assert_eq!(obj["kind"], "Event");
    assert_eq!(rv(&obj), rv(&created));

    let path = format!("{}/w.2", core_path("default"));
    let patched = http
        .patch(
            &path,
            "application/merge-patch+json",
            &json!({"message": "m2"}),
        )
        .await
        .json();
    let (ty, obj) = w.expect().await;
    assert_eq!(ty, "MODIFIED");
    assert_eq!(obj["message"], "m2");
    assert_eq!(rv(&obj), rv(&patched));

    // events in other namespaces are not in a namespaced watch
    http.create_core("other", "w.3", "R").await;
    assert_eq!(http.delete(&path, "").await.status, 200);
    let (ty, obj) = w.expect().await;
    assert_eq!(ty, "DELETED");
    assert_eq!(obj["message"], "m2", "the last state");
    assert!(rv(&obj) > rv(&patched) + 1, "the deletion's own revision");
}

#[tokio::test]
async fn watch_from_resource_version_memory() {
    let (server, _) = memory().await;
    changes_from_rv(&server).await;
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn watch_from_resource_version_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(
        StoreKind::Sqlite {
            dir: dir.path().to_path_buf(),
        },
        fake_clock(),
    )
    .await;
    changes_from_rv(&server).await;
    // a watch from a revision before a restart still replays
    server.shutdown().await.unwrap();
    let server = start(
        StoreKind::Sqlite {
            dir: dir.path().to_path_buf(),
        },
        fake_clock(),
    )
    .await;
    let http = Http::new(&server);
    // w.1 was the first write
    let mut w = http
        .watch(
            &format!(
                "{}?watch=true&resourceVersion={}",
                core_path("default"),
                R0 + 1
            ),
            None,
        )
        .await;
    let (ty, obj) = w.expect().await;
    assert_eq!(
        (ty.as_str(), obj["metadata"]["name"].as_str()),
        ("ADDED", Some("w.2"))
    );
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn watch_without_rv_starts_with_current_state() {
    let (server, _) = memory().await;
    let http = Http::new(&server);
    for n in ["a.1", "a.2"] {
        http.create_core("default", n, "R").await;
    }
    // kubectl events -w: no RV, no preceding list
    let mut w = http
        .watch(
            &format!("{}?limit=500&watch=true", core_path("default")),
            None,
        )
        .await;
    for n in ["a.1", "a.2"] {
        let (ty, obj) = w.expect().await;
        assert_eq!(
            (ty.as_str(), obj["metadata"]["name"].as_str()),
            ("ADDED", Some(n))
        );
    }
    http.create_core("default", "a.3", "R").await;
    let (ty, obj) = w.expect().await;
    assert_eq!(
        (ty.as_str(), obj["metadata"]["name"].as_str()),
        ("ADDED", Some("a.3"))
    );

    // watch-list: ADDED, then the initial-events-end bookmark at the store revision
    let mut w = http
        .watch(
            "/apis/events.k8s.io/v1/events?watch=true&allowWatchBookmarks=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=0",
            None,
        )
        .await;
    for n in ["a.1", "a.2", "a.3"] {
        let (ty, obj) = w.expect().await;
        assert_eq!(
            (ty.as_str(), obj["metadata"]["name"].as_str()),
            ("ADDED", Some(n))
        );
        assert_eq!(obj["apiVersion"], "events.k8s.io/v1");
    }
    let (ty, obj) = w.expect().await;
    assert_eq!(ty, "BOOKMARK");
    assert_eq!(
        obj["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    assert_eq!(obj["metadata"]["resourceVersion"], (R0 + 3).to_string());
    assert_eq!(obj["kind"], "Event");

    // A watch from "0" (or none) that names neither sendInitialEvents nor
    // resourceVersionMatch is defaulted to a watch-list, as kube-apiserver 1.32 does: with
    // bookmarks allowed it ends its initial events the same way.
    for rv in ["&resourceVersion=0", ""] {
        let mut w = http
            .watch(
                &format!(
                    "{}?watch=true&allowWatchBookmarks=true{rv}",
                    core_path("default")
                ),
                None,
            )
            .await;
        for n in ["a.1", "a.2", "a.3"] {
            assert_eq!(w.expect().await.1["metadata"]["name"], n);
        }
        let (ty, obj) = w.expect().await;
        assert_eq!(ty, "BOOKMARK", "{obj}");
        assert_eq!(
            obj["metadata"]["annotations"]["k8s.io/initial-events-end"],
            "true"
        );
        assert_eq!(obj["metadata"]["resourceVersion"], (R0 + 3).to_string());
    }
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn too_old_rv_gets_an_error_event_then_close() {
    let (server, _) = memory().await;
    let http = Http::new(&server);
    for n in ["o.1", "o.2", "o.3"] {
        http.create_core("default", n, "R").await;
    }
    server.registry().backend().compact(R0 + 2).await.unwrap();
    let mut w = http
        .watch(
            &format!(
                "{}?watch=true&resourceVersion={}",
                core_path("default"),
                R0 + 1
            ),
            None,
        )
        .await;
    assert_eq!(w.status, 200);
    let (ty, obj) = w.expect().await;
    assert_eq!(ty, "ERROR");
    assert_eq!(obj["kind"], "Status");
    assert_eq!(obj["code"], 410);
    assert_eq!(obj["reason"], "Expired");
    assert_eq!(
        obj["message"],
        format!("too old resource version: {} ({})", R0 + 1, R0 + 2)
    );
    assert!(
        w.next().await.is_none(),
        "the stream closes after the ERROR"
    );
    // the server still serves watches from a retained revision
    let mut w = http
        .watch(
            &format!(
                "{}?watch=true&resourceVersion={}",
                core_path("default"),
                R0 + 2
            ),
            None,
        )
        .await;
    let (ty, obj) = w.expect().await;
    assert_eq!(
        (ty.as_str(), obj["metadata"]["name"].as_str()),
        ("ADDED", Some("o.3"))
    );
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn ttl_expiry_is_a_deleted_event_and_writes_restart_it() {
    let (server, clock) = memory().await;
    let http = Http::new(&server);
    let a = http
        .post(&core_path("default"), &core_event("t.1", "default", "R"))
        .await
        .json();
    let b = http
        .post(&core_path("default"), &core_event("t.2", "default", "R"))
        .await
        .json();
    let mut w = http
        .watch(
            &format!(
                "{}?watch=true&resourceVersion={}",
                core_path("default"),
                rv(&b)
            ),
            None,
        )
        .await;
    let backend = server.registry().backend().clone();

    clock.advance(Duration::from_secs(40 * 60));
    let p = http
        .patch(
            &format!("{}/t.2", core_path("default")),
            "application/merge-patch+json",
            &json!({"count": 2}),
        )
        .await;
    assert_eq!(p.status, 200);
    let (ty, _) = w.expect().await;
    assert_eq!(ty, "MODIFIED");
    clock.advance(Duration::from_secs(21 * 60));
    assert_eq!(
        backend.expire_due().await.unwrap(),
        1,
        "only t.1 is an hour old"
    );
    let (ty, obj) = w.expect().await;
    assert_eq!(ty, "DELETED");
    assert_eq!(obj["metadata"]["name"], "t.1");
    assert!(rv(&obj) > rv(&a));
    http.get(&format!("{}/t.1", core_path("default")))
        .await
        .status_failure(404, "NotFound");
    assert_eq!(
        http.get(&format!("{}/t.2", core_path("default")))
            .await
            .status,
        200
    );
    clock.advance(Duration::from_secs(40 * 60));
    assert_eq!(backend.expire_due().await.unwrap(), 1);
    let (ty, obj) = w.expect().await;
    assert_eq!(
        (ty.as_str(), obj["metadata"]["name"].as_str()),
        ("DELETED", Some("t.2"))
    );
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn selector_transitions_follow_the_etcd_watcher() {
    let (server, _) = memory().await;
    let http = Http::new(&server);
    let mut w = http
        .watch(&format!("{}?watch=true&resourceVersion=0&labelSelector=app%3Dweb&sendInitialEvents=false&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true", core_path("default")), None)
        .await;
    let path = format!("{}/s.1", core_path("default"));
    let mut body = core_event("s.1", "default", "R");
    body["metadata"]["labels"] = json!({"app": "db"});
    assert_eq!(http.post(&core_path("default"), &body).await.status, 201);
    let merge = "application/merge-patch+json";
    assert_eq!(
        http.patch(
            &path,
            merge,
            &json!({"metadata": {"labels": {"app": "web"}}})
        )
        .await
        .status,
        200
    );
    let (ty, obj) = w.expect().await;
    assert_eq!(ty, "ADDED", "started matching: {obj}");
    assert_eq!(
        http.patch(&path, merge, &json!({"message": "still web"}))
            .await
            .status,
        200
    );
    let (ty, _) = w.expect().await;
    assert_eq!(ty, "MODIFIED");
    let before = http.get(&path).await.json();
    let moved = http
        .patch(
            &path,
            merge,
            &json!({"metadata": {"labels": {"app": "db"}}, "message": "gone"}),
        )
        .await
        .json();
    let (ty, obj) = w.expect().await;
    assert_eq!(ty, "DELETED", "stopped matching");
    assert_eq!(obj["message"], "still web", "the last matching state");
    assert_eq!(obj["metadata"]["labels"]["app"], "web");
    assert_eq!(rv(&obj), rv(&moved));
    assert!(rv(&obj) > rv(&before));
    // a non-matching change produces nothing: the next line is the next matching event
    assert_eq!(
        http.patch(&path, merge, &json!({"message": "quiet"}))
            .await
            .status,
        200
    );
    let mut body = core_event("s.2", "default", "R");
    body["metadata"]["labels"] = json!({"app": "web"});
    assert_eq!(http.post(&core_path("default"), &body).await.status, 201);
    let (ty, obj) = w.expect().await;
    assert_eq!(
        (ty.as_str(), obj["metadata"]["name"].as_str()),
        ("ADDED", Some("s.2"))
    );

    // single-object watch through the (deprecated) name URL
    let mut one = http
        .watch(
            &format!(
                "/api/v1/watch/namespaces/default/events/s.2?resourceVersion={}",
                rv(&obj)
            ),
            None,
        )
        .await;
    assert_eq!(
        http.patch(&path, merge, &json!({"message": "not s.2"}))
            .await
            .status,
        200
    );
    assert_eq!(
        http.patch(
            &format!("{}/s.2", core_path("default")),
            merge,
            &json!({"message": "s.2!"})
        )
        .await
        .status,
        200
    );
    let (ty, obj) = one.expect().await;
    assert_eq!(
        (ty.as_str(), obj["message"].as_str()),
        ("MODIFIED", Some("s.2!"))
    );
    server.shutdown().await.unwrap();
}

/// What `kubectl get events -w` does: list `default` as a Table, then watch from its
/// resourceVersion.
async fn table_watch_from_list(http: &Http) -> Watch {
    let l = http.get_accept(&core_path("default"), TBL).await.json();
    let list_rv = l["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let path = format!(
        "{}?resourceVersion={list_rv}&watch=true",
        core_path("default")
    );
    http.watch(&path, Some(TBL)).await
}

/// A Table watcher's rows are written from the stored bytes, or from the decoded event
/// where that declines (here: metadata holding the string "resourceVersion"); either way
/// only the stream's first Table carries the column definitions, and every row is there.
#[tokio::test]
async fn table_watch_headers_come_once_whichever_way_a_row_is_written() {
    let (server, _) = memory().await;
    let http = Http::new(&server);
    for (case, names) in [
        ("declined first", ["tw.a", "tw.b", "tw.c"]),
        ("stored first", ["tw.d", "tw.e", "tw.f"]),
    ] {
        let mut w = table_watch_from_list(&http).await;
        for (i, name) in names.iter().enumerate() {
            let mut e = core_event(name, "default", "Pulled");
            // Declined by the stored path on the first and third of the first case, on the
            // second of the other.
            if (case == "declined first") == (i != 1) {
                e["metadata"]["annotations"] = json!({"note": "resourceVersion"});
            }
            assert_eq!(http.post(&core_path("default"), &e).await.status, 201);
        }
        for (i, name) in names.iter().enumerate() {
            let (ty, t) = w.expect().await;
            assert_eq!(
                (ty.as_str(), t["kind"].as_str()),
                ("ADDED", Some("Table")),
                "{case}"
            );
            assert_eq!(t["rows"][0]["cells"][9], *name, "{case}");
            assert_eq!(t["rows"][0]["object"]["metadata"]["name"], *name, "{case}");
            if i == 0 {
                assert_eq!(
                    t["columnDefinitions"].as_array().map(Vec::len),
                    Some(10),
                    "{case}"
                );
            } else {
                assert!(
                    t["columnDefinitions"].is_null(),
                    "{case}: headers only once"
                );
            }
        }
    }
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn table_watch_and_shutdown_ends_watches() {
    let (server, _) = memory().await;
    let http = Http::new(&server);
    let mut w = table_watch_from_list(&http).await;
    for n in ["tb.1", "tb.2"] {
        http.create_core("default", n, "Pulled").await;
    }
    let (ty, t1) = w.expect().await;
    assert_eq!(ty, "ADDED");
    assert_eq!(t1["kind"], "Table");
    assert_eq!(t1["columnDefinitions"].as_array().unwrap().len(), 10);
    assert_eq!(t1["rows"][0]["cells"][9], "tb.1");
    assert_eq!(t1["rows"][0]["object"]["kind"], "PartialObjectMetadata");
    let (_, t2) = w.expect().await;
    assert!(
        t2["columnDefinitions"].is_null(),
        "only the first Table has headers"
    );
    assert_eq!(t2["rows"][0]["cells"][2], "Pulled");

    let metrics = http.get("/metrics").await.text();
    assert!(metrics.contains("herald_apiserver_watches 1"), "{metrics}");
    assert!(
        metrics.contains(r#"herald_apiserver_requests_total{verb="create",code="201"} 2"#),
        "{metrics}"
    );
    assert!(
        metrics.contains("herald_storage_write_duration_seconds_count 2"),
        "{metrics}"
    );

    let shutdown = tokio::spawn(server.shutdown());
    assert!(
        w.next().await.is_none(),
        "graceful shutdown ends open watches"
    );
    tokio::time::timeout(GUARD, shutdown)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn kube_runtime_watcher_list_watch_and_streaming() {
    use k8s_openapi::api::core::v1::Event as CoreEventK;
    use k8s_openapi::api::events::v1::Event as V1Event;
    use kube::api::{Api, PostParams};
    use kube::runtime::watcher::{self, Event};

    let (server, _) = memory().await;
    let client = kube_client(&server);
    let core: Api<CoreEventK> = Api::namespaced(client.clone(), "default");
    let pre: CoreEventK = serde_json::from_value(core_event("pre.1", "default", "R")).unwrap();
    core.create(&PostParams::default(), &pre).await.unwrap();

    async fn next<K: Clone>(
        s: &mut (impl futures::Stream<Item = Result<Event<K>, watcher::Error>> + Unpin),
    ) -> Event<K> {
        tokio::time::timeout(GUARD, s.next())
            .await
            .expect("watcher event in time")
            .expect("stream open")
            .expect("no watcher error")
    }

    for streaming in [false, true] {
        let cfg = if streaming {
            watcher::Config::default().streaming_lists()
        } else {
            watcher::Config::default()
        };
        let v1: Api<V1Event> = Api::namespaced(client.clone(), "default");
        let mut s = Box::pin(watcher::watcher(v1, cfg));
        assert!(matches!(next(&mut s).await, Event::Init));
        let mut seen = Vec::new();
        loop {
            match next(&mut s).await {
                Event::InitApply(e) => seen.push(e.metadata.name.unwrap()),
                Event::InitDone => break,
                other => panic!("unexpected {other:?}"),
            }
        }
        assert!(seen.contains(&"pre.1".to_string()), "{seen:?}");
        let name = format!("live.{streaming}");
        let ev: CoreEventK = serde_json::from_value(core_event(&name, "default", "Live")).unwrap();
        core.create(&PostParams::default(), &ev).await.unwrap();
        match next(&mut s).await {
            Event::Apply(e) => {
                assert_eq!(e.metadata.name.as_deref(), Some(name.as_str()));
                assert_eq!(
                    e.note.as_deref(),
                    Some(format!("message of {name}").as_str())
                );
            }
            other => panic!("expected Apply, got {other:?}"),
        }
    }
    server.shutdown().await.unwrap();
}

fn registry_with(clock: Arc<FakeClock>, opts: RegistryOptions) -> EventRegistry {
    let backend = Arc::new(MemoryBackend::new(clock.clone(), HistoryOptions::default()));
    EventRegistry::new(backend, clock, opts)
}

fn event(name: &str) -> CoreEvent {
    event_in(name, "default")
}

fn event_in(name: &str, ns: &str) -> CoreEvent {
    serde_json::from_value(core_event(name, ns, "R")).unwrap()
}

#[tokio::test(start_paused = true)]
async fn periodic_bookmarks_and_timeout() {
    let clock = fake_clock();
    let opts = RegistryOptions {
        bookmark_interval: Duration::from_secs(60),
        ..RegistryOptions::default()
    };
    let reg = registry_with(clock.clone(), opts);
    let e = reg
        .create(
            ApiGroup::Core,
            "default",
            event("b.1"),
            &WriteOptions::default(),
        )
        .await
        .unwrap()
        .event;
    let p = ListParams {
        watch: true,
        allow_watch_bookmarks: true,
        timeout_seconds: Some(150),
        resource_version: e.metadata.resource_version.clone(),
        ..ListParams::default()
    };
    let mut w = decoded(
        reg.watch(ApiGroup::Core, Some("default"), None, &p)
            .await
            .unwrap(),
    );
    // an event in another namespace is outside the watched prefix: not delivered, but the
    // bookmarks move past it, so a client resuming from one is not sent back into history
    // the store may since have dropped
    let other = reg
        .create(
            ApiGroup::Core,
            "other",
            event_in("b.2", "other"),
            &WriteOptions::default(),
        )
        .await
        .unwrap()
        .event;
    assert_ne!(other.metadata.resource_version, e.metadata.resource_version);
    let start = tokio::time::Instant::now();
    let bookmark_at = |item: Option<DecodedItem>| match item {
        Some(DecodedItem::Bookmark {
            resource_version,
            initial_events_end: false,
        }) => (resource_version, start.elapsed()),
        other => panic!("expected a bookmark, got {other:?}"),
    };
    let (rv, at) = bookmark_at(w.next().await);
    assert_eq!(Some(rv), other.metadata.resource_version.clone());
    assert!(at >= Duration::from_secs(60), "{at:?}");
    let (_, at) = bookmark_at(w.next().await);
    assert!(at >= Duration::from_secs(120), "{at:?}");
    // one more 2 s before the deadline (kube-apiserver's last-chance bookmark), not at 180 s
    let (_, at) = bookmark_at(w.next().await);
    assert!(
        (Duration::from_secs(148)..Duration::from_secs(150)).contains(&at),
        "{at:?}"
    );
    assert!(w.next().await.is_none(), "ends at timeoutSeconds");
    assert!(start.elapsed() >= Duration::from_secs(150));
    // without allowWatchBookmarks, none are sent
    let p = ListParams {
        watch: true,
        timeout_seconds: Some(100),
        ..ListParams::default()
    };
    let mut w = decoded(reg.watch(ApiGroup::Core, None, None, &p).await.unwrap());
    let mut items = Vec::new();
    while let Some(i) = w.next().await {
        items.push(i);
    }
    assert_eq!(items.len(), 2, "two ADDED, no bookmarks: {items:?}");
    assert!(items.iter().all(|i| matches!(i, DecodedItem::Added(_))));
    // a negative timeout has already passed: the watch ends at once, as in kube-apiserver
    // (not after the default timeout, which paused time would skip to)
    let p = ListParams {
        watch: true,
        timeout_seconds: Some(-5),
        ..ListParams::default()
    };
    let start = tokio::time::Instant::now();
    let mut w = decoded(reg.watch(ApiGroup::Core, None, None, &p).await.unwrap());
    while w.next().await.is_some() {}
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "{:?}",
        start.elapsed()
    );
    let _ = clock.now();

    // extreme timeouts and intervals are clamped, not panics
    let opts = RegistryOptions {
        bookmark_interval: Duration::MAX,
        default_watch_timeout: Duration::MAX,
        ..RegistryOptions::default()
    };
    let reg = registry_with(clock, opts);
    for t in [None, Some(i64::MAX)] {
        let p = ListParams {
            watch: true,
            allow_watch_bookmarks: true,
            timeout_seconds: t,
            ..ListParams::default()
        };
        let mut w = decoded(reg.watch(ApiGroup::Core, None, None, &p).await.unwrap());
        let name = format!("x{}", t.is_some());
        reg.create(
            ApiGroup::Core,
            "default",
            event(&name),
            &WriteOptions::default(),
        )
        .await
        .unwrap();
        // The earlier event as initial state and the initial-events-end bookmark come first.
        let mut seen = Vec::new();
        for _ in 0..3 {
            match w.next().await {
                Some(DecodedItem::Added(e)) if e.metadata.name.as_deref() == Some(&name) => break,
                other => seen.push(format!("{other:?}")),
            }
        }
        assert!(seen.len() < 3, "{seen:?}");
    }
}

/// A watcher that falls behind the bounded history window gets an ERROR 410 and its
/// stream ends (memory stays bounded; the client re-lists).
#[tokio::test]
async fn slow_watcher_past_the_window_gets_410() {
    let clock = fake_clock();
    let backend = Arc::new(MemoryBackend::new(
        clock.clone(),
        HistoryOptions {
            watch_window: 4,
            keep_revisions: 100,
            ..HistoryOptions::default()
        },
    ));
    let reg = EventRegistry::new(backend, clock, RegistryOptions::default());
    let first = reg
        .create(
            ApiGroup::Core,
            "default",
            event("l.0"),
            &WriteOptions::default(),
        )
        .await
        .unwrap()
        .event;
    let p = ListParams {
        watch: true,
        resource_version: first.metadata.resource_version.clone(),
        ..ListParams::default()
    };
    let mut w = decoded(
        reg.watch(ApiGroup::Core, Some("default"), None, &p)
            .await
            .unwrap(),
    );
    for i in 1..=10 {
        reg.create(
            ApiGroup::Core,
            "default",
            event(&format!("l.{i}")),
            &WriteOptions::default(),
        )
        .await
        .unwrap();
    }
    match tokio::time::timeout(GUARD, w.next()).await.unwrap() {
        Some(DecodedItem::Error(e)) => {
            assert_eq!(e.code, 410);
            assert_eq!(e.reason.as_str(), "Expired");
        }
        other => panic!("expected a 410 ERROR, got {other:?}"),
    }
    assert!(w.next().await.is_none());
}

fn watch_from(rv: u64) -> ListParams {
    ListParams {
        watch: true,
        allow_watch_bookmarks: true,
        resource_version: Some(rv.to_string()),
        ..ListParams::default()
    }
}

async fn create_n(reg: &EventRegistry, names: &[&str]) -> Vec<u64> {
    let mut rvs = Vec::new();
    for n in names {
        let e = reg
            .create(
                ApiGroup::Core,
                "default",
                event(n),
                &WriteOptions::default(),
            )
            .await
            .unwrap()
            .event;
        rvs.push(e.metadata.resource_version.unwrap().parse().unwrap());
    }
    rvs
}

#[tokio::test(start_paused = true)]
async fn watch_from_a_revision_the_store_never_reached_ends_with_too_large() {
    let reg = registry_with(fake_clock(), RegistryOptions::default());
    create_n(&reg, &["f.1"]).await;
    let current = R0 + 1;
    let mut w = decoded(
        reg.watch(ApiGroup::Core, None, None, &watch_from(current + 5))
            .await
            .unwrap(),
    );
    let start = tokio::time::Instant::now();
    // Two writes during the wait do not reach the requested revision and are not delivered.
    create_n(&reg, &["f.2", "f.3"]).await;
    match w.next().await {
        Some(DecodedItem::Error(e)) => {
            assert_eq!(e.code, 504);
            assert_eq!(
                e.message,
                format!(
                    "Too large resource version: {}, current: {}",
                    current + 5,
                    current + 2
                )
            );
            assert!(
                e.causes
                    .iter()
                    .any(|c| c.reason == "ResourceVersionTooLarge"),
                "{e:?}"
            );
        }
        other => panic!("expected a too-large ERROR, got {other:?}"),
    }
    // kube-apiserver's watch cache waits 3 s for a future revision before giving up.
    assert_eq!(start.elapsed(), Duration::from_secs(3));
    assert!(
        w.next().await.is_none(),
        "the stream closes after the ERROR"
    );
}

#[tokio::test(start_paused = true)]
async fn watch_from_a_future_revision_starts_there_once_the_store_reaches_it() {
    let reg = registry_with(fake_clock(), RegistryOptions::default());
    create_n(&reg, &["g.1"]).await;
    let mut w = decoded(
        reg.watch(ApiGroup::Core, None, None, &watch_from(R0 + 3))
            .await
            .unwrap(),
    );
    // R0+2 and R0+3 are at or before the watch's start; R0+4 is the first change after it.
    let rvs = create_n(&reg, &["g.2", "g.3", "g.4"]).await;
    assert_eq!(rvs, [R0 + 2, R0 + 3, R0 + 4]);
    match w.next().await {
        Some(DecodedItem::Added(e)) => {
            assert_eq!(e.metadata.name.as_deref(), Some("g.4"));
        }
        other => panic!("expected ADDED g.4, got {other:?}"),
    }
    // Well past the 3 s wait: the watch carries on, no too-large ERROR.
    tokio::time::advance(Duration::from_secs(10)).await;
    create_n(&reg, &["g.5"]).await;
    match w.next().await {
        Some(DecodedItem::Added(e)) => assert_eq!(e.metadata.name.as_deref(), Some("g.5")),
        other => panic!("expected ADDED g.5, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn a_namespace_watch_from_a_future_revision_counts_writes_elsewhere() {
    let reg = registry_with(fake_clock(), RegistryOptions::default());
    create_n(&reg, &["n.1"]).await;
    let mut w = decoded(
        reg.watch(ApiGroup::Core, Some("default"), None, &watch_from(R0 + 2))
            .await
            .unwrap(),
    );
    // The store reaches the requested revision through another namespace only.
    reg.create(
        ApiGroup::Core,
        "other",
        event_in("n.2", "other"),
        &WriteOptions::default(),
    )
    .await
    .unwrap();
    // The watch is polled through its 3 s wait with nothing of its own to deliver, so it
    // judges the wait by how far the store has got, not by a change in its namespace.
    let (item, ()) = tokio::join!(w.next(), async {
        tokio::time::sleep(Duration::from_secs(10)).await;
        create_n(&reg, &["n.3"]).await;
    });
    match item {
        Some(DecodedItem::Added(e)) => assert_eq!(e.metadata.name.as_deref(), Some("n.3")),
        other => panic!("expected ADDED n.3 and no too-large ERROR, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn a_watch_from_any_revision_without_initial_events_replays_nothing() {
    // `resourceVersion=0&sendInitialEvents=false` starts at the newest revision: the history
    // the store still holds (a create, an update, a delete) is not replayed.
    let reg = registry_with(fake_clock(), RegistryOptions::default());
    create_n(&reg, &["z.1", "z.2"]).await;
    reg.delete(ApiGroup::Core, "default", "z.1", &Default::default())
        .await
        .unwrap();
    let p = ListParams {
        watch: true,
        resource_version: Some("0".into()),
        resource_version_match: Some("NotOlderThan".into()),
        send_initial_events: Some(false),
        ..ListParams::default()
    };
    let mut w = decoded(reg.watch(ApiGroup::Core, None, None, &p).await.unwrap());
    create_n(&reg, &["z.3"]).await;
    match w.next().await {
        Some(DecodedItem::Added(e)) => assert_eq!(e.metadata.name.as_deref(), Some("z.3")),
        other => panic!("expected ADDED z.3 first, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn an_empty_store_reports_a_resumable_resource_version() {
    // The list and the initial-events-end bookmark of an empty store never say "0" (which in
    // a request means "any version" / "replay the current state"); resuming from what they
    // say delivers the first write.
    let reg = registry_with(fake_clock(), RegistryOptions::default());
    let list = reg
        .list(ApiGroup::Core, None, &ListParams::default())
        .await
        .unwrap();
    assert!(list.items.is_empty());
    assert_eq!(list.resource_version, R0.to_string());
    assert_ne!(list.resource_version, "0");
    let p = initial_events(None);
    let mut wl = decoded(reg.watch(ApiGroup::Core, None, None, &p).await.unwrap());
    match wl.next().await {
        Some(DecodedItem::Bookmark {
            resource_version,
            initial_events_end: true,
        }) => assert_eq!(resource_version, R0.to_string()),
        other => panic!("expected the initial-events-end bookmark, got {other:?}"),
    }
    let mut w = decoded(
        reg.watch(ApiGroup::Core, None, None, &watch_from(R0))
            .await
            .unwrap(),
    );
    create_n(&reg, &["z.1"]).await;
    for s in [&mut wl, &mut w] {
        match s.next().await {
            Some(DecodedItem::Added(e)) => assert_eq!(e.metadata.name.as_deref(), Some("z.1")),
            other => panic!("expected ADDED z.1, got {other:?}"),
        }
    }
}

/// The deprecated `/watch/` paths kube-apiserver still serves stream watches (the item form
/// narrowed to its event); a GET of one event with `?watch` is a plain GET, as in kube.
#[tokio::test]
async fn deprecated_watch_paths_stream_and_an_item_get_ignores_watch() {
    let (server, _clock) = memory().await;
    let http = Http::new(&server);
    let first = http
        .post(&core_path("ns1"), &core_event("a.1", "ns1", "Started"))
        .await
        .json();
    let from = rv(&first);

    let got = http
        .get(&format!("{}/a.1?watch=true", core_path("ns1")))
        .await;
    assert_eq!(got.status, 200);
    assert_eq!(
        got.json()["metadata"]["name"],
        "a.1",
        "the object, not a stream"
    );

    let mut all = http
        .watch(
            &format!("/apis/events.k8s.io/v1/watch/events?resourceVersion={from}"),
            None,
        )
        .await;
    let mut ns = http
        .watch(
            &format!("/api/v1/watch/namespaces/ns1/events?resourceVersion={from}"),
            None,
        )
        .await;
    let mut one = http
        .watch(
            &format!("/api/v1/watch/namespaces/ns1/events/b.1?resourceVersion={from}"),
            None,
        )
        .await;
    for w in [&all, &ns, &one] {
        assert_eq!(w.status, 200);
        assert_eq!(w.headers["content-type"], "application/json");
    }
    for (name, ns_) in [("a.2", "ns1"), ("b.1", "ns1"), ("c.1", "ns2")] {
        http.create_core(ns_, name, "Started").await;
    }
    let names = |v: &serde_json::Value| v["metadata"]["name"].as_str().unwrap().to_string();
    let mut seen = Vec::new();
    for _ in 0..3 {
        let (ty, obj) = all.expect().await;
        assert_eq!(ty, "ADDED");
        assert_eq!(obj["apiVersion"], "events.k8s.io/v1");
        seen.push(names(&obj));
    }
    assert_eq!(seen, ["a.2", "b.1", "c.1"]);
    let mut seen = Vec::new();
    for _ in 0..2 {
        seen.push(names(&ns.expect().await.1));
    }
    assert_eq!(seen, ["a.2", "b.1"]);
    // Only b.1: a.2 came first and was not delivered.
    assert_eq!(names(&one.expect().await.1), "b.1");

    // The item form refuses a field selector naming another event, as kube does.
    let bad = http
        .get("/api/v1/watch/namespaces/ns1/events/b.1?fieldSelector=metadata.name%3Dz")
        .await;
    bad.status_failure(400, "BadRequest");
}

/// Query booleans read as kube-apiserver reads its options: only `0` and `false` (in any
/// case) are false, anything else is true, and none is an error.
#[tokio::test]
async fn query_booleans_read_as_kube_apiserver_reads_them() {
    let (server, _) = memory().await;
    let http = Http::new(&server);
    http.create_core("default", "b.1", "R").await;
    let mut w = http
        .watch(&format!("{}?watch=yes", core_path("default")), None)
        .await;
    assert_eq!(w.status, 200);
    let (ty, obj) = w.expect().await;
    assert_eq!(
        (ty.as_str(), &obj["metadata"]["name"]),
        ("ADDED", &json!("b.1"))
    );
    // `f` reads as true (Go's ParseBool would say false), and `fAlSe` as false.
    let mut w = http
        .watch(&format!("{}?watch=f", core_path("default")), None)
        .await;
    assert_eq!(w.expect().await.0, "ADDED");
    for off in ["FALSE", "fAlSe", "0"] {
        let r = http
            .get(&format!("{}?watch={off}", core_path("default")))
            .await;
        assert_eq!(r.json()["kind"], "EventList", "watch={off}");
    }
    server.shutdown().await.unwrap();
}

/// A watch's initial events are read from the store a page at a time at the watch's start
/// revision: 1,300 events (three pages) arrive as ADDED in key order, those created after
/// the watch started come after the initial-events-end bookmark as changes, and a page
/// whose revision was compacted meanwhile ends the watch with a 410.
#[tokio::test(start_paused = true)]
async fn initial_events_are_read_a_page_at_a_time_from_one_snapshot() {
    let clock = fake_clock();
    let reg = registry_with(clock.clone(), RegistryOptions::default());
    let opts = WriteOptions::default();
    for i in 0..1_300 {
        let mut e = event(&format!("p.{i:04}"));
        e.reason = Some(if i % 2 == 0 { "Even" } else { "Odd" }.into());
        reg.create(ApiGroup::Core, "default", e, &opts)
            .await
            .unwrap();
    }
    let p = initial_events(Some("reason=Even"));
    let mut w = decoded(
        reg.watch(ApiGroup::Core, Some("default"), None, &p)
            .await
            .unwrap(),
    );
    // Written after the watch started: not an initial event.
    let mut late = event("p.0000a");
    late.reason = Some("Even".into());
    reg.create(ApiGroup::Core, "default", late, &opts)
        .await
        .unwrap();
    let mut names = Vec::new();
    let end = loop {
        match w.next().await {
            Some(DecodedItem::Added(e)) => names.push(e.metadata.name.unwrap()),
            Some(DecodedItem::Bookmark {
                resource_version,
                initial_events_end: true,
            }) => break resource_version,
            other => panic!("expected an initial event, got {other:?}"),
        }
    };
    let want: Vec<String> = (0..1_300).step_by(2).map(|i| format!("p.{i:04}")).collect();
    assert_eq!(names, want);
    assert_eq!(end, (R0 + 1_300).to_string());
    match w.next().await {
        Some(DecodedItem::Added(e)) => assert_eq!(e.metadata.name.as_deref(), Some("p.0000a")),
        other => panic!("expected the later create, got {other:?}"),
    }

    // Compacted after the first page was read: the next page cannot be read at the
    // snapshot any more.
    let p = ListParams {
        watch: true,
        send_initial_events: Some(true),
        resource_version_match: Some("NotOlderThan".into()),
        resource_version: Some("0".into()),
        ..ListParams::default()
    };
    let mut w = decoded(
        reg.watch(ApiGroup::Core, Some("default"), None, &p)
            .await
            .unwrap(),
    );
    assert!(matches!(w.next().await, Some(DecodedItem::Added(_))));
    for i in 0..100 {
        reg.create(ApiGroup::Core, "default", event(&format!("q.{i}")), &opts)
            .await
            .unwrap();
    }
    let head = reg.backend().current_revision().await.unwrap();
    reg.backend().compact(head).await.unwrap();
    let ended = loop {
        match w.next().await {
            Some(DecodedItem::Added(_)) => {}
            other => break other,
        }
    };
    match ended {
        Some(DecodedItem::Error(e)) => assert_eq!(e.code, 410, "{e:?}"),
        other => panic!("expected a 410, got {other:?}"),
    }
}

/// On SQLite the initial events of most of a large store come in the order the events were
/// last written (read sequentially, as an unpaged list is), from one snapshot: every event
/// of the snapshot once, at its snapshot resourceVersion, though events are created and
/// updated between the pages; what was written after the watch started follows the
/// initial-events-end bookmark as changes.
#[tokio::test]
async fn initial_events_of_a_large_sqlite_store_come_in_write_order() {
    use herald_server::storage::{SqliteBackend, SqliteOptions};
    use std::collections::BTreeMap;

    let dir = tempfile::tempdir().unwrap();
    let clock = fake_clock();
    let backend =
        Arc::new(SqliteBackend::open(dir.path(), clock.clone(), SqliteOptions::default()).unwrap());
    let reg = EventRegistry::new(backend, clock, RegistryOptions::default());
    let opts = WriteOptions::default();
    // Written out of key order (names descending), 100 at a time.
    let mut rv_of = BTreeMap::new();
    for chunk in (0..1_300).rev().collect::<Vec<usize>>().chunks(100) {
        let created = futures::future::join_all(chunk.iter().map(|i| {
            reg.create(
                ApiGroup::Core,
                "default",
                event(&format!("p.{i:04}")),
                &opts,
            )
        }))
        .await;
        for e in created {
            let e = e.unwrap().event;
            rv_of.insert(
                e.metadata.name.unwrap(),
                e.metadata.resource_version.unwrap(),
            );
        }
    }
    // Ten updated: last in write order.
    let update = |name: String, count: i32| {
        let reg = reg.clone();
        let opts = opts.clone();
        async move {
            let patch = serde_json::to_vec(&json!({"count": count})).unwrap();
            reg.patch(
                ApiGroup::Core,
                "default",
                &name,
                herald_server::registry::PatchKind::Merge,
                &patch,
                &opts,
            )
            .await
            .unwrap()
            .event
        }
    };
    for i in 0..10 {
        let e = update(format!("p.{i:04}"), 2).await;
        rv_of.insert(
            e.metadata.name.unwrap(),
            e.metadata.resource_version.unwrap(),
        );
    }

    let p = initial_events(None);
    let mut w = decoded(
        reg.watch(ApiGroup::Core, Some("default"), None, &p)
            .await
            .unwrap(),
    );
    let mut seen: Vec<(String, String)> = Vec::new();
    let end = loop {
        match w.next().await {
            Some(DecodedItem::Added(e)) => {
                seen.push((
                    e.metadata.name.unwrap(),
                    e.metadata.resource_version.unwrap(),
                ));
                if seen.len() == 1 {
                    // Between the pages: a create, and an update of an event not yet sent.
                    reg.create(ApiGroup::Core, "default", event("p.late"), &opts)
                        .await
                        .unwrap();
                    update("p.0005".into(), 3).await;
                }
            }
            Some(DecodedItem::Bookmark {
                resource_version,
                initial_events_end: true,
            }) => break resource_version,
            other => panic!("expected an initial event, got {other:?}"),
        }
    };
    let rvs: Vec<u64> = seen.iter().map(|(_, rv)| rv.parse().unwrap()).collect();
    assert!(
        rvs.windows(2).all(|w| w[0] < w[1]),
        "in write order: {seen:?}"
    );
    let got: BTreeMap<String, String> = seen.into_iter().collect();
    assert_eq!(got.len(), 1_300, "each event once");
    assert_eq!(got, rv_of, "the snapshot, at its resourceVersions");
    let last: u64 = rvs.last().copied().unwrap();
    assert_eq!(end, last.to_string());
    let mut after = Vec::new();
    while after.len() < 2 {
        match w.next().await {
            Some(DecodedItem::Added(e)) => after.push(("ADDED", e.metadata.name.unwrap())),
            Some(DecodedItem::Modified(e)) => after.push(("MODIFIED", e.metadata.name.unwrap())),
            Some(DecodedItem::Bookmark { .. }) => {}
            other => panic!("expected the later writes, got {other:?}"),
        }
    }
    assert_eq!(
        after,
        [
            ("ADDED", "p.late".to_string()),
            ("MODIFIED", "p.0005".to_string())
        ]
    );
}

/// A watch that starts with the current state as initial events (`sendInitialEvents=true`,
/// `resourceVersionMatch=NotOlderThan`, with bookmarks), optionally field-selected: what
/// client-go's streaming list asks for.
fn initial_events(field_selector: Option<&str>) -> ListParams {
    ListParams {
        watch: true,
        allow_watch_bookmarks: true,
        send_initial_events: Some(true),
        resource_version_match: Some("NotOlderThan".into()),
        field_selector: field_selector.map(str::to_owned),
        ..ListParams::default()
    }
}
