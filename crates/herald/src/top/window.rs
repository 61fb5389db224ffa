//! The numbers behind `herald top`: occurrences and API writes over a sliding window, ranked
//! by object and by reason.
//!
//! Each add or update of an Event seen by the informer is one API write; the growth of its
//! `count` is the occurrences that write carried. Their ratio is how much the correlator
//! (and the server's counting) compressed the storm. Events already stored when `top`
//! starts contribute the part of their count that falls inside the window, assuming their
//! occurrences were spread evenly between first and last timestamp, and one write each.
//!
//! Bounds: at most [`MAX_SAMPLES`] samples (the oldest are dropped first; the rate is then
//! taken over the shorter span the kept samples cover) and one remembered count per Event
//! in the informer's cache (forgotten when the Event is deleted).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Event;

use crate::event_text::{count, event_key, last_seen};

/// Most samples kept; beyond it the oldest are dropped.
pub const MAX_SAMPLES: usize = 200_000;

/// One write seen: when, about what, and how many occurrences it carried.
#[derive(Debug, Clone)]
struct Sample {
    at: Timestamp,
    event: Arc<str>,
    object: Arc<str>,
    reason: Arc<str>,
    warning: bool,
    occurrences: u64,
    writes: u64,
}

/// One ranked line: an object or a reason.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// `pod/web-1` (with `namespace/` under `-A`) or the reason.
    pub name: String,
    /// For an object its busiest reason; for a reason its type.
    pub detail: String,
    /// Occurrences per second over the span.
    pub rate: f64,
    /// Occurrences in the window.
    pub occurrences: u64,
    /// API writes in the window.
    pub writes: u64,
    /// Distinct Event objects (for an object) or distinct objects (for a reason).
    pub distinct: usize,
}

impl Row {
    /// Occurrences per write (`None` without writes).
    pub fn compression(&self) -> Option<f64> {
        (self.writes > 0).then(|| self.occurrences as f64 / self.writes as f64)
    }
}

/// A ranking at one instant.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// Objects, busiest first.
    pub objects: Vec<Row>,
    /// Reasons, busiest first.
    pub reasons: Vec<Row>,
    /// Everything together (`distinct` = Event objects).
    pub total: Row,
    /// The span rates are computed over (at most the window).
    pub span: Duration,
}

/// Sliding-window statistics of event writes.
#[derive(Debug)]
pub struct Window {
    window: Duration,
    namespaces: bool,
    samples: VecDeque<Sample>,
    counts: HashMap<String, i64>,
}

impl Window {
    /// A window of `window`; object names carry their namespace when `namespaces`.
    pub fn new(window: Duration, namespaces: bool) -> Window {
        Window {
            window,
            namespaces,
            samples: VecDeque::new(),
            counts: HashMap::new(),
        }
    }

    /// The window's length.
    pub fn length(&self) -> Duration {
        self.window
    }

    fn start(&self, now: Timestamp) -> Timestamp {
        let w = jiff::SignedDuration::try_from(self.window).unwrap_or(jiff::SignedDuration::MAX);
        now.checked_sub(w).unwrap_or(Timestamp::MIN)
    }

    /// Records an add or update of `event` seen at `now`. `initial` marks an event that was
    /// already stored when the informer started.
    pub fn observe(&mut self, event: &Event, initial: bool, now: Timestamp) {
        let key = event_key(event);
        let n = count(event);
        let prev = self.counts.insert(key.clone(), n);
        let (at, occurrences, writes) = match prev {
            Some(p) => (now, u64::try_from(n - p).unwrap_or(0), 1),
            None if initial => {
                let in_window = self.initial_share(event, n, now);
                let last = last_seen(event).unwrap_or(now).min(now);
                (last, in_window, u64::from(in_window > 0))
            }
            None => (now, u64::try_from(n).unwrap_or(0), 1),
        };
        if occurrences == 0 && writes == 0 {
            return;
        }
        let io = &event.involved_object;
        let object = format!(
            "{}{}/{}",
            match (&event.metadata.namespace, self.namespaces) {
                (Some(ns), true) => format!("{ns}/"),
                _ => String::new(),
            },
            io.kind.as_deref().unwrap_or("").to_lowercase(),
            io.name.as_deref().unwrap_or("")
        );
        self.samples.push_back(Sample {
            at,
            event: key.into(),
            object: object.into(),
            reason: event.reason.clone().unwrap_or_default().into(),
            warning: event.type_.as_deref() == Some("Warning"),
            occurrences,
            writes,
        });
        while self.samples.len() > MAX_SAMPLES {
            self.samples.pop_front();
        }
    }

