//! etcd's own durable write rate, the yardstick of `herald serve --store etcd`'s creates: the
//! same client crate, the same single connection, the same concurrency and value size, and
//! nothing of Herald in between.
//!
//! ```text
//! cargo run --release -p herald-server --example etcd_put -- ENDPOINTS CLIENTS VALUE_BYTES PUTS [put|create]
//! ```
//!
//! - `put` (the default): a plain `Put` of a new key, as etcd's `benchmark put` does;
//! - `create`: what the etcd backend sends for a create: `Txn(If(CreateRevision(key) == 0)
//!   Then(Put(key, value, lease)))`, with one lease shared by every write (the backend reuses
//!   a lease for a while, as kube-apiserver does).
//!
//! `CLIENTS` requests are in flight at once; the run ends after `PUTS` writes. It prints the
//! rate and the latency percentiles. `scripts/etcd/bench.sh` runs it side by side with
//! `herald bench` on the same etcd.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use etcd_client::{Client, Compare, CompareOp, PutOptions, Txn, TxnOp};

/// What one write is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Put,
    Create,
}

fn usage() -> ! {
    eprintln!("usage: etcd_put ENDPOINTS CLIENTS VALUE_BYTES PUTS [put|create]");
    std::process::exit(2)
}

fn arg<T: std::str::FromStr>(args: &[String], i: usize, what: &str) -> T {
    args.get(i).and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        eprintln!("etcd_put: {what} must be given as a whole number");
        usage()
    })
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
        Some(other) => {
            eprintln!("etcd_put: unknown mode {other:?}");
            usage()
        }
    };
    let endpoints: Vec<&str> = endpoints.split(',').collect();
    let client = Client::connect(&endpoints, None).await?;
    let lease = match mode {
        Mode::Create => Some(client.lease_client().grant(3600, None).await?.id()),
        Mode::Put => None,
    };
    let run = format!(
        "/etcd-put-bench/{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_nanos()
    );
    let value = vec![b'x'; value_bytes];
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let tasks: Vec<_> = (0..clients.max(1))
        .map(|_| {
            let (mut kv, next, value, run) =
                (client.kv_client(), next.clone(), value.clone(), run.clone());
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= puts {
                        return Ok::<_, etcd_client::Error>(latencies);
                    }
                    let key = format!("{run}/{i:09}");
                    let t = Instant::now();
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
    let pct = |p: f64| {
        latencies
            .get(((latencies.len() as f64 * p) as usize).min(latencies.len().saturating_sub(1)))
            .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
    };
    let name = if mode == Mode::Put { "put" } else { "create" };
    println!(
        "{name}: {puts} writes of {value_bytes} B, {clients} clients: {:.0}/s, p50 {:.2} ms, p99 {:.2} ms",
        puts as f64 / elapsed.as_secs_f64(),
        pct(0.50),
        pct(0.99)
    );
    Ok(())
}
