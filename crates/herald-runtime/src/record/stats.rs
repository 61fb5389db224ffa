//! Accounting: every recorded event ends in exactly one counted outcome.
//!
//! Outcomes are counted in two places. The recorder counts what never reaches a sink
//! (`dropped_invalid`, `dropped_queue_full`, `dropped_shutdown`) and occurrences `merged`
//! into an identical event still queued. Every event that does reach a
//! sink gets exactly one outcome *per sink*: `created`, `patched`, `aggregated` (folded into
//! a "combined from similar events" event that was written), `skipped` (held back by the spam
//! filter, its count then carried by a later write that succeeded), `failed` (gave up after
//! retries), or `dropped_shutdown` (still unwritten at the shutdown deadline). With trailing
//! flushes (the default) a held-back occurrence is settled with the write that carries its
//! count, so it is `failed` or `dropped_shutdown` when that write is; until then it is not
//! yet counted. At the trailing-flush bound
//! ([`TrailingFlushOptions::max_keys`](super::TrailingFlushOptions::max_keys)) the least
//! recently skipped key is forgotten and its held occurrences are settled as `skipped` at once: their
//! count rides the key's next write, if one comes (client-go's behaviour for every skip).
//!
//! So, for a sink that was recording from the start:
//! `emitted = merged + dropped_invalid + dropped_queue_full + dropped_shutdown + sink outcomes`,
//! which [`RecordStats::unaccounted`] checks.
//!
//! The counters are `prometheus-client` counters, so [`Metrics::register`] exposes the very
//! same numbers the snapshot reads.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

/// What happened to one event at one sink.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SinkOutcome {
    /// Reached the server in a create.
    Created,
    /// Reached the server in a patch of an existing event.
    Patched,
    /// Folded into a "combined from similar events" event that reached the server.
    Aggregated,
    /// Held back by the spam filter; its occurrence rode in a later write's count, which
    /// succeeded. Counted at once instead, its count riding the key's next write if any (as
    /// in client-go), without trailing flushes and for a key forgotten at their bound.
    Skipped,
    /// Its write was given up (non-retryable error, or retries exhausted).
    Failed,
    /// Still unwritten when the shutdown deadline passed.
    DroppedShutdown,
    /// events.k8s.io only: counted into an ongoing series in memory (the third occurrence of
    /// an isomorphic event and later ones); its occurrence rode in a later series write
    /// (heartbeat, finish, eviction or shutdown) that succeeded.
    Series,
}

impl SinkOutcome {
    const ALL: [SinkOutcome; 7] = [
        SinkOutcome::Created,
        SinkOutcome::Patched,
        SinkOutcome::Aggregated,
        SinkOutcome::Skipped,
        SinkOutcome::Failed,
        SinkOutcome::DroppedShutdown,
        SinkOutcome::Series,
    ];

