//! `herald serve --mirror-kubeconfig`: a source `herald serve` and a mirroring one, real
//! processes on 127.0.0.1. Every event created, counted up and expired (or deleted) at the
//! source is in the mirror with its final count and its uid; a mirror killed with SIGKILL
//! mid-stream resumes from its saved position without rewriting or missing anything; a
//! position the source has forgotten (410) leads to a relist that is still exact.
//!
//! Waits are bounded polling loops (a list every 100 ms, at most [`SYNC_GUARD`]).

mod support;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use support::{Herald, backoff_event, kubeconfig_for_url};

/// The longest a test waits for the mirror to catch up.
const SYNC_GUARD: Duration = Duration::from_secs(60);
/// Between two looks at the stores while waiting.
const POLL: Duration = Duration::from_millis(100);

const SOURCE_ANNOTATION: &str = "herald.dev/mirrored-from";
const VERSION_ANNOTATION: &str = "herald.dev/mirrored-resource-version";

/// name → (uid, count): what the comparison is about.
type Copies = BTreeMap<String, (String, i32)>;

/// A source server, and what was written to it.
struct Source {
    server: Herald,
    api: Api<Event>,
    /// Every event ever written, with its uid and last count (expired or deleted ones too).
    written: Copies,
    kubeconfig: PathBuf,
    _dir: tempfile::TempDir,
}

impl Source {
    async fn start(extra: &[&str]) -> Source {
        let mut args = vec!["--store", "memory"];
        args.extend_from_slice(extra);
        let server = Herald::start(&args).await;
        let dir = tempfile::tempdir().expect("temp dir");
        let kubeconfig = dir.path().join("source.kubeconfig");
        std::fs::write(&kubeconfig, kubeconfig_for_url(&server.url, &[]).await)
            .expect("write the source's kubeconfig");
        let api = Api::namespaced(server.kube_client(), "default");
        Source {
            server,
            api,
            written: Copies::new(),
            kubeconfig,
            _dir: dir,
        }
    }

    async fn create(&mut self, name: &str) {
        let e = self
            .api
            .create(&PostParams::default(), &backoff_event(name))
            .await
            .expect("create at the source");
        self.note(e);
    }

    /// Counts `name` up to `count`, as a recorder's PATCH does.
    async fn count(&mut self, name: &str, count: i32) {
        let e = self
            .api
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({ "count": count })),
            )
            .await
            .expect("patch at the source");
        self.note(e);
    }

    /// Counts `name` up to `count` with an update (PUT), as client-go's older recorders do.
    async fn replace_count(&mut self, name: &str, count: i32) {
        let mut e = self.api.get(name).await.expect("get at the source");
        e.count = Some(count);
        let e = self
            .api
            .replace(name, &PostParams::default(), &e)
            .await
            .expect("update at the source");
        self.note(e);
    }

    async fn delete(&self, name: &str) {
        self.api
            .delete(name, &DeleteParams::default())
            .await
            .expect("delete at the source");
    }

    fn note(&mut self, e: Event) {
        let name = e.metadata.name.clone().expect("name");
        let uid = e.metadata.uid.clone().expect("uid");
        self.written.insert(name, (uid, e.count.unwrap_or(0)));
    }

    async fn live(&self) -> Copies {
        copies(&self.api).await
    }

    /// `herald serve --data DIR --mirror-kubeconfig THIS`.
    async fn mirror(&self, data: &std::path::Path) -> Herald {
        let kubeconfig = self.kubeconfig.to_str().expect("utf-8 path");
        let data = data.to_str().expect("utf-8 path");
        Herald::start(&["--data", data, "--mirror-kubeconfig", kubeconfig]).await
    }
}

async fn copies(api: &Api<Event>) -> Copies {
    api.list(&ListParams::default())
        .await
        .expect("list")
        .items
        .into_iter()
        .map(|e| {
            (
                e.metadata.name.clone().expect("name"),
                (e.metadata.uid.clone().expect("uid"), e.count.unwrap_or(0)),
            )
        })
        .collect()
}

