//! [`AuditLayer`]: the tower layer that writes an audit event for every API request (see the
//! [module docs](super) for what is recorded and when).
//!
//! It is the outermost layer, so it sees every answer as the client gets it: the `Audit-Id`
//! the [output](crate::api::output) layer set, the 401 and 403 of the
//! [auth](crate::api::auth) layer, the 429 of the limits. It learns the user and the
//! authorization decision through an [`AuthOutcome`] it puts in the request, and the error
//! behind a failure from the response's [`FailureStatus`].

use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use bytes::Bytes;
use herald_core::clock::Clock;
use herald_core::status::ApiError;
use http::{HeaderMap, StatusCode, header};
use http_body::Frame;
use pin_project_lite::pin_project;
use tower_layer::Layer;
use tower_service::Service;

use super::event::{
    DECISION_ALLOW, DECISION_ANNOTATION, DECISION_FORBID, Event, EventUser, MicroTime,
    ObjectReference, REASON_ANNOTATION, ResponseStatus, Stage, StatusCause, StatusDetails,
};
use super::sink::AuditSink;
use crate::api::auth::attributes::Attributes;
use crate::api::auth::outcome::AuthOutcome;
use crate::api::compression::Streaming;
use crate::api::error::FailureStatus;
use crate::api::health::is_health_path;
use crate::api::output::AUDIT_ID;
use crate::api::peer::{PeerAddr, VerifiedClientCertificates};

/// Writes an audit event for every request but the health probes. `Default` (and
/// [`AuditLayer::disabled`]) records nothing and costs one branch per request. Cheap to clone.
#[derive(Clone, Default)]
pub struct AuditLayer {
    audit: Option<Arc<Audit>>,
}

struct Audit {
    sink: Arc<AuditSink>,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for AuditLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditLayer")
            .field("enabled", &self.audit.is_some())
            .finish()
    }
}

impl AuditLayer {
    /// A layer recording to `sink`, with times from `clock`.
    pub fn new(sink: Arc<AuditSink>, clock: Arc<dyn Clock>) -> Self {
        AuditLayer {
            audit: Some(Arc::new(Audit { sink, clock })),
        }
    }

    /// A layer that records nothing (no `--audit-log-path`).
    pub fn disabled() -> Self {
        AuditLayer::default()
    }
}

impl<S> Layer<S> for AuditLayer {
    type Service = AuditService<S>;

    fn layer(&self, inner: S) -> AuditService<S> {
        AuditService {
            inner,
            audit: self.audit.clone(),
        }
    }
}

/// The service of [`AuditLayer`].
#[derive(Clone)]
pub struct AuditService<S> {
    inner: S,
    audit: Option<Arc<Audit>>,
}

impl<S> std::fmt::Debug for AuditService<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditService")
            .field("enabled", &self.audit.is_some())
            .finish_non_exhaustive()
    }
}

/// What the request said, kept until its answer.
struct Pending {
    audit: Arc<Audit>,
    received: MicroTime,
    request_uri: String,
    attributes: Attributes,
    source_ips: Vec<String>,
    user_agent: String,
    /// The credentials presented, for the message of a 401 (never the credentials).
    attempted: Vec<&'static str>,
    outcome: AuthOutcome,
}

impl<S> Service<Request> for AuditService<S>
where
    S: Service<Request, Response = Response>,
{
    type Response = Response;
    type Error = S::Error;
    type Future = AuditFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request) -> Self::Future {
        let pending = match &self.audit {
            Some(audit) if !is_health_path(req.uri().path()) => {
                let outcome = AuthOutcome::default();
                let pending = Pending {
                    audit: audit.clone(),
                    received: MicroTime(audit.clock.now()),
                    request_uri: req
                        .uri()
                        .path_and_query()
                        .map(|p| p.as_str().to_string())
                        .unwrap_or_else(|| req.uri().path().to_string()),
                    attributes: Attributes::from_request(
                        req.method(),
                        req.uri().path(),
                        req.uri().query(),
                    ),
                    source_ips: source_ips(
                        req.headers(),
                        req.extensions().get::<PeerAddr>().map(|p| p.0.ip()),
                    ),
                    user_agent: req
                        .headers()
                        .get(header::USER_AGENT)
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("")
                        .to_string(),
                    attempted: attempted(&req),
                    outcome: outcome.clone(),
                };
                req.extensions_mut().insert(outcome);
                Some(Box::new(pending))
            }
            _ => None,
        };
        AuditFuture {
            future: self.inner.call(req),
            pending,
        }
    }
}

