//! [`EventBroadcaster`]: fans recorded events out to watchers — logging, your own handlers,
//! and sinks that correlate and write them.
//!
//! ```text
//! Recorder ─► incoming queue (bounded; an event identical to a queued one merges into it)
//!               └─► distributor task ─► watch::Broadcaster (ordered fan-out, waits for slow watchers)
//!                                         ├─► logging watcher (tracing)
//!                                         ├─► your event watchers
//!                                         └─► sink task per sink: EventCorrelator ─► KeyedWriter ─► EventSink
//! ```
//!
//! The fan-out waits for a slow watcher instead of dropping its events; back-pressure ends in
//! the incoming queue, where identical events merge and only distinct events beyond its bound
//! are dropped (and counted). A sink task never blocks on the network: writes run in their
//! own tasks, at most `max_concurrent_writes` at once, ordered per event.

use std::sync::Arc;
use std::sync::atomic::AtomicI64;
use std::time::Duration;

use herald_core::clock::{Clock, SystemClock, elapsed};
use herald_core::watch::{
    Broadcaster, BroadcasterBuilder, Distribution, FullChannelBehavior, Watcher,
};
use k8s_openapi::api::core::v1::Event;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::correlator::{CorrelateResult, CorrelatorOptions, EventCorrelator};
use super::drop_log::DropLog;
use super::event::{EventSource, object_key};
use super::queue::IncomingQueue;
use super::recorder::{Recorder, RecorderInner};
use super::sink::EventSink;
use super::stats::{Metrics, RecordStats, SinkCounters, SinkOutcome};
use super::writer::{KeyedWriter, RetryOptions, Tally, Write};

/// Settings of an [`EventBroadcaster`]. `Default` gives client-go's limits plus Herald's
/// improvements (storm merging, exact counts, concurrent ordered writes).
#[derive(Clone)]
pub struct BroadcasterOptions {
    /// Distinct events the incoming queue holds (client-go: 1000). An event identical to a
    /// queued one always merges into it; at the bound a distinct one is dropped and counted.
    pub queue_capacity: usize,
    /// Events buffered per watcher (client-go: 1000). At the bound the fan-out waits for that
    /// watcher (and so, in turn, the incoming queue fills).
    pub watcher_queue: usize,
    /// Correlator settings; every sink gets a fresh correlator built from them.
    pub correlator: CorrelatorOptions,
    /// How sinks retry failed writes.
    pub retry: RetryOptions,
    /// Writes a sink runs at once, each for a different event (writes for one event are
    /// always sequential).
    pub max_concurrent_writes: usize,
    /// Distinct events a sink may have writes pending for. At the bound the sink stops taking
    /// events from its watcher until a write completes.
    pub max_pending_writes: usize,
    /// How long [`EventBroadcaster::shutdown`] waits for queued events to be written. Writes
    /// still pending then are abandoned and counted as `dropped_shutdown`.
    pub shutdown_timeout: Duration,
    /// The recorder's clock: event names and first/last timestamps.
    pub clock: Arc<dyn Clock>,
}

impl Default for BroadcasterOptions {
    fn default() -> Self {
        Self {
            queue_capacity: 1000,
            watcher_queue: 1000,
            correlator: CorrelatorOptions::default(),
            retry: RetryOptions::default(),
            max_concurrent_writes: 8,
            max_pending_writes: 4096,
            shutdown_timeout: Duration::from_secs(10),
            clock: Arc::new(SystemClock),
        }
    }
}

impl std::fmt::Debug for BroadcasterOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BroadcasterOptions")
            .field("queue_capacity", &self.queue_capacity)
            .field("watcher_queue", &self.watcher_queue)
            .field("retry", &self.retry)
            .field("max_concurrent_writes", &self.max_concurrent_writes)
            .field("max_pending_writes", &self.max_pending_writes)
            .field("shutdown_timeout", &self.shutdown_timeout)
            .finish_non_exhaustive()
    }
}

