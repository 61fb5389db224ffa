//! `herald bench`: load against an events API server — concurrent creates, or patches that
//! count repeats as client-go's recorders do (closed or open loop), optional watchers
//! measuring delivery lag, an optional timed full list — and a summary as text or JSON.
//!
//! Requests go over plain HTTP/1.1 keep-alive, one connection per client. Ctrl-C stops the
//! load (in-flight requests finish, so the counts stay exact) and still prints the summary.
//! With `--plot`, throughput and latency over time are charted to an SVG or PNG file.

mod conn;
mod encoding;
mod list;
mod plot;
mod soak;
mod summary;
mod target;
mod timeline;
mod watch;
mod workload;

use std::collections::BTreeMap;
use std::io::IsTerminal as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::Context as _;
use bytes::Bytes;
use hdrhistogram::Histogram;
use herald_core::clock::{Clock, SystemClock};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use self::conn::{Conn, Endpoint, Failure};
pub use self::encoding::Encoding;
use self::summary::{Percentiles, Summary, WatchSummary};
use self::timeline::Timeline;
use self::watch::{WatchCounters, Watcher};
pub use self::workload::{Group, Verb, Workload};
use crate::usage::usage_bail;

/// Output format of the summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// Human-readable lines.
    Text,
    /// One JSON object with stable field names.
    Json,
}

/// Arguments of `herald bench`.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// The server's URL (https:// with the kubeconfig's CA and client certificate, or http://).
    /// Default: the kubeconfig's server, else https://127.0.0.1:6443.
    #[arg(short = 's', long, value_name = "URL")]
    server: Option<String>,
    /// Kubeconfig file to take the server from (default: $KUBECONFIG or ~/.kube/config).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Kubeconfig context to use (default: the current context).
    #[arg(long)]
    context: Option<String>,
    /// Concurrent clients, each with its own keep-alive connection (1 to 100000).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    clients: u32,
    /// How long to load the server, e.g. 30s or 2m.
    #[arg(long, default_value = "30s", value_parser = crate::parse_duration)]
    duration: Duration,
    /// Stop after this many requests in total (whichever of this and --duration comes first).
    /// With `--verb patch`, the one create per client before the load is not counted.
    #[arg(long)]
    requests: Option<u64>,
    /// Open loop: requests per second over all clients, from 0.001 to 1000000 (latency
    /// counts from the scheduled send time). Without it, closed loop: each client sends its
    /// next request when the last answers.
    #[arg(long, value_name = "PER_SECOND", value_parser = crate::parse_rate)]
    rate: Option<f64>,
    /// Watch streams to open on the namespace; each measures the delivery lag of every event.
    #[arg(long, default_value_t = 0)]
    watchers: u32,
    /// What each request does: create a new event, or patch the client's own event as
    /// client-go's recorders count a repeat.
    #[arg(long, value_enum, default_value_t = Verb::Create)]
    verb: Verb,
    /// How alike the created events are.
    #[arg(long, value_enum, default_value_t = Workload::Unique)]
    workload: Workload,
    /// The API group to create, watch and list events in.
    #[arg(long, value_enum, default_value_t = Group::Core)]
    group: Group,
    /// How creates, all answers, watches and the list are encoded: JSON (kubectl's) or
    /// Kubernetes protobuf (what kube's own components and protobuf-configured client-go
    /// programs send). Patches are JSON in both, as client-go sends them.
    #[arg(long, value_enum, default_value_t = Encoding::Json)]
    encoding: Encoding,
    /// Namespace to create (and watch, and list) events in.
    #[arg(short, long, default_value = "herald-bench")]
    namespace: String,
    /// After the load, time one full list of the namespace's events.
    #[arg(long)]
    list: bool,
    /// How long watchers may take to catch up after the load ends.
    #[arg(long, default_value = "10s", value_parser = crate::parse_duration)]
    drain: Duration,
    /// Summary format.
    #[arg(short, long, value_enum, default_value_t = Output::Text)]
    output: Output,
    /// Also chart throughput and latency over time to this file (.svg or .png).
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
    /// Soak: connections that trickle their request beside the load (half send header
    /// lines, half a create's body, one piece every --slow-every); each reopens when the
    /// server ends it, and the summary says how long they lived.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=100_000))]
    slow_clients: u32,
    /// How often a slow client sends its next piece.
    #[arg(long, default_value = "1s", value_parser = crate::parse_duration)]
    slow_every: Duration,
    /// Soak: report /healthz latency (probed every 250 ms on fresh connections: p50, p99,
    /// failures) and, with --server-pid, the server's resident memory, per interval of this
    /// length, e.g. 30s.
    #[arg(long, value_name = "INTERVAL", value_parser = crate::parse_duration)]
    series: Option<Duration>,
    /// The server's process id, when it runs on this machine: its resident memory (VmRSS in
    /// /proc/PID/status) goes into the --series.
    #[arg(long, value_name = "PID")]
    server_pid: Option<u32>,
}

