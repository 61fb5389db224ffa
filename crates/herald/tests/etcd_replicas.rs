//! Two `herald serve --store etcd` replicas on one real 3-member etcd cluster (Debian's
//! etcd-server), real processes on 127.0.0.1: what one replica writes, the other reads at once
//! with the same resourceVersion; its watches see every change in revision order; continue
//! tokens move between replicas; TTL expiry is a DELETED on both; a revision compacted in
//! etcd is 410 Expired on both.
//!
//! Every wait is bounded ([`GUARD`]).

mod support;

use std::collections::BTreeSet;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use support::etcd::EtcdCluster;
use support::{Herald, backoff_event};

/// The longest a test waits for one thing (a watch event, an expiry).
const GUARD: Duration = Duration::from_secs(60);

fn rv(e: &Event) -> u64 {
    e.metadata
        .resource_version
        .as_deref()
        .expect("a resourceVersion")
        .parse()
        .expect("a numeric resourceVersion")
}

/// Two replicas sharing the kube-apiserver layout under `/registry`, with `extra` flags.
async fn replicas(etcd: &EtcdCluster, extra: &[&str]) -> (Herald, Herald) {
    let a = Herald::etcd_at(&etcd.endpoints(), "/registry", extra).await;
    let b = Herald::etcd_at(&etcd.endpoints(), "/registry", extra).await;
    (a, b)
}

/// The next watch event, within [`GUARD`].
async fn next<S>(w: &mut S, what: &str) -> WatchEvent<Event>
where
    S: futures::Stream<Item = kube::Result<WatchEvent<Event>>> + Unpin,
{
    tokio::time::timeout(GUARD, w.try_next())
        .await
        .unwrap_or_else(|_| panic!("no watch event within {GUARD:?} while waiting for {what}"))
        .expect("the watch stream")
        .unwrap_or_else(|| panic!("the watch ended while waiting for {what}"))
}

