//! Where a stored JSON object or array ends, found from its structure alone.
//!
//! The transcoders copy some stored members whole, unread: an `events.k8s.io/v1` item's
//! `metadata`, a protobuf item's `fieldsV1`. Parsing such a member only to skip it would
//! be most of an item's cost. [`container_end`] finds its end without parsing: it looks at
//! 64 bytes at a time for the four bytes that matter (`"`, `\`, brackets and braces),
//! works out from the quotes which bytes are inside strings, and counts the brackets
//! outside them (on x86-64 it compares 16 bytes an instruction; elsewhere it walks the
//! bytes).
//!
//! Bound: this is not a JSON check. For JSON text it answers exactly where the value ends
//! (the property tests hold it to `serde_json`); for other text it answers some position
//! or `None`, never panics and never reads outside `text`. Callers use it only on bytes the
//! store wrote with `serde_json`, which is JSON, and say in their docs what they copy
//! without checking.

/// The end (exclusive) of the object or array that starts at `text[start]`, or `None` when
/// `text[start]` is not `{` or `[`, when the text ends first, or when it nests more than
/// `max_depth` objects and arrays deep (counting the outermost): the decoding path has a
/// depth limit, and what it would reject must not be copied. `}` and `]` are counted
/// alike: for JSON text the first bracket that closes the outermost is its own.
pub fn container_end(text: &[u8], start: usize, max_depth: usize) -> Option<usize> {
    if !matches!(text.get(start), Some(b'{' | b'[')) {
        return None;
    }
    let mut state = State {
        max_depth: u32::try_from(max_depth).unwrap_or(u32::MAX),
        ..State::default()
    };
    let mut at = start;
    let mut padded = [0u8; BLOCK];
    while at < text.len() {
        let block: &[u8; BLOCK] = match text.get(at..at + BLOCK) {
            Some(whole) => whole.try_into().ok()?,
            None => {
                // The last block, padded with zeros, which are neither quotes nor brackets.
                let tail = &text[at..];
                padded[..tail.len()].copy_from_slice(tail);
                &padded
            }
        };
        match state.block(block) {
            Step::Closed(end) => return Some(at + end),
            Step::TooDeep => return None,
            Step::Open => {}
        }
        at += BLOCK;
    }
    None
}

/// The index of the first byte at or after `at` that ends a string's plain run (`"`, `\`
/// or a control character, which JSON escapes), or `text.len()`. Strings in a stored
/// event are short but many; on x86-64 this looks at 16 bytes an instruction.
// SSE2 intrinsics are `unsafe` to call; each call site says why it is sound.
#[allow(unsafe_code)]
pub fn plain_run_end(text: &[u8], mut at: usize) -> usize {
    #[cfg(target_arch = "x86_64")]
    while let Some(chunk) = text.get(at..at + 16) {
        use std::arch::x86_64::{
            __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_min_epu8, _mm_movemask_epi8,
            _mm_or_si128, _mm_set1_epi8,
        };
        // SAFETY: SSE2 is part of every x86-64 CPU; the load reads the 16 bytes of `chunk`.
        let stops = unsafe {
            let v = _mm_loadu_si128(chunk.as_ptr().cast::<__m128i>());
            let quote = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8));
            let backslash = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8));
            // Unsigned `v <= 0x1f`: the control characters.
            let control = _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x1f)), v);
            _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(quote, backslash), control))
        };
        if stops != 0 {
            return at + stops.trailing_zeros() as usize;
        }
        at += 16;
    }
    at + text
        .get(at..)
        .unwrap_or_default()
        .iter()
        .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
        .unwrap_or(text.len().saturating_sub(at))
}

/// Bytes looked at together: one bit each in a `u64`.
const BLOCK: usize = 64;

/// What a block held.
enum Step {
    /// The outermost bracket closes at this offset.
    Closed(usize),
    /// More brackets open at once than the bound allows.
    TooDeep,
    /// Neither: the next block follows.
    Open,
}

