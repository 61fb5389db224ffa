//! Storage benchmarks: durable creates with 64 concurrent writers on SQLite, a 100,000-key
//! list (whole, and in pages in key and in write order), and watch fan-out.
//!
//! `cargo bench -p herald-server --bench storage -- --warm-up-time 1 --measurement-time 3`

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use futures::StreamExt;
use herald_core::clock::SystemClock;
use herald_server::storage::{
    Backend, HistoryOptions, ListOptions, ListOrder, MemoryBackend, SqliteBackend, SqliteOptions,
};
use tokio::runtime::Runtime;

const WRITERS: u64 = 64;

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// A value shaped like a stored event (~400 bytes of JSON).
fn event_value(i: u64) -> Bytes {
    Bytes::from(format!(
        "{{\"metadata\":{{\"name\":\"pod-{i}.17f3a2b4c5d6e7f8\",\"namespace\":\"default\",\
         \"uid\":\"0b9c6f2e-3d4a-4e8b-9f1a-{i:012}\",\"creationTimestamp\":\"2024-01-01T00:00:00Z\"}},\
         \"involvedObject\":{{\"kind\":\"Pod\",\"namespace\":\"default\",\"name\":\"pod-{i}\",\
         \"uid\":\"5e1d7c3a-2b4f-4a6e-8d9c-{i:012}\",\"apiVersion\":\"v1\"}},\
         \"reason\":\"BackOff\",\"message\":\"Back-off restarting failed container app in pod pod-{i}\",\
         \"source\":{{\"component\":\"kubelet\",\"host\":\"node-1\"}},\"count\":1,\"type\":\"Warning\",\
         \"firstTimestamp\":\"2024-01-01T00:00:00Z\",\"lastTimestamp\":\"2024-01-01T00:00:00Z\"}}"
    ))
}

/// Creates `n` keys `/events/default/pod-<i>` with `WRITERS` concurrent writers.
async fn fill(store: &Arc<dyn Backend>, next: &Arc<AtomicU64>, n: u64) {
    fill_with(store, next, n, WRITERS).await
}

/// Creates `n` keys with `writers` concurrent writers, each awaiting its own ack.
async fn fill_with(store: &Arc<dyn Backend>, next: &Arc<AtomicU64>, n: u64, writers: u64) {
    let mut tasks = Vec::new();
    for w in 0..writers {
        let store = Arc::clone(store);
        let next = Arc::clone(next);
        let count = n / writers + u64::from(w < n % writers);
        tasks.push(tokio::spawn(async move {
            for _ in 0..count {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let key = format!("/events/default/pod-{i:09}");
                store
                    .create(&key, event_value(i), Some(Duration::from_secs(3600)))
                    .await
                    .expect("create");
            }
        }));
    }
    for t in tasks {
        t.await.expect("writer task");
    }
}

fn sqlite_store(dir: &tempfile::TempDir) -> Arc<dyn Backend> {
    Arc::new(
        SqliteBackend::open(dir.path(), Arc::new(SystemClock), SqliteOptions::default())
            .expect("open sqlite"),
    )
}

fn durable_creates(c: &mut Criterion) {
    let rt = runtime();
    let dir = tempfile::tempdir().expect("tempdir");
    let store = sqlite_store(&dir);
    let next = Arc::new(AtomicU64::new(0));
    let mut g = c.benchmark_group("sqlite");
    g.throughput(Throughput::Elements(1));
    // 64 is the target's client count; 512 shows how group commit scales with concurrency
    // when fsync latency, not CPU, is the limit.
    for writers in [WRITERS, 512] {
        g.bench_function(format!("create_durable_{writers}_writers"), |b| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    let start = Instant::now();
                    fill_with(&store, &next, iters, writers).await;
                    start.elapsed()
                })
            })
        });
    }
    g.finish();
}

