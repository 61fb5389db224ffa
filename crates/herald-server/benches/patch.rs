//! What applying a recorder's repeat patch costs, from the stored event to the patched one:
//! set on the typed event ([`typed_patch::apply`], what the patch path takes for such
//! patches), against the general path (the stored event's JSON, the merge, the decode of the
//! merged tree).
//!
//! `cargo bench -p herald-server --bench patch -- --warm-up-time 1 --measurement-time 3`

use criterion::{Criterion, criterion_group, criterion_main};
use herald_core::event::wire::event_json;
use herald_core::event::{ApiGroup, CoreEvent};
use herald_server::registry::codec::{decode_at, decode_body, encode};
use herald_server::registry::patch::{self, PatchKind};
use herald_server::registry::typed_patch;
use serde_json::json;

/// A kubelet event as the server stores it after a create, decoded.
fn stored() -> CoreEvent {
    let e: CoreEvent = serde_json::from_value(json!({
        "metadata": {"name": "web-1.17f3a2b4c5d6e7f8", "namespace": "default",
                     "uid": "0b9c6f2e-3d4a-4e8b-9f1a-000000000001",
                     "creationTimestamp": "2026-11-25T09:48:17Z",
                     "managedFields": [{"manager": "kubelet", "operation": "Update", "apiVersion": "v1",
                         "time": "2026-11-25T09:48:17Z", "fieldsType": "FieldsV1",
                         "fieldsV1": {"f:count": {}, "f:firstTimestamp": {}, "f:involvedObject": {},
                                      "f:lastTimestamp": {}, "f:message": {}, "f:reason": {},
                                      "f:reportingComponent": {}, "f:reportingInstance": {},
                                      "f:source": {"f:component": {}, "f:host": {}}, "f:type": {}}}]},
        "involvedObject": {"kind": "Pod", "namespace": "default", "name": "web-1",
                           "uid": "5e1d7c3a-2b4f-4a6e-8d9c-000000000001", "apiVersion": "v1",
                           "resourceVersion": "8123", "fieldPath": "spec.containers{app}"},
        "reason": "BackOff", "message": "Back-off restarting failed container app in pod web-1",
        "source": {"component": "kubelet", "host": "node-1"}, "count": 1, "type": "Warning",
        "firstTimestamp": "2026-11-25T09:48:17Z", "lastTimestamp": "2026-11-25T09:48:17Z",
        "reportingComponent": "kubelet", "reportingInstance": "node-1",
    }))
    .expect("event");
    decode_at(&encode(&e), 42).expect("decodes")
}

fn bench(c: &mut Criterion) {
    let old = stored();
    // client-go's `record` package on a repeat.
    let body = br#"{"count":2,"lastTimestamp":"2026-11-25T09:49:17Z","message":"Back-off restarting failed container app in pod web-1"}"#;
    let doc = patch::parse(PatchKind::StrategicMerge, body).expect("patch");
    let mut g = c.benchmark_group("repeat_patch");
    g.bench_function("typed", |b| {
        b.iter(|| {
            typed_patch::apply(ApiGroup::Core, PatchKind::StrategicMerge, &doc, &old)
                .expect("typed")
        })
    });
    g.bench_function("general", |b| {
        b.iter(|| {
            let mut v = event_json(ApiGroup::Core, &old);
            patch::apply(PatchKind::StrategicMerge, &doc, &mut v).expect("applies");
            decode_body(ApiGroup::Core, v, None).expect("decodes")
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
