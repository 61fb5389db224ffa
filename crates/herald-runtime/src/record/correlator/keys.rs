//! Structured correlation keys and the default key and message functions.
//!
//! client-go builds its keys by concatenating fields with no separator, so `"ab" + "c"` and
//! `"a" + "bc"` collide. Herald keys are a sequence of parts, each written with its length in
//! front (a prefix-free encoding), so two different part sequences can never give the same key.
//! Keys are written into a buffer the correlator reuses, which lets it hash and compare them
//! without allocating; a key is copied only when it is inserted into a cache.
//!
//! The correlator rebuilds each key by comparing it with the one already in its buffer
//! ([`KeyBuf`]): in a storm consecutive events mostly share their keys, and an unchanged key
//! keeps its hash and the cache slot it was found in, so it is neither hashed nor looked up
//! again.

use std::hash::BuildHasher;

use hashbrown::DefaultHashBuilder;
use k8s_openapi::api::core::v1::Event;

/// The prefix client-go's default message function puts before the latest message of an
/// aggregated ("combined") event. Note the trailing space.
pub const COMBINED_MESSAGE_PREFIX: &str = "(combined from similar events): ";

/// Writes the parts of one key into a byte buffer.
///
/// Every part is written as its length (LEB128) followed by its bytes, so the encoding of a
/// sequence of parts is unambiguous: `["ab", "c"]` and `["a", "bc"]` differ, and so do `["a"]`
/// and `["a", ""]`. There is no bound on the number or length of parts; the buffer grows.
///
/// ```
/// use herald_runtime::record::KeyBuilder;
/// let (mut x, mut y) = (Vec::new(), Vec::new());
/// KeyBuilder::new(&mut x).push("ab").push("c");
/// KeyBuilder::new(&mut y).push("a").push("bc");
/// assert_ne!(x, y);
/// ```
#[derive(Debug)]
pub struct KeyBuilder<'a> {
    buf: &'a mut Vec<u8>,
}

impl<'a> KeyBuilder<'a> {
    /// A builder appending to `buf` (whatever `buf` already holds stays in front).
    pub fn new(buf: &'a mut Vec<u8>) -> Self {
        Self { buf }
    }

    /// Appends one part.
    #[inline]
    pub fn push(&mut self, part: &str) -> &mut Self {
        self.push_bytes(part.as_bytes())
    }

    /// Appends one part given as raw bytes (for keys computed from non-text data).
    #[inline]
    pub fn push_bytes(&mut self, part: &[u8]) -> &mut Self {
        let len = part.len();
        if len < 0x80 {
            // Almost every part: a one-byte length.
            self.buf.reserve(len + 1);
            self.buf.push(len as u8);
        } else {
            self.push_long_len(len);
        }
        self.buf.extend_from_slice(part);
        self
    }

    #[cold]
    fn push_long_len(&mut self, mut len: usize) {
        self.buf.reserve(len + 10);
        while len >= 0x80 {
            // Truncation is the point: seven bits per byte.
            self.buf.push((len & 0x7f) as u8 | 0x80);
            len >>= 7;
        }
        self.buf.push(len as u8);
    }

    /// Bytes in the buffer so far.
    pub(crate) fn len(&self) -> usize {
        self.buf.len()
    }

    /// Appends bytes as they are, with no length: a tag in front of a key that tells key kinds
    /// apart, or a whole key written by another builder. Only for keys whose every variant
    /// starts with a distinct tag, so the encoding stays unambiguous.
    pub(crate) fn push_raw(&mut self, bytes: &[u8]) -> &mut Self {
        self.buf.extend_from_slice(bytes);
        self
    }
}

/// A reused key buffer that remembers what is known about the key it holds: its hash, and the
/// cache slot it was last found in or inserted at (with that cache's generation, so a slot
/// that may have been reused since is never trusted; see `Lru::get_key`).
///
/// A key is written into a second buffer and compared with the previous one as a whole (one
/// `memcmp`); the buffers swap when it differs. Neither allocates once they have grown to the
/// longest key seen.
#[derive(Debug, Default)]
pub(crate) struct KeyBuf {
    pub(crate) bytes: Vec<u8>,
    scratch: Vec<u8>,
    hash: Option<u64>,
    pub(crate) slot: Option<(usize, u64)>,
}

