//! The timed full list: one GET of every event of the namespace, timed to its last byte.
//!
//! The items are counted while the body arrives, by [`ItemCounter`], which looks for one
//! fixed byte sequence with SIMD (`memchr::memmem`) instead of collecting the body and parsing
//! it: holding a 100 MB body means touching 100 MB of fresh memory, which on a small VM takes
//! longer than the server needs to produce the list, and any parse, even a structural scan,
//! competes with the server for the CPU while it is sending (a byte-wise scanner here tripled
//! the measured time of a 100,000-event list). A protobuf list is counted by
//! [`ProtobufItemCounter`], which reads only the field headers and skips each item whole.

use anyhow::Context as _;
use bytes::Bytes;
use herald_wire::protobuf::MAGIC;
use http_body_util::{BodyExt as _, Full};
use k8s_pb::apimachinery::pkg::runtime::TypeMeta;
use prost::Message as _;
use tokio::time::Instant;

use super::conn::{Endpoint, connect};
use super::encoding::Encoding;
use super::summary::ListSummary;

/// Lists every event of the collection at `path` in one request, in `encoding`, and times it
/// to the last byte.
pub async fn timed_list(
    endpoint: &Endpoint,
    path: &str,
    encoding: Encoding,
) -> anyhow::Result<ListSummary> {
    let path = path.to_string();
    let mut sender = connect(endpoint)
        .await
        .context("connecting to list events")?;
    let request = |path: &str, accept: &str| {
        http::Request::get(path)
            .header(http::header::HOST, endpoint.addr.to_string())
            .header(http::header::ACCEPT, accept)
            .body(Full::new(Bytes::new()))
            .context("building the list request")
    };
    // Use the connection once first so the timing is the list alone.
    let warm = sender
        .send_request(request("/version", "application/json")?)
        .await
        .context("asking for /version before listing")?;
    warm.into_body()
        .collect()
        .await
        .context("reading /version before listing")?;

    sender
        .ready()
        .await
        .context("the connection closed before listing")?;
    let t = Instant::now();
    let resp = sender
        .send_request(request(&path, encoding.media_type())?)
        .await
        .context("listing events failed")?;
    let status = resp.status();
    let mut body = resp.into_body();
    let mut bytes = 0u64;
    let mut json = ItemCounter::default();
    let mut protobuf = ProtobufItemCounter::default();
    while let Some(frame) = body.frame().await {
        let frame = frame.context("reading the events list")?;
        if let Ok(data) = frame.into_data() {
            bytes += data.len() as u64;
            match encoding {
                Encoding::Json => json.feed(&data),
                Encoding::Protobuf => protobuf.feed(&data),
            }
        }
    }
    let millis = t.elapsed().as_secs_f64() * 1000.0;
    let items = match encoding {
        Encoding::Json => json.finish(),
        Encoding::Protobuf => protobuf.finish(),
    }
    .context("reading the events list")?;
    Ok(ListSummary {
        path,
        status: status.as_u16(),
        items: if status.is_success() { items } else { 0 },
        bytes,
        millis,
    })
}

/// Counts the items of an event list (core/v1 or events.k8s.io/v1, compact JSON as both
/// kube-apiserver and herald-server send it) fed in arbitrary chunks, without keeping them.
///
/// It counts the occurrences of `"metadata":{`. In JSON that byte sequence is always an object
/// key followed by an object: inside a string every `"` is escaped, so it cannot appear there.
/// An event has exactly one such key (its own metadata; its references, source, series and
/// `managedFields` have none), and the list adds one for its `ListMeta`. Bound: memory is the
/// needle's length.
#[derive(Debug, Default)]
pub struct ItemCounter {
    /// The last bytes seen (fewer than the needle), to find a needle split across chunks.
    tail: Vec<u8>,
    found: u64,
    /// The last two bytes that were not whitespace.
    last: [u8; 2],
}

