//! Series: client-go's client-side deduplication of isomorphic events (tools/events), with a
//! bounded cache and exact final counts.
//!
//! ```text
//! occurrence ─► isomorphic key ─► cache (LRU by last observation, bound = finish.max_keys)
//!   new key            ─► create (the event; with series when the queue merged ≥ 2)
//!   2nd occurrence     ─► patch {"series":{"count":N,"lastObservedTime":…}}
//!   later occurrences  ─► counted in memory (outcome `series` once a write carries them)
//!   every `heartbeat`  ─► re-patch every open series (its TTL on the server does not run out)
//!   idle `finish.quiet`─► final patch if the server's count is short (paced by the
//!                         trailing-write budget), then forgotten: the next occurrence creates
//!                         a new Event
//!   at the bound       ─► the least recently observed entry is finished at once (final patch
//!                         when its count is short), counted in `evicted`
//!   shutdown           ─► a final patch for every series whose count is short
//! ```
//!
//! Occurrences arrive light ([`Occurrence`]: the recorder's arguments in one allocation, not
//! an Event), shared (`Arc`) as the fan-out delivers them. The step never builds an Event: a
//! write carries the occurrence whose event it sends and the series count
//! ([`PendingEvent`]), and the writer builds the event on the write's own task, in the
//! write's turn for its key. So an occurrence a series only counts is freed as cheaply as it
//! was made, and a new object's create costs the step a reference count.
//!
//! Memory: an entry keeps its key and an occurrence (the one delivered, not a copy): a
//! single occurrence's, or a series' first one, which every write of the series sends (with
//! the series' count). So a stream of events about new objects caches little, and an
//! event exists only while a write sends it.

use std::time::Duration;

use hashbrown::DefaultHashBuilder;
use herald_core::clock::{Clock, add_saturating, elapsed};
use herald_core::flow::TokenBucket;
use jiff::Timestamp;
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use std::sync::Arc;

use super::event::{Occurrence, PendingEvent, micro, series_patch};
use super::stats::SeriesCounters;
use crate::record::TrailingFlushOptions;
use crate::record::correlator::keys::KeyBuf;
use crate::record::correlator::lru::Lru;
use crate::record::correlator::spam::SpamFilter;
use crate::record::pipeline::SinkLogic;
use crate::record::stats::SinkOutcome;
use crate::record::writer::{KeyedWriter, Tally, Write, WriteOp};

/// How an events.k8s.io/v1 sink keeps series. `Default` is client-go's timing (6 minutes to
/// finish, 30 minutes between heartbeats) with Herald's bounds and exact counts.
#[derive(Debug, Clone, PartialEq)]
pub struct SeriesOptions {
    /// When a series ends, and the budget of its final writes — the trailing-write budget of
    /// the core/v1 recorder ([`TrailingFlushOptions`]), read for series:
    /// - `quiet` (default 6 minutes, client-go's `finishTime`): a series with no occurrence
    ///   for this long is finished: its final count is written if the server's is short, and
    ///   it is forgotten (the next isomorphic occurrence creates a new Event). A single event
    ///   is forgotten after the same time, with no API call.
    /// - `max_keys` (default 4096): the bound of the series cache (single events included;
    ///   client-go's map is unbounded). At the bound the least recently observed entry is
    ///   finished at once, budget or not (final write when its count is short), and counted
    ///   in [`SeriesStats::evicted`]; `0` means unbounded.
    /// - `settle_within` (default 15 minutes): final writes are paced at
    ///   [`rate()`](TrailingFlushOptions::rate) per second (4096 / 540 s ≈ 7.6 by default),
    ///   so every stored count is exact within `settle_within` of the series' last occurrence
    ///   (plus the write's own time); client-go finishes 6–12 minutes after it.
    pub finish: TrailingFlushOptions,
    /// Every open series (two occurrences or more) is patched again this often with its
    /// current count, so its TTL on the server does not run out (client-go's `refreshTime`,
    /// 30 minutes; the first heartbeat comes one period after the sink starts). Zero turns
    /// heartbeats off.
    pub heartbeat: Duration,
    /// Leave the references' `resourceVersion` out of the isomorphic key (default `false`:
    /// client-go keeps it, so events about a live object, whose resourceVersion changes with
    /// every update, rarely form a series).
    pub ignore_resource_version: bool,
    /// A spam filter per (reporting controller, regarding object) on *new* events (default
    /// `None`: client-go's tools/events has none). Occurrences of an open series are never
    /// filtered (they cost no write); an occurrence that would create an event while its
    /// key's bucket is empty is not written and is counted as `skipped` (its count is lost,
    /// which is the point of the filter).
    pub spam_filter: Option<SpamFilterOptions>,
}

