//! What a bench run measured, as text for people and as JSON (`-o json`, stable field names).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use hdrhistogram::Histogram;
use indicatif::DecimalBytes;
use serde::Serialize;

use super::encoding::Encoding;
use super::soak::SoakSummary;
use super::timeline::Point;
use super::workload::{Group, Verb, Workload};

/// Latency percentiles in milliseconds.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Percentiles {
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest value seen.
    pub max: f64,
    /// Arithmetic mean.
    pub mean: f64,
}

impl Percentiles {
    /// Percentiles of a histogram recorded in microseconds (all zero when it is empty).
    pub fn from_micros(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return Self::default();
        }
        let ms = |v: u64| v as f64 / 1000.0;
        Percentiles {
            p50: ms(h.value_at_quantile(0.50)),
            p95: ms(h.value_at_quantile(0.95)),
            p99: ms(h.value_at_quantile(0.99)),
            max: ms(h.max()),
            mean: h.mean() / 1000.0,
        }
    }
}

/// What the watchers saw.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct WatchSummary {
    /// Number of watch streams.
    pub watchers: usize,
    /// Events each watcher should have received (the run's successful requests: ADDED for
    /// creates, MODIFIED for patches).
    pub expected_per_watcher: u64,
    /// Fewest events of this run any watcher received.
    pub received_min: u64,
    /// Most events of this run any watcher received.
    pub received_max: u64,
    /// Sum over all watchers.
    pub received_total: u64,
    /// Watchers that received every event.
    pub complete_watchers: usize,
    /// Times a watch stream ended early or failed and was reopened.
    pub reconnects: u64,
    /// Delivery lag (receipt time − send time embedded in the event), milliseconds.
    pub lag_ms: Percentiles,
    /// Watch body bytes received, over all watchers.
    pub received_bytes: u64,
    /// `received_bytes` over the time the watches ran (the load and the drain after it).
    pub bytes_per_second: f64,
}

/// The timing of one full list.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct ListSummary {
    /// The path listed.
    pub path: String,
    /// HTTP status of the list.
    pub status: u16,
    /// Items in the list.
    pub items: u64,
    /// Bytes in the response body.
    pub bytes: u64,
    /// From sending the request to the last byte of the response, milliseconds.
    pub millis: f64,
}

/// The whole summary of a bench run.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Summary {
    /// The server benchmarked.
    pub server: String,
    /// The namespace events were created in.
    pub namespace: String,
    /// What each request did (`create` or `patch`).
    pub verb: Verb,
    /// The workload shape.
    pub workload: Workload,
    /// The API group (`core` or `events.k8s.io`).
    pub group: Group,
    /// The wire encoding (`json` or `protobuf`).
    pub encoding: Encoding,
    /// Concurrent clients.
    pub clients: usize,
    /// Target requests/s (open loop), or `null` for closed loop (as fast as answers come).
    pub rate: Option<f64>,
    /// Wall time of the load phase, seconds.
    pub duration_seconds: f64,
    /// Requests sent (creates or patches, by `verb`).
    pub requests: u64,
    /// Requests answered with success: 201 for a create, 200 for a patch.
    pub succeeded: u64,
    /// Requests that failed (any other status, or no answer).
    pub failed: u64,
    /// Successful requests per second over the load phase.
    pub throughput_per_second: f64,
    /// Request latency (from the intended send time, so open-loop queueing is included).
    pub latency_ms: Percentiles,
    /// Failures by HTTP status code, or `connect` / `io` / `timeout`.
    pub errors: BTreeMap<String, u64>,
    /// Present when watchers ran.
    pub watch: Option<WatchSummary>,
    /// Present with `--list`.
    pub list: Option<ListSummary>,
    /// True when Ctrl-C ended the run early.
    pub interrupted: bool,
    /// Throughput and latency per time bucket (what `--plot` charts).
    pub timeline: Vec<Point>,
    /// The soak's slow clients and series (`--slow-clients`, `--series`), when asked for.
    pub soak: Option<SoakSummary>,
}

