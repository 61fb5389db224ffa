//! herald-server's HTTP layer: `/version`, discovery, OpenAPI, health probes, metrics,
//! content negotiation, `Status` error responses, the output layer every response passes,
//! and the events endpoints ([`events`]), which reach the store only through the
//! [registry](crate::registry) and write their answers with [`herald_wire`].
//!
//! The events endpoints (`/api/v1[/namespaces/{ns}]/events[/{name}]` and the same under
//! `/apis/events.k8s.io/v1`) plug in through [`router_with`], which merges their `Router`
//! with the static one:
//!
//! ```no_run
//! use std::sync::Arc;
//! use axum::{Router, routing::get};
//! use herald_core::clock::SystemClock;
//! use herald_server::api::{self, ApiState};
//!
//! # async fn run() -> std::io::Result<()> {
//! let events: Router = Router::new().route("/api/v1/events", get(|| async { "list" }));
//! let app = api::router_with(ApiState::new(Arc::new(SystemClock)), events);
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! api::serve(listener, app, std::future::pending()).await
//! # }
//! ```

// Handlers answer `Result<_, StatusError>` / helpers `Result<_, ApiError>` (a `Status` body);
// errors are the cold path, so the size of `ApiError` is not worth a box.
#![allow(clippy::result_large_err)]

pub mod admission;
pub mod audit;
pub mod auth;
pub mod browser;
pub mod compression;
pub mod discovery;
pub mod error;
pub mod events;
pub mod field_validation;
pub mod health;
mod hold;
pub mod limits;
pub mod listen;
pub mod log_throttle;
pub mod metrics;
pub mod negotiate;
pub mod openapi;
pub mod output;
pub mod path;
pub mod peer;
pub mod probe_lane;
pub mod referenced;
pub mod tls;

use std::future::Future;
use std::sync::Arc;

use axum::Router;
use axum::routing::get;
use herald_core::clock::Clock;

pub use discovery::VersionInfo;
pub use error::StatusError;
pub use health::HealthChecks;

/// Shared state of the static endpoints.
#[derive(Clone)]
pub struct ApiState {
    /// The clock Table ages are computed from.
    pub clock: Arc<dyn Clock>,
    /// What `/version` reports.
    pub version: VersionInfo,
    /// Checks behind `/healthz`, `/livez`, `/readyz`.
    pub health: HealthChecks,
}

impl std::fmt::Debug for ApiState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiState")
            .field("version", &self.version)
            .field("health", &self.health)
            .finish_non_exhaustive()
    }
}

impl ApiState {
    /// State with the default version (`v1.32.4+herald`, minor `32`) and no extra health checks.
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        Self {
            clock,
            version: VersionInfo::default(),
            health: HealthChecks::default(),
        }
    }

    /// Replaces the health checks.
    pub fn with_health(mut self, health: HealthChecks) -> Self {
        self.health = health;
        self
    }
}

/// The static routes only, with their state applied, and without fallbacks, so it can be
/// merged with other routers (axum panics when two merged routers both have a fallback or
/// both serve the same path and method).
pub fn static_routes(state: ApiState) -> Router {
    let mut r = Router::new()
        .route("/version", get(discovery::version))
        .route("/version/", get(discovery::version))
        .route("/api", get(discovery::api))
        .route("/api/", get(discovery::api))
        .route("/apis", get(discovery::apis))
        .route("/apis/", get(discovery::apis))
        .route("/api/v1", get(discovery::core_v1))
        .route("/api/v1/", get(discovery::core_v1))
        .route("/apis/events.k8s.io", get(discovery::events_group))
        .route("/apis/events.k8s.io/", get(discovery::events_group))
        .route("/apis/events.k8s.io/v1", get(discovery::events_v1))
        .route("/apis/events.k8s.io/v1/", get(discovery::events_v1))
        .route("/healthz", get(health::healthz))
        .route("/livez", get(health::livez))
        .route("/readyz", get(health::readyz))
        .route("/healthz/{check}", get(health::healthz_check))
        .route("/livez/{check}", get(health::livez_check))
        .route("/readyz/{check}", get(health::readyz_check))
        .route("/openapi/v2", get(openapi::v2))
        .route("/openapi/v3", get(openapi::v3_index))
        .route("/openapi/v3/", get(openapi::v3_index))
        .route("/openapi/v3/{*path}", get(openapi::v3_document))
        .with_state(state);
    for (group, version) in referenced::groups() {
        let g = move || async move { discovery::referenced_group(group, version) };
        let gv = move || async move { discovery::referenced_group_version(group, version) };
        r = r
            .route(&format!("/apis/{group}"), get(g))
            .route(&format!("/apis/{group}/"), get(g))
            .route(&format!("/apis/{group}/{version}"), get(gv))
            .route(&format!("/apis/{group}/{version}/"), get(gv));
    }
    for (group, version, resources) in discovery::REVIEW_GROUPS {
        let g = move || async move { discovery::referenced_group(group, version) };
        let gv = move || async move {
            discovery::json_response(
                &discovery::review_resource_list(group, version, resources),
                "application/json",
            )
        };
        r = r
            .route(&format!("/apis/{group}"), get(g))
            .route(&format!("/apis/{group}/"), get(g))
            .route(&format!("/apis/{group}/{version}"), get(gv))
            .route(&format!("/apis/{group}/{version}/"), get(gv));
    }
    r.merge(referenced::routes())
}

