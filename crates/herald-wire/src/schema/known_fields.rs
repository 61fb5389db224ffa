//! The unknown-field check of a write, done in the same pass as its decode.
//!
//! Under `fieldValidation=Strict` or `Warn` (kubectl sends `Strict`), every write has to say
//! which of its body's fields the group's schema does not know. The exact answer,
//! [`unknown_fields`](super::openapi::unknown_fields), walks a parsed `serde_json::Value`. The
//! common case is a body with no unknown field at all, and for that one answer suffices:
//! "certainly none". [`decode_if_known`] gives it while `k8s-openapi` decodes the body,
//! by wrapping the JSON deserializer: each object key the decoder reads is looked up in a
//! compiled form of the schema, and each value is then read against the key's own schema.
//! Riding on the decode, the check costs a fraction of a separate pass over the text.
//!
//! The answer is sound by construction, not by agreement between `k8s-openapi` and the
//! schema: the check follows the schema, whatever the decoder does. A value the decoder
//! skips (`IgnoredAny`) but the schema would inspect makes the answer "not certain", and so
//! does a repeated key (a `duplicate field`, which only the exact path reports).

use std::cell::Cell;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::LazyLock;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use super::GroupVersion;
use super::openapi::{MAX_WALK_DEPTH, resolve, schema_document};

/// Decodes the JSON text `body` with `seed` (typically an Event decoder) and checks, in the
/// same pass, that `body` certainly has no field
/// [`unknown_fields`](super::openapi::unknown_fields) would report for `gv`.
///
/// `Some` only when the decode succeeds (trailing characters included) and the check is
/// certain. `None` says "decode failed or not certain": the caller then takes the exact path,
/// which parses the body and reports every unknown field or the decode error.
///
/// Bounds: values nested deeper than [`MAX_WALK_DEPTH`] are not inspected, as in the exact
/// walk; the JSON decoder's own recursion limit (128) bounds the nesting read at all.
///
/// ```
/// use std::marker::PhantomData;
/// use herald_wire::schema::{GroupVersion, known_fields::decode_if_known};
/// use serde_json::Value;
///
/// let ok = r#"{"kind": "Event", "metadata": {"name": "x", "labels": {"any": "key"}}}"#;
/// assert!(decode_if_known(GroupVersion::CORE_V1, ok, PhantomData::<Value>).is_some());
/// let bogus = r#"{"kind": "Event", "metadata": {"name": "x", "bogus": 1}}"#;
/// assert!(decode_if_known(GroupVersion::CORE_V1, bogus, PhantomData::<Value>).is_none());
/// ```
pub fn decode_if_known<'de, S: DeserializeSeed<'de>>(
    gv: GroupVersion,
    body: &'de str,
    seed: S,
) -> Option<S::Value> {
    let shape: &Shape = if gv.group.is_empty() {
        &CORE_SHAPE
    } else {
        &EVENTS_SHAPE
    };
    let known = Cell::new(true);
    let mut de = serde_json::Deserializer::from_str(body);
    let value = match shape.root {
        Some(root) => seed.deserialize(Checked {
            de: &mut de,
            at: At {
                shape,
                known: &known,
                node: root,
                depth: 0,
            },
        }),
        None => seed.deserialize(&mut de),
    };
    let value = value.ok()?;
    de.end().ok()?;
    known.get().then_some(value)
}

const CORE_EVENT: &str = "io.k8s.api.core.v1.Event";
const EVENTS_EVENT: &str = "io.k8s.api.events.v1.Event";

static CORE_SHAPE: LazyLock<Shape> =
    LazyLock::new(|| Shape::compile(schema_document(GroupVersion::CORE_V1), CORE_EVENT));
static EVENTS_SHAPE: LazyLock<Shape> =
    LazyLock::new(|| Shape::compile(schema_document(GroupVersion::EVENTS_V1), EVENTS_EVENT));

/// A schema document reduced to what the exact walk looks at, with `$ref`s resolved once:
/// per schema, its properties (name → node), its `additionalProperties` schema when it has
/// no properties, and its `items` schema.
struct Shape {
    nodes: Vec<ShapeNode>,
    root: Option<usize>,
}

#[derive(Default)]
struct ShapeNode {
    props: Option<Props>,
    additional: Option<usize>,
    items: Option<usize>,
}

