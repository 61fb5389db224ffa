//! Field selectors for events: kube's `fieldSelector` syntax, the field labels each API group
//! accepts, and the values of those fields on a stored (core/v1) event.
//!
//! Syntax: comma-separated terms, all ANDed, each `label=value`, `label==value` or
//! `label!=value`. In values, `\`, `,` and `=` are escaped with a backslash; labels are not
//! escaped (the first operator splits the term). The two groups name the same fields
//! differently (`regarding.name` on `events.k8s.io/v1` is `involvedObject.name` on core);
//! a parsed [`FieldSelector`] always holds the core (internal) names, so it matches the one
//! stored shape whatever group the request came in on.
//!
//! ```
//! use herald_core::event::{ApiGroup, CoreEvent, fields::FieldSelector};
//! let mut ev = CoreEvent::default();
//! ev.involved_object.name = Some("web-0".into());
//! ev.type_ = Some("Warning".into());
//! let sel = FieldSelector::parse_for(ApiGroup::EventsV1, "regarding.name=web-0,type!=Normal").unwrap();
//! assert!(sel.matches(&ev));
//! let err = FieldSelector::parse_for(ApiGroup::EventsV1, "involvedObject.name=web-0").unwrap_err();
//! assert_eq!(err.message, "field label not supported: involvedObject.name");
//! ```

use std::fmt;

use crate::status::ApiError;

use super::meta::st;
use super::{ApiGroup, CoreEvent};

/// Every field label core/v1 (`/api/v1/.../events`) accepts, in kube's order.
pub const CORE_FIELD_LABELS: [&str; 13] = [
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
    "metadata.namespace",
    "metadata.name",
];

/// Every field label `events.k8s.io/v1` accepts, each with the core (internal) field it
/// selects on.
pub const EVENTS_V1_FIELD_LABELS: [(&str, &str); 13] = [
    ("regarding.kind", "involvedObject.kind"),
    ("regarding.namespace", "involvedObject.namespace"),
    ("regarding.name", "involvedObject.name"),
    ("regarding.uid", "involvedObject.uid"),
    ("regarding.apiVersion", "involvedObject.apiVersion"),
    (
        "regarding.resourceVersion",
        "involvedObject.resourceVersion",
    ),
    ("regarding.fieldPath", "involvedObject.fieldPath"),
    ("reason", "reason"),
    ("reportingController", "reportingComponent"),
    ("source", "source"),
    ("type", "type"),
    ("metadata.namespace", "metadata.namespace"),
    ("metadata.name", "metadata.name"),
];

/// The field labels `group` accepts, as clients write them.
pub fn supported_field_labels(group: ApiGroup) -> Vec<&'static str> {
    match group {
        ApiGroup::Core => CORE_FIELD_LABELS.to_vec(),
        ApiGroup::EventsV1 => EVENTS_V1_FIELD_LABELS.iter().map(|(l, _)| *l).collect(),
    }
}

/// Maps a field label of `group` to the core field it selects on; anything else is 400
/// `field label not supported: <label>`.
pub fn convert_field_label(group: ApiGroup, label: &str) -> Result<&'static str, ApiError> {
    let found = match group {
        ApiGroup::Core => CORE_FIELD_LABELS.iter().copied().find(|l| *l == label),
        ApiGroup::EventsV1 => EVENTS_V1_FIELD_LABELS
            .iter()
            .find(|(l, _)| *l == label)
            .map(|(_, internal)| *internal),
    };
    found.ok_or_else(|| ApiError::bad_request(format!("field label not supported: {label}")))
}

