//! ObjectMeta validation as kube-apiserver applies it to events: the generic rules every
//! create and update goes through, and the stricter name rule `events.k8s.io/v1` adds.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};

use crate::labels::{
    dns1123_label_errors, dns1123_subdomain_errors, go_quote, label_value_errors,
    qualified_name_errors,
};
use crate::status::FieldCause;

use super::causes::{forbidden, go_time_string, invalid, invalid_repr, required, too_long};
use super::convert::GO_ZERO_TIME;

/// The most bytes all annotation keys and values of one object may add up to (256 KiB);
/// more is a `FieldValueTooLong` cause on `metadata.annotations`.
pub const TOTAL_ANNOTATION_SIZE_LIMIT_BYTES: usize = 256 * 1024;

/// The detail of every "field is immutable" cause.
pub const FIELD_IMMUTABLE: &str = "field is immutable";

/// The finalizer names that need no domain prefix.
pub const STANDARD_FINALIZERS: [&str; 3] = ["kubernetes", "orphan", "foregroundDeletion"];

/// Which rule object names (and `generateName` prefixes) must follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    /// The generic rule for every resource: not `.` or `..`, no `/` or `%`.
    PathSegment,
    /// The `events.k8s.io/v1` rule: a DNS-1123 subdomain (≤253, lowercase alphanumerics, `-`, `.`).
    DnsSubdomain,
}

