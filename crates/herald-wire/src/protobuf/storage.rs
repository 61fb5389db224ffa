//! An event as kube-apiserver keeps it in etcd with `--storage-media-type
//! application/vnd.kubernetes.protobuf`: the `k8s\0` envelope around the bare
//! `k8s.io.api.core.v1.Event` message, without `resourceVersion` (the key's revision is).
//!
//! Both directions run once per etcd write or read, so they take the direct paths:
//!
//! - [`storage_object`] writes the message straight from Herald's stored JSON with the
//!   list transcoder ([`transcode::write_core_message`]), byte for byte what decoding the
//!   event and encoding it ([`event_object`](super::event_object)) makes; [`None`] where the transcoder declines;
//! - [`event_from_storage`] converts the decoded message to the storage shape directly, as
//!   [`event_body`] does for a request body, but with `managedFields` too: a stored value's
//!   `fieldsV1` is read on its own (a request body's is read inside the event, see
//!   [`EventBody::Json`]). A time outside the years 0–9999 still goes through JSON.
//!
//! The tests hold both equal to the plain paths (decode, convert through JSON, encode) for
//! any event.

use herald_core::event::convert::normalize_core;
use herald_core::event::{ApiGroup, CoreEvent};
use herald_core::status::ApiError;
use prost::Message;

use super::convert::core_event_from_pb;
use super::{
    EventBody, event_body, floor_core_micros, times_in_text_range_core, transcode, unwrap, wrap,
};
use crate::body::{cannot_handle, check_type};

/// The etcd value of the event stored as `stored` (Herald's stored JSON), `None` when the
/// transcoder does not know the bytes' shape (the caller decodes the event and writes
/// [`event_object`](super::event_object) of it, which gives the same bytes).
pub fn storage_object(stored: &[u8]) -> Option<Vec<u8>> {
    let mut raw = Vec::with_capacity(stored.len());
    transcode::write_core_message(&mut raw, stored).then(|| wrap("v1", "Event", raw))
}

/// The event in an etcd value written as [`storage_object`] (or by kube-apiserver), in the
/// storage shape; a 400-kind error for bytes that are not a core/v1 `Event` object.
pub fn event_from_storage(value: &[u8]) -> Result<CoreEvent, ApiError> {
    let u = unwrap(value, "Event")?;
    check_type(&u.api_version, &u.kind, Some("v1"), "Event")?;
    let pb = k8s_pb::api::core::v1::Event::decode(&u.raw[..]).map_err(cannot_handle)?;
    let mut e = core_event_from_pb(pb);
    if !times_in_text_range_core(&e) {
        return match event_body(ApiGroup::Core, value)? {
            EventBody::Event(e) => Ok(e),
            EventBody::Json(json) => serde_json::from_slice(&json)
                .map_err(|e| ApiError::internal(format!("decoding the stored event: {e}"))),
        };
    }
    floor_core_micros(&mut e);
    Ok(crate::body::drop_empty_maps(normalize_core(e)))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::protobuf::event_object;
    use crate::stored;

    /// What the etcd backend used to do: the event decoded from its stored JSON, encoded.
    fn plain_object(stored: &[u8]) -> Vec<u8> {
        let mut e: CoreEvent = serde_json::from_slice(stored).unwrap();
        e.metadata.resource_version = None;
        event_object(ApiGroup::Core, &e)
    }

    /// What the etcd backend used to do: the request-body path, through JSON when the event
    /// has managed fields.
    fn plain_event(value: &[u8]) -> CoreEvent {
        match event_body(ApiGroup::Core, value).unwrap() {
            EventBody::Event(e) => e,
            EventBody::Json(json) => serde_json::from_slice(&json).unwrap(),
        }
    }

    proptest! {
        #[test]
        fn the_direct_paths_equal_the_plain_ones(e in crate::any_event()) {
            let mut e = e;
            e.metadata.resource_version = None;
            let bytes = stored::encode(&e);
            let value = storage_object(&bytes).expect("the transcoder takes every stored event");
            prop_assert!(value == plain_object(&bytes));
            let direct = stored::encode(&event_from_storage(&value).unwrap());
            prop_assert_eq!(direct, stored::encode(&plain_event(&value)));
        }
    }

    #[test]
    fn what_is_not_an_event_is_refused() {
        assert!(storage_object(b"{}x").is_none());
        assert!(event_from_storage(b"k8s\0garbage").is_err());
        assert!(event_from_storage(&wrap("v1", "Pod", Vec::new())).is_err());
    }
}
