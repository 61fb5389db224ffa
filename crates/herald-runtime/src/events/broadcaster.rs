//! [`EventBroadcaster`] for events.k8s.io/v1: the shared pipeline with series logic in its
//! sinks.

use std::sync::Arc;

use k8s_openapi::api::events::v1::Event;
use prometheus_client::registry::Registry;

use super::event::{Occurrence, Reporter};
use super::recorder::{EventRecorder, RecorderInner, Target};
use super::series::{SeriesLogic, SeriesOptions};
use super::stats::{SeriesMetrics, SeriesStats};
use crate::record::pipeline::Pipeline;
use crate::record::sink::EventSink;
use crate::record::{Metrics, PipelineOptions, RecordStats, WatchHandle};

/// Settings of an events.k8s.io/v1 [`EventBroadcaster`]. `Default` gives client-go's limits
/// and timing plus Herald's improvements (storm merging, bounded series, exact counts,
/// concurrent ordered writes).
#[derive(Clone, Debug, Default)]
pub struct EventBroadcasterOptions {
    /// Queue, fan-out, writes, shutdown and clock: the settings shared with the core/v1
    /// broadcaster (see [`PipelineOptions`]). Here the clock also drives `eventTime`, series
    /// times and the series timers.
    pub pipeline: PipelineOptions,
    /// Series settings; every sink keeps its own series cache built from them.
    pub series: SeriesOptions,
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
            .field("pipeline", self.inner.pipeline.options())
            .field("series", &self.inner.series_options)
            .finish_non_exhaustive()
    }
}

struct Inner {
    series_options: SeriesOptions,
    pipeline: Pipeline<Occurrence>,
    series: SeriesMetrics,
}

impl EventBroadcaster {
    /// A broadcaster with `opts`; starts its distributor task.
    pub fn new(opts: EventBroadcasterOptions) -> Self {
        let pipeline = Pipeline::new(opts.pipeline, Metrics::with_prefix("herald_events"));
        Self {
            inner: Arc::new(Inner {
                series_options: opts.series,
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
            target: Target::Pipeline(self.inner.pipeline.intake()),
            reporter: Arc::new(Reporter {
                controller: reporting_controller.into(),
                instance: reporting_instance.into(),
            }),
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
    /// (occurrences the queue merged are seen once), with the event of the occurrence
    /// (without a series; built for the watcher). After shutdown this returns a handle to a
    /// watcher that never runs.
    pub fn start_event_watcher(
        &self,
        mut handler: impl FnMut(&Event) + Send + 'static,
    ) -> WatchHandle {
        self.inner
            .pipeline
            .start_event_watcher(move |o: &Occurrence| handler(&o.to_event()))
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
        let inner = &*self.inner;
        inner.pipeline.start_sink(name, Arc::new(sink), |label| {
            SeriesLogic::new(
                inner.series_options.clone(),
                inner.pipeline.options().clock.clone(),
                inner.series.new_sink(label),
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
