//! Writing correlated events to a sink: one write with retries, and the per-key writer that
//! keeps writes for one event strictly ordered while writes for different events run
//! concurrently.
//!
//! Shared by both recorders: the writer is generic over what a write carries
//! ([`WriteSource`]: a whole core/v1 event for [`record`](crate::record), a light occurrence
//! whose events.k8s.io/v1 event is built on the write's task for [`events`](crate::events))
//! and over the event type it sends ([`WritableEvent`]).

use herald_core::flow::{ExponentialBackoff, JitterMode};
use k8s_openapi::api::core::v1::Event;
use kube::Resource as _;
use rand::rngs::SmallRng;
use rand::{Rng as _, SeedableRng};
use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::sink::{EventSink, RetryClass, SinkError};
use super::stats::{ApiCall, SinkCounters, SinkOutcome};

/// How a sink retries a failed write.
///
/// Transport errors, unexpected responses, 429 and 5xx are retried up to `max_attempts`
/// attempts in all, sleeping an exponentially growing, jittered delay between attempts (and
/// at least as long as the server's retry-after). Other errors give up at once.
#[derive(Debug, Clone)]
pub struct RetryOptions {
    /// Attempts per write, the first included (client-go: 12). At the bound the write is
    /// given up and its events are counted as `failed`. `0` behaves as `1`.
    pub max_attempts: u32,
    /// Delay before retry *n* (n = 0 for the first retry).
    pub backoff: ExponentialBackoff,
    /// How long, in all, one write may wait on a throttling server (`429` with a
    /// `Retry-After`) without using up its attempts (default 10 minutes). Each such answer is
    /// waited out for the server's `Retry-After` (plus up to a quarter more, so throttled
    /// writers do not all come back at once), not for the growing backoff: the server asked
    /// for that pace, and a backoff grown to 15 s would starve behind its token bucket.
    /// Past the bound, throttling answers count as attempts like any failure. Meanwhile the
    /// write's key stays pending, so later occurrences of it merge into one write and the
    /// sink's pending bound holds memory. `Duration::ZERO`: every throttling answer is an
    /// attempt (client-go).
    pub max_throttled_wait: Duration,
}

impl Default for RetryOptions {
    fn default() -> Self {
        Self {
            max_attempts: 12,
            backoff: ExponentialBackoff::new(Duration::from_millis(500), Duration::from_secs(15))
                .with_jitter(JitterMode::Proportional(0.25)),
            max_throttled_wait: Duration::from_secs(600),
        }
    }
}

/// An event type the shared writer can write: named by its metadata (namespace and name),
/// created whole, patched with bytes.
pub(crate) trait WritableEvent:
    kube::Resource<DynamicType = ()> + Clone + Send + Sync + fmt::Debug + 'static
{
    /// The patch sent for a [`WriteOp::Patch`] that carries no bytes.
    fn fallback_patch(&self) -> Vec<u8>;

    /// Whether a create that follows a patch answered 404 and meets `AlreadyExists` is tried
    /// again (from the patch) instead of given up: client-go's events.k8s.io rule for series
    /// writes ("its create raced with the original"). core/v1 gives up.
    fn retry_already_exists_after_patch() -> bool {
        false
    }
}

impl WritableEvent for Event {
    fn fallback_patch(&self) -> Vec<u8> {
        fallback_patch(self)
    }
}

/// What a pending [`Write`] carries: the event it sends, or what that event is built from.
///
/// The writer asks for the event once per write, on the write's own task (after the
/// write's turn in its key's order has come, before its first attempt; every attempt
/// sends the same event). So a sink task that only decides writes can hand on something
/// cheaper than a whole event and leave building it to the write.
pub(crate) trait WriteSource: Send + Sync + fmt::Debug + 'static {
    /// The event type the write sends.
    type Event: WritableEvent;

    /// The namespace and name of the event the write targets (what orders writes: one at a
    /// time per key). Equal to [`write_key`] of [`event`](Self::event).
    fn write_key(&self) -> WriteKey;

    /// The event the write sends: borrowed when the source is the whole event, built when
    /// it is not.
    fn event(&self) -> Cow<'_, Self::Event>;
}

