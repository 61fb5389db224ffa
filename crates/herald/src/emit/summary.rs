//! What `herald emit` reports: what the recording pipeline did with the occurrences and how
//! many API writes they cost, as text or as JSON with stable field names.

use std::fmt::Write as _;

use herald_runtime::record::RecordStats;
use serde::Serialize;

use crate::style::{Palette, Role};

/// The summary of one `herald emit` run.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Summary {
    /// `pod/web-1`.
    pub object: String,
    /// Namespace of the event.
    pub namespace: String,
    /// `Normal` or `Warning`.
    #[serde(rename = "type")]
    pub type_: String,
    /// The event's reason.
    pub reason: String,
    /// Occurrences asked for (`--repeat`).
    pub requested: u64,
    /// Occurrences handed to the recorder (fewer than requested after Ctrl-C).
    pub emitted: u64,
    /// Written by a create.
    pub created: u64,
    /// Written by a patch of an existing event (count increased).
    pub patched: u64,
    /// Folded into a "combined from similar events" event.
    pub aggregated: u64,
    /// Held back by the spam filter; carried in the count of a later write.
    pub skipped: u64,
    /// events.k8s.io only: counted into a series in memory, carried by a later series write.
    pub series: u64,
    /// Merged into an identical event still queued.
    pub merged: u64,
    /// Not written: invalid, queue full, or unwritten at the shutdown deadline.
    pub dropped: u64,
    /// Writes given up after retries.
    pub failed: u64,
    /// API calls made (creates + patches, each attempt).
    pub api_writes: u64,
    /// Create calls.
    pub creates: u64,
    /// Patch calls.
    pub patches: u64,
    /// Calls the server answered with an error.
    pub failed_writes: u64,
    /// Attempts that were retried.
    pub retries: u64,
    /// Occurrences neither written nor counted anywhere (always 0 unless there is a bug).
    pub unaccounted: i64,
    /// True when Ctrl-C stopped the run early.
    pub interrupted: bool,
}

/// The fixed part of a summary: what was emitted where.
pub struct What {
    /// `pod/web-1`.
    pub object: String,
    /// The event's namespace.
    pub namespace: String,
    /// `Normal` or `Warning`.
    pub type_: String,
    /// The reason.
    pub reason: String,
    /// `--repeat`.
    pub requested: u64,
}

impl Summary {
    /// Builds the summary from the broadcaster's accounting (taken after shutdown, so the
    /// numbers are final) for its one sink.
    pub fn new(what: What, stats: &RecordStats, interrupted: bool) -> Summary {
        let sink = stats.sinks.first().cloned().unwrap_or_default();
        Summary {
            object: what.object,
            namespace: what.namespace,
            type_: what.type_,
            reason: what.reason,
            requested: what.requested,
            emitted: stats.emitted,
            created: sink.created,
            patched: sink.patched,
            aggregated: sink.aggregated,
            skipped: sink.skipped,
            series: sink.series,
            merged: stats.merged,
            dropped: stats.dropped_invalid
                + stats.dropped_queue_full
                + stats.dropped_shutdown
                + sink.dropped_shutdown,
            failed: sink.failed,
            api_writes: sink.api_calls(),
            creates: sink.create_calls,
            patches: sink.patch_calls,
            failed_writes: sink.failed_calls,
            retries: sink.retries,
            unaccounted: i64::try_from(stats.unaccounted(0)).unwrap_or(i64::MAX),
            interrupted,
        }
    }

    /// Occurrences that did not reach the server.
    pub fn lost(&self) -> u64 {
        self.dropped + self.failed
    }

    /// The human-readable summary (three lines).
    pub fn render(&self, p: Palette) -> String {
        let mut s = String::new();
        let stopped = if self.interrupted {
            " (interrupted)"
        } else {
            ""
        };
        let _ = writeln!(
            s,
            "emitted {} of {} × {} {} on {} in {}{stopped}",
            p.paint(&self.emitted.to_string(), Role::Count),
            self.requested,
            p.event_type(&self.type_),
            p.paint(&self.reason, Role::Reason),
            p.paint(&self.object, Role::Object),
            self.namespace,
        );
        // events.k8s.io has no aggregation or spam filter, but series.
        let middle = if self.series > 0 {
            format!("series {}", self.series)
        } else {
            format!("aggregated {}, skipped {}", self.aggregated, self.skipped)
        };
        let _ = writeln!(
            s,
            "pipeline:   created {}, patched {}, {middle}, merged {}, dropped {}, failed {}",
            self.created, self.patched, self.merged, self.dropped, self.failed
        );
        let _ = writeln!(
            s,
            "API writes: {} ({} create, {} patch; {} failed, {} retried)",
            p.paint(&self.api_writes.to_string(), Role::Count),
            self.creates,
            self.patches,
            self.failed_writes,
            self.retries
        );
        s
    }
}

