//! The recording pipeline end to end: recorder → broadcaster → correlator → sink, with
//! client-go's scenarios (reference/client-go-record.md §3) and Herald's guarantees.
//!
//! Every test runs on paused tokio time with a `TokioClock`, so retries, rate budgets and
//! trailing flushes happen in virtual time.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use herald_core::flow::ExponentialBackoff;
use herald_runtime::record::*;
use k8s_openapi::api::core::v1::{Event, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

mod storm_support;

/// Default options on a clock that follows paused tokio time.
use storm_support::options;

fn test_pod(uid: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some("foo".into()),
            namespace: Some("baz".into()),
            uid: Some(uid.into()),
            ..ObjectMeta::default()
        },
        ..Pod::default()
    }
}

fn test_ref(uid: &str, field_path: &str) -> ObjectReference {
    ObjectReference {
        kind: Some("Pod".into()),
        api_version: Some("v1".into()),
        name: Some("foo".into()),
        namespace: Some("baz".into()),
        uid: Some(uid.into()),
        field_path: Some(field_path.into()),
        ..ObjectReference::default()
    }
}

/// Yields (and lets paused time auto-advance in 50 ms steps) until `cond` holds; bounded.
async fn until(what: &str, mut cond: impl FnMut() -> bool) {
    for _ in 0..100_000 {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for {what}");
}

#[derive(Clone, Copy)]
enum Obj {
    Ref1,
    Pod,
    Ref2,
}

/// The 7 steps of client-go's TestEventf: (object, reason, expected op, expected count).
const STEPS: [(Obj, &str, SinkOp, i32); 7] = [
    (Obj::Ref1, "Started", SinkOp::Create, 1),
    (Obj::Pod, "Killed", SinkOp::Create, 1),
    (Obj::Ref1, "Started", SinkOp::Patch, 2),
    (Obj::Ref2, "Started", SinkOp::Create, 1),
    (Obj::Ref1, "Started", SinkOp::Patch, 3),
    (Obj::Ref2, "Stopped", SinkOp::Create, 1),
    (Obj::Ref2, "Stopped", SinkOp::Patch, 2),
];

async fn run_eventf_steps(recorder: &Recorder, sink: &MemorySink) {
    let pod = test_pod("bar");
    for (i, (obj, reason, op, count)) in STEPS.into_iter().enumerate() {
        tokio::time::advance(Duration::from_secs(1)).await;
        let before = sink.calls().len();
        let message = format!(
            "some {}verbose message: {}",
            if i == 1 { "other " } else { "" },
            1
        );
        match obj {
            Obj::Ref1 => recorder.event_for_ref(
                &test_ref("bar", "spec.containers[2]"),
                EventType::Normal,
                reason,
                &message,
            ),
            Obj::Pod => recorder.eventf(
                &pod,
                EventType::Normal,
                reason,
                format_args!("some other verbose message: {}", 1),
            ),
            Obj::Ref2 => recorder.event_for_ref(
                &test_ref("differentUid", "spec.containers[3]"),
                EventType::Normal,
                reason,
                &message,
            ),
        }
        until("the step's write", || sink.calls().len() > before).await;
        let call = sink.calls().pop().unwrap();
        assert_eq!(call.op, op, "step {i}");
        assert!(call.ok, "step {i}");
        assert_eq!(call.count, Some(count), "step {i}");
        let stored = sink.get("baz", &call.name).unwrap();
        assert!(call.name.starts_with("foo."), "step {i}: {}", call.name);
        assert_eq!(stored.count, Some(count), "step {i}");
        assert_eq!(stored.reason.as_deref(), Some(reason));
        assert_eq!(stored.type_.as_deref(), Some("Normal"));
        assert_eq!(stored.metadata.namespace.as_deref(), Some("baz"));
        assert_eq!(
            stored.source.as_ref().and_then(|s| s.component.as_deref()),
            Some("eventTest")
        );
        let (first, last) = (
            stored.first_timestamp.unwrap(),
            stored.last_timestamp.unwrap(),
        );
        if count > 1 {
            assert_ne!(first, last, "step {i}");
        } else {
            assert_eq!(first, last, "step {i}");
        }
        let (uid, fp) = match obj {
            Obj::Ref1 => ("bar", Some("spec.containers[2]")),
            Obj::Pod => ("bar", None),
            Obj::Ref2 => ("differentUid", Some("spec.containers[3]")),
        };
        assert_eq!(stored.involved_object.uid.as_deref(), Some(uid));
        assert_eq!(stored.involved_object.field_path.as_deref(), fp);
    }
}

/// client-go TestEventf: the create/patch sequence and counts, and every event reaches
/// watchers.
#[tokio::test(start_paused = true)]
async fn eventf_create_patch_sequence() {
    let b = EventBroadcaster::new(options());
    let sink = MemorySink::new();
    b.start_recording_to_sink(sink.clone());
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let seen2 = seen.clone();
    b.start_event_watcher(move |e: &Event| {
        seen2
            .lock()
            .unwrap()
            .push(e.reason.clone().unwrap_or_default());
    });
    b.start_logging();
    let recorder = b.new_recorder(EventSource::new("eventTest", ""));
    run_eventf_steps(&recorder, &sink).await;
    b.shutdown().await;
    let reasons: Vec<&str> = STEPS.iter().map(|s| s.1).collect();
    assert_eq!(*seen.lock().unwrap(), reasons);
    let stats = b.stats();
    assert_eq!(stats.emitted, 7);
    assert_eq!(stats.unaccounted(0), 0);
    assert_eq!(stats.sinks[0].created, 4);
    assert_eq!(stats.sinks[0].patched, 3);
}

/// client-go TestEventfNoNamespace: an object without a namespace gets its event in
/// `default`, with an empty involvedObject namespace.
#[tokio::test(start_paused = true)]
async fn event_without_namespace_goes_to_default() {
    let b = EventBroadcaster::new(options());
    let sink = MemorySink::new();
    b.start_recording_to_sink(sink.clone());
    let recorder = b.new_recorder(EventSource::new("eventTest", ""));
    let mut r = test_ref("bar", "spec.containers[2]");
    r.namespace = None;
    recorder.event_for_ref(&r, EventType::Normal, "Started", "some verbose message: 1");
    b.shutdown().await;
    let events = sink.events();
    assert_eq!(events.len(), 1);
    let e = &events[0];
    assert_eq!(e.metadata.namespace.as_deref(), Some("default"));
    assert_eq!(e.involved_object.namespace, None);
    assert_eq!(e.count, Some(1));
    assert!(e.metadata.name.as_deref().unwrap().starts_with("foo."));
}

/// client-go TestMultiSinkCache: a second sink gets a fresh correlator (counts restart).
#[tokio::test(start_paused = true)]
async fn multi_sink_caches_are_independent() {
    let b = EventBroadcaster::new(options());
    let recorder = b.new_recorder(EventSource::new("eventTest", ""));
    let sink1 = MemorySink::new();
    let h1 = b.start_recording_to_sink(sink1.clone());
    run_eventf_steps(&recorder, &sink1).await;
    h1.stop();
    let sink2 = MemorySink::new();
    b.start_recording_to_sink(sink2.clone());
    run_eventf_steps(&recorder, &sink2).await;
    b.shutdown().await;
    assert_eq!(sink1.calls().len(), 7);
    assert_eq!(sink2.calls().len(), 7);
}

/// client-go TestLotsOfEvents: 1000 distinct events, each failing 4 times before it is
/// created: all are created, all reach the logging watcher, none are dropped.
#[tokio::test(start_paused = true)]
async fn lots_of_events_with_failures_are_all_written() {
    let mut opts = options();
    opts.pipeline.retry.backoff =
        ExponentialBackoff::new(Duration::from_millis(10), Duration::from_secs(1));
    let b = EventBroadcaster::new(opts);
    let attempts = Arc::new(Mutex::new(BTreeMap::<String, u32>::new()));
    let a2 = attempts.clone();
    let sink = MemorySink::new().with_faults(move |c: &SinkCall| {
        let mut m = a2.lock().unwrap();
        let n = m.entry(c.name.clone()).or_default();
        *n += 1;
        (*n <= 4).then(|| SinkError::Transport("fake error".into()))
    });
    b.start_recording_to_sink(sink.clone());
    let logged = Arc::new(AtomicU32::new(0));
    let l2 = logged.clone();
    b.start_event_watcher(move |_| {
        l2.fetch_add(1, Ordering::Relaxed);
    });
    let recorder = b.new_recorder(EventSource::new("eventTest", ""));
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..1000 {
        let recorder = recorder.clone();
        tasks.spawn(async move {
            let r = ObjectReference {
                kind: Some("Pod".into()),
                name: Some(format!("foo-{i}")),
                namespace: Some("baz".into()),
                uid: Some("bar".into()),
                api_version: Some("version".into()),
                ..ObjectReference::default()
            };
            recorder.event_for_ref(
                &r,
                EventType::Normal,
                &format!("Reason-{i}"),
                &i.to_string(),
            );
        });
    }
    while tasks.join_next().await.is_some() {}
    until("all 1000 creates", || sink.events().len() == 1000).await;
    b.shutdown().await;
    assert_eq!(logged.load(Ordering::Relaxed), 1000);
    assert!(attempts.lock().unwrap().values().all(|&n| n >= 5));
    let stats = b.stats();
    assert_eq!(stats.dropped_queue_full, 0);
    assert_eq!(stats.sinks[0].created, 1000);
    assert_eq!(stats.unaccounted(0), 0);
}

/// client-go TestNonRacyShutdown and the no-leak shutdown tests: concurrent events then
/// shutdown — no panic, every task stopped, events after shutdown counted as dropped.
#[tokio::test(start_paused = true)]
async fn shutdown_is_clean_and_idempotent() {
    let b = EventBroadcaster::new(options());
    let sink = MemorySink::new();
    b.start_recording_to_sink(sink.clone());
    b.start_logging();
    let recorder = b.new_recorder(EventSource::new("eventTest", ""));
    let threads: Vec<_> = (0..100)
        .map(|_| {
            let recorder = recorder.clone();
            std::thread::spawn(move || {
                recorder.event_for_ref(
                    &ObjectReference::default(),
                    EventType::Normal,
                    "Started",
                    "blah",
                )
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert!(b.running_tasks() > 0);
    let (a, c) = tokio::join!(b.shutdown(), b.shutdown());
    let _ = (a, c);
    b.shutdown().await;
    assert_eq!(
        b.running_tasks(),
        0,
        "every task the broadcaster started has ended"
    );
    recorder.event(
        &test_pod("bar"),
        EventType::Normal,
        "Late",
        "after shutdown",
    );
    let stats = b.stats();
    assert_eq!(stats.emitted, 101);
    assert_eq!(stats.dropped_shutdown, 1);
    assert_eq!(stats.unaccounted(0), 0);
    // 100 identical events on one object: one stored event carrying every occurrence.
    let events = sink.events();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].count, Some(100));
}

/// Only Normal and Warning are recorded; anything else is a counted drop.
#[tokio::test(start_paused = true)]
async fn invalid_event_type_is_a_counted_drop() {
    let b = EventBroadcaster::new(options());
    let sink = MemorySink::new();
    b.start_recording_to_sink(sink.clone());
    let recorder = b.new_recorder(EventSource::new("eventTest", ""));
    recorder.event_with_type_str(&test_ref("bar", ""), None, "Error", "Oops", "bad type");
    recorder.event_with_type_str(&test_ref("bar", ""), None, "Warning", "Oops", "good type");
    b.shutdown().await;
    let stats = b.stats();
    assert_eq!(stats.dropped_invalid, 1);
    assert_eq!(stats.sinks[0].created, 1);
    assert_eq!(stats.unaccounted(0), 0);
}

/// Similar events beyond the threshold are folded into one "combined" event, and counted as
/// aggregated.
#[tokio::test(start_paused = true)]
async fn similar_events_aggregate_and_are_counted() {
    let b = EventBroadcaster::new(options());
    let sink = MemorySink::new();
    b.start_recording_to_sink(sink.clone());
    let recorder = b.new_recorder(EventSource::new("kubelet", "node1"));
    let pod = test_pod("bar");
    for i in 0..15 {
        recorder.event(
            &pod,
            EventType::Warning,
            "FailedMount",
            &format!("volume {i} failed"),
        );
    }
    b.shutdown().await;
    let stats = b.stats();
    assert_eq!(stats.unaccounted(0), 0);
    assert_eq!(stats.sinks[0].created, 9, "9 individual events");
    assert_eq!(stats.sinks[0].aggregated, 6, "{stats:?}");
    let combined: Vec<_> = sink
        .events()
        .into_iter()
        .filter(|e| {
            e.message
                .as_deref()
                .is_some_and(|m| m.starts_with("(combined from similar events): "))
        })
        .collect();
    assert_eq!(combined.len(), 1);
    assert_eq!(combined[0].count, Some(6));
    assert_eq!(
        combined[0].message.as_deref(),
        Some("(combined from similar events): volume 14 failed")
    );
}

/// A stalled sink fills the queue: identical events merge, distinct ones are dropped, and
/// every one is accounted for.
#[tokio::test(start_paused = true)]
async fn full_queue_merges_identical_and_counts_distinct_drops() {
    let mut opts = options();
    opts.pipeline.queue_capacity = 4;
    opts.pipeline.watcher_queue = 1;
    opts.pipeline.max_pending_writes = 1;
    let b = EventBroadcaster::new(opts);
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let sink = GatedSink {
        inner: MemorySink::new(),
        gate: gate.clone(),
    };
    b.start_recording_to_sink(sink.clone());
    let recorder = b.new_recorder(EventSource::new("eventTest", ""));
    let pod = test_pod("bar");
    // Fill the pipeline: the first write blocks, the watcher and queue fill up.
    for i in 0..20 {
        recorder.event(&pod, EventType::Normal, &format!("R{i}"), "distinct");
        tokio::task::yield_now().await;
    }
    for _ in 0..25 {
        for i in 0..20 {
            recorder.event(&pod, EventType::Normal, &format!("R{i}"), "distinct");
        }
    }
    let before = b.stats();
    assert!(before.dropped_queue_full > 0, "{before:?}");
    assert!(before.merged > 0, "{before:?}");
    gate.add_permits(1_000_000);
    b.shutdown().await;
    let stats = b.stats();
    assert_eq!(stats.emitted, 520);
    assert_eq!(stats.unaccounted(0), 0, "{stats:?}");
    let total: i64 = sink
        .inner
        .events()
        .iter()
        .map(|e| i64::from(e.count.unwrap_or(0)))
        .sum();
    assert_eq!(
        total as u64,
        stats.emitted - stats.dropped_queue_full,
        "every occurrence that was not dropped is in a stored count"
    );
}

#[derive(Clone)]
struct GatedSink {
    inner: MemorySink,
    gate: Arc<tokio::sync::Semaphore>,
}

impl EventSink for GatedSink {
    fn create<'a>(&'a self, event: &'a Event) -> sink::SinkFuture<'a> {
        Box::pin(async move {
            let _ = self.gate.acquire().await;
            self.inner.create(event).await
        })
    }
    fn update<'a>(&'a self, event: &'a Event) -> sink::SinkFuture<'a> {
        self.inner.update(event)
    }
    fn patch<'a>(&'a self, event: &'a Event, patch: &'a [u8]) -> sink::SinkFuture<'a> {
        Box::pin(async move {
            let _ = self.gate.acquire().await;
            self.inner.patch(event, patch).await
        })
    }
}

/// The storm: 1,000,000 identical events from 4 threads into a default recorder. Nothing is
/// unaccounted, the stored count is exact after the trailing flush, and the number of writes
/// stays within the spam budget (25 burst + 1 trailing flush).
#[tokio::test(start_paused = true)]
async fn storm_of_a_million_identical_events_is_counted_exactly() {
    let b = EventBroadcaster::new(options());
    let sink = MemorySink::new();
    b.start_recording_to_sink(sink.clone());
    let recorder = b.new_recorder(EventSource::new("kubelet", "node1"));
    let pod = test_pod("bar");
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let recorder = recorder.clone();
            let pod = pod.clone();
            std::thread::spawn(move || {
                for _ in 0..250_000 {
                    recorder.event(
                        &pod,
                        EventType::Warning,
                        "BackOff",
                        "Back-off restarting failed container",
                    );
                }
            })
        })
        .collect();
    // Keep the runtime busy (so paused time does not jump) while the threads record.
    while !threads.iter().all(|t| t.is_finished()) {
        tokio::task::yield_now().await;
    }
    for t in threads {
        t.join().unwrap();
    }
    let start = tokio::time::Instant::now();
    // Let the storm drain, then wait out the rate budget: the trailing flush writes the rest.
    until("the exact count is stored", || {
        sink.events().first().and_then(|e| e.count) == Some(1_000_000)
    })
    .await;
    let waited = start.elapsed();
    assert!(
        waited <= Duration::from_secs(301),
        "flushed {waited:?} after the storm"
    );
    b.shutdown().await;
    let stats = b.stats();
    assert_eq!(stats.emitted, 1_000_000);
    assert_eq!(stats.unaccounted(0), 0, "{stats:?}");
    assert_eq!(stats.dropped_queue_full, 0);
    let s = &stats.sinks[0];
    assert!(
        s.api_calls() <= 26,
        "{} writes exceed the spam budget",
        s.api_calls()
    );
    assert_eq!(s.trailing_flushes, 1);
    assert_eq!(sink.events().len(), 1);
}

