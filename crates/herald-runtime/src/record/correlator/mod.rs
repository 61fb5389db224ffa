//! The event correlator: aggregate similar events → count identical ones → spam-limit.
//!
//! [`EventCorrelator`] reproduces client-go's `EventCorrelator` observably (same results, same
//! clock reads, same cache semantics) so that recorder behaviour and tests carry over. Each
//! [`EventCorrelator::correlate`] runs, in this order:
//!
//! 1. **Aggregator** (one clock read). Per aggregate key (default: source, involved object
//!    without fieldPath, type, reason, reporting fields) it tracks the distinct local keys
//!    (default: the message) seen within a sliding window of `max_interval` (measured from the
//!    last similar event; exactly `max_interval` is still inside). When an event brings that
//!    set to `max_events`, the event is replaced by a "combined" event: name
//!    `<involvedObject.name>.<hex unix nanos>`, namespace of the input, count 1, first = last
//!    timestamp = now, message from the message function, involved object / type / reason /
//!    source copied; annotations, reporting fields, action, related, eventTime and series are
//!    dropped. Its dedup key is the aggregate key.
//! 2. **Dedup logger** (no clock read). A repeat of a key seen before with a count > 0 takes
//!    the cached name, resourceVersion and firstTimestamp, its count grows, and it gets the
//!    patch `{"count":N,"lastTimestamp":"…","message":"…"}`. The cache is updated before the
//!    spam filter runs, so **skipped events still advance the counts**.
//! 3. **Spam filter** (one clock read). One token bucket (`burst_size`, refilled at `qps`) per
//!    spam key (default: source, involved object without fieldPath, type). No token ⇒ skip.
//!
//! # Herald changes (all documented, none changes a client-go test outcome)
//!
//! - **Structured keys.** Keys are sequences of length-prefixed parts ([`KeyBuilder`]), so
//!   `("ab", "c")` and `("a", "bc")` never collide, and full-event keys and aggregate keys are
//!   tagged apart. Keys are written into reused buffers and looked up by hash and byte
//!   comparison: correlating an event whose keys are all cached allocates no key.
//! - **Deterministic aggregation.** client-go removes a random local key when the set is full;
//!   Herald removes the least recently seen one (see [`CorrelatorOptions::max_events`]).
//! - **Input counts.** On a repeat the count grows by `max(event.count, 1)` (the recorder may
//!   merge k identical queued events into one with count k; client-go's inputs always have
//!   count 1, so the outcome is the same). A first occurrence keeps its count as given. A
//!   combined event counts `max(event.count, 1)` for each input folded into it, likewise.
//! - **Never a patch of what was never written.** client-go patches every repeat, also one
//!   whose earlier occurrences were all skipped (the server answers 404 and the recorder
//!   creates: two calls). Herald creates it at once, with the count and firstTimestamp of all
//!   its occurrences (`patch` is `None`). A patch answered 404 still falls back on a create
//!   (the event expired on the server).
//! - **`update_state` never lowers a count** (writes can complete after a newer event for the
//!   same key was correlated).
//! - **Unique, valid aggregate names.** A combined event takes the name of the incoming event
//!   it replaces (the recorder's names are unique per broadcaster, even within one clock
//!   tick), or else one from [`herald_core::naming::event_name`], which falls back to a UUID
//!   when `<name>.<hex>` is not a valid DNS-1123 subdomain (client-go derives it from the
//!   correlator's clock, which can collide with the first event's name, and sends invalid
//!   names that the server rejects).
//! - **Trailing flush** ([`CorrelatorOptions::trailing_flush`], on by default): the
//!   occurrences skipped per dedup key are remembered, and once their spam key has been quiet
//!   for a while [`EventCorrelator::take_due_flushes`] hands out one write per such event
//!   carrying all of them, paced by a budget of its own ([`TrailingFlushOptions`]), so stored
//!   counts become exact within minutes of a storm. This adds results; of what `correlate`
//!   returns it changes only the accounting (`carried`, `settled_skips`): a skipped occurrence
//!   is settled with the write that carries its count instead of at once.
//!
//! # Similar messages
//!
//! With [`CorrelatorOptions::similar_messages_kept`] above 0 (off by default), a combined
//! event also carries the annotation [`SIMILAR_MESSAGES_ANNOTATION`]: a JSON document
//! `{"kept":[{"message":"…","count":N},…],"others":M}` with the first distinct messages folded
//! into it (in the order first seen, each cut to [`MAX_SIMILAR_MESSAGE_BYTES`]) and how many
//! occurrences carried each; `others` counts the occurrences whose message came after the
//! sample was full, and all the counts add up to the event's `count`. Its dedup patch carries
//! the annotation as well (`{"count":…,"lastTimestamp":…,"message":…,"metadata":
//! {"annotations":{…}}}`): still one request.
//!
//! # Cost
//!
//! The three caches stay separate (their keys and recency differ, and client-go's bounds and
//! evictions are per cache), but a call does as little as the caches allow:
//!
//! - The event is correlated in place and moved once, into the result; a combined event is
//!   made in the input's place and moves only the fields it replaces.
//! - With the default key functions the spam and event keys are copied from the aggregate key,
//!   whose parts they share, instead of being written part by part again.
//! - A key equal to the previous event's keeps its hash and the cache slot it was found in, so
//!   the consecutive events of a storm are neither hashed nor looked up again (the slot is
//!   trusted only while the cache has had no insert or removal since).
//! - Evicted entries are refilled in place; in a steady state a call allocates only what it
//!   returns (the patch, and a combined event's message).
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use herald_core::clock::FakeClock;
//! use herald_runtime::record::{CorrelatorOptions, EventCorrelator};
//! use k8s_openapi::api::core::v1::{Event, ObjectReference};
//!
//! let clock = Arc::new(FakeClock::default());
//! let mut c = EventCorrelator::new(CorrelatorOptions { clock: clock.clone(), ..Default::default() });
//! let event = Event {
//!     involved_object: ObjectReference { name: Some("web-0".into()), ..Default::default() },
//!     reason: Some("BackOff".into()),
//!     message: Some("restarting".into()),
//!     count: Some(1),
//!     ..Default::default()
//! };
//! let first = c.correlate(event.clone()).unwrap();
//! assert!(!first.skip && first.patch.is_none()); // create
//! c.update_state(&first.event);
//! let second = c.correlate(event).unwrap();
//! assert_eq!(second.event.count, Some(2)); // patch
//! assert!(second.patch.is_some());
//! ```

