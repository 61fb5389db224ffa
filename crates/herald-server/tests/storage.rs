//! The storage contract, run against every backend, plus SQLite-only restart and crash tests.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use herald_core::clock::{FakeClock, SystemClock};
use herald_server::storage::{
    Backend, HistoryOptions, INDEX_FILE, INITIAL_REVISION, IndexQuery, IndexValues, KeyValue,
    ListOptions, ListOrder, MemoryBackend, Revision, SqliteBackend, SqliteOptions, StorageError,
    WatchEvent, WatchStream,
};

/// A new store's revision; its `n`-th write takes `R0 + n`.
const R0: Revision = INITIAL_REVISION;
use tempfile::TempDir;

mod etcd_support;
use etcd_support::EtcdProcess;
use herald_server::storage::{EtcdBackend, EtcdOptions, StorageMediaType};

/// A backend under test, its fake clock, and (for SQLite) the directory that holds it or (for
/// etcd) the etcd process (dropped after the store).
struct Fixture {
    store: Arc<dyn Backend>,
    clock: Arc<FakeClock>,
    _dir: Option<TempDir>,
    _etcd: Option<EtcdProcess>,
}

fn clock() -> Arc<FakeClock> {
    Arc::new(FakeClock::new("2024-01-01T00:00:00Z".parse().unwrap()))
}

fn memory(history: HistoryOptions) -> Fixture {
    let clock = clock();
    let store = Arc::new(MemoryBackend::new(clock.clone(), history));
    Fixture {
        store,
        clock,
        _dir: None,
        _etcd: None,
    }
}

fn sqlite(history: HistoryOptions) -> Fixture {
    sqlite_with(SqliteOptions {
        history,
        ..SqliteOptions::default()
    })
}

/// SQLite with its index changes merged after every commit, on the index thread, while the
/// test reads: the reads must not depend on whether a change is merged yet.
fn sqlite_merging(history: HistoryOptions) -> Fixture {
    sqlite_with(SqliteOptions {
        history,
        merge_index_every: 1,
        ..SqliteOptions::default()
    })
}

fn sqlite_with(opts: SqliteOptions) -> Fixture {
    let clock = clock();
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteBackend::open(dir.path(), clock.clone(), opts).unwrap());
    Fixture {
        store,
        clock,
        _dir: Some(dir),
        _etcd: None,
    }
}

/// A new single-member etcd (revision 1, as a new store) and a backend on it, writing
/// kube-apiserver's JSON (values that are not events, as here, pass through as they are).
async fn etcd(history: HistoryOptions) -> Fixture {
    let clock = clock();
    let process = EtcdProcess::start().await;
    let opts = EtcdOptions {
        servers: vec![process.url.clone()],
        history,
        media_type: StorageMediaType::Json,
        // Lists longer than two keys are read in several ranges.
        range_keys: 2,
        ..EtcdOptions::default()
    };
    let store = Arc::new(EtcdBackend::connect(opts, clock.clone()).await.unwrap());
    Fixture {
        store,
        clock,
        _dir: None,
        _etcd: Some(process),
    }
}

/// The fixtures as futures, for the contract macro.
mod fixture {
    use super::{Fixture, HistoryOptions};

    pub async fn memory(history: HistoryOptions) -> Fixture {
        super::memory(history)
    }

    pub async fn sqlite(history: HistoryOptions) -> Fixture {
        super::sqlite(history)
    }

    pub async fn sqlite_merging(history: HistoryOptions) -> Fixture {
        super::sqlite_merging(history)
    }

    pub async fn etcd(history: HistoryOptions) -> Fixture {
        super::etcd(history).await
    }
}

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

/// The next watch item; a stalled stream fails the test instead of hanging it.
async fn next(w: &mut WatchStream) -> Option<Result<Arc<WatchEvent>, StorageError>> {
    tokio::time::timeout(Duration::from_secs(30), w.next())
        .await
        .expect("watch stream stalled")
}

async fn next_event(w: &mut WatchStream) -> Arc<WatchEvent> {
    next(w).await.expect("stream ended").expect("watch error")
}

fn keys(items: &[KeyValue]) -> Vec<&str> {
    items.iter().map(|kv| kv.key.as_str()).collect()
}

// ---------------------------------------------------------------------------------------------
// The contract: each fn takes a fresh fixture.

async fn create_get_update_delete(f: Fixture) {
    let s = &f.store;
    // Never 0: an empty store's revision is already a real resume point.
    assert_eq!(s.current_revision().await.unwrap(), R0);
    const { assert!(R0 > 0) };
    assert_eq!(s.get("/events/ns/a").await.unwrap(), None);

    let a1 = s.create("/events/ns/a", b("v1"), None).await.unwrap();
    assert_eq!(a1.key, "/events/ns/a");
    assert_eq!(a1.value, b("v1"));
    assert_eq!(a1.create_revision, R0 + 1);
    assert_eq!(a1.mod_revision, R0 + 1);
    assert_eq!(
        s.create("/events/ns/a", b("again"), None).await,
        Err(StorageError::AlreadyExists {
            key: "/events/ns/a".into()
        })
    );
    assert_eq!(s.get("/events/ns/a").await.unwrap(), Some(a1.clone()));

    let a2 = s
        .update("/events/ns/a", b("v2"), Some(a1.mod_revision), None)
        .await
        .unwrap();
    assert_eq!(a2.create_revision, R0 + 1);
    assert_eq!(a2.mod_revision, R0 + 2);
    assert_eq!(
        s.update("/events/ns/a", b("stale"), Some(a1.mod_revision), None)
            .await,
        Err(StorageError::Conflict {
            key: "/events/ns/a".into(),
            expected: R0 + 1,
            actual: R0 + 2
        })
    );
    let a3 = s.update("/events/ns/a", b("v3"), None, None).await.unwrap();
    assert_eq!(a3.mod_revision, R0 + 3);
    assert_eq!(s.get("/events/ns/a").await.unwrap().unwrap().value, b("v3"));
    assert_eq!(
        s.update("/events/ns/missing", b("x"), None, None).await,
        Err(StorageError::NotFound {
            key: "/events/ns/missing".into()
        })
    );

    assert_eq!(
        s.delete("/events/ns/a", Some(R0 + 2)).await,
        Err(StorageError::Conflict {
            key: "/events/ns/a".into(),
            expected: R0 + 2,
            actual: R0 + 3
        })
    );
    let d = s.delete("/events/ns/a", Some(R0 + 3)).await.unwrap();
    assert_eq!(d.prev, a3);
    assert_eq!(d.revision, R0 + 4);
    assert_eq!(s.get("/events/ns/a").await.unwrap(), None);
    assert_eq!(
        s.delete("/events/ns/a", None).await,
        Err(StorageError::NotFound {
            key: "/events/ns/a".into()
        })
    );
    // Failed writes take no revision; a re-created key starts a new incarnation.
    assert_eq!(s.current_revision().await.unwrap(), R0 + 4);
    let again = s.create("/events/ns/a", b("new"), None).await.unwrap();
    assert_eq!(
        (again.create_revision, again.mod_revision),
        (R0 + 5, R0 + 5)
    );
}