impl KeyBuf {
    /// Builds the key with `write` (into an empty builder). A key different from the previous
    /// one forgets the hash and slot.
    #[inline]
    pub(crate) fn build(&mut self, write: impl FnOnce(&mut KeyBuilder<'_>)) {
        self.scratch.clear();
        write(&mut KeyBuilder::new(&mut self.scratch));
        self.settle();
    }

    /// Sets the key to `tag` (if any) followed by `bytes`, a key written elsewhere, as
    /// [`KeyBuf::build`] would but without writing it twice when it is unchanged.
    #[inline]
    pub(crate) fn set(&mut self, tag: Option<u8>, bytes: &[u8]) {
        let same = match tag {
            Some(t) => self.bytes.first() == Some(&t) && self.bytes[1..] == *bytes,
            None => self.bytes == bytes,
        };
        if !same {
            self.bytes.clear();
            self.bytes.extend(tag);
            self.bytes.extend_from_slice(bytes);
            self.hash = None;
            self.slot = None;
        }
    }

    fn settle(&mut self) {
        if self.scratch != self.bytes {
            std::mem::swap(&mut self.scratch, &mut self.bytes);
            self.hash = None;
            self.slot = None;
        }
    }

    /// The key's hash (computed once per distinct key).
    #[inline]
    pub(crate) fn hash(&mut self, hasher: &DefaultHashBuilder) -> u64 {
        *self
            .hash
            .get_or_insert_with(|| hasher.hash_one(self.bytes.as_slice()))
    }
}

/// The aggregation key function: writes the aggregate key (which events are "similar") and the
/// local key (what distinguishes similar events) of an event. Default: [`aggregate_by_reason`].
pub type KeyFunc =
    std::sync::Arc<dyn Fn(&Event, &mut KeyBuilder<'_>, &mut KeyBuilder<'_>) + Send + Sync>;

/// The message of an aggregated event, computed from the incoming event. Default:
/// [`combined_message`].
pub type MessageFunc = std::sync::Arc<dyn Fn(&Event) -> String + Send + Sync>;

/// The spam key function: writes the key whose token bucket an event draws from. Default:
/// [`spam_key`].
pub type SpamKeyFunc = std::sync::Arc<dyn Fn(&Event, &mut KeyBuilder<'_>) + Send + Sync>;

fn s(v: &Option<String>) -> &str {
    v.as_deref().unwrap_or("")
}

fn source(event: &Event) -> (&str, &str) {
    match &event.source {
        Some(src) => (s(&src.component), s(&src.host)),
        None => ("", ""),
    }
}

/// The full identity of an event, used for counting identical events (client-go's
/// `getEventKey`): source component and host; involved object kind, namespace, name,
/// fieldPath, uid and apiVersion; type, reason and message. Not replaceable, as in client-go.
pub fn event_key(event: &Event, key: &mut KeyBuilder<'_>) {
    let (component, host) = source(event);
    let o = &event.involved_object;
    key.push(component)
        .push(host)
        .push(s(&o.kind))
        .push(s(&o.namespace))
        .push(s(&o.name))
        .push(s(&o.field_path))
        .push(s(&o.uid))
        .push(s(&o.api_version))
        .push(s(&event.type_))
        .push(s(&event.reason))
        .push(s(&event.message));
}

/// client-go's `EventAggregatorByReasonFunc`: events are similar when they share source,
/// involved object (kind, namespace, name, uid, apiVersion — **not** fieldPath), type, reason,
/// reportingComponent and reportingInstance; the local key is the message.
pub fn aggregate_by_reason(
    event: &Event,
    aggregate: &mut KeyBuilder<'_>,
    local: &mut KeyBuilder<'_>,
) {
    aggregate_by_reason_marked(event, aggregate, local);
}

/// Where [`aggregate_by_reason`] ends the parts it shares with [`spam_key`] and [`event_key`]
/// (byte offsets into the aggregate key), so that with the default key functions those two
/// keys are copied from the aggregate key instead of being written part by part again.
///
/// The three keys start with the same parts: source component and host, involved object
/// kind, namespace and name (`object`); the spam key then has uid, apiVersion and type
/// (`spam`), which the aggregate key continues with reason (`reason`); the event key puts
/// fieldPath between the two runs, and ends with the message — the aggregate's local key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Marks {
    object: usize,
    spam: usize,
    reason: usize,
}

impl Marks {
    /// [`spam_key`] of the event whose aggregate key is `aggregate`.
    pub(crate) fn spam_key<'k>(&self, aggregate: &'k [u8]) -> &'k [u8] {
        &aggregate[..self.spam]
    }

    /// Writes [`event_key`] of `event`, whose aggregate and local keys are `aggregate` and
    /// `local`.
    pub(crate) fn event_key(
        &self,
        event: &Event,
        aggregate: &[u8],
        local: &[u8],
        key: &mut KeyBuilder<'_>,
    ) {
        key.push_raw(&aggregate[..self.object])
            .push(s(&event.involved_object.field_path))
            .push_raw(&aggregate[self.object..self.reason])
            .push_raw(local);
    }
}

