//! Kubernetes' protobuf encoding (`application/vnd.kubernetes.protobuf`) for the events API,
//! so client-go programs configured for protobuf (kube's own components, and controllers that
//! set `ContentType` on their `rest.Config`) read and write events unchanged.
//!
//! The wire format is `k8s.io/apimachinery`'s:
//!
//! - An object is the 4-byte magic `k8s\0` followed by a `runtime.Unknown` message whose
//!   `typeMeta` names the kind and `raw` holds the object's own message ([`wrap`], [`unwrap`]).
//! - A watch (`application/vnd.kubernetes.protobuf;stream=watch`) is a sequence of frames,
//!   each a 4-byte big-endian length and a bare `metav1.WatchEvent` message whose
//!   `object.raw` is a wrapped object ([`watch_frame`]).
//!
//! Requests: create and update bodies (an `Event` of the URL's group) are decoded here into
//! the event the JSON path would make of them ([`event_body`]; the tests hold the two
//! equal), and delete bodies (`DeleteOptions`) into the JSON the handlers already take
//! ([`delete_options_json`]), so every check and message is the JSON path's. Protobuf has
//! no unknown or repeated fields, so `fieldValidation` finds nothing in them, as in
//! kube-apiserver. Patch bodies are JSON or YAML by their content types.
//!
//! Responses: the answer to a write is encoded from the written event ([`event_object`]), a
//! list from the stored bytes ([`write_list_items`] between [`event_list_envelope`]'s head
//! and tail); other objects and `Status`es are re-encoded from the handlers' JSON
//! ([`transcode_json`], by the server's output layer). Watch frames ([`watch_frame`]) are
//! made once per change and shared between watchers. `Table` and
//! `PartialObjectMetadata` are offered as JSON only; a client that lists them with protobuf
//! (client-go's metadata client) names JSON as well.
//!
//! ```
//! use herald_core::event::ApiGroup;
//! use herald_wire::protobuf::{event_body_json, wrap};
//! // An empty core/v1 Event, as client-go sends it.
//! let body = wrap("v1", "Event", Vec::new());
//! assert!(body.starts_with(b"k8s\0"));
//! let json = event_body_json(ApiGroup::Core, &body).unwrap();
//! let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
//! assert_eq!(v["kind"], "Event");
//! ```

mod convert;
pub mod storage;
pub mod transcode;

use crate::json::ZERO_MICRO;
use herald_core::event::convert::{
    core_to_events_v1, events_v1_to_core, normalize_core, normalize_events_v1,
};
use herald_core::event::{ApiGroup, CoreEvent};
use herald_core::status::ApiError;
use k8s_openapi::api::core::v1 as oc;
use k8s_openapi::api::events::v1 as oe;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as om;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as pm;
use k8s_pb::apimachinery::pkg::runtime::{RawExtension, TypeMeta, Unknown};
use prost::Message;
use serde::Deserialize;
use serde_json::Value;

use self::convert::{
    core_event_from_pb, core_event_to_pb, delete_options_from_pb, events_event_from_pb,
    events_event_to_pb, list_meta_to_pb, object_meta_to_pb, status_to_pb,
};
use crate::body::{cannot_handle, check_type};
use crate::json::INITIAL_EVENTS_END_ANNOTATION;
use crate::stored::Stored;

/// The protobuf media type.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// The Content-Type of a protobuf watch stream.
pub const WATCH_MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf;stream=watch";

/// The bytes every wrapped object starts with.
pub const MAGIC: [u8; 4] = *b"k8s\0";

/// True for a Content-Type (parameters ignored) that is the protobuf media type.
pub fn is_protobuf(content_type: &str) -> bool {
    content_type
        .split(';')
        .next()
        .is_some_and(|base| base.trim().eq_ignore_ascii_case(MEDIA_TYPE))
}

