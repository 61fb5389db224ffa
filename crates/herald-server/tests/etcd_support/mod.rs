//! A real etcd for tests: `etcd` on the PATH (Debian's `etcd-server`; `.ci/run` installs it) on free loopback ports
//! with its data in a temporary directory, killed when dropped.

#![allow(dead_code)]

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tempfile::TempDir;

/// The etcd binary the tests run.
pub const ETCD: &str = "etcd";

/// How many times a start is retried with new ports when another process took a port
/// between picking it and etcd binding it.
const ATTEMPTS: usize = 5;

/// How many readiness polls (50 ms apart) a start waits at most.
const POLLS: usize = 400;

/// One single-member etcd cluster.
pub struct EtcdProcess {
    child: Option<Child>,
    /// The client URL, `http://127.0.0.1:<port>` (`https://` with TLS).
    pub url: String,
    peer_url: String,
    dir: TempDir,
    tls: Option<TlsFiles>,
}

/// The PEM files of an etcd serving TLS that requires client certificates (made by
/// herald-server's own PKI: a CA, a serving certificate for 127.0.0.1, a client one).
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// The CA that signed both certificates.
    pub ca: std::path::PathBuf,
    /// etcd's serving certificate and key.
    pub serving_cert: std::path::PathBuf,
    /// The serving certificate's key.
    pub serving_key: std::path::PathBuf,
    /// A client certificate etcd accepts.
    pub client_cert: std::path::PathBuf,
    /// The client certificate's key.
    pub client_key: std::path::PathBuf,
}

/// Two different ports free right now on 127.0.0.1 (both listeners are held until both are
/// chosen, then dropped: etcd binds them next).
fn free_ports() -> (u16, u16) {
    let bind = || TcpListener::bind("127.0.0.1:0").expect("a free loopback port");
    let (a, b) = (bind(), bind());
    let port = |l: &TcpListener| l.local_addr().expect("local addr").port();
    (port(&a), port(&b))
}

impl EtcdProcess {
    /// Starts etcd and waits until it answers a read (bounded: [`POLLS`] polls per attempt).
    pub async fn start() -> EtcdProcess {
        Self::start_with(false).await
    }

    /// Starts etcd serving HTTPS to clients, requiring a client certificate
    /// ([`EtcdProcess::tls`] has the files).
    pub async fn start_tls() -> EtcdProcess {
        Self::start_with(true).await
    }

    /// The TLS files, for an etcd started with [`EtcdProcess::start_tls`].
    pub fn tls(&self) -> Option<&TlsFiles> {
        self.tls.as_ref()
    }

    async fn start_with(tls: bool) -> EtcdProcess {
        let mut last = String::new();
        for _ in 0..ATTEMPTS {
            match Self::try_start(tls).await {
                Ok(p) => return p,
                Err(e) => last = e,
            }
        }
        panic!("etcd did not start: {last}");
    }

