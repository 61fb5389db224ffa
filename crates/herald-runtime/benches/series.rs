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
//! Events look like the recorder's (regarding with uid and resourceVersion, reporting fields,
//! eventTime). They are built outside the measured time (`iter_batched`).
//!
//! `cargo bench -p herald-runtime --bench series`

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use herald_core::clock::IntervalClock;
use herald_runtime::events::SeriesOptions;
use herald_runtime::events::bench_support::{SeriesCorrelation, SeriesDecision};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};

fn event(pod: &str) -> Event {
    Event {
        metadata: ObjectMeta {
            name: Some(format!("{pod}.1873c2b9d0a0c1f2")),
            namespace: Some("default".into()),
            ..Default::default()
        },
        event_time: Some(MicroTime("2026-01-01T00:00:00Z".parse().unwrap())),
        regarding: Some(ObjectReference {
            kind: Some("Pod".into()),
            name: Some(pod.into()),
            namespace: Some("default".into()),
            uid: Some("2b0e4b1a-6a7c-4f0e-9d64-0d3f8a1c9e55".into()),
            api_version: Some("v1".into()),
            field_path: Some("spec.containers{app}".into()),
            resource_version: Some("48213".into()),
        }),
        reason: Some("BackOff".into()),
        action: Some("Restarting".into()),
        note: Some("Back-off restarting failed container app".into()),
        type_: Some("Warning".into()),
        reporting_controller: Some("kubelet".into()),
        reporting_instance: Some("node-1".into()),
        ..Default::default()
    }
}

fn correlation() -> SeriesCorrelation {
    let clock = Arc::new(IntervalClock::new(
        "2026-01-01T00:00:00Z".parse().unwrap(),
        Duration::from_micros(1),
    ));
    SeriesCorrelation::new(SeriesOptions::default(), clock)
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("series");
    g.throughput(Throughput::Elements(1));

    let mut corr = correlation();
    let mut i = 0u64;
    g.bench_function("unique", |b| {
        b.iter_batched(
            || {
                i += 1;
                event(&format!("web-{i}"))
            },
            |e| black_box(corr.observe(e)),
            BatchSize::SmallInput,
        )
    });

    let mut corr = correlation();
    let template = event("web-0");
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
            |e| black_box(corr.observe(e)),
            BatchSize::SmallInput,
        )
    });

    let mut corr = correlation();
    let mut k = 0u64;
    g.bench_function("isomorphic_64_objects", |b| {
        b.iter_batched(
            || {
                k += 1;
                event(&format!("web-{}", k % 64))
            },
            |e| black_box(corr.observe(e)),
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
