//! The events.k8s.io/v1 recorder end to end: recorder → broadcaster → series → sink, with
//! client-go's tools/events scenarios (reference/client-go-record.md §6.9) and the series
//! lifecycle (second occurrence, heartbeat, finish, eviction, shutdown), on paused tokio time.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use herald_core::clock::FakeClock;
use herald_runtime::events::*;
use herald_runtime::record::{EventsApi, SinkCall, SinkOp};
use herald_runtime::time::TokioClock;
use k8s_openapi::api::core::v1::{Node, ObjectReference, Pod};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::networking::v1::IPAddress;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

fn t0() -> jiff::Timestamp {
    "2024-01-01T00:00:00Z".parse().unwrap()
}

/// Default options on a clock that follows paused tokio time.
fn options() -> EventBroadcasterOptions {
    EventBroadcasterOptions {
        pipeline: PipelineOptions {
            clock: Arc::new(TokioClock::new(t0())),
            ..PipelineOptions::default()
        },
        ..EventBroadcasterOptions::default()
    }
}

fn pod(name: &str, ns: &str, uid: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(ns.into()),
            uid: Some(uid.into()),
            ..ObjectMeta::default()
        },
        ..Pod::default()
    }
}

/// Yields (and lets paused time auto-advance in 10 ms steps) until `cond` holds; bounded.
async fn until(what: &str, mut cond: impl FnMut() -> bool) {
    for _ in 0..100_000 {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting for {what}");
}

/// Lets the pipeline process what is queued (paused time moves by at most `d`).
async fn settle(d: Duration) {
    tokio::time::sleep(d).await;
}

fn v1_calls(sink: &MemorySink) -> Vec<SinkCall> {
    sink.calls()
        .into_iter()
        .filter(|c| c.api == EventsApi::EventsV1)
        .collect()
}

fn ops(calls: &[SinkCall]) -> Vec<(SinkOp, Option<i32>)> {
    calls.iter().map(|c| (c.op, c.count)).collect()
}

fn series_count(e: &Event) -> Option<i32> {
    e.series.as_ref().map(|s| s.count)
}

/// client-go TestEventf (events recorder): a fixed recorder clock (2023-01-01T12:00:00Z),
/// reportingController c1 and reportingInstance i1; four cases seen through a watcher.
#[tokio::test(start_paused = true)]
async fn eventf_builds_client_go_events() {
    let t: jiff::Timestamp = "2023-01-01T12:00:00Z".parse().unwrap();
    let clock = Arc::new(FakeClock::new(t));
    let broadcaster = EventBroadcaster::new(EventBroadcasterOptions {
        pipeline: PipelineOptions {
            clock: clock.clone(),
            ..PipelineOptions::default()
        },
        ..EventBroadcasterOptions::default()
    });
    let seen = Arc::new(Mutex::new(Vec::<Event>::new()));
    let seen2 = seen.clone();
    broadcaster.start_event_watcher(move |e| seen2.lock().unwrap().push(e.clone()));
    let recorder = broadcaster.new_recorder("c1", "i1");

    let pod1 = pod("pod1", "ns1", "12345");
    let node1 = Node {
        metadata: ObjectMeta {
            name: Some("node1".into()),
            uid: Some("67890".into()),
            ..ObjectMeta::default()
        },
        ..Node::default()
    };
    let ip = IPAddress {
        metadata: ObjectMeta {
            name: Some("2001:db8::123".into()),
            ..ObjectMeta::default()
        },
        ..IPAddress::default()
    };
    let long = pod(&"x".repeat(253 * 4), "ns1", "12345");

    recorder.eventf(
        &pod1,
        None::<&Node>,
        EventType::Normal,
        "Started",
        "starting",
        format_args!("Pod started"),
    );
    recorder.eventf(
        &pod1,
        Some(&node1),
        EventType::Warning,
        "FailedScheduling",
        "scheduling",
        format_args!(
            "Pod failed to schedule on {}: {}",
            "node1", "not enough resources"
        ),
    );
    recorder.eventf(
        &ip,
        None::<&Node>,
        EventType::Warning,
        "IPAddressNotAllocated",
        "IPAddressAllocation",
        format_args!("Service default/test appears to have leaked"),
    );
    recorder.eventf(
        &long,
        None::<&Node>,
        EventType::Normal,
        "Started",
        "starting",
        format_args!("Pod started"),
    );
    broadcaster.shutdown().await;

    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 4);
    for e in seen.iter() {
        assert!(e.event_time.is_some());
        assert_eq!(e.series, None);
        assert_eq!(e.reporting_controller.as_deref(), Some("c1"));
        assert_eq!(e.reporting_instance.as_deref(), Some("i1"));
        let name = e.metadata.name.as_deref().unwrap();
        assert!(herald_core::naming::is_dns1123_subdomain(name), "{name}");
    }
    // normal event
    let e = &seen[0];
    assert_eq!(e.metadata.name.as_deref(), Some("pod1.17362d8e1c698000"));
    assert_eq!(e.metadata.namespace.as_deref(), Some("ns1"));
    let r = e.regarding.as_ref().unwrap();
    assert_eq!(
        (
            r.kind.as_deref(),
            r.name.as_deref(),
            r.namespace.as_deref(),
            r.uid.as_deref(),
            r.api_version.as_deref()
        ),
        (
            Some("Pod"),
            Some("pod1"),
            Some("ns1"),
            Some("12345"),
            Some("v1")
        )
    );
    assert_eq!(e.related, None);
    assert_eq!(e.note.as_deref(), Some("Pod started"));
    // related + args
    let e = &seen[1];
    assert_eq!(
        e.note.as_deref(),
        Some("Pod failed to schedule on node1: not enough resources")
    );
    let rel = e.related.as_ref().unwrap();
    assert_eq!(rel.kind.as_deref(), Some("Node"));
    assert_eq!(rel.name.as_deref(), Some("node1"));
    assert_eq!(rel.uid.as_deref(), Some("67890"));
    assert_eq!(rel.api_version.as_deref(), Some("v1"));
    assert_eq!(rel.namespace, None);
    // invalid name: cluster-scoped, so namespace default; a UUID name
    let e = &seen[2];
    assert_eq!(e.metadata.namespace.as_deref(), Some("default"));
    assert_eq!(e.metadata.name.as_deref().unwrap().len(), 36);
    assert_eq!(
        e.regarding.as_ref().unwrap().api_version.as_deref(),
        Some("networking.k8s.io/v1")
    );
    // large name
    let e = &seen[3];
    assert_eq!(e.metadata.namespace.as_deref(), Some("ns1"));
    assert_eq!(e.metadata.name.as_deref().unwrap().len(), 36);
}

