//! A stored event's members, read in place for the transcoders.
//!
//! The protobuf list's transcoder ([`crate::protobuf::transcode`]), the
//! `events.k8s.io/v1` JSON transcoder ([`crate::events_v1`]) and the Table and
//! `PartialObjectMetadata` writer ([`crate::table::transcode`]) read the same members of
//! the stored core/v1 JSON with a [`Scanner`]. They differ in how they keep a string
//! (decoded text, or the quoted JSON) and `metadata` (read member by member for protobuf,
//! copied whole for JSON): [`StoredEvent::read`] takes a reader for each.
//!
//! Bound: as the [`Scanner`]'s. `metadata` and `involvedObject` are required (the store
//! always writes them, and for bytes without them, which k8s-openapi reads as empty,
//! declining is the safe answer); an `apiVersion` or `kind` other than core/v1's declines,
//! as k8s-openapi rejects them; unknown members are skipped; a member named twice counts
//! once, the last time, as k8s-openapi reads it.

use crate::Revision;
use crate::scan::{Decline, Scanned, Scanner};

/// How a transcoder reads a string member: `None` for `null`, a decline for another type.
/// A type parameter rather than a `fn` pointer, so that each transcoder's reader is inlined
/// (a pointer made the protobuf items 5–10% slower).
pub trait StringReader<'a, S>: Fn(&mut Scanner<'a>) -> Scanned<Option<S>> + Copy {}

impl<'a, S, F: Fn(&mut Scanner<'a>) -> Scanned<Option<S>> + Copy> StringReader<'a, S> for F {}

/// The members of a stored core/v1 event that the transcoders write, each field the member
/// of that name: `metadata` as `M`, strings as `S`, timestamps as their stored text (`null`
/// included), `None` where a member is absent or `null`.
pub struct StoredEvent<'a, M, S> {
    /// `metadata`.
    pub metadata: M,
    /// `involvedObject`.
    pub involved_object: Reference<S>,
    /// `reason`.
    pub reason: Option<S>,
    /// `message`.
    pub message: Option<S>,
    /// `source`.
    pub source: Option<Source<S>>,
    /// `firstTimestamp`.
    pub first_timestamp: Option<&'a str>,
    /// `lastTimestamp`.
    pub last_timestamp: Option<&'a str>,
    /// `count`.
    pub count: Option<i32>,
    /// `type`.
    pub type_: Option<S>,
    /// `eventTime`.
    pub event_time: Option<&'a str>,
    /// `series`.
    pub series: Option<Series<'a>>,
    /// `action`.
    pub action: Option<S>,
    /// `related`.
    pub related: Option<Reference<S>>,
    /// `reportingComponent`.
    pub reporting_component: Option<S>,
    /// `reportingInstance`.
    pub reporting_instance: Option<S>,
}