/// A whole event, shared (`Arc`) so that a cache keeping the same event does not copy it for
/// the write (core/v1).
impl<E: WritableEvent> WriteSource for Arc<E> {
    type Event = E;

    fn write_key(&self) -> WriteKey {
        write_key(&**self)
    }

    fn event(&self) -> Cow<'_, E> {
        Cow::Borrowed(&**self)
    }
}

/// How many events a write settles when it completes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Tally {
    /// Events written as themselves (outcome created or patched).
    pub plain: u64,
    /// Events folded into a "combined" event (outcome aggregated).
    pub aggregated: u64,
    /// Events the spam filter held back whose count the write carries (outcome skipped).
    pub carried: u64,
    /// Events counted into an events.k8s.io series in memory whose count the write carries
    /// (outcome series).
    pub series: u64,
}

impl Tally {
    fn add(&mut self, o: Tally) {
        self.plain += o.plain;
        self.aggregated += o.aggregated;
        self.carried += o.carried;
        self.series += o.series;
    }

    fn all(self) -> u64 {
        self.plain + self.aggregated + self.carried + self.series
    }

    fn settle(self, counters: &SinkCounters, end: WriteEnd) {
        let written = match end {
            WriteEnd::Created => SinkOutcome::Created,
            WriteEnd::Patched => SinkOutcome::Patched,
            WriteEnd::Failed => {
                counters.outcome(SinkOutcome::Failed, self.all());
                return;
            }
        };
        counters.outcome(written, self.plain);
        counters.outcome(SinkOutcome::Aggregated, self.aggregated);
        counters.outcome(SinkOutcome::Skipped, self.carried);
        counters.outcome(SinkOutcome::Series, self.series);
    }

    pub(crate) fn dropped(self, counters: &SinkCounters) {
        counters.outcome(SinkOutcome::DroppedShutdown, self.all());
    }
}

/// What a pending write sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum WriteOp {
    /// Create the event (POST), with an empty resourceVersion.
    Create,
    /// Patch the stored event (PATCH) with these bytes, or with [`fallback_patch`] when the
    /// correlator gave none; a 404 turns it into a create.
    Patch(Option<Vec<u8>>),
}

/// One pending write: what its event is made of (the event is sent whole by a create,
/// named by a patch; see [`WriteSource`]), what to send, and the occurrences it settles.
#[derive(Debug, Clone)]
pub(crate) struct Write<S = Arc<Event>> {
    pub source: S,
    pub op: WriteOp,
    pub tally: Tally,
}

impl Write {
    /// The write client-go's `recordToSink` would make for a correlated event: a patch when
    /// the count is above one and there is something to patch, a create otherwise.
    pub(crate) fn for_event(event: Event, patch: Option<Vec<u8>>, tally: Tally) -> Self {
        let has_target = patch.is_some()
            || event
                .metadata
                .resource_version
                .as_deref()
                .is_some_and(|rv| !rv.is_empty());
        let op = if event.count.unwrap_or(0) > 1 && has_target {
            WriteOp::Patch(patch)
        } else {
            WriteOp::Create
        };
        Write {
            source: Arc::new(event),
            op,
            tally,
        }
    }
}

impl<S> Write<S> {
    /// Folds a newer write for the same event into this one. Counts in patches are absolute,
    /// so the newer state wins; a create that has not been sent stays a create (of the newer
    /// state), so the object is never patched before it exists.
    fn coalesce(&mut self, newer: Write<S>) {
        let mut tally = self.tally;
        tally.add(newer.tally);
        let keep_create = self.op == WriteOp::Create;
        *self = newer;
        if keep_create {
            self.op = WriteOp::Create;
        }
        self.tally = tally;
    }
}

/// The end of one write.
#[derive(Debug)]
pub(crate) enum WriteResult<E = Event> {
    /// Stored by a create (a patch answered 404 ends here too); the server's object.
    Created(Box<E>),
    /// Stored by a patch; the server's object.
    Patched(Box<E>),
    /// Given up (the error has been logged).
    Failed,
}