impl ShapeNode {
    fn is_leaf(&self) -> bool {
        self.props.is_none() && self.additional.is_none() && self.items.is_none()
    }
}

impl Shape {
    fn compile(doc: &Value, root: &str) -> Shape {
        let mut shape = Shape {
            nodes: Vec::new(),
            root: None,
        };
        let Some(schemas) = doc["components"]["schemas"].as_object() else {
            return shape;
        };
        let Some(schema) = schemas.get(root) else {
            return shape;
        };
        let mut memo = HashMap::new();
        shape.root = Some(shape.node(schemas, schema, &mut memo));
        shape
    }

    fn node(
        &mut self,
        schemas: &Map<String, Value>,
        schema: &Value,
        memo: &mut HashMap<*const Value, usize>,
    ) -> usize {
        let schema = resolve(schemas, schema);
        if let Some(&id) = memo.get(&std::ptr::from_ref(schema)) {
            return id;
        }
        let id = self.nodes.len();
        self.nodes.push(ShapeNode::default());
        memo.insert(std::ptr::from_ref(schema), id);
        let props = schema
            .get("properties")
            .and_then(Value::as_object)
            .map(|p| {
                Props::new(
                    p.iter()
                        .map(|(k, s)| (k.clone(), self.node(schemas, s, memo)))
                        .collect(),
                )
            });
        let additional = match (&props, schema.get("additionalProperties")) {
            (None, Some(a)) if a.is_object() => Some(self.node(schemas, a, memo)),
            _ => None,
        };
        let items = schema.get("items").map(|i| self.node(schemas, i, memo));
        self.nodes[id] = ShapeNode {
            props,
            additional,
            items,
        };
        id
    }
}

/// An object's properties (name → node), found by name through a table indexed by a hash
/// of the name's length and three of its bytes, with a multiplier chosen when the schema is
/// compiled so that no two properties share a slot. A lookup is then a few arithmetic steps
/// and one comparison; a binary search over the names spent most of a write's check in
/// `memcmp`.
struct Props {
    names: Vec<(String, usize)>,
    /// Slot → 1 + index into `names`; 0 is an empty slot. Empty when no multiplier was found
    /// (a schema whose names agree in all the hashed bytes): `find` then scans `names`.
    slots: Vec<u8>,
    multiplier: u32,
    shift: u32,
}

impl Props {
    /// Multipliers tried per table size before the next size (or the scan) is used.
    const TRIES: u32 = 4096;

    fn new(names: Vec<(String, usize)>) -> Props {
        let mut props = Props {
            names,
            slots: Vec::new(),
            multiplier: 0,
            shift: 0,
        };
        if props.names.len() >= usize::from(u8::MAX) {
            return props;
        }
        let needed = (props.names.len() * 2).next_power_of_two().max(8);
        for size in [needed, needed * 2, needed * 4] {
            let bits = size.trailing_zeros();
            let shift = 32 - bits;
            let mut multiplier = 0x9E37_79B9_u32;
            for _ in 0..Self::TRIES {
                let mut slots = vec![0u8; size];
                let fits = props.names.iter().enumerate().all(|(i, (name, _))| {
                    let slot = &mut slots[Self::slot(name, multiplier, shift)];
                    let free = *slot == 0;
                    // `names` is shorter than `u8::MAX`, checked above.
                    *slot = u8::try_from(i + 1).unwrap_or(u8::MAX);
                    free
                });
                if fits {
                    props.slots = slots;
                    props.multiplier = multiplier;
                    props.shift = shift;
                    return props;
                }
                multiplier = multiplier
                    .wrapping_mul(0x0019_660D)
                    .wrapping_add(0x3C6E_F35F)
                    | 1;
            }
        }
        props
    }

    fn slot(name: &str, multiplier: u32, shift: u32) -> usize {
        let b = name.as_bytes();
        let mixed = match b {
            [] => 0,
            [first, .., last] | [first @ last] => {
                u32::from(*first)
                    | u32::from(*last) << 8
                    | u32::from(b[b.len() / 2]) << 16
                    | (b.len() as u32) << 24
            }
        };
        (mixed.wrapping_mul(multiplier) >> shift) as usize
    }

    /// The index of property `name`, if the object has it.
    fn find(&self, name: &str) -> Option<usize> {
        if self.slots.is_empty() {
            return self.names.iter().position(|(k, _)| k == name);
        }
        let i = usize::from(self.slots[Self::slot(name, self.multiplier, self.shift)])
            .checked_sub(1)?;
        (self.names[i].0 == name).then_some(i)
    }
}