impl<'a, M: Default, S> StoredEvent<'a, M, S> {
    /// Reads the event stored as `stored`, `metadata` with `metadata` and every string
    /// member with `string`; see the module docs for what declines.
    pub fn read(
        stored: &'a [u8],
        mut metadata: impl FnMut(&mut Scanner<'a>) -> Scanned<M>,
        string: impl StringReader<'a, S>,
    ) -> Scanned<Self> {
        let mut s = Scanner::new(stored)?;
        let mut e = StoredEvent {
            metadata: M::default(),
            involved_object: Reference::default(),
            reason: None,
            message: None,
            source: None,
            first_timestamp: None,
            last_timestamp: None,
            count: None,
            type_: None,
            event_time: None,
            series: None,
            action: None,
            related: None,
            reporting_component: None,
            reporting_instance: None,
        };
        let (mut has_metadata, mut has_involved_object) = (false, false);
        s.object(|s, name| {
            match &*name {
                "metadata" => {
                    e.metadata = metadata(s)?;
                    has_metadata = true;
                }
                "involvedObject" => {
                    e.involved_object = Reference::read(s, string)?;
                    has_involved_object = true;
                }
                "reason" => e.reason = string(s)?,
                "message" => e.message = string(s)?,
                "source" => e.source = s.nullable(|s| Source::read(s, string))?,
                "firstTimestamp" => e.first_timestamp = Some(s.raw()?),
                "lastTimestamp" => e.last_timestamp = Some(s.raw()?),
                "count" => e.count = s.nullable(Scanner::int)?,
                "type" => e.type_ = string(s)?,
                "eventTime" => e.event_time = Some(s.raw()?),
                "series" => e.series = s.nullable(Series::read)?,
                "action" => e.action = string(s)?,
                "related" => e.related = s.nullable(|s| Reference::read(s, string))?,
                "reportingComponent" => e.reporting_component = string(s)?,
                "reportingInstance" => e.reporting_instance = string(s)?,
                "apiVersion" | "kind" => {
                    let want = if name == "kind" { "Event" } else { "v1" };
                    if s.str()? != want {
                        return Err(Decline);
                    }
                }
                _ => s.skip()?,
            }
            Ok(())
        })?;
        s.finish()?;
        if has_metadata && has_involved_object {
            Ok(e)
        } else {
            Err(Decline)
        }
    }
}

/// An `ObjectReference`'s string members.
pub struct Reference<S> {
    /// `kind`.
    pub kind: Option<S>,
    /// `namespace`.
    pub namespace: Option<S>,
    /// `name`.
    pub name: Option<S>,
    /// `uid`.
    pub uid: Option<S>,
    /// `apiVersion`.
    pub api_version: Option<S>,
    /// `resourceVersion`.
    pub resource_version: Option<S>,
    /// `fieldPath`.
    pub field_path: Option<S>,
}

impl<S> Default for Reference<S> {
    fn default() -> Self {
        Reference {
            kind: None,
            namespace: None,
            name: None,
            uid: None,
            api_version: None,
            resource_version: None,
            field_path: None,
        }
    }
}

impl<S> Reference<S> {
    fn read<'a>(s: &mut Scanner<'a>, string: impl StringReader<'a, S>) -> Scanned<Self> {
        let mut r = Reference::default();
        s.object(|s, name| {
            match &*name {
                "kind" => r.kind = string(s)?,
                "namespace" => r.namespace = string(s)?,
                "name" => r.name = string(s)?,
                "uid" => r.uid = string(s)?,
                "apiVersion" => r.api_version = string(s)?,
                "resourceVersion" => r.resource_version = string(s)?,
                "fieldPath" => r.field_path = string(s)?,
                _ => s.skip()?,
            }
            Ok(())
        })?;
        Ok(r)
    }
}

/// An `EventSource`.
pub struct Source<S> {
    /// `component`.
    pub component: Option<S>,
    /// `host`.
    pub host: Option<S>,
}

impl<S> Source<S> {
    fn read<'a>(s: &mut Scanner<'a>, string: impl StringReader<'a, S>) -> Scanned<Self> {
        let mut src = Source {
            component: None,
            host: None,
        };
        s.object(|s, name| {
            match &*name {
                "component" => src.component = string(s)?,
                "host" => src.host = string(s)?,
                _ => s.skip()?,
            }
            Ok(())
        })?;
        Ok(src)
    }
}

/// An `EventSeries`, its time as stored.
#[derive(Default)]
pub struct Series<'a> {
    /// `count`.
    pub count: Option<i32>,
    /// `lastObservedTime`.
    pub last_observed_time: Option<&'a str>,
}

impl<'a> Series<'a> {
    fn read(s: &mut Scanner<'a>) -> Scanned<Self> {
        let mut series = Series::default();
        s.object(|s, name| {
            match &*name {
                "count" => series.count = s.nullable(Scanner::int)?,
                "lastObservedTime" => series.last_observed_time = Some(s.raw()?),
                _ => s.skip()?,
            }
            Ok(())
        })?;
        Ok(series)
    }
}

/// Appends `metadata` as stored (its text, found by [`Scanner::raw_unchecked`]), with
/// `"resourceVersion":"<revision>"` first. Declines when it is not an object or already
/// names a `resourceVersion` (the store never writes one).
pub fn write_metadata(out: &mut Vec<u8>, raw: &str, revision: Revision) -> Scanned<()> {
    let raw = raw.as_bytes();
    // A quoted `"resourceVersion"` is a key, or a whole string value (rare): either way the
    // decoding path is the safe one.
    // The store writes no whitespace; `{ }` would need more care than a splice.
    if raw.first() != Some(&b'{')
        || raw.get(1).is_some_and(u8::is_ascii_whitespace)
        || memchr::memmem::find(raw, b"\"resourceVersion\"").is_some()
    {
        return Err(Decline);
    }
    out.extend_from_slice(b"{\"resourceVersion\":\"");
    out.extend_from_slice(itoa::Buffer::new().format(revision).as_bytes());
    out.push(b'"');
    let rest = &raw[1..];
    if rest.first() != Some(&b'}') {
        out.push(b',');
    }
    out.extend_from_slice(rest);
    Ok(())
}
