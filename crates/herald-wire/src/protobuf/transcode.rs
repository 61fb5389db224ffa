//! The protobuf message of a stored event, transcoded from its stored JSON.
//!
//! The decoding path decodes each stored event into `k8s-openapi` types (every string
//! copied, every timestamp parsed by a general parser, `fieldsV1` built as a `Value` tree
//! and serialized again), converts it to `k8s-pb` messages and encodes those.
//! [`write_list_item`] reads the stored JSON with a [`Scanner`] into borrowed views
//! (strings without escapes are slices of the stored bytes, `fieldsV1` stays raw text,
//! timestamps are read in the one layout the store writes) and writes the protobuf fields
//! straight from them, in tag order, with the canonicalisation the decoding path applies.
//! The bytes equal that path's for every object the store writes (the tests compare them
//! byte for byte); anything else (a timestamp in another layout, a member of an unexpected
//! type) makes it decline, and the caller decodes the event instead.

use std::borrow::Cow;
use std::collections::BTreeMap;

use herald_core::event::ApiGroup;
use prost::encoding::{WireType, encode_key, encode_varint, encoded_len_varint};

use crate::Revision;
use crate::scan::extent::plain_run_end;
use crate::scan::{Decline, Scanned, Scanner, write_whole};
use crate::stored::read::{Reference, Source, StoredEvent};
use crate::stored::time::{self as stored_time, Layout, StoredTime};

/// A JSON string, borrowed from the stored bytes when it has no escapes.
#[derive(Default, PartialEq, Eq, PartialOrd, Ord)]
struct Text<'a>(Cow<'a, str>);

type OptText<'a> = Option<Text<'a>>;

fn text_of<'a>(s: &mut Scanner<'a>) -> Scanned<Text<'a>> {
    s.str().map(Text)
}

fn opt_text<'a>(s: &mut Scanner<'a>) -> Scanned<OptText<'a>> {
    s.nullable(text_of)
}

/// A member kept as its stored text (a timestamp or `fieldsV1`), `null` included.
fn raw<'a>(s: &mut Scanner<'a>) -> Scanned<Option<&'a str>> {
    s.raw().map(Some)
}

/// The stored event: `metadata` read member by member, strings decoded.
type Stored<'a> = StoredEvent<'a, Meta<'a>, Text<'a>>;

/// `ObjectMeta` less `resourceVersion`, which the list sets from the key's revision.
#[derive(Default)]
struct Meta<'a> {
    name: OptText<'a>,
    generate_name: OptText<'a>,
    namespace: OptText<'a>,
    self_link: OptText<'a>,
    uid: OptText<'a>,
    generation: Option<i64>,
    creation_timestamp: Option<&'a str>,
    deletion_timestamp: Option<&'a str>,
    deletion_grace_period_seconds: Option<i64>,
    labels: Option<BTreeMap<Text<'a>, Text<'a>>>,
    annotations: Option<BTreeMap<Text<'a>, Text<'a>>>,
    owner_references: Option<Vec<Owner<'a>>>,
    finalizers: Option<Vec<Text<'a>>>,
    managed_fields: Option<Vec<Managed<'a>>>,
}

impl<'a> Meta<'a> {
    fn read(s: &mut Scanner<'a>) -> Scanned<Self> {
        let mut m = Meta::default();
        s.object(|s, name| {
            match &*name {
                "name" => m.name = opt_text(s)?,
                "generateName" => m.generate_name = opt_text(s)?,
                "namespace" => m.namespace = opt_text(s)?,
                "selfLink" => m.self_link = opt_text(s)?,
                "uid" => m.uid = opt_text(s)?,
                "generation" => m.generation = s.nullable(Scanner::int)?,
                "creationTimestamp" => m.creation_timestamp = raw(s)?,
                "deletionTimestamp" => m.deletion_timestamp = raw(s)?,
                "deletionGracePeriodSeconds" => {
                    m.deletion_grace_period_seconds = s.nullable(Scanner::int)?
                }
                "labels" => m.labels = s.nullable(string_map)?,
                "annotations" => m.annotations = s.nullable(string_map)?,
                "ownerReferences" => m.owner_references = s.nullable(|s| list(s, Owner::read))?,
                "finalizers" => m.finalizers = s.nullable(|s| list(s, text_of))?,
                "managedFields" => m.managed_fields = s.nullable(|s| list(s, Managed::read))?,
                // Set from the key's revision; read only to decline what k8s-openapi
                // would not decode.
                "resourceVersion" => drop(opt_text(s)?),
                _ => s.skip()?,
            }
            Ok(())
        })?;
        Ok(m)
    }
}

