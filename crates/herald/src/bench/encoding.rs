//! The wire encoding of a bench run (`--encoding`): JSON, as kubectl and most controllers
//! speak it, or Kubernetes protobuf, as kube's own components (kubelet, the controller
//! manager) and client-go programs configured for it do.
//!
//! With protobuf the creates, their answers, the watch streams and the timed list are all
//! protobuf; only the bench's own set-up requests (`/version`, the starting
//! resourceVersion, the protobuf probe's fallback) stay JSON. Event bodies are built as JSON ([`workload::body`]) and
//! transcoded once each, with the server crate's own encoder, so both encodings carry the
//! same events.
//!
//! [`workload::body`]: super::workload::body

use std::ops::Range;

use bytes::Bytes;
use herald_wire::protobuf as pb;
use k8s_pb::apimachinery::pkg::apis::meta::v1::WatchEvent;
use prost::Message as _;
use serde::Serialize;

/// The largest watch record (a JSON line or a protobuf frame) a watcher accepts; a larger
/// one ends the stream (counted as a reconnect: it is reopened from the last
/// resourceVersion). Events are at most a few KiB.
pub const MAX_RECORD: usize = 4 * 1024 * 1024;

/// How requests and responses are encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Encoding {
    /// application/json, as kubectl sends it; watches are JSON lines.
    Json,
    /// application/vnd.kubernetes.protobuf, as kube's components send it; watches are
    /// length-prefixed frames.
    Protobuf,
}