impl<E> WriteResult<E> {
    /// The stored object, when the write succeeded.
    pub(crate) fn stored(&self) -> Option<&E> {
        match self {
            WriteResult::Created(e) | WriteResult::Patched(e) => Some(e),
            WriteResult::Failed => None,
        }
    }

    fn end(&self) -> WriteEnd {
        match self {
            WriteResult::Created(_) => WriteEnd::Created,
            WriteResult::Patched(_) => WriteEnd::Patched,
            WriteResult::Failed => WriteEnd::Failed,
        }
    }
}

/// How a write ended, as the accounting sees it (a write task that panicked ends `Failed`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WriteEnd {
    Created,
    Patched,
    Failed,
}

/// The patch the recorder sends when it has none from the correlator (an event that arrives
/// with a count above one and a resourceVersion): the same three absolute fields.
fn fallback_patch(event: &Event) -> Vec<u8> {
    let mut m = serde_json::Map::new();
    if let Some(c) = event.count {
        m.insert("count".into(), c.into());
    }
    if let Ok(v) = serde_json::to_value(&event.last_timestamp) {
        m.insert("lastTimestamp".into(), v);
    }
    if let Some(msg) = event.message.as_deref().filter(|m| !m.is_empty()) {
        m.insert("message".into(), msg.into());
    }
    serde_json::to_vec(&m).unwrap_or_else(|_| b"{}".to_vec())
}

/// One attempt, as client-go's `recordEvent`: patch when updating, and create when not
/// updating or when the patch target is gone (404), with an empty resourceVersion.
async fn attempt<E: WritableEvent>(
    sink: &dyn EventSink<E>,
    event: &E,
    op: &WriteOp,
    counters: &SinkCounters,
) -> Result<WriteResult<E>, SinkError> {
    if let WriteOp::Patch(patch) = op {
        let owned;
        let patch = match patch {
            Some(p) => p.as_slice(),
            None => {
                owned = event.fallback_patch();
                owned.as_slice()
            }
        };
        let patched = sink.patch(event, patch).await;
        match patched {
            Ok(e) => {
                counters.call(ApiCall::Patched);
                return Ok(WriteResult::Patched(Box::new(e)));
            }
            Err(e) if e.is_not_found() => counters.call(ApiCall::PatchNotFound),
            Err(e) => {
                counters.call(ApiCall::PatchFailed);
                return Err(e);
            }
        }
    }
    // A create never carries a resourceVersion; copy the event only to remove one.
    let cleared;
    let ev = if event.meta().resource_version.is_some() {
        let mut e = event.clone();
        e.meta_mut().resource_version = None;
        cleared = e;
        &cleared
    } else {
        event
    };
    match sink.create(ev).await {
        Ok(e) => {
            counters.call(ApiCall::Created);
            Ok(WriteResult::Created(Box::new(e)))
        }
        Err(e) => {
            counters.call(ApiCall::CreateFailed);
            Err(e)
        }
    }
}