/// Why occurrences were not written, for the last line of a run that lost some: the last
/// error the sink saw (the server's own words), and the pipeline's reasons for what never
/// reached the server. `None` when nothing was lost.
pub fn why_lost(stats: &RecordStats, last_error: Option<String>) -> Option<String> {
    let sink = stats.sinks.first().cloned().unwrap_or_default();
    let mut why = Vec::new();
    if sink.failed + sink.dropped_shutdown > 0 {
        match last_error {
            Some(e) => why.push(e),
            None if sink.dropped_shutdown > 0 => {
                why.push("the server did not answer before the shutdown deadline".to_string());
            }
            None => {}
        }
    }
    if stats.dropped_invalid > 0 {
        why.push(format!("{} had an invalid type", stats.dropped_invalid));
    }
    if stats.dropped_queue_full > 0 {
        why.push(format!(
            "{} did not fit in the pipeline's queue",
            stats.dropped_queue_full
        ));
    }
    if stats.dropped_shutdown > 0 {
        why.push(format!(
            "{} came after the pipeline shut down",
            stats.dropped_shutdown
        ));
    }
    (!why.is_empty()).then(|| why.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use herald_runtime::record::SinkStats;

    #[test]
    fn counts_come_from_the_pipeline() {
        let stats = RecordStats {
            emitted: 1000,
            merged: 10,
            dropped_queue_full: 1,
            sinks: vec![SinkStats {
                created: 1,
                patched: 25,
                skipped: 963,
                create_calls: 1,
                patch_calls: 25,
                ..SinkStats::default()
            }],
            ..RecordStats::default()
        };
        let s = Summary::new(
            What {
                object: "pod/web-1".into(),
                namespace: "default".into(),
                type_: "Warning".into(),
                reason: "BackOff".into(),
                requested: 1000,
            },
            &stats,
            false,
        );
        assert_eq!((s.api_writes, s.dropped, s.unaccounted), (26, 1, 0));
        let text = s.render(Palette::plain());
        assert!(
            text.starts_with("emitted 1000 of 1000 × Warning BackOff on pod/web-1 in default\n"),
            "{text}"
        );
        assert!(text.contains("pipeline:   created 1, patched 25, aggregated 0, skipped 963, merged 10, dropped 1, failed 0"), "{text}");
        assert!(
            text.contains("API writes: 26 (1 create, 25 patch; 0 failed, 0 retried)"),
            "{text}"
        );
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["type"], "Warning");
        assert_eq!(json["api_writes"], 26);
    }

    #[test]
    fn a_loss_is_explained_by_the_last_error_or_by_the_pipeline() {
        let failed = RecordStats {
            emitted: 1,
            sinks: vec![SinkStats {
                failed: 1,
                ..SinkStats::default()
            }],
            ..RecordStats::default()
        };
        let e = "server rejected the request (429 TooManyRequests): full".to_string();
        assert_eq!(why_lost(&failed, Some(e.clone())), Some(e.clone()));
        let late = RecordStats {
            emitted: 3,
            dropped_queue_full: 2,
            sinks: vec![SinkStats {
                dropped_shutdown: 1,
                ..SinkStats::default()
            }],
            ..RecordStats::default()
        };
        assert_eq!(
            why_lost(&late, None).as_deref(),
            Some(
                "the server did not answer before the shutdown deadline; 2 did not fit in the pipeline's queue"
            )
        );
        // An error on a write that was retried and then succeeded explains nothing.
        let fine = RecordStats {
            emitted: 1,
            sinks: vec![SinkStats {
                created: 1,
                ..SinkStats::default()
            }],
            ..RecordStats::default()
        };
        assert_eq!(why_lost(&fine, Some(e)), None);
    }
}