/// [`aggregate_by_reason`], returning its [`Marks`] (valid when `aggregate` started empty).
pub(crate) fn aggregate_by_reason_marked(
    event: &Event,
    aggregate: &mut KeyBuilder<'_>,
    local: &mut KeyBuilder<'_>,
) -> Marks {
    let (component, host) = source(event);
    let o = &event.involved_object;
    aggregate
        .push(component)
        .push(host)
        .push(s(&o.kind))
        .push(s(&o.namespace))
        .push(s(&o.name));
    let object = aggregate.len();
    aggregate
        .push(s(&o.uid))
        .push(s(&o.api_version))
        .push(s(&event.type_));
    let spam = aggregate.len();
    aggregate.push(s(&event.reason));
    let reason = aggregate.len();
    aggregate
        .push(s(&event.reporting_component))
        .push(s(&event.reporting_instance));
    local.push(s(&event.message));
    Marks {
        object,
        spam,
        reason,
    }
}

/// client-go's `EventAggregatorByReasonMessageFunc`: [`COMBINED_MESSAGE_PREFIX`] followed by
/// the incoming event's message.
pub fn combined_message(event: &Event) -> String {
    let message = s(&event.message);
    let mut out = String::with_capacity(COMBINED_MESSAGE_PREFIX.len() + message.len());
    out.push_str(COMBINED_MESSAGE_PREFIX);
    out.push_str(message);
    out
}