async fn list_pages_at_a_fixed_revision_while_writes_continue(f: Fixture) {
    let s = &f.store;
    s.create("/events/mm/before", b("x"), None).await.unwrap();
    let mut original = BTreeMap::new();
    for i in 0..25 {
        let kv = s
            .create(&format!("/events/ns/k{i:02}"), b(&format!("v{i}")), None)
            .await
            .unwrap();
        original.insert(kv.key.clone(), kv);
    }
    s.create("/events/nt/after", b("x"), None).await.unwrap();

    let page1 = s
        .list(
            "/events/ns/",
            ListOptions {
                limit: Some(10),
                ..ListOptions::default()
            },
        )
        .await
        .unwrap();
    let snapshot = page1.revision;
    assert_eq!(snapshot, s.current_revision().await.unwrap());
    assert!(page1.more);
    assert_eq!(page1.items.len(), 10);

    // Writes land between pages: before, inside and after the pages still to come.
    s.update("/events/ns/k15", b("changed"), None, None)
        .await
        .unwrap();
    s.delete("/events/ns/k12", None).await.unwrap();
    s.delete("/events/ns/k03", None).await.unwrap();
    s.create("/events/ns/k13a", b("new"), None).await.unwrap();
    s.create("/events/ns/k99", b("new"), None).await.unwrap();
    s.delete("/events/ns/k20", None).await.unwrap();
    s.create("/events/ns/k20", b("recreated"), None)
        .await
        .unwrap();

    let mut all = page1.items.clone();
    let mut last = page1;
    let mut pages = 1;
    while last.more {
        let start_after = last.items.last().unwrap().key.clone();
        last = s
            .list(
                "/events/ns/",
                ListOptions {
                    start_after: Some(start_after),
                    limit: Some(10),
                    at_revision: Some(snapshot),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(last.revision, snapshot);
        all.extend(last.items.iter().cloned());
        pages += 1;
        assert!(pages <= 3, "25 keys in pages of 10 take 3 pages");
    }
    assert_eq!(pages, 3);
    assert_eq!(all, original.values().cloned().collect::<Vec<_>>());

    // The latest state shows the writes.
    let now = s.list("/events/ns/", ListOptions::default()).await.unwrap();
    assert!(!now.more);
    assert_eq!(now.revision, s.current_revision().await.unwrap());
    let k = keys(&now.items);
    assert_eq!(k.len(), 25 - 2 + 2);
    assert!(k.contains(&"/events/ns/k13a") && k.contains(&"/events/ns/k99"));
    assert!(!k.contains(&"/events/ns/k12") && !k.contains(&"/events/ns/k03"));
    let k20 = now
        .items
        .iter()
        .find(|kv| kv.key == "/events/ns/k20")
        .unwrap();
    assert_eq!(k20.value, b("recreated"));
    assert_eq!(k20.create_revision, k20.mod_revision);

    // A single unlimited list at the old snapshot equals the paged one.
    let whole = s
        .list(
            "/events/ns/",
            ListOptions {
                at_revision: Some(snapshot),
                ..ListOptions::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(whole.items, all);
    assert!(!whole.more);

    // The prefix bounds hold at both ends; a continue key before the prefix is harmless.
    let from_before = s
        .list(
            "/events/ns/",
            ListOptions {
                start_after: Some("/a".into()),
                limit: Some(1),
                at_revision: None,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(keys(&from_before.items), ["/events/ns/k00"]);
    let everything = s.list("/events/", ListOptions::default()).await.unwrap();
    assert_eq!(everything.items.first().unwrap().key, "/events/mm/before");
    assert_eq!(everything.items.last().unwrap().key, "/events/nt/after");
}

/// Reads every page of `prefix` at `at` in pages of `limit`, starting with `first` and
/// going on in the order each page says it was read in; between pages, `between` writes.
/// Checks that every page is at `at` and in the one order they all report.
async fn any_order(
    s: &Arc<dyn Backend>,
    prefix: &str,
    at: Revision,
    limit: usize,
    first: ListOrder,
    mut between: impl AsyncFnMut(),
) -> Vec<KeyValue> {
    let mut out: Vec<KeyValue> = Vec::new();
    let (mut order, mut start_after) = (first, None);
    let mut written = None;
    let mut complete = false;
    for _ in 0..100 {
        let page = s
            .list(
                prefix,
                ListOptions {
                    start_after: start_after.clone(),
                    limit: Some(limit),
                    at_revision: Some(at),
                    order,
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(page.revision, at);
        assert!(page.items.len() <= limit);
        let is_written = match page.order {
            ListOrder::Key => false,
            ListOrder::Written { after } => {
                assert_eq!(Some(after), page.items.last().map(|kv| kv.mod_revision));
                true
            }
            ListOrder::Fastest => panic!("a page reported ListOrder::Fastest"),
        };
        assert_eq!(*written.get_or_insert(is_written), is_written, "one order");
        out.extend(page.items.iter().cloned());
        if !page.more {
            complete = true;
            break;
        }
        let last = page
            .items
            .last()
            .expect("a page with more after it is not empty");
        (order, start_after) = match page.order {
            ListOrder::Written { after } => (ListOrder::Written { after }, None),
            _ => (ListOrder::Key, Some(last.key.clone())),
        };
        between().await;
    }
    assert!(complete, "paging {prefix} at {at} did not end");
    if written == Some(true) {
        assert!(
            out.windows(2)
                .all(|w| w[0].mod_revision < w[1].mod_revision),
            "{out:?}"
        );
    } else {
        assert!(out.windows(2).all(|w| w[0].key < w[1].key), "{out:?}");
    }
    out
}

/// A list in any order ([`ListOrder::Fastest`], then the order the backend chose) holds the
/// snapshot's keys once each, whatever is written between its pages; on the backends that
/// read in write order so does [`ListOrder::Written`], in increasing mod revision, and etcd
/// refuses it.
async fn lists_in_any_order_read_the_snapshot_once(f: Fixture, writes_in_order: bool) {
    let s = &f.store;
    // Written out of key order, some updated and deleted, so the orders differ.
    for i in [7, 2, 9, 0, 5, 3, 8, 1, 6, 4, 11, 10] {
        s.create(&format!("/events/ns/k{i:02}"), b("v"), None)
            .await
            .unwrap();
    }
    s.create("/events/other/x", b("v"), None).await.unwrap();
    s.update("/events/ns/k02", b("w"), None, None)
        .await
        .unwrap();
    s.delete("/events/ns/k05", None).await.unwrap();
    let at = s.current_revision().await.unwrap();
    let want = paged(s, "/events/ns/", at, usize::MAX).await;
    assert_eq!(want.len(), 11);

    // Each pause between pages updates a key, creates one and deletes one of these.
    let (mut n, mut victims) = (0, vec![0, 1, 3, 4, 6, 8, 9, 10, 11]);
    for first in [ListOrder::Fastest, ListOrder::Written { after: 0 }] {
        let at_now = s.current_revision().await.unwrap();
        let want_now = paged(s, "/events/ns/", at_now, usize::MAX).await;
        let r = s
            .list(
                "/events/ns/",
                ListOptions {
                    limit: Some(3),
                    at_revision: Some(at_now),
                    order: first,
                    ..Default::default()
                },
            )
            .await;
        if !writes_in_order && first != ListOrder::Fastest {
            assert!(matches!(r, Err(StorageError::Backend(_))), "{r:?}");
            continue;
        }
        r.unwrap();
        let writes = async || {
            n += 1;
            s.update("/events/ns/k07", b("later"), None, None)
                .await
                .unwrap();
            s.create(&format!("/events/ns/k5{n}"), b("later"), None)
                .await
                .unwrap();
            if let Some(k) = victims.pop() {
                s.delete(&format!("/events/ns/k{k:02}"), None)
                    .await
                    .unwrap();
            }
        };
        let mut got = any_order(s, "/events/ns/", at_now, 3, first, writes).await;
        if first != ListOrder::Fastest {
            assert!(
                got.windows(2)
                    .all(|w| w[0].mod_revision < w[1].mod_revision)
            );
        }
        got.sort_by(|a, b| a.key.cmp(&b.key));
        assert_eq!(got, want_now, "{first:?}");
    }
    // The first snapshot is still readable and unchanged.
    let mut got = any_order(s, "/events/ns/", at, 4, ListOrder::Fastest, async || {}).await;
    got.sort_by(|a, b| a.key.cmp(&b.key));
    assert_eq!(got, want);
}

async fn list_at_a_compacted_revision_is_expired(f: Fixture) {
    let s = &f.store;
    let a = s.create("/events/ns/a", b("1"), None).await.unwrap();
    let r1 = a.mod_revision;
    s.update("/events/ns/a", b("2"), None, None).await.unwrap();
    let r2 = s
        .create("/events/ns/b", b("1"), None)
        .await
        .unwrap()
        .mod_revision;
    s.update("/events/ns/a", b("3"), None, None).await.unwrap();

    let at = |rev| ListOptions {
        at_revision: Some(rev),
        ..ListOptions::default()
    };
    let old = s.list("/events/", at(r1)).await.unwrap();
    assert_eq!(old.items.len(), 1);
    assert_eq!(old.items[0].value, b("1"));

    s.compact(r2).await.unwrap();
    assert_eq!(
        s.list("/events/", at(r1)).await,
        Err(StorageError::Expired {
            requested: r1,
            oldest: r2
        })
    );
    let at_r2 = s.list("/events/", at(r2)).await.unwrap();
    assert_eq!(keys(&at_r2.items), ["/events/ns/a", "/events/ns/b"]);
    assert_eq!(at_r2.items[0].value, b("2"));
    let current = s.current_revision().await.unwrap();
    assert_eq!(
        s.list("/events/", at(current + 1)).await,
        Err(StorageError::FutureRevision {
            requested: current + 1,
            current
        })
    );
    // Watches from before the compaction are expired too; from it, they replay.
    assert!(matches!(
        s.watch("/events/", r1).await,
        Err(StorageError::Expired { .. })
    ));
    let mut w = s.watch("/events/", r2).await.unwrap();
    assert_eq!(next_event(&mut w).await.revision(), r2 + 1);
}

async fn automatic_compaction_bounds_history(f: Fixture) {
    // keep_revisions is 16 in this fixture: after 100 writes, revision 10 is long gone.
    let s = &f.store;
    for i in 0..100 {
        s.create(&format!("/events/ns/k{i:03}"), b("x"), None)
            .await
            .unwrap();
    }
    let err = s
        .list(
            "/events/",
            ListOptions {
                at_revision: Some(10),
                ..ListOptions::default()
            },
        )
        .await
        .unwrap_err();
    let StorageError::Expired { requested, oldest } = err else {
        panic!("expected Expired, got {err:?}");
    };
    assert_eq!(requested, 10);
    let head = R0 + 100;
    assert!(
        (head - 16 - 2..=head - 16).contains(&oldest),
        "oldest {oldest}"
    );
    let recent = s
        .list(
            "/events/",
            ListOptions {
                at_revision: Some(R0 + 95),
                ..ListOptions::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(recent.items.len(), 95);
}

async fn watch_replays_exactly_the_later_events_in_order(f: Fixture) {
    let s = &f.store;
    let a = s.create("/events/ns/a", b("a1"), None).await.unwrap();
    s.create("/events/ns/b", b("b1"), None).await.unwrap();
    let from = s.current_revision().await.unwrap();
    let a2 = s.update("/events/ns/a", b("a2"), None, None).await.unwrap();
    let del_b = s.delete("/events/ns/b", None).await.unwrap();
    s.create("/other/x", b("not watched"), None).await.unwrap();
    let c = s.create("/events/ns/c", b("c1"), None).await.unwrap();

    let mut w = s.watch("/events/", from).await.unwrap();
    let mut all = s.watch("/", 0).await.unwrap();
    assert_eq!(
        *next_event(&mut w).await,
        WatchEvent::Put {
            kv: a2.clone(),
            prev: Some(a.clone())
        }
    );
    assert_eq!(
        *next_event(&mut w).await,
        WatchEvent::Delete {
            prev: del_b.prev.clone(),
            revision: del_b.revision
        }
    );
    assert_eq!(
        *next_event(&mut w).await,
        WatchEvent::Put {
            kv: c.clone(),
            prev: None
        }
    );
    // Nothing else was pending: the next item is the next live write.
    let live = s.create("/events/ns/d", b("d1"), None).await.unwrap();
    assert_eq!(
        *next_event(&mut w).await,
        WatchEvent::Put {
            kv: live.clone(),
            prev: None
        }
    );
    // A watch from 0 sees every write, in revision order, including other prefixes.
    let mut revs = Vec::new();
    for _ in R0..live.mod_revision {
        revs.push(next_event(&mut all).await.revision());
    }
    assert_eq!(
        revs,
        (R0 + 1..=live.mod_revision).collect::<Vec<Revision>>()
    );
    // A watch from the current revision waits for the next write only.
    let mut fresh = s.watch("/events/", live.mod_revision).await.unwrap();
    let e = s.create("/events/ns/e", b("e1"), None).await.unwrap();
    assert_eq!(next_event(&mut fresh).await.revision(), e.mod_revision);
}

async fn watch_from_a_revision_older_than_the_window_is_expired(f: Fixture) {
    // watch_window is 8 in this fixture.
    let s = &f.store;
    for i in 0..20 {
        s.create(&format!("/events/ns/k{i}"), b("x"), None)
            .await
            .unwrap();
    }
    let err = s.watch("/events/", R0 + 4).await.err().expect("expired");
    assert_eq!(
        err,
        StorageError::Expired {
            requested: R0 + 4,
            oldest: R0 + 12
        }
    );
    let mut w = s.watch("/events/", R0 + 12).await.unwrap();
    for expected in R0 + 13..=R0 + 20 {
        assert_eq!(next_event(&mut w).await.revision(), expected);
    }
}

async fn slow_watcher_falls_out_of_the_window_and_gets_expired(f: Fixture) {
    // watch_window is 8 in this fixture.
    let s = &f.store;
    let mut slow = s.watch("/events/", 0).await.unwrap();
    let mut keeping_up = s.watch("/events/", 0).await.unwrap();
    for i in 1..=20u64 {
        s.create(&format!("/events/ns/k{i:02}"), b("x"), None)
            .await
            .unwrap();
        assert_eq!(next_event(&mut keeping_up).await.revision(), R0 + i);
    }
    match next(&mut slow).await {
        Some(Err(StorageError::Expired { requested, oldest })) => {
            assert_eq!(requested, 0);
            assert_eq!(oldest, R0 + 12);
        }
        other => panic!("expected Expired, got {other:?}"),
    }
    assert!(next(&mut slow).await.is_none(), "stream ends after Expired");
}

async fn ttl_expiry_deletes_keys_and_emits_delete_events(f: Fixture) {
    let s = &f.store;
    let a = s
        .create("/events/ns/a", b("a"), Some(Duration::from_secs(60)))
        .await
        .unwrap();
    let bkv = s
        .create("/events/ns/b", b("b"), Some(Duration::from_secs(120)))
        .await
        .unwrap();
    s.create("/events/ns/c", b("c"), None).await.unwrap();
    let mut w = s
        .watch("/events/", s.current_revision().await.unwrap())
        .await
        .unwrap();

    f.clock.advance(Duration::from_secs(59));
    assert_eq!(s.expire_due().await.unwrap(), 0);
    f.clock.advance(Duration::from_secs(2));
    assert_eq!(s.expire_due().await.unwrap(), 1);
    assert_eq!(s.get("/events/ns/a").await.unwrap(), None);
    assert_eq!(
        *next_event(&mut w).await,
        WatchEvent::Delete {
            prev: a.clone(),
            revision: R0 + 4
        }
    );
    // A write restarts the TTL (t = 91 s → b now expires at 211 s).
    f.clock.advance(Duration::from_secs(30));
    let b2 = s
        .update(
            "/events/ns/b",
            b("b2"),
            Some(bkv.mod_revision),
            Some(Duration::from_secs(120)),
        )
        .await
        .unwrap();
    assert_eq!(next_event(&mut w).await.revision(), b2.mod_revision);
    f.clock.advance(Duration::from_secs(60)); // 151 s: past b's first TTL
    assert_eq!(s.expire_due().await.unwrap(), 0);
    assert!(s.get("/events/ns/b").await.unwrap().is_some());
    f.clock.advance(Duration::from_secs(61)); // 212 s
    assert_eq!(s.expire_due().await.unwrap(), 1);
    assert_eq!(
        *next_event(&mut w).await,
        WatchEvent::Delete {
            prev: b2.clone(),
            revision: b2.mod_revision + 1
        }
    );
    // An update without TTL clears it; keys without TTL never expire.
    let d = s
        .create("/events/ns/d", b("d"), Some(Duration::from_secs(1)))
        .await
        .unwrap();
    s.update("/events/ns/d", b("d2"), Some(d.mod_revision), None)
        .await
        .unwrap();
    f.clock.advance(Duration::from_secs(3600));
    assert_eq!(s.expire_due().await.unwrap(), 0);
    let left = s.list("/events/", ListOptions::default()).await.unwrap();
    assert_eq!(keys(&left.items), ["/events/ns/c", "/events/ns/d"]);
}

async fn many_expiries_in_one_sweep(f: Fixture) {
    // More than one SQLite sweep batch (1,000) expire together.
    let s = &f.store;
    let names: Vec<String> = (0..2_500).map(|i| format!("/events/ns/k{i:05}")).collect();
    // Written concurrently (one group commit covers many), with TTLs spread over 7 seconds.
    futures::future::try_join_all(
        names
            .iter()
            .zip(0u64..)
            .map(|(k, i)| s.create(k, b("x"), Some(Duration::from_secs(10 + i % 7)))),
    )
    .await
    .unwrap();
    s.create("/events/ns/keep", b("x"), Some(Duration::from_secs(3600)))
        .await
        .unwrap();
    let from = s.current_revision().await.unwrap();
    let mut w = s.watch("/events/", from).await.unwrap();
    f.clock.advance(Duration::from_secs(60));
    assert_eq!(s.expire_due().await.unwrap(), 2_500);
    let mut deleted = std::collections::BTreeSet::new();
    for i in 0..2_500u64 {
        let ev = next_event(&mut w).await;
        assert_eq!(ev.revision(), from + 1 + i);
        assert!(matches!(&*ev, WatchEvent::Delete { .. }));
        deleted.insert(ev.key().to_owned());
    }
    assert_eq!(deleted.len(), 2_500);
    let left = s.list("/events/", ListOptions::default()).await.unwrap();
    assert_eq!(keys(&left.items), ["/events/ns/keep"]);
}

async fn concurrent_writers_get_distinct_increasing_revisions(f: Fixture) {
    const TASKS: usize = 64;
    const EACH: usize = 20;
    let start = f.store.current_revision().await.unwrap();
    let mut handles = Vec::new();
    for t in 0..TASKS {
        let s = Arc::clone(&f.store);
        handles.push(tokio::spawn(async move {
            let mut revs = Vec::with_capacity(EACH);
            for i in 0..EACH {
                let kv = s
                    .create(&format!("/events/ns/t{t:02}-{i:02}"), b("x"), None)
                    .await
                    .unwrap();
                revs.push(kv.mod_revision);
            }
            revs
        }));
    }
    let mut all = Vec::new();
    for h in handles {
        let revs = h.await.unwrap();
        assert!(revs.windows(2).all(|w| w[0] < w[1]), "per-task order");
        all.extend(revs);
    }
    all.sort_unstable();
    let n = (TASKS * EACH) as u64;
    assert_eq!(all, ((start + 1)..=(start + n)).collect::<Vec<_>>());
    assert_eq!(f.store.current_revision().await.unwrap(), start + n);
    let listed = f
        .store
        .list("/events/ns/", ListOptions::default())
        .await
        .unwrap();
    assert_eq!(listed.items.len(), TASKS * EACH);
}

/// Finding 4 of issue 29: the watch window moves by bytes as well as by events, so the
/// revisions of a large event leave with it once it is replaced, deleted or expired (before,
/// only 65,536 later writes pushed them out). The ring here could hold 65,536 events.
async fn revisions_of_an_expired_event_leave_with_the_byte_window(f: Fixture) {
    let s = &f.store;
    let big = || Bytes::from(vec![b'x'; 100 * 1024]);
    let created = s
        .create("/events/ns/big", big(), Some(Duration::from_secs(1)))
        .await
        .unwrap();
    let mut live = s.watch("/events/", created.mod_revision).await.unwrap();
    // Created (100 KiB) + updated (counted with its previous value: 200 KiB) is more than the
    // 256 KiB window: the create leaves.
    let updated = s
        .update("/events/ns/big", big(), None, Some(Duration::from_secs(1)))
        .await
        .unwrap();
    assert!(matches!(
        s.watch("/events/", R0).await.err(),
        Some(StorageError::Expired { .. })
    ));
    // Its expiry (the deletion carries the last 100 KiB) pushes the update out too.
    f.clock.advance(Duration::from_secs(2));
    assert_eq!(s.expire_due().await.unwrap(), 1);
    assert!(matches!(
        s.watch("/events/", created.mod_revision).await.err(),
        Some(StorageError::Expired { .. })
    ));
    let mut w = s.watch("/events/", updated.mod_revision).await.unwrap();
    let deleted = next_event(&mut w).await;
    assert!(matches!(&*deleted, WatchEvent::Delete { prev, .. } if prev.key == "/events/ns/big"));
    // The live watcher has not read anything yet: it fell out of the window and is told so.
    assert!(matches!(
        next(&mut live).await,
        Some(Err(StorageError::Expired { .. }))
    ));
}

/// A window of 65,536 events and 256 KiB.
fn small_byte_window() -> HistoryOptions {
    HistoryOptions {
        watch_window_bytes: 256 * 1024,
        ..HistoryOptions::default()
    }
}

fn small_window() -> HistoryOptions {
    HistoryOptions {
        watch_window: 8,
        keep_revisions: 1_000,
        ..HistoryOptions::default()
    }
}

fn small_history() -> HistoryOptions {
    HistoryOptions {
        watch_window: 1_000,
        keep_revisions: 16,
        ..HistoryOptions::default()
    }
}

/// The contract tests every backend passes.
macro_rules! shared_contract {
    ($backend:ident) => {
        #[tokio::test]
        async fn create_get_update_delete() {
            super::create_get_update_delete(
                super::fixture::$backend(HistoryOptions::default()).await,
            )
            .await;
        }

        #[tokio::test]
        async fn list_pages_at_a_fixed_revision_while_writes_continue() {
            super::list_pages_at_a_fixed_revision_while_writes_continue(
                super::fixture::$backend(HistoryOptions::default()).await,
            )
            .await;
        }

        #[tokio::test]
        async fn lists_in_any_order_read_the_snapshot_once() {
            super::lists_in_any_order_read_the_snapshot_once(
                super::fixture::$backend(HistoryOptions::default()).await,
                stringify!($backend) != "etcd",
            )
            .await;
        }

        #[tokio::test]
        async fn list_at_a_compacted_revision_is_expired() {
            super::list_at_a_compacted_revision_is_expired(
                super::fixture::$backend(HistoryOptions::default()).await,
            )
            .await;
        }

        #[tokio::test]
        async fn watch_replays_exactly_the_later_events_in_order() {
            super::watch_replays_exactly_the_later_events_in_order(
                super::fixture::$backend(HistoryOptions::default()).await,
            )
            .await;
        }

        #[tokio::test]
        async fn watch_from_a_revision_older_than_the_window_is_expired() {
            super::watch_from_a_revision_older_than_the_window_is_expired(
                super::fixture::$backend(small_window()).await,
            )
            .await;
        }

        #[tokio::test]
        async fn slow_watcher_falls_out_of_the_window_and_gets_expired() {
            super::slow_watcher_falls_out_of_the_window_and_gets_expired(
                super::fixture::$backend(small_window()).await,
            )
            .await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn concurrent_writers_get_distinct_increasing_revisions() {
            super::concurrent_writers_get_distinct_increasing_revisions(
                super::fixture::$backend(HistoryOptions::default()).await,
            )
            .await;
        }
    };
}

/// The contract tests driven by the fake clock's TTL sweeps (`expire_due`) and by compaction
/// after a count of revisions: the memory and SQLite backends. On etcd, leases expire keys in
/// etcd's own time and a compactor runs on an interval (see the `etcd_*` tests).
macro_rules! clock_contract {
    ($backend:ident) => {
        #[tokio::test]
        async fn automatic_compaction_bounds_history() {
            super::automatic_compaction_bounds_history(
                super::fixture::$backend(small_history()).await,
            )
            .await;
        }

        #[tokio::test]
        async fn revisions_of_an_expired_event_leave_with_the_byte_window() {
            super::revisions_of_an_expired_event_leave_with_the_byte_window(
                super::fixture::$backend(small_byte_window()).await,
            )
            .await;
        }

        #[tokio::test]
        async fn ttl_expiry_deletes_keys_and_emits_delete_events() {
            super::ttl_expiry_deletes_keys_and_emits_delete_events(
                super::fixture::$backend(HistoryOptions::default()).await,
            )
            .await;
        }

        #[tokio::test]
        async fn many_expiries_in_one_sweep() {
            super::many_expiries_in_one_sweep(
                super::fixture::$backend(HistoryOptions::default()).await,
            )
            .await;
        }
    };
}

macro_rules! contract {
    ($backend:ident) => {
        mod $backend {
            use super::*;

            shared_contract!($backend);
            clock_contract!($backend);
        }
    };
    ($backend:ident, shared_only) => {
        mod $backend {
            use super::*;

            shared_contract!($backend);
        }
    };
}

contract!(memory);
contract!(sqlite);
contract!(sqlite_merging);
contract!(etcd, shared_only);

/// Finding 4 of issue 29, the memory store's other history: the versions it keeps for lists
/// at older revisions are bounded in bytes too, not only by 100,000 revisions.
#[tokio::test]
async fn memory_history_for_old_lists_is_bounded_in_bytes() {
    const VALUE: usize = 64 * 1024;
    let store = MemoryBackend::new(
        clock(),
        HistoryOptions {
            keep_bytes: 1 << 20,
            ..HistoryOptions::default()
        },
    );
    let value = || Bytes::from(vec![b'v'; VALUE]);
    let first = store.create("/events/ns/a", value(), None).await.unwrap();
    let mut last = first.clone();
    for _ in 0..100 {
        last = store
            .update("/events/ns/a", value(), None, None)
            .await
            .unwrap();
        assert!(
            store.history_bytes() <= 1 << 20,
            "{} bytes",
            store.history_bytes()
        );
    }
    assert!(store.history_bytes() > (1 << 20) / 2, "history is kept");
    let at = |rev| ListOptions {
        at_revision: Some(rev),
        ..ListOptions::default()
    };
    assert!(matches!(
        store.list("/events/", at(first.mod_revision)).await,
        Err(StorageError::Expired { .. })
    ));
    // Recent revisions are still listed exactly.
    let page = store
        .list("/events/", at(last.mod_revision - 1))
        .await
        .unwrap();
    assert_eq!(page.items[0].mod_revision, last.mod_revision - 1);
    // Deleting the key keeps its last value as history; compactions give it back.
    store.delete("/events/ns/a", None).await.unwrap();
    store.compact(last.mod_revision + 1).await.unwrap();
    assert_eq!(store.history_bytes(), 0);
}

// ---------------------------------------------------------------------------------------------
// SQLite only.

/// Finding 6 of issue 29: the data directory is created owner-only (0700) and every file
/// in it (database, WAL, shared memory, lock, reserve) 0600; they were 0755 and 0644.
#[cfg(unix)]
#[tokio::test]
async fn sqlite_files_are_created_owner_only() {
    use std::os::unix::fs::PermissionsExt as _;
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("data");
    let s = SqliteBackend::open(&dir, clock(), SqliteOptions::default()).unwrap();
    s.create("/events/ns/a", b("a"), None).await.unwrap();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&dir), 0o700);
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "herald-index.db",
            "herald-index.db-shm",
            "herald-index.db-wal",
            "herald.db",
            "herald.db-shm",
            "herald.db-wal",
            "herald.lock",
            "herald.reserve"
        ]
    );
    for name in &names {
        assert_eq!(mode(&dir.join(name)), 0o600, "{name}");
    }
    // An existing directory others can enter is used as it is (with a warning).
    drop(s);
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let s = SqliteBackend::open(&dir, clock(), SqliteOptions::default()).unwrap();
    assert_eq!(s.get("/events/ns/a").await.unwrap().unwrap().value, b("a"));
    assert_eq!(mode(&dir), 0o755);
}

/// After a restart the watch ring is reloaded within its byte bound, not 65,536 events of
/// whatever size (finding 4 of issue 29).
#[tokio::test]
async fn sqlite_restart_reloads_the_watch_ring_within_its_bytes() {
    const VALUE: usize = 64 * 1024;
    let dir = tempfile::tempdir().unwrap();
    let opts = SqliteOptions {
        history: HistoryOptions {
            watch_window_bytes: 1 << 20,
            ..HistoryOptions::default()
        },
        ..SqliteOptions::default()
    };
    let value = || Bytes::from(vec![b'v'; VALUE]);
    let last = {
        let s = SqliteBackend::open(dir.path(), clock(), opts).unwrap();
        s.create("/events/ns/a", value(), None).await.unwrap();
        let mut last = None;
        for _ in 0..60 {
            last = Some(s.update("/events/ns/a", value(), None, None).await.unwrap());
        }
        assert!(s.hub().bytes() <= 1 << 20);
        last.unwrap()
    };
    let s = SqliteBackend::open(dir.path(), clock(), opts).unwrap();
    let hub = s.hub();
    assert!(hub.bytes() <= 1 << 20, "{} bytes", hub.bytes());
    assert!(hub.len() > 1 && hub.len() < 60, "{} events", hub.len());
    assert_eq!(hub.floor(), last.mod_revision - hub.len() as Revision);
    assert!(matches!(
        s.watch("/events/", R0).await.err(),
        Some(StorageError::Expired { .. })
    ));
    let mut w = s.watch("/events/", hub.floor()).await.unwrap();
    assert_eq!(next_event(&mut w).await.revision(), hub.floor() + 1);
}

#[tokio::test]
async fn sqlite_restart_keeps_data_revisions_ttl_and_watch_history() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock();
    let open = || {
        Arc::new(SqliteBackend::open(dir.path(), clock.clone(), SqliteOptions::default()).unwrap())
    };
    let (a, from, c, compacted_at) = {
        let s = open();
        let a = s.create("/events/ns/a", b("a"), None).await.unwrap();
        s.create("/events/ns/b", b("b"), None).await.unwrap();
        s.compact(2).await.unwrap();
        let from = s.current_revision().await.unwrap();
        let a = s
            .update("/events/ns/a", b("a2"), Some(a.mod_revision), None)
            .await
            .unwrap();
        s.delete("/events/ns/b", None).await.unwrap();
        let c = s
            .create("/events/ns/c", b("c"), Some(Duration::from_secs(60)))
            .await
            .unwrap();
        (a, from, c, 2)
    };
    let s = open();
    assert_eq!(s.current_revision().await.unwrap(), c.mod_revision);
    assert_eq!(s.get("/events/ns/a").await.unwrap(), Some(a.clone()));
    assert_eq!(s.get("/events/ns/b").await.unwrap(), None);
    // History survives: an old snapshot, the compaction point and the watch replay.
    let old = s
        .list(
            "/events/",
            ListOptions {
                at_revision: Some(from),
                ..ListOptions::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(keys(&old.items), ["/events/ns/a", "/events/ns/b"]);
    assert_eq!(old.items[0].value, b("a"));
    assert!(matches!(
        s.list(
            "/events/",
            ListOptions {
                at_revision: Some(compacted_at - 1),
                ..ListOptions::default()
            }
        )
        .await,
        Err(StorageError::Expired { .. })
    ));
    let mut w = s.watch("/events/", from).await.unwrap();
    let replay: Vec<Arc<WatchEvent>> = vec![
        next_event(&mut w).await,
        next_event(&mut w).await,
        next_event(&mut w).await,
    ];
    assert!(
        matches!(&*replay[0], WatchEvent::Put { kv, prev: Some(p) } if *kv == a && p.value == b("a"))
    );
    assert!(matches!(&*replay[1], WatchEvent::Delete { prev, .. } if prev.key == "/events/ns/b"));
    assert!(matches!(&*replay[2], WatchEvent::Put { kv, prev: None } if *kv == c));
    // Revisions continue, and the TTL set before the restart still applies.
    let d = s.create("/events/ns/d", b("d"), None).await.unwrap();
    assert_eq!(d.mod_revision, c.mod_revision + 1);
    assert_eq!(next_event(&mut w).await.revision(), d.mod_revision);
    clock.advance(Duration::from_secs(61));
    assert_eq!(s.expire_due().await.unwrap(), 1);
    assert_eq!(s.get("/events/ns/c").await.unwrap(), None);
}

#[tokio::test]
async fn sqlite_new_store_starts_at_the_initial_revision_and_older_empty_ones_move_to_it() {
    let dir = tempfile::tempdir().unwrap();
    let open = || SqliteBackend::open(dir.path(), clock(), SqliteOptions::default()).unwrap();
    {
        let s = open();
        assert_eq!(s.current_revision().await.unwrap(), R0);
        let l = s.list("/events/", ListOptions::default()).await.unwrap();
        assert_eq!(l.revision, R0);
    }
    // A store created before revisions started at 1 and never written says 0.
    {
        let c = rusqlite::Connection::open(dir.path().join("herald.db")).unwrap();
        c.execute("UPDATE meta SET value = 0 WHERE name = 'revision'", [])
            .unwrap();
    }
    let s = open();
    assert_eq!(s.current_revision().await.unwrap(), R0);
    let mut w = s.watch("/events/", R0).await.unwrap();
    let a = s.create("/events/ns/a", b("a"), None).await.unwrap();
    assert_eq!(a.mod_revision, R0 + 1);
    assert_eq!(next_event(&mut w).await.revision(), R0 + 1);
}

/// No revision counter is written (the current revision is the newest row's): a reopened
/// store must still come back at the revision it had reached, also when a compaction removed
/// the rows of the newest writes (a deletion compacted away).
#[tokio::test]
async fn sqlite_reopened_revision_is_the_newest_write_even_when_compacted_away() {
    let dir = tempfile::tempdir().unwrap();
    let open = || SqliteBackend::open(dir.path(), clock(), SqliteOptions::default()).unwrap();
    let b_rev = {
        let s = open();
        s.create("/events/ns/a", b("a"), None).await.unwrap();
        s.create("/events/ns/b", b("b"), None)
            .await
            .unwrap()
            .mod_revision
    };
    let deleted_at = {
        let s = open();
        assert_eq!(s.current_revision().await.unwrap(), b_rev);
        let d = s.delete("/events/ns/b", None).await.unwrap();
        // Removes both of b's rows: the newest row left is a's create.
        s.compact(d.revision).await.unwrap();
        d.revision
    };
    let s = open();
    assert_eq!(s.current_revision().await.unwrap(), deleted_at);
    let l = s.list("/events/", ListOptions::default()).await.unwrap();
    assert_eq!(
        (keys(&l.items), l.revision),
        (vec!["/events/ns/a"], deleted_at)
    );
    let c = s.create("/events/ns/c", b("c"), None).await.unwrap();
    assert_eq!(c.mod_revision, deleted_at + 1);
}

/// Opening a store takes the live-key count from `meta` (written by every commit that
/// changes it) instead of counting every live key, which would read a store of millions of
/// events on each start; only a store without the entry (older, or upgraded) is counted.
#[tokio::test]
async fn sqlite_open_takes_the_persisted_live_count_and_counts_only_when_it_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let open = || SqliteBackend::open(dir.path(), clock(), SqliteOptions::default()).unwrap();
    {
        let s = open();
        for k in ["a", "b", "c"] {
            s.create(&format!("/events/ns/{k}"), b(k), None)
                .await
                .unwrap();
        }
        s.delete("/events/ns/b", None).await.unwrap();
        assert_eq!(s.live_keys(), Some(2));
    }
    let meta = |sql: &str| {
        let c = rusqlite::Connection::open(dir.path().join("herald.db")).unwrap();
        c.execute(sql, []).unwrap();
    };
    // A count the rows do not match: an open that recounted would not keep it.
    meta("UPDATE meta SET value = 41 WHERE name = 'live'");
    assert_eq!(open().live_keys(), Some(41));
    meta("DELETE FROM meta WHERE name = 'live'");
    assert_eq!(open().live_keys(), Some(2));
    assert_eq!(open().live_keys(), Some(2));
}

/// A store closed cleanly leaves an empty WAL: the next open has nothing to read back
/// before it can serve.
#[tokio::test]
async fn sqlite_clean_close_leaves_no_wal_to_replay() {
    let dir = tempfile::tempdir().unwrap();
    let wal = dir.path().join("herald.db-wal");
    let s = SqliteBackend::open(dir.path(), clock(), SqliteOptions::default()).unwrap();
    for i in 0..50 {
        s.create(&format!("/events/ns/e{i}"), b("x"), None)
            .await
            .unwrap();
    }
    assert!(
        std::fs::metadata(&wal).unwrap().len() > 0,
        "the writes are in the WAL"
    );
    drop(s);
    let left = std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0);
    assert_eq!(left, 0, "WAL bytes left after a clean close");
    let s = SqliteBackend::open(dir.path(), clock(), SqliteOptions::default()).unwrap();
    assert_eq!(s.live_keys(), Some(50));
}

/// Watches a reopened SQLite store from a revision written before the restart while other
/// tasks keep writing (deleting the pre-restart keys among them): every change after that
/// revision arrives, in order, with no gap — or, when the window is too small for the
/// backlog, the stream ends with `Expired`. Never a silent gap.
async fn reopened_store_replays_under_concurrent_writes(window: usize) -> bool {
    let dir = tempfile::tempdir().unwrap();
    let opts = SqliteOptions {
        history: HistoryOptions {
            watch_window: window,
            keep_revisions: window as u64,
            ..HistoryOptions::default()
        },
        ..SqliteOptions::default()
    };
    let open = || Arc::new(SqliteBackend::open(dir.path(), clock(), opts).unwrap());
    let from = {
        let s = open();
        for i in 0..20 {
            s.create(&format!("/events/ns/old{i:02}"), b("x"), None)
                .await
                .unwrap();
        }
        s.current_revision().await.unwrap() - 10
    };
    let s = open();
    let writers: Vec<_> = (0..4)
        .map(|t| {
            let s = s.clone();
            tokio::spawn(async move {
                for i in (t..20).step_by(4) {
                    s.create(&format!("/events/ns/new{i:02}"), b("y"), None)
                        .await
                        .unwrap();
                    s.delete(&format!("/events/ns/old{i:02}"), None)
                        .await
                        .unwrap();
                }
            })
        })
        .collect();
    let mut w = match s.watch("/events/", from).await {
        Ok(w) => w,
        Err(StorageError::Expired { requested, .. }) => {
            assert_eq!(requested, from);
            for t in writers {
                t.await.unwrap();
            }
            return false;
        }
        Err(e) => panic!("{e:?}"),
    };
    let last = from + 10 + 40;
    let mut want = from + 1;
    let mut deleted = std::collections::BTreeSet::new();
    while want <= last {
        match next(&mut w).await {
            Some(Ok(ev)) => {
                assert_eq!(ev.revision(), want, "a gap in the replay");
                if let WatchEvent::Delete { prev, .. } = &*ev {
                    deleted.insert(prev.key.clone());
                }
                want += 1;
            }
            Some(Err(StorageError::Expired { .. })) => {
                for t in writers {
                    t.await.unwrap();
                }
                return false;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    for t in writers {
        t.await.unwrap();
    }
    let expected: std::collections::BTreeSet<String> =
        (0..20).map(|i| format!("/events/ns/old{i:02}")).collect();
    assert_eq!(
        deleted, expected,
        "every pre-restart key's delete is delivered"
    );
    true
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_reopened_store_replays_from_before_the_restart_under_concurrent_writes() {
    // A window holding the whole backlog: the full replay, every delete included.
    assert!(reopened_store_replays_under_concurrent_writes(1024).await);
    // A window that holds the start but not what is written meanwhile: in order without a
    // gap, complete or ended by Expired depending on how the watcher keeps up.
    for _ in 0..3 {
        reopened_store_replays_under_concurrent_writes(16).await;
    }
    // A window that lost the start across the restart: Expired at once.
    assert!(!reopened_store_replays_under_concurrent_writes(8).await);
}

#[tokio::test]
async fn sqlite_shutdown_ends_watch_streams() {
    let f = sqlite(HistoryOptions::default());
    let mut w = f.store.watch("/events/", 0).await.unwrap();
    f.store.create("/events/ns/a", b("a"), None).await.unwrap();
    drop(f.store);
    assert_eq!(next_event(&mut w).await.revision(), R0 + 1);
    assert!(next(&mut w).await.is_none());
}

/// Set in the child process of the SIGKILL test: the directory to write into.
const KILL_WRITER_ENV: &str = "HERALD_STORAGE_KILL_WRITER_DIR";
const ACKS_BEFORE_KILL: usize = 3_000;

/// The child: 16 concurrent writers print every acknowledged write until they are killed
/// (each stops after 20,000 writes, so an orphaned child still ends).
fn run_kill_writer(dir: &str) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let store = Arc::new(
            SqliteBackend::open(dir, Arc::new(SystemClock), SqliteOptions::default()).unwrap(),
        );
        let mut tasks = Vec::new();
        for t in 0..16 {
            let store = Arc::clone(&store);
            tasks.push(tokio::spawn(async move {
                for i in 0..20_000 {
                    let key = format!("/events/kill/t{t:02}-{i:05}");
                    let value =
                        format!("{{\"task\":{t},\"i\":{i},\"pad\":\"{}\"}}", "p".repeat(150));
                    let kv = store.create(&key, Bytes::from(value), None).await.unwrap();
                    let mut out = std::io::stdout().lock();
                    writeln!(out, "ACK {key} {}", kv.mod_revision).unwrap();
                    out.flush().unwrap();
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
    });
}

#[test]
fn sqlite_sigkill_keeps_every_acknowledged_write() {
    if let Ok(dir) = std::env::var(KILL_WRITER_ENV) {
        run_kill_writer(&dir);
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "sqlite_sigkill_keeps_every_acknowledged_write",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(KILL_WRITER_ENV, dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut acked: Vec<(String, Revision)> = Vec::new();
    for line in BufReader::new(stdout).lines() {
        let line = line.unwrap();
        if let Some(rest) = line.strip_prefix("ACK ") {
            let (key, rev) = rest.rsplit_once(' ').unwrap();
            acked.push((key.to_owned(), rev.parse().unwrap()));
            if acked.len() == ACKS_BEFORE_KILL {
                break;
            }
        }
    }
    assert_eq!(
        acked.len(),
        ACKS_BEFORE_KILL,
        "child ended before enough acks"
    );
    child.kill().unwrap(); // SIGKILL
    let status = child.wait().unwrap();
    assert!(!status.success());

    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let store =
            SqliteBackend::open(dir.path(), Arc::new(SystemClock), SqliteOptions::default())
                .unwrap();
        let max = acked.iter().map(|(_, r)| *r).max().unwrap();
        assert!(store.current_revision().await.unwrap() >= max);
        for (key, rev) in &acked {
            let kv = store
                .get(key)
                .await
                .unwrap()
                .unwrap_or_else(|| panic!("acknowledged {key} lost"));
            assert_eq!(kv.mod_revision, *rev, "{key}");
        }
        // The store still accepts writes after the crash, with fresh revisions.
        let next = store
            .create("/events/kill/after", b("x"), None)
            .await
            .unwrap();
        assert!(next.mod_revision > max);
    });
}

#[tokio::test(start_paused = true)]
async fn sweeper_expires_keys_on_its_interval_and_stops_with_the_backend() {
    let f = memory(HistoryOptions::default());
    let a = f
        .store
        .create("/events/ns/a", b("a"), Some(Duration::from_secs(10)))
        .await
        .unwrap();
    let handle = herald_server::storage::spawn_sweeper(&f.store, Duration::from_secs(1));
    let mut w = f.store.watch("/events/", a.mod_revision).await.unwrap();
    // The fake clock decides what is due; the (paused) tokio interval only paces the sweeps.
    f.clock.advance(Duration::from_secs(11));
    assert_eq!(
        *next_event(&mut w).await,
        WatchEvent::Delete {
            prev: a.clone(),
            revision: a.mod_revision + 1
        }
    );
    assert_eq!(f.store.get("/events/ns/a").await.unwrap(), None);
    drop(w);
    drop(f.store);
    tokio::time::timeout(Duration::from_secs(5), handle)
        .await
        .expect("sweeper ends once the backend is gone")
        .unwrap();
}

/// A deterministic stream of pseudo-random numbers (a 64-bit LCG), so the mixed-operation
/// test below is reproducible.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
}

/// Every page of `prefix` at `at`, `limit` keys at a time, in key order.
async fn paged(s: &Arc<dyn Backend>, prefix: &str, at: Revision, limit: usize) -> Vec<KeyValue> {
    any_order(s, prefix, at, limit, ListOrder::Key, async || {}).await
}

/// Lists must agree at every revision between the memory backend (the reference) and SQLite's
/// version log, with the default watch ring and a one-event ring (lists never read the ring,
/// which must not matter), across a restart of both SQLite stores and an explicit compaction.
#[tokio::test]
async fn lists_at_every_revision_agree_between_memory_cache_and_log() {
    let clock = clock();
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let windows = [HistoryOptions::default().watch_window, 1];
    let open = |i: usize| -> Arc<dyn Backend> {
        let opts = SqliteOptions {
            history: HistoryOptions {
                watch_window: windows[i],
                keep_revisions: 100_000,
                ..HistoryOptions::default()
            },
            ..SqliteOptions::default()
        };
        Arc::new(SqliteBackend::open(dirs[i].path(), clock.clone(), opts).unwrap())
    };
    let memory: Arc<dyn Backend> =
        Arc::new(MemoryBackend::new(clock.clone(), HistoryOptions::default()));
    let mut stores = vec![memory, open(0), open(1)];
    let mut rng = Lcg(7);
    let mut compacted = 0;
    for round in 0..3 {
        for _ in 0..60 {
            let key = format!("/events/ns{}/k{:02}", rng.below(2), rng.below(10));
            let value = b(&format!("v{}", rng.below(1000)));
            let exists = stores[0].get(&key).await.unwrap().is_some();
            let op = rng.below(3);
            for s in &stores {
                match (exists, op) {
                    (false, _) => drop(s.create(&key, value.clone(), None).await.unwrap()),
                    (true, 0) => drop(s.delete(&key, None).await.unwrap()),
                    (true, _) => drop(s.update(&key, value.clone(), None, None).await.unwrap()),
                }
            }
        }
        if round == 1 {
            compacted = stores[0].current_revision().await.unwrap() - 20;
            for s in &stores {
                s.compact(compacted).await.unwrap();
            }
        }
        // Restart both SQLite stores: the log and the reloaded cache must still agree.
        stores.truncate(1);
        stores.push(open(0));
        stores.push(open(1));
    }
    let head = stores[0].current_revision().await.unwrap();
    for s in &stores[1..] {
        assert_eq!(s.current_revision().await.unwrap(), head);
    }
    for at in compacted..=head {
        for prefix in ["/events/", "/events/ns1/"] {
            let want = paged(&stores[0], prefix, at, usize::MAX).await;
            for s in &stores[1..] {
                assert_eq!(
                    paged(s, prefix, at, usize::MAX).await,
                    want,
                    "{prefix} at {at}"
                );
                assert_eq!(paged(s, prefix, at, 3).await, want, "{prefix} at {at} by 3");
            }
        }
    }
    for s in &stores[1..] {
        assert!(matches!(
            s.list(
                "/events/",
                ListOptions {
                    at_revision: Some(compacted - 1),
                    ..ListOptions::default()
                }
            )
            .await,
            Err(StorageError::Expired { .. })
        ));
    }
}

/// A data directory written by the first schema (a key-ordered `kv` table and a `log` of
/// previous values) opens with its data, revisions and TTLs; the history before the upgrade
/// is compacted.
#[tokio::test]
async fn sqlite_opens_a_store_of_the_first_schema() {
    let dir = tempfile::tempdir().unwrap();
    {
        let conn = rusqlite::Connection::open(dir.path().join("herald.db")).unwrap();
        conn.execute_batch(
            "PRAGMA journal_mode=WAL;
             CREATE TABLE meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
             INSERT INTO meta(name, value) VALUES ('revision', 7), ('compacted', 0);
             CREATE TABLE kv (key TEXT PRIMARY KEY, value BLOB NOT NULL, create_rev INTEGER NOT NULL,
                              mod_rev INTEGER NOT NULL, expires_at INTEGER) WITHOUT ROWID;
             CREATE INDEX kv_expires ON kv(expires_at) WHERE expires_at IS NOT NULL;
             CREATE TABLE log (rev INTEGER PRIMARY KEY, key TEXT NOT NULL, deleted INTEGER NOT NULL,
                               prev_value BLOB, prev_create_rev INTEGER, prev_mod_rev INTEGER);
             INSERT INTO kv VALUES ('/events/ns/a', X'61', 1, 5, NULL);
             INSERT INTO kv VALUES ('/events/ns/b', X'62', 6, 6, 1704067260000);
             INSERT INTO log VALUES (5, '/events/ns/a', 0, X'61', 1, 1);",
        )
        .unwrap();
    }
    let clock = clock();
    let s = SqliteBackend::open(dir.path(), clock.clone(), SqliteOptions::default()).unwrap();
    assert_eq!(s.current_revision().await.unwrap(), 7);
    let a = s.get("/events/ns/a").await.unwrap().unwrap();
    assert_eq!(
        (a.value.clone(), a.create_revision, a.mod_revision),
        (b("a"), 1, 5)
    );
    let list = s.list("/events/", ListOptions::default()).await.unwrap();
    assert_eq!(keys(&list.items), ["/events/ns/a", "/events/ns/b"]);
    assert_eq!(list.revision, 7);
    assert!(matches!(
        s.watch("/events/", 5).await,
        Err(StorageError::Expired { .. })
    ));
    // Writes continue the revisions; the TTL written by the old schema still runs out
    // (b expires at 2024-01-01T00:01:00Z).
    let a2 = s
        .update("/events/ns/a", b("a2"), Some(5), None)
        .await
        .unwrap();
    assert_eq!(a2.mod_revision, 8);
    clock.advance(Duration::from_secs(61));
    assert_eq!(s.expire_due().await.unwrap(), 1);
    assert_eq!(s.get("/events/ns/b").await.unwrap(), None);
}

/// Index values with `v` in slot 0 and nothing else.
fn slot0(v: &str) -> IndexValues {
    IndexValues::of([Some(v), None, None, None, None, None])
}

/// `ListOptions` asking for the keys with `v` in slot 0, at `at`, `limit` at a time.
fn in_slot0(v: &str, at: Option<Revision>, limit: Option<usize>) -> ListOptions {
    ListOptions {
        at_revision: at,
        limit,
        index: Some(IndexQuery {
            slot: 0,
            value: v.to_string(),
        }),
        ..ListOptions::default()
    }
}

/// SQLite reads a list that may come in any order ([`ListOrder::Fastest`]) in write order
/// when it holds more than a page and at least an eighth of the live keys (with an index
/// query: more than a page of the term's versions), and in key order otherwise.
#[tokio::test]
async fn sqlite_reads_large_lists_in_write_order_and_small_ones_in_key_order() {
    let f = sqlite(HistoryOptions::default());
    let s = &f.store;
    for i in 0..200 {
        let term = if i % 50 == 0 { "rare" } else { "common" };
        s.create_indexed(
            &format!("/events/big/k{:03}", 199 - i),
            b("v"),
            slot0(term),
            None,
        )
        .await
        .unwrap();
    }
    for i in 0..20 {
        s.create_indexed(
            &format!("/events/small/k{i:02}"),
            b("v"),
            slot0("common"),
            None,
        )
        .await
        .unwrap();
    }
    let order = async |prefix: &str, opts: ListOptions| {
        let opts = ListOptions {
            order: ListOrder::Fastest,
            ..opts
        };
        let page = s.list(prefix, opts).await.unwrap();
        match page.order {
            ListOrder::Written { .. } => "written",
            _ => "key",
        }
    };
    let limit = |n| ListOptions {
        limit: Some(n),
        ..ListOptions::default()
    };
    // 200 of 220 live keys.
    assert_eq!(order("/events/big/", limit(10)).await, "written");
    assert_eq!(order("/events/", limit(10)).await, "written");
    // 20 of 220: fewer than an eighth (27).
    assert_eq!(order("/events/small/", limit(10)).await, "key");
    // One page holds it all.
    assert_eq!(order("/events/big/", limit(500)).await, "key");
    assert_eq!(order("/events/big/", ListOptions::default()).await, "key");
    // A page from a continue position is in key order.
    let from = ListOptions {
        start_after: Some("/events/big/k100".into()),
        ..limit(10)
    };
    assert_eq!(order("/events/big/", from).await, "key");
    // By index: 4 versions hold "rare", 216 "common".
    assert_eq!(
        order("/events/", in_slot0("rare", None, Some(10))).await,
        "key"
    );
    assert_eq!(
        order("/events/", in_slot0("common", None, Some(10))).await,
        "written"
    );
    // Write order is the order of creation here, the reverse of the keys'.
    let first = s
        .list(
            "/events/big/",
            ListOptions {
                order: ListOrder::Fastest,
                ..limit(3)
            },
        )
        .await
        .unwrap();
    assert_eq!(
        keys(&first.items),
        ["/events/big/k199", "/events/big/k198", "/events/big/k197"]
    );
}

/// SQLite answers an index query from the index: only the keys whose current (or, at an
/// older revision, then current) version holds the value, paged and at a snapshot as any
/// list. The memory backend ignores the query (a caller filters what it gets either way).
#[tokio::test]
async fn sqlite_index_queries_read_only_the_matching_keys() {
    let f = sqlite(HistoryOptions::default());
    let s = &f.store;
    let a = s
        .create_indexed("/events/ns/a", b("a"), slot0("x"), None)
        .await
        .unwrap();
    let bb = s
        .create_indexed("/events/ns/b", b("b"), slot0("y"), None)
        .await
        .unwrap();
    s.create_indexed("/events/ns/c", b("c"), slot0("x"), None)
        .await
        .unwrap();
    s.create_indexed("/events/other/d", b("d"), slot0("x"), None)
        .await
        .unwrap();
    let before = s.current_revision().await.unwrap();
    s.update_indexed(
        "/events/ns/b",
        b("b2"),
        Some(bb.mod_revision),
        slot0("x"),
        None,
    )
    .await
    .unwrap();
    s.delete("/events/ns/c", None).await.unwrap();
    // A write without index values leaves the key out of every index.
    s.update("/events/ns/a", b("a2"), Some(a.mod_revision), None)
        .await
        .unwrap();

    let list = |o: ListOptions, prefix: &'static str| {
        let s = Arc::clone(s);
        async move { s.list(prefix, o).await.unwrap() }
    };
    let now = list(in_slot0("x", None, None), "/events/ns/").await;
    assert_eq!(keys(&now.items), ["/events/ns/b"]);
    assert_eq!(now.items[0].value, b("b2"));
    let then = list(in_slot0("x", Some(before), None), "/events/ns/").await;
    assert_eq!(keys(&then.items), ["/events/ns/a", "/events/ns/c"]);
    assert_eq!(then.revision, before);
    let everywhere = list(in_slot0("x", Some(before), None), "/events/").await;
    assert_eq!(
        keys(&everywhere.items),
        ["/events/ns/a", "/events/ns/c", "/events/other/d"]
    );
    // Paged: one key at a time, `more` only while matching keys follow.
    let first = list(in_slot0("x", Some(before), Some(1)), "/events/").await;
    assert_eq!(
        (keys(&first.items), first.more),
        (vec!["/events/ns/a"], true)
    );
    let mut o = in_slot0("x", Some(before), Some(2));
    o.start_after = Some("/events/ns/a".into());
    let second = list(o, "/events/").await;
    assert_eq!(
        (keys(&second.items), second.more),
        (vec!["/events/ns/c", "/events/other/d"], false)
    );
    assert!(
        list(in_slot0("z", None, None), "/events/")
            .await
            .items
            .is_empty()
    );
    // An unknown slot is no narrowing.
    let mut o = in_slot0("x", None, None);
    o.index.as_mut().unwrap().slot = 99;
    assert_eq!(list(o, "/events/ns/").await.items.len(), 2);

    let m = memory(HistoryOptions::default());
    m.store
        .create_indexed("/events/ns/a", b("a"), slot0("x"), None)
        .await
        .unwrap();
    m.store
        .create_indexed("/events/ns/b", b("b"), slot0("y"), None)
        .await
        .unwrap();
    let all = m
        .store
        .list("/events/", in_slot0("x", None, None))
        .await
        .unwrap();
    assert_eq!(keys(&all.items), ["/events/ns/a", "/events/ns/b"]);
}

/// A store of schema 2 (the log without indexes) gains them on open. Its versions have no
/// index terms, so index queries read every key (the caller's filter still answers right)
/// until the last of those versions has been replaced and compacted away; from then on they
/// are narrowed. The live keys are counted once, on the upgrade.
#[tokio::test]
async fn sqlite_store_of_schema_2_reads_unindexed_versions_until_they_are_gone() {
    let dir = tempfile::tempdir().unwrap();
    {
        let conn = rusqlite::Connection::open(dir.path().join("herald.db")).unwrap();
        conn.execute_batch(
            "PRAGMA journal_mode=WAL;
             CREATE TABLE meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
             INSERT INTO meta(name, value) VALUES ('revision', 1), ('compacted', 0), ('schema', 2);
             CREATE TABLE versions (rev INTEGER PRIMARY KEY, key TEXT NOT NULL, value BLOB,
                 create_rev INTEGER NOT NULL, prev_rev INTEGER, expires_at INTEGER,
                 next_rev INTEGER);
             CREATE INDEX versions_expiry ON versions(expires_at)
                 WHERE next_rev IS NULL AND expires_at IS NOT NULL;
             CREATE INDEX versions_replaced ON versions(next_rev) WHERE next_rev IS NOT NULL;
             INSERT INTO versions VALUES (2, '/events/ns/a', X'61', 2, NULL, NULL, NULL);
             INSERT INTO versions VALUES (3, '/events/ns/b', X'62', 3, NULL, NULL, 4);
             INSERT INTO versions VALUES (4, '/events/ns/b', NULL, 3, 3, NULL, 4);
             INSERT INTO versions VALUES (5, '/events/ns/c', X'63', 5, NULL, NULL, NULL);",
        )
        .unwrap();
    }
    let s = SqliteBackend::open(dir.path(), clock(), SqliteOptions::default()).unwrap();
    assert_eq!(s.current_revision().await.unwrap(), 5);
    assert_eq!(s.live_keys(), Some(2));
    let a = s.get("/events/ns/a").await.unwrap().unwrap();
    assert_eq!((a.value.clone(), a.mod_revision), (b("a"), 2));
    assert_eq!(s.get("/events/ns/b").await.unwrap(), None);
    s.create_indexed("/events/ns/d", b("d"), slot0("x"), None)
        .await
        .unwrap();
    let all = s.list("/events/", in_slot0("x", None, None)).await.unwrap();
    assert_eq!(
        keys(&all.items),
        ["/events/ns/a", "/events/ns/c", "/events/ns/d"],
        "versions without terms are read"
    );
    // Replace both old versions (a with a term, c without) and compact the old ones away.
    s.update_indexed("/events/ns/a", b("a2"), Some(2), slot0("x"), None)
        .await
        .unwrap();
    s.update("/events/ns/c", b("c2"), Some(5), None)
        .await
        .unwrap();
    let head = s.current_revision().await.unwrap();
    s.compact(head).await.unwrap();
    let narrowed = s.list("/events/", in_slot0("x", None, None)).await.unwrap();
    assert_eq!(keys(&narrowed.items), ["/events/ns/a", "/events/ns/d"]);
    assert_eq!(s.live_keys(), Some(3));
    drop(s);
    let s = SqliteBackend::open(dir.path(), clock(), SqliteOptions::default()).unwrap();
    assert_eq!(s.live_keys(), Some(3), "the count is kept, not recounted");
}

/// The database file's size once its WAL is checkpointed into it (the store is closed; its
/// read-only connections cannot checkpoint, so whether closing did depends on which of its
/// connections closed last).
/// The size of the store's file `name` once its WAL is checkpointed into it.
fn file_size(dir: &std::path::Path, name: &str) -> u64 {
    let path = dir.join(name);
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .unwrap();
    drop(conn);
    std::fs::metadata(path).unwrap().len()
}

fn db_size(dir: &std::path::Path) -> u64 {
    file_size(dir, "herald.db")
}

/// Under steady churn (a wave of events with a TTL, expired, the next wave) the file stops
/// growing once the free pages of one wave's expiry hold the next wave; after a storm far
/// larger than the steady load has expired, the file gives most of its space back.
#[tokio::test]
async fn sqlite_file_stays_bounded_under_churn_and_shrinks_after_a_storm() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock();
    let opts = SqliteOptions {
        history: HistoryOptions {
            keep_revisions: 500,
            ..HistoryOptions::default()
        },
        reserve_bytes: 0,
        ..SqliteOptions::default()
    };
    let ttl = Some(Duration::from_secs(60));
    let value = Bytes::from(vec![b'v'; 800]);
    let open = || Arc::new(SqliteBackend::open(dir.path(), clock.clone(), opts).unwrap());
    // `n` events in groups of 64 concurrent creates.
    let create = |s: Arc<SqliteBackend>, first: usize, n: usize| {
        let value = value.clone();
        async move {
            for chunk in (first..first + n).collect::<Vec<_>>().chunks(64) {
                futures::future::join_all(chunk.iter().map(|i| {
                    let key = format!("/events/ns/e{i:07}");
                    let (s, value) = (Arc::clone(&s), value.clone());
                    async move { s.create(&key, value, ttl).await.unwrap() }
                }))
                .await;
            }
        }
    };
    // Expires the `n` events, then writes on: the automatic compaction and the writer's
    // shrink check run every few commits.
    let expire = |s: Arc<SqliteBackend>, n: usize, tag: usize| {
        let clock = clock.clone();
        async move {
            clock.advance(Duration::from_secs(61));
            assert_eq!(s.expire_due().await.unwrap(), n);
            for i in 0..100 {
                let key = format!("/events/tick/{tag}-{i}");
                s.create(&key, Bytes::from_static(b"t"), None)
                    .await
                    .unwrap();
            }
        }
    };
    let mut sizes = Vec::new();
    let mut index_sizes = Vec::new();
    for round in 0..6 {
        let s = open();
        create(Arc::clone(&s), round * 5_000, 5_000).await;
        expire(s, 5_000, round).await;
        sizes.push(db_size(dir.path()));
        index_sizes.push(file_size(dir.path(), INDEX_FILE));
    }
    assert!(
        sizes[5] <= sizes[1] + sizes[1] / 10,
        "the file kept growing under steady churn: {sizes:?}"
    );
    // The index database reuses the pages that compaction frees in it: a wave's entries
    // would add as much as the first wave took (`index_sizes[0]`) each round if it did not;
    // the live ticks and the layout of four merges add a few pages.
    assert!(
        index_sizes[5] <= index_sizes[1] + index_sizes[1] / 4,
        "the index file kept growing under steady churn: {index_sizes:?}"
    );

    create(open(), 1_000_000, 60_000).await;
    let storm = db_size(dir.path());
    expire(open(), 60_000, 100).await;
    let after = db_size(dir.path());
    assert!(
        // The writer keeps 16 MiB of free pages for reuse.
        after < storm / 2 && after <= sizes[5] + (17 << 20),
        "the storm's space was not given back: {storm} bytes with it, {after} after it \
         (steady churn: {sizes:?})"
    );
}

// ---------------------------------------------------------------------------------------------
// etcd: leases, kube-apiserver's layout and values, etcdctl.

/// An etcd client on `process`, for looking at what the backend stored.
async fn etcd_client(process: &EtcdProcess) -> etcd_client::Client {
    etcd_client::Client::connect([process.url.as_str()], None)
        .await
        .unwrap()
}

/// A TTL is an etcd lease: etcd deletes the key itself (a `Delete` event on the watch, with
/// the deletion's revision), `expire_due` has nothing to do, a write without TTL detaches the
/// lease, and writes with the same TTL share one lease (when the TTL leaves room for reuse:
/// 5 % of it, so not for one second, as in kube-apiserver).
#[tokio::test]
async fn etcd_ttl_is_a_lease_that_etcd_expires() {
    let f = etcd(HistoryOptions::default()).await;
    let s = &f.store;
    let process = f._etcd.as_ref().unwrap();
    let mut c = etcd_client(process).await;
    let a = s
        .create("/events/ns/a", b("a"), Some(Duration::from_secs(1)))
        .await
        .unwrap();
    let kept = s
        .create("/events/ns/kept", b("k"), Some(Duration::from_secs(1)))
        .await
        .unwrap();
    s.create("/events/ns/forever", b("f"), None).await.unwrap();
    let hour = Some(Duration::from_secs(3600));
    s.create("/events/ns/h1", b("h"), hour).await.unwrap();
    s.create("/events/ns/h2", b("h"), hour).await.unwrap();
    let lease_of = |resp: etcd_client::GetResponse| resp.kvs()[0].lease();
    let l1 = lease_of(c.get("/registry/events/ns/h1", None).await.unwrap());
    let l2 = lease_of(c.get("/registry/events/ns/h2", None).await.unwrap());
    assert!(l1 != 0 && l1 == l2, "one lease for one TTL: {l1} {l2}");
    let la = lease_of(c.get("/registry/events/ns/a", None).await.unwrap());
    assert!(la != 0 && la != l1, "another TTL, another lease");
    assert_eq!(
        lease_of(c.get("/registry/events/ns/forever", None).await.unwrap()),
        0
    );
    // An update without TTL detaches the lease: that key stays.
    s.update("/events/ns/kept", b("k2"), Some(kept.mod_revision), None)
        .await
        .unwrap();
    assert_eq!(
        lease_of(c.get("/registry/events/ns/kept", None).await.unwrap()),
        0
    );
    let mut w = s
        .watch("/events/", s.current_revision().await.unwrap())
        .await
        .unwrap();
    assert_eq!(s.expire_due().await.unwrap(), 0, "etcd expires keys itself");
    // etcd's lease expiry (its minimum TTL is a few seconds): bounded by `next`'s guard.
    let ev = next_event(&mut w).await;
    let WatchEvent::Delete { prev, revision } = &*ev else {
        panic!("expected the expiry's Delete, got {ev:?}");
    };
    assert_eq!(prev, &a);
    assert_eq!(*revision, s.current_revision().await.unwrap());
    assert_eq!(s.get("/events/ns/a").await.unwrap(), None);
    let left = s.list("/events/", ListOptions::default()).await.unwrap();
    assert_eq!(
        keys(&left.items),
        [
            "/events/ns/forever",
            "/events/ns/h1",
            "/events/ns/h2",
            "/events/ns/kept"
        ]
    );
}

/// An event as a controller writes it, in Herald's stored form.
fn stored_event(ns: &str, name: &str) -> (k8s_openapi::api::core::v1::Event, Bytes) {
    let e: k8s_openapi::api::core::v1::Event = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": ns, "uid": "0b4c7a52-5d0e-4f57-9a3c-2f8f5f0b8f11",
                     "creationTimestamp": "2026-11-22T10:00:00Z"},
        "involvedObject": {"kind": "Pod", "namespace": ns, "name": "web-0", "apiVersion": "v1",
                           "uid": "6d3c1b2a-0000-4000-8000-000000000001"},
        "reason": "BackOff",
        "message": "Back-off restarting failed container",
        "source": {"component": "kubelet", "host": "node-1"},
        "firstTimestamp": "2026-11-22T10:00:00Z",
        "lastTimestamp": "2026-11-22T10:05:00Z",
        "count": 7,
        "type": "Warning",
        "reportingComponent": "kubelet",
        "reportingInstance": "node-1"
    }))
    .unwrap();
    let bytes = herald_wire::stored::encode(&e);
    (e, bytes)
}

/// What Herald writes is what kube-apiserver writes: under `/registry/events/<ns>/<name>`,
/// JSON with `kind` and `apiVersion` and no `resourceVersion`, or the core/v1 message in the
/// `k8s\0` envelope naming `v1`/`Event`; either reads back as the stored form it was given.
/// The real `etcdctl` lists them.
#[tokio::test]
async fn etcd_values_are_kube_apiservers_and_etcdctl_shows_them() {
    use prost::Message as _;

    let f = etcd(HistoryOptions::default()).await;
    let process = f._etcd.as_ref().unwrap();
    let json_store = &f.store;
    let proto_store = EtcdBackend::connect(
        EtcdOptions {
            servers: vec![process.url.clone()],
            media_type: StorageMediaType::Protobuf,
            ..EtcdOptions::default()
        },
        f.clock.clone(),
    )
    .await
    .unwrap();
    let (_, json_value) = stored_event("default", "web-0.json");
    let (proto_event, proto_value) = stored_event("default", "web-0.proto");
    let j = json_store
        .create("/events/default/web-0.json", json_value.clone(), None)
        .await
        .unwrap();
    let p = proto_store
        .create("/events/default/web-0.proto", proto_value.clone(), None)
        .await
        .unwrap();

    let mut c = etcd_client(process).await;
    // JSON: kube-apiserver's head, then Herald's members; no resourceVersion.
    let raw = c
        .get("/registry/events/default/web-0.json", None)
        .await
        .unwrap();
    let raw = raw.kvs()[0].value();
    assert!(
        raw.starts_with(br#"{"kind":"Event","apiVersion":"v1","metadata":{"#),
        "{}",
        String::from_utf8_lossy(raw)
    );
    let v: serde_json::Value = serde_json::from_slice(raw).unwrap();
    assert_eq!(v["metadata"]["name"], "web-0.json");
    assert!(v["metadata"].get("resourceVersion").is_none());
    assert_eq!(v["count"], 7);
    // Protobuf: the envelope, typeMeta v1/Event, and the Event message.
    let raw = c
        .get("/registry/events/default/web-0.proto", None)
        .await
        .unwrap();
    let raw = raw.kvs()[0].value();
    assert_eq!(&raw[..4], b"k8s\0");
    let unknown = k8s_pb::apimachinery::pkg::runtime::Unknown::decode(&raw[4..]).unwrap();
    let tm = unknown.type_meta.unwrap();
    assert_eq!(tm.api_version.as_deref(), Some("v1"));
    assert_eq!(tm.kind.as_deref(), Some("Event"));
    let msg = k8s_pb::api::core::v1::Event::decode(&unknown.raw.unwrap()[..]).unwrap();
    let meta = msg.metadata.unwrap();
    assert_eq!(meta.name.as_deref(), Some("web-0.proto"));
    assert_eq!(meta.resource_version, None);
    assert_eq!(msg.count, Some(7));
    assert_eq!(msg.reason.as_deref(), Some("BackOff"));

    // Each store reads both forms back as Herald's stored form.
    for s in [json_store.as_ref(), &proto_store as &dyn Backend] {
        assert_eq!(
            s.get("/events/default/web-0.json").await.unwrap(),
            Some(j.clone())
        );
        let got = s.get("/events/default/web-0.proto").await.unwrap().unwrap();
        assert_eq!(got.mod_revision, p.mod_revision);
        let decoded = herald_wire::stored::decode_at(&got.value, got.mod_revision).unwrap();
        let mut expected = proto_event.clone();
        expected.metadata.resource_version = Some(p.mod_revision.to_string());
        assert_eq!(decoded, expected);
    }

    // etcdctl sees both keys under kube-apiserver's prefix.
    let listed = process.etcdctl(&["get", "--prefix", "/registry/events", "--keys-only"]);
    let listed: Vec<&str> = listed.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(
        listed,
        [
            "/registry/events/default/web-0.json",
            "/registry/events/default/web-0.proto"
        ]
    );
    let value = process.etcdctl(&[
        "get",
        "/registry/events/default/web-0.json",
        "--print-value-only",
    ]);
    assert!(value.contains(r#""kind":"Event""#), "{value}");
    assert!(value.contains(r#""reason":"BackOff""#), "{value}");
}

/// Values as kube-apiserver stores them — JSON from its encoder (`kind` and `apiVersion`
/// first, `managedFields`, a trailing newline) and protobuf built from the upstream
/// `k8s.io/api` messages (`k8s-pb`) in the `runtime.Unknown` envelope — put straight into
/// etcd under `/registry/events/...`, read through the backend as events.
#[tokio::test]
async fn etcd_reads_events_kube_apiserver_stored() {
    use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
    use prost::Message as _;

    let f = etcd(HistoryOptions::default()).await;
    let process = f._etcd.as_ref().unwrap();
    let mut c = etcd_client(process).await;
    let json_fixture = concat!(
        r#"{"kind":"Event","apiVersion":"v1","metadata":{"name":"nginx-7c5ddbdf54-x8fkq.17f9a1b2c3d4e5f6","#,
        r#""namespace":"default","uid":"3f1d5c0e-6a47-4a8e-9d2b-5b8d6f1e2c3a","#,
        r#""creationTimestamp":"2026-11-22T09:59:58Z","managedFields":[{"manager":"kube-scheduler","#,
        r#""operation":"Update","apiVersion":"events.k8s.io/v1","time":"2026-11-22T09:59:58Z","fieldsType":"FieldsV1","#,
        r#""fieldsV1":{"f:action":{},"f:eventTime":{},"f:note":{},"f:reason":{},"f:regarding":{},"#,
        r#""f:reportingController":{},"f:reportingInstance":{},"f:type":{}}}]},"#,
        r#""involvedObject":{"kind":"Pod","namespace":"default","name":"nginx-7c5ddbdf54-x8fkq","#,
        r#""uid":"8a2e4f6b-1c3d-4e5f-a6b7-c8d9e0f1a2b3","apiVersion":"v1","resourceVersion":"1042"},"#,
        r#""reason":"Scheduled","message":"Successfully assigned default/nginx-7c5ddbdf54-x8fkq to node-1","#,
        r#""source":{},"firstTimestamp":null,"lastTimestamp":null,"type":"Normal","#,
        r#""eventTime":"2026-11-22T09:59:58.123456Z","action":"Binding","#,
        r#""reportingComponent":"default-scheduler","reportingInstance":"default-scheduler-node-1"}"#,
        "\n"
    );
    c.put(
        "/registry/events/default/nginx-7c5ddbdf54-x8fkq.17f9a1b2c3d4e5f6",
        json_fixture,
        None,
    )
    .await
    .unwrap();
    let message = k8s_pb::api::core::v1::Event {
        metadata: Some(meta::ObjectMeta {
            name: Some("web-0.17f9a1b2c3d4e5f7".into()),
            namespace: Some("prod".into()),
            uid: Some("4b2c1d0e-6a47-4a8e-9d2b-5b8d6f1e2c3b".into()),
            creation_timestamp: Some(meta::Time {
                seconds: Some(1_795_341_600),
                nanos: Some(0),
            }),
            ..Default::default()
        }),
        involved_object: Some(k8s_pb::api::core::v1::ObjectReference {
            kind: Some("Pod".into()),
            namespace: Some("prod".into()),
            name: Some("web-0".into()),
            api_version: Some("v1".into()),
            ..Default::default()
        }),
        reason: Some("BackOff".into()),
        message: Some("Back-off restarting failed container".into()),
        source: Some(k8s_pb::api::core::v1::EventSource {
            component: Some("kubelet".into()),
            host: Some("node-1".into()),
        }),
        first_timestamp: Some(meta::Time {
            seconds: Some(1_795_341_600),
            nanos: Some(0),
        }),
        last_timestamp: Some(meta::Time {
            seconds: Some(1_795_341_900),
            nanos: Some(0),
        }),
        count: Some(12),
        r#type: Some("Warning".into()),
        ..Default::default()
    };
    let unknown = k8s_pb::apimachinery::pkg::runtime::Unknown {
        type_meta: Some(k8s_pb::apimachinery::pkg::runtime::TypeMeta {
            api_version: Some("v1".into()),
            kind: Some("Event".into()),
        }),
        raw: Some(message.encode_to_vec()),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let mut proto_fixture = b"k8s\0".to_vec();
    proto_fixture.extend(unknown.encode_to_vec());
    c.put(
        "/registry/events/prod/web-0.17f9a1b2c3d4e5f7",
        proto_fixture,
        None,
    )
    .await
    .unwrap();

    let s = &f.store;
    let page = s.list("/events/", ListOptions::default()).await.unwrap();
    assert_eq!(
        keys(&page.items),
        [
            "/events/default/nginx-7c5ddbdf54-x8fkq.17f9a1b2c3d4e5f6",
            "/events/prod/web-0.17f9a1b2c3d4e5f7"
        ]
    );
    let scheduled =
        herald_wire::stored::decode_at(&page.items[0].value, page.items[0].mod_revision).unwrap();
    assert_eq!(scheduled.reason.as_deref(), Some("Scheduled"));
    assert_eq!(scheduled.action.as_deref(), Some("Binding"));
    assert_eq!(
        scheduled.metadata.resource_version,
        Some(page.items[0].mod_revision.to_string())
    );
    let managed = scheduled.metadata.managed_fields.unwrap();
    assert_eq!(managed[0].manager.as_deref(), Some("kube-scheduler"));
    assert_eq!(
        scheduled.event_time.unwrap().0.to_string(),
        "2026-11-22T09:59:58.123456Z"
    );
    let backoff =
        herald_wire::stored::decode_at(&page.items[1].value, page.items[1].mod_revision).unwrap();
    assert_eq!(backoff.count, Some(12));
    assert_eq!(backoff.type_.as_deref(), Some("Warning"));
    assert_eq!(backoff.involved_object.name.as_deref(), Some("web-0"));
    assert_eq!(backoff.source.unwrap().host.as_deref(), Some("node-1"));
    assert_eq!(
        backoff.last_timestamp.unwrap().0.to_string(),
        "2026-11-22T10:05:00Z"
    );
}

/// The background compactor runs as kube-apiserver's: each round it records the revision it
/// saw under `compact_rev_key` and compacts etcd to the one recorded the round before, so a
/// list at an older revision becomes `Expired`, naming the compacted revision.
#[tokio::test]
async fn etcd_compactor_compacts_to_the_revision_seen_one_round_before() {
    let process = EtcdProcess::start().await;
    let store = EtcdBackend::connect(
        EtcdOptions {
            servers: vec![process.url.clone()],
            compaction_interval: Duration::from_millis(100),
            ..EtcdOptions::default()
        },
        clock(),
    )
    .await
    .unwrap();
    let first = store.create("/events/ns/a", b("1"), None).await.unwrap();
    store
        .update("/events/ns/a", b("2"), None, None)
        .await
        .unwrap();
    let at_first = ListOptions {
        at_revision: Some(first.mod_revision),
        ..ListOptions::default()
    };
    // Bounded: two rounds of 100 ms are needed; 400 polls 50 ms apart.
    let mut expired = None;
    for _ in 0..400 {
        match store.list("/events/", at_first.clone()).await {
            Ok(page) => assert_eq!(page.items[0].value, b("1")),
            Err(e) => {
                expired = Some(e);
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let Some(StorageError::Expired { requested, oldest }) = expired else {
        panic!("never compacted: {expired:?}");
    };
    assert_eq!(requested, first.mod_revision);
    let mut c = etcd_client(&process).await;
    let key = c.get("compact_rev_key", None).await.unwrap();
    let recorded: Revision = key.kvs()[0].value_str().unwrap().parse().unwrap();
    // Compacted to a revision a round recorded: past the first write, at most the newest.
    assert!(
        oldest > first.mod_revision && oldest <= recorded,
        "oldest {oldest}, recorded {recorded}"
    );
    // The current state is still there.
    let now = store.get("/events/ns/a").await.unwrap().unwrap();
    assert_eq!(now.value, b("2"));
}

/// A replica started before its etcd (both started together, or etcd restarting) waits for
/// it within the request bound, rather than failing at its first request; past the bound it
/// fails naming the servers.
#[tokio::test]
async fn connect_waits_for_etcd_within_the_request_bound() {
    let mut process = EtcdProcess::start().await;
    process.kill();
    let opts = EtcdOptions {
        servers: vec![process.url.clone()],
        ..EtcdOptions::default()
    };
    let connecting = tokio::spawn(EtcdBackend::connect(opts.clone(), clock()));
    process.restart().await;
    let store = connecting
        .await
        .unwrap()
        .expect("connects once etcd answers");
    let a = store.create("/events/ns/a", b("a"), None).await.unwrap();
    assert_eq!(store.get("/events/ns/a").await.unwrap(), Some(a));

    process.kill();
    let bounded = EtcdOptions {
        request_timeout: Duration::from_millis(500),
        ..opts
    };
    let err = EtcdBackend::connect(bounded, clock())
        .await
        .err()
        .expect("etcd is down");
    assert!(err.to_string().contains(&process.url), "{err}");
}

/// TLS to etcd (`--etcd-cafile`, `--etcd-certfile`, `--etcd-keyfile`): with the CA and a
/// client certificate the backend works; without the client certificate an etcd that
/// requires one refuses it, and the error says which servers.
#[tokio::test]
async fn etcd_over_tls_with_a_client_certificate() {
    use herald_server::storage::EtcdTlsOptions;

    let process = EtcdProcess::start_tls().await;
    let files = process.tls().unwrap().clone();
    let opts = |cert: bool| EtcdOptions {
        servers: vec![process.url.clone()],
        tls: Some(EtcdTlsOptions {
            ca_file: Some(files.ca.clone()),
            cert_file: cert.then(|| files.client_cert.clone()),
            key_file: cert.then(|| files.client_key.clone()),
        }),
        // Bounds the refused connection below; the good one has the default, as a TLS
        // handshake on a loaded machine may take seconds.
        request_timeout: if cert {
            EtcdOptions::default().request_timeout
        } else {
            Duration::from_secs(3)
        },
        ..EtcdOptions::default()
    };
    let store = EtcdBackend::connect(opts(true), clock()).await.unwrap();
    let a = store.create("/events/ns/a", b("a"), None).await.unwrap();
    assert_eq!(store.get("/events/ns/a").await.unwrap(), Some(a));
    assert!(process.url.starts_with("https://"));
    let keys = process.etcdctl(&["get", "--prefix", "/registry/events", "--keys-only"]);
    assert_eq!(keys.trim(), "/registry/events/ns/a");

    let refused = EtcdBackend::connect(opts(false), clock())
        .await
        .err()
        .expect("refused");
    assert!(refused.to_string().contains(&process.url), "{refused}");
    // A certificate without its key is an options error, before any connection.
    let mut half = opts(true);
    half.tls.as_mut().unwrap().key_file = None;
    let err = EtcdBackend::connect(half, clock())
        .await
        .err()
        .expect("refused");
    assert!(err.to_string().contains("--etcd-keyfile"), "{err}");
}

/// Writes creates, updates, deletes and a compaction with terms in slot 0, and returns what
/// the store answers about them (see [`index_answers`]).
async fn write_indexed_history(s: &SqliteBackend) -> Vec<String> {
    for i in 0..30 {
        let term = ["x", "y", "z"][i % 3];
        s.create_indexed(&format!("/events/ns/k{i:02}"), b("v0"), slot0(term), None)
            .await
            .unwrap();
    }
    for i in (0..30).step_by(4) {
        s.update_indexed(
            &format!("/events/ns/k{i:02}"),
            b("v1"),
            None,
            slot0("y"),
            None,
        )
        .await
        .unwrap();
    }
    for i in (1..30).step_by(5) {
        s.delete(&format!("/events/ns/k{i:02}"), None)
            .await
            .unwrap();
    }
    let rev = s.current_revision().await.unwrap();
    s.compact(rev - 5).await.unwrap();
    s.update_indexed("/events/ns/k02", b("v2"), None, slot0("x"), None)
        .await
        .unwrap();
    index_answers(s).await
}

/// What a store answers by key and by term: every key's get, the whole list, the list of each
/// term (paged by two, and at an older revision).
async fn index_answers(s: &SqliteBackend) -> Vec<String> {
    let mut out = Vec::new();
    let show = |kv: &KeyValue| format!("{}@{}", kv.key, kv.mod_revision);
    for i in 0..30 {
        let got = s.get(&format!("/events/ns/k{i:02}")).await.unwrap();
        out.push(format!("get {i}: {:?}", got.as_ref().map(show)));
    }
    let all = s.list("/events/", ListOptions::default()).await.unwrap();
    out.push(format!(
        "list: {:?}",
        all.items.iter().map(show).collect::<Vec<_>>()
    ));
    let rev = s.current_revision().await.unwrap();
    for term in ["x", "y", "z"] {
        for at in [None, Some(rev - 2)] {
            let mut page = s
                .list("/events/", in_slot0(term, at, Some(2)))
                .await
                .unwrap();
            let mut items: Vec<String> = page.items.iter().map(show).collect();
            while page.more {
                let after = page.items.last().unwrap().key.clone();
                page = s
                    .list(
                        "/events/",
                        ListOptions {
                            start_after: Some(after),
                            ..in_slot0(term, Some(page.revision), Some(2))
                        },
                    )
                    .await
                    .unwrap();
                items.extend(page.items.iter().map(show));
            }
            out.push(format!("{term} at {at:?}: {items:?}"));
        }
    }
    out
}

fn remove_index_file(dir: &std::path::Path) {
    for suffix in ["", "-wal", "-shm"] {
        let f = dir.join(format!("{}{suffix}", INDEX_FILE));
        if f.exists() {
            std::fs::remove_file(f).unwrap();
        }
    }
}

/// The index database is derived from the log: without it, an open rebuilds it, and every
/// get and list (by key, by term, paged, at an older revision) answers as before.
#[tokio::test]
async fn sqlite_rebuilds_a_missing_index_database_from_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let s = SqliteBackend::open(dir.path(), clock(), SqliteOptions::default()).unwrap();
    let before = write_indexed_history(&s).await;
    assert!(before.iter().any(|l| l.contains("@")), "{before:?}");
    drop(s);
    remove_index_file(dir.path());
    let s = SqliteBackend::open(dir.path(), clock(), SqliteOptions::default()).unwrap();
    assert_eq!(index_answers(&s).await, before);
    // And it is written on from there.
    s.create_indexed("/events/ns/new", b("v"), slot0("x"), None)
        .await
        .unwrap();
    let x = s.list("/events/", in_slot0("x", None, None)).await.unwrap();
    assert!(keys(&x.items).contains(&"/events/ns/new"));
}

/// An index database that lost its last merges (a power loss takes back what its WAL had not
/// synced; a crash loses what was not merged yet) is caught up from the log on open.
#[tokio::test]
async fn sqlite_index_database_behind_the_log_catches_up_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let opts = || SqliteOptions {
        merge_index_every: 1,
        ..SqliteOptions::default()
    };
    let s = SqliteBackend::open(dir.path(), clock(), opts()).unwrap();
    let before = write_indexed_history(&s).await;
    let rev = s.current_revision().await.unwrap();
    drop(s);
    // Take the index back to before the last 20 writes, as if they had never been merged.
    let back = rev - 20;
    {
        let ix = rusqlite::Connection::open(dir.path().join(INDEX_FILE)).unwrap();
        ix.execute_batch(&format!(
            "DELETE FROM keys WHERE rev > {back};
             UPDATE keys SET next_rev = NULL WHERE next_rev > {back};
             DELETE FROM t0 WHERE rev > {back};
             UPDATE meta SET value = {back} WHERE name = 'merged';"
        ))
        .unwrap();
    }
    let s = SqliteBackend::open(dir.path(), clock(), opts()).unwrap();
    assert_eq!(index_answers(&s).await, before);
}

/// A store of schema 3 kept its key and term indexes in `herald.db`: the open drops them
/// and builds the index database, and the answers stay the same.
#[tokio::test]
async fn sqlite_moves_the_indexes_of_a_schema_3_store_to_the_index_database() {
    let dir = tempfile::tempdir().unwrap();
    let s = SqliteBackend::open(dir.path(), clock(), SqliteOptions::default()).unwrap();
    let before = write_indexed_history(&s).await;
    drop(s);
    remove_index_file(dir.path());
    let index_names = |conn: &rusqlite::Connection| -> Vec<String> {
        let mut stmt = conn
            .prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND name LIKE 'versions_%' ORDER BY name")
            .unwrap();
        stmt.query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    {
        let conn = rusqlite::Connection::open(dir.path().join("herald.db")).unwrap();
        conn.execute_batch(
            "CREATE INDEX versions_key ON versions(key, next_rev);
             CREATE INDEX versions_t0 ON versions(t0) WHERE t0 IS NOT NULL;
             CREATE INDEX versions_t5 ON versions(t5) WHERE t5 IS NOT NULL;
             UPDATE meta SET value = 3 WHERE name = 'schema';",
        )
        .unwrap();
        assert_eq!(index_names(&conn).len(), 5);
    }
    let s = SqliteBackend::open(dir.path(), clock(), SqliteOptions::default()).unwrap();
    assert_eq!(index_answers(&s).await, before);
    drop(s);
    let conn = rusqlite::Connection::open(dir.path().join("herald.db")).unwrap();
    assert_eq!(index_names(&conn), ["versions_expiry", "versions_replaced"]);
}

/// An index database that cannot be written (here a table dropped from under the index
/// thread) loses nothing acknowledged: writes go on into memory until
/// `max_pending_index` changes wait, then they are refused with the cause, the store reports
/// itself not ready and its metrics count the failed merges; the next open merges what the
/// file lacks, and every answer is complete.
#[tokio::test]
async fn sqlite_refuses_writes_while_the_index_database_cannot_be_written() {
    let dir = tempfile::tempdir().unwrap();
    let opts = SqliteOptions {
        merge_index_every: 4,
        max_pending_index: 8,
        ..SqliteOptions::default()
    };
    let s = SqliteBackend::open(dir.path(), clock(), opts).unwrap();
    rusqlite::Connection::open(dir.path().join(INDEX_FILE))
        .unwrap()
        .execute_batch("DROP TABLE t0")
        .unwrap();
    let mut acked = Vec::new();
    let refused = loop {
        assert!(
            acked.len() <= 8,
            "{} writes taken past the bound",
            acked.len()
        );
        let key = format!("/events/ns/k{:02}", acked.len());
        match s.create_indexed(&key, b("v"), slot0("x"), None).await {
            Ok(_) => acked.push(key),
            Err(e) => break e,
        }
    };
    assert_eq!(acked.len(), 8);
    let why = refused.to_string();
    assert!(
        why.contains("no such table: t0") && why.contains(INDEX_FILE),
        "{why}"
    );
    let health = s.health().unwrap_err();
    assert!(health.contains("no such table: t0"), "{health}");
    let mut registry = prometheus_client::registry::Registry::with_prefix("herald");
    registry.register_collector(Box::new(s.index_metrics()));
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    let sample = |name: &str| -> u64 {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {text}"))
    };
    assert_eq!(sample("herald_storage_index_unmerged_changes"), 8, "{text}");
    assert_eq!(
        sample("herald_storage_index_merged_changes_total"),
        0,
        "{text}"
    );
    assert!(
        sample(r#"herald_storage_index_merges_total{outcome="failed"}"#) >= 1,
        "{text}"
    );
    // What was taken is there.
    for key in &acked {
        assert!(s.get(key).await.unwrap().is_some(), "{key}");
    }
    drop(s);

    let s = SqliteBackend::open(dir.path(), clock(), opts).unwrap();
    assert_eq!(s.health(), Ok(()));
    s.create_indexed("/events/ns/new", b("v"), slot0("x"), None)
        .await
        .unwrap();
    let x = s.list("/events/", in_slot0("x", None, None)).await.unwrap();
    let mut want: Vec<&str> = acked.iter().map(String::as_str).collect();
    want.push("/events/ns/new");
    assert_eq!(keys(&x.items), want);
}