impl Encoding {
    /// The media type sent as Content-Type and Accept.
    pub fn media_type(self) -> &'static str {
        match self {
            Encoding::Json => "application/json",
            Encoding::Protobuf => pb::MEDIA_TYPE,
        }
    }

    /// True when a response's Content-Type is this encoding (parameters such as
    /// `;stream=watch` ignored).
    pub fn is_content_type(self, content_type: &str) -> bool {
        match self {
            Encoding::Json => content_type
                .split(';')
                .next()
                .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json")),
            Encoding::Protobuf => pb::is_protobuf(content_type),
        }
    }

    /// The create body of a JSON event in this encoding; `None` when the JSON is not a
    /// core/v1 Event the protobuf encoder can take.
    pub fn create_body(self, json: String) -> Option<Bytes> {
        match self {
            Encoding::Json => Some(Bytes::from(json)),
            Encoding::Protobuf => pb::transcode_json(json.as_bytes()).map(Bytes::from),
        }
    }

    /// Splits a watch body into its records as it arrives (see [`Records`]).
    pub fn records(self) -> Records {
        Records {
            encoding: self,
            partial: Vec::new(),
        }
    }

    /// True for an `ERROR` watch record (a `Status`, which has no resourceVersion to resume
    /// from), read from its first field without a decode.
    pub fn is_error(self, record: &[u8]) -> bool {
        match self {
            // `type` is written first by kube-apiserver, last by key-sorting encoders.
            Encoding::Json => {
                record.starts_with(br#"{"type":"ERROR""#)
                    || record.ends_with(br#","type":"ERROR"}"#)
            }
            // `WatchEvent.type` is field 1: its tag, its length, then the text.
            Encoding::Protobuf => record.starts_with(b"\x0a\x05ERROR"),
        }
    }

    /// The `metadata.resourceVersion` of the object in one watch record, if it has one.
    pub fn resource_version(self, record: &[u8]) -> Option<String> {
        match self {
            Encoding::Json => {
                const KEY: &[u8] = br#""resourceVersion":""#;
                let at = memchr::memmem::find(record, KEY)? + KEY.len();
                let rest = &record[at..];
                let end = memchr::memchr(b'"', rest)?;
                Some(std::str::from_utf8(&rest[..end]).ok()?.to_string())
            }
            Encoding::Protobuf => {
                let ev = WatchEvent::decode(record).ok()?;
                let wrapped = ev.object?.raw?;
                let object = pb::unwrap(&wrapped, "Event").ok()?;
                WithMetadata::decode(object.raw.as_slice())
                    .ok()?
                    .metadata?
                    .resource_version
            }
        }
    }
}

/// Any Kubernetes object's message read for its `metadata` (field 1 in every kind, an event
/// of either group, a bookmark or a `Status`); the other fields are skipped unread.
#[derive(Clone, PartialEq, prost::Message)]
struct WithMetadata {
    #[prost(message, optional, tag = "1")]
    metadata: Option<k8s_pb::apimachinery::pkg::apis::meta::v1::ObjectMeta>,
}

/// A watch body split into records: JSON lines (without the newline) or protobuf frames
/// (without the 4-byte length), whatever the chunking of the body. A record split across
/// chunks is kept until it is whole; bound: [`MAX_RECORD`] bytes.
#[derive(Debug)]
pub struct Records {
    encoding: Encoding,
    partial: Vec<u8>,
}

/// A watch record was longer than [`MAX_RECORD`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordTooLong;

impl Records {
    /// Calls `each` with every record that `chunk` completes, in order, and where it lies in
    /// `chunk` (`None` for the one completed from bytes of earlier chunks).
    pub fn feed(
        &mut self,
        chunk: &[u8],
        mut each: impl FnMut(&[u8], Option<Range<usize>>),
    ) -> Result<(), RecordTooLong> {
        let mut rest = chunk;
        if !self.partial.is_empty() {
            // `partial` holds the start of one record; only the bytes that complete it are
            // copied.
            while self.complete(&self.partial)?.is_none() {
                match self.missing(&self.partial, rest)? {
                    Missing::Bytes(n) if n <= rest.len() => {
                        self.partial.extend_from_slice(&rest[..n]);
                        rest = &rest[n..];
                    }
                    Missing::Bytes(_) | Missing::Unknown => {
                        self.partial.extend_from_slice(rest);
                        // A frame's length was checked when it arrived.
                        if self.encoding == Encoding::Json && self.partial.len() > MAX_RECORD {
                            return Err(RecordTooLong);
                        }
                        return Ok(());
                    }
                }
            }
            let pending = std::mem::take(&mut self.partial);
            if let Some((record, _)) = self.complete(&pending)? {
                each(record, None);
            }
            self.partial = pending;
            self.partial.clear();
        }
        while let Some((record, used)) = self.complete(rest)? {
            let start = chunk.len() - rest.len();
            let at = match self.encoding {
                Encoding::Json => start..start + record.len(),
                Encoding::Protobuf => start + 4..start + used,
            };
            each(record, Some(at));
            rest = &rest[used..];
        }
        if !rest.is_empty() {
            self.partial.extend_from_slice(rest);
        }
        Ok(())
    }

    /// The first whole record of `buf` and the bytes it takes, or `None` when `buf` does not
    /// hold one yet.
    fn complete<'b>(&self, buf: &'b [u8]) -> Result<Option<(&'b [u8], usize)>, RecordTooLong> {
        match self.encoding {
            Encoding::Json => match memchr::memchr(b'\n', buf) {
                Some(nl) if nl > MAX_RECORD => Err(RecordTooLong),
                Some(nl) => Ok(Some((&buf[..nl], nl + 1))),
                None if buf.len() > MAX_RECORD => Err(RecordTooLong),
                None => Ok(None),
            },
            Encoding::Protobuf => {
                let Some(len) = frame_len(buf)? else {
                    return Ok(None);
                };
                Ok(buf.get(4..4 + len).map(|record| (record, 4 + len)))
            }
        }
    }

    /// How many bytes of `next` the record pending in `partial` still needs.
    fn missing(&self, partial: &[u8], next: &[u8]) -> Result<Missing, RecordTooLong> {
        Ok(match self.encoding {
            Encoding::Json => match memchr::memchr(b'\n', next) {
                Some(nl) => Missing::Bytes(nl + 1),
                None => Missing::Unknown,
            },
            Encoding::Protobuf => match frame_len(partial)? {
                Some(len) => Missing::Bytes(4 + len - partial.len()),
                None => Missing::Bytes(4 - partial.len()),
            },
        })
    }
}

enum Missing {
    Bytes(usize),
    Unknown,
}