/// The value of a core (internal) field on a stored event, as kube's selectable field set
/// has it: absent strings are `""`, `source` is `source.component` or, when that is empty,
/// `reportingComponent`. `None` for a name that is not a core field label.
pub fn internal_field_value<'a>(event: &'a CoreEvent, internal: &str) -> Option<&'a str> {
    let o = &event.involved_object;
    Some(match internal {
        "involvedObject.kind" => st(&o.kind),
        "involvedObject.namespace" => st(&o.namespace),
        "involvedObject.name" => st(&o.name),
        "involvedObject.uid" => st(&o.uid),
        "involvedObject.apiVersion" => st(&o.api_version),
        "involvedObject.resourceVersion" => st(&o.resource_version),
        "involvedObject.fieldPath" => st(&o.field_path),
        "reason" => st(&event.reason),
        "reportingComponent" => st(&event.reporting_component),
        "source" => {
            let component = event.source.as_ref().map_or("", |s| st(&s.component));
            if component.is_empty() {
                st(&event.reporting_component)
            } else {
                component
            }
        }
        "type" => st(&event.type_),
        "metadata.namespace" => st(&event.metadata.namespace),
        "metadata.name" => st(&event.metadata.name),
        _ => return None,
    })
}

/// The value of the field `label` (as `group`'s clients write it) on a stored event; an
/// unsupported label is the same 400 as in a selector.
pub fn field_value<'a>(
    group: ApiGroup,
    event: &'a CoreEvent,
    label: &str,
) -> Result<&'a str, ApiError> {
    let internal = convert_field_label(group, label)?;
    Ok(internal_field_value(event, internal).unwrap_or(""))
}

/// A term's operator. `=` and `==` are the same operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldOp {
    /// `=` or `==`: the field equals the value.
    Equals,
    /// `!=`: the field differs from the value.
    NotEquals,
}

/// One `field op value` term, with the value unescaped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldTerm {
    /// The field label (the core name once converted with [`FieldSelector::parse_for`]).
    pub field: String,
    /// The operator.
    pub op: FieldOp,
    /// The unescaped value.
    pub value: String,
}

/// A parsed field selector: terms sorted as kube sorts them, all of which must hold. The
/// empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    terms: Vec<FieldTerm>,
}

impl FieldSelector {
    /// The selector that matches everything (an absent `fieldSelector`).
    pub fn everything() -> Self {
        Self::default()
    }

    /// Parses the syntax without checking labels against any group. Errors are 400
    /// `BadRequest`: `invalid selector: '<sel>'; can't understand '<term>'` for a term without
    /// an operator, `invalid field selector: invalid escape sequence: \x` and
    /// `invalid field selector: unescaped character in value: <code point>` for bad values.
    pub fn parse(selector: &str) -> Result<Self, ApiError> {
        let mut parts = split_terms(selector);
        parts.sort_unstable();
        let mut terms = Vec::with_capacity(parts.len());
        for part in parts.into_iter().filter(|p| !p.is_empty()) {
            let Some((lhs, op, rhs)) = split_term(part) else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{selector}'; can't understand '{part}'"
                )));
            };
            let value = unescape_value(rhs).map_err(ApiError::bad_request)?;
            terms.push(FieldTerm {
                field: lhs.to_string(),
                op,
                value,
            });
        }
        Ok(Self { terms })
    }

    /// Parses a selector sent to `group` and converts every label to its core field, so the
    /// result matches stored events. Unsupported labels are 400
    /// `field label not supported: <label>`.
    pub fn parse_for(group: ApiGroup, selector: &str) -> Result<Self, ApiError> {
        let mut sel = Self::parse(selector)?;
        for t in &mut sel.terms {
            t.field = convert_field_label(group, &t.field)?.to_string();
        }
        Ok(sel)
    }

    /// True when there is no term.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// The terms.
    pub fn terms(&self) -> &[FieldTerm] {
        &self.terms
    }

    /// Whether a stored event satisfies every term. The selector must hold core field
    /// names (as [`FieldSelector::parse_for`] makes it); an unknown field reads as `""`.
    pub fn matches(&self, event: &CoreEvent) -> bool {
        self.terms.iter().all(|t| {
            let v = internal_field_value(event, &t.field).unwrap_or("");
            match t.op {
                FieldOp::Equals => v == t.value,
                FieldOp::NotEquals => v != t.value,
            }
        })
    }

    /// The value `field` must equal for a match, if an `=`/`==` term pins it (kube's
    /// `RequiresExactMatch`; the first such term wins).
    pub fn requires_exact_match(&self, field: &str) -> Option<&str> {
        self.terms
            .iter()
            .find(|t| t.field == field && t.op == FieldOp::Equals)
            .map(|t| t.value.as_str())
    }

    /// The selector for a watch or list of the single object `name` (URL
    /// `.../events/{name}` or `?watch=true&fieldSelector=...` with a name): an empty
    /// selector becomes `metadata.name=<name>`; a non-empty one must pin `metadata.name` to
    /// `name`, otherwise 400 `fieldSelector metadata.name doesn't match requested name`.
    pub fn for_single_object(self, name: &str) -> Result<Self, ApiError> {
        if self.is_empty() {
            return Ok(Self {
                terms: vec![FieldTerm {
                    field: "metadata.name".into(),
                    op: FieldOp::Equals,
                    value: name.to_string(),
                }],
            });
        }
        if self.requires_exact_match("metadata.name") == Some(name) {
            Ok(self)
        } else {
            Err(ApiError::bad_request(
                "fieldSelector metadata.name doesn't match requested name",
            ))
        }
    }
}

