//! The dedup logger: counts identical events and writes the patch that updates the stored one.
//!
//! Per dedup key it remembers what the server knows about the event (name, resourceVersion,
//! firstTimestamp) and how often it has been seen. The key is the event's full identity, or the
//! aggregate key for combined events; the two kinds are tagged so they can never collide
//! (client-go keeps both kinds as plain strings in one cache).

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use hashbrown::DefaultHashBuilder;

use super::keys::KeyBuf;
use super::lru::Lru;
use super::similar::{SIMILAR_MESSAGES_ANNOTATION, SimilarMessages};

/// Tag of a dedup key built from the full event identity.
pub(crate) const TAG_EVENT: u8 = 0;
/// Tag of a dedup key built from an aggregate key.
pub(crate) const TAG_AGGREGATE: u8 = 1;

/// Whether this sink has handed out a write of a dedup key's event.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum WriteState {
    /// Every occurrence so far was held back by the spam filter: the key's next write creates
    /// the event, with its full count and first timestamp.
    #[default]
    Unwritten,
    /// A write was handed out (or the server reported the stored event): the next write
    /// patches it (a 404 still falls back on a create: expired on the server).
    Written,
}

/// What the dedup cache remembers per key.
#[derive(Debug, Default)]
pub(crate) struct Entry {
    /// 0 means "not seen": the next event with this key is not a repeat (client-go quirk).
    pub(crate) count: i32,
    pub(crate) first_timestamp: Option<Time>,
    pub(crate) name: Option<String>,
    pub(crate) resource_version: Option<String>,
    pub(crate) state: WriteState,
    /// The sample of similar messages of a combined event, when they are kept.
    pub(crate) similar: Option<Box<SimilarMessages>>,
}

/// Dedup state. Bound: `lru_cache_size` keys, evicting the least recently used (a later
/// identical event then starts a new event object with count 1, as in client-go).
#[derive(Debug)]
pub(crate) struct DedupLog {
    pub(crate) entries: Lru<Entry>,
    /// The key being observed (reused buffer; the slot it remembers is in `entries`).
    pub(crate) key: KeyBuf,
    pub(crate) evictions: u64,
}

/// The outcome of observing one event.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Seen {
    /// Slot of the key's entry; valid until the next change to this cache.
    pub(crate) idx: usize,
    /// The key was seen before with a count > 0: the event is a repeat, its count was added
    /// to the cached one, and it must be written as a patch.
    pub(crate) repeat: bool,
}

impl DedupLog {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            entries: Lru::new(capacity),
            key: KeyBuf::default(),
            evictions: 0,
        }
    }

    /// Counts one occurrence of an event under [`DedupLog::key`]. `count` is the event's own
    /// count (the recorder may have merged several identical events into one); on a repeat the
    /// cached count grows by `max(count, 1)`, saturating at `i32::MAX`. Otherwise the entry is
    /// set from `fill` (the event as it will be written).
    pub(crate) fn observe(
        &mut self,
        hasher: &DefaultHashBuilder,
        count: Option<i32>,
        fill: impl FnOnce(&mut Entry),
    ) -> Seen {
        match self.entries.get_key(&mut self.key, hasher) {
            Some(idx) => {
                let entry = self.entries.value_mut(idx);
                if entry.count > 0 {
                    entry.count = entry.count.saturating_add(count.unwrap_or(0).max(1));
                    Seen { idx, repeat: true }
                } else {
                    fill(entry);
                    Seen { idx, repeat: false }
                }
            }
            None => {
                // `fill` sets every field, so an evicted entry is reused as it is (its
                // strings' buffers included).
                let (idx, evicted) =
                    self.entries
                        .insert_key_with(&mut self.key, hasher, Entry::default, |_| {});
                fill(self.entries.value_mut(idx));
                self.evictions += u64::from(evicted);
                Seen { idx, repeat: false }
            }
        }
    }

    /// Stores what the server returned for a written event under [`DedupLog::key`]; never
    /// lowers the cached count.
    pub(crate) fn update(&mut self, hasher: &DefaultHashBuilder, written: &Event) {
        let count = written.count.unwrap_or(0);
        let fill = |entry: &mut Entry, keep: i32| {
            entry.count = count.max(keep);
            entry.state = WriteState::Written;
            entry.first_timestamp.clone_from(&written.first_timestamp);
            entry.name.clone_from(&written.metadata.name);
            entry
                .resource_version
                .clone_from(&written.metadata.resource_version);
        };
        match self.entries.get_key(&mut self.key, hasher) {
            Some(idx) => {
                let entry = self.entries.value_mut(idx);
                let keep = entry.count;
                fill(entry, keep);
            }
            None => {
                let (idx, evicted) =
                    self.entries
                        .insert_key_with(&mut self.key, hasher, Entry::default, |_| {});
                let entry = self.entries.value_mut(idx);
                entry.similar = None;
                fill(entry, i32::MIN);
                self.evictions += u64::from(evicted);
            }
        }
    }
}

