//! Label selectors with kube-apiserver's syntax, errors and matching, plus the syntax rules
//! for label keys, label values and DNS names that object validation shares with them.
//!
//! The grammar is the one `labels.Parse` accepts: comma-separated requirements that are all
//! ANDed, each one of `key`, `!key`, `key=value`, `key==value`, `key!=value`,
//! `key in (v1,v2)`, `key notin (v1)`, `key>1`, `key<1`. Keys must be qualified names and
//! values valid label values. A malformed selector is a 400 `BadRequest` whose message is
//! the one kube-apiserver sends, so clients that show it print the same text.
//!
//! ```
//! use std::collections::BTreeMap;
//! use herald_core::labels::Selector;
//! let sel = Selector::parse("app=web, tier in (front,back), !canary").unwrap();
//! let mut labels = BTreeMap::new();
//! labels.insert("app".to_string(), "web".to_string());
//! labels.insert("tier".to_string(), "front".to_string());
//! assert!(sel.matches(&labels));
//! assert_eq!(sel.to_string(), "app=web,!canary,tier in (back,front)");
//! let err = Selector::parse("app in web").unwrap_err();
//! assert_eq!(err.message, "unable to parse requirement: found 'web' expected: '('");
//! ```

// The HTTP layer's contract is `Result<_, ApiError>` (a `Status` body); errors are the cold
// path, so the size of `ApiError` is not worth a box here.
#![allow(clippy::result_large_err)]

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use crate::status::ApiError;

// ---------------------------------------------------------------------------------------------
// Syntax rules (apimachinery's util/validation), returning kube's messages.
// ---------------------------------------------------------------------------------------------

pub use crate::naming::{DNS1123_LABEL_MAX_LEN, DNS1123_SUBDOMAIN_MAX_LEN};

/// The longest name part of a qualified name (label keys, annotation keys, finalizers).
pub const QUALIFIED_NAME_MAX_LEN: usize = 63;
/// The longest label value.
pub const LABEL_VALUE_MAX_LEN: usize = 63;

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_LABEL_ERR: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_ERR: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_NAME_ERR: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_ERR: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

/// apimachinery's `RegexError`: the message, examples and the regex used.
fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{msg} (regex used for validation is '{fmt}')");
    }
    let ex = examples
        .iter()
        .map(|e| format!("'{e}', "))
        .collect::<Vec<_>>()
        .join(" or ");
    format!("{msg} (e.g. {ex}regex used for validation is '{fmt}')")
}

/// apimachinery's `MaxLenError`.
pub fn max_len_error(n: usize) -> String {
    format!("must be no more than {n} characters")
}

