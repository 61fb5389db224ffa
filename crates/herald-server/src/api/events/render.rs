//! Rendering registry results in the negotiated representation.

use herald_core::event::wire::{event_json, write_events_v1_item};
use herald_core::event::{ApiGroup, CoreEvent};
use jiff::Timestamp;
use serde_json::{Value, json};

use crate::api::negotiate::{IncludeObject, Output};
use crate::api::table::{
    TableMeta, TableOptions, event_table, partial_object_metadata, partial_object_metadata_list,
};
use crate::registry::codec::{decode, decode_at, splice_resource_version_into};
use crate::registry::stored_events_v1;
use crate::registry::watch::ChangeKind;
use crate::registry::{EventList, INITIAL_EVENTS_END_ANNOTATION, RawEventList, WatchItem};
use crate::storage::{KeyValue, Revision};

/// One event in the requested representation.
pub fn object(
    group: ApiGroup,
    e: &CoreEvent,
    out: Output,
    include: IncludeObject,
    now: Timestamp,
    no_headers: bool,
) -> Value {
    match out {
        Output::Object => event_json(group, e),
        Output::Table(version) => {
            let meta = TableMeta {
                resource_version: e.metadata.resource_version.clone(),
                ..TableMeta::default()
            };
            let opts = TableOptions {
                version,
                include_object: include,
                no_headers,
            };
            event_table(std::slice::from_ref(e), &meta, now, &opts, &|e| {
                event_json(group, e)
            })
        }
        Output::PartialObjectMetadata(v) | Output::PartialObjectMetadataList(v) => {
            partial_object_metadata(&e.metadata, v)
        }
    }
}

/// A list in the requested representation.
pub fn list(
    group: ApiGroup,
    l: &EventList,
    out: Output,
    include: IncludeObject,
    now: Timestamp,
) -> Value {
    let meta = TableMeta {
        resource_version: Some(l.resource_version.clone()),
        continue_: l.continue_.clone(),
        remaining_item_count: None,
    };
    match out {
        Output::Table(version) => {
            let opts = TableOptions {
                version,
                include_object: include,
                no_headers: false,
            };
            event_table(&l.items, &meta, now, &opts, &|e| event_json(group, e))
        }
        Output::PartialObjectMetadataList(v) | Output::PartialObjectMetadata(v) => {
            partial_object_metadata_list(&l.items, &meta, v)
        }
        Output::Object => event_list(
            group,
            &l.items,
            Some(&l.resource_version),
            l.continue_.as_deref(),
        ),
    }
}

/// An `EventList` in `group`'s shape.
pub fn event_list(
    group: ApiGroup,
    items: &[CoreEvent],
    rv: Option<&str>,
    cont: Option<&str>,
) -> Value {
    let mut meta = serde_json::Map::new();
    if let Some(rv) = rv {
        meta.insert("resourceVersion".into(), rv.into());
    }
    if let Some(c) = cont {
        meta.insert("continue".into(), c.into());
    }
    let items: Vec<Value> = items
        .iter()
        .map(|e| {
            let mut v = event_json(group, e);
            if let Some(m) = v.as_object_mut() {
                m.remove("kind");
                m.remove("apiVersion");
            }
            v
        })
        .collect();
    json!({
        "kind": "EventList",
        "apiVersion": group.api_version(),
        "metadata": meta,
        "items": items,
    })
}

/// The object of a BOOKMARK: the kind with only `metadata.resourceVersion` (and the
/// initial-events-end annotation).
fn bookmark_object(group: ApiGroup, rv: &str, end: bool, out: Output) -> Value {
    let mut meta = json!({"resourceVersion": rv});
    if end {
        meta["annotations"] = json!({INITIAL_EVENTS_END_ANNOTATION: "true"});
    }
    match out {
        Output::Object => {
            json!({"kind": "Event", "apiVersion": group.api_version(), "metadata": meta})
        }
        Output::Table(v) => json!({
            "kind": "Table", "apiVersion": v.api_version(), "metadata": meta,
            "columnDefinitions": null, "rows": []
        }),
        Output::PartialObjectMetadata(v) | Output::PartialObjectMetadataList(v) => {
            json!({"kind": "PartialObjectMetadata", "apiVersion": v.api_version(), "metadata": meta})
        }
    }
}

