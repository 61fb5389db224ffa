//! Prometheus metrics for work queues, with client-go's metric names and semantics so that
//! existing dashboards keep working.
//!
//! Metrics are off unless a queue is built with [`WorkQueueMetrics`]; an unmetered queue
//! never reads a clock on `add`, `get` or `done`.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// The label every work-queue metric carries: the queue's name.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueLabel {
    name: String,
}

type FloatGauge = Gauge<f64, AtomicU64>;

fn duration_histogram() -> Histogram {
    // client-go: ExponentialBuckets(10e-7, 10, 10), i.e. 1 µs .. 1000 s. Written out so the
    // bounds print exactly (repeated multiplication gives 0.000009999999999999999).
    Histogram::new([1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0, 1000.0])
}

/// The work-queue metric families, registered once in a [`Registry`] and shared by any
/// number of queues (each queue's series carry its `name` label).
///
/// Exposed names (as client-go / component-base): `workqueue_depth`, `workqueue_adds_total`,
/// `workqueue_queue_duration_seconds`, `workqueue_work_duration_seconds`,
/// `workqueue_unfinished_work_seconds`, `workqueue_longest_running_processor_seconds`,
/// `workqueue_retries_total`.
///
/// Bound: one series per metric per queue name; queues sharing a name share series.
#[derive(Clone, Debug)]
pub struct WorkQueueMetrics {
    depth: Family<QueueLabel, Gauge>,
    adds: Family<QueueLabel, Counter>,
    queue_duration: Family<QueueLabel, Histogram>,
    work_duration: Family<QueueLabel, Histogram>,
    unfinished_work: Family<QueueLabel, FloatGauge>,
    longest_running: Family<QueueLabel, FloatGauge>,
    retries: Family<QueueLabel, Counter>,
}

impl WorkQueueMetrics {
    /// Creates the families and registers them in `registry`. Call it once per registry and
    /// pass the result to every queue's constructor (registering twice would expose each
    /// family twice).
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self {
            depth: Family::default(),
            adds: Family::default(),
            queue_duration: Family::new_with_constructor(duration_histogram),
            work_duration: Family::new_with_constructor(duration_histogram),
            unfinished_work: Family::default(),
            longest_running: Family::default(),
            retries: Family::default(),
        };
        registry.register(
            "workqueue_depth",
            "Current depth of workqueue",
            metrics.depth.clone(),
        );
        registry.register(
            "workqueue_adds",
            "Total number of adds handled by workqueue",
            metrics.adds.clone(),
        );
        registry.register(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            metrics.queue_duration.clone(),
        );
        registry.register(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes",
            metrics.work_duration.clone(),
        );
        registry.register(
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been \
             observed by work_duration. Large values indicate stuck threads. One can deduce \
             the number of stuck threads by observing the rate at which this increases",
            metrics.unfinished_work.clone(),
        );
        registry.register(
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running",
            metrics.longest_running.clone(),
        );
        registry.register(
            "workqueue_retries",
            "Total number of retries handled by workqueue",
            metrics.retries.clone(),
        );
        metrics
    }

    /// The series of one queue. Creating them up front keeps the hot path free of the
    /// families' label lookups.
    pub(crate) fn for_queue(&self, name: &str) -> QueueMetrics {
        let label = QueueLabel {
            name: name.to_owned(),
        };
        QueueMetrics {
            depth: self.depth.get_or_create_owned(&label),
            adds: self.adds.get_or_create_owned(&label),
            queue_duration: self.queue_duration.get_or_create_owned(&label),
            work_duration: self.work_duration.get_or_create_owned(&label),
            unfinished_work: self.unfinished_work.get_or_create_owned(&label),
            longest_running: self.longest_running.get_or_create_owned(&label),
            retries: self.retries.get_or_create_owned(&label),
        }
    }
}

/// One queue's series.
#[derive(Debug)]
pub(crate) struct QueueMetrics {
    pub(crate) depth: Gauge,
    pub(crate) adds: Counter,
    pub(crate) queue_duration: Histogram,
    pub(crate) work_duration: Histogram,
    pub(crate) unfinished_work: FloatGauge,
    pub(crate) longest_running: FloatGauge,
    pub(crate) retries: Counter,
}
