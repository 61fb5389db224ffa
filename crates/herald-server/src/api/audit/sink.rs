//! [`AuditSink`]: where the [audit layer](super::layer) hands events, and the writer thread
//! behind it.
//!
//! Recording an event never blocks a request: [`AuditSink::record`] puts it on a bounded
//! queue ([`AuditOptions::queue_capacity`](super::AuditOptions::queue_capacity) events,
//! 10 000 by default, kube-apiserver's `--audit-log-buffer-size`) and returns. One thread,
//! `herald-audit`, takes events off the queue, encodes each as one JSON line and appends it
//! to the log (a [`RotatingFile`], or stdout for `--audit-log-path -`), flushing whenever the
//! queue runs empty, so a line reaches the file (not the disk: no fsync) moments after its
//! request.
//!
//! **At the bound** (the disk cannot keep up), an event that does not fit is dropped and
//! counted in `herald_apiserver_audit_dropped_events_total{reason="queue_full"}`, with a
//! warning at most once per [`LOG_INTERVAL`] saying how many were dropped since the last
//! one. A line the log refuses (disk full, an I/O error) is counted with
//! `reason="write_failed"`, and an event recorded after the writer has stopped with
//! `reason="closed"`. Lines written are counted in `herald_apiserver_audit_events_total`.
//! Unlike kube-apiserver's default `blocking` mode, requests are never slowed down to get
//! their lines written: the counter says when lines were lost.
//!
//! The thread ends once every handle on the sink is gone (the server has stopped), after
//! writing what is queued; [`AuditWriter::finished`] waits for that.

use std::io::{self, Write as _};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use super::event::Event;
use super::rotate::RotatingFile;
use crate::api::log_throttle::{LOG_INTERVAL, Throttle};

/// Labels of `herald_apiserver_audit_dropped_events_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DroppedLabels {
    /// `queue_full`: the queue was at its bound; `write_failed`: the log refused the line;
    /// `closed`: the writer had stopped.
    pub reason: &'static str,
}

/// The audit log's counters (registered by the server under `/metrics`). Cheap to clone:
/// clones count together. `Default` creates every drop reason at 0, so that the series
/// exist (for alerts on their rate) before the first drop.
#[derive(Clone, Debug)]
pub struct AuditMetrics {
    /// Lines written (`herald_apiserver_audit_events_total`).
    pub events: Counter,
    /// Events lost, by reason (`herald_apiserver_audit_dropped_events_total`).
    pub dropped: Family<DroppedLabels, Counter>,
}

impl Default for AuditMetrics {
    fn default() -> Self {
        let m = AuditMetrics {
            events: Counter::default(),
            dropped: Family::default(),
        };
        for reason in ["queue_full", "write_failed", "closed"] {
            drop(m.dropped.get_or_create(&DroppedLabels { reason }));
        }
        m
    }
}

impl AuditMetrics {
    fn drop_one(&self, reason: &'static str) {
        self.dropped.get_or_create(&DroppedLabels { reason }).inc();
    }

    /// Events lost for `reason` so far.
    pub fn dropped(&self, reason: &'static str) -> u64 {
        self.dropped.get_or_create(&DroppedLabels { reason }).get()
    }
}

/// Where the lines go.
#[derive(Debug)]
pub enum AuditOutput {
    /// `--audit-log-path -`.
    Stdout,
    /// A rotated file.
    File(RotatingFile),
}

impl AuditOutput {
    fn write_line(&mut self, line: &[u8]) -> io::Result<()> {
        match self {
            AuditOutput::Stdout => io::stdout().lock().write_all(line),
            AuditOutput::File(f) => f.write_line(line),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            AuditOutput::Stdout => io::stdout().lock().flush(),
            AuditOutput::File(f) => f.flush(),
        }
    }
}

/// The queue in front of the audit log's writer (see the [module docs](self)). Shared by
/// every request (`Arc`).
#[derive(Debug)]
pub struct AuditSink {
    queue: SyncSender<Event>,
    metrics: AuditMetrics,
    full: Mutex<Throttle>,
}

/// Waits for the writer thread of an [`AuditSink`] to end.
#[derive(Debug)]
pub struct AuditWriter {
    done: tokio::sync::oneshot::Receiver<()>,
}

impl AuditWriter {
    /// Waits at most `wait` for the writer to have written every queued line and ended
    /// (it ends once the last handle on its sink is dropped); `false` if it had not by then.
    pub async fn finished(self, wait: Duration) -> bool {
        // An error means the thread ended without saying so (it panicked): finished too.
        tokio::time::timeout(wait, self.done).await.is_ok()
    }
}

