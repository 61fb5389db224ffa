//! Deterministic event storms through the whole recording pipeline (recorder → broadcaster →
//! correlator → writer → sink), on paused tokio time, and the properties every run must show
//! (issue 26):
//!
//! - zero unaccounted occurrences, none failed or dropped;
//! - the stored counts add up to the occurrences, per (source, object, reason);
//! - while a spam key's storm runs, its writes stay within client-go's budget (the burst of 25
//!   plus one per 300 s refill);
//! - after its storm, each event is written at most once more;
//! - no patch is answered 404 (nothing this sink never created is patched);
//! - every stored count is exact within the settle time (600 s by default) of the storm's end.
//!
//! Shared by `crates/herald-runtime/tests/storm.rs` (into a `MemorySink`, with faults) and
//! `crates/herald/tests/kube_sink_live.rs` (through `KubeSink` into a live `herald serve`).
//! Time only moves when the pipeline is idle: between steps the driver waits, by yielding
//! (which does not advance paused time), until no sink call is in flight.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use herald_runtime::record::sink::SinkFuture;
use herald_runtime::record::{
    BroadcasterOptions, CorrelatorOptions, EventBroadcaster, EventSink, EventSource, EventType,
    PipelineOptions, RecordStats, SinkError, SinkOp, TrailingFlushOptions,
};
use herald_runtime::time::TokioClock;
use k8s_openapi::api::core::v1::{Event, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use tokio::time::Instant;

/// The namespace of every object (and so of every event).
pub const NAMESPACE: &str = "storm";
/// client-go's spam budget: burst, and seconds per refill.
const BURST: u64 = 25;
const REFILL: Duration = Duration::from_secs(300);
/// Longest gap between two events of one spam key in a scenario: below the trailing quiet
/// time, so no trailing write may happen while a storm runs.
const MAX_GAP: Duration = Duration::from_secs(45);

/// One recorded event.
#[derive(Debug, Clone)]
pub struct Occurrence {
    /// Since the storm's start.
    pub at: Duration,
    /// The recorder's source component (its host is `node-1`).
    pub source: &'static str,
    /// The pod's name, in [`NAMESPACE`].
    pub object: String,
    pub warning: bool,
    pub reason: &'static str,
    pub message: String,
}

/// A storm: its occurrences, sorted by time.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub name: &'static str,
    pub occurrences: Vec<Occurrence>,
}

fn occ(
    at: Duration,
    source: &'static str,
    object: String,
    warning: bool,
    reason: &'static str,
    message: String,
) -> Occurrence {
    Occurrence {
        at,
        source,
        object,
        warning,
        reason,
        message,
    }
}

impl Scenario {
    fn new(name: &'static str, mut occurrences: Vec<Occurrence>) -> Self {
        occurrences.sort_by_key(|o| o.at);
        Scenario { name, occurrences }
    }

    /// Unschedulable pods whose FailedScheduling messages keep changing, so the aggregator
    /// combines them; `pods` pods, one message per pod every 15 s for `minutes`. For the first
    /// 5 minutes each pod's message takes one of three forms (three events, repeated until
    /// the spam budget is spent), then it names a different node each time: the combined
    /// event's first occurrences are held back.
    pub fn aggregation(pods: usize, minutes: u64) -> Self {
        let mut v = Vec::new();
        for p in 0..pods {
            let mut at = Duration::from_millis(37 * p as u64 % 15_000);
            let mut n = 0usize;
            while at < Duration::from_secs(60 * minutes) {
                let node = if n < 20 { n % 3 } else { 3 + (n * 7 + p) % 50 };
                let message = format!(
                    "0/53 nodes are available: 1 node(s) had untolerated taint {{node-{node}: NoSchedule}}, 52 Insufficient cpu"
                );
                v.push(occ(
                    at,
                    "default-scheduler",
                    format!("pending-{p}"),
                    true,
                    "FailedScheduling",
                    message,
                ));
                at += Duration::from_secs(15);
                n += 1;
            }
        }
        Scenario::new("aggregation", v)
    }