/// Where in the schema a value being read sits, and the shared verdict.
#[derive(Clone, Copy)]
struct At<'t> {
    shape: &'t Shape,
    known: &'t Cell<bool>,
    node: usize,
    depth: usize,
}

impl<'t> At<'t> {
    fn child(self, node: usize) -> At<'t> {
        At {
            node,
            depth: self.depth + 1,
            ..self
        }
    }

    fn node(&self) -> &'t ShapeNode {
        &self.shape.nodes[self.node]
    }

    /// Whether anything in the value here can still change the verdict: not once it is "not
    /// certain", not in a leaf (nothing in it can be unknown), not below the walk's depth.
    fn inspects(&self) -> bool {
        self.known.get() && self.depth < MAX_WALK_DEPTH && !self.node().is_leaf()
    }

    fn uncertain(&self) {
        self.known.set(false);
    }
}

/// The deserializer of a value at `at`: hands the decoder's visitor a [`CheckedVisitor`].
struct Checked<'t, D> {
    de: D,
    at: At<'t>,
}

/// Calls macro `$forward` with every `Deserializer` method but `deserialize_ignored_any`
/// (which each wrapper treats in its own way), as `name(extra args);`.
macro_rules! deserialize_methods {
    ($forward:ident) => {
        $forward! {
            deserialize_any(); deserialize_bool(); deserialize_i8(); deserialize_i16();
            deserialize_i32(); deserialize_i64(); deserialize_i128(); deserialize_u8();
            deserialize_u16(); deserialize_u32(); deserialize_u64(); deserialize_u128();
            deserialize_f32(); deserialize_f64(); deserialize_char(); deserialize_str();
            deserialize_string(); deserialize_bytes(); deserialize_byte_buf();
            deserialize_option(); deserialize_unit(); deserialize_unit_struct(name: &'static str);
            deserialize_newtype_struct(name: &'static str); deserialize_seq();
            deserialize_tuple(len: usize); deserialize_tuple_struct(name: &'static str, len: usize);
            deserialize_map(); deserialize_struct(name: &'static str, fields: &'static [&'static str]);
            deserialize_enum(name: &'static str, variants: &'static [&'static str]);
            deserialize_identifier();
        }
    };
}

macro_rules! forward_checked {
    ($($method:ident($($arg:ident: $ty:ty),*);)*) => {$(
        fn $method<V: Visitor<'de>>(self, $($arg: $ty,)* visitor: V) -> Result<V::Value, D::Error> {
            if self.at.inspects() {
                self.de.$method($($arg,)* CheckedVisitor { inner: visitor, at: self.at })
            } else {
                self.de.$method($($arg,)* visitor)
            }
        }
    )*};
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Checked<'_, D> {
    type Error = D::Error;

    deserialize_methods!(forward_checked);

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        // The decoder skips a value the schema would inspect: what is in it goes unchecked.
        if self.at.inspects() {
            self.at.uncertain();
        }
        self.de.deserialize_ignored_any(visitor)
    }

    fn is_human_readable(&self) -> bool {
        self.de.is_human_readable()
    }
}

/// [`Checked`] as a seed, for a map value or sequence element at `at`.
struct CheckedSeed<'t, S> {
    seed: S,
    at: At<'t>,
}

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for CheckedSeed<'_, S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<S::Value, D::Error> {
        self.seed.deserialize(Checked { de, at: self.at })
    }
}

/// The decoder's visitor, seeing objects and arrays through [`CheckedMap`] / [`CheckedSeq`].
struct CheckedVisitor<'t, V> {
    inner: V,
    at: At<'t>,
}

macro_rules! forward_visit {
    ($($method:ident($ty:ty);)*) => {$(
        fn $method<E: de::Error>(self, v: $ty) -> Result<Self::Value, E> {
            self.inner.$method(v)
        }
    )*};
}

impl<'de, V: Visitor<'de>> Visitor<'de> for CheckedVisitor<'_, V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.expecting(f)
    }

    forward_visit! {
        visit_bool(bool); visit_i8(i8); visit_i16(i16); visit_i32(i32); visit_i64(i64);
        visit_i128(i128); visit_u8(u8); visit_u16(u16); visit_u32(u32); visit_u64(u64);
        visit_u128(u128); visit_f32(f32); visit_f64(f64); visit_char(char); visit_str(&str);
        visit_borrowed_str(&'de str); visit_string(String); visit_bytes(&[u8]);
        visit_borrowed_bytes(&'de [u8]); visit_byte_buf(Vec<u8>);
    }

    fn visit_none<E: de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_none()
    }

    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, de: D) -> Result<V::Value, D::Error> {
        self.inner.visit_some(Checked { de, at: self.at })
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, de: D) -> Result<V::Value, D::Error> {
        self.inner.visit_newtype_struct(Checked { de, at: self.at })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<V::Value, A::Error> {
        // As the exact walk: an array is inspected only where the schema has `items`.
        match self.at.node().items {
            Some(item) => self.inner.visit_seq(CheckedSeq {
                seq,
                at: self.at.child(item),
            }),
            None => self.inner.visit_seq(seq),
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        let node = self.at.node();
        if node.props.is_none() && node.additional.is_none() {
            return self.inner.visit_map(map);
        }
        self.inner.visit_map(CheckedMap {
            map,
            keys: KeyCheck {
                at: self.at,
                seen_props: 0,
                seen_keys: HashSet::new(),
                next: Next::Unseen,
            },
        })
    }

    fn visit_enum<A: de::EnumAccess<'de>>(self, data: A) -> Result<V::Value, A::Error> {
        // No Event field is an enum in JSON; a variant's contents would go unchecked.
        self.at.uncertain();
        self.inner.visit_enum(data)
    }
}

