//! [`Server`]: storage backend, TTL sweeper, events registry and HTTP API wired together,
//! what `herald serve` runs.
//!
//! ```no_run
//! use herald_server::api::tls::TlsOptions;
//! use herald_server::server::{Server, ServerOptions, StoreKind, Transport};
//! # async fn run() -> Result<(), herald_server::server::ServerError> {
//! let config = ServerOptions {
//!     store: StoreKind::Sqlite { dir: "./herald-data".into() },
//!     listen: "127.0.0.1:6443".parse().unwrap(),
//!     // HTTPS with a CA, serving and admin certificates made under ./herald-data/pki:
//!     transport: Transport::Https(TlsOptions::default()),
//!     ..ServerOptions::default()
//! };
//! let server = Server::start(config).await?;
//! println!("listening on {}", server.url());
//! tokio::signal::ctrl_c().await.ok();
//! server.shutdown().await?; // ends watches, finishes in-flight requests, closes the store
//! # Ok(()) }
//! ```

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use bytes::Bytes;
use futures::future::{BoxFuture, FutureExt};
use herald_core::clock::{Clock, SystemClock};
use prometheus_client::metrics::histogram::Histogram;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::api::admission::{AdmissionError, AdmissionOptions, AdmissionPlugins};
use crate::api::audit::{self, AuditError, AuditLayer, AuditOptions, AuditWriter};
use crate::api::auth::{self, Auth, AuthError, AuthLayer, AuthOptions, Authorization};
use crate::api::browser::{BrowserLayer, BrowserOptions};
use crate::api::events::EventsApi;
use crate::api::health::{HealthChecks, check_fn};
use crate::api::limits::{LimitsLayer, RequestLimitOptions};
use crate::api::listen::{self, ConnectionOptions};
use crate::api::metrics::{Metrics, metrics_handler};
use crate::api::output::OutputLayer;
use crate::api::tls::pki::{PKI_DIR, Pki};
use crate::api::tls::{
    ReloadingCertificate, ReloadingClientCa, ServingCertificate, Tls, TlsError, TlsOptions,
};
use crate::api::{self, ApiState, Guards};
use crate::registry::{EventRegistry, RegistryOptions};
use crate::storage::{
    Backend, CachedWatchStream, Deleted, EtcdBackend, EtcdError, EtcdOptions, HistoryOptions,
    IndexValues, KeyValue, ListOptions, ListResult, MemoryBackend, Revision, SqliteBackend,
    SqliteOptions, StorageError, WatchStream, spawn_sweeper,
};

/// Which backend stores the events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreKind {
    /// In memory, lost at exit (`herald serve --store memory`).
    Memory,
    /// SQLite in `dir` (created if missing), durable (`herald serve --data DIR`).
    Sqlite {
        /// The data directory.
        dir: PathBuf,
    },
    /// An etcd cluster, shared with other replicas (`herald serve --store etcd`). The
    /// options' `history` is replaced by [`ServerOptions::history`]. Generated serving
    /// certificates live in memory, as for [`StoreKind::Memory`]: replicas behind one
    /// address need `--tls-cert-file`.
    Etcd(Box<EtcdOptions>),
}

/// Plain HTTP or HTTPS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// Plain HTTP, HTTP/1.1 only. Only on a loopback address: [`Server::start`] refuses
    /// any other with [`ServerError::PlainHttpNotLoopback`] (anyone who could reach it could
    /// read and delete every event, and see every credential sent to it).
    PlainHttp,
    /// HTTPS ([`crate::api::tls`]).
    Https(TlsOptions),
}

