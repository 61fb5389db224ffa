//! `herald serve` stops cleanly on SIGTERM, as on Ctrl-C: open watches end with their last
//! chunk (a client sees the stream finish, not a reset connection), the process exits 0, and
//! the data directory opens again at once with every acknowledged event in it.

mod support;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, PostParams, WatchEvent, WatchParams};
use support::Herald;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_ends_watches_cleanly_and_exits_0() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut server = Herald::sqlite(dir.path()).await;
    let api: Api<Event> = Api::namespaced(server.kube_client(), "default");
    let ev: Event = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web-1.term"},
        "involvedObject": {"kind": "Pod", "name": "web-1", "namespace": "default"},
        "reason": "Started",
        "message": "kept across a clean stop",
    }))
    .expect("event");
    api.create(&PostParams::default(), &ev)
        .await
        .expect("create");

    // A watch from "0" replays the event as ADDED, so the stream is open and flowing.
    let mut watch = api
        .watch(&WatchParams::default().timeout(290), "0")
        .await
        .expect("watch")
        .boxed();
    let first = tokio::time::timeout(support::START_GUARD, watch.next())
        .await
        .expect("the replayed event arrives")
        .expect("the watch is open")
        .expect("a watch event");
    assert!(
        matches!(&first, WatchEvent::Added(e) if e.metadata.name.as_deref() == Some("web-1.term")),
        "{first:?}"
    );

    let status = server.terminate().await;
    assert!(
        status.success(),
        "SIGTERM must stop the server cleanly (exit 0), got {status:?}; logs:\n{}",
        server.logs.text()
    );
    // The body ended with its terminating chunk: the stream finishes without an error.
    let rest: Vec<_> = tokio::time::timeout(support::START_GUARD, watch.collect::<Vec<_>>())
        .await
        .expect("the watch ends with the server");
    assert!(
        rest.iter().all(Result::is_ok),
        "the watch must end cleanly, not with a broken connection: {rest:?}"
    );

    let again = Herald::sqlite(dir.path()).await;
    let api: Api<Event> = Api::namespaced(again.kube_client(), "default");
    let kept = api
        .get("web-1.term")
        .await
        .expect("the event is still there");
    assert_eq!(kept.message.as_deref(), Some("kept across a clean stop"));
}
