//! The audit log of a [`Server`] on 127.0.0.1: one `audit.k8s.io/v1` line per request,
//! `ResponseStarted` and `ResponseComplete` for a watch, the client's `Audit-ID` echoed and
//! logged, no health probes, and the rotated files of a small `--audit-log-maxsize`.
//!
//! The log is read after [`Server::shutdown`], which returns once every queued line is
//! written. Every wait is bounded.

use std::path::{Path, PathBuf};
use std::time::Duration;

use futures::StreamExt as _;
use herald_server::api::audit::{AuditOptions, AuditTarget, RotationOptions};
use herald_server::server::{Server, ServerOptions};
use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, PostParams, WatchEvent, WatchParams};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

const BOUND: Duration = Duration::from_secs(30);

async fn start(path: &Path, rotation: RotationOptions) -> Server {
    Server::start(ServerOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        audit: AuditOptions {
            target: Some(AuditTarget::File(path.to_path_buf())),
            rotation,
            ..AuditOptions::default()
        },
        ..ServerOptions::default()
    })
    .await
    .expect("server starts")
}

fn client(server: &Server) -> kube::Client {
    kube::Client::try_from(kube::Config::new(server.url().parse().unwrap())).unwrap()
}

/// A raw HTTP/1.1 GET with `headers`; the whole response as text.
async fn get(server: &Server, path: &str, headers: &str) -> String {
    let mut s = tokio::net::TcpStream::connect(server.addr()).await.unwrap();
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{headers}Connection: close\r\n\r\n")
            .as_bytes(),
    )
    .await
    .unwrap();
    let mut buf = Vec::new();
    tokio::time::timeout(BOUND, s.read_to_end(&mut buf))
        .await
        .expect("response within bound")
        .unwrap();
    String::from_utf8_lossy(&buf).into_owned()
}

