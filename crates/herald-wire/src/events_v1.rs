//! The `events.k8s.io/v1` JSON of a stored event, transcoded from its stored bytes.
//!
//! Events are stored once, as core/v1 JSON ([`crate::stored::encode`]). A core/v1 list
//! item is those bytes with the resourceVersion spliced in; an `events.k8s.io/v1` item could
//! be made by a full decode into `k8s-openapi` types (every string copied, every timestamp
//! parsed, `fieldsV1` built as a `Value` tree), a conversion and an encode.
//!
//! [`write_item`] reads the stored object's members in place instead ([`StoredEvent`], as
//! the protobuf transcoder does) and writes the converted object from them: `metadata` is
//! copied with `resourceVersion` inserted, strings keep their stored escaping, renamed members
//! (`involvedObject` → `regarding`, `message` → `note`, `source` → `deprecatedSource`, …)
//! are written under their new names with the canonicalisation of
//! [`herald_core::event::convert`] (empty strings, zero counts and Go's zero time unset).
//!
//! `metadata` is most of a stored event (`managedFields` above all), and the transcoder
//! only copies it: its end is found from its structure alone
//! ([`Scanner::raw_unchecked`]), without parsing it, and it is not checked to be JSON.
//! That is the trust the core/v1 list already places in the stored bytes, which it sends
//! as they are; the store writes them with `serde_json`. Everything else is read and
//! checked. Its cost is measured by `cargo bench -p herald-server --bench render --
//! events_v1_json_transcoded` (figures in `crates/herald-wire/benches/README.md`).
//!
//! The result equals, as a JSON value, what the decoding path renders
//! ([`crate::json::write_events_v1_item`]) for every object the store writes.
//! Anything the transcoder is not sure it renders identically (a member of an unexpected
//! type, a timestamp in another layout, a `resourceVersion` already in `metadata`) makes
//! it decline, leaving `out` untouched, and the caller takes the decoding path: the fast
//! path never guesses.

use crate::Revision;
use crate::json::write::Object;
use crate::scan::{Decline, Scanned, Scanner, write_whole};
use crate::stored::read::{Reference, StoredEvent, write_metadata};
use crate::stored::time::{self as stored_time, Layout, StoredTime};

/// A JSON string member as stored (quoted, escapes kept), `None` for `null`.
type Quoted<'a> = Option<&'a str>;

/// The stored event: `metadata` copied whole and unchecked (see the module docs), strings
/// as stored.
type Stored<'a> = StoredEvent<'a, &'a str, &'a str>;

/// A string member: `None` for `null`; any other type declines.
fn quoted<'a>(s: &mut Scanner<'a>) -> Scanned<Quoted<'a>> {
    s.nullable(Scanner::quoted)
}

/// Appends the `events.k8s.io/v1` JSON of the event stored as `stored`, with
/// `resourceVersion` = `revision`: a list item, or with `kind` and `apiVersion` when
/// `type_meta` is set (a watch event's object). False, with `out` untouched, when the bytes
/// are not in a shape this transcoder knows; see the module docs.
pub fn write_item(out: &mut Vec<u8>, stored: &[u8], revision: Revision, type_meta: bool) -> bool {
    write_whole(out, |out| {
        let s = Stored::read(stored, Scanner::raw_unchecked, quoted)?;
        write(out, &s, revision, type_meta)
    })
}

