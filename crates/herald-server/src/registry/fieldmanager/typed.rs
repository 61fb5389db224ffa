//! structured-merge-diff's operations on JSON values of a known [`Node`] schema: the field
//! set of an applied configuration, the comparison of two objects, the merge of a
//! configuration into an object and the removal of a set of fields.
//!
//! They follow the upstream walkers: a leaf (scalar, atomic value, or a struct/map/list that
//! is empty or absent on both sides) is compared as a whole; a struct, map or list item that
//! appears or disappears is itself added or removed, besides its leaves; `null` is a value
//! for a leaf and "absent" for a struct, map or list.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::fieldpath::{FieldSet, PathElement, compact};
use super::schema::Node;

/// What changed from one object to another.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Comparison {
    /// Present only in the new object.
    pub added: FieldSet,
    /// Present in both, with different values.
    pub modified: FieldSet,
    /// Present only in the old object.
    pub removed: FieldSet,
}

impl Comparison {
    /// Added or modified: what an update takes ownership of.
    pub fn changed(&self) -> FieldSet {
        self.added.union(&self.modified)
    }

    /// The comparison with `fields` taken out of all three sets.
    pub fn without(&self, fields: &FieldSet) -> Comparison {
        Comparison {
            added: self.added.difference(fields),
            modified: self.modified.difference(fields),
            removed: self.removed.difference(fields),
        }
    }

    /// The comparison with `f` applied to all three sets.
    pub fn map(&self, f: impl Fn(&FieldSet) -> FieldSet) -> Comparison {
        Comparison {
            added: f(&self.added),
            modified: f(&self.modified),
            removed: f(&self.removed),
        }
    }
}

/// The path element of list item `item` under `node`, or `None` when it has no usable key.
fn item_element(node: &Node, index: usize, item: &Value) -> Option<PathElement> {
    match node {
        Node::Set => Some(PathElement::Value(compact(item))),
        Node::Keyed { keys, .. } => {
            let obj = item.as_object()?;
            let mut key = Map::new();
            for k in *keys {
                key.insert((*k).to_string(), obj.get(*k)?.clone());
            }
            Some(PathElement::Key(compact(&Value::Object(key))))
        }
        _ => i64::try_from(index).ok().map(PathElement::Index),
    }
}

fn item_node(node: &Node) -> &'static Node {
    static SCALAR: Node = Node::Scalar;
    match node {
        Node::Keyed { item, .. } => item,
        _ => &SCALAR,
    }
}

/// The items of a list with their path elements; the first of duplicates wins (an applied
/// configuration with duplicates is refused before it gets here; other writes may have them).
/// Looking an item up by its element is O(1), so comparing or merging two lists of `n` items
/// costs O(n), not O(n²).
struct Indexed<'v> {
    items: Vec<(PathElement, &'v Value)>,
    by_element: HashMap<PathElement, &'v Value>,
}

impl<'v> Indexed<'v> {
    fn new(node: &Node, list: Option<&'v Vec<Value>>) -> Self {
        let list = list.map(Vec::as_slice).unwrap_or_default();
        let mut items = Vec::with_capacity(list.len());
        let mut by_element = HashMap::with_capacity(list.len());
        for (i, item) in list.iter().enumerate() {
            if let Some(pe) = item_element(node, i, item)
                && !by_element.contains_key(&pe)
            {
                by_element.insert(pe.clone(), item);
                items.push((pe, item));
            }
        }
        Indexed { items, by_element }
    }

    fn get(&self, pe: &PathElement) -> Option<&'v Value> {
        self.by_element.get(pe).copied()
    }

    /// The items whose element `other` does not have, in order.
    fn not_in<'s>(
        &'s self,
        other: &'s Indexed<'_>,
    ) -> impl Iterator<Item = &'s (PathElement, &'v Value)> {
        self.items
            .iter()
            .filter(|(pe, _)| !other.by_element.contains_key(pe))
    }
}

fn as_map(v: Option<&Value>) -> Option<&Map<String, Value>> {
    v.and_then(Value::as_object)
}