/// Everything [`Server::start`] needs. `Default` is: memory store, `127.0.0.1:6443`,
/// plain HTTP (the library's default, for in-process use on loopback; `herald serve`
/// defaults to HTTPS), 1 h event TTL, default history, kube-apiserver's connection timeouts and inflight
/// limits, the Host check on loopback, the system clock.
#[derive(Clone)]
pub struct ServerOptions {
    /// The store.
    pub store: StoreKind,
    /// The address to listen on (port 0 picks a free one; see [`Server::addr`]).
    pub listen: SocketAddr,
    /// Plain HTTP (loopback only) or HTTPS.
    pub transport: Transport,
    /// How long an event lives after its last write (`--event-ttl`); `None` = forever.
    pub event_ttl: Option<Duration>,
    /// History retained for watches and lists at older revisions.
    pub history: HistoryOptions,
    /// SQLite tuning (its `history` field is replaced by [`ServerOptions::history`]).
    pub sqlite: SqliteOptions,
    /// How often expired events are swept (default 1 s; an event may outlive its TTL by this
    /// much).
    pub sweep_interval: Duration,
    /// Periodic watch bookmarks (default 60 s) and the default watch duration.
    pub registry: RegistryOptions,
    /// Connection timeouts and the connection bound (lowered at start to fit the process's
    /// open-files limit, see [`ConnectionOptions::fitted`]).
    pub connections: ConnectionOptions,
    /// Inflight limits and the request deadline.
    pub limits: RequestLimitOptions,
    /// The Host check of a loopback server and the Content-Type check of writes.
    pub browser: BrowserOptions,
    /// Authentication and authorization (`--token-auth-file`, `--anonymous-auth`,
    /// `--authorization-mode`, `--authorization-rbac-file`). Over HTTPS with a client CA (the
    /// generated one, or `--client-ca-file`), [`AuthOptions::client_certificates`] is turned
    /// on at start, so authentication and RBAC are in force; over plain HTTP the default is
    /// open.
    pub auth: AuthOptions,
    /// Admission plugins (`--enable-admission-plugins`, `--admission-control-config-file`):
    /// EventRateLimit. Default: none.
    pub admission: AdmissionOptions,
    /// The audit log (`--audit-log-path`, `--audit-log-maxsize`, `--audit-log-maxbackup`,
    /// `--audit-log-maxage`); none by default.
    pub audit: AuditOptions,
    /// The clock of TTLs, creation timestamps, Table ages, admission's token buckets and
    /// audit events.
    pub clock: Arc<dyn Clock>,
    /// Metrics of parts running beside the server (the `herald` binary's mirror), served at
    /// `/metrics` with the server's own. Default: none.
    pub extra_metrics: Vec<Arc<dyn prometheus_client::collector::Collector>>,
}

impl std::fmt::Debug for ServerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerOptions")
            .field("store", &self.store)
            .field("listen", &self.listen)
            .field("transport", &self.transport)
            .field("event_ttl", &self.event_ttl)
            .field("history", &self.history)
            .field("sweep_interval", &self.sweep_interval)
            .field("connections", &self.connections)
            .field("limits", &self.limits)
            .field("browser", &self.browser)
            .field("auth", &self.auth)
            .field("admission", &self.admission)
            .field("audit", &self.audit)
            .finish_non_exhaustive()
    }
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            store: StoreKind::Memory,
            listen: SocketAddr::from(([127, 0, 0, 1], 6443)),
            transport: Transport::PlainHttp,
            event_ttl: Some(Duration::from_secs(3600)),
            history: HistoryOptions::default(),
            sqlite: SqliteOptions::default(),
            sweep_interval: Duration::from_secs(1),
            registry: RegistryOptions::default(),
            connections: ConnectionOptions::default(),
            limits: RequestLimitOptions::default(),
            browser: BrowserOptions::default(),
            auth: AuthOptions::default(),
            admission: AdmissionOptions::default(),
            audit: AuditOptions::default(),
            clock: Arc::new(SystemClock),
            extra_metrics: Vec::new(),
        }
    }
}

