//! The recording pipeline both recorders share: incoming queue → distributor → ordered fan-out
//! → watchers and sink tasks → keyed writer, with one shutdown for all of it.
//!
//! ```text
//! recorder ─► IncomingQueue<T> (bounded; identical occurrences merge)
//!               └─► distributor task ─► watch::Broadcaster<Arc<T>> (ordered, waits for slow watchers)
//!                                         ├─► event watchers (logging, your handlers)
//!                                         └─► sink task per sink: SinkLogic ─► KeyedWriter ─► EventSink
//! ```
//!
//! What differs between core/v1 and events.k8s.io/v1 is the item type `T` (what a merge
//! means: [`Mergeable`]), the [`SinkLogic`] of a sink task (the correlator for core/v1,
//! series for events.k8s.io/v1) and what its writes carry ([`WriteSource`]: a whole event
//! for core/v1, a light occurrence for events.k8s.io/v1, whose event the write builds on its
//! own task). Everything else — bounds, back-pressure, retries, per-key
//! order, accounting and shutdown — is this module and [`writer`](super::writer).

use std::sync::Arc;
use std::sync::atomic::AtomicI64;
use std::time::Duration;

use herald_core::clock::{Clock, SystemClock};
use herald_core::watch::{
    Broadcaster, BroadcasterBuilder, Distribution, FullChannelBehavior, Watcher,
};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::broadcaster::WatchHandle;
use super::drop_log::DropLog;
use super::queue::{IncomingQueue, Mergeable};
use super::recorder::Intake;
use super::sink::EventSink;
use super::stats::{Metrics, SinkOutcome};
use super::writer::{KeyedWriter, RetryOptions, WriteSource};

/// The settings both broadcasters share — core/v1's
/// [`BroadcasterOptions::pipeline`](crate::record::BroadcasterOptions::pipeline) and
/// events.k8s.io/v1's
/// [`EventBroadcasterOptions::pipeline`](crate::events::EventBroadcasterOptions::pipeline):
/// the incoming queue, the fan-out to watchers, how sinks write, shutdown and the clock.
///
/// `Default` gives client-go's limits, the same in `tools/record` and `tools/events`
/// (queues of 1000, 12 attempts per write), and Herald's own where client-go has none (write
/// concurrency and pending bound, shutdown timeout).
///
/// ```
/// use herald_runtime::record::{BroadcasterOptions, PipelineOptions};
/// use herald_runtime::events::EventBroadcasterOptions;
///
/// let pipeline = PipelineOptions { queue_capacity: 5000, ..PipelineOptions::default() };
/// // The same settings for either recorder:
/// let core_v1 = BroadcasterOptions { pipeline: pipeline.clone(), ..Default::default() };
/// let events_v1 = EventBroadcasterOptions { pipeline, ..Default::default() };
/// assert_eq!(core_v1.pipeline.queue_capacity, events_v1.pipeline.queue_capacity);
/// ```
#[derive(Clone)]
pub struct PipelineOptions {
    /// Distinct occurrences the incoming queue holds (client-go: 1000). An occurrence
    /// identical to a queued one always merges into it (core/v1: its count grows;
    /// events.k8s.io/v1: its series counts it); at the bound a distinct one is dropped and
    /// counted (`dropped_queue_full`).
    pub queue_capacity: usize,
    /// Occurrences buffered per watcher (client-go: 1000). At the bound the fan-out waits for
    /// that watcher (and so, in turn, the incoming queue fills).
    pub watcher_queue: usize,
    /// How sinks retry failed writes (client-go: 12 attempts).
    pub retry: RetryOptions,
    /// Writes a sink runs at once, each for a different event (client-go: one at a time for
    /// core/v1, 8 workers for events.k8s.io/v1). Writes for one event are always sequential,
    /// so a create precedes the patches of the same event. `0` behaves as `1`.
    pub max_concurrent_writes: usize,
    /// Distinct events a sink may have writes pending for. At the bound the sink stops taking
    /// occurrences from its watcher until a write completes. `0` behaves as `1`.
    pub max_pending_writes: usize,
    /// How long `shutdown` waits for queued occurrences (and, for events.k8s.io/v1, every
    /// series' final count) to be written. Writes still pending then are abandoned and
    /// counted as `dropped_shutdown`.
    pub shutdown_timeout: Duration,
    /// The recorders' clock: event names and times (core/v1: first and last timestamps, the
    /// correlator reads [`CorrelatorOptions::clock`](crate::record::CorrelatorOptions::clock);
    /// events.k8s.io/v1: `eventTime`, series times and the series timers — client-go reads the
    /// real clock for all but the name) and the pacing of drop warnings.
    pub clock: Arc<dyn Clock>,
}

impl Default for PipelineOptions {
    fn default() -> Self {
        Self {
            queue_capacity: 1000,
            watcher_queue: 1000,
            retry: RetryOptions::default(),
            max_concurrent_writes: 8,
            max_pending_writes: 4096,
            shutdown_timeout: Duration::from_secs(10),
            clock: Arc::new(SystemClock),
        }
    }
}

