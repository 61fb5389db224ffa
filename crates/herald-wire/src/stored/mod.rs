//! The stored form of an event and the ways back from it.
//!
//! Every event is stored once, as core/v1 JSON **without** `kind`, `apiVersion` and
//! `metadata.resourceVersion` (the resourceVersion is the key's revision and is put back on
//! read): [`encode`] writes it, [`decode_at`] reads it back into a typed event, and
//! [`splice_resource_version`] makes the core/v1 list item from it without decoding.
//! [`read`] reads its members in place (for the transcoders of [`crate::events_v1`],
//! [`crate::protobuf`] and [`crate::table`]); [`time`] reads its timestamps.

pub mod read;
pub mod time;

use bytes::Bytes;
use herald_core::event::CoreEvent;
use herald_core::event::convert::normalize_core;
use herald_core::status::ApiError;

use crate::Revision;

/// An event as the store holds it: the bytes [`encode`] wrote and the revision they were
/// written at (the event's `resourceVersion`). Cheap to clone (the bytes are shared).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    /// The stored bytes (see [`encode`]).
    pub bytes: Bytes,
    /// The revision of the write that stored them.
    pub revision: Revision,
}

impl Stored {
    /// The typed event, `resourceVersion` set ([`decode_at`]).
    pub fn decode(&self) -> Result<CoreEvent, ApiError> {
        decode_at(&self.bytes, self.revision)
    }
}

/// The stored bytes of `event`: its core/v1 wire JSON (as `/api/v1` returns it, zero
/// times as `null`) without `kind`, `apiVersion` and `resourceVersion`, so a list can send
/// stored bytes with only the resourceVersion spliced in ([`splice_resource_version`]).
///
/// Written straight from the typed event with `metadata` first and the other fields in the
/// order kube-apiserver writes them, so the splice point is found without a search; the
/// object equals [`core_v1_json`](crate::json::core_v1_json)'s minus `kind` and
/// `apiVersion`.
pub fn encode(event: &CoreEvent) -> Bytes {
    encode_owned(event.clone()).0
}

/// [`encode`] of an event the caller gives up: normalized in place rather than copied (a copy
/// and its drop cost as much as the encoding). Returns the stored bytes and the normalized
/// event, whose `resourceVersion` is left as it was.
pub fn encode_owned(event: CoreEvent) -> (Bytes, CoreEvent) {
    let mut e = normalize_core(event);
    let rv = e.metadata.resource_version.take();
    // Most events encode to 0.5–1 KiB; starting at 1 KiB saves the regrowth copies.
    let mut out = Vec::with_capacity(1024);
    crate::json::write::write_event(&mut out, &e);
    e.metadata.resource_version = rv;
    (Bytes::from(out), e)
}

/// Stored bytes (see [`encode`]) with `"resourceVersion":"<revision>"` inserted at the start
/// of the top-level `metadata` object: the core/v1 list item, without a decode/encode round
/// trip. `None` if the bytes have no `metadata` object (the caller falls back to decoding).
pub fn splice_resource_version(stored: &[u8], revision: Revision) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(stored.len() + 32);
    splice_resource_version_into(&mut out, stored, revision).then_some(out)
}

/// [`splice_resource_version`] appending to `out`; `false` (and `out` untouched) when the
/// bytes have no `metadata` object.
///
/// [`encode`] writes `metadata` first. Bytes stored by earlier versions have sorted keys;
/// for them the first `"metadata":{` in the text is the top-level key: keys sorting before it
/// (`action` … `message`) hold strings, where quotes are escaped, or `involvedObject`, which
/// has no `metadata` key.
pub fn splice_resource_version_into(out: &mut Vec<u8>, stored: &[u8], revision: Revision) -> bool {
    const KEY: &[u8] = b"\"metadata\":{";
    // `{"metadata":{…`, or the same without its brace (a caller writing its own head).
    let at = if stored.get(1..=KEY.len()) == Some(KEY) {
        1 + KEY.len()
    } else if stored.starts_with(KEY) {
        KEY.len()
    } else {
        match memchr::memmem::find(stored, KEY) {
            Some(at) => at + KEY.len(),
            None => return false,
        }
    };
    out.extend_from_slice(&stored[..at]);
    out.extend_from_slice(b"\"resourceVersion\":\"");
    // Written without an intermediate String: this runs once per item of a list.
    let _ = std::io::Write::write_fmt(out, format_args!("{revision}"));
    out.push(b'"');
    if stored.get(at) != Some(&b'}') {
        out.push(b',');
    }
    out.extend_from_slice(&stored[at..]);
    true
}

