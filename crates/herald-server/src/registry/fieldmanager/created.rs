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

/// A string field whose JSON is written (not empty).
fn set(s: &Option<String>) -> bool {
    super::updated::nonempty(s).is_some()
}

/// An object reference whose JSON (empty strings dropped) is not `{}`.
fn reference_set(r: &ObjectReference) -> bool {
    super::updated::reference(r).iter().any(Option::is_some)
}

/// The fields a create of `e` (after the create-time metadata steps) sets, in `group`'s
/// shape.
pub(super) fn created_fields(group: ApiGroup, e: &CoreEvent) -> FieldSet {
    CreatedKey::of(group, e).fields()
}

/// Top-level fields that are leaves of a created field set, by their core/v1 names; bit `i`
/// of [`CreatedKey`]'s `set` is `LEAVES[i]`.
const LEAVES: [&str; 12] = [
    "action",
    "count",
    "eventTime",
    "firstTimestamp",
    "lastTimestamp",
    "involvedObject",
    "message",
    "reason",
    "related",
    "reportingComponent",
    "reportingInstance",
    "type",
];
const SERIES: u32 = 1 << 12;
const SERIES_COUNT: u32 = 1 << 13;
const SOURCE_COMPONENT: u32 = 1 << 14;
const SOURCE_HOST: u32 = 1 << 15;
const ANNOTATIONS: u32 = 1 << 16;
const LABELS: u32 = 1 << 17;
const FINALIZERS: u32 = 1 << 18;
const OWNER_REFERENCES: u32 = 1 << 19;
const GENERATE_NAME: u32 = 1 << 20;
const DELETION_GRACE_PERIOD_SECONDS: u32 = 1 << 21;
const DELETION_TIMESTAMP: u32 = 1 << 22;

/// Everything [`created_fields`] reads from an event: a bit per field it tests, and the keys
/// of the metadata maps and lists (label and annotation keys, finalizers, owner uids). The
/// field set is built from the key alone, so equal keys give equal sets: the create path
/// keeps the `fieldsV1` of recent keys and compares a key with an event in place
/// ([`CreatedKey::matches`]), building no set for the events one client keeps creating.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct CreatedKey {
    group: ApiGroup,
    set: u32,
    annotations: Vec<String>,
    labels: Vec<String>,
    finalizers: Vec<String>,
    owner_uids: Vec<String>,
}

fn set_bits(e: &CoreEvent) -> u32 {
    let leaves = [
        set(&e.action),
        e.count.is_some_and(|c| c != 0),
        !micro_time_is_unset(e.event_time.as_ref()),
        !time_is_unset(e.first_timestamp.as_ref()),
        !time_is_unset(e.last_timestamp.as_ref()),
        reference_set(&e.involved_object),
        set(&e.message),
        set(&e.reason),
        e.related.is_some(),
        set(&e.reporting_component),
        set(&e.reporting_instance),
        set(&e.type_),
    ];
    let meta = &e.metadata;
    let source = e.source.as_ref();
    let series = e.series.as_ref();
    [
        (series.is_some(), SERIES),
        (
            series.is_some_and(|s| s.count.is_some_and(|c| c != 0)),
            SERIES_COUNT,
        ),
        (source.is_some_and(|s| set(&s.component)), SOURCE_COMPONENT),
        (source.is_some_and(|s| set(&s.host)), SOURCE_HOST),
        (meta.annotations.is_some(), ANNOTATIONS),
        (meta.labels.is_some(), LABELS),
        (meta.finalizers.is_some(), FINALIZERS),
        (meta.owner_references.is_some(), OWNER_REFERENCES),
        (meta.generate_name.is_some(), GENERATE_NAME),
        (
            meta.deletion_grace_period_seconds.is_some(),
            DELETION_GRACE_PERIOD_SECONDS,
        ),
        (meta.deletion_timestamp.is_some(), DELETION_TIMESTAMP),
    ]
    .into_iter()
    .chain(leaves.into_iter().zip(0..).map(|(on, i)| (on, 1 << i)))
    .fold(0, |bits, (on, bit)| if on { bits | bit } else { bits })
}