/// `raw` (an object's message) wrapped as kube-apiserver sends it: [`MAGIC`], then a
/// `runtime.Unknown` naming `api_version` and `kind`.
pub fn wrap(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some(api_version.to_string()),
            kind: Some(kind.to_string()),
        }),
        raw: Some(raw),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let mut out = Vec::with_capacity(MAGIC.len() + unknown.encoded_len());
    out.extend_from_slice(&MAGIC);
    unknown.encode(&mut out).unwrap_or_default();
    out
}

/// A wrapped object, unwrapped: its `apiVersion`, `kind` and message bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unwrapped {
    /// `typeMeta.apiVersion` (empty when absent).
    pub api_version: String,
    /// `typeMeta.kind` (empty when absent).
    pub kind: String,
    /// The object's own message.
    pub raw: Vec<u8>,
}

/// Reads a wrapped object, expected to be a `kind`. An empty body, a body without [`MAGIC`] or
/// with nothing after it (each in kube's wording, with the start of the body), one that is not
/// a `runtime.Unknown`, or one with a `contentEncoding` is a 400 that says which.
pub fn unwrap(body: &[u8], kind: &str) -> Result<Unwrapped, ApiError> {
    let unrecognized = |why: &str| {
        ApiError::bad_request(format!(
            "the object provided is unrecognized (must be of type {kind}): {why} ({})",
            summarize(body)
        ))
    };
    if body.is_empty() {
        return Err(unrecognized("empty data"));
    }
    let Some(rest) = body.strip_prefix(&MAGIC) else {
        return Err(unrecognized(
            "provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]",
        ));
    };
    if rest.is_empty() {
        return Err(unrecognized("empty body"));
    }
    let unknown = Unknown::decode(rest).map_err(|e| {
        ApiError::bad_request(format!("the protobuf body is not a runtime.Unknown: {e}"))
    })?;
    if let Some(enc) = unknown.content_encoding.filter(|e| !e.is_empty()) {
        return Err(ApiError::bad_request(format!(
            "the protobuf body has contentEncoding {enc:?}; only an unencoded body is supported"
        )));
    }
    let type_meta = unknown.type_meta.unwrap_or_default();
    Ok(Unwrapped {
        api_version: type_meta.api_version.unwrap_or_default(),
        kind: type_meta.kind.unwrap_or_default(),
        raw: unknown.raw.unwrap_or_default(),
    })
}

/// kube-apiserver's `summarizeData`: a body's first 30 bytes, as text when it looks like
/// JSON, else in hex, with ` ...` when there is more.
fn summarize(body: &[u8]) -> String {
    const MAX: usize = 30;
    let head = &body[..body.len().min(MAX)];
    let more = if body.len() > MAX { " ..." } else { "" };
    match body.first() {
        None => "<empty>".to_string(),
        Some(b'{') => format!("{}{more}", String::from_utf8_lossy(head)),
        Some(_) => {
            let hex: String = head.iter().map(|b| format!("{b:02x}")).collect();
            format!("{hex}{more}")
        }
    }
}

/// The JSON of the `Event` in a protobuf create or update body sent to `group`'s URL; a 400
/// for a body that is not one, or whose envelope names another type.
pub fn event_body_json(group: ApiGroup, body: &[u8]) -> Result<Vec<u8>, ApiError> {
    let u = unwrap(body, "Event")?;
    // The envelope says how to read the message, so its type is checked first.
    check_type(&u.api_version, &u.kind, Some(group.api_version()), "Event")?;
    match group {
        ApiGroup::Core => {
            let pb = k8s_pb::api::core::v1::Event::decode(&u.raw[..]).map_err(cannot_handle)?;
            serde_json::to_vec(&core_event_from_pb(pb))
        }
        ApiGroup::EventsV1 => {
            let pb = k8s_pb::api::events::v1::Event::decode(&u.raw[..]).map_err(cannot_handle)?;
            serde_json::to_vec(&events_event_from_pb(pb))
        }
    }
    .map_err(|e| ApiError::internal(format!("encoding the decoded event: {e}")))
}

