//! What a list costs per item in each shape, from the stored bytes: core/v1 JSON (the
//! stored bytes with the resourceVersion spliced in), `events.k8s.io/v1` JSON and protobuf
//! (transcoded from the stored bytes, against decoding them into `k8s-openapi` types and
//! encoding those, the path the transcoders replace).
//!
//! `cargo bench -p herald-server --bench render -- --warm-up-time 1 --measurement-time 3`

mod common;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use herald_core::event::ApiGroup;
use herald_core::event::wire::write_events_v1_item;
use herald_server::api::protobuf::{event_object, stored::write_list_item};
use herald_server::registry::codec::{decode_at, encode, splice_resource_version_into};
use herald_server::registry::stored_events_v1::write_item;

/// Items per iteration.
const ITEMS: usize = 1000;

/// Event `i` as the server stores it after a create.
fn stored(i: usize) -> bytes::Bytes {
    encode(&common::kubelet_event(i))
}

fn bench(c: &mut Criterion) {
    let items: Vec<bytes::Bytes> = (0..ITEMS).map(stored).collect();
    let mut g = c.benchmark_group("list_item");
    g.throughput(Throughput::Elements(ITEMS as u64));
    let mut out = Vec::with_capacity(ITEMS * 1200);
    g.bench_function("core_json_spliced", |b| {
        b.iter(|| {
            out.clear();
            for (i, s) in items.iter().enumerate() {
                splice_resource_version_into(&mut out, s, i as u64 + 1);
            }
            out.len()
        })
    });
    g.bench_function("events_v1_json_transcoded", |b| {
        b.iter(|| {
            out.clear();
            for (i, s) in items.iter().enumerate() {
                assert!(write_item(&mut out, s, i as u64 + 1, false));
            }
            out.len()
        })
    });
    g.bench_function("events_v1_json_decoded", |b| {
        b.iter(|| {
            out.clear();
            for (i, s) in items.iter().enumerate() {
                let e = decode_at(s, i as u64 + 1).expect("decodes");
                write_events_v1_item(&mut out, e).expect("encodes");
            }
            out.len()
        })
    });
    for group in [ApiGroup::Core, ApiGroup::EventsV1] {
        let name = match group {
            ApiGroup::Core => "core",
            ApiGroup::EventsV1 => "events_v1",
        };
        g.bench_function(format!("{name}_protobuf_transcoded"), |b| {
            b.iter(|| {
                out.clear();
                for (i, s) in items.iter().enumerate() {
                    assert!(write_list_item(&mut out, group, s, i as u64 + 1));
                }
                out.len()
            })
        });
        // The decoding path, as a protobuf GET encodes one event.
        g.bench_function(format!("{name}_protobuf_decoded"), |b| {
            b.iter(|| {
                out.clear();
                for (i, s) in items.iter().enumerate() {
                    let e = decode_at(s, i as u64 + 1).expect("decodes");
                    out.extend_from_slice(&event_object(group, &e));
                }
                out.len()
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