/// The next watch event that is not a BOOKMARK.
async fn next_change<S>(w: &mut S, what: &str) -> WatchEvent<Event>
where
    S: futures::Stream<Item = kube::Result<WatchEvent<Event>>> + Unpin,
{
    loop {
        match next(w, what).await {
            WatchEvent::Bookmark(_) => continue,
            other => return other,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_on_one_replica_is_read_alike_and_watched_in_order_on_the_other() {
    let etcd = EtcdCluster::start(3).await;
    let (a, b) = replicas(&etcd, &[]).await;
    let api_a: Api<Event> = Api::namespaced(a.kube_client(), "default");
    let api_b: Api<Event> = Api::namespaced(b.kube_client(), "default");

    // Watches on both replicas from one list's revision, before any write.
    let start = api_b.list(&ListParams::default()).await.expect("list on B");
    let from = start.metadata.resource_version.expect("a list revision");
    let mut watch_a = api_a
        .watch(&WatchParams::default(), &from)
        .await
        .expect("watch on A")
        .boxed();
    let mut watch_b = api_b
        .watch(&WatchParams::default(), &from)
        .await
        .expect("watch on B")
        .boxed();

    // Writes alternate between the replicas; each is read at once on the other one.
    let mut written = Vec::new();
    for i in 0..6 {
        let (writer, reader) = if i % 2 == 0 {
            (&api_a, &api_b)
        } else {
            (&api_b, &api_a)
        };
        let name = format!("e{i}");
        let created = writer
            .create(&PostParams::default(), &backoff_event(&name))
            .await
            .expect("create");
        let got = reader.get(&name).await.expect("read on the other replica");
        assert_eq!(
            got.metadata.resource_version,
            created.metadata.resource_version
        );
        assert_eq!(got.metadata.uid, created.metadata.uid);
        let list = reader.list(&ListParams::default()).await.expect("list");
        let listed = list
            .items
            .iter()
            .find(|e| e.metadata.name.as_deref() == Some(&name))
            .unwrap_or_else(|| panic!("{name} is not in the other replica's list"));
        assert_eq!(
            listed.metadata.resource_version,
            created.metadata.resource_version
        );
        let list_rv: u64 = list
            .metadata
            .resource_version
            .as_deref()
            .and_then(|s| s.parse().ok())
            .expect("a numeric list revision");
        assert!(
            list_rv >= rv(&created),
            "the list is at least as new as the write"
        );
        written.push((name, rv(&created)));
    }
    // An update on B, a delete on A.
    let patched = api_b
        .patch(
            "e0",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"count": 2})),
        )
        .await
        .expect("patch on B");
    written.push(("e0".into(), rv(&patched)));
    api_a
        .delete("e1", &Default::default())
        .await
        .expect("delete on A");

    // Both watches saw every change, in the same revision order, with the same versions.
    for (side, w) in [("A", &mut watch_a), ("B", &mut watch_b)] {
        let mut seen = Vec::new();
        for (name, want) in &written {
            match next_change(w, name).await {
                WatchEvent::Added(e) | WatchEvent::Modified(e) => {
                    assert_eq!(e.metadata.name.as_deref(), Some(name.as_str()), "on {side}");
                    assert_eq!(rv(&e), *want, "{name} on {side}");
                    seen.push(rv(&e));
                }
                other => panic!("unexpected {other:?} on {side}"),
            }
        }
        match next_change(w, "the delete").await {
            WatchEvent::Deleted(e) => assert_eq!(e.metadata.name.as_deref(), Some("e1")),
            other => panic!("unexpected {other:?} on {side}"),
        }
        assert!(
            seen.windows(2).all(|p| p[0] < p[1]),
            "revision order on {side}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn continue_tokens_from_one_replica_work_on_the_other() {
    let etcd = EtcdCluster::start(3).await;
    let (a, b) = replicas(&etcd, &[]).await;
    let api_a: Api<Event> = Api::namespaced(a.kube_client(), "default");
    let api_b: Api<Event> = Api::namespaced(b.kube_client(), "default");
    for i in 0..25 {
        let api = if i % 2 == 0 { &api_a } else { &api_b };
        api.create(&PostParams::default(), &backoff_event(&format!("p{i:02}")))
            .await
            .expect("create");
    }
    let whole: Vec<String> = api_a
        .list(&ListParams::default())
        .await
        .expect("whole list")
        .items
        .into_iter()
        .filter_map(|e| e.metadata.name)
        .collect();
    assert_eq!(whole.len(), 25);

    // Pages of 10, each from the other replica; a write in between is not in the pages.
    let mut names = Vec::new();
    let mut token: Option<String> = None;
    let mut revision: Option<String> = None;
    for page in 0.. {
        let api = if page % 2 == 0 { &api_a } else { &api_b };
        let mut lp = ListParams::default().limit(10);
        if let Some(t) = &token {
            lp = lp.continue_token(t);
        }
        let list = api.list(&lp).await.expect("a page");
        match &revision {
            None => revision = list.metadata.resource_version.clone(),
            Some(r) => assert_eq!(
                list.metadata.resource_version.as_ref(),
                Some(r),
                "every page is read at the first page's revision"
            ),
        }
        names.extend(list.items.into_iter().filter_map(|e| e.metadata.name));
        if page == 0 {
            api_b
                .create(&PostParams::default(), &backoff_event("p99-later"))
                .await
                .expect("create between pages");
        }
        token = list.metadata.continue_.filter(|t| !t.is_empty());
        if token.is_none() {
            break;
        }
        assert!(page < 10, "the pages never end");
    }
    assert_eq!(names, whole, "the pages are the whole list at one revision");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_event_is_deleted_on_both_replicas() {
    let etcd = EtcdCluster::start(3).await;
    let (a, b) = replicas(&etcd, &["--event-ttl", "2s"]).await;
    let api_a: Api<Event> = Api::namespaced(a.kube_client(), "default");
    let api_b: Api<Event> = Api::namespaced(b.kube_client(), "default");
    let from = api_a
        .list(&ListParams::default())
        .await
        .expect("list")
        .metadata
        .resource_version
        .expect("revision");
    let mut watch_a = api_a
        .watch(&WatchParams::default(), &from)
        .await
        .expect("watch on A")
        .boxed();
    let mut watch_b = api_b
        .watch(&WatchParams::default(), &from)
        .await
        .expect("watch on B")
        .boxed();
    let created = api_a
        .create(&PostParams::default(), &backoff_event("short-lived"))
        .await
        .expect("create");
    for (side, w) in [("A", &mut watch_a), ("B", &mut watch_b)] {
        match next_change(w, "the create").await {
            WatchEvent::Added(e) => assert_eq!(rv(&e), rv(&created), "on {side}"),
            other => panic!("unexpected {other:?} on {side}"),
        }
        // etcd deletes the key when its lease runs out: a DELETED with a newer revision.
        match next_change(w, "the expiry").await {
            WatchEvent::Deleted(e) => {
                assert_eq!(e.metadata.name.as_deref(), Some("short-lived"), "on {side}");
                assert!(
                    rv(&e) > rv(&created),
                    "the expiry is a new revision on {side}"
                );
            }
            other => panic!("unexpected {other:?} on {side}"),
        }
    }
    for api in [&api_a, &api_b] {
        let err = api.get("short-lived").await.expect_err("expired");
        assert!(
            matches!(err, kube::Error::Api(ref s) if s.code == 404),
            "{err:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revision_compacted_in_etcd_is_410_on_both_replicas() {
    let etcd = EtcdCluster::start(3).await;
    let (a, b) = replicas(&etcd, &[]).await;
    let api_a: Api<Event> = Api::namespaced(a.kube_client(), "default");
    let api_b: Api<Event> = Api::namespaced(b.kube_client(), "default");
    for i in 0..5 {
        api_a
            .create(&PostParams::default(), &backoff_event(&format!("c{i}")))
            .await
            .expect("create");
    }
    let first = api_b
        .list(&ListParams::default().limit(2))
        .await
        .expect("first page");
    let old = first.metadata.resource_version.clone().expect("revision");
    let token = first.metadata.continue_.clone().expect("a continue token");
    let mut newest = 0;
    for i in 5..8 {
        let e = api_b
            .create(&PostParams::default(), &backoff_event(&format!("c{i}")))
            .await
            .expect("create");
        newest = rv(&e);
    }
    let o = etcd
        .etcdctl(&["compact", &newest.to_string(), "--physical"])
        .await;
    o.ok();

    for (side, api) in [("A", &api_a), ("B", &api_b)] {
        let err = api
            .list(&ListParams::default().limit(2).continue_token(&token))
            .await
            .expect_err("a continue token at a compacted revision");
        assert!(
            matches!(err, kube::Error::Api(ref s) if s.code == 410 && s.reason == "Expired"),
            "on {side}: {err:?}"
        );
        let lp = ListParams::default()
            .at(&old)
            .matching(kube::api::VersionMatch::Exact);
        let err = api
            .list(&lp)
            .await
            .expect_err("an exact list at a compacted revision");
        assert!(
            matches!(err, kube::Error::Api(ref s) if s.code == 410),
            "on {side}: {err:?}"
        );
        // The current state is all there.
        let names: BTreeSet<String> = api
            .list(&ListParams::default())
            .await
            .expect("list")
            .items
            .into_iter()
            .filter_map(|e| e.metadata.name)
            .collect();
        assert_eq!(names.len(), 8, "on {side}");
    }
}
