//! A `Table` row and a `PartialObjectMetadata` written from a stored event's bytes.
//!
//! `kubectl get events` reads a `Table`, and metadata informers read
//! `PartialObjectMetadata`. The decoding path takes a full decode of each stored event
//! into `k8s-openapi` types (every string copied, every timestamp parsed by a general
//! parser, `managedFields` built whole) for a row that needs ten short cells and the
//! metadata as it is stored.
//!
//! Here the stored event is read in place ([`StoredEvent`], as the transcoders read it):
//! strings are borrowed unless they have escapes, timestamps are read in the layout the
//! store writes ([`stored_time`]), and `metadata` is copied with its `resourceVersion` put
//! in, unparsed except for its `name` ([`Scanner::raw_unchecked`]). The cells are made by
//! the same [`row_cells`] as a decoded event's. The result equals, as a JSON value, what
//! the decoding path writes for every object the store writes (the property tests compare
//! them). Of the members read, anything else (a timestamp in another layout, a member of an
//! unexpected type, a `resourceVersion` already in `metadata`) makes these functions
//! decline, leaving `out` untouched, and the caller decodes the event instead. What is in
//! `metadata` besides `name` is copied as stored, unchecked: the trust the core/v1 list and
//! the `events.k8s.io/v1` transcoder place in the bytes the store wrote with `serde_json`.

use std::borrow::Cow;

use herald_core::event::convert::GO_ZERO_TIME;
use jiff::Timestamp;

use super::MetaVersion;
use super::{self as table, RowFields, TableOptions, row_cells};
use crate::Revision;
use crate::scan::{Decline, Scanned, Scanner, write_whole};
use crate::stored::read::{StoredEvent, write_metadata};
use crate::stored::time::{self as stored_time, Layout, StoredTime};

/// The stored event: `metadata` as its stored text, strings decoded.
type Stored<'a> = StoredEvent<'a, &'a str, Cow<'a, str>>;

fn read(stored: &[u8]) -> Scanned<Stored<'_>> {
    Stored::read(stored, Scanner::raw_unchecked, |s| s.nullable(Scanner::str))
}

/// Appends the `PartialObjectMetadata` (in `version`) of the event stored as `stored`, with
/// `resourceVersion` = `revision`. False, with `out` untouched, where it declines; see the
/// module docs.
pub fn write_partial_object_metadata(
    out: &mut Vec<u8>,
    stored: &[u8],
    revision: Revision,
    version: MetaVersion,
) -> bool {
    write_whole(out, |out| {
        partial(out, read(stored)?.metadata, revision, version)
    })
}

/// Appends the Table row of the event stored as `stored`, with `resourceVersion` =
/// `revision`: its cells with ages at `now`, then its object as `opts` asks;
/// `full_object` appends the event (with `kind` and `apiVersion`) and is called only for
/// `includeObject=Object`. False, with `out` untouched, where it (or `full_object`)
/// declines; see the module docs.
pub fn write_row(
    out: &mut Vec<u8>,
    stored: &[u8],
    revision: Revision,
    opts: &TableOptions,
    now: Timestamp,
    full_object: impl FnOnce(&mut Vec<u8>) -> bool,
) -> bool {
    write_whole(out, |out| {
        let e = read(stored)?;
        let name = metadata_name(e.metadata)?;
        let cells = row_cells(&fields(&e, name.as_deref())?, now);
        table::write_row(
            out,
            &cells,
            opts.include_object,
            |out| partial(out, e.metadata, revision, opts.version),
            |out| full_object(out).then_some(()).ok_or(Decline),
        )
    })
}

/// `{"kind":"PartialObjectMetadata","apiVersion":…,"metadata":…}`.
fn partial(
    out: &mut Vec<u8>,
    metadata: &str,
    revision: Revision,
    version: MetaVersion,
) -> Scanned<()> {
    table::write_partial_object_metadata_with(out, version, |out| {
        write_metadata(out, metadata, revision)
    })
}

/// `metadata.name`, read from the stored metadata's text: its other members are only
/// found ([`Scanner::raw_unchecked`]), not read.
fn metadata_name(metadata: &str) -> Scanned<Option<Cow<'_, str>>> {
    let mut s = Scanner::new(metadata.as_bytes())?;
    let mut name = None;
    s.object(|s, key| {
        if key == "name" {
            name = s.nullable(Scanner::str)?;
        } else {
            s.raw_unchecked()?;
        }
        Ok(())
    })?;
    s.finish()?;
    Ok(name)
}