/// name → the mirror's own resourceVersion: what changes when a copy is rewritten.
async fn mirror_versions(api: &Api<Event>) -> BTreeMap<String, String> {
    api.list(&ListParams::default())
        .await
        .expect("list the mirror")
        .items
        .into_iter()
        .map(|e| {
            (
                e.metadata.name.unwrap(),
                e.metadata.resource_version.unwrap(),
            )
        })
        .collect()
}

/// Waits (bounded) until the mirror holds exactly `want`.
async fn until_mirrored(mirror: &Herald, want: &Copies) {
    let api: Api<Event> = Api::namespaced(mirror.kube_client(), "default");
    let mut have = Copies::new();
    for _ in 0..(SYNC_GUARD.as_millis() / POLL.as_millis()) {
        have = copies(&api).await;
        if &have == want {
            return;
        }
        tokio::time::sleep(POLL).await;
    }
    let missing: Vec<_> = want.keys().filter(|k| !have.contains_key(*k)).collect();
    let extra: Vec<_> = have.keys().filter(|k| !want.contains_key(*k)).collect();
    let differ: Vec<_> = want
        .iter()
        .filter(|(k, v)| have.get(*k).is_some_and(|h| h != *v))
        .collect();
    panic!(
        "the mirror did not converge within {SYNC_GUARD:?}: missing {missing:?}, extra {extra:?}, differing {differ:?}; mirror logs:\n{}",
        mirror.logs.text()
    );
}