/// Occurrences the spam filter holds back are settled with the write that carries their
/// count: when that write fails they are `failed`, not `skipped`, so the written outcomes add
/// up to the count the server holds and nothing lost is reported as handled.
#[tokio::test(start_paused = true)]
async fn held_back_occurrences_share_the_fate_of_the_write_that_carries_them() {
    let b = EventBroadcaster::new(options());
    // The spam budget (25) lets the first 25 occurrences through; the server refuses any
    // write of a higher count (403 is not retried), so the trailing flush that carries the
    // other 175 fails.
    let sink = MemorySink::new().with_faults(move |c: &SinkCall| {
        (c.count.unwrap_or(0) > 25).then(|| SinkError::status(403, "Forbidden", "no more"))
    });
    b.start_recording_to_sink(sink.clone());
    let recorder = b.new_recorder(EventSource::new("kubelet", "node1"));
    let pod = test_pod("held");
    // One at a time (1 ms apart, far below the budget's refill of one per 300 s), so that
    // each reaches the correlator on its own rather than merged in the queue.
    let record = || async {
        recorder.event(&pod, EventType::Warning, "BackOff", "Back-off");
        tokio::time::sleep(Duration::from_millis(1)).await;
    };
    for _ in 0..25 {
        record().await;
    }
    let stored = || sink.events().first().and_then(|e| e.count);
    until("the first 25 are stored", || stored() == Some(25)).await;
    for _ in 0..175 {
        record().await;
    }
    b.shutdown().await;
    assert_eq!(stored(), Some(25), "the trailing flush was refused");
    let stats = b.stats();
    let s = &stats.sinks[0];
    assert_eq!(stats.unaccounted(0), 0, "{stats:?}");
    assert_eq!(s.delivered, 200, "{s:?}");
    assert_eq!(
        s.created + s.patched + s.aggregated + s.skipped,
        25,
        "{s:?}"
    );
    assert_eq!(s.failed, 175, "{s:?}");
    assert!(s.trailing_flushes >= 1, "{s:?}");
}

