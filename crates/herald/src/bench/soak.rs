//! The soak's part of a bench run (`--slow-clients`, `--series`, `--server-pid`): hostile
//! slow clients beside the load, and what the server looks like meanwhile, interval by
//! interval.
//!
//! - **Slow clients**: each holds one connection and feeds it a piece every
//!   [`SoakOptions::slow_every`]: half send a request's header lines one at a time, half a
//!   create's body one byte at a time (what issue 29 found could hold a connection forever).
//!   When the server closes the connection (or answers, a 504 at the request deadline), the
//!   client records how long it lived and opens another. The lifetimes show the server's
//!   header timeout and request deadline at work.
//! - **Series**: every [`SoakOptions::series`] interval, the `/healthz` latency of that
//!   interval (probed every [`PROBE_EVERY`] on a fresh connection, as kubelet probes: p50,
//!   p99, max, failures) and, with [`SoakOptions::server_pid`], the server's resident memory
//!   (`VmRSS` of `/proc/PID/status`, Linux; the server must run on this machine).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::histogram;
use super::summary::Percentiles;

/// How often `/healthz` is probed.
pub const PROBE_EVERY: Duration = Duration::from_millis(250);
/// A probe without an answer by then counts as failed.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// The `Content-Length` a slow body announces (it never gets there).
const SLOW_BODY_LENGTH: usize = 1_000_000;

/// What the soak adds to a run.
#[derive(Debug, Clone)]
pub struct SoakOptions {
    /// Slow clients (0: none).
    pub slow_clients: u32,
    /// How often a slow client sends its next piece.
    pub slow_every: Duration,
    /// The length of one interval of the series; `None`: no series (and no probes).
    pub series: Option<Duration>,
    /// The server's process id, to sample its resident memory.
    pub server_pid: Option<u32>,
    /// The namespace the slow bodies are posted to.
    pub namespace: String,
}

/// One interval of the series.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct SoakPoint {
    /// The end of the interval, seconds since the load started.
    pub t_seconds: f64,
    /// `/healthz` probes answered 200 in the interval.
    pub healthz_ok: u64,
    /// Probes that failed (another status, no connection, no answer in time).
    pub healthz_failed: u64,
    /// Latency of the answered probes, milliseconds (connect to status line).
    pub healthz_ms: Percentiles,
    /// The server's resident memory at the end of the interval, bytes (with `--server-pid`).
    pub rss_bytes: Option<u64>,
    /// Slow connections open at the end of the interval.
    pub slow_open: u64,
}

/// What the slow clients saw.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct SlowSummary {
    /// Slow clients.
    pub clients: u32,
    /// Connections they opened.
    pub connections: u64,
    /// Connections the server ended (closed, or answered and closed), by kind.
    pub ended_headers: u64,
    /// Slow-body connections the server ended.
    pub ended_bodies: u64,
    /// How long a slow-header connection lived until the server ended it, milliseconds.
    pub headers_lifetime_ms: Percentiles,
    /// How long a slow-body connection lived until the server ended it, milliseconds.
    pub bodies_lifetime_ms: Percentiles,
}

/// The soak's results.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct SoakSummary {
    /// The slow clients (when there were any).
    pub slow: Option<SlowSummary>,
    /// The interval of the series, seconds.
    pub interval_seconds: f64,
    /// The series, one point per interval.
    pub series: Vec<SoakPoint>,
}

#[derive(Default)]
struct SlowCounters {
    connections: u64,
    open: u64,
    ended: [u64; 2],
    lifetimes: [Option<Histogram<u64>>; 2],
}

/// A running soak.
pub struct Soak {
    stop: CancellationToken,
    slow: Vec<JoinHandle<()>>,
    series: Option<JoinHandle<Vec<SoakPoint>>>,
    counters: Arc<Mutex<SlowCounters>>,
    options: SoakOptions,
}

