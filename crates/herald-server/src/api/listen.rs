//! The accept loop: HTTP/1.1 and HTTP/2 connections with kube-apiserver's timeouts, a bound on how many
//! are open, and a way in for health probes while that bound is reached.
//!
//! kube-apiserver serves through Go's `http.Server` with `ReadHeaderTimeout` 32 s and
//! `IdleTimeout` 90 s; [`serve_with`] does the same on hyper:
//!
//! - **Headers**: a new connection has [`ConnectionOptions::read_header_timeout`] to deliver
//!   its first request's headers, counted from the accept; a kept-alive connection has as
//!   long from the first byte of its next request. A connection that is late is closed
//!   without an answer (Go does the same). This is what ends idle connections that never
//!   send anything and headers sent a byte at a time.
//! - **Idle keep-alive**: between requests a connection waits at most
//!   [`ConnectionOptions::idle_timeout`] for the next one, then it is closed.
//! - **Bodies**: while a request is being served no connection timeout runs (a watch lasts
//!   as long as it lasts); a slow body is bounded by the request deadline of the
//!   [`limits`](super::limits) layer (kube-apiserver's `--request-timeout`), which answers
//!   504 and lets the connection go.
//! - **Bound**: at most [`ConnectionOptions::max_connections`] connections are served. Over
//!   it, up to [`ConnectionOptions::health_connections`] more are accepted as *health-only*
//!   connections: one request each, headers within [`HEALTH_ONLY_HEADER_TIMEOUT`], and only
//!   `/healthz`, `/livez` and `/readyz` answered (anything else gets 429 with `Retry-After`,
//!   which client-go retries). So a prober gets through while idle or slow clients hold
//!   every regular slot, and the health-only slots free themselves within seconds. Beyond
//!   those too, a connection is closed at once. Reaching the bound is logged as a warning at
//!   most once per [`LIMIT_LOG_INTERVAL`] (with the count of connections turned away since
//!   the last line), never once per connection, and counted in `/metrics`
//!   (`herald_apiserver_connections_over_limit_total`). kube-apiserver has no such bound (it
//!   runs out of file descriptors instead); [`ConnectionOptions::fitted`] keeps Herald's
//!   below the process's open-files limit.
//!
//! The byte stream is generic ([`Handshake`]): plain TCP ([`Plain`]) or TLS
//! ([`Tls`](super::tls::Tls)), whose handshake runs in the connection's own task within the
//! header timeout (as Go bounds its TLS handshake). What the handshake established (a
//! [`Session`]) picks the protocol and rides on every request: a verified client
//! certificate chain as a [`VerifiedClientCertificates`] extension.
//!
//! Shutdown is graceful: once the `shutdown` future completes, no connection is accepted,
//! idle connections are closed, and requests in progress finish (watches end through their
//! own shutdown token, see [`EventsApi::with_shutdown`](super::events::EventsApi::with_shutdown)).
//!
//! **Protocols**: HTTP/1.1, and HTTP/2 on a TLS connection whose client chose `h2` by ALPN
//! (as Go's server; kubectl and client-go do over `https://`). Plain HTTP is HTTP/1.1 only
//! (no `h2c`), as kubectl and client-go speak to an `http://` server. On HTTP/2 the same
//! timeouts apply to the connection as a whole: it is busy while any stream is being
//! served, idle when none is (and then any frame, a PING included, starts the header
//! timeout again); a health-only connection takes one stream at a time and is closed
//! (GOAWAY) after its first request.

use std::convert::Infallible;
use std::future::{Future, poll_fn};
use std::io;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

use axum::Router;
use axum::response::Response;
use futures::future::BoxFuture;
use herald_core::status::ApiError;
use http::{HeaderValue, Request, header};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use pin_project_lite::pin_project;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower_service::Service as _;

