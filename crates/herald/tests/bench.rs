//! `herald bench` against a live `herald serve --store memory`: the summary's success count
//! equals what the server stores, with no errors. No timing assertions.

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper_util::rt::TokioIo;

/// The binary under test (`HERALD_BIN` overrides Cargo's, e.g. to test a release build).
fn herald_bin() -> String {
    std::env::var("HERALD_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_herald").to_string())
}

/// Kills the server when the test ends, pass or fail.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `herald serve --store memory` on a free port and returns it with its URL.
fn serve() -> (Server, String) {
    let mut child = Command::new(herald_bin())
        .args([
            "serve",
            "--store",
            "memory",
            "--listen",
            "127.0.0.1:0",
            "--insecure-plain-http",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start herald serve");
    let stdout = child.stdout.take().expect("stdout");
    let server = Server(child);
    let mut lines = BufReader::new(stdout).lines();
    // The first lines announce the address; bounded: the server prints it at start.
    for _ in 0..10 {
        let line = lines.next().expect("server output").expect("read line");
        if let Some(url) = line
            .split_whitespace()
            .find(|w| w.starts_with("http://127.0.0.1:"))
        {
            // Keep reading so the server never writes into a closed pipe (it would die).
            std::thread::spawn(move || for _ in lines {});
            return (server, url.to_string());
        }
    }
    panic!("herald serve did not print its address");
}

/// Sends `GET path` (Accept: JSON) to `url` on its own runtime and hands the response to `f`.
fn get<T>(
    url: &str,
    path: &str,
    f: impl AsyncFnOnce(http::Response<hyper::body::Incoming>) -> T,
) -> T {
    get_as(url, path, "application/json", f)
}

/// [`get`] asking for `accept`.
fn get_as<T>(
    url: &str,
    path: &str,
    accept: &str,
    f: impl AsyncFnOnce(http::Response<hyper::body::Incoming>) -> T,
) -> T {
    let addr = url.trim_start_matches("http://").to_string();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
        let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .unwrap();
        tokio::spawn(conn);
        let req = http::Request::get(path)
            .header("host", &addr)
            .header("accept", accept)
            .body(Full::new(Bytes::new()))
            .unwrap();
        let resp = send.send_request(req).await.unwrap();
        assert_eq!(resp.status(), 200);
        f(resp).await
    })
}

/// GET `path` on `url` and parse the JSON body.
fn get_json(url: &str, path: &str) -> serde_json::Value {
    get(url, path, async |resp| {
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        serde_json::from_slice(&body).unwrap()
    })
}

/// Opens the watch at `path` on `url` and returns the bytes of its first `lines` lines
/// (newlines included); bounded by the server sending them.
fn watch_line_bytes(url: &str, path: &str, lines: u64) -> u64 {
    get(url, path, async |resp| {
        let mut body = resp.into_body();
        let (mut seen, mut bytes) = (0u64, 0u64);
        while seen < lines {
            let frame = body.frame().await.expect("the watch ended early").unwrap();
            let data = frame.into_data().unwrap_or_default();
            for &b in &data[..] {
                if seen < lines {
                    bytes += 1;
                    seen += u64::from(b == b'\n');
                }
            }
        }
        bytes
    })
}