/// Fans events from its [`Recorder`]s out to watchers and sinks. Cheap to clone.
///
/// Must be created inside a tokio runtime (it spawns its tasks there). Call
/// [`shutdown`](Self::shutdown) before exiting: it writes what is queued within
/// `shutdown_timeout` and stops every task it started.
#[derive(Clone)]
pub struct EventBroadcaster {
    inner: Arc<Inner>,
}

struct Inner {
    opts: BroadcasterOptions,
    queue: Arc<IncomingQueue>,
    fanout: Broadcaster<Arc<Event>>,
    metrics: Metrics,
    last_name_nanos: Arc<AtomicI64>,
    drop_log: Arc<DropLog>,
    tasks: TaskTracker,
    /// Cancelled at the shutdown deadline: abandon whatever is still pending.
    deadline: CancellationToken,
    shutdown_started: tokio::sync::Mutex<bool>,
}

/// Stops one watcher started by an [`EventBroadcaster`]; dropping it does not stop it.
#[derive(Debug, Clone)]
pub struct WatchHandle {
    stop: CancellationToken,
}

impl WatchHandle {
    /// Stops the watcher: it receives nothing more. Idempotent. A sink stopped this way
    /// abandons its pending writes (counted as `dropped_shutdown`).
    pub fn stop(&self) {
        self.stop.cancel();
    }
}

impl EventBroadcaster {
    /// A broadcaster with `opts`; starts its distributor task.
    pub fn new(opts: BroadcasterOptions) -> Self {
        let queue = Arc::new(IncomingQueue::new(opts.queue_capacity));
        // The distributor task below already runs the fan-out off the recorder's threads, so
        // the broadcaster needs no thread of its own: in-caller distribution keeps delivery on
        // the tokio runtime (deterministic under paused time) and needs no extra OS thread.
        let fanout =
            BroadcasterBuilder::new(opts.watcher_queue, FullChannelBehavior::WaitIfChannelFull)
                .incoming_capacity(opts.watcher_queue.max(1))
                .distribution(Distribution::InCaller)
                .build();
        let inner = Arc::new(Inner {
            queue: queue.clone(),
            fanout: fanout.clone(),
            metrics: Metrics::default(),
            last_name_nanos: Arc::new(AtomicI64::new(0)),
            drop_log: Arc::new(DropLog::new(opts.clock.clone())),
            tasks: TaskTracker::new(),
            deadline: CancellationToken::new(),
            shutdown_started: tokio::sync::Mutex::new(false),
            opts,
        });
        inner.tasks.spawn(distribute(queue, fanout));
        Self { inner }
    }

    /// A recorder stamping `source` on its events.
    pub fn new_recorder(&self, source: EventSource) -> Recorder {
        Recorder::new(RecorderInner {
            last_name_nanos: self.inner.last_name_nanos.clone(),
            drop_log: self.inner.drop_log.clone(),
            queue: self.inner.queue.clone(),
            metrics: self.inner.metrics.clone(),
            clock: self.inner.opts.clock.clone(),
            source,
        })
    }

    /// The broadcaster's counters (register them with
    /// [`Metrics::register`](super::Metrics::register)).
    pub fn metrics(&self) -> &Metrics {
        &self.inner.metrics
    }

    /// A snapshot of the accounting.
    pub fn stats(&self) -> RecordStats {
        self.inner.metrics.snapshot()
    }

    /// Tasks started by this broadcaster that are still running (0 after `shutdown`).
    pub fn running_tasks(&self) -> usize {
        self.inner.tasks.len()
    }

    fn watch(&self) -> Option<Watcher<Arc<Event>>> {
        match self.inner.fanout.watch() {
            Ok(w) => Some(w),
            Err(e) => {
                tracing::error!(error = %e, "Unable to start event watcher (will not retry!)");
                None
            }
        }
    }

