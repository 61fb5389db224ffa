//! Recorder → broadcaster → correlator → MemorySink, end to end, with 1 and 4 producer
//! threads. Each iteration records a storm of events over 100 objects and waits for the
//! pipeline to drain (`shutdown`).
//!
//! `cargo bench -p herald-runtime --bench record`

use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use herald_runtime::record::*;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

const EVENTS: u64 = 200_000;

fn pods() -> Vec<Pod> {
    (0..100)
        .map(|i| Pod {
            metadata: ObjectMeta {
                name: Some(format!("web-{i}")),
                namespace: Some("prod".into()),
                uid: Some(format!("uid-{i}")),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        })
        .collect()
}

fn run(rt: &tokio::runtime::Runtime, producers: u64) -> Duration {
    rt.block_on(async {
        let b = EventBroadcaster::new(BroadcasterOptions::default());
        let sink = MemorySink::new();
        b.start_recording_to_sink(sink.clone());
        let recorder = b.new_recorder(EventSource::new("bench", "node-1"));
        let pods = pods();
        let start = Instant::now();
        let threads: Vec<_> = (0..producers)
            .map(|p| {
                let recorder = recorder.clone();
                let pods = pods.clone();
                std::thread::spawn(move || {
                    for i in 0..EVENTS / producers {
                        let pod = &pods[((i + p) % 100) as usize];
                        recorder.event(
                            pod,
                            EventType::Warning,
                            "BackOff",
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
    let mut g = c.benchmark_group("record_to_memory_sink");
    g.throughput(Throughput::Elements(EVENTS));
    g.sample_size(10);
    for producers in [1u64, 4] {
        g.bench_function(format!("{producers}_producers"), |b| {
            b.iter_custom(|iters| (0..iters).map(|_| run(&rt, producers)).sum())
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