impl fmt::Display for FieldSelector {
    /// kube's canonical form: terms joined by `,`, values escaped.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, t) in self.terms.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            let op = match t.op {
                FieldOp::Equals => "=",
                FieldOp::NotEquals => "!=",
            };
            write!(f, "{}{op}{}", t.field, escape_value(&t.value))?;
        }
        Ok(())
    }
}

/// Escapes `\`, `,` and `=` in a value with a backslash (kube's `EscapeValue`).
pub fn escape_value(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        if matches!(c, '\\' | ',' | '=') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Undoes [`escape_value`]; an unknown escape, a trailing `\` or a bare `,`/`=` is an error
/// with kube's message.
pub fn unescape_value(s: &str) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut in_slash = false;
    for c in s.chars() {
        if in_slash {
            if matches!(c, '\\' | ',' | '=') {
                out.push(c);
            } else {
                return Err(format!(
                    "invalid field selector: invalid escape sequence: \\{c}"
                ));
            }
            in_slash = false;
            continue;
        }
        match c {
            '\\' => in_slash = true,
            // Go prints the rune with %v, i.e. as its code point number.
            ',' | '=' => {
                return Err(format!(
                    "invalid field selector: unescaped character in value: {}",
                    c as u32
                ));
            }
            c => out.push(c),
        }
    }
    if in_slash {
        return Err("invalid field selector: invalid escape sequence: \\".to_string());
    }
    Ok(out)
}

/// Splits on commas that are not escaped; escapes stay in the terms.
fn split_terms(s: &str) -> Vec<&str> {
    if s.is_empty() {
        return Vec::new();
    }
    let mut terms = Vec::new();
    let mut start = 0;
    let mut in_slash = false;
    for (i, c) in s.char_indices() {
        if in_slash {
            in_slash = false;
        } else if c == '\\' {
            in_slash = true;
        } else if c == ',' {
            terms.push(&s[start..i]);
            start = i + 1;
        }
    }
    terms.push(&s[start..]);
    terms
}

/// Splits a term at the first operator, trying `!=`, `==`, `=` at each position.
fn split_term(term: &str) -> Option<(&str, FieldOp, &str)> {
    for (i, _) in term.char_indices() {
        let rest = &term[i..];
        for (tok, op) in [
            ("!=", FieldOp::NotEquals),
            ("==", FieldOp::Equals),
            ("=", FieldOp::Equals),
        ] {
            if let Some(value) = rest.strip_prefix(tok) {
                return Some((&term[..i], op, value));
            }
        }
    }
    None
}
