//! The SQLite store's memory does not grow with the number of stored events, opening a
//! large store does not read them all, and an unpaged list of them is sent a page at a time.
//!
//! The heap is counted by a global allocator wrapper, so this file holds one test: another
//! test running beside it in the same process would be counted too.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Arc;
use std::sync::atomic::{AtomicIsize, Ordering};

use bytes::Bytes;
use futures::StreamExt;
use herald_core::clock::FakeClock;
use herald_core::event::ApiGroup;
use herald_server::api::events::render::{self, ListShape};
use herald_server::registry::{EventRegistry, ListParams, RegistryOptions};
use herald_server::storage::{
    Backend, HistoryOptions, IndexValues, SqliteBackend, SqliteOptions, StorageError,
};

/// Counts the bytes currently allocated (the system allocator underneath; the only unsafe
/// code is forwarding to it).
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);
/// The most [`LIVE`] has been since it was last reset ([`reset_peak`]).
static PEAK: AtomicIsize = AtomicIsize::new(0);

fn grow(by: isize) {
    let now = LIVE.fetch_add(by, Ordering::Relaxed) + by;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grow(layout.size() as isize);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            grow(new_size as isize - layout.size() as isize);
        }
        p
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

/// Starts a new peak from the heap as it is; returns it.
fn reset_peak() -> isize {
    let now = live();
    PEAK.store(now, Ordering::Relaxed);
    now
}

fn peak() -> isize {
    PEAK.load(Ordering::Relaxed)
}

const MIB: isize = 1 << 20;

/// Small bounds: a 512 KiB, 2,000-event watch ring, a 1 MiB page cache and 1,024 unmerged
/// index changes.
fn options() -> SqliteOptions {
    SqliteOptions {
        history: HistoryOptions {
            watch_window: 2_000,
            watch_window_bytes: 512 << 10,
            keep_revisions: 1_000,
            keep_bytes: 512 << 10,
        },
        page_cache_bytes: 1 << 20,
        reserve_bytes: 0,
        // The index changes held in memory until merged: at most 1,024 (about 300 KB).
        merge_index_every: 256,
        max_pending_index: 1_024,
        ..SqliteOptions::default()
    }
}

/// A stored event of about 600 bytes, with index values.
fn value(i: usize) -> (Bytes, IndexValues) {
    let body = format!(
        r#"{{"metadata":{{"name":"pod-{i}.{i:x}","namespace":"ns{}"}},"involvedObject":{{"kind":"Pod","name":"pod-{i}","uid":"{i:032x}"}},"reason":"BackOff","message":"{}","type":"Warning"}}"#,
        i % 7,
        "x".repeat(400)
    );
    let (name, uid) = (format!("pod-{i}"), format!("{i:032x}"));
    let index = IndexValues::of([Some(&name), Some(&uid), Some("BackOff"), None, None, None]);
    (Bytes::from(body), index)
}

/// Creates events `from..to`, 256 at a time (so they share commits).
async fn fill(store: &Arc<SqliteBackend>, from: usize, to: usize) {
    let mut i = from;
    while i < to {
        let end = (i + 256).min(to);
        futures::stream::iter(i..end)
            .for_each_concurrent(None, |i| {
                let store = Arc::clone(store);
                async move {
                    let (v, index) = value(i);
                    store
                        .create_indexed(&format!("/events/ns{}/pod-{i}", i % 7), v, index, None)
                        .await
                        .unwrap();
                }
            })
            .await;
        i = end;
    }
}

#[test]
fn memory_stays_bounded_while_the_store_grows_and_opening_reads_only_the_window() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(FakeClock::default());
    rt.block_on(async {
        let store = Arc::new(SqliteBackend::open(dir.path(), clock.clone(), options()).unwrap());
        // Warm up: the caches and the ring fill to their bounds.
        fill(&store, 0, 10_000).await;
        let warm = live();
        fill(&store, 10_000, 60_000).await;
        let grown = live() - warm;
        let file = std::fs::metadata(store.path()).unwrap().len()
            + std::fs::metadata(store.path().with_extension("db-wal"))
                .map(|m| m.len())
                .unwrap_or(0);
        assert!(
            file > 30 << 20,
            "the store must grow far past the memory bounds: {file} bytes"
        );
        assert!(
            grown < 2 * MIB,
            "50,000 more stored events grew the heap by {grown} bytes"
        );
        assert!(store.hub().bytes() <= 512 << 10);
        assert_eq!(store.live_keys(), Some(60_000));
        // Reads of old and new keys come from the database.
        assert!(store.get("/events/ns0/pod-0").await.unwrap().is_some());
        assert!(store.get("/events/ns2/pod-59999").await.unwrap().is_some());
        let head = store.current_revision().await.unwrap();
        drop(store);

        // Reopen: only the ring's window is read, the heap does not hold the store.
        let before = live();
        let store = Arc::new(SqliteBackend::open(dir.path(), clock.clone(), options()).unwrap());
        let opened = live() - before;
        assert!(
            opened < 4 * MIB,
            "opening a store of 60,000 events took {opened} bytes of heap"
        );
        assert_eq!(store.live_keys(), Some(60_000));
        assert_eq!(store.current_revision().await.unwrap(), head);
        // A watch resumes from a revision inside the reloaded window, not from before it.
        let mut w = store.watch("/events/", head - 10).await.unwrap();
        let first = w.next().await.unwrap().unwrap();
        assert_eq!(first.revision(), head - 9);
        assert!(matches!(
            store.watch("/events/", 2).await,
            Err(StorageError::Expired { .. })
        ));
        drop(w);

        // An unpaged list of every event (about 40 MB of JSON) is read and rendered a page
        // at a time: the heap holds a few pages, not the list. Read whole, it holds it all.
        let reg = EventRegistry::new(store.clone(), clock.clone(), RegistryOptions::default());
        let unpaged = ListParams::default();
        let base = reset_peak();
        let (first, rest) = reg
            .list_streamed(ApiGroup::Core, None, &unpaged)
            .await
            .unwrap();
        let body = render::streamed_list(ApiGroup::Core, ListShape::Events, first, rest.unwrap());
        let (sent, items) = body
            .fold((0, 0), |(sent, items), chunk| async move {
                let chunk = chunk.unwrap();
                let n = chunk.windows(7).filter(|w| w == b"\"uid\":\"").count();
                (sent + chunk.len(), items + n)
            })
            .await;
        let streamed = peak() - base;
        assert_eq!(items, 60_000, "every event once");
        assert!(sent > 35 << 20, "the list is {sent} bytes");
        assert!(
            streamed < 16 * MIB,
            "an unpaged list of {sent} bytes took {streamed} bytes of heap at its peak"
        );
        let base = reset_peak();
        let whole = reg.list(ApiGroup::Core, None, &unpaged).await.unwrap();
        let collected = peak() - base;
        assert_eq!(whole.items.len(), 60_000);
        assert!(
            collected > 30 * MIB,
            "the list read whole is in memory ({collected} bytes): the count above would see it"
        );
    });
}