    /// Crash-looping pods on a kubelet, each with several reasons under one spam key
    /// (BackOff, Unhealthy, for the first 5 minutes FailedMount, and from minute 8 on a
    /// failing liveness probe, whose first occurrences the spam filter holds back: all
    /// Warnings) and the restart cycle's Normal events (Pulled, Created, Started every 40 s).
    pub fn several_reasons(pods: usize, minutes: u64) -> Self {
        let end = Duration::from_secs(60 * minutes);
        let mut v = Vec::new();
        for p in 0..pods {
            let pod = format!("web-{p}");
            let offset = Duration::from_millis(113 * p as u64);
            let mut every = |from: u64,
                             period: u64,
                             until: Duration,
                             warning: bool,
                             reason: &'static str,
                             message: &str| {
                let mut at = offset + Duration::from_secs(from);
                while at < until {
                    v.push(occ(
                        at,
                        "kubelet",
                        pod.clone(),
                        warning,
                        reason,
                        message.to_string(),
                    ));
                    at += Duration::from_secs(period);
                }
            };
            every(
                0,
                10,
                end,
                true,
                "BackOff",
                "Back-off restarting failed container app in pod",
            );
            every(
                0,
                5,
                end,
                true,
                "Unhealthy",
                "Readiness probe failed: HTTP probe failed with statuscode: 503",
            );
            every(
                0,
                20,
                Duration::from_secs(300),
                true,
                "FailedMount",
                "MountVolume.SetUp failed for volume \"data\": secret \"db\" not found",
            );
            every(
                480,
                15,
                end,
                true,
                "Killing",
                "Container app failed liveness probe, will be restarted",
            );
            every(
                0,
                40,
                end,
                false,
                "Pulled",
                "Container image \"app:1.2\" already present on machine",
            );
            every(0, 40, end, false, "Created", "Created container app");
            every(0, 40, end, false, "Started", "Started container app");
        }
        Scenario::new("several_reasons", v)
    }

    /// A controller's hot loop: for each of `objects` objects, `burst` identical events every
    /// 100 ms (recorded back to back, so the recorder's queue merges them) for `minutes`.
    pub fn hot_loop(objects: usize, burst: usize, minutes: u64) -> Self {
        let mut v = Vec::new();
        let ticks = minutes * 600;
        for t in 0..ticks {
            for o in 0..objects {
                for _ in 0..burst {
                    v.push(occ(
                        Duration::from_millis(100 * t),
                        "reconciler",
                        format!("app-{o}"),
                        true,
                        "ReconcileError",
                        "failed to sync: Operation cannot be fulfilled: the object has been modified".to_string(),
                    ));
                }
            }
        }
        Scenario::new("hot_loop", v)
    }

    /// Several scenarios at once.
    pub fn and(mut self, other: Scenario) -> Self {
        self.occurrences.extend(other.occurrences);
        self.occurrences.sort_by_key(|o| o.at);
        self
    }

    /// When the last occurrence happens.
    pub fn end(&self) -> Duration {
        self.occurrences.last().map_or(Duration::ZERO, |o| o.at)
    }
}

/// A fault injected into one sink call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Answered 503 at once.
    Unavailable,
    /// No answer for 30 s, then a transport error (the request never reached the store).
    Timeout,
}

/// Which calls fail: `(index of the call, time since the storm's start)` → fault.
pub type FaultFn = Arc<dyn Fn(u64, Duration) -> Option<Fault> + Send + Sync>;

/// One call the sink saw.
#[derive(Debug, Clone)]
pub struct Call {
    /// When it started, since the storm's start.
    pub start: Duration,
    pub op: SinkOp,
    pub name: String,
    pub ok: bool,
    pub not_found: bool,
}

