//! Not API: entry points for this crate's criterion benches (`benches/series.rs`), which
//! cannot reach crate-private items. No stability promise; hidden from the docs.

use std::sync::Arc;

use herald_core::clock::Clock;
use k8s_openapi::api::events::v1::Event;

use super::event::Occurrence;
use super::series::{SeriesLogic, SeriesOptions, Step};
use super::stats::SeriesMetrics;

/// The series decision of an events.k8s.io/v1 sink (key, cache, spam filter), without the
/// writer: what the sink task does with each occurrence before it hands a write on.
pub struct SeriesCorrelation {
    logic: SeriesLogic,
}

/// What [`SeriesCorrelation::observe`] decided.
#[derive(Debug, Clone, PartialEq)]
pub enum SeriesDecision {
    /// A create of a new event or the patch that starts a series: the event the write
    /// sends (returned, as `EventCorrelator::correlate` returns its event, so that a
    /// bench drops it outside the measured time).
    Write(Arc<Event>),
    /// Counted in memory for a later write.
    Counted,
    /// Refused by the spam filter.
    Skipped,
}

impl SeriesCorrelation {
    /// A series cache with `options`, reading time from `clock` (heartbeats and finishing
    /// are timer work the benches leave out).
    pub fn new(options: SeriesOptions, clock: Arc<dyn Clock>) -> Self {
        let counters = SeriesMetrics::default().new_sink("bench");
        Self {
            logic: SeriesLogic::new(options, clock, counters),
        }
    }

    /// Runs one occurrence of `event` (its `eventTime` is the observation time) through the
    /// series decision. The final write of an entry evicted at the cache bound is dropped.
    pub fn observe(&mut self, event: Event) -> SeriesDecision {
        let observed = self.logic.observe(Occurrence::new(event));
        match observed.step {
            Step::Write(w) => SeriesDecision::Write(w.event),
            Step::Counted => SeriesDecision::Counted,
            Step::Skipped => SeriesDecision::Skipped,
        }
    }
}