fn ref_with_field_path(path: &str) -> ObjectReference {
    ObjectReference {
        kind: Some("Pod".into()),
        name: Some("foo".into()),
        namespace: Some("baz".into()),
        uid: Some("bar".into()),
        api_version: Some("v1".into()),
        field_path: Some(path.into()),
        ..ObjectReference::default()
    }
}

/// client-go TestEventSeriesf: a create, then a patch that starts the series (count 2, same
/// name), then a different action creates a new event without a series.
#[tokio::test(start_paused = true)]
async fn event_seriesf() {
    let broadcaster = EventBroadcaster::new(options());
    let sink = MemorySink::new();
    broadcaster.start_recording_to_sink(sink.clone());
    let recorder = broadcaster.new_recorder("eventTest", "eventTest-host");
    let regarding = ref_with_field_path(".spec.containers[1]");
    let related = ref_with_field_path(".spec.containers[0]");
    let record = |action: &str| {
        recorder.event_for_ref(
            &regarding,
            Some(&related),
            EventType::Normal,
            "test",
            action,
            "some verbose message: 1",
        )
    };

    record("started");
    until("the create", || v1_calls(&sink).len() == 1).await;
    record("started");
    until("the series patch", || v1_calls(&sink).len() == 2).await;
    record("stopped");
    until("the second create", || v1_calls(&sink).len() == 3).await;

    let calls = v1_calls(&sink);
    assert_eq!(
        ops(&calls),
        [
            (SinkOp::Create, None),
            (SinkOp::Patch, Some(2)),
            (SinkOp::Create, None)
        ]
    );
    assert!(calls[1].name.starts_with("foo."));
    assert_eq!(calls[0].name, calls[1].name);
    assert_ne!(calls[0].name, calls[2].name);
    broadcaster.shutdown().await;
    // Nothing was short: no final writes at shutdown.
    assert_eq!(v1_calls(&sink).len(), 3);
    assert_eq!(broadcaster.stats().unaccounted(0), 0);
}

/// client-go TestEventSeriesWithEventSinkImplRace: two identical events about an empty
/// reference store exactly one event, in `default`, with a series.
#[tokio::test(start_paused = true)]
async fn two_identical_events_store_one_series() {
    let broadcaster = EventBroadcaster::new(options());
    let sink = MemorySink::new();
    broadcaster.start_recording_to_sink(sink.clone());
    let recorder = broadcaster.new_recorder("c", "i");
    for _ in 0..2 {
        recorder.event_for_ref(
            &ObjectReference::default(),
            None,
            EventType::Normal,
            "reason",
            "action",
            "",
        );
    }
    broadcaster.shutdown().await;
    let stored = sink.events_v1();
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].metadata.namespace.as_deref(), Some("default"));
    assert_eq!(series_count(&stored[0]), Some(2));
    assert_eq!(broadcaster.stats().unaccounted(0), 0);
}

