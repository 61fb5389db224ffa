//! Reading stored JSON in place, for the transcoders (protobuf, `events.k8s.io/v1` JSON).
//!
//! A protobuf list item, an `events.k8s.io/v1` item and a Table row are written from the
//! stored event's members, most of them strings copied out unchanged; reading them is most
//! of an item's cost. This module reads them in place, with the searches of [`extent`].
//!
//! A [`Scanner`] is a cursor over the text. The caller walks the object as its schema says:
//! [`Scanner::object`] hands over each member's name, and the caller reads the value with
//! the reader of its type or [`Scanner::skip`]s it. The text is checked to be UTF-8 once,
//! strings are borrowed when they have no escapes (those with escapes are decoded by
//! `serde_json`), and every value, skipped or read, is checked to be JSON.
//!
//! Bound: anything this module does not read exactly as `serde_json` reads it into
//! k8s-openapi's types is a [`Decline`], and the caller takes the decoding path. That is:
//! a value of another type, a number with a fraction or an exponent, out of range or `-0`
//! where an integer is read, a `\u` escape of a surrogate, bytes that are not UTF-8, text
//! that is not JSON, a skipped value nested deeper than [`MAX_DEPTH`]. A member named twice
//! is read as k8s-openapi reads it: the last one counts.
//!
//! [`Scanner::raw_unchecked`] is the one exception to that check: it finds where an object
//! ends from its structure alone ([`extent`]), for members a transcoder copies
//! whole (the `metadata` of an `events.k8s.io/v1` item, a Table row or a
//! `PartialObjectMetadata`) or checks itself (a protobuf item's `fieldsV1`). String runs are
//! found 16 bytes at a time the same way.

pub mod extent;

use std::borrow::Cow;

use self::extent::{container_end, plain_run_end};

/// A transcoder cannot vouch for this object; the caller decodes it instead.
#[derive(Debug, PartialEq, Eq)]
pub struct Decline;

/// What a read gives: the value, or a [`Decline`].
pub type Scanned<T> = Result<T, Decline>;

/// Runs a transcoder's `write` into `out`: true when it wrote, false with `out` as it was
/// when it declined part-way (the caller then takes the decoding path).
pub fn write_whole(out: &mut Vec<u8>, write: impl FnOnce(&mut Vec<u8>) -> Scanned<()>) -> bool {
    let start = out.len();
    let written = write(out).is_ok();
    if !written {
        out.truncate(start);
    }
    written
}

/// How many arrays and objects deep a skipped or unchecked value may nest. Such values start
/// at most a few levels into an event (`fieldsV1` is the deepest), so what is accepted stays
/// well inside `serde_json`'s limit of 128, which the decoding path meets.
pub const MAX_DEPTH: usize = 64;