    async fn try_start(tls: bool) -> Result<EtcdProcess, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let (client, peer) = free_ports();
        let tls = if tls {
            use herald_server::api::tls::pki;
            let pki_dir = dir.path().join("pki");
            pki::Pki::load_or_create(&pki_dir, "127.0.0.1".parse().unwrap())
                .map_err(|e| e.to_string())?;
            Some(TlsFiles {
                ca: pki_dir.join(pki::CA_CERT_FILE),
                serving_cert: pki_dir.join(pki::SERVING_CERT_FILE),
                serving_key: pki_dir.join(pki::SERVING_KEY_FILE),
                client_cert: pki_dir.join(pki::ADMIN_CERT_FILE),
                client_key: pki_dir.join(pki::ADMIN_KEY_FILE),
            })
        } else {
            None
        };
        let scheme = if tls.is_some() { "https" } else { "http" };
        let mut p = EtcdProcess {
            child: None,
            url: format!("{scheme}://127.0.0.1:{client}"),
            peer_url: format!("http://127.0.0.1:{peer}"),
            dir,
            tls,
        };
        p.run().await?;
        Ok(p)
    }

    /// Spawns etcd on this process's ports and directory and waits until it answers.
    async fn run(&mut self) -> Result<(), String> {
        let (url, peer_url) = (&self.url, &self.peer_url);
        let stderr_path = self.dir.path().join("etcd.stderr");
        let stderr = std::fs::File::create(&stderr_path)
            .map_err(|e| format!("cannot create {}: {e}", stderr_path.display()))?;
        let mut cmd = Command::new(ETCD);
        if let Some(t) = &self.tls {
            cmd.arg(format!("--cert-file={}", t.serving_cert.display()))
                .arg(format!("--key-file={}", t.serving_key.display()))
                .arg(format!("--trusted-ca-file={}", t.ca.display()))
                .arg("--client-cert-auth");
        }
        let mut child = cmd
            .arg("--name=test")
            .arg(format!(
                "--data-dir={}",
                self.dir.path().join("data").display()
            ))
            .arg(format!("--listen-client-urls={url}"))
            .arg(format!("--advertise-client-urls={url}"))
            .arg(format!("--listen-peer-urls={peer_url}"))
            .arg(format!("--initial-advertise-peer-urls={peer_url}"))
            .arg(format!("--initial-cluster=test={peer_url}"))
            .arg("--logger=zap")
            .arg("--log-level=error")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            // A file, not a pipe: etcd is a Go program, and Go exits on a write to a closed
            // pipe on stderr, so a pipe nobody reads after start-up would kill etcd at its
            // first later log line (with TLS, its gateway's failed connection to itself).
            .stderr(Stdio::from(stderr))
            .spawn()
            .map_err(|e| format!("cannot run {ETCD}: {e}"))?;
        for _ in 0..POLLS {
            if let Ok(Some(status)) = child.try_wait() {
                let err = std::fs::read_to_string(&stderr_path).unwrap_or_default();
                return Err(format!("etcd exited with {status}: {err}"));
            }
            if ready(url, self.tls.as_ref()).await {
                self.child = Some(child);
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let _ = child.kill();
        let _ = child.wait();
        Err("etcd did not answer within 20 s".into())
    }

    /// Kills etcd (SIGKILL), keeping its data and ports for [`EtcdProcess::restart`].
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts etcd again on the same data and ports.
    pub async fn restart(&mut self) {
        self.kill();
        self.run().await.expect("etcd restarts");
    }

    /// Runs the real `etcdctl` against this etcd and returns its stdout.
    pub fn etcdctl(&self, args: &[&str]) -> String {
        let mut cmd = Command::new("etcdctl");
        if let Some(t) = &self.tls {
            cmd.arg(format!("--cacert={}", t.ca.display()))
                .arg(format!("--cert={}", t.client_cert.display()))
                .arg(format!("--key={}", t.client_key.display()));
        }
        let out = cmd
            .env("ETCDCTL_API", "3")
            .arg(format!("--endpoints={}", self.url))
            .args(args)
            .output()
            .expect("run etcdctl");
        assert!(
            out.status.success(),
            "etcdctl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

/// Whether etcd at `url` answers a linearizable read.
async fn ready(url: &str, tls: Option<&TlsFiles>) -> bool {
    let mut opts = etcd_client::ConnectOptions::new()
        .with_connect_timeout(Duration::from_millis(500))
        .with_timeout(Duration::from_millis(500));
    if let Some(t) = tls {
        let read = |p: &std::path::Path| std::fs::read(p).expect("read a TLS file");
        opts = opts.with_tls(
            etcd_client::TlsOptions::new()
                .ca_certificate(etcd_client::Certificate::from_pem(read(&t.ca)))
                .identity(etcd_client::Identity::from_pem(
                    read(&t.client_cert),
                    read(&t.client_key),
                )),
        );
    }
    let Ok(mut c) = etcd_client::Client::connect([url], Some(opts)).await else {
        return false;
    };
    c.get("health-probe", None).await.is_ok()
}

impl Drop for EtcdProcess {
    fn drop(&mut self) {
        self.kill();
    }
}
