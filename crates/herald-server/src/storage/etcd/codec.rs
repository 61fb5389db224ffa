//! Values as kube-apiserver stores them in etcd, and Herald's stored form.
//!
//! The registry hands the backend an event in Herald's stored form
//! ([`herald_wire::stored::encode`]: core/v1 JSON without `kind`, `apiVersion` and
//! `resourceVersion`). kube-apiserver stores an event under `/registry/events/<ns>/<name>` in
//! one of two forms, chosen by its `--storage-media-type`:
//!
//! - **JSON**: the core/v1 object with `"kind":"Event","apiVersion":"v1"` first and no
//!   `resourceVersion`;
//! - **protobuf**: `k8s\0` then a `runtime.Unknown` whose `typeMeta` is `v1`/`Event` and whose
//!   `raw` is the `k8s.io.api.core.v1.Event` message ([`herald_wire::protobuf::wrap`]).
//!
//! [`ValueCodec::encode`] writes the form its [`StorageMediaType`] names;
//! [`ValueCodec::decode`] reads either form, whatever the option, so a Herald replica reads
//! what kube-apiserver wrote and the other way round.
//!
//! **What is not an event passes through.** A value the registry gives that is not an
//! object in Herald's stored form (the storage contract tests store opaque bytes), and a
//! stored value in neither of kube-apiserver's forms, are written and read as they are: the
//! backend stores bytes, it does not reject them. A stored value that looks like one of the
//! forms but does not decode is also read as it is (with a warning): the registry's decoder
//! then skips it with its own warning, as it does for any undecodable stored event.

use bytes::Bytes;
use herald_core::event::{ApiGroup, CoreEvent};
use herald_wire::protobuf;
use herald_wire::stored;

use super::StorageMediaType;

/// What kube-apiserver's JSON serializer writes before an event's `metadata`.
const JSON_HEAD: &[u8] = br#"{"kind":"Event","apiVersion":"v1","#;

/// Converts values between Herald's stored form and kube-apiserver's etcd values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ValueCodec {
    media_type: StorageMediaType,
}

impl ValueCodec {
    /// A codec that writes `media_type` (and reads both forms).
    pub fn new(media_type: StorageMediaType) -> Self {
        ValueCodec { media_type }
    }

    /// The etcd value for `value`, a stored event (see the module docs for other values).
    ///
    /// JSON is Herald's bytes with `kind` and `apiVersion` put in front of them (no
    /// re-encoding: the stored form writes its members in kube-apiserver's order already).
    /// Protobuf writes the event's message in the `k8s\0` envelope, transcoded from the
    /// stored JSON ([`protobuf::storage::storage_object`]; the event is decoded only for
    /// bytes the transcoder declines, which gives the same value).
    pub fn encode(&self, value: &Bytes) -> Bytes {
        // Herald's stored form is an object whose first member is `metadata`.
        let Some(rest) = value.strip_prefix(b"{") else {
            return value.clone();
        };
        if !rest.starts_with(br#""metadata":"#) {
            return value.clone();
        }
        match self.media_type {
            StorageMediaType::Json => {
                let mut out = Vec::with_capacity(JSON_HEAD.len() + value.len());
                out.extend_from_slice(JSON_HEAD);
                out.extend_from_slice(rest);
                Bytes::from(out)
            }
            StorageMediaType::Protobuf => {
                if let Some(object) = protobuf::storage::storage_object(value) {
                    return Bytes::from(object);
                }
                encode_decoded(value)
            }
        }
    }

    /// Herald's stored form of an etcd value, in either of kube-apiserver's forms (see the
    /// module docs for other values).
    pub fn decode(&self, value: Bytes) -> Bytes {
        decode(value)
    }
}

/// The protobuf value of `value` through the decoded event: for the stored bytes the
/// transcoder declines (for the others it writes the same bytes).
fn encode_decoded(value: &Bytes) -> Bytes {
    match serde_json::from_slice::<CoreEvent>(value) {
        Ok(mut event) => {
            event.metadata.resource_version = None;
            Bytes::from(protobuf::event_object(ApiGroup::Core, &event))
        }
        Err(e) => {
            tracing::warn!(error = %e, "stored event does not decode; written as it is");
            value.clone()
        }
    }
}