/// One watch line (`{"type":…,"object":…}\n`). `first` is true for the first object event
/// of the stream (only it carries Table column definitions).
pub fn watch_line(
    group: ApiGroup,
    item: &WatchItem,
    out: Output,
    include: IncludeObject,
    now: Timestamp,
    first: bool,
) -> Vec<u8> {
    let (ty, obj) = match item {
        WatchItem::Added(e) => ("ADDED", object(group, e, out, include, now, !first)),
        WatchItem::Modified(e) => ("MODIFIED", object(group, e, out, include, now, !first)),
        WatchItem::Deleted(e) => ("DELETED", object(group, e, out, include, now, !first)),
        WatchItem::Bookmark {
            resource_version,
            initial_events_end,
        } => (
            "BOOKMARK",
            bookmark_object(group, resource_version, *initial_events_end, out),
        ),
        WatchItem::Error(e) => ("ERROR", e.to_json()),
    };
    let mut line = serde_json::to_vec(&json!({"type": ty, "object": obj})).unwrap_or_default();
    line.push(b'\n');
    line
}

/// The [`CachedEvent`](crate::storage::CachedEvent) encoding slot that holds the JSON watch
/// line of a change in `group`'s shape ([`stored_watch_line`]).
pub fn line_slot(group: ApiGroup) -> usize {
    match group {
        ApiGroup::Core => 0,
        ApiGroup::EventsV1 => 1,
    }
}

/// The [`CachedEvent`](crate::storage::CachedEvent) encoding slot that holds the protobuf
/// watch frame of a change in `group`'s shape
/// ([`watch_frame`](crate::api::protobuf::watch_frame)).
pub fn frame_slot(group: ApiGroup) -> usize {
    match group {
        ApiGroup::Core => 2,
        ApiGroup::EventsV1 => 3,
    }
}

/// The JSON watch line (`{"type":…,"object":…}\n`) of the event stored as `stored`, shown at
/// `revision`: the line [`watch_line`] makes for the decoded event, as a JSON value (keys
/// in another order), its object made as [`stored_object_into`] makes it. `None` (logged)
/// when the bytes do not decode.
pub fn stored_watch_line(
    group: ApiGroup,
    kind: ChangeKind,
    stored: &[u8],
    revision: Revision,
) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(stored.len() + 96);
    out.extend_from_slice(b"{\"type\":\"");
    out.extend_from_slice(kind.as_str().as_bytes());
    out.extend_from_slice(b"\",\"object\":");
    if let Err(err) = stored_object_into(&mut out, group, stored, revision) {
        tracing::warn!(error = %err, revision, "skipping undecodable stored event in watch");
        return None;
    }
    out.extend_from_slice(b"}\n");
    Some(out)
}

/// Appends the JSON of the event stored as `stored` (see
/// [`encode`](crate::registry::codec::encode)) in `group`'s shape, with `resourceVersion` =
/// `revision`: the object [`event_json`] renders for the decoded event. On core/v1 it is the
/// stored bytes with `kind`, `apiVersion` and the resourceVersion spliced in (decoded when
/// the bytes have no `metadata` object to splice into); on
/// `events.k8s.io/v1` it is transcoded from them ([`stored_events_v1`]: equal as a JSON
/// value, keys in another order), or decoded when the transcoder declines. An error (and
/// `out` untouched) when the bytes do not decode.
pub fn stored_object_into(
    out: &mut Vec<u8>,
    group: ApiGroup,
    stored: &[u8],
    revision: Revision,
) -> Result<(), herald_core::status::ApiError> {
    const CORE_HEAD: &[u8] = br#"{"kind":"Event","apiVersion":"v1","#;
    let len = out.len();
    if group == ApiGroup::Core && stored.first() == Some(&b'{') && stored.get(1) != Some(&b'}') {
        out.extend_from_slice(CORE_HEAD);
        if splice_resource_version_into(out, &stored[1..], revision) {
            return Ok(());
        }
        out.truncate(len);
    }
    if group == ApiGroup::EventsV1 && stored_events_v1::write_item(out, stored, revision, true) {
        return Ok(());
    }
    let e = decode_at(stored, revision)?;
    if let Err(err) = serde_json::to_writer(&mut *out, &event_json(group, &e)) {
        out.truncate(len);
        return Err(herald_core::status::ApiError::internal(format!(
            "encoding event: {err}"
        )));
    }
    Ok(())
}