/// Opens the protobuf watch at `path` on `url` and returns the bytes of its first `frames`
/// frames (their 4-byte lengths included); bounded by the server sending them.
fn watch_frame_bytes(url: &str, path: &str, frames: u64) -> u64 {
    get_as(url, path, PROTOBUF, async |resp| {
        assert_eq!(
            resp.headers()["content-type"],
            "application/vnd.kubernetes.protobuf;stream=watch"
        );
        let mut body = resp.into_body();
        let mut buf = Vec::new();
        let (mut seen, mut bytes) = (0u64, 0u64);
        while seen < frames {
            let frame = body.frame().await.expect("the watch ended early").unwrap();
            buf.extend_from_slice(&frame.into_data().unwrap_or_default());
            while seen < frames && buf.len() >= 4 {
                let len = u32::from_be_bytes(buf[..4].try_into().unwrap()) as usize;
                if buf.len() < 4 + len {
                    break;
                }
                buf.drain(..4 + len);
                bytes += 4 + len as u64;
                seen += 1;
            }
        }
        bytes
    })
}

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// The server stores exactly the run's successful creates in `ns`, each with its send time.
fn assert_stored(url: &str, ns: &str, summary: &serde_json::Value) {
    let stored = get_json(url, &format!("/api/v1/namespaces/{ns}/events"));
    assert_eq!(stored["kind"], "EventList");
    let items = stored["items"].as_array().unwrap();
    assert_eq!(
        Some(items.len() as u64),
        summary["succeeded"].as_u64(),
        "{summary}"
    );
    assert!(
        items
            .iter()
            .all(|e| e["metadata"]["annotations"]["herald.dev/bench-sent"].is_string())
    );
}