const NEEDLE: &[u8] = br#""metadata":{"#;

impl ItemCounter {
    /// Scans the next chunk.
    pub fn feed(&mut self, chunk: &[u8]) {
        let keep = NEEDLE.len() - 1;
        if !self.tail.is_empty() {
            // Matches that start in the tail and end in this chunk: the tail and the chunk's
            // head are each shorter than the needle, so none is counted twice.
            self.tail.extend_from_slice(&chunk[..chunk.len().min(keep)]);
            self.found += memchr::memmem::find_iter(&self.tail, NEEDLE).count() as u64;
        }
        self.found += memchr::memmem::find_iter(chunk, NEEDLE).count() as u64;
        if chunk.len() >= keep {
            self.tail.clear();
            self.tail.extend_from_slice(&chunk[chunk.len() - keep..]);
        } else {
            if self.tail.is_empty() {
                self.tail.extend_from_slice(chunk);
            }
            // The tail already ends with this short chunk.
            let excess = self.tail.len().saturating_sub(keep);
            self.tail.drain(..excess);
        }
        let mut solid = chunk.iter().rev().filter(|b| !b.is_ascii_whitespace());
        if let Some(&z) = solid.next() {
            let y = solid.next().copied().unwrap_or(self.last[1]);
            self.last = [y, z];
        }
    }

    /// The count, or an error if the body was not a list (a list ends with its `items`
    /// array). A body cut short is already an error from the HTTP framing.
    pub fn finish(self) -> anyhow::Result<u64> {
        if &self.last != b"]}" || self.found == 0 {
            anyhow::bail!("the list ended before its JSON did");
        }
        Ok(self.found - 1)
    }
}

/// Counts the items of a protobuf event list (either group) fed in arbitrary chunks,
/// without keeping or decoding them.
///
/// The body is the magic `k8s\0` and a `runtime.Unknown` whose field 1 (`typeMeta`) names
/// the kind and whose field 2 (`raw`) is the `EventList`; the list's field 2 is repeated
/// `items`. Only the type and the field headers (tags and lengths, a few bytes each) are
/// read; every other byte is skipped, so the cost is per item, not per byte. Bound: the type
/// (at most [`MAX_TYPE_META`] bytes) and a few words of state.
#[derive(Debug, Default)]
pub struct ProtobufItemCounter {
    /// Magic bytes matched so far.
    magic: usize,
    state: Field,
    /// The `typeMeta` bytes read so far.
    type_meta: Vec<u8>,
    /// Bytes left in `raw` while inside it.
    inside: Option<u64>,
    raw_seen: bool,
    items: u64,
    broken: bool,
}

/// Where the counter is in the current field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    /// Reading a tag (a varint) from its `shift`th bit.
    Tag { value: u64, shift: u32 },
    /// Skipping a varint value.
    Varint,
    /// Reading the length of length-delimited field `field`.
    Len { field: u64, value: u64, shift: u32 },
    /// Skipping this many bytes of a value.
    Skip(u64),
    /// Keeping this many more bytes of `typeMeta`.
    Keep(u64),
}

/// The longest `typeMeta` the counter keeps (an apiVersion and a kind).
const MAX_TYPE_META: u64 = 1024;

impl Default for Field {
    fn default() -> Self {
        Field::Tag { value: 0, shift: 0 }
    }
}

