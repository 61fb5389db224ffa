//! Applying PATCH bodies to an event's JSON (in the request group's shape).
//!
//! - JSON patch (RFC 6902) and JSON merge patch (RFC 7386) are applied as specified. A JSON
//!   patch has at most [`MAX_JSON_PATCH_OPERATIONS`] operations (413 beyond, as in
//!   kube-apiserver); its copies may add at most [`MAX_JSON_PATCH_COPY_BYTES`], and no
//!   operation may nest the object deeper than [`MAX_PATCHED_DEPTH`] (422 otherwise): a
//!   patch that copies the object into itself must not exhaust memory or the stack.
//! - Strategic merge patch: the Event type has no lists of its own, so it is a merge patch
//!   plus ObjectMeta's merge-keyed lists (`ownerReferences` by `uid`, `finalizers` as a set)
//!   and the directives `$patch` (`replace`/`delete`/`merge`), `$retainKeys`,
//!   `$deleteFromPrimitiveList/<list>` and `$setElementOrder/<list>` (ordering only; ignored).
//! - Server-side apply bodies (YAML or JSON) are parsed here and applied by the
//!   [field manager](super::fieldmanager), which owns the merge and the conflicts.

use std::collections::{HashMap, HashSet, VecDeque};

use herald_core::status::{ApiError, FieldCause, Reason};
use serde_json::{Map, Value};

use super::fieldmanager::fieldpath::compact;

/// The PATCH flavour, from the request's Content-Type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    /// `application/json-patch+json`.
    Json,
    /// `application/merge-patch+json`.
    Merge,
    /// `application/strategic-merge-patch+json`.
    StrategicMerge,
    /// `application/apply-patch+yaml` (a YAML or JSON body): server-side apply. Creates a
    /// missing object; merges the applied configuration into an existing one, with field
    /// ownership and conflicts (see [`super::fieldmanager`]).
    Apply {
        /// `force=true`.
        force: bool,
    },
}

impl PatchKind {
    /// The kind for a Content-Type (parameters ignored); `None` for an unsupported one.
    pub fn from_content_type(ct: &str) -> Option<Self> {
        let base = ct
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        match base.as_str() {
            "application/json-patch+json" => Some(PatchKind::Json),
            "application/merge-patch+json" => Some(PatchKind::Merge),
            "application/strategic-merge-patch+json" => Some(PatchKind::StrategicMerge),
            "application/apply-patch+yaml" | "application/apply-patch+json" => {
                Some(PatchKind::Apply { force: false })
            }
            _ => None,
        }
    }
}

/// A parsed patch document.
#[derive(Debug, Clone)]
pub enum PatchDoc {
    /// RFC 6902 operations.
    Json(Vec<JsonOp>),
    /// A merge, strategic-merge or apply object.
    Object(Value),
}

/// One operation of a JSON patch. kube-apiserver's decoder takes any list of objects whose
/// `op`, `path` and `from` are strings; an operation it cannot carry out (an unknown `op`,
/// a missing `path` or `value`) fails when the patch is applied, as a 422, not as a 400.
#[derive(Debug, Clone)]
pub enum JsonOp {
    /// An operation of RFC 6902.
    Valid(json_patch::PatchOperation),
    /// One that cannot be applied: why (`Unexpected kind: frob`).
    Invalid(String),
}