/// Runs the bench and prints the summary.
pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    if !herald_core::naming::is_dns1123_label(&args.namespace) {
        usage_bail!(
            "--namespace {:?} is not a namespace name (lowercase letters, digits and '-', at most 63)",
            args.namespace
        );
    }
    // Checked before any load: a plot that cannot be written must not cost a run.
    let plot_target = args.plot.as_deref().map(plot::Target::check).transpose()?;
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    let summary = runtime.block_on(bench(&args));
    let summary = match summary {
        Ok(s) => s,
        Err(e) => {
            if let Some(t) = plot_target {
                t.abandon();
            }
            return Err(e);
        }
    };
    // The summary first: it is the run's result, whatever becomes of the plot.
    let text = match args.output {
        Output::Json => format!("{}\n", serde_json::to_string_pretty(&summary)?),
        Output::Text => summary.render(),
    };
    crate::stdout::print(&text)?;
    if let Some(target) = plot_target {
        let title = format!(
            "herald bench: {} clients, {}, {:?} workload, {} against {}",
            summary.clients,
            summary.verb.noun(),
            summary.workload,
            rate_text(summary.rate),
            summary.server
        );
        let path = target.path.clone();
        target.write(&summary.timeline, &title, summary.verb)?;
        if args.output == Output::Text {
            eprintln!("plot written to {}", path.display());
        }
    }
    Ok(())
}

fn rate_text(rate: Option<f64>) -> String {
    match rate {
        Some(r) => format!("{r}/s open loop"),
        None => "closed loop".to_string(),
    }
}

/// What one creating client measured.
struct ClientResult {
    latency: Histogram<u64>,
    errors: BTreeMap<String, u64>,
    succeeded: u64,
    sent: u64,
}

/// Live totals for the progress bar.
#[derive(Default)]
struct Live {
    issued: AtomicU64,
    ok: AtomicU64,
    failed: AtomicU64,
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3)
        .unwrap_or_else(|_| unreachable!("static histogram bounds are valid"))
}