use super::error::status_response;
use super::health::is_health_path;
use super::hold::Holding;
use super::log_throttle::Throttle;
use super::metrics::{Metrics, OverLimitLabels, ProbeLaneLabels, TimedOutLabels};
use super::peer::{PeerAddr, VerifiedClientCertificates};
use super::probe_lane;

/// kube-apiserver's `ReadHeaderTimeout`.
pub const DEFAULT_READ_HEADER_TIMEOUT: Duration = Duration::from_secs(32);
/// kube-apiserver's `IdleTimeout` (and Go's transport's idle connection timeout).
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(90);
/// Herald's default bound on open connections: room for a few thousand watchers.
pub const DEFAULT_MAX_CONNECTIONS: usize = 4096;
/// Herald's default number of health-only connections over the bound.
pub const DEFAULT_HEALTH_CONNECTIONS: usize = 64;
/// How long a health-only connection has to send its request's headers (or the header
/// timeout, if shorter): short, so a slot held by a silent client is soon free again.
pub const HEALTH_ONLY_HEADER_TIMEOUT: Duration = Duration::from_secs(5);
/// The least time between two "connection limit reached" log lines.
pub const LIMIT_LOG_INTERVAL: Duration = Duration::from_secs(10);
/// File descriptors [`ConnectionOptions::fitted`] leaves for everything but connections
/// (the listener, the store's files, the runtime, standard streams).
pub const RESERVED_FILES: u64 = 128;

/// How connections are timed and bounded (see the [module docs](self)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionOptions {
    /// How long a client has to send a request's headers: from the accept for a
    /// connection's first request, from the first byte for the next ones. At the timeout the
    /// connection is closed without an answer. Default [`DEFAULT_READ_HEADER_TIMEOUT`], 32 s.
    pub read_header_timeout: Duration,
    /// How long a kept-alive connection waits for the first byte of its next request; then
    /// it is closed. Default [`DEFAULT_IDLE_TIMEOUT`], 90 s.
    pub idle_timeout: Duration,
    /// The most connections served at once (`herald serve --max-connections`). At the
    /// bound, new connections are health-only connections (up to
    /// [`health_connections`](Self::health_connections) of them), then closed at once.
    /// Default [`DEFAULT_MAX_CONNECTIONS`]; [`fitted`](Self::fitted) lowers it to what the
    /// open-files limit allows. At least 1.
    pub max_connections: usize,
    /// Connections accepted over `max_connections` that answer only `/healthz`, `/livez` and
    /// `/readyz`, one request each. Default [`DEFAULT_HEALTH_CONNECTIONS`]; 0 closes every
    /// connection over the bound.
    pub health_connections: usize,
    /// Accept connections on a thread of their own and answer plain-HTTP health probes
    /// there, so they do not wait behind a busy runtime (the [probe lane](super::probe_lane)).
    /// Default `false`, as the lane runs on real time (a paused test clock does not reach
    /// it); `herald serve` turns it on.
    pub probe_lane: bool,
}

impl Default for ConnectionOptions {
    fn default() -> Self {
        ConnectionOptions {
            read_header_timeout: DEFAULT_READ_HEADER_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            health_connections: DEFAULT_HEALTH_CONNECTIONS,
            probe_lane: false,
        }
    }
}

impl ConnectionOptions {
    /// These options with `max_connections` lowered, if need be, so that the connections,
    /// the health-only ones and [`RESERVED_FILES`] fit in `open_files` descriptors (at least
    /// one connection is always allowed). `None` (unknown limit) changes nothing.
    ///
    /// ```
    /// use herald_server::api::listen::ConnectionOptions;
    /// let o = ConnectionOptions::default().fitted(Some(1024));
    /// assert_eq!(o.max_connections, 1024 - 128 - 64);
    /// assert_eq!(ConnectionOptions::default().fitted(None), ConnectionOptions::default());
    /// ```
    pub fn fitted(mut self, open_files: Option<u64>) -> Self {
        if let Some(limit) = open_files {
            let room = limit
                .saturating_sub(RESERVED_FILES)
                .saturating_sub(self.health_connections as u64)
                .max(1);
            self.max_connections = self
                .max_connections
                .min(usize::try_from(room).unwrap_or(usize::MAX));
        }
        self.max_connections = self.max_connections.max(1);
        self
    }
}

