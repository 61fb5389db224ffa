//! etcd's own durable write rate and watch delivery, the yardstick of `herald serve --store
//! etcd`'s creates and watch fan-out: the same client crate, the same single connection, the
//! same concurrency and value size, and nothing of Herald in between.
//!
//! ```text
//! cargo run --release -p herald-server --example etcd_put -- ENDPOINTS CLIENTS VALUE_BYTES PUTS [put|create|watch] [RATE] [WATCHERS]
//! ```
//!
//! - `put` (the default): a plain `Put` of a new key, as etcd's `benchmark put` does;
//! - `create`: what the etcd backend sends for a create: `Txn(If(CreateRevision(key) == 0)
//!   Then(Put(key, value, lease)))`, with one lease shared by every write (the backend reuses
//!   a lease for a while, as kube-apiserver does);
//! - `watch`: the creates of `create`, with `WATCHERS` (default 1) etcd watches on the run's
//!   keys, each measuring the delivery lag of every write as `herald bench --watchers` does
//!   (receipt time − the time the write was sent, which each value carries). Herald's replica
//!   holds one such watch and fans it out itself, so the lag with one watcher is the floor of
//!   any replica's.
//!
//! `CLIENTS` requests are in flight at once; the run ends after `PUTS` writes. `RATE` (writes
//! per second over all clients; 0, the default, is as fast as they go) paces the writes as
//! `herald bench --rate` does. It prints the rate, the latency percentiles and, for `watch`,
//! the lag percentiles. `scripts/etcd/bench.sh` runs it side by side with `herald bench` on
//! the same etcd.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use etcd_client::{Client, Compare, CompareOp, PutOptions, Txn, TxnOp, WatchOptions};

/// What one write is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Put,
    Create,
    Watch,
}

/// The digits at the start of a `watch` value: microseconds from the run's start to the send.
const STAMP: usize = 20;

fn usage() -> ! {
    eprintln!(
        "usage: etcd_put ENDPOINTS CLIENTS VALUE_BYTES PUTS [put|create|watch] [RATE] [WATCHERS]"
    );
    std::process::exit(2)
}

fn arg<T: std::str::FromStr>(args: &[String], i: usize, what: &str) -> T {
    args.get(i).and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        eprintln!("etcd_put: {what} must be given as a whole number");
        usage()
    })
}

/// The `p` quantile of sorted `xs`, in milliseconds.
fn pct(xs: &[Duration], p: f64) -> f64 {
    xs.get(((xs.len() as f64 * p) as usize).min(xs.len().saturating_sub(1)))
        .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(endpoints) = args.first() else {
        usage()
    };
    let clients: usize = arg(&args, 1, "CLIENTS");
    let value_bytes: usize = arg(&args, 2, "VALUE_BYTES");
    let puts: usize = arg(&args, 3, "PUTS");
    let mode = match args.get(4).map(String::as_str) {
        None | Some("put") => Mode::Put,
        Some("create") => Mode::Create,
        Some("watch") => Mode::Watch,
        Some(other) => {
            eprintln!("etcd_put: unknown mode {other:?}");
            usage()
        }
    };
    let rate: u64 = args.get(5).map_or(0, |_| arg(&args, 5, "RATE"));
    let watchers: usize = args.get(6).map_or(1, |_| arg(&args, 6, "WATCHERS"));
    let endpoints: Vec<&str> = endpoints.split(',').collect();
    let client = Client::connect(&endpoints, None).await?;
    let lease = match mode {
        Mode::Create | Mode::Watch => Some(client.lease_client().grant(3600, None).await?.id()),
        Mode::Put => None,
    };
    let run = format!(
        "/etcd-put-bench/{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_nanos()
    );
    let started = Instant::now();
    // Each watcher counts the run's writes it has seen and ends when it has seen them all.
    let mut watches = Vec::new();
    if mode == Mode::Watch {
        for _ in 0..watchers.max(1) {
            let mut stream = client
                .watch_client()
                .watch(format!("{run}/"), Some(WatchOptions::new().with_prefix()))
                .await?;
            watches.push(tokio::spawn(async move {
                let mut lags = Vec::with_capacity(puts);
                while lags.len() < puts {
                    let Some(resp) = stream.message().await? else {
                        break;
                    };
                    let now = started.elapsed();
                    for ev in resp.events() {
                        let sent = ev
                            .kv()
                            .and_then(|kv| kv.value().get(..STAMP))
                            .and_then(|s| std::str::from_utf8(s).ok()?.parse::<u64>().ok());
                        if let Some(sent) = sent {
                            lags.push(now.saturating_sub(Duration::from_micros(sent)));
                        }
                    }
                }
                Ok::<_, etcd_client::Error>(lags)
            }));
        }
    }
    let period = (rate > 0).then(|| Duration::from_secs_f64(1.0 / rate as f64));
    let next = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..clients.max(1))
        .map(|_| {
            let (mut kv, next, run) = (client.kv_client(), next.clone(), run.clone());
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                let mut value = vec![b'x'; value_bytes.max(STAMP)];
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= puts {
                        return Ok::<_, etcd_client::Error>(latencies);
                    }
                    if let Some(period) = period {
                        tokio::time::sleep_until((started + period * i as u32).into()).await;
                    }
                    let key = format!("{run}/{i:09}");
                    let t = Instant::now();
                    if mode == Mode::Watch {
                        let stamp = format!("{:020}", started.elapsed().as_micros());
                        value[..STAMP].copy_from_slice(stamp.as_bytes());
                    }
                    match lease {
                        None => {
                            kv.put(key, value.clone(), None).await?;
                        }
                        Some(id) => {
                            let put = PutOptions::new().with_lease(id);
                            let txn = Txn::new()
                                .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
                                .and_then([TxnOp::put(key, value.clone(), Some(put))]);
                            kv.txn(txn).await?;
                        }
                    }
                    latencies.push(t.elapsed());
                }
            })
        })
        .collect();
    let mut latencies: Vec<Duration> = Vec::with_capacity(puts);
    for t in tasks {
        latencies.extend(t.await??);
    }
    let elapsed = started.elapsed();
    latencies.sort_unstable();
    let name = match mode {
        Mode::Put => "put",
        Mode::Create | Mode::Watch => "create",
    };
    println!(
        "{name}: {puts} writes of {value_bytes} B, {clients} clients: {:.0}/s, p50 {:.2} ms, p99 {:.2} ms",
        puts as f64 / elapsed.as_secs_f64(),
        pct(&latencies, 0.50),
        pct(&latencies, 0.99)
    );
    if mode == Mode::Watch {
        let n = watches.len();
        let mut lags: Vec<Duration> = Vec::with_capacity(puts * n);
        for w in watches {
            lags.extend(w.await??);
        }
        lags.sort_unstable();
        println!(
            "etcd watch lag, {n} watchers, {} deliveries: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
            lags.len(),
            pct(&lags, 0.50),
            pct(&lags, 0.99),
            lags.last().map_or(0.0, |d| d.as_secs_f64() * 1000.0)
        );
    }
    Ok(())
}