/// client-go TestFinishSeries: a series idle past the finish time gets exactly one write (a
/// patch carrying its last observation), and only it is forgotten; a single event observed
/// since stays.
#[tokio::test(start_paused = true)]
async fn finish_series_writes_the_final_count_once() {
    let broadcaster = EventBroadcaster::new(options());
    let sink = MemorySink::new();
    broadcaster.start_recording_to_sink(sink.clone());
    let a = broadcaster.new_recorder("c1", "i1");
    let b = broadcaster.new_recorder("c2", "i2");
    let p = pod("p", "ns", "u");
    let rec = |r: &EventRecorder| {
        r.eventf(
            &p,
            None::<&Node>,
            EventType::Warning,
            "BackOff",
            "Restarting",
            format_args!("back-off"),
        )
    };
    for _ in 0..10 {
        rec(&a);
        settle(Duration::from_millis(10)).await;
    }
    until("create + series patch", || v1_calls(&sink).len() == 2).await;
    let a_last_observed = {
        // The series patch carried the second occurrence; the last one was at +90 ms.
        sink.events_v1()[0]
            .series
            .as_ref()
            .unwrap()
            .last_observed_time
            .0
    };
    tokio::time::advance(Duration::from_secs(180)).await;
    rec(&b); // a single event, 3 minutes later
    until("b's create", || v1_calls(&sink).len() == 3).await;

    // 6 minutes after a's last occurrence: its final patch, exactly one call.
    tokio::time::advance(Duration::from_secs(181)).await;
    until("a's final patch", || v1_calls(&sink).len() == 4).await;
    settle(Duration::from_secs(1)).await;
    let calls = v1_calls(&sink);
    assert_eq!(calls.len(), 4);
    assert_eq!(calls[3].op, SinkOp::Patch);
    assert_eq!(calls[3].count, Some(10));
    assert_eq!(calls[3].name, calls[0].name);
    let stored_a = sink.get_v1("ns", &calls[0].name).unwrap();
    let series = stored_a.series.unwrap();
    assert_eq!(series.count, 10);
    assert!(series.last_observed_time.0 > a_last_observed);
    assert_eq!(
        series.last_observed_time.0,
        herald_core::clock::add_saturating(t0(), Duration::from_millis(90))
    );
    assert_eq!(broadcaster.series_stats()[0].finished, 1);

    // a was forgotten (a new occurrence creates a new event); b was not (it starts a series).
    rec(&a);
    rec(&b);
    until("two more writes", || v1_calls(&sink).len() == 6).await;
    let calls = v1_calls(&sink);
    let by_name = |n: &str| calls.iter().filter(|c| c.name == n).count();
    assert_eq!(calls[4].op, SinkOp::Create);
    assert_ne!(calls[4].name, calls[0].name);
    assert_eq!(calls[5].op, SinkOp::Patch);
    assert_eq!(calls[5].name, calls[2].name);
    assert_eq!(calls[5].count, Some(2));
    assert_eq!(by_name(&calls[2].name), 2);
    broadcaster.shutdown().await;
    assert_eq!(broadcaster.stats().unaccounted(0), 0);
}

/// A series that keeps going for 31 minutes: client-go TestRefreshExistingEventSeries (i) —
/// the heartbeat at 30 minutes patches it once with its current count, and the series goes
/// on (its next occurrences are still counted in the same event).
#[tokio::test(start_paused = true)]
async fn heartbeat_repatches_open_series_every_30_minutes() {
    let broadcaster = EventBroadcaster::new(options());
    let sink = MemorySink::new();
    broadcaster.start_recording_to_sink(sink.clone());
    let r = broadcaster.new_recorder("c", "i");
    let p = pod("p", "ns", "u");
    // One occurrence a minute, from 0:00:30 to 0:31:30.
    tokio::time::advance(Duration::from_secs(30)).await;
    for minute in 0..=31 {
        r.eventf(
            &p,
            None::<&Node>,
            EventType::Normal,
            "Sync",
            "Syncing",
            format_args!("minute {minute}"),
        );
        settle(Duration::from_secs(60)).await;
    }
    let calls = v1_calls(&sink);
    // create, series start, one heartbeat (at 30:00, 30 occurrences by then).
    assert_eq!(
        ops(&calls),
        [
            (SinkOp::Create, None),
            (SinkOp::Patch, Some(2)),
            (SinkOp::Patch, Some(30))
        ]
    );
    assert!(calls.iter().all(|c| c.name == calls[0].name));
    assert_eq!(broadcaster.series_stats()[0].heartbeat_writes, 1);
    broadcaster.shutdown().await;
    let stored = sink.events_v1();
    assert_eq!(stored.len(), 1);
    assert_eq!(series_count(&stored[0]), Some(32));
    let stats = broadcaster.stats();
    assert_eq!(stats.unaccounted(0), 0);
    // 1 created, 1 patched, 30 counted in the series (28 carried by the heartbeat, 2 by the
    // final write at shutdown).
    let s = &stats.sinks[0];
    assert_eq!((s.created, s.patched, s.series), (1, 1, 30));
}

/// client-go TestRefreshExistingEventSeries (ii): a heartbeat patch that fails with a request
/// construction error is one call, no create or update, and the series stays cached (later
/// occurrences are still counted in it; the shutdown writes their final count).
#[tokio::test(start_paused = true)]
async fn failed_heartbeat_leaves_the_series_cached() {
    let broadcaster = EventBroadcaster::new(EventBroadcasterOptions {
        series: SeriesOptions {
            heartbeat: Duration::from_secs(60),
            ..SeriesOptions::default()
        },
        ..options()
    });
    let fail_next_patch = Arc::new(AtomicU32::new(0));
    let f = fail_next_patch.clone();
    let sink = MemorySink::new();
    broadcaster.start_recording_to_sink(sink.with_faults(move |c: &SinkCall| {
        (c.op == SinkOp::Patch && f.swap(0, Ordering::SeqCst) == 1)
            .then(|| SinkError::RequestConstruction("bad patch".into()))
    }));
    let r = broadcaster.new_recorder("c", "i");
    let p = pod("p", "ns", "u");
    let rec = || {
        r.eventf(
            &p,
            None::<&Node>,
            EventType::Normal,
            "Sync",
            "Syncing",
            format_args!("n"),
        )
    };
    for _ in 0..10 {
        rec();
        settle(Duration::from_millis(10)).await;
    }
    let before = v1_calls(&sink).len();
    assert_eq!(before, 2); // the create and the series patch; 8 occurrences held
    fail_next_patch.store(1, Ordering::SeqCst);
    settle(Duration::from_secs(60)).await; // the heartbeat
    let calls = v1_calls(&sink);
    assert_eq!(calls.len(), before + 1);
    let hb = calls.last().unwrap();
    assert_eq!((hb.op, hb.ok), (SinkOp::Patch, false));
    rec();
    broadcaster.shutdown().await;
    let calls = v1_calls(&sink);
    assert_eq!(
        calls.iter().filter(|c| c.op == SinkOp::Create).count(),
        1,
        "no new event: the series stayed cached"
    );
    assert!(calls.iter().all(|c| c.op != SinkOp::Update));
    assert_eq!(series_count(&sink.events_v1()[0]), Some(11));
    let s = &broadcaster.stats().sinks[0];
    assert_eq!(broadcaster.stats().unaccounted(0), 0);
    // The failed heartbeat settles the 8 occurrences it carried as failed; the 11th rode the
    // final write at shutdown.
    assert_eq!((s.created, s.patched, s.failed, s.series), (1, 1, 8, 1));
}