impl Soak {
    /// Starts the slow clients and the series against `addr`, from `start`.
    pub fn start(addr: SocketAddr, options: SoakOptions, start: Instant) -> Soak {
        let stop = CancellationToken::new();
        let counters = Arc::new(Mutex::new(SlowCounters {
            lifetimes: [Some(histogram()), Some(histogram())],
            ..SlowCounters::default()
        }));
        let slow = (0..options.slow_clients)
            .map(|i| {
                let kind = if i % 2 == 0 {
                    Kind::Headers
                } else {
                    Kind::Body
                };
                tokio::spawn(slow_client(
                    addr,
                    kind,
                    options.slow_every,
                    options.namespace.clone(),
                    counters.clone(),
                    stop.clone(),
                ))
            })
            .collect();
        let series = options.series.map(|every| {
            tokio::spawn(series(
                addr,
                every,
                options.server_pid,
                start,
                counters.clone(),
                stop.clone(),
            ))
        });
        Soak {
            stop,
            slow,
            series,
            counters,
            options,
        }
    }

    /// Stops everything and returns what was measured.
    pub async fn finish(self) -> SoakSummary {
        self.stop.cancel();
        for t in self.slow {
            let _ = t.await;
        }
        let series = match self.series {
            Some(t) => t.await.unwrap_or_default(),
            None => Vec::new(),
        };
        let c = self.counters.lock().unwrap_or_else(|e| e.into_inner());
        let lifetime = |k: Kind| {
            c.lifetimes[k as usize]
                .as_ref()
                .map(Percentiles::from_micros)
                .unwrap_or_default()
        };
        SoakSummary {
            slow: (self.options.slow_clients > 0).then(|| SlowSummary {
                clients: self.options.slow_clients,
                connections: c.connections,
                ended_headers: c.ended[Kind::Headers as usize],
                ended_bodies: c.ended[Kind::Body as usize],
                headers_lifetime_ms: lifetime(Kind::Headers),
                bodies_lifetime_ms: lifetime(Kind::Body),
            }),
            interval_seconds: self.options.series.unwrap_or_default().as_secs_f64(),
            series,
        }
    }
}

/// What a slow client trickles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Header lines, one at a time.
    Headers = 0,
    /// A create's body, one byte at a time.
    Body = 1,
}

async fn slow_client(
    addr: SocketAddr,
    kind: Kind,
    every: Duration,
    namespace: String,
    counters: Arc<Mutex<SlowCounters>>,
    stop: CancellationToken,
) {
    let lock = || counters.lock().unwrap_or_else(|e| e.into_inner());
    while !stop.is_cancelled() {
        let Ok(mut s) = TcpStream::connect(addr).await else {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(Duration::from_secs(1)) => continue,
            }
        };
        let opened = Instant::now();
        {
            let mut c = lock();
            c.connections += 1;
            c.open += 1;
        }
        let first = match kind {
            Kind::Headers => format!("GET /healthz HTTP/1.1\r\nHost: {addr}\r\n"),
            Kind::Body => format!(
                "POST /api/v1/namespaces/{namespace}/events HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {SLOW_BODY_LENGTH}\r\n\r\n{{"
            ),
        };
        let piece: &[u8] = match kind {
            Kind::Headers => b"X-Slow: 1\r\n",
            Kind::Body => b" ",
        };
        let mut ended = s.write_all(first.as_bytes()).await.is_err();
        let mut buf = [0u8; 1024];
        let mut tick = tokio::time::interval_at(Instant::now() + every, every);
        while !ended {
            tokio::select! {
                () = stop.cancelled() => break,
                // Data (an answer), EOF or an error: the server is done with this one.
                _ = s.read(&mut buf) => ended = true,
                _ = tick.tick() => ended = s.write_all(piece).await.is_err(),
            }
        }
        let mut c = lock();
        c.open -= 1;
        if ended {
            c.ended[kind as usize] += 1;
            let micros = opened.elapsed().as_micros().min(u64::MAX as u128) as u64;
            if let Some(h) = &mut c.lifetimes[kind as usize] {
                h.saturating_record(micros);
            }
        }
    }
}