/// The members in sorted order, as the decoding path writes them.
fn write(
    out: &mut Vec<u8>,
    s: &Stored<'_>,
    revision: Revision,
    type_meta: bool,
) -> Result<(), Decline> {
    let mut o = Object::open(out);
    opt_str(&mut o, "action", s.action)?;
    if type_meta {
        o.key("apiVersion");
        o.out.extend_from_slice(b"\"events.k8s.io/v1\"");
    }
    if let Some(count) = s.count.filter(|c| *c != 0) {
        o.key("deprecatedCount");
        o.out
            .extend_from_slice(itoa::Buffer::new().format(count).as_bytes());
    }
    o.key("deprecatedFirstTimestamp");
    time_or_null(o.out, s.first_timestamp, Layout::Seconds)?;
    o.key("deprecatedLastTimestamp");
    time_or_null(o.out, s.last_timestamp, Layout::Seconds)?;
    o.key("deprecatedSource");
    let mut src = Object::open(o.out);
    if let Some(source) = &s.source {
        opt_str(&mut src, "component", source.component)?;
        opt_str(&mut src, "host", source.host)?;
    }
    src.close();
    o.key("eventTime");
    time_or_null(o.out, s.event_time, Layout::Micros)?;
    if type_meta {
        o.key("kind");
        o.out.extend_from_slice(b"\"Event\"");
    }
    o.key("metadata");
    write_metadata(o.out, s.metadata, revision)?;
    opt_str(&mut o, "note", s.message)?;
    opt_str(&mut o, "reason", s.reason)?;
    o.key("regarding");
    reference(o.out, Some(&s.involved_object))?;
    if let Some(related) = &s.related {
        o.key("related");
        reference(o.out, Some(related))?;
    }
    opt_str(&mut o, "reportingController", s.reporting_component)?;
    opt_str(&mut o, "reportingInstance", s.reporting_instance)?;
    if let Some(series) = &s.series {
        o.key("series");
        let mut m = Object::open(o.out);
        m.key("count");
        m.out.extend_from_slice(
            itoa::Buffer::new()
                .format(series.count.unwrap_or(0))
                .as_bytes(),
        );
        m.key("lastObservedTime");
        time_or_null(m.out, series.last_observed_time, Layout::Micros)?;
        m.close();
    }
    opt_str(&mut o, "type", s.type_)?;
    o.close();
    Ok(())
}

/// An `ObjectReference` with its empty members left out; `{}` when absent.
fn reference(out: &mut Vec<u8>, r: Option<&Reference<&str>>) -> Result<(), Decline> {
    let mut o = Object::open(out);
    if let Some(r) = r {
        opt_str(&mut o, "apiVersion", r.api_version)?;
        opt_str(&mut o, "fieldPath", r.field_path)?;
        opt_str(&mut o, "kind", r.kind)?;
        opt_str(&mut o, "name", r.name)?;
        opt_str(&mut o, "namespace", r.namespace)?;
        opt_str(&mut o, "resourceVersion", r.resource_version)?;
        opt_str(&mut o, "uid", r.uid)?;
    }
    o.close();
    Ok(())
}

/// The JSON string of a string member, `None` when absent, `null` or empty.
fn nonempty_str(v: Quoted<'_>) -> Option<&str> {
    v.filter(|v| *v != "\"\"")
}

/// A timestamp member as written by the decoding path: `null` when absent or Go's zero
/// time, else the stored text, which must be in `layout` (the decoding path would
/// re-format any other text, or reject it).
fn time_or_null(out: &mut Vec<u8>, v: Option<&str>, layout: Layout) -> Result<(), Decline> {
    let text = v.unwrap_or("null").as_bytes();
    if text == b"null" {
        out.extend_from_slice(b"null");
        return Ok(());
    }
    match stored_time::parse(text, layout).ok_or(Decline)? {
        StoredTime::Zero => out.extend_from_slice(b"null"),
        StoredTime::At { .. } => out.extend_from_slice(text),
    }
    Ok(())
}

