//! `herald serve --max-events N`: the store holds at most N events; the next create is a 429
//! `TooManyRequests` that says why and what makes room, and what is stored is untouched.

mod support;

use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, PostParams};
use support::{Herald, HeraldCli};

fn event(name: &str) -> Event {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "involvedObject": {"kind": "Pod", "name": "web-1", "namespace": "default"},
        "reason": "BackOff",
        "message": "Back-off restarting failed container",
    }))
    .expect("event")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creates_past_max_events_are_429s_that_say_why() {
    let server = Herald::start(&[
        "--store",
        "memory",
        "--max-events",
        "2",
        "--event-ttl",
        "30m",
    ])
    .await;
    let mut config = kube::Config::new(server.url.parse().expect("server url"));
    // The answer itself is under test, not kube-rs's retries of it.
    config.default_retry = false;
    let api: Api<Event> =
        Api::namespaced(kube::Client::try_from(config).expect("client"), "default");
    for name in ["web-1.a", "web-1.b"] {
        api.create(&PostParams::default(), &event(name))
            .await
            .expect("room for two");
    }
    match api.create(&PostParams::default(), &event("web-1.c")).await {
        Err(kube::Error::Api(s)) => {
            assert_eq!(
                (s.code, s.reason.as_str()),
                (429, "TooManyRequests"),
                "{s:?}"
            );
            assert_eq!(
                s.message,
                "events \"web-1.c\" cannot be created: the event store is at its limit of 2 events (max-events); room is made as events expire (1800s after their last write)"
            );
        }
        other => panic!("the third create must be refused: {other:?}"),
    }
    let names: Vec<String> = api
        .list(&Default::default())
        .await
        .expect("list")
        .items
        .into_iter()
        .filter_map(|e| e.metadata.name)
        .collect();
    assert_eq!(names, ["web-1.a", "web-1.b"]);
}

/// `herald emit` into a full store: every 429 reaches the recorder (no retries hidden in the
/// client), is counted in the summary, and the last line says why nothing was written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn emit_into_a_full_store_counts_every_429_and_says_why() {
    let server = Herald::start(&["--store", "memory", "--max-events", "1"]).await;
    let cli = HeraldCli::new(&server).await;
    cli.run(&["emit", "--for", "pod/web-1", "--reason", "Started"])
        .await
        .ok();
    let out = cli
        .run(&[
            "emit",
            "--for",
            "pod/web-2",
            "--reason",
            "Started",
            "-o",
            "json",
        ])
        .await;
    let stderr = out.failed();
    let [line] = stderr.lines().collect::<Vec<_>>()[..] else {
        panic!("one line expected:\n{}", out.show());
    };
    assert!(
        line.starts_with("herald: 1 of 1 occurrences were not written: server rejected the request (429 TooManyRequests): events ")
            && line.contains("the event store is at its limit of 1 event (max-events)"),
        "{}",
        out.show()
    );
    let summary: serde_json::Value = serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("the summary is JSON ({e}):\n{}", out.show()));
    let n = |k: &str| {
        summary[k]
            .as_u64()
            .unwrap_or_else(|| panic!("{k}: {summary}"))
    };
    // Every create the server refused is one the recorder made and counted.
    assert_eq!(n("created") + n("patched"), 0, "{summary}");
    assert_eq!(n("failed") + n("dropped"), 1, "{summary}");
    assert!(
        n("failed_writes") >= 2,
        "retried by the recorder: {summary}"
    );
    assert_eq!(n("failed_writes"), n("creates"), "{summary}");
    assert!(n("retries") >= n("failed_writes") - 1, "{summary}");
}
