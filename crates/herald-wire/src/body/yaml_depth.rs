//! The nesting bound of a YAML body, checked while it is scanned, before the YAML decoder
//! reads it whole.
//!
//! `serde_yaml_ng` parses a whole document into events before its recursion limit (128)
//! applies, and libyaml's scanner under it looks at every open flow collection (`[`, `{`) for
//! every token it reads: a body of `n` nested `[` costs O(n²) before it is refused (100 KB took
//! 5 s of CPU). [`check`] walks the same parser's events and stops at the first collection
//! nested deeper than [`MAX_YAML_DEPTH`], so a refused body costs at most the scan of its first
//! [`MAX_YAML_DEPTH`] levels plus libyaml's look-ahead (1,024 bytes): bounded work, whatever
//! its size. A body that passes has at most [`MAX_YAML_DEPTH`] open collections at any point,
//! so decoding it costs O(size × [`MAX_YAML_DEPTH`]) at worst.

// libyaml's parser is a C API ported to Rust: its calls are `unsafe`; each says why it is
// sound. Nothing else in this module is.
#![allow(unsafe_code)]

use std::mem::MaybeUninit;

/// The deepest nesting of collections (sequences and mappings, flow or block) a YAML body may
/// have: `serde_yaml_ng`'s recursion limit, and `serde_json`'s for JSON bodies.
pub const MAX_YAML_DEPTH: usize = 128;

/// A body whose nesting goes past [`MAX_YAML_DEPTH`]: where the first collection too deep
/// starts, as the parser saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("nested deeper than {MAX_YAML_DEPTH} levels at line {line} column {column}")]
pub struct TooDeep {
    /// The byte offset of that collection's start.
    pub offset: u64,
    /// Its line, from 1.
    pub line: u64,
    /// Its column, from 1.
    pub column: u64,
}

/// Refuses a YAML body (every document of it) nested deeper than [`MAX_YAML_DEPTH`], having
/// read no more of it than that (see the module docs). A body that is not valid YAML passes
/// when its error comes before any collection too deep: the decoder then reports the error,
/// having read no deeper either.
///
/// A body with no more `[` and `{` bytes than [`MAX_YAML_DEPTH`] cannot cost more than
/// O(size × [`MAX_YAML_DEPTH`]) to decode (only flow collections make libyaml's scan
/// quadratic, and block nesting is refused by the decoder's own limit), so it is not walked.
///
/// ```
/// use herald_wire::body::yaml_depth::{check, MAX_YAML_DEPTH};
/// // The top-level mapping is the first level.
/// let ok = format!("x: {}{}", "[".repeat(MAX_YAML_DEPTH - 1), "]".repeat(MAX_YAML_DEPTH - 1));
/// assert!(check(ok.as_bytes()).is_ok());
/// let deep = format!("x: {}{}", "[".repeat(50_000), "]".repeat(50_000));
/// let err = check(deep.as_bytes()).unwrap_err();
/// assert_eq!((err.line, err.column), (1, 3 + MAX_YAML_DEPTH as u64));
/// ```
pub fn check(body: &[u8]) -> Result<(), TooDeep> {
    let flow_opens = memchr::memchr2_iter(b'[', b'{', body).take(MAX_YAML_DEPTH + 1);
    if flow_opens.count() <= MAX_YAML_DEPTH {
        return Ok(());
    }
    walk(body)
}

/// [`check`] without its shortcut: walks the events of every document.
pub fn walk(body: &[u8]) -> Result<(), TooDeep> {
    let Some(mut parser) = Parser::new(body) else {
        // libyaml could not allocate its parser: the decoder will fail the same way.
        return Ok(());
    };
    let mut depth = 0usize;
    loop {
        let Some(event) = parser.next() else {
            return Ok(());
        };
        match event.kind {
            unsafe_libyaml::YAML_SEQUENCE_START_EVENT
            | unsafe_libyaml::YAML_MAPPING_START_EVENT => {
                depth += 1;
                if depth > MAX_YAML_DEPTH {
                    return Err(TooDeep {
                        offset: event.start.index,
                        line: event.start.line + 1,
                        column: event.start.column + 1,
                    });
                }
            }
            unsafe_libyaml::YAML_SEQUENCE_END_EVENT | unsafe_libyaml::YAML_MAPPING_END_EVENT => {
                depth = depth.saturating_sub(1);
            }
            unsafe_libyaml::YAML_STREAM_END_EVENT => return Ok(()),
            _ => {}
        }
    }
}

