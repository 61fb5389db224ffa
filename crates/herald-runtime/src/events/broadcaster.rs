//! [`EventBroadcaster`] for events.k8s.io/v1: the shared pipeline with series logic in its
//! sinks.

use std::sync::Arc;
use std::time::Duration;

use herald_core::clock::{Clock, SystemClock};
use k8s_openapi::api::events::v1::Event;
use prometheus_client::registry::Registry;

use super::event::Occurrence;
use super::recorder::{EventRecorder, RecorderInner};
use super::series::{SeriesLogic, SeriesOptions};
use super::stats::{SeriesMetrics, SeriesStats};
use crate::record::pipeline::{Pipeline, PipelineOptions, WriterOptions};
use crate::record::sink::EventSink;
use crate::record::{Metrics, RecordStats, RetryOptions, WatchHandle};

/// Settings of an events.k8s.io/v1 [`EventBroadcaster`]. `Default` gives client-go's limits
/// and timing plus Herald's improvements (storm merging, bounded series, exact counts,
/// concurrent ordered writes).
#[derive(Clone)]
pub struct EventBroadcasterOptions {
    /// Distinct occurrences the incoming queue holds (client-go: 1000). An occurrence
    /// identical to a queued one always merges into it (its series counts it); at the bound
    /// a distinct one is dropped and counted.
    pub queue_capacity: usize,
    /// Occurrences buffered per watcher (client-go: 1000). At the bound the fan-out waits for
    /// that watcher (and so, in turn, the incoming queue fills).
    pub watcher_queue: usize,
    /// Series settings; every sink keeps its own series cache built from them.
    pub series: SeriesOptions,
    /// How sinks retry failed writes (client-go: 12 attempts).
    pub retry: RetryOptions,
    /// Writes a sink runs at once, each for a different event (client-go: 8 workers; writes
    /// for one event are always sequential here, so a create precedes its series patch).
    pub max_concurrent_writes: usize,
    /// Distinct events a sink may have writes pending for. At the bound the sink stops taking
    /// occurrences from its watcher until a write completes.
    pub max_pending_writes: usize,
    /// How long [`EventBroadcaster::shutdown`] waits for queued events and final series
    /// counts to be written. Writes still pending then are abandoned and counted as
    /// `dropped_shutdown`.
    pub shutdown_timeout: Duration,
    /// The clock of event names, `eventTime`, series times and the series timers (client-go
    /// reads the real clock for all but the name; here every one is injectable).
    pub clock: Arc<dyn Clock>,
}

impl Default for EventBroadcasterOptions {
    fn default() -> Self {
        Self {
            queue_capacity: 1000,
            watcher_queue: 1000,
            series: SeriesOptions::default(),
            retry: RetryOptions::default(),
            max_concurrent_writes: 8,
            max_pending_writes: 4096,
            shutdown_timeout: Duration::from_secs(10),
            clock: Arc::new(SystemClock),
        }
    }
}

impl std::fmt::Debug for EventBroadcasterOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventBroadcasterOptions")
            .field("queue_capacity", &self.queue_capacity)
            .field("watcher_queue", &self.watcher_queue)
            .field("series", &self.series)
            .field("retry", &self.retry)
            .field("max_concurrent_writes", &self.max_concurrent_writes)
            .field("max_pending_writes", &self.max_pending_writes)
            .field("shutdown_timeout", &self.shutdown_timeout)
            .finish_non_exhaustive()
    }
}

/// Fans events.k8s.io/v1 events from its [`EventRecorder`]s out to watchers and sinks
/// (client-go's `tools/events.EventBroadcaster`). Cheap to clone.
///
/// The pipeline is the core/v1 broadcaster's ([`crate::record::EventBroadcaster`]): the same
/// merging queue, ordered fan-out, keyed writer with retries, accounting (counters under
/// `herald_events_*`) and shutdown. Each sink keeps series instead of running the core/v1
/// correlator: see [`SeriesOptions`].
///
/// Must be created inside a tokio runtime. Call [`shutdown`](Self::shutdown) before exiting:
/// it writes what is queued and every series' final count within `shutdown_timeout`.
#[derive(Clone)]
pub struct EventBroadcaster {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for EventBroadcaster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventBroadcaster")
            .field("options", &self.inner.opts)
            .finish_non_exhaustive()
    }
}

struct Inner {
    opts: EventBroadcasterOptions,
    pipeline: Pipeline<Occurrence>,
    series: SeriesMetrics,
}

impl EventBroadcaster {
    /// A broadcaster with `opts`; starts its distributor task.
    pub fn new(opts: EventBroadcasterOptions) -> Self {
        let pipeline = Pipeline::new(
            PipelineOptions {
                queue_capacity: opts.queue_capacity,
                watcher_queue: opts.watcher_queue,
                shutdown_timeout: opts.shutdown_timeout,
                clock: opts.clock.clone(),
            },
            Metrics::with_prefix("herald_events"),
        );
        Self {
            inner: Arc::new(Inner {
                opts,
                pipeline,
                series: SeriesMetrics::default(),
            }),
        }
    }

