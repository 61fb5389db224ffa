//! The `herald` command line.

use std::io::IsTerminal as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Parser, Subcommand, ValueEnum};
use herald_server::api::browser::BrowserOptions;
use herald_server::api::limits::{self, RequestLimitOptions};
use herald_server::api::listen::{self, ConnectionOptions};
use herald_server::api::tls::{ServingCertificate, TlsOptions};
use herald_server::registry::RegistryOptions;
use herald_server::server::{Server, ServerError, ServerOptions, StoreKind, Transport};
use herald_server::storage::{HistoryOptions, StorageError};

mod bench;
mod connect;
mod emit;
mod event_text;
mod filter;
mod for_object;
mod get;
mod interrupt;
mod kubeconfig;
mod mirror;
mod serve_admission;
mod serve_audit;
mod serve_auth;
mod serve_etcd;
mod stdout;
mod style;
mod tail;
mod top;
mod usage;

// The server allocates and frees small buffers on every request across several threads
// (tokio workers, the SQLite writer); glibc's per-thread arenas spend a fifth of a create's
// CPU time in malloc/free and in faulting trimmed pages back in. mimalloc does not.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Turns transparent huge pages off for this process (Linux; elsewhere a no-op): `serve` and
/// `bench` call it first.
///
/// The server's memory grows by small, long-lived pieces (every stored event stays in the
/// watch cache for its TTL). With huge pages, each first touch of a 2 MiB region makes the
/// kernel zero all of it at once: in profiles of `herald bench` that zeroing was ≈ 6 % of the
/// server's CPU per create (≈ 0.5 % without huge pages). mimalloc is also built
/// without its `MADV_HUGEPAGE` advice (feature `no_thp`); this call covers hosts whose THP
/// setting is `always`. If the kernel refuses, the process runs as before.
fn no_huge_pages() {
    #[cfg(target_os = "linux")]
    if let Err(e) = nix::sys::prctl::set_thp_disable(true) {
        tracing::debug!(error = %e, "could not turn transparent huge pages off");
    }
}