/// Builds the dedup patch, exactly as client-go's two-way strategic merge yields it for an
/// event diffed against a copy with count 0, lastTimestamp at the Unix epoch and an empty
/// message: `{"count":N,"lastTimestamp":"<RFC3339 seconds UTC>","message":"…"}` with keys
/// sorted.
///
/// Edge cases follow the diff: an empty message adds no `message` key (the server keeps the old
/// one); a missing lastTimestamp is `null`; a lastTimestamp within the epoch's first second
/// equals the "old" value and adds no key. Strings are escaped by serde_json (Go additionally
/// writes `<`, `>`, `&` as `\u003c`… — the same JSON value).
///
/// It remembers the last second it formatted: a storm's patches mostly share it, and
/// formatting a timestamp costs more than the rest of the patch.
#[derive(Debug, Default)]
pub(crate) struct PatchWriter {
    /// Whole seconds since the epoch (rounded down) of `text`, when it holds one.
    second: Option<i64>,
    text: [u8; 32],
    len: usize,
}

impl PatchWriter {
    /// The patch of `event`'s count, lastTimestamp and message; with `similar`, it also sets
    /// the [`SIMILAR_MESSAGES_ANNOTATION`] to it (in `metadata.annotations`, after the other
    /// keys: still sorted).
    pub(crate) fn patch_event(
        &mut self,
        event: &Event,
        similar: Option<&str>,
    ) -> Result<Vec<u8>, serde_json::Error> {
        let mut out = self.patch(
            event.count.unwrap_or(0),
            event.last_timestamp.as_ref(),
            event.message.as_deref().unwrap_or(""),
        )?;
        if let Some(value) = similar {
            out.pop();
            out.extend_from_slice(b",\"metadata\":{\"annotations\":{");
            serde_json::to_writer(&mut out, SIMILAR_MESSAGES_ANNOTATION)?;
            out.push(b':');
            serde_json::to_writer(&mut out, value)?;
            out.extend_from_slice(b"}}}");
        }
        Ok(out)
    }

    pub(crate) fn patch(
        &mut self,
        count: i32,
        last_timestamp: Option<&Time>,
        message: &str,
    ) -> Result<Vec<u8>, serde_json::Error> {
        let mut out = Vec::with_capacity(72 + message.len());
        out.extend_from_slice(b"{\"count\":");
        write_i32(&mut out, count);
        match last_timestamp {
            None => out.extend_from_slice(b",\"lastTimestamp\":null"),
            Some(t) => {
                let second = floor_second(t.0);
                // The epoch's first second formats as the "old" value: no change, no key.
                if second != 0 {
                    if self.second != Some(second) {
                        self.len = write_rfc3339_seconds(&mut self.text, t.0);
                        self.second = Some(second);
                    }
                    out.extend_from_slice(b",\"lastTimestamp\":\"");
                    out.extend_from_slice(&self.text[..self.len]);
                    out.push(b'"');
                }
            }
        }
        if !message.is_empty() {
            out.extend_from_slice(b",\"message\":");
            if needs_escape(message.as_bytes()) {
                serde_json::to_writer(&mut out, message)?;
            } else {
                // Nothing to escape (the common case): copy as is.
                out.push(b'"');
                out.extend_from_slice(message.as_bytes());
                out.push(b'"');
            }
        }
        out.push(b'}');
        Ok(out)
    }
}