fn as_list(v: Option<&Value>) -> Option<&Vec<Value>> {
    v.and_then(Value::as_array)
}

/// The field set of `value` (an applied configuration): every leaf and every map key and list
/// item it mentions.
pub fn to_set(node: &Node, value: &Value) -> FieldSet {
    let mut set = FieldSet::new();
    let mut path = Vec::new();
    to_set_at(node, value, &mut path, &mut set);
    set
}

fn to_set_at(node: &Node, value: &Value, path: &mut Vec<PathElement>, set: &mut FieldSet) {
    match node {
        Node::Scalar | Node::Atomic => set.insert(path),
        Node::Struct(_) | Node::Map(_) => {
            let Some(m) = value.as_object() else { return };
            // Fields the schema does not know are no one's. An applied configuration never
            // has them (the apply is refused first); on other writes strict field validation
            // rejects them and `Ignore` drops them from the object.
            for (k, v) in m.iter().filter(|(k, _)| node.declares(k)) {
                let (pe, child) = node.child(k);
                path.push(pe);
                to_set_at(child, v, path, set);
                if !node.is_struct() {
                    set.insert(path);
                }
                path.pop();
            }
        }
        Node::Set | Node::Keyed { .. } => {
            let Some(list) = value.as_array() else { return };
            for (pe, item) in Indexed::new(node, Some(list)).items {
                path.push(pe);
                to_set_at(item_node(node), item, path, set);
                set.insert(path);
                path.pop();
            }
        }
    }
}

/// Compares `old` with `new` (both whole objects of type `node`).
pub fn compare(node: &Node, old: &Value, new: &Value) -> Comparison {
    let mut c = Comparison::default();
    let mut path = Vec::new();
    compare_at(node, Some(old), Some(new), &mut path, &mut c);
    c
}

fn leaf(lhs: Option<&Value>, rhs: Option<&Value>, path: &[PathElement], c: &mut Comparison) {
    match (lhs, rhs) {
        (None, Some(_)) => c.added.insert(path),
        (Some(_), None) => c.removed.insert(path),
        (Some(l), Some(r)) if l != r => c.modified.insert(path),
        _ => {}
    }
}

fn compare_at(
    node: &Node,
    lhs: Option<&Value>,
    rhs: Option<&Value>,
    path: &mut Vec<PathElement>,
    c: &mut Comparison,
) {
    let is_leaf = match node {
        Node::Scalar | Node::Atomic => true,
        Node::Struct(_) | Node::Map(_) => {
            let (l, r) = (as_map(lhs), as_map(rhs));
            if l.is_none_or(Map::is_empty) && r.is_none_or(Map::is_empty) {
                true
            } else {
                let empty = Map::new();
                let (l, r) = (l.unwrap_or(&empty), r.unwrap_or(&empty));
                for (k, lv) in l {
                    let (pe, child) = node.child(k);
                    path.push(pe);
                    compare_at(child, Some(lv), r.get(k), path, c);
                    path.pop();
                }
                for (k, rv) in r.iter().filter(|(k, _)| !l.contains_key(*k)) {
                    let (pe, child) = node.child(k);
                    path.push(pe);
                    compare_at(child, None, Some(rv), path, c);
                    path.pop();
                }
                false
            }
        }
        Node::Set | Node::Keyed { .. } => {
            let (l, r) = (as_list(lhs), as_list(rhs));
            if l.is_none_or(Vec::is_empty) && r.is_none_or(Vec::is_empty) {
                true
            } else {
                let (l, r) = (Indexed::new(node, l), Indexed::new(node, r));
                let item = item_node(node);
                for (pe, lv) in &l.items {
                    let rv = r.get(pe);
                    path.push(pe.clone());
                    compare_at(item, Some(lv), rv, path, c);
                    path.pop();
                }
                for (pe, rv) in r.not_in(&l) {
                    path.push(pe.clone());
                    compare_at(item, None, Some(rv), path, c);
                    path.pop();
                }
                false
            }
        }
    };
    if is_leaf {
        leaf(lhs, rhs, path, c);
    } else if lhs.is_none() {
        c.added.insert(path);
    } else if rhs.is_none() {
        c.removed.insert(path);
    }
}