/// A map of strings; a key named twice keeps its last value, as a map decodes.
fn string_map<'a>(s: &mut Scanner<'a>) -> Scanned<BTreeMap<Text<'a>, Text<'a>>> {
    let mut map = BTreeMap::new();
    s.object(|s, k| {
        map.insert(Text(k), text_of(s)?);
        Ok(())
    })?;
    Ok(map)
}

fn list<'a, T>(
    s: &mut Scanner<'a>,
    mut item: impl FnMut(&mut Scanner<'a>) -> Scanned<T>,
) -> Scanned<Vec<T>> {
    let mut items = Vec::new();
    s.array(|s| {
        items.push(item(s)?);
        Ok(())
    })?;
    Ok(items)
}

/// An `OwnerReference`: its four strings are required (empty when missing, as
/// `k8s-openapi` reads them).
#[derive(Default)]
struct Owner<'a> {
    api_version: Text<'a>,
    kind: Text<'a>,
    name: Text<'a>,
    uid: Text<'a>,
    controller: Option<bool>,
    block_owner_deletion: Option<bool>,
}

impl<'a> Owner<'a> {
    fn read(s: &mut Scanner<'a>) -> Scanned<Self> {
        let mut o = Owner::default();
        s.object(|s, name| {
            match &*name {
                "apiVersion" => o.api_version = text_of(s)?,
                "kind" => o.kind = text_of(s)?,
                "name" => o.name = text_of(s)?,
                "uid" => o.uid = text_of(s)?,
                "controller" => o.controller = s.nullable(Scanner::bool)?,
                "blockOwnerDeletion" => o.block_owner_deletion = s.nullable(Scanner::bool)?,
                _ => s.skip()?,
            }
            Ok(())
        })?;
        Ok(o)
    }
}

#[derive(Default)]
struct Managed<'a> {
    manager: OptText<'a>,
    operation: OptText<'a>,
    api_version: OptText<'a>,
    time: Option<&'a str>,
    fields_type: OptText<'a>,
    fields_v1: Option<&'a str>,
    subresource: OptText<'a>,
}

impl<'a> Managed<'a> {
    fn read(s: &mut Scanner<'a>) -> Scanned<Self> {
        let mut e = Managed::default();
        s.object(|s, name| {
            match &*name {
                "manager" => e.manager = opt_text(s)?,
                "operation" => e.operation = opt_text(s)?,
                "apiVersion" => e.api_version = opt_text(s)?,
                "time" => e.time = raw(s)?,
                "fieldsType" => e.fields_type = opt_text(s)?,
                "fieldsV1" => e.fields_v1 = Some(s.raw_unchecked()?),
                "subresource" => e.subresource = opt_text(s)?,
                _ => s.skip()?,
            }
            Ok(())
        })?;
        Ok(e)
    }
}

type Written = Scanned<()>;

/// Appends the event stored as `stored`, with `resourceVersion` = `revision`, in `group`'s
/// shape as item (field 2) of a protobuf `EventList`. False, with `out` untouched, when the
/// bytes are not in a shape this transcoder knows; see the module docs.
pub fn write_list_item(
    out: &mut Vec<u8>,
    group: ApiGroup,
    stored: &[u8],
    revision: Revision,
) -> bool {
    write_whole(out, |out| {
        let s = Stored::read(stored, Meta::read, opt_text)?;
        message(out, 2, |out| match group {
            ApiGroup::Core => core_event(out, &s, Some(revision)),
            ApiGroup::EventsV1 => events_v1_event(out, &s, Some(revision)),
        })
    })
}

