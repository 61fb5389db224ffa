//! The fields a create sets, read straight from the typed event.
//!
//! This is [`typed::compare`](super::typed::compare) of the zero Event with the new one
//! (minus the fields nobody owns), specialised to the Event schema so that the create path,
//! the hottest write, builds no JSON for it. The property test in `tests.rs` holds it equal to
//! the generic comparison for both versions.

use herald_core::event::convert::{micro_time_is_unset, time_is_unset};
use herald_core::event::{ApiGroup, CoreEvent};
use k8s_openapi::api::core::v1::ObjectReference;
use serde_json::{Map, Value};

use super::fieldpath::{FieldSet, PathElement, compact};
use super::schema;

fn set(s: &Option<String>) -> bool {
    s.as_deref().is_some_and(|s| !s.is_empty())
}

/// An object reference whose JSON (empty strings dropped) is not `{}`.
fn reference_set(r: &ObjectReference) -> bool {
    [
        &r.api_version,
        &r.field_path,
        &r.kind,
        &r.name,
        &r.namespace,
        &r.resource_version,
        &r.uid,
    ]
    .into_iter()
    .any(set)
}

/// The fields a create of `e` (after the create-time metadata steps) sets, in `group`'s
/// shape.
pub(super) fn created_fields(group: ApiGroup, e: &CoreEvent) -> FieldSet {
    let top = |core: &'static str| {
        let name = match group {
            ApiGroup::Core => core,
            ApiGroup::EventsV1 => schema::rename_top(core, ApiGroup::Core, group).unwrap_or(core),
        };
        PathElement::named(name)
    };
    let mut s = FieldSet::new();
    let leaf = |s: &mut FieldSet, core: &'static str, on: bool| {
        if on {
            s.insert(&[top(core)]);
        }
    };
    leaf(&mut s, "action", set(&e.action));
    leaf(&mut s, "count", e.count.is_some_and(|c| c != 0));
    leaf(
        &mut s,
        "eventTime",
        !micro_time_is_unset(e.event_time.as_ref()),
    );
    leaf(
        &mut s,
        "firstTimestamp",
        !time_is_unset(e.first_timestamp.as_ref()),
    );
    leaf(
        &mut s,
        "lastTimestamp",
        !time_is_unset(e.last_timestamp.as_ref()),
    );
    leaf(&mut s, "involvedObject", reference_set(&e.involved_object));
    leaf(&mut s, "message", set(&e.message));
    leaf(&mut s, "reason", set(&e.reason));
    leaf(&mut s, "related", e.related.is_some());
    leaf(&mut s, "reportingComponent", set(&e.reporting_component));
    leaf(&mut s, "reportingInstance", set(&e.reporting_instance));
    leaf(&mut s, "type", set(&e.type_));
    if let Some(series) = &e.series {
        let p = top("series");
        s.insert(std::slice::from_ref(&p));
        // core/v1 drops a zero count; events.k8s.io/v1 always writes both fields.
        if group == ApiGroup::EventsV1 || series.count.is_some_and(|c| c != 0) {
            s.insert(&[p.clone(), PathElement::named("count")]);
        }
        s.insert(&[p, PathElement::named("lastObservedTime")]);
    }
    if let Some(src) = &e.source {
        let p = top("source");
        if set(&src.component) {
            s.insert(&[p.clone(), PathElement::named("component")]);
        }
        if set(&src.host) {
            s.insert(&[p, PathElement::named("host")]);
        }
    }
    let meta = &e.metadata;
    let m = PathElement::named("metadata");
    for (name, map) in [("annotations", &meta.annotations), ("labels", &meta.labels)] {
        if let Some(map) = map {
            let p = PathElement::named(name);
            s.insert(&[m.clone(), p.clone()]);
            for k in map.keys() {
                s.insert(&[m.clone(), p.clone(), PathElement::field(k)]);
            }
        }
    }
    if let Some(fin) = &meta.finalizers {
        let p = PathElement::named("finalizers");
        s.insert(&[m.clone(), p.clone()]);
        for f in fin {
            let v = PathElement::Value(compact(&Value::String(f.clone())));
            s.insert(&[m.clone(), p.clone(), v]);
        }
    }
    if let Some(refs) = &meta.owner_references {
        let p = PathElement::named("ownerReferences");
        s.insert(&[m.clone(), p.clone()]);
        for r in refs {
            let mut key = Map::new();
            key.insert("uid".into(), Value::String(r.uid.clone()));
            let k = PathElement::Key(compact(&Value::Object(key)));
            s.insert(&[m.clone(), p.clone(), k]);
        }
    }
    for (name, on) in [
        ("generateName", meta.generate_name.is_some()),
        (
            "deletionGracePeriodSeconds",
            meta.deletion_grace_period_seconds.is_some(),
        ),
        ("deletionTimestamp", meta.deletion_timestamp.is_some()),
    ] {
        if on {
            s.insert(&[m.clone(), PathElement::named(name)]);
        }
    }
    s
}
