//! Shared helpers of the end-to-end tests: the real `herald` binary on 127.0.0.1 (port 0) and
//! the real `kubectl` pointed at it.
//!
//! Every wait is bounded: the server's address line ([`START_GUARD`]), every kubectl run
//! ([`KUBECTL_GUARD`], after which the process is killed), every line of a streaming kubectl
//! ([`LINE_GUARD`]). A missing kubectl FAILS the test with a clear message; it never skips.
//! Every kubectl gets its own HOME and KUBECACHEDIR, so no discovery cache leaks between tests.

#![allow(dead_code)]

pub mod etcd;
pub mod haproxy;
pub mod pty;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

/// How long the server may take to print its address.
pub const START_GUARD: Duration = Duration::from_secs(30);
/// Hard bound on one kubectl process (it is killed after this).
pub const KUBECTL_GUARD: Duration = Duration::from_secs(60);
/// How long a streaming kubectl (`-w`) may take to print the line a test waits for.
pub const LINE_GUARD: Duration = Duration::from_secs(30);
/// kubectl's own bound on every request of a non-streaming command.
pub const REQUEST_TIMEOUT: &str = "--request-timeout=10s";
/// Streaming commands (`-w`) hold one request open for the whole test; client-go's request
/// timeout would cut it, so they get a longer one (still bounded by [`KUBECTL_GUARD`]-style
/// guards on every line the test waits for).
pub const WATCH_REQUEST_TIMEOUT: &str = "--request-timeout=120s";

/// Keeps at most this many bytes of a child's output (the tail), so a chatty server cannot
/// grow a test's memory without bound; older output is dropped.
const LOG_TAIL: usize = 64 * 1024;

/// A shared, bounded tail of a process's output, for failure messages.
#[derive(Clone, Default)]
pub struct LogTail(Arc<Mutex<String>>);

impl LogTail {
    fn push(&self, line: &str) {
        let mut s = self.0.lock().unwrap();
        s.push_str(line);
        s.push('\n');
        if s.len() > LOG_TAIL {
            let mut cut = s.len() - LOG_TAIL;
            while !s.is_char_boundary(cut) {
                cut += 1;
            }
            s.drain(..cut);
        }
    }

    /// The output kept so far.
    pub fn text(&self) -> String {
        self.0.lock().unwrap().clone()
    }
}

fn drain<R: AsyncRead + Unpin + Send + 'static>(r: R, tail: LogTail) {
    tokio::spawn(async move {
        let mut lines = BufReader::new(r).lines();
        while let Ok(Some(l)) = lines.next_line().await {
            tail.push(&l);
        }
    });
}

/// The write end of a pipe whose read end is already closed: every write to it fails with
/// EPIPE, as for `herald … | true` once `true` has exited.
pub fn closed_pipe() -> std::io::PipeWriter {
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    writer
}

/// The path of the binary under test.
pub fn herald_bin() -> &'static str {
    env!("CARGO_BIN_EXE_herald")
}

/// `herald serve` with no colour, the `HERALD_*` environment cleared (the arguments alone
/// decide), no stdin, and killed if the test drops it.
pub fn serve_command() -> Command {
    let mut cmd = Command::new(herald_bin());
    cmd.arg("serve")
        .env("NO_COLOR", "1")
        .env_remove("HERALD_LISTEN")
        .env_remove("HERALD_DATA")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    cmd
}

/// Runs `herald serve ARGS` that must exit on its own (it cannot start); fails the test if
/// it serves, succeeds or runs past [`START_GUARD`]. Returns its stderr lines, blank ones
/// dropped.
pub async fn serve_refused<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Vec<String> {
    let out = tokio::time::timeout(START_GUARD, serve_command().args(args).output())
        .await
        .expect("herald serve exits on its own")
        .expect("run herald serve");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{out:?}");
    assert!(!stdout.contains("listening"), "it must not serve: {stdout}");
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_owned)
        .collect()
}

/// The environment variable that makes [`Herald::suite`] run on etcd: the comma-separated
/// client URLs of a running etcd.
pub const TEST_ETCD_ENV: &str = "HERALD_TEST_ETCD";