/// A string member copied as stored, left out when absent, `null` or empty.
fn opt_str(o: &mut Object<'_>, name: &'static str, v: Quoted<'_>) -> Result<(), Decline> {
    if let Some(v) = nonempty_str(v) {
        o.key(name);
        o.out.extend_from_slice(v.as_bytes());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::json::{event_json, write_events_v1_item};
    use herald_core::event::{ApiGroup, CoreEvent};
    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::write_item;
    use crate::stored::{decode_at, encode};

    /// The decoding path's list item and object for `stored`.
    fn decoded(stored: &[u8], revision: u64) -> (Value, Value) {
        let e = decode_at(stored, revision).unwrap();
        let mut item = Vec::new();
        write_events_v1_item(&mut item, e.clone()).unwrap();
        (
            serde_json::from_slice(&item).unwrap(),
            event_json(ApiGroup::EventsV1, &e),
        )
    }

    /// The transcoder's list item and object, `None` where it declines.
    fn transcoded(stored: &[u8], revision: u64) -> (Option<Value>, Option<Value>) {
        let run = |type_meta| {
            let mut out = b"prefix".to_vec();
            let ok = write_item(&mut out, stored, revision, type_meta);
            if !ok {
                assert_eq!(out, b"prefix", "a decline leaves the output untouched");
                return None;
            }
            assert!(out.starts_with(b"prefix"));
            Some(serde_json::from_slice(&out[6..]).unwrap())
        };
        (run(false), run(true))
    }

    fn kubelet_event() -> CoreEvent {
        serde_json::from_value(json!({
            "metadata": {
                "name": "web.17a", "namespace": "default", "uid": "5d0e",
                "creationTimestamp": "2026-11-25T09:48:17Z",
                "labels": {"app": "web"}, "annotations": {"note": "a \"quoted\" \\ value\n"},
                "managedFields": [{"manager": "kubelet", "operation": "Update", "apiVersion": "v1",
                                   "fieldsType": "FieldsV1", "time": "2026-11-25T09:48:17Z",
                                   "fieldsV1": {"f:count": {}, "f:involvedObject": {}, "f:source": {"f:component": {}}}}]
            },
            "involvedObject": {"kind": "Pod", "name": "web", "namespace": "default", "uid": "9f",
                               "apiVersion": "v1", "resourceVersion": "812", "fieldPath": "spec.containers{web}"},
            "reason": "BackOff", "message": "Back-off restarting failed container web é \u{1}",
            "source": {"component": "kubelet", "host": "node-1"},
            "firstTimestamp": "2026-11-25T09:48:17Z", "lastTimestamp": "2026-11-25T09:49:17Z",
            "count": 7, "type": "Warning",
            "eventTime": "2026-11-25T09:49:17.123456Z",
            "series": {"count": 2, "lastObservedTime": "2026-11-25T09:49:17.000001Z"},
            "related": {"kind": "Node", "name": "node-1"},
            "action": "Restarting", "reportingComponent": "kubelet", "reportingInstance": "node-1"
        }))
        .unwrap()
    }

    #[test]
    fn a_full_event_is_transcoded_to_the_decoded_json() {
        let stored = encode(&kubelet_event());
        let (item, object) = transcoded(&stored, 4242);
        let (want_item, want_object) = decoded(&stored, 4242);
        assert_eq!(item.as_ref(), Some(&want_item));
        assert_eq!(object.as_ref(), Some(&want_object));
        // Spot checks on the renames, so the comparison cannot pass by both sides being empty.
        let item = item.unwrap();
        assert_eq!(item["regarding"]["fieldPath"], "spec.containers{web}");
        assert_eq!(
            item["note"],
            "Back-off restarting failed container web é \u{1}"
        );
        assert_eq!(item["deprecatedCount"], 7);
        assert_eq!(item["reportingController"], "kubelet");
        assert_eq!(item["metadata"]["resourceVersion"], "4242");
        assert!(item.get("kind").is_none());
        assert_eq!(object.unwrap()["apiVersion"], "events.k8s.io/v1");
    }

    #[test]
    fn unset_and_zero_members_follow_the_canonical_form() {
        let e = CoreEvent {
            count: Some(0),
            message: Some(String::new()),
            event_time: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(
                herald_core::event::convert::GO_ZERO_TIME,
            )),
            series: Some(k8s_openapi::api::core::v1::EventSeries::default()),
            ..CoreEvent::default()
        };
        let stored = encode(&e);
        let (item, object) = transcoded(&stored, 1);
        let (want_item, want_object) = decoded(&stored, 1);
        assert_eq!(item.as_ref(), Some(&want_item));
        assert_eq!(object, Some(want_object));
        let item = item.unwrap();
        assert_eq!(item["eventTime"], Value::Null);
        assert_eq!(item["deprecatedSource"], json!({}));
        assert_eq!(item["regarding"], json!({}));
        assert_eq!(
            item["series"],
            json!({"count": 0, "lastObservedTime": null})
        );
        assert!(item.get("note").is_none() && item.get("deprecatedCount").is_none());
    }

    /// Shapes the store does not write are left to the decoding path, which renders them.
    #[test]
    fn unfamiliar_shapes_are_declined() {
        for stored in [
            // A timestamp with an offset, or to the millisecond.
            r#"{"metadata":{},"involvedObject":{},"firstTimestamp":"2026-11-25T10:48:17+01:00"}"#,
            r#"{"metadata":{},"involvedObject":{},"eventTime":"2026-11-25T09:48:17.123Z"}"#,
            // A date that does not exist.
            r#"{"metadata":{},"involvedObject":{},"lastTimestamp":"2026-02-30T09:48:17Z"}"#,
            // A resourceVersion already stored; metadata with spaces.
            r#"{"metadata":{"resourceVersion":"3"},"involvedObject":{}}"#,
            r#"{"metadata":{ },"involvedObject":{}}"#,
            // A string member of another type, no involvedObject, no metadata, another kind,
            // metadata that is not an object or does not end.
            r#"{"metadata":{},"involvedObject":{"name":7}}"#,
            r#"{"metadata":{}}"#,
            r#"{"involvedObject":{}}"#,
            r#"{"kind":"Pod","metadata":{},"involvedObject":{}}"#,
            r#"{"metadata":[],"involvedObject":{}}"#,
            r#"{"involvedObject":{},"metadata":{"name":"a"}"#,
        ] {
            let (item, object) = transcoded(stored.as_bytes(), 5);
            assert!(item.is_none() && object.is_none(), "{stored}");
        }
        // Metadata nested deeper than the scanner's bound: found unchecked, so the bound is
        // what keeps text the decoding path would reject (past serde_json's 128) out.
        let depth = crate::scan::MAX_DEPTH;
        let deep = format!(
            r#"{{"metadata":{{"x":{}{}}},"involvedObject":{{}}}}"#,
            "[".repeat(depth),
            "]".repeat(depth)
        );
        assert_eq!(transcoded(deep.as_bytes(), 5), (None, None));
        let shallow = deep.replacen('[', "", 1).replacen(']', "", 1);
        assert!(transcoded(shallow.as_bytes(), 5).0.is_some());
        // The first two still render, through the decoding path (which re-formats them); the
        // date that does not exist does not decode at all.
        for (stored, key, want) in [
            (
                r#"{"metadata":{},"involvedObject":{},"firstTimestamp":"2026-11-25T10:48:17+01:00"}"#,
                "deprecatedFirstTimestamp",
                "2026-11-25T09:48:17Z",
            ),
            (
                r#"{"metadata":{},"involvedObject":{},"eventTime":"2026-11-25T09:48:17.123Z"}"#,
                "eventTime",
                "2026-11-25T09:48:17.123000Z",
            ),
        ] {
            let e = decode_at(stored.as_bytes(), 5).unwrap();
            assert_eq!(event_json(ApiGroup::EventsV1, &e)[key], want);
        }
        assert!(
            decode_at(
                br#"{"metadata":{},"involvedObject":{},"lastTimestamp":"2026-02-30T09:48:17Z"}"#,
                5
            )
            .is_err()
        );
    }

    /// As k8s-openapi reads a member named twice, the last one counts; members it does not
    /// know are skipped.
    #[test]
    fn repeated_and_unknown_members_are_read_as_decoded() {
        let stored = br#"{"metadata":{"name":"a"},"metadata":{"name":"b","uid":"u"},"involvedObject":{"kind":"Pod","name":"x","name":"y"},"reason":"a","reason":"b","spec":{"x":[1,2.5,null,true]},"apiVersion":"v1","kind":"Event"}"#;
        let (item, object) = transcoded(stored, 9);
        let (want_item, want_object) = decoded(stored, 9);
        assert_eq!(item.as_ref(), Some(&want_item));
        assert_eq!(object, Some(want_object));
        let item = item.unwrap();
        assert_eq!(item["metadata"]["name"], "b");
        assert_eq!(item["regarding"]["name"], "y");
        assert_eq!(item["reason"], "b");
    }

    proptest! {
        #[test]
        fn any_stored_event_transcodes_to_the_decoded_json(
            e in crate::any_event(),
            revision in 1u64..u64::MAX,
        ) {
            let stored = encode(&e);
            let (item, object) = transcoded(&stored, revision);
            let (want_item, want_object) = decoded(&stored, revision);
            // Of what the store writes, it declines only metadata with a string equal to
            // "resourceVersion".
            let text = String::from_utf8_lossy(&stored);
            let v: serde_json::Value = serde_json::from_slice(&stored).unwrap();
            prop_assert!(
                item.is_some() || v["metadata"].to_string().contains("\"resourceVersion\""),
                "declined {}",
                text
            );
            if let Some(item) = item {
                prop_assert_eq!(item, want_item);
                prop_assert_eq!(object, Some(want_object));
            }
        }
    }
}