/// What the row's cells are made of.
fn fields<'e>(e: &'e Stored<'_>, name: Option<&'e str>) -> Scanned<RowFields<'e>> {
    let io = &e.involved_object;
    let source = e.source.as_ref();
    Ok(RowFields {
        first_timestamp: time(e.first_timestamp, Layout::Seconds)?,
        last_timestamp: time(e.last_timestamp, Layout::Seconds)?,
        event_time: time(e.event_time, Layout::Micros)?,
        series: match &e.series {
            Some(series) => Some((
                series.count,
                time(series.last_observed_time, Layout::Micros)?,
            )),
            None => None,
        },
        count: e.count,
        kind: io.kind.as_deref(),
        object_name: io.name.as_deref(),
        field_path: io.field_path.as_deref(),
        component: source.and_then(|s| s.component.as_deref()),
        host: source.and_then(|s| s.host.as_deref()),
        reporting_component: e.reporting_component.as_deref(),
        reporting_instance: e.reporting_instance.as_deref(),
        type_: e.type_.as_deref(),
        reason: e.reason.as_deref(),
        message: e.message.as_deref(),
        name,
    })
}

/// A stored timestamp as the decoding path reads it: `None` when absent or `null`, Go's
/// zero time as itself (k8s-openapi keeps it), anything not in `layout` declined.
fn time(v: Option<&str>, layout: Layout) -> Scanned<Option<Timestamp>> {
    let Some(text) = v.filter(|t| *t != "null") else {
        return Ok(None);
    };
    match stored_time::parse(text.as_bytes(), layout).ok_or(Decline)? {
        StoredTime::Zero => Ok(Some(GO_ZERO_TIME)),
        StoredTime::At { seconds, micros } => {
            let nanos = i32::try_from(micros).map_err(|_| Decline)? * 1000;
            Timestamp::new(seconds, nanos)
                .map(Some)
                .map_err(|_| Decline)
        }
    }
}

#[cfg(test)]
mod tests {
    use herald_core::event::CoreEvent;
    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::*;
    use crate::stored::{decode_at, encode};
    use crate::table::IncludeObject;

    const NOW: &str = "2026-11-25T10:00:00Z";

    fn now() -> Timestamp {
        NOW.parse().unwrap()
    }

    fn options(include_object: IncludeObject, version: MetaVersion) -> TableOptions {
        TableOptions {
            version,
            include_object,
            no_headers: false,
        }
    }

    /// The decoding path's row and `PartialObjectMetadata` for `stored`, as JSON values.
    fn decoded(
        stored: &[u8],
        revision: u64,
        opts: &TableOptions,
        now: Timestamp,
    ) -> (Value, Value) {
        let e = decode_at(stored, revision).unwrap();
        let row = crate::table::event_row(&e, now, opts, &|_| json!({"full": true}));
        let partial = crate::table::partial_object_metadata(&e.metadata, opts.version);
        (row, partial)
    }

