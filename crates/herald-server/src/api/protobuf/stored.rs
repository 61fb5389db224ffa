//! The protobuf message of a stored event, transcoded from its stored JSON.
//!
//! A protobuf list used to decode each stored event into `k8s-openapi` types (every string
//! copied, every timestamp parsed by a general parser, `fieldsV1` built as a `Value` tree
//! and serialized again), convert it to `k8s-pb` messages and encode those: about 5 µs an
//! event, a 100,000-event list's 0.3 s.
//!
//! [`write_list_item`] reads the stored JSON into borrowed views (strings without escapes
//! are slices of the stored bytes, `fieldsV1` stays raw text, timestamps are read in the
//! one layout the store writes) and writes the protobuf fields straight from them, in tag
//! order, with the canonicalisation the decoding path applies. The bytes equal that path's
//! for every object the store writes (the tests compare them byte for byte); anything else
//! (a timestamp in another layout, a member of an unexpected type) makes it decline, and
//! the caller decodes the event instead.

use std::borrow::Cow;
use std::collections::BTreeMap;

use herald_core::event::ApiGroup;
use prost::encoding::{WireType, encode_key, encode_varint, encoded_len_varint};
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::registry::stored_events_v1::{Decline, Series};
use crate::registry::stored_time::{self, Layout, StoredTime};
use crate::storage::Revision;

/// A JSON string, borrowed from the stored bytes when it has no escapes.
#[derive(Default, PartialEq, Eq, PartialOrd, Ord)]
struct Text<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Cow<'de, str>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Cow::Borrowed(v))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Cow::Owned(v.to_owned()))
            }
            fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
                Ok(Cow::Owned(v))
            }
        }
        d.deserialize_str(Visitor).map(Text)
    }
}

type OptText<'a> = Option<Text<'a>>;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Stored<'a> {
    #[serde(borrow)]
    metadata: Meta<'a>,
    #[serde(borrow)]
    involved_object: Reference<'a>,
    #[serde(borrow, default)]
    reason: OptText<'a>,
    #[serde(borrow, default)]
    message: OptText<'a>,
    #[serde(borrow, default)]
    source: Option<Source<'a>>,
    #[serde(borrow, default)]
    first_timestamp: Option<&'a RawValue>,
    #[serde(borrow, default)]
    last_timestamp: Option<&'a RawValue>,
    #[serde(default)]
    count: Option<i32>,
    #[serde(borrow, default, rename = "type")]
    type_: OptText<'a>,
    #[serde(borrow, default)]
    event_time: Option<&'a RawValue>,
    #[serde(borrow, default)]
    series: Option<Series<'a>>,
    #[serde(borrow, default)]
    action: OptText<'a>,
    #[serde(borrow, default)]
    related: Option<Reference<'a>>,
    #[serde(borrow, default)]
    reporting_component: OptText<'a>,
    #[serde(borrow, default)]
    reporting_instance: OptText<'a>,
}

/// `ObjectMeta` less `resourceVersion`, which the list sets from the key's revision.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Meta<'a> {
    #[serde(borrow, default)]
    name: OptText<'a>,
    #[serde(borrow, default)]
    generate_name: OptText<'a>,
    #[serde(borrow, default)]
    namespace: OptText<'a>,
    #[serde(borrow, default)]
    self_link: OptText<'a>,
    #[serde(borrow, default)]
    uid: OptText<'a>,
    #[serde(default)]
    generation: Option<i64>,
    #[serde(borrow, default)]
    creation_timestamp: Option<&'a RawValue>,
    #[serde(borrow, default)]
    deletion_timestamp: Option<&'a RawValue>,
    #[serde(default)]
    deletion_grace_period_seconds: Option<i64>,
    #[serde(borrow, default)]
    labels: Option<BTreeMap<Text<'a>, Text<'a>>>,
    #[serde(borrow, default)]
    annotations: Option<BTreeMap<Text<'a>, Text<'a>>>,
    #[serde(borrow, default)]
    owner_references: Option<Vec<Owner<'a>>>,
    #[serde(borrow, default)]
    finalizers: Option<Vec<Text<'a>>>,
    #[serde(borrow, default)]
    managed_fields: Option<Vec<Managed<'a>>>,
}

