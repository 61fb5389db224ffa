//! The probe lane: health probes answered on a thread of their own.
//!
//! tokio has no task priorities. Under load the API's runtime has thousands of tasks ready
//! (watch streams, writes), and a probe's fresh connection waits behind all of them to be
//! accepted, read and answered: a kubelet or load balancer then sees `/livez` slow or failing
//! and restarts a server that is only busy. With the lane on
//! ([`ConnectionOptions::probe_lane`](super::listen::ConnectionOptions::probe_lane), on in
//! `herald serve`), connections are accepted on a dedicated thread running its own
//! single-threaded runtime, which looks at each connection's first bytes without consuming
//! them ([`sniff`]):
//!
//! - a plain-HTTP `GET` or `HEAD` of `/healthz`, `/livez` or `/readyz` (or one of their
//!   `/{check}` sub-paths) is served on the lane, one request per connection (the answer
//!   says `Connection: close`), by the same router as every other request;
//! - anything else (another path, a TLS handshake, or no decision within
//!   [`SNIFF_TIMEOUT`]) moves to the API's runtime and is served as without the lane, with
//!   its header timeout counted from there.
//!
//! Probes over TLS are not recognised (their first bytes are a handshake) and take the
//! regular path. The lane is a fast path only: what it answers, the regular path answers
//! the same way.

use std::time::Duration;

use tokio::net::TcpStream;

use super::health::is_health_path;

/// How long the lane waits for a new connection's first bytes before handing it on
/// undecided (a client that connects and says nothing is then timed by the regular path's
/// header timeout).
pub const SNIFF_TIMEOUT: Duration = Duration::from_millis(500);

/// The longest request-line prefix [`sniff`] needs: the method, the longest health path
/// with a sub-path of up to 64 bytes, and the space after it.
const SNIFF_BYTES: usize = 96;

/// What a connection's first bytes say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sniffed {
    /// A plain-HTTP `GET`/`HEAD` of a health endpoint.
    Probe,
    /// Anything else.
    Other,
    /// A prefix of a probe's request line: more bytes decide.
    NeedMore,
}

/// Classifies the first bytes of a connection. `Probe` only when the request line's method
/// is `GET` or `HEAD` and its path (up to `?` or the space before the version) is one
/// [`is_health_path`] accepts; `NeedMore` only for a strict prefix of such a line.
pub fn sniff(head: &[u8]) -> Sniffed {
    let rest = match strip_method(head) {
        Some(Ok(rest)) => rest,
        Some(Err(())) => return Sniffed::NeedMore,
        None => return Sniffed::Other,
    };
    let end = rest.iter().position(|&b| b == b' ' || b == b'?');
    let path_bytes = match end {
        Some(i) => &rest[..i],
        None => rest,
    };
    let Ok(path) = std::str::from_utf8(path_bytes) else {
        return Sniffed::Other;
    };
    match end {
        Some(_) if is_health_path(path) => Sniffed::Probe,
        Some(_) => Sniffed::Other,
        None if path.len() < SNIFF_BYTES && could_become_health_path(path) => Sniffed::NeedMore,
        None => Sniffed::Other,
    }
}

/// `Some(Ok(rest))` after `GET ` or `HEAD `, `Some(Err(()))` for a strict prefix of one,
/// `None` for another method.
fn strip_method(head: &[u8]) -> Option<Result<&[u8], ()>> {
    for m in [&b"GET "[..], b"HEAD "] {
        if let Some(rest) = head.strip_prefix(m) {
            return Some(Ok(rest));
        }
        if m.starts_with(head) {
            return Some(Err(()));
        }
    }
    None
}

/// Whether more bytes after `path` could make it a health path.
fn could_become_health_path(path: &str) -> bool {
    ["/healthz", "/livez", "/readyz"].iter().any(|p| {
        p.starts_with(path)
            || path.strip_prefix(p).is_some_and(|rest| {
                rest.is_empty() || (rest.starts_with('/') && !rest[1..].contains('/'))
            })
    })
}

