//! Watchers: each holds one `?watch=1` stream and measures the delivery lag of this run's
//! events (receipt time on the bench clock − send time embedded by the creating client).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use hdrhistogram::Histogram;
use herald_core::clock::Clock;
use http_body_util::{BodyExt as _, Full};
use tokio_util::sync::CancellationToken;

use super::conn::connect;
use super::workload;

/// The largest watch line kept while waiting for its newline; a longer line is dropped
/// (counted as a reconnect: the stream is reopened from the last resourceVersion).
const MAX_LINE: usize = 4 * 1024 * 1024;

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
    /// Server address.
    pub addr: SocketAddr,
    /// Namespace watched.
    pub namespace: String,
    /// resourceVersion to start after (taken before the load starts).
    pub from_rv: String,
    /// The bench run id.
    pub run: String,
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
        let marker = workload::marker(&self.run);
        let marker = memchr::memmem::Finder::new(marker.as_bytes());
        let rv_key = memchr::memmem::Finder::new(b"\"resourceVersion\":\"");
        loop {
            let ended = tokio::select! {
                _ = self.stop.cancelled() => return WatchResult { lag, reconnects },
                r = self.stream_once(&mut rv, &mut lag, &marker, &rv_key) => r,
            };
            let _ = ended;
            reconnects += 1;
            tokio::select! {
                _ = self.stop.cancelled() => return WatchResult { lag, reconnects },
                _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            }
        }
    }

    async fn stream_once(
        &self,
        rv: &mut String,
        lag: &mut Histogram<u64>,
        marker: &memchr::memmem::Finder<'_>,
        rv_key: &memchr::memmem::Finder<'_>,
    ) -> Result<(), ()> {
        let mut sender = connect(self.addr).await.map_err(|_| ())?;
        let path = format!(
            "/api/v1/namespaces/{}/events?watch=1&resourceVersion={}",
            self.namespace, rv
        );
        let req = http::Request::get(path)
            .header(http::header::HOST, self.addr.to_string())
            .header(http::header::ACCEPT, "application/json")
            .body(Full::new(Bytes::new()))
            .map_err(|_| ())?;
        let resp = sender.send_request(req).await.map_err(|_| ())?;
        if !resp.status().is_success() {
            return Err(());
        }
        self.counters.open.fetch_add(1, Ordering::Relaxed);
        let mut body = resp.into_body();
        // The start of a line that did not end in its chunk (the server sends whole lines,
        // so this is rarely used).
        let mut partial = BytesMut::new();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|_| ())?;
            let Ok(data) = frame.into_data() else {
                continue;
            };
            self.counters
                .bytes
                .fetch_add(data.len() as u64, Ordering::Relaxed);
            // Every line of a chunk arrived at the same time.
            let now = self.clock.now().as_nanosecond();
            let mut received = 0u64;
            let mut rest = &data[..];
            if !partial.is_empty() {
                let Some(nl) = memchr::memchr(b'\n', rest) else {
                    partial.extend_from_slice(rest);
                    if partial.len() > MAX_LINE {
                        return Err(());
                    }
                    continue;
                };
                partial.extend_from_slice(&rest[..=nl]);
                rest = &rest[nl + 1..];
                let line = partial.split().freeze();
                received += u64::from(record(&line[..line.len() - 1], now, lag, marker));
                remember_rv(&line, rv, rv_key);
            }
            let mut last_line: Option<&[u8]> = None;
            while let Some(nl) = memchr::memchr(b'\n', rest) {
                let line = &rest[..nl];
                received += u64::from(record(line, now, lag, marker));
                last_line = Some(line);
                rest = &rest[nl + 1..];
            }
            self.counters
                .received
                .fetch_add(received, Ordering::Relaxed);
            // Only the newest resourceVersion matters (it is where a reconnect resumes).
            if let Some(line) = last_line {
                remember_rv(line, rv, rv_key);
            }
            if !rest.is_empty() {
                if rest.len() > MAX_LINE {
                    return Err(());
                }
                partial.extend_from_slice(rest);
            }
        }
        Ok(())
    }
}

/// Records the lag of `line` if it is an event of this run; true when it was.
fn record(
    line: &[u8],
    now: i128,
    lag: &mut Histogram<u64>,
    marker: &memchr::memmem::Finder<'_>,
) -> bool {
    let Some(sent) = workload::sent_nanos_in(line, marker) else {
        return false;
    };
    let micros = u64::try_from((now - sent).max(0) / 1000).unwrap_or(u64::MAX);
    lag.saturating_record(micros);
    true
}

/// Keeps the resourceVersion of `line`, if it has one, in `rv`.
fn remember_rv(line: &[u8], rv: &mut String, rv_key: &memchr::memmem::Finder<'_>) {
    if let Some(at) = rv_key.find(line) {
        let rest = &line[at + rv_key.needle().len()..];
        if let Some(end) = memchr::memchr(b'"', rest)
            && let Ok(s) = std::str::from_utf8(&rest[..end])
        {
            s.clone_into(rv);
        }
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