/// An `OwnerReference`: its four strings are required (empty when missing, as
/// `k8s-openapi` reads them).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Owner<'a> {
    #[serde(borrow, default)]
    api_version: Text<'a>,
    #[serde(borrow, default)]
    kind: Text<'a>,
    #[serde(borrow, default)]
    name: Text<'a>,
    #[serde(borrow, default)]
    uid: Text<'a>,
    #[serde(default)]
    controller: Option<bool>,
    #[serde(default)]
    block_owner_deletion: Option<bool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Managed<'a> {
    #[serde(borrow, default)]
    manager: OptText<'a>,
    #[serde(borrow, default)]
    operation: OptText<'a>,
    #[serde(borrow, default)]
    api_version: OptText<'a>,
    #[serde(borrow, default)]
    time: Option<&'a RawValue>,
    #[serde(borrow, default)]
    fields_type: OptText<'a>,
    #[serde(borrow, default, rename = "fieldsV1")]
    fields_v1: Option<&'a RawValue>,
    #[serde(borrow, default)]
    subresource: OptText<'a>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Reference<'a> {
    #[serde(borrow, default)]
    kind: OptText<'a>,
    #[serde(borrow, default)]
    namespace: OptText<'a>,
    #[serde(borrow, default)]
    name: OptText<'a>,
    #[serde(borrow, default)]
    uid: OptText<'a>,
    #[serde(borrow, default)]
    api_version: OptText<'a>,
    #[serde(borrow, default)]
    resource_version: OptText<'a>,
    #[serde(borrow, default)]
    field_path: OptText<'a>,
}

#[derive(Deserialize)]
struct Source<'a> {
    #[serde(borrow, default)]
    component: OptText<'a>,
    #[serde(borrow, default)]
    host: OptText<'a>,
}

type Written = Result<(), Decline>;

/// Appends the event stored as `stored`, with `resourceVersion` = `revision`, in `group`'s
/// shape as item (field 2) of a protobuf `EventList`. False, with `out` untouched, when the
/// bytes are not in a shape this transcoder knows; see the module docs.
pub fn write_list_item(
    out: &mut Vec<u8>,
    group: ApiGroup,
    stored: &[u8],
    revision: Revision,
) -> bool {
    let start = out.len();
    let written = serde_json::from_slice::<Stored<'_>>(stored)
        .map_err(|_| Decline)
        .and_then(|s| {
            message(out, 2, |out| match group {
                ApiGroup::Core => core_event(out, &s, revision),
                ApiGroup::EventsV1 => events_v1_event(out, &s, revision),
            })
        });
    if written.is_err() {
        out.truncate(start);
    }
    written.is_ok()
}

/// `k8s.io.api.core.v1.Event`, canonical as `normalize_core` makes it.
fn core_event(out: &mut Vec<u8>, s: &Stored<'_>, revision: Revision) -> Written {
    message(out, 1, |out| meta(out, &s.metadata, revision))?;
    message(out, 2, |out| reference(out, &s.involved_object))?;
    nonempty(out, 3, &s.reason);
    nonempty(out, 4, &s.message);
    message(out, 5, |out| source(out, s.source.as_ref()))?;
    set_time(out, 6, s.first_timestamp, Layout::Seconds)?;
    set_time(out, 7, s.last_timestamp, Layout::Seconds)?;
    nonzero(out, 8, s.count);
    nonempty(out, 9, &s.type_);
    set_time(out, 10, s.event_time, Layout::Micros)?;
    if let Some(series) = &s.series {
        message(out, 11, |out| {
            nonzero(out, 1, series.count);
            set_time(out, 2, series.last_observed_time, Layout::Micros)
        })?;
    }
    nonempty(out, 12, &s.action);
    if let Some(related) = &s.related {
        message(out, 13, |out| reference(out, related))?;
    }
    string(out, 14, text(&s.reporting_component));
    string(out, 15, text(&s.reporting_instance));
    Ok(())
}