/// One parsed event: its type and where it starts.
struct Event {
    kind: unsafe_libyaml::yaml_event_type_t,
    start: unsafe_libyaml::yaml_mark_t,
}

/// libyaml's event parser over a borrowed body. Boxed, so that it does not move once
/// initialised.
struct Parser<'b> {
    sys: Box<MaybeUninit<unsafe_libyaml::yaml_parser_t>>,
    /// Whether the parser has failed or ended: no event is asked for after that.
    done: bool,
    _body: std::marker::PhantomData<&'b [u8]>,
}

impl<'b> Parser<'b> {
    fn new(body: &'b [u8]) -> Option<Self> {
        let mut sys = Box::new(MaybeUninit::<unsafe_libyaml::yaml_parser_t>::uninit());
        let p = sys.as_mut_ptr();
        // SAFETY: `p` points to writable memory for a parser, which `yaml_parser_initialize`
        // fills in (or fails without leaving anything to free).
        if unsafe { unsafe_libyaml::yaml_parser_initialize(p) }.fail {
            return None;
        }
        // SAFETY: the parser is initialised; it reads `body` through a pointer, and `body`
        // outlives the parser (`'b`). `usize` to `u64` never truncates here.
        unsafe {
            unsafe_libyaml::yaml_parser_set_encoding(p, unsafe_libyaml::YAML_UTF8_ENCODING);
            unsafe_libyaml::yaml_parser_set_input_string(p, body.as_ptr(), body.len() as u64);
        }
        Some(Parser {
            sys,
            done: false,
            _body: std::marker::PhantomData,
        })
    }

    /// The next event, or `None` at the end of the stream or at a parse error.
    fn next(&mut self) -> Option<Event> {
        if self.done {
            return None;
        }
        let mut event = MaybeUninit::<unsafe_libyaml::yaml_event_t>::uninit();
        let e = event.as_mut_ptr();
        // SAFETY: the parser is initialised and has not failed (`done`); `e` is writable
        // memory for an event, which the call fills in when it succeeds.
        if unsafe { unsafe_libyaml::yaml_parser_parse(self.sys.as_mut_ptr(), e) }.fail {
            self.done = true;
            return None;
        }
        // SAFETY: the call succeeded, so `*e` is an initialised event; it is read once and
        // then freed, and not used after.
        let (kind, start) = unsafe { ((*e).type_, (*e).start_mark) };
        unsafe { unsafe_libyaml::yaml_event_delete(e) };
        self.done = kind == unsafe_libyaml::YAML_STREAM_END_EVENT;
        Some(Event { kind, start })
    }
}

impl Drop for Parser<'_> {
    fn drop(&mut self) {
        // SAFETY: the parser was initialised in `new` (a `Parser` exists only then) and is
        // freed once, here.
        unsafe { unsafe_libyaml::yaml_parser_delete(self.sys.as_mut_ptr()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(n: usize) -> String {
        format!(
            "metadata: {{name: x}}\ninvolvedObject: {{}}\nx: {}{}\n",
            "[".repeat(n),
            "]".repeat(n)
        )
    }

    #[test]
    fn the_bound_is_the_decoders_limit() {
        // The top-level mapping is one level: 127 more fit, 128 more do not.
        assert_eq!(walk(nested(MAX_YAML_DEPTH - 1).as_bytes()), Ok(()));
        let err = walk(nested(MAX_YAML_DEPTH).as_bytes()).unwrap_err();
        assert_eq!((err.line, err.column), (3, 3 + MAX_YAML_DEPTH as u64));
        // Block nesting counts as well.
        let block: String = (0..=MAX_YAML_DEPTH)
            .map(|i| format!("{}k:\n", " ".repeat(i)))
            .collect();
        assert!(walk(block.as_bytes()).is_err());
    }

    #[test]
    fn a_refused_body_is_read_no_further_than_its_bound() {
        for n in [1_000, 50_000, 400_000] {
            let err = check(nested(n).as_bytes()).unwrap_err();
            // Where it stopped: the 128th `[`, whatever the size of the rest.
            assert_eq!(err.offset, 42 + MAX_YAML_DEPTH as u64 - 1);
        }
    }

    #[test]
    fn every_document_is_checked_and_errors_are_left_to_the_decoder() {
        let two = format!("a: 1\n---\n{}", nested(200));
        assert!(check(two.as_bytes()).is_err());
        let broken = format!("a: [}}\n{}", nested(200));
        assert_eq!(check(broken.as_bytes()), Ok(()));
    }
}