    /// A recorder stamping `reporting_controller` (e.g. `my-controller`) and
    /// `reporting_instance` (e.g. the pod name; client-go uses `<controller>-<hostname>`) on
    /// its events. The server rejects either when longer than 128 characters.
    pub fn new_recorder(
        &self,
        reporting_controller: impl Into<String>,
        reporting_instance: impl Into<String>,
    ) -> EventRecorder {
        EventRecorder::new(RecorderInner {
            intake: self.inner.pipeline.intake(self.inner.opts.clock.clone()),
            reporting_controller: reporting_controller.into(),
            reporting_instance: reporting_instance.into(),
        })
    }

    /// The accounting counters (`herald_events_*`; every occurrence ends in one outcome).
    pub fn metrics(&self) -> &Metrics {
        &self.inner.pipeline.metrics
    }

    /// The series counters (`herald_events_series_*`).
    pub fn series_metrics(&self) -> &SeriesMetrics {
        &self.inner.series
    }

    /// Registers both [`metrics`](Self::metrics) and [`series_metrics`](Self::series_metrics).
    pub fn register_metrics(&self, registry: &mut Registry) {
        self.metrics().register(registry);
        self.inner.series.register(registry);
    }

    /// A snapshot of the accounting. For a sink recording from the start,
    /// [`RecordStats::unaccounted`] is zero after shutdown: every occurrence was merged,
    /// dropped (counted by cause), or got one outcome at the sink (`created`, `patched`,
    /// `series`, `failed`, `dropped_shutdown`).
    pub fn stats(&self) -> RecordStats {
        self.metrics().snapshot()
    }

    /// A snapshot of each sink's series bookkeeping.
    pub fn series_stats(&self) -> Vec<SeriesStats> {
        self.inner.series.snapshot()
    }

    /// Tasks started by this broadcaster that are still running (0 after `shutdown`).
    pub fn running_tasks(&self) -> usize {
        self.inner.pipeline.running_tasks()
    }

    /// Calls `handler` for every occurrence recorded from now on, one at a time, in order
    /// (occurrences the queue merged are seen once). After shutdown this returns a handle to a
    /// watcher that never runs.
    pub fn start_event_watcher(
        &self,
        mut handler: impl FnMut(&Event) + Send + 'static,
    ) -> WatchHandle {
        self.inner
            .pipeline
            .start_event_watcher(move |o: &Occurrence| handler(&o.event))
    }

    /// Logs every event through `tracing` (target `herald::event`, level INFO) with the
    /// fields client-go's `StartLogging` uses: object, kind, apiVersion, type, reason, action,
    /// note.
    pub fn start_logging(&self) -> WatchHandle {
        self.start_event_watcher(|e| {
            let r = e.regarding.clone().unwrap_or_default();
            tracing::info!(
                target: "herald::event",
                object = %crate::record::event::object_key(&r),
                kind = %r.kind.as_deref().unwrap_or(""),
                apiVersion = %r.api_version.as_deref().unwrap_or(""),
                r#type = %e.type_.as_deref().unwrap_or(""),
                reason = %e.reason.as_deref().unwrap_or(""),
                action = %e.action.as_deref().unwrap_or(""),
                note = %e.note.as_deref().unwrap_or(""),
                "Event occurred"
            );
        })
    }

    /// Keeps series of every occurrence recorded from now on and writes them to `sink`
    /// ([`KubeEventsSink`](super::KubeEventsSink) for an API server,
    /// [`MemorySink`](super::MemorySink) for tests). Its metrics are labelled `sink="sink"`.
    pub fn start_recording_to_sink(&self, sink: impl EventSink<Event>) -> WatchHandle {
        self.start_recording_to_named_sink("sink", sink)
    }

    /// As [`start_recording_to_sink`](Self::start_recording_to_sink), labelling the sink's
    /// metrics with `name`.
    pub fn start_recording_to_named_sink(
        &self,
        name: &str,
        sink: impl EventSink<Event>,
    ) -> WatchHandle {
        let opts = &self.inner.opts;
        let writer = WriterOptions {
            retry: opts.retry.clone(),
            max_concurrent_writes: opts.max_concurrent_writes,
            max_pending_writes: opts.max_pending_writes,
        };
        let series = &self.inner.series;
        self.inner
            .pipeline
            .start_sink(name, Arc::new(sink), &writer, |label| {
                SeriesLogic::new(
                    opts.series.clone(),
                    opts.clock.clone(),
                    series.new_sink(label),
                )
            })
    }

    /// Stops accepting events, delivers everything queued to every watcher, lets sinks write
    /// what they hold — every series' final count included — for up to `shutdown_timeout`,
    /// then stops every task this broadcaster started. Idempotent.
    pub async fn shutdown(&self) {
        self.inner.pipeline.shutdown().await;
    }
}