/// `k8s.io.api.events.v1.Event`, canonical as `normalize_events_v1(core_to_events_v1(_))`
/// makes it.
fn events_v1_event(out: &mut Vec<u8>, s: &Stored<'_>, revision: Revision) -> Written {
    message(out, 1, |out| meta(out, &s.metadata, revision))?;
    set_time(out, 2, s.event_time, Layout::Micros)?;
    if let Some(series) = &s.series {
        message(out, 3, |out| {
            varint(out, 1, series.count.unwrap_or(0) as u64);
            // Required in this group: Go's zero time (an empty message) when unset.
            let at = present_time(series.last_observed_time, Layout::Micros)?;
            message(out, 2, |out| {
                timestamp(out, at, Layout::Micros);
                Ok(())
            })
        })?;
    }
    nonempty(out, 4, &s.reporting_component);
    nonempty(out, 5, &s.reporting_instance);
    nonempty(out, 6, &s.action);
    nonempty(out, 7, &s.reason);
    message(out, 8, |out| reference(out, &s.involved_object))?;
    if let Some(related) = &s.related {
        message(out, 9, |out| reference(out, related))?;
    }
    nonempty(out, 10, &s.message);
    nonempty(out, 11, &s.type_);
    message(out, 12, |out| source(out, s.source.as_ref()))?;
    set_time(out, 13, s.first_timestamp, Layout::Seconds)?;
    set_time(out, 14, s.last_timestamp, Layout::Seconds)?;
    nonzero(out, 15, s.count);
    Ok(())
}

/// `ObjectMeta` as stored (metadata is not canonicalised), `resourceVersion` = `revision`.
fn meta(out: &mut Vec<u8>, m: &Meta<'_>, revision: Revision) -> Written {
    let opt = |out: &mut Vec<u8>, tag, v: &OptText<'_>| {
        if let Some(v) = v {
            string(out, tag, &v.0);
        }
    };
    opt(out, 1, &m.name);
    opt(out, 2, &m.generate_name);
    opt(out, 3, &m.namespace);
    opt(out, 4, &m.self_link);
    opt(out, 5, &m.uid);
    string(out, 6, itoa::Buffer::new().format(revision));
    if let Some(g) = m.generation {
        varint(out, 7, g as u64);
    }
    meta_time(out, 8, m.creation_timestamp)?;
    meta_time(out, 9, m.deletion_timestamp)?;
    if let Some(g) = m.deletion_grace_period_seconds {
        varint(out, 10, g as u64);
    }
    for (tag, map) in [(11, &m.labels), (12, &m.annotations)] {
        for (k, v) in map.iter().flatten() {
            // prost leaves an entry's empty key or value out.
            message(out, tag, |out| {
                nonempty_str(out, 1, &k.0);
                nonempty_str(out, 2, &v.0);
                Ok(())
            })?;
        }
    }
    for o in m.owner_references.iter().flatten() {
        message(out, 13, |out| {
            string(out, 1, &o.kind.0);
            string(out, 3, &o.name.0);
            string(out, 4, &o.uid.0);
            string(out, 5, &o.api_version.0);
            if let Some(c) = o.controller {
                varint(out, 6, u64::from(c));
            }
            if let Some(b) = o.block_owner_deletion {
                varint(out, 7, u64::from(b));
            }
            Ok(())
        })?;
    }
    for f in m.finalizers.iter().flatten() {
        string(out, 14, &f.0);
    }
    for e in m.managed_fields.iter().flatten() {
        message(out, 17, |out| {
            opt(out, 1, &e.manager);
            opt(out, 2, &e.operation);
            opt(out, 3, &e.api_version);
            meta_time(out, 4, e.time)?;
            opt(out, 6, &e.fields_type);
            if let Some(raw) = e.fields_v1.filter(|v| v.get() != "null") {
                message(out, 7, |out| {
                    bytes(out, 1, &fields_v1_raw(raw)?);
                    Ok(())
                })
            } else {
                Ok(())
            }?;
            opt(out, 8, &e.subresource);
            Ok(())
        })?;
    }
    Ok(())
}

