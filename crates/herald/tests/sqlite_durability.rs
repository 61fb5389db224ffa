//! Durability of `herald serve --data DIR` (SQLite): every write the server acknowledged
//! before a `kill -9` is there after a restart on the same directory, at the same
//! resourceVersion, and revisions keep growing afterwards.
//!
//! Writes go over HTTP through kube-rs (many concurrent clients, faster than kubectl); the
//! restarted server is also read with the real kubectl.

mod support;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use std::sync::atomic::{AtomicBool, Ordering};
use support::{Herald, Kubectl};

use tokio::sync::Notify;

const WRITERS: usize = 8;
/// Acknowledged writes to collect before the kill (writers keep going during it).
const ACKED_BEFORE_KILL: usize = 1000;
/// Bound on the wait for that many acknowledgements.
const LOAD_GUARD: Duration = Duration::from_secs(120);

fn event(writer: usize, seq: usize) -> Event {
    let pod = format!("pod-{writer}");
    Event {
        metadata: ObjectMeta {
            name: Some(format!("{pod}.{seq:05}")),
            namespace: Some("default".into()),
            ..ObjectMeta::default()
        },
        involved_object: ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            name: Some(pod),
            namespace: Some("default".into()),
            ..ObjectReference::default()
        },
        reason: Some("Durable".into()),
        message: Some(format!("write {seq} of writer {writer}")),
        type_: Some("Normal".into()),
        count: Some(1),
        source: Some(EventSource {
            component: Some("e2e-durability".into()),
            ..EventSource::default()
        }),
        ..Event::default()
    }
}

fn rv_of(e: &Event) -> u64 {
    e.metadata
        .resource_version
        .as_deref()
        .expect("resourceVersion")
        .parse()
        .expect("numeric resourceVersion")
}

/// What the writers learnt from the server's answers.
#[derive(Default)]
struct Ledger {
    /// name → (resourceVersion, count) of the last acknowledged write to it.
    acked: BTreeMap<String, (u64, i32)>,
    /// Every acknowledged write in the order the acknowledgements arrived, per writer.
    per_writer: HashMap<usize, Vec<u64>>,
    /// Names whose last write was in flight when the server died: it may or may not have
    /// been applied.
    uncertain: HashSet<String>,
    /// Failures while the server was still supposed to be up (each one is a bug).
    early_errors: Vec<String>,
    total: usize,
}

