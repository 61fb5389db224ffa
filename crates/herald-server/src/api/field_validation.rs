//! The `fieldValidation` query parameter of writes: what to do about unknown and duplicate
//! fields.
//!
//! kubectl (default `--validate=strict`) sees the parameter advertised in the OpenAPI
//! documents, skips its own schema check and sends `fieldValidation=Strict`, so the server is
//! where a typo in a manifest is caught. kube-apiserver's behaviour:
//! - `Strict`: 400 BadRequest, `… strict decoding error: unknown field "x"` (and
//!   `duplicate field "y"` for a key given twice in one JSON object);
//! - `Warn` (the default when the parameter is absent): the write goes ahead and each problem
//!   comes back as a `Warning: 299 - "unknown field \"x\""` header (kubectl prints
//!   `Warning: unknown field "x"`); of a repeated key, the last value counts;
//! - `Ignore`: unknown fields are silently dropped, repeated keys take their last value.
//!
//! Server-side apply is stricter whatever the parameter says: the applied configuration is
//! converted to the Event's typed schema first, and a field the schema does not declare is a
//! 400 (`failed to create typed patch object (…): .foo: field not declared in schema`; see
//! [`typed_conversion_errors`](herald_wire::schema::openapi::typed_conversion_errors)).
//!
//! ```
//! use herald_wire::schema::GroupVersion;
//! use herald_server::api::field_validation::{check_fields, duplicate_fields, FieldValidation};
//! let text = br#"{"apiVersion": "v1", "kind": "Event", "spec": {}, "reason": "a", "reason": "b"}"#;
//! let body: serde_json::Value = serde_json::from_slice(text).unwrap();
//! let strict = FieldValidation::from_query(Some("Strict")).unwrap();
//! let dups = duplicate_fields(text);
//! let err = check_fields(GroupVersion::CORE_V1, strict, &body, &dups).unwrap_err();
//! assert!(err.message.ends_with(r#"strict decoding error: unknown field "spec", duplicate field "reason""#));
//! let warn = FieldValidation::from_query(None).unwrap();
//! assert_eq!(
//!     check_fields(GroupVersion::CORE_V1, warn, &body, &dups).unwrap(),
//!     vec![r#"unknown field "spec""#, r#"duplicate field "reason""#],
//! );
//! ```

use std::collections::HashSet;
use std::fmt::{self, Write as _};

use axum::response::Response;
use herald_core::status::ApiError;
use http::HeaderValue;
use serde::Deserialize as _;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use herald_wire::schema::GroupVersion;
use herald_wire::schema::openapi::{
    MAX_UNKNOWN_FIELDS, MAX_WALK_DEPTH, strict_decoding_error, unknown_fields,
};

/// The directive of a write request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FieldValidation {
    /// Drop unknown fields silently.
    Ignore,
    /// Accept, and warn about each unknown field (the server default).
    #[default]
    Warn,
    /// Reject a body with unknown fields (400).
    Strict,
}

impl FieldValidation {
    /// Parses the query value. Absent or empty means [`FieldValidation::Warn`]; any other
    /// value is `None`: kube-apiserver refuses it with its options validation (422 on
    /// `CreateOptions`, `UpdateOptions` or `PatchOptions`), which is where Herald refuses it
    /// too ([`field_validation_causes`](crate::registry::options::field_validation_causes)).
    pub fn from_query(v: Option<&str>) -> Option<Self> {
        match v.unwrap_or("") {
            "" | "Warn" => Some(FieldValidation::Warn),
            "Ignore" => Some(FieldValidation::Ignore),
            "Strict" => Some(FieldValidation::Strict),
            _ => None,
        }
    }
}

/// Applies `directive` to `body` (an Event in `gv`'s shape) and to `duplicates`, the
/// repeated keys of the JSON text it came from ([`duplicate_fields`]; only the text shows
/// them, since parsing keeps the last value). Returns the warnings to send
/// (`unknown field "x"`, `duplicate field "y"`; empty unless `Warn`), or the 400 for `Strict`.
pub fn check_fields(
    gv: GroupVersion,
    directive: FieldValidation,
    body: &Value,
    duplicates: &[String],
) -> Result<Vec<String>, ApiError> {
    if directive == FieldValidation::Ignore {
        return Ok(Vec::new());
    }
    let mut problems: Vec<String> = unknown_fields(gv, body)
        .iter()
        .map(|f| format!("unknown field {f:?}"))
        .collect();
    problems.extend(duplicates.iter().map(|f| format!("duplicate field {f:?}")));
    match directive {
        FieldValidation::Strict if !problems.is_empty() => {
            Err(strict_decoding_error(gv, &problems))
        }
        _ => Ok(problems),
    }
}

/// The keys that appear more than once in one object of the JSON `text`, as dotted paths
/// (`reason`, `metadata.labels.app`, `metadata.ownerReferences[0].uid`) in document order,
/// each once. At most [`MAX_UNKNOWN_FIELDS`] are reported and nesting deeper than
/// [`MAX_WALK_DEPTH`] is not inspected. Text that is not JSON has none (its parse error is
/// reported elsewhere).
///
/// ```
/// use herald_server::api::field_validation::duplicate_fields;
/// let text = br#"{"a": 1, "m": {"k": [{"x": 1, "x": 2}], "k": 0}, "a": 2}"#;
/// assert_eq!(duplicate_fields(text), vec!["m.k[0].x", "m.k", "a"]);
/// ```
pub fn duplicate_fields(text: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    let mut path = String::new();
    let mut de = serde_json::Deserializer::from_slice(text);
    let walk = Dups {
        path: &mut path,
        out: &mut out,
        depth: 0,
    };
    if DeserializeSeed::deserialize(walk, &mut de).is_err() {
        return Vec::new();
    }
    out
}

