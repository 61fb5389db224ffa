//! What an update or a patch changes, read straight from the two typed events.
//!
//! This is [`typed::compare`](super::typed::compare) of the stored event's JSON with the new
//! one's (minus the fields nobody owns), specialised to the Event schema so that a patch, the
//! write a storm of repeats is made of, builds no JSON trees for it. Each field is reduced to
//! what its JSON is in the group's shape: absent, or a value compared as its JSON compares
//! (empty strings and zero counts dropped where that shape drops them, the event's zero
//! times `null` while `metadata.deletionTimestamp` is written as it is, object references
//! without their empty strings).
//!
//! Events the reduction would not follow exactly are left to the generic comparison
//! ([`compare`] answers `None`): a time with more precision than its JSON keeps (a `Time`
//! with fractions of a second, a `MicroTime` with nanoseconds), and `ownerReferences`, whose
//! atomic items are compared as whole JSON objects. Neither comes from what recorders send.
//! The property test in `tests.rs` holds the answer equal to the generic comparison for both
//! versions.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};

use herald_core::event::convert::is_zero_time;
use herald_core::event::{ApiGroup, CoreEvent};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
use serde_json::Value;

use super::fieldpath::{PathElement, compact};
use super::schema;
use super::typed::Comparison;

/// The comparison of the stored event `old` with `new`, both in `group`'s shape, without the
/// fields nobody owns; `None` when either event has something only the generic comparison
/// reads exactly (see the module docs).
pub(super) fn compare(group: ApiGroup, old: &CoreEvent, new: &CoreEvent) -> Option<Comparison> {
    if !exact(old) || !exact(new) {
        return None;
    }
    if old.metadata.owner_references.is_some() || new.metadata.owner_references.is_some() {
        return None;
    }
    let mut d = Diff {
        group,
        path: Vec::with_capacity(3),
        c: Comparison::default(),
    };
    let core = group == ApiGroup::Core;

    d.top("action", nonempty(&old.action), nonempty(&new.action));
    d.top("count", nonzero(old.count), nonzero(new.count));
    // Unset times are written as `null`: these three are always present.
    d.top(
        "eventTime",
        Some(micro(old.event_time.as_ref())),
        Some(micro(new.event_time.as_ref())),
    );
    d.top(
        "firstTimestamp",
        Some(time(old.first_timestamp.as_ref())),
        Some(time(new.first_timestamp.as_ref())),
    );
    d.top(
        "lastTimestamp",
        Some(time(old.last_timestamp.as_ref())),
        Some(time(new.last_timestamp.as_ref())),
    );
    // `involvedObject` / `regarding` is always written, `{}` at least.
    d.top(
        "involvedObject",
        Some(reference(&old.involved_object)),
        Some(reference(&new.involved_object)),
    );
    d.top("message", nonempty(&old.message), nonempty(&new.message));
    d.top("reason", nonempty(&old.reason), nonempty(&new.reason));
    d.top(
        "related",
        old.related.as_ref().map(reference),
        new.related.as_ref().map(reference),
    );
    d.top(
        "reportingComponent",
        reporting(core, &old.reporting_component),
        reporting(core, &new.reporting_component),
    );
    d.top(
        "reportingInstance",
        reporting(core, &old.reporting_instance),
        reporting(core, &new.reporting_instance),
    );
    d.top("type", nonempty(&old.type_), nonempty(&new.type_));

    // `series` is absent or has `lastObservedTime` (`null` when unset); core/v1 drops a zero
    // count, events.k8s.io/v1 always writes one.
    let series_count = |c: Option<i32>| match core {
        true => nonzero(c),
        false => Some(c.unwrap_or(0)),
    };
    let (os, ns) = (old.series.as_ref(), new.series.as_ref());
    d.enter(d.top_element("series"));
    d.leaf(
        PathElement::named("count"),
        os.and_then(|s| series_count(s.count)),
        ns.and_then(|s| series_count(s.count)),
    );
    d.leaf(
        PathElement::named("lastObservedTime"),
        os.map(|s| micro(s.last_observed_time.as_ref())),
        ns.map(|s| micro(s.last_observed_time.as_ref())),
    );
    d.leave(os.is_some(), ns.is_some());

    // `source` / `deprecatedSource` is always written, `{}` at least.
    let (os, ns) = (old.source.as_ref(), new.source.as_ref());
    d.enter(d.top_element("source"));
    d.leaf(
        PathElement::named("component"),
        os.and_then(|s| nonempty(&s.component)),
        ns.and_then(|s| nonempty(&s.component)),
    );
    d.leaf(
        PathElement::named("host"),
        os.and_then(|s| nonempty(&s.host)),
        ns.and_then(|s| nonempty(&s.host)),
    );
    d.leave(true, true);

    // `metadata` is always written; its identity and server-set fields are nobody's.
    let (om, nm) = (&old.metadata, &new.metadata);
    d.enter(PathElement::named("metadata"));
    d.map(
        "annotations",
        om.annotations.as_ref(),
        nm.annotations.as_ref(),
    );
    d.map("labels", om.labels.as_ref(), nm.labels.as_ref());
    d.set(
        "finalizers",
        om.finalizers.as_deref(),
        nm.finalizers.as_deref(),
    );
    d.leaf(
        PathElement::named("generateName"),
        om.generate_name.as_deref(),
        nm.generate_name.as_deref(),
    );
    d.leaf(
        PathElement::named("deletionGracePeriodSeconds"),
        om.deletion_grace_period_seconds,
        nm.deletion_grace_period_seconds,
    );
    d.leaf(
        PathElement::named("deletionTimestamp"),
        om.deletion_timestamp.as_ref().map(|t| t.0),
        nm.deletion_timestamp.as_ref().map(|t| t.0),
    );
    d.leave(true, true);
    Some(d.c)
}