/// The event stored as `value`, with `resourceVersion` = `revision`.
pub fn decode_at(value: &[u8], revision: Revision) -> Result<CoreEvent, ApiError> {
    let undecodable =
        |err: &dyn std::fmt::Display| ApiError::internal(format!("decoding stored event: {err}"));
    // Checked as UTF-8 once: serde_json reads a `str` faster than bytes, whose strings it
    // checks one by one.
    let text = match simdutf8::basic::from_utf8(value) {
        Ok(text) => text,
        // `std` says where the bytes go wrong; `simdutf8` is three times faster when they do not.
        Err(_) => std::str::from_utf8(value).map_err(|err| undecodable(&err))?,
    };
    let mut e: CoreEvent = serde_json::from_str(text).map_err(|err| undecodable(&err))?;
    e.metadata.resource_version = Some(revision.to_string());
    Ok(e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::core_v1_json;
    use herald_core::event::convert::normalize_core;
    use serde_json::Value;

    #[test]
    fn spliced_bytes_equal_the_wire_json() {
        let mut e = CoreEvent::default();
        e.metadata.name = Some("a.1".into());
        e.metadata.namespace = Some("ns".into());
        e.message = Some(r#"a "metadata":{ trap"#.into());
        e.involved_object.name = Some("metadata".into());
        let stored = encode(&e);
        let item: Value =
            serde_json::from_slice(&splice_resource_version(&stored, 42).unwrap()).unwrap();
        e.metadata.resource_version = Some("42".into());
        let mut wire = core_v1_json(&e);
        let m = wire.as_object_mut().unwrap();
        m.remove("kind");
        m.remove("apiVersion");
        assert_eq!(item, wire);
        assert_eq!(decode_at(&stored, 42).unwrap(), normalize_core(e));

        let empty_meta = splice_resource_version(br#"{"metadata":{}}"#, 7).unwrap();
        assert_eq!(empty_meta, br#"{"metadata":{"resourceVersion":"7"}}"#);
        assert!(splice_resource_version(b"{}", 7).is_none());
    }

    /// What `encode` must write, as a JSON value: `core_v1_json` without `kind` and
    /// `apiVersion`.
    fn wire_without_type(e: &CoreEvent) -> Value {
        let mut e = e.clone();
        e.metadata.resource_version = None;
        let mut v = core_v1_json(&e);
        let m = v.as_object_mut().unwrap();
        m.remove("kind");
        m.remove("apiVersion");
        v
    }

    #[test]
    fn encode_writes_the_wire_json_metadata_first() {
        let full: CoreEvent = serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": "web.1", "namespace": "ns", "uid": "u", "resourceVersion": "9",
                "creationTimestamp": "2024-01-01T00:00:00Z",
                "labels": {"b": "2", "a": "1"}, "annotations": {"x": "y"},
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "q"}],
                "managedFields": [{"manager": "m", "operation": "Update", "fieldsType": "FieldsV1",
                                   "fieldsV1": {"metadata": {}, "f:count": {}}}],
                "finalizers": []
            },
            "involvedObject": {"kind": "Pod", "name": "web", "namespace": "ns", "uid": "", "fieldPath": "spec"},
            "related": {"kind": "Node", "name": "n1"},
            "reason": "BackOff", "message": "m \"metadata\":{ é", "type": "Warning", "action": "",
            "count": 3, "source": {"component": "kubelet", "host": "n1"},
            "firstTimestamp": "2024-01-01T00:00:00Z", "lastTimestamp": "2024-01-01T00:00:05Z",
            "eventTime": "2024-01-01T00:00:05.123456Z",
            "series": {"count": 2},
            "reportingComponent": "kubelet"
        }))
        .unwrap();
        let empty = CoreEvent::default();
        let mut no_series_time = full.clone();
        no_series_time.series = Some(Default::default());
        for e in [&full, &empty, &no_series_time] {
            let stored = encode(e);
            assert!(stored.starts_with(br#"{"metadata":{"#));
            let v: Value = serde_json::from_slice(&stored).unwrap();
            assert_eq!(v, wire_without_type(e));
            // Spliced, it is the list item with the resourceVersion.
            let item: Value =
                serde_json::from_slice(&splice_resource_version(&stored, 12).unwrap()).unwrap();
            let mut want = wire_without_type(e);
            want["metadata"]["resourceVersion"] = Value::from("12");
            assert_eq!(item, want);
        }
    }

    #[test]
    fn splice_finds_metadata_in_sorted_bytes_of_earlier_versions() {
        let sorted = br#"{"count":1,"involvedObject":{"kind":"Pod"},"message":"a \"metadata\":{","metadata":{"name":"x"},"type":"Normal"}"#;
        let item: Value =
            serde_json::from_slice(&splice_resource_version(sorted, 3).unwrap()).unwrap();
        assert_eq!(
            item["metadata"],
            serde_json::json!({"name": "x", "resourceVersion": "3"})
        );
        assert_eq!(item["message"], r#"a "metadata":{"#);
    }
}