/// Writes `w` with retries: builds its event once ([`WriteSource::event`]) and sends it in
/// every attempt. Stops retrying once `stop` is cancelled (the current attempt finishes; a
/// retry sleep is cut short and the write is given up).
pub(crate) async fn write_with_retries<S: WriteSource>(
    sink: &dyn EventSink<S::Event>,
    w: &Write<S>,
    opts: &RetryOptions,
    counters: &SinkCounters,
    stop: &CancellationToken,
    rng: &mut SmallRng,
) -> WriteResult<S::Event> {
    let max = opts.max_attempts.max(1);
    let mut tries = 0u32;
    let mut throttled_for = Duration::ZERO;
    let event = w.source.event();
    loop {
        let result = attempt(sink, &*event, &w.op, counters).await;
        let err = match result {
            Ok(written) => return written,
            Err(e) => e,
        };
        let class = if matches!(w.op, WriteOp::Patch(_))
            && err.is_already_exists()
            && S::Event::retry_already_exists_after_patch()
        {
            RetryClass::Retry(None)
        } else {
            err.retry_class()
        };
        let name = &event.meta().name;
        let wait = match class {
            RetryClass::GiveUpQuietly => {
                tracing::debug!(event = ?name, error = %err, "Server rejected event (will not retry!)");
                return WriteResult::Failed;
            }
            RetryClass::GiveUp => {
                tracing::error!(event = ?name, error = %err, "Server rejected event (will not retry!)");
                return WriteResult::Failed;
            }
            RetryClass::Throttled(after) => {
                // Up to a quarter more than asked, so throttled writers spread out.
                let delay = after.mul_f64(1.0 + rng.random::<f64>() * 0.25);
                if throttled_for.saturating_add(delay) <= opts.max_throttled_wait {
                    throttled_for += delay;
                    tracing::debug!(event = ?name, error = %err, ?delay, "Server is throttling events (will retry after it asked)");
                    counters.retry();
                    if !pause(delay, stop).await {
                        tracing::warn!(event = ?name, error = %err, "Unable to write event (broadcaster is shut down)");
                        return WriteResult::Failed;
                    }
                    continue;
                }
                Some(after)
            }
            RetryClass::Retry(after) => after,
        };
        tries += 1;
        if tries >= max {
            tracing::error!(event = ?name, error = %err, attempts = tries, "Unable to write event (retry limit exceeded!)");
            return WriteResult::Failed;
        }
        if stop.is_cancelled() {
            tracing::warn!(event = ?name, error = %err, "Unable to write event (broadcaster is shut down)");
            return WriteResult::Failed;
        }
        let delay = opts
            .backoff
            .delay(tries - 1, rng)
            .max(wait.unwrap_or_default());
        tracing::debug!(event = ?name, error = %err, ?delay, "Unable to write event (may retry after sleeping)");
        counters.retry();
        if !pause(delay, stop).await {
            tracing::warn!(event = ?name, error = %err, "Unable to write event (broadcaster is shut down)");
            return WriteResult::Failed;
        }
    }
}

/// Sleeps `delay`; false when `stop` is cancelled first.
async fn pause(delay: Duration, stop: &CancellationToken) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(delay) => true,
        _ = stop.cancelled() => false,
    }
}

/// The identity a write targets on the server: namespace and name.
pub(crate) type WriteKey = (String, String);

pub(crate) fn write_key<E: kube::Resource>(e: &E) -> WriteKey {
    let m = e.meta();
    (
        m.namespace.clone().unwrap_or_default(),
        m.name.clone().unwrap_or_default(),
    )
}

enum Slot<S> {
    /// Waiting for a concurrency slot.
    Waiting(Write<S>),
    /// A write is in flight (settling `tally`); `next` follows it.
    Running {
        tally: Tally,
        next: Option<Write<S>>,
    },
}

/// A completed write as the sink task sees it.
pub(crate) struct Completed<E = Event> {
    pub result: WriteResult<E>,
}

/// Runs writes with bounded concurrency, strictly ordered per [`WriteKey`], coalescing a
/// key's queued writes into one (its newest state).
///
/// Bounds: at most `max_concurrent` writes in flight; at most `max_keys` keys with a write in
/// flight or queued — at that bound [`KeyedWriter::is_full`] is true and the caller stops
/// taking input until a write completes (back-pressure, nothing dropped).
pub(crate) struct KeyedWriter<S: WriteSource = Arc<Event>> {
    sink: Arc<dyn EventSink<S::Event>>,
    opts: Arc<RetryOptions>,
    counters: SinkCounters,
    stop: CancellationToken,
    slots: HashMap<WriteKey, Slot<S>>,
    ready: VecDeque<WriteKey>,
    running: JoinSet<(WriteKey, Completed<S::Event>)>,
    running_ids: HashMap<tokio::task::Id, WriteKey>,
    max_concurrent: usize,
    max_keys: usize,
    seed: u64,
}

impl<S: WriteSource> KeyedWriter<S> {
    pub(crate) fn new(
        sink: Arc<dyn EventSink<S::Event>>,
        opts: Arc<RetryOptions>,
        counters: SinkCounters,
        stop: CancellationToken,
        max_concurrent: usize,
        max_keys: usize,
    ) -> Self {
        Self {
            sink,
            opts,
            counters,
            stop,
            slots: HashMap::new(),
            ready: VecDeque::new(),
            running: JoinSet::new(),
            running_ids: HashMap::new(),
            max_concurrent: max_concurrent.max(1),
            max_keys: max_keys.max(1),
            seed: rand::random(),
        }
    }