#[derive(Default)]
struct LogState {
    calls: Vec<Call>,
    in_flight: usize,
    next: u64,
}

/// Wraps a sink: logs every call with its (paused-time) start, counts the calls in flight,
/// and injects faults.
#[derive(Clone)]
pub struct CallLog {
    inner: Arc<dyn EventSink>,
    state: Arc<Mutex<LogState>>,
    faults: Option<FaultFn>,
    origin: Instant,
}

impl CallLog {
    pub fn new(inner: impl EventSink, faults: Option<FaultFn>) -> Self {
        CallLog {
            inner: Arc::new(inner),
            state: Arc::default(),
            faults,
            origin: Instant::now(),
        }
    }

    pub fn calls(&self) -> Vec<Call> {
        self.state.lock().unwrap().calls.clone()
    }

    pub fn in_flight(&self) -> usize {
        self.state.lock().unwrap().in_flight
    }

    fn call<'a>(&'a self, op: SinkOp, event: &'a Event, patch: Option<&'a [u8]>) -> SinkFuture<'a> {
        Box::pin(async move {
            let start = self.origin.elapsed();
            let index = {
                let mut st = self.state.lock().unwrap();
                st.next += 1;
                st.next - 1
            };
            let fault = self.faults.as_ref().and_then(|f| f(index, start));
            let result = match fault {
                Some(Fault::Unavailable) => Err(SinkError::status(
                    503,
                    "ServiceUnavailable",
                    "the server is busy",
                )),
                Some(Fault::Timeout) => {
                    tokio::time::sleep(Duration::from_secs(30)).await;
                    Err(SinkError::Transport("request timed out".into()))
                }
                None => {
                    // Only a call to the real sink is "in flight": a faulty one waits on a
                    // timer, which paused time must be free to move.
                    self.state.lock().unwrap().in_flight += 1;
                    let r = match (op, patch) {
                        (SinkOp::Patch, Some(p)) => self.inner.patch(event, p).await,
                        (SinkOp::Update, _) => self.inner.update(event).await,
                        _ => self.inner.create(event).await,
                    };
                    self.state.lock().unwrap().in_flight -= 1;
                    r
                }
            };
            let mut st = self.state.lock().unwrap();
            st.calls.push(Call {
                start,
                op,
                name: event.metadata.name.clone().unwrap_or_default(),
                ok: result.is_ok(),
                not_found: result.as_ref().err().is_some_and(SinkError::is_not_found),
            });
            result
        })
    }
}

impl EventSink for CallLog {
    fn create<'a>(&'a self, event: &'a Event) -> SinkFuture<'a> {
        self.call(SinkOp::Create, event, None)
    }
    fn update<'a>(&'a self, event: &'a Event) -> SinkFuture<'a> {
        self.call(SinkOp::Update, event, None)
    }
    fn patch<'a>(&'a self, event: &'a Event, patch: &'a [u8]) -> SinkFuture<'a> {
        self.call(SinkOp::Patch, event, Some(patch))
    }
}

fn t0() -> jiff::Timestamp {
    "2024-01-01T00:00:00Z".parse().unwrap()
}

/// Default options, but on a clock that follows paused tokio time.
pub fn options() -> BroadcasterOptions {
    let clock: Arc<dyn herald_core::clock::Clock> = Arc::new(TokioClock::new(t0()));
    BroadcasterOptions {
        pipeline: PipelineOptions {
            clock: clock.clone(),
            ..PipelineOptions::default()
        },
        correlator: CorrelatorOptions {
            clock,
            ..CorrelatorOptions::default()
        },
    }
}

fn pod(name: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(NAMESPACE.into()),
            uid: Some(format!("uid-{name}")),
            ..ObjectMeta::default()
        },
        ..Pod::default()
    }
}