/// The length of the frame starting `buf`, once its 4-byte length has arrived.
fn frame_len(buf: &[u8]) -> Result<Option<usize>, RecordTooLong> {
    let Some(head) = buf.first_chunk::<4>() else {
        return Ok(None);
    };
    let len = usize::try_from(u32::from_be_bytes(*head)).unwrap_or(usize::MAX);
    if len > MAX_RECORD {
        return Err(RecordTooLong);
    }
    Ok(Some(len))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(encoding: Encoding, body: &[u8], size: usize) -> Result<Vec<Vec<u8>>, RecordTooLong> {
        let mut records = encoding.records();
        let mut out = Vec::new();
        for chunk in body.chunks(size) {
            records.feed(chunk, |r, at| {
                if let Some(at) = at {
                    assert_eq!(&chunk[at], r);
                }
                out.push(r.to_vec());
            })?;
        }
        Ok(out)
    }

    #[test]
    fn json_lines_split_whatever_the_chunks() {
        let body = b"{\"a\":1}\n{\"b\":22}\n\n{\"c\":333}\n{\"partial";
        let want: Vec<Vec<u8>> = vec![
            b"{\"a\":1}".to_vec(),
            b"{\"b\":22}".to_vec(),
            Vec::new(),
            b"{\"c\":333}".to_vec(),
        ];
        for size in 1..=body.len() {
            assert_eq!(
                split(Encoding::Json, body, size).unwrap(),
                want,
                "chunks of {size}"
            );
        }
    }

    #[test]
    fn protobuf_frames_split_whatever_the_chunks() {
        let long = vec![b'z'; 70_000];
        let frames: [&[u8]; 4] = [b"one", b"", &long, b"three"];
        let mut body = Vec::new();
        for f in frames {
            body.extend_from_slice(&(f.len() as u32).to_be_bytes());
            body.extend_from_slice(f);
        }
        body.extend_from_slice(&[0, 0, 0, 9, b'x']);
        for size in (1..=300).chain([4096, 65_536, body.len()]) {
            let got = split(Encoding::Protobuf, &body, size).unwrap();
            assert_eq!(got, frames.map(<[u8]>::to_vec), "chunks of {size}");
        }
    }

    #[test]
    fn an_oversized_record_is_an_error() {
        let huge = ((MAX_RECORD + 1) as u32).to_be_bytes();
        assert_eq!(split(Encoding::Protobuf, &huge, 2), Err(RecordTooLong));
        let line = vec![b'x'; MAX_RECORD + 2];
        assert_eq!(split(Encoding::Json, &line, 1 << 20), Err(RecordTooLong));
    }

    #[test]
    fn the_resource_version_is_read_in_either_encoding() {
        let event = serde_json::json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "a", "namespace": "n", "resourceVersion": "42"},
            "involvedObject": {"kind": "Pod", "name": "p"},
        });
        let line = serde_json::json!({"type": "ADDED", "object": event}).to_string();
        assert_eq!(
            Encoding::Json.resource_version(line.as_bytes()).as_deref(),
            Some("42")
        );
        let object = pb::transcode_json(event.to_string().as_bytes()).unwrap();
        let frame = pb::watch_frame("ADDED", object);
        assert_eq!(
            Encoding::Protobuf.resource_version(&frame[4..]).as_deref(),
            Some("42")
        );
        let bookmark = pb::watch_frame(
            "BOOKMARK",
            pb::bookmark_object(herald_core::event::ApiGroup::Core, "77", false),
        );
        assert_eq!(
            Encoding::Protobuf
                .resource_version(&bookmark[4..])
                .as_deref(),
            Some("77")
        );
        let v1 = serde_json::json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "b", "namespace": "n", "resourceVersion": "43"},
            "regarding": {"kind": "Pod", "name": "p"}, "eventTime": "2026-01-01T00:00:00.000000Z",
            "reportingController": "c", "reportingInstance": "i", "action": "A", "type": "Normal",
        });
        let object = pb::transcode_json(v1.to_string().as_bytes()).unwrap();
        let frame = pb::watch_frame("ADDED", object);
        assert_eq!(
            Encoding::Protobuf.resource_version(&frame[4..]).as_deref(),
            Some("43")
        );
        assert_eq!(Encoding::Protobuf.resource_version(b"\xff\xff"), None);
        // ERROR records are told apart without a decode, in either encoding.
        let status = pb::status_object(&herald_core::status::ApiError::expired("too old"));
        assert!(Encoding::Protobuf.is_error(&pb::watch_frame("ERROR", status)[4..]));
        assert!(!Encoding::Protobuf.is_error(&frame[4..]));
        assert!(Encoding::Json.is_error(br#"{"type":"ERROR","object":{"kind":"Status"}}"#));
        assert!(Encoding::Json.is_error(br#"{"object":{"kind":"Status"},"type":"ERROR"}"#));
        assert!(!Encoding::Json.is_error(line.as_bytes()));
    }
}
