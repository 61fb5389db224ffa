//! Field causes in the shape and wording of apimachinery's `field.Error`, and Go-style
//! renderings of the values kube-apiserver quotes in them.
//!
//! A cause's `message` is what Go calls the error body (`Required value`, `Invalid value:
//! "x": detail`, …); [`invalid_error`] joins causes into the `Status` message exactly as
//! kube-apiserver does (`Event "x" is invalid: [a: …, b: …]`, duplicates dropped from the
//! message but kept in the causes).

use jiff::Timestamp;

use crate::labels::go_quote;
use crate::status::{ApiError, FieldCause};

use super::ApiGroup;

/// `FieldValueRequired`: `Required value[: detail]`.
pub fn required(field: &str, detail: &str) -> FieldCause {
    cause(
        "FieldValueRequired",
        field,
        with_detail("Required value", detail),
    )
}

/// `FieldValueForbidden`: `Forbidden[: detail]`.
pub fn forbidden(field: &str, detail: &str) -> FieldCause {
    cause(
        "FieldValueForbidden",
        field,
        with_detail("Forbidden", detail),
    )
}

/// `FieldValueTooLong`: `Too long: may not be more than N bytes`.
pub fn too_long(field: &str, max_bytes: usize) -> FieldCause {
    let unit = if max_bytes == 1 { "byte" } else { "bytes" };
    cause(
        "FieldValueTooLong",
        field,
        format!("Too long: may not be more than {max_bytes} {unit}"),
    )
}

/// `FieldValueInvalid` for a string value: `Invalid value: "v"[: detail]`.
pub fn invalid(field: &str, value: &str, detail: &str) -> FieldCause {
    invalid_repr(field, &go_quote(value), detail)
}

/// `FieldValueInvalid` with an already rendered value (a number, a Go struct literal, …).
pub fn invalid_repr(field: &str, value_repr: &str, detail: &str) -> FieldCause {
    cause(
        "FieldValueInvalid",
        field,
        with_detail(&format!("Invalid value: {value_repr}"), detail),
    )
}

/// `FieldValueNotSupported`: `Unsupported value: "v": supported values: "a", "b"`.
pub fn not_supported(field: &str, value: &str, supported: &[&str]) -> FieldCause {
    not_supported_repr(field, &go_quote(value), supported)
}

/// [`not_supported`] for a value already printed as Go prints it (a `[]string`, say, from
/// [`go_string_slice`](super::meta::go_string_slice)).
pub fn not_supported_repr(field: &str, value: &str, supported: &[&str]) -> FieldCause {
    let list = supported
        .iter()
        .map(|s| go_quote(s))
        .collect::<Vec<_>>()
        .join(", ");
    cause(
        "FieldValueNotSupported",
        field,
        format!("Unsupported value: {value}: supported values: {list}"),
    )
}

fn with_detail(head: &str, detail: &str) -> String {
    if detail.is_empty() {
        head.to_string()
    } else {
        format!("{head}: {detail}")
    }
}

fn cause(reason: &str, field: &str, message: String) -> FieldCause {
    FieldCause {
        reason: reason.to_string(),
        message,
        field: field.to_string(),
    }
}

/// How Go prints a `time.Time` (`2006-01-02 15:04:05.5 +0000 UTC`), as quoted in
/// "field is immutable" causes for timestamps.
pub fn go_time_string(t: Timestamp) -> String {
    let civil = t.to_zoned(jiff::tz::TimeZone::UTC).datetime();
    let base = civil.strftime("%Y-%m-%d %H:%M:%S").to_string();
    let nanos = civil.subsec_nanosecond();
    let frac = if nanos == 0 {
        String::new()
    } else {
        let s = format!(".{nanos:09}");
        s.trim_end_matches('0').to_string()
    };
    format!("{base}{frac} +0000 UTC")
}

/// The 422 `Invalid` error for `causes` on `group`, with kube-apiserver's message: the kind
/// is group-qualified (`Event.events.k8s.io`) on `events.k8s.io`, and identical cause texts
/// appear once in the message (all causes stay in `details.causes`).
pub fn invalid_error(group: ApiGroup, name: &str, causes: Vec<FieldCause>) -> ApiError {
    let mut seen = std::collections::HashSet::new();
    let texts: Vec<String> = causes
        .iter()
        .map(|c| format!("{}: {}", c.field, c.message))
        .filter(|t| seen.insert(t.clone()))
        .collect();
    let detail = match texts.as_slice() {
        [one] => one.clone(),
        _ => format!("[{}]", texts.join(", ")),
    };
    let r = group.resource();
    let kind = if r.group.is_empty() {
        r.kind.to_string()
    } else {
        format!("{}.{}", r.kind, r.group)
    };
    let mut err = ApiError::invalid(r, name, causes);
    err.message = format!("{kind} {} is invalid: {detail}", go_quote(name));
    err
}
