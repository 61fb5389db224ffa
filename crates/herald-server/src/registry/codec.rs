//! The storage shape of an event and the request-body decoding of both API groups.
//!
//! Every event is stored once, as core/v1 JSON **without** `metadata.resourceVersion` (the
//! resourceVersion is the key's mod revision and is put back on read), under the key
//! `/events/<namespace>/<name>`.

use bytes::Bytes;
use herald_core::event::convert::{events_v1_to_core, normalize_core};
use herald_core::event::wire::ZERO_MICRO;
use herald_core::event::{ApiGroup, CoreEvent, EventsV1Event};
use herald_core::status::ApiError;
use serde::Deserialize;
use serde_json::Value;

use crate::storage::{KeyValue, Revision};

/// The key prefix of every event.
pub const EVENTS_PREFIX: &str = "/events/";

/// The key of one event.
pub fn key(namespace: &str, name: &str) -> String {
    format!("{EVENTS_PREFIX}{namespace}/{name}")
}

/// The prefix of the events of one namespace, or of all events when `namespace` is `None`.
pub fn prefix(namespace: Option<&str>) -> String {
    match namespace {
        Some(ns) => format!("{EVENTS_PREFIX}{ns}/"),
        None => EVENTS_PREFIX.to_string(),
    }
}

/// The stored bytes of `event`: its core/v1 wire JSON (as `/api/v1` returns it, zero
/// times as `null`) without `kind`, `apiVersion` and `resourceVersion`, so a list can send
/// stored bytes with only the resourceVersion spliced in ([`splice_resource_version`]).
///
/// Written straight from the typed event with `metadata` first and the other fields in the
/// order kube-apiserver writes them, so the splice point is found without a search; the
/// object equals [`core_v1_json`](herald_core::event::wire::core_v1_json)'s minus `kind` and
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
    super::stored_json::write_event(&mut out, &e);
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

/// The event stored in `kv`, with `resourceVersion` = the key's mod revision.
pub fn decode(kv: &KeyValue) -> Result<CoreEvent, ApiError> {
    decode_at(&kv.value, kv.mod_revision)
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

/// Parses `resourceVersion` strings: `Ok(None)` for absent/empty, 400 for non-numbers.
pub fn parse_rv(rv: Option<&str>) -> Result<Option<Revision>, ApiError> {
    match rv.filter(|s| !s.is_empty()) {
        None => Ok(None),
        Some(s) => s
            .parse::<Revision>()
            .map(Some)
            .map_err(|_| ApiError::bad_request(format!("invalid resource version: {s:?}"))),
    }
}

/// The "cannot be handled" prefix kube-apiserver puts on body decoding errors (it names the
/// version without its group, in both groups).
pub(crate) const CANNOT_HANDLE: &str = "Event in version \"v1\" cannot be handled as a Event: ";

/// A body decoding error, with the [`CANNOT_HANDLE`] prefix.
pub(crate) fn cannot_handle(detail: impl std::fmt::Display) -> ApiError {
    ApiError::bad_request(format!("{CANNOT_HANDLE}{detail}"))
}

/// Parses a request body as a JSON object. Syntax errors are 400s that say where
/// (`... at line L column C`).
pub fn parse_json_object(body: &[u8]) -> Result<Value, ApiError> {
    let v: Value = serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
    })?;
    if !v.is_object() {
        return Err(ApiError::bad_request(
            "couldn't get version/kind; json parse error: expected a JSON object",
        ));
    }
    Ok(v)
}

/// The encoding of a request body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyFormat {
    /// `application/json` (also an absent Content-Type).
    Json,
    /// `application/yaml`.
    Yaml,
}

impl BodyFormat {
    /// The format of a create/update body's Content-Type (parameters ignored); `None` for one
    /// kube-apiserver would answer 415 to.
    pub fn from_content_type(ct: &str) -> Option<Self> {
        let base = ct.split(';').next().unwrap_or("").trim();
        if base.is_empty() || base == "*/*" || base.eq_ignore_ascii_case("application/json") {
            Some(BodyFormat::Json)
        } else if base.eq_ignore_ascii_case("application/yaml") {
            Some(BodyFormat::Yaml)
        } else {
            None
        }
    }
}

/// Parses a YAML request body (one document) as a JSON object. Syntax errors are 400s that
/// say where (`... at line L column C`).
pub fn parse_yaml_object(body: &[u8]) -> Result<Value, ApiError> {
    let v: Value = serde_yaml_ng::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error converting YAML to JSON: {e}")))?;
    if !v.is_object() {
        return Err(ApiError::bad_request(
            "error converting YAML to JSON: expected a mapping (an object) at the top level",
        ));
    }
    Ok(v)
}

/// Parses a request body in `format` as an object (see [`parse_json_object`],
/// [`parse_yaml_object`]).
pub fn parse_object(format: BodyFormat, body: &[u8]) -> Result<Value, ApiError> {
    match format {
        BodyFormat::Json => parse_json_object(body),
        BodyFormat::Yaml => parse_yaml_object(body),
    }
}