fn is_lower_alnum(c: u8) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?` over the whole string.
fn matches_dns_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && is_lower_alnum(b[0])
        && is_lower_alnum(b[b.len() - 1])
        && b.iter().all(|&c| is_lower_alnum(c) || c == b'-')
}

fn matches_dns_subdomain(s: &str) -> bool {
    s.split('.').all(matches_dns_label)
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]` over the whole string.
fn matches_qualified_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// The problems with `value` as a DNS-1123 subdomain (≤253 characters), in kube's words;
/// empty when it is valid.
pub fn dns1123_subdomain_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX_LEN {
        errs.push(max_len_error(DNS1123_SUBDOMAIN_MAX_LEN));
    }
    if !matches_dns_subdomain(value) {
        errs.push(regex_error(
            DNS1123_SUBDOMAIN_ERR,
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errs
}

/// The problems with `value` as a DNS-1123 label (≤63 characters, the namespace rule), in
/// kube's words; empty when it is valid.
pub fn dns1123_label_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_LABEL_MAX_LEN {
        errs.push(max_len_error(DNS1123_LABEL_MAX_LEN));
    }
    if !matches_dns_label(value) {
        if matches_dns_subdomain(value) {
            errs.push("must not contain dots".to_string());
        } else {
            errs.push(regex_error(
                DNS1123_LABEL_ERR,
                DNS1123_LABEL_FMT,
                &["my-name", "123-abc"],
            ));
        }
    }
    errs
}

/// The problems with `value` as a qualified name (`[prefix/]name`: an optional DNS-1123
/// subdomain prefix and a name part of at most 63 characters), in kube's words; empty when
/// it is valid. Label keys, annotation keys (lowercased) and `reportingController` use it.
pub fn qualified_name_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                errs.extend(
                    dns1123_subdomain_errors(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            *name
        }
        _ => {
            errs.push(format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(
                    QUALIFIED_NAME_ERR,
                    QUALIFIED_NAME_FMT,
                    &["MyName", "my.name", "123-abc"]
                )
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > QUALIFIED_NAME_MAX_LEN {
        errs.push(format!(
            "name part {}",
            max_len_error(QUALIFIED_NAME_MAX_LEN)
        ));
    }
    if !matches_qualified_name_part(name) {
        errs.push(format!(
            "name part {}",
            regex_error(
                QUALIFIED_NAME_ERR,
                QUALIFIED_NAME_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errs
}

/// The problems with `value` as a label value (empty, or ≤63 characters of alphanumerics,
/// `-`, `_`, `.` starting and ending alphanumeric), in kube's words.
pub fn label_value_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > LABEL_VALUE_MAX_LEN {
        errs.push(max_len_error(LABEL_VALUE_MAX_LEN));
    }
    if !value.is_empty() && !matches_qualified_name_part(value) {
        errs.push(regex_error(
            LABEL_VALUE_ERR,
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// Go's `%q` for a string: double-quoted with Go escapes, used wherever kube-apiserver quotes
/// a bad value in a message.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

// ---------------------------------------------------------------------------------------------
// Selector model
// ---------------------------------------------------------------------------------------------

/// The operator of one requirement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operator {
    /// `key in (a,b)`: the label exists and its value is one of the values.
    In,
    /// `key notin (a,b)`: the label is absent or its value is none of the values.
    NotIn,
    /// `key=value`.
    Equals,
    /// `key==value` (same meaning as `=`).
    DoubleEquals,
    /// `key!=value`: absent or different.
    NotEquals,
    /// `key`: the label exists.
    Exists,
    /// `!key`: the label does not exist.
    DoesNotExist,
    /// `key>N`: the value parses as an integer greater than N.
    GreaterThan,
    /// `key<N`: the value parses as an integer less than N.
    LessThan,
}

/// One term of a selector: a key, an operator and its (sorted, de-duplicated) values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    key: String,
    operator: Operator,
    values: Vec<String>,
}

impl Requirement {
    /// The label key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The operator.
    pub fn operator(&self) -> Operator {
        self.operator
    }

    /// The values, sorted and without duplicates (empty for `Exists`/`DoesNotExist`).
    pub fn values(&self) -> &[String] {
        &self.values
    }

    /// Whether a label set satisfies this requirement (kube's `Requirement.Matches`).
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let got = labels.get(&self.key);
        let has = |v: &String| self.values.iter().any(|x| x == v);
        match self.operator {
            Operator::In | Operator::Equals | Operator::DoubleEquals => got.is_some_and(has),
            Operator::NotIn | Operator::NotEquals => !got.is_some_and(has),
            Operator::Exists => got.is_some(),
            Operator::DoesNotExist => got.is_none(),
            Operator::GreaterThan | Operator::LessThan => {
                let Some(have) = got.and_then(|v| v.parse::<i64>().ok()) else {
                    return false;
                };
                let [want] = self.values.as_slice() else {
                    return false;
                };
                let Ok(want) = want.parse::<i64>() else {
                    return false;
                };
                if self.operator == Operator::GreaterThan {
                    have > want
                } else {
                    have < want
                }
            }
        }
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.operator == Operator::DoesNotExist {
            f.write_str("!")?;
        }
        f.write_str(&self.key)?;
        let (op, parens) = match self.operator {
            Operator::Exists | Operator::DoesNotExist => return Ok(()),
            Operator::Equals => ("=", false),
            Operator::DoubleEquals => ("==", false),
            Operator::NotEquals => ("!=", false),
            Operator::In => (" in ", true),
            Operator::NotIn => (" notin ", true),
            Operator::GreaterThan => (">", false),
            Operator::LessThan => ("<", false),
        };
        f.write_str(op)?;
        if parens {
            f.write_str("(")?;
        }
        f.write_str(&self.values.join(","))?;
        if parens {
            f.write_str(")")?;
        }
        Ok(())
    }
}

/// A parsed label selector: requirements sorted by key, all of which must hold. The empty
/// selector matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selector {
    requirements: Vec<Requirement>,
}

impl Selector {
    /// The selector that matches every label set (what an absent `labelSelector` means).
    pub fn everything() -> Self {
        Self::default()
    }

    /// Parses kube's label selector syntax. Errors are 400 `BadRequest` with kube-apiserver's
    /// message (e.g. `unable to parse requirement: found '', expected: identifier`).
    pub fn parse(input: &str) -> Result<Self, ApiError> {
        parse(input).map_err(ApiError::bad_request)
    }

    /// True when there is no requirement (matches everything).
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// The requirements, sorted by key.
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    /// Whether `labels` satisfies every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }

    /// [`Selector::matches`] for an object's optional `metadata.labels` (absent = no labels).
    pub fn matches_opt(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        static EMPTY: BTreeMap<String, String> = BTreeMap::new();
        self.matches(labels.unwrap_or(&EMPTY))
    }

    /// The value `key` must have for a match, if a `=`, `==` or single-valued `in` requirement
    /// pins it (kube's `RequiresExactMatch`; useful for index lookups).
    pub fn requires_exact_match(&self, key: &str) -> Option<&str> {
        self.requirements.iter().find_map(|r| {
            let pinned = matches!(
                r.operator,
                Operator::Equals | Operator::DoubleEquals | Operator::In
            ) && r.values.len() == 1;
            (r.key == key && pinned).then(|| r.values[0].as_str())
        })
    }
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

impl FromStr for Selector {
    type Err = ApiError;
    fn from_str(s: &str) -> Result<Self, ApiError> {
        Selector::parse(s)
    }
}

// ---------------------------------------------------------------------------------------------
// Lexer and parser (same token rules and messages as apimachinery's labels parser)
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tok {
    Identifier,
    ClosedPar,
    Comma,
    DoesNotExist,
    DoubleEquals,
    Equals,
    GreaterThan,
    In,
    LessThan,
    NotEquals,
    NotIn,
    OpenPar,
    End,
}

fn keyword(s: &str) -> Option<Tok> {
    Some(match s {
        ")" => Tok::ClosedPar,
        "," => Tok::Comma,
        "!" => Tok::DoesNotExist,
        "==" => Tok::DoubleEquals,
        "=" => Tok::Equals,
        ">" => Tok::GreaterThan,
        "in" => Tok::In,
        "<" => Tok::LessThan,
        "!=" => Tok::NotEquals,
        "notin" => Tok::NotIn,
        "(" => Tok::OpenPar,
        _ => return None,
    })
}

fn is_whitespace(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_special(c: u8) -> bool {
    matches!(c, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

/// Splits the input into tokens; a NUL byte ends the input as it does for kube's lexer.
fn lex(input: &str) -> Vec<(Tok, &str)> {
    let b = input.as_bytes();
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    let mut pos = 0;
    let mut out = Vec::new();
    loop {
        while pos < end && is_whitespace(b[pos]) {
            pos += 1;
        }
        if pos >= end {
            out.push((Tok::End, ""));
            return out;
        }
        let start = pos;
        if is_special(b[pos]) {
            // Longest run of special symbols that is still a token.
            let mut last: Option<(Tok, usize)> = None;
            while pos < end && is_special(b[pos]) {
                match keyword(&input[start..=pos]) {
                    Some(t) => last = Some((t, pos + 1)),
                    None if last.is_some() => break,
                    None => {}
                }
                pos += 1;
            }
            // Every single special symbol is a token, so `last` is always set here.
            let (tok, stop) = last.unwrap_or((Tok::Identifier, pos));
            pos = stop;
            out.push((tok, &input[start..stop]));
        } else {
            while pos < end && !is_special(b[pos]) && !is_whitespace(b[pos]) {
                pos += 1;
            }
            let lit = &input[start..pos];
            out.push((keyword(lit).unwrap_or(Tok::Identifier), lit));
        }
    }
}

/// Parser state: the token list and a cursor. `values` context turns `in`/`notin` into
/// identifiers, exactly as kube's parser does outside operator position.
struct Parser<'a> {
    toks: Vec<(Tok, &'a str)>,
    pos: usize,
}

impl<'a> Parser<'a> {
    fn look(&self, values: bool) -> (Tok, &'a str) {
        let (t, l) = self.toks[self.pos.min(self.toks.len() - 1)];
        if values && matches!(t, Tok::In | Tok::NotIn) {
            (Tok::Identifier, l)
        } else {
            (t, l)
        }
    }

    fn next(&mut self, values: bool) -> (Tok, &'a str) {
        let r = self.look(values);
        if self.pos < self.toks.len() - 1 {
            self.pos += 1;
        }
        r
    }
}

fn parse(input: &str) -> Result<Selector, String> {
    let mut p = Parser {
        toks: lex(input),
        pos: 0,
    };
    let mut reqs = Vec::new();
    loop {
        let (tok, lit) = p.look(true);
        match tok {
            Tok::Identifier | Tok::DoesNotExist => {
                let r = parse_requirement(&mut p)
                    .map_err(|e| format!("unable to parse requirement: {e}"))?;
                reqs.push(r);
                let (t, l) = p.next(true);
                match t {
                    Tok::End => break,
                    Tok::Comma => {
                        let (t2, l2) = p.look(true);
                        if t2 != Tok::Identifier && t2 != Tok::DoesNotExist {
                            return Err(format!("found '{l2}', expected: identifier after ','"));
                        }
                    }
                    _ => return Err(format!("found '{l}', expected: ',' or 'end of string'")),
                }
            }
            Tok::End => break,
            _ => {
                return Err(format!(
                    "found '{lit}', expected: !, identifier, or 'end of string'"
                ));
            }
        }
    }
    reqs.sort_by(|a: &Requirement, b: &Requirement| a.key.cmp(&b.key));
    Ok(Selector { requirements: reqs })
}

fn key_error(key: &str) -> Option<String> {
    let errs = qualified_name_errors(key);
    (!errs.is_empty()).then(|| format!("Invalid value: {}: {}", go_quote(key), errs.join("; ")))
}

fn parse_requirement(p: &mut Parser<'_>) -> Result<Requirement, String> {
    let (mut tok, mut lit) = p.next(true);
    let mut op = None;
    if tok == Tok::DoesNotExist {
        op = Some(Operator::DoesNotExist);
        (tok, lit) = p.next(true);
    }
    if tok != Tok::Identifier {
        return Err(format!("found '{lit}', expected: identifier"));
    }
    // The parser validates the key with a nil field path, which Go prints as `<nil>`.
    if let Some(e) = key_error(lit) {
        return Err(format!("<nil>: {e}"));
    }
    let key = lit.to_string();
    if op.is_none() && matches!(p.look(true).0, Tok::End | Tok::Comma) {
        op = Some(Operator::Exists);
    }
    if let Some(op) = op {
        return new_requirement(key, op, Vec::new());
    }
    let (tok, lit) = p.next(false);
    let op = match tok {
        Tok::In => Operator::In,
        Tok::Equals => Operator::Equals,
        Tok::DoubleEquals => Operator::DoubleEquals,
        Tok::GreaterThan => Operator::GreaterThan,
        Tok::LessThan => Operator::LessThan,
        Tok::NotIn => Operator::NotIn,
        Tok::NotEquals => Operator::NotEquals,
        _ => {
            return Err(format!(
                "found '{lit}', expected: in, notin, =, ==, !=, gt, lt"
            ));
        }
    };
    let values = match op {
        Operator::In | Operator::NotIn => parse_values(p)?,
        _ => parse_exact_value(p)?,
    };
    new_requirement(key, op, values)
}

fn parse_values(p: &mut Parser<'_>) -> Result<Vec<String>, String> {
    let (tok, lit) = p.next(true);
    if tok != Tok::OpenPar {
        return Err(format!("found '{lit}' expected: '('"));
    }
    let (tok, lit) = p.look(true);
    match tok {
        Tok::Identifier | Tok::Comma => {
            let s = parse_identifiers(p)?;
            if p.next(true).0 != Tok::ClosedPar {
                return Err(format!("found '{lit}', expected: ')'"));
            }
            Ok(s)
        }
        Tok::ClosedPar => {
            p.next(true);
            Ok(vec![String::new()])
        }
        _ => Err(format!("found '{lit}', expected: ',', ')' or identifier")),
    }
}

fn parse_identifiers(p: &mut Parser<'_>) -> Result<Vec<String>, String> {
    let mut s: Vec<String> = Vec::new();
    let insert = |s: &mut Vec<String>, v: &str| {
        if !s.iter().any(|x| x == v) {
            s.push(v.to_string());
        }
    };
    loop {
        let (tok, lit) = p.next(true);
        match tok {
            Tok::Identifier => {
                insert(&mut s, lit);
                let (t2, l2) = p.look(true);
                match t2 {
                    Tok::Comma => continue,
                    Tok::ClosedPar => return Ok(s),
                    _ => return Err(format!("found '{l2}', expected: ',' or ')'")),
                }
            }
            Tok::Comma => {
                if s.is_empty() {
                    insert(&mut s, "");
                }
                match p.look(true).0 {
                    Tok::ClosedPar => {
                        insert(&mut s, "");
                        return Ok(s);
                    }
                    Tok::Comma => {
                        p.next(true);
                        insert(&mut s, "");
                    }
                    _ => {}
                }
            }
            _ => return Err(format!("found '{lit}', expected: ',', or identifier")),
        }
    }
}

fn parse_exact_value(p: &mut Parser<'_>) -> Result<Vec<String>, String> {
    if matches!(p.look(true).0, Tok::End | Tok::Comma) {
        return Ok(vec![String::new()]);
    }
    let (tok, lit) = p.next(true);
    if tok == Tok::Identifier {
        Ok(vec![lit.to_string()])
    } else {
        Err(format!("found '{lit}', expected: identifier"))
    }
}

/// kube's `NewRequirement` checks: value syntax and the integer rule of `gt`/`lt`.
fn new_requirement(
    key: String,
    op: Operator,
    mut values: Vec<String>,
) -> Result<Requirement, String> {
    values.sort();
    values.dedup();
    let mut errs = Vec::new();
    if matches!(op, Operator::GreaterThan | Operator::LessThan) {
        for (i, v) in values.iter().enumerate() {
            if v.parse::<i64>().is_err() {
                errs.push(format!(
                    "values[{i}]: Invalid value: {}: for 'Gt', 'Lt' operators, the value must be an integer",
                    go_quote(v)
                ));
            }
        }
    }
    for (i, v) in values.iter().enumerate() {
        let e = label_value_errors(v);
        if !e.is_empty() {
            errs.push(format!(
                "values[{i}][{key}]: Invalid value: {}: {}",
                go_quote(v),
                e.join("; ")
            ));
        }
    }
    match errs.len() {
        0 => Ok(Requirement {
            key,
            operator: op,
            values,
        }),
        1 => Err(errs.remove(0)),
        _ => Err(format!("[{}]", errs.join(", "))),
    }
}
