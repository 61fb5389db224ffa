//! A real etcd cluster (Debian's `etcd-server`: `/usr/bin/etcd`, `etcdctl`) of one or three
//! members on 127.0.0.1, for the tests of `herald serve --store etcd`.
//!
//! Each member has its own data directory in a temp dir and its own client and peer ports
//! (chosen free by binding port 0 just before the start). A member can be stopped
//! ([`EtcdCluster::stop`], SIGKILL: what a crashed machine does) and started again on the same
//! ports and data ([`EtcdCluster::start_member`]). Every wait is a bounded poll of
//! `etcdctl endpoint health` ([`ETCD_GUARD`]); a missing etcd FAILS the test with a clear
//! message (CI installs `etcd-server`), it never skips.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::process::{Child, Command};

use super::{LogTail, Output, drain, finish};

/// How long a member (or a restarted cluster) may take to answer healthy.
pub const ETCD_GUARD: Duration = Duration::from_secs(60);
/// Between two health polls.
const POLL: Duration = Duration::from_millis(100);

/// One member: its ports, its data directory and its process while it runs.
struct Member {
    name: String,
    client_port: u16,
    peer_port: u16,
    data: PathBuf,
    child: Option<Child>,
    logs: LogTail,
}

impl Member {
    fn client_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.client_port)
    }

    fn peer_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.peer_port)
    }
}

/// A running etcd cluster; every member is killed when it is dropped.
pub struct EtcdCluster {
    members: Vec<Member>,
    initial_cluster: String,
    token: String,
    _dir: tempfile::TempDir,
}

/// A port that was free a moment ago on 127.0.0.1, and the listener that holds it: the
/// caller keeps every listener until it has chosen all its ports, so that no two are equal.
fn free_port() -> (u16, TcpListener) {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    (l.local_addr().expect("local addr").port(), l)
}

impl EtcdCluster {
    /// Starts a cluster of `size` members and waits until every member is healthy.
    pub async fn start(size: usize) -> EtcdCluster {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut held = Vec::new();
        let mut port = || {
            let (p, l) = free_port();
            held.push(l);
            p
        };
        let members: Vec<Member> = (0..size)
            .map(|i| Member {
                name: format!("m{i}"),
                client_port: port(),
                peer_port: port(),
                data: dir.path().join(format!("m{i}")),
                child: None,
                logs: LogTail::default(),
            })
            .collect();
        drop(held);
        let initial_cluster = members
            .iter()
            .map(|m| format!("{}={}", m.name, m.peer_url()))
            .collect::<Vec<_>>()
            .join(",");
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let token = format!("herald-test-{}-{nanos}", std::process::id());
        let mut cluster = EtcdCluster {
            members,
            initial_cluster,
            token,
            _dir: dir,
        };
        for i in 0..size {
            cluster.spawn(i);
        }
        for i in 0..size {
            cluster.wait_healthy(i).await;
        }
        cluster
    }

    fn spawn(&mut self, i: usize) {
        let m = &mut self.members[i];
        assert!(m.child.is_none(), "member {} is already running", m.name);
        let mut cmd = Command::new("etcd");
        cmd.args(["--name", &m.name])
            .arg("--data-dir")
            .arg(&m.data)
            .args(["--listen-client-urls", &m.client_url()])
            .args(["--advertise-client-urls", &m.client_url()])
            .args(["--listen-peer-urls", &m.peer_url()])
            .args(["--initial-advertise-peer-urls", &m.peer_url()])
            .args(["--initial-cluster", &self.initial_cluster])
            .args(["--initial-cluster-token", &self.token])
            // Ignored once the data directory holds the member (a restart).
            .args(["--initial-cluster-state", "new"])
            // Elections within about a second of losing a leader.
            .args(["--heartbeat-interval", "50", "--election-timeout", "500"])
            .args(["--logger", "zap", "--log-level", "warn"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().unwrap_or_else(|e| {
            panic!(
                "cannot start etcd ({e}): the etcd tests need Debian's etcd-server package \
                 (CI installs it; these tests never skip)"
            )
        });
        drain(child.stdout.take().expect("stdout"), m.logs.clone());
        drain(child.stderr.take().expect("stderr"), m.logs.clone());
        m.child = Some(child);
    }

    /// Every member's client URL, comma separated (the value of `--etcd-servers`).
    pub fn endpoints(&self) -> String {
        self.members
            .iter()
            .map(Member::client_url)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Member `i`'s client URL.
    pub fn endpoint(&self, i: usize) -> String {
        self.members[i].client_url()
    }

    /// How many members the cluster has (running or not).
    pub fn size(&self) -> usize {
        self.members.len()
    }

    /// Kills member `i` (SIGKILL) and reaps it.
    pub async fn stop(&mut self, i: usize) {
        let m = &mut self.members[i];
        let mut child = m.child.take().expect("the member is running");
        child.start_kill().expect("kill etcd");
        tokio::time::timeout(ETCD_GUARD, child.wait())
            .await
            .expect("the killed member exits")
            .expect("reap etcd");
    }

    /// Starts member `i` again on its ports and data, without waiting for it.
    pub fn start_member(&mut self, i: usize) {
        self.spawn(i);
    }

    /// Waits (bounded) until member `i` answers healthy (it has a leader and serves reads).
    pub async fn wait_healthy(&self, i: usize) {
        let deadline = tokio::time::Instant::now() + ETCD_GUARD;
        loop {
            let o = self
                .etcdctl_at(&self.endpoint(i), &["endpoint", "health"])
                .await;
            if o.code == Some(0) {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "etcd member {} not healthy within {ETCD_GUARD:?}: {}\nlogs:\n{}",
                self.members[i].name,
                o.show(),
                self.members[i].logs.text()
            );
            tokio::time::sleep(POLL).await;
        }
    }

    /// `etcdctl --endpoints <every member> ARGS…` (v3 API), bounded.
    pub async fn etcdctl(&self, args: &[&str]) -> Output {
        self.etcdctl_at(&self.endpoints(), args).await
    }

    async fn etcdctl_at(&self, endpoints: &str, args: &[&str]) -> Output {
        let mut all = vec!["--endpoints", endpoints, "--command-timeout=5s"];
        all.extend_from_slice(args);
        let child = Command::new("etcdctl")
            .args(&all)
            .env("ETCDCTL_API", "3")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot run etcdctl ({e}): the etcd tests need Debian's etcd-client package")
            });
        finish(child, "etcdctl", &all, Duration::from_secs(30)).await
    }

    /// The index of the member that is the Raft leader now (every member must be running).
    pub async fn leader(&self) -> usize {
        let o = self.etcdctl(&["endpoint", "status", "-w", "json"]).await;
        let status: serde_json::Value = serde_json::from_str(o.ok())
            .unwrap_or_else(|e| panic!("endpoint status is not JSON ({e}): {}", o.show()));
        let entries = status.as_array().expect("a list of endpoints");
        let leader_endpoint = entries
            .iter()
            .find(|e| {
                e["Status"]["leader"].as_u64().is_some()
                    && e["Status"]["leader"] == e["Status"]["header"]["member_id"]
            })
            .and_then(|e| e["Endpoint"].as_str())
            .unwrap_or_else(|| panic!("no member is the leader: {}", o.show()));
        (0..self.size())
            .find(|&i| self.endpoint(i) == leader_endpoint)
            .unwrap_or_else(|| panic!("the leader {leader_endpoint} is not a member"))
    }

    /// The logs of member `i`, for failure messages.
    pub fn logs(&self, i: usize) -> String {
        self.members[i].logs.text()
    }
}