pin_project! {
    /// The response future of [`AuditService`].
    pub struct AuditFuture<F> {
        #[pin]
        future: F,
        pending: Option<Box<Pending>>,
    }
}

impl<F, E> std::future::Future for AuditFuture<F>
where
    F: std::future::Future<Output = Result<Response, E>>,
{
    type Output = Result<Response, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let resp = std::task::ready!(this.future.poll(cx))?;
        let Some(pending) = this.pending.take() else {
            return Poll::Ready(Ok(resp));
        };
        Poll::Ready(Ok(pending.answered(resp)))
    }
}

impl Pending {
    /// Records the event(s) of `resp`: `ResponseComplete` now, or `ResponseStarted` now and
    /// `ResponseComplete` when the body ends for a stream; `ResponseStarted` alone for a
    /// request authentication refused (as kube-apiserver logs those).
    fn answered(self: Box<Self>, resp: Response) -> Response {
        let code = resp.status();
        let admitted = self.outcome.get().cloned();
        let refused = admitted.is_none() && code == StatusCode::UNAUTHORIZED;
        let mut status = match resp.extensions().get::<FailureStatus>() {
            Some(f) => failure(&f.0),
            None => ResponseStatus::default(),
        };
        status.code = code.as_u16();
        if refused {
            status.message = if self.attempted.is_empty() {
                "Authentication failed, no credentials provided".to_string()
            } else {
                format!(
                    "Authentication failed, attempted: {}",
                    self.attempted.join(", ")
                )
            };
        }
        let audit_id = resp
            .headers()
            .get(AUDIT_ID)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let streaming = resp.extensions().get::<Streaming>().is_some();
        let stage = if refused || streaming {
            Stage::ResponseStarted
        } else {
            Stage::ResponseComplete
        };
        let a = &self.attributes;
        let mut event = Event::metadata(audit_id, stage, self.received);
        event.stage_timestamp = MicroTime(self.audit.clock.now());
        event.request_uri = self.request_uri;
        event.verb = a.verb.clone();
        event.source_ips = self.source_ips;
        event.user_agent = self.user_agent;
        event.object_ref = a.resource.as_ref().map(|resource| ObjectReference {
            resource: resource.clone(),
            namespace: a.namespace.clone(),
            name: a.name.clone(),
            api_group: a.api_group.clone(),
            api_version: a.api_version.clone(),
            subresource: a.subresource.clone(),
            ..ObjectReference::default()
        });
        event.response_status = Some(status);
        if let Some(admitted) = admitted {
            event.user = EventUser {
                username: admitted.user.name,
                uid: admitted.user.uid,
                groups: admitted.user.groups,
                ..EventUser::default()
            };
            if let Some(d) = admitted.decision {
                let decision = if d.allowed {
                    DECISION_ALLOW
                } else {
                    DECISION_FORBID
                };
                event
                    .annotations
                    .insert(DECISION_ANNOTATION.to_string(), decision.to_string());
                event
                    .annotations
                    .insert(REASON_ANNOTATION.to_string(), d.reason);
            }
        }
        if !streaming || refused {
            self.audit.sink.record(event);
            return resp;
        }
        self.audit.sink.record(event.clone());
        let audit = self.audit.clone();
        resp.map(|body| {
            Body::new(AuditedBody {
                inner: body,
                complete: Some(Complete { audit, event }),
            })
        })
    }
}

/// The `responseStatus` of an error answer: the `Status` fields kube-apiserver copies.
fn failure(err: &ApiError) -> ResponseStatus {
    let details = (err.name.is_some()
        || err.group.is_some()
        || err.kind.is_some()
        || !err.causes.is_empty()
        || err.retry_after_seconds.is_some())
    .then(|| StatusDetails {
        name: err.name.clone().unwrap_or_default(),
        group: err.group.clone().unwrap_or_default(),
        kind: err.kind.clone().unwrap_or_default(),
        uid: String::new(),
        causes: err
            .causes
            .iter()
            .map(|c| StatusCause {
                reason: c.reason.clone(),
                message: c.message.clone(),
                field: c.field.clone(),
            })
            .collect(),
        retry_after_seconds: err
            .retry_after_seconds
            .map(|s| i32::try_from(s).unwrap_or(i32::MAX))
            .unwrap_or(0),
    });
    ResponseStatus {
        status: "Failure".to_string(),
        message: err.message.clone(),
        reason: err.reason.as_str().to_string(),
        details,
        ..ResponseStatus::default()
    }
}