/// client-go's default spam key (`getSpamKey`): source component and host; involved object
/// kind, namespace, name, uid and apiVersion; and type. Reason, message, fieldPath and the
/// reporting fields are not part of it, so all events about one object and of one type share
/// one token bucket.
pub fn spam_key(event: &Event, key: &mut KeyBuilder<'_>) {
    let (component, host) = source(event);
    let o = &event.involved_object;
    key.push(component)
        .push(host)
        .push(s(&o.kind))
        .push(s(&o.namespace))
        .push(s(&o.name))
        .push(s(&o.uid))
        .push(s(&o.api_version))
        .push(s(&event.type_));
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{EventSource, ObjectReference};
    use proptest::prelude::*;

    #[test]
    fn lengths_are_prefix_free() {
        let mut a = Vec::new();
        KeyBuilder::new(&mut a).push("a").push("");
        let mut b = Vec::new();
        KeyBuilder::new(&mut b).push("a");
        assert_ne!(a, b);
        let mut long = Vec::new();
        KeyBuilder::new(&mut long).push(&"x".repeat(300));
        // 300 = 0b10_0101100 → [0xac, 0x02]
        assert_eq!(&long[..2], &[0xac, 0x02]);
        assert_eq!(long.len(), 302);
    }

    fn text() -> impl Strategy<Value = Option<String>> {
        // Short and long (two-byte length) parts, empty and missing ones.
        prop_oneof![
            Just(None),
            "[a-z]{0,3}".prop_map(Some),
            "[a-zA-Z0-9 ./{}-]{100,140}".prop_map(Some),
        ]
    }

    prop_compose! {
        fn any_event()(
            c in text(), h in text(), k in text(), ns in text(), n in text(), fp in text(),
            uid in text(), av in text(), t in text(), r in text(), rc in text(), ri in text(),
            m in text(), src in any::<bool>(),
        ) -> Event {
            Event {
                source: src.then_some(EventSource { component: c, host: h }),
                involved_object: ObjectReference {
                    kind: k, namespace: ns, name: n, field_path: fp, uid, api_version: av,
                    ..Default::default()
                },
                type_: t,
                reason: r,
                reporting_component: rc,
                reporting_instance: ri,
                message: m,
                ..Default::default()
            }
        }
    }

    proptest! {
        #[test]
        fn keys_copied_from_the_aggregate_key_equal_the_default_key_functions(e in any_event()) {
            let (mut aggregate, mut local) = (Vec::new(), Vec::new());
            let marks = aggregate_by_reason_marked(
                &e,
                &mut KeyBuilder::new(&mut aggregate),
                &mut KeyBuilder::new(&mut local),
            );
            let (mut a2, mut l2) = (Vec::new(), Vec::new());
            aggregate_by_reason(&e, &mut KeyBuilder::new(&mut a2), &mut KeyBuilder::new(&mut l2));
            prop_assert_eq!((&a2, &l2), (&aggregate, &local));

            let mut spam = Vec::new();
            spam_key(&e, &mut KeyBuilder::new(&mut spam));
            prop_assert_eq!(marks.spam_key(&aggregate), spam.as_slice());

            let (mut generic, mut copied) = (Vec::new(), Vec::new());
            event_key(&e, &mut KeyBuilder::new(&mut generic));
            marks.event_key(&e, &aggregate, &local, &mut KeyBuilder::new(&mut copied));
            prop_assert_eq!(copied, generic);
        }
    }

    #[test]
    fn a_key_buffer_keeps_its_hash_and_slot_only_while_the_key_stays_the_same() {
        let hasher = DefaultHashBuilder::default();
        let mut k = KeyBuf::default();
        let build = |k: &mut KeyBuf, parts: &[&str]| {
            k.build(|b| {
                for p in parts {
                    b.push(p);
                }
            })
        };
        build(&mut k, &["ab", "c"]);
        let h = k.hash(&hasher);
        assert_eq!(h, hasher.hash_one(k.bytes.as_slice()));
        k.slot = Some((3, 7));
        build(&mut k, &["ab", "c"]);
        assert_eq!((k.hash, k.slot), (Some(h), Some((3, 7))));
        build(&mut k, &["a", "bc"]);
        assert_eq!((k.hash, k.slot), (None, None));
        let mut expected = Vec::new();
        KeyBuilder::new(&mut expected).push("a").push("bc");
        assert_eq!(k.bytes, expected);
        assert_ne!(k.hash(&hasher), h);
        // A shorter key after a longer one leaves nothing of the longer one behind.
        build(&mut k, &["a"]);
        assert_eq!(k.bytes, [1, b'a']);
        // Keys written elsewhere, with and without a tag.
        k.slot = Some((1, 1));
        k.set(None, &[1, b'a']);
        assert_eq!(k.slot, Some((1, 1)));
        k.set(Some(1), b"a");
        assert_eq!((k.bytes.as_slice(), k.slot), (&[1, b'a'][..], Some((1, 1))));
        k.set(Some(2), b"a");
        assert_eq!((k.bytes.as_slice(), k.slot), (&[2, b'a'][..], None));
        k.slot = Some((1, 1));
        k.set(None, &[2]);
        assert_eq!((k.bytes.as_slice(), k.slot), (&[2][..], None));
        k.set(None, &[]);
        assert!(k.bytes.is_empty());
        k.set(Some(0), &[]);
        assert_eq!(k.bytes, [0]);
    }
}