async fn writer(
    id: usize,
    api: Api<Event>,
    ledger: Arc<Mutex<Ledger>>,
    progress: Arc<Notify>,
    killed: Arc<AtomicBool>,
) {
    let mut seq = 0usize;
    let mut last: Option<(String, i32)> = None;
    loop {
        // Every fourth write bumps the count of this writer's previous event (a PATCH, as
        // recorders do); the rest are creates.
        let (name, result, count) = match &last {
            Some((name, count)) if seq % 4 == 3 => {
                let count = count + 1;
                let r = api
                    .patch(
                        name,
                        &PatchParams::default(),
                        &Patch::Merge(serde_json::json!({ "count": count })),
                    )
                    .await;
                (name.clone(), r, count)
            }
            _ => {
                let e = event(id, seq);
                let name = e.metadata.name.clone().unwrap();
                (name, api.create(&PostParams::default(), &e).await, 1)
            }
        };
        seq += 1;
        let mut l = ledger.lock().unwrap();
        match result {
            Ok(written) => {
                assert_eq!(written.count, Some(count), "{name}");
                let rv = rv_of(&written);
                l.acked.insert(name.clone(), (rv, count));
                l.per_writer.entry(id).or_default().push(rv);
                l.total += 1;
                last = Some((name, count));
                drop(l);
                progress.notify_one();
            }
            Err(e) => {
                if !killed.load(Ordering::SeqCst) {
                    l.early_errors.push(format!("{name}: {e}"));
                }
                // The server is gone (or going): the outcome of this write is unknown.
                l.uncertain.insert(name);
                drop(l);
                progress.notify_one();
                return;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_kill_9_and_restart() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = Herald::sqlite(dir.path()).await;
    assert!(
        server.banner.contains("(store: sqlite in "),
        "{}",
        server.banner
    );
    let client = server.kube_client();
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let progress = Arc::new(Notify::new());
    let killed = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for id in 0..WRITERS {
        tasks.push(tokio::spawn(writer(
            id,
            Api::namespaced(client.clone(), "default"),
            ledger.clone(),
            progress.clone(),
            killed.clone(),
        )));
    }

    // Wait (bounded) for enough acknowledgements, then kill the server mid-load.
    let waited = tokio::time::timeout(LOAD_GUARD, async {
        loop {
            let done = {
                let l = ledger.lock().unwrap();
                l.total >= ACKED_BEFORE_KILL || !l.early_errors.is_empty()
            };
            if done {
                break;
            }
            // notify_one keeps a permit when nobody waits, so no wake-up is lost here.
            progress.notified().await;
        }
    })
    .await;
    assert!(
        waited.is_ok(),
        "only {} writes acknowledged within {LOAD_GUARD:?}; server logs:\n{}",
        ledger.lock().unwrap().total,
        server.logs.text()
    );
    assert_eq!(
        ledger.lock().unwrap().early_errors,
        Vec::<String>::new(),
        "writes failed while the server was up; logs:\n{}",
        server.logs.text()
    );
    killed.store(true, Ordering::SeqCst);
    server.kill9().await;
    // Every writer ends on its first failed request (the server is gone).
    for t in tasks {
        tokio::time::timeout(LOAD_GUARD, t)
            .await
            .expect("writers stop once the server is gone")
            .expect("writer task");
    }

    let ledger = Arc::try_unwrap(ledger)
        .ok()
        .expect("writers are done")
        .into_inner()
        .unwrap();
    assert!(ledger.total >= ACKED_BEFORE_KILL);
    // Within one writer (sequential requests) revisions grew with every acknowledgement.
    for (id, rvs) in &ledger.per_writer {
        assert!(
            rvs.windows(2).all(|w| w[0] < w[1]),
            "writer {id} saw revisions go backwards: {rvs:?}"
        );
    }

    // Restart on the same directory.
    let server = Herald::sqlite(dir.path()).await;
    let api: Api<Event> = Api::all(server.kube_client());
    let list = api.list(&ListParams::default()).await.expect("list");
    let list_rv: u64 = list
        .metadata
        .resource_version
        .as_deref()
        .expect("list resourceVersion")
        .parse()
        .unwrap();
    let stored: BTreeMap<String, (u64, i32)> = list
        .items
        .iter()
        .map(|e| {
            (
                e.metadata.name.clone().unwrap(),
                (rv_of(e), e.count.unwrap_or(0)),
            )
        })
        .collect();
    assert_eq!(stored.len(), list.items.len(), "names are unique");

    let mut missing = Vec::new();
    for (name, &(rv, count)) in &ledger.acked {
        match stored.get(name) {
            None => missing.push(name.clone()),
            Some(&(srv, scount)) if ledger.uncertain.contains(name) => {
                // A write in flight at the kill may have landed after the acknowledged one.
                assert!(
                    srv >= rv && scount >= count,
                    "{name}: stored ({srv}, x{scount}) is older than acknowledged ({rv}, x{count})"
                );
            }
            Some(&(srv, scount)) => {
                assert_eq!(
                    (srv, scount),
                    (rv, count),
                    "{name}: stored (resourceVersion, count) differs from the acknowledged write"
                );
            }
        }
    }
    assert!(
        missing.is_empty(),
        "{} acknowledged events lost after kill -9: {missing:?}",
        missing.len()
    );
    // Nothing appeared that nobody wrote.
    for name in stored.keys() {
        assert!(
            ledger.acked.contains_key(name) || ledger.uncertain.contains(name),
            "unexpected event {name} after restart"
        );
    }
    // Ordering by resourceVersion is the acknowledged order.
    let mut by_rv_acked: Vec<(&u64, &String)> = ledger
        .acked
        .iter()
        .filter(|(n, _)| !ledger.uncertain.contains(*n))
        .map(|(n, (rv, _))| (rv, n))
        .collect();
    by_rv_acked.sort();
    let mut by_rv_stored: Vec<(&u64, &String)> = stored
        .iter()
        .filter(|(n, _)| ledger.acked.contains_key(*n) && !ledger.uncertain.contains(*n))
        .map(|(n, (rv, _))| (rv, n))
        .collect();
    by_rv_stored.sort();
    assert_eq!(by_rv_acked, by_rv_stored);
    let max_acked = ledger.acked.values().map(|(rv, _)| *rv).max().unwrap();
    assert!(
        list_rv >= max_acked,
        "list resourceVersion {list_rv} < {max_acked}"
    );

    // Revisions never go backwards across the restart.
    let ns: Api<Event> = Api::namespaced(server.kube_client(), "default");
    let after = ns
        .create(&PostParams::default(), &event(99, 0))
        .await
        .expect("create after restart");
    assert!(
        rv_of(&after) > list_rv,
        "new write got resourceVersion {} <= {list_rv}",
        rv_of(&after)
    );

    // kubectl sees the same data on the restarted server, page by page.
    let k = Kubectl::new(&server).await;
    let o = k
        .run(&["get", "events", "-o", "name", "--chunk-size=100"])
        .await;
    let names: Vec<&str> = o.ok().lines().collect();
    assert_eq!(names.len(), stored.len() + 1, "{}", o.show());
    for name in ledger.acked.keys() {
        assert!(
            names.contains(&format!("event/{name}").as_str()),
            "kubectl does not list {name}"
        );
    }
    let o = k
        .run(&[
            "get",
            "events",
            "-o",
            "wide",
            "--field-selector",
            "involvedObject.name=pod-99",
        ])
        .await;
    let t = o.table();
    assert_eq!(t.column("NAME"), ["pod-99.00000"], "{}", o.show());
    assert_eq!(t.cell("NAME", "pod-99.00000", "SOURCE"), "e2e-durability");
}