/// The event in a JSON request body, decoded straight from the text, when that succeeds:
/// the same (normalized) event [`decode_body`] returns for the parsed body. `None` for any
/// failure; the caller then takes the [`parse_json_object`] + [`decode_body`] path, whose
/// errors say what is wrong. (`k8s-openapi` rejects an `apiVersion` or `kind` that is not
/// the group's own, so a body that decodes here passes `decode_body`'s checks.)
///
/// `body` is text the caller checked as UTF-8 once: decoding from a `str` skips checking
/// each string again, which was a fifth of the decode.
pub fn decode_json_body(group: ApiGroup, body: &str) -> Option<CoreEvent> {
    use serde::de::DeserializeSeed as _;
    let mut de = serde_json::Deserializer::from_str(body);
    let event = EventSeed(group).deserialize(&mut de).ok()?;
    de.end().ok()?;
    Some(event)
}

/// Decodes an event in `0`'s wire shape from any `serde` deserializer into the (normalized)
/// storage shape: the decode of [`decode_json_body`], for callers that wrap the deserializer
/// (the unknown-field check reads the text in the same pass).
#[derive(Debug, Clone, Copy)]
pub struct EventSeed(pub ApiGroup);

impl<'de> serde::de::DeserializeSeed<'de> for EventSeed {
    type Value = CoreEvent;

    fn deserialize<D: serde::Deserializer<'de>>(self, de: D) -> Result<CoreEvent, D::Error> {
        let event = match self.0 {
            ApiGroup::Core => normalize_core(CoreEvent::deserialize(de)?),
            ApiGroup::EventsV1 => events_v1_to_core(EventsV1Event::deserialize(de)?),
        };
        Ok(drop_empty_maps(event))
    }
}

/// Checks the `apiVersion` and `kind` of a body against the group it was sent to (absent
/// ones are fine, as in kube-apiserver), then decodes it into the (normalized) storage
/// shape. Type errors are 400s that say where: in `original` (the JSON request bytes `v` was
/// parsed from) when given, else in `v`'s compact rendering.
pub fn decode_body(
    group: ApiGroup,
    v: Value,
    original: Option<&[u8]>,
) -> Result<CoreEvent, ApiError> {
    decode_body_as(group, v, original.map(|b| (BodyFormat::Json, b)))
}

/// [`decode_body`] for a body in either format: type errors point into the original text
/// (a YAML line and column for YAML bodies).
pub fn decode_body_as(
    group: ApiGroup,
    v: Value,
    original: Option<(BodyFormat, &[u8])>,
) -> Result<CoreEvent, ApiError> {
    decode_value(group, v, original, |_, e| e)
}

/// [`decode_body`] of an object a merge, strategic-merge or JSON patch made. Only when it
/// fails does `on_error` see the patched object (as patched, `apiVersion` and `kind`
/// included) with the error, and say what to answer: the object is not copied on the way.
pub fn decode_patched(
    group: ApiGroup,
    v: Value,
    on_error: impl FnOnce(&Value, ApiError) -> ApiError,
) -> Result<CoreEvent, ApiError> {
    decode_value(group, v, None, on_error)
}

fn decode_value(
    group: ApiGroup,
    mut v: Value,
    original: Option<(BodyFormat, &[u8])>,
    on_error: impl FnOnce(&Value, ApiError) -> ApiError,
) -> Result<CoreEvent, ApiError> {
    let Some(obj) = v.as_object_mut() else {
        return Err(on_error(
            &v,
            ApiError::bad_request(
                "couldn't get version/kind; json parse error: expected a JSON object",
            ),
        ));
    };
    let mut typed_ok = true;
    let av = obj.remove("apiVersion");
    let kind = obj.remove("kind");
    for (field, want) in [(&av, group.api_version()), (&kind, "Event")] {
        typed_ok &= field.as_ref().is_none_or(|f| f.as_str() == Some(want));
    }
    let text = |f: &Option<Value>| f.as_ref().and_then(Value::as_str).unwrap_or("").to_owned();
    // The cold path: the object as it came, for `on_error`.
    let restore = |mut v: Value, av: Option<Value>, kind: Option<Value>| {
        if let Some(obj) = v.as_object_mut() {
            obj.extend(
                [("apiVersion", av), ("kind", kind)]
                    .into_iter()
                    .filter_map(|(k, x)| Some((k.to_string(), x?))),
            );
        }
        v
    };
    if let Err(e) = check_type(&text(&av), &text(&kind), Some(group.api_version()), "Event") {
        return Err(on_error(&restore(v, av, kind), e));
    }
    let Some(obj) = v.as_object_mut() else {
        return Err(on_error(&v, cannot_handle("expected a JSON object")));
    };
    if group == ApiGroup::EventsV1 && go_zero_series_fields(obj) {
        // The body's text lacks the filled-in fields: decode errors must come from `v`.
        typed_ok = false;
    }
    // Typed decoding straight from the parsed value; only a body that fails it is decoded
    // again from text, whose parser says where the error is.
    let typed = match group {
        ApiGroup::Core => CoreEvent::deserialize(&v).ok().map(normalize_core),
        ApiGroup::EventsV1 => EventsV1Event::deserialize(&v).ok().map(events_v1_to_core),
    };
    if let Some(event) = typed {
        return Ok(drop_empty_maps(event));
    }
    let owned;
    let (format, text) = match original {
        Some(o) if typed_ok => o,
        _ => match serde_json::to_vec(&v) {
            Ok(t) => {
                owned = t;
                (BodyFormat::Json, &owned[..])
            }
            Err(e) => return Err(on_error(&restore(v, av, kind), cannot_handle(e))),
        },
    };
    let event = match group {
        ApiGroup::Core => decode_typed::<CoreEvent>(format, text).map(normalize_core),
        ApiGroup::EventsV1 => decode_typed::<EventsV1Event>(format, text).map(events_v1_to_core),
    };
    match event {
        Ok(event) => Ok(drop_empty_maps(event)),
        Err(e) => Err(on_error(&restore(v, av, kind), e)),
    }
}