/// Herald: the Kubernetes event system.
///
/// The client commands (emit, get, tail, top) read the usual kubeconfig (KUBECONFIG,
/// ~/.kube/config, --kubeconfig, --context, -n), so they work against herald-server and a
/// real cluster alike; without any kubeconfig they talk to https://127.0.0.1:6443 with the
/// credentials `herald serve` made in ./herald-data.
#[derive(Debug, Parser)]
#[command(
    name = "herald",
    version,
    about,
    propagate_version = true,
    after_help = "A 30-second tour:\n  herald serve &\n  herald emit --for pod/web-1 --type Warning --reason BackOff --message \"Back-off restarting failed container\" --repeat 1000\n  herald get events\n  herald top"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the Kubernetes-compatible event store.
    ///
    /// kubectl, kube-rs and client-go talk to it unchanged. By default events are kept in
    /// SQLite under ./herald-data and every write is durable before it is acknowledged.
    ///
    /// It serves HTTPS (TLS 1.2+, HTTP/2 where offered). Without --tls-cert-file it makes a
    /// CA, a serving certificate and an admin client certificate under <data>/pki at its
    /// first start (in memory with --store memory) and reuses them after; `herald
    /// kubeconfig` writes a kubeconfig with them.
    /// Ctrl-C or SIGTERM stops it cleanly: open watches end, requests in flight finish, the
    /// store closes.
    #[command(
        after_help = "Examples:\n  herald serve\n  herald serve --listen 127.0.0.1:7443 --data /var/lib/herald\n  herald serve --store memory --event-ttl 10m --write-kubeconfig herald.kubeconfig\n  herald serve --listen 0.0.0.0:6443 --tls-cert-file tls.crt --tls-private-key-file tls.key --client-ca-file ca.crt\n  herald serve --insecure-plain-http --store memory   # loopback only\n  herald serve --max-requests-inflight 800 --request-timeout 2m   # kube-apiserver's flags\n  herald serve --event-ttl 168h --mirror-kubeconfig ~/.kube/config --mirror-context prod   # keep a cluster's events a week\n\nThen: herald kubeconfig > herald.kubeconfig && kubectl --kubeconfig herald.kubeconfig get events -A"
    )]
    Serve(Box<ServeArgs>),
    /// Print a kubeconfig that points kubectl at a herald server.
    #[command(
        after_help = "Example:\n  herald kubeconfig > herald.kubeconfig\n  kubectl --kubeconfig herald.kubeconfig get events -A"
    )]
    Kubeconfig(kubeconfig::KubeconfigArgs),
    /// Put load on an events API server and summarise throughput, latency and watch lag.
    #[command(
        after_help = "Examples:\n  herald bench --clients 64 --duration 30s\n  herald bench --rate 10000 --watchers 1000 --duration 20s\n  herald bench --encoding protobuf --watchers 100 --list   # as kube's components speak\n  herald bench --group events.k8s.io --list\n  herald bench --verb patch --watchers 10   # repeats counted as client-go's recorders patch them\n  herald bench --server http://127.0.0.1:7443 --requests 100000 --list -o json\n  herald bench --duration 10m --clients 16 --rate 500 --verb mixed --watchers 2000 --slow-clients 200 --series 30s --server-pid PID   # the soak\n\nCompare runs only from a quiet start: on a 2-core VM, a run started right after another was\nup to a fifth slower than one started after a 20 s pause (the last run's writes still flushing)."
    )]
    Bench(bench::BenchArgs),
    /// Record an event through the real recording pipeline (once, or as a storm).
    ///
    /// The event goes through herald-runtime's recorder and correlator exactly as a
    /// controller's would (aggregation, counting, spam filter) and is written with create
    /// and patch calls. At the end the pipeline is shut down, which writes the counts the
    /// spam filter held back, and a summary says what the pipeline did and how many API
    /// writes it cost.
    #[command(
        after_help = "Examples:\n  herald emit --for pod/web-1 --type Warning --reason BackOff --message \"Back-off restarting failed container\"\n  herald emit --for pod/web-1 --type Warning --reason BackOff --repeat 10000          # a storm: at most 26 API writes\n  herald emit --for deployment/api --reason ScalingReplicaSet --repeat 100 --rate 20 -n prod\n  herald emit --for node/node-1 --reason NodeNotReady --source my-tool -o json"
    )]
    Emit(emit::EmitArgs),
    /// List events as a table (or JSON/YAML), sorted by when they were last seen.
    #[command(
        after_help = "Examples:\n  herald get events\n  herald get events -A --types Warning\n  herald get events --for pod/web-1 -o wide\n  herald get events -n prod -o json | jq '.items[].count'"
    )]
    Get(get::GetArgs),
    /// Stream events as they happen, one line per new or updated event.
    ///
    /// Driven by an informer: the most recent stored events first, then every change;
    /// on a terminal, the count of an event still on screen is updated in place. The
    /// stream resumes by itself when the server goes away and comes back.
    #[command(
        after_help = "Examples:\n  herald tail\n  herald tail -A --types Warning\n  herald tail --for pod/web-1 --initial 0"
    )]
    Tail(tail::TailArgs),
    /// A full-screen, live view of event storms: the busiest objects and reasons.
    ///
    /// Ranks objects and reasons by occurrences per second over a sliding window and
    /// shows how much the correlator and the server compressed them (occurrences per API
    /// write). q quits.
    #[command(
        after_help = "Examples:\n  herald top\n  herald top -A --window 1m\n  herald top --types Warning --refresh 500ms"
    )]
    Top(top::TopArgs),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Store {
    /// SQLite files under --data (durable).
    Sqlite,
    /// Process memory (lost at exit; for throwaway runs and tests).
    Memory,
    /// An etcd cluster (--etcd-servers), shared by any number of replicas and with
    /// kube-apiserver's layout under --etcd-prefix.
    Etcd,
}

