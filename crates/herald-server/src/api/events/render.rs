//! Rendering registry results in the negotiated representation: one event ([`object`],
//! [`stored_object_into`]), a list ([`list`], [`parallel_list`], [`protobuf_list`],
//! [`streamed_protobuf_list`]) and the lines or frames of a watch ([`WatchLines`],
//! [`protobuf_frame`]).
//!
//! Each is written from the stored bytes by [`herald_wire`]'s transcoders where they can,
//! and from the decoded event where they decline; property tests below hold the two equal.

use std::sync::Arc;

use bytes::Bytes;
use herald_core::clock::Clock;
use herald_core::event::{ApiGroup, CoreEvent};
use herald_core::status::ApiError;
use herald_wire::Revision;
use herald_wire::encoding::WatchEncoding;
use herald_wire::events_v1;
use herald_wire::json::{INITIAL_EVENTS_END_ANNOTATION, event_json, write_events_v1_item};
use herald_wire::protobuf;
use herald_wire::stored::{Stored, decode_at, splice_resource_version_into};
use herald_wire::table::transcode as stored_table;
use herald_wire::table::{
    self, TableMeta, TableOptions, event_cells, event_table, metadata_list_head,
    partial_object_metadata, table_head, write_partial_object_metadata,
};
use jiff::Timestamp;
use serde_json::{Value, json};

use crate::api::negotiate::{IncludeObject, MetaVersion, Output};
use crate::registry::{ChangeKind, DecodedItem, EventList, ListRest, WatchItem};

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

/// An `EventList` in `group`'s shape.
pub fn event_list(
    group: ApiGroup,
    items: &[CoreEvent],
    rv: Option<&str>,
    cont: Option<&str>,
) -> Value {
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
    let mut list = event_list_head(group, rv, cont);
    list.insert("items".into(), items.into());
    Value::Object(list)
}