/// The process's soft limit on open files (`RLIMIT_NOFILE`), if it can be read and is not
/// unlimited.
#[cfg(unix)]
pub fn open_files_limit() -> Option<u64> {
    let (soft, _) = nofile()?;
    (soft != libc::RLIM_INFINITY).then_some(soft)
}

/// The process's soft limit on open files; unknown on this platform.
#[cfg(not(unix))]
pub fn open_files_limit() -> Option<u64> {
    None
}

/// Raises the soft open-files limit to the hard limit, as every Go program (kube-apiserver
/// included) does at start, and returns the new soft limit. A server should call it before
/// [`ConnectionOptions::fitted`]; it changes the whole process, so a library leaves it to
/// the program (`herald serve` calls it).
#[cfg(unix)]
pub fn raise_open_files_limit() -> Option<u64> {
    let (soft, hard) = nofile()?;
    if soft < hard {
        let want = libc::rlimit {
            rlim_cur: hard,
            rlim_max: hard,
        };
        // SAFETY: `want` is a valid `rlimit` that lives across the call.
        #[allow(unsafe_code)]
        let rc = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &want) };
        if rc != 0 {
            tracing::debug!(error = %io::Error::last_os_error(), "cannot raise the open-files limit");
        }
    }
    open_files_limit()
}

/// Raises the soft open-files limit; nothing to do on this platform.
#[cfg(not(unix))]
pub fn raise_open_files_limit() -> Option<u64> {
    None
}

#[cfg(unix)]
fn nofile() -> Option<(libc::rlim_t, libc::rlim_t)> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid, writable `rlimit` for the call to fill.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
    (rc == 0).then_some((lim.rlim_cur, lim.rlim_max))
}

/// The HTTP version a connection speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    /// HTTP/1.1 (and 1.0).
    #[default]
    Http1,
    /// HTTP/2, chosen by ALPN `h2`.
    Http2,
}

/// What a handshake established about a connection.
#[derive(Debug, Clone, Default)]
pub struct Session {
    /// The protocol spoken on it.
    pub protocol: Protocol,
    /// The client's certificate chain, verified against the client CA; inserted as an
    /// extension into every request of the connection. `None` on plain HTTP and when the
    /// client presented none.
    pub client_certificates: Option<VerifiedClientCertificates>,
}

/// Turns an accepted TCP stream into the stream HTTP is spoken on: nothing to do for plain
/// HTTP ([`Plain`]), a TLS handshake for HTTPS ([`Tls`](super::tls::Tls)). It runs in the
/// connection's own task, within the header timeout, so a slow handshake holds neither the
/// accept loop nor other clients. A handshake that fails closes the connection (logged at
/// debug): nothing reaches the router.
pub trait Handshake: Clone + Send + Sync + 'static {
    /// The stream after the handshake.
    type Io: AsyncRead + AsyncWrite + Unpin + Send + 'static;
    /// Whether HTTP is spoken on the TCP stream as it is (then the probe lane may read a
    /// request line from its first bytes).
    const PLAIN: bool = false;
    /// Performs the handshake on a freshly accepted connection.
    fn handshake(&self, tcp: TcpStream) -> impl Future<Output = io::Result<Self::Io>> + Send;
    /// What the handshake established on `io`. Default: HTTP/1.1, no client certificate.
    fn session(&self, io: &Self::Io) -> Session {
        let _ = io;
        Session::default()
    }
}

/// Plain HTTP: the TCP stream as it is.
#[derive(Debug, Clone, Copy, Default)]
pub struct Plain;

