//! The stored JSON of an event, written without serde: the encoding half of every write.
//!
//! `serde_json` and k8s-openapi's `Serialize` impls escape every string a byte at a time
//! and format every timestamp by jiff's general `strftime` into a new `String`.
//! `write_event` (called by [`crate::stored::encode`]) writes the same JSON value directly: strings are scanned eight bytes at a time, timestamps are written from
//! their civil fields.
//!
//! Every k8s-openapi struct is destructured without `..`: a field added by an upgrade stops
//! the build here instead of being dropped from storage. The tests hold the output equal, as
//! a JSON value, to what serde writes.

use std::collections::BTreeMap;

use herald_core::event::CoreEvent;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{EventSeries, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    FieldsV1, ManagedFieldsEntry, MicroTime, ObjectMeta, OwnerReference, Time,
};
use serde_json::Value;

/// Appends `e` as its stored JSON object: `metadata` first (the resourceVersion splice
/// relies on it), then the other fields in the order kube-apiserver writes them. Unset
/// optional fields are left out, except the times core/v1 always carries
/// (`firstTimestamp`, `lastTimestamp`, `eventTime`, a series' `lastObservedTime`), which
/// are written as `null`.
pub(crate) fn write_event(out: &mut Vec<u8>, e: &CoreEvent) {
    let CoreEvent {
        action,
        count,
        event_time,
        first_timestamp,
        involved_object,
        last_timestamp,
        message,
        metadata,
        reason,
        related,
        reporting_component,
        reporting_instance,
        series,
        source,
        type_,
    } = e;
    let mut o = Object::open(out);
    o.key("metadata");
    write_meta(o.out, metadata);
    o.key("involvedObject");
    write_reference(o.out, involved_object);
    o.opt_str("reason", reason);
    o.opt_str("message", message);
    if let Some(source) = source {
        o.key("source");
        write_source(o.out, source);
    }
    o.key("firstTimestamp");
    opt_time(o.out, first_timestamp.as_ref());
    o.key("lastTimestamp");
    opt_time(o.out, last_timestamp.as_ref());
    o.opt_int("count", count.map(i64::from));
    o.opt_str("type", type_);
    o.key("eventTime");
    opt_micro_time(o.out, event_time.as_ref());
    if let Some(series) = series {
        o.key("series");
        write_series(o.out, series);
    }
    o.opt_str("action", action);
    if let Some(related) = related {
        o.key("related");
        write_reference(o.out, related);
    }
    o.opt_str("reportingComponent", reporting_component);
    o.opt_str("reportingInstance", reporting_instance);
    o.close();
}

fn write_meta(out: &mut Vec<u8>, m: &ObjectMeta) {
    let ObjectMeta {
        annotations,
        creation_timestamp,
        deletion_grace_period_seconds,
        deletion_timestamp,
        finalizers,
        generate_name,
        generation,
        labels,
        managed_fields,
        name,
        namespace,
        owner_references,
        resource_version,
        self_link,
        uid,
    } = m;
    let mut o = Object::open(out);
    if let Some(a) = annotations {
        o.key("annotations");
        string_map(o.out, a);
    }
    if let Some(t) = creation_timestamp {
        o.key("creationTimestamp");
        time(o.out, t);
    }
    o.opt_int("deletionGracePeriodSeconds", *deletion_grace_period_seconds);
    if let Some(t) = deletion_timestamp {
        o.key("deletionTimestamp");
        time(o.out, t);
    }
    if let Some(f) = finalizers {
        o.key("finalizers");
        array(o.out, f, |out, s| string(out, s));
    }
    o.opt_str("generateName", generate_name);
    o.opt_int("generation", *generation);
    if let Some(l) = labels {
        o.key("labels");
        string_map(o.out, l);
    }
    if let Some(entries) = managed_fields {
        o.key("managedFields");
        array(o.out, entries, write_managed_fields_entry);
    }
    o.opt_str("name", name);
    o.opt_str("namespace", namespace);
    if let Some(refs) = owner_references {
        o.key("ownerReferences");
        array(o.out, refs, write_owner_reference);
    }
    o.opt_str("resourceVersion", resource_version);
    o.opt_str("selfLink", self_link);
    o.opt_str("uid", uid);
    o.close();
}

