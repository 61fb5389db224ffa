//! gzip for large responses, as kube-apiserver's `APIResponseCompression` does it: a client
//! that sends `Accept-Encoding: gzip` (Go's HTTP transport does, so kubectl and client-go
//! do) gets a response of 128 KiB or more compressed at the fastest level, where compression
//! pays for itself on a real network. Smaller responses are sent as they are; so are watches
//! ([`Streaming`]), whose events must reach the client as they happen. A response of unknown
//! length (a large list is streamed in chunks of 64 KiB) is compressed.
//!
//! ```
//! use axum::{Router, routing::get};
//! use herald_server::api::compression;
//! let app: Router = Router::new().route("/x", get(|| async { "x" })).layer(compression::layer());
//! # let _ = app;
//! ```

use tower_http::compression::predicate::Predicate;
use tower_http::compression::{CompressionLayer, CompressionLevel};

/// Responses smaller than this are never compressed (kube-apiserver's threshold).
pub const MIN_COMPRESSED_BYTES: u64 = 128 * 1024;

/// A response extension marking a stream that must not be compressed (a watch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Streaming;

/// Which responses [`layer`] compresses (see the module docs).
#[derive(Debug, Clone, Copy, Default)]
pub struct LargeResponses;

impl Predicate for LargeResponses {
    fn should_compress<B: http_body::Body>(&self, response: &http::Response<B>) -> bool {
        if response.extensions().get::<Streaming>().is_some()
            || response
                .headers()
                .contains_key(http::header::CONTENT_ENCODING)
        {
            return false;
        }
        let known = response.body().size_hint().exact().or_else(|| {
            response
                .headers()
                .get(http::header::CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse().ok())
        });
        known.is_none_or(|n| n >= MIN_COMPRESSED_BYTES)
    }
}

/// The compression layer: gzip only, fastest level, for [`LargeResponses`]. Apply it
/// outermost, so it sees the final body.
pub fn layer() -> CompressionLayer<LargeResponses> {
    CompressionLayer::new()
        .gzip(true)
        .quality(CompressionLevel::Fastest)
        .compress_when(LargeResponses)
}