impl ProtobufItemCounter {
    /// Scans the next chunk.
    pub fn feed(&mut self, chunk: &[u8]) {
        let mut i = 0;
        while i < chunk.len() && !self.broken {
            if self.magic < MAGIC.len() {
                self.broken = chunk[i] != MAGIC[self.magic];
                self.magic += 1;
                i += 1;
                continue;
            }
            if let Field::Skip(n) | Field::Keep(n) = self.state {
                let take = n.min((chunk.len() - i) as u64);
                if matches!(self.state, Field::Keep(_)) {
                    self.type_meta
                        .extend_from_slice(&chunk[i..i + take as usize]);
                    self.state = Field::Keep(n - take);
                } else {
                    self.state = Field::Skip(n - take);
                }
                self.consume(take);
                i += take as usize;
                if n == take {
                    self.field_done();
                }
                continue;
            }
            let b = chunk[i];
            i += 1;
            self.consume(1);
            let low = u64::from(b & 0x7f);
            let more = b & 0x80 != 0;
            self.state = match self.state {
                Field::Tag { value, shift } if shift < 64 => {
                    let value = value | low << shift;
                    if more {
                        Field::Tag {
                            value,
                            shift: shift + 7,
                        }
                    } else {
                        match value & 7 {
                            0 => Field::Varint,
                            1 => Field::Skip(8),
                            2 => Field::Len {
                                field: value >> 3,
                                value: 0,
                                shift: 0,
                            },
                            5 => Field::Skip(4),
                            _ => {
                                self.broken = true;
                                return;
                            }
                        }
                    }
                }
                Field::Varint if more => Field::Varint,
                Field::Varint => {
                    self.field_done();
                    continue;
                }
                Field::Len {
                    field,
                    value,
                    shift,
                } if shift < 64 => {
                    let value = value | low << shift;
                    if more {
                        Field::Len {
                            field,
                            value,
                            shift: shift + 7,
                        }
                    } else {
                        self.length(field, value);
                        continue;
                    }
                }
                Field::Tag { .. } | Field::Len { .. } | Field::Skip(_) | Field::Keep(_) => {
                    self.broken = true;
                    return;
                }
            };
        }
    }

    /// A length-delimited field `field` of `len` bytes starts.
    fn length(&mut self, field: u64, len: u64) {
        match self.inside {
            // `raw`: the list itself, read field by field.
            None if field == 2 && !self.raw_seen => {
                self.raw_seen = true;
                self.inside = Some(len);
                self.field_done();
            }
            Some(_) if field == 2 => {
                self.items += 1;
                self.state = Field::Skip(len);
                if len == 0 {
                    self.field_done();
                }
            }
            None if field == 1 && self.type_meta.is_empty() && len <= MAX_TYPE_META => {
                self.state = Field::Keep(len);
                if len == 0 {
                    self.field_done();
                }
            }
            _ => {
                self.state = Field::Skip(len);
                if len == 0 {
                    self.field_done();
                }
            }
        }
    }

    /// `n` bytes were read; inside `raw` they count against its length.
    fn consume(&mut self, n: u64) {
        if let Some(left) = self.inside {
            match left.checked_sub(n) {
                Some(left) => self.inside = Some(left),
                None => self.broken = true,
            }
        }
    }

    /// A field ended: the next byte is a tag, and the end of `raw` closes the list.
    fn field_done(&mut self) {
        self.state = Field::default();
        if self.inside == Some(0) {
            self.inside = None;
        }
    }

