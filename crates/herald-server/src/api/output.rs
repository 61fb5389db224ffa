//! What every response gets on its way out, as kube-apiserver does it.
//!
//! - `Cache-Control: no-cache, private` (unless the handler set its own) and an `Audit-Id`:
//!   the client's `Audit-ID` when it sent a usable one, else a fresh UUID, so a request can
//!   be named in a bug report.
//! - Every 5xx answer is logged (`tracing` error) with its method, path, audit ID and
//!   `Status` message: a server failure must not be known to the client alone.
//! - Optionally ([`OutputLayer::counting`]), every answer is counted in the `/metrics`
//!   requests family by verb and code.
//! - **Negotiation, once**: the request's [`Negotiated`] answer (wire encoding and the
//!   `Accept` clauses the handler chooses its representation from) is decided here and
//!   handed to the handler as a request extension.
//! - **YAML** when the `Accept` header prefers `application/yaml` to JSON: objects, lists,
//!   Tables, discovery and error `Status`es alike. Watches are not transcoded: they stream
//!   JSON lines, and a watch that accepts only YAML gets the handler's 406.
//! - **Protobuf** when `Accept` prefers `application/vnd.kubernetes.protobuf` to JSON (as
//!   client-go's typed clientset does): a handler that has the event at hand writes protobuf
//!   itself (events, lists, a watch's frames, each change encoded once for all watchers);
//!   any other JSON answer (a `Status`) is re-encoded here
//!   ([`protobuf::transcode_json`]); other documents (discovery, OpenAPI) stay JSON,
//!   labelled so, which client-go decodes by their Content-Type.
//! - **Indented JSON** for `?pretty=true`, and, as kube-apiserver does, for `curl`, `Wget`
//!   and browsers unless they pass `pretty=false`. Watches stay one event per line.
//! - **gzip** for a GET of 128 KiB or more whose client accepts it ([`super::compression`]).
//!
//! Transcoding buffers the whole body (kube-apiserver encodes whole objects too) and keeps
//! the field order. A body that is not the JSON it claims to be is sent unchanged. A response
//! marked [`Streaming`] (a watch) is never buffered, transcoded or compressed.
//!
//! It is a tower layer rather than an `axum::middleware::from_fn`, and it counts the metrics
//! too: every request passes through it, so it is one layer, not several.
//!
//! ```
//! use axum::{Router, routing::get};
//! use herald_server::api::output::OutputLayer;
//! let app: Router = Router::new()
//!     .route("/x", get(|| async { ([("content-type", "application/json")], r#"{"a":[1]}"#) }))
//!     .layer(OutputLayer::default());
//! # let _ = app;
//! ```

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use axum::body::Body;
use axum::extract::Request;
use axum::response::{IntoResponse as _, Response};
use herald_core::status::ApiError;
use http::{HeaderMap, HeaderName, HeaderValue, header};
use pin_project_lite::pin_project;
use tower_layer::Layer;
use tower_service::Service;

use herald_wire::protobuf::{self, transcode_json};

use super::compression::{Streaming, accepts_gzip, gzip};
use super::error::{ServerFailure, StatusError};
use super::log_throttle::{LOG_INTERVAL, Throttle};
use super::metrics::Metrics;
use super::negotiate::{Encoding, Negotiated};

/// The response header naming the request (kube-apiserver's audit ID).
pub const AUDIT_ID: HeaderName = HeaderName::from_static("audit-id");

/// The longest client-sent `Audit-ID` that is echoed; a longer one is replaced by a UUID.
pub const MAX_AUDIT_ID: usize = 128;

/// The layer; apply it outermost (`Router::layer`).
#[derive(Debug, Clone, Default)]
pub struct OutputLayer {
    metrics: Option<Arc<Metrics>>,
}

impl OutputLayer {
    /// Also counts every answered request in `metrics` (by verb and code), in the same pass
    /// rather than in a layer of its own.
    pub fn counting(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }
}

impl<S> Layer<S> for OutputLayer {
    type Service = Output<S>;

    fn layer(&self, inner: S) -> Output<S> {
        Output {
            inner,
            metrics: self.metrics.clone(),
        }
    }
}

/// The service [`OutputLayer`] wraps around the router.
#[derive(Debug, Clone)]
pub struct Output<S> {
    inner: S,
    metrics: Option<Arc<Metrics>>,
}