/// A cursor over one JSON value's text; see the module docs.
pub struct Scanner<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Scanner<'a> {
    /// A cursor at the start of `bytes`, which must be UTF-8.
    pub fn new(bytes: &'a [u8]) -> Scanned<Self> {
        // `simdutf8` checks an event in a third of `std`'s time.
        let text = simdutf8::basic::from_utf8(bytes).map_err(|_| Decline)?;
        Ok(Scanner { text, at: 0 })
    }

    /// Declines unless only whitespace is left: the text was one value.
    pub fn finish(mut self) -> Scanned<()> {
        self.space();
        if self.at == self.text.len() {
            Ok(())
        } else {
            Err(Decline)
        }
    }

    /// The object at the cursor: `member` is called with each member's name (escapes
    /// decoded) and must read or skip its value. Declines if the value is not an object.
    pub fn object(
        &mut self,
        mut member: impl FnMut(&mut Self, Cow<'a, str>) -> Scanned<()>,
    ) -> Scanned<()> {
        self.expect(b'{')?;
        if self.peek()? == b'}' {
            self.at += 1;
            return Ok(());
        }
        loop {
            let name = self.str()?;
            self.expect(b':')?;
            member(self, name)?;
            match self.next()? {
                b',' => {}
                b'}' => return Ok(()),
                _ => return Err(Decline),
            }
        }
    }

    /// The array at the cursor: `item` is called once per item and must read or skip it.
    pub fn array(&mut self, mut item: impl FnMut(&mut Self) -> Scanned<()>) -> Scanned<()> {
        self.expect(b'[')?;
        if self.peek()? == b']' {
            self.at += 1;
            return Ok(());
        }
        loop {
            item(self)?;
            match self.next()? {
                b',' => {}
                b']' => return Ok(()),
                _ => return Err(Decline),
            }
        }
    }

    /// Reads `null` if it is next: true then, false (nothing read) for any other value.
    pub fn null(&mut self) -> Scanned<bool> {
        if self.peek()? == b'n' {
            self.literal(b"null")?;
            return Ok(true);
        }
        Ok(false)
    }

    /// `None` for `null`, else `read`'s value: an `Option` member as serde reads it.
    pub fn nullable<T>(
        &mut self,
        read: impl FnOnce(&mut Self) -> Scanned<T>,
    ) -> Scanned<Option<T>> {
        if self.null()? {
            Ok(None)
        } else {
            read(self).map(Some)
        }
    }

    /// The next value's text, as stored (a `serde_json::value::RawValue`).
    pub fn raw(&mut self) -> Scanned<&'a str> {
        self.space();
        let start = self.at;
        self.skip_value(0)?;
        self.text.get(start..self.at).ok_or(Decline)
    }

    /// Skips the next value, checking that it is JSON.
    pub fn skip(&mut self) -> Scanned<()> {
        self.skip_value(0)
    }

    /// The next value's text, as stored; an object or array **unchecked**: its end is found
    /// from its structure alone ([`container_end`]) and its contents are neither read nor
    /// checked to be JSON. Any other value is checked, as [`Scanner::raw`] checks it. For
    /// members the store wrote with `serde_json` and a caller copies whole (or checks
    /// itself). Declines when the text ends first, or when the value nests deeper than
    /// [`MAX_DEPTH`] (the decoding path would reject the deepest).
    pub fn raw_unchecked(&mut self) -> Scanned<&'a str> {
        if !matches!(self.peek()?, b'{' | b'[') {
            return self.raw();
        }
        let start = self.at;
        let end = container_end(self.bytes(), start, MAX_DEPTH).ok_or(Decline)?;
        let raw = self.text.get(start..end).ok_or(Decline)?;
        self.at = end;
        Ok(raw)
    }

    /// A string as stored: quoted, its escapes (checked to be JSON's) kept.
    pub fn quoted(&mut self) -> Scanned<&'a str> {
        self.quoted_escaped().map(|(quoted, _)| quoted)
    }

    /// [`Scanner::quoted`], and whether the string has escapes.
    fn quoted_escaped(&mut self) -> Scanned<(&'a str, bool)> {
        self.expect(b'"')?;
        let start = self.at - 1;
        let escaped = self.string_rest()?;
        let quoted = self.text.get(start..self.at).ok_or(Decline)?;
        Ok((quoted, escaped))
    }

    /// A string, borrowed from the text unless it has escapes.
    pub fn str(&mut self) -> Scanned<Cow<'a, str>> {
        let (quoted, escaped) = self.quoted_escaped()?;
        if escaped {
            serde_json::from_str::<String>(quoted)
                .map(Cow::Owned)
                .map_err(|_| Decline)
        } else {
            quoted
                .get(1..quoted.len() - 1)
                .map(Cow::Borrowed)
                .ok_or(Decline)
        }
    }

    /// A boolean.
    pub fn bool(&mut self) -> Scanned<bool> {
        match self.peek()? {
            b't' => self.literal(b"true").map(|()| true),
            b'f' => self.literal(b"false").map(|()| false),
            _ => Err(Decline),
        }
    }

    /// An integer in `T`'s range: digits with an optional `-`, as `serde_json` reads an
    /// integer type (no fraction, no exponent, no leading zero, not `-0`).
    pub fn int<T: TryFrom<i64>>(&mut self) -> Scanned<T> {
        self.space();
        let start = self.at;
        self.number()?;
        // A fraction or an exponent does not parse as an `i64`; `-0` is a float to serde_json.
        let digits = self.text.get(start..self.at).ok_or(Decline)?;
        if digits == "-0" {
            return Err(Decline);
        }
        let n: i64 = digits.parse().map_err(|_| Decline)?;
        T::try_from(n).map_err(|_| Decline)
    }

    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    fn space(&mut self) {
        while self
            .bytes()
            .get(self.at)
            .is_some_and(|b| matches!(b, b' ' | b'\n' | b'\r' | b'\t'))
        {
            self.at += 1;
        }
    }

    /// The next byte after whitespace, not consumed.
    fn peek(&mut self) -> Scanned<u8> {
        self.space();
        self.bytes().get(self.at).copied().ok_or(Decline)
    }

    /// The next byte after whitespace, consumed.
    fn next(&mut self) -> Scanned<u8> {
        let b = self.peek()?;
        self.at += 1;
        Ok(b)
    }

    fn expect(&mut self, b: u8) -> Scanned<()> {
        if self.next()? == b {
            Ok(())
        } else {
            Err(Decline)
        }
    }

    fn literal(&mut self, word: &[u8]) -> Scanned<()> {
        if self
            .bytes()
            .get(self.at..)
            .is_some_and(|rest| rest.starts_with(word))
        {
            self.at += word.len();
            Ok(())
        } else {
            Err(Decline)
        }
    }

    /// After an opening quote: moves past the closing one. True when the string has
    /// escapes, each checked to be one JSON has.
    fn string_rest(&mut self) -> Scanned<bool> {
        let b = self.bytes();
        let mut i = self.at;
        let mut escaped = false;
        loop {
            i = plain_run_end(b, i);
            match b.get(i).copied().ok_or(Decline)? {
                b'"' => {
                    self.at = i + 1;
                    return Ok(escaped);
                }
                b'\\' => {
                    escaped = true;
                    i += match b.get(i + 1).copied().ok_or(Decline)? {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => 2,
                        b'u' => {
                            let hex = b.get(i + 2..i + 6).ok_or(Decline)?;
                            let hex = std::str::from_utf8(hex).map_err(|_| Decline)?;
                            let unit = u16::from_str_radix(hex, 16).map_err(|_| Decline)?;
                            // A surrogate is valid only in a pair; the decoding path
                            // knows which.
                            if (0xd800..0xe000).contains(&unit) || hex.starts_with('+') {
                                return Err(Decline);
                            }
                            6
                        }
                        _ => return Err(Decline),
                    };
                }
                // A control character: JSON has it escaped.
                _ => return Err(Decline),
            }
        }
    }

    /// A JSON number at the cursor (after whitespace).
    fn number(&mut self) -> Scanned<()> {
        let b = self.bytes();
        let mut i = self.at;
        let digits = |i: &mut usize| {
            let start = *i;
            while b.get(*i).is_some_and(u8::is_ascii_digit) {
                *i += 1;
            }
            *i > start
        };
        if b.get(i) == Some(&b'-') {
            i += 1;
        }
        match b.get(i) {
            Some(b'0') => i += 1,
            Some(b'1'..=b'9') => {
                digits(&mut i);
            }
            _ => return Err(Decline),
        }
        if b.get(i) == Some(&b'.') {
            i += 1;
            if !digits(&mut i) {
                return Err(Decline);
            }
        }
        if matches!(b.get(i), Some(b'e' | b'E')) {
            i += 1;
            if matches!(b.get(i), Some(b'+' | b'-')) {
                i += 1;
            }
            if !digits(&mut i) {
                return Err(Decline);
            }
        }
        self.at = i;
        Ok(())
    }

    fn skip_value(&mut self, depth: usize) -> Scanned<()> {
        if depth >= MAX_DEPTH {
            return Err(Decline);
        }
        match self.peek()? {
            b'"' => {
                self.at += 1;
                self.string_rest().map(drop)
            }
            b'{' => self.object(|s, _| s.skip_value(depth + 1)),
            b'[' => self.array(|s| s.skip_value(depth + 1)),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            _ => self.number(),
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::Value;
    use serde_json::value::RawValue;

    use super::*;

    /// The value at the start of `text` read back through the scanner into a `Value`:
    /// objects and arrays walked, strings read, numbers and literals taken raw.
    fn rebuild(s: &mut Scanner<'_>) -> Scanned<Value> {
        Ok(match s.peek()? {
            b'{' => {
                let mut m = serde_json::Map::new();
                s.object(|s, k| {
                    let v = rebuild(s)?;
                    m.insert(k.into_owned(), v);
                    Ok(())
                })?;
                Value::Object(m)
            }
            b'[' => {
                let mut items = Vec::new();
                s.array(|s| {
                    items.push(rebuild(s)?);
                    Ok(())
                })?;
                Value::Array(items)
            }
            b'"' => Value::String(s.str()?.into_owned()),
            _ => serde_json::from_str(s.raw()?).map_err(|_| Decline)?,
        })
    }

    fn scanned(text: &str) -> Scanned<Value> {
        let mut s = Scanner::new(text.as_bytes())?;
        let v = rebuild(&mut s)?;
        s.finish()?;
        Ok(v)
    }

    fn skipped(text: &str) -> Scanned<&str> {
        let mut s = Scanner::new(text.as_bytes())?;
        let raw = s.raw()?;
        s.finish()?;
        Ok(raw)
    }

    #[test]
    fn values_read_as_serde_reads_them() {
        for text in [
            r#"{"a":"x","b":{"c":[1,-2,0.5,-0e+3,1E9,true,false,null,{}]},"d":[],"e":{}}"#,
            r#" { "a" : "tab\tquote\"slash\\\/uni\u00e9\u0001" , "k\"ey" : [ ] } "#,
            r#""é 🎉 plain""#,
            r#"[[[[["deep"]]]]]"#,
            "12",
            "-0",
        ] {
            let want: Value = serde_json::from_str(text).unwrap();
            assert_eq!(scanned(text), Ok(want.clone()), "{text}");
            let raw: &RawValue = serde_json::from_str(text).unwrap();
            assert_eq!(skipped(text), Ok(raw.get()), "{text}");
        }
    }

    #[test]
    fn text_that_is_not_json_declines() {
        for text in [
            "",
            "{",
            r#"{"a":1,}"#,
            r#"{"a" 1}"#,
            r#"{"a":1 "b":2}"#,
            "[1,]",
            "[1 2]",
            "01",
            "1.",
            ".5",
            "1e",
            "-",
            "+1",
            "tru",
            "nul",
            r#""open"#,
            "\"ctl\u{1}\"",
            r#""\x""#,
            r#""\u12""#,
            r#""\u+123""#,
            r#"{1:2}"#,
            "1 2",
            "[]]",
        ] {
            assert_eq!(scanned(text), Err(Decline), "{text:?}");
            assert!(serde_json::from_str::<Value>(text).is_err(), "{text:?}");
        }
        let deep = |n| "[".repeat(n) + &"]".repeat(n);
        assert!(skipped(&deep(MAX_DEPTH)).is_ok());
        assert_eq!(skipped(&deep(MAX_DEPTH + 1)), Err(Decline));
        assert_eq!(Scanner::new(b"\"\xff\"").err(), Some(Decline));
    }

    #[test]
    fn surrogate_escapes_are_left_to_serde() {
        assert_eq!(scanned(r#""\ud83c\udf89""#), Err(Decline));
        assert_eq!(scanned(r#""\ud800""#), Err(Decline));
    }

    #[test]
    fn integers_are_read_as_serde_reads_integer_types() {
        let int = |text: &str| {
            let mut s = Scanner::new(text.as_bytes()).unwrap();
            let n = s.int::<i32>()?;
            s.finish().map(|()| n)
        };
        assert_eq!(int("7"), Ok(7));
        assert_eq!(int(" -2147483648"), Ok(i32::MIN));
        for text in ["2147483648", "1.0", "1e2", "01", "-0", "\"1\"", "null", "-"] {
            assert_eq!(int(text), Err(Decline), "{text}");
            assert!(serde_json::from_str::<i32>(text).is_err(), "{text}");
        }
        let mut s = Scanner::new(b"9223372036854775808").unwrap();
        assert_eq!(s.int::<i64>(), Err(Decline));
    }

    #[test]
    fn nullable_members_are_none_for_null() {
        let mut s = Scanner::new(br#"[null,"x",true]"#).unwrap();
        let mut got = Vec::new();
        let mut n = 0;
        s.array(|s| {
            n += 1;
            match n {
                3 => got.push(s.nullable(Scanner::bool)?.map(|b| b.to_string())),
                _ => got.push(s.nullable(Scanner::str)?.map(Cow::into_owned)),
            }
            Ok(())
        })
        .unwrap();
        assert_eq!(got, [None, Some("x".into()), Some("true".into())]);
    }

    /// JSON values of every kind, strings with anything in them.
    fn any_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            any::<String>().prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::btree_map(any::<String>(), inner, 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// Whatever `serde_json` writes, compact or pretty, reads back as the same value
        /// and skips as the same raw text, unless a string holds a surrogate escape (which
        /// `serde_json` never writes).
        #[test]
        fn serde_json_text_reads_back(v in any_json(), pretty in any::<bool>()) {
            let text = if pretty {
                serde_json::to_string_pretty(&v).unwrap()
            } else {
                serde_json::to_string(&v).unwrap()
            };
            // Floats as `serde_json` reads its own text back (not always `v`'s bits).
            let want: Value = serde_json::from_str(&text).unwrap();
            prop_assert_eq!(scanned(&text), Ok(want));
            prop_assert_eq!(skipped(&text), Ok(text.trim()));
        }
    }
}