/// The second occurrence's patch is exactly `{"series":{"count":2,"lastObservedTime":…}}`
/// with the time in RFC 3339 with 6 fractional digits.
#[tokio::test(start_paused = true)]
async fn second_occurrence_patch_body_is_series_only() {
    let broadcaster = EventBroadcaster::new(options());
    let sink = MemorySink::new();
    broadcaster.start_recording_to_sink(sink.clone());
    let r = broadcaster.new_recorder("c", "i");
    let p = pod("p", "ns", "u");
    r.eventf(
        &p,
        None::<&Node>,
        EventType::Normal,
        "A",
        "B",
        format_args!("first"),
    );
    settle(Duration::from_millis(1500)).await;
    r.eventf(
        &p,
        None::<&Node>,
        EventType::Normal,
        "A",
        "B",
        format_args!("second"),
    );
    until("the patch", || v1_calls(&sink).len() == 2).await;
    let patch = v1_calls(&sink)[1].patch.clone().unwrap();
    assert_eq!(
        String::from_utf8(patch).unwrap(),
        r#"{"series":{"count":2,"lastObservedTime":"2024-01-01T00:00:01.500000Z"}}"#
    );
    let stored = &sink.events_v1()[0];
    assert_eq!(stored.note.as_deref(), Some("first"));
    broadcaster.shutdown().await;
}

/// A patch answered 404 (here: the event's create had failed, so it never reached the
/// server) creates the event, with its series.
#[tokio::test(start_paused = true)]
async fn patch_404_creates_the_event() {
    let broadcaster = EventBroadcaster::new(options());
    let calls_seen = Arc::new(AtomicU32::new(0));
    let n = calls_seen.clone();
    let sink = MemorySink::new();
    // The first call (the create of `a`) fails for good.
    broadcaster.start_recording_to_sink(sink.with_faults(move |_: &SinkCall| {
        (n.fetch_add(1, Ordering::SeqCst) == 0).then(|| SinkError::status(400, "BadRequest", "no"))
    }));
    let r = broadcaster.new_recorder("c", "i");
    let rec = |name: &str| {
        r.eventf(
            &pod(name, "ns", "u"),
            None::<&Node>,
            EventType::Normal,
            "R",
            "A",
            format_args!("n"),
        )
    };
    rec("a");
    until("a's failed create", || sink.calls().len() == 1).await;
    rec("a"); // a patch → 404 (never created) → a create with the series
    until("a created", || sink.calls().len() == 3).await;
    broadcaster.shutdown().await;

    let calls = v1_calls(&sink);
    let a: Vec<_> = calls
        .iter()
        .filter(|c| c.name.starts_with("a."))
        .map(|c| (c.op, c.ok))
        .collect();
    assert_eq!(
        a,
        [
            (SinkOp::Create, false),
            (SinkOp::Patch, false),
            (SinkOp::Create, true)
        ]
    );
    let stored_a = sink
        .events_v1()
        .into_iter()
        .find(|e| e.metadata.name.as_deref().unwrap().starts_with("a."))
        .unwrap();
    assert_eq!(series_count(&stored_a), Some(2));
    let s = &broadcaster.stats().sinks[0];
    assert_eq!(s.patch_not_found_calls, 1);
    assert_eq!((s.failed, s.patched), (1, 0));
    assert_eq!(s.created, 1); // the second occurrence, written by the create after the 404
    assert_eq!(broadcaster.stats().unaccounted(0), 0);
}