impl Summary {
    /// The human-readable summary.
    pub fn render(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "herald bench: {} {:?} {} {:?} clients={} rate={} against {} (namespace {})",
            if self.interrupted {
                "interrupted"
            } else {
                "done"
            },
            self.workload,
            self.group.name(),
            self.encoding,
            self.clients,
            self.rate
                .map_or("closed-loop".to_string(), |r| format!("{r}/s")),
            self.server,
            self.namespace,
        );
        let noun = self.verb.noun();
        let _ = writeln!(
            s,
            "  {noun:<11} {} sent, {} ok, {} failed in {:.2}s = {:.0} {noun}/s",
            self.requests,
            self.succeeded,
            self.failed,
            self.duration_seconds,
            self.throughput_per_second
        );
        let l = &self.latency_ms;
        let _ = writeln!(
            s,
            "  latency     p50 {:.2}ms  p95 {:.2}ms  p99 {:.2}ms  max {:.2}ms",
            l.p50, l.p95, l.p99, l.max
        );
        if !self.errors.is_empty() {
            let errs: Vec<String> = self
                .errors
                .iter()
                .map(|(k, v)| format!("{k}: {v}"))
                .collect();
            let _ = writeln!(s, "  errors      {}", errs.join(", "));
        }
        if let Some(w) = &self.watch {
            let _ = writeln!(
                s,
                "  watch       {} watchers, received {}..{} of {} each ({} complete, {} reconnects)",
                w.watchers,
                w.received_min,
                w.received_max,
                w.expected_per_watcher,
                w.complete_watchers,
                w.reconnects
            );
            let _ = writeln!(
                s,
                "  watch lag   p50 {:.2}ms  p99 {:.2}ms  max {:.2}ms",
                w.lag_ms.p50, w.lag_ms.p99, w.lag_ms.max
            );
            let _ = writeln!(
                s,
                "  watch data  {} received = {}/s ({} bytes per event)",
                DecimalBytes(w.received_bytes),
                DecimalBytes(w.bytes_per_second as u64),
                w.received_bytes.checked_div(w.received_total).unwrap_or(0)
            );
        }
        if let Some(l) = &self.list {
            let _ = writeln!(
                s,
                "  list        {} items ({} bytes, status {}) in {:.1}ms",
                l.items, l.bytes, l.status, l.millis
            );
        }
        if let Some(soak) = &self.soak {
            render_soak(&mut s, soak);
        }
        s
    }
}