    fn label(self) -> &'static str {
        match self {
            SinkOutcome::Created => "created",
            SinkOutcome::Patched => "patched",
            SinkOutcome::Aggregated => "aggregated",
            SinkOutcome::Skipped => "skipped",
            SinkOutcome::Failed => "failed",
            SinkOutcome::DroppedShutdown => "dropped_shutdown",
            SinkOutcome::Series => "series",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    sink: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WriteLabels {
    sink: String,
    op: String,
    result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SinkLabels {
    sink: String,
}

/// The broadcaster's counters. Cheap to clone (shared handles).
///
/// Both recorders use this type: [`record`](crate::record)'s broadcaster registers its
/// counters as `herald_record_*`, [`events`](crate::events)'s as `herald_events_*`.
#[derive(Clone, Debug)]
pub struct Metrics {
    prefix: &'static str,
    emitted: Counter,
    recorder: Family<OutcomeLabels, Counter>,
    merged: Counter,
    dropped_invalid: Counter,
    dropped_queue_full: Counter,
    dropped_shutdown: Counter,
    sink_outcomes: Family<OutcomeLabels, Counter>,
    writes: Family<WriteLabels, Counter>,
    retries: Family<SinkLabels, Counter>,
    sinks: Arc<std::sync::Mutex<Vec<SinkCounters>>>,
    next_sink: Arc<AtomicU64>,
}

impl Default for Metrics {
    /// The core/v1 recorder's counters (`herald_record_*`).
    fn default() -> Self {
        Self::with_prefix("herald_record")
    }
}

impl Metrics {
    /// Counters registered under `<prefix>_*`.
    pub(crate) fn with_prefix(prefix: &'static str) -> Self {
        let recorder = Family::<OutcomeLabels, Counter>::default();
        let get = |outcome: &str| {
            recorder
                .get_or_create(&OutcomeLabels {
                    sink: String::new(),
                    outcome: outcome.to_string(),
                })
                .clone()
        };
        Self {
            prefix,
            emitted: Counter::default(),
            merged: get("merged"),
            dropped_invalid: get("dropped_invalid"),
            dropped_queue_full: get("dropped_queue_full"),
            dropped_shutdown: get("dropped_shutdown"),
            recorder,
            sink_outcomes: Family::default(),
            writes: Family::default(),
            retries: Family::default(),
            sinks: Arc::default(),
            next_sink: Arc::default(),
        }
    }

    /// Registers every counter under this broadcaster's prefix (`herald_record_*` or
    /// `herald_events_*`) in `registry`.
    pub fn register(&self, registry: &mut Registry) {
        let p = self.prefix;
        registry.register(
            format!("{p}_emitted"),
            "Events handed to a recorder",
            self.emitted.clone(),
        );
        registry.register(
            format!("{p}_recorder_outcomes"),
            "Events the recorder itself settled: merged into a queued identical event, or dropped (invalid, queue full, shutdown)",
            self.recorder.clone(),
        );
        registry.register(
            format!("{p}_sink_outcomes"),
            "Per sink, what happened to each delivered event: created, patched, aggregated, skipped, series, failed, dropped_shutdown",
            self.sink_outcomes.clone(),
        );
        registry.register(
            format!("{p}_writes"),
            "API calls made by sinks, by operation and result (ok, error, not_found)",
            self.writes.clone(),
        );
        registry.register(
            format!("{p}_retries"),
            "Write attempts that were retried",
            self.retries.clone(),
        );
    }

    pub(crate) fn emitted(&self) {
        self.emitted.inc();
    }
    pub(crate) fn merged(&self) {
        self.merged.inc();
    }
    pub(crate) fn dropped_invalid(&self) {
        self.dropped_invalid.inc();
    }
    pub(crate) fn dropped_queue_full(&self) {
        self.dropped_queue_full.inc();
    }
    pub(crate) fn dropped_shutdown(&self) {
        self.dropped_shutdown.inc();
    }

    /// Counters for a new sink; `name` labels its metrics (made unique with an index).
    pub(crate) fn new_sink(&self, name: &str) -> SinkCounters {
        let idx = self.next_sink.fetch_add(1, Ordering::Relaxed);
        let name = if idx == 0 {
            name.to_string()
        } else {
            format!("{name}-{idx}")
        };
        let outcomes = SinkOutcome::ALL.map(|o| {
            self.sink_outcomes
                .get_or_create(&OutcomeLabels {
                    sink: name.clone(),
                    outcome: o.label().to_string(),
                })
                .clone()
        });
        let write = |op: &str, result: &str| {
            self.writes
                .get_or_create(&WriteLabels {
                    sink: name.clone(),
                    op: op.to_string(),
                    result: result.to_string(),
                })
                .clone()
        };
        let counters = SinkCounters {
            inner: Arc::new(SinkCountersInner {
                delivered: AtomicU64::new(0),
                outcomes,
                creates_ok: write("create", "ok"),
                creates_err: write("create", "error"),
                patches_ok: write("patch", "ok"),
                patches_err: write("patch", "error"),
                patches_not_found: write("patch", "not_found"),
                retries: self
                    .retries
                    .get_or_create(&SinkLabels { sink: name.clone() })
                    .clone(),
                trailing_flushes: AtomicU64::new(0),
                name,
            }),
        };
        self.sinks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(counters.clone());
        counters
    }

    /// A consistent-enough snapshot of every counter (each read is atomic; take it after
    /// shutdown for exact sums).
    pub fn snapshot(&self) -> RecordStats {
        let sinks = self.sinks.lock().unwrap_or_else(|e| e.into_inner());
        RecordStats {
            emitted: self.emitted.get(),
            merged: self.merged.get(),
            dropped_invalid: self.dropped_invalid.get(),
            dropped_queue_full: self.dropped_queue_full.get(),
            dropped_shutdown: self.dropped_shutdown.get(),
            sinks: sinks.iter().map(SinkCounters::snapshot).collect(),
        }
    }
}

/// One API call a sink made, by how it ended (`herald_record_writes{op, result}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ApiCall {
    /// A create the server stored.
    Created,
    /// A create that failed.
    CreateFailed,
    /// A patch the server applied.
    Patched,
    /// A patch that failed, but for a 404.
    PatchFailed,
    /// A patch answered 404: the event is gone from the server (expired), and the writer
    /// creates it.
    PatchNotFound,
}

/// One sink's counters.
#[derive(Clone, Debug)]
pub(crate) struct SinkCounters {
    inner: Arc<SinkCountersInner>,
}

#[derive(Debug)]
struct SinkCountersInner {
    name: String,
    delivered: AtomicU64,
    outcomes: [Counter; 7],
    creates_ok: Counter,
    creates_err: Counter,
    patches_ok: Counter,
    patches_err: Counter,
    patches_not_found: Counter,
    retries: Counter,
    trailing_flushes: AtomicU64,
}

impl SinkCounters {
    /// The sink's label in the metrics.
    pub(crate) fn name(&self) -> &str {
        &self.inner.name
    }
    pub(crate) fn delivered(&self) {
        self.inner.delivered.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn outcome(&self, o: SinkOutcome, n: u64) {
        if n > 0 {
            self.inner.outcomes[o.index()].inc_by(n);
        }
    }
    pub(crate) fn call(&self, call: ApiCall) {
        let c = match call {
            ApiCall::Created => &self.inner.creates_ok,
            ApiCall::CreateFailed => &self.inner.creates_err,
            ApiCall::Patched => &self.inner.patches_ok,
            ApiCall::PatchFailed => &self.inner.patches_err,
            ApiCall::PatchNotFound => &self.inner.patches_not_found,
        };
        c.inc();
    }
    pub(crate) fn retry(&self) {
        self.inner.retries.inc();
    }
    pub(crate) fn trailing_flush(&self) {
        self.inner.trailing_flushes.fetch_add(1, Ordering::Relaxed);
    }

    fn snapshot(&self) -> SinkStats {
        let i = &self.inner;
        let o = |x: SinkOutcome| i.outcomes[x.index()].get();
        SinkStats {
            name: i.name.clone(),
            delivered: i.delivered.load(Ordering::Relaxed),
            created: o(SinkOutcome::Created),
            patched: o(SinkOutcome::Patched),
            aggregated: o(SinkOutcome::Aggregated),
            skipped: o(SinkOutcome::Skipped),
            failed: o(SinkOutcome::Failed),
            dropped_shutdown: o(SinkOutcome::DroppedShutdown),
            series: o(SinkOutcome::Series),
            create_calls: i.creates_ok.get() + i.creates_err.get(),
            patch_calls: i.patches_ok.get() + i.patches_err.get() + i.patches_not_found.get(),
            failed_calls: i.creates_err.get() + i.patches_err.get() + i.patches_not_found.get(),
            patch_not_found_calls: i.patches_not_found.get(),
            retries: i.retries.get(),
            trailing_flushes: i.trailing_flushes.load(Ordering::Relaxed),
        }
    }
}

/// A snapshot of the recorder's accounting.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecordStats {
    /// Events handed to a recorder.
    pub emitted: u64,
    /// Occurrences merged into an identical event still queued (whether or not the queue was
    /// full); their count rides in that event's.
    pub merged: u64,
    /// Events refused before queueing (type not Normal/Warning).
    pub dropped_invalid: u64,
    /// Distinct events refused because the queue was full of other distinct events.
    pub dropped_queue_full: u64,
    /// Events recorded after shutdown began.
    pub dropped_shutdown: u64,
    /// One entry per sink started with `start_recording_to_sink`.
    pub sinks: Vec<SinkStats>,
}

impl RecordStats {
    /// Events the recorder settled itself (never reached a sink).
    pub fn settled_by_recorder(&self) -> u64 {
        self.merged + self.dropped_invalid + self.dropped_queue_full + self.dropped_shutdown
    }

    /// `emitted − (recorder outcomes + outcomes at sink i)`: zero when every event emitted
    /// while sink `i` was recording is accounted for. While the sink runs it also counts
    /// events still in flight: queued, being written, or held back by the spam filter
    /// awaiting the write that carries their count. After shutdown it is zero.
    pub fn unaccounted(&self, sink: usize) -> i128 {
        let at_sink = self.sinks.get(sink).map_or(0, SinkStats::outcomes);
        i128::from(self.emitted) - i128::from(self.settled_by_recorder()) - i128::from(at_sink)
    }
}

/// One sink's share of the accounting.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SinkStats {
    /// The label used in metrics.
    pub name: String,
    /// Events the sink's watcher received.
    pub delivered: u64,
    /// Outcome: written by a create.
    pub created: u64,
    /// Outcome: written by a patch.
    pub patched: u64,
    /// Outcome: folded into a written "combined" event.
    pub aggregated: u64,
    /// Outcome: held back by the spam filter, its count carried by a later successful write
    /// (see [`SinkOutcome::Skipped`]).
    pub skipped: u64,
    /// Outcome: write given up.
    pub failed: u64,
    /// Outcome: unwritten at the shutdown deadline.
    pub dropped_shutdown: u64,
    /// Outcome (events.k8s.io only): counted into a series in memory, its count carried by a
    /// later series write that succeeded (see [`SinkOutcome::Series`]).
    pub series: u64,
    /// API create calls made (each attempt counts).
    pub create_calls: u64,
    /// API patch calls made (each attempt counts).
    pub patch_calls: u64,
    /// API calls that failed (those in `patch_not_found_calls` included).
    pub failed_calls: u64,
    /// Patches answered 404 (each followed by a create). The recorder never patches an event
    /// it has not handed a write for, so these are events that expired on the server (or
    /// whose create failed).
    pub patch_not_found_calls: u64,
    /// Attempts that were retried.
    pub retries: u64,
    /// Writes made only to flush counts held back by the spam filter.
    pub trailing_flushes: u64,
}

impl SinkStats {
    /// Sum of all outcomes at this sink.
    pub fn outcomes(&self) -> u64 {
        self.created
            + self.patched
            + self.aggregated
            + self.skipped
            + self.failed
            + self.dropped_shutdown
            + self.series
    }

