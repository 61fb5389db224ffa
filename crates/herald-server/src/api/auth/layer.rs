//! [`AuthLayer`]: the tower layer that authenticates, then authorizes, every request (see
//! the [module docs](super)).

use std::sync::Arc;
use std::task::{Context, Poll};

use axum::extract::Request;
use axum::response::{IntoResponse as _, Response};
use futures::future::Either;
use herald_core::status::ApiError;
use http::header;
use tower_layer::Layer;
use tower_service::Service;

use super::attributes::Attributes;
use super::outcome::{Admitted, AuthOutcome, Decision};
use super::user::UserInfo;
use super::{Auth, Authentication, certificate, forbidden, unauthorized};
use crate::api::error::StatusError;
use crate::api::peer::VerifiedClientCertificates;

/// Authentication and authorization in front of the routes. Cheap to clone.
#[derive(Debug, Clone)]
pub struct AuthLayer {
    auth: Arc<Auth>,
}

impl AuthLayer {
    /// A layer that applies `auth`.
    pub fn new(auth: Arc<Auth>) -> Self {
        AuthLayer { auth }
    }
}

impl Default for AuthLayer {
    /// Open and allowed: today's unauthenticated server.
    fn default() -> Self {
        AuthLayer::new(Auth::open())
    }
}

impl<S> Layer<S> for AuthLayer {
    type Service = AuthService<S>;

    fn layer(&self, inner: S) -> AuthService<S> {
        AuthService {
            inner,
            auth: self.auth.clone(),
        }
    }
}

/// The service of [`AuthLayer`].
#[derive(Debug, Clone)]
pub struct AuthService<S> {
    inner: S,
    auth: Arc<Auth>,
}

/// Paths open to everyone, as kube-apiserver keeps them open: the health probes with their
/// sub-paths, and `/version`.
pub fn is_open_path(path: &str) -> bool {
    let under = |p: &str| {
        path.strip_prefix(p)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    };
    under("/healthz")
        || under("/livez")
        || under("/readyz")
        || path == "/version"
        || path == "/version/"
}

/// What authentication made of a request's credentials.
enum Identity {
    User(UserInfo),
    /// No credentials at all.
    None,
    /// A credential that identifies nobody.
    Invalid,
}

fn bearer(req: &Request) -> Option<&str> {
    let value = req.headers().get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

impl Auth {
    /// Who `req` comes from, `Err` with the 401 when its credentials identify nobody.
    /// Never fails on an [open path](is_open_path) (anonymous there instead).
    pub fn authenticate(&self, req: &Request) -> Result<UserInfo, ApiError> {
        let identity = match &self.authentication {
            Authentication::Open => Identity::User(UserInfo::anonymous()),
            Authentication::Required {
                tokens,
                certificates,
                anonymous,
            } => {
                let from_cert = certificates
                    .then(|| req.extensions().get::<VerifiedClientCertificates>())
                    .flatten()
                    .and_then(certificate::user_of);
                match (from_cert, bearer(req)) {
                    (Some(user), _) => Identity::User(user),
                    (None, Some(token)) => match tokens.as_ref().and_then(|t| t.user(token)) {
                        Some(user) => Identity::User(user.clone()),
                        None => Identity::Invalid,
                    },
                    (None, None) if *anonymous => Identity::User(UserInfo::anonymous()),
                    (None, None) => Identity::None,
                }
            }
        };
        match identity {
            Identity::User(u) => Ok(u),
            _ if is_open_path(req.uri().path()) => Ok(UserInfo::anonymous()),
            Identity::Invalid | Identity::None => Err(unauthorized()),
        }
    }

    /// Authenticates and authorizes `req`, leaving the [`UserInfo`] in its extensions and
    /// taking the `Authorization` header out; `Err` is the 401 or 403 to answer. When the
    /// request carries an [`AuthOutcome`], the user and the decision are recorded in it
    /// (nothing is on a 401).
    pub fn admit(&self, req: &mut Request) -> Result<(), ApiError> {
        let user = self.authenticate(req)?;
        req.headers_mut().remove(header::AUTHORIZATION);
        // The reason is put into words only for a layer that records it (the audit log).
        let outcome = req.extensions().get::<AuthOutcome>().cloned();
        let (result, decision) = if is_open_path(req.uri().path()) {
            (Ok(()), None)
        } else {
            let attrs = Attributes::from_request(req.method(), req.uri().path(), req.uri().query());
            let decision = match outcome {
                Some(_) => self.authorization.decide(&user, &attrs),
                None => Decision {
                    allowed: self.authorization.allows(&user, &attrs),
                    reason: String::new(),
                },
            };
            let result = if decision.allowed {
                Ok(())
            } else {
                tracing::debug!(user = %user.name, verb = %attrs.verb, path = %attrs.path, "forbidden");
                Err(forbidden(&user, &attrs))
            };
            (result, Some(decision))
        };
        if let Some(outcome) = outcome {
            outcome.record(Admitted {
                user: user.clone(),
                decision,
            });
        }
        req.extensions_mut().insert(user);
        result
    }
}

impl<S> Service<Request> for AuthService<S>
where
    S: Service<Request, Response = Response>,
{
    type Response = Response;
    type Error = S::Error;
    type Future = Either<std::future::Ready<Result<Response, S::Error>>, S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request) -> Self::Future {
        match self.auth.admit(&mut req) {
            Ok(()) => Either::Right(self.inner.call(req)),
            Err(e) => Either::Left(std::future::ready(Ok(StatusError(e).into_response()))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_paths() {
        for p in [
            "/healthz",
            "/healthz/ping",
            "/livez",
            "/readyz/storage",
            "/version",
            "/version/",
        ] {
            assert!(is_open_path(p), "{p}");
        }
        for p in ["/metrics", "/healthzz", "/versions", "/api", "/"] {
            assert!(!is_open_path(p), "{p}");
        }
    }
}
