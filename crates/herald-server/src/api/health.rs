//! `/healthz`, `/livez`, `/readyz`, their `?verbose` forms and per-check sub-paths.
//!
//! The output follows kube-apiserver: `ok` when every check passes; with `?verbose` (or on
//! failure) one line per check, `[+]name ok` or `[-]name failed: reason withheld`, then
//! `<endpoint> check passed|failed`. A failure answers 500. `?exclude=name` skips a check.
//! `ping` and `log` always pass; other components (storage, shutdown) register their own
//! checks with [`HealthChecks::with_liveness`] / [`HealthChecks::with_readiness`].

use std::fmt::Write as _;
use std::sync::Arc;

use axum::extract::{RawQuery, State};
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};

use super::ApiState;
use super::error::{StatusError, path_not_found};
use super::path::ApiPath;

/// Whether `path` is a health endpoint: `/healthz`, `/livez`, `/readyz` or one of their
/// `/{check}` sub-paths. These are exempt from the inflight limits (as kube-apiserver's
/// `probes` flow schema exempts them) and are what a connection over the connection bound
/// still answers.
pub fn is_health_path(path: &str) -> bool {
    ["/healthz", "/livez", "/readyz"].iter().any(|p| {
        path.strip_prefix(p).is_some_and(|rest| {
            rest.is_empty() || (rest.starts_with('/') && !rest[1..].contains('/'))
        })
    })
}

/// A named health check. `check` must be cheap and non-blocking (it runs on every probe).
pub trait HealthCheck: Send + Sync + 'static {
    /// The check's name, shown as `[+]name ok`.
    fn name(&self) -> &str;
    /// `Ok` when healthy; the error text is logged, never sent to the client.
    fn check(&self) -> Result<(), String>;
}

struct FnCheck<F> {
    name: String,
    f: F,
}

impl<F> HealthCheck for FnCheck<F>
where
    F: Fn() -> Result<(), String> + Send + Sync + 'static,
{
    fn name(&self) -> &str {
        &self.name
    }
    fn check(&self) -> Result<(), String> {
        (self.f)()
    }
}

/// A health check from a closure.
pub fn check_fn(
    name: impl Into<String>,
    f: impl Fn() -> Result<(), String> + Send + Sync + 'static,
) -> Arc<dyn HealthCheck> {
    Arc::new(FnCheck {
        name: name.into(),
        f,
    })
}

/// The checks behind the three endpoints. `/livez` and `/healthz` run the liveness checks,
/// `/readyz` the liveness and readiness checks (kube-apiserver's readiness-only checks are
/// not part of its `/healthz` either): a store that cannot take writes for now (a full
/// disk, a failing commit) makes the server not ready, but still healthy and live, since
/// a restart would not help.
#[derive(Clone, Default)]
pub struct HealthChecks {
    liveness: Vec<Arc<dyn HealthCheck>>,
    readiness: Vec<Arc<dyn HealthCheck>>,
}

impl std::fmt::Debug for HealthChecks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names = |v: &Vec<Arc<dyn HealthCheck>>| {
            v.iter().map(|c| c.name().to_string()).collect::<Vec<_>>()
        };
        f.debug_struct("HealthChecks")
            .field("liveness", &names(&self.liveness))
            .field("readiness", &names(&self.readiness))
            .finish()
    }
}

impl HealthChecks {
    /// Adds a check that `/livez`, `/readyz` and `/healthz` run.
    pub fn with_liveness(mut self, check: Arc<dyn HealthCheck>) -> Self {
        self.liveness.push(check);
        self
    }

    /// Adds a check that only `/readyz` runs.
    pub fn with_readiness(mut self, check: Arc<dyn HealthCheck>) -> Self {
        self.readiness.push(check);
        self
    }

    fn for_endpoint(&self, endpoint: Endpoint) -> Vec<Arc<dyn HealthCheck>> {
        let mut v: Vec<Arc<dyn HealthCheck>> =
            vec![check_fn("ping", || Ok(())), check_fn("log", || Ok(()))];
        v.extend(self.liveness.iter().cloned());
        if endpoint == Endpoint::Readyz {
            v.extend(self.readiness.iter().cloned());
        }
        v
    }
}

/// Which probe endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// `/healthz` (the liveness checks).
    Healthz,
    /// `/livez`.
    Livez,
    /// `/readyz`.
    Readyz,
}

impl Endpoint {
    fn name(self) -> &'static str {
        match self {
            Endpoint::Healthz => "healthz",
            Endpoint::Livez => "livez",
            Endpoint::Readyz => "readyz",
        }
    }
}