/// A running `herald serve`; killed (SIGKILL) when dropped.
pub struct Herald {
    child: Child,
    /// `http://127.0.0.1:PORT` (`https://` for [`Herald::start_https`]), from the server's
    /// first stdout line.
    pub url: String,
    /// The first stdout line, verbatim.
    pub banner: String,
    /// The server's stderr (logs) and the rest of its stdout.
    pub logs: LogTail,
}

impl Herald {
    /// `herald serve --listen 127.0.0.1:0 --insecure-plain-http --store memory`.
    pub async fn memory() -> Herald {
        Herald::start(&["--store", "memory"]).await
    }

    /// The server of the kubectl and kube-rs suites: `--store memory`, or, when
    /// [`TEST_ETCD_ENV`] names etcd endpoints, `--store etcd` on them under an etcd prefix of
    /// its own ([`Herald::etcd`]). `.ci/run` runs those suites a second time that way, on an
    /// etcd it starts on 127.0.0.1.
    pub async fn suite() -> Herald {
        match std::env::var(TEST_ETCD_ENV) {
            Ok(endpoints) if !endpoints.trim().is_empty() => {
                Herald::etcd(endpoints.trim(), &[]).await
            }
            _ => Herald::memory().await,
        }
    }

    /// `herald serve --listen 127.0.0.1:0 --insecure-plain-http --store etcd --etcd-servers
    /// ENDPOINTS --etcd-prefix /herald-test-…`: a prefix no other server of this run uses, so
    /// tests sharing one etcd do not see each other's events.
    pub async fn etcd(endpoints: &str, extra: &[&str]) -> Herald {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let prefix = format!("/herald-test-{}-{nanos}-{n}", std::process::id());
        Herald::etcd_at(endpoints, &prefix, extra).await
    }

    /// `herald serve --listen 127.0.0.1:0 --insecure-plain-http --store etcd --etcd-servers
    /// ENDPOINTS --etcd-prefix PREFIX EXTRA…` (replicas of one store share the prefix).
    pub async fn etcd_at(endpoints: &str, prefix: &str, extra: &[&str]) -> Herald {
        let mut args = vec![
            "--store",
            "etcd",
            "--etcd-servers",
            endpoints,
            "--etcd-prefix",
            prefix,
        ];
        args.extend_from_slice(extra);
        Herald::start(&args).await
    }

    /// `herald serve --listen 127.0.0.1:0 --insecure-plain-http --data DIR` (SQLite).
    pub async fn sqlite(dir: &Path) -> Herald {
        let dir = dir.to_str().expect("utf-8 temp dir");
        Herald::start(&["--data", dir]).await
    }

    /// Starts `herald serve --listen 127.0.0.1:0 --insecure-plain-http EXTRA…` and waits
    /// (bounded) for its `herald-server listening on http://…` line. Tests that are not about
    /// TLS use plain HTTP; [`Herald::start_https`] is the default `herald serve`.
    pub async fn start(extra: &[&str]) -> Herald {
        Herald::start_on("127.0.0.1:0", extra).await
    }

    /// Starts `herald serve --listen LISTEN --insecure-plain-http EXTRA…` (e.g. to come back
    /// on the port of a server that was killed) and waits (bounded) for its address line.
    pub async fn start_on(listen: &str, extra: &[&str]) -> Herald {
        let mut args = vec!["--insecure-plain-http"];
        args.extend_from_slice(extra);
        Herald::launch(listen, &args, "http").await
    }

    /// Starts `herald serve --listen 127.0.0.1:0 EXTRA…` serving HTTPS (as it does without
    /// flags) and waits (bounded) for its `herald-server listening on https://…` line.
    pub async fn start_https(extra: &[&str]) -> Herald {
        Herald::launch("127.0.0.1:0", extra, "https").await
    }

