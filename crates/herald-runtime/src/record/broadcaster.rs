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
//! own tasks, at most `max_concurrent_writes` at once, ordered per event. The machinery is
//! shared with the events.k8s.io/v1 recorder (the `pipeline` module); what is
//! core/v1's own is the correlator a sink task runs.

use std::sync::Arc;
use std::time::Duration;

use herald_core::clock::{Clock, elapsed};
use k8s_openapi::api::core::v1::Event;
use tokio_util::sync::CancellationToken;

use super::correlator::{CorrelateResult, CorrelatorOptions, EventCorrelator};
use super::event::{EventSource, object_key};
use super::pipeline::{Pipeline, PipelineOptions, SinkLogic};
use super::recorder::{Recorder, RecorderInner};
use super::sink::EventSink;
use super::stats::{Metrics, RecordStats, SinkOutcome};
use super::writer::{KeyedWriter, Tally, Write};

/// Settings of an [`EventBroadcaster`]. `Default` gives client-go's limits plus Herald's
/// improvements (storm merging, exact counts, concurrent ordered writes).
#[derive(Clone, Debug, Default)]
pub struct BroadcasterOptions {
    /// Queue, fan-out, writes, shutdown and clock: the settings shared with the
    /// events.k8s.io/v1 broadcaster (see [`PipelineOptions`]).
    pub pipeline: PipelineOptions,
    /// Correlator settings; every sink gets a fresh correlator built from them.
    pub correlator: CorrelatorOptions,
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
    correlator: CorrelatorOptions,
    pipeline: Pipeline<Event>,
}

/// Stops one watcher started by an [`EventBroadcaster`] (of either recorder); dropping it
/// does not stop it.
#[derive(Debug, Clone)]
pub struct WatchHandle {
    stop: CancellationToken,
}

impl WatchHandle {
    pub(crate) fn new(stop: CancellationToken) -> Self {
        Self { stop }
    }

    /// Stops the watcher: it receives nothing more. Idempotent. A sink stopped this way
    /// abandons its pending writes (counted as `dropped_shutdown`).
    pub fn stop(&self) {
        self.stop.cancel();
    }
}

impl EventBroadcaster {
    /// A broadcaster with `opts`; starts its distributor task.
    pub fn new(opts: BroadcasterOptions) -> Self {
        let pipeline = Pipeline::new(opts.pipeline, Metrics::default());
        Self {
            inner: Arc::new(Inner {
                correlator: opts.correlator,
                pipeline,
            }),
        }
    }

    /// A recorder stamping `source` on its events.
    pub fn new_recorder(&self, source: EventSource) -> Recorder {
        Recorder::new(RecorderInner {
            intake: self.inner.pipeline.intake(),
            source,
        })
    }

    /// The broadcaster's counters (register them with
    /// [`Metrics::register`](super::Metrics::register)).
    pub fn metrics(&self) -> &Metrics {
        &self.inner.pipeline.metrics
    }

    /// A snapshot of the accounting.
    pub fn stats(&self) -> RecordStats {
        self.inner.pipeline.metrics.snapshot()
    }

    /// Tasks started by this broadcaster that are still running (0 after `shutdown`).
    pub fn running_tasks(&self) -> usize {
        self.inner.pipeline.running_tasks()
    }

    /// Calls `handler` for every event recorded from now on, one at a time, in order.
    /// After shutdown this returns a handle to a watcher that never runs.
    pub fn start_event_watcher(&self, handler: impl FnMut(&Event) + Send + 'static) -> WatchHandle {
        self.inner.pipeline.start_event_watcher(handler)
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
        let correlator = &self.inner.correlator;
        self.inner
            .pipeline
            .start_sink(name, Arc::new(sink), |_| CorrelatorLogic {
                correlator: EventCorrelator::new(correlator.clone()),
                clock: correlator.clock.clone(),
            })
    }

    /// Stops accepting events, delivers everything queued to every watcher, lets sinks write
    /// what they hold (including counts the spam filter held back) for up to
    /// `shutdown_timeout`, then stops every task this broadcaster started. Idempotent;
    /// concurrent callers all return once it is done.
    pub async fn shutdown(&self) {
        self.inner.pipeline.shutdown().await;
    }
}

/// A core/v1 sink task's logic: client-go's correlator, plus trailing writes.
struct CorrelatorLogic {
    correlator: EventCorrelator,
    clock: Arc<dyn Clock>,
}

impl CorrelatorLogic {
    fn submit_trailing(writer: &mut KeyedWriter, f: CorrelateResult) {
        writer.counters().trailing_flush();
        let tally = Tally {
            carried: f.carried,
            ..Tally::default()
        };
        writer.submit(Write::for_event(f.event, f.patch, tally));
    }
}

impl SinkLogic for CorrelatorLogic {
    type Item = Event;
    type Write = Arc<Event>;

    fn handle(&mut self, event: Arc<Event>, writer: &mut KeyedWriter) -> bool {
        let counters = writer.counters();
        // The last watcher to see an event takes it without a copy.
        let result = match self.correlator.correlate(Arc::unwrap_or_clone(event)) {
            Ok(r) => r,
            Err(e) => {
                tracing::error!(error = %e, "unable to correlate event; dropping it");
                counters.outcome(SinkOutcome::Failed, 1);
                return false;
            }
        };
        counters.outcome(SinkOutcome::Skipped, result.settled_skips);
        if result.skip {
            // A new held-back count may be due before the current deadline.
            return true;
        }
        let tally = Tally {
            plain: u64::from(!result.aggregated),
            aggregated: u64::from(result.aggregated),
            carried: result.carried,
            series: 0,
        };
        writer.submit(Write::for_event(result.event, result.patch, tally));
        false
    }

    fn written(&mut self, stored: &Event) {
        self.correlator.update_state(stored);
    }

    fn next_timer_in(&self) -> Option<Duration> {
        self.correlator
            .next_flush_at()
            .map(|t| elapsed(self.clock.now(), t))
    }

    fn on_timer(&mut self, writer: &mut KeyedWriter) {
        // Taking flushes moves the next deadline; a deadline that proves early (tokens were
        // spent meanwhile) just takes nothing and is recomputed.
        for f in self.correlator.take_due_flushes() {
            Self::submit_trailing(writer, f);
        }
    }

    fn drain(&mut self, writer: &mut KeyedWriter) -> bool {
        let flushes = self.correlator.drain_flushes();
        let any = !flushes.is_empty();
        for f in flushes {
            Self::submit_trailing(writer, f);
        }
        any
    }

    fn forget(&mut self) -> u64 {
        self.correlator.forget_flushes()
    }
}