    /// The sink's counters (for outcomes settled outside a write).
    pub(crate) fn counters(&self) -> &SinkCounters {
        &self.counters
    }

    pub(crate) fn is_full(&self) -> bool {
        self.slots.len() >= self.max_keys
    }

    pub(crate) fn is_idle(&self) -> bool {
        self.slots.is_empty()
    }

    /// Queues `w` behind any write for the same key.
    pub(crate) fn submit(&mut self, w: Write<S>) {
        let key = w.source.write_key();
        match self.slots.get_mut(&key) {
            Some(Slot::Waiting(p)) | Some(Slot::Running { next: Some(p), .. }) => p.coalesce(w),
            Some(Slot::Running { next, .. }) => *next = Some(w),
            None => {
                self.slots.insert(key.clone(), Slot::Waiting(w));
                self.ready.push_back(key);
                self.pump();
            }
        }
    }

    fn pump(&mut self) {
        while self.running.len() < self.max_concurrent {
            let Some(key) = self.ready.pop_front() else {
                return;
            };
            let Some(Slot::Waiting(w)) = self.slots.remove(&key) else {
                continue;
            };
            self.slots.insert(
                key.clone(),
                Slot::Running {
                    tally: w.tally,
                    next: None,
                },
            );
            let sink = self.sink.clone();
            let opts = self.opts.clone();
            let counters = self.counters.clone();
            let stop = self.stop.clone();
            self.seed = self.seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut rng = SmallRng::seed_from_u64(self.seed);
            let task_key = key.clone();
            let handle = self.running.spawn(async move {
                let result =
                    write_with_retries(&*sink, &w, &opts, &counters, &stop, &mut rng).await;
                (task_key, Completed { result })
            });
            self.running_ids.insert(handle.id(), key);
        }
    }

    /// The next completed write, with its events settled in the counters; `None` when
    /// nothing is in flight.
    pub(crate) async fn next_completed(&mut self) -> Option<Completed<S::Event>> {
        loop {
            let (key, done) = match self.running.join_next_with_id().await? {
                Ok((id, (key, done))) => {
                    self.running_ids.remove(&id);
                    (key, Some(done))
                }
                Err(e) => {
                    // A panicking sink: settle what the slot says was in flight as failed.
                    tracing::error!(error = %e, "event sink write task failed");
                    match self.running_ids.remove(&e.id()) {
                        Some(key) => (key, None),
                        None => continue,
                    }
                }
            };
            let in_flight = match self.slots.remove(&key) {
                Some(Slot::Running { tally, next }) => {
                    if let Some(w) = next {
                        self.slots.insert(key.clone(), Slot::Waiting(w));
                        self.ready.push_back(key);
                    }
                    tally
                }
                Some(other) => {
                    self.slots.insert(key, other);
                    Tally::default()
                }
                None => Tally::default(),
            };
            let end = done.as_ref().map_or(WriteEnd::Failed, |d| d.result.end());
            in_flight.settle(&self.counters, end);
            self.pump();
            if let Some(done) = done {
                return Some(done);
            }
        }
    }

    /// Abandons every queued and in-flight write, counting their events as dropped at
    /// shutdown.
    pub(crate) async fn abandon(&mut self) {
        self.running.shutdown().await;
        self.running_ids.clear();
        for (_, slot) in self.slots.drain() {
            match slot {
                Slot::Waiting(w) => w.tally.dropped(&self.counters),
                Slot::Running { tally, next } => {
                    tally.dropped(&self.counters);
                    if let Some(w) = next {
                        w.tally.dropped(&self.counters);
                    }
                }
            }
        }
        self.ready.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::sink::{MemorySink, SinkCall, SinkOp};
    use crate::record::stats::Metrics;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use std::sync::atomic::{AtomicU32, Ordering};

    fn event(name: &str, count: i32, rv: Option<&str>) -> Event {
        Event {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                resource_version: rv.map(str::to_string),
                ..ObjectMeta::default()
            },
            count: Some(count),
            message: Some("m".into()),
            ..Event::default()
        }
    }