impl Handshake for Plain {
    type Io = TcpStream;
    const PLAIN: bool = true;
    async fn handshake(&self, tcp: TcpStream) -> io::Result<TcpStream> {
        Ok(tcp)
    }
}

/// Serves `app` on `listener` over plain HTTP with `options` until `shutdown` completes,
/// then shuts down gracefully (see the [module docs](self)). Connection counts and timeouts
/// go to `metrics`. Returns once every connection has closed.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    options: ConnectionOptions,
    metrics: Arc<Metrics>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    serve_with(listener, Plain, app, options, metrics, shutdown).await
}

/// [`serve`] with a [`Handshake`] on every connection (TLS).
pub async fn serve_with<H: Handshake>(
    listener: TcpListener,
    handshake: H,
    app: Router,
    options: ConnectionOptions,
    metrics: Arc<Metrics>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    if !options.probe_lane {
        return accept_loop(listener, handshake, app, options, metrics, shutdown, None).await;
    }
    // The listener moves to the lane's runtime; connections that are not probes come back
    // to this one.
    let api = tokio::runtime::Handle::current();
    let listener = listener.into_std()?;
    let (done, finished) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("herald-probes".into())
        .spawn(move || {
            let served = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .and_then(|lane| {
                    lane.block_on(async move {
                        let listener = TcpListener::from_std(listener)?;
                        accept_loop(
                            listener,
                            handshake,
                            app,
                            options,
                            metrics,
                            shutdown,
                            Some(api),
                        )
                        .await
                    })
                });
            let _ = done.send(served);
        })?;
    finished
        .await
        .unwrap_or_else(|_| Err(io::Error::other("the probe lane thread ended early")))
}

/// Accepts connections until `shutdown`, serving each in its own task: on this runtime, or,
/// with `lane` (this runs on the probe lane), probes here and the rest on `lane`'s runtime.
async fn accept_loop<H: Handshake>(
    listener: TcpListener,
    handshake: H,
    app: Router,
    options: ConnectionOptions,
    metrics: Arc<Metrics>,
    shutdown: impl Future<Output = ()> + Send + 'static,
    lane: Option<tokio::runtime::Handle>,
) -> io::Result<()> {
    let options = options.fitted(None);
    let slots = Arc::new(Slots {
        open: AtomicUsize::new(0),
        health_only: AtomicUsize::new(0),
        metrics: metrics.clone(),
    });
    let tracker = TaskTracker::new();
    let stop = CancellationToken::new();
    let mut limit_log = Throttle::new(LIMIT_LOG_INTERVAL);
    let mut accept_log = Throttle::new(LIMIT_LOG_INTERVAL);
    let mut shutdown = pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            biased;
            () = &mut shutdown => break,
            r = listener.accept() => r,
        };
        let tcp = match accepted {
            Ok((tcp, _peer)) => tcp,
            // The client gave up between connecting and the accept: nothing to do.
            Err(e) if is_connection_error(&e) => continue,
            // Out of file descriptors (or memory): wait a little rather than spin, and say
            // so (not once per attempt).
            Err(e) => {
                if let Some(suppressed) = accept_log.ready() {
                    tracing::error!(error = %e, suppressed, "cannot accept connections");
                }
                tokio::select! {
                    () = &mut shutdown => break,
                    () = tokio::time::sleep(Duration::from_millis(100)) => continue,
                }
            }
        };
        // Small writes (watch lines) go out at once.
        let _ = tcp.set_nodelay(true);
        let slot = match slots.take(&options) {
            Some(slot) => slot,
            None => {
                metrics
                    .connections_over_limit
                    .get_or_create(&OverLimitLabels { outcome: "closed" })
                    .inc();
                log_limit(&mut limit_log, &slots, &options);
                continue;
            }
        };
        if slot.kind == SlotKind::HealthOnly {
            metrics
                .connections_over_limit
                .get_or_create(&OverLimitLabels {
                    outcome: "health_only",
                })
                .inc();
            log_limit(&mut limit_log, &slots, &options);
        }
        let serve = Serve {
            handshake: handshake.clone(),
            app: app.clone(),
            slot,
            timeouts: Timeouts::of(&options),
            stop: stop.clone(),
            metrics: metrics.clone(),
        };
        match &lane {
            None => tracker.spawn(serve.connection(tcp, Keep::Alive)),
            Some(api) => tracker.spawn(serve.on_lane(tcp, api.clone(), tracker.clone())),
        };
    }
    drop(listener);
    stop.cancel();
    tracker.close();
    tracker.wait().await;
    Ok(())
}