/// A series patch answered 404 once, whose create then finds the event (AlreadyExists), is
/// retried as a patch and lands.
#[tokio::test(start_paused = true)]
async fn already_exists_after_404_retries_a_series_write() {
    let broadcaster = EventBroadcaster::new(options());
    let first_patch = Arc::new(AtomicU32::new(1));
    let f = first_patch.clone();
    let sink = MemorySink::new();
    broadcaster.start_recording_to_sink(sink.with_faults(move |c: &SinkCall| {
        (c.op == SinkOp::Patch && f.swap(0, Ordering::SeqCst) == 1)
            .then(|| SinkError::status(404, "NotFound", "not yet"))
    }));
    let r = broadcaster.new_recorder("c", "i");
    let p = pod("p", "ns", "u");
    for _ in 0..2 {
        r.eventf(
            &p,
            None::<&Node>,
            EventType::Normal,
            "R",
            "A",
            format_args!("n"),
        );
        settle(Duration::from_millis(10)).await;
    }
    broadcaster.shutdown().await;
    let calls: Vec<_> = v1_calls(&sink).iter().map(|c| (c.op, c.ok)).collect();
    assert_eq!(
        calls,
        [
            (SinkOp::Create, true),
            (SinkOp::Patch, false),
            (SinkOp::Create, false),
            (SinkOp::Patch, true)
        ]
    );
    assert_eq!(series_count(&sink.events_v1()[0]), Some(2));
    let s = &broadcaster.stats().sinks[0];
    assert_eq!((s.created, s.patched, s.failed), (1, 1, 0));
}

/// At the cache bound the least recently observed entry is finished at once: its final count
/// is written (budget or not) and it is counted as evicted; every occurrence is accounted.
#[tokio::test(start_paused = true)]
async fn eviction_at_the_cache_bound_writes_the_final_count() {
    let mut opts = options();
    opts.series.finish.max_keys = 2;
    let broadcaster = EventBroadcaster::new(opts);
    let sink = MemorySink::new();
    broadcaster.start_recording_to_sink(sink.clone());
    let r = broadcaster.new_recorder("c", "i");
    let rec = |name: &str| {
        r.eventf(
            &pod(name, "ns", "u"),
            None::<&Node>,
            EventType::Normal,
            "R",
            "A",
            format_args!("n"),
        );
    };
    for _ in 0..5 {
        rec("a");
        settle(Duration::from_millis(10)).await;
    }
    rec("b");
    settle(Duration::from_millis(10)).await;
    let before = v1_calls(&sink).len();
    assert_eq!(before, 3); // a: create, patch 2; b: create
    rec("c"); // evicts a (least recently observed), which is short by 3
    until("c's create and a's final patch", || {
        v1_calls(&sink).len() == before + 2
    })
    .await;
    let a_name = v1_calls(&sink)[0].name.clone();
    assert_eq!(series_count(&sink.get_v1("ns", &a_name).unwrap()), Some(5));
    assert_eq!(broadcaster.series_stats()[0].evicted, 1);
    rec("a"); // a was forgotten: a new event
    broadcaster.shutdown().await;
    let creates = v1_calls(&sink)
        .iter()
        .filter(|c| c.op == SinkOp::Create)
        .count();
    assert_eq!(creates, 4);
    let stats = broadcaster.stats();
    assert_eq!(stats.unaccounted(0), 0);
    assert_eq!(stats.sinks[0].trailing_flushes, 1);
}

/// Final writes are paced by the trailing-write budget: 3 series ending together at a rate of
/// one a minute are finished one a minute, oldest first; each count ends exact.
#[tokio::test(start_paused = true)]
async fn final_writes_are_paced_by_the_budget() {
    let mut opts = options();
    opts.series.finish = TrailingFlushOptions {
        quiet: Duration::from_secs(360),
        settle_within: Duration::from_secs(360 + 3 * 60),
        max_keys: 3,
    };
    assert!((opts.series.finish.rate() - 1.0 / 60.0).abs() < 1e-9);
    let broadcaster = EventBroadcaster::new(opts);
    let sink = MemorySink::new();
    broadcaster.start_recording_to_sink(sink.clone());
    let r = broadcaster.new_recorder("c", "i");
    for name in ["a", "b", "c"] {
        for _ in 0..4 {
            r.eventf(
                &pod(name, "ns", "u"),
                None::<&Node>,
                EventType::Normal,
                "R",
                "A",
                format_args!("n"),
            );
            settle(Duration::from_millis(10)).await;
        }
    }
    settle(Duration::from_secs(1)).await;
    assert_eq!(v1_calls(&sink).len(), 6);
    let t_start = tokio::time::Instant::now();
    let finals = Arc::new(Mutex::new(Vec::new()));
    for _ in 0..3 {
        let n = v1_calls(&sink).len();
        until("the next final write", || v1_calls(&sink).len() > n).await;
        finals
            .lock()
            .unwrap()
            .push(t_start.elapsed().as_secs_f64().round() as u64);
    }
    let finals = finals.lock().unwrap().clone();
    // a is due 6 min after its last occurrence (about 359 s from here), then b and c one
    // token a minute (the first token was spent on a, so the budget is empty for 60 s).
    assert_eq!(finals, [359, 419, 479]);
    for e in sink.events_v1() {
        assert_eq!(series_count(&e), Some(4));
    }
    broadcaster.shutdown().await;
    assert_eq!(broadcaster.stats().unaccounted(0), 0);
}