mod aggregator;
mod dedup;
mod flush;
pub(crate) mod keys;
pub(crate) mod lru;
mod similar;
pub(crate) mod spam;

use std::collections::BTreeMap;
use std::fmt;
use std::mem;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use hashbrown::DefaultHashBuilder;
use herald_core::clock::{Clock, SystemClock};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Event, EventSeries, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};

pub use keys::{
    COMBINED_MESSAGE_PREFIX, KeyBuilder, KeyFunc, MessageFunc, SpamKeyFunc, aggregate_by_reason,
    combined_message, event_key, spam_key,
};

pub use flush::TrailingFlushOptions;
pub use similar::{MAX_SIMILAR_MESSAGE_BYTES, SIMILAR_MESSAGES_ANNOTATION};

use aggregator::Aggregator;
use dedup::{DedupLog, PatchWriter, TAG_AGGREGATE, TAG_EVENT, WriteState};
use flush::{Flushes, Observation, Pending};
use similar::SimilarMessages;
use spam::SpamFilter;

/// Default size of each correlator cache (client-go's `maxLruCacheEntries`).
pub const DEFAULT_LRU_CACHE_SIZE: usize = 4096;
/// Default spam burst (client-go's `defaultSpamBurst`).
pub const DEFAULT_SPAM_BURST: u32 = 25;
/// Default spam refill rate: one token per 300 s, as float32 like client-go.
pub const DEFAULT_SPAM_QPS: f32 = 1.0 / 300.0;
/// Default number of distinct similar messages that triggers aggregation.
pub const DEFAULT_AGGREGATE_MAX_EVENTS: usize = 10;
/// Default aggregation window.
pub const DEFAULT_AGGREGATE_INTERVAL: Duration = Duration::from_secs(600);

/// How an [`EventCorrelator`] behaves. `Default` gives client-go's defaults.
///
/// Unlike client-go (where a zero field means "use the default"), every value is taken as
/// given; build with `..Default::default()` to keep the defaults.
#[derive(Clone)]
pub struct CorrelatorOptions {
    /// Bound of **each** cache: aggregation records, dedup entries and spam buckets (remembered
    /// trailing flushes have their own, [`TrailingFlushOptions::max_keys`]). At the bound the
    /// least recently used entry is evicted (an evicted object forgets its counts and gets a
    /// fresh spam burst). `0` means unbounded. Default 4096.
    pub lru_cache_size: usize,
    /// Spam bucket size: events per spam key that pass at once. `0` skips every event.
    /// Default 25.
    pub burst_size: u32,
    /// Spam bucket refill, tokens per second (`<= 0`: never refills; infinite: never skips).
    /// Default 1/300.
    pub qps: f32,
    /// Aggregation key and local key of an event. Default [`aggregate_by_reason`].
    pub key_func: KeyFunc,
    /// Message of a combined event, from the incoming event. Default [`combined_message`]
    /// (`(combined from similar events): ` + message).
    pub message_func: MessageFunc,
    /// Distinct local keys per aggregate key within the window that trigger aggregation.
    /// After each aggregation the least recently seen local key is dropped, so the set holds
    /// the `max_events − 1` most recently seen ones (client-go drops a random one). Memory:
    /// up to `lru_cache_size × (max_events − 1)` local keys. `0` and `1` aggregate every event.
    /// Default 10.
    pub max_events: usize,
    /// Aggregation window, measured from the last similar event; an event more than this after
    /// it (strictly) starts a fresh set. Default 600 s.
    pub max_interval: Duration,
    /// The time source (read twice per `correlate`, once per `take_due_flushes`).
    /// Default [`SystemClock`].
    pub clock: Arc<dyn Clock>,
    /// Spam key of an event. Default [`spam_key`].
    pub spam_key_func: SpamKeyFunc,
    /// Herald option: trailing writes. `Some` (default: [`TrailingFlushOptions::default`]):
    /// the occurrences the spam filter holds back are remembered per dedup key, and once their
    /// spam key has been quiet for a while [`EventCorrelator::take_due_flushes`] hands out one
    /// write per such event carrying all of them, paced by its own budget (see
    /// [`TrailingFlushOptions`] for the bounds), so stored counts become exact after a storm.
    /// `None`: nothing is remembered and skipped repeats are only carried into the key's next
    /// write (client-go).
    pub trailing_flush: Option<TrailingFlushOptions>,
    /// Herald option: distinct messages kept on a combined event. `0` (default, client-go):
    /// a combined event shows only the latest message. `n > 0`: it also carries the
    /// annotation [`SIMILAR_MESSAGES_ANNOTATION`] with the first `n` distinct messages folded
    /// into it (each cut to [`MAX_SIMILAR_MESSAGE_BYTES`]) and a count each, plus the count of
    /// the others; see the [`similar`](self#similar-messages) section. Memory: up to
    /// `lru_cache_size × n` messages.
    pub similar_messages_kept: usize,
}