/// True when every time of `e` is exactly what its JSON keeps: whole seconds for a `Time`,
/// whole microseconds for a `MicroTime`.
pub(super) fn exact(e: &CoreEvent) -> bool {
    let seconds = |t: Option<&Time>| t.is_none_or(|t| t.0.subsec_nanosecond() == 0);
    let micros = |t: Option<&MicroTime>| t.is_none_or(|t| t.0.subsec_nanosecond() % 1000 == 0);
    seconds(e.first_timestamp.as_ref())
        && seconds(e.last_timestamp.as_ref())
        && seconds(e.metadata.deletion_timestamp.as_ref())
        && micros(e.event_time.as_ref())
        && micros(
            e.series
                .as_ref()
                .and_then(|s| s.last_observed_time.as_ref()),
        )
}

/// A string as its JSON: `None` when empty (dropped).
pub(super) fn nonempty(s: &Option<String>) -> Option<&str> {
    s.as_deref().filter(|s| !s.is_empty())
}

/// A reporting field as its JSON: core/v1 always writes both, events.k8s.io/v1 drops them
/// when empty.
fn reporting(core: bool, s: &Option<String>) -> Option<&str> {
    match core {
        true => Some(s.as_deref().unwrap_or("")),
        false => nonempty(s),
    }
}

fn nonzero(n: Option<i32>) -> Option<i32> {
    n.filter(|n| *n != 0)
}

/// A `Time` as its JSON: `None` for `null`.
fn time(t: Option<&Time>) -> Option<Timestamp> {
    t.map(|t| t.0).filter(|t| !is_zero_time(*t))
}

/// A `MicroTime` as its JSON: `None` for `null`.
fn micro(t: Option<&MicroTime>) -> Option<Timestamp> {
    t.map(|t| t.0).filter(|t| !is_zero_time(*t))
}

/// An object reference as its JSON: every field, empty strings dropped.
pub(super) fn reference(r: &ObjectReference) -> [Option<&str>; 7] {
    [
        &r.api_version,
        &r.field_path,
        &r.kind,
        &r.name,
        &r.namespace,
        &r.resource_version,
        &r.uid,
    ]
    .map(nonempty)
}

/// The items of a set in order, the first of duplicates only, and the set of them (so that a
/// set of `n` items is compared in O(n)).
fn distinct(l: Option<&[String]>) -> (Vec<&String>, HashSet<&String>) {
    let mut seen = HashSet::new();
    let items = l
        .unwrap_or_default()
        .iter()
        .filter(|s| seen.insert(*s))
        .collect();
    (items, seen)
}