/// The spam filter of [`SeriesOptions::spam_filter`]: one token bucket per (reporting
/// controller, regarding object without its resourceVersion). `Default` is the core/v1
/// recorder's (client-go's) budget: a burst of 25 new events, then one per 5 minutes.
#[derive(Debug, Clone, PartialEq)]
pub struct SpamFilterOptions {
    /// New events a key may create at once.
    pub burst: u32,
    /// Tokens per second after the burst.
    pub qps: f32,
    /// Buckets kept (least recently used evicted; an evicted key starts with a full bucket
    /// again, as in client-go). `0` means unbounded.
    pub max_keys: usize,
}

impl Default for SpamFilterOptions {
    fn default() -> Self {
        Self {
            burst: 25,
            qps: 1.0 / 300.0,
            max_keys: 4096,
        }
    }
}

impl Default for SeriesOptions {
    fn default() -> Self {
        Self {
            finish: TrailingFlushOptions {
                quiet: Duration::from_secs(6 * 60),
                settle_within: Duration::from_secs(15 * 60),
                max_keys: 4096,
            },
            heartbeat: Duration::from_secs(30 * 60),
            ignore_resource_version: false,
            spam_filter: None,
        }
    }
}

/// One isomorphic key: a single occurrence, or a series.
///
/// A single occurrence keeps the light occurrence as it was delivered (shared with its
/// create, not copied), not its event: a stream of new objects (each a create) caches one
/// small allocation per key instead of a whole event.
#[derive(Debug)]
enum Entry {
    /// One occurrence (its `count` is 1, its `last_observed` when it was observed), already
    /// handed to the writer as a create; nothing of it is written again unless a second
    /// occurrence makes it a series, whose event is this occurrence's.
    Single(Arc<Occurrence>),
    /// Two occurrences or more.
    Series(Series),
}

impl Entry {
    fn last_observed(&self) -> Timestamp {
        match self {
            Entry::Single(first) => first.last_observed,
            Entry::Series(s) => s.last_observed,
        }
    }

    /// Whether the server's count is behind (a single occurrence never is: its create
    /// carried it).
    fn is_short(&self) -> bool {
        match self {
            Entry::Single(_) => false,
            Entry::Series(s) => s.count > s.written,
        }
    }
}

/// An open series.
#[derive(Debug)]
struct Series {
    /// The first occurrence (its name, note and eventTime are what the server keeps): every
    /// write of the series sends its event with the current series (a patch names it, a patch
    /// answered 404 creates it).
    first: Arc<Occurrence>,
    /// Occurrences so far (saturating).
    count: i32,
    /// The latest occurrence.
    last_observed: Timestamp,
    /// The count carried by the last write handed to the writer.
    written: i32,
    /// Delivered items whose occurrences no write handed out carries yet (settled with the
    /// write that does).
    held: u64,
}

impl Series {
    /// A write of the current count (the first occurrence's event with the current series),
    /// carrying the held occurrences; `plain` delivered items are settled by it as created
    /// or patched.
    fn write(&mut self, via: Via, plain: u64) -> Write<PendingEvent> {
        let series = EventSeries {
            count: self.count,
            last_observed_time: MicroTime(micro(self.last_observed)),
        };
        let op = match via {
            Via::Patch => WriteOp::Patch(Some(series_patch(&series))),
            Via::Create => WriteOp::Create,
        };
        self.written = self.count;
        let tally = Tally {
            plain,
            series: std::mem::take(&mut self.held),
            ..Tally::default()
        };
        Write {
            source: PendingEvent {
                first: self.first.clone(),
                series: Some(series),
            },
            op,
            tally,
        }
    }

    fn is_short(&self) -> bool {
        self.count > self.written
    }
}

/// How an entry's write goes to the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Via {
    /// The first write of a new entry.
    Create,
    /// Any later write (a 404 makes it a create in the writer).
    Patch,
}

/// The per-sink series logic the shared sink task runs.
pub(crate) struct SeriesLogic {
    cache: Lru<Entry>,
    key: KeyBuf,
    hasher: DefaultHashBuilder,
    opts: SeriesOptions,
    clock: Arc<dyn Clock>,
    budget: TokenBucket,
    spam: Option<SpamFilter>,
    /// `None` when heartbeats are off.
    next_heartbeat: Option<Timestamp>,
    counters: SeriesCounters,
}

