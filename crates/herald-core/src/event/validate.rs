//! Create and update validation for events, per request group, as kube-apiserver runs it.
//!
//! Rules are chosen by the group the request came in on, never by the stored object:
//!
//! - core/v1 gets the lax "legacy" rules only: namespace agreement with `involvedObject`,
//!   and, for events that carry an `eventTime`, the reporting fields and length limits.
//! - `events.k8s.io/v1` adds strict rules on create (DNS-subdomain names, `eventTime`
//!   required, `type` Normal/Warning, series sanity, deprecated fields unset) and immutability
//!   of most fields on update.
//!
//! On top of the group rules every create and update gets the generic ObjectMeta checks.
//! All functions take the storage (core/v1) shape: convert an `events.k8s.io/v1` body with
//! [`super::convert::events_v1_to_core`] first. Field paths are kube's internal ones, which
//! are the core/v1 names (`involvedObject.namespace`, `message`), except that the reporting
//! controller is `reportingController` on `events.k8s.io/v1` and `reportingComponent` on core.
//!
//! ```
//! use herald_core::event::{ApiGroup, CoreEvent, validate::validate_create};
//! let mut ev = CoreEvent::default();
//! ev.metadata.name = Some("x".into());
//! ev.metadata.namespace = Some("ns1".into());
//! ev.involved_object.namespace = Some("ns2".into());
//! let err = validate_create(&ev, ApiGroup::Core).unwrap_err();
//! assert_eq!(err.code, 422);
//! assert_eq!(
//!     err.message,
//!     r#"Event "x" is invalid: involvedObject.namespace: Invalid value: "ns2": does not match event.namespace"#
//! );
//! ```

use k8s_openapi::api::core::v1::{EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};

use crate::labels::{dns1123_subdomain_errors, go_quote, qualified_name_errors};
use crate::status::{ApiError, FieldCause};

use super::causes::{go_time_string, invalid, invalid_error, invalid_repr, required};
use super::convert::{GO_ZERO_TIME, micro_time_is_unset, normalize_reference, time_is_unset};
use super::meta::{
    FIELD_IMMUTABLE, NameRule, core_object_meta_causes, core_object_meta_update_causes,
    object_meta_causes, object_meta_update_causes, st,
};
use super::{ApiGroup, CoreEvent};

/// The longest `reportingInstance` of an event with `eventTime` (bytes).
pub const REPORTING_INSTANCE_LENGTH_LIMIT: usize = 128;
/// The longest `action` of an event with `eventTime` (bytes).
pub const ACTION_LENGTH_LIMIT: usize = 128;
/// The longest `reason` of an event with `eventTime` (bytes).
pub const REASON_LENGTH_LIMIT: usize = 128;
/// The longest `message`/`note` of an event with `eventTime` (bytes).
pub const NOTE_LENGTH_LIMIT: usize = 1024;

/// The namespace old clients may use for events about cluster-scoped objects.
pub const NAMESPACE_DEFAULT: &str = "default";
/// The other namespace new-style events about cluster-scoped objects may live in.
pub const NAMESPACE_SYSTEM: &str = "kube-system";

/// Validates a create on `group` the way kube-apiserver does: first the group's strategy
/// rules (one 422 with all their causes), then, only if those pass, the generic ObjectMeta
/// rules (a second, separate 422). Run it after the server has filled the namespace and
/// expanded `generateName` (see [`super::names`]).
pub fn validate_create(event: &CoreEvent, group: ApiGroup) -> Result<(), ApiError> {
    let name = st(&event.metadata.name);
    let causes = create_strategy_causes(event, group);
    if !causes.is_empty() {
        return Err(invalid_error(group, name, causes));
    }
    let causes = object_meta_causes(&event.metadata, NameRule::PathSegment, "metadata");
    if !causes.is_empty() {
        return Err(invalid_error(group, name, causes));
    }
    Ok(())
}

/// Validates an update of `old` to `new` on `group`: the generic ObjectMeta create and update
/// rules followed by the group's update rules, all in one 422. Run it after
/// [`super::names::prepare_for_update`] (which carries uid, creationTimestamp and the
/// resourceVersion of unconditional updates over from `old`).
pub fn validate_update(new: &CoreEvent, old: &CoreEvent, group: ApiGroup) -> Result<(), ApiError> {
    let mut causes = object_meta_causes(&new.metadata, NameRule::PathSegment, "metadata");
    causes.extend(object_meta_update_causes(
        &new.metadata,
        &old.metadata,
        "metadata",
    ));
    causes.extend(update_strategy_causes(new, old, group));
    if causes.is_empty() {
        Ok(())
    } else {
        Err(invalid_error(group, st(&new.metadata.name), causes))
    }
}