/// Where `herald serve` keeps its store and certificates by default.
pub(crate) const DEFAULT_DATA: &str = "herald-data";

#[derive(Debug, clap::Args)]
struct ServeArgs {
    /// Address to listen on, as IP:PORT (host names are not resolved; port 0 picks a free
    /// port, and the chosen address is printed).
    #[arg(long, default_value = "127.0.0.1:6443", env = "HERALD_LISTEN", value_parser = parse_listen)]
    listen: SocketAddr,
    /// Directory for the SQLite store (created if missing).
    #[arg(long, default_value = DEFAULT_DATA, env = "HERALD_DATA")]
    data: PathBuf,
    /// Where events are stored.
    #[arg(long, value_enum, default_value_t = Store::Sqlite)]
    store: Store,
    /// How long an event lives after its last write, e.g. 1h, 30m, 90s ("0" keeps events forever).
    #[arg(long, default_value = "1h", value_parser = parse_duration)]
    event_ttl: Duration,
    /// The most events the store holds ("0": no limit); at the limit, creates get 429
    /// TooManyRequests until events expire or are deleted, while updates and deletes still
    /// work. Default: 10,000,000 on SQLite, which keeps events on disk (about 1.6 KB each
    /// with its indexes: the bound is on the disk a storm can fill, not on memory);
    /// 1,000,000 with --store memory, which holds every event in memory (about 1.4 KB each).
    #[arg(long)]
    max_events: Option<usize>,
    /// The most memory the watch cache's window of recent changes takes, e.g. 256Mi, 1Gi,
    /// 500M (with --store memory, the history kept for lists at older revisions has the same
    /// bound). The window also ends at 65,536 changes. A watch or list from a revision older
    /// than the window gets 410 Expired, and clients re-list.
    #[arg(long, default_value = "256Mi", value_parser = parse_bytes)]
    watch_cache_bytes: usize,
    /// How long a request other than a watch may take, reading its body included, before it
    /// is answered 504 Timeout (kube-apiserver's --request-timeout), e.g. 60s or 2m.
    #[arg(long, default_value = "60s", value_parser = parse_positive_duration)]
    request_timeout: Duration,
    /// Read-only requests served at once (watches and health probes are not counted); over
    /// it, 429 TooManyRequests with Retry-After, never a queue ("0": no limit). As
    /// kube-apiserver's.
    #[arg(long, default_value_t = limits::DEFAULT_MAX_REQUESTS_INFLIGHT)]
    max_requests_inflight: usize,
    /// Creates, updates, patches and deletes served at once; over it, 429 TooManyRequests
    /// with Retry-After ("0": no limit). As kube-apiserver's.
    #[arg(long, default_value_t = limits::DEFAULT_MAX_MUTATING_REQUESTS_INFLIGHT)]
    max_mutating_requests_inflight: usize,
    /// Connections served at once (lowered to fit the open-files limit, which serve raises
    /// to its hard limit); over it, new connections answer only /healthz, /livez and
    /// /readyz until others close.
    #[arg(long, default_value_t = listen::DEFAULT_MAX_CONNECTIONS, value_parser = parse_max_connections)]
    max_connections: usize,
    /// Accept connections on a thread of their own and answer plain-HTTP /healthz, /livez
    /// and /readyz probes there, so that they stay fast while the API is busy ("false":
    /// everything on the API's threads).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    probe_lane: bool,
    /// A name the Host header may carry besides localhost, 127.0.0.1 and [::1] when serving
    /// on a loopback address (repeatable), e.g. an /etc/hosts alias of 127.0.0.1. Other names
    /// are refused (403) so that web pages cannot reach the server by DNS rebinding.
    #[arg(long = "allow-host", value_name = "NAME")]
    allow_hosts: Vec<String>,
    #[command(flatten)]
    auth: serve_auth::AuthArgs,
    #[command(flatten)]
    admission: serve_admission::AdmissionArgs,
    #[command(flatten)]
    audit: serve_audit::AuditArgs,
    #[command(flatten)]
    mirror: mirror::MirrorArgs,
    #[command(flatten)]
    etcd: serve_etcd::EtcdArgs,
    /// PEM file of the serving certificate (then any intermediates), instead of the one
    /// herald makes under --data (kube-apiserver's flag). Reloaded when the file changes.
    #[arg(long, value_name = "FILE", requires = "tls_private_key_file")]
    tls_cert_file: Option<PathBuf>,
    /// PEM file of the serving certificate's private key (kube-apiserver's flag). Reloaded
    /// when the file changes.
    #[arg(long, value_name = "FILE", requires = "tls_cert_file")]
    tls_private_key_file: Option<PathBuf>,
    /// PEM file of the CAs that client certificates are verified against (kube-apiserver's
    /// flag) [default: the CA herald makes under --data; none with --tls-cert-file]. A client
    /// certificate that does not verify fails the TLS handshake (so with this flag the
    /// generated admin certificate works only if this file holds the generated CA). Reloaded
    /// when the file changes.
    #[arg(long, value_name = "FILE")]
    client_ca_file: Option<PathBuf>,
    /// Serve plain HTTP instead of HTTPS: no encryption, no client certificates. Only on a
    /// loopback address (127.0.0.1, [::1]); for local tests and benchmarks.
    #[arg(long, conflicts_with_all = ["tls_cert_file", "tls_private_key_file", "client_ca_file"])]
    insecure_plain_http: bool,
    /// Write a kubeconfig for this server (its URL, the CA and the admin credential) to
    /// FILE at start, owner-only (0600): the way to reach a --store memory server, whose
    /// certificates exist only in its memory.
    #[arg(long, value_name = "FILE", conflicts_with = "tls_cert_file")]
    write_kubeconfig: Option<PathBuf>,
}