/// The default key functions, shared so that a correlator can tell it was given them (and then
/// copies the spam and event keys from the aggregate key instead of writing them again; see
/// `keys::Marks`). A user's own `Arc` of the same function works, by the generic path.
static DEFAULT_KEY_FUNC: LazyLock<KeyFunc> = LazyLock::new(|| Arc::new(aggregate_by_reason));
static DEFAULT_SPAM_KEY_FUNC: LazyLock<SpamKeyFunc> = LazyLock::new(|| Arc::new(spam_key));

impl Default for CorrelatorOptions {
    fn default() -> Self {
        Self {
            lru_cache_size: DEFAULT_LRU_CACHE_SIZE,
            burst_size: DEFAULT_SPAM_BURST,
            qps: DEFAULT_SPAM_QPS,
            key_func: DEFAULT_KEY_FUNC.clone(),
            message_func: Arc::new(combined_message),
            max_events: DEFAULT_AGGREGATE_MAX_EVENTS,
            max_interval: DEFAULT_AGGREGATE_INTERVAL,
            clock: Arc::new(SystemClock),
            spam_key_func: DEFAULT_SPAM_KEY_FUNC.clone(),
            trailing_flush: Some(TrailingFlushOptions::default()),
            similar_messages_kept: 0,
        }
    }
}

impl fmt::Debug for CorrelatorOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CorrelatorOptions")
            .field("lru_cache_size", &self.lru_cache_size)
            .field("burst_size", &self.burst_size)
            .field("qps", &self.qps)
            .field("max_events", &self.max_events)
            .field("max_interval", &self.max_interval)
            .field("trailing_flush", &self.trailing_flush)
            .field("similar_messages_kept", &self.similar_messages_kept)
            .finish_non_exhaustive()
    }
}

/// What to do with one event.
#[derive(Debug, Clone, PartialEq)]
pub struct CorrelateResult {
    /// The event to write (create when `patch` is `None`, else patch), or the unchanged input
    /// when `skip` is true.
    pub event: Event,
    /// The dedup patch (`{"count":N,"lastTimestamp":"…","message":"…"}`) when the event
    /// repeats one this correlator has handed out a write for. `None` for an event whose
    /// earlier occurrences were all held back: it is created, carrying them all.
    pub patch: Option<Vec<u8>>,
    /// The spam filter refused the event: write nothing. Its count is carried into the key's
    /// next write (and into a trailing flush, if enabled).
    pub skip: bool,
    /// The aggregator replaced the input by a "combined" event (`event` is that event, unless
    /// `skip` is also true — then the input was merged into the combined event's count).
    pub aggregated: bool,
    /// With [`CorrelatorOptions::trailing_flush`]: occurrences the spam filter held back
    /// earlier whose count this write carries. They share the write's fate (written, given
    /// up, or dropped at shutdown). A skipped event is itself held, not settled, until such a
    /// write.
    pub carried: u64,
    /// Skipped occurrences whose outcome is settled as "skipped" by this call: without
    /// trailing flushes the skipped event itself (client-go: its count rides the key's next
    /// write, if any); with them, those of keys forgotten at the trailing-flush bound.
    pub settled_skips: u64,
}

/// Why [`EventCorrelator::correlate`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CorrelateError {
    /// The dedup patch could not be serialised (client-go's equivalent is a strategic-merge
    /// error). The caches have already counted the event.
    #[error("building the dedup patch: {0}")]
    Patch(#[from] serde_json::Error),
}