/// What a protobuf create or update body holds, read for the JSON path's handlers.
#[derive(Debug)]
#[expect(
    clippy::large_enum_variant,
    reason = "returned once per request and unpacked at once; a box would only add an allocation"
)]
pub enum EventBody {
    /// The event, in the storage shape: what the JSON path makes of [`event_body_json`]'s
    /// output, without writing and parsing the JSON.
    Event(CoreEvent),
    /// The event's JSON, for the JSON path to decode, so that it gets that path's answer: a
    /// body with a time outside the years 0–9999, whose text form the JSON parser may
    /// reject, or with `managedFields`, whose `fieldsV1` the JSON path reads inside the
    /// event (its nesting limit counts from the event's top, and a `null` is a reset).
    /// kube's components send neither.
    Json(Vec<u8>),
}

/// Decodes a protobuf create or update body sent to `group`'s URL; a 400 for a body that is
/// not an `Event` of that group, as [`event_body_json`] answers.
///
/// The event is converted to the storage shape directly (this is how kube's components
/// write events, so it is the hot path of a protobuf create), with the one change a trip
/// through JSON makes: a `MicroTime` keeps whole microseconds, as its text form does.
pub fn event_body(group: ApiGroup, body: &[u8]) -> Result<EventBody, ApiError> {
    let u = unwrap(body, "Event")?;
    check_type(&u.api_version, &u.kind, Some(group.api_version()), "Event")?;
    let event = match group {
        ApiGroup::Core => {
            let pb = k8s_pb::api::core::v1::Event::decode(&u.raw[..]).map_err(cannot_handle)?;
            let mut e = core_event_from_pb(pb);
            if !times_in_text_range_core(&e) || e.metadata.managed_fields.is_some() {
                return event_body_json(group, body).map(EventBody::Json);
            }
            floor_core_micros(&mut e);
            normalize_core(e)
        }
        ApiGroup::EventsV1 => {
            let pb = k8s_pb::api::events::v1::Event::decode(&u.raw[..]).map_err(cannot_handle)?;
            let mut e = events_event_from_pb(pb);
            if !times_in_text_range_v1(&e) || e.metadata.managed_fields.is_some() {
                return event_body_json(group, body).map(EventBody::Json);
            }
            floor_v1_micros(&mut e);
            events_v1_to_core(e)
        }
    };
    Ok(EventBody::Event(crate::body::drop_empty_maps(event)))
}

/// A core/v1 event's `MicroTime`s (`eventTime`, `series.lastObservedTime`) cut to whole
/// microseconds, as their text keeps them.
fn floor_core_micros(e: &mut oc::Event) {
    floor_micros(e.event_time.as_mut());
    floor_micros(
        e.series
            .as_mut()
            .and_then(|s| s.last_observed_time.as_mut()),
    );
}

/// [`floor_core_micros`] for an `events.k8s.io/v1` event.
fn floor_v1_micros(e: &mut oe::Event) {
    floor_micros(e.event_time.as_mut());
    floor_micros(e.series.as_mut().map(|s| &mut s.last_observed_time));
}

/// A `MicroTime` cut to whole microseconds, as its text (`.ffffff`, counted from the
/// floored second) keeps it.
fn floor_micros(t: Option<&mut om::MicroTime>) {
    if let Some(t) = t {
        let ns = t.0.as_nanosecond();
        let floored = ns - ns.rem_euclid(1000);
        if let Ok(ts) = k8s_openapi::jiff::Timestamp::from_nanosecond(floored) {
            t.0 = ts;
        }
    }
}

/// Years 0..=9999: the times whose text the JSON path reads back. jiff's latest time is in
/// year 9999, so only the start needs a check.
fn in_text_range(t: k8s_openapi::jiff::Timestamp) -> bool {
    // 0000-01-01T00:00:00Z
    const FIRST: k8s_openapi::jiff::Timestamp =
        k8s_openapi::jiff::Timestamp::constant(-62_167_219_200, 0);
    t >= FIRST
}