/// The bytes the decoding path puts in `FieldsV1.raw`: its `Value` serialized again. Field
/// sets are objects of objects with plain keys, whose stored text is already exactly that;
/// anything else (escapes, arrays, numbers, spaces) takes the round trip.
fn fields_v1_raw(raw: &RawValue) -> Result<Cow<'_, [u8]>, Decline> {
    let text = raw.get().as_bytes();
    let mut in_string = false;
    let plain = text.iter().all(|&b| match (in_string, b) {
        (_, b'\\') => false,
        (_, b'"') => {
            in_string = !in_string;
            true
        }
        (true, _) => true,
        (false, b'{' | b'}' | b':' | b',') => true,
        (false, _) => false,
    });
    if plain {
        return Ok(Cow::Borrowed(text));
    }
    let v: serde_json::Value = serde_json::from_str(raw.get()).map_err(|_| Decline)?;
    serde_json::to_vec(&v).map(Cow::Owned).map_err(|_| Decline)
}

/// An `ObjectReference` with its empty strings left out.
fn reference(out: &mut Vec<u8>, r: &Reference<'_>) -> Written {
    nonempty(out, 1, &r.kind);
    nonempty(out, 2, &r.namespace);
    nonempty(out, 3, &r.name);
    nonempty(out, 4, &r.uid);
    nonempty(out, 5, &r.api_version);
    nonempty(out, 6, &r.resource_version);
    nonempty(out, 7, &r.field_path);
    Ok(())
}

/// An `EventSource` with its empty strings left out; empty when absent.
fn source(out: &mut Vec<u8>, s: Option<&Source<'_>>) -> Written {
    if let Some(s) = s {
        nonempty(out, 1, &s.component);
        nonempty(out, 2, &s.host);
    }
    Ok(())
}

/// A stored timestamp member: `None` when absent or `null`; declines text in another layout.
fn read_time(v: Option<&RawValue>, layout: Layout) -> Result<Option<StoredTime>, Decline> {
    match v.map(RawValue::get) {
        None | Some("null") => Ok(None),
        Some(text) => stored_time::parse(text.as_bytes(), layout)
            .map(Some)
            .ok_or(Decline),
    }
}

/// An event's time field, left out when unset (absent, `null` or Go's zero time).
fn set_time(out: &mut Vec<u8>, tag: u32, v: Option<&RawValue>, layout: Layout) -> Written {
    match read_time(v, layout)? {
        Some(at @ StoredTime::At { .. }) => message(out, tag, |out| {
            timestamp(out, at, layout);
            Ok(())
        }),
        _ => Ok(()),
    }
}

/// A time that is written whenever it is present: Go's zero time is an empty message.
fn meta_time(out: &mut Vec<u8>, tag: u32, v: Option<&RawValue>) -> Written {
    match read_time(v, Layout::Seconds)? {
        Some(at) => message(out, tag, |out| {
            timestamp(out, at, Layout::Seconds);
            Ok(())
        }),
        None => Ok(()),
    }
}

/// A required time: Go's zero time when absent or `null`.
fn present_time(v: Option<&RawValue>, layout: Layout) -> Result<StoredTime, Decline> {
    Ok(read_time(v, layout)?.unwrap_or(StoredTime::Zero))
}

