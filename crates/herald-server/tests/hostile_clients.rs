//! Regression tests of issue 29's HTTP findings, over real TCP on 127.0.0.1 against
//! `Server::start`, in paused tokio time: the runtime's clock jumps to the next timer
//! whenever every task waits (on a socket included), so the connection timeouts fire
//! without real sleeping. The assertions are bounds: open before a timeout, closed (or
//! answered) by a margin after it.
//!
//! - finding 3: idle, slow-header, slow-body and idle keep-alive connections are closed; a
//!   full connection bound still lets `/healthz` through; watches are not cut; the inflight
//!   limits answer 429 with `Retry-After`.
//! - finding 6 (HTTP part): the Host check of a loopback server, and writes without a
//!   Content-Type.

use std::time::Duration;

use herald_server::api::limits::RequestLimitOptions;
use herald_server::api::listen::ConnectionOptions;
use herald_server::server::{Server, ServerOptions};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{Instant, timeout};

const HEADER: Duration = Duration::from_secs(32);
const IDLE: Duration = Duration::from_secs(90);
const REQUEST: Duration = Duration::from_secs(60);
/// How long after a timeout the close (or answer) may come.
const MARGIN: Duration = Duration::from_secs(2);

async fn start(options: ServerOptions) -> Server {
    Server::start(ServerOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        ..options
    })
    .await
    .expect("server starts")
}

async fn start_default() -> Server {
    start(ServerOptions::default()).await
}

async fn connect(server: &Server) -> TcpStream {
    TcpStream::connect(server.addr()).await.unwrap()
}

/// Whether the server has closed `s` (reads EOF or a reset) without waiting; `false` while
/// it is open with nothing to read.
fn closed_now(s: &TcpStream) -> bool {
    let mut buf = [0u8; 1024];
    loop {
        match s.try_read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return false,
            Err(_) => return true,
        }
    }
}

/// Reads until the server closes `s`; `Err` if it is still open after `within`.
async fn wait_closed(
    s: &mut (impl AsyncRead + Unpin),
    within: Duration,
) -> Result<(), &'static str> {
    let mut buf = [0u8; 4096];
    timeout(within, async {
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await
    .map_err(|_| "still open")
}

/// One response: status code, headers (lower-cased names) and body (Content-Length bodies
/// only, which is what these requests get).
#[derive(Debug)]
struct Answer {
    code: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&self.body)))
    }

    /// Asserts a `Status` failure of `code` and `reason`.
    fn status(&self, code: u16, reason: &str) -> Value {
        assert_eq!(self.code, code, "{}", String::from_utf8_lossy(&self.body));
        let v = self.json();
        assert_eq!(v["kind"], "Status", "{v}");
        assert_eq!(v["code"], code, "{v}");
        assert_eq!(v["reason"], reason, "{v}");
        v
    }
}

async fn read_answer(s: &mut (impl AsyncRead + Unpin)) -> Answer {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = timeout(Duration::from_secs(300), s.read(&mut chunk))
            .await
            .expect("an answer in time")
            .unwrap();
        assert!(
            n > 0,
            "closed before an answer: {:?}",
            String::from_utf8_lossy(&buf)
        );
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8(buf[..head_end].to_vec()).unwrap();
    let mut lines = head.split("\r\n");
    let code = lines.next().unwrap()[9..12].parse().unwrap();
    let headers: Vec<(String, String)> = lines
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (n, v) = l.split_once(':').unwrap();
            (n.trim().to_ascii_lowercase(), v.trim().to_string())
        })
        .collect();
    let len: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .map(|(_, v)| v.parse().unwrap())
        .unwrap_or(0);
    let mut body = buf[head_end..].to_vec();
    while body.len() < len {
        let n = s.read(&mut chunk).await.unwrap();
        assert!(n > 0, "closed inside the body");
        body.extend_from_slice(&chunk[..n]);
    }
    Answer {
        code,
        headers,
        body,
    }
}

/// Sends one request with `headers` (Host and Content-Length added unless given) and reads
/// the answer, on `s`.
async fn exchange(
    s: &mut TcpStream,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Answer {
    let mut req = format!("{method} {path} HTTP/1.1\r\n");
    if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
        req.push_str("Host: 127.0.0.1\r\n");
    }
    for (n, v) in headers {
        req.push_str(&format!("{n}: {v}\r\n"));
    }
    req.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    let mut bytes = req.into_bytes();
    bytes.extend_from_slice(body);
    s.write_all(&bytes).await.unwrap();
    read_answer(s).await
}

async fn request(
    server: &Server,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Answer {
    let mut s = connect(server).await;
    exchange(&mut s, method, path, headers, body).await
}

fn event(name: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": "default"},
        "involvedObject": {"kind": "Pod", "name": "web-1", "namespace": "default"},
        "reason": "BackOff",
        "message": "Back-off restarting failed container",
        "type": "Warning",
    }))
    .unwrap()
}

