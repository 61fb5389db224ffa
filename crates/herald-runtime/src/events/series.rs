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

use std::time::Duration;

use hashbrown::DefaultHashBuilder;
use herald_core::clock::{Clock, add_saturating, elapsed};
use herald_core::flow::TokenBucket;
use jiff::Timestamp;
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use std::sync::Arc;

use super::event::{Occurrence, isomorphic_key, micro, series_patch};
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

/// One isomorphic key.
#[derive(Debug)]
struct Entry {
    /// The first occurrence (its name, note and eventTime are what the server keeps), shared
    /// with the create that writes it.
    event: Arc<Event>,
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

impl Entry {
    /// The event as the next write sends it: the first occurrence with the current series
    /// (none for a single occurrence, which is the cached event itself, not a copy).
    fn to_write(&self) -> Arc<Event> {
        if self.count < 2 {
            return self.event.clone();
        }
        let mut e = (*self.event).clone();
        e.series = Some(EventSeries {
            count: self.count,
            last_observed_time: MicroTime(micro(self.last_observed)),
        });
        Arc::new(e)
    }

    /// A write of the current count, carrying the held occurrences; `plain` delivered items
    /// are settled by it as created or patched. A patch of a single occurrence (no series)
    /// cannot happen: it would be a create.
    fn write(&mut self, via: Via, plain: u64) -> Write<Event> {
        let event = self.to_write();
        let op = match (&event.series, via) {
            (Some(series), Via::Patch) => WriteOp::Patch(Some(series_patch(series))),
            _ => WriteOp::Create,
        };
        self.written = self.count;
        let tally = Tally {
            plain,
            series: std::mem::take(&mut self.held),
            ..Tally::default()
        };
        Write { event, op, tally }
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

    fn submit_final(writer: &mut KeyedWriter<Event>, entry: &mut Entry) {
        writer.counters().trailing_flush();
        writer.submit(entry.write(Via::Patch, 0));
    }

    fn heartbeat(&mut self, writer: &mut KeyedWriter<Event>) {
        let idxs: Vec<usize> = self.cache.indices_lru_first().collect();
        for idx in idxs {
            let e = self.cache.value_mut(idx);
            if e.count >= 2 {
                writer.submit(e.write(Via::Patch, 0));
                self.counters.heartbeat_writes.inc();
            }
        }
    }

    /// Finishes the series idle since `now − quiet`, least recently observed first, as far as
    /// the budget allows final writes.
    fn finish_due(&mut self, now: Timestamp, writer: &mut KeyedWriter<Event>) {
        while let Some(idx) = self.cache.indices_lru_first().next() {
            let e = self.cache.value(idx);
            if add_saturating(e.last_observed, self.opts.finish.quiet) > now {
                break;
            }
            if e.is_short() {
                if !self.budget.try_accept_at(now) {
                    break;
                }
                Self::submit_final(writer, self.cache.value_mut(idx));
            }
            let (_, _, e) = self.cache.remove(idx);
            if e.count >= 2 {
                self.counters.finished.inc();
            }
        }
    }
}

/// What [`SeriesLogic::observe`] decided for one occurrence.
// Returned by value and consumed at once: boxing the write would add an allocation per write.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Step {
    /// A write to hand to the writer: the create of a new entry, or the patch that starts
    /// a series (second occurrence).
    Write(Write<Event>),
    /// Counted in memory: a later occurrence of an open series (a later write carries it).
    Counted,
    /// Refused by the spam filter (outcome `skipped`).
    Skipped,
}

/// [`SeriesLogic::observe`]'s answer: the step, and the final write of an entry evicted at
/// the cache bound (when its server count was short).
pub(crate) struct Observed {
    pub step: Step,
    pub evicted_final: Option<Write<Event>>,
}

impl SeriesLogic {
    /// The series decision for one occurrence, without touching the writer: the key, the
    /// cache, the spam filter and the series counters. [`SinkLogic::handle`] hands what it
    /// returns to the writer.
    pub(crate) fn observe(&mut self, occ: Occurrence) -> Observed {
        let ignore_rv = self.opts.ignore_resource_version;
        self.key.build(|k| isomorphic_key(&occ.event, ignore_rv, k));
        let m = i32::try_from(occ.count).unwrap_or(i32::MAX);
        if let Some(idx) = self.cache.get_key(&mut self.key, &self.hasher) {
            let e = self.cache.value_mut(idx);
            e.count = e.count.saturating_add(m);
            e.last_observed = e.last_observed.max(occ.last_observed);
            // The entry became the most recently observed; the oldest may have changed.
            let step = if e.written < 2 {
                // The second occurrence: start the series on the server.
                self.counters.started.inc();
                Step::Write(e.write(Via::Patch, 1))
            } else {
                e.held += 1;
                Step::Counted
            };
            return Observed {
                step,
                evicted_final: None,
            };
        }
        if let Some(spam) = &mut self.spam {
            spam.key.build(|k| {
                k.push(occ.event.reporting_controller.as_deref().unwrap_or(""));
                let r = occ.event.regarding.clone().unwrap_or_default();
                for part in [
                    &r.kind,
                    &r.namespace,
                    &r.name,
                    &r.uid,
                    &r.api_version,
                    &r.field_path,
                ] {
                    k.push(part.as_deref().unwrap_or(""));
                }
            });
            if !spam.try_accept_key(&self.hasher, occ.last_observed) {
                return Observed {
                    step: Step::Skipped,
                    evicted_final: None,
                };
            }
        }
        let mut entry = Entry {
            event: Arc::new(occ.event),
            count: m,
            last_observed: occ.last_observed,
            written: 0,
            held: 0,
        };
        if m >= 2 {
            self.counters.started.inc();
        }
        let create = entry.write(Via::Create, 1);
        let hash = self.key.hash(&self.hasher);
        let (_, evicted) = self.cache.insert(hash, &self.key.bytes, entry);
        let evicted_final = evicted.and_then(|mut old| {
            self.counters.evicted.inc();
            old.is_short().then(|| old.write(Via::Patch, 0))
        });
        Observed {
            step: Step::Write(create),
            evicted_final,
        }
    }
}

impl SinkLogic for SeriesLogic {
    type Item = Occurrence;
    type Event = Event;

    fn handle(&mut self, occ: Occurrence, writer: &mut KeyedWriter<Event>) -> bool {
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
            let due = add_saturating(e.last_observed, self.opts.finish.quiet);
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

    fn on_timer(&mut self, writer: &mut KeyedWriter<Event>) {
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

    fn drain(&mut self, writer: &mut KeyedWriter<Event>) -> bool {
        let mut any = false;
        let idxs: Vec<usize> = self.cache.indices_lru_first().collect();
        for idx in idxs {
            let e = self.cache.value_mut(idx);
            if e.is_short() {
                Self::submit_final(writer, e);
                any = true;
            }
        }
        any
    }

    fn forget(&mut self) -> u64 {
        let mut held = 0;
        while let Some((_, _, e)) = self.cache.pop_lru() {
            held += e.held;
        }
        held
    }
}