fn bench(url: &str, extra: &[&str]) -> serde_json::Value {
    let out = Command::new(herald_bin())
        .args(["bench", "--server", url, "--duration", "2s", "-o", "json"])
        .args(extra)
        .output()
        .expect("run herald bench");
    assert!(
        out.status.success(),
        "bench failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("bench -o json prints JSON")
}

#[test]
fn bench_counts_match_what_the_server_stored() {
    let (_server, url) = serve();
    let s = bench(
        &url,
        &[
            "--clients",
            "4",
            "--watchers",
            "2",
            "--namespace",
            "bench-a",
            "--list",
        ],
    );
    let succeeded = s["succeeded"].as_u64().unwrap();
    assert!(succeeded > 0, "{s}");
    assert_eq!(s["requests"].as_u64(), Some(succeeded), "{s}");
    assert_eq!(s["failed"], 0, "{s}");
    assert_eq!(s["errors"], serde_json::json!({}), "{s}");
    assert_eq!(s["clients"], 4);
    assert_eq!(s["workload"], "unique");
    assert_eq!(s["interrupted"], false);

    assert_stored(&url, "bench-a", &s);
    // The bench's own timed list saw the same count.
    assert_eq!(s["list"]["items"].as_u64(), Some(succeeded), "{s}");
    assert_eq!(s["list"]["status"], 200);
    // Every watcher received every event of the run.
    assert_eq!(s["watch"]["watchers"], 2);
    assert_eq!(s["watch"]["expected_per_watcher"].as_u64(), Some(succeeded));
    assert_eq!(s["watch"]["received_min"].as_u64(), Some(succeeded), "{s}");
    assert_eq!(s["watch"]["complete_watchers"], 2);
    // Each watcher received each event's watch line once: the bytes are those of the same
    // lines read again (a watch without resourceVersion replays them as ADDED).
    let lines = watch_line_bytes(&url, "/api/v1/namespaces/bench-a/events?watch=1", succeeded);
    assert_eq!(
        s["watch"]["received_bytes"].as_u64(),
        Some(2 * lines),
        "{s}"
    );
    assert!(
        s["watch"]["bytes_per_second"].as_f64().unwrap() > 0.0,
        "{s}"
    );
}

/// The same run in protobuf: creates, watches and the list all speak it, and the counts and
/// bytes are exact as in JSON.
#[test]
fn bench_speaks_protobuf_end_to_end() {
    let (_server, url) = serve();
    let s = bench(
        &url,
        &[
            "--encoding",
            "protobuf",
            "--clients",
            "4",
            "--watchers",
            "2",
            "--namespace",
            "bench-pb",
            "--list",
        ],
    );
    assert_eq!(s["encoding"], "protobuf", "{s}");
    let succeeded = s["succeeded"].as_u64().unwrap();
    assert!(succeeded > 0, "{s}");
    assert_eq!(s["failed"], 0, "{s}");
    assert_eq!(s["errors"], serde_json::json!({}), "{s}");

    assert_stored(&url, "bench-pb", &s);
    assert_eq!(s["list"]["items"].as_u64(), Some(succeeded), "{s}");
    assert_eq!(s["list"]["status"], 200);
    let protobuf_list = get_as(
        &url,
        "/api/v1/namespaces/bench-pb/events",
        PROTOBUF,
        async |resp| resp.into_body().collect().await.unwrap().to_bytes().len(),
    );
    assert_eq!(
        s["list"]["bytes"].as_u64(),
        Some(protobuf_list as u64),
        "{s}"
    );

    assert_eq!(s["watch"]["received_min"].as_u64(), Some(succeeded), "{s}");
    assert_eq!(s["watch"]["complete_watchers"], 2, "{s}");
    assert_eq!(s["watch"]["reconnects"], 0, "{s}");
    let frames = watch_frame_bytes(
        &url,
        "/api/v1/namespaces/bench-pb/events?watch=1",
        succeeded,
    );
    assert_eq!(
        s["watch"]["received_bytes"].as_u64(),
        Some(2 * frames),
        "{s}"
    );
}

/// The same run against events.k8s.io/v1, in both encodings: the strictly validated group
/// takes every create, and its watches and lists see them all.
#[test]
fn bench_runs_against_events_k8s_io() {
    let (_server, url) = serve();
    for (encoding, ns) in [("json", "bench-v1"), ("protobuf", "bench-v1-pb")] {
        let s = bench(
            &url,
            &[
                "--group",
                "events.k8s.io",
                "--encoding",
                encoding,
                "--clients",
                "4",
                "--watchers",
                "2",
                "--namespace",
                ns,
                "--list",
            ],
        );
        assert_eq!(s["group"], "events.k8s.io", "{s}");
        assert_eq!(s["failed"], 0, "{s}");
        assert_eq!(s["errors"], serde_json::json!({}), "{s}");
        assert_stored(&url, ns, &s);
        let v1 = get_json(
            &url,
            &format!("/apis/events.k8s.io/v1/namespaces/{ns}/events"),
        );
        assert!(
            v1["items"]
                .as_array()
                .unwrap()
                .iter()
                .all(|e| e["reportingController"] == "herald.dev/bench"),
            "{v1}"
        );
        let succeeded = s["succeeded"].as_u64().unwrap();
        assert_eq!(s["list"]["items"].as_u64(), Some(succeeded), "{s}");
        assert!(
            s["list"]["path"]
                .as_str()
                .unwrap()
                .starts_with("/apis/events.k8s.io/v1/"),
            "{s}"
        );
        assert_eq!(s["watch"]["received_min"].as_u64(), Some(succeeded), "{s}");
    }
}

/// `--verb patch`: each client creates its event, then every request patches it as
/// client-go's recorders count a repeat. In each group and encoding the stored counts add up
/// to exactly the run's successful patches, and every watcher sees every patch.
#[test]
fn bench_patches_count_every_repeat() {
    let (_server, url) = serve();
    for (group, encoding, ns) in [
        ("core", "json", "patch-a"),
        ("core", "protobuf", "patch-pb"),
        ("events.k8s.io", "json", "patch-v1"),
        ("events.k8s.io", "protobuf", "patch-v1-pb"),
    ] {
        let s = bench(
            &url,
            &[
                "--verb",
                "patch",
                "--group",
                group,
                "--encoding",
                encoding,
                "--clients",
                "4",
                "--watchers",
                "2",
                "--namespace",
                ns,
                "--list",
            ],
        );
        assert_eq!(s["verb"], "patch", "{s}");
        let succeeded = s["succeeded"].as_u64().unwrap();
        assert!(succeeded > 4, "{s}");
        assert_eq!(s["requests"].as_u64(), Some(succeeded), "{s}");
        assert_eq!(s["failed"], 0, "{s}");
        assert_eq!(s["errors"], serde_json::json!({}), "{s}");
        // One event per client, each counted once by its create and once per patch.
        let (path, repeats): (String, fn(&serde_json::Value) -> u64) = match group {
            "core" => (format!("/api/v1/namespaces/{ns}/events"), |e| {
                e["count"].as_u64().unwrap() - 1
            }),
            _ => (
                format!("/apis/events.k8s.io/v1/namespaces/{ns}/events"),
                |e| e["series"]["count"].as_u64().map_or(0, |c| c - 1),
            ),
        };
        let stored = get_json(&url, &path);
        let items = stored["items"].as_array().unwrap();
        assert_eq!(items.len(), 4, "{stored}");
        assert_eq!(
            items.iter().map(repeats).sum::<u64>(),
            succeeded,
            "{stored}"
        );
        assert!(
            items
                .iter()
                .all(|e| e["metadata"]["annotations"]["herald.dev/bench-sent"].is_string())
        );
        assert_eq!(s["list"]["items"], 4, "{s}");
        assert_eq!(s["watch"]["expected_per_watcher"].as_u64(), Some(succeeded));
        assert_eq!(s["watch"]["received_min"].as_u64(), Some(succeeded), "{s}");
        assert_eq!(s["watch"]["complete_watchers"], 2, "{s}");
    }
}

/// A server that answers protobuf requests with JSON is one line before any load.
#[test]
fn a_server_without_protobuf_is_one_line() {
    use std::io::{Read as _, Write as _};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // Answers the first two connections (the bench's /version probe and its protobuf probe)
    // with a JSON list. Not joined: a bench that stopped early must fail the assertions
    // below, not hang on an accept.
    std::thread::spawn(move || {
        for stream in listener.incoming().take(2) {
            let mut stream = stream.unwrap();
            let mut seen = Vec::new();
            let mut buf = [0u8; 4096];
            while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = stream.read(&mut buf).unwrap();
                assert!(n > 0, "the bench closed before its request");
                seen.extend_from_slice(&buf[..n]);
            }
            let body = r#"{"kind":"EventList","apiVersion":"v1","metadata":{"resourceVersion":"5"},"items":[]}"#;
            write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            )
            .unwrap();
        }
    });
    let out = Command::new(herald_bin())
        .args([
            "bench",
            "--server",
            &format!("http://127.0.0.1:{port}"),
            "--encoding",
            "protobuf",
            "--duration",
            "1s",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(
        err.trim(),
        format!(
            "herald: 127.0.0.1:{port} does not speak protobuf (a protobuf list answered 200 OK with Content-Type \"application/json\"); run without --encoding protobuf"
        )
    );
}

#[test]
fn open_loop_request_budget_is_exact() {
    let (_server, url) = serve();
    let s = bench(
        &url,
        &[
            "--clients",
            "3",
            "--rate",
            "200",
            "--requests",
            "50",
            "--workload",
            "storm",
            "--namespace",
            "bench-b",
        ],
    );
    assert_eq!(s["requests"], 50, "{s}");
    assert_eq!(s["succeeded"], 50, "{s}");
    assert!(s["watch"].is_null() && s["list"].is_null(), "{s}");
    let stored = get_json(&url, "/api/v1/namespaces/bench-b/events");
    assert_eq!(stored["items"].as_array().unwrap().len(), 50);
}

#[test]
fn a_server_that_is_down_is_one_line() {
    // Bind then drop to get a port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = Command::new(herald_bin())
        .args([
            "bench",
            "--server",
            &format!("http://127.0.0.1:{port}"),
            "--duration",
            "1s",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(
        err.trim(),
        format!("herald: cannot reach 127.0.0.1:{port}: is `herald serve` running?")
    );
}

#[test]
fn bench_plots_throughput_and_latency_as_svg_and_png() {
    let (_server, url) = serve();
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("bench.svg");
    let s = bench(
        &url,
        &[
            "--clients",
            "2",
            "--namespace",
            "bench-plot",
            "--plot",
            svg.to_str().unwrap(),
        ],
    );
    let succeeded = s["succeeded"].as_u64().unwrap();
    assert!(succeeded > 0, "{s}");
    // The timeline the plot is drawn from accounts for every request.
    let timeline = s["timeline"].as_array().unwrap();
    assert!(!timeline.is_empty(), "{s}");
    let sum: u64 = timeline
        .iter()
        .map(|p| p["succeeded"].as_u64().unwrap())
        .sum();
    assert_eq!(sum, succeeded, "{s}");
    let stored = get_json(&url, "/api/v1/namespaces/bench-plot/events");
    assert_eq!(stored["items"].as_array().unwrap().len() as u64, succeeded);

    let text = std::fs::read_to_string(&svg).expect("the SVG was written");
    assert!(text.starts_with("<svg"), "{}", &text[..text.len().min(200)]);
    assert!(text.trim_end().ends_with("</svg>"));
    assert!(text.contains("throughput") && text.contains("create latency"));
    assert!(
        text.matches("<polyline").count() >= 3,
        "throughput, p50 and p99 lines"
    );

    let png = dir.path().join("bench.png");
    let s = bench(
        &url,
        &[
            "--clients",
            "2",
            "--namespace",
            "bench-png",
            "--plot",
            png.to_str().unwrap(),
        ],
    );
    assert!(s["succeeded"].as_u64().unwrap() > 0);
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&png).unwrap()));
    let mut reader = decoder.read_info().expect("a valid PNG header");
    let (w, h) = (reader.info().width, reader.info().height);
    assert_eq!((w, h), (1000, 700));
    let mut buf = vec![0; reader.output_buffer_size()];
    let frame = reader.next_frame(&mut buf).expect("valid PNG image data");
    // Not a blank image: the chart drew lines and text in more than one color.
    let px = &buf[..frame.buffer_size()];
    let distinct: std::collections::HashSet<&[u8]> = px.chunks(3).collect();
    assert!(distinct.len() > 3, "{} colors", distinct.len());
}

