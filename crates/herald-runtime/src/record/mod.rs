//! Recording Kubernetes events with client-go's semantics — and without its silent losses.
//!
//! A [`Recorder`] turns "this happened to that object" into a core/v1 `Event` and queues it
//! without ever blocking. An [`EventBroadcaster`] fans queued events out to watchers: a
//! logging watcher, your own handlers, and sinks. Each sink runs an [`EventCorrelator`]
//! (aggregate similar events → count identical ones → rate-limit spam, exactly as client-go)
//! and writes the result through an [`EventSink`] — [`KubeSink`] for any Kubernetes API
//! server, [`MemorySink`] for tests — with retries, strict per-event ordering and bounded
//! concurrency.
//!
//! Beyond client-go, on by default:
//! - **Storm-proof queue**: an event identical to one still queued is merged into it (its
//!   count grows), so a storm of one event takes one queue slot; only a distinct event that
//!   finds the queue full is dropped (and counted).
//! - **Exact counts**: occurrences the spam filter holds back are carried into the next write,
//!   and once a storm stops each event they belong to is written once more with its final
//!   count, within minutes and paced by a budget of its own
//!   ([`CorrelatorOptions::trailing_flush`], [`TrailingFlushOptions`]). An event whose first
//!   occurrences were held back is created by that write, never patched before it exists.
//! - **Accounting**: every event ends in exactly one counted outcome; see [`RecordStats`] and
//!   the Prometheus counters in [`Metrics`].
//!
//! ```
//! use herald_runtime::record::*;
//! use k8s_openapi::api::core::v1::Pod;
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! let broadcaster = EventBroadcaster::new(BroadcasterOptions::default());
//! let recorder = broadcaster.new_recorder(EventSource::new("my-controller", "node-1"));
//! broadcaster.start_logging();
//! let sink = MemorySink::new(); // KubeSink::new(client) for a real API server
//! broadcaster.start_recording_to_sink(sink.clone());
//!
//! let mut pod = Pod::default();
//! pod.metadata.name = Some("web-1".into());
//! pod.metadata.namespace = Some("prod".into());
//! for _ in 0..3 {
//!     recorder.event(&pod, EventType::Warning, "BackOff", "Back-off restarting failed container");
//! }
//! broadcaster.shutdown().await; // flushes what is queued
//!
//! let stored = sink.events();
//! assert_eq!(stored.len(), 1);
//! assert_eq!(stored[0].count, Some(3));
//! assert_eq!(broadcaster.stats().unaccounted(0), 0);
//! # }
//! ```

mod broadcaster;
pub mod correlator;
pub(crate) mod drop_log;
pub(crate) mod event;
pub(crate) mod pipeline;
pub(crate) mod queue;
pub(crate) mod recorder;
pub mod sink;
pub(crate) mod stats;
pub(crate) mod writer;

pub use broadcaster::{BroadcasterOptions, EventBroadcaster, WatchHandle};
pub use correlator::{
    COMBINED_MESSAGE_PREFIX, CacheSizes, CorrelateError, CorrelateResult, CorrelatorOptions,
    CorrelatorStats, EventCorrelator, KeyBuilder, KeyFunc, MAX_SIMILAR_MESSAGE_BYTES, MessageFunc,
    SIMILAR_MESSAGES_ANNOTATION, SpamKeyFunc, TrailingFlushOptions,
};
pub use event::{EventSource, EventType, object_reference};
pub use pipeline::PipelineOptions;
pub use recorder::Recorder;
pub use sink::{
    EventSink, EventsApi, KubeSink, MemorySink, RetryClass, SinkCall, SinkError, SinkOp,
};
pub use stats::{Metrics, RecordStats, SinkOutcome, SinkStats};
pub use writer::RetryOptions;