/// The comparison being built, and the path of the struct being compared.
struct Diff {
    group: ApiGroup,
    path: Vec<PathElement>,
    c: Comparison,
}

impl Diff {
    /// The element of top-level field `core` (its core/v1 name) in the group's shape.
    fn top_element(&self, core: &'static str) -> PathElement {
        schema::top_element(self.group, core)
    }

    /// Compares top-level leaf `core` (by its core/v1 name).
    fn top<T: PartialEq>(&mut self, core: &'static str, old: Option<T>, new: Option<T>) {
        self.leaf(self.top_element(core), old, new);
    }

    /// Compares the leaf `pe` of the current struct: `None` is absent from the JSON.
    fn leaf<T: PartialEq>(&mut self, pe: PathElement, old: Option<T>, new: Option<T>) {
        let set = match (&old, &new) {
            (None, Some(_)) => &mut self.c.added,
            (Some(_), None) => &mut self.c.removed,
            (Some(o), Some(n)) if o != n => &mut self.c.modified,
            _ => return,
        };
        self.path.push(pe);
        set.insert(&self.path);
        self.path.pop();
    }

    /// Steps into struct `pe`.
    fn enter(&mut self, pe: PathElement) {
        self.path.push(pe);
    }

    /// Steps out of the current struct, which each side has (`old`, `new`): a struct only
    /// one side has is itself added or removed. (A struct that is `{}` on both sides compares
    /// as a leaf in the generic walk; that is equal, as its fields are here.)
    fn leave(&mut self, old: bool, new: bool) {
        match (old, new) {
            (false, true) => self.c.added.insert(&self.path),
            (true, false) => self.c.removed.insert(&self.path),
            _ => {}
        }
        self.path.pop();
    }

    /// Compares the granular string map `name` of the current struct key by key.
    fn map(
        &mut self,
        name: &'static str,
        old: Option<&BTreeMap<String, String>>,
        new: Option<&BTreeMap<String, String>>,
    ) {
        let key = |k: &String| PathElement::Field(Cow::Owned(k.clone()));
        self.compound(
            name,
            old.map(BTreeMap::is_empty),
            new.map(BTreeMap::is_empty),
            |d| {
                let empty = BTreeMap::new();
                let (old, new) = (old.unwrap_or(&empty), new.unwrap_or(&empty));
                for (k, v) in old {
                    d.leaf(key(k), Some(v), new.get(k));
                }
                for (k, v) in new.iter().filter(|(k, _)| !old.contains_key(*k)) {
                    d.leaf(key(k), None, Some(v));
                }
            },
        );
    }

    /// Compares the set (`listType=set`) `name` of the current struct item by item; the
    /// first of duplicate items counts.
    fn set(&mut self, name: &'static str, old: Option<&[String]>, new: Option<&[String]>) {
        self.compound(
            name,
            old.map(<[String]>::is_empty),
            new.map(<[String]>::is_empty),
            |d| {
                let ((old, in_old), (new, in_new)) = (distinct(old), distinct(new));
                let value = |s: &str| PathElement::Value(compact(&Value::String(s.to_owned())));
                for s in old.iter().filter(|s| !in_new.contains(*s)) {
                    d.leaf(value(s), Some(()), None);
                }
                for s in new.iter().filter(|s| !in_old.contains(*s)) {
                    d.leaf(value(s), None, Some(()));
                }
            },
        );
    }

    /// Compares the map or list `name` of the current struct, whose sides are absent (`None`)
    /// or empty (`Some(true)`) or not: when neither has an entry it is a leaf (absent, or
    /// equal as `{}`/`[]`); otherwise `entries` compares its entries and the map or list is
    /// itself added or removed when one side lacks it.
    fn compound(
        &mut self,
        name: &'static str,
        old_empty: Option<bool>,
        new_empty: Option<bool>,
        entries: impl FnOnce(&mut Diff),
    ) {
        let pe = PathElement::named(name);
        if old_empty.unwrap_or(true) && new_empty.unwrap_or(true) {
            self.leaf(pe, old_empty.map(|_| ()), new_empty.map(|_| ()));
            return;
        }
        self.enter(pe);
        entries(self);
        self.leave(old_empty.is_some(), new_empty.is_some());
    }
}