/// Adds the catch-all behaviour to a complete router: a 404 `Status` for unknown paths, a
/// 405 `Status` for unsupported methods on known paths, and the [`output`] layer (standard
/// headers, YAML, protobuf and pretty JSON, gzip of large responses, the 5xx log). Call it
/// last: the 405 handler only covers routes present when it is called.
pub fn finish(router: Router) -> Router {
    finish_with(router, output::OutputLayer::default())
}

/// [`finish`] with a configured output layer (one that also counts requests).
pub fn finish_with(router: Router, output: output::OutputLayer) -> Router {
    router
        .fallback(|| async { StatusError(error::path_not_found()) })
        .method_not_allowed_fallback(|| async { StatusError(error::method_not_allowed()) })
        .layer(output)
}

/// The static API as a complete router (static routes + [`finish`]).
pub fn router(state: ApiState) -> Router {
    finish(static_routes(state))
}

/// The static API merged with `extra` (the events routes, with their own state applied),
/// finished with the 404/405 `Status` fallbacks. `extra` must not set a fallback of its own
/// and must not serve the static paths (`/version`, `/api`, `/api/v1`, `/apis`,
/// `/apis/events.k8s.io[/v1]`, `/openapi/...`, `/healthz`, `/livez`, `/readyz` and their
/// `/{check}` sub-paths); axum panics at construction otherwise.
pub fn router_with(state: ApiState, extra: Router) -> Router {
    router_with_output(state, extra, output::OutputLayer::default())
}

/// [`router_with`] with a configured output layer.
pub fn router_with_output(state: ApiState, extra: Router, output: output::OutputLayer) -> Router {
    finish_with(static_routes(state).merge(extra), output)
}

/// The checks every request of a served API passes inside the [`output`] layer, outermost
/// first: the [`browser`] checks (Host, Content-Type), then [`auth`] (401, 403), then the
/// [`limits`] (inflight, the request deadline); and, outside the output layer, the
/// [`audit`] log, which sees every answer as the client gets it.
#[derive(Debug, Clone)]
pub struct Guards {
    /// The audit log ([`audit::AuditLayer::disabled`] for none).
    pub audit: audit::AuditLayer,
    /// Host and Content-Type checks.
    pub browser: browser::BrowserLayer,
    /// Authentication and authorization.
    pub auth: auth::AuthLayer,
    /// Inflight limits and the request deadline.
    pub limits: limits::LimitsLayer,
}

/// [`finish_with`] with `guards` between the output layer and the routes, so their refusals
/// (401, 403, 415, 429, 504) get the standard headers and are counted like any other answer,
/// and the audit layer outside them all.
pub fn finish_guarded(router: Router, output: output::OutputLayer, guards: Guards) -> Router {
    router
        .fallback(|| async { StatusError(error::path_not_found()) })
        .method_not_allowed_fallback(|| async { StatusError(error::method_not_allowed()) })
        .layer(guards.limits)
        .layer(guards.auth)
        .layer(guards.browser)
        .layer(output)
        .layer(guards.audit)
}

/// [`router_with_output`] with `guards` (what the server serves).
pub fn router_with_guards(
    state: ApiState,
    extra: Router,
    output: output::OutputLayer,
    guards: Guards,
) -> Router {
    finish_guarded(static_routes(state).merge(extra), output, guards)
}

/// Serves `app` on `listener` with the default [`listen::ConnectionOptions`] (kube-apiserver's
/// header and idle timeouts, the connection bound) until `shutdown` completes, then finishes
/// in-flight requests (graceful shutdown; long-lived watches must end on their own or via
/// their handlers). [`listen::serve`] takes the options and the metrics.
pub async fn serve(
    listener: tokio::net::TcpListener,
    app: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    if let Ok(addr) = listener.local_addr() {
        tracing::info!(%addr, "herald API listening");
    }
    let metrics = Arc::new(metrics::Metrics::default());
    listen::serve(
        listener,
        app,
        listen::ConnectionOptions::default(),
        metrics,
        shutdown,
    )
    .await
}
