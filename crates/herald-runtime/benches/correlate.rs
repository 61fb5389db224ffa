//! Correlator throughput: unique events (every event a new key, so all caches churn), identical
//! events (dedup + patch), similar events (every event aggregated into the combined one), and
//! identical events about 64 objects taken in turn (no two consecutive events share a key, so
//! nothing is reused from the previous event).
//!
//! Events look like the recorder's (involved object with uid and resourceVersion, source and
//! reporting fields). They are built outside the measured time (`iter_batched`); results are
//! dropped outside it.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use herald_core::clock::IntervalClock;
use herald_runtime::record::{CorrelatorOptions, EventCorrelator};
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

fn event(pod: &str, reason: &str, message: String) -> Event {
    let now = Time("2026-01-01T00:00:00Z".parse().unwrap());
    Event {
        metadata: ObjectMeta {
            name: Some(format!("{pod}.1873c2b9d0a0c1f2")),
            namespace: Some("default".into()),
            ..Default::default()
        },
        involved_object: ObjectReference {
            kind: Some("Pod".into()),
            name: Some(pod.into()),
            namespace: Some("default".into()),
            uid: Some("2b0e4b1a-6a7c-4f0e-9d64-0d3f8a1c9e55".into()),
            api_version: Some("v1".into()),
            field_path: Some("spec.containers{app}".into()),
            resource_version: Some("48213".into()),
        },
        reason: Some(reason.into()),
        message: Some(message),
        source: Some(EventSource {
            component: Some("kubelet".into()),
            host: Some("node-1".into()),
        }),
        first_timestamp: Some(now.clone()),
        last_timestamp: Some(now),
        count: Some(1),
        type_: Some("Normal".into()),
        reporting_component: Some("kubelet".into()),
        reporting_instance: Some("node-1".into()),
        ..Default::default()
    }
}

fn correlator(unlimited_spam: bool) -> EventCorrelator {
    let clock = Arc::new(IntervalClock::new(
        "2026-01-01T00:00:00Z".parse().unwrap(),
        Duration::from_micros(1),
    ));
    let mut options = CorrelatorOptions {
        clock,
        ..Default::default()
    };
    if unlimited_spam {
        options.burst_size = u32::MAX;
        options.qps = f32::INFINITY;
    }
    EventCorrelator::new(options)
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("correlate");
    g.throughput(Throughput::Elements(1));

    let mut corr = correlator(false);
    let mut i = 0u64;
    g.bench_function("unique", |b| {
        b.iter_batched(
            || {
                i += 1;
                event(
                    &format!("web-{i}"),
                    "Started",
                    format!("Started container app ({i})"),
                )
            },
            |e| black_box(corr.correlate(e)),
            BatchSize::SmallInput,
        )
    });

    let mut corr = correlator(true);
    let template = event(
        "web-0",
        "BackOff",
        "Back-off restarting failed container app".into(),
    );
    g.bench_function("identical", |b| {
        b.iter_batched(
            || template.clone(),
            |e| black_box(corr.correlate(e)),
            BatchSize::SmallInput,
        )
    });

    let mut corr = correlator(true);
    let mut j = 0u64;
    g.bench_function("similar", |b| {
        b.iter_batched(
            || {
                j += 1;
                event(
                    "web-0",
                    "Unhealthy",
                    format!("Readiness probe failed: attempt {}", j % 1000),
                )
            },
            |e| black_box(corr.correlate(e)),
            BatchSize::SmallInput,
        )
    });

    let mut corr = correlator(true);
    let mut k = 0u64;
    g.bench_function("identical_64_objects", |b| {
        b.iter_batched(
            || {
                k += 1;
                event(
                    &format!("web-{}", k % 64),
                    "BackOff",
                    "Back-off restarting failed container app".into(),
                )
            },
            |e| black_box(corr.correlate(e)),
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
