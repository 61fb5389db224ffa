//! What a web page must not be able to make a browser do to a Herald server on the same
//! machine.
//!
//! - **Host check (DNS rebinding)**: a page on `evil.example` can rebind that name to
//!   127.0.0.1 and then read and delete what a loopback server holds, with the browser
//!   sending `Host: evil.example`. So a server that listens on a loopback address answers
//!   only requests whose `Host` is `localhost`, an address in 127.0.0.0/8, `[::1]`, the
//!   listen address, or a name in [`BrowserOptions::allowed_hosts`] (any port). Others get
//!   **403 `Forbidden`** with a `Status` that says which name was refused and how to allow
//!   it. 403 rather than 421 Misdirected Request: it is a reason every Kubernetes client
//!   knows (`IsForbidden`), and 421 has no `Status` reason. A request without a `Host` (an
//!   HTTP/1.0 client) is not from a browser and passes. A server listening on any other
//!   address (`0.0.0.0`, a LAN address) is reached under names the server cannot know,
//!   so it checks nothing; authentication is what protects it.
//! - **Writes without a Content-Type**: a page may POST to any origin without asking
//!   (`fetch(url, {method: "POST", mode: "no-cors", body: blob})`), and a `Blob` body without
//!   a type goes out with no `Content-Type` at all. kube-apiserver reads a body without a
//!   Content-Type as JSON (its `NegotiateInputSerializer` falls back to the first supported
//!   type); **Herald refuses a POST, PUT or PATCH without one: 415 `UnsupportedMediaType`**,
//!   naming the accepted types. The other types a page can send without a CORS preflight
//!   (`text/plain`, `application/x-www-form-urlencoded`, `multipart/form-data`) were
//!   already refused with the same 415 by the handlers; JSON, YAML and protobuf need a
//!   preflight, which Herald never grants (it sends no CORS headers). kubectl, client-go and
//!   kube-rs always send a Content-Type with a body, so they see no difference. A DELETE
//!   (whose body is optional `DeleteOptions`) keeps kube-apiserver's rule; a page can only
//!   send DELETE after a preflight anyway.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::extract::Request;
use axum::response::{IntoResponse as _, Response};
use futures::future::Either;
use herald_core::status::{ApiError, Reason};
use http::{HeaderMap, Method, header};
use tower_layer::Layer;
use tower_service::Service;

use super::error::StatusError;

/// The browser checks' settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrowserOptions {
    /// Check the `Host` of requests to a server listening on loopback. Default `true`.
    pub check_host: bool,
    /// Names accepted in `Host` besides the loopback names and the listen address
    /// (`herald serve --allow-host`), e.g. an `/etc/hosts` alias of 127.0.0.1. Compared
    /// without the port and case-insensitively.
    pub allowed_hosts: Vec<String>,
}

impl Default for BrowserOptions {
    fn default() -> Self {
        BrowserOptions {
            check_host: true,
            allowed_hosts: Vec::new(),
        }
    }
}

/// The names a loopback server answers to.
#[derive(Debug)]
struct AllowedHosts {
    listen: SocketAddr,
    names: Vec<String>,
}

impl AllowedHosts {
    fn allows(&self, host: &str) -> bool {
        let name = host_name(host).trim_end_matches('.').to_ascii_lowercase();
        if name == "localhost" || self.names.contains(&name) {
            return true;
        }
        let ip = name
            .strip_prefix('[')
            .and_then(|n| n.strip_suffix(']'))
            .unwrap_or(&name);
        ip.parse::<IpAddr>()
            .is_ok_and(|ip| ip.is_loopback() || ip == self.listen.ip())
    }
}

/// `host` without its port: `[::1]:6443` → `[::1]`, `localhost:6443` → `localhost`.
fn host_name(host: &str) -> &str {
    if host.starts_with('[') {
        return match host.find(']') {
            Some(end) => &host[..=end],
            None => host,
        };
    }
    match host.rsplit_once(':') {
        Some((name, port)) if !name.contains(':') && port.bytes().all(|b| b.is_ascii_digit()) => {
            name
        }
        _ => host,
    }
}

/// The layer; apply it inside [`OutputLayer`](super::output::OutputLayer) (so refusals get
/// the standard headers and are counted) and outside [`LimitsLayer`](super::limits::LimitsLayer)
/// (so they take no inflight permit).
#[derive(Debug, Clone)]
pub struct BrowserLayer {
    hosts: Option<Arc<AllowedHosts>>,
}