    async fn run(sink: &MemorySink, w: &Write, stop: &CancellationToken) -> (WriteResult, u64) {
        let metrics = Metrics::default();
        let counters = metrics.new_sink("t");
        let mut rng = SmallRng::seed_from_u64(1);
        let r =
            write_with_retries(sink, w, &RetryOptions::default(), &counters, stop, &mut rng).await;
        let calls = metrics.snapshot().sinks[0].api_calls();
        (r, calls)
    }

    /// client-go TestWriteEventError: attempts per error class are 1/1/12/12/2.
    #[tokio::test(start_paused = true)]
    async fn write_event_error_attempt_counts() {
        type Fault = fn(u32) -> Option<SinkError>;
        let cases: [(&str, Fault, u64, bool); 5] = [
            (
                "giveUp1",
                |_| Some(SinkError::RequestConstruction("bad".into())),
                1,
                false,
            ),
            ("giveUp2", |_| Some(SinkError::status(0, "", "")), 1, false),
            (
                "retry1",
                |_| Some(SinkError::UnexpectedObject("?".into())),
                12,
                false,
            ),
            (
                "retry2",
                |_| Some(SinkError::Transport("A weird error".into())),
                12,
                false,
            ),
            (
                "succeedEventually",
                |n| (n == 1).then(|| SinkError::Transport("A weird error".into())),
                2,
                true,
            ),
        ];
        for (name, fault, attempts, ok) in cases {
            let n = std::sync::Arc::new(AtomicU32::new(0));
            let n2 = n.clone();
            let sink = MemorySink::new()
                .with_faults(move |_: &SinkCall| fault(n2.fetch_add(1, Ordering::SeqCst) + 1));
            // An event with count 0 never deduplicates: always a create.
            let w = Write::for_event(event(name, 0, None), None, Tally::default());
            assert_eq!(w.op, WriteOp::Create);
            let (r, calls) = run(&sink, &w, &CancellationToken::new()).await;
            assert_eq!(calls, attempts, "{name}");
            assert_eq!(sink.count_calls(SinkOp::Create) as u64, attempts, "{name}");
            assert_eq!(r.stored().is_some(), ok, "{name}");
        }
    }

    /// client-go TestUpdateExpiredEvent: count 2 with a resourceVersion patches; the 404 makes
    /// it create, with an empty resourceVersion.
    #[tokio::test(start_paused = true)]
    async fn update_expired_event_creates_after_404() {
        let sink = MemorySink::new();
        let w = Write::for_event(
            event("expired", 2, Some("updated-resource-version")),
            None,
            Tally::default(),
        );
        assert_eq!(w.op, WriteOp::Patch(None));
        let (r, calls) = run(&sink, &w, &CancellationToken::new()).await;
        assert_eq!(calls, 2);
        let ops: Vec<_> = sink.calls().iter().map(|c| (c.op, c.ok)).collect();
        assert_eq!(ops, [(SinkOp::Patch, false), (SinkOp::Create, true)]);
        let WriteResult::Created(event) = r else {
            panic!("not created: {r:?}")
        };
        assert_eq!(event.count, Some(2));
        // The sink saw no resourceVersion on the create (it assigned its own).
        assert_eq!(event.metadata.resource_version.as_deref(), Some("2"));
    }

    /// client-go TestCancelEvent: after cancellation a failing write gets exactly one attempt.
    #[tokio::test(start_paused = true)]
    async fn cancelled_context_means_one_attempt() {
        let sink = MemorySink::new()
            .with_faults(|_: &SinkCall| Some(SinkError::UnexpectedObject("?".into())));
        let stop = CancellationToken::new();
        stop.cancel();
        let w = Write::for_event(event("c", 1, None), None, Tally::default());
        let (r, calls) = run(&sink, &w, &stop).await;
        assert_eq!(calls, 1);
        assert!(matches!(r, WriteResult::Failed));
    }

