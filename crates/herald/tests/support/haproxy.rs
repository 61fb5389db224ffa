//! A real HAProxy (Debian's `haproxy`) on 127.0.0.1 balancing TCP connections round-robin
//! over `herald serve` replicas: the load balancer of the README's replicated setup.
//!
//! A missing haproxy FAILS the test with a clear message (CI installs it); it never skips.

use std::process::Stdio;
use std::time::Duration;

use tokio::process::{Child, Command};

use super::{LogTail, drain};

/// How long HAProxy may take to accept connections.
const START_GUARD: Duration = Duration::from_secs(30);
/// Between two connection attempts while waiting for it.
const POLL: Duration = Duration::from_millis(50);

/// A running HAProxy; killed when dropped.
pub struct Haproxy {
    child: Child,
    /// `http://127.0.0.1:PORT` (or `https://…` for [`Haproxy::start`] with `tls = true`).
    pub url: String,
    /// The configuration file's text, for failure messages.
    pub config: String,
    /// HAProxy's output.
    pub logs: LogTail,
    _dir: tempfile::TempDir,
}

/// The HAProxy configuration of the README's setup: one TCP frontend on `listen`, and the
/// replicas at `servers` (`host:port`) taken in turn for each new connection, each checked
/// with `GET /readyz` (over TLS when `tls`) and skipped while it is not ready.
/// `idle_timeout` cuts a connection with no traffic in either direction for that long
/// (watches included, `timeout tunnel`), as real load balancers do.
pub fn config(listen: &str, servers: &[&str], tls: bool, idle_timeout: Duration) -> String {
    let ms = idle_timeout.as_millis();
    let check = if tls {
        "check check-ssl verify none inter 500ms fall 2 rise 2"
    } else {
        "check inter 500ms fall 2 rise 2"
    };
    let mut text = format!(
        "global\n    maxconn 4096\n\n\
         defaults\n    mode tcp\n    timeout connect 2s\n    timeout client {ms}ms\n    \
         timeout server {ms}ms\n    timeout tunnel {ms}ms\n\n\
         frontend kube\n    bind {listen}\n    default_backend herald\n\n\
         backend herald\n    balance roundrobin\n    option httpchk GET /readyz\n"
    );
    for (i, s) in servers.iter().enumerate() {
        text.push_str(&format!("    server r{i} {s} {check}\n"));
    }
    text
}

impl Haproxy {
    /// Starts HAProxy in front of `servers` (`host:port`) on a free port of 127.0.0.1 and waits
    /// (bounded) until it accepts connections.
    pub async fn start(servers: &[&str], tls: bool, idle_timeout: Duration) -> Haproxy {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
            l.local_addr().expect("local addr").port()
        };
        let listen = format!("127.0.0.1:{port}");
        let text = config(&listen, servers, tls, idle_timeout);
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join("haproxy.cfg");
        std::fs::write(&file, &text).expect("write haproxy.cfg");
        let logs = LogTail::default();
        let mut child = Command::new("haproxy")
            .arg("-f")
            .arg(&file)
            // Foreground, logs to stderr.
            .arg("-db")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start haproxy ({e}): the load-balancer test needs Debian's haproxy \
                     package (CI installs it; this test never skips)"
                )
            });
        drain(child.stdout.take().expect("stdout"), logs.clone());
        drain(child.stderr.take().expect("stderr"), logs.clone());
        let deadline = tokio::time::Instant::now() + START_GUARD;
        while tokio::net::TcpStream::connect(&listen).await.is_err() {
            if let Ok(Some(status)) = child.try_wait() {
                panic!(
                    "haproxy exited ({status}):\n{}\nconfig:\n{text}",
                    logs.text()
                );
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "haproxy not accepting on {listen} within {START_GUARD:?}:\n{}",
                logs.text()
            );
            tokio::time::sleep(POLL).await;
        }
        let scheme = if tls { "https" } else { "http" };
        Haproxy {
            child,
            url: format!("{scheme}://{listen}"),
            config: text,
            logs,
            _dir: dir,
        }
    }
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}