    /// Every API call this sink made.
    pub fn api_calls(&self) -> u64 {
        self.create_calls + self.patch_calls
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_and_prometheus_agree() {
        let m = Metrics::default();
        let s = m.new_sink("memory");
        for _ in 0..5 {
            m.emitted();
        }
        m.merged();
        m.dropped_invalid();
        s.delivered();
        s.delivered();
        s.delivered();
        s.outcome(SinkOutcome::Created, 1);
        s.outcome(SinkOutcome::Patched, 1);
        s.outcome(SinkOutcome::Skipped, 1);
        s.call(ApiCall::Created);
        let snap = m.snapshot();
        assert_eq!(snap.emitted, 5);
        assert_eq!(snap.unaccounted(0), 0);
        assert_eq!(snap.sinks[0].create_calls, 1);

        let mut reg = Registry::default();
        m.register(&mut reg);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &reg).unwrap();
        assert!(text.contains("herald_record_emitted_total 5"), "{text}");
        assert!(
            text.contains(
                r#"herald_record_sink_outcomes_total{sink="memory",outcome="created"} 1"#
            ),
            "{text}"
        );
        assert!(
            text.contains(r#"herald_record_recorder_outcomes_total{sink="",outcome="merged"} 1"#),
            "{text}"
        );
    }
}
