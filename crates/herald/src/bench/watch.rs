//! Watchers: each holds one `?watch=1` stream and measures the delivery lag of this run's
//! events (receipt time on the bench clock − send time embedded by the creating client).
//! The stream is JSON lines or protobuf frames, as `--encoding` asks.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use hdrhistogram::Histogram;
use herald_core::clock::Clock;
use http_body_util::{BodyExt as _, Full};
use tokio_util::sync::CancellationToken;

use super::conn::{Endpoint, connect};
use super::encoding::Encoding;
use super::workload::{Group, SentFinder};

/// What one watcher measured.
pub struct WatchResult {
    /// Delivery lag in microseconds.
    pub lag: Histogram<u64>,
    /// Streams reopened after they ended or failed.
    pub reconnects: u64,
}

/// One watcher's live counters, read by the progress display and the drain loop.
#[derive(Default)]
pub struct WatchCounters {
    /// Events of this run received so far.
    pub received: AtomicU64,
    /// Watch streams opened (1 once the first stream is established).
    pub open: AtomicU64,
    /// Body bytes received on every stream (this run's events, and any other line).
    pub bytes: AtomicU64,
}

/// Everything a watcher needs.
pub struct Watcher {
    /// The server.
    pub endpoint: Endpoint,
    /// Namespace watched.
    pub namespace: String,
    /// resourceVersion to start after (taken before the load starts).
    pub from_rv: String,
    /// The bench run id.
    pub run: String,
    /// The group whose events are watched.
    pub group: Group,
    /// How the stream is encoded.
    pub encoding: Encoding,
    /// The clock send times were taken on.
    pub clock: Arc<dyn Clock>,
    /// Live counters.
    pub counters: Arc<WatchCounters>,
    /// Ends the watch.
    pub stop: CancellationToken,
}

fn new_histogram() -> Histogram<u64> {
    // 1 µs .. 1 h at 2 significant digits (1 % resolution, ~24 KiB per watcher: a thousand
    // watchers at 3 digits held 190 MB of counters); larger lags saturate at the top.
    Histogram::new_with_bounds(1, 3_600_000_000, 2).unwrap_or_else(|_| {
        Histogram::new(2).unwrap_or_else(|_| unreachable!("2 significant digits is valid"))
    })
}

impl Watcher {
    /// Watches until `stop` is cancelled, reopening the stream from the last seen
    /// resourceVersion whenever it ends.
    pub async fn run(self) -> WatchResult {
        let mut lag = new_histogram();
        let mut reconnects = 0u64;
        let mut rv = self.from_rv.clone();
        let sent = SentFinder::new(self.encoding, &self.run);
        let mut last = None;
        loop {
            let ended = tokio::select! {
                _ = self.stop.cancelled() => return WatchResult { lag, reconnects },
                r = self.stream_once(&rv, &mut lag, &sent, &mut last) => r,
            };
            let _ = ended;
            // Only a reconnect needs the newest resourceVersion, so only then is the last
            // record read for it (a protobuf record takes a decode).
            if let Some(v) = last.take().and_then(|r| self.encoding.resource_version(&r)) {
                rv = v;
            }
            reconnects += 1;
            tokio::select! {
                _ = self.stop.cancelled() => return WatchResult { lag, reconnects },
                _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            }
        }
    }

    /// One watch stream from `rv`, until it ends or fails; `last` keeps its newest record.
    async fn stream_once(
        &self,
        rv: &str,
        lag: &mut Histogram<u64>,
        sent: &SentFinder,
        last: &mut Option<Bytes>,
    ) -> Result<(), ()> {
        let mut sender = connect(&self.endpoint).await.map_err(|_| ())?;
        let path = format!(
            "{}?watch=1&resourceVersion={rv}",
            self.group.collection(&self.namespace)
        );
        let req = self
            .endpoint
            .request(http::Method::GET, &path)
            .header(http::header::ACCEPT, self.encoding.media_type())
            .body(Full::new(Bytes::new()))
            .map_err(|_| ())?;
        let resp = sender.send_request(req).await.map_err(|_| ())?;
        let content_type = resp
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if !resp.status().is_success() || !self.encoding.is_content_type(content_type) {
            return Err(());
        }
        self.counters.open.fetch_add(1, Ordering::Relaxed);
        let mut body = resp.into_body();
        let mut records = self.encoding.records();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|_| ())?;
            let Ok(data) = frame.into_data() else {
                continue;
            };
            self.counters
                .bytes
                .fetch_add(data.len() as u64, Ordering::Relaxed);
            // Every record of a chunk arrived at the same time.
            let now = self.clock.now().as_nanosecond();
            let mut received = 0u64;
            let mut newest = None;
            let mut joined = None;
            records
                .feed(&data, |record, at| {
                    if let Some(at) = sent.sent_nanos(record) {
                        let micros = u64::try_from((now - at).max(0) / 1000).unwrap_or(u64::MAX);
                        lag.saturating_record(micros);
                        received += 1;
                    }
                    // An ERROR carries no resourceVersion: the one before it is where a
                    // reconnect resumes.
                    if self.encoding.is_error(record) {
                        return;
                    }
                    match at {
                        Some(at) => newest = Some(at),
                        // Completed from earlier chunks' bytes (rare): copied, as they go.
                        None => joined = Some(Bytes::copy_from_slice(record)),
                    }
                })
                .map_err(|_| ())?;
            self.counters
                .received
                .fetch_add(received, Ordering::Relaxed);
            // Copied, not sliced: a slice would pin hyper's whole read buffer.
            if let Some(at) = newest {
                *last = Some(Bytes::copy_from_slice(&data[at]));
            } else if joined.is_some() {
                *last = joined;
            }
        }
        Ok(())
    }
}

/// Merges the watchers' histograms.
pub fn merge(results: &[WatchResult]) -> Histogram<u64> {
    let mut all = new_histogram();
    for r in results {
        let _ = all.add(&r.lag);
    }
    all
}