fn meta_times_in_text_range(m: &om::ObjectMeta) -> bool {
    let mut times = [&m.creation_timestamp, &m.deletion_timestamp]
        .into_iter()
        .flatten()
        .map(|t| t.0)
        .chain(
            m.managed_fields
                .iter()
                .flatten()
                .filter_map(|f| f.time.as_ref().map(|t| t.0)),
        );
    times.all(in_text_range)
}

fn times_in_text_range_core(e: &oc::Event) -> bool {
    let mut times = [&e.first_timestamp, &e.last_timestamp]
        .into_iter()
        .flatten()
        .map(|t| t.0)
        .chain(e.event_time.as_ref().map(|t| t.0))
        .chain(
            e.series
                .as_ref()
                .and_then(|s| s.last_observed_time.as_ref())
                .map(|t| t.0),
        );
    meta_times_in_text_range(&e.metadata) && times.all(in_text_range)
}

fn times_in_text_range_v1(e: &oe::Event) -> bool {
    let mut times = [&e.deprecated_first_timestamp, &e.deprecated_last_timestamp]
        .into_iter()
        .flatten()
        .map(|t| t.0)
        .chain(e.event_time.as_ref().map(|t| t.0))
        .chain(e.series.as_ref().map(|s| s.last_observed_time.0));
    meta_times_in_text_range(&e.metadata) && times.all(in_text_range)
}

/// The JSON of the `DeleteOptions` in a protobuf DELETE body; a 400 for a body that is not
/// one.
pub fn delete_options_json(body: &[u8]) -> Result<Vec<u8>, ApiError> {
    let u = unwrap(body, "DeleteOptions")?;
    // `v1` and `meta.k8s.io/v1` both name it.
    check_type(&u.api_version, &u.kind, None, "DeleteOptions")?;
    let pb = pm::DeleteOptions::decode(&u.raw[..]).map_err(|e| {
        ApiError::bad_request(format!("the protobuf body is not a DeleteOptions: {e}"))
    })?;
    serde_json::to_vec(&delete_options_from_pb(pb))
        .map_err(|e| ApiError::internal(format!("encoding the decoded options: {e}")))
}

/// The wrapped message of an event in `group`'s shape: what a protobuf GET returns, and
/// what the output layer makes of the event's JSON (times as its JSON has them).
pub fn event_object(group: ApiGroup, e: &CoreEvent) -> Vec<u8> {
    wrap(
        group.api_version(),
        "Event",
        event_message(group, e.clone()),
    )
}

/// The bare message of a stored event in `group`'s shape (what [`event_object`] wraps).
fn event_message(group: ApiGroup, e: CoreEvent) -> Vec<u8> {
    let mut out = Vec::new();
    encode_event(group, e, None, &mut out);
    out
}

/// Appends a stored event's message in `group`'s shape to `out`: bare, or as field `tag` of
/// an enclosing message (a list's items).
fn encode_event(group: ApiGroup, e: CoreEvent, tag: Option<u32>, out: &mut Vec<u8>) {
    fn put(m: &impl Message, tag: Option<u32>, out: &mut Vec<u8>) {
        match tag {
            Some(tag) => prost::encoding::message::encode(tag, m, out),
            // A Vec grows: encoding into it cannot run out of room.
            None => m.encode(out).unwrap_or_default(),
        }
    }
    // As in the JSON, a `MicroTime` keeps whole microseconds: a written event still has the
    // nanoseconds its client sent, which the store does not keep. Cut after the canonical
    // form is taken, as the JSON text is written from it.
    match group {
        ApiGroup::Core => {
            let mut e = normalize_core(e);
            floor_core_micros(&mut e);
            put(&core_event_to_pb(e), tag, out)
        }
        ApiGroup::EventsV1 => {
            let mut e = normalize_events_v1(core_to_events_v1(e));
            floor_v1_micros(&mut e);
            put(&events_event_to_pb(e), tag, out)
        }
    }
}