/// The scan's position between two blocks.
#[derive(Default)]
struct State {
    /// Brackets open, counting the outermost.
    depth: u32,
    /// The most brackets that may be open at once.
    max_depth: u32,
    /// Inside a string at the end of the last block.
    in_string: bool,
    /// The last block ended inside a string on a `\` that escapes this block's first byte.
    escape_pending: bool,
}

impl State {
    /// Moves over one block.
    fn block(&mut self, block: &[u8; BLOCK]) -> Step {
        let m = Masks::of(block);
        // Escapes are rare in stored events: a block with one is walked byte by byte.
        if m.backslash != 0 || self.escape_pending {
            return self.walk(block);
        }
        // Bit i is set for the bytes from an opening quote up to (not including) its closing
        // quote: the running parity of quotes, with the parity carried in.
        let mut inside = prefix_xor(m.quote);
        if self.in_string {
            inside = !inside;
        }
        self.in_string = inside >> 63 == 1;
        let opens = m.open & !inside;
        let closes = m.close & !inside;
        let (n_open, n_close) = (opens.count_ones(), closes.count_ones());
        // The depth cannot reach zero in this block when it has fewer closings than that,
        // nor pass the bound when even all its openings first would not.
        if n_close < self.depth && self.depth + n_open <= self.max_depth {
            self.depth = self.depth - n_close + n_open;
            return Step::Open;
        }
        let mut brackets = opens | closes;
        while brackets != 0 {
            let i = brackets.trailing_zeros();
            if let Some(step) = self.bracket(opens >> i & 1 == 1, i as usize) {
                return step;
            }
            brackets &= brackets - 1;
        }
        Step::Open
    }

    /// Counts the bracket at offset `i`: the step it ends the scan with, if it does.
    fn bracket(&mut self, opens: bool, i: usize) -> Option<Step> {
        if opens {
            self.depth += 1;
            return (self.depth > self.max_depth).then_some(Step::TooDeep);
        }
        // Not JSON if the depth is already zero: more closings than openings. Any answer
        // will do; this one ends.
        self.depth = self.depth.saturating_sub(1);
        (self.depth == 0).then_some(Step::Closed(i + 1))
    }

    /// [`State::block`] one byte at a time.
    fn walk(&mut self, block: &[u8; BLOCK]) -> Step {
        for (i, &b) in block.iter().enumerate() {
            if self.escape_pending {
                self.escape_pending = false;
                continue;
            }
            let step = match (self.in_string, b) {
                (true, b'\\') => {
                    self.escape_pending = true;
                    None
                }
                (_, b'"') => {
                    self.in_string = !self.in_string;
                    None
                }
                (false, b'{' | b'[') => self.bracket(true, i),
                (false, b'}' | b']') => self.bracket(false, i),
                _ => None,
            };
            if let Some(step) = step {
                return step;
            }
        }
        Step::Open
    }
}

/// `x` with each bit replaced by the parity of the bits up to and including it.
fn prefix_xor(mut x: u64) -> u64 {
    x ^= x << 1;
    x ^= x << 2;
    x ^= x << 4;
    x ^= x << 8;
    x ^= x << 16;
    x ^= x << 32;
    x
}

/// Which bytes of a block are quotes, backslashes, and opening or closing brackets.
struct Masks {
    quote: u64,
    backslash: u64,
    open: u64,
    close: u64,
}

