//! Opaque list continue tokens in kube-apiserver's format.
//!
//! A token is unpadded base64url of `{"v":"meta.k8s.io/v1","rv":<list RV>,"start":"<key>\u0000"}`
//! where `<key>` is the last returned key relative to the list prefix. Every page of a list
//! is read at `rv`, the snapshot of the first page. `rv = -1` marks the "inconsistent" token
//! sent with a 410: the rest of the list is read at the latest revision.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use herald_core::status::ApiError;
use serde::{Deserialize, Serialize};

const VERSION: &str = "meta.k8s.io/v1";

#[derive(Serialize, Deserialize)]
struct Token {
    v: String,
    rv: i64,
    start: String,
}

/// A decoded continue position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Continue {
    /// The snapshot revision; `None` for an inconsistent (latest) continuation.
    pub revision: Option<u64>,
    /// Only keys strictly after this one (full key).
    pub start_after: String,
}

/// The token that continues a list under `prefix` after `last_key`, at `revision`
/// (`None` = latest).
pub fn encode(prefix: &str, last_key: &str, revision: Option<u64>) -> String {
    let rel = last_key.strip_prefix(prefix).unwrap_or(last_key);
    let t = Token {
        v: VERSION.into(),
        rv: revision.map_or(-1, |r| i64::try_from(r).unwrap_or(i64::MAX)),
        start: format!("{rel}\u{0}"),
    };
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(&t).unwrap_or_default())
}

fn invalid(detail: &str) -> ApiError {
    ApiError::bad_request(format!("continue key is not valid: {detail}"))
}

/// Decodes a token for a list under `prefix`. Malformed tokens are 400s.
pub fn decode(prefix: &str, token: &str) -> Result<Continue, ApiError> {
    let raw = URL_SAFE_NO_PAD
        .decode(token.trim_end_matches('='))
        .map_err(|_| invalid("incorrect encoding"))?;
    let t: Token = serde_json::from_slice(&raw).map_err(|_| invalid("incorrect encoding"))?;
    if t.v != VERSION {
        return Err(invalid(&format!(
            "server does not recognize this encoded version {:?}",
            t.v
        )));
    }
    if t.rv == 0 {
        return Err(invalid(&format!(
            "incorrect encoded start resourceVersion (version {VERSION})"
        )));
    }
    let Some(start) = t.start.strip_suffix('\u{0}') else {
        return Err(invalid("start key must end in a NUL byte"));
    };
    if start.is_empty() || start.split('/').any(|s| s == ".." || s == ".") {
        return Err(invalid("unsafe start key"));
    }
    Ok(Continue {
        revision: u64::try_from(t.rv).ok(),
        start_after: format!("{prefix}{start}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_shape() {
        let t = encode("/events/", "/events/ns/a.1", Some(42));
        let raw = URL_SAFE_NO_PAD.decode(&t).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&raw).unwrap();
        assert_eq!(v["v"], "meta.k8s.io/v1");
        assert_eq!(v["rv"], 42);
        assert_eq!(v["start"], "ns/a.1\u{0}");
        let c = decode("/events/", &t).unwrap();
        assert_eq!(c.revision, Some(42));
        assert_eq!(c.start_after, "/events/ns/a.1");
        let inconsistent = decode("/events/", &encode("/events/", "/events/ns/b", None)).unwrap();
        assert_eq!(inconsistent.revision, None);
    }

    #[test]
    fn garbage_is_400() {
        for bad in [
            "!!!",
            "e30",
            &URL_SAFE_NO_PAD.encode(br#"{"v":"meta.k8s.io/v1","rv":0,"start":"a\u0000"}"#),
        ] {
            assert_eq!(decode("/events/", bad).unwrap_err().code, 400, "{bad}");
        }
    }
}