/// The group's create rules alone (kube's `ValidateEventCreate`).
pub fn create_strategy_causes(event: &CoreEvent, group: ApiGroup) -> Vec<FieldCause> {
    let mut out = legacy_causes(event, group);
    if group == ApiGroup::Core {
        return out;
    }
    out.extend(core_object_meta_causes(
        &event.metadata,
        NameRule::DnsSubdomain,
        "metadata",
    ));
    out.extend(series_causes(event));
    if micro_time_is_unset(event.event_time.as_ref()) {
        out.push(required("eventTime", ""));
    }
    let ty = st(&event.type_);
    if ty != "Normal" && ty != "Warning" {
        out.push(invalid("type", "", &format!("has invalid value: {ty}")));
    }
    let unset = "needs to be unset";
    if !time_is_unset(event.first_timestamp.as_ref()) {
        out.push(invalid("firstTimestamp", "", unset));
    }
    if !time_is_unset(event.last_timestamp.as_ref()) {
        out.push(invalid("lastTimestamp", "", unset));
    }
    if event.count.unwrap_or(0) != 0 {
        out.push(invalid("count", "", unset));
    }
    let src = event.source.as_ref();
    if src.is_some_and(|s| !st(&s.component).is_empty() || !st(&s.host).is_empty()) {
        out.push(invalid("source", "", unset));
    }
    out
}

/// The group's update rules alone (kube's `ValidateEventUpdate`): legacy rules on `new`, and
/// on `events.k8s.io/v1` also core ObjectMeta update rules, series re-validation when the
/// series changed, and immutability of everything but metadata and series.
pub fn update_strategy_causes(
    new: &CoreEvent,
    old: &CoreEvent,
    group: ApiGroup,
) -> Vec<FieldCause> {
    let mut out = legacy_causes(new, group);
    if group == ApiGroup::Core {
        return out;
    }
    out.extend(core_object_meta_update_causes(
        &new.metadata,
        &old.metadata,
        "metadata",
    ));
    if series_key(new) != series_key(old) {
        out.extend(series_causes(new));
    }
    let mut immutable = |field: &str, changed: bool, repr: String| {
        if changed {
            out.push(invalid_repr(field, &repr, FIELD_IMMUTABLE));
        }
    };
    let new_ref = normalize_reference(new.involved_object.clone());
    immutable(
        "involvedObject",
        new_ref != normalize_reference(old.involved_object.clone()),
        go_object_reference(&new.involved_object),
    );
    let s = |field: &str, n: &Option<String>, o: &Option<String>| {
        (field.to_string(), st(n) != st(o), go_quote(st(n)))
    };
    let (src_new, src_old) = (
        source_key(new.source.as_ref()),
        source_key(old.source.as_ref()),
    );
    let checks = [
        s("reason", &new.reason, &old.reason),
        s("message", &new.message, &old.message),
        (
            "source".to_string(),
            src_new != src_old,
            format!(
                "core.EventSource{{Component:{}, Host:{}}}",
                go_quote(src_new.0),
                go_quote(src_new.1)
            ),
        ),
        (
            "firstTimestamp".to_string(),
            time_key(new.first_timestamp.as_ref()) != time_key(old.first_timestamp.as_ref()),
            go_time_string(time_key(new.first_timestamp.as_ref())),
        ),
        (
            "lastTimestamp".to_string(),
            time_key(new.last_timestamp.as_ref()) != time_key(old.last_timestamp.as_ref()),
            go_time_string(time_key(new.last_timestamp.as_ref())),
        ),
        (
            "count".to_string(),
            new.count.unwrap_or(0) != old.count.unwrap_or(0),
            new.count.unwrap_or(0).to_string(),
        ),
        // kube checks reason twice; the duplicate cause is part of the observable answer.
        s("reason", &new.reason, &old.reason),
        s("type", &new.type_, &old.type_),
        (
            "eventTime".to_string(),
            // Sub-microsecond differences are tolerated (clients truncate to MicroTime).
            truncate_micros(micro_key(new.event_time.as_ref()))
                != truncate_micros(micro_key(old.event_time.as_ref())),
            go_time_string(micro_key(new.event_time.as_ref())),
        ),
        s("action", &new.action, &old.action),
        (
            "related".to_string(),
            new.related.clone().map(normalize_reference)
                != old.related.clone().map(normalize_reference),
            new.related
                .as_ref()
                .map_or_else(|| go_quote("null"), go_object_reference),
        ),
        s(
            "reportingController",
            &new.reporting_component,
            &old.reporting_component,
        ),
        s(
            "reportingInstance",
            &new.reporting_instance,
            &old.reporting_instance,
        ),
    ];
    for (field, changed, repr) in checks {
        immutable(&field, changed, repr);
    }
    out
}