/// A `Time` or `MicroTime` message's fields: none for Go's zero time; `nanos` is always
/// written, and always 0 for a `Time`.
fn timestamp(out: &mut Vec<u8>, t: StoredTime, layout: Layout) {
    if let StoredTime::At { seconds, micros } = t {
        varint(out, 1, seconds as u64);
        let nanos = match layout {
            Layout::Seconds => 0,
            Layout::Micros => u64::from(micros) * 1000,
        };
        varint(out, 2, nanos);
    }
}

fn text<'t>(v: &'t OptText<'_>) -> &'t str {
    v.as_ref().map_or("", |t| &t.0)
}

fn string(out: &mut Vec<u8>, tag: u32, s: &str) {
    bytes(out, tag, s.as_bytes());
}

fn bytes(out: &mut Vec<u8>, tag: u32, b: &[u8]) {
    encode_key(tag, WireType::LengthDelimited, out);
    encode_varint(b.len() as u64, out);
    out.extend_from_slice(b);
}

fn nonempty_str(out: &mut Vec<u8>, tag: u32, s: &str) {
    if !s.is_empty() {
        string(out, tag, s);
    }
}

fn nonempty(out: &mut Vec<u8>, tag: u32, v: &OptText<'_>) {
    nonempty_str(out, tag, text(v));
}

/// An `int32`/`int64`/`bool` field; negative numbers are their 64-bit two's complement,
/// as protobuf writes them.
fn varint(out: &mut Vec<u8>, tag: u32, v: u64) {
    encode_key(tag, WireType::Varint, out);
    encode_varint(v, out);
}

fn nonzero(out: &mut Vec<u8>, tag: u32, v: Option<i32>) {
    if let Some(v) = v.filter(|v| *v != 0) {
        varint(out, tag, i64::from(v) as u64);
    }
}

