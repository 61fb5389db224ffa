//! `herald serve --store etcd` under faults, real processes on 127.0.0.1 (a 3-member etcd
//! cluster from Debian's etcd-server, and herald replicas):
//!
//! - losing one member (the leader) under write load fails no client request beyond the
//!   retry of a request that was in flight;
//! - losing quorum makes writes fail promptly with a 503/504 `Status` and `/readyz` fail;
//!   after the members come back every acknowledged create is there;
//! - a replica killed with SIGKILL under load loses nothing it acknowledged: the other
//!   replica serves all of it.
//!
//! Every wait is bounded ([`GUARD`]); load is a fixed number of creates, not a duration.

mod support;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, ListParams, PostParams};
use support::etcd::EtcdCluster;
use support::{Herald, backoff_event, http_status};

/// The longest a test waits for one thing.
const GUARD: Duration = Duration::from_secs(60);
/// Between two looks while waiting.
const POLL: Duration = Duration::from_millis(100);
/// Attempts of one create: a request in flight when a member is lost may fail once.
const ATTEMPTS: usize = 3;

/// A kube-rs client whose requests may wait longer than the server's own bounds, so that
/// the server's answer (not the client's timeout) is what a test sees. With `retry`, kube-rs
/// retries 429, 503 and 504 answers itself (its default, what controllers get); without it
/// the test sees the first answer.
fn patient_client(server: &Herald, retry: bool) -> kube::Client {
    let mut config = kube::Config::new(server.url.parse().expect("server url"));
    config.default_retry = retry;
    config.read_timeout = Some(Duration::from_secs(120));
    config.connect_timeout = Some(Duration::from_secs(10));
    config.write_timeout = Some(Duration::from_secs(10));
    kube::Client::try_from(config).expect("kube client")
}

/// What a writer task ends with.
#[derive(Default)]
struct Written {
    /// Creates the server acknowledged (2xx; or 409 on a retry whose first attempt committed).
    acknowledged: Vec<String>,
    /// Creates that failed on every attempt, with the last error.
    failed: Vec<(String, String)>,
}

/// Creates `count` events named `{tag}-{i}` one after the other, each tried up to
/// [`ATTEMPTS`] times; counts each acknowledged create in `progress`. With `stop_on_failure`
/// the task ends at the first create that failed on every attempt.
async fn write(
    api: Api<Event>,
    tag: String,
    count: usize,
    progress: Arc<AtomicUsize>,
    stop_on_failure: bool,
) -> Written {
    let mut out = Written::default();
    for i in 0..count {
        let name = format!("{tag}-{i}");
        let mut last = String::new();
        let mut done = false;
        for attempt in 0..ATTEMPTS {
            match api
                .create(&PostParams::default(), &backoff_event(&name))
                .await
            {
                Ok(_) => done = true,
                // A retry of a create that did commit the first time: the event is there.
                Err(kube::Error::Api(s)) if s.code == 409 && attempt > 0 => {
                    let got = api.get(&name).await;
                    done = got.is_ok_and(|e| e.message == backoff_event(&name).message);
                }
                Err(e) => last = e.to_string(),
            }
            if done {
                break;
            }
        }
        if done {
            out.acknowledged.push(name);
            progress.fetch_add(1, Ordering::Relaxed);
        } else {
            out.failed.push((name, last));
            if stop_on_failure {
                break;
            }
        }
    }
    out
}

/// Waits (bounded) until `progress` reaches `n`.
async fn wait_for_progress(progress: &AtomicUsize, n: usize) {
    let deadline = tokio::time::Instant::now() + GUARD;
    while progress.load(Ordering::Relaxed) < n {
        assert!(
            tokio::time::Instant::now() < deadline,
            "only {} of {n} creates acknowledged within {GUARD:?}",
            progress.load(Ordering::Relaxed)
        );
        tokio::time::sleep(POLL).await;
    }
}

/// Waits (bounded) until `GET /readyz` on `server` answers `want` (200 or not).
async fn wait_ready(server: &Herald, want_ready: bool) {
    let deadline = tokio::time::Instant::now() + GUARD;
    loop {
        let status = http_status(&server.url, "/readyz").await;
        if (status == Some(200)) == want_ready {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "/readyz answered {status:?} for {GUARD:?}, want ready = {want_ready}; logs:\n{}",
            server.logs.text()
        );
        tokio::time::sleep(POLL).await;
    }
}