impl Masks {
    #[cfg(target_arch = "x86_64")]
    // SSE2 intrinsics are `unsafe` to call; the call site says why it is sound.
    #[allow(unsafe_code)]
    fn of(block: &[u8; BLOCK]) -> Masks {
        use std::arch::x86_64::{
            __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_or_si128,
            _mm_set1_epi8,
        };
        let mut m = Masks {
            quote: 0,
            backslash: 0,
            open: 0,
            close: 0,
        };
        // SAFETY: SSE2 is part of every x86-64 CPU, so the intrinsics are always available;
        // each load reads the 16 bytes at `16 * k`, inside the 64-byte `block`.
        unsafe {
            let splat = |b: u8| _mm_set1_epi8(b as i8);
            let (quote, backslash) = (splat(b'"'), splat(b'\\'));
            let (brace, bracket) = (splat(b'{'), splat(b'['));
            let (close_brace, close_bracket) = (splat(b'}'), splat(b']'));
            for k in 0..BLOCK / 16 {
                let v = _mm_loadu_si128(block.as_ptr().add(16 * k).cast::<__m128i>());
                let bits = |eq: __m128i| u64::from(_mm_movemask_epi8(eq) as u16) << (16 * k);
                m.quote |= bits(_mm_cmpeq_epi8(v, quote));
                m.backslash |= bits(_mm_cmpeq_epi8(v, backslash));
                m.open |= bits(_mm_or_si128(
                    _mm_cmpeq_epi8(v, brace),
                    _mm_cmpeq_epi8(v, bracket),
                ));
                m.close |= bits(_mm_or_si128(
                    _mm_cmpeq_epi8(v, close_brace),
                    _mm_cmpeq_epi8(v, close_bracket),
                ));
            }
        }
        m
    }

    #[cfg(not(target_arch = "x86_64"))]
    fn of(block: &[u8; BLOCK]) -> Masks {
        Masks::bytewise(block)
    }

