//! The events.k8s.io/v1 recorder against a live `herald serve`: occurrences from several
//! threads go through `herald_runtime::events` and `KubeEventsSink` (kube-rs over HTTP on
//! 127.0.0.1), and the real kubectl reads the series back
//! (`kubectl get events.v1.events.k8s.io -o yaml`).

mod support;

use herald_runtime::events::{
    EventBroadcaster, EventBroadcasterAdapter, EventBroadcasterOptions, EventType, EventsApiChoice,
    KubeEventsSink, Recorder,
};
use herald_runtime::record::BroadcasterOptions;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ListParams};
use support::{Herald, HeraldCli, Kubectl};

const THREADS: usize = 4;
const PER_THREAD: usize = 2_500;

fn pod(name: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("series".into()),
            uid: Some(format!("uid-{name}")),
            ..ObjectMeta::default()
        },
        ..Pod::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_events_sink_stores_series_kubectl_reads_them() {
    let server = Herald::suite().await;
    let client = server.kube_client();

    let broadcaster = EventBroadcaster::new(EventBroadcasterOptions::default());
    broadcaster.start_recording_to_sink(KubeEventsSink::new(client.clone()));
    let recorder = broadcaster.new_recorder("series-controller", "series-controller-0");

    let threads: Vec<_> = (0..THREADS)
        .map(|_| {
            let recorder = recorder.clone();
            std::thread::spawn(move || {
                let web = pod("web-1");
                for i in 0..PER_THREAD {
                    recorder.eventf(
                        &web,
                        None::<&Node>,
                        EventType::Warning,
                        "FailedMount",
                        "Mounting",
                        format_args!("attempt {i}: volume \"data\" not ready"),
                    );
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("producer thread");
    }
    // One single event next to the series.
    recorder.eventf(
        &pod("db-0"),
        None::<&Node>,
        EventType::Normal,
        "Started",
        "Starting",
        format_args!("Started container db"),
    );
    broadcaster.shutdown().await;

    let stats = broadcaster.stats();
    assert_eq!(stats.emitted, (THREADS * PER_THREAD + 1) as u64);
    assert_eq!(stats.unaccounted(0), 0, "{stats:?}");
    // Occurrences of one series merge in the queue whatever their note: none dropped.
    assert_eq!(stats.dropped_queue_full, 0, "{stats:?}");
    let s = &stats.sinks[0];
    assert_eq!(s.failed + s.dropped_shutdown, 0, "{s:?}");
    // Creates of the two events, the series start, the final count: a handful of calls for
    // 10,001 occurrences.
    assert!(s.api_calls() <= 6, "{s:?}");

    let api: Api<Event> = Api::namespaced(client, "series");
    let stored = api.list(&ListParams::default()).await.expect("list events");
    assert_eq!(stored.items.len(), 2);
    let web = stored
        .items
        .iter()
        .find(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("web-1"))
        .expect("the web-1 series");
    let series = web.series.as_ref().expect("a series");
    assert_eq!(series.count as usize, THREADS * PER_THREAD);
    assert_eq!(
        web.reporting_controller.as_deref(),
        Some("series-controller")
    );
    assert_eq!(web.action.as_deref(), Some("Mounting"));
    let name = web.metadata.name.clone().unwrap();
    assert!(name.starts_with("web-1."), "{name}");

    let kubectl = Kubectl::new(&server).await;
    let out = kubectl
        .run(&[
            "get",
            "events.v1.events.k8s.io",
            "-n",
            "series",
            &name,
            "-o",
            "yaml",
        ])
        .await;
    let yaml = out.ok();
    assert!(yaml.contains("apiVersion: events.k8s.io/v1"), "{yaml}");
    assert!(yaml.contains("series:"), "{yaml}");
    assert!(
        yaml.contains(&format!("count: {}", THREADS * PER_THREAD)),
        "{yaml}"
    );
    assert!(yaml.contains("lastObservedTime:"), "{yaml}");
    assert!(
        yaml.contains("reportingController: series-controller"),
        "{yaml}"
    );
    // The single event has no series.
    let out = kubectl
        .run(&[
            "get",
            "events.v1.events.k8s.io",
            "-n",
            "series",
            "-o",
            "json",
        ])
        .await;
    let list = out.json();
    let db = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .find(|e| e["regarding"]["name"] == "db-0")
        .expect("db-0's event")
        .clone();
    assert!(db.get("series").is_none(), "{db}");
}

/// `herald emit --api events.k8s.io` records through the events.k8s.io/v1 recorder: a storm of
/// 500 is one Event whose series counts 500, written in a handful of requests; `herald get
/// events` shows that count as it shows core/v1 counts, and kubectl reads the series.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn emit_api_events_k8s_io_and_get_show_the_series_count() {
    let server = Herald::suite().await;
    let cli = HeraldCli::new(&server).await;
    let out = cli
        .run(&[
            "emit",
            "--api",
            "events.k8s.io",
            "--for",
            "pod/web-2",
            "--type",
            "Warning",
            "--reason",
            "FailedMount",
            "--action",
            "Mounting",
            "--message",
            "volume not ready",
            "--repeat",
            "500",
        ])
        .await;
    let text = out.ok();
    assert!(
        text.starts_with("emitted 500 of 500 × Warning FailedMount on pod/web-2 in default\n"),
        "{}",
        out.show()
    );
    assert!(text.contains("pipeline:   created 1, "), "{}", out.show());
    assert!(text.contains(", dropped 0, failed 0\n"), "{}", out.show());
    let summary = cli
        .run(&[
            "emit",
            "--api",
            "events.k8s.io",
            "--for",
            "pod/web-3",
            "--reason",
            "Synced",
            "--repeat",
            "50",
            "-o",
            "json",
        ])
        .await
        .json();
    assert_eq!(summary["emitted"], 50, "{summary}");
    assert_eq!(summary["unaccounted"], 0, "{summary}");
    assert!(summary["api_writes"].as_u64().unwrap() <= 3, "{summary}");

    let table = cli.run(&["get", "events"]).await.table();
    let last_seen = table.cell("OBJECT", "pod/web-2", "LAST SEEN");
    assert!(last_seen.contains(" (x500 over "), "{last_seen:?}");
    let wide = cli.run(&["get", "events", "-o", "wide"]).await.table();
    assert_eq!(wide.cell("OBJECT", "pod/web-2", "COUNT"), "500");
    assert_eq!(wide.cell("OBJECT", "pod/web-3", "COUNT"), "50");

    let k = Kubectl::new(&server).await;
    let list = k
        .run(&["get", "events.v1.events.k8s.io", "-o", "json"])
        .await
        .json();
    let web2 = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .find(|e| e["regarding"]["name"] == "web-2")
        .expect("web-2's event")
        .clone();
    assert_eq!(web2["series"]["count"], 500, "{web2}");
    assert_eq!(web2["action"], "Mounting", "{web2}");
    assert_eq!(web2["reportingController"], "herald-emit", "{web2}");
    assert_eq!(web2["reportingInstance"], "herald-emit", "{web2}");
}

/// Against herald serve: the adapter finds events.k8s.io/v1 in discovery and writes series;
/// forced to core/v1 it writes core/v1 counts; the kube-rs drop-in writes a series. kubectl
/// reads each back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_adapter_both_ways_and_the_kube_rs_drop_in_against_herald_serve() {
    let server = Herald::suite().await;
    let client = server.kube_client();
    let repeat = |n: usize, f: &dyn Fn()| (0..n).for_each(|_| f());

    let adapter = EventBroadcasterAdapter::new(client.clone()).await;
    assert_eq!(adapter.api(), EventsApiChoice::EventsV1);
    let r = adapter.new_recorder("adapter-controller", "adapter-0");
    repeat(40, &|| {
        r.eventf(
            &pod("via-adapter"),
            None::<&Node>,
            EventType::Warning,
            "BackOff",
            "Restarting",
            format_args!("back-off"),
        )
    });
    adapter.shutdown().await;
    assert_eq!(adapter.stats().unaccounted(0), 0);

    let legacy = EventBroadcasterAdapter::for_api(
        EventsApiChoice::CoreV1,
        client.clone(),
        EventBroadcasterOptions::default(),
        BroadcasterOptions::default(),
    );
    let r = legacy.new_recorder("legacy-controller", "legacy-0");
    repeat(7, &|| {
        r.eventf(
            &pod("via-legacy"),
            None::<&Node>,
            EventType::Normal,
            "Pulled",
            "Pulling",
            format_args!("pulled"),
        )
    });
    legacy.shutdown().await;

    let reporter = kube::runtime::events::Reporter {
        controller: "kube-rs-controller".into(),
        instance: Some("kube-rs-0".into()),
    };
    let recorder = Recorder::new(client.clone(), reporter);
    let reference = kube::Resource::object_ref(&pod("via-kube-rs"), &());
    for i in 0..25 {
        recorder
            .publish(
                &kube::runtime::events::Event {
                    type_: kube::runtime::events::EventType::Warning,
                    reason: "FailedSync".into(),
                    note: Some(format!("sync {i} failed")),
                    action: "Reconciling".into(),
                    secondary: None,
                },
                &reference,
            )
            .await
            .expect("publish");
    }
    recorder.shutdown().await;
    assert_eq!(recorder.stats().unaccounted(0), 0);

    let k = Kubectl::new(&server).await;
    let v1 = k
        .run(&[
            "get",
            "events.v1.events.k8s.io",
            "-n",
            "series",
            "-o",
            "json",
        ])
        .await
        .json();
    let by = |name: &str| {
        v1["items"]
            .as_array()
            .expect("items")
            .iter()
            .find(|e| e["regarding"]["name"] == name)
            .unwrap_or_else(|| panic!("no event about {name}: {v1}"))
            .clone()
    };
    assert_eq!(by("via-adapter")["series"]["count"], 40);
    assert_eq!(by("via-adapter")["action"], "Restarting");
    let kube_rs = by("via-kube-rs");
    assert_eq!(kube_rs["series"]["count"], 25);
    assert_eq!(kube_rs["reportingInstance"], "kube-rs-0");
    assert_eq!(kube_rs["note"], "sync 0 failed");
    let core = k
        .run(&["get", "events", "-n", "series", "-o", "json"])
        .await
        .json();
    let legacy_event = core["items"]
        .as_array()
        .expect("items")
        .iter()
        .find(|e| e["involvedObject"]["name"] == "via-legacy")
        .unwrap_or_else(|| panic!("no core/v1 event: {core}"))
        .clone();
    assert_eq!(legacy_event["count"], 7, "{legacy_event}");
    assert_eq!(legacy_event["source"]["component"], "legacy-controller");
}
