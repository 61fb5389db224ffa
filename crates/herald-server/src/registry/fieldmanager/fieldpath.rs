//! Field paths and field sets in structured-merge-diff's model, and their `FieldsV1` JSON.
//!
//! A path is a list of [`PathElement`]s from the object's root: a struct field or map key
//! (`f:name`), an item of a keyed list (`k:{"uid":"…"}`), an item of a set (`v:"value"`) or a
//! list index (`i:3`). A [`FieldSet`] is a tree of paths: each node says which of its direct
//! children are *members* of the set and holds the subtrees below them. Its `FieldsV1`
//! encoding is exactly that tree: a member with nothing below it is `{}`, a member with
//! children carries a `"."` key, and a non-member is only there to hold its children.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde_json::{Map, Value};

/// One step of a field path.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PathElement {
    /// A struct field (a name from the schema, borrowed) or a map key (`f:`).
    Field(Cow<'static, str>),
    /// An item of a keyed (associative) list, by its key fields: the compact JSON object of
    /// the keys in name order (`k:`).
    Key(String),
    /// An item of a set, by its value: compact JSON (`v:`).
    Value(String),
    /// A list item by position (`i:`); only lists without keys use it.
    Index(i64),
}

impl PathElement {
    /// A struct field or map key.
    pub fn field(name: &str) -> Self {
        PathElement::Field(Cow::Owned(name.to_string()))
    }

    /// A field whose name is static (a schema field), without allocating.
    pub const fn named(name: &'static str) -> Self {
        PathElement::Field(Cow::Borrowed(name))
    }

    /// The `FieldsV1` key of this element (`f:message`, `k:{"uid":"1"}`, `v:"a"`, `i:0`).
    pub fn to_key(&self) -> String {
        match self {
            PathElement::Field(n) => format!("f:{n}"),
            PathElement::Key(k) => format!("k:{k}"),
            PathElement::Value(v) => format!("v:{v}"),
            PathElement::Index(i) => format!("i:{i}"),
        }
    }

    /// Parses a `FieldsV1` key; `None` for anything else.
    pub fn from_key(key: &str) -> Option<Self> {
        let (kind, rest) = key.split_at_checked(2)?;
        match kind {
            "f:" => Some(PathElement::field(rest)),
            "k:" => {
                let v: Value = serde_json::from_str(rest).ok()?;
                v.is_object().then(|| PathElement::Key(compact(&v)))
            }
            "v:" => {
                let v: Value = serde_json::from_str(rest).ok()?;
                Some(PathElement::Value(compact(&v)))
            }
            "i:" => rest.parse().ok().map(PathElement::Index),
            _ => None,
        }
    }
}

/// Compact JSON with object keys in name order (serde_json's map is ordered by key unless
/// another crate turns on `preserve_order`, so the keys are sorted here explicitly).
pub(crate) fn compact(v: &Value) -> String {
    fn sorted(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                let mut out = Map::new();
                for k in keys {
                    out.insert(k.clone(), sorted(&m[k]));
                }
                Value::Object(out)
            }
            Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    serde_json::to_string(&sorted(v)).unwrap_or_default()
}

/// Go's `%v` of a scalar as structured-merge-diff prints it in a path: strings quoted.
fn scalar_text(json: &str) -> String {
    match serde_json::from_str::<Value>(json) {
        Ok(Value::String(s)) => herald_core::labels::go_quote(&s),
        Ok(other) => other.to_string(),
        Err(_) => json.to_string(),
    }
}

impl fmt::Display for PathElement {
    /// structured-merge-diff's rendering: `.name`, `[uid="1"]`, `[="a"]`, `[3]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathElement::Field(n) => write!(f, ".{n}"),
            PathElement::Key(k) => {
                let parts: Vec<String> = match serde_json::from_str::<Value>(k) {
                    Ok(Value::Object(m)) => m
                        .iter()
                        .map(|(name, v)| format!("{name}={}", scalar_text(&v.to_string())))
                        .collect(),
                    _ => vec![k.clone()],
                };
                write!(f, "[{}]", parts.join(","))
            }
            PathElement::Value(v) => write!(f, "[={}]", scalar_text(v)),
            PathElement::Index(i) => write!(f, "[{i}]"),
        }
    }
}