fn log_limit(log: &mut Throttle, slots: &Slots, options: &ConnectionOptions) {
    if let Some(turned_away) = log.ready() {
        tracing::warn!(
            open = slots.open.load(Ordering::Relaxed),
            health_only = slots.health_only.load(Ordering::Relaxed),
            max_connections = options.max_connections,
            turned_away_since_last_line = turned_away,
            "connection limit reached: new connections answer only /healthz, /livez and /readyz until others close; raise --max-connections (and the open-files limit) if these clients are legitimate"
        );
    }
}

/// Accept errors that concern one connection only.
fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

/// Which kind of slot a connection holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SlotKind {
    /// One of `max_connections`: the whole API.
    Regular,
    /// Over the bound: health endpoints only, one request.
    HealthOnly,
}

/// The connection counts. Only the accept loop takes slots, so a check then an increment
/// cannot overshoot; connection tasks give them back.
struct Slots {
    open: AtomicUsize,
    health_only: AtomicUsize,
    metrics: Arc<Metrics>,
}

impl Slots {
    fn take(self: &Arc<Self>, options: &ConnectionOptions) -> Option<Slot> {
        let kind = if self.open.load(Ordering::Acquire) < options.max_connections {
            self.open.fetch_add(1, Ordering::AcqRel);
            SlotKind::Regular
        } else if self.health_only.load(Ordering::Acquire) < options.health_connections {
            self.health_only.fetch_add(1, Ordering::AcqRel);
            SlotKind::HealthOnly
        } else {
            return None;
        };
        self.metrics.connections.inc();
        Some(Slot {
            slots: self.clone(),
            kind,
        })
    }
}

/// A taken slot, given back on drop.
struct Slot {
    slots: Arc<Slots>,
    kind: SlotKind,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let counter = match self.kind {
            SlotKind::Regular => &self.slots.open,
            SlotKind::HealthOnly => &self.slots.health_only,
        };
        counter.fetch_sub(1, Ordering::AcqRel);
        self.slots.metrics.connections.dec();
    }
}

/// The timeouts of one connection.
#[derive(Debug, Clone, Copy)]
struct Timeouts {
    header: Duration,
    idle: Duration,
}

impl Timeouts {
    fn of(o: &ConnectionOptions) -> Self {
        Timeouts {
            header: o.read_header_timeout,
            idle: o.idle_timeout,
        }
    }
}

/// What a connection is waiting for, which says which timeout runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// A request's headers, since `since` (the accept, or the first byte after idling).
    Head { since: Instant },
    /// Nothing: `requests` requests are being served (their responses not yet sent).
    Busy { requests: usize },
    /// The next request, since `since` (the end of the last response).
    Idle { since: Instant },
}

/// The phase of one connection, shared by its byte stream (which sees bytes arrive), its
/// service (which sees requests begin and responses end) and its driver (which times it).
struct ConnState {
    phase: Mutex<Phase>,
}

impl ConnState {
    fn new(accepted: Instant) -> Self {
        ConnState {
            phase: Mutex::new(Phase::Head { since: accepted }),
        }
    }

