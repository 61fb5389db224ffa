//! What applying a recorder's repeat patch costs, from the stored event to the patched one:
//! set on the typed event ([`typed_patch::apply`], what the patch path takes for such
//! patches), against the general path (the stored event's JSON, the merge, the decode of the
//! merged tree).
//!
//! `cargo bench -p herald-server --bench patch -- --warm-up-time 1 --measurement-time 3`

mod common;

use criterion::{Criterion, criterion_group, criterion_main};
use herald_core::event::{ApiGroup, CoreEvent};
use herald_server::registry::patch::{self, PatchKind};
use herald_server::registry::typed_patch;
use herald_wire::body::decode_body;
use herald_wire::json::event_json;
use herald_wire::stored::{decode_at, encode};

/// A kubelet event as the server stores it after a create, decoded.
fn stored() -> CoreEvent {
    decode_at(&encode(&common::kubelet_event(1)), 42).expect("decodes")
}

fn bench(c: &mut Criterion) {
    let old = stored();
    // client-go's `record` package on a repeat.
    let body = br#"{"count":2,"lastTimestamp":"2026-11-25T09:49:17Z","message":"Back-off restarting failed container app in pod web-1"}"#;
    let doc = patch::parse(PatchKind::StrategicMerge, body).expect("patch");
    let patch::PatchDoc::Object(object) = &doc else {
        unreachable!("a strategic-merge patch is an object")
    };
    let mut g = c.benchmark_group("repeat_patch");
    g.bench_function("typed", |b| {
        b.iter(|| {
            typed_patch::apply(ApiGroup::Core, PatchKind::StrategicMerge, object, &old)
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