    /// Forgets a deleted event's count (its samples age out with the window).
    pub fn forget(&mut self, event: &Event) {
        self.counts.remove(&event_key(event));
    }

    /// The part of a stored event's `n` occurrences inside the window, spread evenly
    /// between its first and last timestamp.
    fn initial_share(&self, event: &Event, n: i64, now: Timestamp) -> u64 {
        let start = self.start(now);
        let Some(last) = last_seen(event) else {
            return 0;
        };
        if last < start {
            return 0;
        }
        let first = event
            .first_timestamp
            .as_ref()
            .map(|t| t.0)
            .or_else(|| event.event_time.as_ref().map(|t| t.0))
            .unwrap_or(last);
        let n = u64::try_from(n).unwrap_or(0);
        if first >= start || last <= first {
            return n;
        }
        let whole = last.duration_since(first).as_secs_f64();
        let inside = last.duration_since(start).as_secs_f64();
        ((n as f64) * inside / whole).round().max(1.0) as u64
    }

    /// Drops samples older than the window and ranks what is left.
    pub fn snapshot(&mut self, now: Timestamp) -> Snapshot {
        let start = self.start(now);
        while self.samples.front().is_some_and(|s| s.at < start) {
            self.samples.pop_front();
        }
        let oldest = self.samples.iter().map(|s| s.at).min();
        let span = oldest
            .map(|o| {
                now.duration_since(o).unsigned_abs().clamp(
                    Duration::from_secs(1),
                    self.window.max(Duration::from_secs(1)),
                )
            })
            .unwrap_or(self.window);
        let secs = span.as_secs_f64().max(1.0);

        let mut objects: HashMap<&str, Acc> = HashMap::new();
        let mut reasons: HashMap<(&str, bool), Acc> = HashMap::new();
        let mut total = Acc::default();
        for s in &self.samples {
            let o = objects.entry(&s.object).or_default();
            o.add(s, &s.event);
            *o.by_reason.entry(s.reason.clone()).or_insert(0) += s.occurrences;
            reasons
                .entry((&s.reason, s.warning))
                .or_default()
                .add(s, &s.object);
            total.add(s, &s.event);
        }
        let objects = rank(objects.into_iter().map(|(name, a)| {
            let top = a
                .by_reason
                .iter()
                .max_by(|x, y| x.1.cmp(y.1).then_with(|| y.0.cmp(x.0)))
                .map(|(r, _)| r.to_string())
                .unwrap_or_default();
            a.row(name.to_string(), top, secs)
        }));
        let reasons = rank(reasons.into_iter().map(|((reason, warning), a)| {
            let t = if warning { "Warning" } else { "Normal" };
            a.row(reason.to_string(), t.to_string(), secs)
        }));
        Snapshot {
            objects,
            reasons,
            total: total.row("all".into(), String::new(), secs),
            span,
        }
    }
}

#[derive(Default)]
struct Acc {
    occurrences: u64,
    writes: u64,
    distinct: HashSet<Arc<str>>,
    by_reason: HashMap<Arc<str>, u64>,
}

impl Acc {
    fn add(&mut self, s: &Sample, distinct: &Arc<str>) {
        self.occurrences += s.occurrences;
        self.writes += s.writes;
        self.distinct.insert(distinct.clone());
    }

    fn row(&self, name: String, detail: String, secs: f64) -> Row {
        Row {
            name,
            detail,
            rate: self.occurrences as f64 / secs,
            occurrences: self.occurrences,
            writes: self.writes,
            distinct: self.distinct.len(),
        }
    }
}