impl<S> Service<Request> for Output<S>
where
    S: Service<Request, Response = Response>,
{
    type Response = Response;
    type Error = S::Error;
    type Future = OutputFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request) -> Self::Future {
        let negotiated = Negotiated::of(req.uri(), req.headers());
        let encoding = negotiated.encoding;
        req.extensions_mut().insert(negotiated);
        let gzip = req.method() == http::Method::GET && accepts_gzip(req.headers());
        let seen = Seen {
            gzip,
            audit_id: audit_id(req.headers()),
            method: req.method().clone(),
            // Cheap: the URI shares the request's bytes. Only a failure reads it.
            uri: req.uri().clone(),
            encoding,
            metrics: self.metrics.clone(),
        };
        OutputFuture {
            state: State::Inner {
                future: self.inner.call(req),
                seen: Some(seen),
            },
        }
    }
}

/// What the request said that the response needs.
struct Seen {
    /// A GET whose client accepts gzip.
    gzip: bool,
    audit_id: HeaderValue,
    method: http::Method,
    uri: http::Uri,
    encoding: Encoding,
    metrics: Option<Arc<Metrics>>,
}

pin_project! {
    /// The response future of [`Output`]: the inner future, then, only for YAML, protobuf or
    /// pretty JSON, the re-encoding of the body (and its compression).
    pub struct OutputFuture<F> {
        #[pin]
        state: State<F>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F> {
        Inner { #[pin] future: F, seen: Option<Seen> },
        Reencode { future: Pin<Box<dyn Future<Output = Response> + Send>> },
    }
}

impl<F, E> Future for OutputFuture<F>
where
    F: Future<Output = Result<Response, E>>,
{
    type Output = Result<Response, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            match this.state.as_mut().project() {
                StateProj::Inner { future, seen } => {
                    let mut resp = std::task::ready!(future.poll(cx))?;
                    let Some(seen) = seen.take() else {
                        return Poll::Ready(Ok(resp));
                    };
                    if let Some(m) = &seen.metrics {
                        m.count_request(&seen.method, &seen.uri, resp.status().as_u16());
                    }
                    if resp.status().is_server_error() {
                        log_failure(&resp, &seen.method, seen.uri.path(), &seen.audit_id);
                    }
                    let h = resp.headers_mut();
                    h.entry(header::CACHE_CONTROL)
                        .or_insert(HeaderValue::from_static("no-cache, private"));
                    h.insert(AUDIT_ID, seen.audit_id);
                    // A stream (a watch) goes out as it is made, whatever the request said.
                    if resp.extensions().get::<Streaming>().is_some() {
                        return Poll::Ready(Ok(resp));
                    }
                    let transcode = seen.encoding != Encoding::Json && is_json(resp.headers());
                    if !transcode && !seen.gzip {
                        return Poll::Ready(Ok(resp));
                    }
                    if !transcode {
                        return Poll::Ready(Ok(gzip(resp).unwrap_or_else(|r| r)));
                    }
                    let encoding = seen.encoding;
                    let zip = seen.gzip;
                    this.state.set(State::Reencode {
                        future: Box::pin(async move {
                            let resp = reencode(resp, encoding).await;
                            if zip {
                                gzip(resp).unwrap_or_else(|r| r)
                            } else {
                                resp
                            }
                        }),
                    });
                }
                StateProj::Reencode { future } => {
                    return future.as_mut().poll(cx).map(Ok);
                }
            }
        }
    }
}

/// 504s: clients cause them at will (a body sent slowly past the request deadline, a read at
/// a resourceVersion the store has not reached), so they are logged at most once per
/// [`LOG_INTERVAL`], with how many were not.
static TIMEOUT_LOG: Mutex<Throttle> = Mutex::new(Throttle::new(LOG_INTERVAL));

fn log_failure(resp: &Response, method: &http::Method, path: &str, audit_id: &HeaderValue) {
    let audit_id = audit_id.to_str().unwrap_or("");
    let status = resp.status().as_u16();
    let mut more_504s_since_last_line = 0;
    if status == 504 {
        let ready = TIMEOUT_LOG
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .ready();
        match ready {
            Some(n) => more_504s_since_last_line = n,
            None => return,
        }
    }
    match resp.extensions().get::<ServerFailure>() {
        Some(f) => tracing::error!(
            %method, path, status, audit_id, reason = %f.reason, message = %f.message,
            more_504s_since_last_line, "request failed"
        ),
        None => tracing::error!(
            %method, path, status, audit_id, more_504s_since_last_line, "request failed"
        ),
    }
}