/// kube's `legacyValidateEvent`: the rules every event passes on every group.
pub fn legacy_causes(event: &CoreEvent, group: ApiGroup) -> Vec<FieldCause> {
    let mut out = Vec::new();
    let controller_field = match group {
        ApiGroup::Core => "reportingComponent",
        ApiGroup::EventsV1 => "reportingController",
    };
    let ns = st(&event.metadata.namespace);
    let obj_ns = st(&event.involved_object.namespace);
    let mismatch = || {
        invalid(
            "involvedObject.namespace",
            obj_ns,
            "does not match event.namespace",
        )
    };
    if micro_time_is_unset(event.event_time.as_ref()) {
        let ok = if obj_ns.is_empty() {
            ns.is_empty() || ns == NAMESPACE_DEFAULT
        } else {
            ns == obj_ns
        };
        if !ok {
            out.push(mismatch());
        }
    } else {
        if obj_ns.is_empty() && ns != NAMESPACE_DEFAULT && ns != NAMESPACE_SYSTEM {
            out.push(mismatch());
        }
        let controller = st(&event.reporting_component);
        if controller.is_empty() {
            out.push(required(controller_field, ""));
        }
        for msg in qualified_name_errors(controller) {
            out.push(invalid(controller_field, controller, &msg));
        }
        for (field, value, limit) in [
            (
                "reportingInstance",
                &event.reporting_instance,
                REPORTING_INSTANCE_LENGTH_LIMIT,
            ),
            ("action", &event.action, ACTION_LENGTH_LIMIT),
            ("reason", &event.reason, REASON_LENGTH_LIMIT),
        ] {
            let v = st(value);
            if v.is_empty() {
                out.push(required(field, ""));
            }
            if v.len() > limit {
                out.push(invalid(
                    field,
                    "",
                    &format!("can have at most {limit} characters"),
                ));
            }
        }
        if st(&event.message).len() > NOTE_LENGTH_LIMIT {
            out.push(invalid(
                "message",
                "",
                &format!("can have at most {NOTE_LENGTH_LIMIT} characters"),
            ));
        }
    }
    for msg in dns1123_subdomain_errors(ns) {
        out.push(invalid("namespace", ns, &msg));
    }
    out
}

/// `series.count` ≥ 2 and `series.lastObservedTime` set, when a series is present.
fn series_causes(event: &CoreEvent) -> Vec<FieldCause> {
    let mut out = Vec::new();
    if let Some(s) = &event.series {
        if s.count.unwrap_or(0) < 2 {
            out.push(invalid("series.count", "", "should be at least 2"));
        }
        if micro_time_is_unset(s.last_observed_time.as_ref()) {
            out.push(required("series.lastObservedTime", ""));
        }
    }
    out
}

type SeriesKey = Option<(i32, jiff::Timestamp)>;

fn series_key(e: &CoreEvent) -> SeriesKey {
    e.series.as_ref().map(|s| {
        (
            s.count.unwrap_or(0),
            micro_key(s.last_observed_time.as_ref()),
        )
    })
}

fn time_key(t: Option<&Time>) -> jiff::Timestamp {
    t.map_or(GO_ZERO_TIME, |t| t.0)
}

fn micro_key(t: Option<&MicroTime>) -> jiff::Timestamp {
    t.map_or(GO_ZERO_TIME, |t| t.0)
}

fn truncate_micros(t: jiff::Timestamp) -> i128 {
    t.as_nanosecond().div_euclid(1000)
}

fn source_key(s: Option<&EventSource>) -> (&str, &str) {
    s.map_or(("", ""), |s| (st(&s.component), st(&s.host)))
}

/// Go's `%#v` of kube's internal `core.ObjectReference`, as quoted in immutability causes.
fn go_object_reference(r: &ObjectReference) -> String {
    format!(
        "core.ObjectReference{{Kind:{}, Namespace:{}, Name:{}, UID:{}, APIVersion:{}, ResourceVersion:{}, FieldPath:{}}}",
        go_quote(st(&r.kind)),
        go_quote(st(&r.namespace)),
        go_quote(st(&r.name)),
        go_quote(st(&r.uid)),
        go_quote(st(&r.api_version)),
        go_quote(st(&r.resource_version)),
        go_quote(st(&r.field_path)),
    )
}