/// About how many bytes [`raw_event_list`] renders per chunk.
pub const LIST_CHUNK: usize = 64 * 1024;

/// The JSON bytes of an `EventList` from stored key-values, as chunks of about
/// [`LIST_CHUNK`] bytes rendered one at a time as they are taken (so a large list is sent
/// while it is rendered, through a buffer of one chunk). On core/v1 each item is the stored
/// bytes with the resourceVersion spliced in (no decode); on `events.k8s.io/v1` items are
/// transcoded from the stored bytes ([`stored_events_v1`]), or, where it declines, decoded,
/// converted and written without a `Value` tree ([`write_events_v1_item`]).
pub fn raw_event_list(group: ApiGroup, l: RawEventList) -> impl Iterator<Item = Vec<u8>> {
    let mut pending = Some(list_head(group, &l));
    let mut items = l.items.into_iter();
    let mut first = true;
    let mut done = false;
    std::iter::from_fn(move || {
        if done {
            return None;
        }
        let mut out = pending.take().unwrap_or_default();
        out.reserve(LIST_CHUNK + 4096);
        while out.len() < LIST_CHUNK {
            let Some(kv) = items.next() else {
                out.extend_from_slice(b"]}");
                done = true;
                break;
            };
            if push_item(&mut out, group, &kv, !first) {
                first = false;
            }
        }
        Some(out)
    })
}

/// Items per block of [`parallel_event_list`].
pub const LIST_BLOCK: usize = 2048;

/// The bytes of [`raw_event_list`], for a long list whose items must each be decoded
/// (`events.k8s.io/v1`): blocks of [`LIST_BLOCK`] items are rendered on the blocking pool,
/// two at once and sent in order, so the list takes both cores of a small machine while
/// at most two blocks wait in memory. A block whose rendering fails (a bug) ends the body
/// with an error, so the client sees a broken list rather than a short one.
pub fn parallel_event_list(
    group: ApiGroup,
    l: RawEventList,
) -> impl futures::Stream<Item = Result<bytes::Bytes, tokio::task::JoinError>> + Send {
    use futures::StreamExt as _;
    let head = list_head(group, &l);
    // Split from the end: each split moves only the block it takes.
    let mut items = l.items;
    let mut blocks = Vec::with_capacity(items.len() / LIST_BLOCK + 1);
    while !items.is_empty() {
        let at = items.len().saturating_sub(LIST_BLOCK);
        blocks.push(items.split_off(at));
    }
    blocks.reverse();
    let mut started = false;
    let rendered = futures::stream::iter(blocks)
        .map(move |block| {
            tokio::task::spawn_blocking(move || {
                let mut out = Vec::with_capacity(block.len() * 1100);
                for kv in &block {
                    push_item(&mut out, group, kv, true);
                }
                out
            })
        })
        .buffered(2)
        .map(move |block| {
            // Every item was written after a comma; the list's first item must not be.
            block.map(|out| {
                let out = bytes::Bytes::from(out);
                if !started && !out.is_empty() {
                    started = true;
                    return out.slice(1..);
                }
                out
            })
        });
    futures::stream::once(async move { Ok(bytes::Bytes::from(head)) })
        .chain(rendered)
        .chain(futures::stream::once(async {
            Ok(bytes::Bytes::from_static(b"]}"))
        }))
}

