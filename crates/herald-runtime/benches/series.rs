//! Series correlation throughput (events.k8s.io/v1): the sink's decision per occurrence —
//! isomorphic key, bounded series cache, series start — without the writer, beside
//! `correlate.rs` for core/v1.
//!
//! - `unique`: every occurrence about a new object, so every one is a create and the cache
//!   (4096 entries) churns, evicting its least recently observed entry each time.
//! - `isomorphic`: the same occurrence again and again (one open series, counted in memory).
//! - `isomorphic_64_objects`: 64 series taken in turn (no two consecutive occurrences share a
//!   key).
//!
//! Occurrences are what the pipeline's fan-out delivers to a sink: the recorder's light
//! occurrence (regarding with uid and resourceVersion, reporting fields, time; not a whole
//! Event) in the distributor's `Arc`. They are made outside the measured time
//! (`iter_batched`). The step hands on a write that carries the occurrence, not an Event:
//! the writer builds the Event on the write's own task (as `correlate.rs` leaves out
//! writing its event), and the bench drops the write outside the measured time.
//!
//! `cargo bench -p herald-runtime --bench series`

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use herald_core::clock::IntervalClock;
use herald_runtime::events::bench_support::{
    OccurrenceMaker, RecordedOccurrence, SeriesCorrelation, SeriesDecision,
};
use herald_runtime::events::{EventType, SeriesOptions};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::ObjectReference;

fn time() -> Timestamp {
    "2026-01-01T00:00:00Z".parse().unwrap()
}

/// The occurrence a recorder makes of an event about `pod` (as `event_for_ref` would).
fn occurrence(maker: &OccurrenceMaker, pod: &str) -> RecordedOccurrence {
    let regarding = ObjectReference {
        kind: Some("Pod".into()),
        name: Some(pod.into()),
        namespace: Some("default".into()),
        uid: Some("2b0e4b1a-6a7c-4f0e-9d64-0d3f8a1c9e55".into()),
        api_version: Some("v1".into()),
        field_path: Some("spec.containers{app}".into()),
        resource_version: Some("48213".into()),
    };
    maker.occurrence(
        &regarding,
        EventType::Warning,
        "BackOff",
        "Restarting",
        "Back-off restarting failed container app",
        time(),
    )
}

fn correlation() -> SeriesCorrelation {
    let clock = Arc::new(IntervalClock::new(time(), Duration::from_micros(1)));
    SeriesCorrelation::new(SeriesOptions::default(), clock, "kubelet", "node-1")
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("series");
    g.throughput(Throughput::Elements(1));

    let mut corr = correlation();
    let maker = corr.recorder();
    let mut i = 0u64;
    g.bench_function("unique", |b| {
        b.iter_batched(
            || {
                i += 1;
                occurrence(&maker, &format!("web-{i}"))
            },
            |o| black_box(corr.observe(o)),
            BatchSize::SmallInput,
        )
    });

    let mut corr = correlation();
    let template = occurrence(&corr.recorder(), "web-0");
    assert!(matches!(
        corr.observe(template.clone()),
        SeriesDecision::Write(_)
    ));
    assert!(matches!(
        corr.observe(template.clone()),
        SeriesDecision::Write(_)
    ));
    assert_eq!(corr.observe(template.clone()), SeriesDecision::Counted);
    g.bench_function("isomorphic", |b| {
        b.iter_batched(
            || template.clone(),
            |o| black_box(corr.observe(o)),
            BatchSize::SmallInput,
        )
    });

    let mut corr = correlation();
    let maker = corr.recorder();
    let mut k = 0u64;
    g.bench_function("isomorphic_64_objects", |b| {
        b.iter_batched(
            || {
                k += 1;
                occurrence(&maker, &format!("web-{}", k % 64))
            },
            |o| black_box(corr.observe(o)),
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