/// At shutdown every short series gets its final count (no budget), and the accounting
/// closes: emitted = merged + outcomes.
#[tokio::test(start_paused = true)]
async fn shutdown_writes_every_final_count() {
    let broadcaster = EventBroadcaster::new(options());
    let sink = MemorySink::new();
    broadcaster.start_recording_to_sink(sink.clone());
    let r = broadcaster.new_recorder("c", "i");
    let mut expected = BTreeMap::new();
    for i in 0..20u32 {
        let name = format!("pod-{i}");
        for _ in 0..=i {
            r.eventf(
                &pod(&name, "ns", "u"),
                None::<&Node>,
                EventType::Warning,
                "BackOff",
                "Restarting",
                format_args!("restarting"),
            );
        }
        expected.insert(name, i as i32 + 1);
    }
    broadcaster.shutdown().await;
    let stored = sink.events_v1();
    assert_eq!(stored.len(), 20);
    for e in &stored {
        let name = e.regarding.as_ref().unwrap().name.clone().unwrap();
        let want = expected[&name];
        assert_eq!(series_count(e), (want >= 2).then_some(want), "{name}");
    }
    let stats = broadcaster.stats();
    assert_eq!(stats.emitted, 210);
    assert_eq!(stats.unaccounted(0), 0);
    assert_eq!(broadcaster.running_tasks(), 0);
}

/// Optional: ignoring the references' resourceVersion lets events about a live object (whose
/// resourceVersion changes) form a series; by default (client-go) they do not.
#[tokio::test(start_paused = true)]
async fn resource_version_in_the_key_unless_ignored() {
    for ignore in [false, true] {
        let mut opts = options();
        opts.series.ignore_resource_version = ignore;
        let broadcaster = EventBroadcaster::new(opts);
        let sink = MemorySink::new();
        broadcaster.start_recording_to_sink(sink.clone());
        let r = broadcaster.new_recorder("c", "i");
        for rv in 1..=3 {
            let mut p = pod("p", "ns", "u");
            p.metadata.resource_version = Some(rv.to_string());
            r.eventf(
                &p,
                None::<&Node>,
                EventType::Normal,
                "R",
                "A",
                format_args!("n"),
            );
        }
        broadcaster.shutdown().await;
        let stored = sink.events_v1();
        if ignore {
            assert_eq!(stored.len(), 1);
            assert_eq!(series_count(&stored[0]), Some(3));
        } else {
            assert_eq!(stored.len(), 3);
        }
    }
}

/// client-go TestGetFieldSelector (§6.8).
#[test]
fn get_field_selector() {
    let (gv, kind, name, uid) = (
        "apps/v1",
        "Deployment",
        "test-deployment",
        "2c55cad7-ee4e-11e9-abe1-525400e7bc6b",
    );
    let text = |m: BTreeMap<String, String>| {
        m.into_iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    for events_gv in ["events.k8s.io/v1", "events.k8s.io/v1beta1", "v1"] {
        assert_eq!(
            field_selector(events_gv, "", "", "", "").unwrap(),
            BTreeMap::new(),
            "{events_gv}: empty parameters select everything"
        );
    }
    for events_gv in ["events.k8s.io/v1beta1", "events.k8s.io/v1"] {
        assert_eq!(
            text(field_selector(events_gv, gv, kind, name, uid).unwrap()),
            format!(
                "regarding.apiVersion={gv},regarding.kind={kind},regarding.name={name},regarding.uid={uid}"
            )
        );
    }
    assert_eq!(
        text(field_selector("v1", gv, kind, name, uid).unwrap()),
        format!(
            "involvedObject.apiVersion={gv},involvedObject.kind={kind},involvedObject.name={name},involvedObject.uid={uid}"
        )
    );
    assert_eq!(
        field_selector("v1alpha1", gv, kind, name, uid),
        Err(UnknownVersion("v1alpha1".into()))
    );
}

/// Prometheus counters under their own prefix, the same numbers as the snapshot.
#[tokio::test(start_paused = true)]
async fn metrics_have_their_own_prefix() {
    let broadcaster = EventBroadcaster::new(options());
    let sink = MemorySink::new();
    broadcaster.start_recording_to_sink(sink.clone());
    let r = broadcaster.new_recorder("c", "i");
    for _ in 0..3 {
        r.eventf(
            &pod("p", "ns", "u"),
            None::<&Node>,
            EventType::Normal,
            "R",
            "A",
            format_args!("n"),
        );
        settle(Duration::from_millis(10)).await;
    }
    r.event_with_type_str(
        &ObjectReference::default(),
        None,
        None,
        "Bogus",
        "R",
        "A",
        "n",
    );
    broadcaster.shutdown().await;
    let mut reg = prometheus_client::registry::Registry::default();
    broadcaster.register_metrics(&mut reg);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &reg).unwrap();
    for line in [
        "herald_events_emitted_total 4",
        r#"herald_events_recorder_outcomes_total{sink="",outcome="dropped_invalid"} 1"#,
        r#"herald_events_sink_outcomes_total{sink="sink",outcome="created"} 1"#,
        r#"herald_events_sink_outcomes_total{sink="sink",outcome="patched"} 1"#,
        r#"herald_events_sink_outcomes_total{sink="sink",outcome="series"} 1"#,
        r#"herald_events_series_started_total{sink="sink"} 1"#,
    ] {
        assert!(text.contains(line), "{line} missing from\n{text}");
    }
    assert!(!text.contains("herald_record_"), "{text}");
    assert_eq!(broadcaster.stats().unaccounted(0), 0);
}