/// What a run saw, for the checks.
pub struct Run {
    pub scenario: Scenario,
    pub calls: Vec<Call>,
    /// The stored events at the storm's end plus the settle time.
    pub settled: Vec<Event>,
    /// The stored events after shutdown.
    pub stored: Vec<Event>,
    pub stats: RecordStats,
}

/// Waits, without letting paused time move, until every recorded event has reached the sink
/// task and no sink call has been in flight for a while. Bounded.
async fn quiesce(b: &EventBroadcaster, log: &CallLog) {
    let mut idle = 0;
    for _ in 0..50_000_000u64 {
        let s = b.stats();
        let reached = s.sinks[0].delivered + s.settled_by_recorder() >= s.emitted;
        if reached && log.in_flight() == 0 {
            idle += 1;
            if idle >= 64 {
                return;
            }
        } else {
            idle = 0;
        }
        tokio::task::yield_now().await;
    }
    panic!("the pipeline did not become idle");
}

/// Moves paused time to `to` in steps of at most a second, letting the pipeline become idle
/// before each step (so a call in flight never lets time jump).
async fn advance_to(b: &EventBroadcaster, log: &CallLog, to: Instant) {
    loop {
        quiesce(b, log).await;
        let now = Instant::now();
        if now >= to {
            return;
        }
        tokio::time::sleep_until(to.min(now + Duration::from_secs(1))).await;
    }
}

/// Runs `scenario` through a default broadcaster into `log`, reading what is stored with
/// `fetch` once the settle time has passed after the storm and again after shutdown.
pub async fn run<F, Fut>(scenario: Scenario, log: CallLog, fetch: F) -> Run
where
    F: Fn() -> Fut,
    Fut: Future<Output = Vec<Event>>,
{
    let opts = options();
    let settle = opts
        .correlator
        .trailing_flush
        .clone()
        .unwrap_or_default()
        .settle_within;
    let b = EventBroadcaster::new(opts);
    b.start_recording_to_sink(log.clone());
    let mut recorders = BTreeMap::new();
    let mut pods = BTreeMap::new();
    let start = log.origin;
    let mut i = 0;
    let occ = &scenario.occurrences;
    while i < occ.len() {
        let at = occ[i].at;
        advance_to(&b, &log, start + at).await;
        while i < occ.len() && occ[i].at == at {
            let o = &occ[i];
            let recorder = recorders
                .entry(o.source)
                .or_insert_with(|| b.new_recorder(EventSource::new(o.source, "node-1")));
            let pod = pods
                .entry(o.object.clone())
                .or_insert_with(|| pod(&o.object));
            let kind = if o.warning {
                EventType::Warning
            } else {
                EventType::Normal
            };
            recorder.event(&*pod, kind, o.reason, &o.message);
            i += 1;
        }
    }
    advance_to(&b, &log, start + scenario.end() + settle).await;
    let settled = fetch().await;
    b.shutdown().await;
    let stored = fetch().await;
    Run {
        calls: log.calls(),
        stats: b.stats(),
        scenario,
        settled,
        stored,
    }
}

type Key = (String, String, String);

fn key_of_occurrence(o: &Occurrence) -> Key {
    (o.source.to_string(), o.object.clone(), o.reason.to_string())
}

fn key_of_event(e: &Event) -> Key {
    (
        e.source
            .as_ref()
            .and_then(|s| s.component.clone())
            .unwrap_or_default(),
        e.involved_object.name.clone().unwrap_or_default(),
        e.reason.clone().unwrap_or_default(),
    )
}

fn sums(events: &[Event]) -> BTreeMap<Key, i64> {
    let mut m = BTreeMap::new();
    for e in events {
        *m.entry(key_of_event(e)).or_default() += i64::from(e.count.unwrap_or(0));
    }
    m
}