    async fn launch(listen: &str, extra: &[&str], scheme: &str) -> Herald {
        let mut cmd = serve_command();
        cmd.args(["--listen", listen])
            .args(extra)
            .env("RUST_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("start the herald binary");
        let logs = LogTail::default();
        drain(child.stderr.take().unwrap(), logs.clone());
        let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = tokio::time::timeout(START_GUARD, out.next_line()).await;
        let banner = match first {
            Ok(Ok(Some(line))) => line,
            other => {
                let _ = child.start_kill();
                panic!(
                    "herald serve printed no address line within {START_GUARD:?} ({other:?}); logs:\n{}",
                    logs.text()
                )
            }
        };
        let rest = out.into_inner();
        drain(rest, logs.clone());
        let url = banner
            .strip_prefix("herald-server listening on ")
            .and_then(|s| s.split_whitespace().next())
            .unwrap_or_else(|| panic!("unexpected first line from herald serve: {banner:?}"))
            .to_string();
        assert!(
            url.starts_with(&format!("{scheme}://127.0.0.1:")) && !url.ends_with(":0"),
            "the server must print the {scheme} URL and the port it chose: {banner:?}"
        );
        Herald {
            child,
            url,
            banner,
            logs,
        }
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id().expect("the server is running")
    }

    /// Kills the server with SIGKILL (what `kill -9` does) and reaps it.
    pub async fn kill9(mut self) {
        self.child.start_kill().expect("SIGKILL the server");
        let status = tokio::time::timeout(START_GUARD, self.child.wait())
            .await
            .expect("the killed server exits")
            .expect("reap the server");
        assert!(
            !status.success(),
            "SIGKILL must end the process: {status:?}"
        );
    }

    /// Sends SIGTERM (what systemd, Kubernetes and `kill` send) and waits, at most
    /// [`START_GUARD`], for the server to exit; returns how it exited.
    pub async fn terminate(&mut self) -> std::process::ExitStatus {
        let pid = nix::unistd::Pid::from_raw(i32::try_from(self.pid()).expect("pid fits i32"));
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("SIGTERM the server");
        tokio::time::timeout(START_GUARD, self.child.wait())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "the server did not exit within {START_GUARD:?} of SIGTERM; logs:\n{}",
                    self.logs.text()
                )
            })
            .expect("reap the server")
    }

    /// A kube-rs client for this server (used to drive load faster than kubectl can).
    pub fn kube_client(&self) -> kube::Client {
        let mut config = kube::Config::new(self.url.parse().expect("server url"));
        config.read_timeout = Some(Duration::from_secs(10));
        config.connect_timeout = Some(Duration::from_secs(10));
        config.write_timeout = Some(Duration::from_secs(10));
        kube::Client::try_from(config).expect("kube client")
    }
}

impl Drop for Herald {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

/// The HTTP status of a plain `GET PATH` on the plain-HTTP server at `url`
/// (`http://127.0.0.1:PORT`), e.g. `/readyz`; `None` if it cannot be reached or does not
/// answer within [`START_GUARD`].
pub async fn http_status(url: &str, path: &str) -> Option<u16> {
    http_get(url, path).await.map(|(status, _)| status)
}

/// The status and the raw response (head and body) of a plain `GET PATH` on the plain-HTTP
/// server at `url`; `None` if it cannot be reached or does not answer within [`START_GUARD`].
pub async fn http_get(url: &str, path: &str) -> Option<(u16, String)> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let addr = url.strip_prefix("http://")?;
    let ask = async {
        let mut conn = tokio::net::TcpStream::connect(addr).await.ok()?;
        let request = format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
        conn.write_all(request.as_bytes()).await.ok()?;
        let mut raw = Vec::new();
        conn.read_to_end(&mut raw).await.ok()?;
        let text = String::from_utf8_lossy(&raw).into_owned();
        let status = text.split_whitespace().nth(1)?.parse().ok()?;
        Some((status, text))
    };
    tokio::time::timeout(START_GUARD, ask).await.ok().flatten()
}