/// Probes `/healthz` every [`PROBE_EVERY`] and closes an interval every `every`.
///
/// The probes run on a thread of their own with blocking sockets ([`prober`]): this
/// runtime is busy with thousands of watch streams, and a probe waiting to be polled here
/// would measure the bench, not the server (kubelet probes from a process of its own).
async fn series(
    addr: SocketAddr,
    every: Duration,
    pid: Option<u32>,
    start: Instant,
    counters: Arc<Mutex<SlowCounters>>,
    stop: CancellationToken,
) -> Vec<SoakPoint> {
    let mut points = Vec::new();
    let mut latency = histogram();
    let (mut ok, mut failed) = (0u64, 0u64);
    let prober_stop = Arc::new(AtomicBool::new(false));
    let (tx, mut probes) = tokio::sync::mpsc::channel(64);
    let prober = {
        let stop = prober_stop.clone();
        std::thread::Builder::new()
            .name("healthz-prober".into())
            .spawn(move || prober(addr, &stop, &tx))
    };
    let mut close = tokio::time::interval_at(start + every, every);
    loop {
        tokio::select! {
            // Stopping first: a point taken while the slow clients stop would count them
            // as gone.
            biased;
            () = stop.cancelled() => break,
            Some(probe) = probes.recv() => match probe {
                Some(micros) => {
                    ok += 1;
                    latency.saturating_record(micros);
                }
                None => failed += 1,
            },
            at = close.tick() => {
                let slow_open = counters.lock().unwrap_or_else(|e| e.into_inner()).open;
                points.push(SoakPoint {
                    t_seconds: at.duration_since(start).as_secs_f64(),
                    healthz_ok: std::mem::take(&mut ok),
                    healthz_failed: std::mem::take(&mut failed),
                    healthz_ms: Percentiles::from_micros(&latency),
                    rss_bytes: pid.and_then(rss_bytes),
                    slow_open,
                });
                latency.reset();
            }
        }
    }
    prober_stop.store(true, Ordering::Relaxed);
    drop(probes);
    if let Ok(handle) = prober {
        // Ends within one probe (at most PROBE_TIMEOUT for connect and for read).
        let _ = tokio::task::spawn_blocking(move || handle.join()).await;
    }
    points
}

/// Probes every [`PROBE_EVERY`] until `stop` is set or the receiver is gone, sending each
/// result (see [`healthz`]).
fn prober(addr: SocketAddr, stop: &AtomicBool, results: &tokio::sync::mpsc::Sender<Option<u64>>) {
    let mut next = std::time::Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let now = std::time::Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        }
        next = std::time::Instant::now() + PROBE_EVERY;
        if results.blocking_send(healthz(addr)).is_err() {
            return;
        }
    }
}

/// One probe on a fresh connection, with blocking I/O: microseconds from connect to a `200`
/// status line, or `None` (no connection, no answer within [`PROBE_TIMEOUT`] per step, or
/// another status).
fn healthz(addr: SocketAddr) -> Option<u64> {
    use std::io::{Read as _, Write as _};
    let start = std::time::Instant::now();
    let mut s = std::net::TcpStream::connect_timeout(&addr, PROBE_TIMEOUT).ok()?;
    s.set_read_timeout(Some(PROBE_TIMEOUT)).ok()?;
    s.set_write_timeout(Some(PROBE_TIMEOUT)).ok()?;
    let _ = s.set_nodelay(true);
    let req = format!("GET /healthz HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).ok()?;
    let mut buf = [0u8; 256];
    let mut got = 0;
    while got < 12 {
        let n = s.read(&mut buf[got..]).ok()?;
        if n == 0 {
            return None;
        }
        got += n;
    }
    buf.starts_with(b"HTTP/1.1 200").then_some(())?;
    Some(start.elapsed().as_micros().min(u64::MAX as u128) as u64)
}

/// `VmRSS` of process `pid`, bytes (Linux).
fn rss_bytes(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    parse_vm_rss(&status)
}

fn parse_vm_rss(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line
        .trim_start_matches("VmRSS:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vm_rss_in_bytes() {
        let status = "Name:\therald\nVmPeak:\t  200 kB\nVmRSS:\t   51234 kB\nThreads:\t5\n";
        assert_eq!(parse_vm_rss(status), Some(51234 * 1024));
        assert_eq!(parse_vm_rss("Name:\tx\n"), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_has_a_resident_size() {
        assert!(rss_bytes(std::process::id()).is_some_and(|b| b > 0));
    }
}