impl ServeArgs {
    /// Plain HTTP or HTTPS, from the flags.
    fn transport(&self) -> Transport {
        if self.insecure_plain_http {
            return Transport::PlainHttp;
        }
        let serving = match (&self.tls_cert_file, &self.tls_private_key_file) {
            (Some(cert_file), Some(key_file)) => ServingCertificate::Files {
                cert_file: cert_file.clone(),
                key_file: key_file.clone(),
            },
            _ => ServingCertificate::Generated,
        };
        Transport::Https(TlsOptions {
            serving,
            client_ca_file: self.client_ca_file.clone(),
        })
    }
}

/// Parses a size in bytes as Kubernetes writes quantities: a whole number, optionally with a
/// binary (`Ki`, `Mi`, `Gi`, `Ti`) or decimal (`k`, `M`, `G`, `T`) suffix.
fn parse_bytes(s: &str) -> Result<usize, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (digits, suffix) = s.split_at(split);
    let unit: u64 = match suffix {
        "" => 1,
        "k" | "K" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        _ => {
            return Err(format!(
                "{s:?} is not a size; use a value like 256Mi, 1Gi or 500M"
            ));
        }
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(unit))
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| format!("{s:?} is not a size; use a value like 256Mi, 1Gi or 500M"))
}

/// Parses a duration that must not be zero.
fn parse_positive_duration(s: &str) -> Result<Duration, String> {
    match parse_duration(s)? {
        d if d.is_zero() => Err("must be longer than 0, e.g. 60s".to_string()),
        d => Ok(d),
    }
}

/// Parses `--max-connections`: at least 1.
fn parse_max_connections(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err("must be a whole number of at least 1".to_string()),
    }
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    let d: jiff::SignedDuration = s
        .parse()
        .map_err(|_| format!("{s:?} is not a duration; use a value like 1h, 30m or 90s"))?;
    Duration::try_from(d).map_err(|_| format!("{s:?} must not be negative"))
}

