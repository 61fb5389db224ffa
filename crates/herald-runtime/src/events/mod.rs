//! Recording events.k8s.io/v1 events with series — client-go's `tools/events`, with the
//! guarantees of [`record`](crate::record).
//!
//! An [`EventRecorder`] turns "this `action` on that object led to `reason`" into an
//! events.k8s.io/v1 `Event` and queues it without ever blocking. An [`EventBroadcaster`] fans
//! queued events out to watchers and sinks. Each sink groups isomorphic events (same type,
//! action, reason, reporting controller and instance, regarding and related objects — not the
//! note) into a series, as client-go does: the first occurrence is created, the second patches
//! `series: {count: 2, lastObservedTime}` onto it, later ones are counted in memory; a
//! heartbeat every 30 minutes re-patches open series, and a series idle for 6 minutes gets its
//! final count and is forgotten. A patch answered 404 becomes a create.
//!
//! Beyond client-go, on by default (the same pipeline as [`record`](crate::record)):
//! - **Exact counts**: a series' final count is written when it ends, when it is evicted and
//!   at shutdown, paced by a trailing-write budget ([`SeriesOptions::finish`]).
//! - **Bounded memory**: the series cache holds at most `finish.max_keys` entries (4096); at the
//!   bound the least recently observed one is finished early (client-go's map is unbounded).
//! - **Storm-proof queue**: an occurrence identical to one still queued merges into it.
//! - **Ordered, concurrent writes** with retries by error class (the create of an event always
//!   precedes its series patch).
//! - **Accounting**: every occurrence ends in exactly one counted outcome
//!   ([`EventBroadcaster::stats`], Prometheus counters `herald_events_*`), series bookkeeping in
//!   [`EventBroadcaster::series_stats`] (`herald_events_series_*`).
//!
//! The settings the two broadcasters share (queue, fan-out, writes, shutdown, clock) are one
//! type, [`PipelineOptions`]; [`EventBroadcasterOptions`] adds the [`SeriesOptions`]. For unit
//! tests of controller code, [`FakeRecorder`] makes an [`EventRecorder`] that writes each
//! event as a line of text to a channel (client-go's `FakeRecorder`).
//!
//! ```
//! use herald_runtime::events::*;
//! use k8s_openapi::api::core::v1::{Node, Pod};
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! let broadcaster = EventBroadcaster::new(EventBroadcasterOptions::default());
//! let sink = MemorySink::new(); // KubeEventsSink::new(client) for a real API server
//! broadcaster.start_recording_to_sink(sink.clone());
//! let recorder = broadcaster.new_recorder("my-controller", "my-controller-7d4b9-xk2lp");
//!
//! let mut pod = Pod::default();
//! pod.metadata.name = Some("web-1".into());
//! pod.metadata.namespace = Some("prod".into());
//! for i in 0..1000 {
//!     recorder.eventf(&pod, None::<&Node>, EventType::Warning, "FailedMount", "Mounting",
//!         format_args!("attempt {i}: volume not ready"));
//! }
//! broadcaster.shutdown().await; // writes the final count
//!
//! let stored = sink.events_v1();
//! assert_eq!(stored.len(), 1);
//! assert_eq!(stored[0].series.as_ref().unwrap().count, 1000);
//! assert_eq!(stored[0].note.as_deref(), Some("attempt 0: volume not ready")); // the first note
//! assert_eq!(broadcaster.stats().unaccounted(0), 0);
//! # }
//! ```

mod adapter;
#[doc(hidden)]
pub mod bench_support;
mod broadcaster;
mod event;
mod fake;
mod kube_compat;
mod recorder;
mod selector;
mod series;
mod stats;

pub use adapter::{AdaptedRecorder, EventBroadcasterAdapter, EventsApiChoice, serves_events_v1};
pub use broadcaster::{EventBroadcaster, EventBroadcasterOptions};
pub use fake::FakeRecorder;
pub use kube_compat::Recorder;
pub use recorder::EventRecorder;
pub use selector::{UnknownVersion, field_selector};
pub use series::{SeriesOptions, SpamFilterOptions};
pub use stats::{SeriesMetrics, SeriesStats};

pub use crate::record::sink::{EventSink, MemorySink, SinkError};
pub use crate::record::{
    EventType, Metrics, PipelineOptions, RecordStats, RetryOptions, SinkOutcome, SinkStats,
    TrailingFlushOptions, WatchHandle,
};

/// Writes events.k8s.io/v1 events to any Kubernetes API server through `kube::Client`
/// (`POST`/strategic-merge `PATCH` under `/apis/events.k8s.io/v1/namespaces/{ns}/events`).
///
/// The same type as [`record::KubeSink`](crate::record::KubeSink), which implements
/// [`EventSink`] for both Event types; this name says which API a sink of an
/// events.k8s.io/v1 [`EventBroadcaster`] writes.
pub type KubeEventsSink = crate::record::KubeSink;
