//! What a list costs per item in each shape, from the stored bytes: core/v1 JSON (the
//! stored bytes with the resourceVersion spliced in), `events.k8s.io/v1` JSON and protobuf
//! (transcoded from the stored bytes, against decoding them into `k8s-openapi` types and
//! encoding those, the path the transcoders replace), and a `Table` row as `kubectl get
//! events` asks for it, a `kubectl get -w` watch line and a metadata informer's list item
//! (written from the stored bytes, or from the decoded event, against building the `Value`
//! tree they replace).
//!
//! `cargo bench -p herald-server --bench render -- --warm-up-time 1 --measurement-time 3`

mod common;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use herald_core::event::ApiGroup;
use herald_server::api::events::render::{
    ListShape, decoded_watch_line, list, object, stored_shape_watch_line,
};
use herald_server::api::negotiate::{IncludeObject, MetaVersion, Output};
use herald_server::registry::{ChangeKind, DecodedItem, EventList, Stored};
use herald_wire::events_v1::write_item;
use herald_wire::json::{event_json, write_events_v1_item};
use herald_wire::protobuf::{event_object, transcode::write_list_item};
use herald_wire::stored::{decode_at, encode, splice_resource_version_into};
use herald_wire::table::{TableMeta, TableOptions, event_table};

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
    // kubectl's `get events`: a Table with each row's PartialObjectMetadata.
    let page = EventList {
        items: items
            .iter()
            .enumerate()
            .map(|(i, s)| Stored {
                bytes: s.clone(),
                revision: i as u64 + 1,
            })
            .collect(),
        resource_version: ITEMS.to_string(),
        continue_: None,
    };
    let now = jiff::Timestamp::now();
    let table = Output::Table(MetaVersion::V1);
    let shape = ListShape::of(table, IncludeObject::Metadata, now);
    g.bench_function("core_table_row_streamed", |b| {
        b.iter(|| {
            list(ApiGroup::Core, shape, page.clone())
                .map(|c| c.len())
                .sum::<usize>()
        })
    });
    // The same Table built as a `Value` tree from the decoded events.
    g.bench_function("core_table_row_value", |b| {
        b.iter(|| {
            let events = page.decode();
            let meta = TableMeta {
                resource_version: Some(page.resource_version.clone()),
                ..TableMeta::default()
            };
            let opts = TableOptions {
                version: MetaVersion::V1,
                include_object: IncludeObject::Metadata,
                no_headers: false,
            };
            let v = event_table(&events, &meta, now, &opts, &|e| {
                event_json(ApiGroup::Core, e)
            });
            serde_json::to_vec(&v).expect("encodes").len()
        })
    });
    // kubectl's `get events -w`: one watch line per change and watcher.
    let changes: Vec<DecodedItem> = page
        .items
        .iter()
        .map(|s| DecodedItem::Modified(s.decode().expect("decodes")))
        .collect();
    g.bench_function("core_table_watch_line_streamed", |b| {
        b.iter(|| {
            changes
                .iter()
                .map(|c| {
                    decoded_watch_line(
                        ApiGroup::Core,
                        c,
                        table,
                        IncludeObject::Metadata,
                        now,
                        false,
                    )
                    .len()
                })
                .sum::<usize>()
        })
    });
    // The same lines written from the stored bytes, as a Table watcher now gets them.
    g.bench_function("core_table_watch_line_stored", |b| {
        b.iter(|| {
            page.items
                .iter()
                .map(|s| {
                    stored_shape_watch_line(
                        ApiGroup::Core,
                        ChangeKind::Modified,
                        &s.bytes,
                        s.revision,
                        shape,
                        false,
                    )
                    .expect("written")
                    .len()
                })
                .sum::<usize>()
        })
    });
    // What a metadata informer lists.
    let metadata = ListShape::of(
        Output::PartialObjectMetadataList(MetaVersion::V1),
        IncludeObject::Metadata,
        now,
    );
    g.bench_function("core_metadata_item_streamed", |b| {
        b.iter(|| {
            list(ApiGroup::Core, metadata, page.clone())
                .map(|c| c.len())
                .sum::<usize>()
        })
    });
    g.bench_function("core_table_watch_line_value", |b| {
        b.iter(|| {
            changes
                .iter()
                .map(|c| {
                    let DecodedItem::Modified(e) = c else {
                        unreachable!()
                    };
                    let obj = object(ApiGroup::Core, e, table, IncludeObject::Metadata, now, true);
                    let line = serde_json::json!({"type": "MODIFIED", "object": obj});
                    serde_json::to_vec(&line).expect("encodes").len()
                })
                .sum::<usize>()
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