struct CheckedSeq<'t, A> {
    seq: A,
    /// Where each element sits.
    at: At<'t>,
}

impl<'de, A: SeqAccess<'de>> SeqAccess<'de> for CheckedSeq<'_, A> {
    type Error = A::Error;

    fn next_element_seed<S: DeserializeSeed<'de>>(
        &mut self,
        seed: S,
    ) -> Result<Option<S::Value>, A::Error> {
        self.seq
            .next_element_seed(CheckedSeed { seed, at: self.at })
    }

    fn size_hint(&self) -> Option<usize> {
        self.seq.size_hint()
    }
}

struct CheckedMap<'t, A> {
    map: A,
    keys: KeyCheck<'t>,
}

/// What the next map value is, by its key.
enum Next {
    /// No key text seen. `serde_json` shows every key to the visitor as a string, so this is
    /// a guard, not a path taken: a key the check did not see cannot be vouched for.
    Unseen,
    /// A key of the schema: its value is read at this node.
    Child(usize),
    /// Nothing in the value can change the verdict (an unknown key already made it "not
    /// certain", or the key's schema is a leaf).
    Skip,
}

/// The keys of one object: looked up in the object's schema, repeats noticed.
struct KeyCheck<'t> {
    at: At<'t>,
    /// A bit per property already seen (by its index in the object's properties). A key of
    /// an object with more than 128 properties (none in the Event schemas) has no bit and
    /// makes the answer "not certain".
    seen_props: u128,
    /// The keys seen in a free-form map (labels, annotations, …): a set, so that a map of
    /// `n` keys costs O(n) to check, not O(n²).
    seen_keys: HashSet<String>,
    next: Next,
}

impl KeyCheck<'_> {
    fn observe(&mut self, key: &str) {
        let at = self.at;
        let node = at.node();
        self.next = match (&node.props, node.additional) {
            (Some(props), _) => match props.find(key) {
                Some(i) => {
                    let bit = u32::try_from(i).ok().and_then(|i| 1u128.checked_shl(i));
                    // A repeated property: the exact walk would see only its last value.
                    if bit.is_none_or(|b| self.seen_props & b != 0) {
                        at.uncertain();
                    }
                    self.seen_props |= bit.unwrap_or(0);
                    Next::Child(props.names[i].1)
                }
                None => {
                    at.uncertain();
                    Next::Skip
                }
            },
            (None, Some(item)) => {
                // A repeated map key is a `duplicate field` for fieldValidation to report.
                if !self.seen_keys.insert(key.to_owned()) {
                    at.uncertain();
                }
                if at.shape.nodes[item].is_leaf() {
                    Next::Skip
                } else {
                    Next::Child(item)
                }
            }
            (None, None) => Next::Skip,
        };
    }
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for CheckedMap<'_, A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        self.keys.next = Next::Unseen;
        self.map.next_key_seed(KeySeed {
            seed,
            keys: &mut self.keys,
        })
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, A::Error> {
        match std::mem::replace(&mut self.keys.next, Next::Unseen) {
            Next::Child(node) => self.map.next_value_seed(CheckedSeed {
                seed,
                at: self.keys.at.child(node),
            }),
            Next::Skip => self.map.next_value_seed(seed),
            Next::Unseen => {
                self.keys.at.uncertain();
                self.map.next_value_seed(seed)
            }
        }
    }

    fn size_hint(&self) -> Option<usize> {
        self.map.size_hint()
    }
}

