//! One HTTP/1.1 keep-alive connection per bench client, re-established after a failure.
//!
//! A dedicated connection per client (rather than a shared pool) makes "64 clients" mean
//! exactly 64 sockets and keeps a pool lock off the hot path.

use std::net::SocketAddr;
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

/// Opens a raw HTTP/1.1 connection to `addr`; the connection task runs on the runtime.
pub async fn connect(addr: SocketAddr) -> std::io::Result<SendRequest<Full<Bytes>>> {
    let stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    // A fixed-size read buffer: hyper's adaptive one grows to hundreds of KiB and, once the
    // body chunks it handed out still share it, allocates a fresh one per read, so reading a
    // 60 MB list spent most of its time in the kernel zeroing new pages.
    let (sender, conn) = hyper::client::conn::http1::Builder::new()
        .read_buf_exact_size(Some(READ_BUFFER))
        .handshake(TokioIo::new(stream))
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
    addr: SocketAddr,
    authority: String,
    encoding: Encoding,
    sender: Option<SendRequest<Full<Bytes>>>,
}

impl Conn {
    /// A connection to `addr` that speaks JSON, opened lazily by the first request.
    pub fn new(addr: SocketAddr) -> Self {
        Self::with_encoding(addr, Encoding::Json)
    }

    /// A connection to `addr` whose bodies (sent and asked for) are in `encoding`.
    pub fn with_encoding(addr: SocketAddr, encoding: Encoding) -> Self {
        Conn {
            addr,
            authority: addr.to_string(),
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
                let s = connect(self.addr).await.map_err(|_| Failure::Connect)?;
                self.sender.insert(s)
            }
        };
        if sender.ready().await.is_err() {
            self.sender = None;
            return Err(Failure::Io);
        }
        let req = http::Request::builder()
            .method(method)
            .uri(path)
            .header(http::header::HOST, &self.authority)
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