/// The value of the metric line starting with `name` on the server's /metrics.
async fn metric(server: &Herald, name: &str) -> f64 {
    let text = server
        .kube_client()
        .request_text(http::Request::get("/metrics").body(Vec::new()).unwrap())
        .await
        .expect("GET /metrics");
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|v| v.trim().parse().ok()))
        .unwrap_or_else(|| panic!("no {name} in /metrics:\n{text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn created_counted_and_expired_events_are_all_in_the_mirror() {
    let mut source = Source::start(&["--event-ttl", "6s"]).await;
    let data = tempfile::tempdir().expect("temp dir");
    let mirror = source.mirror(data.path()).await;
    for i in 0..30 {
        source.create(&format!("ev-{i:02}")).await;
    }
    for i in (0..30).step_by(3) {
        let name = format!("ev-{i:02}");
        source.count(&name, 2).await;
        source.count(&name, 7).await;
    }
    for i in (1..30).step_by(5) {
        source.replace_count(&format!("ev-{i:02}"), 4).await;
    }
    // Every event expires at the source (6 s after its last write)…
    let mut left = source.live().await;
    for _ in 0..(SYNC_GUARD.as_millis() / POLL.as_millis()) {
        if left.is_empty() {
            break;
        }
        tokio::time::sleep(POLL).await;
        left = source.live().await;
    }
    assert!(
        left.is_empty(),
        "the source's events did not expire: {left:?}"
    );
    // …and every one is in the mirror, same uid, final count.
    until_mirrored(&mirror, &source.written).await;
    let api: Api<Event> = Api::namespaced(mirror.kube_client(), "default");
    for e in api.list(&ListParams::default()).await.unwrap().items {
        let a = e.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(a.get(SOURCE_ANNOTATION), Some(&source.server.url), "{e:?}");
        assert!(
            a.get(VERSION_ANNOTATION)
                .is_some_and(|v| v.parse::<u64>().is_ok()),
            "{e:?}"
        );
        assert_eq!(e.reason.as_deref(), Some("BackOff"));
    }
    assert_eq!(
        metric(&mirror, "herald_mirror_events_total{outcome=\"created\"}").await,
        30.0
    );
    assert_eq!(
        metric(&mirror, "herald_mirror_events_total{outcome=\"failed\"}").await,
        0.0
    );
    assert!(metric(&mirror, "herald_mirror_events_total{outcome=\"kept\"}").await >= 30.0);
    assert!(metric(&mirror, "herald_mirror_lag_seconds").await >= 0.0);
    // The copies are kept for the mirror's own TTL (1 h): still there after the source's.
    assert_eq!(copies(&api).await, source.written);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mirror_killed_mid_stream_resumes_without_duplicates_or_gaps() {
    let mut source = Source::start(&[]).await;
    let data = tempfile::tempdir().expect("temp dir");
    let mirror = source.mirror(data.path()).await;
    for i in 0..40 {
        source.create(&format!("a-{i:02}")).await;
        if i % 4 == 0 {
            source.count(&format!("a-{i:02}"), 3).await;
        }
    }
    until_mirrored(&mirror, &source.written).await;
    let mirror_api: Api<Event> = Api::namespaced(mirror.kube_client(), "default");
    let before = mirror_versions(&mirror_api).await;
    assert!(
        data.path().join("mirror-position.json").exists(),
        "the position is saved"
    );

    // Mid-stream: writes go on at the source while the mirror is killed and restarted.
    let mut running = Some(mirror);
    for i in 0..60 {
        source.create(&format!("b-{i:02}")).await;
        if i % 3 == 0 {
            source.count(&format!("b-{i:02}"), 5).await;
        }
        if i == 20
            && let Some(m) = running.take()
        {
            m.kill9().await;
        }
    }
    let mirror = source.mirror(data.path()).await;
    for i in 60..80 {
        source.create(&format!("b-{i:02}")).await;
    }
    until_mirrored(&mirror, &source.written).await;
    // Resumed by a watch from the saved position: no relist, and nothing copied before the
    // kill was written again.
    assert_eq!(metric(&mirror, "herald_mirror_relists_total").await, 0.0);
    let mirror_api: Api<Event> = Api::namespaced(mirror.kube_client(), "default");
    let after = mirror_versions(&mirror_api).await;
    for (name, rv) in &before {
        assert_eq!(after.get(name), Some(rv), "{name} was rewritten");
    }
    assert!(
        mirror
            .logs
            .text()
            .contains("resuming from the saved position"),
        "{}",
        mirror.logs.text()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_position_the_source_has_forgotten_relists_and_stays_exact() {
    // A watch window of a few events: a mirror that was away for more gets 410.
    let mut source = Source::start(&["--watch-cache-bytes", "16Ki"]).await;
    let data = tempfile::tempdir().expect("temp dir");
    let mirror = source.mirror(data.path()).await;
    for i in 0..20 {
        source.create(&format!("a-{i:02}")).await;
    }
    until_mirrored(&mirror, &source.written).await;
    let mirror_api: Api<Event> = Api::namespaced(mirror.kube_client(), "default");
    let before = mirror_versions(&mirror_api).await;
    mirror.kill9().await;

    // While the mirror is away: many new events (far past the window), counts on some old
    // ones, and deletions at the source (the mirror keeps those).
    for i in 0..200 {
        source.create(&format!("b-{i:03}")).await;
    }
    for i in 0..5 {
        source.count(&format!("a-{i:02}"), 9).await;
    }
    for i in 5..10 {
        source.delete(&format!("a-{i:02}")).await;
    }
    let mirror = source.mirror(data.path()).await;
    until_mirrored(&mirror, &source.written).await;
    assert!(metric(&mirror, "herald_mirror_relists_total").await >= 1.0);
    // The relist rewrote only what changed at the source.
    let mirror_api: Api<Event> = Api::namespaced(mirror.kube_client(), "default");
    let after = mirror_versions(&mirror_api).await;
    for i in 5..20 {
        let name = format!("a-{i:02}");
        assert_eq!(after.get(&name), before.get(&name), "{name} was rewritten");
    }
    for i in 0..5 {
        let name = format!("a-{i:02}");
        assert_ne!(
            after.get(&name),
            before.get(&name),
            "{name} was not updated"
        );
    }
}
