//! RealFifo scenarios from client-go's `the_real_fifo_test.go`.

mod cache_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use cache_support::*;
use herald_runtime::cache::{DeletedObject, Delta, DeltaType, Indexer, RealFifo, RealFifoOptions};
use k8s_openapi::api::core::v1::ConfigMap;

fn fifo() -> RealFifo<ConfigMap> {
    RealFifo::new(RealFifoOptions::default())
}

fn fifo_known(known: &[ConfigMap]) -> RealFifo<ConfigMap> {
    let idx = Indexer::new();
    for k in known {
        idx.add(Arc::new(k.clone()));
    }
    RealFifo::new(RealFifoOptions {
        known_objects: Some(idx),
        ..RealFifoOptions::default()
    })
}

/// Pops everything: (kind, key, rv, tombstone?).
fn drain(f: &RealFifo<ConfigMap>) -> Vec<(DeltaType, String, String, bool)> {
    let mut out = Vec::new();
    while let Some(p) = f.try_pop() {
        let d = p.delta();
        let tomb = matches!(d, Delta::Deleted(DeletedObject::FinalStateUnknown(_)));
        let rv = d.object().map(|o| rv_of(o)).unwrap_or_default();
        out.push((d.kind(), d.key(), rv, tomb));
    }
    out
}

fn rvs(f: &RealFifo<ConfigMap>) -> Vec<String> {
    drain(f).into_iter().map(|(_, _, rv, _)| rv).collect()
}

use DeltaType::{Added, Deleted, Replaced, Sync, Updated};

fn d(kind: DeltaType, key: &str, rv: &str, tomb: bool) -> (DeltaType, String, String, bool) {
    (kind, key.to_owned(), rv.to_owned(), tomb)
}

#[test]
fn add_update_delete_are_separate_items() {
    let f = fifo();
    f.add(cm("", "foo", "10"));
    f.update(cm("", "foo", "12"));
    f.delete(cm("", "foo", "15"));
    assert_eq!(
        drain(&f),
        vec![
            d(Added, "foo", "10", false),
            d(Updated, "foo", "12", false),
            d(Deleted, "foo", "15", false)
        ]
    );
    assert!(f.is_empty());
}

#[test]
fn every_event_is_queued_including_deletes_of_unknown_objects() {
    let f = fifo();
    f.add(cm("", "foo", "10"));
    f.update(cm("", "bar", "15"));
    f.add(cm("", "qux", "17"));
    f.delete(cm("", "qux", "18"));
    f.delete(cm("", "baz", "20"));
    assert_eq!(rvs(&f), vec!["10", "15", "17", "18", "20"]);
}

#[test]
fn no_line_jumping_pure_arrival_order() {
    let f = fifo();
    f.add(cm("", "foo", "10"));
    f.add(cm("", "bar", "1"));
    f.add(cm("", "foo", "11"));
    f.add(cm("", "foo", "13"));
    f.add(cm("", "zab", "30"));
    assert_eq!(rv_of(f.try_pop().unwrap().delta().object().unwrap()), "10");
    f.add(cm("", "foo", "14"));
    assert_eq!(rvs(&f), vec!["1", "11", "13", "30", "14"]);
}

#[test]
fn add_then_replace_keeps_both() {
    let f = fifo();
    f.add(cm("", "foo", "10"));
    f.replace(vec![cm("", "foo", "15")], "15");
    assert_eq!(
        drain(&f),
        vec![
            d(Added, "foo", "10", false),
            d(Replaced, "foo", "15", false)
        ]
    );
}

#[test]
fn replace_with_delete_delta_in_queue() {
    let f = fifo_known(&[cm("", "foo", "1")]);
    f.delete(cm("", "foo", "1"));
    f.replace(vec![cm("", "foo", "2")], "2");
    assert_eq!(
        drain(&f),
        vec![
            d(Deleted, "foo", "1", false),
            d(Replaced, "foo", "2", false)
        ]
    );
}