fn lines(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

fn event(name: &str) -> Event {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "involvedObject": {"kind": "Pod", "name": "web-1", "namespace": "default"},
        "reason": "Started",
        "message": "audited",
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_is_logged_when_it_starts_and_when_it_ends_with_one_audit_id() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.log");
    let server = start(&path, RotationOptions::default()).await;
    let api: Api<Event> = Api::namespaced(client(&server), "default");
    api.create(&PostParams::default(), &event("w1"))
        .await
        .unwrap();
    let mut watch = api
        .watch(&WatchParams::default().timeout(290), "0")
        .await
        .unwrap()
        .boxed();
    let first = tokio::time::timeout(BOUND, watch.next())
        .await
        .expect("the replayed event arrives")
        .expect("open")
        .expect("an event");
    assert!(matches!(first, WatchEvent::Added(_)), "{first:?}");

    // The client's Audit-ID is echoed and logged; health probes are not logged.
    let resp = get(
        &server,
        "/api/v1/namespaces/default/events",
        "Audit-ID: my-request-1\r\n",
    )
    .await;
    assert!(
        resp.to_ascii_lowercase()
            .contains("\r\naudit-id: my-request-1\r\n"),
        "{resp}"
    );
    let resp = get(&server, "/readyz", "").await;
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    let resp = get(&server, "/metrics", "").await;
    assert!(
        resp.contains("herald_apiserver_audit_events_total"),
        "{resp}"
    );
    assert!(
        resp.contains("herald_apiserver_audit_dropped_events_total{reason=\"queue_full\"} 0"),
        "{resp}"
    );

    // The shutdown ends the watch: its ResponseComplete is written before shutdown returns.
    tokio::time::timeout(BOUND, server.shutdown())
        .await
        .expect("shutdown within bound")
        .unwrap();
    drop(watch);

    let events = lines(&path);
    assert!(
        events
            .iter()
            .all(|e| !e["requestURI"].as_str().unwrap().starts_with("/readyz"))
    );
    let watches: Vec<_> = events.iter().filter(|e| e["verb"] == "watch").collect();
    assert_eq!(watches.len(), 2, "{events:#?}");
    assert_eq!(watches[0]["stage"], "ResponseStarted", "{watches:#?}");
    assert_eq!(watches[1]["stage"], "ResponseComplete", "{watches:#?}");
    assert_eq!(watches[0]["auditID"], watches[1]["auditID"]);
    assert_eq!(
        watches[0]["requestReceivedTimestamp"],
        watches[1]["requestReceivedTimestamp"]
    );
    assert!(
        watches[0]["stageTimestamp"].as_str() <= watches[1]["stageTimestamp"].as_str(),
        "{watches:#?}"
    );
    for w in &watches {
        assert_eq!(w["responseStatus"]["code"], 200, "{w}");
        assert_eq!(w["objectRef"]["namespace"], "default", "{w}");
        assert_eq!(w["user"]["username"], "system:anonymous", "{w}");
        assert_eq!(
            w["annotations"]["authorization.k8s.io/decision"], "allow",
            "{w}"
        );
    }
    let create = events
        .iter()
        .find(|e| e["verb"] == "create")
        .expect("the create");
    assert_eq!(create["stage"], "ResponseComplete");
    assert_eq!(create["responseStatus"]["code"], 201);
    let echoed = events
        .iter()
        .find(|e| e["auditID"] == "my-request-1")
        .expect("the request with the client's Audit-ID");
    assert_eq!(echoed["verb"], "list");
    assert_eq!(echoed["sourceIPs"], serde_json::json!(["127.0.0.1"]));
    let metrics = events
        .iter()
        .find(|e| e["requestURI"] == "/metrics")
        .expect("/metrics");
    assert_eq!(metrics["verb"], "get");
    assert!(metrics.get("objectRef").is_none(), "{metrics}");
}

fn rotated(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap() != "audit.log")
        .collect();
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_maxsize_rotates_to_lumberjacks_names_keeping_maxbackup_files_0600() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.log");
    let server = start(
        &path,
        RotationOptions {
            max_size_mb: 1,
            max_backups: 2,
            max_age_days: 0,
        },
    )
    .await;
    // Long request URIs make long lines: about 3.5 MiB of log in 900 requests of 4 KiB.
    let filler = "x".repeat(4000);
    for i in 0..900 {
        let resp = get(
            &server,
            &format!("/api/v1/namespaces/default/events/e{i}?f={filler}"),
            "",
        )
        .await;
        assert!(resp.starts_with("HTTP/1.1 404"), "{resp}");
    }
    tokio::time::timeout(BOUND, server.shutdown())
        .await
        .expect("shutdown within bound")
        .unwrap();
    let backups = rotated(dir.path());
    assert_eq!(backups.len(), 2, "{backups:?}");
    for p in backups.iter().chain([&path]) {
        let name = p.file_name().unwrap().to_str().unwrap();
        if p != &path {
            // audit-2006-01-02T15-04-05.000.log
            let stamp = name
                .strip_prefix("audit-")
                .and_then(|s| s.strip_suffix(".log"))
                .unwrap_or_else(|| panic!("{name}"));
            let b = stamp.as_bytes();
            assert_eq!(b.len(), 23, "{name}");
            assert_eq!(
                (b[4], b[7], b[10], b[13], b[16], b[19]),
                (b'-', b'-', b'T', b'-', b'-', b'.'),
                "{name}"
            );
            assert!(
                stamp.chars().filter(|c| c.is_ascii_digit()).count() == 17,
                "{name}"
            );
        }
        let meta = std::fs::metadata(p).unwrap();
        assert!(meta.len() <= 1024 * 1024, "{name}: {}", meta.len());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            assert_eq!(meta.permissions().mode() & 0o777, 0o600, "{name}");
        }
        for e in lines(p) {
            assert_eq!(e["responseStatus"]["code"], 404, "{e}");
        }
    }
}