/// Busiest first; ties by occurrences, then name (a stable order on screen).
fn rank(rows: impl Iterator<Item = Row>) -> Vec<Row> {
    let mut v: Vec<Row> = rows.collect();
    v.sort_by(|a, b| {
        b.rate
            .total_cmp(&a.rate)
            .then_with(|| b.occurrences.cmp(&a.occurrences))
            .then_with(|| a.name.cmp(&b.name))
    });
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: u64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + s as i64).unwrap()
    }

    fn ev(
        name: &str,
        object: &str,
        reason: &str,
        count: i32,
        first: Timestamp,
        last: Timestamp,
    ) -> Event {
        crate::event_text::fixtures::event(name, object, reason, count, first, last)
    }

    #[test]
    fn storms_rank_first_with_their_compression() {
        let mut w = Window::new(Duration::from_secs(300), false);
        // web-1: one event patched up to count 100 in 4 writes.
        w.observe(&ev("a", "web-1", "BackOff", 1, t(0), t(0)), false, t(0));
        w.observe(&ev("a", "web-1", "BackOff", 25, t(0), t(1)), false, t(1));
        w.observe(&ev("a", "web-1", "BackOff", 60, t(0), t(5)), false, t(5));
        w.observe(&ev("a", "web-1", "BackOff", 100, t(0), t(10)), false, t(10));
        // db-0: two different events, once each.
        w.observe(&ev("b", "db-0", "FailedMount", 1, t(2), t(2)), false, t(2));
        w.observe(&ev("c", "db-0", "BackOff", 1, t(3), t(3)), false, t(3));
        let s = w.snapshot(t(10));
        assert_eq!(s.span, Duration::from_secs(10));
        assert_eq!(s.objects[0].name, "pod/web-1");
        assert_eq!(s.objects[0].occurrences, 100);
        assert_eq!(s.objects[0].writes, 4);
        assert_eq!(s.objects[0].compression(), Some(25.0));
        assert!((s.objects[0].rate - 10.0).abs() < 1e-9);
        assert_eq!(s.objects[0].detail, "BackOff");
        assert_eq!(
            (s.objects[1].name.as_str(), s.objects[1].distinct),
            ("pod/db-0", 2)
        );
        assert_eq!(s.reasons[0].name, "BackOff");
        assert_eq!((s.reasons[0].occurrences, s.reasons[0].distinct), (101, 2));
        assert_eq!(s.reasons[1].name, "FailedMount");
        assert_eq!(
            (s.total.occurrences, s.total.writes, s.total.distinct),
            (102, 6, 3)
        );
    }

    #[test]
    fn old_samples_leave_the_window() {
        let mut w = Window::new(Duration::from_secs(60), true);
        w.observe(&ev("a", "web-1", "BackOff", 1, t(0), t(0)), false, t(0));
        w.observe(&ev("a", "web-1", "BackOff", 50, t(0), t(30)), false, t(30));
        let s = w.snapshot(t(70));
        assert_eq!(s.objects[0].name, "default/pod/web-1");
        assert_eq!(
            s.objects[0].occurrences, 49,
            "the first write left the window"
        );
        let s = w.snapshot(t(200));
        assert!(s.objects.is_empty() && s.total.occurrences == 0);
        assert_eq!(s.span, Duration::from_secs(60));
    }

    #[test]
    fn stored_events_count_their_share_of_the_window() {
        let mut w = Window::new(Duration::from_secs(100), false);
        // 200 occurrences over 200 s, the last 100 s inside the window: about 100.
        w.observe(
            &ev("a", "web-1", "BackOff", 200, t(0), t(200)),
            true,
            t(200),
        );
        // Entirely before the window: nothing, but its count is remembered.
        w.observe(&ev("b", "db-0", "BackOff", 5, t(0), t(10)), true, t(200));
        let s = w.snapshot(t(200));
        assert_eq!(s.objects.len(), 1);
        assert_eq!((s.objects[0].occurrences, s.objects[0].writes), (100, 1));
        // A later update of the old event counts only its growth.
        w.observe(&ev("b", "db-0", "BackOff", 8, t(0), t(201)), false, t(201));
        let s = w.snapshot(t(201));
        assert_eq!(s.objects[1].occurrences, 3);
        w.forget(&ev("b", "db-0", "BackOff", 8, t(0), t(201)));
        assert_eq!(w.counts.len(), 1);
    }

    #[test]
    fn samples_are_bounded() {
        let mut w = Window::new(Duration::from_secs(3600), false);
        for i in 0..(MAX_SAMPLES + 10) {
            w.observe(
                &ev(&format!("e{i}"), "web-1", "BackOff", 1, t(0), t(0)),
                false,
                t(0),
            );
        }
        assert_eq!(w.samples.len(), MAX_SAMPLES);
    }
}