/// The soak's lines: the slow clients, then one line per interval of the series.
fn render_soak(s: &mut String, soak: &SoakSummary) {
    if let Some(slow) = &soak.slow {
        let secs = |ms: f64| ms / 1000.0;
        let _ = writeln!(
            s,
            "  slow        {} clients, {} connections; ended by the server: {} slow headers after p50 {:.1}s max {:.1}s, {} slow bodies after p50 {:.1}s max {:.1}s",
            slow.clients,
            slow.connections,
            slow.ended_headers,
            secs(slow.headers_lifetime_ms.p50),
            secs(slow.headers_lifetime_ms.max),
            slow.ended_bodies,
            secs(slow.bodies_lifetime_ms.p50),
            secs(slow.bodies_lifetime_ms.max),
        );
    }
    if soak.series.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "  series      {:>7} {:>10} {:>10} {:>10} {:>10} {:>10} {:>9}   (every {:.0}s)",
        "t", "healthz p50", "p99", "max", "ok/failed", "rss", "slow open", soak.interval_seconds
    );
    for p in &soak.series {
        let rss = p
            .rss_bytes
            .map_or("-".to_string(), |b| DecimalBytes(b).to_string());
        let _ = writeln!(
            s,
            "              {:>6.0}s {:>9.2}ms {:>8.2}ms {:>8.2}ms {:>10} {:>10} {:>9}",
            p.t_seconds,
            p.healthz_ms.p50,
            p.healthz_ms.p99,
            p.healthz_ms.max,
            format!("{}/{}", p.healthz_ok, p.healthz_failed),
            rss,
            p.slow_open
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watch_data_is_in_decimal_units_with_the_bytes_per_event() {
        let s = Summary {
            server: "http://127.0.0.1:1".into(),
            namespace: "n".into(),
            verb: Verb::Create,
            workload: Workload::Unique,
            group: Group::Core,
            encoding: Encoding::Json,
            clients: 1,
            rate: None,
            duration_seconds: 10.0,
            requests: 2,
            succeeded: 2,
            failed: 0,
            throughput_per_second: 0.2,
            latency_ms: Percentiles::default(),
            errors: BTreeMap::new(),
            watch: Some(WatchSummary {
                watchers: 1_000,
                received_total: 21_960_000,
                received_bytes: 23_145_840_000,
                bytes_per_second: 2_303_000_000.0,
                ..WatchSummary::default()
            }),
            list: None,
            interrupted: false,
            timeline: Vec::new(),
            soak: None,
        };
        assert!(
            s.render()
                .contains("  watch data  23.15 GB received = 2.30 GB/s (1054 bytes per event)\n"),
            "{}",
            s.render()
        );
    }

    #[test]
    fn requests_are_named_by_verb() {
        let mut s = Summary {
            server: "http://127.0.0.1:1".into(),
            namespace: "n".into(),
            verb: Verb::Patch,
            workload: Workload::Storm,
            group: Group::Core,
            encoding: Encoding::Json,
            clients: 1,
            rate: None,
            duration_seconds: 2.0,
            requests: 9,
            succeeded: 8,
            failed: 1,
            throughput_per_second: 4.0,
            latency_ms: Percentiles::default(),
            errors: BTreeMap::new(),
            watch: None,
            list: None,
            interrupted: false,
            timeline: Vec::new(),
            soak: None,
        };
        assert!(
            s.render()
                .contains("\n  patches     9 sent, 8 ok, 1 failed in 2.00s = 4 patches/s\n"),
            "{}",
            s.render()
        );
        s.verb = Verb::Create;
        assert!(
            s.render()
                .contains("\n  creates     9 sent, 8 ok, 1 failed in 2.00s = 4 creates/s\n"),
            "{}",
            s.render()
        );
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["verb"], "create");
    }

    #[test]
    fn the_soak_series_has_a_line_per_interval() {
        use super::super::soak::{SlowSummary, SoakPoint};
        let soak = SoakSummary {
            slow: Some(SlowSummary {
                clients: 200,
                connections: 400,
                ended_headers: 150,
                ended_bodies: 90,
                headers_lifetime_ms: Percentiles {
                    p50: 32_000.0,
                    max: 32_400.0,
                    ..Percentiles::default()
                },
                bodies_lifetime_ms: Percentiles {
                    p50: 60_000.0,
                    max: 60_900.0,
                    ..Percentiles::default()
                },
            }),
            interval_seconds: 30.0,
            series: vec![
                SoakPoint {
                    t_seconds: 30.0,
                    healthz_ok: 120,
                    healthz_failed: 0,
                    healthz_ms: Percentiles {
                        p50: 0.4,
                        p99: 2.5,
                        max: 3.0,
                        ..Percentiles::default()
                    },
                    rss_bytes: Some(52_000_000),
                    slow_open: 200,
                },
                SoakPoint {
                    t_seconds: 60.0,
                    healthz_ok: 119,
                    healthz_failed: 1,
                    ..SoakPoint::default()
                },
            ],
        };
        let mut s = String::new();
        render_soak(&mut s, &soak);
        assert!(
            s.contains("200 clients, 400 connections; ended by the server: 150 slow headers after p50 32.0s max 32.4s, 90 slow bodies after p50 60.0s max 60.9s"),
            "{s}"
        );
        let lines: Vec<&str> = s.lines().collect();
        assert!(
            lines[1].contains("healthz p50") && lines[1].contains("(every 30s)"),
            "{s}"
        );
        let first: Vec<&str> = lines[2].split_whitespace().collect();
        assert_eq!(
            first,
            [
                "30s", "0.40ms", "2.50ms", "3.00ms", "120/0", "52.00", "MB", "200"
            ],
            "{s}"
        );
        let second: Vec<&str> = lines[3].split_whitespace().collect();
        assert_eq!(second[4..], ["119/1", "-", "0"], "{s}");
        assert_eq!(s.lines().count(), 4, "{s}");
    }

    #[test]
    fn percentiles_are_in_milliseconds() {
        let mut h = Histogram::<u64>::new(3).unwrap();
        for v in 1..=100u64 {
            h.record(v * 1000).unwrap();
        }
        let p = Percentiles::from_micros(&h);
        assert!((p.p50 - 50.0).abs() < 0.1, "{p:?}");
        assert!((p.p99 - 99.0).abs() < 0.1, "{p:?}");
        assert!((p.max - 100.0).abs() < 0.1, "{p:?}");
        assert_eq!(
            Percentiles::from_micros(&Histogram::new(3).unwrap()),
            Percentiles::default()
        );
    }
}