/// Appends the items of a protobuf `EventList` in `group`'s shape (field 2 of the list,
/// one per event) made from `items`' stored bytes: transcoded in place
/// ([`transcode::write_list_item`]) where that succeeds, else decoded and encoded. An item
/// that does not decode is skipped with a warning, as in the JSON list. The HTTP layer puts
/// the items of a long list together from several calls, one per core, between
/// [`event_list_envelope`]'s head and tail.
pub fn write_list_items(out: &mut Vec<u8>, group: ApiGroup, items: &[Stored]) {
    for item in items {
        if transcode::write_list_item(out, group, &item.bytes, item.revision) {
            continue;
        }
        match item.decode() {
            // Field 2 of the list, encoded in place.
            Ok(e) => encode_event(group, e, Some(2), out),
            Err(err) => {
                tracing::warn!(revision = item.revision, error = %err, "skipping undecodable stored event")
            }
        }
    }
}

/// The head and tail of a protobuf `EventList` whose items ([`write_list_items`]) take
/// `items_len` bytes: what a protobuf LIST returns is head, items, tail, byte for byte what
/// [`transcode_json`] makes of the JSON list. The head holds the envelope (as [`wrap`]
/// writes it: magic, typeMeta, then `raw`'s tag and length, which needs the items' length)
/// and the list metadata; the tail the empty contentEncoding and contentType.
pub fn event_list_envelope(
    group: ApiGroup,
    resource_version: String,
    continue_: Option<String>,
    items_len: usize,
) -> (Vec<u8>, Vec<u8>) {
    let meta = pm::ListMeta {
        resource_version: Some(resource_version),
        r#continue: continue_,
        ..pm::ListMeta::default()
    };
    let mut meta_field = Vec::new();
    prost::encoding::message::encode(1, &meta, &mut meta_field);
    let raw_len = meta_field.len() + items_len;
    let type_meta = TypeMeta {
        api_version: Some(group.api_version().to_string()),
        kind: Some("EventList".to_string()),
    };
    let mut head = Vec::with_capacity(64 + meta_field.len());
    head.extend_from_slice(&MAGIC);
    prost::encoding::message::encode(1, &type_meta, &mut head);
    prost::encoding::encode_key(2, prost::encoding::WireType::LengthDelimited, &mut head);
    prost::encoding::encode_varint(raw_len as u64, &mut head);
    head.extend_from_slice(&meta_field);
    let mut tail = Vec::with_capacity(4);
    prost::encoding::string::encode(3, &String::new(), &mut tail);
    prost::encoding::string::encode(4, &String::new(), &mut tail);
    (head, tail)
}

/// The wrapped `Status` of an error.
pub fn status_object(e: &ApiError) -> Vec<u8> {
    wrap("v1", "Status", status_to_pb(e.to_status()).encode_to_vec())
}

/// The wrapped object of a BOOKMARK: an `Event` carrying only `metadata.resourceVersion`
/// (and the initial-events-end annotation).
pub fn bookmark_object(
    group: ApiGroup,
    resource_version: &str,
    initial_events_end: bool,
) -> Vec<u8> {
    let mut meta = om::ObjectMeta {
        resource_version: Some(resource_version.to_string()),
        ..om::ObjectMeta::default()
    };
    if initial_events_end {
        meta.annotations = Some(
            [(
                INITIAL_EVENTS_END_ANNOTATION.to_string(),
                "true".to_string(),
            )]
            .into_iter()
            .collect(),
        );
    }
    let meta = Some(object_meta_to_pb(meta));
    let raw = match group {
        ApiGroup::Core => k8s_pb::api::core::v1::Event {
            metadata: meta,
            ..Default::default()
        }
        .encode_to_vec(),
        ApiGroup::EventsV1 => k8s_pb::api::events::v1::Event {
            metadata: meta,
            ..Default::default()
        }
        .encode_to_vec(),
    };
    wrap(group.api_version(), "Event", raw)
}

