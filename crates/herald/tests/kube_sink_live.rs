//! The recording pipeline against a live herald-server: a storm of events from several
//! threads goes through the recorder (correlation, spam filter, trailing flush) and
//! `KubeSink` (kube-rs over HTTP on 127.0.0.1) into SQLite, and the server ends up holding
//! exactly what was emitted: one event per distinct occurrence, whose `count`s add up to the
//! number of times it was recorded, written by the sink's field manager.

use std::collections::BTreeMap;

#[path = "../../herald-runtime/tests/storm_support/mod.rs"]
mod storm_support;
mod support;

use herald_runtime::record::{
    BroadcasterOptions, EventBroadcaster, EventSource, EventType, KubeSink,
};
use herald_server::server::{Server, ServerOptions, StoreKind};
use k8s_openapi::api::core::v1::{Event, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ListParams};

const PODS: usize = 8;
const THREADS: usize = 4;
const PER_THREAD: usize = 2_500;
const REASONS: [(&str, &str); 3] = [
    ("BackOff", "Back-off restarting failed container"),
    ("Unhealthy", "Readiness probe failed: connection refused"),
    (
        "FailedMount",
        "MountVolume.SetUp failed for volume \"data\"",
    ),
];

fn pod(i: usize) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(format!("web-{i}")),
            namespace: Some("storm".into()),
            uid: Some(format!("uid-web-{i}")),
            ..ObjectMeta::default()
        },
        ..Pod::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storm_through_kube_sink_is_stored_with_exact_counts() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = Server::start(ServerOptions {
        store: StoreKind::Sqlite {
            dir: dir.path().to_path_buf(),
        },
        listen: "127.0.0.1:0".parse().expect("address"),
        ..ServerOptions::default()
    })
    .await
    .expect("start herald-server");
    let client =
        kube::Client::try_from(kube::Config::new(server.url().parse().expect("server url")))
            .expect("kube client");

    let broadcaster = EventBroadcaster::new(BroadcasterOptions::default());
    broadcaster.start_recording_to_sink(KubeSink::new(client.clone()).with_field_manager("storm"));
    let recorder = broadcaster.new_recorder(EventSource::new("kubelet", "node-1"));

    // Every thread cycles through every (pod, reason), so the occurrences of each key
    // interleave across threads.
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let recorder = recorder.clone();
            std::thread::spawn(move || {
                let pods: Vec<Pod> = (0..PODS).map(pod).collect();
                for i in 0..PER_THREAD {
                    let n = i + t;
                    let (reason, message) = REASONS[n % REASONS.len()];
                    let kind = if reason == "BackOff" {
                        EventType::Warning
                    } else {
                        EventType::Normal
                    };
                    recorder.event(&pods[(n / REASONS.len()) % PODS], kind, reason, message);
                }
            })
        })
        .collect();
    let mut emitted: BTreeMap<(String, String), i64> = BTreeMap::new();
    for t in 0..THREADS {
        for i in 0..PER_THREAD {
            let n = i + t;
            let key = (
                format!("web-{}", (n / REASONS.len()) % PODS),
                REASONS[n % REASONS.len()].0.to_string(),
            );
            *emitted.entry(key).or_default() += 1;
        }
    }
    for t in threads {
        t.join().expect("recording thread");
    }
    // Writes everything, the counts the spam filter held back included.
    broadcaster.shutdown().await;

    let stats = broadcaster.stats();
    let total = (THREADS * PER_THREAD) as u64;
    assert_eq!(stats.emitted, total);
    assert_eq!(stats.unaccounted(0), 0, "{stats:?}");
    let sink = &stats.sinks[0];
    assert_eq!(sink.failed, 0, "{stats:?}");
    assert_eq!(sink.dropped_shutdown, 0, "{stats:?}");

    let api: Api<Event> = Api::namespaced(client, "storm");
    let stored = api.list(&ListParams::default()).await.expect("list");
    let mut counted: BTreeMap<(String, String), i64> = BTreeMap::new();
    for e in &stored.items {
        let key = (
            e.involved_object.name.clone().unwrap_or_default(),
            e.reason.clone().unwrap_or_default(),
        );
        *counted.entry(key).or_default() += i64::from(e.count.unwrap_or(1));
        let managers: Vec<&str> = e
            .metadata
            .managed_fields
            .iter()
            .flatten()
            .filter_map(|m| m.manager.as_deref())
            .collect();
        assert_eq!(managers, ["storm"], "{:?}", e.metadata);
    }
    assert_eq!(
        stored.items.len(),
        PODS * REASONS.len(),
        "one event per distinct occurrence"
    );
    assert_eq!(counted, emitted, "stored counts equal emitted counts");
    assert_eq!(counted.values().sum::<i64>(), total as i64);
    server.shutdown().await.expect("shutdown");
}

/// `KubeSink` against a live `herald serve` through a storm (aggregated messages over many
/// pods, several reasons per pod, a hot loop), on paused time with default options: the
/// properties every storm must show (see `storm_support`) hold on the real server. Time moves
/// only while no request is in flight, so the server's answers take no virtual time.
#[tokio::test]
async fn a_storm_through_kube_sink_into_herald_serve_keeps_the_storm_properties() {
    // Started on real time (its start is bounded by a real-time guard).
    let server = support::Herald::suite().await;
    let mut config = kube::Config::new(server.url.parse().expect("server url"));
    // No timeouts and no retry layer of kube's own: under paused time they would fire while
    // a request is in flight; the recorder does the retrying.
    config.default_retry = false;
    config.read_timeout = None;
    config.write_timeout = None;
    config.connect_timeout = None;
    let client = kube::Client::try_from(config).expect("kube client");
    tokio::time::pause();

    let log = storm_support::CallLog::new(KubeSink::new(client.clone()), None);
    let api: Api<Event> = Api::namespaced(client, storm_support::NAMESPACE);
    let fetch = || {
        let api = api.clone();
        async move { api.list(&ListParams::default()).await.expect("list").items }
    };
    let scenario = storm_support::Scenario::aggregation(20, 15)
        .and(storm_support::Scenario::several_reasons(3, 15))
        .and(storm_support::Scenario::hot_loop(2, 5, 15));
    let run = storm_support::run(scenario, log, fetch).await;
    run.check();
    assert!(run.stats.sinks[0].trailing_flushes > 0, "{:?}", run.stats);
}