/// An `EventList` without its `items`: kind, apiVersion and list metadata (`continue` kept
/// whenever given).
fn event_list_head(
    group: ApiGroup,
    rv: Option<&str>,
    cont: Option<&str>,
) -> serde_json::Map<String, Value> {
    let mut meta = serde_json::Map::new();
    if let Some(rv) = rv {
        meta.insert("resourceVersion".into(), rv.into());
    }
    if let Some(c) = cont {
        meta.insert("continue".into(), c.into());
    }
    let mut head = serde_json::Map::new();
    head.insert("kind".into(), "EventList".into());
    head.insert("apiVersion".into(), group.api_version().into());
    head.insert("metadata".into(), meta.into());
    head
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

/// One watch line (`{"type":…,"object":…}\n`) of a decoded item. `first` is true for the
/// first object event of the stream (only it carries Table column definitions). An event's
/// object is written without a `Value` tree for a Table (`kubectl get -w`) or a
/// `PartialObjectMetadata` (metadata informers). A stored change takes
/// [`stored_shape_watch_line`] first, and this only where that declines. (Public for the
/// render benchmark; the server writes lines through [`WatchLines`].)
pub fn decoded_watch_line(
    group: ApiGroup,
    item: &DecodedItem,
    out: Output,
    include: IncludeObject,
    now: Timestamp,
    first: bool,
) -> Vec<u8> {
    let (ty, e) = match item {
        DecodedItem::Added(e) => ("ADDED", e),
        DecodedItem::Modified(e) => ("MODIFIED", e),
        DecodedItem::Deleted(e) => ("DELETED", e),
        DecodedItem::Bookmark {
            resource_version,
            initial_events_end,
        } => {
            let obj = bookmark_object(group, resource_version, *initial_events_end, out);
            return value_line("BOOKMARK", obj);
        }
        DecodedItem::Error(e) => return value_line("ERROR", e.to_json()),
    };
    let mut line = Vec::with_capacity(2048);
    line.extend_from_slice(b"{\"type\":\"");
    line.extend_from_slice(ty.as_bytes());
    line.extend_from_slice(b"\",\"object\":");
    if write_watch_object(&mut line, group, e, out, include, now, first).is_ok() {
        line.extend_from_slice(b"}\n");
        return line;
    }
    value_line(ty, object(group, e, out, include, now, !first))
}

/// The object of a watch line, [`object`]'s JSON value (keys in another order): the event,
/// a `PartialObjectMetadata`, or a one-row Table with the event's resourceVersion as the
/// Table's and column definitions only when `first`.
fn write_watch_object(
    out: &mut Vec<u8>,
    group: ApiGroup,
    e: &CoreEvent,
    output: Output,
    include: IncludeObject,
    now: Timestamp,
    first: bool,
) -> Result<(), ApiError> {
    let version = match output {
        Output::Object => {
            return serde_json::to_writer(&mut *out, &event_json(group, e)).map_err(encoding_error);
        }
        Output::PartialObjectMetadata(v) | Output::PartialObjectMetadataList(v) => {
            return write_partial_object_metadata(out, &e.metadata, v).map_err(encoding_error);
        }
        Output::Table(version) => version,
    };
    let opts = TableOptions {
        version,
        include_object: include,
        no_headers: false,
    };
    let rv = e.metadata.resource_version.clone();
    one_row_table(out, rv, opts, first, |out, opts| {
        write_row(out, e, opts, now, |out| {
            serde_json::to_writer(&mut *out, &event_json(group, e)).map_err(encoding_error)
        })
    })
}

/// Appends the one-row Table of a watch line: the event's resourceVersion as the Table's,
/// column definitions only when `first`, and the row `row` appends with the options it
/// gets.
fn one_row_table<E>(
    out: &mut Vec<u8>,
    resource_version: Option<String>,
    opts: TableOptions,
    first: bool,
    row: impl FnOnce(&mut Vec<u8>, &TableOptions) -> Result<(), E>,
) -> Result<(), E> {
    let opts = TableOptions {
        no_headers: !first,
        ..opts
    };
    let meta = TableMeta {
        resource_version,
        ..TableMeta::default()
    };
    open_array(out, table_head(&meta, &opts), "rows");
    row(out, &opts)?;
    out.extend_from_slice(b"]}");
    Ok(())
}

/// `{"type":ty,"object":obj}\n`.
fn value_line(ty: &str, obj: Value) -> Vec<u8> {
    let mut line = serde_json::to_vec(&json!({"type": ty, "object": obj})).unwrap_or_default();
    line.push(b'\n');
    line
}

/// The lines of one JSON watch stream, in the representation its request negotiated:
/// what [`WatchLines::line`] writes for each item the registry hands out.
///
/// - An event (`Output::Object`): a change's line is written from its stored bytes once and
///   shared by every watcher without selectors ([`WatchEncoding::json_line`]); an initial
///   event's line is written from its stored bytes for this watcher.
/// - A Table (`kubectl get -w`) or `PartialObjectMetadata` line (metadata informers) is
///   written from the stored bytes by each watcher (a Table's ages are its own), decoded
///   where that declines; only the first object line of a Table carries column definitions.
/// - Items the registry decoded (selectors), bookmarks and errors are written from their
///   decoded form.
pub struct WatchLines {
    group: ApiGroup,
    out: Output,
    include: IncludeObject,
    clock: Arc<dyn Clock>,
    first: bool,
}

impl WatchLines {
    /// The lines of a watch of `group` answered as `out` (`include` for a Table), Table ages
    /// at `clock`'s now when each line is written.
    pub fn new(
        group: ApiGroup,
        out: Output,
        include: IncludeObject,
        clock: Arc<dyn Clock>,
    ) -> Self {
        WatchLines {
            group,
            out,
            include,
            clock,
            first: true,
        }
    }

    /// The line of `item`; `None` when there is none to send (an event whose stored bytes
    /// do not decode: logged, and skipped as a list skips it).
    pub fn line(&mut self, item: WatchItem) -> Option<Bytes> {
        let group = self.group;
        let stored = match (&item, self.out) {
            (WatchItem::Change(c), Output::Object) => {
                let line = c.encoding(WatchEncoding::json_line(group), |c| {
                    let (bytes, revision) = c.stored();
                    stored_watch_line(group, c.kind(), bytes, revision)
                        .map(Bytes::from)
                        .unwrap_or_default()
                });
                return (!line.is_empty()).then_some(line);
            }
            (WatchItem::Initial(s), Output::Object) => {
                return stored_watch_line(group, ChangeKind::Added, &s.bytes, s.revision)
                    .map(Bytes::from);
            }
            (WatchItem::Change(c), _) => Some((c.kind(), c.stored())),
            (WatchItem::Initial(s), _) => Some((ChangeKind::Added, (&s.bytes[..], s.revision))),
            _ => None,
        };
        if let Some((kind, (bytes, revision))) = stored {
            let shape = ListShape::of(self.out, self.include, self.clock.now());
            if let Some(line) =
                stored_shape_watch_line(group, kind, bytes, revision, shape, self.first)
            {
                self.first = false;
                return Some(Bytes::from(line));
            }
        }
        let item = item.decode()?;
        let is_object = matches!(
            item,
            DecodedItem::Added(_) | DecodedItem::Modified(_) | DecodedItem::Deleted(_)
        );
        let line = decoded_watch_line(
            group,
            &item,
            self.out,
            self.include,
            self.clock.now(),
            self.first,
        );
        if is_object {
            self.first = false;
        }
        Some(Bytes::from(line))
    }
}

/// The protobuf watch frame ([`protobuf::watch_frame`]) of `item` in `group`'s shape; a
/// change's frame is made once and shared by every watcher without selectors
/// ([`WatchEncoding::protobuf_frame`]), as the JSON line is. `None` for an event whose
/// stored bytes do not decode (logged).
pub fn protobuf_frame(group: ApiGroup, item: WatchItem) -> Option<Bytes> {
    let frame_of = move |item: DecodedItem| -> Bytes {
        let (ty, object) = match item {
            DecodedItem::Added(e) => ("ADDED", protobuf::event_object(group, &e)),
            DecodedItem::Modified(e) => ("MODIFIED", protobuf::event_object(group, &e)),
            DecodedItem::Deleted(e) => ("DELETED", protobuf::event_object(group, &e)),
            DecodedItem::Bookmark {
                resource_version,
                initial_events_end,
            } => (
                "BOOKMARK",
                protobuf::bookmark_object(group, &resource_version, initial_events_end),
            ),
            DecodedItem::Error(e) => ("ERROR", protobuf::status_object(&e)),
        };
        Bytes::from(protobuf::watch_frame(ty, object))
    };
    match item {
        WatchItem::Change(c) => {
            let frame = c.encoding(WatchEncoding::protobuf_frame(group), |c| {
                c.decoded().map(frame_of).unwrap_or_default()
            });
            (!frame.is_empty()).then_some(frame)
        }
        item => item.decode().map(frame_of),
    }
}

/// The JSON watch line (`{"type":…,"object":…}\n`) of the event stored as `stored`, shown at
/// `revision`: the line [`decoded_watch_line`] makes for the decoded event, as a JSON value
/// (keys in another order), its object made as [`stored_object_into`] makes it. `None`
/// (logged) when the bytes do not decode.
fn stored_watch_line(
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
/// [`encode`](herald_wire::stored::encode)) in `group`'s shape, with `resourceVersion` =
/// `revision`: the object [`event_json`] renders for the decoded event. On core/v1 it is the
/// stored bytes with `kind`, `apiVersion` and the resourceVersion spliced in (decoded when
/// the bytes have no `metadata` object to splice into); on
/// `events.k8s.io/v1` it is transcoded from them ([`events_v1`]: equal as a JSON
/// value, keys in another order), or decoded when the transcoder declines. An error (and
/// `out` untouched) when the bytes do not decode, except where the stored bytes are copied
/// unchecked: all of them on core/v1, the `metadata` on `events.k8s.io/v1`.
pub fn stored_object_into(
    out: &mut Vec<u8>,
    group: ApiGroup,
    stored: &[u8],
    revision: Revision,
) -> Result<(), ApiError> {
    const CORE_HEAD: &[u8] = br#"{"kind":"Event","apiVersion":"v1","#;
    let len = out.len();
    if group == ApiGroup::Core && stored.first() == Some(&b'{') && stored.get(1) != Some(&b'}') {
        out.extend_from_slice(CORE_HEAD);
        if splice_resource_version_into(out, &stored[1..], revision) {
            return Ok(());
        }
        out.truncate(len);
    }
    if group == ApiGroup::EventsV1 && events_v1::write_item(out, stored, revision, true) {
        return Ok(());
    }
    let e = decode_at(stored, revision)?;
    if let Err(err) = serde_json::to_writer(&mut *out, &event_json(group, &e)) {
        out.truncate(len);
        return Err(encoding_error(err));
    }
    Ok(())
}

/// What a streamed list ([`list`], [`parallel_list`]) holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListShape {
    /// An `EventList` in the group's shape.
    Events,
    /// A `meta.k8s.io` `Table` of the events, one row each, with ages at `now` (what
    /// `kubectl get events` and dashboards ask for).
    Table {
        /// Version of the Table and what each row's `object` holds.
        opts: TableOptions,
        /// The instant ages are computed at.
        now: Timestamp,
    },
    /// A `PartialObjectMetadataList` of the events' metadata (metadata-only informers).
    Metadata(MetaVersion),
}

impl ListShape {
    /// The shape of a list answered as `out` (`include` and `now` matter to a Table only).
    pub fn of(out: Output, include: IncludeObject, now: Timestamp) -> Self {
        match out {
            Output::Object => ListShape::Events,
            Output::Table(version) => ListShape::Table {
                opts: TableOptions {
                    version,
                    include_object: include,
                    no_headers: false,
                },
                now,
            },
            Output::PartialObjectMetadataList(v) | Output::PartialObjectMetadata(v) => {
                ListShape::Metadata(v)
            }
        }
    }

    /// True when each item is read from its stored bytes (transcoded or decoded), so a long
    /// list is worth rendering on both cores ([`parallel_list`]); core/v1 event items are
    /// only spliced, faster than a hand-off.
    pub fn decodes(self, group: ApiGroup) -> bool {
        !(self == ListShape::Events && group == ApiGroup::Core)
    }
}

/// About how many bytes [`list`] renders per chunk.
pub const LIST_CHUNK: usize = 64 * 1024;

/// The JSON bytes of a list of stored events in `shape`, as chunks of about
/// [`LIST_CHUNK`] bytes rendered one at a time as they are taken (so a large list is sent
/// while it is rendered, through a buffer of one chunk). The bytes are the JSON value
/// the decoded path makes for the events that decode (a `Value` tree, in the tests), keys
/// in another order; no `Value` tree is built.
///
/// - An `EventList` on core/v1 is the stored bytes of each item with the resourceVersion
///   spliced in (no decode); on `events.k8s.io/v1` items are transcoded from the stored
///   bytes ([`events_v1`]), or, where it declines, decoded, converted and written
///   ([`write_events_v1_item`]).
/// - A Table row or a `PartialObjectMetadata` is written from the stored bytes
///   ([`stored_table`]), or, where that declines, from the decoded event; a row's full
///   object (`includeObject=Object`) as [`stored_object_into`] writes it.
///
/// A stored event that does not decode is left out and logged, as
/// [`EventList::decode`] leaves it out, except where stored bytes
/// are copied unchecked: a core/v1 `EventList` item is sent as stored whenever it holds a
/// `metadata` object to splice into, and elsewhere the stored `metadata` is copied (the
/// rest is read and checked).
pub fn list(group: ApiGroup, shape: ListShape, l: EventList) -> impl Iterator<Item = Vec<u8>> {
    let mut pending = Some(list_head(group, shape, &l));
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
            let Some(item) = items.next() else {
                out.extend_from_slice(b"]}");
                done = true;
                break;
            };
            if push_item(&mut out, group, shape, &item, !first) {
                first = false;
            }
        }
        Some(out)
    })
}