    /// Calls `handler` for every event recorded from now on, one at a time, in order.
    /// After shutdown this returns a handle to a watcher that never runs.
    pub fn start_event_watcher(
        &self,
        mut handler: impl FnMut(&Event) + Send + 'static,
    ) -> WatchHandle {
        let stop = CancellationToken::new();
        if let Some(mut watcher) = self.watch() {
            let stop = stop.clone();
            let deadline = self.inner.deadline.clone();
            self.inner.tasks.spawn(async move {
                loop {
                    tokio::select! {
                        biased;
                        _ = stop.cancelled() => break,
                        _ = deadline.cancelled() => break,
                        item = watcher.recv() => match item {
                            Some(e) => handler(&e),
                            None => break,
                        },
                    }
                }
                watcher.stop();
            });
        }
        WatchHandle { stop }
    }

    /// Logs every event through `tracing` (target `herald::event`, level INFO) with the
    /// fields client-go's structured logging uses: object, fieldPath, kind, apiVersion, type,
    /// reason, and the message as `note` (its events.k8s.io name: `message` is the log line's
    /// own field in `tracing`).
    pub fn start_logging(&self) -> WatchHandle {
        self.start_event_watcher(|e| {
            let r = &e.involved_object;
            tracing::info!(
                target: "herald::event",
                object = %object_key(r),
                fieldPath = %r.field_path.as_deref().unwrap_or(""),
                kind = %r.kind.as_deref().unwrap_or(""),
                apiVersion = %r.api_version.as_deref().unwrap_or(""),
                r#type = %e.type_.as_deref().unwrap_or(""),
                reason = %e.reason.as_deref().unwrap_or(""),
                note = %e.message.as_deref().unwrap_or(""),
                "Event occurred"
            );
        })
    }

    /// Correlates every event recorded from now on with a fresh [`EventCorrelator`] and
    /// writes the results to `sink`. Its metrics are labelled `sink="sink"`.
    pub fn start_recording_to_sink(&self, sink: impl EventSink) -> WatchHandle {
        self.start_recording_to_named_sink("sink", sink)
    }

    /// As [`start_recording_to_sink`](Self::start_recording_to_sink), labelling the sink's
    /// metrics with `name`.
    pub fn start_recording_to_named_sink(&self, name: &str, sink: impl EventSink) -> WatchHandle {
        let stop = CancellationToken::new();
        let Some(watcher) = self.watch() else {
            return WatchHandle { stop };
        };
        let opts = &self.inner.opts;
        let counters = self.inner.metrics.new_sink(name);
        let writer = KeyedWriter::new(
            Arc::new(sink),
            Arc::new(opts.retry.clone()),
            counters.clone(),
            self.inner.deadline.clone(),
            opts.max_concurrent_writes,
            opts.max_pending_writes,
        );
        let task = SinkTask {
            correlator: EventCorrelator::new(opts.correlator.clone()),
            clock: opts.correlator.clock.clone(),
            writer,
            counters,
            watcher,
            stop: stop.clone(),
            deadline: self.inner.deadline.clone(),
            flush_at: None,
            flush_stale: true,
        };
        self.inner.tasks.spawn(task.run());
        WatchHandle { stop }
    }

    /// Stops accepting events, delivers everything queued to every watcher, lets sinks write
    /// what they hold (including counts the spam filter held back) for up to
    /// `shutdown_timeout`, then stops every task this broadcaster started. Idempotent;
    /// concurrent callers all return once it is done.
    pub async fn shutdown(&self) {
        let mut started = self.inner.shutdown_started.lock().await;
        if *started {
            return;
        }
        *started = true;
        self.inner.queue.close();
        self.inner.tasks.close();
        let timeout = self.inner.opts.shutdown_timeout;
        if tokio::time::timeout(timeout, self.inner.tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                ?timeout,
                "event broadcaster shutdown deadline passed; abandoning unwritten events"
            );
            self.inner.deadline.cancel();
            self.inner.tasks.wait().await;
        }
    }
}

/// Moves events from the incoming queue into the fan-out, then shuts the fan-out down once
/// the queue is closed and drained.
async fn distribute(queue: Arc<IncomingQueue>, fanout: Broadcaster<Arc<Event>>) {
    while let Some(event) = queue.pop().await {
        if fanout.action(Arc::new(event)).await.is_err() {
            break;
        }
    }
    fanout.shutdown().await;
}

