//! Structured correlation keys and the default key and message functions.
//!
//! client-go builds its keys by concatenating fields with no separator, so `"ab" + "c"` and
//! `"a" + "bc"` collide. Herald keys are a sequence of parts, each written with its length in
//! front (a prefix-free encoding), so two different part sequences can never give the same key.
//! Keys are written into a buffer the correlator reuses, which lets it hash and compare them
//! without allocating; a key is copied only when it is inserted into a cache.

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
        let mut len = part.len();
        self.buf.reserve(len + 10);
        while len >= 0x80 {
            // Truncation is the point: seven bits per byte.
            self.buf.push((len & 0x7f) as u8 | 0x80);
            len >>= 7;
        }
        self.buf.push(len as u8);
        self.buf.extend_from_slice(part);
        self
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
    let (component, host) = source(event);
    let o = &event.involved_object;
    aggregate
        .push(component)
        .push(host)
        .push(s(&o.kind))
        .push(s(&o.namespace))
        .push(s(&o.name))
        .push(s(&o.uid))
        .push(s(&o.api_version))
        .push(s(&event.type_))
        .push(s(&event.reason))
        .push(s(&event.reporting_component))
        .push(s(&event.reporting_instance));
    local.push(s(&event.message));
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
}