impl BrowserLayer {
    /// The checks for a server listening on `listen`: the Host check only if `listen` is a
    /// loopback address and `options.check_host`; the Content-Type check always.
    pub fn new(listen: SocketAddr, options: &BrowserOptions) -> Self {
        let hosts = (options.check_host && listen.ip().is_loopback()).then(|| {
            Arc::new(AllowedHosts {
                listen,
                names: options
                    .allowed_hosts
                    .iter()
                    .map(|n| host_name(n).trim_end_matches('.').to_ascii_lowercase())
                    .collect(),
            })
        });
        BrowserLayer { hosts }
    }
}

impl<S> Layer<S> for BrowserLayer {
    type Service = BrowserService<S>;

    fn layer(&self, inner: S) -> BrowserService<S> {
        BrowserService {
            inner,
            hosts: self.hosts.clone(),
        }
    }
}

/// The service [`BrowserLayer`] wraps around a route.
#[derive(Debug, Clone)]
pub struct BrowserService<S> {
    inner: S,
    hosts: Option<Arc<AllowedHosts>>,
}

impl<S> BrowserService<S> {
    fn refusal(&self, req: &Request) -> Option<ApiError> {
        if let Some(hosts) = &self.hosts
            && let Some(host) = host_of(req)
            && !hosts.allows(host)
        {
            return Some(ApiError::new(
                403,
                Reason::Forbidden,
                format!(
                    "forbidden: Host {host:?} is not a name of this server: a server listening on loopback ({}) answers only localhost, 127.0.0.1, [::1] and names given with --allow-host, so that a web page cannot reach it by DNS rebinding",
                    hosts.listen
                ),
            ));
        }
        let write = matches!(*req.method(), Method::POST | Method::PUT | Method::PATCH);
        if write && !has_content_type(req.headers()) {
            return Some(if *req.method() == Method::PATCH {
                ApiError::unsupported_patch_type("")
            } else {
                ApiError::unsupported_media_type("")
            });
        }
        None
    }
}

/// The request's `Host` header, or the authority of an absolute-form request target.
fn host_of(req: &Request) -> Option<&str> {
    match req.headers().get(header::HOST) {
        Some(h) => Some(h.to_str().unwrap_or("\u{fffd}")),
        None => req.uri().authority().map(|a| a.as_str()),
    }
}

fn has_content_type(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| !v.as_bytes().iter().all(u8::is_ascii_whitespace))
}

impl<S> Service<Request> for BrowserService<S>
where
    S: Service<Request, Response = Response>,
{
    type Response = Response;
    type Error = S::Error;
    type Future = Either<S::Future, std::future::Ready<Result<Response, S::Error>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request) -> Self::Future {
        match self.refusal(&req) {
            Some(e) => Either::Right(std::future::ready(Ok(StatusError(e).into_response()))),
            None => Either::Left(self.inner.call(req)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowed(listen: &str, extra: &[&str]) -> AllowedHosts {
        AllowedHosts {
            listen: listen.parse().unwrap(),
            names: extra.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn loopback_names_pass_and_others_do_not() {
        let a = allowed("127.0.0.1:6443", &["herald.test"]);
        for ok in [
            "localhost",
            "localhost:6443",
            "LOCALHOST.:1",
            "127.0.0.1",
            "127.0.0.1:6443",
            "127.1.2.3:80",
            "[::1]",
            "[::1]:6443",
            "herald.test:6443",
        ] {
            assert!(a.allows(ok), "{ok}");
        }
        for bad in [
            "evil.example",
            "evil.example:6443",
            "localhost.evil.example",
            "10.0.0.1:6443",
            "[::2]:6443",
            "127.0.0.1.evil.example",
            "",
        ] {
            assert!(!a.allows(bad), "{bad}");
        }
        assert!(allowed("[::1]:6443", &[]).allows("[::1]:6443"));
    }

    #[test]
    fn host_names_without_ports() {
        assert_eq!(host_name("[::1]:6443"), "[::1]");
        assert_eq!(host_name("a.b:1"), "a.b");
        assert_eq!(host_name("a.b"), "a.b");
        assert_eq!(host_name("::1"), "::1");
    }
}