/// Storm: 1,000,000 isomorphic occurrences from 4 threads, each with its own note. After
/// shutdown the one stored event's `series.count` is exactly 1,000,000, a handful of writes
/// made it so, and every occurrence is accounted (merged in the queue, or one outcome at the
/// sink) — none dropped: occurrences of one series merge in the queue whatever their note.
///
/// Runs on real time (paused time would jump to the 6-minute finish whenever the runtime
/// waits for the producer threads); it asserts no durations, and the series timers (minutes)
/// cannot fire in the seconds it takes.
#[tokio::test]
async fn storm_of_a_million_isomorphic_events_counts_exactly() {
    const THREADS: usize = 4;
    const PER_THREAD: usize = 250_000;
    let broadcaster = EventBroadcaster::new(EventBroadcasterOptions::default());
    let sink = MemorySink::new();
    broadcaster.start_recording_to_sink(sink.clone());
    let recorder = broadcaster.new_recorder("storm-controller", "storm-controller-0");
    let p = pod("web-1", "prod", "u-1");
    let producers: Vec<_> = (0..THREADS)
        .map(|_| {
            let recorder = recorder.clone();
            let p = p.clone();
            tokio::task::spawn_blocking(move || {
                for i in 0..PER_THREAD {
                    recorder.eventf(
                        &p,
                        None::<&Node>,
                        EventType::Warning,
                        "BackOff",
                        "Restarting",
                        format_args!("Back-off restarting failed container (attempt {i})"),
                    );
                }
            })
        })
        .collect();
    for p in producers {
        p.await.unwrap();
    }
    broadcaster.shutdown().await;

    let stored = sink.events_v1();
    assert_eq!(stored.len(), 1);
    assert_eq!(
        series_count(&stored[0]),
        Some((THREADS * PER_THREAD) as i32)
    );
    let stats = broadcaster.stats();
    assert_eq!(stats.emitted, (THREADS * PER_THREAD) as u64);
    assert_eq!(stats.unaccounted(0), 0);
    assert_eq!(stats.dropped_queue_full, 0);
    assert!(stats.merged > 0);
    let s = &stats.sinks[0];
    // create, series start, and the final count at shutdown (a heartbeat or a finish cannot
    // come within seconds).
    assert!(s.api_calls() <= 3, "{s:?}");
    assert_eq!(s.failed + s.dropped_shutdown, 0);
}

mod property {
    use super::*;
    use herald_core::flow::ExponentialBackoff;
    use proptest::prelude::*;

    /// One step of a random stream: an occurrence about one of 4 pods with one of 2 reasons
    /// and one of 3 notes, after a pause of 0 s to 20 min (so series start, get heartbeats,
    /// finish and restart).
    fn step() -> impl Strategy<Value = (u8, u8, u8, u64)> {
        (
            0u8..4,
            0u8..2,
            0u8..3,
            prop_oneof![Just(0u64), 0u64..120, 0u64..1200],
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 32, .. ProptestConfig::default() })]

        /// For random streams with queue merges, a small series cache (evictions), random
        /// transient sink failures (retried): every occurrence is accounted, and the stored
        /// events' counts (series.count, or 1 without a series) add up to the occurrences
        /// emitted — the counts are exact after shutdown.
        #[test]
        fn stored_series_counts_add_up_to_the_occurrences(
            stream in proptest::collection::vec(step(), 1..200),
            fail_every in 0u32..5,
            max_keys in 1usize..8,
        ) {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .start_paused(true)
                .build()
                .unwrap();
            rt.block_on(async move {
                let mut opts = options();
                opts.pipeline.queue_capacity = 16;
                opts.series.finish.max_keys = max_keys;
                opts.pipeline.retry.backoff =
                    ExponentialBackoff::new(Duration::from_millis(5), Duration::from_millis(100));
                let b = EventBroadcaster::new(opts);
                let n = Arc::new(AtomicU32::new(0));
                let n2 = n.clone();
                let sink = MemorySink::new();
                b.start_recording_to_sink(sink.with_faults(move |_: &SinkCall| {
                    let k = n2.fetch_add(1, Ordering::Relaxed);
                    (fail_every > 0 && k.is_multiple_of(fail_every + 1))
                        .then(|| SinkError::status(503, "ServiceUnavailable", "try later"))
                }));
                let r = b.new_recorder("c", "i");
                let pods: Vec<Pod> = (0..4).map(|i| pod(&format!("p{i}"), "ns", "u")).collect();
                for &(p, reason, note, pause) in &stream {
                    if pause > 0 {
                        tokio::time::sleep(Duration::from_secs(pause)).await;
                    }
                    r.eventf(
                        &pods[p as usize],
                        None::<&Node>,
                        EventType::Warning,
                        ["BackOff", "FailedMount"][reason as usize],
                        "Act",
                        format_args!("note {note}"),
                    );
                }
                b.shutdown().await;
                let stats = b.stats();
                assert_eq!(stats.unaccounted(0), 0, "{stats:?}");
                let s = &stats.sinks[0];
                assert_eq!(s.failed + s.dropped_shutdown, 0, "{s:?}");
                let stored: i64 = sink
                    .events_v1()
                    .iter()
                    .map(|e| i64::from(series_count(e).unwrap_or(1)))
                    .sum();
                assert_eq!(stored, stream.len() as i64, "{stats:?}");
            });
        }
    }
}