/// Whole seconds since the Unix epoch, rounded towards the past (what the RFC 3339 seconds
/// form shows).
fn floor_second(t: Timestamp) -> i64 {
    let s = t.as_second();
    if t.subsec_nanosecond() < 0 { s - 1 } else { s }
}

/// True when a JSON string of `b` needs escapes (a control character, `"` or `\`), the bytes
/// serde_json escapes. Eight bytes at a time: the message is the longest part of a patch.
fn needs_escape(b: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // Some byte of `x` is below `n` (n <= 0x80), resp. zero: the classic exact bit tests.
    let below = |x: u64, n: u8| x.wrapping_sub(ONES * u64::from(n)) & !x & HIGH != 0;
    let zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGH != 0;
    let mut chunks = b.chunks_exact(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        let x = u64::from_le_bytes(w);
        if below(x, 0x20)
            || zero(x ^ (ONES * u64::from(b'"')))
            || zero(x ^ (ONES * u64::from(b'\\')))
        {
            return true;
        }
    }
    chunks
        .remainder()
        .iter()
        .any(|&c| c < 0x20 || c == b'"' || c == b'\\')
}

fn write_i32(out: &mut Vec<u8>, v: i32) {
    let mut digits = [0u8; 11];
    let mut n = digits.len();
    let mut u = v.unsigned_abs();
    loop {
        n -= 1;
        digits[n] = b'0' + (u % 10) as u8;
        u /= 10;
        if u == 0 {
            break;
        }
    }
    if v < 0 {
        n -= 1;
        digits[n] = b'-';
    }
    out.extend_from_slice(&digits[n..]);
}

