//! Inflight limits and the request deadline, as kube-apiserver's `--max-requests-inflight`,
//! `--max-mutating-requests-inflight` and `--request-timeout`.
//!
//! - **Inflight**: at most [`RequestLimitOptions::max_requests_inflight`] read-only requests
//!   (GET, HEAD, OPTIONS) and [`RequestLimitOptions::max_mutating_requests_inflight`] others
//!   are served at once. A request over its limit is answered at once, never queued: 429
//!   `TooManyRequests` with `Retry-After: 1` and `details.retryAfterSeconds: 1`, which
//!   client-go (kubectl, kube-rs' and Herald's recorders alike) retries after that second.
//!   kube-apiserver answers the same code, header and message as `text/plain`; Herald's body
//!   is the `Status` every other error has. A request counts until its response has been
//!   sent (a long list included), not only until its handler returns.
//! - **Exempt**: long-running requests (watches) are not counted, as kube-apiserver exempts
//!   them (they are bounded by the connection bound instead); neither are the health
//!   endpoints (kube-apiserver's priority and fairness exempts its probes).
//! - **Deadline**: a request that is not long-running must produce its response within
//!   [`RequestLimitOptions::request_timeout`], reading its body included (a body sent a
//!   byte at a time is cut there): otherwise 504 `Timeout`, "request did not complete within
//!   requested timeout", as kube-apiserver answers. A write that was under way may still
//!   complete, as on kube-apiserver (the 504 says the outcome is unknown).
//!
//! Counted in `/metrics`: `herald_apiserver_current_inflight_requests{request_kind}` and
//! `herald_apiserver_dropped_requests_total{request_kind}` (kube-apiserver's names, with
//! `readOnly` and `mutating`); the 429s and 504s are also in the requests family by code.
//!
//! ```
//! use axum::{Router, routing::get};
//! use herald_server::api::limits::{LimitsLayer, RequestLimitOptions};
//! let app: Router = Router::new()
//!     .route("/x", get(|| async { "x" }))
//!     .layer(LimitsLayer::new(&RequestLimitOptions::default(), None));
//! # let _ = app;
//! ```

use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::Request;
use axum::response::Response;
use futures::future::BoxFuture;
use herald_core::status::{ApiError, Reason};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tower_layer::Layer;
use tower_service::Service;

use super::error::status_response;
use super::health::is_health_path;
use super::hold::Holding;
use super::metrics::{InflightLabels, Metrics, verb_of};

/// kube-apiserver's `--max-requests-inflight` default.
pub const DEFAULT_MAX_REQUESTS_INFLIGHT: usize = 400;
/// kube-apiserver's `--max-mutating-requests-inflight` default.
pub const DEFAULT_MAX_MUTATING_REQUESTS_INFLIGHT: usize = 200;
/// kube-apiserver's `--request-timeout` default.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// The `Retry-After` of a 429 at an inflight limit (kube-apiserver's).
pub const RETRY_AFTER_SECONDS: u32 = 1;

/// The inflight limits and the request deadline (see the [module docs](self)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestLimitOptions {
    /// Read-only requests (GET, HEAD, OPTIONS; watches and health probes excepted) served at
    /// once; over it, 429. 0 = no limit. Default [`DEFAULT_MAX_REQUESTS_INFLIGHT`], 400
    /// (`--max-requests-inflight`).
    pub max_requests_inflight: usize,
    /// Other requests (creates, updates, patches, deletes) served at once; over it, 429.
    /// 0 = no limit. Default [`DEFAULT_MAX_MUTATING_REQUESTS_INFLIGHT`], 200
    /// (`--max-mutating-requests-inflight`).
    pub max_mutating_requests_inflight: usize,
    /// How long a request that is not a watch may take to produce its response, its body
    /// read included; then 504. Default [`DEFAULT_REQUEST_TIMEOUT`], 60 s
    /// (`--request-timeout`). Watches have their own duration (`timeoutSeconds`, or the
    /// registry's default).
    pub request_timeout: Duration,
}

impl Default for RequestLimitOptions {
    fn default() -> Self {
        RequestLimitOptions {
            max_requests_inflight: DEFAULT_MAX_REQUESTS_INFLIGHT,
            max_mutating_requests_inflight: DEFAULT_MAX_MUTATING_REQUESTS_INFLIGHT,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
        }
    }
}

/// What a request counts as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestKind {
    /// A watch: long-running, neither counted nor given a deadline.
    LongRunning,
    /// `/healthz`, `/livez`, `/readyz`: not counted, given the deadline.
    Probe,
    /// GET, HEAD, OPTIONS.
    ReadOnly,
    /// Every other method.
    Mutating,
}

impl RequestKind {
    /// The kind of a request of `method` on `uri`.
    pub fn of(method: &http::Method, uri: &http::Uri) -> Self {
        if is_health_path(uri.path()) {
            return RequestKind::Probe;
        }
        if verb_of(method, uri.path(), uri.query()) == "watch" {
            return RequestKind::LongRunning;
        }
        match *method {
            http::Method::GET | http::Method::HEAD | http::Method::OPTIONS => RequestKind::ReadOnly,
            _ => RequestKind::Mutating,
        }
    }

    /// The `request_kind` label of the inflight metrics.
    fn label(self) -> &'static str {
        match self {
            RequestKind::Mutating => "mutating",
            _ => "readOnly",
        }
    }
}