fn write_managed_fields_entry(out: &mut Vec<u8>, e: &ManagedFieldsEntry) {
    let ManagedFieldsEntry {
        api_version,
        fields_type,
        fields_v1,
        manager,
        operation,
        subresource,
        time: at,
    } = e;
    let mut o = Object::open(out);
    o.opt_str("apiVersion", api_version);
    o.opt_str("fieldsType", fields_type);
    if let Some(FieldsV1(v)) = fields_v1 {
        o.key("fieldsV1");
        value(o.out, v);
    }
    o.opt_str("manager", manager);
    o.opt_str("operation", operation);
    o.opt_str("subresource", subresource);
    if let Some(t) = at {
        o.key("time");
        time(o.out, t);
    }
    o.close();
}

fn write_owner_reference(out: &mut Vec<u8>, r: &OwnerReference) {
    let OwnerReference {
        api_version,
        block_owner_deletion,
        controller,
        kind,
        name,
        uid,
    } = r;
    let mut o = Object::open(out);
    o.str("apiVersion", api_version);
    o.opt_bool("blockOwnerDeletion", *block_owner_deletion);
    o.opt_bool("controller", *controller);
    o.str("kind", kind);
    o.str("name", name);
    o.str("uid", uid);
    o.close();
}

fn write_reference(out: &mut Vec<u8>, r: &ObjectReference) {
    let ObjectReference {
        api_version,
        field_path,
        kind,
        name,
        namespace,
        resource_version,
        uid,
    } = r;
    let mut o = Object::open(out);
    o.opt_str("apiVersion", api_version);
    o.opt_str("fieldPath", field_path);
    o.opt_str("kind", kind);
    o.opt_str("name", name);
    o.opt_str("namespace", namespace);
    o.opt_str("resourceVersion", resource_version);
    o.opt_str("uid", uid);
    o.close();
}

fn write_source(out: &mut Vec<u8>, s: &EventSource) {
    let EventSource { component, host } = s;
    let mut o = Object::open(out);
    o.opt_str("component", component);
    o.opt_str("host", host);
    o.close();
}

fn write_series(out: &mut Vec<u8>, s: &EventSeries) {
    let EventSeries {
        count,
        last_observed_time,
    } = s;
    let mut o = Object::open(out);
    o.opt_int("count", count.map(i64::from));
    o.key("lastObservedTime");
    opt_micro_time(o.out, last_observed_time.as_ref());
    o.close();
}

/// An object being written: tracks whether a member needs a comma before it.
pub(crate) struct Object<'a> {
    pub(crate) out: &'a mut Vec<u8>,
    first: bool,
}

impl<'a> Object<'a> {
    pub(crate) fn open(out: &'a mut Vec<u8>) -> Self {
        out.push(b'{');
        Object { out, first: true }
    }

    /// Writes `"name":` for a field name of the schema (plain ASCII, nothing to escape);
    /// the caller writes the value.
    pub(crate) fn key(&mut self, name: &'static str) {
        self.comma();
        self.out.push(b'"');
        self.out.extend_from_slice(name.as_bytes());
        self.out.extend_from_slice(b"\":");
    }

    /// Writes the key of a free-form map, escaped.
    fn map_key(&mut self, k: &str) {
        self.comma();
        string(self.out, k);
        self.out.push(b':');
    }

    fn comma(&mut self) {
        if !std::mem::take(&mut self.first) {
            self.out.push(b',');
        }
    }

    fn str(&mut self, name: &'static str, v: &str) {
        self.key(name);
        string(self.out, v);
    }

    fn opt_str(&mut self, name: &'static str, v: &Option<String>) {
        if let Some(v) = v {
            self.str(name, v);
        }
    }

    fn opt_int(&mut self, name: &'static str, v: Option<i64>) {
        if let Some(v) = v {
            self.key(name);
            self.out
                .extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
        }
    }

    fn opt_bool(&mut self, name: &'static str, v: Option<bool>) {
        if let Some(v) = v {
            self.key(name);
            self.out
                .extend_from_slice(if v { b"true" } else { b"false" });
        }
    }

    pub(crate) fn close(self) {
        self.out.push(b'}');
    }
}

fn array<T>(out: &mut Vec<u8>, items: &[T], mut each: impl FnMut(&mut Vec<u8>, &T)) {
    out.push(b'[');
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        each(out, item);
    }
    out.push(b']');
}

fn string_map(out: &mut Vec<u8>, m: &BTreeMap<String, String>) {
    let mut o = Object::open(out);
    for (k, v) in m {
        o.map_key(k);
        string(o.out, v);
    }
    o.close();
}