    /// [`Masks::of`] one byte at a time (other architectures; the reference in tests).
    #[cfg_attr(target_arch = "x86_64", allow(dead_code))]
    fn bytewise(block: &[u8; BLOCK]) -> Masks {
        let mut m = Masks {
            quote: 0,
            backslash: 0,
            open: 0,
            close: 0,
        };
        for (i, &b) in block.iter().enumerate() {
            let bit = 1u64 << i;
            match b {
                b'"' => m.quote |= bit,
                b'\\' => m.backslash |= bit,
                b'{' | b'[' => m.open |= bit,
                b'}' | b']' => m.close |= bit,
                _ => {}
            }
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::*;

    /// A bound no test value reaches.
    const DEEP: usize = 1000;

    #[test]
    fn a_value_nested_deeper_than_the_bound_is_none() {
        // `depth` brackets open at once, the deepest object in the middle of a long text
        // (so it is met in a block the shortcut would skip) or with an escape (walked).
        for (depth, filler) in [(3, ""), (10, ""), (70, ""), (10, r#""x\"y""#)] {
            let pad = format!("[{}1],", "1,".repeat(40));
            let text = format!(
                "{}{}{}{}{}",
                "[".repeat(depth - 1),
                pad.repeat(3),
                format_args!("{{\"k\":{filler}}}"),
                ",0".repeat(30),
                "]".repeat(depth - 1)
            );
            let text = text.replace(":}", ":null}");
            let end = container_end(text.as_bytes(), 0, depth);
            assert_eq!(
                end,
                Some(serde_end(&text, 0)),
                "depth {depth} within {depth}"
            );
            assert_eq!(
                container_end(text.as_bytes(), 0, depth - 1),
                None,
                "depth {depth}"
            );
        }
    }

    /// Where `serde_json` says the value at `text[start..]` ends.
    fn serde_end(text: &str, start: usize) -> usize {
        let mut de = serde_json::Deserializer::from_str(&text[start..]).into_iter::<Value>();
        de.next().expect("a value").expect("JSON");
        start + de.byte_offset()
    }

    #[test]
    fn ends_where_the_value_ends() {
        for text in [
            "{}",
            "[]",
            r#"{"a":{"b":[1,{"c":"}"}]},"d":"]"}"#,
            r#"{"q":"a \"quoted\" } value","e":"\\","f":"\\\"}"}"#,
            r#"[ "x" , { } , [ [ ] ] ] "#,
        ] {
            assert_eq!(
                container_end(text.as_bytes(), 0, DEEP),
                Some(serde_end(text, 0)),
                "{text}"
            );
        }
        // From inside a larger text, as the transcoders call it.
        let text = r#"{"metadata":{"name":"a}b"},"reason":"x"}"#;
        let at = text.find(":{").unwrap() + 1;
        assert_eq!(
            &text[at..container_end(text.as_bytes(), at, DEEP).unwrap()],
            r#"{"name":"a}b"}"#
        );
    }

    #[test]
    fn an_escape_on_a_block_boundary_is_followed() {
        // The backslash that escapes a quote lands on every position around the first
        // boundary, so the escape is pending across it for some of them.
        for pad in 0..80 {
            let text = format!(r#"{{"k":"{}\"}}","after":{{}}}}"#, "x".repeat(pad));
            assert_eq!(
                container_end(text.as_bytes(), 0, DEEP),
                Some(text.len()),
                "{text}"
            );
        }
    }

    #[test]
    fn what_is_not_a_container_or_ends_early_is_none() {
        assert_eq!(container_end(b"\"{}\"", 0, DEEP), None);
        assert_eq!(container_end(b"12", 0, DEEP), None);
        assert_eq!(container_end(b"{", 0, DEEP), None);
        assert_eq!(container_end(br#"{"a":"}"#, 0, DEEP), None);
        assert_eq!(container_end(b"{}", 2, DEEP), None);
        let long = format!("[{}", "1,".repeat(100));
        assert_eq!(container_end(long.as_bytes(), 0, DEEP), None);
    }

    #[test]
    fn block_masks_are_the_bytewise_masks() {
        let mut block = [0u8; BLOCK];
        for (i, b) in block.iter_mut().enumerate() {
            *b = b"\"\\{}[]a \x80\xff"[i % 10];
        }
        for shift in 0..BLOCK {
            block.rotate_left(1);
            let (fast, slow) = (Masks::of(&block), Masks::bytewise(&block));
            assert_eq!(
                (fast.quote, fast.backslash, fast.open, fast.close),
                (slow.quote, slow.backslash, slow.open, slow.close),
                "rotated {shift}"
            );
        }
    }

    proptest! {
        #[test]
        fn plain_runs_end_at_the_first_stop(
            text in prop::collection::vec(
                prop_oneof![
                    Just(b'"'), Just(b'\\'), Just(0x1f), Just(0x20), 0x21u8..=0x7f, any::<u8>()
                ],
                0..80,
            ),
            at in 0usize..90,
        ) {
            let want = (at.min(text.len())..text.len())
                .find(|&i| matches!(text[i], b'"' | b'\\' | 0..=0x1f))
                .unwrap_or(text.len().max(at));
            prop_assert_eq!(plain_run_end(&text, at), want);
        }
    }

    fn any_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            // Quotes, backslashes and brackets inside strings are what could mislead it.
            "[\"\\\\{}\\[\\]a é\\x01]{0,40}".prop_map(Value::String),
        ];
        leaf.prop_recursive(6, 96, 8, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
                prop::collection::btree_map("[\"\\\\{}a]{0,12}", inner, 0..8)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn json_containers_end_where_serde_says(
            v in any_json(),
            pretty in any::<bool>(),
            lead in "[ a\"]{0,70}",
        ) {
            prop_assume!(v.is_object() || v.is_array());
            let body = if pretty {
                serde_json::to_string_pretty(&v).unwrap()
            } else {
                serde_json::to_string(&v).unwrap()
            };
            // Whatever comes before the start (including quotes) does not matter.
            let text = format!("{lead}{body},\"tail\"]");
            let start = lead.len();
            let end = container_end(text.as_bytes(), start, DEEP);
            prop_assert_eq!(end, Some(serde_end(&text, start)));
        }

        #[test]
        fn any_bytes_end_inside_the_text_or_not_at_all(
            text in prop::collection::vec(
                prop_oneof![
                    Just(b'"'), Just(b'\\'), Just(b'{'), Just(b'}'), Just(b'['), Just(b']'),
                    any::<u8>(),
                ],
                0..300,
            ),
            start in 0usize..300,
        ) {
            if let Some(end) = container_end(&text, start, 8) {
                prop_assert!(start < end && end <= text.len());
                let last = text[end - 1];
                prop_assert!(last == b'}' || last == b']', "ends on {}", last);
            }
        }
    }
}