/// The slowest `--rate` (per second) `emit` and `bench` take: one every 1000 s.
const MIN_RATE: f64 = 0.001;
/// The fastest `--rate` (per second) `emit` and `bench` take.
const MAX_RATE: f64 = 1_000_000.0;

/// Parses a `--rate`: a number of things per second from [`MIN_RATE`] to [`MAX_RATE`]
/// (beyond them the pacing interval would be unrepresentable or zero).
fn parse_rate(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(r) if (MIN_RATE..=MAX_RATE).contains(&r) => Ok(r),
        _ => Err(format!(
            "must be a number from {MIN_RATE} to {MAX_RATE} (per second)"
        )),
    }
}

/// Parses `serve --listen`: an IP address and a port. Host names are refused rather than
/// resolved: `localhost` has an IPv4 and an IPv6 address, and the server listens on one.
fn parse_listen(s: &str) -> Result<SocketAddr, String> {
    s.parse().map_err(|_| {
        "must be IP:PORT, e.g. 127.0.0.1:6443 or [::1]:6443 (host names are not resolved)"
            .to_string()
    })
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve(args) => serve(*args),
        Command::Kubeconfig(args) => kubeconfig::render(&args).and_then(|k| stdout::print(&k)),
        Command::Bench(args) => {
            no_huge_pages();
            // Thousands of watchers and slow clients are as many file descriptors.
            listen::raise_open_files_limit();
            bench::run(args)
        }
        Command::Emit(args) => client_logs().and_then(|()| emit::run(args)),
        Command::Get(args) => client_logs().and_then(|()| get::run(args)),
        Command::Tail(args) => client_logs().and_then(|()| tail::run(args)),
        // top owns the whole screen: logs would tear it.
        Command::Top(args) => top::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("herald: {e:#}");
            ExitCode::from(usage::exit_code(&e))
        }
    }
}

/// The async runtime of the client commands.
fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Runtime::new().context("starting the async runtime")
}