/// Appends the bare `k8s.io.api.core.v1.Event` message of the event stored as `stored`,
/// without a `resourceVersion`: what kube-apiserver keeps in etcd inside its protobuf
/// envelope. False, with `out` untouched, when the bytes are not in a shape this transcoder
/// knows (the caller decodes the event instead); see the module docs.
pub fn write_core_message(out: &mut Vec<u8>, stored: &[u8]) -> bool {
    write_whole(out, |out| {
        let s = Stored::read(stored, Meta::read, opt_text)?;
        core_event(out, &s, None)
    })
}

/// `k8s.io.api.core.v1.Event`, canonical as `normalize_core` makes it.
fn core_event(out: &mut Vec<u8>, s: &Stored<'_>, revision: Option<Revision>) -> Written {
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
fn events_v1_event(out: &mut Vec<u8>, s: &Stored<'_>, revision: Option<Revision>) -> Written {
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

/// `ObjectMeta` as stored (metadata is not canonicalised), `resourceVersion` = `revision`
/// (none when `None`, as etcd holds it).
fn meta(out: &mut Vec<u8>, m: &Meta<'_>, revision: Option<Revision>) -> Written {
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
    if let Some(revision) = revision {
        string(out, 6, itoa::Buffer::new().format(revision));
    }
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
            if let Some(raw) = e.fields_v1.filter(|v| *v != "null") {
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

/// The bytes the decoding path puts in `FieldsV1.raw`: its `Value` serialized again, which
/// writes each object's keys once, sorted. Field sets are objects of objects with plain keys
/// in that order, whose stored text is already exactly that; anything else (escapes,
/// arrays, numbers, spaces, keys out of order or repeated) takes the round trip.
fn fields_v1_raw(raw: &str) -> Result<Cow<'_, [u8]>, Decline> {
    if is_canonical(raw.as_bytes()) {
        return Ok(Cow::Borrowed(raw.as_bytes()));
    }
    let v: serde_json::Value = serde_json::from_str(raw).map_err(|_| Decline)?;
    serde_json::to_vec(&v).map(Cow::Owned).map_err(|_| Decline)
}

/// Whether `json` is one JSON value made of objects and strings without escapes only, each
/// object's keys in strictly increasing byte order: what `serde_json` writes for such a
/// `Value`. It is read strictly (the text was found unchecked, see
/// [`Scanner::raw_unchecked`]): anything else, spaces included, is false, and so is a field
/// set more than [`CANONICAL_DEPTH`] objects deep, which a field set never is.
fn is_canonical(json: &[u8]) -> bool {
    // The last key of each open object, `None` before its first.
    let mut last: [Option<&[u8]>; CANONICAL_DEPTH] = [None; CANONICAL_DEPTH];
    let mut depth = 0;
    let mut i = 0;
    loop {
        // A value: a plain string, or an object, opened here.
        match json.get(i) {
            Some(b'"') => match plain_string(json, i) {
                Some((_, end)) => i = end,
                None => return false,
            },
            Some(b'{') => {
                let Some(slot) = last.get_mut(depth) else {
                    return false;
                };
                *slot = None;
                depth += 1;
                i += 1;
                if json.get(i) == Some(&b'}') {
                    i += 1;
                    depth -= 1;
                } else {
                    if !member_key(json, &mut i, &mut last[depth - 1]) {
                        return false;
                    }
                    continue;
                }
            }
            _ => return false,
        }
        // After a value: objects close, or a comma leads to the next member's value.
        loop {
            if depth == 0 {
                return i == json.len();
            }
            match json.get(i) {
                Some(b'}') => {
                    i += 1;
                    depth -= 1;
                }
                Some(b',') => {
                    i += 1;
                    if !member_key(json, &mut i, &mut last[depth - 1]) {
                        return false;
                    }
                    break;
                }
                _ => return false,
            }
        }
    }
}

/// Reads `"key":` at `*i`, a plain string after the object's `last` key; false otherwise.
fn member_key<'a>(json: &'a [u8], i: &mut usize, last: &mut Option<&'a [u8]>) -> bool {
    let Some((key, end)) = plain_string(json, *i) else {
        return false;
    };
    if last.is_some_and(|prev| prev >= key) || json.get(end) != Some(&b':') {
        return false;
    }
    *last = Some(key);
    *i = end + 1;
    true
}

/// The string starting with the quote at `at`, when it has no escapes (nor control
/// characters, which JSON escapes): its contents and the index after its closing quote.
fn plain_string(json: &[u8], at: usize) -> Option<(&[u8], usize)> {
    if json.get(at) != Some(&b'"') {
        return None;
    }
    let end = plain_run_end(json, at + 1);
    (json.get(end) == Some(&b'"')).then(|| (&json[at + 1..end], end + 1))
}

/// How many objects deep [`is_canonical`] follows a field set.
const CANONICAL_DEPTH: usize = 16;

/// An `ObjectReference` with its empty strings left out.
fn reference(out: &mut Vec<u8>, r: &Reference<Text<'_>>) -> Written {
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
fn source(out: &mut Vec<u8>, s: Option<&Source<Text<'_>>>) -> Written {
    if let Some(s) = s {
        nonempty(out, 1, &s.component);
        nonempty(out, 2, &s.host);
    }
    Ok(())
}

/// A stored timestamp member: `None` when absent or `null`; declines text in another layout.
fn read_time(v: Option<&str>, layout: Layout) -> Result<Option<StoredTime>, Decline> {
    match v {
        None | Some("null") => Ok(None),
        Some(text) => stored_time::parse(text.as_bytes(), layout)
            .map(Some)
            .ok_or(Decline),
    }
}

/// An event's time field, left out when unset (absent, `null` or Go's zero time).
fn set_time(out: &mut Vec<u8>, tag: u32, v: Option<&str>, layout: Layout) -> Written {
    match read_time(v, layout)? {
        Some(at @ StoredTime::At { .. }) => message(out, tag, |out| {
            timestamp(out, at, layout);
            Ok(())
        }),
        _ => Ok(()),
    }
}

/// A time that is written whenever it is present: Go's zero time is an empty message.
fn meta_time(out: &mut Vec<u8>, tag: u32, v: Option<&str>) -> Written {
    match read_time(v, Layout::Seconds)? {
        Some(at) => message(out, tag, |out| {
            timestamp(out, at, Layout::Seconds);
            Ok(())
        }),
        None => Ok(()),
    }
}

/// A required time: Go's zero time when absent or `null`.
fn present_time(v: Option<&str>, layout: Layout) -> Result<StoredTime, Decline> {
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
    use crate::stored::{decode_at, encode};

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
            r#"{"metadata":{},"involvedObject":{}} trailing"#,
            r#"{"metadata":{"finalizers":[null]},"involvedObject":{}}"#,
            r#"{"metadata":{"generation":1.5},"involvedObject":{}}"#,
            r#"{"metadata":{"ownerReferences":[{"name":null}]},"involvedObject":{}}"#,
            r#"{"involvedObject":{}}"#,
            r#"{"metadata":null,"involvedObject":{}}"#,
            r#"{"metadata":{},"involvedObject":[]}"#,
            r#"{"metadata":{},"involvedObject":{},"count":-0}"#,
            r#"{"metadata":{},"involvedObject":{},"apiVersion":"v2"}"#,
            r#"{"metadata":{},"involvedObject":{},"kind":"Pod"}"#,
            r#"{"metadata":{"resourceVersion":5},"involvedObject":{}}"#,
        ] {
            for group in [ApiGroup::Core, ApiGroup::EventsV1] {
                assert!(
                    transcoded(group, stored.as_bytes(), 5).is_none(),
                    "{stored}"
                );
            }
        }
    }

    /// A field set is copied as stored only when it is what the decoding path writes: keys
    /// sorted and once, nothing but objects and plain strings.
    #[test]
    fn field_sets_are_copied_only_when_canonical() {
        use super::is_canonical;
        // What the decoding path writes for `json`; canonical text must be exactly that.
        let round_trip = |json: &str| {
            let v: serde_json::Value = serde_json::from_str(json).unwrap();
            serde_json::to_string(&v).unwrap()
        };
        for json in [
            r#"{}"#,
            r#"{"f:a":{"f:x":{}},"f:b":{"f:a":{}}}"#,
            "{\"a\":\"s\",\"b\":\"é \u{7f}\"}",
            r#"{"":{},"z":{},"é":{}}"#,
            r#""bare""#,
        ] {
            assert!(is_canonical(json.as_bytes()), "{json}");
            assert_eq!(round_trip(json), json);
        }
        for json in [
            r#"{"f:b":{},"f:a":{}}"#,
            r#"{"f:a":{},"f:a":{}}"#,
            r#"{"f:a":{"f:y":{},"f:x":{}}}"#,
            r#"{"é":{},"z":{}}"#,
            r#"{"f:a":[]}"#,
            r#"{"f:a": {}}"#,
            r#" {}"#,
            r#"{"n":1}"#,
            r#"{"k:{\"y\":1}":{}}"#,
            r#"{"a\/b":{}}"#,
            r#"{"\u00e9":{}}"#,
            // Not JSON at all: is_canonical is all that reads a field set's text.
            r#"{"a"{}}"#,
            r#"{"a",{}}"#,
            r#"{"a":{},}"#,
            r#"{,"a":{}}"#,
            r#"{"a":{}"b":{}}"#,
            r#"{"a":}"#,
            r#"{"a":{}"#,
            r#"{"a":{}}}"#,
            r#"{"a":"b"#,
            "{\"a\":\"\u{1}\"}",
            "true",
            "1",
        ] {
            assert!(!is_canonical(json.as_bytes()), "{json}");
        }
        // Objects `n` deep: `{"a":{"a":…{}…}}`.
        let nested = |n: usize| "{\"a\":".repeat(n - 1) + "{}" + &"}".repeat(n - 1);
        assert!(is_canonical(nested(16).as_bytes()));
        assert!(!is_canonical(nested(17).as_bytes()));
        // Out of order, repeated and nested: the decoding path sorts and keeps the last.
        let stored = br#"{"metadata":{"managedFields":[{"manager":"m","fieldsV1":{"f:b":{},"f:a":{"f:y":{},"f:x":{}},"f:a":{"f:z":{}}}}]},"involvedObject":{}}"#;
        for group in [ApiGroup::Core, ApiGroup::EventsV1] {
            assert_eq!(
                transcoded(group, stored, 4),
                Some(decoded(group, stored, 4))
            );
        }
    }

    proptest! {
        /// A field set as `serde_json` writes it (any objects and strings) is canonical,
        /// and whatever is canonical is what it writes.
        #[test]
        fn written_field_sets_are_canonical(v in field_set(), text in "[{}\":,a-c\\\\]{0,24}") {
            let written = serde_json::to_string(&v).unwrap();
            prop_assert!(super::is_canonical(written.as_bytes()), "{}", written);
            // Canonical text is JSON (it is read unchecked before this) and what serde writes.
            if super::is_canonical(text.as_bytes()) {
                let parsed = serde_json::from_str::<serde_json::Value>(&text);
                prop_assert!(parsed.is_ok(), "canonical but not JSON: {}", text);
                prop_assert_eq!(serde_json::to_string(&parsed.unwrap()).unwrap(), text);
            }
        }
    }

    proptest! {
        /// A field set with one byte changed, dropped or added is canonical only if it is
        /// still JSON that serde writes that way.
        #[test]
        fn edited_field_sets_are_canonical_only_when_written(
            v in field_set(),
            at in any::<prop::sample::Index>(),
            edit in 0..3u8,
            byte in prop_oneof![Just(b'{'), Just(b'}'), Just(b'"'), Just(b':'), Just(b','), Just(b' '), Just(b'\\'), Just(1u8), Just(b'a')],
        ) {
            let mut text = serde_json::to_vec(&v).unwrap();
            let at = at.index(text.len() + 1);
            match edit {
                0 if at < text.len() => text[at] = byte,
                1 if at < text.len() => drop(text.remove(at)),
                _ => text.insert(at, byte),
            }
            // The scanner hands over UTF-8 text only.
            if std::str::from_utf8(&text).is_ok() && super::is_canonical(&text) {
                let parsed = serde_json::from_slice::<serde_json::Value>(&text);
                prop_assert!(parsed.is_ok(), "canonical but not JSON: {}", String::from_utf8_lossy(&text));
                prop_assert_eq!(serde_json::to_vec(&parsed.unwrap()).unwrap(), text);
            }
        }
    }

    /// Objects of objects and strings, keys without anything to escape.
    fn field_set() -> impl Strategy<Value = serde_json::Value> {
        let leaf = prop_oneof![
            Just(serde_json::Value::Object(Default::default())),
            "[a-zé:. ]{0,6}".prop_map(serde_json::Value::String),
        ];
        leaf.prop_recursive(6, 40, 5, |inner| {
            prop::collection::btree_map("[a-zé:.]{0,6}", inner, 0..5)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect()))
        })
    }

    /// Text the store does not write but k8s-openapi reads (spaces, `null` members, unknown
    /// and escaped member names, a type meta) is read as it reads it.
    #[test]
    fn other_json_of_an_event_is_read_as_decoded() {
        let e: CoreEvent = serde_json::from_value(json!({
            "metadata": {"name": "a", "namespace": "ns", "labels": {"k": "v"},
                         "managedFields": [{"manager": "m", "fieldsV1": {"f:count": {}}}]},
            "involvedObject": {"kind": "Pod", "name": "p"},
            "reason": "R", "count": 3, "firstTimestamp": "2024-01-01T00:00:00Z",
        }))
        .unwrap();
        let mut v: serde_json::Value = serde_json::from_slice(&encode(&e)).unwrap();
        v["apiVersion"] = json!("v1");
        v["kind"] = json!("Event");
        v["unknown"] = json!({"deep": [1, {"x": null}]});
        for member in ["source", "series", "related", "message", "action"] {
            v[member] = serde_json::Value::Null;
        }
        v["metadata"]["resourceVersion"] = json!("12");
        v["metadata"]["managedFields"][0]["time"] = serde_json::Value::Null;
        let text = serde_json::to_string_pretty(&v)
            .unwrap()
            .replace("\"reason\"", "\"\\u0072eason\"");
        for group in [ApiGroup::Core, ApiGroup::EventsV1] {
            let got = transcoded(group, text.as_bytes(), 9);
            assert_eq!(got, Some(decoded(group, text.as_bytes(), 9)), "{group:?}");
        }
        assert_eq!(
            decode_at(text.as_bytes(), 9).unwrap().reason.as_deref(),
            Some("R")
        );
    }

    /// A member named twice counts the last time, as k8s-openapi reads it; so does a label.
    #[test]
    fn a_member_named_twice_is_read_as_decoded() {
        let twice = br#"{"metadata":{"name":"a","name":"b","labels":{"k":"1","k":"2"}},"involvedObject":{"kind":"Pod","kind":"Node"},"count":1,"count":2}"#;
        for group in [ApiGroup::Core, ApiGroup::EventsV1] {
            let got = transcoded(group, twice, 9);
            assert_eq!(got, Some(decoded(group, twice, 9)), "{group:?}");
        }
        let e = decode_at(twice, 9).unwrap();
        assert_eq!(e.metadata.name.as_deref(), Some("b"));
        assert_eq!(e.metadata.labels.unwrap()["k"], "2");
        assert_eq!(
            (e.involved_object.kind.as_deref(), e.count),
            (Some("Node"), Some(2))
        );
    }

    proptest! {
        #[test]
        fn any_stored_event_is_the_decoded_message(
            e in crate::any_event(),
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