fn audit_id(headers: &HeaderMap) -> HeaderValue {
    headers
        .get("audit-id")
        .filter(|v| !v.is_empty() && v.len() <= MAX_AUDIT_ID)
        .cloned()
        .unwrap_or_else(|| {
            let id = uuid::Uuid::new_v4();
            let mut buf = uuid::Uuid::encode_buffer();
            HeaderValue::from_str(id.hyphenated().encode_lower(&mut buf))
                .unwrap_or(HeaderValue::from_static("unknown"))
        })
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("application/json"))
}

async fn reencode(resp: Response, encoding: Encoding) -> Response {
    let (mut parts, body) = resp.into_parts();
    let bytes = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(bytes) => bytes,
        // The body failed while it was being made (nothing has been sent yet): a 500 rather
        // than the first part of it under the handler's 200.
        Err(e) => {
            return StatusError(ApiError::internal(format!(
                "the response could not be completed: {e}"
            )))
            .into_response();
        }
    };
    let Some((out, content_type)) = transcode(&bytes, encoding) else {
        return Response::from_parts(parts, Body::from(bytes));
    };
    parts.headers.remove(header::CONTENT_LENGTH);
    // Indenting changes only whitespace: a negotiated JSON type (aggregated discovery's
    // `application/json;g=apidiscovery.k8s.io;…`) stays what it was.
    if encoding != Encoding::PrettyJson {
        parts
            .headers
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    }
    Response::from_parts(parts, Body::from(out))
}

/// `json` re-encoded, with the Content-Type to send; `None` if it is not one JSON value.
fn transcode(json: &[u8], encoding: Encoding) -> Option<(Vec<u8>, &'static str)> {
    let mut de = serde_json::Deserializer::from_slice(json);
    let mut out = Vec::with_capacity(json.len() * 3 / 2);
    let content_type = match encoding {
        Encoding::Json => return None,
        Encoding::PrettyJson => {
            let mut ser = serde_json::Serializer::pretty(&mut out);
            serde_transcode::transcode(&mut de, &mut ser).ok()?;
            out.push(b'\n');
            "application/json"
        }
        Encoding::Yaml => {
            let mut ser = serde_yaml_ng::Serializer::new(&mut out);
            serde_transcode::transcode(&mut de, &mut ser).ok()?;
            "application/yaml"
        }
        Encoding::Protobuf => return transcode_json(json).map(|pb| (pb, protobuf::MEDIA_TYPE)),
    };
    de.end().ok()?;
    Some((out, content_type))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transcoding_keeps_field_order() {
        let json = br#"{"kind":"Event","metadata":{"name":"x"},"count":2,"a":[]}"#;
        let (pretty, ct) = transcode(json, Encoding::PrettyJson).unwrap();
        assert_eq!(ct, "application/json");
        assert_eq!(
            String::from_utf8(pretty).unwrap(),
            "{\n  \"kind\": \"Event\",\n  \"metadata\": {\n    \"name\": \"x\"\n  },\n  \"count\": 2,\n  \"a\": []\n}\n"
        );
        let (yaml, ct) = transcode(json, Encoding::Yaml).unwrap();
        assert_eq!(ct, "application/yaml");
        assert_eq!(
            String::from_utf8(yaml).unwrap(),
            "kind: Event\nmetadata:\n  name: x\ncount: 2\na: []\n"
        );
        assert!(transcode(b"{\"a\":1} trailing", Encoding::Yaml).is_none());
        assert!(transcode(b"not json", Encoding::PrettyJson).is_none());
    }

    /// A body that fails while this layer buffers it to re-encode is a 500 `Status`, not the
    /// handler's 200 with an empty or partial body.
    #[tokio::test]
    async fn a_body_that_fails_while_re_encoded_is_a_500() {
        use axum::Router;
        use axum::routing::get;
        use tower::ServiceExt as _;
        let app: Router = Router::new()
            .route(
                "/x",
                get(|| async {
                    let parts: [Result<&'static str, std::io::Error>; 2] =
                        [Ok("{\"a\":"), Err(std::io::Error::other("block failed"))];
                    (
                        [(header::CONTENT_TYPE, "application/json")],
                        Body::from_stream(futures::stream::iter(parts)),
                    )
                }),
            )
            .layer(OutputLayer::default());
        let req = Request::builder()
            .uri("/x?pretty=true")
            .body(Body::empty())
            .unwrap();
        let resp = app.oneshot(req).await.unwrap();
        assert_eq!(resp.status(), 500);
        let body = axum::body::to_bytes(resp.into_body(), 1 << 20)
            .await
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["kind"], "Status");
        assert_eq!(v["reason"], "InternalError");
        assert!(
            v["message"].as_str().unwrap().contains("block failed"),
            "{v}"
        );
    }
}