/// Client commands log only when asked (`RUST_LOG=herald_runtime=debug`): their output is
/// the events and the summary, and errors are reported as one line at the end.
fn client_logs() -> anyhow::Result<()> {
    let Ok(filter) = tracing_subscriber::EnvFilter::try_from_default_env() else {
        return Ok(());
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(style::Palette::stderr().is_on())
        .try_init()
        .map_err(|e| anyhow::anyhow!("cannot set up logging: {e}"))
}

fn serve(args: ServeArgs) -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none())
        .init();
    no_huge_pages();
    // As Go programs (kube-apiserver) do: every connection is a file descriptor.
    listen::raise_open_files_limit();
    let admission = args.admission.options()?;
    let etcd = match args.store {
        Store::Etcd => Some(args.etcd.options()?),
        _ => None,
    };
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(async move {
        // A bad mirror kubeconfig or context fails the start, before the store opens.
        let mirror = args.mirror.source().await?;
        let mirror_metrics = Arc::new(mirror::metrics::MirrorMetrics::new());
        let store = match args.store {
            Store::Memory => StoreKind::Memory,
            Store::Sqlite => StoreKind::Sqlite {
                dir: args.data.clone(),
            },
            Store::Etcd => StoreKind::Etcd(Box::new(etcd.unwrap_or_default())),
        };
        let config = ServerOptions {
            store: store.clone(),
            listen: args.listen,
            transport: args.transport(),
            event_ttl: (!args.event_ttl.is_zero()).then_some(args.event_ttl),
            registry: RegistryOptions {
                // etcd does not count its keys (the TTL bounds it): only an explicit
                // --max-events is passed on, and the server says it does not apply.
                max_events: match args.store {
                    Store::Sqlite => Some(
                        args.max_events
                            .unwrap_or(herald_server::registry::DEFAULT_MAX_EVENTS),
                    ),
                    Store::Memory => Some(
                        args.max_events
                            .unwrap_or(herald_server::registry::DEFAULT_MAX_EVENTS_IN_MEMORY),
                    ),
                    Store::Etcd => args.max_events,
                }
                .filter(|max| *max > 0),
                ..RegistryOptions::default()
            },
            history: HistoryOptions {
                watch_window_bytes: args.watch_cache_bytes,
                keep_bytes: args.watch_cache_bytes,
                ..HistoryOptions::default()
            },
            connections: ConnectionOptions {
                max_connections: args.max_connections,
                probe_lane: args.probe_lane,
                ..ConnectionOptions::default()
            },
            limits: RequestLimitOptions {
                max_requests_inflight: args.max_requests_inflight,
                max_mutating_requests_inflight: args.max_mutating_requests_inflight,
                request_timeout: args.request_timeout,
            },
            browser: BrowserOptions {
                allowed_hosts: args.allow_hosts.clone(),
                ..BrowserOptions::default()
            },
            auth: args.auth.options(),
            admission,
            audit: args.audit.options(),
            extra_metrics: match &mirror {
                Some(_) => vec![mirror_metrics.clone() as Arc<dyn prometheus_client::collector::Collector>],
                None => Vec::new(),
            },
            ..ServerOptions::default()
        };
        let server = match Server::start(config).await {
            Ok(s) => s,
            // Another server holds the directory: say which, and what to do, on one line.
            Err(ServerError::Storage(e @ StorageError::Locked { .. })) => {
                anyhow::bail!("{e}; stop that server or choose another --data directory")
            }
            Err(ServerError::Storage(e @ StorageError::DataDir { .. })) => {
                anyhow::bail!("{e}; choose a --data path that is, or can become, a directory")
            }
            // The backend's own words, without the "storage backend error" prefix an API
            // client sees: the directory already says which store failed.
            Err(ServerError::Storage(StorageError::Backend(cause))) => {
                anyhow::bail!("{}: {cause}", cannot_open(&store))
            }
            Err(ServerError::Storage(e)) => anyhow::bail!("{}: {e}", cannot_open(&store)),
            Err(e @ ServerError::PlainHttpNotLoopback { .. }) => {
                anyhow::bail!("{e} (drop --insecure-plain-http)")
            }
            Err(e @ ServerError::Bind { .. }) if is_addr_in_use(&e) => {
                anyhow::bail!("{e}; stop what is using it or choose another --listen address")
            }
            Err(e @ ServerError::Audit(_)) => {
                anyhow::bail!("{e}; choose a --audit-log-path herald can write")
            }
            Err(e) => anyhow::bail!("{e}"),
        };
        let where_ = match &store {
            StoreKind::Sqlite { dir } => format!("sqlite in {}", dir.display()),
            StoreKind::Memory => "memory (lost at exit)".to_string(),
            StoreKind::Etcd(o) => format!("etcd at {} under {}", o.servers.join(","), o.prefix),
        };
        let url = server.url();
        if let Some(path) = &args.write_kubeconfig {
            let text = kubeconfig::render_for(&url, "herald", server.pki().map(|p| p.admin()))?;
            herald_server::files::write_private(path, text.as_bytes())
                .with_context(|| format!("cannot write the kubeconfig {}", path.display()))?;
        }
        let try_line = match (&args.write_kubeconfig, &store, server.pki()) {
            (Some(path), _, _) => {
                format!("kubectl --kubeconfig {} get events -A", path.display())
            }
            (None, StoreKind::Memory | StoreKind::Etcd(_), Some(_)) => "start it with --write-kubeconfig FILE, then kubectl --kubeconfig FILE get events -A (a memory store's certificates live only in its memory)".to_string(),
            (None, StoreKind::Sqlite { dir }, Some(_)) => {
                let data = if dir == std::path::Path::new(DEFAULT_DATA) {
                    String::new()
                } else {
                    format!(" --data {}", dir.display())
                };
                format!("herald kubeconfig --server {url}{data} > herald.kubeconfig && kubectl --kubeconfig herald.kubeconfig get events -A")
            }
            (None, _, None) if !url.starts_with("https") => format!("herald kubeconfig --server {url} > herald.kubeconfig && kubectl --kubeconfig herald.kubeconfig get events -A"),
            (None, _, None) => format!("kubectl --server {url} --certificate-authority YOUR-CA.crt get events -A"),
        };
        let banner = format!(
            "herald-server listening on {url} (store: {where_})\n\
             try: {try_line}\n",
        );
        // Nobody may be reading (`herald serve | (exec true)`, a closed terminal): the
        // banner is a courtesy, serving is the job.
        if let Err(e) = stdout::write(&banner) {
            tracing::debug!(error = %e, "cannot print the address to stdout");
        }
        if let Some(source) = mirror {
            let data = match &store {
                StoreKind::Sqlite { dir } => Some(dir.clone()),
                StoreKind::Memory | StoreKind::Etcd(_) => None,
            };
            tracing::info!(source = %source.url(), "mirroring the events of another API server");
            tokio::spawn(mirror::run(
                source,
                server.registry().clone(),
                data,
                mirror_metrics,
                server.shutdown_token(),
            ));
        }
        // SIGTERM too: it is what systemd, Kubernetes and `kill` send, and a clean stop ends
        // every watch with its last chunk rather than a reset connection.
        let stop = interrupt::on_ctrl_c();
        let token = server.shutdown_token();
        tokio::spawn(async move {
            stop.cancelled().await;
            eprintln!("herald: shutting down");
            token.cancel();
        });
        server.wait().await.context("serving")
    })
}