    /// This module's row and `PartialObjectMetadata`, `None` where it declines.
    fn transcoded(
        stored: &[u8],
        revision: u64,
        opts: &TableOptions,
        now: Timestamp,
    ) -> (Option<Value>, Option<Value>) {
        let parse = |out: &[u8]| serde_json::from_slice::<Value>(&out[6..]).unwrap();
        let mut out = b"prefix".to_vec();
        let row = write_row(&mut out, stored, revision, opts, now, |out| {
            out.extend_from_slice(br#"{"full":true}"#);
            true
        });
        let row = if row {
            Some(parse(&out))
        } else {
            assert_eq!(out, b"prefix", "a decline leaves the output untouched");
            None
        };
        let mut out = b"prefix".to_vec();
        let partial = if write_partial_object_metadata(&mut out, stored, revision, opts.version) {
            Some(parse(&out))
        } else {
            assert_eq!(out, b"prefix", "a decline leaves the output untouched");
            None
        };
        (row, partial)
    }

    fn kubelet_event() -> CoreEvent {
        serde_json::from_value(json!({
            "metadata": {"name": "web.17a \"q\"", "namespace": "default", "uid": "5d0e",
                         "creationTimestamp": "2026-11-25T09:48:17Z", "labels": {"app": "web"},
                         "managedFields": [{"manager": "kubelet", "operation": "Update",
                             "apiVersion": "v1", "fieldsType": "FieldsV1", "time": "2026-11-25T09:48:17Z",
                             "fieldsV1": {"f:count": {}, "f:source": {"f:component": {}}}}]},
            "involvedObject": {"kind": "Pod", "name": "web", "namespace": "default",
                               "fieldPath": "spec.containers{web}"},
            "reason": "BackOff", "message": "  Back-off restarting failed container\n",
            "source": {"component": "kubelet", "host": "node-1"},
            "firstTimestamp": "2026-11-25T09:48:17Z", "lastTimestamp": "2026-11-25T09:58:17Z",
            "count": 7, "type": "Warning"
        }))
        .unwrap()
    }

    #[test]
    fn a_kubelet_event_is_the_decoded_row() {
        let stored = encode(&kubelet_event());
        for include in [
            IncludeObject::None,
            IncludeObject::Metadata,
            IncludeObject::Object,
        ] {
            for version in [MetaVersion::V1, MetaVersion::V1Beta1] {
                let opts = options(include, version);
                let (row, partial) = transcoded(&stored, 812, &opts, now());
                let (want_row, want_partial) = decoded(&stored, 812, &opts, now());
                assert_eq!(row.as_ref(), Some(&want_row), "{include:?} {version:?}");
                assert_eq!(partial.as_ref(), Some(&want_partial));
            }
        }
        // Spot checks, so the comparison cannot pass by both sides being empty.
        let opts = options(IncludeObject::Metadata, MetaVersion::V1);
        let (row, _) = transcoded(&stored, 812, &opts, now());
        let row = row.unwrap();
        assert_eq!(
            row["cells"],
            json!([
                "103s",
                "Warning",
                "BackOff",
                "pod/web",
                "spec.containers{web}",
                "kubelet, node-1",
                "Back-off restarting failed container",
                "11m",
                7,
                "web.17a \"q\""
            ])
        );
        assert_eq!(row["object"]["metadata"]["resourceVersion"], "812");
        assert_eq!(row["object"]["kind"], "PartialObjectMetadata");
    }

    #[test]
    fn unfamiliar_shapes_are_declined() {
        let opts = options(IncludeObject::Metadata, MetaVersion::V1);
        for stored in [
            r#"{"metadata":{},"involvedObject":{},"firstTimestamp":"2026-11-25T10:48:17+01:00"}"#,
            r#"{"metadata":{"resourceVersion":"3"},"involvedObject":{}}"#,
            r#"{"metadata":{"name":7},"involvedObject":{}}"#,
            r#"{"metadata":{},"involvedObject":{"name":7}}"#,
            r#"{"metadata":{}}"#,
            r#"{"metadata":null,"involvedObject":{}}"#,
        ] {
            let (row, _) = transcoded(stored.as_bytes(), 5, &opts, now());
            assert!(row.is_none(), "{stored}");
        }
        // A row that asks for the full object declines with it.
        let stored = encode(&kubelet_event());
        let mut out = Vec::new();
        let opts = options(IncludeObject::Object, MetaVersion::V1);
        assert!(!write_row(&mut out, &stored, 5, &opts, now(), |out| {
            out.extend_from_slice(b"half");
            false
        }));
        assert!(out.is_empty());
    }

    /// Go's zero time (which the store's encoder leaves out, but bytes written by earlier
    /// versions may hold) ages as k8s-openapi decodes it; a `null` series time is unknown.
    #[test]
    fn go_zero_and_unset_times_age_as_decoded() {
        let stored = br#"{"metadata":{"name":"z"},"involvedObject":{},"firstTimestamp":"0001-01-01T00:00:00Z","eventTime":"2026-11-25T09:59:00.000001Z","series":{"count":3,"lastObservedTime":null}}"#;
        let opts = options(IncludeObject::None, MetaVersion::V1);
        let (row, _) = transcoded(stored, 5, &opts, now());
        let (want, _) = decoded(stored, 5, &opts, now());
        assert_eq!(row, Some(want.clone()));
        assert_eq!(want["cells"][0], "<unknown>");
        assert_eq!(want["cells"][7], "2027y");
        assert_eq!(want["cells"][8], 3);
    }

    proptest! {
        #[test]
        fn any_stored_event_is_the_decoded_row(
            e in crate::any_event(),
            revision in 1u64..u64::MAX,
            now_secs in 0i64..4_000_000_000,
            include in prop_oneof![
                Just(IncludeObject::None),
                Just(IncludeObject::Metadata),
                Just(IncludeObject::Object),
            ],
            version in prop_oneof![Just(MetaVersion::V1), Just(MetaVersion::V1Beta1)],
        ) {
            let stored = encode(&e);
            let now = Timestamp::from_second(now_secs).unwrap();
            let opts = options(include, version);
            let (row, partial) = transcoded(&stored, revision, &opts, now);
            let (want_row, want_partial) = decoded(&stored, revision, &opts, now);
            // Of what the store writes, they decline only metadata with a string equal to
            // "resourceVersion", as the events.k8s.io transcoder does.
            let v: Value = serde_json::from_slice(&stored).unwrap();
            let declinable = v["metadata"].to_string().contains("\"resourceVersion\"");
            let text = String::from_utf8_lossy(&stored);
            prop_assert!(row.is_some() || declinable, "row declined {}", text);
            prop_assert!(partial.is_some() || declinable);
            if let Some(row) = row {
                prop_assert_eq!(row, want_row);
            }
            if let Some(partial) = partial {
                prop_assert_eq!(partial, want_partial);
            }
        }
    }
}