/// One value of the walk: records the repeated keys of the objects inside it.
struct Dups<'a> {
    path: &'a mut String,
    out: &'a mut Vec<String>,
    depth: usize,
}

impl<'de> DeserializeSeed<'de> for Dups<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<(), D::Error> {
        if self.depth >= MAX_WALK_DEPTH || self.out.len() >= MAX_UNKNOWN_FIELDS {
            return IgnoredAny::deserialize(de).map(|_| ());
        }
        de.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Dups<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let len = self.path.len();
        let mut i = 0usize;
        loop {
            self.path.truncate(len);
            let _ = write!(self.path, "[{i}]");
            let item = Dups {
                path: &mut *self.path,
                out: &mut *self.out,
                depth: self.depth + 1,
            };
            if seq.next_element_seed(item)?.is_none() {
                break;
            }
            i += 1;
        }
        self.path.truncate(len);
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let len = self.path.len();
        let mut keys = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            self.path.truncate(len);
            if len > 0 {
                self.path.push('.');
            }
            self.path.push_str(&key);
            if !keys.insert(key)
                && self.out.len() < MAX_UNKNOWN_FIELDS
                && !self.out.contains(self.path)
            {
                self.out.push(self.path.clone());
            }
            map.next_value_seed(Dups {
                path: &mut *self.path,
                out: &mut *self.out,
                depth: self.depth + 1,
            })?;
        }
        self.path.truncate(len);
        Ok(())
    }
}

/// The `Warning` header value for one warning text: `299 - "<text>"` with `"` and `\`
/// escaped. `None` if the text cannot be a header value (control characters).
pub fn warning_header(text: &str) -> Option<HeaderValue> {
    let escaped = text.replace('\\', "\\\\").replace('"', "\\\"");
    HeaderValue::from_str(&format!("299 - \"{escaped}\"")).ok()
}

/// Appends one `Warning` header per warning to `resp`.
pub fn add_warnings(resp: &mut Response, warnings: &[String]) {
    for w in warnings {
        if let Some(v) = warning_header(w) {
            resp.headers_mut().append(http::header::WARNING, v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn directives() {
        assert_eq!(
            FieldValidation::from_query(None).unwrap(),
            FieldValidation::Warn
        );
        assert_eq!(
            FieldValidation::from_query(Some("Ignore")).unwrap(),
            FieldValidation::Ignore
        );
        assert_eq!(
            FieldValidation::from_query(Some("")),
            Some(FieldValidation::Warn)
        );
        assert_eq!(FieldValidation::from_query(Some("strict")), None);
    }

    #[test]
    fn ignore_strict_warn() {
        let body =
            json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "note": "n", "message": "m"});
        let gv = GroupVersion::EVENTS_V1;
        assert!(
            check_fields(gv, FieldValidation::Ignore, &body, &[])
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            check_fields(gv, FieldValidation::Warn, &body, &[]).unwrap(),
            vec![r#"unknown field "message""#]
        );
        let e = check_fields(gv, FieldValidation::Strict, &body, &[]).unwrap_err();
        assert_eq!(e.code, 400);
        assert_eq!(e.reason.as_str(), "BadRequest");
        let clean = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "note": "n"});
        assert!(
            check_fields(gv, FieldValidation::Strict, &clean, &[])
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn duplicates_are_found_in_the_text_only() {
        let text = br#"{"kind": "Event", "note": "a", "note": "b", "metadata": {"labels": {"x": "1", "x": "2"}}}"#;
        let body: Value = serde_json::from_slice(text).unwrap();
        let gv = GroupVersion::EVENTS_V1;
        let dups = duplicate_fields(text);
        assert_eq!(
            check_fields(gv, FieldValidation::Warn, &body, &dups).unwrap(),
            vec![
                r#"duplicate field "note""#,
                r#"duplicate field "metadata.labels.x""#
            ]
        );
        assert!(
            check_fields(gv, FieldValidation::Warn, &body, &[])
                .unwrap()
                .is_empty(),
            "the parsed value has lost the repeats"
        );
        assert!(
            check_fields(gv, FieldValidation::Ignore, &body, &dups)
                .unwrap()
                .is_empty()
        );
        let e = check_fields(gv, FieldValidation::Strict, &body, &dups).unwrap_err();
        assert!(
            e.message
                .ends_with(r#"duplicate field "note", duplicate field "metadata.labels.x""#),
            "{}",
            e.message
        );
    }

    #[test]
    fn duplicates_are_bounded_and_reported_once() {
        let mut text = String::from("{");
        for i in 0..100 {
            text.push_str(&format!(r#""k{i}": 1, "k{i}": 2, "r": 0, "#));
        }
        text.push_str(r#""end": 1}"#);
        let d = duplicate_fields(text.as_bytes());
        assert_eq!(d.len(), MAX_UNKNOWN_FIELDS);
        assert_eq!(d.iter().filter(|p| *p == "r").count(), 1);
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert!(duplicate_fields(deep.as_bytes()).is_empty());
        assert!(duplicate_fields(b"not json").is_empty());
    }

    #[test]
    fn warning_header_escapes() {
        assert_eq!(
            warning_header(r#"unknown field "spec""#).unwrap(),
            r#"299 - "unknown field \"spec\"""#
        );
        assert!(warning_header("bad\nvalue").is_none());
    }
}
