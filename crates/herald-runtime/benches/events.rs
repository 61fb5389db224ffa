//! events.k8s.io/v1 recorder → broadcaster → series → MemorySink, end to end, with 1 and 4
//! producer threads, for isomorphic occurrences (100 objects: 100 series) and unique ones
//! (every occurrence about its own object: a create each). Each iteration records the storm
//! and waits for the pipeline to drain (`shutdown`, which writes the final series counts).
//!
//! `cargo bench -p herald-runtime --bench events`

use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use herald_runtime::events::*;
use k8s_openapi::api::core::v1::ObjectReference;

const EVENTS: u64 = 200_000;

#[derive(Clone, Copy)]
enum Shape {
    /// 100 objects, each a series.
    Isomorphic,
    /// Every occurrence about a different object.
    Unique,
}

fn reference(i: u64) -> ObjectReference {
    ObjectReference {
        kind: Some("Pod".into()),
        api_version: Some("v1".into()),
        name: Some(format!("web-{i}")),
        namespace: Some("prod".into()),
        uid: Some(format!("uid-{i}")),
        ..ObjectReference::default()
    }
}

fn run(rt: &tokio::runtime::Runtime, producers: u64, shape: Shape) -> Duration {
    rt.block_on(async {
        let b = EventBroadcaster::new(EventBroadcasterOptions::default());
        let sink = MemorySink::new();
        b.start_recording_to_sink(sink.clone());
        let recorder = b.new_recorder("bench", "bench-0");
        let refs: Vec<ObjectReference> = (0..100).map(reference).collect();
        let start = Instant::now();
        let threads: Vec<_> = (0..producers)
            .map(|p| {
                let recorder = recorder.clone();
                let refs = refs.clone();
                std::thread::spawn(move || {
                    for i in 0..EVENTS / producers {
                        let unique;
                        let r = match shape {
                            Shape::Isomorphic => &refs[((i + p) % 100) as usize],
                            Shape::Unique => {
                                unique = reference(p * EVENTS + i);
                                &unique
                            }
                        };
                        recorder.event_for_ref(
                            r,
                            None,
                            EventType::Warning,
                            "BackOff",
                            "Restarting",
                            "Back-off restarting failed container",
                        );
                    }
                })
            })
            .collect();
        for t in threads {
            let _ = t.join();
        }
        b.shutdown().await;
        let elapsed = start.elapsed();
        assert_eq!(b.stats().unaccounted(0), 0);
        elapsed
    })
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let mut g = c.benchmark_group("events_to_memory_sink");
    g.throughput(Throughput::Elements(EVENTS));
    g.sample_size(10);
    for (name, shape) in [("isomorphic", Shape::Isomorphic), ("unique", Shape::Unique)] {
        for producers in [1u64, 4] {
            g.bench_function(format!("{name}/{producers}_producers"), |b| {
                b.iter_custom(|iters| (0..iters).map(|_| run(&rt, producers, shape)).sum())
            });
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
