//! gzip for large responses, as kube-apiserver's `APIResponseCompression` does it: a GET
//! whose client sends `Accept-Encoding: gzip` (Go's HTTP transport does, so kubectl and
//! client-go do) gets a response of 128 KiB or more compressed at the fastest level, where
//! compression pays for itself on a real network. Smaller responses are sent as they are; so
//! are watches ([`Streaming`]), whose events must reach the client as they happen. A
//! response of unknown length (a list of more than 64 KiB is streamed in chunks, see
//! [`LIST_CHUNK`](crate::api::events::render::LIST_CHUNK)) is compressed.
//!
//! The [output layer](super::output) applies it last, after any transcoding, so writes and
//! requests that do not ask for gzip pay one comparison.
//!
//! ```
//! use axum::body::{Body, HttpBody as _};
//! use herald_server::api::compression::{accepts_gzip, gzip};
//! let mut headers = http::HeaderMap::new();
//! headers.insert("accept-encoding", "gzip, deflate".parse().unwrap());
//! assert!(accepts_gzip(&headers));
//! let resp = http::Response::new(Body::from(vec![b'x'; 200 * 1024]));
//! let zipped = gzip(resp).unwrap();
//! assert_eq!(zipped.headers()["content-encoding"], "gzip");
//! ```

use async_compression::Level;
use async_compression::tokio::bufread::GzipEncoder;
use axum::body::{Body, HttpBody as _};
use axum::response::Response;
use futures::TryStreamExt;
use http::{HeaderMap, HeaderValue, header};
use tokio_util::io::{ReaderStream, StreamReader};

/// Responses smaller than this are never compressed (kube-apiserver's threshold).
pub const MIN_COMPRESSED_BYTES: u64 = 128 * 1024;

/// A response extension marking a stream that is sent as it is made: never buffered,
/// transcoded or compressed (a watch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Streaming;

/// True when the request's `Accept-Encoding` lists `gzip` (or `*`) without `q=0`.
pub fn accepts_gzip(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|clause| {
            let mut parts = clause.split(';');
            let coding = parts.next().unwrap_or("").trim();
            let refused = parts.any(|p| {
                p.trim()
                    .strip_prefix("q=")
                    .and_then(|q| q.trim().parse::<f32>().ok())
                    .is_some_and(|q| q <= 0.0)
            });
            !refused && (coding.eq_ignore_ascii_case("gzip") || coding == "*")
        })
}

/// `resp` gzipped, when it is one to compress (see the module docs); `Err(resp)` unchanged
/// otherwise.
#[allow(clippy::result_large_err)]
pub fn gzip(mut resp: Response) -> Result<Response, Response> {
    let known = resp.body().size_hint().exact().or_else(|| {
        resp.headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok())
    });
    if resp.extensions().get::<Streaming>().is_some()
        || resp.headers().contains_key(header::CONTENT_ENCODING)
        || known.is_some_and(|n| n < MIN_COMPRESSED_BYTES)
    {
        return Err(resp);
    }
    let h = resp.headers_mut();
    h.remove(header::CONTENT_LENGTH);
    h.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    h.append(header::VARY, HeaderValue::from_static("Accept-Encoding"));
    let (parts, body) = resp.into_parts();
    let reader = StreamReader::new(body.into_data_stream().map_err(std::io::Error::other));
    let encoder = GzipEncoder::with_quality(reader, Level::Fastest);
    let body = Body::from_stream(ReaderStream::with_capacity(encoder, 64 * 1024));
    Ok(Response::from_parts(parts, body))
}
