//! Series bookkeeping counters of the events.k8s.io/v1 sinks (`herald_events_series_*`).
//!
//! The accounting of occurrences (emitted, merged, dropped, and one outcome per delivered
//! occurrence per sink) is the shared [`Metrics`](crate::record::Metrics) under the prefix
//! `herald_events`; these counters say what the series logic did on top of it.

use std::sync::{Arc, Mutex};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SinkLabels {
    sink: String,
}

/// A snapshot of one sink's series bookkeeping ([`SeriesMetrics::snapshot`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SeriesStats {
    /// The sink's label (the same as in [`SinkStats::name`](crate::record::SinkStats::name)).
    pub sink: String,
    /// Series started (a second isomorphic occurrence, or a first one the queue had merged).
    pub started: u64,
    /// Patches sent by heartbeats.
    pub heartbeat_writes: u64,
    /// Series finished after [`SeriesOptions::finish`](super::SeriesOptions::finish)'s
    /// `quiet` without an occurrence.
    pub finished: u64,
    /// Cache entries (series or single events) finished early at the cache bound.
    pub evicted: u64,
}

/// The series counters of every sink of one broadcaster. Cheap to clone (shared handles).
#[derive(Clone, Debug, Default)]
pub struct SeriesMetrics {
    started: Family<SinkLabels, Counter>,
    heartbeat_writes: Family<SinkLabels, Counter>,
    finished: Family<SinkLabels, Counter>,
    evicted: Family<SinkLabels, Counter>,
    sinks: Arc<Mutex<Vec<(String, SeriesCounters)>>>,
}

/// One sink's series counters.
#[derive(Clone, Debug)]
pub(crate) struct SeriesCounters {
    pub started: Counter,
    pub heartbeat_writes: Counter,
    pub finished: Counter,
    pub evicted: Counter,
}

impl SeriesMetrics {
    /// Registers the counters as `herald_events_series_{started,heartbeat_writes,finished,evicted}`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "herald_events_series_started",
            "Series started per sink (a second isomorphic occurrence)",
            self.started.clone(),
        );
        registry.register(
            "herald_events_series_heartbeat_writes",
            "Series patches sent by heartbeats per sink",
            self.heartbeat_writes.clone(),
        );
        registry.register(
            "herald_events_series_finished",
            "Series finished after their idle time per sink",
            self.finished.clone(),
        );
        registry.register(
            "herald_events_series_evicted",
            "Series cache entries finished early at the cache bound per sink",
            self.evicted.clone(),
        );
    }

    /// Counters for the sink labelled `sink` (the label its [`Metrics`](crate::record::Metrics)
    /// gave it).
    pub(crate) fn new_sink(&self, sink: &str) -> SeriesCounters {
        let l = SinkLabels {
            sink: sink.to_string(),
        };
        let c = SeriesCounters {
            started: self.started.get_or_create(&l).clone(),
            heartbeat_writes: self.heartbeat_writes.get_or_create(&l).clone(),
            finished: self.finished.get_or_create(&l).clone(),
            evicted: self.evicted.get_or_create(&l).clone(),
        };
        self.sinks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((sink.to_string(), c.clone()));
        c
    }

    /// One snapshot per sink, in the order the sinks were started.
    pub fn snapshot(&self) -> Vec<SeriesStats> {
        self.sinks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(sink, c)| SeriesStats {
                sink: sink.clone(),
                started: c.started.get(),
                heartbeat_writes: c.heartbeat_writes.get(),
                finished: c.finished.get(),
                evicted: c.evicted.get(),
            })
            .collect()
    }
}