struct SinkTask {
    correlator: EventCorrelator,
    clock: Arc<dyn Clock>,
    writer: KeyedWriter,
    counters: SinkCounters,
    watcher: Watcher<Arc<Event>>,
    stop: CancellationToken,
    deadline: CancellationToken,
    /// When the next trailing flush may be due (tokio time). Recomputed when it can have moved
    /// earlier (a skip can remember the first key) and after flushes were taken; a deadline
    /// that proves early (the storm went on) just takes nothing and is recomputed.
    flush_at: Option<tokio::time::Instant>,
    flush_stale: bool,
}

async fn sleep_until_or_never(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

impl SinkTask {
    async fn run(mut self) {
        let mut input_open = true;
        loop {
            if !input_open && self.writer.is_idle() {
                // The last writes are done: flush any count the spam filter still holds
                // back, once, ignoring the rate budget (the process is going away).
                let flushes = self.correlator.drain_flushes();
                if flushes.is_empty() {
                    break;
                }
                for f in flushes {
                    self.submit_trailing(f);
                }
                continue;
            }
            if self.flush_stale {
                self.flush_at = self
                    .correlator
                    .next_flush_at()
                    .map(|t| tokio::time::Instant::now() + elapsed(self.clock.now(), t));
                self.flush_stale = false;
            }
            let flush_at = self.flush_at;
            tokio::select! {
                biased;
                _ = self.deadline.cancelled() => {
                    self.abandon().await;
                    break;
                }
                _ = self.stop.cancelled() => {
                    self.abandon().await;
                    break;
                }
                done = self.writer.next_completed(), if !self.writer.is_idle() => {
                    if let Some(stored) = done.as_ref().and_then(|d| d.result.stored()) {
                        self.correlator.update_state(stored);
                    }
                }
                item = self.watcher.recv(), if input_open && !self.writer.is_full() => {
                    match item {
                        // The last watcher to see an event takes it without a copy.
                        Some(event) => self.handle(Arc::unwrap_or_clone(event)),
                        None => input_open = false,
                    }
                }
                _ = sleep_until_or_never(flush_at), if input_open && flush_at.is_some() => {
                    // Taking flushes moves the next deadline; a deadline that proves early
                    // (tokens were spent meanwhile) just takes nothing and is recomputed.
                    self.flush_stale = true;
                    for f in self.correlator.take_due_flushes() {
                        self.submit_trailing(f);
                    }
                }
            }
        }
        self.watcher.stop();
    }

    /// Gives up on every write in flight and every count still held back: they are
    /// settled as dropped at shutdown.
    async fn abandon(&mut self) {
        self.writer.abandon().await;
        let held = self.correlator.forget_flushes();
        self.counters.outcome(SinkOutcome::DroppedShutdown, held);
    }

    fn handle(&mut self, event: Event) {
        self.counters.delivered();
        let result = match self.correlator.correlate(event) {
            Ok(r) => r,
            Err(e) => {
                tracing::error!(error = %e, "unable to correlate event; dropping it");
                self.counters.outcome(SinkOutcome::Failed, 1);
                return;
            }
        };
        self.counters
            .outcome(SinkOutcome::Skipped, result.settled_skips);
        if result.skip {
            // A new held-back count may be due before the current deadline.
            self.flush_stale = true;
            return;
        }
        let tally = Tally {
            plain: u64::from(!result.aggregated),
            aggregated: u64::from(result.aggregated),
            carried: result.carried,
        };
        self.writer
            .submit(Write::for_event(result.event, result.patch, tally));
    }

    fn submit_trailing(&mut self, f: CorrelateResult) {
        self.counters.trailing_flush();
        let tally = Tally {
            carried: f.carried,
            ..Tally::default()
        };
        self.writer
            .submit(Write::for_event(f.event, f.patch, tally));
    }
}