impl JsonOp {
    /// Reads one element of the patch list; `Err` (a 400) only for what kube-apiserver's
    /// decoder refuses: an element that is not an object. evanphx/json-patch keeps each
    /// member as raw JSON and reads it when applying, so a bad `op`, `path` or `from` is an
    /// operation that fails (a 422); an `op` that is not a string reads as `unknown`.
    fn read(v: &Value) -> Result<JsonOp, String> {
        let Value::Object(m) = v else {
            return Err(format!(
                "cannot unmarshal {} into an operation",
                json_type(v)
            ));
        };
        let op = m.get("op").and_then(Value::as_str).unwrap_or("unknown");
        if !["add", "remove", "replace", "move", "copy", "test"].contains(&op) {
            // evanphx/json-patch's wording, which kube-apiserver passes on.
            return Ok(JsonOp::Invalid(format!("Unexpected kind: {op}")));
        }
        Ok(
            match <json_patch::PatchOperation as serde::Deserialize>::deserialize(v) {
                Ok(o) => JsonOp::Valid(o),
                Err(e) => JsonOp::Invalid(format!("{op} operation: {e}")),
            },
        )
    }
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Parses a patch body for `kind`; malformed bodies are 400s that say where.
pub fn parse(kind: PatchKind, body: &[u8]) -> Result<PatchDoc, ApiError> {
    match kind {
        PatchKind::Json => {
            let bad = |e: &dyn std::fmt::Display| {
                ApiError::bad_request(format!("error decoding patch: {e}"))
            };
            let list = serde_json::from_slice::<Vec<Value>>(body).map_err(|e| bad(&e))?;
            if list.len() > MAX_JSON_PATCH_OPERATIONS {
                return Err(ApiError::too_large(format_args!(
                    "The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPERATIONS}, got {}",
                    list.len()
                )));
            }
            let ops = list
                .iter()
                .map(JsonOp::read)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| bad(&e))?;
            Ok(PatchDoc::Json(ops))
        }
        PatchKind::Apply { .. } => {
            // JSON (what kubectl and kube-rs send) is YAML too; it is read as JSON first so
            // that its numbers and strings are taken exactly.
            let v: Value = match serde_json::from_slice(body) {
                Ok(v) => v,
                Err(_) => herald_wire::body::yaml_value(body)
                    .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?,
            };
            if !v.is_object() {
                return Err(ApiError::bad_request(
                    "error decoding apply configuration: expected an object",
                ));
            }
            Ok(PatchDoc::Object(v))
        }
        _ => {
            let v: Value = serde_json::from_slice(body)
                .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
            if !v.is_object() {
                return Err(ApiError::bad_request(
                    "error decoding patch: a merge patch must be a JSON object",
                ));
            }
            Ok(PatchDoc::Object(v))
        }
    }
}

/// Applies `doc` to `target` as `kind` says.
pub fn apply(kind: PatchKind, doc: &PatchDoc, target: &mut Value) -> Result<(), ApiError> {
    match (kind, doc) {
        (PatchKind::Json, PatchDoc::Json(ops)) => json_patch_guarded(target, ops),
        (PatchKind::StrategicMerge, PatchDoc::Object(p)) => {
            strategic_merge(target, p, "");
            Ok(())
        }
        (_, PatchDoc::Object(p)) => {
            json_patch::merge(target, p);
            Ok(())
        }
        (_, PatchDoc::Json(_)) => Err(ApiError::bad_request(
            "a JSON patch needs the json-patch content type",
        )),
    }
}

/// The most operations one JSON patch may have, as in kube-apiserver (413 beyond).
pub const MAX_JSON_PATCH_OPERATIONS: usize = 10_000;

/// The most bytes (as compact JSON) the `copy` operations of one JSON patch may add in all,
/// as kube-apiserver's `JSONPatchMaxCopyBytes` (the request body limit). A copy of the whole
/// document into itself doubles it: without this, a few dozen operations exhaust memory.
pub const MAX_JSON_PATCH_COPY_BYTES: usize = herald_wire::limits::MAX_BODY_BYTES;

/// The deepest a value may nest after a JSON patch operation: what serde_json parses in a
/// body. Copying a value into itself doubles its depth, and the code that clones, decodes
/// and drops values recurses once per level: an unbounded depth overflows the stack.
pub const MAX_PATCHED_DEPTH: usize = 128;

/// The 422 kube-apiserver answers when a JSON patch cannot be applied
/// (`NewGenericServerResponse(422, …)`): reason `Invalid`, its generic message exactly, and
/// the patch library's explanation in `details.causes[0]` (type `UnexpectedServerResponse`,
/// no field), where that constructor puts a server's own message.
pub fn patch_rejected(detail: String) -> ApiError {
    let mut e = ApiError::new(
        422,
        Reason::Invalid,
        "the server rejected our request due to an error in our request",
    );
    e.causes.push(FieldCause {
        reason: "UnexpectedServerResponse".into(),
        message: detail,
        field: String::new(),
    });
    e
}