/// A free-form JSON value (`fieldsV1`), in its map order. Recurses once per level, as
/// serde_json's own serializer does. The depth is bounded by what a write can store:
/// serde_json parses at most 128 levels of a body, and a JSON patch that would nest the
/// object deeper than the registry's patched-object depth bound is refused.
fn value(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        // Numbers keep serde_json's own rendering (floats especially); they do not occur
        // in field sets, so this path is never hot.
        Value::Number(n) => out.extend_from_slice(n.to_string().as_bytes()),
        Value::String(s) => string(out, s),
        Value::Array(items) => array(out, items, value),
        Value::Object(m) => {
            let mut o = Object::open(out);
            for (k, v) in m {
                o.map_key(k);
                value(o.out, v);
            }
            o.close();
        }
    }
}

fn opt_time(out: &mut Vec<u8>, t: Option<&Time>) {
    match t {
        Some(t) => time(out, t),
        None => out.extend_from_slice(b"null"),
    }
}

fn opt_micro_time(out: &mut Vec<u8>, t: Option<&MicroTime>) {
    match t {
        Some(MicroTime(ts)) => timestamp(out, *ts, true),
        None => out.extend_from_slice(b"null"),
    }
}

fn time(out: &mut Vec<u8>, Time(ts): &Time) {
    timestamp(out, *ts, false);
}

/// `"2006-01-02T15:04:05Z"`, or with `micros` `"2006-01-02T15:04:05.000000Z"`: what
/// k8s-openapi's `Time` and `MicroTime` write (`%Y-%m-%dT%H:%M:%SZ`, `%S%.6f`), sub-second
/// digits truncated. Years outside 0000–9999 (which jiff writes with a sign) go through jiff.
fn timestamp(out: &mut Vec<u8>, ts: Timestamp, micros: bool) {
    let dt = jiff::tz::Offset::UTC.to_datetime(ts);
    let year = match u16::try_from(dt.year()) {
        Ok(year) if year <= 9999 => year,
        _ => {
            let format = if micros {
                "%Y-%m-%dT%H:%M:%S%.6fZ"
            } else {
                "%Y-%m-%dT%H:%M:%SZ"
            };
            string(out, &ts.strftime(format).to_string());
            return;
        }
    };
    let mut buf = *b"\"0000-00-00T00:00:00.000000Z\"";
    digits(&mut buf[1..5], u32::from(year));
    digits(&mut buf[6..8], dt.month().unsigned_abs().into());
    digits(&mut buf[9..11], dt.day().unsigned_abs().into());
    digits(&mut buf[12..14], dt.hour().unsigned_abs().into());
    digits(&mut buf[15..17], dt.minute().unsigned_abs().into());
    digits(&mut buf[18..20], dt.second().unsigned_abs().into());
    if micros {
        let micro = dt.subsec_nanosecond().unsigned_abs() / 1_000;
        digits(&mut buf[21..27], micro);
        out.extend_from_slice(&buf);
    } else {
        out.extend_from_slice(&buf[..20]);
        out.extend_from_slice(b"Z\"");
    }
}

/// Writes `n` zero-padded into all of `dst` (its low digits if it has more).
fn digits(dst: &mut [u8], mut n: u32) {
    for d in dst.iter_mut().rev() {
        *d = b'0' + (n % 10) as u8;
        n /= 10;
    }
}

/// A JSON string, escaped as `serde_json` escapes: `"` and `\`, the short forms of
/// `\b \f \n \r \t`, and `\u00XX` for the other control characters.
fn string(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    if needs_escape(bytes) {
        escaped(out, bytes);
    } else {
        out.extend_from_slice(bytes);
    }
    out.push(b'"');
}

/// The slow path of [`string`], for the rare text that has something to escape.
fn escaped(out: &mut Vec<u8>, bytes: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut run = 0; // start of the bytes not yet copied
    for (i, &b) in bytes.iter().enumerate() {
        let short = match b {
            b'"' => b'"',
            b'\\' => b'\\',
            b'\n' => b'n',
            b'\r' => b'r',
            b'\t' => b't',
            0x08 => b'b',
            0x0c => b'f',
            0x00..0x20 => b'u',
            _ => continue,
        };
        out.extend_from_slice(&bytes[run..i]);
        out.extend_from_slice(&[b'\\', short]);
        if short == b'u' {
            out.extend_from_slice(&[
                b'0',
                b'0',
                HEX[usize::from(b >> 4)],
                HEX[usize::from(b & 0xf)],
            ]);
        }
        run = i + 1;
    }
    out.extend_from_slice(&bytes[run..]);
}