    fn update(&self, f: impl FnOnce(Phase) -> Phase) {
        let mut p = self.phase.lock().unwrap_or_else(|e| e.into_inner());
        *p = f(*p);
    }

    fn phase(&self) -> Phase {
        *self.phase.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Bytes arrived: an idle connection starts a request.
    fn bytes_read(&self) {
        self.update(|p| match p {
            Phase::Idle { .. } => Phase::Head {
                since: Instant::now(),
            },
            p => p,
        });
    }

    fn request_began(&self) {
        self.update(|p| match p {
            Phase::Busy { requests } => Phase::Busy {
                requests: requests + 1,
            },
            _ => Phase::Busy { requests: 1 },
        });
    }

    fn response_ended(&self) {
        self.update(|p| match p {
            Phase::Busy { requests } if requests > 1 => Phase::Busy {
                requests: requests - 1,
            },
            _ => Phase::Idle {
                since: Instant::now(),
            },
        });
    }

    /// When the connection is to be closed if nothing happens, and why.
    fn deadline(&self, t: Timeouts) -> Option<(Instant, &'static str)> {
        match self.phase() {
            Phase::Head { since } => Some((since + t.header, "header")),
            Phase::Idle { since } => Some((since + t.idle, "idle")),
            Phase::Busy { .. } => None,
        }
    }
}

/// Marks its connection busy while it lives: from a request's start until its response has
/// been sent (it rides in the response body) or dropped.
struct Busy(Arc<ConnState>);

impl Busy {
    fn begin(state: Arc<ConnState>) -> Self {
        state.request_began();
        Busy(state)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.response_ended();
    }
}

pin_project! {
    /// A byte stream that tells its connection's state when bytes arrive.
    struct Observed<I> {
        #[pin]
        io: I,
        state: Arc<ConnState>,
    }
}

impl<I: AsyncRead> AsyncRead for Observed<I> {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.project();
        let before = buf.filled().len();
        let r = this.io.poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.state.bytes_read();
        }
        r
    }
}