impl std::fmt::Debug for PipelineOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PipelineOptions")
            .field("queue_capacity", &self.queue_capacity)
            .field("watcher_queue", &self.watcher_queue)
            .field("retry", &self.retry)
            .field("max_concurrent_writes", &self.max_concurrent_writes)
            .field("max_pending_writes", &self.max_pending_writes)
            .field("shutdown_timeout", &self.shutdown_timeout)
            .finish_non_exhaustive()
    }
}

/// Queue, fan-out, drop log, counters and tasks of one broadcaster.
pub(crate) struct Pipeline<T: Mergeable + Sync> {
    queue: Arc<IncomingQueue<T>>,
    fanout: Broadcaster<Arc<T>>,
    pub(crate) metrics: Metrics,
    /// Last nanosecond stamp used in an event name, shared by every recorder of a
    /// broadcaster.
    last_name_nanos: Arc<AtomicI64>,
    drop_log: Arc<DropLog>,
    tasks: TaskTracker,
    /// Cancelled at the shutdown deadline: abandon whatever is still pending.
    deadline: CancellationToken,
    shutdown_started: tokio::sync::Mutex<bool>,
    opts: PipelineOptions,
}

impl<T: Mergeable + Sync> Pipeline<T> {
    /// Starts the distributor task. Must be called inside a tokio runtime.
    pub(crate) fn new(opts: PipelineOptions, metrics: Metrics) -> Self {
        let queue = Arc::new(IncomingQueue::new(opts.queue_capacity));
        // The distributor task below already runs the fan-out off the recorder's threads, so
        // the broadcaster needs no thread of its own: in-caller distribution keeps delivery on
        // the tokio runtime (deterministic under paused time) and needs no extra OS thread.
        let fanout =
            BroadcasterBuilder::new(opts.watcher_queue, FullChannelBehavior::WaitIfChannelFull)
                .incoming_capacity(opts.watcher_queue.max(1))
                .distribution(Distribution::InCaller)
                .build();
        let p = Self {
            queue: queue.clone(),
            fanout: fanout.clone(),
            metrics,
            last_name_nanos: Arc::new(AtomicI64::new(0)),
            drop_log: Arc::new(DropLog::new(opts.clock.clone())),
            tasks: TaskTracker::new(),
            deadline: CancellationToken::new(),
            shutdown_started: tokio::sync::Mutex::new(false),
            opts,
        };
        p.tasks.spawn(distribute(queue, fanout));
        p
    }

    /// The recorder's side of this pipeline, reading the pipeline's clock.
    pub(crate) fn intake(&self) -> Intake<T> {
        Intake {
            last_name_nanos: self.last_name_nanos.clone(),
            drop_log: self.drop_log.clone(),
            queue: self.queue.clone(),
            metrics: self.metrics.clone(),
            clock: self.opts.clock.clone(),
        }
    }

    /// The options the pipeline was built with.
    pub(crate) fn options(&self) -> &PipelineOptions {
        &self.opts
    }

    /// Tasks started by this pipeline that are still running.
    pub(crate) fn running_tasks(&self) -> usize {
        self.tasks.len()
    }

    fn watch(&self) -> Option<Watcher<Arc<T>>> {
        match self.fanout.watch() {
            Ok(w) => Some(w),
            Err(e) => {
                tracing::error!(error = %e, "Unable to start event watcher (will not retry!)");
                None
            }
        }
    }