/// The decoder's key seed, whose deserializer shows the key text to a [`KeyCheck`].
struct KeySeed<'k, 't, S> {
    seed: S,
    keys: &'k mut KeyCheck<'t>,
}

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for KeySeed<'_, '_, S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<S::Value, D::Error> {
        self.seed.deserialize(KeyDe {
            de,
            keys: self.keys,
        })
    }
}

struct KeyDe<'k, 't, D> {
    de: D,
    keys: &'k mut KeyCheck<'t>,
}

macro_rules! forward_key {
    ($($method:ident($($arg:ident: $ty:ty),*);)*) => {$(
        fn $method<V: Visitor<'de>>(self, $($arg: $ty,)* visitor: V) -> Result<V::Value, D::Error> {
            self.de.$method($($arg,)* KeyVisitor { inner: visitor, keys: self.keys })
        }
    )*};
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for KeyDe<'_, '_, D> {
    type Error = D::Error;

    deserialize_methods!(forward_key);
    forward_key!(deserialize_ignored_any(););

    fn is_human_readable(&self) -> bool {
        self.de.is_human_readable()
    }
}

/// The key decoder's visitor: the key text goes to [`KeyCheck::observe`] on its way through.
struct KeyVisitor<'k, 't, V> {
    inner: V,
    keys: &'k mut KeyCheck<'t>,
}

impl<'de, V: Visitor<'de>> Visitor<'de> for KeyVisitor<'_, '_, V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.expecting(f)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<V::Value, E> {
        self.keys.observe(v);
        self.inner.visit_str(v)
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<V::Value, E> {
        self.keys.observe(v);
        self.inner.visit_borrowed_str(v)
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<V::Value, E> {
        self.keys.observe(&v);
        self.inner.visit_string(v)
    }

    // JSON keys are strings; anything else leaves the key unseen (`Next::Unseen`).
    forward_visit! {
        visit_bool(bool); visit_i8(i8); visit_i16(i16); visit_i32(i32); visit_i64(i64);
        visit_i128(i128); visit_u8(u8); visit_u16(u16); visit_u32(u32); visit_u64(u64);
        visit_u128(u128); visit_f32(f32); visit_f64(f64); visit_char(char);
        visit_bytes(&[u8]); visit_borrowed_bytes(&'de [u8]); visit_byte_buf(Vec<u8>);
    }

    fn visit_none<E: de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_none()
    }

    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, de: D) -> Result<V::Value, D::Error> {
        self.inner.visit_some(de)
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, de: D) -> Result<V::Value, D::Error> {
        self.inner.visit_newtype_struct(de)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<V::Value, A::Error> {
        self.inner.visit_seq(seq)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.inner.visit_map(map)
    }

    fn visit_enum<A: de::EnumAccess<'de>>(self, data: A) -> Result<V::Value, A::Error> {
        self.inner.visit_enum(data)
    }
}

#[cfg(test)]
mod tests {
    use std::marker::PhantomData;

    use herald_core::event::ApiGroup;
    use serde_json::json;

    use super::*;
    use crate::body::{EventSeed, decode_json_body};
    use crate::schema::openapi::unknown_fields;

    /// The check alone: decoding into a `Value` reads (and so checks) every part of the text.
    fn certain(gv: GroupVersion, body: &str) -> bool {
        decode_if_known(gv, body, PhantomData::<Value>).is_some()
    }

