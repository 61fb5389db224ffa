//! Request bodies: JSON and YAML objects, and the event they hold in either API group,
//! decoded into the storage shape (normalized core/v1).
//!
//! Errors are kube-apiserver's 400s, with its wording: a syntax error says where it is
//! (`... at line L column C`), a type error names the field and points into the text the
//! client sent (a YAML line and column for YAML bodies).

use herald_core::event::convert::{events_v1_to_core, normalize_core};
use herald_core::event::{ApiGroup, CoreEvent, EventsV1Event};
use herald_core::status::ApiError;
use serde::Deserialize;
use serde_json::Value;

use crate::json::ZERO_MICRO;

pub mod yaml_depth;

/// The "cannot be handled" prefix kube-apiserver puts on body decoding errors (it names the
/// version without its group, in both groups).
pub const CANNOT_HANDLE: &str = "Event in version \"v1\" cannot be handled as a Event: ";

/// A body decoding error, with the [`CANNOT_HANDLE`] prefix.
pub fn cannot_handle(detail: impl std::fmt::Display) -> ApiError {
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

/// Why a YAML body could not be read as a value.
#[derive(Debug, thiserror::Error)]
pub enum YamlError {
    /// Nested deeper than [`yaml_depth::MAX_YAML_DEPTH`]; refused before it was read whole.
    #[error(transparent)]
    TooDeep(#[from] yaml_depth::TooDeep),
    /// Not YAML, or not one document, or not a value JSON can hold.
    #[error(transparent)]
    Syntax(#[from] serde_yaml_ng::Error),
}

/// Reads a YAML body (one document) as a JSON value, its nesting bounded while it is scanned
/// ([`yaml_depth::check`]): the work is O(size) for any body.
pub fn yaml_value(body: &[u8]) -> Result<Value, YamlError> {
    yaml_depth::check(body)?;
    Ok(serde_yaml_ng::from_slice(body)?)
}

/// Parses a YAML request body (one document) as a JSON object. Syntax errors are 400s that
/// say where (`... at line L column C`), and so are bodies nested deeper than
/// [`yaml_depth::MAX_YAML_DEPTH`].
pub fn parse_yaml_object(body: &[u8]) -> Result<Value, ApiError> {
    let v = yaml_value(body)
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
/// each string again.
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
pub fn check_type(
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
pub fn drop_empty_maps(mut e: CoreEvent) -> CoreEvent {
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