impl<I: AsyncWrite> AsyncWrite for Observed<I> {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.project().io.poll_write(cx, buf)
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<io::Result<()>> {
        self.project().io.poll_flush(cx)
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<io::Result<()>> {
        self.project().io.poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.project().io.poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

/// The service of one connection: the app, with the connection marked busy while a request
/// is served, and, on a health-only connection, every path but the health endpoints refused.
#[derive(Clone)]
struct ConnService {
    app: Router,
    state: Arc<ConnState>,
    kind: SlotKind,
    client_certificates: Option<VerifiedClientCertificates>,
    peer: Option<PeerAddr>,
}

impl hyper::service::Service<Request<Incoming>> for ConnService {
    type Response = Response;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response, Infallible>>;

    fn call(&self, mut req: Request<Incoming>) -> Self::Future {
        let busy = Busy::begin(self.state.clone());
        if let Some(certs) = &self.client_certificates {
            req.extensions_mut().insert(certs.clone());
        }
        if let Some(peer) = self.peer {
            req.extensions_mut().insert(peer);
        }
        if self.kind == SlotKind::HealthOnly && !is_health_path(req.uri().path()) {
            let mut resp = status_response(&ApiError::too_many_requests(
                "too many open connections: this connection answers only /healthz, /livez and /readyz; please try again later",
                1,
            ));
            resp.headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
            return Box::pin(std::future::ready(Ok(resp.map(|b| Holding::body(b, busy)))));
        }
        let future = self.app.clone().call(req);
        Box::pin(async move {
            let resp = future.await?;
            Ok(resp.map(|b| Holding::body(b, busy)))
        })
    }
}

/// Why a connection closed other than by the client or at shutdown.
enum Closed {
    /// A header, idle or handshake timeout (the phase).
    TimedOut(&'static str),
    /// hyper's error (a malformed request, a reset).
    Http(Box<dyn std::error::Error + Send + Sync>),
}

/// Whether a connection may serve more than one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Keep {
    /// Keep-alive, as the client asks (health-only slots still take one request).
    Alive,
    /// One request, answered with `Connection: close` (a probe on the lane).
    OneRequest,
}

/// What serving one accepted connection needs.
struct Serve<H> {
    handshake: H,
    app: Router,
    slot: Slot,
    timeouts: Timeouts,
    stop: CancellationToken,
    metrics: Arc<Metrics>,
}

impl<H: Handshake> Serve<H> {
    async fn connection(self, tcp: TcpStream, keep: Keep) {
        connection(
            tcp,
            self.handshake,
            self.app,
            self.slot,
            self.timeouts,
            self.stop,
            self.metrics,
            keep,
        )
        .await
    }

    /// On the probe lane: a plain-HTTP probe is served here, one request; anything else
    /// moves to the API's runtime (`api`), tracked by `tracker` for the graceful shutdown.
    async fn on_lane(self, tcp: TcpStream, api: tokio::runtime::Handle, tracker: TaskTracker) {
        let probe = H::PLAIN
            && tokio::select! {
                sniffed = probe_lane::first_bytes(&tcp, probe_lane::SNIFF_TIMEOUT) => {
                    sniffed == probe_lane::Sniffed::Probe
                }
                () = self.stop.cancelled() => return,
            };
        let outcome = if probe { "probe" } else { "handed_on" };
        self.metrics
            .probe_lane_connections
            .get_or_create(&ProbeLaneLabels { outcome })
            .inc();
        if probe {
            return self.connection(tcp, Keep::OneRequest).await;
        }
        // Re-registered with the API runtime's I/O driver, so the lane's thread does not
        // carry its readiness events.
        let tcp = match tcp.into_std() {
            Ok(tcp) => tcp,
            Err(e) => {
                tracing::debug!(error = %e, "cannot move a connection off the probe lane");
                return;
            }
        };
        tracker.spawn_on(
            async move {
                match TcpStream::from_std(tcp) {
                    Ok(tcp) => self.connection(tcp, Keep::Alive).await,
                    Err(e) => {
                        tracing::debug!(error = %e, "cannot take a connection from the probe lane")
                    }
                }
            },
            &api,
        );
    }
}

#[allow(clippy::too_many_arguments)]
async fn connection<H: Handshake>(
    tcp: TcpStream,
    handshake: H,
    app: Router,
    slot: Slot,
    timeouts: Timeouts,
    stop: CancellationToken,
    metrics: Arc<Metrics>,
    keep: Keep,
) {
    let accepted = Instant::now();
    let peer = tcp.peer_addr().ok().map(PeerAddr);
    let timeouts = match slot.kind {
        SlotKind::Regular => timeouts,
        SlotKind::HealthOnly => Timeouts {
            header: timeouts.header.min(HEALTH_ONLY_HEADER_TIMEOUT),
            ..timeouts
        },
    };
    let io = tokio::select! {
        r = tokio::time::timeout(timeouts.header, handshake.handshake(tcp)) => match r {
            Ok(Ok(io)) => io,
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "handshake failed");
                return;
            }
            Err(_) => {
                timed_out(&metrics, "handshake");
                return;
            }
        },
        () = stop.cancelled() => return,
    };
    let session = handshake.session(&io);
    let state = Arc::new(ConnState::new(accepted));
    let service = ConnService {
        app,
        state: state.clone(),
        kind: slot.kind,
        client_certificates: session.client_certificates,
        peer,
    };
    let mut builder = auto::Builder::new(TokioExecutor::new());
    // The timeouts are this module's (hyper's header timer would also cut idle keep-alive
    // connections at the header timeout, where Go waits `IdleTimeout`).
    builder
        .http1()
        .header_read_timeout(None)
        .keep_alive(slot.kind == SlotKind::Regular && keep == Keep::Alive);
    if slot.kind == SlotKind::HealthOnly {
        builder.http2().max_concurrent_streams(1);
    }
    let builder = match session.protocol {
        Protocol::Http1 => builder.http1_only(),
        Protocol::Http2 => builder.http2_only(),
    };
    let one_request = slot.kind == SlotKind::HealthOnly && session.protocol == Protocol::Http2;
    let io = TokioIo::new(Observed {
        io,
        state: state.clone(),
    });
    let conn = builder.serve_connection(io, service);
    let mut conn = pin!(conn);
    let mut sleep = pin!(tokio::time::sleep_until(accepted + timeouts.header));
    let mut armed = accepted + timeouts.header;
    let mut stopped = pin!(stop.cancelled());
    let mut stopping = false;
    // One future drives the connection and times it: a request that begins or a response
    // that ends changes the phase while the connection is polled, so the deadline is looked
    // at again right after, in the same poll.
    let closed = poll_fn(|cx| {
        if !stopping && stopped.as_mut().poll(cx).is_ready() {
            stopping = true;
            conn.as_mut().graceful_shutdown();
        }
        // A health-only HTTP/2 connection: no stream after the first (HTTP/1.1 has
        // keep-alive off for the same).
        if one_request && !stopping && !matches!(state.phase(), Phase::Head { .. }) {
            stopping = true;
            conn.as_mut().graceful_shutdown();
        }
        if let Poll::Ready(r) = conn.as_mut().poll(cx) {
            return Poll::Ready(r.map_err(Closed::Http));
        }
        let Some((deadline, phase)) = state.deadline(timeouts) else {
            return Poll::Pending;
        };
        if deadline != armed {
            sleep.as_mut().reset(deadline);
            armed = deadline;
        }
        match sleep.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(Closed::TimedOut(phase))),
            Poll::Pending => Poll::Pending,
        }
    })
    .await;
    match closed {
        Ok(()) => {}
        Err(Closed::TimedOut(phase)) => timed_out(&metrics, phase),
        Err(Closed::Http(e)) => tracing::debug!(error = %e, "connection closed on an error"),
    }
    drop(slot);
}