/// The value of the counter or gauge `name` (no labels) in `url`'s `/metrics`.
pub async fn metric(url: &str, name: &str) -> Option<f64> {
    let (_, text) = http_get(url, "/metrics").await?;
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

/// The output of `herald kubeconfig --server URL EXTRA…` for `server` (`HERALD_DATA`
/// cleared), checked to point at it.
pub async fn kubeconfig_text(server: &Herald, extra: &[&str]) -> String {
    kubeconfig_for_url(&server.url, extra).await
}

/// The output of `herald kubeconfig --server URL EXTRA…` (`HERALD_DATA` cleared), checked to
/// point at `url`.
pub async fn kubeconfig_for_url(url: &str, extra: &[&str]) -> String {
    let out = tokio::time::timeout(
        KUBECTL_GUARD,
        Command::new(herald_bin())
            .args(["kubeconfig", "--server", url])
            .args(extra)
            .env_remove("HERALD_DATA")
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("herald kubeconfig finishes")
    .expect("run herald kubeconfig");
    assert!(out.status.success(), "herald kubeconfig failed: {out:?}");
    let text = String::from_utf8(out.stdout).expect("utf-8 kubeconfig");
    assert!(
        text.contains(&format!("server: {url}")),
        "kubeconfig does not point at the server:\n{text}"
    );
    text
}

/// Waits (at most `guard`, then the child is killed) for `program ARGS…` to finish.
async fn finish(child: Child, program: &str, args: &[&str], guard: Duration) -> Output {
    let out = tokio::time::timeout(guard, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("{program} {args:?} did not finish within {guard:?}"))
        .unwrap_or_else(|e| panic!("{program} {args:?}: {e}"));
    Output {
        args: std::iter::once(program.to_string())
            .chain(args.iter().map(|s| s.to_string()))
            .collect(),
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The result of one finished kubectl (or herald) run.
#[derive(Debug)]
pub struct Output {
    pub args: Vec<String>,
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    /// Everything about the run, for assertion messages.
    pub fn show(&self) -> String {
        format!(
            "{}\nrc={:?}\n--- stdout\n{}--- stderr\n{}",
            self.args.join(" "),
            self.code,
            self.stdout,
            self.stderr
        )
    }

    /// Asserts the run succeeded and returns its stdout.
    #[track_caller]
    pub fn ok(&self) -> &str {
        assert_eq!(self.code, Some(0), "the command failed:\n{}", self.show());
        &self.stdout
    }

    /// Asserts the run failed and returns its stderr.
    #[track_caller]
    pub fn failed(&self) -> &str {
        assert!(
            self.code.is_some_and(|c| c != 0),
            "the command should have failed:\n{}",
            self.show()
        );
        &self.stderr
    }

    /// stdout parsed as a kubectl table.
    #[track_caller]
    pub fn table(&self) -> Table {
        Table::parse(self.ok()).unwrap_or_else(|e| panic!("{e}:\n{}", self.show()))
    }

    /// stdout parsed as JSON.
    #[track_caller]
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(self.ok())
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{}", self.show()))
    }
}

/// A temp dir with a kubeconfig (written by `herald kubeconfig`), a HOME and a cache dir.
pub struct Kubectl {
    dir: tempfile::TempDir,
    kubeconfig: PathBuf,
    /// Replaces PATH for kubectl (only the helper's own test uses it).
    pub path: Option<PathBuf>,
}

fn spawn_failed(e: std::io::Error) -> ! {
    if e.kind() == std::io::ErrorKind::NotFound {
        panic!(
            "kubectl is not on PATH: the end-to-end tests need the real kubectl (CI installs it; \
             these tests never skip): {e}"
        )
    }
    panic!("cannot start kubectl: {e}")
}

impl Kubectl {
    /// A kubectl environment pointed at `server` through `herald kubeconfig --server URL`.
    pub async fn new(server: &Herald) -> Kubectl {
        Kubectl::with_kubeconfig(server, &[]).await
    }

    /// A kubectl environment pointed at `server` through `herald kubeconfig --server URL
    /// EXTRA…` (e.g. `--data DIR` for an HTTPS server's credentials).
    pub async fn with_kubeconfig(server: &Herald, extra: &[&str]) -> Kubectl {
        let dir = tempfile::tempdir().expect("temp dir");
        let text = kubeconfig_text(server, extra).await;
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(&kubeconfig, text).expect("write kubeconfig");
        Kubectl::using(dir, kubeconfig)
    }

    /// A kubectl environment pointed at the plain-HTTP server at `url` (e.g. a load balancer
    /// in front of servers) through `herald kubeconfig --server URL`.
    pub async fn for_url(url: &str) -> Kubectl {
        let dir = tempfile::tempdir().expect("temp dir");
        let text = kubeconfig_for_url(url, &[]).await;
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(&kubeconfig, text).expect("write kubeconfig");
        Kubectl::using(dir, kubeconfig)
    }

    /// A kubectl environment using the kubeconfig file `kubeconfig` in `dir`.
    pub fn using(dir: tempfile::TempDir, kubeconfig: PathBuf) -> Kubectl {
        std::fs::create_dir_all(dir.path().join("home")).expect("home dir");
        Kubectl {
            dir,
            kubeconfig,
            path: None,
        }
    }

    /// Writes `text` into the temp dir and returns its path.
    pub fn write(&self, name: &str, text: &str) -> String {
        let p = self.dir.path().join(name);
        std::fs::write(&p, text).expect("write manifest");
        p.to_str().expect("utf-8 path").to_string()
    }

    fn command(&self, args: &[&str], request_timeout: &str) -> Command {
        let mut cmd = Command::new("kubectl");
        cmd.args(args)
            .arg(request_timeout)
            .env("HOME", self.dir.path().join("home"))
            .env("KUBECONFIG", &self.kubeconfig)
            .env("KUBECACHEDIR", self.dir.path().join("cache"))
            .env_remove("KUBECTL_EXTERNAL_DIFF")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if let Some(p) = &self.path {
            cmd.env("PATH", p);
        }
        cmd
    }

    /// Runs kubectl to completion (killed after [`KUBECTL_GUARD`]).
    pub async fn run(&self, args: &[&str]) -> Output {
        let child = self
            .command(args, REQUEST_TIMEOUT)
            .spawn()
            .unwrap_or_else(|e| spawn_failed(e));
        finish(child, "kubectl", args, KUBECTL_GUARD).await
    }

    /// Starts a long-running kubectl (`-w`) whose stdout is read line by line.
    pub fn stream(&self, args: &[&str]) -> Stream {
        let mut child = self
            .command(args, WATCH_REQUEST_TIMEOUT)
            .spawn()
            .unwrap_or_else(|e| spawn_failed(e));
        let stderr = LogTail::default();
        drain(child.stderr.take().unwrap(), stderr.clone());
        // Bounded by the test: the reader stops when the child is killed at drop, and a
        // test reads at most a few dozen lines.
        let (tx, rx) = mpsc::unbounded_channel();
        let stdout = child.stdout.take().unwrap();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(l)) = lines.next_line().await {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        Stream {
            child,
            lines: rx,
            seen: Vec::new(),
            stderr,
            args: std::iter::once("kubectl".to_string())
                .chain(args.iter().map(|s| s.to_string()))
                .collect(),
        }
    }
}

/// A running kubectl whose stdout lines are consumed as they come; killed when dropped.
pub struct Stream {
    child: Child,
    lines: mpsc::UnboundedReceiver<String>,
    /// Every line read so far, in order.
    pub seen: Vec<String>,
    stderr: LogTail,
    args: Vec<String>,
}

impl Stream {
    /// Reads lines until one satisfies `pred` (returned), failing after [`LINE_GUARD`] or if
    /// kubectl ends first.
    pub async fn wait_for(&mut self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let deadline = tokio::time::Instant::now() + LINE_GUARD;
        loop {
            let next = tokio::time::timeout_at(deadline, self.lines.recv()).await;
            match next {
                Ok(Some(line)) => {
                    self.seen.push(line.clone());
                    if pred(&line) {
                        return line;
                    }
                }
                Ok(None) => panic!(
                    "{:?} ended before printing {what}; stdout:\n{}\nstderr:\n{}",
                    self.args,
                    self.seen.join("\n"),
                    self.stderr.text()
                ),
                Err(_) => panic!(
                    "{:?} printed no {what} within {LINE_GUARD:?}; stdout:\n{}\nstderr:\n{}",
                    self.args,
                    self.seen.join("\n"),
                    self.stderr.text()
                ),
            }
        }
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

/// A kubectl table split into cells by the header's column positions (kubectl's tabwriter
/// left-aligns every cell under its header and pads columns with at least 3 spaces), so empty
/// cells and cells with single spaces inside are kept.
#[derive(Debug)]
pub struct Table {
    pub headers: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// Parses a table printed by kubectl (header line first).
    pub fn parse(text: &str) -> Result<Table, String> {
        let mut lines = text.lines().filter(|l| !l.trim().is_empty());
        let header = lines.next().ok_or("no header line")?;
        let mut starts = Vec::new();
        let mut headers = Vec::new();
        let chars: Vec<char> = header.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            if chars[i] == ' ' {
                i += 1;
                continue;
            }
            let start = i;
            // A header ends at a run of 2+ spaces ("LAST SEEN" has one inside).
            while i < chars.len()
                && !(chars[i] == ' ' && chars.get(i + 1).is_none_or(|c| *c == ' '))
            {
                i += 1;
            }
            starts.push(start);
            headers.push(chars[start..i].iter().collect::<String>());
        }
        let mut rows = Vec::new();
        for line in lines {
            let cs: Vec<char> = line.chars().collect();
            let mut row = Vec::new();
            for (k, &s) in starts.iter().enumerate() {
                let e = starts.get(k + 1).copied().unwrap_or(cs.len()).min(cs.len());
                let cell: String = cs[s.min(cs.len())..e].iter().collect();
                // tabwriter widens a column to its longest cell, so the character before the
                // next column's start is always padding.
                if k + 1 < starts.len() && e < cs.len() && e > 0 && cs[e - 1] != ' ' {
                    return Err(format!("row is not aligned with the header: {line:?}"));
                }
                row.push(cell.trim().to_string());
            }
            rows.push(row);
        }
        Ok(Table { headers, rows })
    }

    /// The index of a column, panicking with the headers if absent.
    #[track_caller]
    pub fn col(&self, name: &str) -> usize {
        self.headers
            .iter()
            .position(|h| h == name)
            .unwrap_or_else(|| panic!("no column {name:?} in {:?}", self.headers))
    }

    /// The values of one column, top to bottom.
    #[track_caller]
    pub fn column(&self, name: &str) -> Vec<&str> {
        let c = self.col(name);
        self.rows.iter().map(|r| r[c].as_str()).collect()
    }

    /// The row whose `key` column equals `value`.
    #[track_caller]
    pub fn row(&self, key: &str, value: &str) -> Vec<&str> {
        let c = self.col(key);
        let found: Vec<_> = self.rows.iter().filter(|r| r[c] == value).collect();
        assert_eq!(
            found.len(),
            1,
            "expected one row with {key}={value}: {self:?}"
        );
        found[0].iter().map(|s| s.as_str()).collect()
    }

    /// The cell of `column` in the row whose `key` column equals `value`.
    #[track_caller]
    pub fn cell(&self, key: &str, value: &str, column: &str) -> String {
        let r = self.row(key, value);
        r[self.col(column)].to_string()
    }
}

/// Core/v1 events used by several tests, as one multi-document manifest. Their names sort
/// differently from their lastTimestamps (db-0.a < web-1.a < web-1.b by name; web-1.a,
/// db-0.a, web-1.b by time) so `--sort-by` is observable.
pub const SEED: &str = r#"apiVersion: v1
kind: Event
metadata:
  name: web-1.a
  namespace: default
involvedObject:
  apiVersion: v1
  kind: Pod
  name: web-1
  namespace: default
reason: Scheduled
message: Successfully assigned default/web-1 to node-1
type: Normal
source:
  component: default-scheduler
count: 1
firstTimestamp: "2025-01-01T00:00:00Z"
lastTimestamp: "2025-01-01T00:00:00Z"
---
apiVersion: v1
kind: Event
metadata:
  name: web-1.b
  namespace: default
  labels:
    app: web
involvedObject:
  apiVersion: v1
  kind: Pod
  name: web-1
  namespace: default
  fieldPath: spec.containers{app}
reason: BackOff
message: Back-off restarting failed container
type: Warning
source:
  component: kubelet
  host: node-1
count: 5
firstTimestamp: "2025-01-01T00:01:00Z"
lastTimestamp: "2025-01-01T00:05:00Z"
---
apiVersion: v1
kind: Event
metadata:
  name: db-0.a
  namespace: default
involvedObject:
  apiVersion: v1
  kind: Pod
  name: db-0
  namespace: default
reason: FailedMount
message: MountVolume.SetUp failed for volume data
type: Warning
source:
  component: kubelet
  host: node-2
count: 2
firstTimestamp: "2025-01-01T00:02:00Z"
lastTimestamp: "2025-01-01T00:03:00Z"
---
apiVersion: v1
kind: Event
metadata:
  name: coredns.a
  namespace: kube-system
involvedObject:
  apiVersion: apps/v1
  kind: Deployment
  name: coredns
  namespace: kube-system
reason: ScalingReplicaSet
message: Scaled up replica set coredns-5d78c9869d to 2
type: Normal
source:
  component: deployment-controller
count: 1
firstTimestamp: "2025-01-01T00:04:00Z"
lastTimestamp: "2025-01-01T00:04:00Z"
"#;

/// A server seeded with [`SEED`] through `kubectl create -f`, and its kubectl.
pub async fn seeded() -> (Herald, Kubectl) {
    let server = Herald::suite().await;
    let k = Kubectl::new(&server).await;
    let f = k.write("seed.yaml", SEED);
    let o = k.run(&["create", "-f", &f]).await;
    assert_eq!(
        o.ok().lines().collect::<Vec<_>>(),
        [
            "event/web-1.a created",
            "event/web-1.b created",
            "event/db-0.a created",
            "event/coredns.a created"
        ],
        "{}",
        o.show()
    );
    (server, k)
}

/// A core/v1 Warning `BackOff` event named `name` in `default` about `pod/pod-<name>`, count 1,
/// for kube-rs clients.
pub fn backoff_event(name: &str) -> k8s_openapi::api::core::v1::Event {
    use k8s_openapi::api::core::v1::{Event, ObjectReference};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    Event {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            ..ObjectMeta::default()
        },
        involved_object: ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            name: Some(format!("pod-{name}")),
            namespace: Some("default".into()),
            ..ObjectReference::default()
        },
        reason: Some("BackOff".into()),
        message: Some(format!("Back-off restarting failed container of {name}")),
        type_: Some("Warning".into()),
        count: Some(1),
        ..Event::default()
    }
}

/// A core/v1 event manifest in `default` about `pod/<object>`.
pub fn core_event(name: &str, object: &str, kind: &str, reason: &str, message: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Event
metadata:
  name: {name}
  namespace: default
involvedObject:
  apiVersion: v1
  kind: Pod
  name: {object}
  namespace: default
reason: {reason}
message: "{message}"
type: {kind}
source:
  component: e2e
count: 1
firstTimestamp: "2025-01-01T00:10:00Z"
lastTimestamp: "2025-01-01T00:10:00Z"
"#
    )
}

/// Hard bound on one run of a client command (`herald emit/get/…`); killed after it.
pub const CLI_GUARD: Duration = Duration::from_secs(120);

/// The `herald` client commands pointed at a server through a kubeconfig in `KUBECONFIG`
/// (written by `herald kubeconfig`), with their own HOME so no real `~/.kube/config` leaks in.
pub struct HeraldCli {
    dir: tempfile::TempDir,
    /// The kubeconfig file.
    pub kubeconfig: PathBuf,
}

impl HeraldCli {
    /// A client environment for `server`.
    pub async fn new(server: &Herald) -> HeraldCli {
        HeraldCli::for_url(&server.url).await
    }

    /// A client environment for the server at `url` (which may be down).
    pub async fn for_url(url: &str) -> HeraldCli {
        let dir = tempfile::tempdir().expect("temp dir");
        let text = kubeconfig_for_url(url, &[]).await;
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(&kubeconfig, text).expect("write kubeconfig");
        std::fs::create_dir_all(dir.path().join("home")).expect("home dir");
        HeraldCli { dir, kubeconfig }
    }

    /// The environment a pty-run command needs to find the server.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            (
                "KUBECONFIG",
                self.kubeconfig.to_str().expect("utf-8").to_string(),
            ),
            (
                "HOME",
                self.dir
                    .path()
                    .join("home")
                    .to_str()
                    .expect("utf-8")
                    .to_string(),
            ),
        ]
    }

    /// `herald ARGS…` in this environment, without a terminal, stdout and stderr piped,
    /// killed if dropped (for tests that read its output as it comes).
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(herald_bin());
        cmd.args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .env("HOME", self.dir.path().join("home"))
            .env("NO_COLOR", "1")
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        cmd
    }

    /// Runs `herald ARGS…` to completion (killed after [`CLI_GUARD`]), without a terminal.
    pub async fn run(&self, args: &[&str]) -> Output {
        self.run_to(args, Stdio::piped()).await
    }

    /// Like [`HeraldCli::run`] with stdout going to `stdout` (e.g. a pipe nobody reads).
    pub async fn run_to(&self, args: &[&str], stdout: impl Into<Stdio>) -> Output {
        let child = self
            .command(args)
            .stdout(stdout)
            .spawn()
            .expect("start herald");
        finish(child, "herald", args, CLI_GUARD).await
    }
}
