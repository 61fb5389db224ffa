//! The README's replicated setup, for real: two `herald serve --store etcd` replicas on one
//! etcd (Debian's etcd-server), a TCP load balancer in front of them (Debian's HAProxy,
//! round-robin per connection, `/readyz` health checks), the real kubectl and a kube-rs
//! informer through it, all on 127.0.0.1.
//!
//! The balancer cuts connections idle for a second (watches included), so the informer's
//! watch keeps moving between the replicas; it must never miss or duplicate a change.
//! Every wait is bounded ([`GUARD`]).

mod support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::watcher;
use support::etcd::EtcdCluster;
use support::haproxy::Haproxy;
use support::{Herald, Kubectl, core_event, metric};

/// The longest a test waits for one thing.
const GUARD: Duration = Duration::from_secs(60);
/// Between two looks while waiting.
const POLL: Duration = Duration::from_millis(100);
/// The balancer cuts connections idle this long.
const IDLE: Duration = Duration::from_secs(1);
const WATCHES_OPENED: &str = "herald_apiserver_watches_opened_total";

fn addr(server: &Herald) -> String {
    server
        .url
        .strip_prefix("http://")
        .expect("a plain-HTTP server")
        .to_string()
}

/// Waits (bounded) until `done()`.
async fn wait_until(what: &str, mut done: impl AsyncFnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + GUARD;
    while !done().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "not within {GUARD:?}: {what}"
        );
        tokio::time::sleep(POLL).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_and_an_informer_through_haproxy_over_two_replicas() {
    let etcd = EtcdCluster::start(1).await;
    let a = Herald::etcd_at(&etcd.endpoints(), "/registry", &[]).await;
    let b = Herald::etcd_at(&etcd.endpoints(), "/registry", &[]).await;
    let lb = Haproxy::start(&[&addr(&a), &addr(&b)], false, IDLE).await;

    // kubectl: every run opens new connections, so runs alternate between the replicas;
    // each sees every write with the same resourceVersion.
    let k = Kubectl::for_url(&lb.url).await;
    for (name, object) in [
        ("web-1.a", "web-1"),
        ("web-2.a", "web-2"),
        ("db-0.a", "db-0"),
    ] {
        let f = k.write(
            &format!("{name}.yaml"),
            &core_event(name, object, "Warning", "BackOff", "Back-off restarting"),
        );
        let o = k.run(&["create", "-f", &f]).await;
        assert_eq!(
            o.ok().trim(),
            format!("event/{name} created"),
            "{}",
            o.show()
        );
    }
    let mut versions = Vec::new();
    for _ in 0..4 {
        let o = k
            .run(&[
                "get",
                "events",
                "-o",
                "jsonpath={range .items[*]}{.metadata.name}={.metadata.resourceVersion} {end}",
            ])
            .await;
        versions.push(o.ok().trim().to_string());
    }
    assert!(
        versions.iter().all(|v| v == &versions[0]) && versions[0].split(' ').count() == 3,
        "every replica lists the same three events at the same versions: {versions:?}"
    );
    let o = k.run(&["get", "events"]).await;
    assert_eq!(o.table().column("REASON"), ["BackOff"; 3], "{}", o.show());

    // An informer through the balancer, while changes are written in batches.
    let mut config = kube::Config::new(lb.url.parse().expect("lb url"));
    config.read_timeout = None;
    config.connect_timeout = Some(Duration::from_secs(10));
    let client = kube::Client::try_from(config).expect("kube client");
    let api: Api<Event> = Api::namespaced(client, "default");
    // name → the resourceVersions the informer was told about after its first list.
    let seen: Arc<Mutex<BTreeMap<String, Vec<String>>>> = Arc::default();
    let initial: Arc<Mutex<Vec<String>>> = Arc::default();
    // Lists after the first: the informer lost its place (a 410 or a failed watch).
    let relists = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let informer = {
        let (seen, initial, relists) = (seen.clone(), initial.clone(), relists.clone());
        tokio::spawn(async move {
            let mut stream = watcher(api, watcher::Config::default()).boxed();
            let mut listed = false;
            while let Some(item) = stream.next().await {
                match item {
                    Ok(watcher::Event::Init) if listed => {
                        relists.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    Ok(watcher::Event::InitApply(e)) if !listed => {
                        initial
                            .lock()
                            .unwrap()
                            .push(e.metadata.name.unwrap_or_default());
                    }
                    Ok(watcher::Event::InitDone) => listed = true,
                    Ok(watcher::Event::Apply(e)) => {
                        let name = e.metadata.name.unwrap_or_default();
                        let rv = e.metadata.resource_version.unwrap_or_default();
                        seen.lock().unwrap().entry(name).or_default().push(rv);
                    }
                    Ok(_) => {}
                    // A watch cut by the balancer: the watcher goes on from its last version.
                    Err(_) => {}
                }
            }
        })
    };
    wait_until("the informer's first list", async || {
        initial.lock().unwrap().len() == 3
    })
    .await;

    let writer: Api<Event> = Api::namespaced(a.kube_client(), "default");
    let mut want: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let opened = async || {
        metric(&a.url, WATCHES_OPENED).await.unwrap_or(0.0)
            + metric(&b.url, WATCHES_OPENED).await.unwrap_or(0.0)
    };
    for batch in 0..6 {
        // Each batch's watch is a new one: wait for the balancer to cut the previous.
        let before = opened().await;
        for i in 0..10 {
            let name = format!("b{batch}-{i}");
            let f = core_event(&name, "web-1", "Normal", "Pulled", "pulled");
            let e: Event = serde_saphyr::from_str(&f).expect("event manifest");
            let created = writer
                .create(&Default::default(), &e)
                .await
                .expect("create");
            let mut versions = vec![created.metadata.resource_version.unwrap_or_default()];
            if i % 3 == 0 {
                let patched = writer
                    .patch(
                        &name,
                        &PatchParams::default(),
                        &Patch::Merge(serde_json::json!({"count": 2})),
                    )
                    .await
                    .expect("patch");
                versions.push(patched.metadata.resource_version.unwrap_or_default());
            }
            want.insert(name, versions);
        }
        wait_until("the informer saw the batch", async || {
            let seen = seen.lock().unwrap();
            want.iter()
                .all(|(name, versions)| seen.get(name).map(Vec::len) >= Some(versions.len()))
        })
        .await;
        wait_until(
            "the balancer cut the watch and the informer watched again",
            async || opened().await > before,
        )
        .await;
    }
    informer.abort();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen, want, "every change exactly once, in order");
    assert_eq!(
        relists.load(std::sync::atomic::Ordering::Relaxed),
        0,
        "moving between replicas never makes the informer list again"
    );
    for (side, server) in [("A", &a), ("B", &b)] {
        let n = metric(&server.url, WATCHES_OPENED).await.unwrap_or(0.0);
        assert!(
            n >= 2.0,
            "the informer's watches went to both replicas: {side} had {n}"
        );
    }
}