/// Entries currently held by each correlator cache (each bounded by `lru_cache_size`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheSizes {
    /// Aggregation records (one per aggregate key).
    pub aggregator: usize,
    /// Dedup entries (one per full event key or aggregate key, plus `update_state` entries).
    pub dedup: usize,
    /// Spam token buckets (one per spam key).
    pub spam: usize,
    /// Remembered trailing flushes (one per dedup key with occurrences held back since its
    /// last write; bounded by [`TrailingFlushOptions::max_keys`]).
    pub pending_flushes: usize,
}

/// Counters since the correlator was created.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CorrelatorStats {
    /// Calls to `correlate`.
    pub correlated: u64,
    /// Events the spam filter skipped.
    pub skipped: u64,
    /// Events replaced by (merged into) a combined event, skipped or not.
    pub aggregated: u64,
    /// Events counted as repeats of a cached key (written as patches unless skipped).
    pub deduplicated: u64,
    /// Results returned by `take_due_flushes`.
    pub flushed: u64,
    /// Remembered trailing flushes forgotten at the cache bound (their counts stay short until
    /// the key's next write).
    pub flush_evictions: u64,
    /// Aggregation records evicted at the cache bound.
    pub aggregator_evictions: u64,
    /// Dedup entries evicted at the cache bound.
    pub dedup_evictions: u64,
    /// Spam buckets evicted at the cache bound (that key's next event gets a fresh burst).
    pub spam_evictions: u64,
}

/// Aggregates, counts and spam-limits events before they are written; see the
/// [module documentation](self).
///
/// One correlator serves one sink; it is not shared (`&mut self`), so it needs no locks.
/// Memory is bounded by [`CorrelatorOptions::lru_cache_size`] per cache and
/// [`TrailingFlushOptions::max_keys`] remembered trailing flushes.
pub struct EventCorrelator {
    clock: Arc<dyn Clock>,
    /// `None`: the default ([`aggregate_by_reason`]), called directly.
    key_func: Option<KeyFunc>,
    message_func: MessageFunc,
    /// `None`: the default ([`spam_key`]) with the default `key_func`: copied from the
    /// aggregate key.
    spam_key_func: Option<SpamKeyFunc>,
    trailing_flush: bool,
    similar_messages_kept: usize,
    hasher: DefaultHashBuilder,
    aggregator: Aggregator,
    dedup: DedupLog,
    spam: SpamFilter,
    flushes: Flushes,
    patches: PatchWriter,
    /// The time of the last clock read.
    last_now: Option<Timestamp>,
    stats: CorrelatorStats,
    /// Held occurrences the current write carries, and those forgotten at the trailing-flush
    /// bound, until `correlate` hands them out (set only on its successful path).
    carried: u64,
    forgotten: u64,
}

impl fmt::Debug for EventCorrelator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventCorrelator")
            .field("sizes", &self.cache_sizes())
            .field("stats", &self.stats())
            .field("trailing_flush", &self.trailing_flush)
            .finish_non_exhaustive()
    }
}

impl EventCorrelator {
    /// A correlator with empty caches.
    pub fn new(options: CorrelatorOptions) -> Self {
        let size = options.lru_cache_size;
        let key_func =
            (!Arc::ptr_eq(&options.key_func, &DEFAULT_KEY_FUNC)).then_some(options.key_func);
        let spam_key_func = (key_func.is_some()
            || !Arc::ptr_eq(&options.spam_key_func, &DEFAULT_SPAM_KEY_FUNC))
        .then_some(options.spam_key_func);
        Self {
            aggregator: Aggregator::new(size, options.max_events, options.max_interval),
            dedup: DedupLog::new(size),
            spam: SpamFilter::new(size, options.qps, options.burst_size),
            flushes: Flushes::new(&options.trailing_flush.clone().unwrap_or_default()),
            clock: options.clock,
            key_func,
            message_func: options.message_func,
            spam_key_func,
            trailing_flush: options.trailing_flush.is_some(),
            similar_messages_kept: options.similar_messages_kept,
            hasher: DefaultHashBuilder::default(),
            patches: PatchWriter::default(),
            last_now: None,
            stats: CorrelatorStats::default(),
            carried: 0,
            forgotten: 0,
        }
    }

    /// Aggregates, counts and spam-checks one event; reads the clock exactly twice.
    ///
    /// Returns the event to write (with the patch when it repeats a written one), or
    /// `skip: true` with the input unchanged. Either way the caches have counted it.
    pub fn correlate(&mut self, mut event: Event) -> Result<CorrelateResult, CorrelateError> {
        self.stats.correlated += 1;
        let now = self.clock.now();
        self.last_now = Some(now);
        let aggregated = self
            .aggregator
            .observe(&event, now, self.key_func.as_ref(), &self.hasher);
        // The paths work on the event in place: it is ~1 kB, and moving it costs more than
        // most of the work.
        // A failing path has taken nothing held back (it fails before the write is certain):
        // the held counts stay remembered for the key's trailing flush.
        let outcome = if aggregated {
            self.stats.aggregated += 1;
            self.aggregator_path(&mut event, now)?
        } else {
            self.plain_path(&mut event)?
        };
        let (patch, skip) = match outcome {
            Outcome::Create => (None, false),
            Outcome::Patch(patch) => (Some(patch), false),
            Outcome::Skip => (None, true),
        };
        let carried = mem::take(&mut self.carried);
        let mut settled_skips = mem::take(&mut self.forgotten);
        if skip && !self.trailing_flush {
            settled_skips += 1;
        }
        Ok(CorrelateResult {
            event,
            patch,
            skip,
            aggregated,
            carried,
            settled_skips,
        })
    }