    /// Calls `handler` for every item recorded from now on, one at a time, in order.
    pub(crate) fn start_event_watcher(
        &self,
        mut handler: impl FnMut(&T) + Send + 'static,
    ) -> WatchHandle {
        let stop = CancellationToken::new();
        if let Some(mut watcher) = self.watch() {
            let stop = stop.clone();
            let deadline = self.deadline.clone();
            self.tasks.spawn(async move {
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
        WatchHandle::new(stop)
    }

    /// Starts a sink task: every item recorded from now on goes through the logic `logic`
    /// builds (given the sink's metrics label), whose writes go to `sink`. Its metrics are
    /// labelled `sink=name` (made unique with an index).
    pub(crate) fn start_sink<L>(
        &self,
        name: &str,
        sink: Arc<dyn EventSink<<L::Write as WriteSource>::Event>>,
        logic: impl FnOnce(&str) -> L,
    ) -> WatchHandle
    where
        L: SinkLogic<Item = T>,
    {
        let stop = CancellationToken::new();
        let Some(watcher) = self.watch() else {
            return WatchHandle::new(stop);
        };
        let counters = self.metrics.new_sink(name);
        let logic = logic(counters.name());
        let writer = KeyedWriter::new(
            sink,
            Arc::new(self.opts.retry.clone()),
            counters,
            self.deadline.clone(),
            self.opts.max_concurrent_writes,
            self.opts.max_pending_writes,
        );
        let task = SinkTask {
            logic,
            writer,
            watcher,
            stop: stop.clone(),
            deadline: self.deadline.clone(),
            timer_at: None,
            timer_stale: true,
        };
        self.tasks.spawn(task.run());
        WatchHandle::new(stop)
    }

    /// Stops accepting items, delivers everything queued to every watcher, lets sinks write
    /// what they hold for up to the shutdown timeout, then stops every task. Idempotent;
    /// concurrent callers all return once it is done.
    pub(crate) async fn shutdown(&self) {
        let mut started = self.shutdown_started.lock().await;
        if *started {
            return;
        }
        *started = true;
        self.queue.close();
        self.tasks.close();
        let timeout = self.opts.shutdown_timeout;
        if tokio::time::timeout(timeout, self.tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                ?timeout,
                "event broadcaster shutdown deadline passed; abandoning unwritten events"
            );
            self.deadline.cancel();
            self.tasks.wait().await;
        }
    }
}

/// Moves items from the incoming queue into the fan-out, then shuts the fan-out down once
/// the queue is closed and drained.
async fn distribute<T: Mergeable + Sync>(
    queue: Arc<IncomingQueue<T>>,
    fanout: Broadcaster<Arc<T>>,
) {
    while let Some(event) = queue.pop().await {
        if fanout.action(Arc::new(event)).await.is_err() {
            break;
        }
    }
    fanout.shutdown().await;
}

/// What a sink task does with the items it receives: the part of a sink that differs between
/// the two recorders. The task calls it from one tokio task, one call at a time.
pub(crate) trait SinkLogic: Send + 'static {
    /// What the fan-out delivers.
    type Item: Mergeable + Sync + Clone;
    /// What the writer's writes carry (and so which event type they send).
    type Write: WriteSource;

    /// One delivered item (the task has counted it as delivered), as the fan-out shares it
    /// with every watcher: a logic that keeps or hands on the item keeps the `Arc` (no copy),
    /// one that needs it owned takes it with `Arc::unwrap_or_clone` (no copy when this sink
    /// is its last holder). Submits the writes it needs and settles outcomes that need no
    /// write. Returns true when the next timer ([`next_timer_in`](Self::next_timer_in)) may
    /// have moved.
    fn handle(&mut self, item: Arc<Self::Item>, writer: &mut KeyedWriter<Self::Write>) -> bool;

    /// A write completed and the server stored `stored`.
    fn written(&mut self, stored: &<Self::Write as WriteSource>::Event);

    /// How long until [`on_timer`](Self::on_timer) is due; `None` when nothing is pending.
    fn next_timer_in(&self) -> Option<Duration>;

    /// The timer fired: submit the writes that are due (within their budget).
    fn on_timer(&mut self, writer: &mut KeyedWriter<Self::Write>);

    /// The input has ended and every write is done: submit the last writes (counts still
    /// held, whatever the budget). Returns false when there was nothing left to write.
    fn drain(&mut self, writer: &mut KeyedWriter<Self::Write>) -> bool;

    /// The task is abandoned (stopped or past the shutdown deadline): forget everything held
    /// and return how many delivered items were held without a write (they are settled as
    /// dropped at shutdown).
    fn forget(&mut self) -> u64;
}

struct SinkTask<L: SinkLogic> {
    logic: L,
    writer: KeyedWriter<L::Write>,
    watcher: Watcher<Arc<L::Item>>,
    stop: CancellationToken,
    deadline: CancellationToken,
    /// When the logic's timer is next due (tokio time). Recomputed when it can have moved; a
    /// deadline that proves early just takes nothing and is recomputed.
    timer_at: Option<tokio::time::Instant>,
    timer_stale: bool,
}

async fn sleep_until_or_never(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

impl<L: SinkLogic> SinkTask<L> {
    async fn run(mut self) {
        let mut input_open = true;
        loop {
            if !input_open && self.writer.is_idle() {
                // The last writes are done: write what is still held, once, ignoring the
                // budget (the process is going away).
                if !self.logic.drain(&mut self.writer) {
                    break;
                }
                continue;
            }
            if self.timer_stale {
                self.timer_at = self
                    .logic
                    .next_timer_in()
                    .map(|d| tokio::time::Instant::now() + d);
                self.timer_stale = false;
            }
            let timer_at = self.timer_at;
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
                        self.logic.written(stored);
                    }
                }
                item = self.watcher.recv(), if input_open && !self.writer.is_full() => {
                    match item {
                        Some(item) => {
                            self.writer.counters().delivered();
                            if self.logic.handle(item, &mut self.writer) {
                                self.timer_stale = true;
                            }
                        }
                        None => input_open = false,
                    }
                }
                _ = sleep_until_or_never(timer_at), if input_open && timer_at.is_some() => {
                    self.timer_stale = true;
                    self.logic.on_timer(&mut self.writer);
                }
            }
        }
        self.watcher.stop();
    }

    /// Gives up on every write in flight and everything still held: settled as dropped at
    /// shutdown.
    async fn abandon(&mut self) {
        self.writer.abandon().await;
        let held = self.logic.forget();
        self.writer
            .counters()
            .outcome(SinkOutcome::DroppedShutdown, held);
    }
}