impl SeriesLogic {
    pub(crate) fn new(
        opts: SeriesOptions,
        clock: Arc<dyn Clock>,
        counters: SeriesCounters,
    ) -> Self {
        let rate = opts.finish.rate();
        let qps = if rate.is_finite() {
            rate as f32
        } else {
            f32::INFINITY
        };
        let next_heartbeat =
            (!opts.heartbeat.is_zero()).then(|| add_saturating(clock.now(), opts.heartbeat));
        Self {
            cache: Lru::new(opts.finish.max_keys),
            key: KeyBuf::default(),
            hasher: DefaultHashBuilder::default(),
            budget: TokenBucket::new(qps, 1),
            spam: opts
                .spam_filter
                .as_ref()
                .map(|o| SpamFilter::new(o.max_keys, o.qps, o.burst)),
            opts,
            clock,
            next_heartbeat,
            counters,
        }
    }

    fn submit_final(writer: &mut KeyedWriter<PendingEvent>, series: &mut Series) {
        writer.counters().trailing_flush();
        writer.submit(series.write(Via::Patch, 0));
    }

    fn heartbeat(&mut self, writer: &mut KeyedWriter<PendingEvent>) {
        let idxs: Vec<usize> = self.cache.indices_lru_first().collect();
        for idx in idxs {
            if let Entry::Series(s) = self.cache.value_mut(idx) {
                writer.submit(s.write(Via::Patch, 0));
                self.counters.heartbeat_writes.inc();
            }
        }
    }

    /// Finishes the series idle since `now − quiet`, least recently observed first, as far as
    /// the budget allows final writes.
    fn finish_due(&mut self, now: Timestamp, writer: &mut KeyedWriter<PendingEvent>) {
        while let Some(idx) = self.cache.indices_lru_first().next() {
            let e = self.cache.value(idx);
            if add_saturating(e.last_observed(), self.opts.finish.quiet) > now {
                break;
            }
            if let Entry::Series(s) = self.cache.value_mut(idx) {
                if s.is_short() {
                    if !self.budget.try_accept_at(now) {
                        break;
                    }
                    Self::submit_final(writer, s);
                }
                self.counters.finished.inc();
            }
            self.cache.remove(idx);
        }
    }
}

/// What [`SeriesLogic::observe`] decided for one occurrence.
// Returned by value and consumed at once: boxing the write would add an allocation per write.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Step {
    /// A write to hand to the writer: the create of a new entry, or the patch that starts
    /// a series (second occurrence).
    Write(Write<PendingEvent>),
    /// Counted in memory: a later occurrence of an open series (a later write carries it).
    Counted,
    /// Refused by the spam filter (outcome `skipped`).
    Skipped,
}

/// [`SeriesLogic::observe`]'s answer: the step, and the final write of an entry evicted at
/// the cache bound (when its server count was short).
pub(crate) struct Observed {
    pub step: Step,
    pub evicted_final: Option<Write<PendingEvent>>,
}

impl SeriesLogic {
    /// The series decision for one occurrence, without touching the writer: the key, the
    /// cache, the spam filter and the series counters. [`SinkLogic::handle`] hands what it
    /// returns to the writer.
    pub(crate) fn observe(&mut self, occ: Arc<Occurrence>) -> Observed {
        let ignore_rv = self.opts.ignore_resource_version;
        self.key.build(|k| occ.isomorphic_key(ignore_rv, k));
        let m = i32::try_from(occ.count).unwrap_or(i32::MAX);
        if let Some(idx) = self.cache.get_key(&mut self.key, &self.hasher) {
            // The entry became the most recently observed; the oldest may have changed.
            let e = self.cache.value_mut(idx);
            let step = match e {
                Entry::Series(s) => {
                    s.count = s.count.saturating_add(m);
                    s.last_observed = s.last_observed.max(occ.last_observed);
                    s.held += 1;
                    Step::Counted
                }
                Entry::Single(first) => {
                    // The second occurrence: start the series on the server, with the first
                    // occurrence's event.
                    let mut s = Series {
                        first: first.clone(),
                        count: m.saturating_add(1),
                        last_observed: first.last_observed.max(occ.last_observed),
                        written: 0,
                        held: 0,
                    };
                    self.counters.started.inc();
                    let write = s.write(Via::Patch, 1);
                    *e = Entry::Series(s);
                    Step::Write(write)
                }
            };
            return Observed {
                step,
                evicted_final: None,
            };
        }
        if let Some(spam) = &mut self.spam {
            spam.key.build(|k| occ.spam_key(k));
            if !spam.try_accept_key(&self.hasher, occ.last_observed) {
                return Observed {
                    step: Step::Skipped,
                    evicted_final: None,
                };
            }
        }
        let (entry, create) = if m >= 2 {
            // The queue merged occurrences: the create starts the series.
            self.counters.started.inc();
            let mut s = Series {
                last_observed: occ.last_observed,
                first: occ,
                count: m,
                written: 0,
                held: 0,
            };
            let create = s.write(Via::Create, 1);
            (Entry::Series(s), create)
        } else {
            let create = Write {
                source: PendingEvent {
                    first: occ.clone(),
                    series: None,
                },
                op: WriteOp::Create,
                tally: Tally {
                    plain: 1,
                    ..Tally::default()
                },
            };
            (Entry::Single(occ), create)
        };
        let hash = self.key.hash(&self.hasher);
        let (_, evicted) = self.cache.insert(hash, &self.key.bytes, entry);
        let evicted_final = evicted.and_then(|old| {
            self.counters.evicted.inc();
            match old {
                Entry::Series(mut s) if s.is_short() => Some(s.write(Via::Patch, 0)),
                _ => None,
            }
        });
        Observed {
            step: Step::Write(create),
            evicted_final,
        }
    }
}

