//! What `managedFields` cost per write: recording a create, a count update (what every
//! recorder repeat does), and a server-side apply onto an existing event.
//!
//! `cargo bench -p herald-server --bench fieldmanager -- --warm-up-time 1 --measurement-time 3`

use criterion::{Criterion, criterion_group, criterion_main};
use herald_core::event::ApiGroup;
use herald_core::event::CoreEvent;
use herald_server::registry::fieldmanager::{apply, track_update};
use jiff::Timestamp;
use serde_json::json;

fn kubelet_event() -> CoreEvent {
    serde_json::from_value(json!({
        "metadata": {"name": "web-1.17f3a2b4c5d6e7f8", "namespace": "default",
                     "uid": "0b9c6f2e-3d4a-4e8b-9f1a-000000000001",
                     "creationTimestamp": "2024-01-01T00:00:00Z"},
        "involvedObject": {"kind": "Pod", "namespace": "default", "name": "web-1",
                           "uid": "5e1d7c3a-2b4f-4a6e-8d9c-000000000001", "apiVersion": "v1"},
        "reason": "BackOff", "message": "Back-off restarting failed container app in pod web-1",
        "source": {"component": "kubelet", "host": "node-1"}, "count": 1, "type": "Warning",
        "firstTimestamp": "2024-01-01T00:00:00Z", "lastTimestamp": "2024-01-01T00:00:00Z",
        "reportingComponent": "kubelet", "reportingInstance": "node-1",
    }))
    .expect("event")
}

fn bench(c: &mut Criterion) {
    let now = Timestamp::from_second(1_700_000_000).expect("time");
    let fresh = kubelet_event();
    let mut created = fresh.clone();
    track_update(ApiGroup::Core, None, &mut created, "kubelet", now);
    let mut repeat = created.clone();
    repeat.count = Some(2);

    c.bench_function("fieldmanager/create", |b| {
        b.iter(|| {
            let mut e = fresh.clone();
            track_update(ApiGroup::Core, None, &mut e, "kubelet", now);
            e
        })
    });
    c.bench_function("fieldmanager/count_update", |b| {
        b.iter(|| {
            let mut e = repeat.clone();
            track_update(ApiGroup::Core, Some(&created), &mut e, "kubelet", now);
            e
        })
    });
    let config = json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": "web-1.17f3a2b4c5d6e7f8", "namespace": "default"},
        "involvedObject": {"kind": "Pod", "name": "web-1", "namespace": "default"},
        "reason": "BackOff", "message": "applied", "type": "Warning",
    });
    c.bench_function("fieldmanager/apply", |b| {
        b.iter(|| {
            // Only the success path is measured; keep the (large) error out of the result.
            apply(
                ApiGroup::Core,
                Some(&created),
                &config,
                "kubectl",
                true,
                now,
            )
            .ok()
        })
    });
    c.bench_function("fieldmanager/baseline_clone", |b| b.iter(|| fresh.clone()));
}

criterion_group!(benches, bench);
criterion_main!(benches);