    /// 429 with a retry-after waits at least that long before the next attempt.
    #[tokio::test(start_paused = true)]
    async fn honours_retry_after() {
        let n = std::sync::Arc::new(AtomicU32::new(0));
        let n2 = n.clone();
        let sink = MemorySink::new().with_faults(move |_: &SinkCall| {
            (n2.fetch_add(1, Ordering::SeqCst) == 0).then(|| SinkError::Status {
                code: 429,
                reason: "TooManyRequests".into(),
                message: "slow down".into(),
                cause_types: vec![],
                retry_after: Some(std::time::Duration::from_secs(42)),
            })
        });
        let start = tokio::time::Instant::now();
        let w = Write::for_event(event("r", 1, None), None, Tally::default());
        let (r, calls) = run(&sink, &w, &CancellationToken::new()).await;
        assert!(matches!(r, WriteResult::Created(_)), "{r:?}");
        assert_eq!(calls, 2);
        assert!(start.elapsed() >= std::time::Duration::from_secs(42));
    }

    /// A sink that answers `429` with `Retry-After: 1s` to the first `n` calls.
    fn throttling(n: u32) -> MemorySink {
        let calls = std::sync::Arc::new(AtomicU32::new(0));
        MemorySink::new().with_faults(move |_: &SinkCall| {
            (calls.fetch_add(1, Ordering::SeqCst) < n).then(|| SinkError::Status {
                code: 429,
                reason: "TooManyRequests".into(),
                message: "Too many requests: limit reached".into(),
                cause_types: vec![],
                retry_after: Some(Duration::from_secs(1)),
            })
        })
    }

    /// Throttling (429 with a retry-after) uses up no attempt: 50 of them in a row, far past
    /// the 12 attempts, and the write still lands; each wait is the server's second plus at
    /// most a quarter, not the backoff grown to 15 s.
    #[tokio::test(start_paused = true)]
    async fn throttling_is_waited_out_without_using_up_attempts() {
        let sink = throttling(50);
        let start = tokio::time::Instant::now();
        let w = Write::for_event(event("t", 1, None), None, Tally::default());
        let (r, calls) = run(&sink, &w, &CancellationToken::new()).await;
        assert!(matches!(r, WriteResult::Created(_)), "{r:?}");
        assert_eq!(calls, 51);
        let waited = start.elapsed();
        assert!(waited >= Duration::from_secs(50), "{waited:?}");
        assert!(waited <= Duration::from_millis(62_500), "{waited:?}");
    }

    /// Past `max_throttled_wait`, throttling counts as attempts: with a 10 s budget and
    /// 12 attempts, a server that never stops throttling fails the write after about 9
    /// waited-out answers and then 12 attempts.
    #[tokio::test(start_paused = true)]
    async fn throttling_past_its_budget_counts_as_attempts() {
        let sink = throttling(u32::MAX);
        let opts = RetryOptions {
            max_throttled_wait: Duration::from_secs(10),
            ..RetryOptions::default()
        };
        let counters = Metrics::default().new_sink("t");
        let mut rng = SmallRng::seed_from_u64(1);
        let w = Write::for_event(event("t", 1, None), None, Tally::default());
        let r = write_with_retries(
            &sink,
            &w,
            &opts,
            &counters,
            &CancellationToken::new(),
            &mut rng,
        )
        .await;
        assert!(matches!(r, WriteResult::Failed), "{r:?}");
        let calls = sink.calls().len();
        // 8 to 10 waits of 1–1.25 s fit in 10 s, then 12 counted attempts.
        assert!((8 + 12..=10 + 12).contains(&calls), "{calls}");
    }

    #[test]
    fn coalescing_keeps_a_create_a_create() {
        let t1 = Tally {
            plain: 1,
            aggregated: 0,
            carried: 0,
            series: 0,
        };
        let t2 = Tally { carried: 3, ..t1 };
        let mut a = Write::for_event(event("k", 1, None), None, t1);
        let b = Write::for_event(event("k", 2, None), Some(b"{}".to_vec()), t2);
        assert_eq!(a.op, WriteOp::Create);
        assert!(matches!(b.op, WriteOp::Patch(Some(_))));
        a.coalesce(b);
        assert_eq!(a.op, WriteOp::Create);
        assert_eq!(a.source.count, Some(2));
        assert_eq!(
            a.tally,
            Tally {
                plain: 2,
                aggregated: 0,
                carried: 3,
                series: 0,
            }
        );
    }
}