fn list_100k(c: &mut Criterion) {
    let rt = runtime();
    let dir = tempfile::tempdir().expect("tempdir");
    let sqlite = sqlite_store(&dir);
    let memory: Arc<dyn Backend> = Arc::new(MemoryBackend::new(
        Arc::new(SystemClock),
        HistoryOptions::default(),
    ));
    for store in [&sqlite, &memory] {
        rt.block_on(fill(store, &Arc::new(AtomicU64::new(0)), 100_000));
    }
    let mut g = c.benchmark_group("list");
    g.sample_size(10);
    g.throughput(Throughput::Elements(100_000));
    for (name, store) in [("sqlite_100k", &sqlite), ("memory_100k", &memory)] {
        g.bench_function(name, |b| {
            b.to_async(&rt).iter(|| async {
                let page = store
                    .list("/events/", ListOptions::default())
                    .await
                    .expect("list");
                assert_eq!(page.items.len(), 100_000);
            })
        });
    }
    // One 500-item page (kube-rs's page size) at an older snapshot, after 1,000 later writes.
    let snapshot = rt.block_on(sqlite.current_revision()).expect("revision");
    rt.block_on(async {
        for i in 0..1_000u64 {
            let key = format!("/events/default/pod-{:09}", i * 97);
            sqlite
                .update(&key, event_value(i), None, None)
                .await
                .expect("update");
        }
    });
    g.throughput(Throughput::Elements(500));
    g.bench_function("sqlite_page_500_at_old_revision", |b| {
        b.to_async(&rt).iter(|| async {
            let page = sqlite
                .list(
                    "/events/",
                    ListOptions {
                        start_after: Some("/events/default/pod-000050000".into()),
                        limit: Some(500),
                        at_revision: Some(snapshot),
                        ..Default::default()
                    },
                )
                .await
                .expect("list");
            assert_eq!(page.items.len(), 500);
        })
    });
    g.finish();
}

/// Every page of `/events/` in pages of 4,096 (the registry's page of an unpaged list),
/// from `first` on in the order each page was read in; returns how many items.
async fn all_pages(store: &Arc<dyn Backend>, first: ListOrder) -> usize {
    let (mut order, mut start_after, mut n) = (first, None, 0);
    loop {
        let page = store
            .list(
                "/events/",
                ListOptions {
                    start_after: start_after.take(),
                    limit: Some(4_096),
                    order,
                    ..Default::default()
                },
            )
            .await
            .expect("list");
        n += page.items.len();
        if !page.more {
            return n;
        }
        order = page.order;
        if order == ListOrder::Key {
            start_after = page.items.last().map(|kv| kv.key.clone());
        }
    }
}

/// 100,000 keys written in an order unrelated to their keys' (as a cluster's events are),
/// listed in pages in key order and in write order ([`ListOrder::Fastest`]).
fn list_order(c: &mut Criterion) {
    const N: u64 = 100_000;
    let rt = runtime();
    let dir = tempfile::tempdir().expect("tempdir");
    let sqlite = sqlite_store(&dir);
    rt.block_on(async {
        for i in 0..N {
            // A bijection of 0..N: consecutive writes land far apart in key order.
            let k = (i * 7_919) % N;
            sqlite
                .create(&format!("/events/default/pod-{k:09}"), event_value(k), None)
                .await
                .expect("create");
        }
    });
    let mut g = c.benchmark_group("list_order");
    g.sample_size(10);
    g.throughput(Throughput::Elements(N));
    for (name, first) in [
        ("sqlite_100k_key_order", ListOrder::Key),
        ("sqlite_100k_write_order", ListOrder::Fastest),
    ] {
        g.bench_function(name, |b| {
            b.to_async(&rt).iter(|| async {
                assert_eq!(all_pages(&sqlite, first).await, N as usize);
            })
        });
    }
    g.finish();
}

fn watch_fanout(c: &mut Criterion) {
    const WATCHERS: usize = 1_000;
    const EVENTS: u64 = 1_000;
    let rt = runtime();
    let store: Arc<dyn Backend> = Arc::new(MemoryBackend::new(
        Arc::new(SystemClock),
        HistoryOptions::default(),
    ));
    let next = Arc::new(AtomicU64::new(0));
    let mut g = c.benchmark_group("watch");
    g.sample_size(10);
    g.throughput(Throughput::Elements(WATCHERS as u64 * EVENTS));
    g.bench_function("fanout_1000_watchers_x_1000_events", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let from = store.current_revision().await.expect("revision");
                    let mut watchers = Vec::with_capacity(WATCHERS);
                    for _ in 0..WATCHERS {
                        let mut w = store.watch("/events/", from).await.expect("watch");
                        watchers.push(tokio::spawn(async move {
                            let mut n = 0;
                            while n < EVENTS {
                                w.next().await.expect("open").expect("event");
                                n += 1;
                            }
                        }));
                    }
                    let start = Instant::now();
                    fill(&store, &next, EVENTS).await;
                    for w in watchers {
                        w.await.expect("watcher");
                    }
                    total += start.elapsed();
                }
                total
            })
        })
    });
    g.finish();
}

criterion_group!(
    benches,
    durable_creates,
    list_100k,
    list_order,
    watch_fanout
);
criterion_main!(benches);