/// `{"kind":"EventList",…,"items":[`: the list's start, up to its first item.
fn list_head(group: ApiGroup, l: &RawEventList) -> Vec<u8> {
    let mut meta = serde_json::Map::new();
    meta.insert("resourceVersion".into(), l.resource_version.clone().into());
    if let Some(c) = &l.continue_ {
        meta.insert("continue".into(), c.clone().into());
    }
    let head = json!({"kind": "EventList", "apiVersion": group.api_version(), "metadata": meta});
    let mut head = serde_json::to_vec(&head).unwrap_or_default();
    // Replace the closing brace with the items array.
    head.pop();
    head.extend_from_slice(b",\"items\":[");
    head
}

/// Appends one list item (after a comma when `comma`); false, with `out` unchanged and a
/// warning logged, for a stored event that does not decode.
fn push_item(out: &mut Vec<u8>, group: ApiGroup, kv: &KeyValue, comma: bool) -> bool {
    let start = out.len();
    if comma {
        out.push(b',');
    }
    let transcoded = match group {
        ApiGroup::Core => splice_resource_version_into(out, &kv.value, kv.mod_revision),
        ApiGroup::EventsV1 => stored_events_v1::write_item(out, &kv.value, kv.mod_revision, false),
    };
    let item = if transcoded {
        Ok(())
    } else {
        decode(kv).and_then(|e| {
            let written = match group {
                ApiGroup::EventsV1 => write_events_v1_item(out, e),
                ApiGroup::Core => {
                    let mut v = event_json(group, &e);
                    if let Some(m) = v.as_object_mut() {
                        m.remove("kind");
                        m.remove("apiVersion");
                    }
                    serde_json::to_writer(&mut *out, &v)
                }
            };
            written.map_err(|err| herald_core::status::ApiError::internal(err.to_string()))
        })
    };
    match item {
        Ok(()) => true,
        Err(err) => {
            out.truncate(start);
            tracing::warn!(key = %kv.key, error = %err, "skipping undecodable stored event");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt as _;

    fn kv(i: usize) -> KeyValue {
        let e: CoreEvent = serde_json::from_value(json!({
            "metadata": {"name": format!("e.{i}"), "namespace": "ns", "uid": format!("u-{i}")},
            "involvedObject": {"kind": "Pod", "name": format!("p-{i}")},
            "reason": "R", "message": format!("m {i}"), "count": i,
        }))
        .unwrap();
        KeyValue {
            key: format!("/events/ns/e.{i}"),
            value: crate::registry::codec::encode(&e),
            create_revision: 5,
            mod_revision: 5 + i as u64,
        }
    }

    /// The parallel renderer sends the bytes the sequential one does, in both groups, over
    /// several blocks, when the list's first items (a whole first block) do not decode, and
    /// for an empty list.
    #[tokio::test]
    async fn parallel_lists_are_the_sequential_bytes() {
        let bad = |i: usize| KeyValue {
            value: bytes::Bytes::from_static(b"{not json"),
            ..kv(i)
        };
        let cases: Vec<Vec<KeyValue>> = vec![
            (0..2 * LIST_BLOCK + 7).map(kv).collect(),
            (0..LIST_BLOCK + 1)
                .map(bad)
                .chain((0..LIST_BLOCK + 5).map(kv))
                .collect(),
            Vec::new(),
        ];
        for group in [ApiGroup::Core, ApiGroup::EventsV1] {
            for items in &cases {
                let l = RawEventList {
                    items: items.clone(),
                    resource_version: "9".into(),
                    continue_: None,
                };
                let want: Vec<u8> = raw_event_list(group, l.clone()).flatten().collect();
                let got: Vec<u8> = parallel_event_list(group, l)
                    .map(|r| r.unwrap().to_vec())
                    .concat()
                    .await;
                assert!(got == want, "{group:?}, {} items", items.len());
                let v: Value = serde_json::from_slice(&got).unwrap();
                assert_eq!(
                    v["items"].as_array().unwrap().len(),
                    items
                        .iter()
                        .filter(|kv| kv.value[0] == b'{' && kv.value[1] != b'n')
                        .count()
                );
            }
        }
    }
}