    /// The spam decision for `event` (second clock read).
    #[inline]
    fn spam_check(&mut self, event: &Event) -> bool {
        match (&self.spam_key_func, self.aggregator.marks) {
            (None, Some(marks)) => {
                // The event's source, involved object and type are the aggregated input's.
                let aggregate = &self.aggregator.aggregate_key.bytes;
                self.spam.key.set(None, marks.spam_key(aggregate));
            }
            (Some(f), _) => self.spam.key.build(|k| f(event, k)),
            (None, None) => self.spam.key.build(|k| spam_key(event, k)),
        }
        let now = self.clock.now();
        self.last_now = Some(now);
        let accepted = self.spam.try_accept_key(&self.hasher, now);
        if !self.flushes.is_empty() {
            // The storm of this spam key goes on: its remembered keys are not due yet.
            let hash = self.spam.key.hash(&self.hasher);
            self.flushes.touch(hash, &self.spam.key.bytes, now);
        }
        accepted
    }

    /// Counts a not aggregated event; returns what becomes of it.
    #[inline]
    fn plain_path(&mut self, event: &mut Event) -> Result<Outcome, CorrelateError> {
        let aggregator = &self.aggregator;
        self.dedup.key.build(|k| {
            k.push_raw(&[TAG_EVENT]);
            match aggregator.marks {
                Some(marks) => marks.event_key(
                    event,
                    &aggregator.aggregate_key.bytes,
                    &aggregator.local_key,
                    k,
                ),
                None => event_key(event, k),
            }
        });
        let seen = self.dedup.observe(&self.hasher, event.count, |entry| {
            entry.count = event.count.unwrap_or(0);
            entry.first_timestamp.clone_from(&event.first_timestamp);
            entry.name.clone_from(&event.metadata.name);
            entry
                .resource_version
                .clone_from(&event.metadata.resource_version);
            entry.state = WriteState::Unwritten;
            entry.similar = None;
        });
        // On a repeat the event takes the cached identity. Name and resourceVersion are
        // swapped (not cloned) with the cache entry and put back below, so the input can be
        // returned unchanged if the event is skipped.
        let mut saved = None;
        if seen.repeat {
            self.stats.deduplicated += 1;
            let entry = self.dedup.entries.value_mut(seen.idx);
            mem::swap(&mut event.metadata.name, &mut entry.name);
            mem::swap(
                &mut event.metadata.resource_version,
                &mut entry.resource_version,
            );
            let first = mem::replace(&mut event.first_timestamp, entry.first_timestamp.clone());
            let count = event.count.replace(entry.count);
            saved = Some((first, count));
        }
        if self.spam_check(event) {
            let entry = self.dedup.entries.value_mut(seen.idx);
            if seen.repeat {
                entry.name.clone_from(&event.metadata.name);
                entry
                    .resource_version
                    .clone_from(&event.metadata.resource_version);
            }
            // A repeat of an event never written (its earlier occurrences were all held back)
            // is created, with the count and first timestamp of them all.
            let state = mem::replace(&mut entry.state, WriteState::Written);
            let outcome = if seen.repeat && state == WriteState::Written {
                Outcome::Patch(self.patches.patch_event(event, None)?)
            } else {
                Outcome::Create
            };
            // Only once the write is certain: it carries the key's held-back count.
            if self.trailing_flush {
                self.carried = self.flushes.clear_key(&mut self.dedup.key, &self.hasher);
            }
            return Ok(outcome);
        }
        self.stats.skipped += 1;
        if self.trailing_flush {
            let written = self.dedup.entries.value(seen.idx).state == WriteState::Written;
            if !self.remember_update(written, false, event) {
                self.remember_insert(written, false, event.clone());
            }
        }
        if let Some((first, count)) = saved {
            let entry = self.dedup.entries.value_mut(seen.idx);
            mem::swap(&mut event.metadata.name, &mut entry.name);
            mem::swap(
                &mut event.metadata.resource_version,
                &mut entry.resource_version,
            );
            event.first_timestamp = first;
            event.count = count;
        }
        Ok(Outcome::Skip)
    }

