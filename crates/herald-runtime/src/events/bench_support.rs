//! Not API: entry points for this crate's criterion benches (`benches/series.rs`), which
//! cannot reach crate-private items. No stability promise; hidden from the docs.

use std::sync::Arc;

use herald_core::clock::Clock;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;

use super::event::{Occurrence, OccurrenceSpec, PendingEvent, Reporter};
use super::series::{SeriesLogic, SeriesOptions, Step};
use super::stats::SeriesMetrics;
use crate::record::EventType;
use crate::record::writer::{Write, WriteSource};

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

/// One occurrence as the pipeline's fan-out delivers it to a sink (made by
/// [`OccurrenceMaker::occurrence`], outside a bench's measured time): the recorder's light
/// occurrence in the `Arc` the distributor puts it in.
///
/// `clone` copies the occurrence into a new `Arc`, as a recorder recording it again would:
/// a step that only counts it frees it, as a sink that is its last holder does.
#[derive(Debug)]
pub struct RecordedOccurrence(Arc<Occurrence>);

impl Clone for RecordedOccurrence {
    fn clone(&self) -> Self {
        Self(Arc::new((*self.0).clone()))
    }
}

/// A write the step handed on, as the writer receives it: the occurrence whose event it
/// sends (shared with the series cache) and the series count, not yet an Event.
#[derive(Debug, Clone)]
pub struct PendingWrite(Write<PendingEvent>);

impl PendingWrite {
    /// The event the write sends, built as the writer builds it (on the write's task).
    pub fn event(&self) -> Event {
        self.0.source.event().into_owned()
    }
}

/// Two writes are equal when they send the same event the same way.
impl PartialEq for PendingWrite {
    fn eq(&self, other: &Self) -> bool {
        self.0.op == other.0.op && self.event() == other.event()
    }
}

/// What [`SeriesCorrelation::observe`] decided.
#[derive(Debug, Clone, PartialEq)]
pub enum SeriesDecision {
    /// A create of a new event or the patch that starts a series: the write handed to the
    /// writer, which builds the event it sends ([`PendingWrite::event`]). Returned, as
    /// `EventCorrelator::correlate` returns its event, so that a bench drops it outside the
    /// measured time.
    Write(PendingWrite),
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
            Step::Write(w) => SeriesDecision::Write(PendingWrite(w)),
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
        RecordedOccurrence(Arc::new(Occurrence::new(
            spec,
            format_args!("{note}"),
            None,
            self.reporter.clone(),
            time,
            time.as_nanosecond(),
        )))
    }
}