/// Peeks at `tcp`'s first bytes (leaving them to be read) until [`sniff`] decides, the
/// client stops sending, or `within` passes (then `Other`).
pub async fn first_bytes(tcp: &TcpStream, within: Duration) -> Sniffed {
    let deadline = tokio::time::Instant::now() + within;
    let mut buf = [0u8; SNIFF_BYTES];
    let mut seen = 0;
    loop {
        let peeked = tokio::time::timeout_at(deadline, tcp.peek(&mut buf)).await;
        let n = match peeked {
            Ok(Ok(n)) if n > 0 => n,
            // Closed, an error, or the time is up: the regular path deals with it.
            _ => return Sniffed::Other,
        };
        match sniff(&buf[..n]) {
            Sniffed::NeedMore if n < buf.len() => {}
            Sniffed::NeedMore => return Sniffed::Other,
            decided => return decided,
        }
        if n == seen {
            // The same bytes as last time: wait a little for the rest of the line (peek
            // returns at once while unread bytes are buffered).
            if tokio::time::timeout_at(deadline, tokio::time::sleep(Duration::from_millis(1)))
                .await
                .is_err()
            {
                return Sniffed::Other;
            }
        }
        seen = n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn probes_are_recognised() {
        for line in [
            "GET /healthz HTTP/1.1\r\n",
            "GET /livez?verbose HTTP/1.1\r\n",
            "HEAD /readyz HTTP/1.1\r\n",
            "GET /readyz/ping HTTP/1.1\r\n",
        ] {
            assert_eq!(sniff(line.as_bytes()), Sniffed::Probe, "{line}");
        }
    }

    #[test]
    fn everything_else_is_not() {
        for line in [
            "POST /healthz HTTP/1.1\r\n",
            "GET /api/v1/events HTTP/1.1\r\n",
            "GET /healthzz HTTP/1.1\r\n",
            "GET /livez/a/b HTTP/1.1\r\n",
            "GET / HTTP/1.1\r\n",
            "\x16\x03\x01\x02\x00\x01",
            "PRI * HTTP/2.0\r\n",
        ] {
            assert_eq!(sniff(line.as_bytes()), Sniffed::Other, "{line:?}");
        }
    }

    #[test]
    fn prefixes_wait_for_more() {
        for head in [
            "",
            "G",
            "GE",
            "GET",
            "GET ",
            "GET /",
            "GET /heal",
            "HEAD /readyz",
        ] {
            assert_eq!(sniff(head.as_bytes()), Sniffed::NeedMore, "{head:?}");
        }
    }

    proptest! {
        /// `Probe` exactly when the parsed request line is a GET/HEAD of a health path, and
        /// every strict prefix of a probe's line asks for more.
        #[test]
        fn sniff_agrees_with_the_router(
            method in prop::sample::select(vec!["GET", "HEAD", "POST", "PUT", "get"]),
            path in prop::sample::select(vec![
                "/healthz", "/livez", "/readyz", "/healthz/ping", "/readyz/etcd", "/livez/a/b",
                "/healthzx", "/api", "/", "/live", "/readyz/",
            ]),
            query in prop::option::of("[a-z=&]{0,8}"),
        ) {
            let q = query.map(|q| format!("?{q}")).unwrap_or_default();
            let line = format!("{method} {path}{q} HTTP/1.1\r\nHost: x\r\n\r\n");
            let expected = if matches!(method, "GET" | "HEAD") && is_health_path(path) {
                Sniffed::Probe
            } else {
                Sniffed::Other
            };
            prop_assert_eq!(sniff(line.as_bytes()), expected);
            if expected == Sniffed::Probe {
                let decided_at = method.len() + 1 + path.len();
                for cut in 0..decided_at {
                    prop_assert_eq!(sniff(&line.as_bytes()[..cut]), Sniffed::NeedMore, "cut {}", cut);
                }
            }
        }
    }
}
