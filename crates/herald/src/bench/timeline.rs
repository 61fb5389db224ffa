//! Throughput and latency of a bench run over time, in fixed buckets: the data behind
//! `--plot` and the `timeline` of `-o json`.
//!
//! Bound: at most [`MAX_BUCKETS`] buckets. The bucket width is chosen from the planned
//! duration (1 s, or wider for runs longer than [`MAX_BUCKETS`] seconds); requests after the
//! last bucket's start land in the last bucket. Each used bucket holds one latency histogram
//! at 2 significant digits (about 13 kB).

use std::sync::Mutex;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;
use tokio::time::Instant;

/// Most buckets a timeline holds.
pub const MAX_BUCKETS: usize = 600;

#[derive(Default)]
struct Bucket {
    succeeded: u64,
    failed: u64,
    latency: Option<Histogram<u32>>,
}

/// One bucket of the run.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Point {
    /// Start of the bucket, seconds since the load started.
    pub at_seconds: f64,
    /// Width of the bucket, seconds.
    pub width_seconds: f64,
    /// Creates answered 201 in this bucket.
    pub succeeded: u64,
    /// Creates that failed in this bucket.
    pub failed: u64,
    /// `succeeded / width`.
    pub throughput_per_second: f64,
    /// Median latency of this bucket's successful creates, milliseconds (0 without any).
    pub p50_ms: f64,
    /// 99th percentile latency, milliseconds.
    pub p99_ms: f64,
}

/// Buckets shared by all bench clients (one short lock per request).
pub struct Timeline {
    start: Instant,
    width: Duration,
    buckets: Mutex<Vec<Bucket>>,
}

impl Timeline {
    /// A timeline starting at `start` for a run planned to last `planned`.
    pub fn new(start: Instant, planned: Duration) -> Timeline {
        let width = Duration::from_secs(1).max(planned.div_f64(MAX_BUCKETS as f64));
        // Whole milliseconds keep the bucket starts readable.
        let width = Duration::from_millis(width.as_millis().max(1) as u64);
        Timeline {
            start,
            width,
            buckets: Mutex::new(Vec::new()),
        }
    }

    /// Records one request that finished at `at` after `micros`.
    pub fn record(&self, at: Instant, micros: u64, ok: bool) {
        let idx = (at.saturating_duration_since(self.start).as_nanos() / self.width.as_nanos())
            .min(MAX_BUCKETS as u128 - 1) as usize;
        let mut b = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        if b.len() <= idx {
            b.resize_with(idx + 1, Bucket::default);
        }
        let bucket = &mut b[idx];
        if ok {
            bucket.succeeded += 1;
            let h = bucket.latency.get_or_insert_with(|| {
                Histogram::new_with_bounds(1, 3_600_000_000, 2)
                    .unwrap_or_else(|_| unreachable!("static histogram bounds are valid"))
            });
            h.saturating_record(micros);
        } else {
            bucket.failed += 1;
        }
    }

    /// The buckets of a load that lasted `elapsed`, in order (empty buckets included). The
    /// last bucket is only as wide as the part of the load it covers, so a run that ends
    /// just after a bucket starts does not show a false drop in throughput.
    pub fn points(&self, elapsed: Duration) -> Vec<Point> {
        let b = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        let width = self.width.as_secs_f64();
        let total = elapsed.as_secs_f64();
        let last = b.len().saturating_sub(1);
        b.iter()
            .enumerate()
            .map(|(i, bucket)| {
                let at = i as f64 * width;
                let w = match i {
                    // Requests past the last bucket's start were clamped into it.
                    i if i == MAX_BUCKETS - 1 && total > at => total - at,
                    i if i == last && total > at => (total - at).min(width),
                    _ => width,
                };
                let q = |p: f64| {
                    bucket
                        .latency
                        .as_ref()
                        .map_or(0.0, |h| h.value_at_quantile(p) as f64 / 1000.0)
                };
                Point {
                    at_seconds: at,
                    width_seconds: w,
                    succeeded: bucket.succeeded,
                    failed: bucket.failed,
                    throughput_per_second: bucket.succeeded as f64 / w,
                    p50_ms: q(0.5),
                    p99_ms: q(0.99),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_land_in_their_second() {
        let start = Instant::now();
        let t = Timeline::new(start, Duration::from_secs(10));
        t.record(start + Duration::from_millis(100), 1000, true);
        t.record(start + Duration::from_millis(900), 3000, true);
        t.record(start + Duration::from_millis(2500), 2000, true);
        t.record(start + Duration::from_millis(2600), 0, false);
        let p = t.points(Duration::from_millis(2500));
        assert_eq!(p.len(), 3);
        assert_eq!((p[0].succeeded, p[0].failed), (2, 0));
        assert_eq!(p[1].succeeded, 0);
        assert_eq!((p[2].succeeded, p[2].failed, p[2].at_seconds), (1, 1, 2.0));
        // The last bucket covers only the half second the load ran in it.
        assert_eq!((p[2].width_seconds, p[2].throughput_per_second), (0.5, 2.0));
        assert!((p[0].p99_ms - 3.0).abs() < 0.05, "{:?}", p[0]);
        assert!((p[2].p50_ms - 2.0).abs() < 0.05, "{:?}", p[2]);
        assert_eq!(p[0].throughput_per_second, 2.0);
    }

    #[test]
    fn long_runs_get_wider_buckets_and_stay_bounded() {
        let start = Instant::now();
        let t = Timeline::new(start, Duration::from_secs(3 * 3600));
        assert_eq!(t.width, Duration::from_secs(18));
        t.record(start + Duration::from_secs(10 * 3600), 5, true);
        let p = t.points(Duration::from_secs(10 * 3600));
        assert_eq!(p.len(), MAX_BUCKETS);
        let last = &p[MAX_BUCKETS - 1];
        assert_eq!(last.at_seconds + last.width_seconds, 10.0 * 3600.0);
    }
}