/// The 422 kube-apiserver's patchers answer when the patched object cannot be decoded as an
/// Event (a string `count`, say): `NewInvalid(GroupKind{}, "", [patch: Invalid value])`,
/// whose message names no kind and no object: ` "" is invalid: patch: Invalid value:
/// "<value>": <decode error>`. The value is the patched object's JSON for a JSON or merge
/// patch, and the strategic-merge patch itself as Go prints a map (`map[count:x]`) for a
/// strategic-merge patch, as upstream quotes them. `err` is the decode's 400; its
/// "cannot be handled as a Event" prefix, which only the create and update handlers put
/// on, is dropped.
pub fn patched_invalid(
    kind: PatchKind,
    doc: &PatchDoc,
    patched: &Value,
    err: ApiError,
) -> ApiError {
    let value = match (kind, doc) {
        (PatchKind::StrategicMerge, PatchDoc::Object(p)) => {
            let mut out = String::new();
            go_print(p, &mut out);
            out
        }
        _ => patched.to_string(),
    };
    let detail = err
        .message
        .strip_prefix(herald_wire::body::CANNOT_HANDLE)
        .unwrap_or(&err.message);
    let none = herald_core::status::Resource {
        group: "",
        resource: "",
        kind: "",
    };
    let mut e = ApiError::invalid(
        none,
        "",
        vec![herald_core::event::causes::invalid("patch", &value, detail)],
    );
    // Go leaves the empty group, kind and name out of the details.
    e.name = None;
    e.group = None;
    e.kind = None;
    e
}

/// `v` as Go's `fmt` prints the `map[string]interface{}` a JSON document decodes to with
/// `%+v`: `map[k:v …]` (keys sorted), `[a b]`, `<nil>`, strings bare, numbers as decoded.
fn go_print(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("<nil>"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => match n.as_f64().filter(|_| n.is_f64()) {
            Some(f) => out.push_str(&go_float(f)),
            None => out.push_str(&n.to_string()),
        },
        Value::String(s) => out.push_str(s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                go_print(item, out);
            }
            out.push(']');
        }
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push_str("map[");
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                out.push_str(k);
                out.push(':');
                go_print(&m[k], out);
            }
            out.push(']');
        }
    }
}

/// A float as Go's `%v` prints it: the shortest representation, with an exponent
/// (`1e+21`, `1e-05`) below 1e-4 and from 1e21 on.
fn go_float(f: f64) -> String {
    let exp = if f == 0.0 {
        0
    } else {
        f.abs().log10().floor() as i32
    };
    if f != 0.0 && !(-4..21).contains(&exp) {
        let s = format!("{f:e}");
        match s.split_once('e') {
            Some((mantissa, e)) => {
                let (sign, digits) = match e.strip_prefix('-') {
                    Some(d) => ('-', d),
                    None => ('+', e),
                };
                format!("{mantissa}e{sign}{digits:0>2}")
            }
            None => s,
        }
    } else {
        format!("{f}")
    }
}

/// RFC 6902, one operation at a time, each checked first against the bounds above (the
/// target is left part-patched on an error; the caller drops it). A failed or unknown
/// operation, or one past a bound, is kube-apiserver's 422 ([`patch_rejected`]).
fn json_patch_guarded(target: &mut Value, ops: &[JsonOp]) -> Result<(), ApiError> {
    use json_patch::PatchOperation as Op;
    let rejected = patch_rejected;
    let mut copied = 0usize;
    for (i, op) in ops.iter().enumerate() {
        let op = match op {
            JsonOp::Valid(op) => op,
            JsonOp::Invalid(why) => return Err(rejected(why.clone())),
        };
        // What the operation puts where: the depth it can reach is the path's plus the value's.
        let inserted = match op {
            Op::Add(o) => Some((&o.path, Some(&o.value))),
            Op::Replace(o) => Some((&o.path, Some(&o.value))),
            Op::Move(o) => Some((&o.path, target.pointer(o.from.as_str()))),
            Op::Copy(o) => {
                let from = target.pointer(o.from.as_str());
                if let Some(v) = from {
                    copied = copied.saturating_add(json_len(v));
                    if copied > MAX_JSON_PATCH_COPY_BYTES {
                        return Err(rejected(format!(
                            "Unable to complete the copy, the accumulated size increase of copy is {copied}, exceeding the limit {MAX_JSON_PATCH_COPY_BYTES}"
                        )));
                    }
                }
                Some((&o.path, from))
            }
            Op::Remove(_) | Op::Test(_) => None,
        };
        if let Some((path, Some(v))) = inserted
            && path.count() + depth(v) > MAX_PATCHED_DEPTH
        {
            let shown: String = path.as_str().chars().take(80).collect();
            let more = if shown.len() < path.as_str().len() {
                "…"
            } else {
                ""
            };
            return Err(rejected(format!(
                "the operation at \"{shown}{more}\" would nest the object deeper than {MAX_PATCHED_DEPTH} levels"
            )));
        }
        // Applied alone, the operation is number 0 to the library: its error is reworded
        // with the operation's place in the patch.
        json_patch::patch(target, std::slice::from_ref(op)).map_err(|e| {
            rejected(format!(
                "operation '/{i}' failed at path '{}': {}",
                e.path, e.kind
            ))
        })?;
    }
    Ok(())
}