const EVENTS: &str = "/api/v1/namespaces/default/events";
const JSON: (&str, &str) = ("Content-Type", "application/json");

// ---- finding 3: connections never time out ------------------------------------------------

#[tokio::test(start_paused = true)]
async fn finding_3_an_idle_connection_is_closed_at_the_header_timeout() {
    let server = start_default().await;
    let mut s = connect(&server).await;
    tokio::time::sleep(HEADER - MARGIN).await;
    assert!(!closed_now(&s), "closed before the header timeout");
    wait_closed(&mut s, 2 * MARGIN).await.unwrap();
    let metrics = request(&server, "GET", "/metrics", &[], b"").await;
    let text = String::from_utf8(metrics.body).unwrap();
    assert!(
        text.contains("herald_apiserver_connections_timed_out_total{phase=\"header\"} 1"),
        "{text}"
    );
    server.shutdown().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn finding_3_headers_sent_a_line_at_a_time_are_cut_at_the_header_timeout() {
    let server = start_default().await;
    let mut s = connect(&server).await;
    let start = Instant::now();
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .await
        .unwrap();
    // A header line every 4 s: never silent for long, never done.
    let mut lines = 0;
    while start.elapsed() < HEADER - MARGIN {
        tokio::time::sleep(Duration::from_secs(4)).await;
        if s.write_all(b"X-Slow: 1\r\n").await.is_err() {
            break;
        }
        lines += 1;
    }
    assert!(lines >= 7, "only {lines} lines before the timeout");
    assert!(!closed_now(&s), "closed before the header timeout");
    wait_closed(&mut s, 2 * MARGIN + Duration::from_secs(4))
        .await
        .unwrap();
    server.shutdown().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn finding_3_a_body_sent_a_byte_at_a_time_gets_504_at_the_request_timeout() {
    let server = start_default().await;
    let (mut reader, mut writer) = connect(&server).await.into_split();
    let start = Instant::now();
    writer.write_all(
        b"POST /api/v1/namespaces/default/events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{",
    )
    .await
    .unwrap();
    // A byte every 5 s: never silent for long, never done.
    let trickle = async {
        loop {
            tokio::time::sleep(Duration::from_secs(5)).await;
            if writer.write_all(b" ").await.is_err() {
                return;
            }
        }
    };
    let answer = tokio::select! {
        a = read_answer(&mut reader) => a,
        () = trickle => panic!("the connection failed before an answer"),
    };
    let elapsed = start.elapsed();
    answer.status(504, "Timeout");
    assert!(
        elapsed >= REQUEST && elapsed <= REQUEST + MARGIN,
        "answered after {elapsed:?}"
    );
    // The rest of the body is not waited for: the connection goes.
    wait_closed(&mut reader, HEADER + 2 * MARGIN).await.unwrap();
    server.shutdown().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn finding_3_an_idle_keep_alive_connection_is_closed_at_the_idle_timeout() {
    let server = start_default().await;
    let mut s = connect(&server).await;
    let a = exchange(&mut s, "GET", "/healthz", &[], b"").await;
    assert_eq!(a.code, 200);
    // Kept alive beyond the header timeout: the idle timeout governs between requests.
    tokio::time::sleep(HEADER + MARGIN).await;
    let a = exchange(&mut s, "GET", "/healthz", &[], b"").await;
    assert_eq!(
        a.code, 200,
        "a kept-alive connection serves its next request"
    );
    tokio::time::sleep(IDLE - MARGIN).await;
    assert!(!closed_now(&s), "closed before the idle timeout");
    wait_closed(&mut s, 2 * MARGIN).await.unwrap();
    let metrics = request(&server, "GET", "/metrics", &[], b"").await;
    let text = String::from_utf8(metrics.body).unwrap();
    assert!(
        text.contains("herald_apiserver_connections_timed_out_total{phase=\"idle\"} 1"),
        "{text}"
    );
    server.shutdown().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn finding_3_a_watch_outlives_the_connection_timeouts() {
    let server = start_default().await;
    let mut w = connect(&server).await;
    w.write_all(b"GET /api/v1/namespaces/default/events?watch=1&timeoutSeconds=600 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .unwrap();
    tokio::time::sleep(IDLE + HEADER + REQUEST).await;
    assert!(!closed_now(&w), "the watch was cut");
    let created = request(&server, "POST", EVENTS, &[JSON], &event("late")).await;
    assert_eq!(created.code, 201);
    let mut seen = Vec::new();
    let mut chunk = [0u8; 4096];
    while !String::from_utf8_lossy(&seen).contains("\"late\"") {
        let n = timeout(MARGIN, w.read(&mut chunk))
            .await
            .expect("the event reaches the watch")
            .unwrap();
        assert!(n > 0, "the watch closed");
        seen.extend_from_slice(&chunk[..n]);
    }
    server.shutdown().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn finding_3_with_every_connection_held_idle_healthz_still_answers() {
    const N: usize = 8;
    let server = start(ServerOptions {
        connections: ConnectionOptions {
            max_connections: N,
            health_connections: 2,
            ..ConnectionOptions::default()
        },
        ..ServerOptions::default()
    })
    .await;
    let mut idle = Vec::new();
    for _ in 0..N {
        idle.push(connect(&server).await);
    }
    // Give the accept loop the N connections.
    tokio::task::yield_now().await;
    for path in ["/healthz", "/livez", "/readyz", "/readyz/storage"] {
        let a = request(&server, "GET", path, &[], b"").await;
        assert_eq!(a.code, 200, "{path}: {}", String::from_utf8_lossy(&a.body));
        assert_eq!(a.header("connection"), Some("close"), "{path}");
    }
    let a = request(&server, "GET", EVENTS, &[], b"").await;
    a.status(429, "TooManyRequests");
    assert_eq!(a.header("retry-after"), Some("1"));
    // The health-only slots are bounded too: over them, a connection is closed at once.
    let held: Vec<TcpStream> = vec![connect(&server).await, connect(&server).await];
    let mut over = connect(&server).await;
    wait_closed(&mut over, MARGIN).await.unwrap();
    // A silent health-only connection frees its slot within seconds.
    tokio::time::sleep(Duration::from_secs(6)).await;
    for s in &held {
        assert!(closed_now(s), "a silent health-only connection is closed");
    }
    let a = request(&server, "GET", "/healthz", &[], b"").await;
    assert_eq!(a.code, 200);
    // When regular slots free up, the whole API is back.
    drop(idle);
    tokio::task::yield_now().await;
    let mut ok = false;
    for _ in 0..10 {
        if request(&server, "GET", EVENTS, &[], b"").await.code == 200 {
            ok = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(ok, "the API answers again once connections close");
    server.shutdown().await.unwrap();
}

/// The probe lane, as `herald serve` runs it (real time: the lane has a runtime of its own,
/// which a paused test clock does not reach): a probe is answered on the lane, one request
/// per connection; any other first request is handed on to the API's runtime and its
/// connection is kept alive there; `/metrics` counts both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_probe_lane_answers_probes_and_hands_on_everything_else() {
    let server = start(ServerOptions {
        connections: ConnectionOptions {
            probe_lane: true,
            ..ConnectionOptions::default()
        },
        ..ServerOptions::default()
    })
    .await;
    for path in ["/healthz", "/livez?verbose", "/readyz/storage"] {
        let mut s = connect(&server).await;
        let a = exchange(&mut s, "GET", path, &[], b"").await;
        assert_eq!(a.code, 200, "{path}: {}", String::from_utf8_lossy(&a.body));
        assert_eq!(a.header("connection"), Some("close"), "{path}");
        wait_closed(&mut s, Duration::from_secs(30)).await.unwrap();
    }
    // The API, then a probe on the same kept-alive connection (served where it now lives).
    let mut s = connect(&server).await;
    let a = exchange(&mut s, "POST", EVENTS, &[JSON], &event("lane")).await;
    assert_eq!(a.code, 201, "{}", String::from_utf8_lossy(&a.body));
    assert_eq!(a.header("connection"), None);
    let a = exchange(&mut s, "GET", "/healthz", &[], b"").await;
    assert_eq!(a.code, 200);
    let a = exchange(&mut s, "GET", &format!("{EVENTS}/lane"), &[], b"").await;
    assert_eq!(a.code, 200);
    // A POST to a health path is not a probe: handed on, and answered as without the lane.
    let a = request(&server, "POST", "/healthz", &[JSON], b"{}").await;
    assert_eq!(a.code, 405, "{}", String::from_utf8_lossy(&a.body));
    let m = request(&server, "GET", "/metrics", &[], b"").await;
    let text = String::from_utf8(m.body).unwrap();
    let count = |outcome: &str| -> u64 {
        let prefix =
            format!("herald_apiserver_probe_lane_connections_total{{outcome=\"{outcome}\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .unwrap_or_else(|| panic!("no {prefix} in {text}"))
            .parse()
            .unwrap()
    };
    assert_eq!(count("probe"), 3);
    // The API connection, the POST and this /metrics request.
    assert_eq!(count("handed_on"), 3);
    server.shutdown().await.unwrap();
}

// ---- inflight limits ------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn inflight_limit_answers_429_with_retry_after_never_queues() {
    let server = start(ServerOptions {
        limits: RequestLimitOptions {
            max_requests_inflight: 1,
            max_mutating_requests_inflight: 1,
            ..RequestLimitOptions::default()
        },
        ..ServerOptions::default()
    })
    .await;
    // A create whose body has not arrived holds the one mutating slot.
    let mut holder = connect(&server).await;
    let body = event("held");
    holder
        .write_all(
            format!(
                "POST {EVENTS} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                body.len()
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let a = request(&server, "POST", EVENTS, &[JSON], &event("over")).await;
    let v = a.status(429, "TooManyRequests");
    assert_eq!(v["message"], "Too many requests, please try again later.");
    assert_eq!(v["details"]["retryAfterSeconds"], 1);
    assert_eq!(a.header("retry-after"), Some("1"));
    // Read-only requests have their own limit; watches and probes count against none.
    let mut watches = Vec::new();
    for _ in 0..3 {
        let mut w = connect(&server).await;
        w.write_all(b"GET /api/v1/events?watch=1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            .await
            .unwrap();
        watches.push(w);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(request(&server, "GET", EVENTS, &[], b"").await.code, 200);
    assert_eq!(
        request(&server, "GET", "/healthz", &[], b"").await.code,
        200
    );
    // The held create finishes, and its slot is free again.
    holder.write_all(&body).await.unwrap();
    assert_eq!(read_answer(&mut holder).await.code, 201);
    let a = request(&server, "POST", EVENTS, &[JSON], &event("after")).await;
    assert_eq!(a.code, 201, "{}", String::from_utf8_lossy(&a.body));
    let text = String::from_utf8(request(&server, "GET", "/metrics", &[], b"").await.body).unwrap();
    assert!(
        text.contains("herald_apiserver_dropped_requests_total{request_kind=\"mutating\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("herald_apiserver_requests_total{verb=\"create\",code=\"429\"} 1"),
        "{text}"
    );
    server.shutdown().await.unwrap();
}

// ---- finding 6: browsers ----------------------------------------------------------------------

#[tokio::test]
async fn finding_6_a_loopback_server_answers_only_its_own_names() {
    let server = start_default().await;
    let port = server.addr().port();
    for host in [
        "localhost".to_string(),
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        "[::1]".to_string(),
    ] {
        let a = request(&server, "GET", EVENTS, &[("Host", &host)], b"").await;
        assert_eq!(a.code, 200, "Host {host}");
    }
    for host in [
        format!("evil.example:{port}"),
        "localhost.evil.example".to_string(),
    ] {
        let a = request(&server, "GET", EVENTS, &[("Host", &host)], b"").await;
        let v = a.status(403, "Forbidden");
        assert!(
            v["message"].as_str().unwrap().contains("DNS rebinding"),
            "{v}"
        );
        let a = request(
            &server,
            "DELETE",
            &format!("{EVENTS}/x"),
            &[("Host", &host), JSON],
            b"",
        )
        .await;
        a.status(403, "Forbidden");
    }
    server.shutdown().await.unwrap();
    // A name given with --allow-host passes.
    let server = start(ServerOptions {
        browser: herald_server::api::browser::BrowserOptions {
            allowed_hosts: vec!["herald.test".into()],
            ..Default::default()
        },
        ..ServerOptions::default()
    })
    .await;
    let a = request(&server, "GET", EVENTS, &[("Host", "herald.test:1")], b"").await;
    assert_eq!(a.code, 200);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn finding_6_a_write_without_a_content_type_is_415() {
    let server = start_default().await;
    let a = request(&server, "POST", EVENTS, &[], &event("nocontenttype")).await;
    let v = a.status(415, "UnsupportedMediaType");
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .contains("application/json, application/yaml, application/vnd.kubernetes.protobuf"),
        "{v}"
    );
    // What a page can send without a preflight is refused too.
    for ct in [
        "text/plain;charset=UTF-8",
        "application/x-www-form-urlencoded",
    ] {
        let a = request(
            &server,
            "POST",
            EVENTS,
            &[("Content-Type", ct)],
            &event("x"),
        )
        .await;
        a.status(415, "UnsupportedMediaType");
    }
    let a = request(&server, "POST", EVENTS, &[JSON], &event("withtype")).await;
    assert_eq!(a.code, 201);
    let path = format!("{EVENTS}/withtype");
    request(&server, "PUT", &path, &[], &event("withtype"))
        .await
        .status(415, "UnsupportedMediaType");
    request(&server, "PATCH", &path, &[], b"{}")
        .await
        .status(415, "UnsupportedMediaType");
    // Nothing was created by the refused writes.
    let list = request(&server, "GET", EVENTS, &[], b"").await.json();
    let names: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["withtype"]);
    server.shutdown().await.unwrap();
}