fn timed_out(metrics: &Metrics, phase: &'static str) {
    tracing::debug!(phase, "closing a connection at its timeout");
    metrics
        .connections_timed_out
        .get_or_create(&TimedOutLabels { phase })
        .inc();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fitted_keeps_room_for_files_and_at_least_one_connection() {
        let o = ConnectionOptions::default();
        assert_eq!(o.clone().fitted(Some(1 << 20)).max_connections, 4096);
        assert_eq!(o.clone().fitted(Some(256)).max_connections, 64);
        assert_eq!(o.clone().fitted(Some(10)).max_connections, 1);
        let zero = ConnectionOptions {
            max_connections: 0,
            ..o
        };
        assert_eq!(zero.fitted(None).max_connections, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn phases_and_their_deadlines() {
        let t = Timeouts {
            header: Duration::from_secs(32),
            idle: Duration::from_secs(90),
        };
        let start = Instant::now();
        let s = Arc::new(ConnState::new(start));
        assert_eq!(s.deadline(t), Some((start + t.header, "header")));
        // Bytes of the first request do not move its header deadline.
        tokio::time::advance(Duration::from_secs(5)).await;
        s.bytes_read();
        assert_eq!(s.deadline(t), Some((start + t.header, "header")));
        let a = Busy::begin(s.clone());
        let b = Busy::begin(s.clone());
        assert_eq!(s.deadline(t), None);
        drop(a);
        assert_eq!(s.deadline(t), None, "one request still being served");
        drop(b);
        let idle = Instant::now();
        assert_eq!(s.deadline(t), Some((idle + t.idle, "idle")));
        tokio::time::advance(Duration::from_secs(60)).await;
        s.bytes_read();
        assert_eq!(s.deadline(t), Some((Instant::now() + t.header, "header")));
    }
}