impl SinkLogic for SeriesLogic {
    type Item = Occurrence;
    type Write = PendingEvent;

    fn handle(&mut self, occ: Arc<Occurrence>, writer: &mut KeyedWriter<PendingEvent>) -> bool {
        let Observed {
            step,
            evicted_final,
        } = self.observe(occ);
        let delivered = match step {
            Step::Write(w) => {
                writer.submit(w);
                true
            }
            Step::Counted => true,
            Step::Skipped => {
                writer.counters().outcome(SinkOutcome::Skipped, 1);
                false
            }
        };
        if let Some(w) = evicted_final {
            writer.counters().trailing_flush();
            writer.submit(w);
        }
        delivered
    }

    fn written(&mut self, _stored: &Event) {}

    fn next_timer_in(&self) -> Option<Duration> {
        let now = self.clock.now();
        let finish = self.cache.indices_lru_first().next().and_then(|idx| {
            let e = self.cache.value(idx);
            let due = add_saturating(e.last_observed(), self.opts.finish.quiet);
            if !e.is_short() {
                return Some(due);
            }
            // A final write waits for a token too (never, at a zero rate).
            let token = self.budget.time_until_available(now)?;
            Some(due.max(add_saturating(now, token)))
        });
        let at = match (self.next_heartbeat, finish) {
            (Some(h), Some(f)) => h.min(f),
            (h, f) => h.or(f)?,
        };
        Some(elapsed(now, at))
    }

    fn on_timer(&mut self, writer: &mut KeyedWriter<PendingEvent>) {
        let now = self.clock.now();
        if let Some(mut next) = self.next_heartbeat
            && now >= next
        {
            self.heartbeat(writer);
            while next <= now {
                next = add_saturating(next, self.opts.heartbeat);
            }
            self.next_heartbeat = Some(next);
        }
        self.finish_due(now, writer);
    }

    fn drain(&mut self, writer: &mut KeyedWriter<PendingEvent>) -> bool {
        let mut any = false;
        let idxs: Vec<usize> = self.cache.indices_lru_first().collect();
        for idx in idxs {
            if let Entry::Series(s) = self.cache.value_mut(idx)
                && s.is_short()
            {
                Self::submit_final(writer, s);
                any = true;
            }
        }
        any
    }