/// Whether `bytes` has a `"`, a `\` or a control character, looked at eight at a time (the
/// last few padded with spaces).
fn needs_escape(bytes: &[u8]) -> bool {
    let (words, tail) = bytes.as_chunks::<8>();
    let mut last = [b' '; 8];
    last[..tail.len()].copy_from_slice(tail);
    words
        .iter()
        .chain(std::iter::once(&last))
        .any(|w| word_needs_escape(u64::from_le_bytes(*w)))
}

/// Whether any of the eight bytes in `w` is `"`, `\` or below 0x20 (the classic bit tricks
/// for "has a zero byte" and "has a byte less than n").
fn word_needs_escape(w: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let has_zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGH;
    let control = w.wrapping_sub(ONES * 0x20) & !w & HIGH;
    let quote = has_zero(w ^ (ONES * u64::from(b'"')));
    let backslash = has_zero(w ^ (ONES * u64::from(b'\\')));
    (control | quote | backslash) != 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::event;
    use proptest::prelude::*;

    fn written(e: &CoreEvent) -> Vec<u8> {
        let mut out = Vec::new();
        write_event(&mut out, e);
        out
    }

    /// What serde writes for the same event, as a value: k8s-openapi's object, with the
    /// times core/v1 always carries as `null` when unset.
    fn serde_value(e: &CoreEvent) -> Value {
        let mut v = serde_json::to_value(e).unwrap();
        let m = v.as_object_mut().unwrap();
        m.remove("apiVersion");
        m.remove("kind");
        for t in ["firstTimestamp", "lastTimestamp", "eventTime"] {
            m.entry(t).or_insert(Value::Null);
        }
        if let Some(s) = m.get_mut("series").and_then(Value::as_object_mut) {
            s.entry("lastObservedTime").or_insert(Value::Null);
        }
        v
    }

    #[test]
    fn strings_escape_as_serde_json_does() {
        let mut all: String = (0u8..0x80).map(char::from).collect();
        all.push_str("é ü 日本 \u{2028} 🦀 \"quoted\" back\\slash");
        for s in [
            "",
            "a",
            "plain ascii longer than eight bytes",
            "\"",
            "tab\there",
            "12345678\"",
            "1234567\u{1}",
            all.as_str(),
        ] {
            let mut out = Vec::new();
            string(&mut out, s);
            assert_eq!(
                String::from_utf8(out).unwrap(),
                serde_json::to_string(s).unwrap(),
                "{s:?}"
            );
        }
    }

    #[test]
    fn timestamps_match_k8s_openapi() {
        for (secs, nanos) in [
            (0, 0),
            (1_700_000_000, 123_456_789),
            (1_700_000_000, 999_999_999),
            (-1, 500_000_000),
            (-62_135_596_800, 0),           // 0001-01-01, Go's zero time
            (-62_167_219_200, 0),           // 0000-01-01
            (-62_167_219_201, 0),           // -0001-12-31: written by jiff
            (253_402_207_199, 999_999_000), // the last second jiff takes
        ] {
            let ts = Timestamp::new(secs, nanos).unwrap();
            for micros in [false, true] {
                let mut out = Vec::new();
                timestamp(&mut out, ts, micros);
                let want = if micros {
                    serde_json::to_vec(&MicroTime(ts)).unwrap()
                } else {
                    serde_json::to_vec(&Time(ts)).unwrap()
                };
                assert_eq!(
                    String::from_utf8(out).unwrap(),
                    String::from_utf8(want).unwrap(),
                    "{ts}"
                );
            }
        }
    }

    #[test]
    fn a_full_event_equals_serde() {
        let e: CoreEvent = serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": "web.1", "namespace": "ns", "uid": "u", "generateName": "web.",
                "creationTimestamp": "2024-01-01T00:00:00Z", "generation": 3,
                "deletionTimestamp": "2024-01-02T00:00:00Z", "deletionGracePeriodSeconds": 30,
                "selfLink": "/x", "resourceVersion": "9",
                "labels": {"b": "2", "a": "1"}, "annotations": {"x": "y\n\"z\""},
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "q",
                                     "controller": true, "blockOwnerDeletion": false}],
                "managedFields": [{"manager": "m", "operation": "Update", "apiVersion": "v1",
                                   "fieldsType": "FieldsV1", "time": "2024-01-01T00:00:00Z",
                                   "subresource": "status",
                                   "fieldsV1": {"f:metadata": {}, "f:count": {}, "n": [1, 2.5, null, true, "s"]}}],
                "finalizers": ["a/b", "c"]
            },
            "involvedObject": {"kind": "Pod", "name": "web", "namespace": "ns", "uid": "",
                               "fieldPath": "spec", "apiVersion": "v1", "resourceVersion": "1"},
            "related": {"kind": "Node", "name": "n1"},
            "reason": "BackOff", "message": "m \"metadata\":{ é\u{1}", "type": "Warning",
            "action": "", "count": 3, "source": {"component": "kubelet", "host": "n1"},
            "firstTimestamp": "2024-01-01T00:00:00Z", "lastTimestamp": "2024-01-01T00:00:05Z",
            "eventTime": "2024-01-01T00:00:05.123456Z",
            "series": {"count": 2, "lastObservedTime": "2024-01-01T00:00:05.000001Z"},
            "reportingComponent": "kubelet", "reportingInstance": "n1"
        }))
        .unwrap();
        let out = written(&e);
        assert!(out.starts_with(br#"{"metadata":{"#));
        let got: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(got, serde_value(&e));
        let empty = CoreEvent {
            series: Some(EventSeries::default()),
            ..CoreEvent::default()
        };
        let got: Value = serde_json::from_slice(&written(&empty)).unwrap();
        assert_eq!(got, serde_value(&empty));
    }

    /// The bytes, not only the value, of what serde wrote before: an update that changes
    /// nothing compares its encoding with the stored bytes to skip the write.
    #[test]
    fn bytes_equal_the_serde_encoding_of_earlier_versions() {
        let e: CoreEvent = serde_json::from_str(
            r#"{"metadata":{"name":"web.1","namespace":"ns","uid":"u",
                "creationTimestamp":"2024-01-01T00:00:00Z","annotations":{"a":"1"},
                "managedFields":[{"manager":"m","operation":"Update","apiVersion":"v1",
                    "time":"2024-01-01T00:00:00Z","fieldsType":"FieldsV1",
                    "fieldsV1":{"f:count":{},"f:metadata":{"f:annotations":{".":{}}}}}]},
                "involvedObject":{"kind":"Pod","name":"web","namespace":"ns"},
                "reason":"BackOff","message":"m","source":{"component":"kubelet"},
                "firstTimestamp":"2024-01-01T00:00:00Z","lastTimestamp":"2024-01-01T00:00:05Z",
                "count":3,"type":"Warning","series":{"count":2}}"#,
        )
        .unwrap();
        let want = concat!(
            r#"{"metadata":{"annotations":{"a":"1"},"creationTimestamp":"2024-01-01T00:00:00Z","#,
            r#""managedFields":[{"apiVersion":"v1","fieldsType":"FieldsV1","#,
            r#""fieldsV1":{"f:count":{},"f:metadata":{"f:annotations":{".":{}}}},"#,
            r#""manager":"m","operation":"Update","time":"2024-01-01T00:00:00Z"}],"#,
            r#""name":"web.1","namespace":"ns","uid":"u"},"#,
            r#""involvedObject":{"kind":"Pod","name":"web","namespace":"ns"},"#,
            r#""reason":"BackOff","message":"m","source":{"component":"kubelet"},"#,
            r#""firstTimestamp":"2024-01-01T00:00:00Z","lastTimestamp":"2024-01-01T00:00:05Z","#,
            r#""count":3,"type":"Warning","eventTime":null,"#,
            r#""series":{"count":2,"lastObservedTime":null},"#,
            r#""reportingComponent":"","reportingInstance":""}"#
        );
        // Through `encode`, which normalizes first, as every write does.
        let stored = crate::stored::encode(&e);
        assert_eq!(std::str::from_utf8(&stored).unwrap(), want);
    }

    proptest! {
        #[test]
        fn any_event_equals_serde(e in event()) {
            let out = written(&e);
            let got: Value = serde_json::from_slice(&out).unwrap();
            prop_assert_eq!(got, serde_value(&e));
        }
    }
}