/// Items per block of [`parallel_list`].
pub const LIST_BLOCK: usize = 2048;

/// The bytes of [`list`], for a long list whose items must each be decoded
/// ([`ListShape::decodes`]): blocks of [`LIST_BLOCK`] items are rendered on the blocking
/// pool, two at once and sent in order, so the list takes both cores of a small machine
/// while at most two blocks wait in memory. A block whose rendering fails (a bug) ends the
/// body with an error, so the client sees a broken list rather than a short one.
pub fn parallel_list(
    group: ApiGroup,
    shape: ListShape,
    l: EventList,
) -> impl futures::Stream<Item = Result<bytes::Bytes, tokio::task::JoinError>> + Send {
    use futures::StreamExt as _;
    let head = list_head(group, shape, &l);
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
                for item in &block {
                    push_item(&mut out, group, shape, item, true);
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

/// The bytes of an unpaged list read a page at a time ([`EventRegistry::list_streamed`]):
/// `first`'s head and items, then each page of `rest` as it is read, rendered while the next
/// one is read (on the blocking pool where items are decoded, [`ListShape::decodes`]), so at
/// most about two pages are in memory whatever the list's length. A page that cannot be
/// read (its revision compacted during a long list, a storage failure) ends the body with
/// an error: the client sees a broken list, never a short one that looks complete.
///
/// [`EventRegistry::list_streamed`]: crate::registry::EventRegistry::list_streamed
pub fn streamed_list(
    group: ApiGroup,
    shape: ListShape,
    first: EventList,
    rest: ListRest,
) -> impl futures::Stream<Item = Result<Bytes, std::io::Error>> + Send {
    use futures::StreamExt as _;
    let head = list_head(group, shape, &first);
    let pages = rest_pages(Some(rest));
    let render = move |items: Vec<Stored>| {
        // Every item is written after a comma; the list's first item must not be.
        let mut out = Vec::with_capacity(items.len() * 1700);
        for item in &items {
            push_item(&mut out, group, shape, item, true);
        }
        out
    };
    let mut started = false;
    let rendered = futures::stream::once(async move { Ok(first.items) })
        .chain(pages)
        .map(move |items| async move {
            match items {
                Ok(items) if shape.decodes(group) => {
                    tokio::task::spawn_blocking(move || render(items))
                        .await
                        .map_err(std::io::Error::other)
                }
                Ok(items) => Ok(render(items)),
                Err(e) => Err(e),
            }
        })
        .buffered(2)
        .filter_map(move |block| {
            let block = block.map(|out| {
                let out = Bytes::from(out);
                if !started && !out.is_empty() {
                    started = true;
                    return out.slice(1..);
                }
                out
            });
            // An empty chunk would end a chunked body.
            std::future::ready(match &block {
                Ok(out) if out.is_empty() => None,
                _ => Some(block),
            })
        });
    futures::stream::once(async move { Ok(Bytes::from(head)) })
        .chain(rendered)
        .chain(futures::stream::once(async {
            Ok(Bytes::from_static(b"]}"))
        }))
}

/// The pages of an unpaged list after its first, read from `rest` as they are asked for. A
/// page that cannot be read (its revision compacted during a long list, a storage failure)
/// is logged and ends them with an error, which ends the response's body.
fn rest_pages(
    rest: Option<ListRest>,
) -> impl futures::Stream<Item = Result<Vec<Stored>, std::io::Error>> + Send {
    futures::stream::unfold(rest, |rest| async move {
        let mut rest = rest?;
        match rest.next_page().await {
            Ok(Some(items)) => Some((Ok(items), Some(rest))),
            Ok(None) => None,
            Err(e) => {
                tracing::warn!(
                    revision = rest.revision(),
                    reason = ?e.reason,
                    message = %e.message,
                    "an unpaged list could not be completed; its response is cut short"
                );
                Some((Err(std::io::Error::other(e.message)), None))
            }
        }
    })
}

/// Lists longer than this many items are encoded as protobuf in two halves at once, on a
/// machine's cores; shorter ones are not worth the hand-off.
const PROTOBUF_PARALLEL_ITEMS: usize = 4096;

/// The protobuf `EventList` of `l` in `group`'s shape, as parts to send in order: byte for
/// byte what [`protobuf::transcode_json`] makes of the JSON list, encoded from the stored
/// bytes ([`protobuf::write_list_items`]) without the JSON list, its parse or a copy of the
/// whole body. The first part holds the envelope, whose length prefix needs every item
/// encoded first.
///
/// Item encoding is CPU work proportional to the list: it runs on the blocking pool, in two
/// halves at once for lists of more than 4,096 items, so the async workers keep serving.
///
/// Bound: the whole encoded list (about 600 bytes an event) is held in memory before its
/// first byte is sent. The HTTP layer uses it for lists of one page (a paged list, or an
/// unpaged one that fits in [`RegistryOptions::list_page_items`]); a longer unpaged list
/// goes out through [`streamed_protobuf_list`].
///
/// [`RegistryOptions::list_page_items`]: crate::registry::RegistryOptions::list_page_items
pub async fn protobuf_list(group: ApiGroup, l: EventList) -> Result<Vec<Vec<u8>>, ApiError> {
    let encode = move |items: Vec<Stored>| {
        let mut out = Vec::with_capacity(items.len() * 640);
        protobuf::write_list_items(&mut out, group, &items);
        out
    };
    let join = |r: Result<Vec<u8>, tokio::task::JoinError>| {
        r.map_err(|e| ApiError::internal(format!("encoding the list: {e}")))
    };
    let mut parts = Vec::with_capacity(4);
    let mut items = l.items;
    let mut encoded = Vec::with_capacity(2);
    if items.len() > PROTOBUF_PARALLEL_ITEMS {
        let second = items.split_off(items.len() / 2);
        let (a, b) = tokio::join!(
            tokio::task::spawn_blocking(move || encode(items)),
            tokio::task::spawn_blocking(move || encode(second)),
        );
        encoded.push(join(a)?);
        encoded.push(join(b)?);
    } else {
        encoded.push(join(
            tokio::task::spawn_blocking(move || encode(items)).await,
        )?);
    }
    let len = encoded.iter().map(Vec::len).sum();
    let (head, tail) = protobuf::event_list_envelope(group, l.resource_version, l.continue_, len);
    parts.push(head);
    parts.extend(encoded);
    parts.push(tail);
    Ok(parts)
}

/// A protobuf list longer than one page (an unpaged list that
/// [`EventRegistry::list_streamed`] left a [`ListRest`] of), as the bytes of a response body
/// sent in bounded memory.
///
/// The envelope starts with the length of everything after it, so the list is read twice at
/// its resourceVersion: page by page to add up the length of each page's encoding, then
/// again, from `again` (the same list at `first`'s revision, exactly), to encode and send
/// each page as it is read. The response's status and headers go out first (the request's
/// deadline is for them, and the first read of a list of millions takes longer); the body's
/// first bytes once the length is known. Both reads are of one snapshot and the encoding is
/// deterministic, so the body is as long as announced; should a page of either read fail (its
/// revision compacted during a long list), the second be at another revision, or its bytes
/// add up to another length, the body ends with an error: the client sees a broken list,
/// never a short one that looks whole.
///
/// Bound: about two pages of events and their encoding in memory whatever the list's
/// length, for encoding every item twice (on the blocking pool, as [`protobuf_list`] does).
///
/// [`EventRegistry::list_streamed`]: crate::registry::EventRegistry::list_streamed
pub fn streamed_protobuf_list<F, Fut>(
    group: ApiGroup,
    first: EventList,
    rest: ListRest,
    again: F,
) -> impl futures::Stream<Item = Result<Bytes, std::io::Error>> + Send + use<F, Fut>
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Result<(EventList, Option<ListRest>), ApiError>> + Send,
{
    use futures::StreamExt as _;
    use std::sync::atomic::{AtomicUsize, Ordering};

    let encode = move |items: Vec<Stored>| async move {
        tokio::task::spawn_blocking(move || {
            let mut out = Vec::with_capacity(items.len() * 640);
            protobuf::write_list_items(&mut out, group, &items);
            out
        })
        .await
        .map_err(std::io::Error::other)
    };
    let broken = |what: String| {
        tracing::warn!(
            "a protobuf list could not be completed ({what}); its response is cut short"
        );
        std::io::Error::other(what)
    };
    let start = async move {
        // The first read: only the length of the items' encoding.
        let revision = first.resource_version;
        let mut items_len = encode(first.items).await?.len();
        let mut pages = std::pin::pin!(rest_pages(Some(rest)));
        while let Some(items) = pages.next().await {
            items_len += encode(items?).await?.len();
        }
        // The second read, sent as it is read.
        let (second, rest) = again()
            .await
            .map_err(|e| broken(format!("its second read failed: {}", e.message)))?;
        if second.resource_version != revision {
            return Err(broken(format!(
                "its second read was at revision {}, not {revision}",
                second.resource_version
            )));
        }
        let (head, tail) = protobuf::event_list_envelope(group, revision, None, items_len);
        let sent = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&sent);
        let mismatch = move || {
            broken(format!(
                "its second read encoded to another length than the {items_len} bytes announced"
            ))
        };
        let items = futures::stream::once(async move { Ok(second.items) })
            .chain(rest_pages(rest))
            .map(move |items| async move { encode(items?).await })
            .buffered(2)
            .map(move |block| {
                let block = block?;
                let so_far = counted.fetch_add(block.len(), Ordering::Relaxed) + block.len();
                if so_far > items_len {
                    return Err(mismatch());
                }
                Ok(Bytes::from(block))
            })
            // An empty chunk would end a chunked body.
            .filter(|block| std::future::ready(!matches!(block, Ok(b) if b.is_empty())));
        let end = futures::stream::once(async move {
            if sent.load(Ordering::Relaxed) == items_len {
                Ok(Bytes::from(tail))
            } else {
                Err(mismatch())
            }
        });
        Ok(futures::stream::once(async move { Ok(Bytes::from(head)) })
            .chain(items)
            .chain(end))
    };
    futures::stream::once(start).flat_map(|started| match started {
        Ok(body) => body.left_stream(),
        Err(e) => futures::stream::once(async move { Err(e) }).right_stream(),
    })
}

/// The list's start, up to its first item: `{"kind":"EventList",…,"items":[`, or a Table's
/// `{…,"rows":[`.
fn list_head(group: ApiGroup, shape: ListShape, l: &EventList) -> Vec<u8> {
    let meta = || TableMeta {
        resource_version: Some(l.resource_version.clone()),
        continue_: l.continue_.clone(),
        remaining_item_count: None,
    };
    let (head, array) = match shape {
        ListShape::Events => (
            event_list_head(group, Some(&l.resource_version), l.continue_.as_deref()),
            "items",
        ),
        ListShape::Table { opts, .. } => (table_head(&meta(), &opts), "rows"),
        ListShape::Metadata(v) => (metadata_list_head(&meta(), v), "items"),
    };
    let mut out = Vec::new();
    open_array(&mut out, head, array);
    out
}

/// Appends the object `head` with one more member, the array `array`, left open for its
/// elements: `{…,"rows":[`.
fn open_array(out: &mut Vec<u8>, head: serde_json::Map<String, Value>, array: &str) {
    let empty = head.is_empty();
    // A map of `Value`s serializes into a `Vec` without error.
    let _ = serde_json::to_writer(&mut *out, &head);
    // Reopen the object: drop its closing brace.
    out.pop();
    if !empty {
        out.push(b',');
    }
    out.push(b'"');
    out.extend_from_slice(array.as_bytes());
    out.extend_from_slice(b"\":[");
}

/// Appends one list item (after a comma when `comma`); false, with `out` unchanged and a
/// warning logged, for a stored event that does not decode (where it is decoded: see
/// [`list`]).
fn push_item(
    out: &mut Vec<u8>,
    group: ApiGroup,
    shape: ListShape,
    item: &Stored,
    comma: bool,
) -> bool {
    let start = out.len();
    if comma {
        out.push(b',');
    }
    let written = match shape {
        ListShape::Events => push_event(out, group, item),
        ListShape::Table { .. } | ListShape::Metadata(_)
            if write_stored_object(out, group, shape, &item.bytes, item.revision) =>
        {
            Ok(())
        }
        ListShape::Table { opts, now } => item.decode().and_then(|e| {
            write_row(out, &e, &opts, now, |out| {
                stored_object_into(out, group, &item.bytes, item.revision)
            })
        }),
        ListShape::Metadata(v) => item.decode().and_then(|e| {
            write_partial_object_metadata(out, &e.metadata, v).map_err(encoding_error)
        }),
    };
    match written {
        Ok(()) => true,
        Err(err) => {
            out.truncate(start);
            tracing::warn!(revision = item.revision, error = %err, "skipping undecodable stored event");
            false
        }
    }
}

/// A Table row or a `PartialObjectMetadata` written from the stored bytes, without
/// decoding them ([`stored_table`]); false, with `out` untouched, where that declines (the
/// caller decodes the event instead), and always for an `EventList` item.
fn write_stored_object(
    out: &mut Vec<u8>,
    group: ApiGroup,
    shape: ListShape,
    stored: &[u8],
    revision: Revision,
) -> bool {
    match shape {
        ListShape::Events => false,
        ListShape::Table { opts, now } => {
            stored_table::write_row(out, stored, revision, &opts, now, |out| {
                stored_object_into(out, group, stored, revision).is_ok()
            })
        }
        ListShape::Metadata(v) => {
            stored_table::write_partial_object_metadata(out, stored, revision, v)
        }
    }
}

/// The JSON watch line of a stored change for a Table watcher (`kubectl get -w`: a one-row
/// Table, column definitions only when `first`) or a metadata watcher (a
/// `PartialObjectMetadata`), written from the stored bytes (as [`list`] writes them).
/// `None` for any other output, or where that declines: the caller decodes the change and
/// takes [`decoded_watch_line`]. (Public for the render benchmark; the server writes lines
/// through [`WatchLines`].)
pub fn stored_shape_watch_line(
    group: ApiGroup,
    kind: ChangeKind,
    stored: &[u8],
    revision: Revision,
    shape: ListShape,
    first: bool,
) -> Option<Vec<u8>> {
    let mut line = Vec::with_capacity(stored.len() + 512);
    line.extend_from_slice(b"{\"type\":\"");
    line.extend_from_slice(kind.as_str().as_bytes());
    line.extend_from_slice(b"\",\"object\":");
    match shape {
        ListShape::Events => return None,
        ListShape::Metadata(_) => {
            if !write_stored_object(&mut line, group, shape, stored, revision) {
                return None;
            }
        }
        ListShape::Table { opts, now } => {
            let rv = Some(revision.to_string());
            one_row_table(&mut line, rv, opts, first, |line, &opts| {
                let shape = ListShape::Table { opts, now };
                write_stored_object(line, group, shape, stored, revision)
                    .then_some(())
                    .ok_or(())
            })
            .ok()?;
        }
    }
    line.extend_from_slice(b"}\n");
    Some(line)
}

/// An `EventList` item: `kind` and `apiVersion` left out.
fn push_event(out: &mut Vec<u8>, group: ApiGroup, item: &Stored) -> Result<(), ApiError> {
    let transcoded = match group {
        ApiGroup::Core => splice_resource_version_into(out, &item.bytes, item.revision),
        ApiGroup::EventsV1 => events_v1::write_item(out, &item.bytes, item.revision, false),
    };
    if transcoded {
        return Ok(());
    }
    let e = item.decode()?;
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
    written.map_err(encoding_error)
}

/// A Table row of `e`: its cells, then its object as `opts` asks; `full_object` appends the
/// event (with `kind` and `apiVersion`) and is called only for `includeObject=Object`.
fn write_row(
    out: &mut Vec<u8>,
    e: &CoreEvent,
    opts: &TableOptions,
    now: Timestamp,
    full_object: impl FnOnce(&mut Vec<u8>) -> Result<(), ApiError>,
) -> Result<(), ApiError> {
    table::write_row(
        out,
        &event_cells(e, now),
        opts.include_object,
        |out| write_partial_object_metadata(out, &e.metadata, opts.version).map_err(encoding_error),
        full_object,
    )
}

fn encoding_error(err: serde_json::Error) -> ApiError {
    ApiError::internal(format!("encoding event: {err}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt as _;

    fn kv(i: usize) -> Stored {
        let e: CoreEvent = serde_json::from_value(json!({
            "metadata": {"name": format!("e.{i}"), "namespace": "ns", "uid": format!("u-{i}")},
            "involvedObject": {"kind": "Pod", "name": format!("p-{i}")},
            "reason": "R", "message": format!("m {i}"), "count": i,
        }))
        .unwrap();
        Stored {
            bytes: herald_wire::stored::encode(&e),
            revision: 5 + i as u64,
        }
    }

    /// A list of decoded events in the requested representation, as a `Value` tree: the
    /// plain path the streamed lists are held equal to.
    fn value_list(
        group: ApiGroup,
        items: &[CoreEvent],
        resource_version: &str,
        continue_: Option<&str>,
        out: Output,
        include: IncludeObject,
        now: Timestamp,
    ) -> Value {
        let meta = TableMeta {
            resource_version: Some(resource_version.to_string()),
            continue_: continue_.map(str::to_string),
            remaining_item_count: None,
        };
        match out {
            Output::Table(version) => {
                let opts = TableOptions {
                    version,
                    include_object: include,
                    no_headers: false,
                };
                table::event_table(items, &meta, now, &opts, &|e| event_json(group, e))
            }
            Output::PartialObjectMetadataList(v) | Output::PartialObjectMetadata(v) => {
                table::partial_object_metadata_list(items, &meta, v)
            }
            Output::Object => event_list(group, items, Some(resource_version), continue_),
        }
    }

    const NOW: &str = "2026-11-25T12:00:00Z";

    /// Every list shape: an `EventList`, Tables with each `includeObject` in both
    /// `meta.k8s.io` versions, and `PartialObjectMetadataList`s.
    fn shapes() -> Vec<ListShape> {
        let now: Timestamp = NOW.parse().unwrap();
        let mut shapes = vec![ListShape::Events];
        for version in [MetaVersion::V1, MetaVersion::V1Beta1] {
            shapes.push(ListShape::Metadata(version));
            for include_object in [
                IncludeObject::None,
                IncludeObject::Metadata,
                IncludeObject::Object,
            ] {
                let opts = TableOptions {
                    version,
                    include_object,
                    no_headers: false,
                };
                shapes.push(ListShape::Table { opts, now });
            }
        }
        shapes
    }

    /// The [`Output`] (and `includeObject`) a request gets `shape` for.
    fn output(shape: ListShape) -> (Output, IncludeObject) {
        match shape {
            ListShape::Events => (Output::Object, IncludeObject::Metadata),
            ListShape::Table { opts, .. } => (Output::Table(opts.version), opts.include_object),
            ListShape::Metadata(v) => (
                Output::PartialObjectMetadataList(v),
                IncludeObject::Metadata,
            ),
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

        /// A streamed list is the JSON value [`list`] makes of the events the registry
        /// decodes, in every shape and both groups, with and without a continue token, for
        /// any stored events and one that does not decode (left out by both).
        #[test]
        fn streamed_lists_are_the_value_lists(
            events in proptest::collection::vec(herald_wire::testing::event(), 0..4),
            cont: bool,
        ) {
            let mut items: Vec<Stored> = events
                .iter()
                .enumerate()
                .map(|(i, e)| Stored {
                    bytes: herald_wire::stored::encode(e),
                    revision: 7 + i as u64,
                })
                .collect();
            let bad = Stored {
                bytes: bytes::Bytes::from_static(b"{not json"),
                ..kv(9)
            };
            items.insert(items.len() / 2, bad);
            let mut l = EventList {
                items,
                resource_version: "42".into(),
                continue_: cont.then(|| "token".to_string()),
            };
            let mut decoded = l.decode();
            // Rows and metadata are written from the stored bytes; this event is declined
            // there (its message has an escaped surrogate pair, which the scanner leaves to
            // serde) and decoded instead.
            let declined = kv(10);
            let text = String::from_utf8(declined.bytes.to_vec()).unwrap();
            let escaped = text.replace("\"m 10\"", "\"m \\ud83d\\ude00\"");
            assert_ne!(text, escaped);
            let declined = Stored { bytes: escaped.into_bytes().into(), ..declined };
            let mut scratch = Vec::new();
            assert!(!stored_table::write_partial_object_metadata(
                &mut scratch, &declined.bytes, 1, MetaVersion::V1
            ));
            decoded.push(declined.decode().unwrap());
            assert_eq!(decoded.last().unwrap().message.as_deref(), Some("m \u{1f600}"));
            l.items.push(declined);
            for group in [ApiGroup::Core, ApiGroup::EventsV1] {
                for shape in shapes() {
                    let (out, include) = output(shape);
                    let bytes: Vec<u8> = list(group, shape, l.clone()).flatten().collect();
                    let got: Value = serde_json::from_slice(&bytes).unwrap();
                    let want = value_list(
                        group, &decoded, &l.resource_version, l.continue_.as_deref(),
                        out, include, NOW.parse().unwrap(),
                    );
                    proptest::prop_assert_eq!(got, want, "{:?} {:?}", group, shape);
                }
            }
        }
    }

    proptest::proptest! {
        /// A watch line of a decoded event is written straight, and is the JSON value of
        /// the `Value`-built line, for any event, each change type, first or not, as an
        /// event, a `PartialObjectMetadata` or a Table with every `includeObject`, in both
        /// `meta.k8s.io` versions and both groups.
        #[test]
        fn watch_lines_are_the_value_lines(
            e in herald_wire::testing::event(),
            rv in proptest::option::of(1u64..u64::MAX),
            first: bool,
        ) {
            let mut e = e;
            e.metadata.resource_version = rv.map(|rv| rv.to_string());
            let now: Timestamp = NOW.parse().unwrap();
            let items = [
                ("ADDED", DecodedItem::Added(e.clone())),
                ("MODIFIED", DecodedItem::Modified(e.clone())),
                ("DELETED", DecodedItem::Deleted(e.clone())),
            ];
            let mut outputs = vec![(Output::Object, IncludeObject::Metadata)];
            for v in [MetaVersion::V1, MetaVersion::V1Beta1] {
                outputs.push((Output::PartialObjectMetadata(v), IncludeObject::Metadata));
                for include in
                    [IncludeObject::None, IncludeObject::Metadata, IncludeObject::Object]
                {
                    outputs.push((Output::Table(v), include));
                }
            }
            for group in [ApiGroup::Core, ApiGroup::EventsV1] {
                for &(out, include) in &outputs {
                    // Written straight, not by the `Value` fallback.
                    let mut obj = Vec::new();
                    let written = write_watch_object(&mut obj, group, &e, out, include, now, first);
                    proptest::prop_assert!(written.is_ok(), "{:?} {:?}", out, written);
                    for (ty, item) in &items {
                        let line = decoded_watch_line(group, item, out, include, now, first);
                        proptest::prop_assert_eq!(line.last(), Some(&b'\n'));
                        let got: Value = serde_json::from_slice(&line).unwrap();
                        let want = json!({
                            "type": ty,
                            "object": object(group, &e, out, include, now, !first),
                        });
                        proptest::prop_assert_eq!(got, want, "{:?} {:?} {:?}", group, out, include);
                    }
                }
            }
        }

        /// A Table or metadata watcher's line written from the stored bytes is the line of
        /// the decoded change, as a JSON value, for any stored event, each change type,
        /// first or not, every `includeObject`, both `meta.k8s.io` versions and both groups.
        #[test]
        fn stored_shape_watch_lines_are_the_decoded_lines(
            e in herald_wire::testing::event(),
            revision in 1u64..u64::MAX,
            first: bool,
        ) {
            let stored = herald_wire::stored::encode(&e);
            let decoded = decode_at(&stored, revision).unwrap();
            let now: Timestamp = NOW.parse().unwrap();
            let declinable = serde_json::from_slice::<Value>(&stored).unwrap()["metadata"]
                .to_string()
                .contains("\"resourceVersion\"");
            for group in [ApiGroup::Core, ApiGroup::EventsV1] {
                for v in [MetaVersion::V1, MetaVersion::V1Beta1] {
                    let mut outputs =
                        vec![(Output::PartialObjectMetadata(v), IncludeObject::Metadata)];
                    for include in
                        [IncludeObject::None, IncludeObject::Metadata, IncludeObject::Object]
                    {
                        outputs.push((Output::Table(v), include));
                    }
                    for (out, include) in outputs {
                        let shape = ListShape::of(out, include, now);
                        for (kind, item) in [
                            (ChangeKind::Added, DecodedItem::Added(decoded.clone())),
                            (ChangeKind::Deleted, DecodedItem::Deleted(decoded.clone())),
                        ] {
                            let line = stored_shape_watch_line(
                                group, kind, &stored, revision, shape, first,
                            );
                            proptest::prop_assert!(
                                line.is_some() || declinable,
                                "declined {:?} {:?}",
                                out,
                                include
                            );
                            let Some(line) = line else { continue };
                            proptest::prop_assert_eq!(line.last(), Some(&b'\n'));
                            let got: Value = serde_json::from_slice(&line).unwrap();
                            let want: Value = serde_json::from_slice(
                                &decoded_watch_line(group, &item, out, include, now, first),
                            ).unwrap();
                            proptest::prop_assert_eq!(
                                got, want, "{:?} {:?} {:?}", group, out, include
                            );
                        }
                    }
                }
            }
            // An EventList item is not this function's.
            proptest::prop_assert!(stored_shape_watch_line(
                ApiGroup::Core, ChangeKind::Added, &stored, revision, ListShape::Events, first
            ).is_none());
        }
    }

    /// The parallel renderer sends the bytes the sequential one does, in both groups and
    /// every shape, over several blocks, when the list's first items (a whole first block)
    /// do not decode, and for an empty list.
    #[tokio::test]
    async fn parallel_lists_are_the_sequential_bytes() {
        let bad = |i: usize| Stored {
            bytes: bytes::Bytes::from_static(b"{not json"),
            ..kv(i)
        };
        let cases: Vec<Vec<Stored>> = vec![
            (0..2 * LIST_BLOCK + 7).map(kv).collect(),
            (0..LIST_BLOCK + 1)
                .map(bad)
                .chain((0..LIST_BLOCK + 5).map(kv))
                .collect(),
            Vec::new(),
        ];
        for group in [ApiGroup::Core, ApiGroup::EventsV1] {
            for shape in shapes() {
                for items in &cases {
                    let l = EventList {
                        items: items.clone(),
                        resource_version: "9".into(),
                        continue_: None,
                    };
                    let want: Vec<u8> = list(group, shape, l.clone()).flatten().collect();
                    let got: Vec<u8> = parallel_list(group, shape, l)
                        .map(|r| r.unwrap().to_vec())
                        .concat()
                        .await;
                    assert!(got == want, "{group:?} {shape:?}, {} items", items.len());
                    let v: Value = serde_json::from_slice(&got).unwrap();
                    let array = match shape {
                        ListShape::Table { .. } => "rows",
                        _ => "items",
                    };
                    assert_eq!(
                        v[array].as_array().unwrap().len(),
                        items
                            .iter()
                            .filter(|s| s.bytes[0] == b'{' && s.bytes[1] != b'n')
                            .count()
                    );
                }
            }
        }
    }

    /// The protobuf list made from the store is byte for byte what the JSON list transcodes to,
    /// in both groups, with a continue token, with an undecodable item skipped, and long enough
    /// to be encoded in two halves.
    #[tokio::test]
    async fn lists_encode_from_the_store_as_the_json_list_transcodes() {
        use herald_wire::protobuf::{transcode_json, unwrap};
        use herald_wire::stored::encode;
        use k8s_pb::api::core::v1::EventList as CoreList;
        use k8s_pb::api::events::v1::EventList as EventsList;
        use prost::Message as _;

        let kv = |i: usize| {
            let e: CoreEvent = serde_json::from_value(json!({
                "metadata": {
                    "name": format!("e.{i}"), "namespace": "ns", "uid": format!("u-{i}"),
                    "creationTimestamp": "2026-11-21T23:59:00Z",
                    "labels": {"app": "web"},
                    "managedFields": [{"manager": "m", "operation": "Update", "apiVersion": "v1",
                        "time": "2026-11-21T23:59:00Z", "fieldsType": "FieldsV1",
                        "fieldsV1": {"f:message": {}, "f:count": {}}}],
                },
                "involvedObject": {"kind": "Pod", "name": format!("p-{i}"), "namespace": "ns"},
                "reason": "BackOff", "message": format!("message {i}"), "count": i,
                "firstTimestamp": "2026-11-21T23:59:00Z", "lastTimestamp": "2026-11-21T23:59:30Z",
                "eventTime": if i.is_multiple_of(2) { json!("2026-11-21T23:59:00.123456Z") } else { json!(null) },
                "source": {"component": "kubelet"}, "type": "Warning",
                "reportingComponent": "kubelet", "reportingInstance": "node-1",
                "action": "Pulling",
                "related": if i.is_multiple_of(3) { json!({"kind": "Node", "name": "n"}) } else { json!(null) },
                "series": match i % 3 {
                    0 => json!({"count": 2, "lastObservedTime": "2026-11-21T23:59:30.500000Z"}),
                    1 => json!({"count": 1, "lastObservedTime": herald_wire::json::ZERO_MICRO}),
                    _ => json!(null),
                },
            }))
            .unwrap();
            Stored {
                bytes: encode(&e),
                revision: 10 + i as u64,
            }
        };
        for (n, group) in [
            (3, ApiGroup::Core),
            (3, ApiGroup::EventsV1),
            (PROTOBUF_PARALLEL_ITEMS + 3, ApiGroup::Core),
            (PROTOBUF_PARALLEL_ITEMS + 3, ApiGroup::EventsV1),
        ] {
            let mut items: Vec<Stored> = (0..n).map(kv).collect();
            items.insert(1, {
                let mut bad = kv(n);
                bad.bytes = bytes::Bytes::from_static(b"{not json");
                bad
            });
            let l = EventList {
                items,
                resource_version: "99".into(),
                continue_: Some("token".into()),
            };
            let json: Vec<u8> = list(group, ListShape::Events, l.clone())
                .flatten()
                .collect();
            let want = transcode_json(&json).expect("the JSON list transcodes");
            let got = protobuf_list(group, l).await.unwrap().concat();
            assert!(got == want, "{group:?} list of {n} differs");
            let raw = unwrap(&got, "EventList").unwrap().raw;
            let items = match group {
                ApiGroup::Core => CoreList::decode(&raw[..]).unwrap().items.len(),
                ApiGroup::EventsV1 => EventsList::decode(&raw[..]).unwrap().items.len(),
            };
            assert_eq!(items, n, "{group:?}");
        }
    }
}