/// A path from the root, rendered the way conflict messages show it (`.metadata.labels.app`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Path(pub Vec<PathElement>);

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for pe in &self.0 {
            write!(f, "{pe}")?;
        }
        Ok(())
    }
}

/// A set of field paths (see the module docs). Empty subtrees are never kept, so two sets
/// with the same paths compare equal.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSet {
    members: BTreeSet<PathElement>,
    children: BTreeMap<PathElement, FieldSet>,
}

impl FieldSet {
    /// The empty set.
    pub fn new() -> Self {
        FieldSet::default()
    }

    /// True when the set holds no path.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty() && self.children.is_empty()
    }

    /// Adds `path` (the empty path is not a member of anything and is ignored).
    pub fn insert(&mut self, path: &[PathElement]) {
        match path {
            [] => {}
            [last] => {
                self.members.insert(last.clone());
            }
            [first, rest @ ..] => self.children.entry(first.clone()).or_default().insert(rest),
        }
    }

    /// True when `path` is a member.
    pub fn has(&self, path: &[PathElement]) -> bool {
        match path {
            [] => false,
            [last] => self.members.contains(last),
            [first, rest @ ..] => self.children.get(first).is_some_and(|c| c.has(rest)),
        }
    }

    /// Whether `pe` is a direct member, and the subtree below it.
    pub fn child(&self, pe: &PathElement) -> (bool, Option<&FieldSet>) {
        (self.members.contains(pe), self.children.get(pe))
    }

    /// Every path in either set.
    pub fn union(&self, other: &FieldSet) -> FieldSet {
        let mut out = self.clone();
        out.members.extend(other.members.iter().cloned());
        for (pe, c) in &other.children {
            let merged = match out.children.get(pe) {
                Some(mine) => mine.union(c),
                None => c.clone(),
            };
            out.children.insert(pe.clone(), merged);
        }
        out
    }

    /// The paths of `self` that are not in `other`.
    pub fn difference(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet {
            members: self.members.difference(&other.members).cloned().collect(),
            children: BTreeMap::new(),
        };
        for (pe, c) in &self.children {
            let d = match other.children.get(pe) {
                Some(o) => c.difference(o),
                None => c.clone(),
            };
            if !d.is_empty() {
                out.children.insert(pe.clone(), d);
            }
        }
        out
    }

    /// The paths in both sets.
    pub fn intersection(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet {
            members: self.members.intersection(&other.members).cloned().collect(),
            children: BTreeMap::new(),
        };
        for (pe, c) in &self.children {
            if let Some(o) = other.children.get(pe) {
                let i = c.intersection(o);
                if !i.is_empty() {
                    out.children.insert(pe.clone(), i);
                }
            }
        }
        out
    }

    /// Every member path, each level's members before its subtrees, in element order.
    pub fn paths(&self) -> Vec<Path> {
        let mut out = Vec::new();
        let mut prefix = Vec::new();
        self.collect(&mut prefix, &mut out);
        out
    }

    fn collect(&self, prefix: &mut Vec<PathElement>, out: &mut Vec<Path>) {
        for m in &self.members {
            prefix.push(m.clone());
            out.push(Path(prefix.clone()));
            prefix.pop();
        }
        for (pe, c) in &self.children {
            prefix.push(pe.clone());
            c.collect(prefix, out);
            prefix.pop();
        }
    }

    /// The set with its top-level elements renamed by `rename` (used to move a set between
    /// API versions whose fields differ only in their top-level names).
    pub fn rename_top(&self, rename: impl Fn(&PathElement) -> PathElement) -> FieldSet {
        let mut out = FieldSet::new();
        for m in &self.members {
            out.members.insert(rename(m));
        }
        for (pe, c) in &self.children {
            out.children.insert(rename(pe), c.clone());
        }
        out
    }

    /// The `FieldsV1` JSON of the set.
    pub fn to_fields_v1(&self) -> Value {
        Value::Object(self.fields_v1_map())
    }

    fn fields_v1_map(&self) -> Map<String, Value> {
        let mut out = Map::new();
        // Members and subtrees are both sorted: walk them side by side.
        let mut members = self.members.iter().peekable();
        let mut children = self.children.iter().peekable();
        loop {
            use std::cmp::Ordering::{Equal, Greater, Less};
            let order = match (members.peek(), children.peek()) {
                (None, None) => break,
                (Some(_), None) => Less,
                (None, Some(_)) => Greater,
                (Some(m), Some((c, _))) => (*m).cmp(*c),
            };
            let (pe, member, child) = match order {
                Less => match members.next() {
                    Some(m) => (m, true, None),
                    None => break,
                },
                Equal => match (members.next(), children.next()) {
                    (Some(_), Some((pe, c))) => (pe, true, Some(c)),
                    _ => break,
                },
                Greater => match children.next() {
                    Some((pe, c)) => (pe, false, Some(c)),
                    None => break,
                },
            };
            let v = match child {
                Some(c) => {
                    let mut inner = c.fields_v1_map();
                    if member {
                        inner.insert(".".into(), Value::Object(Map::new()));
                    }
                    Value::Object(inner)
                }
                None => Value::Object(Map::new()),
            };
            out.insert(pe.to_key(), v);
        }
        out
    }

    /// Parses `FieldsV1` JSON; `None` when it is not a well-formed field set.
    pub fn from_fields_v1(v: &Value) -> Option<FieldSet> {
        let Value::Object(m) = v else { return None };
        let mut out = FieldSet::new();
        for (k, sub) in m {
            if k == "." {
                continue;
            }
            let pe = PathElement::from_key(k)?;
            let Value::Object(inner) = sub else {
                return None;
            };
            if inner.is_empty() || inner.contains_key(".") {
                out.members.insert(pe.clone());
            }
            let c = FieldSet::from_fields_v1(sub)?;
            if !c.is_empty() {
                out.children.insert(pe, c);
            }
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn f(n: &str) -> PathElement {
        PathElement::field(n)
    }

    #[test]
    fn fields_v1_round_trip_and_dot_for_members_with_children() {
        let mut s = FieldSet::new();
        s.insert(&[f("message")]);
        s.insert(&[f("metadata"), f("labels")]);
        s.insert(&[f("metadata"), f("labels"), f("app")]);
        s.insert(&[
            f("metadata"),
            f("ownerReferences"),
            PathElement::Key(r#"{"uid":"1"}"#.into()),
        ]);
        s.insert(&[
            f("metadata"),
            f("finalizers"),
            PathElement::Value(r#""a/b""#.into()),
        ]);
        let v = s.to_fields_v1();
        assert_eq!(
            v,
            json!({"f:message": {}, "f:metadata": {
                "f:finalizers": {"v:\"a/b\"": {}},
                "f:labels": {".": {}, "f:app": {}},
                "f:ownerReferences": {"k:{\"uid\":\"1\"}": {}}}})
        );
        assert_eq!(FieldSet::from_fields_v1(&v), Some(s));
        assert_eq!(FieldSet::from_fields_v1(&json!({"x:y": {}})), None);
        assert_eq!(FieldSet::from_fields_v1(&json!({"f:y": 1})), None);
    }

    #[test]
    fn set_algebra() {
        let mut a = FieldSet::new();
        a.insert(&[f("a")]);
        a.insert(&[f("s"), f("x")]);
        a.insert(&[f("s"), f("y")]);
        let mut b = FieldSet::new();
        b.insert(&[f("s"), f("y")]);
        b.insert(&[f("z")]);
        let i = a.intersection(&b);
        assert_eq!(i.paths(), vec![Path(vec![f("s"), f("y")])]);
        let d = a.difference(&b);
        assert!(d.has(&[f("a")]) && d.has(&[f("s"), f("x")]) && !d.has(&[f("s"), f("y")]));
        let u = a.union(&b);
        assert_eq!(u.paths().len(), 4);
        assert!(a.difference(&a).is_empty());
    }

    #[test]
    fn paths_render_like_structured_merge_diff() {
        let p = Path(vec![
            f("metadata"),
            f("ownerReferences"),
            PathElement::Key(r#"{"uid":"u-1"}"#.into()),
        ]);
        assert_eq!(p.to_string(), r#".metadata.ownerReferences[uid="u-1"]"#);
        let p = Path(vec![
            f("metadata"),
            f("finalizers"),
            PathElement::Value(r#""x""#.into()),
        ]);
        assert_eq!(p.to_string(), r#".metadata.finalizers[="x"]"#);
    }
}