/// A length-delimited field whose body `body` writes. Its length is known only after: one
/// byte is reserved for it, and the body moved along in the rare case it needs more.
fn message(out: &mut Vec<u8>, tag: u32, body: impl FnOnce(&mut Vec<u8>) -> Written) -> Written {
    encode_key(tag, WireType::LengthDelimited, out);
    let at = out.len();
    out.push(0);
    body(out)?;
    let len = out.len() - at - 1;
    if len < 0x80 {
        out[at] = len as u8;
    } else {
        let mut prefix = [0u8; 10];
        let n = encoded_len_varint(len as u64);
        encode_varint(len as u64, &mut &mut prefix[..]);
        out.splice(at..=at, prefix[..n].iter().copied());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use herald_core::event::{ApiGroup, CoreEvent};
    use proptest::prelude::*;
    use serde_json::json;

    use super::write_list_item;
    use crate::registry::codec::{decode_at, encode};

    /// The decoding path's list item for `stored`.
    fn decoded(group: ApiGroup, stored: &[u8], revision: u64) -> Vec<u8> {
        let mut out = Vec::new();
        super::super::encode_event(
            group,
            decode_at(stored, revision).unwrap(),
            Some(2),
            &mut out,
        );
        out
    }

    /// The transcoder's list item, `None` where it declines.
    fn transcoded(group: ApiGroup, stored: &[u8], revision: u64) -> Option<Vec<u8>> {
        let mut out = b"prefix".to_vec();
        if !write_list_item(&mut out, group, stored, revision) {
            assert_eq!(out, b"prefix", "a decline leaves the output untouched");
            return None;
        }
        Some(out.split_off(6))
    }

    fn assert_same(e: &CoreEvent, revision: u64) {
        let stored = encode(e);
        for group in [ApiGroup::Core, ApiGroup::EventsV1] {
            let got = transcoded(group, &stored, revision);
            assert!(
                got.as_deref() == Some(&decoded(group, &stored, revision)[..]),
                "{group:?}: {}",
                String::from_utf8_lossy(&stored)
            );
        }
    }

    #[test]
    fn a_full_event_is_the_decoded_message_byte_for_byte() {
        let e: CoreEvent = serde_json::from_value(json!({
            "metadata": {
                "name": "web.1", "namespace": "ns", "uid": "u", "generateName": "web.",
                "creationTimestamp": "2024-01-01T00:00:00Z", "generation": -3,
                "deletionTimestamp": "0001-01-01T00:00:00Z", "deletionGracePeriodSeconds": 30,
                "selfLink": "", "labels": {"b": "2", "a": "", "": "x"}, "annotations": {"x": "y\n\"z\""},
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "q",
                                     "controller": true, "blockOwnerDeletion": false},
                                    {"apiVersion": "", "kind": "", "name": "", "uid": ""}],
                "managedFields": [
                    {"manager": "m", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1",
                     "time": "2024-01-01T00:00:00Z", "subresource": "status",
                     "fieldsV1": {"f:metadata": {}, "f:count": {}, "n": [1, 2.5, null, true, "s"]}},
                    {"manager": "kubectl", "fieldsV1": {"f:message": {}, "f:x\"y": {".": {}}}},
                    {"manager": "plain", "fieldsV1": {"f:source": {"f:component": {}}}}
                ],
                "finalizers": ["a/b", "", "c"]
            },
            "involvedObject": {"kind": "Pod", "name": "web", "namespace": "ns", "uid": "",
                               "fieldPath": "spec", "apiVersion": "v1", "resourceVersion": "1"},
            "related": {"kind": "Node", "name": "n1"},
            "reason": "BackOff", "message": "m \"metadata\":{ é\u{1}", "type": "Warning",
            "action": "", "count": -7, "source": {"component": "kubelet", "host": ""},
            "firstTimestamp": "1969-12-31T23:59:59Z", "lastTimestamp": "2024-01-01T00:00:05Z",
            "eventTime": "1969-12-31T23:59:59.500000Z",
            "series": {"count": 2, "lastObservedTime": "2024-01-01T00:00:05.000001Z"},
            "reportingComponent": "kubelet", "reportingInstance": ""
        }))
        .unwrap();
        assert_same(&e, 77);
        assert_same(&CoreEvent::default(), 1);
        let series_only = CoreEvent {
            series: Some(k8s_openapi::api::core::v1::EventSeries::default()),
            ..CoreEvent::default()
        };
        assert_same(&series_only, u64::MAX);
        // Length prefixes of one, two and three bytes: a reference of 300 bytes, an item of
        // 20 KB.
        let mut long = CoreEvent::default();
        long.involved_object.name = Some("p".repeat(300));
        long.message = Some("m".repeat(20_000));
        assert_same(&long, 3);
    }

    /// Shapes the store does not write are left to the decoding path.
    #[test]
    fn unfamiliar_shapes_are_declined() {
        for stored in [
            r#"{"metadata":{},"involvedObject":{},"firstTimestamp":"2026-11-25T10:48:17+01:00"}"#,
            r#"{"metadata":{"creationTimestamp":"2026-11-25T09:48:17.5Z"},"involvedObject":{}}"#,
            r#"{"metadata":{"labels":{"a":1}},"involvedObject":{}}"#,
            r#"{"metadata":{},"involvedObject":{"name":7}}"#,
            r#"{"metadata":{}}"#,
            "{not json",
        ] {
            for group in [ApiGroup::Core, ApiGroup::EventsV1] {
                assert!(
                    transcoded(group, stored.as_bytes(), 5).is_none(),
                    "{stored}"
                );
            }
        }
    }

    proptest! {
        #[test]
        fn any_stored_event_is_the_decoded_message(
            e in crate::registry::any_event(),
            revision in 1u64..u64::MAX,
        ) {
            let stored = encode(&e);
            for group in [ApiGroup::Core, ApiGroup::EventsV1] {
                let got = transcoded(group, &stored, revision);
                prop_assert!(got.is_some(), "declined {}", String::from_utf8_lossy(&stored));
                prop_assert_eq!(got.unwrap(), decoded(group, &stored, revision));
            }
        }
    }
}
