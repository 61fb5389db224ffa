//! `herald serve --max-events N`: the store holds at most N events; the next create is a 429
//! `TooManyRequests` that says why and what makes room, and what is stored is untouched.

mod support;

use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, PostParams};
use support::Herald;

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