/// The layer; apply it inside [`OutputLayer`](super::output::OutputLayer), so its 429s and
/// 504s get the standard headers and are counted.
#[derive(Clone)]
pub struct LimitsLayer {
    limits: Arc<Limits>,
}

impl std::fmt::Debug for LimitsLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LimitsLayer")
            .field("request_timeout", &self.limits.request_timeout)
            .finish_non_exhaustive()
    }
}

struct Limits {
    read_only: Option<Arc<Semaphore>>,
    mutating: Option<Arc<Semaphore>>,
    request_timeout: Duration,
    metrics: Option<Arc<Metrics>>,
}

impl LimitsLayer {
    /// Limits as `options` say, counted in `metrics` when given.
    pub fn new(options: &RequestLimitOptions, metrics: Option<Arc<Metrics>>) -> Self {
        let semaphore = |n: usize| (n > 0).then(|| Arc::new(Semaphore::new(n)));
        LimitsLayer {
            limits: Arc::new(Limits {
                read_only: semaphore(options.max_requests_inflight),
                mutating: semaphore(options.max_mutating_requests_inflight),
                request_timeout: options.request_timeout,
                metrics,
            }),
        }
    }
}

impl<S> Layer<S> for LimitsLayer {
    type Service = LimitsService<S>;

    fn layer(&self, inner: S) -> LimitsService<S> {
        LimitsService {
            inner,
            limits: self.limits.clone(),
        }
    }
}

/// The service [`LimitsLayer`] wraps around a route.
#[derive(Clone)]
pub struct LimitsService<S> {
    inner: S,
    limits: Arc<Limits>,
}

impl<S> std::fmt::Debug for LimitsService<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LimitsService").finish_non_exhaustive()
    }
}

/// An inflight permit, counted in the gauge while held.
struct Permit {
    _permit: OwnedSemaphorePermit,
    gauge: Option<(Arc<Metrics>, RequestKind)>,
}

impl Drop for Permit {
    fn drop(&mut self) {
        if let Some((m, kind)) = &self.gauge {
            m.inflight
                .get_or_create(&InflightLabels {
                    request_kind: kind.label(),
                })
                .dec();
        }
    }
}

impl Limits {
    /// A permit for a request of `kind`: `Ok(None)` when it is not counted, `Err` with the
    /// 429 when its limit is reached.
    fn admit(&self, kind: RequestKind) -> Result<Option<Permit>, Response> {
        let semaphore = match kind {
            RequestKind::ReadOnly => &self.read_only,
            RequestKind::Mutating => &self.mutating,
            RequestKind::LongRunning | RequestKind::Probe => return Ok(None),
        };
        let Some(semaphore) = semaphore else {
            return Ok(None);
        };
        let labels = InflightLabels {
            request_kind: kind.label(),
        };
        match semaphore.clone().try_acquire_owned() {
            Ok(permit) => {
                if let Some(m) = &self.metrics {
                    m.inflight.get_or_create(&labels).inc();
                }
                Ok(Some(Permit {
                    _permit: permit,
                    gauge: self.metrics.clone().map(|m| (m, kind)),
                }))
            }
            Err(_) => {
                if let Some(m) = &self.metrics {
                    m.dropped.get_or_create(&labels).inc();
                }
                Err(status_response(&ApiError::too_many_requests(
                    "Too many requests, please try again later.",
                    RETRY_AFTER_SECONDS,
                )))
            }
        }
    }
}

/// The 504 of a request past its deadline, in kube-apiserver's words.
pub fn timeout_error() -> ApiError {
    ApiError::new(
        504,
        Reason::Timeout,
        "Timeout: request did not complete within requested timeout - context deadline exceeded",
    )
}

impl<S> Service<Request> for LimitsService<S>
where
    S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response, Infallible>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request) -> Self::Future {
        let kind = RequestKind::of(req.method(), req.uri());
        let permit = match self.limits.admit(kind) {
            Ok(p) => p,
            Err(resp) => return Box::pin(std::future::ready(Ok(resp))),
        };
        // The clone that was made ready is the one called (tower's rule).
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let future = inner.call(req);
        let timeout = self.limits.request_timeout;
        Box::pin(async move {
            let resp = if kind == RequestKind::LongRunning {
                future.await?
            } else {
                match tokio::time::timeout(timeout, future).await {
                    Ok(r) => r?,
                    Err(_) => status_response(&timeout_error()),
                }
            };
            Ok(match permit {
                Some(p) => resp.map(|b| Holding::body(b, p)),
                None => resp,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::{Method, Uri};

    #[test]
    fn kinds() {
        let kind = |m: Method, u: &str| RequestKind::of(&m, &u.parse::<Uri>().unwrap());
        assert_eq!(
            kind(Method::GET, "/api/v1/events?watch=true"),
            RequestKind::LongRunning
        );
        assert_eq!(
            kind(Method::GET, "/apis/events.k8s.io/v1/watch/events"),
            RequestKind::LongRunning
        );
        assert_eq!(kind(Method::GET, "/api/v1/events"), RequestKind::ReadOnly);
        assert_eq!(kind(Method::GET, "/readyz/storage"), RequestKind::Probe);
        assert_eq!(
            kind(Method::POST, "/api/v1/namespaces/a/events"),
            RequestKind::Mutating
        );
        assert_eq!(
            kind(Method::DELETE, "/api/v1/namespaces/a/events"),
            RequestKind::Mutating
        );
    }
}