    /// Turns the event into the combined one and counts that; returns what becomes of it
    /// (when skipped, the event is given back as it came).
    #[inline]
    fn aggregator_path(
        &mut self,
        event: &mut Event,
        now: Timestamp,
    ) -> Result<Outcome, CorrelateError> {
        let message = (self.message_func)(event);
        self.dedup
            .key
            .set(Some(TAG_AGGREGATE), &self.aggregator.aggregate_key.bytes);
        // The input may stand for several occurrences (merged in the recorder's queue): the
        // combined event counts them all, as a repeat does.
        let occurrences = event.count.unwrap_or(0).max(1);
        let seen = self
            .dedup
            .observe(&self.hasher, Some(occurrences), |entry| {
                entry.count = occurrences;
                entry.state = WriteState::Unwritten;
                entry.similar = None;
                entry.first_timestamp = Some(Time(now));
                // The combined event replaces the incoming one, which is never written: it takes
                // over the incoming event's name, unique per recorder even when the clock stands
                // still.
                let input_name = event
                    .metadata
                    .name
                    .as_deref()
                    .filter(|n| herald_core::naming::is_dns1123_subdomain(n));
                entry.name = Some(match input_name {
                    Some(n) => n.to_string(),
                    None => herald_core::naming::event_name(
                        event.involved_object.name.as_deref().unwrap_or(""),
                        now,
                    ),
                });
                entry.resource_version = None;
            });
        if seen.repeat {
            self.stats.deduplicated += 1;
        }
        let similar = if self.similar_messages_kept > 0 {
            let entry = self.dedup.entries.value_mut(seen.idx);
            let sample = entry.similar.get_or_insert_default();
            sample.add(
                event.message.as_deref().unwrap_or(""),
                u64::try_from(occurrences).unwrap_or(1),
                self.similar_messages_kept,
            );
            Some(sample.to_json())
        } else {
            None
        };
        // The combined event is made in the input's place: it keeps involvedObject, type,
        // reason, source and the namespace, and what it replaces or drops is set aside so the
        // input can be given back unchanged if the event is skipped. Name and resourceVersion
        // are swapped with the cache entry's (no copies) and settled below.
        let entry = self.dedup.entries.value_mut(seen.idx);
        let replaced = Replaced::take(
            event,
            message,
            entry.count,
            entry.first_timestamp.clone(),
            now,
        );
        mem::swap(&mut event.metadata.name, &mut entry.name);
        mem::swap(
            &mut event.metadata.resource_version,
            &mut entry.resource_version,
        );
        if let Some(json) = &similar {
            event.metadata.annotations = Some(BTreeMap::from([(
                SIMILAR_MESSAGES_ANNOTATION.to_string(),
                json.clone(),
            )]));
        }
        if self.spam_check(event) {
            let entry = self.dedup.entries.value_mut(seen.idx);
            entry.name.clone_from(&event.metadata.name);
            entry
                .resource_version
                .clone_from(&event.metadata.resource_version);
            let state = mem::replace(&mut entry.state, WriteState::Written);
            let outcome = if seen.repeat && state == WriteState::Written {
                Outcome::Patch(self.patches.patch_event(event, similar.as_deref())?)
            } else {
                Outcome::Create
            };
            if self.trailing_flush {
                self.carried = self.flushes.clear_key(&mut self.dedup.key, &self.hasher);
            }
            return Ok(outcome);
        }
        self.stats.skipped += 1;
        if self.trailing_flush {
            let written = self.dedup.entries.value(seen.idx).state == WriteState::Written;
            if !self.remember_update(written, true, event) {
                self.remember_insert(written, true, event.clone());
            }
        }
        if similar.is_some() {
            // Set above on a metadata that held only the identity (or that `restore` replaces).
            event.metadata.annotations = None;
        }
        let entry = self.dedup.entries.value_mut(seen.idx);
        mem::swap(&mut event.metadata.name, &mut entry.name);
        mem::swap(
            &mut event.metadata.resource_version,
            &mut entry.resource_version,
        );
        replaced.restore(event);
        Ok(Outcome::Skip)
    }

    /// Updates the remembered trailing flush of the current dedup key with a skipped
    /// observation; false when the key has none yet.
    fn remember_update(&mut self, written: bool, aggregated: bool, observed: &Event) -> bool {
        let observation = Observation {
            count: observed.count,
            last_timestamp: &observed.last_timestamp,
            message: &observed.message,
            aggregated,
            written,
        };
        let spam_hash = self.spam.key.hash(&self.hasher);
        let now = self.last_now.unwrap_or(Timestamp::UNIX_EPOCH);
        self.flushes.update_existing(
            &mut self.dedup.key,
            &self.hasher,
            spam_hash,
            &self.spam.key.bytes,
            observation,
            now,
        )
    }

    /// Remembers a skipped observation under the current dedup key (which has none yet).
    fn remember_insert(&mut self, written: bool, aggregated: bool, observed: Event) {
        let now = self.last_now.unwrap_or(Timestamp::UNIX_EPOCH);
        let hash = self.dedup.key.hash(&self.hasher);
        let spam_hash = self.spam.key.hash(&self.hasher);
        self.forgotten += self.flushes.insert_new(
            hash,
            &self.dedup.key.bytes,
            Pending {
                spam_hash,
                spam_key: self.spam.key.bytes.clone(),
                event: observed,
                aggregated,
                written,
                held: 1,
            },
            now,
        );
    }

