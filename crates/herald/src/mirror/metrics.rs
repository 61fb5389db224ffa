//! The mirror's metrics, served at the server's `/metrics`:
//!
//! - `herald_mirror_lag_seconds` (gauge): how long ago the copy was last known complete,
//!   that is, since the mirror received the newest change (event, bookmark or list) that it
//!   has durably applied and recorded as its position. On a busy source it is the time a
//!   change takes to reach the copy; on a quiet one it rises until the source's next watch
//!   bookmark (herald and kube-apiserver send one a minute), so alert on more than a few
//!   bookmark intervals.
//! - `herald_mirror_events_total{outcome}` (counter): every source event the mirror
//!   handled, by outcome: `created`, `updated`, `replaced` (a new uid at a known name),
//!   `unchanged` (already copied: replays and relists), `kept` (deleted or expired at the
//!   source, kept here), `failed` (could not be copied: logged, see the applier).
//! - `herald_mirror_relists_total` (counter): full lists of the source (the first one, and
//!   one after every 410).

use std::sync::Mutex;
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use tokio::time::Instant;

/// Every outcome `herald_mirror_events_total` counts, shown from the start at 0.
pub const OUTCOMES: [&str; 6] = [
    "created",
    "updated",
    "replaced",
    "unchanged",
    "kept",
    "failed",
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

/// The mirror's counters and its lag (see the module docs). Shared by the applier, which
/// updates it, and the server's `/metrics`, which reads it at every scrape.
#[derive(Debug)]
pub struct MirrorMetrics {
    events: Family<OutcomeLabels, Counter>,
    relists: Counter,
    /// When the newest change the copy durably holds was received (the mirror's start
    /// before the first).
    complete_as_of: Mutex<Instant>,
}

impl MirrorMetrics {
    /// Metrics of a mirror starting now: no events, lag counted from now.
    pub fn new() -> Self {
        let events = Family::<OutcomeLabels, Counter>::default();
        for outcome in OUTCOMES {
            drop(events.get_or_create(&OutcomeLabels { outcome }));
        }
        MirrorMetrics {
            events,
            relists: Counter::default(),
            complete_as_of: Mutex::new(Instant::now()),
        }
    }

    /// Counts `n` events with `outcome` (one of [`OUTCOMES`]).
    pub fn count(&self, outcome: &'static str, n: u64) {
        self.events
            .get_or_create(&OutcomeLabels { outcome })
            .inc_by(n);
    }

    /// How many events were counted with `outcome`.
    #[cfg(test)]
    pub fn counted(&self, outcome: &'static str) -> u64 {
        self.events.get_or_create(&OutcomeLabels { outcome }).get()
    }

    /// Counts a full list of the source.
    pub fn relisted(&self) {
        self.relists.inc();
    }

    /// The copy now durably holds every change received up to `received`.
    pub fn complete_as_of(&self, received: Instant) {
        let mut at = self
            .complete_as_of
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        *at = (*at).max(received);
    }

    /// `herald_mirror_lag_seconds` now.
    pub fn lag(&self) -> Duration {
        let at = *self
            .complete_as_of
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        Instant::now().saturating_duration_since(at)
    }
}

impl Collector for MirrorMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let lag = ConstGauge::new(self.lag().as_secs_f64());
        lag.encode(encoder.encode_descriptor(
            "mirror_lag_seconds",
            "Seconds since the mirror received the newest source change its copy durably holds",
            None,
            lag.metric_type(),
        )?)?;
        self.events.encode(encoder.encode_descriptor(
            "mirror_events",
            "Source events the mirror handled, by outcome",
            None,
            self.events.metric_type(),
        )?)?;
        self.relists.encode(encoder.encode_descriptor(
            "mirror_relists",
            "Full lists of the mirror's source",
            None,
            self.relists.metric_type(),
        )?)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn lag_counts_from_the_newest_durable_change() {
        let m = MirrorMetrics::new();
        let received = Instant::now();
        tokio::time::advance(Duration::from_secs(5)).await;
        assert_eq!(m.lag(), Duration::from_secs(5));
        m.complete_as_of(received + Duration::from_secs(4));
        assert_eq!(m.lag(), Duration::from_secs(1));
        // An older change applied later does not move it back.
        m.complete_as_of(received);
        assert_eq!(m.lag(), Duration::from_secs(1));
        m.count("created", 2);
        m.relisted();
        let mut text = String::new();
        let mut registry = prometheus_client::registry::Registry::with_prefix("herald");
        registry.register_collector(Box::new(m));
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(text.contains("herald_mirror_lag_seconds 1.0"), "{text}");
        assert!(
            text.contains(r#"herald_mirror_events_total{outcome="created"} 2"#),
            "{text}"
        );
        assert!(
            text.contains(r#"herald_mirror_events_total{outcome="failed"} 0"#),
            "{text}"
        );
        assert!(text.contains("herald_mirror_relists_total 1"), "{text}");
    }
}