    fn forget(&mut self) -> u64 {
        let mut held = 0;
        while let Some((_, _, e)) = self.cache.pop_lru() {
            if let Entry::Series(s) = e {
                held += s.held;
            }
        }
        held
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use herald_core::clock::FakeClock;
    use k8s_openapi::api::core::v1::ObjectReference;
    use proptest::prelude::*;

    use super::*;
    use crate::events::event::{OccurrenceSpec, Reporter, isomorphic_key};
    use crate::events::stats::SeriesMetrics;
    use crate::record::EventType;
    use crate::record::correlator::KeyBuilder;
    use crate::record::writer::{WriteSource, write_key};

    /// client-go's series cache, which keeps each key's whole first event, fed whole events
    /// (the occurrence's, as the recorder built them before occurrences were light): the
    /// write it makes for each occurrence (`None` when the occurrence is only counted).
    #[derive(Default)]
    struct PlainSeries {
        cache: HashMap<Vec<u8>, (Event, i32, Timestamp)>,
    }

    impl PlainSeries {
        fn observe(&mut self, occ: &Occurrence) -> Option<(Event, WriteOp)> {
            let event = occ.to_event();
            let mut key = Vec::new();
            isomorphic_key(&event, false, &mut KeyBuilder::new(&mut key));
            let m = i32::try_from(occ.count).unwrap();
            let with_series = |e: &Event, count: i32, t: Timestamp| {
                let mut e = e.clone();
                e.series = Some(EventSeries {
                    count,
                    last_observed_time: MicroTime(micro(t)),
                });
                e
            };
            match self.cache.get_mut(&key) {
                None => {
                    let write = if m >= 2 {
                        with_series(&event, m, occ.last_observed)
                    } else {
                        event.clone()
                    };
                    self.cache.insert(key, (event, m, occ.last_observed));
                    Some((write, WriteOp::Create))
                }
                Some((first, count, last)) => {
                    let was_single = *count == 1;
                    *count += m;
                    *last = (*last).max(occ.last_observed);
                    was_single.then(|| {
                        let e = with_series(first, *count, *last);
                        let patch = series_patch(e.series.as_ref().unwrap());
                        (e, WriteOp::Patch(Some(patch)))
                    })
                }
            }
        }
    }

    fn occurrence(pod: u8, reason: u8, note: u8, secs: i64, count: u64) -> Occurrence {
        let t = Timestamp::from_second(1_700_000_000 + secs).unwrap();
        let regarding = ObjectReference {
            kind: Some("Pod".into()),
            namespace: Some("ns".into()),
            name: Some(format!("p{pod}")),
            uid: Some(format!("u{pod}")),
            api_version: Some("v1".into()),
            resource_version: Some("7".into()),
            ..ObjectReference::default()
        };
        let spec = OccurrenceSpec {
            regarding: &regarding,
            related: None,
            type_: EventType::Warning,
            reason: ["BackOff", "FailedMount"][usize::from(reason)],
            action: "Act",
        };
        let reporter = Arc::new(Reporter {
            controller: "c".into(),
            instance: "i".into(),
        });
        let annotations = (note == 2).then(|| [("a".to_string(), "b".to_string())].into());
        let mut occ = Occurrence::new(
            spec,
            format_args!("note {note}"),
            annotations,
            reporter,
            t,
            t.as_nanosecond(),
        );
        occ.count = count;
        occ
    }

    proptest! {
        /// The series step, fed light occurrences, whose cache keeps them light and whose
        /// writes carry them (the writer builds each write's event), makes exactly the
        /// writes of client-go's cache, which is fed whole events and keeps them (unbounded
        /// cache, no timers): a create with the occurrence's event, a patch with the first
        /// occurrence's event and the series at the second, nothing after; each write
        /// ordered under its event's namespace and name.
        #[test]
        fn observe_writes_what_a_cache_of_whole_events_writes(
            stream in proptest::collection::vec(
                (0u8..4, 0u8..2, 0u8..3, 0i64..5, prop_oneof![4 => Just(1u64), 1 => 2u64..4]),
                1..100,
            ),
        ) {
            let opts = SeriesOptions {
                finish: TrailingFlushOptions { max_keys: 0, ..SeriesOptions::default().finish },
                heartbeat: Duration::ZERO,
                ..SeriesOptions::default()
            };
            let clock = Arc::new(FakeClock::new(Timestamp::UNIX_EPOCH));
            let mut logic = SeriesLogic::new(opts, clock, SeriesMetrics::default().new_sink("t"));
            let mut plain = PlainSeries::default();
            let mut secs = 0;
            for (pod, reason, note, pause, count) in stream {
                secs += pause;
                let occ = occurrence(pod, reason, note, secs, count);
                let expected = plain.observe(&occ);
                let observed = logic.observe(Arc::new(occ));
                prop_assert!(observed.evicted_final.is_none());
                match (observed.step, expected) {
                    (Step::Write(w), Some((event, op))) => {
                        prop_assert_eq!(&*w.source.event(), &event);
                        prop_assert_eq!(w.source.write_key(), write_key(&event));
                        prop_assert_eq!(w.op, op);
                    }
                    (Step::Counted, None) => {}
                    (Step::Write(w), None) => prop_assert!(false, "unexpected write {:?}", w),
                    (Step::Skipped, None) => prop_assert!(false, "skipped without a spam filter"),
                    (_, Some(e)) => prop_assert!(false, "missing write {:?}", e),
                }
            }
        }
    }
}