/// The kinds of credentials a request presented (`bearer`, `basic`, `x509`), as
/// kube-apiserver names them in the audit event of a 401.
fn attempted(req: &Request) -> Vec<&'static str> {
    let mut out = Vec::new();
    if let Some((scheme, _)) = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().split_once(' '))
    {
        if scheme.eq_ignore_ascii_case("basic") {
            out.push("basic");
        } else if scheme.eq_ignore_ascii_case("bearer") {
            out.push("bearer");
        }
    }
    if req
        .extensions()
        .get::<VerifiedClientCertificates>()
        .is_some()
    {
        out.push("x509");
    }
    out
}

/// kube-apiserver's `sourceIPs`: the addresses of `X-Forwarded-For`, then `X-Real-Ip` (if
/// not already listed), then the connection's peer (unless it is already the last one).
/// Unparsable entries are skipped. Clients can claim any forwarded address; only the last
/// entry, the peer, is Herald's own observation.
pub fn source_ips(headers: &HeaderMap, peer: Option<IpAddr>) -> Vec<String> {
    let parse = |s: &str| s.trim().parse::<IpAddr>().ok().map(|ip| ip.to_canonical());
    let mut ips: Vec<IpAddr> = headers
        .get("x-forwarded-for")
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(',').filter_map(parse).collect())
        .unwrap_or_default();
    if let Some(ip) = headers
        .get("x-real-ip")
        .and_then(|v| v.to_str().ok())
        .and_then(parse)
        && !ips.contains(&ip)
    {
        ips.push(ip);
    }
    if let Some(ip) = peer.map(|p| p.to_canonical())
        && ips.last() != Some(&ip)
    {
        ips.push(ip);
    }
    ips.iter().map(IpAddr::to_string).collect()
}

/// The `ResponseComplete` event of a stream, written when the stream ends or is dropped.
struct Complete {
    audit: Arc<Audit>,
    event: Event,
}

impl Complete {
    fn record(self) {
        let mut event = self.event;
        event.stage = Stage::ResponseComplete;
        event.stage_timestamp = MicroTime(self.audit.clock.now());
        self.audit.sink.record(event);
    }
}

pin_project! {
    /// A streamed body (a watch) that records its request's `ResponseComplete` when it ends:
    /// its last frame, an error, or the client going away (the body is dropped).
    struct AuditedBody {
        #[pin]
        inner: Body,
        complete: Option<Complete>,
    }

    impl PinnedDrop for AuditedBody {
        fn drop(this: Pin<&mut Self>) {
            if let Some(c) = this.project().complete.take() {
                c.record();
            }
        }
    }
}

impl http_body::Body for AuditedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = self.project();
        let frame = std::task::ready!(this.inner.poll_frame(cx));
        if matches!(frame, None | Some(Err(_)))
            && let Some(c) = this.complete.take()
        {
            c.record();
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_ips_as_kube_apiserver_lists_them() {
        let peer: IpAddr = "127.0.0.1".parse().unwrap();
        let mut h = HeaderMap::new();
        assert_eq!(source_ips(&h, Some(peer)), ["127.0.0.1"]);
        h.insert(
            "x-forwarded-for",
            "10.0.0.1, junk, 10.0.0.2".parse().unwrap(),
        );
        h.insert("x-real-ip", "10.0.0.1".parse().unwrap());
        assert_eq!(
            source_ips(&h, Some(peer)),
            ["10.0.0.1", "10.0.0.2", "127.0.0.1"]
        );
        h.insert("x-forwarded-for", "127.0.0.1".parse().unwrap());
        h.remove("x-real-ip");
        assert_eq!(source_ips(&h, Some(peer)), ["127.0.0.1"]);
        let mapped: IpAddr = "::ffff:127.0.0.1".parse().unwrap();
        assert_eq!(source_ips(&HeaderMap::new(), Some(mapped)), ["127.0.0.1"]);
    }
}