/// The optional spam filter per (reporting controller, regarding): new events beyond the
/// burst are skipped (counted), while an open series keeps counting every occurrence.
#[tokio::test(start_paused = true)]
async fn spam_filter_option_limits_new_events_not_series() {
    let mut opts = options();
    opts.series.spam_filter = Some(SpamFilterOptions {
        burst: 2,
        ..SpamFilterOptions::default()
    });
    let broadcaster = EventBroadcaster::new(opts);
    let sink = MemorySink::new();
    broadcaster.start_recording_to_sink(sink.clone());
    let r = broadcaster.new_recorder("c", "i");
    let p = pod("p", "ns", "u");
    let rec = |reason: &str| {
        r.eventf(
            &p,
            None::<&Node>,
            EventType::Warning,
            reason,
            "Act",
            format_args!("n"),
        )
    };
    for reason in ["A", "B", "C", "D"] {
        rec(reason);
        settle(Duration::from_millis(10)).await;
    }
    for _ in 0..9 {
        rec("A"); // A's series: never filtered
        settle(Duration::from_millis(10)).await;
    }
    // Another object has its own bucket.
    r.eventf(
        &pod("q", "ns", "u"),
        None::<&Node>,
        EventType::Warning,
        "C",
        "Act",
        format_args!("n"),
    );
    broadcaster.shutdown().await;
    let stored = sink.events_v1();
    let reasons: Vec<_> = stored
        .iter()
        .map(|e| {
            (
                e.regarding.as_ref().unwrap().name.clone().unwrap(),
                e.reason.clone().unwrap(),
                series_count(e),
            )
        })
        .collect();
    assert_eq!(reasons.len(), 3, "{reasons:?}");
    assert!(
        reasons.contains(&("p".into(), "A".into(), Some(10))),
        "{reasons:?}"
    );
    assert!(
        reasons.contains(&("p".into(), "B".into(), None)),
        "{reasons:?}"
    );
    assert!(
        reasons.contains(&("q".into(), "C".into(), None)),
        "{reasons:?}"
    );
    let stats = broadcaster.stats();
    assert_eq!(stats.sinks[0].skipped, 2); // C and D about p
    assert_eq!(stats.unaccounted(0), 0);
}

/// client-go's FakeRecorder (§6.7): one line per event, `<type> <reason> <note>` by default,
/// with the action, the objects' kinds and the annotations when verbose; nothing reaches a
/// pipeline.
#[test]
fn fake_recorder_writes_client_go_lines() {
    let fake = FakeRecorder::new(4);
    let r = fake.recorder();
    let p = pod("p", "ns", "u");
    let node = Node {
        metadata: ObjectMeta {
            name: Some("n1".into()),
            ..ObjectMeta::default()
        },
        ..Node::default()
    };
    r.eventf(
        &p,
        Some(&node),
        EventType::Warning,
        "FailedScheduling",
        "Scheduling",
        format_args!("0/{} nodes are available", 3),
    );
    r.annotated_eventf(
        &p,
        None::<&Node>,
        BTreeMap::from([("k".to_string(), "v".to_string())]),
        EventType::Normal,
        "Started",
        "Starting",
        format_args!("100% done"),
    );
    let lines: Vec<String> = fake.events.try_iter().collect();
    assert_eq!(
        lines,
        [
            "Warning FailedScheduling 0/3 nodes are available",
            "Normal Started 100% done"
        ]
    );

    let fake = FakeRecorder::verbose(4);
    let r = fake.recorder();
    r.eventf(
        &p,
        Some(&node),
        EventType::Warning,
        "FailedScheduling",
        "Scheduling",
        format_args!("0/3 nodes are available"),
    );
    r.annotated_eventf(
        &p,
        None::<&Node>,
        BTreeMap::from([
            ("b".to_string(), "2".to_string()),
            ("a".to_string(), "1".to_string()),
        ]),
        EventType::Normal,
        "Started",
        "Starting",
        format_args!("done"),
    );
    r.event_for_ref(
        &ObjectReference::default(),
        None,
        EventType::Normal,
        "R",
        "A",
        "no kind",
    );
    let lines: Vec<String> = fake.events.try_iter().collect();
    assert_eq!(
        lines,
        [
            "Warning FailedScheduling Scheduling 0/3 nodes are available {kind=Pod,apiVersion=v1} {kind=Node,apiVersion=v1}",
            "Normal Started Starting done {kind=Pod,apiVersion=v1} map[a:1 b:2]",
            "Normal R A no kind",
        ]
    );
}

/// At its bound the fake recorder's channel makes the recording call wait for the reader
/// (client-go's blocking send): nothing is dropped, order is kept. Once the reader is gone,
/// lines are discarded and recording returns.
#[test]
fn fake_recorder_waits_at_its_bound_and_discards_without_reader() {
    let fake = FakeRecorder::new(1);
    let r = fake.recorder();
    let producer = std::thread::spawn(move || {
        for i in 0..100 {
            r.event_for_ref(
                &ObjectReference::default(),
                None,
                EventType::Normal,
                "Tick",
                "Ticking",
                &i.to_string(),
            );
        }
        r
    });
    let lines: Vec<String> = fake.events.iter().take(100).collect();
    let expected: Vec<String> = (0..100).map(|i| format!("Normal Tick {i}")).collect();
    assert_eq!(lines, expected);
    let r = producer.join().unwrap();
    drop(fake);
    // No reader: discarded, the call returns.
    r.event_for_ref(
        &ObjectReference::default(),
        None,
        EventType::Normal,
        "Tick",
        "Ticking",
        "after",
    );
}