impl NameRule {
    /// The problems with `name`, in kube's words. With `prefix` it is checked as a
    /// `generateName` prefix (a trailing `-` is allowed; `.`/`..` are not rejected).
    pub fn errors(self, name: &str, prefix: bool) -> Vec<String> {
        match self {
            NameRule::PathSegment => {
                if !prefix {
                    for bad in [".", ".."] {
                        if name == bad {
                            return vec![format!("may not be '{bad}'")];
                        }
                    }
                }
                ["/", "%"]
                    .iter()
                    .filter(|c| name.contains(**c))
                    .map(|c| format!("may not contain '{c}'"))
                    .collect()
            }
            NameRule::DnsSubdomain => {
                if prefix && name.len() > 1 && name.ends_with('-') {
                    // kube masks the trailing dash by replacing the last two bytes with "a".
                    let cut = floor_char_boundary(name, name.len() - 2);
                    dns1123_subdomain_errors(&format!("{}a", &name[..cut]))
                } else {
                    dns1123_subdomain_errors(name)
                }
            }
        }
    }
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

pub(crate) fn st(o: &Option<String>) -> &str {
    o.as_deref().unwrap_or("")
}

/// Go's `%#v` of a `[]string`: `[]string{"a", "b"}`.
pub fn go_string_slice(items: &[String]) -> String {
    let inner = items
        .iter()
        .map(|s| go_quote(s))
        .collect::<Vec<_>>()
        .join(", ");
    format!("[]string{{{inner}}}")
}

/// `metadata.labels` causes: every key a qualified name, every value a label value.
pub fn label_causes(labels: Option<&BTreeMap<String, String>>, field: &str) -> Vec<FieldCause> {
    let mut out = Vec::new();
    for (k, v) in labels.into_iter().flatten() {
        for msg in qualified_name_errors(k) {
            out.push(invalid(field, k, &msg));
        }
        for msg in label_value_errors(v) {
            out.push(invalid(field, v, &msg));
        }
    }
    out
}

/// `metadata.annotations` causes: keys are qualified names (case-insensitive) and all keys
/// and values together stay within [`TOTAL_ANNOTATION_SIZE_LIMIT_BYTES`].
pub fn annotation_causes(
    annotations: Option<&BTreeMap<String, String>>,
    field: &str,
) -> Vec<FieldCause> {
    let mut out = Vec::new();
    let mut total = 0usize;
    for (k, v) in annotations.into_iter().flatten() {
        // Checked lowercased, as apimachinery does; most keys already are.
        let lower = if k.bytes().any(|b| b.is_ascii_uppercase() || !b.is_ascii()) {
            std::borrow::Cow::Owned(k.to_lowercase())
        } else {
            std::borrow::Cow::Borrowed(k.as_str())
        };
        for msg in qualified_name_errors(&lower) {
            out.push(invalid(field, k, &msg));
        }
        total = total.saturating_add(k.len()).saturating_add(v.len());
    }
    if total > TOTAL_ANNOTATION_SIZE_LIMIT_BYTES {
        out.push(too_long(field, TOTAL_ANNOTATION_SIZE_LIMIT_BYTES));
    }
    out
}

fn go_bool_ptr(b: Option<bool>) -> String {
    match b {
        None => "(*bool)(nil)".to_string(),
        Some(b) => format!("&{b}"),
    }
}

/// `metadata.ownerReferences` causes: apiVersion with a version, kind, name and uid set, no
/// core/v1 Event as owner, at most one controller.
pub fn owner_reference_causes(refs: Option<&Vec<OwnerReference>>, field: &str) -> Vec<FieldCause> {
    let mut out = Vec::new();
    let mut first_controller: Option<String> = None;
    for r in refs.into_iter().flatten() {
        let (group, version) = match r.api_version.matches('/').count() {
            _ if r.api_version.is_empty() || r.api_version == "/" => ("", ""),
            0 => ("", r.api_version.as_str()),
            1 => r.api_version.split_once('/').unwrap_or(("", "")),
            _ => ("", ""),
        };
        if version.is_empty() {
            out.push(invalid(
                &format!("{field}.apiVersion"),
                &r.api_version,
                "version must not be empty",
            ));
        }
        if r.kind.is_empty() {
            out.push(invalid(
                &format!("{field}.kind"),
                &r.kind,
                "must not be empty",
            ));
        }
        if r.name.is_empty() {
            out.push(invalid(
                &format!("{field}.name"),
                &r.name,
                "must not be empty",
            ));
        }
        if r.uid.is_empty() {
            out.push(invalid(
                &format!("{field}.uid"),
                &r.uid,
                "must not be empty",
            ));
        }
        if group.is_empty() && version == "v1" && r.kind == "Event" {
            let repr = format!(
                "v1.OwnerReference{{APIVersion:{}, Kind:{}, Name:{}, UID:{}, Controller:{}, BlockOwnerDeletion:{}}}",
                go_quote(&r.api_version),
                go_quote(&r.kind),
                go_quote(&r.name),
                go_quote(&r.uid),
                go_bool_ptr(r.controller),
                go_bool_ptr(r.block_owner_deletion),
            );
            out.push(invalid_repr(
                field,
                &repr,
                "/v1, Kind=Event is disallowed from being an owner",
            ));
        }
        if r.controller == Some(true) {
            let current = format!("{}/{}", r.kind, r.name);
            match &first_controller {
                Some(first) => out.push(invalid_repr(
                    field,
                    &go_owner_refs(refs),
                    &format!(
                        "Only one reference can have Controller set to true. Found \"true\" in references for {first} and {current}"
                    ),
                )),
                None => first_controller = Some(current),
            }
        }
    }
    out
}

fn go_owner_refs(refs: Option<&Vec<OwnerReference>>) -> String {
    let items = refs
        .into_iter()
        .flatten()
        .map(|r| {
            format!(
                "v1.OwnerReference{{APIVersion:{}, Kind:{}, Name:{}, UID:{}, Controller:{}, BlockOwnerDeletion:{}}}",
                go_quote(&r.api_version),
                go_quote(&r.kind),
                go_quote(&r.name),
                go_quote(&r.uid),
                go_bool_ptr(r.controller),
                go_bool_ptr(r.block_owner_deletion),
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    format!("[]v1.OwnerReference{{{items}}}")
}

/// `metadata.finalizers` causes (apimachinery's rule): qualified names, and not both
/// `orphan` and `foregroundDeletion`.
pub fn finalizer_causes(finalizers: Option<&Vec<String>>, field: &str) -> Vec<FieldCause> {
    let mut out = Vec::new();
    let list = finalizers.map(Vec::as_slice).unwrap_or_default();
    for f in list {
        for msg in qualified_name_errors(f) {
            out.push(invalid(field, f, &msg));
        }
    }
    if list.iter().any(|f| f == "orphan") && list.iter().any(|f| f == "foregroundDeletion") {
        out.push(invalid_repr(
            field,
            &go_string_slice(list),
            "finalizer orphan and foregroundDeletion cannot be both set",
        ));
    }
    out
}

/// core's extra finalizer rule (`metadata.finalizers[i]`): a name without `/` must be a
/// standard finalizer.
fn kube_finalizer_causes(finalizers: Option<&Vec<String>>, field: &str) -> Vec<FieldCause> {
    let mut out = Vec::new();
    for (i, f) in finalizers.into_iter().flatten().enumerate() {
        let path = format!("{field}.finalizers[{i}]");
        for msg in qualified_name_errors(f) {
            out.push(invalid(&path, f, &msg));
        }
        if !f.contains('/') && !STANDARD_FINALIZERS.contains(&f.as_str()) {
            out.push(invalid(
                &path,
                f,
                "name is neither a standard finalizer name nor is it fully qualified",
            ));
        }
    }
    out
}

/// apimachinery's `ValidateObjectMeta` for a namespaced object, fields under `field`
/// (normally `metadata`): name or generateName, name rule, namespace a DNS-1123 label,
/// generation ≥ 0, labels, annotations, ownerReferences, finalizers.
pub fn object_meta_causes(meta: &ObjectMeta, rule: NameRule, field: &str) -> Vec<FieldCause> {
    let mut out = Vec::new();
    let generate_name = st(&meta.generate_name);
    if !generate_name.is_empty() {
        for msg in rule.errors(generate_name, true) {
            out.push(invalid(
                &format!("{field}.generateName"),
                generate_name,
                &msg,
            ));
        }
    }
    let name = st(&meta.name);
    if name.is_empty() {
        out.push(required(
            &format!("{field}.name"),
            "name or generateName is required",
        ));
    } else {
        for msg in rule.errors(name, false) {
            out.push(invalid(&format!("{field}.name"), name, &msg));
        }
    }
    let ns = st(&meta.namespace);
    if ns.is_empty() {
        out.push(required(&format!("{field}.namespace"), ""));
    } else {
        for msg in dns1123_label_errors(ns) {
            out.push(invalid(&format!("{field}.namespace"), ns, &msg));
        }
    }
    if let Some(g) = meta.generation.filter(|g| *g < 0) {
        out.push(invalid_repr(
            &format!("{field}.generation"),
            &g.to_string(),
            "must be greater than or equal to 0",
        ));
    }
    // A path is built only when there is something under it to check: this runs on every
    // write, and most set no labels, owner references or finalizers.
    let path = |name: &str| [field, ".", name].concat();
    if meta.labels.as_ref().is_some_and(|m| !m.is_empty()) {
        out.extend(label_causes(meta.labels.as_ref(), &path("labels")));
    }
    if meta.annotations.as_ref().is_some_and(|m| !m.is_empty()) {
        out.extend(annotation_causes(
            meta.annotations.as_ref(),
            &path("annotations"),
        ));
    }
    if meta
        .owner_references
        .as_ref()
        .is_some_and(|r| !r.is_empty())
    {
        out.extend(owner_reference_causes(
            meta.owner_references.as_ref(),
            &path("ownerReferences"),
        ));
    }
    if meta.finalizers.as_ref().is_some_and(|f| !f.is_empty()) {
        out.extend(finalizer_causes(
            meta.finalizers.as_ref(),
            &path("finalizers"),
        ));
    }
    out
}

/// core's `ValidateObjectMeta`: [`object_meta_causes`] plus the standard-finalizer rule.
pub fn core_object_meta_causes(meta: &ObjectMeta, rule: NameRule, field: &str) -> Vec<FieldCause> {
    let mut out = object_meta_causes(meta, rule, field);
    out.extend(kube_finalizer_causes(meta.finalizers.as_ref(), field));
    out
}

fn time_repr(t: Option<&Time>) -> String {
    go_time_string(t.map_or(GO_ZERO_TIME, |t| t.0))
}

/// apimachinery's `ValidateObjectMetaUpdate`: resourceVersion present, generation not
/// decremented, name/namespace/uid/creationTimestamp/deletion fields immutable, no new
/// finalizers while deleting, labels/annotations/ownerReferences valid.
pub fn object_meta_update_causes(
    new: &ObjectMeta,
    old: &ObjectMeta,
    field: &str,
) -> Vec<FieldCause> {
    let mut out = Vec::new();
    let path = |c: &str| format!("{field}.{c}");
    if old.deletion_timestamp.is_some() {
        let olds: BTreeSet<&String> = old.finalizers.iter().flatten().collect();
        let extra: BTreeSet<String> = new
            .finalizers
            .iter()
            .flatten()
            .filter(|f| !olds.contains(f))
            .cloned()
            .collect();
        if !extra.is_empty() {
            let extra: Vec<String> = extra.into_iter().collect();
            out.push(forbidden(
                &path("finalizers"),
                &format!(
                    "no new finalizers can be added if the object is being deleted, found new finalizers {}",
                    go_string_slice(&extra)
                ),
            ));
        }
    }
    if st(&new.resource_version).is_empty() {
        out.push(invalid(
            &path("resourceVersion"),
            "",
            "must be specified for an update",
        ));
    }
    let (ng, og) = (new.generation.unwrap_or(0), old.generation.unwrap_or(0));
    if ng < og {
        out.push(invalid_repr(
            &path("generation"),
            &ng.to_string(),
            "must not be decremented",
        ));
    }
    for (c, n, o) in [
        ("name", &new.name, &old.name),
        ("namespace", &new.namespace, &old.namespace),
        ("uid", &new.uid, &old.uid),
    ] {
        if st(n) != st(o) {
            out.push(invalid(&path(c), st(n), FIELD_IMMUTABLE));
        }
    }
    let ts = |t: &Option<Time>| t.as_ref().map(|t| t.0).unwrap_or(GO_ZERO_TIME);
    if ts(&new.creation_timestamp) != ts(&old.creation_timestamp) {
        out.push(invalid_repr(
            &path("creationTimestamp"),
            &time_repr(new.creation_timestamp.as_ref()),
            FIELD_IMMUTABLE,
        ));
    }
    if new.deletion_timestamp.as_ref().map(|t| t.0) != old.deletion_timestamp.as_ref().map(|t| t.0)
    {
        let repr = match &new.deletion_timestamp {
            None => go_quote("null"),
            Some(t) => go_time_string(t.0),
        };
        out.push(invalid_repr(
            &path("deletionTimestamp"),
            &repr,
            FIELD_IMMUTABLE,
        ));
    }
    if new.deletion_grace_period_seconds != old.deletion_grace_period_seconds {
        let repr = match new.deletion_grace_period_seconds {
            None => go_quote("null"),
            Some(s) => s.to_string(),
        };
        out.push(invalid_repr(
            &path("deletionGracePeriodSeconds"),
            &repr,
            FIELD_IMMUTABLE,
        ));
    }
    out.extend(label_causes(new.labels.as_ref(), &path("labels")));
    out.extend(annotation_causes(
        new.annotations.as_ref(),
        &path("annotations"),
    ));
    out.extend(owner_reference_causes(
        new.owner_references.as_ref(),
        &path("ownerReferences"),
    ));
    out
}

/// core's `ValidateObjectMetaUpdate`: [`object_meta_update_causes`] plus the
/// standard-finalizer rule on the new finalizers.
pub fn core_object_meta_update_causes(
    new: &ObjectMeta,
    old: &ObjectMeta,
    field: &str,
) -> Vec<FieldCause> {
    let mut out = object_meta_update_causes(new, old, field);
    out.extend(kube_finalizer_causes(new.finalizers.as_ref(), field));
    out
}