/// Why the server could not start or stopped with an error.
///
/// Each message includes its cause once and [`source`](std::error::Error::source) is empty,
/// so printing the error (or an `anyhow` chain of it) says everything without repeating it.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The token or RBAC file is unreadable or malformed (the message names file and line).
    #[error("{0}")]
    Auth(AuthError),
    /// An admission flag or file is wrong (the message names the file and line, or the
    /// flag).
    #[error("{0}")]
    Admission(AdmissionError),
    /// The audit log cannot be opened (the message names the path).
    #[error("{0}")]
    Audit(AuditError),
    /// Opening the store failed.
    #[error("opening the store: {0}")]
    Storage(StorageError),
    /// Connecting to etcd failed (unreachable, a TLS file, bad options).
    #[error("{0}")]
    Etcd(EtcdError),
    /// The listen address could not be bound (already in use, not a local address, a
    /// privileged port…).
    #[error("cannot listen on {addr}: {error}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// Why binding failed; [`std::io::ErrorKind::AddrInUse`] when another process has it.
        error: std::io::Error,
    },
    /// Plain HTTP was asked for on an address other machines can reach.
    #[error(
        "refusing to serve plain HTTP on {addr}: anyone who can reach it could read and delete every event; listen on a loopback address (127.0.0.1 or [::1]) or serve HTTPS"
    )]
    PlainHttpNotLoopback {
        /// The address asked for.
        addr: SocketAddr,
    },
    /// TLS could not be set up (a certificate, key or CA file, the generated certificates).
    #[error(transparent)]
    Tls(TlsError),
    /// Serving failed after the listener was bound.
    #[error("serving: {0}")]
    Io(std::io::Error),
    /// The serving task panicked or was cancelled.
    #[error("server task failed: {0}")]
    Task(String),
}