#[test]
fn replace_makes_deletions_for_objects_only_in_queue() {
    // Run with an empty known set and without one: same results.
    for with_known in [false, true] {
        let mk = || if with_known { fifo_known(&[]) } else { fifo() };
        let o = || cm("", "foo", "5");

        let f = mk();
        f.add(o());
        f.replace(vec![], "");
        assert_eq!(
            drain(&f),
            vec![d(Added, "foo", "5", false), d(Deleted, "foo", "5", true)]
        );

        let f = mk();
        f.add(o());
        f.replace(vec![o()], "");
        f.replace(vec![], "");
        assert_eq!(
            drain(&f),
            vec![
                d(Added, "foo", "5", false),
                d(Replaced, "foo", "5", false),
                d(Deleted, "foo", "5", true)
            ]
        );

        let f = mk();
        f.add(o());
        f.delete(o());
        f.replace(vec![], "");
        assert_eq!(
            drain(&f),
            vec![d(Added, "foo", "5", false), d(Deleted, "foo", "5", false)]
        );

        let f = mk();
        f.add(o());
        f.replace(vec![o()], "");
        f.replace(vec![o()], "");
        f.replace(vec![], "");
        assert_eq!(
            drain(&f),
            vec![
                d(Added, "foo", "5", false),
                d(Replaced, "foo", "5", false),
                d(Replaced, "foo", "5", false),
                d(Deleted, "foo", "5", true)
            ]
        );

        let f = mk();
        f.add(o());
        f.replace(vec![], "");
        f.replace(vec![], "");
        assert_eq!(
            drain(&f),
            vec![d(Added, "foo", "5", false), d(Deleted, "foo", "5", true)]
        );

        let f = mk();
        f.add(o());
        f.delete(o());
        f.add(cm("", "foo", "6"));
        f.replace(vec![], "");
        assert_eq!(
            drain(&f),
            vec![
                d(Added, "foo", "5", false),
                d(Deleted, "foo", "5", false),
                d(Added, "foo", "6", false),
                d(Deleted, "foo", "6", true)
            ]
        );
    }
}

#[test]
fn replace_tombstones_known_objects_missing_from_the_list() {
    let known = [cm("", "foo", "5"), cm("", "bar", "6"), cm("", "baz", "7")];
    // baz's delete is queued: no second delete for it; bar vanished: tombstone with known state.
    let f = fifo_known(&known);
    f.delete(cm("", "baz", "10"));
    f.replace(vec![cm("", "foo", "5")], "11");
    assert_eq!(
        drain(&f),
        vec![
            d(Deleted, "baz", "10", false),
            d(Deleted, "bar", "6", true),
            d(Replaced, "foo", "5", false)
        ]
    );
    // A queued add that vanished: the tombstone carries the latest queued object.
    let f = fifo_known(&known);
    f.delete(cm("", "bar", "6"));
    f.add(cm("", "bar", "100"));
    f.replace(vec![cm("", "foo", "5")], "101");
    assert_eq!(
        drain(&f),
        vec![
            d(Deleted, "bar", "6", false),
            d(Added, "bar", "100", false),
            d(Deleted, "bar", "100", true),
            d(Deleted, "baz", "7", true),
            d(Replaced, "foo", "5", false)
        ]
    );
}

#[test]
fn has_synced_table() {
    let f = fifo();
    assert!(!f.has_synced());
    f.add(cm("", "a", "1"));
    assert!(f.has_synced(), "a change before any relist populates");

    let f = fifo();
    f.replace(vec![], "1");
    assert!(f.has_synced());

    let f = fifo();
    f.replace(vec![cm("", "a", "1"), cm("", "b", "1")], "1");
    assert!(!f.has_synced());
    let p = f.try_pop().unwrap();
    assert!(p.is_in_initial_list());
    drop(p);
    assert!(!f.has_synced());
    let p = f.try_pop().unwrap();
    assert!(p.is_in_initial_list());
    assert!(
        !f.has_synced(),
        "not synced while the last initial item is being processed"
    );
    drop(p);
    assert!(f.has_synced());

    // Same key twice in the initial list: two pops needed (nothing is coalesced).
    let f = fifo();
    f.replace(vec![cm("", "a", "1"), cm("", "a", "2")], "2");
    drop(f.try_pop());
    assert!(!f.has_synced());
    drop(f.try_pop());
    assert!(f.has_synced());
    f.add(cm("", "c", "3"));
    assert!(!f.try_pop().unwrap().is_in_initial_list());
}

#[test]
fn has_synced_counts_tombstones_of_the_first_replace() {
    let f = fifo_known(&[cm("", "foo", "1"), cm("", "bar", "1"), cm("", "baz", "1")]);
    f.replace(vec![cm("", "foo", "1")], "2");
    for _ in 0..3 {
        assert!(!f.has_synced());
        let p = f.try_pop().unwrap();
        assert!(p.is_in_initial_list());
    }
    assert!(f.has_synced());
}

#[test]
fn resync_emits_sync_for_known_objects_not_queued() {
    let f = fifo_known(&[cm("", "foo", "5")]);
    f.resync();
    assert_eq!(drain(&f), vec![d(Sync, "foo", "5", false)]);
    // Update/resync race: the queued update wins, no sync resurrects the old version.
    let f = fifo_known(&[cm("", "foo", "5")]);
    f.update(cm("", "foo", "6"));
    f.resync();
    assert_eq!(drain(&f), vec![d(Updated, "foo", "6", false)]);
    // Without known objects resync is a no-op.
    let f = fifo();
    f.resync();
    assert!(f.is_empty());
}