/// [`ValueCodec::decode`]: the media type does not matter for reading.
pub fn decode(value: Bytes) -> Bytes {
    if let Some(rest) = value.strip_prefix(JSON_HEAD) {
        // The members after `kind` and `apiVersion` are Herald's stored form: kube-apiserver
        // writes them in the order and forms `stored::encode` does.
        // kube-apiserver's encoder ends the value with a newline.
        let rest = rest.trim_ascii_end();
        let mut out = Vec::with_capacity(1 + rest.len());
        out.push(b'{');
        out.extend_from_slice(rest);
        return Bytes::from(out);
    }
    if value.starts_with(&protobuf::MAGIC) {
        return match protobuf::storage::event_from_storage(&value) {
            Ok(event) => stored::encode_owned(event).0,
            Err(e) => undecodable(value, &e),
        };
    }
    value
}

fn undecodable(value: Bytes, e: &dyn std::fmt::Display) -> Bytes {
    tracing::warn!(error = %e, "an etcd value looks like an event but does not decode; read as it is");
    value
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message as _;

    fn event() -> CoreEvent {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web-0.1", "namespace": "prod", "uid": "u-1",
                         "resourceVersion": "41"},
            "involvedObject": {"kind": "Pod", "namespace": "prod", "name": "web-0"},
            "reason": "BackOff",
            "message": "Back-off restarting failed container",
            "source": {"component": "kubelet"},
            "firstTimestamp": "2026-11-22T10:00:00Z",
            "lastTimestamp": "2026-11-22T10:00:05Z",
            "count": 3,
            "type": "Warning"
        }))
        .unwrap()
    }

    /// JSON is Herald's bytes with kube-apiserver's head: reading it back gives the very
    /// bytes the registry stored, and the value is the core/v1 object without resourceVersion.
    #[test]
    fn json_round_trips_byte_for_byte() {
        let stored = stored::encode(&event());
        let codec = ValueCodec::new(StorageMediaType::Json);
        let value = codec.encode(&stored);
        let v: serde_json::Value = serde_json::from_slice(&value).unwrap();
        assert_eq!(v["kind"], "Event");
        assert_eq!(v["apiVersion"], "v1");
        assert!(v["metadata"].get("resourceVersion").is_none());
        assert_eq!(codec.decode(value.clone()), stored);
        // As kube-apiserver's encoder ends it, with a newline.
        let mut with_newline = value.to_vec();
        with_newline.push(b'\n');
        assert_eq!(decode(Bytes::from(with_newline)), stored);
    }

    /// Protobuf is the envelope around the core/v1 message; either codec reads it back as
    /// the event the registry stored (in its canonical form, as the stored form holds it).
    #[test]
    fn protobuf_is_the_envelope_and_reads_back_as_the_event() {
        let stored = stored::encode(&event());
        let value = ValueCodec::new(StorageMediaType::Protobuf).encode(&stored);
        let unwrapped = protobuf::unwrap(&value, "Event").unwrap();
        assert_eq!(
            (unwrapped.api_version.as_str(), unwrapped.kind.as_str()),
            ("v1", "Event")
        );
        let msg = k8s_pb::api::core::v1::Event::decode(&unwrapped.raw[..]).unwrap();
        assert_eq!(msg.metadata.unwrap().resource_version, None);
        assert_eq!(msg.count, Some(3));
        for codec in [StorageMediaType::Json, StorageMediaType::Protobuf] {
            let back = ValueCodec::new(codec).decode(value.clone());
            // The event as the store keeps it (its canonical form), at the revision read.
            let mut expected = herald_core::event::convert::normalize_core(event());
            expected.metadata.resource_version = Some("7".into());
            assert_eq!(stored::decode_at(&back, 7).unwrap(), expected);
        }
    }

    /// Values that are not events are stored and read as they are.
    #[test]
    fn other_values_pass_through() {
        for media in [StorageMediaType::Json, StorageMediaType::Protobuf] {
            let codec = ValueCodec::new(media);
            for raw in [&b"v1"[..], b"{}", b"{\"a\":1}", b"", b"k8s\0garbage"] {
                let raw = Bytes::copy_from_slice(raw);
                assert_eq!(codec.encode(&raw), raw);
                assert_eq!(codec.decode(raw.clone()), raw);
            }
        }
    }
}