impl Run {
    /// Asserts every property listed in the module documentation.
    pub fn check(&self) {
        let name = self.scenario.name;
        let occ = &self.scenario.occurrences;
        let s = &self.stats;
        let sink = &s.sinks[0];
        // Accounting.
        assert_eq!(s.emitted, occ.len() as u64, "{name}");
        assert_eq!(s.unaccounted(0), 0, "{name}: {s:?}");
        assert_eq!(sink.failed, 0, "{name}: {s:?}");
        assert_eq!(sink.dropped_shutdown, 0, "{name}: {s:?}");
        assert_eq!(s.dropped_queue_full, 0, "{name}: {s:?}");
        // Stored counts: per (source, object, reason), and in all.
        let mut expected: BTreeMap<Key, i64> = BTreeMap::new();
        for o in occ {
            *expected.entry(key_of_occurrence(o)).or_default() += 1;
        }
        assert_eq!(
            sums(&self.stored),
            expected,
            "{name}: stored counts after shutdown"
        );
        let total: i64 = self
            .stored
            .iter()
            .map(|e| i64::from(e.count.unwrap_or(0)))
            .sum();
        assert_eq!(total, occ.len() as i64, "{name}");
        assert_eq!(
            sums(&self.settled),
            expected,
            "{name}: stored counts not exact within the settle time"
        );
        // No patch of what this sink never created.
        assert_eq!(sink.patch_not_found_calls, 0, "{name}: {s:?}");
        assert!(!self.calls.iter().any(|c| c.not_found), "{name}");
        // Budgets. Every call is attributed to its stored event.
        let by_name: BTreeMap<&str, &Event> = self
            .stored
            .iter()
            .map(|e| (e.metadata.name.as_deref().unwrap_or(""), e))
            .collect();
        // First and last occurrence per spam key (source, object, type), and last per
        // (source, object, reason).
        let mut spam_span: BTreeMap<(String, String, bool), (Duration, Duration)> = BTreeMap::new();
        let mut last_of: BTreeMap<Key, Duration> = BTreeMap::new();
        for o in occ {
            let span = spam_span
                .entry((o.source.to_string(), o.object.clone(), o.warning))
                .or_insert((o.at, o.at));
            assert!(
                o.at - span.1 <= MAX_GAP,
                "{name}: the scenario pauses a storm"
            );
            span.1 = o.at;
            last_of.insert(key_of_occurrence(o), o.at);
        }
        let mut storm_writes: BTreeMap<(String, String, bool), u64> = BTreeMap::new();
        let mut after_writes: BTreeMap<&str, u64> = BTreeMap::new();
        for c in self.calls.iter().filter(|c| c.ok) {
            let e = by_name
                .get(c.name.as_str())
                .unwrap_or_else(|| panic!("{name}: a write of {} that is not stored", c.name));
            let (source, object, reason) = key_of_event(e);
            let spam = (
                source.clone(),
                object.clone(),
                e.type_.as_deref() == Some("Warning"),
            );
            let (first, last) = spam_span[&spam];
            if c.start >= first && c.start <= last {
                *storm_writes.entry(spam).or_default() += 1;
            }
            if c.start > last_of[&(source, object, reason)] {
                *after_writes.entry(c.name.as_str()).or_default() += 1;
            }
        }
        for (spam, writes) in &storm_writes {
            let (first, last) = spam_span[spam];
            let budget = BURST + (last - first).as_secs().div_ceil(REFILL.as_secs());
            assert!(
                *writes <= budget,
                "{name}: {writes} writes for {spam:?} during its storm, budget {budget}"
            );
        }
        for (event, writes) in &after_writes {
            assert!(
                *writes <= 1,
                "{name}: {event} written {writes} times after its storm"
            );
        }
        let events: BTreeSet<&str> = by_name.keys().copied().collect();
        assert!(
            sink.trailing_flushes <= events.len() as u64,
            "{name}: {} trailing writes for {} events",
            sink.trailing_flushes,
            events.len()
        );
    }
}

/// The trailing-flush settings the storms run with (the defaults).
pub fn trailing() -> TrailingFlushOptions {
    TrailingFlushOptions::default()
}