/// How many levels `v` nests (a scalar is 0), found without recursion.
fn depth(v: &Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(v, 0usize)];
    while let Some((v, d)) = stack.pop() {
        deepest = deepest.max(d);
        match v {
            Value::Array(items) => stack.extend(items.iter().map(|i| (i, d + 1))),
            Value::Object(m) => stack.extend(m.values().map(|i| (i, d + 1))),
            _ => {}
        }
    }
    deepest
}

/// The length of `v` as compact JSON, without writing it. Called only on values within
/// [`MAX_PATCHED_DEPTH`], so serde's recursion is bounded.
fn json_len(v: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut n = Count(0);
    // Writing to a counter cannot fail.
    let _ = serde_json::to_writer(&mut n, v);
    n.0
}

const DELETE_FROM: &str = "$deleteFromPrimitiveList/";
const SET_ORDER: &str = "$setElementOrder/";

/// A strategic merge of `patch` into `target`; `path` is the dotted path of `target`.
pub fn strategic_merge(target: &mut Value, patch: &Value, path: &str) {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    match p.get("$patch").and_then(Value::as_str) {
        Some("replace") => {
            *target = Value::Object(strip_directives(p));
            return;
        }
        Some("delete") => {
            *target = Value::Null;
            return;
        }
        _ => {}
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(t) = target else { return };
    if let Some(Value::Array(keep)) = p.get("$retainKeys") {
        let keep: HashSet<&str> = keep.iter().filter_map(Value::as_str).collect();
        t.retain(|k, _| keep.contains(k.as_str()) || p.contains_key(k));
    }
    for (k, v) in p {
        if let Some(list) = k.strip_prefix(DELETE_FROM) {
            if let (Some(Value::Array(items)), Value::Array(del)) = (t.get_mut(list), v) {
                let del: HashSet<String> = del.iter().map(compact).collect();
                items.retain(|i| !del.contains(&compact(i)));
            }
            continue;
        }
        if k.starts_with('$') || k.starts_with(SET_ORDER) {
            continue;
        }
        let child = if path.is_empty() {
            k.clone()
        } else {
            format!("{path}.{k}")
        };
        match v {
            Value::Null => {
                t.remove(k);
            }
            Value::Object(o) if o.get("$patch").and_then(Value::as_str) == Some("delete") => {
                t.remove(k);
            }
            Value::Array(items) if child == "metadata.finalizers" => {
                let cur = t
                    .entry(k.clone())
                    .or_insert_with(|| Value::Array(Vec::new()));
                if !cur.is_array() {
                    *cur = Value::Array(Vec::new());
                }
                if let Value::Array(cur) = cur {
                    let mut have: HashSet<String> = cur.iter().map(compact).collect();
                    for i in items {
                        if have.insert(compact(i)) {
                            cur.push(i.clone());
                        }
                    }
                }
            }
            Value::Array(items) if child == "metadata.ownerReferences" => {
                let cur = t
                    .entry(k.clone())
                    .or_insert_with(|| Value::Array(Vec::new()));
                if !cur.is_array() {
                    *cur = Value::Array(Vec::new());
                }
                if let Value::Array(cur) = cur {
                    merge_by_key(cur, items, "uid");
                }
            }
            Value::Object(_) => {
                let entry = t.entry(k.clone()).or_insert(Value::Null);
                strategic_merge(entry, v, &child);
                if entry.is_null() {
                    t.remove(k);
                }
            }
            other => {
                t.insert(k.clone(), other.clone());
            }
        }
    }
}

fn strip_directives(m: &Map<String, Value>) -> Map<String, Value> {
    m.iter()
        .filter(|(k, _)| !k.starts_with('$'))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Merges the keyed list `items` into `cur` by the field `key`, item by item as if each were
/// merged in turn: an item whose key matches merges into the first current item with that key
/// (or deletes it, with `$patch: delete`), any other is appended. Items are found through an
/// index of the keys, so `n` items merge in O(n).
fn merge_by_key(cur: &mut Vec<Value>, items: &[Value], key: &str) {
    if items
        .iter()
        .any(|i| i.get("$patch").and_then(Value::as_str) == Some("replace"))
    {
        *cur = items
            .iter()
            .filter(|i| i.get("$patch").is_none())
            .cloned()
            .collect();
        return;
    }
    let mut slots: Vec<Option<Value>> = std::mem::take(cur).into_iter().map(Some).collect();
    // The slots holding each key, first first (appends come last, so the order holds).
    let mut by_key: HashMap<String, VecDeque<usize>> = HashMap::new();
    for (i, v) in slots.iter().enumerate() {
        if let Some(id) = v.as_ref().and_then(|v| v.get(key)) {
            by_key.entry(compact(id)).or_default().push_back(i);
        }
    }
    for item in items {
        let id = item.get(key).map(compact);
        let pos = id
            .as_ref()
            .and_then(|id| by_key.get(id))
            .and_then(|at| at.front().copied());
        let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
        match (pos, delete) {
            (Some(i), true) => {
                slots[i] = None;
                if let Some(at) = id.as_ref().and_then(|id| by_key.get_mut(id)) {
                    at.pop_front();
                }
            }
            (None, true) => {}
            (Some(i), false) => {
                if let Some(slot) = slots[i].as_mut() {
                    strategic_merge(slot, item, "");
                }
            }
            (None, false) => {
                let mut v = item.clone();
                if let Value::Object(m) = &mut v {
                    m.retain(|k, _| !k.starts_with('$'));
                }
                if let Some(id) = id {
                    by_key.entry(id).or_default().push_back(slots.len());
                }
                slots.push(Some(v));
            }
        }
    }
    *cur = slots.into_iter().flatten().collect();
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// [`merge_by_key`] as it was first written: each item looked up by a linear scan.
    fn merge_by_key_plain(cur: &mut Vec<Value>, items: &[Value], key: &str) {
        if items
            .iter()
            .any(|i| i.get("$patch").and_then(Value::as_str) == Some("replace"))
        {
            *cur = items
                .iter()
                .filter(|i| i.get("$patch").is_none())
                .cloned()
                .collect();
            return;
        }
        for item in items {
            let id = item.get(key).cloned();
            let pos = id
                .as_ref()
                .and_then(|id| cur.iter().position(|c| c.get(key) == Some(id)));
            let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
            match (pos, delete) {
                (Some(i), true) => {
                    cur.remove(i);
                }
                (None, true) => {}
                (Some(i), false) => strategic_merge(&mut cur[i], item, ""),
                (None, false) => {
                    let mut v = item.clone();
                    if let Value::Object(m) = &mut v {
                        m.retain(|k, _| !k.starts_with('$'));
                    }
                    cur.push(v);
                }
            }
        }
    }

    fn keyed_item() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        (
            proptest::option::of(0u8..4),
            0u8..3,
            prop_oneof![Just(None), Just(Some("delete")), Just(Some("merge"))],
        )
            .prop_map(|(uid, name, patch)| {
                let mut m = Map::new();
                if let Some(uid) = uid {
                    // Equal keys written differently by the JSON text are still equal.
                    m.insert("uid".into(), json!(uid.to_string()));
                }
                m.insert("name".into(), json!(format!("n{name}")));
                if let Some(p) = patch {
                    m.insert("$patch".into(), json!(p));
                }
                Value::Object(m)
            })
    }

    proptest::proptest! {
        #[test]
        fn merge_by_key_is_the_plain_merge(
            cur in proptest::collection::vec(keyed_item(), 0..8),
            items in proptest::collection::vec(keyed_item(), 0..8),
        ) {
            let strip = |v: &Value| {
                let mut v = v.clone();
                if let Value::Object(m) = &mut v {
                    m.remove("$patch");
                }
                v
            };
            let cur: Vec<Value> = cur.iter().map(strip).collect();
            let (mut fast, mut plain) = (cur.clone(), cur);
            merge_by_key(&mut fast, &items, "uid");
            merge_by_key_plain(&mut plain, &items, "uid");
            proptest::prop_assert_eq!(fast, plain);
        }
    }

    #[test]
    fn smp_is_merge_plus_meta_lists() {
        let mut t = json!({"message": "a", "count": 1, "metadata": {
            "finalizers": ["x/a"],
            "ownerReferences": [{"uid": "1", "name": "one"}, {"uid": "2", "name": "two"}],
            "labels": {"a": "1", "b": "2"}}});
        let p = json!({"message": "b", "count": null, "metadata": {
            "finalizers": ["x/b"],
            "$deleteFromPrimitiveList/finalizers": ["x/a"],
            "$setElementOrder/finalizers": [],
            "ownerReferences": [{"uid": "2", "$patch": "delete"}, {"uid": "3", "name": "three"}],
            "labels": {"$patch": "replace", "c": "3"}}});
        strategic_merge(&mut t, &p, "");
        assert_eq!(
            t,
            json!({"message": "b", "metadata": {
            "finalizers": ["x/b"],
            "ownerReferences": [{"uid": "1", "name": "one"}, {"uid": "3", "name": "three"}],
            "labels": {"c": "3"}}})
        );
    }

    #[test]
    fn retain_keys_and_delete_directive() {
        let mut t = json!({"source": {"component": "a", "host": "h"}, "related": {"kind": "Pod"}});
        let p = json!({"source": {"$retainKeys": ["component"], "component": "b"}, "related": {"$patch": "delete"}});
        strategic_merge(&mut t, &p, "");
        assert_eq!(t, json!({"source": {"component": "b"}}));
    }

    #[test]
    fn go_prints_like_fmt() {
        let mut out = String::new();
        go_print(
            &json!({"b": [1, "x", null, true], "a": {"z": 1.5, "y": 1e21, "x": 0.00001, "w": 2.0}}),
            &mut out,
        );
        assert_eq!(
            out,
            "map[a:map[w:2 x:1e-05 y:1e+21 z:1.5] b:[1 x <nil> true]]"
        );
        assert_eq!(go_float(123456.0), "123456");
        assert_eq!(go_float(0.0001), "0.0001");
        assert_eq!(go_float(-2.5e-7), "-2.5e-07");
    }

    #[test]
    fn json_patch_ops_fail_when_applied() {
        let PatchDoc::Json(ops) = parse(
            PatchKind::Json,
            br#"[{"op":"frob"},{"op":"add","path":"/a"},{"op":"add","path":"/a","value":1}]"#,
        )
        .unwrap() else {
            panic!("a JSON patch");
        };
        assert!(matches!(&ops[0], JsonOp::Invalid(m) if m == "Unexpected kind: frob"));
        assert!(matches!(&ops[1], JsonOp::Invalid(m) if m.starts_with("add operation: ")));
        assert!(matches!(&ops[2], JsonOp::Valid(_)));
        let mut target = json!({});
        let e = apply(PatchKind::Json, &PatchDoc::Json(ops), &mut target).unwrap_err();
        assert_eq!(e.code, 422);
        assert_eq!(
            e.message,
            "the server rejected our request due to an error in our request"
        );
        assert_eq!(e.causes[0].message, "Unexpected kind: frob");
        for bad in [&br#"{"op":"add"}"#[..], br#"[1]"#] {
            assert_eq!(parse(PatchKind::Json, bad).unwrap_err().code, 400);
        }
        // Members of the wrong type fail when applied, as upstream reads them only then.
        let PatchDoc::Json(ops) =
            parse(PatchKind::Json, br#"[{"op":"add","path":3},{"op":7}]"#).unwrap()
        else {
            panic!("a JSON patch");
        };
        assert!(matches!(&ops[0], JsonOp::Invalid(m) if m.starts_with("add operation: ")));
        assert!(matches!(&ops[1], JsonOp::Invalid(m) if m == "Unexpected kind: unknown"));
        let many = format!("[{}{{}}]", "{},".repeat(MAX_JSON_PATCH_OPERATIONS));
        let e = parse(PatchKind::Json, many.as_bytes()).unwrap_err();
        assert_eq!(
            e.message,
            "Request entity too large: The allowed maximum operations in a JSON patch is 10000, got 10001"
        );
    }

    #[test]
    fn content_types() {
        assert_eq!(
            PatchKind::from_content_type("application/merge-patch+json; charset=utf-8"),
            Some(PatchKind::Merge)
        );
        assert_eq!(PatchKind::from_content_type("application/json"), None);
    }
}