async fn names(api: &Api<Event>) -> BTreeSet<String> {
    api.list(&ListParams::default())
        .await
        .expect("list")
        .items
        .into_iter()
        .filter_map(|e| e.metadata.name)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn losing_the_leader_under_write_load_fails_no_request() {
    let mut etcd = EtcdCluster::start(3).await;
    let server = Herald::etcd_at(&etcd.endpoints(), "/registry", &[]).await;
    let api: Api<Event> = Api::namespaced(patient_client(&server, true), "default");
    let progress = Arc::new(AtomicUsize::new(0));
    let writers: Vec<_> = (0..8)
        .map(|t| {
            tokio::spawn(write(
                api.clone(),
                format!("w{t}"),
                40,
                progress.clone(),
                false,
            ))
        })
        .collect();
    wait_for_progress(&progress, 80).await;
    let leader = etcd.leader().await;
    etcd.stop(leader).await;
    let mut acknowledged = BTreeSet::new();
    for w in writers {
        let w = w.await.expect("writer");
        assert!(
            w.failed.is_empty(),
            "creates failed after {ATTEMPTS} attempts with one member of three lost: {:?}\nlogs:\n{}",
            w.failed,
            server.logs.text()
        );
        acknowledged.extend(w.acknowledged);
    }
    assert_eq!(acknowledged.len(), 320);
    assert_eq!(names(&api).await, acknowledged);
    let ready = http_status(&server.url, "/readyz").await;
    assert_eq!(ready, Some(200), "two members of three are a quorum");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn losing_quorum_fails_writes_promptly_and_recovery_keeps_every_acknowledged_create() {
    let mut etcd = EtcdCluster::start(3).await;
    let server = Herald::etcd_at(&etcd.endpoints(), "/registry", &[]).await;
    let api: Api<Event> = Api::namespaced(patient_client(&server, false), "default");
    let progress = Arc::new(AtomicUsize::new(0));
    let before = write(api.clone(), "before".into(), 20, progress.clone(), false).await;
    assert!(before.failed.is_empty(), "{:?}", before.failed);

    etcd.stop(0).await;
    etcd.stop(1).await;
    // A write cannot commit: the server answers with a Status, 503 or 504, within its own
    // bounded timeout (the client would wait 120 s).
    let err = api
        .create(&PostParams::default(), &backoff_event("during"))
        .await
        .expect_err("no quorum, no write");
    match &err {
        kube::Error::Api(s) => assert!(
            s.code == 503 || s.code == 504,
            "a write without quorum must be 503 or 504: {s:?}"
        ),
        other => panic!("the server must answer a Status, not {other:?}"),
    }
    wait_ready(&server, false).await;

    etcd.start_member(0);
    etcd.start_member(1);
    for i in 0..etcd.size() {
        etcd.wait_healthy(i).await;
    }
    wait_ready(&server, true).await;
    let after = write(api.clone(), "after".into(), 5, progress.clone(), false).await;
    assert!(after.failed.is_empty(), "{:?}", after.failed);
    let have = names(&api).await;
    for name in before.acknowledged.iter().chain(&after.acknowledged) {
        assert!(have.contains(name), "{name} was acknowledged and is gone");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_killed_under_load_loses_nothing_it_acknowledged() {
    let etcd = EtcdCluster::start(3).await;
    let a = Herald::etcd_at(&etcd.endpoints(), "/registry", &[]).await;
    let b = Herald::etcd_at(&etcd.endpoints(), "/registry", &[]).await;
    let api_a: Api<Event> = Api::namespaced(a.kube_client(), "default");
    let api_b: Api<Event> = Api::namespaced(b.kube_client(), "default");
    let progress = Arc::new(AtomicUsize::new(0));
    let writers: Vec<_> = (0..4)
        .map(|t| {
            tokio::spawn(write(
                api_a.clone(),
                format!("k{t}"),
                10_000,
                progress.clone(),
                true,
            ))
        })
        .collect();
    wait_for_progress(&progress, 100).await;
    a.kill9().await;
    let mut acknowledged = BTreeSet::new();
    for w in writers {
        let w = w.await.expect("writer");
        assert!(
            !w.failed.is_empty(),
            "every writer ends at the first create the killed replica cannot answer"
        );
        acknowledged.extend(w.acknowledged);
    }
    assert!(acknowledged.len() >= 100);
    let have = names(&api_b).await;
    let lost: Vec<_> = acknowledged.difference(&have).collect();
    assert!(lost.is_empty(), "acknowledged by A, missing on B: {lost:?}");
}
