//! Similar messages kept on a combined event (opt-in:
//! [`CorrelatorOptions::similar_messages_kept`](super::CorrelatorOptions::similar_messages_kept)).
//!
//! client-go's combined event shows only the latest message, so a reader cannot tell *which*
//! nodes or images the combined events named. With `similar_messages_kept = n > 0` the
//! combined event carries the annotation [`SIMILAR_MESSAGES_ANNOTATION`], whose value is a JSON
//! document:
//!
//! ```json
//! {"kept":[{"message":"0/5 nodes are available: node-1 …","count":12},
//!          {"message":"0/5 nodes are available: node-2 …","count":3}],
//!  "others":4}
//! ```
//!
//! - `kept`: the first `n` distinct messages (each cut to [`MAX_SIMILAR_MESSAGE_BYTES`])
//!   folded into the combined event, in the order first seen, each with the number of
//!   occurrences that carried it;
//! - `others`: occurrences whose message came after the sample was full;
//! - the counts add up to the combined event's `count`.
//!
//! The dedup patch that updates the combined event carries the annotation too (one request,
//! `metadata.annotations` merged by the server).

use serde::Serialize;

/// The annotation holding the sample of similar messages on a combined event.
pub const SIMILAR_MESSAGES_ANNOTATION: &str = "herald.dev/similar-messages";

/// Longest message kept in the sample, in bytes; a longer one is cut at a character boundary
/// (so two messages that differ only beyond it share an entry).
pub const MAX_SIMILAR_MESSAGE_BYTES: usize = 1024;

/// The sample. Bound: `n` messages of at most [`MAX_SIMILAR_MESSAGE_BYTES`] each; at the bound
/// further distinct messages are only counted, in `others`.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct SimilarMessages {
    kept: Vec<Kept>,
    others: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
struct Kept {
    message: String,
    count: u64,
}

impl SimilarMessages {
    /// Counts `count` occurrences of `message`, keeping at most `bound` distinct messages.
    /// Cost: linear in the messages kept.
    pub(crate) fn add(&mut self, message: &str, count: u64, bound: usize) {
        let message = cut(message, MAX_SIMILAR_MESSAGE_BYTES);
        if let Some(k) = self.kept.iter_mut().find(|k| k.message == message) {
            k.count = k.count.saturating_add(count);
        } else if self.kept.len() < bound {
            self.kept.push(Kept {
                message: message.to_string(),
                count,
            });
        } else {
            self.others = self.others.saturating_add(count);
        }
    }

    /// The annotation's value.
    pub(crate) fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "{}".to_string())
    }
}

/// `s` cut to at most `max` bytes, at a character boundary.
fn cut(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_first_distinct_messages_and_counts_the_rest() {
        let mut s = SimilarMessages::default();
        s.add("a", 1, 2);
        s.add("b", 2, 2);
        s.add("a", 1, 2);
        s.add("c", 3, 2);
        assert_eq!(
            s.to_json(),
            r#"{"kept":[{"message":"a","count":2},{"message":"b","count":2}],"others":3}"#
        );
    }

    #[test]
    fn long_messages_are_cut_at_a_character_boundary() {
        let long = "é".repeat(MAX_SIMILAR_MESSAGE_BYTES);
        let cut = cut(&long, MAX_SIMILAR_MESSAGE_BYTES);
        assert_eq!(cut.len(), MAX_SIMILAR_MESSAGE_BYTES);
        assert!(cut.chars().all(|c| c == 'é'));
        let odd = format!("x{long}");
        assert_eq!(
            super::cut(&odd, MAX_SIMILAR_MESSAGE_BYTES).len(),
            MAX_SIMILAR_MESSAGE_BYTES - 1
        );
    }
}