#[test]
fn transform_runs_once_per_incoming_object_never_on_tombstones() {
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let f: RealFifo<ConfigMap> = RealFifo::new(RealFifoOptions {
        transform: Some(Arc::new(move |mut o: ConfigMap| {
            c.fetch_add(1, Ordering::SeqCst);
            o.metadata.managed_fields = None;
            o.metadata.annotations = Some([("t".to_string(), "1".to_string())].into());
            o
        })),
        ..RealFifoOptions::default()
    });
    f.add(cm("", "foo", "10"));
    f.update(cm("", "foo", "11"));
    f.replace(vec![cm("", "bar", "12")], "12");
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    let all: Vec<_> = std::iter::from_fn(|| f.try_pop().map(|p| p.delta().clone())).collect();
    // foo: added, updated, tombstone (carrying the transformed object); bar: replaced.
    assert_eq!(all.len(), 4);
    assert!(all.iter().all(|d| {
        d.object()
            .unwrap()
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key("t"))
    }));
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

#[tokio::test(start_paused = true)]
async fn blocked_pops_return_none_when_closed() {
    let f = Arc::new(fifo());
    let mut tasks = Vec::new();
    for _ in 0..10 {
        let f = f.clone();
        tasks.push(tokio::spawn(async move { f.pop().await.is_none() }));
    }
    tokio::time::sleep(Duration::from_millis(10)).await;
    f.close();
    for t in tasks {
        assert!(t.await.unwrap());
    }
}

#[tokio::test(start_paused = true)]
async fn queued_items_are_still_popped_after_close() {
    let f = fifo();
    f.add(cm("", "a", "1"));
    f.close();
    assert!(f.pop().await.is_some());
    assert!(f.pop().await.is_none());
}

#[tokio::test(start_paused = true)]
async fn producers_wait_for_room_at_capacity() {
    let f = Arc::new(RealFifo::<ConfigMap>::new(RealFifoOptions {
        capacity: 2,
        ..RealFifoOptions::default()
    }));
    f.add(cm("", "a", "1"));
    f.add(cm("", "b", "2"));
    let f2 = f.clone();
    let waiter = tokio::spawn(async move { f2.wait_for_room().await });
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!waiter.is_finished());
    drop(f.try_pop());
    tokio::time::timeout(Duration::from_secs(1), waiter)
        .await
        .expect("room after a pop")
        .unwrap();
}

#[test]
fn relist_between_pop_and_processing_still_deletes_what_the_popped_delta_adds() {
    // The consumer popped ADDED(a) and has not stored it yet when a relist (after a watch
    // gap in which a was deleted) arrives: a is neither queued nor known, but it is in
    // flight, so the relist must still queue its tombstone — after the ADDED, so the
    // consumer ends without a.
    let idx: Indexer<ConfigMap> = Indexer::new();
    idx.add(Arc::new(cm("ns", "kept", "1")));
    let f = RealFifo::new(RealFifoOptions {
        known_objects: Some(idx.clone()),
        ..RealFifoOptions::default()
    });
    f.add(cm("ns", "a", "5"));
    let popped = f.try_pop().unwrap();
    f.replace(vec![cm("ns", "kept", "6")], "6");
    // The consumer finishes what it popped...
    idx.add(popped.delta().object().unwrap().clone());
    drop(popped);
    // ...then applies the relist.
    let rest = drain(&f);
    assert_eq!(
        rest,
        vec![
            d(Deleted, "ns/a", "5", true),
            d(Replaced, "ns/kept", "6", false)
        ]
    );
    // Once processed, a popped delta no longer counts: a later relist knows only the cache.
    idx.delete_key("ns/a");
    f.add(cm("ns", "b", "7"));
    let popped = f.try_pop().unwrap();
    idx.add(popped.delta().object().unwrap().clone());
    drop(popped);
    f.replace(vec![cm("ns", "kept", "6"), cm("ns", "b", "7")], "7");
    assert_eq!(
        drain(&f),
        vec![
            d(Replaced, "ns/kept", "6", false),
            d(Replaced, "ns/b", "7", false)
        ]
    );
}

#[test]
fn relist_while_a_delete_is_in_flight_adds_no_second_delete() {
    let idx: Indexer<ConfigMap> = Indexer::new();
    idx.add(Arc::new(cm("ns", "a", "1")));
    let f = RealFifo::new(RealFifoOptions {
        known_objects: Some(idx.clone()),
        ..RealFifoOptions::default()
    });
    f.delete(cm("ns", "a", "2"));
    let popped = f.try_pop().unwrap();
    f.replace(Vec::new(), "2");
    idx.delete_key("ns/a");
    drop(popped);
    assert!(drain(&f).is_empty());
}