async fn bench(args: &BenchArgs) -> anyhow::Result<Summary> {
    let url = target::resolve(
        args.server.as_deref(),
        args.kubeconfig.as_deref(),
        args.context.as_deref(),
    )
    .await?;
    let endpoint = url.endpoint;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    if endpoint.is_tls() && (args.slow_clients > 0 || args.series.is_some()) {
        crate::usage::usage_bail!(
            "--slow-clients and --series speak plain http: run the soak against a server started with --insecure-plain-http"
        );
    }
    probe(&endpoint, &url.display).await?;
    if args.encoding == Encoding::Protobuf {
        probe_protobuf(&endpoint, &url.display, &args.namespace).await?;
    }

    let run = format!(
        "{:x}{:x}",
        (clock.now().as_nanosecond() as u64) & 0xff_ffff,
        std::process::id() & 0xfff
    );
    let interrupt = CancellationToken::new();
    {
        let interrupt = interrupt.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                interrupt.cancel();
            }
        });
    }
    let progress = progress_bar(args);

    let requests = Arc::new(Requests {
        group: args.group,
        workload: args.workload,
        encoding: args.encoding,
        collection: args.group.collection(&args.namespace),
        namespace: args.namespace.clone(),
        run: run.clone(),
    });
    if args.series.is_some_and(|d| d.is_zero()) || args.slow_every.is_zero() {
        usage_bail!("--series and --slow-every must be longer than 0, e.g. 30s and 1s");
    }
    if args.server_pid.is_some() && args.series.is_none() {
        usage_bail!(
            "--server-pid is sampled once per --series interval: add --series, e.g. --series 30s"
        );
    }
    if args.verb.patches() {
        progress.set_message(format!("creating the {} events to patch", args.clients));
        tokio::select! {
            created = create_patch_targets(&endpoint, &requests, args.clients, clock.as_ref()) => created?,
            _ = interrupt.cancelled() => {
                progress.finish_and_clear();
                anyhow::bail!("interrupted while creating the events to patch; nothing was measured");
            }
        }
    }

    // Watchers first, from the namespace's current resourceVersion, so they see every event.
    let watch_stop = CancellationToken::new();
    let mut watchers = Vec::new();
    let mut counters = Vec::new();
    if args.watchers > 0 {
        let rv = current_rv(&endpoint, &args.namespace).await?;
        for _ in 0..args.watchers {
            let c = Arc::new(WatchCounters::default());
            counters.push(c.clone());
            let w = Watcher {
                endpoint: endpoint.clone(),
                namespace: args.namespace.clone(),
                from_rv: rv.clone(),
                run: run.clone(),
                group: args.group,
                encoding: args.encoding,
                clock: clock.clone(),
                counters: c,
                stop: watch_stop.clone(),
            };
            watchers.push(tokio::spawn(w.run()));
        }
        // Let the streams open before the load so connection setup is not counted as lag.
        let open_by = Instant::now() + Duration::from_secs(10);
        while counters.iter().any(|c| c.open.load(Ordering::Relaxed) == 0)
            && Instant::now() < open_by
            && !interrupt.is_cancelled()
        {
            progress.set_message(format!(
                "opening watches: {}/{}",
                counters
                    .iter()
                    .filter(|c| c.open.load(Ordering::Relaxed) > 0)
                    .count(),
                args.watchers
            ));
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    // The load.
    let load_stop = interrupt.child_token();
    let live = Arc::new(Live::default());
    let start = Instant::now();
    let soak = (args.slow_clients > 0 || args.series.is_some()).then(|| {
        soak::Soak::start(
            endpoint.addr,
            soak::SoakOptions {
                slow_clients: args.slow_clients,
                slow_every: args.slow_every,
                series: args.series,
                server_pid: args.server_pid,
                namespace: args.namespace.clone(),
            },
            start,
        )
    });
    let timeline = Arc::new(Timeline::new(start, args.duration));
    let clients = args.clients as usize;
    let mut tasks = Vec::with_capacity(clients);
    for client in 0..clients {
        let ctx = ClientCtx {
            endpoint: endpoint.clone(),
            client,
            clients,
            requests: requests.clone(),
            verb: args.verb,
            rate: args.rate,
            limit: args.requests,
            start,
            clock: clock.clone(),
            live: live.clone(),
            timeline: timeline.clone(),
            stop: load_stop.clone(),
        };
        tasks.push(tokio::spawn(ctx.run()));
    }
    {
        let load_stop = load_stop.clone();
        let d = args.duration;
        tokio::spawn(async move {
            tokio::time::sleep(d).await;
            load_stop.cancel();
        });
    }
    let results;
    let mut pending = futures::future::join_all(tasks);
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    loop {
        tokio::select! {
            r = &mut pending => { results = r; break; }
            _ = tick.tick() => {
                let el = start.elapsed();
                progress.set_position(el.as_millis().min(u64::MAX as u128) as u64);
                let ok = live.ok.load(Ordering::Relaxed);
                progress.set_message(format!(
                    "{ok} {} ({:.0}/s), {} failed",
                    args.verb.done(),
                    ok as f64 / el.as_secs_f64().max(1e-3),
                    live.failed.load(Ordering::Relaxed)
                ));
            }
        }
    }
    let elapsed = start.elapsed();
    let soak = match soak {
        Some(s) => Some(s.finish().await),
        None => None,
    };

    let mut latency = histogram();
    let mut errors = BTreeMap::new();
    let (mut succeeded, mut sent) = (0u64, 0u64);
    for r in results {
        let r = r.context("a bench client panicked")?;
        let _ = latency.add(&r.latency);
        for (k, v) in r.errors {
            *errors.entry(k).or_insert(0) += v;
        }
        succeeded += r.succeeded;
        sent += r.sent;
    }

    // Let the watchers catch up, then stop them.
    let watch = if watchers.is_empty() {
        None
    } else {
        let drain_by = Instant::now() + args.drain;
        while counters
            .iter()
            .any(|c| c.received.load(Ordering::Relaxed) < succeeded)
            && Instant::now() < drain_by
            && !interrupt.is_cancelled()
        {
            let done = counters
                .iter()
                .filter(|c| c.received.load(Ordering::Relaxed) >= succeeded)
                .count();
            progress.set_message(format!(
                "draining watches: {done}/{} complete",
                counters.len()
            ));
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let watched = start.elapsed();
        watch_stop.cancel();
        let mut done = Vec::with_capacity(watchers.len());
        for w in futures::future::join_all(watchers).await {
            done.push(w.context("a watcher panicked")?);
        }
        let received: Vec<u64> = counters
            .iter()
            .map(|c| c.received.load(Ordering::Relaxed))
            .collect();
        let received_bytes: u64 = counters
            .iter()
            .map(|c| c.bytes.load(Ordering::Relaxed))
            .sum();
        Some(WatchSummary {
            watchers: received.len(),
            expected_per_watcher: succeeded,
            received_min: received.iter().copied().min().unwrap_or(0),
            received_max: received.iter().copied().max().unwrap_or(0),
            received_total: received.iter().sum(),
            complete_watchers: received.iter().filter(|&&r| r >= succeeded).count(),
            reconnects: done.iter().map(|r| r.reconnects).sum(),
            lag_ms: Percentiles::from_micros(&watch::merge(&done)),
            received_bytes,
            bytes_per_second: received_bytes as f64 / watched.as_secs_f64().max(1e-9),
        })
    };

    let list = if args.list && !interrupt.is_cancelled() {
        progress.set_message("listing");
        Some(
            list::timed_list(
                &endpoint,
                &args.group.collection(&args.namespace),
                args.encoding,
            )
            .await?,
        )
    } else {
        None
    };
    progress.finish_and_clear();

    Ok(Summary {
        server: url.display,
        namespace: args.namespace.clone(),
        verb: args.verb,
        workload: args.workload,
        group: args.group,
        encoding: args.encoding,
        clients,
        rate: args.rate,
        duration_seconds: elapsed.as_secs_f64(),
        requests: sent,
        succeeded,
        failed: sent - succeeded,
        throughput_per_second: succeeded as f64 / elapsed.as_secs_f64().max(1e-9),
        latency_ms: Percentiles::from_micros(&latency),
        errors,
        watch,
        list,
        interrupted: interrupt.is_cancelled(),
        timeline: timeline.points(elapsed),
        soak,
    })
}

/// A progress bar on stderr, drawn only when stderr is a terminal.
fn progress_bar(args: &BenchArgs) -> indicatif::ProgressBar {
    if !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let pb = indicatif::ProgressBar::new(args.duration.as_millis().min(u64::MAX as u128) as u64);
    if let Ok(style) =
        indicatif::ProgressStyle::with_template("{spinner} {elapsed_precise} [{bar:30}] {msg}")
    {
        pb.set_style(style.progress_chars("=> "));
    }
    pb.enable_steady_tick(Duration::from_millis(100));
    pb
}

/// Checks that the server answers, with the one-line error users expect when it does not.
async fn probe(endpoint: &Endpoint, display: &str) -> anyhow::Result<()> {
    let mut c = Conn::new(endpoint.clone());
    match c.request(http::Method::GET, "/version", Bytes::new()).await {
        Ok(_) => Ok(()),
        Err(Failure::Connect) => {
            anyhow::bail!("cannot reach {display}: is `herald serve` running?")
        }
        Err(f) => anyhow::bail!("{display} did not answer /version ({})", f.label()),
    }
}

/// Checks that the server answers a protobuf list with protobuf, so that a server without
/// it is one line before the load rather than every create failing.
async fn probe_protobuf(endpoint: &Endpoint, display: &str, ns: &str) -> anyhow::Result<()> {
    let mut sender = conn::connect(endpoint)
        .await
        .with_context(|| format!("cannot reach {display}"))?;
    let req = endpoint
        .request(
            http::Method::GET,
            &format!("/api/v1/namespaces/{ns}/events?limit=1"),
        )
        .header(http::header::ACCEPT, Encoding::Protobuf.media_type())
        .body(http_body_util::Full::new(Bytes::new()))
        .context("building the protobuf probe")?;
    let resp = sender
        .send_request(req)
        .await
        .with_context(|| format!("{display} did not answer a protobuf list"))?;
    let content_type = resp
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    if !resp.status().is_success() || !Encoding::Protobuf.is_content_type(&content_type) {
        anyhow::bail!(
            "{display} does not speak protobuf (a protobuf list answered {} with Content-Type {content_type:?}); run without --encoding protobuf",
            resp.status()
        );
    }
    Ok(())
}

/// The namespace list's current resourceVersion (where watches start).
async fn current_rv(endpoint: &Endpoint, ns: &str) -> anyhow::Result<String> {
    #[derive(serde::Deserialize)]
    struct Meta {
        #[serde(rename = "resourceVersion")]
        resource_version: String,
    }
    #[derive(serde::Deserialize)]
    struct List {
        metadata: Meta,
    }
    let mut c = Conn::new(endpoint.clone());
    let (status, body) = c
        .request(
            http::Method::GET,
            &format!("/api/v1/namespaces/{ns}/events?limit=1"),
            Bytes::new(),
        )
        .await
        .map_err(|f| anyhow::anyhow!("cannot list events to start watches ({})", f.label()))?;
    if !status.is_success() {
        anyhow::bail!("listing events to start watches answered {status}");
    }
    let l: List = serde_json::from_slice(&body).context("reading the events list")?;
    Ok(l.metadata.resource_version)
}

/// What the requests of a run carry, but for the client, the sequence number and the time.
struct Requests {
    group: Group,
    workload: Workload,
    encoding: Encoding,
    /// The events collection of the namespace, where creates go.
    collection: String,
    namespace: String,
    run: String,
}

impl Requests {
    /// The create body of event `seq` of `client`, sent at `now`, in the run's encoding;
    /// `None` when the protobuf encoder cannot take it (never for the workloads' bodies).
    fn create(&self, client: usize, seq: u64, now: jiff::Timestamp) -> Option<Bytes> {
        let body = workload::body(
            self.group,
            self.workload,
            &self.run,
            &self.namespace,
            client,
            seq,
            now.as_nanosecond(),
            &second_stamp(now),
        );
        self.encoding.create_body(body)
    }

    /// The patch that counts repeat `repeat` (1, 2, …) of `client`'s event, sent at `now`.
    fn patch(&self, client: usize, repeat: u64, now: jiff::Timestamp) -> Bytes {
        Bytes::from(workload::patch_body(
            self.group,
            self.workload,
            &self.run,
            client,
            repeat,
            now.as_nanosecond(),
            &second_stamp(now),
        ))
    }

    /// The path of the event `client` patches (its event 0).
    fn patch_path(&self, client: usize) -> String {
        format!(
            "{}/{}",
            self.collection,
            workload::event_name(&self.run, client, 0)
        )
    }
}

/// `now` to the second, as RFC 3339 (what `firstTimestamp`/`lastTimestamp` hold).
fn second_stamp(now: jiff::Timestamp) -> String {
    now.round(jiff::Unit::Second)
        .unwrap_or(now)
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// Creates each client's event to patch (its event 0), at most 64 at a time, before the
/// load and its watchers start (outside `--duration` and `--requests`); any failure ends the
/// run with what the server answered.
async fn create_patch_targets(
    endpoint: &Endpoint,
    requests: &Requests,
    clients: u32,
    clock: &dyn Clock,
) -> anyhow::Result<()> {
    use futures::StreamExt as _;
    let path = &requests.collection;
    let created = futures::stream::iter(0..clients as usize)
        .map(|client| async move {
            let body = requests
                .create(client, 0, clock.now())
                .context("encoding an event to patch")?;
            let mut conn = Conn::with_encoding(endpoint.clone(), requests.encoding);
            match conn.request(http::Method::POST, path, body).await {
                Ok((http::StatusCode::CREATED, _)) => Ok(()),
                Ok((status, body)) => anyhow::bail!(
                    "creating the events to patch: {path} answered {status}: {}",
                    String::from_utf8_lossy(&body[..body.len().min(300)])
                ),
                Err(f) => anyhow::bail!(
                    "creating the events to patch: {path} failed ({})",
                    f.label()
                ),
            }
        })
        .buffer_unordered(64);
    futures::pin_mut!(created);
    while let Some(r) = created.next().await {
        r?;
    }
    Ok(())
}

/// One loading client.
struct ClientCtx {
    endpoint: Endpoint,
    client: usize,
    clients: usize,
    requests: Arc<Requests>,
    verb: Verb,
    rate: Option<f64>,
    limit: Option<u64>,
    start: Instant,
    clock: Arc<dyn Clock>,
    live: Arc<Live>,
    timeline: Arc<Timeline>,
    stop: CancellationToken,
}

impl ClientCtx {
    async fn run(self) -> ClientResult {
        let mut conn = Conn::with_encoding(self.endpoint.clone(), self.requests.encoding);
        let patch_path = self.requests.patch_path(self.client);
        let mut out = ClientResult {
            latency: histogram(),
            errors: BTreeMap::new(),
            succeeded: 0,
            sent: 0,
        };
        // Open loop: this client's share of the rate, phase-shifted so clients interleave.
        let mut ticker = self.rate.map(|rate| {
            let period = Duration::from_secs_f64(self.clients as f64 / rate);
            let offset = period.mul_f64(self.client as f64 / self.clients as f64);
            let mut t = tokio::time::interval_at(self.start + offset, period);
            t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
            t
        });
        let mut seq = 0u64;
        loop {
            let scheduled = match &mut ticker {
                Some(t) => tokio::select! {
                    biased;
                    _ = self.stop.cancelled() => break,
                    at = t.tick() => at,
                },
                None => {
                    if self.stop.is_cancelled() {
                        break;
                    }
                    Instant::now()
                }
            };
            if self.stop.is_cancelled() {
                break;
            }
            if let Some(limit) = self.limit
                && self.live.issued.fetch_add(1, Ordering::Relaxed) >= limit
            {
                break;
            }
            let now = self.clock.now();
            seq += 1;
            out.sent += 1;
            // Mixed writes: odd requests create events 1, 3, 5… (event 0 is the one patched),
            // even ones patch with repeats 1, 2, 3…
            let create = match self.verb {
                Verb::Create => Some(seq - 1),
                Verb::Patch => None,
                Verb::Mixed => (seq % 2 == 1).then_some(seq),
            };
            let r = match create {
                // Event `seq - 1`: the first is event 0.
                Some(event) => {
                    let Some(body) = self.requests.create(self.client, event, now) else {
                        // Never for the bodies the workloads build; counted rather than hidden.
                        *out.errors.entry("encode".to_string()).or_insert(0) += 1;
                        self.live.failed.fetch_add(1, Ordering::Relaxed);
                        continue;
                    };
                    let path = &self.requests.collection;
                    conn.request(http::Method::POST, path, body).await
                }
                // Repeat `seq`: the first is repeat 1 (the create was the event's first
                // occurrence).
                None => {
                    let repeat = if self.verb == Verb::Mixed {
                        seq / 2
                    } else {
                        seq
                    };
                    let patch = self.requests.patch(self.client, repeat, now);
                    conn.request_as(
                        http::Method::PATCH,
                        &patch_path,
                        workload::PATCH_CONTENT_TYPE,
                        patch,
                    )
                    .await
                }
            };
            let done = Instant::now();
            let micros = done
                .saturating_duration_since(scheduled)
                .as_micros()
                .min(u64::MAX as u128) as u64;
            let ok = matches!(&r, Ok((status, _)) if self.verb.succeeded(*status));
            self.timeline.record(done, micros, ok);
            match r {
                Ok((status, _)) if self.verb.succeeded(status) => {
                    out.latency.saturating_record(micros);
                    out.succeeded += 1;
                    self.live.ok.fetch_add(1, Ordering::Relaxed);
                }
                Ok((status, _)) => {
                    *out.errors.entry(status.as_u16().to_string()).or_insert(0) += 1;
                    self.live.failed.fetch_add(1, Ordering::Relaxed);
                }
                Err(f) => {
                    *out.errors.entry(f.label().to_string()).or_insert(0) += 1;
                    self.live.failed.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        out
    }
}