/// The server turns transparent huge pages off for itself: with them, the kernel zeroes a
/// whole 2 MiB page whenever the growing watch cache first touches one, ≈ 6 % of a create's
/// CPU (see `no_huge_pages` in main.rs). The kernel reports the process's flag in
/// `/proc/PID/status` as `THP_enabled` (Linux 5.0 and later).
#[cfg(target_os = "linux")]
#[test]
fn the_server_runs_without_transparent_huge_pages() {
    let (server, url) = serve();
    // The address is printed once serving, long after the flag is set.
    assert!(url.starts_with("http://127.0.0.1:"));
    let status = std::fs::read_to_string(format!("/proc/{}/status", server.0.id()))
        .expect("read the server's /proc status");
    let thp = status
        .lines()
        .find_map(|l| l.strip_prefix("THP_enabled:"))
        .map(str::trim);
    assert_eq!(thp, Some("0"), "{status}");
}

/// `--plot` into a directory that does not exist is refused before any load (exit 2), and
/// the flags are checked like the other commands' (`-s`, `-n`, `--clients`).
#[test]
fn a_plot_that_cannot_be_written_is_refused_before_the_load() {
    let (_server, url) = serve();
    let dir = tempfile::tempdir().unwrap();
    let plot = dir.path().join("no/such/dir/x.svg");
    let out = Command::new(herald_bin())
        .args(["bench", "-s", &url, "--requests", "5", "-n", "bench-noplot"])
        .arg("--plot")
        .arg(&plot)
        .output()
        .expect("run herald bench");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "herald: --plot {}: cannot write there: No such file or directory (os error 2)\n",
            plot.display()
        )
    );
    let stored = get_json(&url, "/api/v1/namespaces/bench-noplot/events");
    assert_eq!(stored["items"].as_array().unwrap().len(), 0, "no load ran");

    // With a writable plot, the summary comes out (and the chart is written).
    let svg = dir.path().join("ok.svg");
    let s = bench(
        &url,
        &[
            "--requests",
            "5",
            "-n",
            "bench-plot-ok",
            "--plot",
            svg.to_str().unwrap(),
        ],
    );
    assert_eq!(s["succeeded"], 5, "{s}");
    assert!(std::fs::read_to_string(&svg).unwrap().starts_with("<svg"));
}