    /// Stores what the server returned for a written event under the event's full key: its
    /// name, resourceVersion and firstTimestamp, and `max(cached count, written count)`, so
    /// the next repeat patches the stored object. Reads no clock.
    ///
    /// For a combined event this adds an entry under the combined event's full key (harmless;
    /// the aggregate-key entry already carries the name), as in client-go.
    pub fn update_state(&mut self, written: &Event) {
        self.dedup.key.build(|k| {
            k.push_raw(&[TAG_EVENT]);
            event_key(written, k);
        });
        self.dedup.update(&self.hasher, written);
    }

    /// The earliest time a remembered trailing flush can be taken (its spam key has been
    /// quiet for [`TrailingFlushOptions::quiet`] and the trailing budget has a token), judged
    /// at the time of the last clock read — this reads no clock. A time at or before now means
    /// "due now". `None` when nothing is remembered.
    ///
    /// Cost: constant (the spam keys are kept in the order their storms end).
    pub fn next_flush_at(&self) -> Option<Timestamp> {
        if !self.trailing_flush {
            return None;
        }
        self.flushes.next_flush_at(self.last_now)
    }

    /// Takes the remembered trailing flushes that are due now (one clock read): those of the
    /// spam keys quiet for [`TrailingFlushOptions::quiet`], earliest storm end first, as far
    /// as the trailing budget allows (one token each). Each result is one write that carries
    /// every occurrence held back under its dedup key: the key's current count (and the
    /// server's name/resourceVersion/firstTimestamp when known), the latest skipped
    /// lastTimestamp and message, and the dedup patch when a write of the key was handed out
    /// before — otherwise no patch: the event is created, with its full count. Keys not yet
    /// due, or beyond the budget, stay remembered.
    pub fn take_due_flushes(&mut self) -> Vec<CorrelateResult> {
        self.take_flushes(false)
    }

    /// Takes every remembered trailing flush, due or not, ignoring the trailing budget. For
    /// shutdown: the process is going away and one last write per held-back key keeps the
    /// stored counts exact.
    pub fn drain_flushes(&mut self) -> Vec<CorrelateResult> {
        self.take_flushes(true)
    }

    /// Forgets every remembered trailing flush without writing it, and returns how many
    /// held-back occurrences they carried: for a sink that gives up (its shutdown deadline
    /// passed) and settles them as dropped.
    pub fn forget_flushes(&mut self) -> u64 {
        self.flushes.forget_all()
    }

    fn take_flushes(&mut self, ignore_budget: bool) -> Vec<CorrelateResult> {
        let now = self.clock.now();
        self.last_now = Some(now);
        if !self.trailing_flush || self.flushes.is_empty() {
            return Vec::new();
        }
        let taken = self.flushes.take(now, ignore_budget);
        let mut out = Vec::with_capacity(taken.len());
        for (hash, key, pending) in taken {
            let Pending {
                mut event,
                aggregated,
                mut written,
                held,
                ..
            } = pending;
            let mut similar = None;
            if let Some(idx) = self.dedup.entries.peek(hash, &key) {
                let entry = self.dedup.entries.value_mut(idx);
                event.count = Some(entry.count);
                event.metadata.name.clone_from(&entry.name);
                event
                    .metadata
                    .resource_version
                    .clone_from(&entry.resource_version);
                event.first_timestamp.clone_from(&entry.first_timestamp);
                written =
                    mem::replace(&mut entry.state, WriteState::Written) == WriteState::Written;
                similar = entry.similar.as_deref().map(SimilarMessages::to_json);
            }
            if let Some(json) = &similar {
                event.metadata.annotations = Some(BTreeMap::from([(
                    SIMILAR_MESSAGES_ANNOTATION.to_string(),
                    json.clone(),
                )]));
            }
            let patch = if written {
                self.patches
                    .patch_event(&event, similar.as_deref())
                    .map_err(
                        |e| tracing::warn!(error = %e, "dropping the patch of a trailing flush"),
                    )
                    .ok()
            } else {
                // Never written: created, whatever resourceVersion the input carried.
                event.metadata.resource_version = None;
                None
            };
            out.push(CorrelateResult {
                event,
                patch,
                skip: false,
                aggregated,
                carried: held,
                settled_skips: 0,
            });
        }
        self.stats.flushed += out.len() as u64;
        out
    }

    /// Entries held by each cache.
    pub fn cache_sizes(&self) -> CacheSizes {
        CacheSizes {
            aggregator: self.aggregator.len(),
            dedup: self.dedup.entries.len(),
            spam: self.spam.len(),
            pending_flushes: self.flushes.pending.len(),
        }
    }