/// Merges the configuration `config` into `live` (server-side apply's merge): leaves and
/// atomic values of `config` win, structs and maps merge key by key, sets and keyed lists
/// merge item by item (live order first, new items after, in `config`'s order).
pub fn merge(node: &Node, live: &Value, config: &Value) -> Value {
    merge_at(node, Some(live), Some(config)).unwrap_or(Value::Null)
}

fn merge_at(node: &Node, lhs: Option<&Value>, rhs: Option<&Value>) -> Option<Value> {
    let keep_rhs = || rhs.or(lhs).cloned();
    match node {
        Node::Scalar | Node::Atomic => keep_rhs(),
        Node::Struct(_) | Node::Map(_) => {
            let (l, r) = (as_map(lhs), as_map(rhs));
            if l.is_none_or(Map::is_empty) && r.is_none_or(Map::is_empty) {
                return keep_rhs();
            }
            let empty = Map::new();
            let (l, r) = (l.unwrap_or(&empty), r.unwrap_or(&empty));
            let mut out = Map::new();
            for (k, lv) in l {
                if let Some(v) = merge_at(node.field(k), Some(lv), r.get(k)) {
                    out.insert(k.clone(), v);
                }
            }
            for (k, rv) in r.iter().filter(|(k, _)| !l.contains_key(*k)) {
                if let Some(v) = merge_at(node.field(k), None, Some(rv)) {
                    out.insert(k.clone(), v);
                }
            }
            Some(Value::Object(out))
        }
        Node::Set | Node::Keyed { .. } => {
            let (l, r) = (as_list(lhs), as_list(rhs));
            if l.is_none_or(Vec::is_empty) && r.is_none_or(Vec::is_empty) {
                return keep_rhs();
            }
            let (l, r) = (Indexed::new(node, l), Indexed::new(node, r));
            let item = item_node(node);
            let mut out = Vec::with_capacity(l.items.len() + r.items.len());
            for (pe, lv) in &l.items {
                out.extend(merge_at(item, Some(lv), r.get(pe)));
            }
            for (_, rv) in r.not_in(&l) {
                out.extend(merge_at(item, None, Some(rv)));
            }
            Some(Value::Array(out))
        }
    }
}

/// Removes every member of `set` from `value` (struct fields, map keys, list items). A struct
/// left empty by the removal of its last owned field is removed too (structured-merge-diff
/// treats a named field with owned children as owned itself when pruning).
pub fn remove(node: &Node, value: &mut Value, set: &FieldSet) {
    match node {
        Node::Struct(_) | Node::Map(_) => {
            let Value::Object(m) = value else { return };
            let keys: Vec<String> = m.keys().cloned().collect();
            for k in keys {
                let (pe, child_node) = node.child(&k);
                let (member, below) = set.child(&pe);
                if member {
                    m.remove(&k);
                    continue;
                }
                if let (Some(below), Some(child)) = (below, m.get_mut(&k)) {
                    remove(child_node, child, below);
                    let emptied = child.as_object().is_some_and(Map::is_empty)
                        || child.as_array().is_some_and(Vec::is_empty);
                    if emptied {
                        m.remove(&k);
                    }
                }
            }
        }
        Node::Set | Node::Keyed { .. } => {
            let Value::Array(items) = value else { return };
            let item = item_node(node);
            let mut kept = Vec::with_capacity(items.len());
            for (i, mut v) in std::mem::take(items).into_iter().enumerate() {
                let Some(pe) = item_element(node, i, &v) else {
                    kept.push(v);
                    continue;
                };
                let (member, below) = set.child(&pe);
                if member {
                    continue;
                }
                if let Some(below) = below {
                    remove(item, &mut v, below);
                }
                kept.push(v);
            }
            *items = kept;
        }
        Node::Scalar | Node::Atomic => {}
    }
}

