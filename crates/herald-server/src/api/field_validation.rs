//! The `fieldValidation` query parameter of writes: what to do about unknown fields.
//!
//! kubectl (default `--validate=strict`) sees the parameter advertised in the OpenAPI
//! documents, skips its own schema check and sends `fieldValidation=Strict`, so the server is
//! where a typo in a manifest is caught. kube-apiserver's behaviour:
//! - `Strict`: 400 BadRequest, `… strict decoding error: unknown field "x"`;
//! - `Warn` (the default when the parameter is absent): the write goes ahead and each unknown
//!   field comes back as a `Warning: 299 - "unknown field \"x\""` header (kubectl prints
//!   `Warning: unknown field "x"`);
//! - `Ignore`: unknown fields are silently dropped.
//!
//! ```
//! use herald_server::api::discovery::GroupVersion;
//! use herald_server::api::field_validation::{check_unknown_fields, FieldValidation};
//! let body = serde_json::json!({"apiVersion": "v1", "kind": "Event", "spec": {}});
//! let strict = FieldValidation::from_query(Some("Strict")).unwrap();
//! let err = check_unknown_fields(GroupVersion::CORE_V1, strict, &body).unwrap_err();
//! assert!(err.message.ends_with(r#"strict decoding error: unknown field "spec""#));
//! let warn = FieldValidation::from_query(None).unwrap();
//! assert_eq!(check_unknown_fields(GroupVersion::CORE_V1, warn, &body).unwrap(), vec![r#"unknown field "spec""#]);
//! ```

use axum::response::Response;
use herald_core::status::ApiError;
use http::HeaderValue;
use serde_json::Value;

use super::discovery::GroupVersion;
use super::openapi::{strict_decoding_error, unknown_fields};

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
    /// Parses the query value. Absent or empty means [`FieldValidation::Warn`]; anything else
    /// unknown is a 400 with kube-apiserver's message.
    pub fn from_query(v: Option<&str>) -> Result<Self, ApiError> {
        match v.unwrap_or("") {
            "" | "Warn" => Ok(FieldValidation::Warn),
            "Ignore" => Ok(FieldValidation::Ignore),
            "Strict" => Ok(FieldValidation::Strict),
            other => Err(ApiError::bad_request(format!(
                "fieldValidation parameter unsupported: {other}, valid values are Ignore, Warn, Strict"
            ))),
        }
    }
}

/// Applies `directive` to `body` (an Event in `gv`'s shape). Returns the warnings to send
/// (`unknown field "x"`, empty unless `Warn`), or the 400 for `Strict`.
pub fn check_unknown_fields(
    gv: GroupVersion,
    directive: FieldValidation,
    body: &Value,
) -> Result<Vec<String>, ApiError> {
    if directive == FieldValidation::Ignore {
        return Ok(Vec::new());
    }
    let unknown = unknown_fields(gv, body);
    if unknown.is_empty() {
        return Ok(Vec::new());
    }
    match directive {
        FieldValidation::Strict => Err(strict_decoding_error(gv, &unknown)),
        _ => Ok(unknown
            .iter()
            .map(|f| format!("unknown field {f:?}"))
            .collect()),
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
        let e = FieldValidation::from_query(Some("strict")).unwrap_err();
        assert_eq!(e.code, 400);
        assert!(e.message.contains("valid values are Ignore, Warn, Strict"));
    }

    #[test]
    fn ignore_strict_warn() {
        let body =
            json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "note": "n", "message": "m"});
        let gv = GroupVersion::EVENTS_V1;
        assert!(
            check_unknown_fields(gv, FieldValidation::Ignore, &body)
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            check_unknown_fields(gv, FieldValidation::Warn, &body).unwrap(),
            vec![r#"unknown field "message""#]
        );
        let e = check_unknown_fields(gv, FieldValidation::Strict, &body).unwrap_err();
        assert_eq!(e.code, 400);
        assert_eq!(e.reason.as_str(), "BadRequest");
        let clean = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "note": "n"});
        assert!(
            check_unknown_fields(gv, FieldValidation::Strict, &clean)
                .unwrap()
                .is_empty()
        );
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
