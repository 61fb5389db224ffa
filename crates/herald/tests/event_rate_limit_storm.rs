//! A storm under EventRateLimit: herald-server (in process, on 127.0.0.1) with a small
//! namespace limit, and Herald's recorder writing through `KubeSink` over a real
//! `kube::Client`. The server answers 429 with `Retry-After`, the recorder waits and retries,
//! and in the end the stored counts are exact and nothing is unaccounted.
//!
//! Server and recorder share one paused tokio clock (`TokioClock`): the server's token
//! buckets refill exactly as fast as the recorder's retry waits pass, and no test sleeps
//! for real. Time moves only while no request is in flight (the storm driver of
//! `storm_support` waits for the pipeline to be idle before each step).

#[path = "../../herald-runtime/tests/storm_support/mod.rs"]
mod storm_support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use herald_runtime::record::sink::SinkFuture;
use herald_runtime::record::{EventSink, KubeSink, SinkError};
use herald_runtime::time::TokioClock;
use herald_server::api::admission::{AdmissionOptions, AdmissionPlugin};
use herald_server::server::{Server, ServerOptions};
use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, ListParams};

/// Counts the 429 answers the sink sees, with and without a retry-after.
#[derive(Clone)]
struct Observed {
    inner: KubeSink,
    with_retry_after: Arc<AtomicU64>,
    without_retry_after: Arc<AtomicU64>,
}

impl Observed {
    fn watch<'a>(&'a self, f: SinkFuture<'a>) -> SinkFuture<'a> {
        Box::pin(async move {
            let r = f.await;
            if let Err(SinkError::Status {
                code: 429,
                retry_after,
                ..
            }) = &r
            {
                match retry_after {
                    Some(d) if *d >= Duration::from_secs(1) => &self.with_retry_after,
                    _ => &self.without_retry_after,
                }
                .fetch_add(1, Ordering::Relaxed);
            }
            r
        })
    }
}

impl EventSink for Observed {
    fn create<'a>(&'a self, event: &'a Event) -> SinkFuture<'a> {
        self.watch(self.inner.create(event))
    }
    fn update<'a>(&'a self, event: &'a Event) -> SinkFuture<'a> {
        self.watch(self.inner.update(event))
    }
    fn patch<'a>(&'a self, event: &'a Event, patch: &'a [u8]) -> SinkFuture<'a> {
        self.watch(self.inner.patch(event, patch))
    }
}

/// The value of the first `/metrics` sample line starting with `prefix`.
fn sample(metrics: &str, prefix: &str) -> u64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(prefix))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

#[tokio::test(start_paused = true)]
async fn a_storm_under_event_rate_limit_is_retried_until_every_count_is_stored() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        dir.path().join("limits.yaml"),
        "apiVersion: eventratelimit.admission.k8s.io/v1alpha1\nkind: Configuration\nlimits:\n- type: Namespace\n  qps: 1\n  burst: 5\n",
    )
    .expect("write the limits");
    let admission = dir.path().join("admission.yaml");
    std::fs::write(
        &admission,
        "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- name: EventRateLimit\n  path: limits.yaml\n",
    )
    .expect("write the admission configuration");
    let server = Server::start(ServerOptions {
        listen: "127.0.0.1:0".parse().expect("address"),
        clock: Arc::new(TokioClock::new("2024-01-01T00:00:00Z".parse().expect("t0"))),
        admission: AdmissionOptions {
            enable_plugins: vec![AdmissionPlugin::EventRateLimit],
            config_file: Some(admission),
        },
        ..ServerOptions::default()
    })
    .await
    .expect("start herald-server");
    let mut config = kube::Config::new(server.url().parse().expect("server url"));
    // No timeouts and no retry layer of kube's own: the recorder does the retrying, so its
    // statistics show it.
    config.default_retry = false;
    config.read_timeout = None;
    config.write_timeout = None;
    config.connect_timeout = None;
    let client = kube::Client::try_from(config).expect("kube client");

    let observed = Observed {
        inner: KubeSink::new(client.clone()).with_field_manager("storm"),
        with_retry_after: Arc::default(),
        without_retry_after: Arc::default(),
    };
    let log = storm_support::CallLog::new(observed.clone(), None);
    let api: Api<Event> = Api::namespaced(client.clone(), storm_support::NAMESPACE);
    let fetch = || {
        let api = api.clone();
        async move { api.list(&ListParams::default()).await.expect("list").items }
    };
    let scenario = storm_support::Scenario::several_reasons(6, 10)
        .and(storm_support::Scenario::hot_loop(3, 5, 10));
    let occurrences = scenario.occurrences.len();
    let run = storm_support::run(scenario, log, fetch).await;

    // The server refused writes, saying when to come back, and the recorder came back.
    let with = observed.with_retry_after.load(Ordering::Relaxed);
    let without = observed.without_retry_after.load(Ordering::Relaxed);
    assert!(with > 0, "no 429 reached the recorder: {:?}", run.stats);
    assert_eq!(without, 0, "every 429 carries a Retry-After");
    let sink = &run.stats.sinks[0];
    assert!(sink.retries >= with, "{:?}", run.stats);
    let metrics = client
        .request_text(
            http::Request::get("/metrics")
                .body(Vec::new())
                .expect("request"),
        )
        .await
        .expect("/metrics");
    let rejected = sample(
        &metrics,
        r#"herald_apiserver_admission_rejections_total{plugin="EventRateLimit",limit_type="Namespace"} "#,
    );
    let answered_429 = sample(
        &metrics,
        r#"herald_apiserver_requests_total{verb="create",code="429"} "#,
    ) + sample(
        &metrics,
        r#"herald_apiserver_requests_total{verb="patch",code="429"} "#,
    );
    assert_eq!(rejected, with, "{metrics}");
    assert_eq!(answered_429, with, "{metrics}");

    // Nothing lost: every occurrence is accounted for, and the stored counts add up.
    let s = &run.stats;
    assert_eq!(s.emitted, occurrences as u64);
    assert_eq!(s.unaccounted(0), 0, "{s:?}");
    assert_eq!(sink.failed, 0, "{s:?}");
    assert_eq!(sink.dropped_shutdown, 0, "{s:?}");
    assert_eq!(s.dropped_queue_full, 0, "{s:?}");
    let mut expected: BTreeMap<(String, String), i64> = BTreeMap::new();
    for o in &run.scenario.occurrences {
        *expected
            .entry((o.object.clone(), o.reason.to_string()))
            .or_default() += 1;
    }
    let mut stored: BTreeMap<(String, String), i64> = BTreeMap::new();
    for e in &run.stored {
        *stored
            .entry((
                e.involved_object.name.clone().unwrap_or_default(),
                e.reason.clone().unwrap_or_default(),
            ))
            .or_default() += i64::from(e.count.unwrap_or(0));
    }
    assert_eq!(stored, expected, "stored counts");
    assert_eq!(stored.values().sum::<i64>(), occurrences as i64);
    // And every other property a storm must show, budgets included.
    run.check();
    server.shutdown().await.expect("shutdown");
}