/// The probe result: HTTP status and the text body.
pub fn evaluate(
    checks: &HealthChecks,
    endpoint: Endpoint,
    query: Option<&str>,
) -> (StatusCode, String) {
    let mut verbose = false;
    let mut excluded: Vec<String> = Vec::new();
    for pair in query.unwrap_or("").split('&') {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        match k {
            "verbose" => verbose = v != "false" && v != "0",
            "exclude" => excluded.push(v.to_string()),
            _ => {}
        }
    }
    let mut lines = String::new();
    let mut failed = false;
    for c in checks.for_endpoint(endpoint) {
        if excluded.iter().any(|e| e == c.name()) {
            let _ = writeln!(lines, "[+]{} excluded: ok", c.name());
            continue;
        }
        match c.check() {
            Ok(()) => {
                let _ = writeln!(lines, "[+]{} ok", c.name());
            }
            Err(reason) => {
                tracing::warn!(check = c.name(), %reason, "{} check failed", endpoint.name());
                failed = true;
                let _ = writeln!(lines, "[-]{} failed: reason withheld", c.name());
            }
        }
    }
    if failed {
        let _ = writeln!(lines, "{} check failed", endpoint.name());
        (StatusCode::INTERNAL_SERVER_ERROR, lines)
    } else if verbose {
        let _ = writeln!(lines, "{} check passed", endpoint.name());
        (StatusCode::OK, lines)
    } else {
        (StatusCode::OK, "ok".to_string())
    }
}

fn text(code: StatusCode, body: String) -> Response {
    let mut resp = (code, body).into_response();
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    resp
}

async fn probe(state: &ApiState, endpoint: Endpoint, query: Option<String>) -> Response {
    let (code, body) = evaluate(&state.health, endpoint, query.as_deref());
    text(code, body)
}

/// `GET /healthz`.
pub async fn healthz(State(s): State<ApiState>, RawQuery(q): RawQuery) -> Response {
    probe(&s, Endpoint::Healthz, q).await
}

/// `GET /livez`.
pub async fn livez(State(s): State<ApiState>, RawQuery(q): RawQuery) -> Response {
    probe(&s, Endpoint::Livez, q).await
}

/// `GET /readyz`.
pub async fn readyz(State(s): State<ApiState>, RawQuery(q): RawQuery) -> Response {
    probe(&s, Endpoint::Readyz, q).await
}

/// `GET /healthz/{check}`: one check; `ok`, or 500 `internal server error: reason withheld`.
pub async fn healthz_check(
    s: State<ApiState>,
    ApiPath(name): ApiPath<String>,
) -> Result<Response, StatusError> {
    single(&s, Endpoint::Healthz, &name)
}

/// `GET /livez/{check}`.
pub async fn livez_check(
    s: State<ApiState>,
    ApiPath(name): ApiPath<String>,
) -> Result<Response, StatusError> {
    single(&s, Endpoint::Livez, &name)
}

/// `GET /readyz/{check}`.
pub async fn readyz_check(
    s: State<ApiState>,
    ApiPath(name): ApiPath<String>,
) -> Result<Response, StatusError> {
    single(&s, Endpoint::Readyz, &name)
}

fn single(s: &ApiState, endpoint: Endpoint, name: &str) -> Result<Response, StatusError> {
    let check = s
        .health
        .for_endpoint(endpoint)
        .into_iter()
        .find(|c| c.name() == name)
        .ok_or_else(|| StatusError(path_not_found()))?;
    Ok(match check.check() {
        Ok(()) => text(StatusCode::OK, "ok".into()),
        Err(reason) => {
            tracing::warn!(check = check.name(), %reason, "health check failed");
            text(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal server error: reason withheld\n".into(),
            )
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    #[test]
    fn ok_and_verbose() {
        let checks = HealthChecks::default();
        assert_eq!(
            evaluate(&checks, Endpoint::Healthz, None),
            (StatusCode::OK, "ok".into())
        );
        let (code, body) = evaluate(&checks, Endpoint::Readyz, Some("verbose"));
        assert_eq!(code, StatusCode::OK);
        assert_eq!(body, "[+]ping ok\n[+]log ok\nreadyz check passed\n");
    }

    #[test]
    fn failing_readiness_only_affects_readyz() {
        let up = Arc::new(AtomicBool::new(false));
        let flag = up.clone();
        let checks = HealthChecks::default().with_readiness(check_fn("storage", move || {
            if flag.load(Ordering::SeqCst) {
                Ok(())
            } else {
                Err("not open".into())
            }
        }));
        assert_eq!(evaluate(&checks, Endpoint::Livez, None).0, StatusCode::OK);
        let (code, body) = evaluate(&checks, Endpoint::Readyz, None);
        assert_eq!(code, StatusCode::INTERNAL_SERVER_ERROR);
        assert!(
            body.contains("[-]storage failed: reason withheld\n"),
            "{body}"
        );
        assert!(body.ends_with("readyz check failed\n"));
        assert!(!body.contains("not open"), "the reason is withheld");
        assert_eq!(evaluate(&checks, Endpoint::Healthz, None).0, StatusCode::OK);
        let (code, body) = evaluate(&checks, Endpoint::Readyz, Some("exclude=storage&verbose"));
        assert_eq!(code, StatusCode::OK);
        assert!(body.contains("[+]storage excluded: ok"));
        up.store(true, Ordering::SeqCst);
        assert_eq!(evaluate(&checks, Endpoint::Readyz, None).0, StatusCode::OK);
    }
}