impl AuditSink {
    /// A sink whose queue holds at most `capacity` events (at least 1), written to `output`
    /// by a new thread.
    pub fn start(
        output: AuditOutput,
        capacity: usize,
        metrics: AuditMetrics,
    ) -> io::Result<(Arc<AuditSink>, AuditWriter)> {
        let (sink, queue) = Self::unstarted(capacity, metrics.clone());
        let (done_tx, done) = tokio::sync::oneshot::channel();
        std::thread::Builder::new()
            .name("herald-audit".into())
            .spawn(move || {
                write_all(queue, output, &metrics);
                let _ = done_tx.send(());
            })?;
        Ok((sink, AuditWriter { done }))
    }

    /// A sink and the receiving end of its queue, with no writer (the caller drains it).
    pub(crate) fn unstarted(
        capacity: usize,
        metrics: AuditMetrics,
    ) -> (Arc<AuditSink>, Receiver<Event>) {
        let (queue, rx) = std::sync::mpsc::sync_channel(capacity.max(1));
        let sink = Arc::new(AuditSink {
            queue,
            metrics,
            full: Mutex::new(Throttle::new(LOG_INTERVAL)),
        });
        (sink, rx)
    }

    /// Queues `event` for the log without waiting; at the bound it is dropped and counted.
    pub fn record(&self, event: Event) {
        match self.queue.try_send(event) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                self.metrics.drop_one("queue_full");
                let ready = self.full.lock().unwrap_or_else(|e| e.into_inner()).ready();
                if let Some(more) = ready {
                    tracing::warn!(
                        dropped_since_last_line = more + 1,
                        "the audit log's queue is full (the log cannot be written fast enough): audit events are being dropped"
                    );
                }
            }
            Err(TrySendError::Disconnected(_)) => self.metrics.drop_one("closed"),
        }
    }

    /// The sink's counters.
    pub fn metrics(&self) -> &AuditMetrics {
        &self.metrics
    }
}

/// The writer thread: until every sender is gone, a line per event, flushed when the queue
/// runs empty.
fn write_all(queue: Receiver<Event>, mut output: AuditOutput, metrics: &AuditMetrics) {
    let mut failures = Throttle::new(LOG_INTERVAL);
    let mut line = Vec::with_capacity(1024);
    let report = |e: &io::Error, failures: &mut Throttle| {
        metrics.drop_one("write_failed");
        if let Some(more) = failures.ready() {
            tracing::error!(error = %e, failed_since_last_line = more + 1, "cannot write the audit log: audit events are being lost");
        }
    };
    while let Ok(first) = queue.recv() {
        let mut next = Some(first);
        while let Some(event) = next {
            line.clear();
            if serde_json::to_writer(&mut line, &event).is_ok() {
                line.push(b'\n');
                match output.write_line(&line) {
                    Ok(()) => {
                        metrics.events.inc();
                    }
                    Err(e) => report(&e, &mut failures),
                }
            }
            next = queue.try_recv().ok();
        }
        if let Err(e) = output.flush() {
            report(&e, &mut failures);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::audit::event::{MicroTime, Stage};

    fn event(id: &str) -> Event {
        Event::metadata(
            id,
            Stage::ResponseComplete,
            MicroTime(jiff::Timestamp::UNIX_EPOCH),
        )
    }

    #[test]
    fn at_the_bound_events_are_dropped_and_counted_never_waited_for() {
        let (sink, queue) = AuditSink::unstarted(2, AuditMetrics::default());
        for i in 0..5 {
            sink.record(event(&i.to_string()));
        }
        assert_eq!(sink.metrics().dropped("queue_full"), 3);
        // The first two are queued, in order; the rest were refused.
        let kept: Vec<_> = queue.try_iter().map(|e| e.audit_id).collect();
        assert_eq!(kept, ["0", "1"]);
        // Room again: the next one goes in.
        sink.record(event("5"));
        assert_eq!(queue.try_recv().unwrap().audit_id, "5");
        assert_eq!(sink.metrics().dropped("queue_full"), 3);
        drop(queue);
        sink.record(event("6"));
        assert_eq!(sink.metrics().dropped("closed"), 1);
    }

    #[tokio::test]
    async fn the_writer_writes_every_queued_line_then_ends_with_its_last_handle() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        let clock = Arc::new(herald_core::clock::FakeClock::default());
        let file = RotatingFile::open(&path, Default::default(), clock).unwrap();
        let metrics = AuditMetrics::default();
        let (sink, writer) =
            AuditSink::start(AuditOutput::File(file), 100, metrics.clone()).unwrap();
        for i in 0..50 {
            sink.record(event(&i.to_string()));
        }
        drop(sink);
        assert!(writer.finished(Duration::from_secs(30)).await);
        let text = std::fs::read_to_string(&path).unwrap();
        let ids: Vec<String> = text
            .lines()
            .map(|l| serde_json::from_str::<Event>(l).unwrap().audit_id)
            .collect();
        assert_eq!(ids, (0..50).map(|i| i.to_string()).collect::<Vec<_>>());
        assert_eq!(metrics.events.get(), 50);
    }
}