/// Decodes `text` as a `T`, for the error: it names the field that is wrong (`count: invalid
/// type: string "3", expected i32`) and, from the parser, where it is in the text the client
/// wrote (a YAML line and column for YAML).
fn decode_typed<T: serde::de::DeserializeOwned>(
    format: BodyFormat,
    text: &[u8],
) -> Result<T, ApiError> {
    match format {
        BodyFormat::Json => {
            let mut de = serde_json::Deserializer::from_slice(text);
            let v = serde_path_to_error::deserialize(&mut de).map_err(cannot_handle)?;
            de.end().map_err(cannot_handle)?;
            Ok(v)
        }
        BodyFormat::Yaml => {
            serde_path_to_error::deserialize(serde_yaml_ng::Deserializer::from_slice(text))
                .map_err(cannot_handle)
        }
    }
}

/// kube-apiserver's 400 for a body that names another type than the URL's: `api_version`
/// and `kind` as the body gave them (empty when it did not, which is fine), against the
/// expected ones (`expected_api_version: None` accepts any).
pub(crate) fn check_type(
    api_version: &str,
    kind: &str,
    expected_api_version: Option<&str>,
    expected_kind: &str,
) -> Result<(), ApiError> {
    if let Some(want) = expected_api_version
        && !api_version.is_empty()
        && api_version != want
    {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({api_version}) does not match the expected API version ({want})"
        )));
    }
    if !kind.is_empty() && kind != expected_kind {
        return Err(ApiError::bad_request(format!(
            "the kind in the data ({kind}) does not match the expected kind ({expected_kind})"
        )));
    }
    Ok(())
}

/// Fills a missing or `null` `series.count` (0) and `series.lastObservedTime` (Go's zero
/// time) of an `events.k8s.io/v1` body, as Go's decoder leaves them, so that validation
/// answers 422 `series.lastObservedTime: Required value` rather than the typed decoder a 400
/// `missing field`. True when something was filled in.
fn go_zero_series_fields(obj: &mut serde_json::Map<String, Value>) -> bool {
    let Some(Value::Object(series)) = obj.get_mut("series") else {
        return false;
    };
    let mut filled = false;
    for (field, zero) in [
        ("count", Value::from(0)),
        ("lastObservedTime", Value::from(ZERO_MICRO)),
    ] {
        if series.get(field).is_none_or(Value::is_null) {
            series.insert(field.to_string(), zero);
            filled = true;
        }
    }
    filled
}

/// kube-apiserver never returns `"labels": {}` or `"annotations": {}` (the Go fields are
/// `omitempty`), so removing the last label (`kubectl label ev x a-`) leaves no `labels` key.
pub(crate) fn drop_empty_maps(mut e: CoreEvent) -> CoreEvent {
    if e.metadata.labels.as_ref().is_some_and(|m| m.is_empty()) {
        e.metadata.labels = None;
    }
    if e.metadata
        .annotations
        .as_ref()
        .is_some_and(|m| m.is_empty())
    {
        e.metadata.annotations = None;
    }
    e
}

#[cfg(test)]
mod tests {
    use super::*;
    use herald_core::event::wire::core_v1_json;

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

    #[test]
    fn empty_label_and_annotation_maps_are_dropped() {
        let body = serde_json::json!({
            "metadata": {"name": "x.1", "labels": {}, "annotations": {}},
            "involvedObject": {"kind": "Pod", "name": "x"},
        });
        let e = decode_body(ApiGroup::Core, body, None).unwrap();
        assert_eq!(e.metadata.labels, None);
        assert_eq!(e.metadata.annotations, None);
        let body = serde_json::json!({
            "metadata": {"name": "x.1", "labels": {"a": "b"}},
            "involvedObject": {"kind": "Pod", "name": "x"},
        });
        let e = decode_body(ApiGroup::Core, body, None).unwrap();
        assert_eq!(
            e.metadata.labels.unwrap().get("a").map(String::as_str),
            Some("b")
        );
    }
}