/// One frame of a protobuf watch: the length, then a `WatchEvent` of `type_` (`ADDED`,
/// `MODIFIED`, `DELETED`, `BOOKMARK`, `ERROR`) holding `object` (a wrapped object).
pub fn watch_frame(type_: &str, object: Vec<u8>) -> Vec<u8> {
    let ev = pm::WatchEvent {
        r#type: Some(type_.to_string()),
        object: Some(RawExtension { raw: Some(object) }),
    };
    let len = ev.encoded_len();
    let mut out = Vec::with_capacity(4 + len);
    // A frame longer than 4 GiB cannot be; events are at most a few MiB.
    out.extend_from_slice(&u32::try_from(len).unwrap_or(u32::MAX).to_be_bytes());
    ev.encode(&mut out).unwrap_or_default();
    out
}

/// The head of a JSON response: which type it is.
#[derive(Deserialize)]
struct Head<'a> {
    #[serde(rename = "apiVersion", borrow, default)]
    api_version: &'a str,
    #[serde(borrow, default)]
    kind: &'a str,
}

/// A JSON list's fields, items without their type.
#[derive(Deserialize)]
struct JsonList<T> {
    #[serde(default)]
    metadata: om::ListMeta,
    #[serde(default = "Vec::new")]
    items: Vec<T>,
}

/// An `events.k8s.io/v1` event from its JSON. The JSON writes an unset
/// `series.lastObservedTime` as `null`, which the `k8s-openapi` type (where it is required)
/// cannot take: it becomes Go's zero time, which the protobuf encodes as an empty message.
fn events_v1_event(mut v: Value) -> Option<oe::Event> {
    if let Some(last) = v.pointer_mut("/series/lastObservedTime")
        && last.is_null()
    {
        *last = Value::String(ZERO_MICRO.to_string());
    }
    serde_json::from_value(v).ok()
}

/// The protobuf form of a JSON response body: an `Event` or `EventList` of either group, or
/// a `Status`. `None` for anything else (discovery, OpenAPI, …), which is then sent as JSON:
/// client-go decodes a response by its Content-Type, whatever it asked for.
pub fn transcode_json(json: &[u8]) -> Option<Vec<u8>> {
    let head: Head<'_> = serde_json::from_slice(json).ok()?;
    let raw = match (head.api_version, head.kind) {
        ("v1", "Event") => {
            core_event_to_pb(serde_json::from_slice::<oc::Event>(json).ok()?).encode_to_vec()
        }
        ("events.k8s.io/v1", "Event") => {
            events_event_to_pb(events_v1_event(serde_json::from_slice(json).ok()?)?).encode_to_vec()
        }
        ("v1", "EventList") => {
            let l: JsonList<oc::Event> = serde_json::from_slice(json).ok()?;
            k8s_pb::api::core::v1::EventList {
                metadata: Some(list_meta_to_pb(l.metadata)),
                items: l.items.into_iter().map(core_event_to_pb).collect(),
            }
            .encode_to_vec()
        }
        ("events.k8s.io/v1", "EventList") => {
            let l: JsonList<Value> = serde_json::from_slice(json).ok()?;
            let items = l
                .items
                .into_iter()
                .map(|v| events_v1_event(v).map(events_event_to_pb))
                .collect::<Option<Vec<_>>>()?;
            k8s_pb::api::events::v1::EventList {
                metadata: Some(list_meta_to_pb(l.metadata)),
                items,
            }
            .encode_to_vec()
        }
        ("v1", "Status") => {
            status_to_pb(serde_json::from_slice::<om::Status>(json).ok()?).encode_to_vec()
        }
        _ => return None,
    };
    Some(wrap(head.api_version, head.kind, raw))
}

#[cfg(test)]
mod tests;