/// The start of the one-line error for a store that would not open.
fn cannot_open(store: &StoreKind) -> String {
    match store {
        StoreKind::Sqlite { dir } => format!("cannot open the store in {}", dir.display()),
        StoreKind::Memory => "cannot open the memory store".to_string(),
        StoreKind::Etcd(o) => format!("cannot open the etcd store at {}", o.servers.join(",")),
    }
}

fn is_addr_in_use(e: &ServerError) -> bool {
    matches!(e, ServerError::Bind { error, .. } if error.kind() == std::io::ErrorKind::AddrInUse)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert!(
            parse_duration("soon")
                .unwrap_err()
                .contains("1h, 30m or 90s")
        );
    }

    #[test]
    fn rates_outside_the_range_say_what_it_is() {
        assert_eq!(parse_rate("20"), Ok(20.0));
        assert_eq!(parse_rate("0.001"), Ok(0.001));
        assert_eq!(parse_rate("1e6"), Ok(1e6));
        for bad in ["0", "-1", "1e-30", "1e30", "inf", "NaN", "fast"] {
            let e = parse_rate(bad).unwrap_err();
            assert_eq!(
                e, "must be a number from 0.001 to 1000000 (per second)",
                "{bad}"
            );
        }
    }

    #[test]
    fn sizes_take_kubernetes_suffixes() {
        assert_eq!(parse_bytes("256Mi"), Ok(256 << 20));
        assert_eq!(parse_bytes("1Gi"), Ok(1 << 30));
        assert_eq!(parse_bytes("500M"), Ok(500_000_000));
        assert_eq!(parse_bytes("4096"), Ok(4096));
        for bad in ["", "Mi", "1.5Gi", "-1", "10 MB", "99999999999999999999"] {
            let e = parse_bytes(bad).unwrap_err();
            assert!(
                e.ends_with("use a value like 256Mi, 1Gi or 500M"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn listen_wants_an_ip_and_a_port() {
        assert_eq!(
            parse_listen("127.0.0.1:7443"),
            Ok("127.0.0.1:7443".parse().unwrap())
        );
        assert!(parse_listen("[::1]:0").is_ok());
        let e = parse_listen("localhost:7443").unwrap_err();
        assert!(e.starts_with("must be IP:PORT, e.g. 127.0.0.1:6443"), "{e}");
    }

    #[test]
    fn cli_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