    #[test]
    fn every_property_is_found_in_its_own_slot() {
        for shape in [&*CORE_SHAPE, &*EVENTS_SHAPE] {
            assert!(shape.root.is_some());
            let mut objects = 0;
            for props in shape.nodes.iter().filter_map(|n| n.props.as_ref()) {
                objects += 1;
                // A table was found (the scan is only a fallback).
                assert!(!props.slots.is_empty(), "{:?}", props.names);
                for (i, (name, _)) in props.names.iter().enumerate() {
                    assert_eq!(props.find(name), Some(i));
                    assert_eq!(props.find(&format!("{name}x")), None);
                    assert_eq!(props.find(&name[..name.len() - 1]), None);
                }
                assert_eq!(props.find(""), None);
            }
            assert!(objects >= 5, "{objects}");
        }
        // Names that agree in every hashed byte: no table, found by the scan.
        let props = Props::new(vec![("axbyc".into(), 0), ("azbyc".into(), 1)]);
        assert!(props.slots.is_empty());
        assert_eq!(props.find("azbyc"), Some(1));
        assert_eq!(props.find("aqbyc"), None);
    }

    #[test]
    fn certain_exactly_when_nothing_is_unknown() {
        assert_eq!(CORE_EVENT, "io.k8s.api.core.v1.Event");
        assert_eq!(EVENTS_EVENT, "io.k8s.api.events.v1.Event");
        let clean = r#"{"apiVersion":"v1","kind":"Event","metadata":{"name":"a.1","namespace":"ns",
            "labels":{"any":"x"},"annotations":{"k":"v"},"ownerReferences":[{"apiVersion":"v1","kind":"Pod","name":"p","uid":"u"}],
            "managedFields":[{"manager":"m","fieldsV1":{"f:message":{},"anything":{"deep":[1]}}}]},
            "involvedObject":{"kind":"Pod","name":"p"},"reason":"R","message":"m \"spec\":{","count":2,
            "source":{"component":"c"},"series":{"count":2,"lastObservedTime":"2024-01-01T00:00:00.000000Z"},
            "firstTimestamp":null}"#;
        assert!(certain(GroupVersion::CORE_V1, clean));
        let ev = r#"{"apiVersion":"events.k8s.io/v1","kind":"Event","note":"n","regarding":{"kind":"Pod"}}"#;
        assert!(certain(GroupVersion::EVENTS_V1, ev));
        for (gv, body) in [
            (GroupVersion::CORE_V1, r#"{"spec":{}}"#),
            (
                GroupVersion::CORE_V1,
                r#"{"metadata":{"ownerReferences":[{"uid":"u","extra":1}]}}"#,
            ),
            (GroupVersion::CORE_V1, r#"{"involvedObject":{"nme":"x"}}"#),
            // A repeated key: the parsed value keeps only the last one.
            (GroupVersion::CORE_V1, r#"{"reason":"a","reason":"b"}"#),
            (GroupVersion::CORE_V1, r#"{"reason":"a""#),
            (GroupVersion::CORE_V1, r#"{"reason":"a"} x"#),
            (GroupVersion::EVENTS_V1, r#"{"message":"core only"}"#),
        ] {
            assert!(!certain(gv, body), "{body}");
        }
    }

    #[test]
    fn reads_escapes_repeats_and_depth() {
        let core = GroupVersion::CORE_V1;
        assert!(certain(core, r#"{"message":"a \"b\" \\ {[","reason":"}"}"#));
        // A key spelled with an escape is the key it spells.
        assert!(certain(core, r#"{"metadata":{"n\u0061me":"x"}}"#));
        assert!(!certain(core, r#"{"metadata":{"n\u0061mes":"x"}}"#));
        // Repeated keys, in a map of strings or among an object's properties, are for the
        // exact path to report.
        assert!(!certain(
            core,
            r#"{"metadata":{"labels":{"a":"1","a":"2"}}}"#
        ));
        assert!(certain(
            core,
            r#"{"metadata":{"labels":{"a":"1","b":"2"}}}"#
        ));
        assert!(!certain(core, r#"{"metadata":{"name":"a","name":"b"}}"#));
        // Anything goes inside a free-form value (`fieldsV1`), however deep.
        let mut deep = json!({"bogus": 1});
        for _ in 0..100 {
            deep = json!({"f:x": deep});
        }
        let body = json!({"metadata": {"managedFields": [{"fieldsV1": deep}]}});
        assert!(unknown_fields(core, &body).is_empty());
        assert!(certain(core, &body.to_string()));
        // Nesting past the decoder's recursion limit fails the decode: the caller takes the
        // exact path, which answers 400.
        let deep = format!(
            r#"{{"metadata":{{"managedFields":[{{"fieldsV1":{}{}}}]}}}}"#,
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        assert!(!certain(core, &deep));
    }

    #[test]
    fn decodes_the_event_the_plain_decode_gives() {
        let core = r#"{"apiVersion":"v1","kind":"Event","metadata":{"name":"a","namespace":"ns","labels":{}},
            "involvedObject":{"kind":"Pod","name":"p"},"reason":"R","message":"m","count":2}"#;
        let events = r#"{"apiVersion":"events.k8s.io/v1","kind":"Event","metadata":{"name":"b"},
            "regarding":{"kind":"Pod","name":"p"},"note":"n","reason":"R","eventTime":"2024-01-01T00:00:00.000000Z",
            "reportingController":"c","reportingInstance":"i","action":"A","type":"Normal"}"#;
        for (group, gv, body) in [
            (ApiGroup::Core, GroupVersion::CORE_V1, core),
            (ApiGroup::EventsV1, GroupVersion::EVENTS_V1, events),
        ] {
            let checked = decode_if_known(gv, body, EventSeed(group)).expect("decodes");
            assert_eq!(Some(checked), decode_json_body(group, body));
        }
        // An unknown field: the decode succeeds, but the answer is not certain.
        let bogus = r#"{"kind":"Event","metadata":{"name":"a","bogus":1}}"#;
        assert!(decode_json_body(ApiGroup::Core, bogus).is_some());
        assert!(decode_if_known(GroupVersion::CORE_V1, bogus, EventSeed(ApiGroup::Core)).is_none());
        // The other group's shape does not decode.
        assert!(
            decode_if_known(GroupVersion::EVENTS_V1, core, EventSeed(ApiGroup::EventsV1)).is_none()
        );
    }

    /// A decoder that skips the value of key `0` without reading it.
    struct Skips(&'static str);

    impl<'de> DeserializeSeed<'de> for Skips {
        type Value = ();

        fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<(), D::Error> {
            struct V(&'static str);
            impl<'de> Visitor<'de> for V {
                type Value = ();
                fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    f.write_str("an object")
                }
                fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
                    while let Some(key) = map.next_key::<String>()? {
                        if key == self.0 {
                            map.next_value::<de::IgnoredAny>()?;
                        } else {
                            map.next_value::<Value>()?;
                        }
                    }
                    Ok(())
                }
            }
            de.deserialize_map(V(self.0))
        }
    }

    #[test]
    fn a_value_the_decoder_skips_is_not_vouched_for() {
        let core = GroupVersion::CORE_V1;
        let body = r#"{"metadata":{"bogus":1},"reason":"r"}"#;
        // The schema inspects `metadata`: a decoder that skips it leaves it unchecked.
        assert!(decode_if_known(core, body, Skips("metadata")).is_none());
        assert!(decode_if_known(core, body, Skips("reason")).is_none());
        // Skipping a leaf (`reason` is a string) is fine: nothing in it could be unknown.
        let body = r#"{"metadata":{"name":"x"},"reason":{"any":"thing"}}"#;
        assert!(decode_if_known(core, body, Skips("reason")).is_some());
        assert!(decode_if_known(core, body, Skips("metadata")).is_none());
    }

    fn json_tree() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let key = prop::sample::select(vec![
            "metadata",
            "name",
            "labels",
            "annotations",
            "involvedObject",
            "kind",
            "count",
            "spec",
            "ownerReferences",
            "uid",
            "managedFields",
            "fieldsV1",
            "f:a",
            "series",
            "lastObservedTime",
            "note",
            "regarding",
            "reason",
            "x",
        ]);
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<i32>().prop_map(Value::from),
            "[a-z\"{}]{0,4}".prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 48, 6, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
                prop::collection::vec((key.clone(), inner), 0..6).prop_map(|kvs| {
                    Value::Object(kvs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
                }),
            ]
        })
    }

    proptest::proptest! {
        #[test]
        fn never_vouches_for_an_unknown_field(v in json_tree()) {
            for text in [serde_json::to_string(&v).unwrap(), serde_json::to_string_pretty(&v).unwrap()] {
                for gv in [GroupVersion::CORE_V1, GroupVersion::EVENTS_V1] {
                    let exact = unknown_fields(gv, &v);
                    // No repeated keys in serialized maps: certain exactly when nothing is unknown.
                    proptest::prop_assert_eq!(certain(gv, &text), exact.is_empty(), "{:?}", exact);
                }
            }
        }
    }
}