#[cfg(test)]
mod tests {
    use super::super::schema::CORE_EVENT;
    use super::*;
    use serde_json::json;

    fn fv1(s: &FieldSet) -> Value {
        s.to_fields_v1()
    }

    #[test]
    fn applied_configuration_set_has_leaves_and_map_keys() {
        let config = json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "x", "labels": {"app": "web"},
                         "finalizers": ["a/b"], "ownerReferences": [{"uid": "1", "name": "o"}]},
            "involvedObject": {"kind": "Pod", "name": "web-1"},
            "source": {"component": "kubelet"},
            "message": "hi",
        });
        let s = to_set(&CORE_EVENT, &config);
        assert_eq!(
            fv1(&s),
            json!({
                "f:apiVersion": {}, "f:involvedObject": {}, "f:kind": {}, "f:message": {},
                "f:metadata": {"f:finalizers": {"v:\"a/b\"": {}}, "f:labels": {"f:app": {}},
                               "f:name": {}, "f:ownerReferences": {"k:{\"uid\":\"1\"}": {}}},
                "f:source": {"f:component": {}},
            })
        );
    }

    #[test]
    fn comparison_marks_new_maps_and_items_but_not_present_structs() {
        let old = json!({"metadata": {"name": "x"}, "source": {}, "involvedObject": {},
                         "reportingComponent": "", "firstTimestamp": null});
        let new = json!({"metadata": {"name": "x", "labels": {"a": "1"}}, "source": {"host": "h"},
                         "involvedObject": {"kind": "Pod"}, "reportingComponent": "",
                         "firstTimestamp": null, "message": "m",
                         "series": {"count": 2}});
        let c = compare(&CORE_EVENT, &old, &new);
        assert_eq!(
            fv1(&c.added),
            json!({"f:message": {}, "f:metadata": {"f:labels": {".": {}, "f:a": {}}},
                   "f:series": {".": {}, "f:count": {}}, "f:source": {"f:host": {}}})
        );
        assert_eq!(fv1(&c.modified), json!({"f:involvedObject": {}}));
        assert!(c.removed.is_empty());
        let back = compare(&CORE_EVENT, &new, &old);
        assert_eq!(back.added, FieldSet::new());
        assert_eq!(back.removed, c.added);
    }

    #[test]
    fn merge_and_remove() {
        let live = json!({"message": "a", "count": 3, "metadata": {"labels": {"x": "1"},
                          "ownerReferences": [{"uid": "1", "name": "one"}]},
                          "series": {"count": 2, "lastObservedTime": null}});
        let config = json!({"message": "b", "metadata": {"labels": {"y": "2"},
                            "ownerReferences": [{"uid": "2", "name": "two"}, {"uid": "1", "name": "uno"}]}});
        let merged = merge(&CORE_EVENT, &live, &config);
        assert_eq!(
            merged,
            json!({"message": "b", "count": 3, "metadata": {"labels": {"x": "1", "y": "2"},
                   "ownerReferences": [{"uid": "1", "name": "uno"}, {"uid": "2", "name": "two"}]},
                   "series": {"count": 2, "lastObservedTime": null}})
        );
        let mut gone = FieldSet::new();
        gone.insert(&[PathElement::field("count")]);
        gone.insert(&[PathElement::field("series"), PathElement::field("count")]);
        gone.insert(&[
            PathElement::field("series"),
            PathElement::field("lastObservedTime"),
        ]);
        gone.insert(&[
            PathElement::field("metadata"),
            PathElement::field("ownerReferences"),
            PathElement::Key(r#"{"uid":"1"}"#.into()),
        ]);
        let mut v = merged;
        remove(&CORE_EVENT, &mut v, &gone);
        assert_eq!(
            v,
            json!({"message": "b", "metadata": {"labels": {"x": "1", "y": "2"},
                   "ownerReferences": [{"uid": "2", "name": "two"}]}})
        );
    }
}