/// At the shutdown deadline, occurrences still held back by the spam filter are settled as
/// dropped with the writes in flight: nothing is left unaccounted.
#[tokio::test(start_paused = true)]
async fn held_back_occurrences_are_dropped_at_the_shutdown_deadline() {
    let mut opts = options();
    opts.pipeline.shutdown_timeout = Duration::from_secs(5);
    let b = EventBroadcaster::new(opts);
    // Writes after the first 25 occurrences, and every write for another pod, are refused
    // with a retryable 503: the other pod's write keeps the writer busy, so the held-back
    // count is not even flushed before the deadline.
    let sink = MemorySink::new().with_faults(move |c: &SinkCall| {
        (c.count.unwrap_or(0) > 25 || c.name.starts_with("busy"))
            .then(|| SinkError::status(503, "ServiceUnavailable", "later"))
    });
    b.start_recording_to_sink(sink.clone());
    let recorder = b.new_recorder(EventSource::new("kubelet", "node1"));
    let record = |pod: &Pod| {
        recorder.event(pod, EventType::Warning, "BackOff", "Back-off");
    };
    let held = test_pod("held");
    for _ in 0..25 {
        record(&held);
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let stored = || sink.events().first().and_then(|e| e.count);
    until("the first 25 are stored", || stored() == Some(25)).await;
    for _ in 0..10 {
        record(&held);
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let mut busy = test_pod("busy");
    busy.metadata.name = Some("busy".into());
    record(&busy);
    b.shutdown().await;
    let stats = b.stats();
    let s = &stats.sinks[0];
    assert_eq!(stats.unaccounted(0), 0, "{stats:?}");
    assert_eq!(s.created + s.patched + s.skipped, 25, "{s:?}");
    assert_eq!(s.dropped_shutdown, 11, "{s:?}");
    assert_eq!(s.trailing_flushes, 0, "{s:?}");
    assert_eq!(stored(), Some(25));
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    struct Emit {
        object: u8,
        reason: u8,
        message: u8,
        gap_ms: u16,
    }

    fn emit() -> impl Strategy<Value = Emit> {
        (0u8..4, 0u8..3, 0u8..12, 0u16..2000).prop_map(|(object, reason, message, gap_ms)| Emit {
            object,
            reason,
            message,
            gap_ms,
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]

        /// For random streams with queue merges and random transient sink failures: outcomes
        /// add up to the events emitted, the stored counts add up to the occurrences written
        /// (merged ones included), and per stored event the counts written never decrease
        /// (so no key's writes are reordered).
        #[test]
        fn outcomes_add_up_and_counts_never_decrease(
            stream in proptest::collection::vec(emit(), 1..300),
            fail_every in 0u32..5,
            burst in 1u32..30,
        ) {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .start_paused(true)
                .build()
                .unwrap();
            rt.block_on(async move {
                let mut opts = options();
                opts.correlator.burst_size = burst;
                opts.pipeline.queue_capacity = 16;
                opts.pipeline.retry.backoff = ExponentialBackoff::new(Duration::from_millis(5), Duration::from_millis(100));
                let b = EventBroadcaster::new(opts);
                let n = Arc::new(AtomicU32::new(0));
                let n2 = n.clone();
                let sink = MemorySink::new().with_faults(move |_: &SinkCall| {
                    let k = n2.fetch_add(1, Ordering::Relaxed);
                    (fail_every > 0 && k.is_multiple_of(fail_every + 1))
                        .then(|| SinkError::status(503, "ServiceUnavailable", "try later"))
                });
                b.start_recording_to_sink(sink.clone());
                let recorder = b.new_recorder(EventSource::new("prop", "host"));
                for e in &stream {
                    let mut pod = test_pod(&format!("uid-{}", e.object));
                    pod.metadata.name = Some(format!("pod-{}", e.object));
                    recorder.event(
                        &pod,
                        EventType::Warning,
                        &format!("R{}", e.reason),
                        &format!("message {}", e.message),
                    );
                    tokio::time::sleep(Duration::from_millis(u64::from(e.gap_ms))).await;
                }
                b.shutdown().await;
                let stats = b.stats();
                assert_eq!(stats.emitted, stream.len() as u64);
                assert_eq!(stats.unaccounted(0), 0, "{stats:?}");
                // Transient failures lose nothing, and nothing is patched before it exists.
                let s = &stats.sinks[0];
                assert_eq!(s.failed, 0, "{stats:?}");
                assert_eq!(s.dropped_shutdown, 0, "{stats:?}");
                assert_eq!(s.patch_not_found_calls, 0, "{stats:?}");
                // Every occurrence reported as written — those merged in the queue into a
                // written event included — is in a stored count, and no more.
                let stored: u64 = sink
                    .events()
                    .iter()
                    .map(|e| u64::try_from(e.count.unwrap_or(0)).unwrap_or(0))
                    .sum();
                assert_eq!(
                    s.created + s.patched + s.aggregated + s.skipped + stats.merged,
                    stored,
                    "{stats:?}"
                );
                let mut last: BTreeMap<(String, String), i32> = BTreeMap::new();
                for c in sink.calls().into_iter().filter(|c| c.ok) {
                    let count = c.count.unwrap_or(0);
                    let prev = last.insert((c.namespace.clone(), c.name.clone()), count);
                    if let Some(prev) = prev {
                        assert!(count >= prev, "{}: count went from {prev} to {count}", c.name);
                    }
                }
            });
        }
    }
}

/// A `tracing` writer collecting everything into a shared buffer.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The logging watcher emits client-go's structured fields (TestEventf's log expectations).
#[tokio::test(start_paused = true)]
async fn logging_watcher_writes_structured_fields() {
    let out = Captured::default();
    let writer = out.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .without_time()
        .with_max_level(tracing::Level::INFO)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let b = EventBroadcaster::new(options());
    b.start_logging();
    let recorder = b.new_recorder(EventSource::new("eventTest", ""));
    recorder.event_for_ref(
        &test_ref("bar", "spec.containers[2]"),
        EventType::Normal,
        "Started",
        "some verbose message: 1",
    );
    b.shutdown().await;
    let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
    let line = text
        .lines()
        .find(|l| l.contains("Event occurred"))
        .unwrap_or_else(|| panic!("no event line in {text:?}"));
    for field in [
        "object=baz/foo",
        "fieldPath=spec.containers[2]",
        "kind=Pod",
        "apiVersion=v1",
        "type=Normal",
        "reason=Started",
        "note=some verbose message: 1",
    ] {
        assert!(line.contains(field), "{field} missing from {line:?}");
    }
    assert!(line.contains("herald::event"), "{line:?}");
}

/// Writes for different events run concurrently (up to `max_concurrent_writes`), writes for
/// one event never overlap.
#[tokio::test(start_paused = true)]
async fn writes_are_concurrent_across_keys_and_serial_per_key() {
    /// In flight now, most in flight at once, in flight per event, most per event at once.
    #[derive(Default)]
    struct Concurrency {
        now: usize,
        max: usize,
        per_key: BTreeMap<String, usize>,
        max_per_key: usize,
    }
    #[derive(Clone, Default)]
    struct Tracking {
        inner: MemorySink,
        state: Arc<Mutex<Concurrency>>,
    }
    impl Tracking {
        async fn around<T>(&self, name: &str, f: impl std::future::Future<Output = T>) -> T {
            {
                let mut s = self.state.lock().unwrap();
                s.now += 1;
                s.max = s.max.max(s.now);
                let per = s.per_key.entry(name.to_string()).or_default();
                *per += 1;
                let per = *per;
                s.max_per_key = s.max_per_key.max(per);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            let r = f.await;
            let mut s = self.state.lock().unwrap();
            s.now -= 1;
            *s.per_key.get_mut(name).unwrap() -= 1;
            r
        }
    }
    impl EventSink for Tracking {
        fn create<'a>(&'a self, e: &'a Event) -> sink::SinkFuture<'a> {
            Box::pin(self.around(
                e.metadata.name.as_deref().unwrap_or(""),
                self.inner.create(e),
            ))
        }
        fn update<'a>(&'a self, e: &'a Event) -> sink::SinkFuture<'a> {
            self.inner.update(e)
        }
        fn patch<'a>(&'a self, e: &'a Event, p: &'a [u8]) -> sink::SinkFuture<'a> {
            Box::pin(self.around(
                e.metadata.name.as_deref().unwrap_or(""),
                self.inner.patch(e, p),
            ))
        }
    }
    let mut opts = options();
    opts.pipeline.max_concurrent_writes = 4;
    let b = EventBroadcaster::new(opts);
    let sink = Tracking::default();
    b.start_recording_to_sink(sink.clone());
    let recorder = b.new_recorder(EventSource::new("eventTest", ""));
    for round in 0..5 {
        for i in 0..10 {
            let mut pod = test_pod(&format!("uid-{i}"));
            pod.metadata.name = Some(format!("pod-{i}"));
            recorder.event(&pod, EventType::Normal, "Tick", "same message");
        }
        tokio::time::sleep(Duration::from_millis(30 * round)).await;
    }
    b.shutdown().await;
    let (max_global, max_per_key) = {
        let s = sink.state.lock().unwrap();
        (s.max, s.max_per_key)
    };
    assert_eq!(max_global, 4, "bounded concurrency is used");
    assert_eq!(max_per_key, 1, "one write at a time per event");
    for e in sink.inner.events() {
        assert_eq!(e.count, Some(5), "{:?}", e.metadata.name);
    }
    assert_eq!(b.stats().unaccounted(0), 0);
}

/// `similar_messages_kept`: the stored combined event carries the sample of messages folded
/// into it, kept up to date by its dedup patches, one request each.
#[tokio::test(start_paused = true)]
async fn similar_messages_are_stored_on_the_combined_event() {
    let mut opts = options();
    opts.correlator.similar_messages_kept = 3;
    let b = EventBroadcaster::new(opts);
    let sink = MemorySink::new();
    b.start_recording_to_sink(sink.clone());
    let recorder = b.new_recorder(EventSource::new("default-scheduler", ""));
    let pod = test_pod("pending");
    for i in 0..15 {
        recorder.event(
            &pod,
            EventType::Warning,
            "FailedScheduling",
            &format!("0/15 nodes are available: node-{i} is full"),
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    b.shutdown().await;
    let combined: Vec<Event> = sink
        .events()
        .into_iter()
        .filter(|e| {
            e.message
                .as_deref()
                .unwrap()
                .starts_with(COMBINED_MESSAGE_PREFIX)
        })
        .collect();
    assert_eq!(combined.len(), 1);
    let e = &combined[0];
    assert_eq!(e.count, Some(6), "messages 9 to 14");
    let sample: serde_json::Value = serde_json::from_str(
        &e.metadata.annotations.as_ref().unwrap()[SIMILAR_MESSAGES_ANNOTATION],
    )
    .unwrap();
    let kept: Vec<(String, u64)> = sample["kept"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| {
            (
                k["message"].as_str().unwrap().to_string(),
                k["count"].as_u64().unwrap(),
            )
        })
        .collect();
    let expected: Vec<(String, u64)> = (9..12)
        .map(|i| (format!("0/15 nodes are available: node-{i} is full"), 1))
        .collect();
    assert_eq!(kept, expected);
    assert_eq!(sample["others"], 3);
    // One call per write of the combined event: a create, then one patch per repeat.
    let name = e.metadata.name.clone().unwrap();
    let ops: Vec<(SinkOp, bool)> = sink
        .calls()
        .iter()
        .filter(|c| c.name == name)
        .map(|c| (c.op, c.ok))
        .collect();
    let mut expected_ops = vec![(SinkOp::Create, true)];
    expected_ops.extend([(SinkOp::Patch, true); 5]);
    assert_eq!(ops, expected_ops);
    assert_eq!(b.stats().unaccounted(0), 0);
}