    /// The count, or an error if the body was not a whole protobuf list.
    pub fn finish(self) -> anyhow::Result<u64> {
        if self.broken
            || self.magic < MAGIC.len()
            || !self.raw_seen
            || self.inside.is_some()
            || self.state != Field::default()
        {
            anyhow::bail!("the list ended before its protobuf did");
        }
        let kind = TypeMeta::decode(self.type_meta.as_slice())
            .ok()
            .and_then(|t| t.kind)
            .unwrap_or_default();
        if !kind.ends_with("List") {
            anyhow::bail!("the answer is a {kind:?}, not a list");
        }
        Ok(self.items)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `body` to a new counter in chunks of `size` and finishes it.
    fn count_with<C: Default>(
        body: &[u8],
        size: usize,
        feed: fn(&mut C, &[u8]),
        finish: fn(C) -> anyhow::Result<u64>,
    ) -> anyhow::Result<u64> {
        let mut c = C::default();
        for chunk in body.chunks(size) {
            feed(&mut c, chunk);
        }
        finish(c)
    }

    fn count(body: &[u8], size: usize) -> anyhow::Result<u64> {
        count_with(body, size, ItemCounter::feed, ItemCounter::finish)
    }

    #[test]
    fn counts_items_across_chunk_boundaries() {
        let body = br#"{"kind":"EventList","apiVersion":"v1","metadata":{"resourceVersion":"9"},"items":[{"metadata":{"name":"a"},"message":"\"metadata\":{ in a message"},{"count":2,"metadata":{"name":"b","managedFields":[{"fieldsV1":{"f:metadata":{}}}]}},{"metadata":{"name":"c"}}]}"#;
        for size in [1, 2, 3, 7, 11, 12, 13, body.len()] {
            assert_eq!(count(body, size).unwrap(), 3, "chunks of {size}");
        }
        assert_eq!(
            count(br#"{"kind":"EventList","metadata":{},"items":[]}"#, 5).unwrap(),
            0
        );
        assert!(count(br#"{"kind":"Status","code":500}"#, 4).is_err());
        assert!(count(br#"{"metadata":{},"items":[{"metadata":{}}"#, 3).is_err());
    }

    use serde_json::json;

    fn count_protobuf(body: &[u8], size: usize) -> anyhow::Result<u64> {
        count_with(
            body,
            size,
            ProtobufItemCounter::feed,
            ProtobufItemCounter::finish,
        )
    }

    #[test]
    fn counts_protobuf_items_across_chunk_boundaries() {
        let event = |name: &str| {
            serde_json::json!({
                "metadata": {"name": name, "namespace": "n", "resourceVersion": "7",
                    "annotations": {"a": "x".repeat(300)}},
                "involvedObject": {"kind": "Pod", "name": "p"},
                "reason": "R", "message": "m", "count": 3,
            })
        };
        let list = |items: Vec<serde_json::Value>| {
            let json = serde_json::json!({
                "apiVersion": "v1", "kind": "EventList",
                "metadata": {"resourceVersion": "9", "continue": "abc"}, "items": items,
            });
            herald_wire::protobuf::transcode_json(json.to_string().as_bytes()).unwrap()
        };
        let body = list(vec![event("a"), event("b"), event("c")]);
        for size in [1, 2, 3, 5, 7, 64, 333, body.len()] {
            assert_eq!(count_protobuf(&body, size).unwrap(), 3, "chunks of {size}");
        }
        assert_eq!(count_protobuf(&list(Vec::new()), 3).unwrap(), 0);
        // Items of 0 and of more than 127 bytes (two-byte lengths), and an empty `raw`.
        let mut long = event("d");
        long["metadata"]["annotations"]["a"] = json!("y".repeat(20_000));
        let body = list(vec![json!({}), long, event("e")]);
        for size in [1, 2, 9, 4096, body.len()] {
            assert_eq!(count_protobuf(&body, size).unwrap(), 3, "chunks of {size}");
        }
        let empty_raw = herald_wire::protobuf::wrap("v1", "EventList", Vec::new());
        assert_eq!(count_protobuf(&empty_raw, 1).unwrap(), 0);
        // One event, or a Status, is not a list.
        for not_a_list in [
            json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "a"}}),
            json!({"apiVersion": "v1", "kind": "Status", "status": "Failure", "code": 500}),
        ] {
            let body =
                herald_wire::protobuf::transcode_json(not_a_list.to_string().as_bytes()).unwrap();
            assert!(count_protobuf(&body, 5).is_err(), "{not_a_list}");
        }
        // Cut short, or not protobuf at all.
        assert!(count_protobuf(&body[..body.len() - 1], 7).is_err());
        assert!(count_protobuf(&body[..40], 7).is_err());
        assert!(count_protobuf(br#"{"kind":"EventList","items":[]}"#, 4).is_err());
        assert!(count_protobuf(b"", 4).is_err());
    }
}
