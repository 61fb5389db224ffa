//! One HTTP/1.1 keep-alive connection per bench client, re-established after a failure,
//! over plain TCP or TLS ([`Endpoint`]).
//!
//! A dedicated connection per client (rather than a shared pool) makes "64 clients" mean
//! exactly 64 sockets (and 64 TLS sessions, each set up once and kept) and keeps a pool lock
//! off the hot path.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use super::encoding::Encoding;

/// How long one request may take before it counts as a `timeout` error.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The read buffer of a connection (bytes): one loopback read's worth.
const READ_BUFFER: usize = 64 * 1024;

/// Why a request produced no HTTP status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The TCP connection could not be opened.
    Connect,
    /// The connection broke while sending or receiving.
    Io,
    /// No answer within [`REQUEST_TIMEOUT`].
    Timeout,
}

impl Failure {
    /// The key this failure is counted under in the summary's `errors`.
    pub fn label(self) -> &'static str {
        match self {
            Failure::Connect => "connect",
            Failure::Io => "io",
            Failure::Timeout => "timeout",
        }
    }
}

/// Where the bench connects: an address, and TLS for an `https://` server (the kubeconfig's
/// CA and client certificate), with the kubeconfig's bearer token if it has one. Cheap to
/// clone.
#[derive(Clone)]
pub struct Endpoint {
    /// The server's socket address.
    pub addr: SocketAddr,
    /// `Host`: the address, made once.
    host: http::HeaderValue,
    tls: Option<Tls>,
    /// `Authorization: Bearer …`, marked sensitive so hyper never logs it.
    authorization: Option<http::HeaderValue>,
}

#[derive(Clone)]
struct Tls {
    connector: tokio_rustls::TlsConnector,
    name: tokio_rustls::rustls::pki_types::ServerName<'static>,
}

impl Endpoint {
    /// Plain HTTP to `addr`.
    pub fn plain(addr: SocketAddr) -> Endpoint {
        Endpoint {
            addr,
            host: host_header(addr),
            tls: None,
            authorization: None,
        }
    }

    /// HTTPS to `addr`, verifying the server as `name`, with `config` (its ALPN is set to
    /// `http/1.1`: the bench speaks HTTP/1.1).
    pub fn tls(
        addr: SocketAddr,
        name: tokio_rustls::rustls::pki_types::ServerName<'static>,
        mut config: tokio_rustls::rustls::ClientConfig,
    ) -> Endpoint {
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Endpoint {
            addr,
            host: host_header(addr),
            tls: Some(Tls {
                connector: tokio_rustls::TlsConnector::from(Arc::new(config)),
                name,
            }),
            authorization: None,
        }
    }

    /// This endpoint, sending `token` as a bearer token with every request. Only for TLS
    /// endpoints, as kubectl does: a token never travels in the clear.
    pub fn with_bearer_token(mut self, token: &str) -> anyhow::Result<Endpoint> {
        if self.tls.is_none() {
            anyhow::bail!(
                "the kubeconfig has a token, which is sent only over https, and the server is plain http: use an https:// server"
            );
        }
        let mut value = http::HeaderValue::try_from(format!("Bearer {token}")).map_err(|_| {
            anyhow::anyhow!("the kubeconfig's token has characters an HTTP header cannot carry")
        })?;
        value.set_sensitive(true);
        self.authorization = Some(value);
        Ok(self)
    }

    /// A request to this endpoint with its `Host` and (if any) `Authorization` headers set.
    pub fn request(&self, method: http::Method, path: &str) -> http::request::Builder {
        let builder = http::Request::builder()
            .method(method)
            .uri(path)
            .header(http::header::HOST, self.host.clone());
        match &self.authorization {
            Some(auth) => builder.header(http::header::AUTHORIZATION, auth.clone()),
            None => builder,
        }
    }

    /// True for HTTPS.
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }
}

/// The `Host` header of `addr` (`127.0.0.1:6443`, `[::1]:6443`: always a valid value).
fn host_header(addr: SocketAddr) -> http::HeaderValue {
    http::HeaderValue::try_from(addr.to_string())
        .unwrap_or_else(|_| http::HeaderValue::from_static("localhost"))
}

