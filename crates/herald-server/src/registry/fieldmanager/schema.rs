//! The structured-merge-diff schemas of the two Event versions: which fields are leaves,
//! which structs and maps are granular, which lists are sets or keyed by a field — the
//! `x-kubernetes-*` markers kube-apiserver's OpenAPI carries for these types.
//!
//! Only what changes field ownership is modelled: `ObjectReference` (`involvedObject`,
//! `regarding`, `related`) and `OwnerReference` are atomic (`+structType=atomic`), `labels`
//! and `annotations` are granular maps, `finalizers` is a set, `ownerReferences` is keyed by
//! `uid`, `managedFields` is atomic.

use std::borrow::Cow;

use herald_core::event::ApiGroup;

use super::fieldpath::PathElement;

/// How a node of an object takes part in field ownership.
#[derive(Debug)]
pub enum Node {
    /// A leaf value (string, number, bool, time).
    Scalar,
    /// A struct, map or list owned as a whole.
    Atomic,
    /// A struct: its fields are owned separately.
    Struct(&'static [(&'static str, &'static Node)]),
    /// A map whose keys are owned separately; every value has the element type.
    Map(&'static Node),
    /// A list of scalars whose items are owned by value (`listType=set`).
    Set,
    /// A list of objects whose items are owned by their key fields (`listType=map`).
    Keyed {
        /// The key fields (`x-kubernetes-list-map-keys`).
        keys: &'static [&'static str],
        /// The item type.
        item: &'static Node,
    },
}

impl Node {
    /// The node of struct field `name`; unknown fields are treated as atomic leaves.
    pub fn field(&self, name: &str) -> &'static Node {
        match self {
            Node::Struct(fields) => fields
                .iter()
                .find(|(n, _)| *n == name)
                .map_or(&ATOMIC, |(_, node)| *node),
            Node::Map(item) => item,
            _ => &ATOMIC,
        }
    }

    /// The path element and node of key `key`: a struct field (its name borrowed from the
    /// schema; unknown fields are atomic) or a map key.
    pub fn child(&self, key: &str) -> (PathElement, &'static Node) {
        match self {
            Node::Struct(fields) => match fields.iter().find(|(n, _)| *n == key) {
                Some((n, node)) => (PathElement::named(n), node),
                None => (PathElement::field(key), &ATOMIC),
            },
            Node::Map(item) => (PathElement::Field(Cow::Owned(key.to_string())), item),
            _ => (PathElement::field(key), &ATOMIC),
        }
    }

    /// True when `name` is a field of this struct, or any key of this map.
    pub fn declares(&self, name: &str) -> bool {
        match self {
            Node::Struct(fields) => fields.iter().any(|(n, _)| *n == name),
            Node::Map(_) => true,
            _ => false,
        }
    }

    /// True for a struct (its named fields) as opposed to a map (its keys).
    pub fn is_struct(&self) -> bool {
        matches!(self, Node::Struct(_))
    }
}

static SCALAR: Node = Node::Scalar;
static ATOMIC: Node = Node::Atomic;
static STRING_MAP: Node = Node::Map(&SCALAR);
static SET: Node = Node::Set;
static OWNER_REFERENCES: Node = Node::Keyed {
    keys: &["uid"],
    item: &ATOMIC,
};

static OBJECT_META: Node = Node::Struct(&[
    ("annotations", &STRING_MAP),
    ("creationTimestamp", &SCALAR),
    ("deletionGracePeriodSeconds", &SCALAR),
    ("deletionTimestamp", &SCALAR),
    ("finalizers", &SET),
    ("generateName", &SCALAR),
    ("generation", &SCALAR),
    ("labels", &STRING_MAP),
    ("managedFields", &ATOMIC),
    ("name", &SCALAR),
    ("namespace", &SCALAR),
    ("ownerReferences", &OWNER_REFERENCES),
    ("resourceVersion", &SCALAR),
    ("selfLink", &SCALAR),
    ("uid", &SCALAR),
]);

static EVENT_SOURCE: Node = Node::Struct(&[("component", &SCALAR), ("host", &SCALAR)]);
static EVENT_SERIES: Node = Node::Struct(&[("count", &SCALAR), ("lastObservedTime", &SCALAR)]);

/// core/v1 `Event`.
pub static CORE_EVENT: Node = Node::Struct(&[
    ("action", &SCALAR),
    ("apiVersion", &SCALAR),
    ("count", &SCALAR),
    ("eventTime", &SCALAR),
    ("firstTimestamp", &SCALAR),
    ("involvedObject", &ATOMIC),
    ("kind", &SCALAR),
    ("lastTimestamp", &SCALAR),
    ("message", &SCALAR),
    ("metadata", &OBJECT_META),
    ("reason", &SCALAR),
    ("related", &ATOMIC),
    ("reportingComponent", &SCALAR),
    ("reportingInstance", &SCALAR),
    ("series", &EVENT_SERIES),
    ("source", &EVENT_SOURCE),
    ("type", &SCALAR),
]);

/// `events.k8s.io/v1` `Event`.
pub static EVENTS_V1_EVENT: Node = Node::Struct(&[
    ("action", &SCALAR),
    ("apiVersion", &SCALAR),
    ("deprecatedCount", &SCALAR),
    ("deprecatedFirstTimestamp", &SCALAR),
    ("deprecatedLastTimestamp", &SCALAR),
    ("deprecatedSource", &EVENT_SOURCE),
    ("eventTime", &SCALAR),
    ("kind", &SCALAR),
    ("metadata", &OBJECT_META),
    ("note", &SCALAR),
    ("reason", &SCALAR),
    ("regarding", &ATOMIC),
    ("related", &ATOMIC),
    ("reportingController", &SCALAR),
    ("reportingInstance", &SCALAR),
    ("series", &EVENT_SERIES),
    ("type", &SCALAR),
]);

/// The Event schema of `group`.
pub fn event(group: ApiGroup) -> &'static Node {
    match group {
        ApiGroup::Core => &CORE_EVENT,
        ApiGroup::EventsV1 => &EVENTS_V1_EVENT,
    }
}

/// The top-level fields whose names differ between the versions (core/v1, events.k8s.io/v1);
/// every other field, and everything below the top level, has the same name in both.
pub const RENAMED: [(&str, &str); 7] = [
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
    ("reportingComponent", "reportingController"),
];

/// The name in `to` of top-level field `name` of `from`, when the versions name it
/// differently.
pub fn rename_top(name: &str, from: ApiGroup, to: ApiGroup) -> Option<&'static str> {
    if from == to {
        return None;
    }
    RENAMED.iter().find_map(|(core, v1)| match from {
        ApiGroup::Core if name == *core => Some(*v1),
        ApiGroup::EventsV1 if name == *v1 => Some(*core),
        _ => None,
    })
}

/// The path element of top-level field `core` (its core/v1 name) in `group`'s shape.
pub fn top_element(group: ApiGroup, core: &'static str) -> PathElement {
    PathElement::named(rename_top(core, ApiGroup::Core, group).unwrap_or(core))
}