    /// Remembered trailing flushes (see [`CorrelatorOptions::trailing_flush`]).
    pub fn pending_flushes(&self) -> usize {
        self.flushes.pending.len()
    }

    /// Counters since creation.
    pub fn stats(&self) -> CorrelatorStats {
        CorrelatorStats {
            flush_evictions: self.flushes.evictions,
            aggregator_evictions: self.aggregator.evictions,
            dedup_evictions: self.dedup.evictions,
            spam_evictions: self.spam.evictions,
            ..self.stats
        }
    }
}

/// What becomes of a correlated event; [`EventCorrelator::correlate`] turns it into the
/// client-go shaped `patch` and `skip` of a [`CorrelateResult`].
#[derive(Debug)]
enum Outcome {
    /// The spam filter let it through and it is new to the dedup cache: create it.
    Create,
    /// The spam filter let it through and it repeats a cached key: send this dedup patch.
    Patch(Vec<u8>),
    /// The spam filter held it back: write nothing.
    Skip,
}

/// What a combined event replaced or dropped of the input it was made from (all but the name
/// and resourceVersion, which the caller swaps with the cache entry).
///
/// The large fields that events rarely carry (metadata besides the identity, `related`,
/// `series`) are boxed when present, so that the common case moves a few words.
struct Replaced {
    /// The input's metadata besides name, namespace and resourceVersion, when it had any
    /// (the recorder sets at most annotations).
    other_metadata: Option<Box<ObjectMeta>>,
    message: Option<String>,
    count: Option<i32>,
    first_timestamp: Option<Time>,
    last_timestamp: Option<Time>,
    action: Option<String>,
    event_time: Option<MicroTime>,
    related: Option<Box<ObjectReference>>,
    reporting_component: Option<String>,
    reporting_instance: Option<String>,
    series: Option<Box<EventSeries>>,
}

impl Replaced {
    /// Turns `event` into the combined event (but for name and resourceVersion): `message`,
    /// `count`, `first_timestamp` and a lastTimestamp of `now`; the fields client-go leaves
    /// out of a combined event are taken out.
    fn take(
        event: &mut Event,
        message: String,
        count: i32,
        first_timestamp: Option<Time>,
        now: Timestamp,
    ) -> Self {
        let other_metadata = (!identity_only(&event.metadata)).then(|| {
            let mut other = Box::new(mem::take(&mut event.metadata));
            event.metadata.name = other.name.take();
            event.metadata.namespace = other.namespace.take();
            event.metadata.resource_version = other.resource_version.take();
            other
        });
        Self {
            other_metadata,
            message: event.message.replace(message),
            count: event.count.replace(count),
            first_timestamp: mem::replace(&mut event.first_timestamp, first_timestamp),
            last_timestamp: event.last_timestamp.replace(Time(now)),
            action: event.action.take(),
            event_time: event.event_time.take(),
            related: take_boxed(&mut event.related),
            reporting_component: event.reporting_component.take(),
            reporting_instance: event.reporting_instance.take(),
            series: take_boxed(&mut event.series),
        }
    }

    /// Turns the combined event back into the input (but for name and resourceVersion).
    fn restore(self, event: &mut Event) {
        if let Some(mut metadata) = self.other_metadata {
            metadata.name = event.metadata.name.take();
            metadata.namespace = event.metadata.namespace.take();
            metadata.resource_version = event.metadata.resource_version.take();
            event.metadata = *metadata;
        }
        event.message = self.message;
        event.count = self.count;
        event.first_timestamp = self.first_timestamp;
        event.last_timestamp = self.last_timestamp;
        event.action = self.action;
        event.event_time = self.event_time;
        event.related = self.related.map(|r| *r);
        event.reporting_component = self.reporting_component;
        event.reporting_instance = self.reporting_instance;
        event.series = self.series.map(|r| *r);
    }
}

/// `o.take()`, boxed: large fields set aside are moved as one word.
fn take_boxed<T>(o: &mut Option<T>) -> Option<Box<T>> {
    o.take().map(Box::new)
}

/// Whether `m` holds nothing but name, namespace and resourceVersion (what a combined event's
/// metadata holds).
fn identity_only(m: &ObjectMeta) -> bool {
    // Destructured so that a field added to ObjectMeta fails to compile here.
    let ObjectMeta {
        annotations,
        creation_timestamp,
        deletion_grace_period_seconds,
        deletion_timestamp,
        finalizers,
        generate_name,
        generation,
        labels,
        managed_fields,
        name: _,
        namespace: _,
        owner_references,
        resource_version: _,
        self_link,
        uid,
    } = m;
    annotations.is_none()
        && creation_timestamp.is_none()
        && deletion_grace_period_seconds.is_none()
        && deletion_timestamp.is_none()
        && finalizers.is_none()
        && generate_name.is_none()
        && generation.is_none()
        && labels.is_none()
        && managed_fields.is_none()
        && owner_references.is_none()
        && self_link.is_none()
        && uid.is_none()
}