/// Writes `t` as metav1.Time does (`2006-01-02T15:04:05Z`: UTC, whole seconds, sub-seconds
/// dropped; negative years as `-0001`, like Go) into `buf`; returns the length written.
pub(crate) fn write_rfc3339_seconds(buf: &mut [u8; 32], t: Timestamp) -> usize {
    let dt = jiff::tz::Offset::UTC.to_datetime(t);
    let mut n = 0;
    let mut put = |b: u8| {
        buf[n] = b;
        n += 1;
    };
    let year = i32::from(dt.year());
    if year < 0 {
        put(b'-');
    }
    let y = year.unsigned_abs();
    let digit = |v: u32| b'0' + (v % 10) as u8;
    put(digit(y / 1000));
    put(digit(y / 100));
    put(digit(y / 10));
    put(digit(y));
    for (sep, v) in [
        (b'-', dt.month()),
        (b'-', dt.day()),
        (b'T', dt.hour()),
        (b':', dt.minute()),
        (b':', dt.second()),
    ] {
        let v = v.unsigned_abs();
        put(sep);
        put(b'0' + v / 10);
        put(b'0' + v % 10);
    }
    put(b'Z');
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn dedup_patch(
        count: i32,
        last_timestamp: Option<&Time>,
        message: &str,
    ) -> Result<Vec<u8>, serde_json::Error> {
        PatchWriter::default().patch(count, last_timestamp, message)
    }

    fn fmt(t: Timestamp) -> String {
        let mut buf = [0u8; 32];
        let n = write_rfc3339_seconds(&mut buf, t);
        String::from_utf8(buf[..n].to_vec()).unwrap()
    }

    #[test]
    fn patch_bytes() {
        let t = Time("2024-05-06T07:08:09.999Z".parse().unwrap());
        assert_eq!(
            dedup_patch(2, Some(&t), "me \"again\"").unwrap(),
            br#"{"count":2,"lastTimestamp":"2024-05-06T07:08:09Z","message":"me \"again\""}"#
        );
        assert_eq!(
            dedup_patch(7, Some(&t), "").unwrap(),
            br#"{"count":7,"lastTimestamp":"2024-05-06T07:08:09Z"}"#
        );
        assert_eq!(
            dedup_patch(3, None, "m").unwrap(),
            br#"{"count":3,"lastTimestamp":null,"message":"m"}"#
        );
        let epoch = Time("1970-01-01T00:00:00.5Z".parse().unwrap());
        assert_eq!(
            dedup_patch(3, Some(&epoch), "m").unwrap(),
            br#"{"count":3,"message":"m"}"#
        );
    }

    #[test]
    fn a_reused_writer_formats_each_second_anew() {
        let mut w = PatchWriter::default();
        let times = [
            "2024-05-06T07:08:09.1Z",
            "2024-05-06T07:08:09.9Z",
            "2024-05-06T07:08:10Z",
            "1969-12-31T23:59:59.5Z",
            "1970-01-01T00:00:00.5Z",
            "1969-12-31T23:59:59.5Z",
            "2024-05-06T07:08:09.1Z",
        ];
        for t in times {
            let t = Time(t.parse().unwrap());
            let fresh = dedup_patch(4, Some(&t), "m").unwrap();
            assert_eq!(w.patch(4, Some(&t), "m").unwrap(), fresh, "{t:?}");
            let v: serde_json::Value = serde_json::from_slice(&fresh).unwrap();
            if floor_second(t.0) == 0 {
                assert!(v.get("lastTimestamp").is_none(), "{t:?}");
            } else {
                assert_eq!(v["lastTimestamp"], serde_json::to_value(&t).unwrap());
            }
        }
    }

    #[test]
    fn counts_are_written_in_decimal() {
        for v in [0, 7, 10, 2_147_483_647, -1, -2_147_483_648] {
            let mut out = Vec::new();
            write_i32(&mut out, v);
            assert_eq!(out, v.to_string().into_bytes());
        }
    }

    #[test]
    fn escaping_matches_serde_json() {
        for m in [
            "plain",
            "quote \"x\"",
            "back\\slash",
            "tab\t",
            "nl\n",
            "\u{1}",
            "ünï → ok",
        ] {
            let p = dedup_patch(2, None, m).unwrap();
            let v: serde_json::Value = serde_json::from_slice(&p).unwrap();
            assert_eq!(v["message"], m);
        }
    }

    #[test]
    fn negative_years_are_written_like_go() {
        // Go pads the absolute year to four digits after the sign (jiff's %Y gives "-001").
        let t: Timestamp = "-000001-12-31T23:59:59Z".parse().unwrap();
        assert_eq!(fmt(t), "-0001-12-31T23:59:59Z");
    }

    proptest! {
        #[test]
        fn escape_check_matches_the_bytewise_rule(s in "(?s).{0,40}") {
            let naive = s.bytes().any(|c| c < 0x20 || c == b'"' || c == b'\\');
            prop_assert_eq!(needs_escape(s.as_bytes()), naive);
            let p = dedup_patch(2, None, &s).unwrap();
            let v: serde_json::Value = serde_json::from_slice(&p).unwrap();
            if !s.is_empty() {
                prop_assert_eq!(v["message"].as_str(), Some(s.as_str()));
            }
        }

        #[test]
        fn timestamp_format_matches_k8s_openapi(secs in -62_167_219_200i64..=253_402_207_200i64,
                                                nanos in 0i32..1_000_000_000) {
            let t = Timestamp::new(secs, nanos).unwrap();
            let via_serde = serde_json::to_string(&Time(t)).unwrap();
            prop_assert_eq!(format!("\"{}\"", fmt(t)), via_serde);
        }
    }
}