/// A running herald-server. Dropping it without [`Server::shutdown`] stops serving too
/// (the token is cancelled), but does not wait.
pub struct Server {
    addr: SocketAddr,
    https: bool,
    pki: Option<Pki>,
    shutdown: CancellationToken,
    task: Option<JoinHandle<std::io::Result<()>>>,
    sweeper: JoinHandle<()>,
    registry: EventRegistry,
    metrics: Arc<Metrics>,
    /// Fails once a SQLite store has closed (`None` for the memory store).
    store_closed: Option<tokio::sync::watch::Receiver<()>>,
    /// The audit log's writer, which ends once the router (every connection) is gone.
    audit: Option<AuditWriter>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl Server {
    /// Opens the store, starts the TTL sweeper, binds `config.listen` and serves the whole
    /// API (discovery, OpenAPI, health, `/metrics`, events) in a background task. Returns
    /// once the listener is bound. Must be called inside a tokio runtime.
    pub async fn start(config: ServerOptions) -> Result<Server, ServerError> {
        if config.transport == Transport::PlainHttp && !config.listen.ip().is_loopback() {
            return Err(ServerError::PlainHttpNotLoopback {
                addr: config.listen,
            });
        }
        let clock = config.clock.clone();
        // Client certificates identify users whenever TLS asks for them (the generated CA,
        // or --client-ca-file): secure by default, the generated admin certificate
        // authenticates as system:masters and RBAC is in force.
        let mut auth_options = config.auth.clone();
        if let Transport::Https(tls) = &config.transport
            && (tls.client_ca_file.is_some() || tls.serving == ServingCertificate::Generated)
        {
            auth_options.client_certificates = true;
        }
        // Bad token and RBAC files fail the start before the store is opened.
        let access = Auth::new(&auth_options).map_err(ServerError::Auth)?;
        let mut metrics = Metrics::default();
        // So do bad admission flags and files.
        let admission = AdmissionPlugins::new(&config.admission, clock.clone(), &metrics)
            .map_err(ServerError::Admission)?;
        // And an unwritable audit path (opened last: nothing is created before the checks).
        let audit = audit::open(&config.audit, clock.clone()).map_err(ServerError::Audit)?;
        let mut audit_layer = AuditLayer::disabled();
        let mut audit_writer = None;
        if let Some((layer, counters, writer)) = audit {
            metrics = metrics
                .with_metric(
                    "apiserver_audit_events",
                    "Audit events written to the audit log",
                    counters.events,
                )
                .with_metric(
                    "apiserver_audit_dropped_events",
                    "Audit events lost: queue_full (the writer could not keep up), write_failed, closed",
                    counters.dropped,
                );
            audit_layer = layer;
            audit_writer = Some(writer);
        }
        let mut sqlite = None;
        let mut store_closed = None;
        let hub_bytes;
        let raw: Arc<dyn Backend> = match &config.store {
            StoreKind::Memory => {
                let b = MemoryBackend::new(clock.clone(), config.history);
                hub_bytes = b.hub().bytes_gauge();
                Arc::new(b)
            }
            StoreKind::Sqlite { dir } => {
                let dir = dir.clone();
                let c = clock.clone();
                let opts = SqliteOptions {
                    history: config.history,
                    ..config.sqlite
                };
                let b = tokio::task::spawn_blocking(move || SqliteBackend::open(dir, c, opts))
                    .await
                    .map_err(|e| ServerError::Task(e.to_string()))?
                    .map_err(ServerError::Storage)?;
                let m = b.commit_metrics();
                hub_bytes = b.hub().bytes_gauge();
                metrics = metrics
                    .with_metric(
                        "storage_commit_batch_size",
                        "Writes per SQLite transaction (each one fsync)",
                        m.batch_size.clone(),
                    )
                    .with_metric(
                        "storage_commit_duration_seconds",
                        "Seconds per SQLite group commit, fsync included",
                        m.duration_seconds.clone(),
                    )
                    .with_collector(Arc::new(b.index_metrics()));
                let b = Arc::new(b);
                store_closed = Some(b.closed());
                sqlite = Some(b.clone());
                b
            }
            StoreKind::Etcd(opts) => {
                let opts = EtcdOptions {
                    history: config.history,
                    ..(**opts).clone()
                };
                let b = EtcdBackend::connect(opts, clock.clone())
                    .await
                    .map_err(ServerError::Etcd)?;
                hub_bytes = b.hub().bytes_gauge();
                Arc::new(b)
            }
        };
        for c in &config.extra_metrics {
            metrics = metrics.with_collector(c.clone());
        }
        let metrics = Arc::new(metrics.with_metric(
            "storage_watch_cache_bytes",
            "Bytes held by the watch cache's window of recent events, encodings included \
             (bounded by --watch-cache-bytes)",
            hub_bytes,
        ));
        let sweeper = spawn_sweeper(&raw, config.sweep_interval);
        let backend: Arc<dyn Backend> = Arc::new(MeteredBackend {
            inner: raw,
            write_seconds: metrics.write_seconds.clone(),
        });
        let mut ropts = config.registry;
        ropts.event_ttl = config.event_ttl;
        if let StoreKind::Etcd(opts) = &config.store {
            // etcd 3.4 counts the rest of the range on every read it serves: an unpaged list
            // read in smaller pages costs etcd more than in its ranges.
            ropts.list_page_items = ropts.list_page_items.max(opts.range_keys);
        }
        if let Some(max) = ropts.max_events
            && backend.live_keys().is_none()
        {
            tracing::warn!(
                max_events = max,
                "this store does not count its events, so max-events is not enforced"
            );
        }
        let mut registry = EventRegistry::new(backend.clone(), clock.clone(), ropts);
        if !admission.is_empty() {
            let enabled: Vec<String> = admission.enabled().map(|p| p.to_string()).collect();
            tracing::info!(plugins = ?enabled, "admission plugins enabled");
            registry = registry.with_admission(Arc::new(admission));
        }
        let shutdown = CancellationToken::new();
        if let Authorization::Rbac(rules) = &access.authorization {
            // Ends with the shutdown token.
            drop(auth::reload::spawn(
                rules.clone(),
                auth_options.rbac_reload_interval,
                shutdown.clone(),
            ));
        }
        let events = EventsApi::new(registry.clone(), clock.clone())
            .with_shutdown(shutdown.clone())
            .with_metrics(metrics.clone())
            .router()
            .merge(auth::reviews::routes(access.clone()));
        let metrics_route = Router::new()
            .route("/metrics", get(metrics_handler))
            .with_state(metrics.clone());
        // Not ready while the store cannot take writes (a dead writer, a failing commit):
        // a load balancer then sends clients elsewhere.
        let store = backend.clone();
        let health =
            HealthChecks::default().with_readiness(check_fn("storage", move || store.health()));
        // After the store opened: a SQLite store holds the data directory's lock, so no other
        // server is making certificates in it.
        let (tls, pki) = match &config.transport {
            Transport::PlainHttp => (None, None),
            Transport::Https(options) => {
                let (tls, pki) =
                    setup_tls(options.clone(), config.store.clone(), config.listen).await?;
                (Some(tls), pki)
            }
        };
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .map_err(|error| ServerError::Bind {
                addr: config.listen,
                error,
            })?;
        let addr = listener.local_addr().map_err(ServerError::Io)?;
        let guards = Guards {
            audit: audit_layer,
            browser: BrowserLayer::new(addr, &config.browser),
            auth: AuthLayer::new(access),
            limits: LimitsLayer::new(&config.limits, Some(metrics.clone())),
        };
        let app = api::router_with_guards(
            ApiState::new(clock).with_health(health),
            events.merge(metrics_route),
            OutputLayer::default().counting(metrics.clone()),
            guards,
        );
        let open_files = listen::open_files_limit();
        let connections = config.connections.clone().fitted(open_files);
        if connections.max_connections < config.connections.max_connections {
            tracing::warn!(
                max_connections = connections.max_connections,
                asked = config.connections.max_connections,
                open_files,
                "the open-files limit allows fewer connections than asked; raise it (ulimit -n) to serve more"
            );
        }
        let scheme = if tls.is_some() { "https" } else { "http" };
        if let Some(s) = sqlite {
            // Only a description for the error a second opener prints; the lock is held
            // either way.
            let text = format!(
                "herald pid {}, serving {scheme}://{addr}",
                std::process::id()
            );
            if let Err(e) = s.data_lock().describe(&text) {
                tracing::warn!(error = %e, "cannot describe the data directory lock holder");
            }
        }
        let token = shutdown.clone();
        let served = metrics.clone();
        tracing::info!(%addr, "herald API listening");
        let stop = async move { token.cancelled().await };
        let https = tls.is_some();
        let task = match tls {
            Some(tls) => tokio::spawn(listen::serve_with(
                listener,
                tls,
                app,
                connections,
                served,
                stop,
            )),
            None => tokio::spawn(listen::serve(listener, app, connections, served, stop)),
        };
        Ok(Server {
            addr,
            https,
            pki,
            shutdown,
            task: Some(task),
            sweeper,
            registry,
            metrics,
            store_closed,
            audit: audit_writer,
        })
    }

    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `https://<addr>` (or `http://` for plain HTTP), for clients and kubeconfigs.
    pub fn url(&self) -> String {
        let scheme = if self.https { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// The generated CA and certificates, when serving HTTPS with
    /// [`ServingCertificate::Generated`]: what a kubeconfig for the admin needs
    /// ([`Pki::admin`]), also for the memory store, whose certificates exist nowhere else.
    pub fn pki(&self) -> Option<&Pki> {
        self.pki.as_ref()
    }

    /// The registry (for in-process use: tests, `herald bench`).
    pub fn registry(&self) -> &EventRegistry {
        &self.registry
    }

    /// The metrics served at `/metrics`.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// A token that stops the server when cancelled (e.g. from a signal handler).
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// Waits until the server stops (its token is cancelled, or serving fails).
    pub async fn wait(mut self) -> Result<(), ServerError> {
        let r = self.join().await;
        self.close_store().await;
        r
    }

    /// Graceful shutdown: ends open watches, stops accepting, finishes in-flight requests,
    /// stops the sweeper, then waits (at most [`STORE_CLOSE_WAIT`] each) until the store has
    /// closed and the audit log's queued lines are written: on return a SQLite data directory is released and can be opened again, unless
    /// the caller still holds [`Server::registry`] clones (then it closes when they go).
    pub async fn shutdown(mut self) -> Result<(), ServerError> {
        self.shutdown.cancel();
        let r = self.join().await;
        self.close_store().await;
        r
    }

    async fn join(&mut self) -> Result<(), ServerError> {
        let r = match self.task.take() {
            Some(t) => match t.await {
                Ok(r) => r.map_err(ServerError::Io),
                Err(e) => Err(ServerError::Task(e.to_string())),
            },
            None => Ok(()),
        };
        self.sweeper.abort();
        let _ = (&mut self.sweeper).await;
        r
    }

    /// Drops this server's handles on the store, then waits for the last one elsewhere to go:
    /// connection tasks drop their handles just after the serve loop has seen them close.
    async fn close_store(mut self) {
        let audit = self.audit.take();
        let closed = self.store_closed.take();
        drop(self);
        if let Some(mut closed) = closed {
            let gone = async { while closed.changed().await.is_ok() {} };
            if tokio::time::timeout(STORE_CLOSE_WAIT, gone).await.is_err() {
                tracing::warn!(
                    "the store is still in use {STORE_CLOSE_WAIT:?} after shutdown; it closes when its last user lets go"
                );
            }
        }
        // The writer ends once the last connection has let go of the router, after writing
        // every queued line (the ResponseComplete of the watches the shutdown ended too).
        if let Some(writer) = audit
            && !writer.finished(STORE_CLOSE_WAIT).await
        {
            tracing::warn!(
                "the audit log is still in use {STORE_CLOSE_WAIT:?} after shutdown; lines still queued may be lost"
            );
        }
    }
}

/// The TLS handshake for `options`, and the generated certificates if it uses them (made or
/// reused under `<data>/pki` for SQLite, in memory otherwise). File work runs off the
/// runtime's threads.
async fn setup_tls(
    options: TlsOptions,
    store: StoreKind,
    listen: SocketAddr,
) -> Result<(Tls, Option<Pki>), ServerError> {
    let work = move || -> Result<(Tls, Option<Pki>), TlsError> {
        let (certificate, pki) = match &options.serving {
            ServingCertificate::Files {
                cert_file,
                key_file,
            } => (ReloadingCertificate::from_files(cert_file, key_file)?, None),
            ServingCertificate::Generated => {
                let pki = match &store {
                    StoreKind::Sqlite { dir } => {
                        Pki::load_or_create(&dir.join(PKI_DIR), listen.ip())
                    }
                    StoreKind::Memory | StoreKind::Etcd(_) => Pki::generate(listen.ip()),
                }
                .map_err(TlsError::Pki)?;
                let certificate = match pki.dir() {
                    // From the files, so replacing them is picked up as for --tls-cert-file.
                    Some(dir) => ReloadingCertificate::from_files(
                        &dir.join(crate::api::tls::pki::SERVING_CERT_FILE),
                        &dir.join(crate::api::tls::pki::SERVING_KEY_FILE),
                    )?,
                    None => {
                        let (chain, key) = pki.serving().map_err(TlsError::Pki)?;
                        ReloadingCertificate::fixed(chain, key)?
                    }
                };
                (certificate, Some(pki))
            }
        };
        let client_ca = match (&options.client_ca_file, &pki) {
            (Some(file), _) => Some(ReloadingClientCa::from_file(file)?),
            (None, Some(pki)) => Some(ReloadingClientCa::fixed(pki.ca_der())?),
            (None, None) => None,
        };
        let tls = Tls::reloading(Arc::new(certificate), client_ca.map(Arc::new))?;
        Ok((tls, pki))
    };
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| ServerError::Task(e.to_string()))?
        .map_err(ServerError::Tls)
}

/// How long [`Server::shutdown`] waits for the store to close after serving has stopped.
pub const STORE_CLOSE_WAIT: Duration = Duration::from_secs(10);

impl Drop for Server {
    fn drop(&mut self) {
        self.shutdown.cancel();
        self.sweeper.abort();
    }
}

/// A backend wrapper that records write latency (tokio's clock; metrics only).
struct MeteredBackend {
    inner: Arc<dyn Backend>,
    write_seconds: Histogram,
}

impl MeteredBackend {
    fn timed<'a, T: Send + 'a>(&'a self, f: BoxFuture<'a, T>) -> BoxFuture<'a, T> {
        async move {
            let start = tokio::time::Instant::now();
            let r = f.await;
            self.write_seconds.observe(start.elapsed().as_secs_f64());
            r
        }
        .boxed()
    }
}

impl Backend for MeteredBackend {
    fn create<'a>(
        &'a self,
        key: &'a str,
        value: Bytes,
        ttl: Option<Duration>,
    ) -> BoxFuture<'a, crate::storage::Result<KeyValue>> {
        self.timed(self.inner.create(key, value, ttl))
    }
    fn update<'a>(
        &'a self,
        key: &'a str,
        value: Bytes,
        expected: Option<Revision>,
        ttl: Option<Duration>,
    ) -> BoxFuture<'a, crate::storage::Result<KeyValue>> {
        self.timed(self.inner.update(key, value, expected, ttl))
    }
    fn create_indexed<'a>(
        &'a self,
        key: &'a str,
        value: Bytes,
        index: IndexValues,
        ttl: Option<Duration>,
    ) -> BoxFuture<'a, crate::storage::Result<KeyValue>> {
        self.timed(self.inner.create_indexed(key, value, index, ttl))
    }
    fn update_indexed<'a>(
        &'a self,
        key: &'a str,
        value: Bytes,
        expected: Option<Revision>,
        index: IndexValues,
        ttl: Option<Duration>,
    ) -> BoxFuture<'a, crate::storage::Result<KeyValue>> {
        self.timed(self.inner.update_indexed(key, value, expected, index, ttl))
    }
    fn delete<'a>(
        &'a self,
        key: &'a str,
        expected: Option<Revision>,
    ) -> BoxFuture<'a, crate::storage::Result<Deleted>> {
        self.timed(self.inner.delete(key, expected))
    }
    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, crate::storage::Result<Option<KeyValue>>> {
        self.inner.get(key)
    }
    fn list<'a>(
        &'a self,
        prefix: &'a str,
        opts: ListOptions,
    ) -> BoxFuture<'a, crate::storage::Result<ListResult>> {
        self.inner.list(prefix, opts)
    }
    fn watch<'a>(
        &'a self,
        prefix: &'a str,
        after: Revision,
    ) -> BoxFuture<'a, crate::storage::Result<WatchStream>> {
        self.inner.watch(prefix, after)
    }
    fn watch_batches<'a>(
        &'a self,
        prefix: &'a str,
        after: Revision,
    ) -> BoxFuture<'a, crate::storage::Result<CachedWatchStream>> {
        self.inner.watch_batches(prefix, after)
    }
    fn current_revision(&self) -> BoxFuture<'_, crate::storage::Result<Revision>> {
        self.inner.current_revision()
    }
    fn expire_due(&self) -> BoxFuture<'_, crate::storage::Result<usize>> {
        self.inner.expire_due()
    }
    fn compact(&self, revision: Revision) -> BoxFuture<'_, crate::storage::Result<()>> {
        self.inner.compact(revision)
    }
    fn health(&self) -> Result<(), String> {
        self.inner.health()
    }
    fn live_keys(&self) -> Option<usize> {
        self.inner.live_keys()
    }
}