/// Whether `have` lists exactly the strings `want` yields, in order.
fn same<'a>(have: &[String], want: impl IntoIterator<Item = &'a String>) -> bool {
    let mut want = want.into_iter();
    have.iter().all(|h| want.next() == Some(h)) && want.next().is_none()
}

impl CreatedKey {
    pub(super) fn of(group: ApiGroup, e: &CoreEvent) -> CreatedKey {
        let meta = &e.metadata;
        let keys = |m: &Option<std::collections::BTreeMap<String, String>>| {
            m.iter().flat_map(|m| m.keys().cloned()).collect()
        };
        CreatedKey {
            group,
            set: set_bits(e),
            annotations: keys(&meta.annotations),
            labels: keys(&meta.labels),
            finalizers: meta.finalizers.clone().unwrap_or_default(),
            owner_uids: meta
                .owner_references
                .iter()
                .flatten()
                .map(|r| r.uid.clone())
                .collect(),
        }
    }

    /// `CreatedKey::of(group, e) == *self`, without allocating.
    pub(super) fn matches(&self, group: ApiGroup, e: &CoreEvent) -> bool {
        let meta = &e.metadata;
        self.group == group
            && self.set == set_bits(e)
            && same(&self.labels, meta.labels.iter().flat_map(|m| m.keys()))
            && same(
                &self.annotations,
                meta.annotations.iter().flat_map(|m| m.keys()),
            )
            && same(&self.finalizers, meta.finalizers.iter().flatten())
            && same(
                &self.owner_uids,
                meta.owner_references.iter().flatten().map(|r| &r.uid),
            )
    }

    /// The created field set, in the key's group's shape.
    pub(super) fn fields(&self) -> FieldSet {
        let group = self.group;
        let top = |core: &'static str| schema::top_element(group, core);
        let on = |bit: u32| self.set & bit != 0;
        let mut s = FieldSet::new();
        for (name, bit) in LEAVES.into_iter().zip(0..) {
            if on(1 << bit) {
                s.insert(&[top(name)]);
            }
        }
        if on(SERIES) {
            let p = top("series");
            s.insert(std::slice::from_ref(&p));
            // core/v1 drops a zero count; events.k8s.io/v1 always writes both fields.
            if group == ApiGroup::EventsV1 || on(SERIES_COUNT) {
                s.insert(&[p.clone(), PathElement::named("count")]);
            }
            s.insert(&[p, PathElement::named("lastObservedTime")]);
        }
        for (name, bit) in [("component", SOURCE_COMPONENT), ("host", SOURCE_HOST)] {
            if on(bit) {
                s.insert(&[top("source"), PathElement::named(name)]);
            }
        }
        let m = PathElement::named("metadata");
        for (name, bit, keys) in [
            ("annotations", ANNOTATIONS, &self.annotations),
            ("labels", LABELS, &self.labels),
        ] {
            if on(bit) {
                let p = PathElement::named(name);
                s.insert(&[m.clone(), p.clone()]);
                for k in keys {
                    s.insert(&[m.clone(), p.clone(), PathElement::field(k)]);
                }
            }
        }
        if on(FINALIZERS) {
            let p = PathElement::named("finalizers");
            s.insert(&[m.clone(), p.clone()]);
            for f in &self.finalizers {
                let v = PathElement::Value(compact(&Value::String(f.clone())));
                s.insert(&[m.clone(), p.clone(), v]);
            }
        }
        if on(OWNER_REFERENCES) {
            let p = PathElement::named("ownerReferences");
            s.insert(&[m.clone(), p.clone()]);
            for uid in &self.owner_uids {
                let mut key = Map::new();
                key.insert("uid".into(), Value::String(uid.clone()));
                let k = PathElement::Key(compact(&Value::Object(key)));
                s.insert(&[m.clone(), p.clone(), k]);
            }
        }
        for (name, bit) in [
            ("generateName", GENERATE_NAME),
            ("deletionGracePeriodSeconds", DELETION_GRACE_PERIOD_SECONDS),
            ("deletionTimestamp", DELETION_TIMESTAMP),
        ] {
            if on(bit) {
                s.insert(&[m.clone(), PathElement::named(name)]);
            }
        }
        s
    }
}
