//! Not API: entry points for this crate's criterion benches (`benches/series.rs`), which
//! cannot reach crate-private items. No stability promise; hidden from the docs.

use std::sync::Arc;

use herald_core::clock::Clock;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;

use super::event::{Occurrence, OccurrenceSpec, Reporter};
use super::series::{SeriesLogic, SeriesOptions, Step};
use super::stats::SeriesMetrics;
use crate::record::EventType;

/// The series decision of an events.k8s.io/v1 sink (key, cache, spam filter), without the
/// writer: what the sink task does with each occurrence before it hands a write on.
pub struct SeriesCorrelation {
    logic: SeriesLogic,
    reporter: Arc<Reporter>,
}

/// Makes occurrences as an [`EventRecorder`](super::EventRecorder) of a
/// [`SeriesCorrelation`]'s reporter makes them ([`SeriesCorrelation::recorder`]).
#[derive(Debug, Clone)]
pub struct OccurrenceMaker {
    reporter: Arc<Reporter>,
}

/// One occurrence as an [`EventRecorder`](super::EventRecorder) hands it to the pipeline
/// (made by [`OccurrenceMaker::occurrence`], outside a bench's measured time).
#[derive(Debug, Clone)]
pub struct RecordedOccurrence(Occurrence);

/// What [`SeriesCorrelation::observe`] decided.
#[derive(Debug, Clone, PartialEq)]
pub enum SeriesDecision {
    /// A create of a new event or the patch that starts a series: the event the write
    /// sends (built by the step from the occurrence; returned, as `EventCorrelator::correlate`
    /// returns its event, so that a bench drops it outside the measured time, as the sink
    /// task hands it to the writer).
    Write(Arc<Event>),
    /// Counted in memory for a later write (the occurrence was freed in the step).
    Counted,
    /// Refused by the spam filter.
    Skipped,
}

impl SeriesCorrelation {
    /// A series cache with `options`, reading time from `clock` (heartbeats and finishing
    /// are timer work the benches leave out), for a recorder reporting as
    /// `reporting_controller` and `reporting_instance`.
    pub fn new(
        options: SeriesOptions,
        clock: Arc<dyn Clock>,
        reporting_controller: &str,
        reporting_instance: &str,
    ) -> Self {
        let counters = SeriesMetrics::default().new_sink("bench");
        Self {
            logic: SeriesLogic::new(options, clock, counters),
            reporter: Arc::new(Reporter {
                controller: reporting_controller.to_string(),
                instance: reporting_instance.to_string(),
            }),
        }
    }

    /// What makes this correlation's occurrences (its reporter's recorder).
    pub fn recorder(&self) -> OccurrenceMaker {
        OccurrenceMaker {
            reporter: self.reporter.clone(),
        }
    }

    /// Runs one occurrence through the series decision. The final write of an entry evicted
    /// at the cache bound is dropped.
    pub fn observe(&mut self, occurrence: RecordedOccurrence) -> SeriesDecision {
        let observed = self.logic.observe(occurrence.0);
        match observed.step {
            Step::Write(w) => SeriesDecision::Write(w.event),
            Step::Counted => SeriesDecision::Counted,
            Step::Skipped => SeriesDecision::Skipped,
        }
    }
}

impl OccurrenceMaker {
    /// The occurrence the recorder makes of `event_for_ref(regarding, None, type_, reason,
    /// action, note)` at `time` (which also stamps its name).
    pub fn occurrence(
        &self,
        regarding: &ObjectReference,
        type_: EventType,
        reason: &str,
        action: &str,
        note: &str,
        time: Timestamp,
    ) -> RecordedOccurrence {
        let spec = OccurrenceSpec {
            regarding,
            related: None,
            type_,
            reason,
            action,
        };
        RecordedOccurrence(Occurrence::new(
            spec,
            format_args!("{note}"),
            None,
            self.reporter.clone(),
            time,
            time.as_nanosecond(),
        ))
    }
}
