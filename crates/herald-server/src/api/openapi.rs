//! Serving the OpenAPI v3 documents of Herald's two group versions
//! ([`herald_wire::schema::openapi`] builds them and checks bodies against them).
//!
//! `/openapi/v2` answers 404: kubectl only asks for it when v3 is missing or does not
//! advertise `fieldValidation` (not the case here), and for client-side apply of an existing
//! object, where it tolerates the 404 and falls back to its compiled-in types.
//!
//! The documents are served with `?hash=` URLs like kube-apiserver: a matching hash is
//! cacheable forever, a stale one redirects to the current URL.

use std::sync::LazyLock;

use axum::extract::Query;
use axum::response::{IntoResponse, Response};
use herald_wire::schema::GroupVersion;
use herald_wire::schema::openapi::schema_document;
use http::{HeaderValue, StatusCode, header};
use serde::Deserialize;
use serde_json::{Value, json};

use super::discovery::json_response;
use super::error::{StatusError, path_not_found};
use super::path::ApiPath;

/// A served document: its bytes and content hash.
struct Served {
    bytes: Vec<u8>,
    hash: String,
}

impl Served {
    fn new(doc: &Value) -> Self {
        let bytes = serde_json::to_vec(doc).unwrap_or_default();
        let hash = content_hash(&bytes);
        Self { bytes, hash }
    }
}

/// FNV-1a (64 bit) of the document, as 16 upper-case hex digits. Stable across builds, which
/// keeps kubectl's on-disk OpenAPI cache valid between server restarts.
fn content_hash(bytes: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016X}")
}

static CORE_DOC: LazyLock<Served> =
    LazyLock::new(|| Served::new(schema_document(GroupVersion::CORE_V1)));
static EVENTS_DOC: LazyLock<Served> =
    LazyLock::new(|| Served::new(schema_document(GroupVersion::EVENTS_V1)));

fn served(path: &str) -> Option<&'static Served> {
    match path.trim_end_matches('/') {
        "api/v1" => Some(&CORE_DOC),
        "apis/events.k8s.io/v1" => Some(&EVENTS_DOC),
        _ => None,
    }
}

/// The `/openapi/v3` index: each group-version path with its `?hash=` URL.
pub fn index() -> Value {
    json!({
        "paths": {
            "api/v1": {"serverRelativeURL": format!("/openapi/v3/api/v1?hash={}", CORE_DOC.hash)},
            "apis/events.k8s.io/v1": {"serverRelativeURL": format!("/openapi/v3/apis/events.k8s.io/v1?hash={}", EVENTS_DOC.hash)},
        }
    })
}

/// `GET /openapi/v3`.
pub async fn v3_index() -> Response {
    let mut resp = json_response(&index(), "application/json");
    resp.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, private"),
    );
    resp
}

/// Query of a per-group-version document request.
#[derive(Debug, Deserialize)]
pub struct DocQuery {
    /// The content hash from the index, if the client used the index URL.
    pub hash: Option<String>,
}

/// `GET /openapi/v3/{api/v1|apis/events.k8s.io/v1}[?hash=H]`.
pub async fn v3_document(
    ApiPath(path): ApiPath<String>,
    Query(q): Query<DocQuery>,
) -> Result<Response, StatusError> {
    let doc = served(&path).ok_or_else(|| StatusError(path_not_found()))?;
    let cache = match q.hash.as_deref() {
        Some(h) if h == doc.hash => "public, immutable",
        Some(_) => {
            let to = format!(
                "/openapi/v3/{}?hash={}",
                path.trim_end_matches('/'),
                doc.hash
            );
            // kube-apiserver answers a stale hash with 301 to the current URL.
            let mut resp = StatusCode::MOVED_PERMANENTLY.into_response();
            if let Ok(loc) = HeaderValue::from_str(&to) {
                resp.headers_mut().insert(header::LOCATION, loc);
            }
            return Ok(resp);
        }
        None => "no-cache, private",
    };
    let mut resp = doc.bytes.clone().into_response();
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    if let Ok(etag) = HeaderValue::from_str(&format!("\"{}\"", doc.hash)) {
        h.insert(header::ETAG, etag);
    }
    Ok(resp)
}

/// `GET /openapi/v2`: 404 (see the module docs for why kubectl copes).
pub async fn v2() -> StatusError {
    StatusError(path_not_found())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_points_at_hashed_documents() {
        let idx = index();
        let url = idx["paths"]["api/v1"]["serverRelativeURL"]
            .as_str()
            .unwrap();
        assert_eq!(url, format!("/openapi/v3/api/v1?hash={}", CORE_DOC.hash));
        assert_eq!(CORE_DOC.hash.len(), 16);
        assert_ne!(CORE_DOC.hash, EVENTS_DOC.hash);
        assert_eq!(content_hash(b""), "CBF29CE484222325");
    }
}