/// Opens a raw HTTP/1.1 connection to `endpoint` (the TLS handshake included); the
/// connection task runs on the runtime.
pub async fn connect(endpoint: &Endpoint) -> std::io::Result<SendRequest<Full<Bytes>>> {
    let stream = TcpStream::connect(endpoint.addr).await?;
    stream.set_nodelay(true)?;
    match &endpoint.tls {
        None => handshake(TokioIo::new(stream)).await,
        Some(tls) => {
            let stream = tls.connector.connect(tls.name.clone(), stream).await?;
            handshake(TokioIo::new(stream)).await
        }
    }
}

async fn handshake<I>(io: I) -> std::io::Result<SendRequest<Full<Bytes>>>
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    // A fixed-size read buffer: hyper's adaptive one grows to hundreds of KiB and, once the
    // body chunks it handed out still share it, allocates a fresh one per read, so reading a
    // 60 MB list spent most of its time in the kernel zeroing new pages.
    let (sender, conn) = hyper::client::conn::http1::Builder::new()
        .read_buf_exact_size(Some(READ_BUFFER))
        .handshake(io)
        .await
        .map_err(std::io::Error::other)?;
    tokio::spawn(async move {
        // The connection ends when the sender is dropped or the peer closes; either is fine.
        let _ = conn.await;
    });
    Ok(sender)
}

/// A client's connection: sends one request at a time, reconnecting when the previous
/// connection failed.
pub struct Conn {
    endpoint: Endpoint,
    encoding: Encoding,
    sender: Option<SendRequest<Full<Bytes>>>,
}

impl Conn {
    /// A connection to `endpoint` that speaks JSON, opened lazily by the first request.
    pub fn new(endpoint: Endpoint) -> Self {
        Self::with_encoding(endpoint, Encoding::Json)
    }

    /// A connection to `endpoint` whose bodies (sent and asked for) are in `encoding`.
    pub fn with_encoding(endpoint: Endpoint, encoding: Encoding) -> Self {
        Conn {
            endpoint,
            encoding,
            sender: None,
        }
    }

    /// Sends `method path` with a `body` in the connection's encoding and returns the status
    /// and the whole response body. The body is read to the end so the connection can be
    /// reused.
    pub async fn request(
        &mut self,
        method: http::Method,
        path: &str,
        body: Bytes,
    ) -> Result<(http::StatusCode, Bytes), Failure> {
        let content_type = self.encoding.media_type();
        self.request_as(method, path, content_type, body).await
    }

    /// As [`request`](Self::request), with a body of `content_type` (a patch's, say); the
    /// answer is still asked for in the connection's encoding.
    pub async fn request_as(
        &mut self,
        method: http::Method,
        path: &str,
        content_type: &str,
        body: Bytes,
    ) -> Result<(http::StatusCode, Bytes), Failure> {
        let sent = self.request_inner(method, path, content_type, body);
        match tokio::time::timeout(REQUEST_TIMEOUT, sent).await {
            Ok(r) => r,
            Err(_) => {
                self.sender = None;
                Err(Failure::Timeout)
            }
        }
    }

    async fn request_inner(
        &mut self,
        method: http::Method,
        path: &str,
        content_type: &str,
        body: Bytes,
    ) -> Result<(http::StatusCode, Bytes), Failure> {
        let sender = match &mut self.sender {
            Some(s) if !s.is_closed() => s,
            _ => {
                let s = connect(&self.endpoint)
                    .await
                    .map_err(|_| Failure::Connect)?;
                self.sender.insert(s)
            }
        };
        if sender.ready().await.is_err() {
            self.sender = None;
            return Err(Failure::Io);
        }
        let req = self
            .endpoint
            .request(method, path)
            .header(http::header::CONTENT_TYPE, content_type)
            .header(http::header::ACCEPT, self.encoding.media_type())
            .body(Full::new(body))
            .map_err(|_| Failure::Io)?;
        let resp = match sender.send_request(req).await {
            Ok(r) => r,
            Err(_) => {
                self.sender = None;
                return Err(Failure::Io);
            }
        };
        let status = resp.status();
        match resp.into_body().collect().await {
            Ok(b) => Ok((status, b.to_bytes())),
            Err(_) => {
                self.sender = None;
                Err(Failure::Io)
            }
        }
    }
}
