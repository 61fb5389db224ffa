//! etcd's own time to read a prefix, the yardstick of a list through `herald serve --store
//! etcd`: the same client crate and ranges as the backend's list (at one revision, in ranges
//! of `CHUNK` keys), and nothing of Herald in between.
//!
//! ```text
//! cargo run --release -p herald-server --example etcd_range -- ENDPOINTS PREFIX [CHUNK] [RUNS]
//! ```
//!
//! `CHUNK` (default 25,000, as `EtcdOptions::range_keys`; 0 reads the prefix in one range)
//! keys per range, each next range requested after the last arrives; `RUNS` (default 3)
//! reads. Prints each read's keys, value bytes and wall time.

use std::time::Instant;

use etcd_client::{Client, GetOptions};

fn usage() -> ! {
    eprintln!("usage: etcd_range ENDPOINTS PREFIX [CHUNK] [RUNS]");
    std::process::exit(2)
}

fn arg(args: &[String], i: usize, default: i64, what: &str) -> i64 {
    match args.get(i) {
        None => default,
        Some(s) => s.parse().unwrap_or_else(|_| {
            eprintln!("etcd_range: {what} must be given as a whole number");
            usage()
        }),
    }
}

/// The first key after every key starting with `prefix`.
fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(endpoints), Some(prefix)) = (args.first(), args.get(1)) else {
        usage()
    };
    let chunk = arg(&args, 2, 25_000, "CHUNK");
    let runs = arg(&args, 3, 3, "RUNS");
    let endpoints: Vec<&str> = endpoints.split(',').collect();
    // As the backend does (and kube-apiserver): no 4 MiB bound on a response.
    let mut kv = Client::connect(&endpoints, None)
        .await?
        .kv_client()
        .max_decoding_message_size(i32::MAX as usize);
    let end = prefix_end(prefix.as_bytes());
    for _ in 0..runs {
        let started = Instant::now();
        let (mut keys, mut bytes, mut from, mut revision) =
            (0usize, 0usize, prefix.clone().into_bytes(), 0);
        loop {
            let mut opts = GetOptions::new().with_range(end.clone()).with_limit(chunk);
            if revision > 0 {
                opts = opts.with_revision(revision);
            }
            let resp = kv.get(from.clone(), Some(opts)).await?;
            if revision == 0 {
                revision = resp.header().map_or(0, |h| h.revision());
            }
            keys += resp.kvs().len();
            bytes += resp.kvs().iter().map(|kv| kv.value().len()).sum::<usize>();
            match resp.kvs().last() {
                Some(last) if resp.more() => {
                    from = last.key().to_vec();
                    from.push(0);
                }
                _ => break,
            }
        }
        println!(
            "range: {keys} keys, {bytes} value bytes, ranges of {chunk}: {:.0} ms",
            started.elapsed().as_secs_f64() * 1000.0
        );
    }
    Ok(())
}
