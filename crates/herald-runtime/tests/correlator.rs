//! The event correlator against client-go's scenarios (reference §3.10–3.12) and Herald's
//! documented changes.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use herald_core::clock::{Clock, FakeClock, IntervalClock, add_saturating, elapsed};
use herald_runtime::record::correlator::{aggregate_by_reason, combined_message, event_key};
use herald_runtime::record::{
    COMBINED_MESSAGE_PREFIX, CorrelateResult, CorrelatorOptions, EventCorrelator, KeyBuilder,
    SIMILAR_MESSAGES_ANNOTATION, TrailingFlushOptions,
};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Event, EventSeries, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use proptest::prelude::*;

fn t0() -> Timestamp {
    "2026-01-01T00:00:00Z".parse().unwrap()
}

fn reference(field_path: &str) -> ObjectReference {
    ObjectReference {
        kind: Some("Pod".into()),
        name: Some("my-pod".into()),
        namespace: Some("my-ns".into()),
        uid: Some("C934D34AFB20242".into()),
        api_version: Some("version".into()),
        field_path: Some(field_path.into()),
        ..Default::default()
    }
}

/// client-go's `makeEvent`: source kubelet/kublet.node1, count 1, type Normal.
fn make_event(reason: &str, message: &str, involved: ObjectReference) -> Event {
    Event {
        metadata: ObjectMeta {
            name: Some(format!(
                "{}.{}",
                involved.name.as_deref().unwrap_or(""),
                reason
            )),
            ..Default::default()
        },
        involved_object: involved,
        reason: Some(reason.into()),
        message: Some(message.into()),
        source: Some(EventSource {
            component: Some("kubelet".into()),
            host: Some("kublet.node1".into()),
        }),
        count: Some(1),
        type_: Some("Normal".into()),
        ..Default::default()
    }
}

fn similar_event() -> Event {
    make_event(
        "similar",
        "similar message",
        reference("spec.containers{container1}"),
    )
}

fn similar_events(n: usize) -> Vec<Event> {
    (0..n)
        .map(|i| {
            make_event(
                "similar",
                &format!("similar message-{i}-similar message"),
                reference("spec.containers{container1}"),
            )
        })
        .collect()
}

fn duplicates(n: usize) -> Vec<Event> {
    (0..n)
        .map(|_| {
            make_event(
                "duplicate",
                "me again",
                reference("spec.containers{mycontainer}"),
            )
        })
        .collect()
}

fn unique_events(n: usize) -> Vec<Event> {
    (0..n)
        .map(|i| {
            let r = ObjectReference {
                kind: Some("Pod".into()),
                name: Some(format!("pod-{i}")),
                namespace: Some(format!("ns-{i}")),
                uid: Some("C934D34AFB20242".into()),
                api_version: Some("version".into()),
                field_path: Some("spec.containers{mycontainer}".into()),
                ..Default::default()
            };
            make_event(&format!("reason-{i}"), &format!("message-{i}"), r)
        })
        .collect()
}

fn stamp(e: &mut Event, clock: &dyn Clock) {
    let now = Time(clock.now());
    e.first_timestamp = Some(now.clone());
    e.last_timestamp = Some(now);
}

/// The TestEventCorrelator driver: stamp (one clock read), correlate (two), UpdateState.
fn run_scenario(interval: Duration, previous: Vec<Event>, new: Event) -> CorrelateResult {
    let clock = Arc::new(IntervalClock::new(t0(), interval));
    let mut c = EventCorrelator::new(CorrelatorOptions {
        clock: clock.clone(),
        ..Default::default()
    });
    for mut e in previous {
        stamp(&mut e, &*clock);
        let r = c.correlate(e).unwrap();
        if !r.skip {
            c.update_state(&r.event);
        }
    }
    let mut e = new;
    stamp(&mut e, &*clock);
    let r = c.correlate(e).unwrap();
    // Three ticks per event: the stamp and exactly two correlator reads.
    assert_eq!(
        elapsed(t0(), clock.peek()),
        interval * 3 * (c.stats().correlated as u32)
    );
    r
}

/// client-go's validateEvent: timestamps set; equal iff count is 1.
fn check_counted(r: &CorrelateResult, count: i32, message: &str) {
    assert!(!r.skip);
    assert_eq!(r.event.count, Some(count));
    assert_eq!(r.event.message.as_deref(), Some(message));
    let (first, last) = (
        r.event.first_timestamp.clone().unwrap(),
        r.event.last_timestamp.clone().unwrap(),
    );
    if count == 1 {
        assert_eq!(first, last);
        assert!(r.patch.is_none());
    } else {
        assert_ne!(first, last);
        assert!(r.patch.is_some());
    }
}

// ---- TestEventCorrelator (§3.11) ----

#[test]
fn create_a_single_event() {
    let input = make_event(
        "first",
        "i am first",
        reference("spec.containers{mycontainer}"),
    );
    let r = run_scenario(Duration::from_secs(5), vec![], input.clone());
    check_counted(&r, 1, "i am first");
    assert!(!r.aggregated);
    assert_eq!(r.event.reason, input.reason);
    assert_eq!(r.event.involved_object, input.involved_object);
}

#[test]
fn the_same_event_should_just_count() {
    let r = run_scenario(
        Duration::from_secs(5),
        duplicates(1),
        duplicates(1).remove(0),
    );
    check_counted(&r, 2, "me again");
    assert_eq!(r.event.metadata.name.as_deref(), Some("my-pod.duplicate"));
}

#[test]
fn the_same_event_should_just_count_even_if_more_than_aggregate() {
    let r = run_scenario(
        Duration::from_secs(30),
        duplicates(10),
        duplicates(1).remove(0),
    );
    check_counted(&r, 11, "me again");
    assert!(!r.aggregated);
}

#[test]
fn the_same_event_is_spam_if_happens_too_frequently() {
    let input = duplicates(1).remove(0);
    let r = run_scenario(Duration::from_secs(1), duplicates(26), input.clone());
    assert!(r.skip);
    assert!(r.patch.is_none());
    // The input comes back unchanged (apart from the stamp the driver added).
    assert_eq!(r.event.count, Some(1));
    assert_eq!(r.event.metadata.name, input.metadata.name);
}

#[test]
fn create_many_unique_events() {
    let new = make_event(
        "unique",
        "snowflake",
        reference("spec.containers{mycontainer}"),
    );
    let r = run_scenario(Duration::from_secs(5), unique_events(30), new);
    check_counted(&r, 1, "snowflake");
}

#[test]
fn similar_events_should_aggregate_event() {
    let input = similar_event();
    let r = run_scenario(Duration::from_secs(5), similar_events(9), input.clone());
    let message = format!("{COMBINED_MESSAGE_PREFIX}similar message");
    check_counted(&r, 1, &message);
    assert!(r.aggregated);
    assert_eq!(r.event.reason.as_deref(), Some("similar"));
    assert_eq!(r.event.source, input.source);
    assert_eq!(r.event.involved_object, input.involved_object);
    assert_eq!(r.event.type_.as_deref(), Some("Normal"));
    assert_eq!(r.event.metadata.namespace, None);
    assert_eq!(r.event.reporting_instance, None);
    assert_eq!(r.event.reporting_component, None);
}

#[test]
fn similar_events_many_times_should_count_the_aggregate() {
    let r = run_scenario(Duration::from_secs(5), similar_events(10), similar_event());
    check_counted(&r, 2, &format!("{COMBINED_MESSAGE_PREFIX}similar message"));
    assert!(r.aggregated);
    assert_eq!(
        String::from_utf8(r.patch.clone().unwrap()).unwrap(),
        format!(
            r#"{{"count":2,"lastTimestamp":"{}","message":"(combined from similar events): similar message"}}"#,
            r.event
                .last_timestamp
                .as_ref()
                .unwrap()
                .0
                .strftime("%Y-%m-%dT%H:%M:%SZ")
        )
    );
}

#[test]
fn events_from_different_containers_do_not_aggregate() {
    let other = make_event(
        "similar",
        "similar message",
        reference("spec.containers{container2}"),
    );
    let r = run_scenario(Duration::from_secs(5), vec![other], similar_event());
    check_counted(&r, 1, "similar message");
    assert!(!r.aggregated);
}

#[test]
fn similar_events_whose_interval_is_greater_than_aggregate_interval_do_not_aggregate() {
    let r = run_scenario(Duration::from_secs(600), similar_events(9), similar_event());
    check_counted(&r, 1, "similar message");
    assert!(!r.aggregated);
}

#[test]
fn aggregation_window_is_strictly_greater() {
    // Exactly max_interval between aggregator reads stays inside the window. With a fake clock
    // moved by hand: 9 similar messages 600 s apart still aggregate on the 10th.
    let clock = Arc::new(FakeClock::new(t0()));
    let mut c = EventCorrelator::new(CorrelatorOptions {
        clock: clock.clone(),
        qps: f32::INFINITY,
        ..Default::default()
    });
    for e in similar_events(9) {
        assert!(!c.correlate(e).unwrap().aggregated);
        clock.advance(Duration::from_secs(600));
    }
    assert!(c.correlate(similar_event()).unwrap().aggregated);
    // One nanosecond more resets the set.
    clock.advance(Duration::from_nanos(600_000_000_001));
    assert!(
        !c.correlate(similar_events(10).remove(9))
            .unwrap()
            .aggregated
    );
}

// ---- §3.10 ----

fn keys(e: &Event) -> (Vec<u8>, Vec<u8>) {
    let (mut a, mut l) = (Vec::new(), Vec::new());
    aggregate_by_reason(
        e,
        &mut KeyBuilder::new(&mut a),
        &mut KeyBuilder::new(&mut l),
    );
    (a, l)
}

fn pod1_event(reason: &str, message: &str) -> Event {
    let r = ObjectReference {
        kind: Some("Pod".into()),
        name: Some("pod1".into()),
        namespace: Some("other".into()),
        ..Default::default()
    };
    make_event(reason, message, r)
}

#[test]
fn event_aggregator_by_reason_func() {
    let fun = pod1_event("end-of-world", "it was fun");
    let awful = pod1_event("end-of-world", "it was awful");
    let bug = pod1_event("nevermind", "it was a bug");
    let (a1, l1) = keys(&fun);
    let (a2, l2) = keys(&awful);
    let (a3, _) = keys(&bug);
    assert_eq!(a1, a2);
    assert_ne!(l1, l2);
    assert_ne!(a1, a3);
    // fieldPath is not part of the aggregate key, reporting fields are.
    let mut with_path = fun.clone();
    with_path.involved_object.field_path = Some("spec.containers[1]".into());
    assert_eq!(keys(&with_path).0, a1);
    let mut reporting = fun.clone();
    reporting.reporting_instance = Some("i-1".into());
    assert_ne!(keys(&reporting).0, a1);
}

#[test]
fn event_aggregator_by_reason_message_func() {
    let e = pod1_event("end-of-world", "it was fun");
    let m = combined_message(&e);
    assert!(m.starts_with("(combined from similar events): "));
    assert_eq!(m, "(combined from similar events): it was fun");
}

// ---- TestEventSpamFilter (§3.12) ----

fn spam_scenario(
    spam_key_func: Option<herald_runtime::record::SpamKeyFunc>,
    new: Event,
) -> CorrelateResult {
    let clock = Arc::new(IntervalClock::new(t0(), Duration::from_secs(1)));
    let mut options = CorrelatorOptions {
        clock,
        burst_size: 1,
        ..Default::default()
    };
    if let Some(f) = spam_key_func {
        options.spam_key_func = f;
    }
    let mut c = EventCorrelator::new(options);
    let first = make_event(
        "original",
        "i am first",
        reference("spec.containers{mycontainer}"),
    );
    assert!(!c.correlate(first).unwrap().skip);
    c.correlate(new).unwrap()
}

fn spam_key_with_reason() -> herald_runtime::record::SpamKeyFunc {
    Arc::new(|e: &Event, k: &mut KeyBuilder<'_>| {
        let s = |v: &Option<String>| v.clone().unwrap_or_default();
        let src = e.source.clone().unwrap_or_default();
        let o = &e.involved_object;
        k.push(&s(&src.component))
            .push(&s(&src.host))
            .push(&s(&o.kind))
            .push(&s(&o.namespace))
            .push(&s(&o.name))
            .push(&s(&o.uid))
            .push(&s(&o.api_version))
            .push(&s(&e.reason));
    })
}

#[test]
fn spam_default_key_different_reason_is_skipped() {
    let new = make_event(
        "duplicate",
        "me again",
        reference("spec.containers{mycontainer}"),
    );
    assert!(spam_scenario(None, new).skip);
}

#[test]
fn spam_custom_key_with_reason_different_reason_passes() {
    let new = make_event(
        "duplicate",
        "me again",
        reference("spec.containers{mycontainer}"),
    );
    let r = spam_scenario(Some(spam_key_with_reason()), new.clone());
    assert!(!r.skip);
    assert_eq!(r.event, new);
    assert_eq!(r.patch, None);
}

#[test]
fn spam_custom_key_same_reason_different_message_is_skipped() {
    let new = make_event(
        "original",
        "me again",
        reference("spec.containers{mycontainer}"),
    );
    assert!(spam_scenario(Some(spam_key_with_reason()), new).skip);
}

// ---- Herald specifics ----

fn fake(options: CorrelatorOptions) -> (Arc<FakeClock>, EventCorrelator) {
    let clock = Arc::new(FakeClock::new(t0()));
    let c = EventCorrelator::new(CorrelatorOptions {
        clock: clock.clone(),
        ..options
    });
    (clock, c)
}

fn at(clock: &FakeClock, mut e: Event) -> Event {
    stamp(&mut e, clock);
    e
}

#[test]
fn clock_reads_two_per_correlate_one_per_flush_take_none_otherwise() {
    let clock = Arc::new(IntervalClock::new(t0(), Duration::from_secs(1)));
    let mut c = EventCorrelator::new(CorrelatorOptions {
        clock: clock.clone(),
        burst_size: 1,
        ..Default::default()
    });
    let e = duplicates(1).remove(0);
    let r = c.correlate(e.clone()).unwrap();
    c.update_state(&r.event);
    assert!(c.correlate(e.clone()).unwrap().skip);
    for e in similar_events(12) {
        c.correlate(e).unwrap();
    }
    assert_eq!(elapsed(t0(), clock.peek()), Duration::from_secs(2 * 14));
    let _ = c.next_flush_at();
    let _ = c.cache_sizes();
    assert_eq!(elapsed(t0(), clock.peek()), Duration::from_secs(28));
    let _ = c.take_due_flushes();
    assert_eq!(elapsed(t0(), clock.peek()), Duration::from_secs(29));
}

#[test]
fn patch_bytes_are_exact() {
    let (clock, mut c) = fake(CorrelatorOptions::default());
    let mut e = make_event(
        "Failed",
        "pull \"img\" → failed\n",
        reference("spec.containers{a}"),
    );
    let r = c.correlate(at(&clock, e.clone())).unwrap();
    assert!(r.patch.is_none());
    c.update_state(&r.event);
    clock.set("2026-03-04T05:06:07.891Z".parse().unwrap());
    let r = c.correlate(at(&clock, e.clone())).unwrap();
    assert_eq!(
        String::from_utf8(r.patch.unwrap()).unwrap(),
        r#"{"count":2,"lastTimestamp":"2026-03-04T05:06:07Z","message":"pull \"img\" → failed\n"}"#
    );
    // No message key when the message is empty.
    e.message = None;
    let r = c.correlate(at(&clock, e.clone())).unwrap();
    assert!(r.patch.is_none(), "a new key (message is part of it)");
    c.update_state(&r.event);
    clock.advance(Duration::from_secs(61));
    let r = c.correlate(at(&clock, e)).unwrap();
    assert_eq!(
        String::from_utf8(r.patch.unwrap()).unwrap(),
        r#"{"count":2,"lastTimestamp":"2026-03-04T05:07:08Z"}"#
    );
}

#[test]
fn count_zero_is_not_seen() {
    // client-go's TestWriteEventError relies on it: count-0 events never deduplicate.
    let (clock, mut c) = fake(CorrelatorOptions::default());
    let empty = Event::default();
    for _ in 0..5 {
        let r = c.correlate(at(&clock, empty.clone())).unwrap();
        assert!(!r.skip && r.patch.is_none());
        assert_eq!(r.event.count, None);
    }
}

#[test]
fn count_greater_than_one_is_added_on_repeats_and_kept_on_first_sight() {
    let (clock, mut c) = fake(CorrelatorOptions::default());
    let mut e = duplicates(1).remove(0);
    e.count = Some(3);
    e.metadata.resource_version = Some("updated-resource-version".into());
    let r = c.correlate(at(&clock, e.clone())).unwrap();
    // TestUpdateExpiredEvent: not cached ⇒ passes through as given, no patch.
    assert_eq!(r.event.count, Some(3));
    assert!(r.patch.is_none());
    assert_eq!(
        r.event.metadata.resource_version.as_deref(),
        Some("updated-resource-version")
    );
    e.count = Some(2);
    let r = c.correlate(at(&clock, e.clone())).unwrap();
    assert_eq!(r.event.count, Some(5));
    assert!(
        String::from_utf8(r.patch.unwrap())
            .unwrap()
            .starts_with(r#"{"count":5,"#)
    );
    e.count = None;
    assert_eq!(c.correlate(at(&clock, e)).unwrap().event.count, Some(6));
}

#[test]
fn update_state_never_lowers_a_count_and_stores_the_server_identity() {
    let (clock, mut c) = fake(CorrelatorOptions::default());
    let e = duplicates(1).remove(0);
    let first = c.correlate(at(&clock, e.clone())).unwrap();
    let second = c.correlate(at(&clock, e.clone())).unwrap();
    let third = c.correlate(at(&clock, e.clone())).unwrap();
    assert_eq!(third.event.count, Some(3));
    // The create completes last, with the server's name and resourceVersion.
    let mut written = first.event.clone();
    written.metadata.name = Some("server-name".into());
    written.metadata.resource_version = Some("42".into());
    written.first_timestamp = Some(Time(t0()));
    c.update_state(&written);
    let mut late = second.event.clone();
    late.metadata.name = Some("server-name".into());
    late.metadata.resource_version = Some("43".into());
    c.update_state(&late);
    let r = c.correlate(at(&clock, e)).unwrap();
    assert_eq!(r.event.count, Some(4), "not 3: the cached 3 was kept");
    assert_eq!(r.event.metadata.name.as_deref(), Some("server-name"));
    assert_eq!(r.event.metadata.resource_version.as_deref(), Some("43"));
}

#[test]
fn keys_are_not_ambiguous() {
    let (clock, mut c) = fake(CorrelatorOptions::default());
    let mut a = duplicates(1).remove(0);
    a.source = Some(EventSource {
        component: Some("ab".into()),
        host: Some("c".into()),
    });
    let mut b = a.clone();
    b.source = Some(EventSource {
        component: Some("a".into()),
        host: Some("bc".into()),
    });
    let ra = c.correlate(at(&clock, a.clone())).unwrap();
    c.update_state(&ra.event);
    let rb = c.correlate(at(&clock, b.clone())).unwrap();
    assert_eq!(
        rb.event.count,
        Some(1),
        "client-go would count this as a repeat"
    );
    assert!(rb.patch.is_none());
    let sizes = c.cache_sizes();
    assert_eq!((sizes.aggregator, sizes.spam), (2, 2));
    let (mut ka, mut kb) = (Vec::new(), Vec::new());
    event_key(&a, &mut KeyBuilder::new(&mut ka));
    event_key(&b, &mut KeyBuilder::new(&mut kb));
    assert_ne!(ka, kb);
}

#[test]
fn lru_dedup_eviction_follows_recency() {
    let (clock, mut c) = fake(CorrelatorOptions {
        lru_cache_size: 2,
        qps: f32::INFINITY,
        ..Default::default()
    });
    let ev = |reason: &str| make_event(reason, "m", reference("spec.containers{a}"));
    let count = |c: &mut EventCorrelator, reason: &str| {
        c.correlate(at(&clock, ev(reason)))
            .unwrap()
            .event
            .count
            .unwrap()
    };
    assert_eq!(count(&mut c, "x"), 1);
    assert_eq!(count(&mut c, "y"), 1);
    assert_eq!(count(&mut c, "x"), 2); // promotes x
    assert_eq!(count(&mut c, "z"), 1); // evicts y, the least recently used
    assert_eq!(count(&mut c, "x"), 3);
    assert_eq!(count(&mut c, "y"), 1); // forgotten; evicts z
    assert_eq!(count(&mut c, "x"), 4);
    assert_eq!(count(&mut c, "z"), 1);
    let sizes = c.cache_sizes();
    assert_eq!((sizes.aggregator, sizes.dedup, sizes.spam), (2, 2, 1));
    assert_eq!(c.stats().dedup_evictions, 3);
}

#[test]
fn lru_spam_eviction_gives_a_fresh_burst() {
    let (clock, mut c) = fake(CorrelatorOptions {
        lru_cache_size: 2,
        burst_size: 1,
        trailing_flush: None,
        ..Default::default()
    });
    let on = |pod: &str| {
        let mut r = reference("spec.containers{a}");
        r.name = Some(pod.into());
        make_event("r", "m", r)
    };
    let skipped =
        |c: &mut EventCorrelator, pod: &str| c.correlate(at(&clock, on(pod))).unwrap().skip;
    assert!(!skipped(&mut c, "a"));
    assert!(!skipped(&mut c, "b"));
    assert!(skipped(&mut c, "a")); // a's bucket is empty; get promotes a
    assert!(!skipped(&mut c, "c")); // evicts b
    assert!(!skipped(&mut c, "b")); // fresh burst; evicts a
    assert!(!skipped(&mut c, "a")); // fresh burst; evicts c
    assert!(skipped(&mut c, "b"));
    assert_eq!(c.stats().spam_evictions, 3);
    assert_eq!(c.cache_sizes().spam, 2);
}

#[test]
fn lru_size_zero_is_unbounded() {
    let (clock, mut c) = fake(CorrelatorOptions {
        lru_cache_size: 0,
        ..Default::default()
    });
    for e in unique_events(5000) {
        c.correlate(at(&clock, e)).unwrap();
    }
    let s = c.cache_sizes();
    assert_eq!((s.aggregator, s.dedup, s.spam), (5000, 5000, 5000));
}

#[test]
fn aggregation_drops_the_least_recently_seen_message() {
    let (clock, mut c) = fake(CorrelatorOptions {
        qps: f32::INFINITY,
        ..Default::default()
    });
    let msgs = similar_events(12);
    for e in &msgs[..9] {
        assert!(!c.correlate(at(&clock, e.clone())).unwrap().aggregated);
    }
    // m1 is seen again: m0 is now the least recently seen.
    let r = c.correlate(at(&clock, msgs[1].clone())).unwrap();
    assert!(!r.aggregated);
    assert_eq!(r.event.count, Some(2));
    // m9 fills the set: aggregated, and m0 leaves it.
    assert!(c.correlate(at(&clock, msgs[9].clone())).unwrap().aggregated);
    // m2..m8, m1 and m9 are still in the set: counted under their own keys.
    let r = c.correlate(at(&clock, msgs[2].clone())).unwrap();
    assert!(!r.aggregated);
    assert_eq!(r.event.count, Some(2));
    // m0 is not: aggregated again (count 2 of the combined event).
    let r = c.correlate(at(&clock, msgs[0].clone())).unwrap();
    assert!(r.aggregated);
    assert_eq!(r.event.count, Some(2));
}

#[test]
fn aggregate_event_shape() {
    let (clock, mut c) = fake(CorrelatorOptions {
        max_events: 1,
        qps: f32::INFINITY,
        ..Default::default()
    });
    let mut e = similar_event();
    e.metadata.namespace = Some("my-ns".into());
    e.metadata.annotations = Some([("a".to_string(), "b".to_string())].into());
    e.reporting_component = Some("ctrl".into());
    e.reporting_instance = Some("ctrl-1".into());
    e.action = Some("Act".into());
    // Without a usable incoming name, the name comes from the correlator's clock.
    let mut nameless = e.clone();
    nameless.metadata.name = None;
    let r = c.correlate(at(&clock, nameless)).unwrap();
    assert!(r.aggregated);
    assert_eq!(
        r.event.metadata.name.as_deref(),
        Some(format!("my-pod.{:x}", t0().as_nanosecond()).as_str())
    );
    // With one, the combined event takes over the (unique) name of the event it replaces.
    let (clock, mut c) = fake(CorrelatorOptions {
        max_events: 1,
        qps: f32::INFINITY,
        ..Default::default()
    });
    let r = c.correlate(at(&clock, e.clone())).unwrap();
    assert!(r.aggregated);
    let a = &r.event;
    assert_eq!(a.metadata.name, e.metadata.name);
    assert_eq!(a.metadata.namespace.as_deref(), Some("my-ns"));
    assert_eq!(a.metadata.annotations, None);
    assert_eq!(
        (
            a.reporting_component.as_ref(),
            a.reporting_instance.as_ref()
        ),
        (None, None)
    );
    assert_eq!(a.action, None);
    assert_eq!(a.count, Some(1));
    assert_eq!(a.first_timestamp, Some(Time(t0())));
    assert_eq!(a.last_timestamp, Some(Time(t0())));
    assert_eq!(a.involved_object, e.involved_object);
    assert_eq!(
        a.message,
        Some(format!("{COMBINED_MESSAGE_PREFIX}similar message"))
    );

    // An object name that makes an invalid event name gets a valid (UUID) name instead.
    let mut bad = similar_event();
    bad.involved_object.name = Some("2001:DB8::1".into());
    let r = c.correlate(at(&clock, bad)).unwrap();
    let name = r.event.metadata.name.unwrap();
    assert!(herald_core::naming::is_dns1123_subdomain(&name), "{name}");
}

#[test]
fn skipped_events_return_the_input_unchanged() {
    let (clock, mut c) = fake(CorrelatorOptions {
        burst_size: 3,
        ..Default::default()
    });
    let e = at(&clock, duplicates(1).remove(0));
    let r = c.correlate(e.clone()).unwrap();
    let mut written = r.event.clone();
    written.metadata.name = Some("server-name".into());
    written.metadata.resource_version = Some("7".into());
    c.update_state(&written);
    c.correlate(e.clone()).unwrap();
    c.correlate(e.clone()).unwrap();
    // Bucket empty: the repeat is skipped and comes back exactly as given.
    let r = c.correlate(e.clone()).unwrap();
    assert!(r.skip && !r.aggregated && r.patch.is_none());
    assert_eq!(r.event, e);
    // The aggregated-then-skipped path too (reporting fields are part of the aggregate key).
    for mut s in similar_events(9) {
        s.reporting_instance = Some("inst".into());
        let s = at(&clock, s);
        let r = c.correlate(s.clone()).unwrap();
        assert!(r.skip);
        assert_eq!(r.event, s);
    }
    let mut s = at(&clock, similar_event());
    s.metadata.namespace = Some("ns".into());
    s.reporting_instance = Some("inst".into());
    let r = c.correlate(s.clone()).unwrap();
    assert!(r.skip && r.aggregated);
    assert_eq!(r.event, s);
    // Skipped events were still counted: the dedup entry of `e` is at 4.
    clock.advance(Duration::from_secs(3600));
    let r = c.correlate(e.clone()).unwrap();
    assert_eq!(r.event.count, Some(5));
    assert_eq!(r.event.metadata.name.as_deref(), Some("server-name"));
}

#[test]
fn a_combined_event_keeps_its_identity_across_skips_and_server_writes() {
    let (clock, mut c) = fake(CorrelatorOptions {
        burst_size: 10,
        trailing_flush: None,
        ..Default::default()
    });
    let named = |i: usize| {
        let mut e = similar_events(i + 1).remove(i);
        e.metadata.name = Some(format!("input-{i}"));
        e.metadata.resource_version = Some(format!("rv-{i}"));
        at(&clock, e)
    };
    for i in 0..9 {
        assert!(!c.correlate(named(i)).unwrap().aggregated);
    }
    // The 10th distinct message: a combined event that takes the 10th input's name.
    let first = c.correlate(named(9)).unwrap();
    assert!(first.aggregated && !first.skip && first.patch.is_none());
    assert_eq!(first.event.metadata.name.as_deref(), Some("input-9"));
    assert_eq!(first.event.metadata.resource_version, None);
    // The bucket is empty: the next one is counted, and its input comes back as it was, with
    // everything a combined event leaves out (reporting fields are part of the aggregate
    // key, so they stay as they are).
    let mut input = named(10);
    input.metadata.annotations = Some([("a".to_string(), "b".to_string())].into());
    input.metadata.labels = Some([("l".to_string(), "v".to_string())].into());
    input.metadata.uid = Some("uid-10".into());
    input.action = Some("Probe".into());
    input.event_time = Some(MicroTime(t0()));
    input.related = Some(reference("spec.containers{other}"));
    input.series = Some(EventSeries {
        count: Some(2),
        last_observed_time: Some(MicroTime(t0())),
    });
    let skipped = c.correlate(input.clone()).unwrap();
    assert!(skipped.aggregated && skipped.skip);
    assert_eq!(skipped.event, input);
    // The server stored the combined event under its own full key (client-go's pollution) —
    // that must not disturb the aggregate entry, which keeps the combined identity.
    let mut stored = first.event.clone();
    stored.metadata.resource_version = Some("900".into());
    c.update_state(&stored);
    clock.advance(Duration::from_secs(300));
    let next = c.correlate(named(11)).unwrap();
    assert!(next.aggregated && !next.skip);
    assert_eq!(next.event.metadata.name.as_deref(), Some("input-9"));
    assert_eq!(next.event.count, Some(3));
    assert_eq!(
        next.event.message.as_deref(),
        Some("(combined from similar events): similar message-11-similar message")
    );
    assert!(next.patch.is_some());
    // And once more, accepted back to back: the name stays, the count goes on.
    clock.advance(Duration::from_secs(300));
    let last = c.correlate(named(12)).unwrap();
    assert_eq!(last.event.metadata.name.as_deref(), Some("input-9"));
    assert_eq!(last.event.count, Some(4));
}

/// After the storm (its spam key quiet for `quiet`, 60 s by default), one write carries every
/// held-back occurrence; it takes no spam token and waits for no refill.
#[test]
fn trailing_flush_writes_the_full_count_once_the_storm_is_quiet() {
    let (clock, mut c) = fake(CorrelatorOptions::default());
    let e = duplicates(1).remove(0);
    let mut last_written = None;
    for _ in 0..25 {
        let r = c.correlate(at(&clock, e.clone())).unwrap();
        assert!(!r.skip);
        c.update_state(&r.event);
        last_written = r.event.count;
    }
    assert_eq!(last_written, Some(25));
    assert_eq!(c.next_flush_at(), None);
    let mut last_message = String::new();
    for i in 0..5 {
        clock.advance(Duration::from_secs(1));
        let mut ev = at(&clock, e.clone());
        // Same key, so same message; the timestamp is what changes.
        last_message = ev.message.clone().unwrap();
        ev.count = Some(1);
        assert!(c.correlate(ev).unwrap().skip, "event {i}");
    }
    let last_skipped_at = clock.now();
    assert_eq!(c.pending_flushes(), 1);
    let due = c.next_flush_at().expect("a flush is pending");
    assert_eq!(elapsed(last_skipped_at, due), Duration::from_secs(60));
    // Nothing is due while the storm may go on.
    clock.set(add_saturating(last_skipped_at, Duration::from_secs(59)));
    assert!(c.take_due_flushes().is_empty());
    assert_eq!(c.pending_flushes(), 1);
    clock.set(add_saturating(last_skipped_at, Duration::from_secs(60)));
    let flushed = c.take_due_flushes();
    assert_eq!(flushed.len(), 1);
    let f = &flushed[0];
    assert!(!f.skip && !f.aggregated);
    assert_eq!(f.event.count, Some(30));
    assert_eq!(f.event.metadata.name.as_deref(), Some("my-pod.duplicate"));
    assert_eq!(f.event.last_timestamp, Some(Time(last_skipped_at)));
    assert_eq!(
        String::from_utf8(f.patch.clone().unwrap()).unwrap(),
        format!(
            r#"{{"count":30,"lastTimestamp":"{}","message":"{last_message}"}}"#,
            last_skipped_at.strftime("%Y-%m-%dT%H:%M:%SZ")
        )
    );
    assert_eq!(c.pending_flushes(), 0);
    assert_eq!(c.next_flush_at(), None);
    assert!(c.take_due_flushes().is_empty());
    assert_eq!(c.stats().flushed, 1);
    // The flush took no spam token, and the bucket has not refilled (25 taken 65 s ago):
    // the next repeat is still skipped.
    assert!(c.correlate(at(&clock, e)).unwrap().skip);
}

/// An event of the same spam key keeps the storm going: a remembered key whose own events
/// stopped is not due while its object's other reasons still come.
#[test]
fn trailing_flush_waits_for_the_whole_spam_key_to_be_quiet() {
    let (clock, mut c) = fake(CorrelatorOptions {
        burst_size: 1,
        ..Default::default()
    });
    let ev = |reason: &str| make_event(reason, "m", reference("spec.containers{a}"));
    assert!(!c.correlate(at(&clock, ev("a"))).unwrap().skip);
    assert!(c.correlate(at(&clock, ev("b"))).unwrap().skip);
    let b_at = clock.now();
    // 30 s apart, for 270 s: "b" is long quiet, but its spam key is not (and the bucket,
    // refilled at 300 s, has no token for "a").
    for _ in 0..9 {
        clock.advance(Duration::from_secs(30));
        assert!(c.correlate(at(&clock, ev("a"))).unwrap().skip);
        assert!(
            c.take_due_flushes().is_empty(),
            "the spam key is still busy"
        );
    }
    let quiet_from = clock.now();
    assert_eq!(
        c.next_flush_at(),
        Some(add_saturating(quiet_from, Duration::from_secs(60)))
    );
    clock.advance(Duration::from_secs(60));
    // Least recently skipped first, one trailing token at a time (≈ 7.6 a second).
    let mut f = c.take_due_flushes();
    assert_eq!(f.len(), 1);
    clock.advance(Duration::from_secs(1));
    f.extend(c.take_due_flushes());
    let reasons: Vec<_> = f
        .iter()
        .map(|r| r.event.reason.as_deref().unwrap())
        .collect();
    assert_eq!(reasons, ["b", "a"]);
    // "b" was never written: created, with its own times.
    assert!(f[0].patch.is_none());
    assert_eq!(f[0].event.last_timestamp, Some(Time(b_at)));
    assert_eq!(f[0].carried, 1);
    assert!(f[1].patch.is_some());
    assert_eq!(f[1].event.count, Some(10));
    assert_eq!(f[1].carried, 9);
    assert_eq!(c.next_flush_at(), None);
}

/// An event whose first occurrences were all held back is created by the write that carries
/// them (its first timestamp the first occurrence's), never patched before it exists.
#[test]
fn a_held_back_event_is_created_by_its_first_write() {
    let (clock, mut c) = fake(CorrelatorOptions {
        burst_size: 1,
        ..Default::default()
    });
    let ev = |reason: &str| make_event(reason, "m", reference("spec.containers{a}"));
    assert!(!c.correlate(at(&clock, ev("a"))).unwrap().skip);
    let first = clock.now();
    assert!(c.correlate(at(&clock, ev("b"))).unwrap().skip);
    clock.advance(Duration::from_secs(1));
    assert!(c.correlate(at(&clock, ev("b"))).unwrap().skip);
    clock.advance(Duration::from_secs(300));
    // The bucket refilled: the third "b" passes, a repeat of an event never written.
    let r = c.correlate(at(&clock, ev("b"))).unwrap();
    assert!(!r.skip);
    assert!(r.patch.is_none(), "created, not patched");
    assert_eq!(r.event.count, Some(3));
    assert_eq!(r.event.first_timestamp, Some(Time(first)));
    assert_eq!(r.event.last_timestamp, Some(Time(clock.now())));
    assert_eq!(r.carried, 2);
    c.update_state(&r.event);
    // From now on it is patched.
    clock.advance(Duration::from_secs(300));
    let r = c.correlate(at(&clock, ev("b"))).unwrap();
    assert!(!r.skip && r.patch.is_some());
    assert_eq!(r.event.count, Some(4));
}

#[test]
fn trailing_flush_is_cleared_by_a_later_write_and_off_when_disabled() {
    let (clock, mut c) = fake(CorrelatorOptions {
        burst_size: 1,
        ..Default::default()
    });
    let e = duplicates(1).remove(0);
    assert!(!c.correlate(at(&clock, e.clone())).unwrap().skip);
    assert!(c.correlate(at(&clock, e.clone())).unwrap().skip);
    assert_eq!(c.pending_flushes(), 1);
    clock.advance(Duration::from_secs(301));
    let r = c.correlate(at(&clock, e.clone())).unwrap();
    assert!(!r.skip);
    assert_eq!(r.event.count, Some(3));
    assert_eq!(
        c.pending_flushes(),
        0,
        "the write carried the skipped count"
    );
    assert_eq!(c.next_flush_at(), None);

    let (clock, mut c) = fake(CorrelatorOptions {
        burst_size: 1,
        trailing_flush: None,
        ..Default::default()
    });
    assert!(!c.correlate(at(&clock, e.clone())).unwrap().skip);
    assert!(c.correlate(at(&clock, e.clone())).unwrap().skip);
    assert_eq!(c.pending_flushes(), 0);
    assert_eq!(c.next_flush_at(), None);
    clock.advance(Duration::from_secs(301));
    assert!(c.take_due_flushes().is_empty());
}

#[test]
fn trailing_flushes_are_bounded_and_evictions_counted() {
    let (clock, mut c) = fake(CorrelatorOptions {
        burst_size: 1,
        trailing_flush: Some(TrailingFlushOptions {
            max_keys: 2,
            ..Default::default()
        }),
        ..Default::default()
    });
    let ev = |reason: &str| make_event(reason, "m", reference("spec.containers{a}"));
    assert!(!c.correlate(at(&clock, ev("a"))).unwrap().skip);
    for r in ["b", "c", "d"] {
        assert!(c.correlate(at(&clock, ev(r))).unwrap().skip);
    }
    assert_eq!(c.pending_flushes(), 2);
    assert_eq!(c.stats().flush_evictions, 1);
    // Both are due after the quiet time, but the trailing budget (2 keys per 540 s, one
    // token at a time) lets one go now: the least recently skipped key first.
    clock.advance(Duration::from_secs(60));
    let f = c.take_due_flushes();
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].event.reason.as_deref(), Some("c"));
    assert!(f[0].patch.is_none(), "never written: a create");
    assert_eq!(f[0].event.count, Some(1));
    assert_eq!(c.pending_flushes(), 1);
    let wait = elapsed(clock.now(), c.next_flush_at().unwrap());
    assert!(
        wait.abs_diff(Duration::from_secs(270)) < Duration::from_millis(1),
        "{wait:?}"
    );
    clock.advance(Duration::from_secs(269));
    assert!(
        c.take_due_flushes().is_empty(),
        "within the trailing budget"
    );
    clock.advance(Duration::from_secs(2));
    let f = c.take_due_flushes();
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].event.reason.as_deref(), Some("d"));
    assert_eq!(c.next_flush_at(), None);
}

#[test]
fn trailing_flush_of_a_combined_event() {
    let (clock, mut c) = fake(CorrelatorOptions {
        burst_size: 9,
        ..Default::default()
    });
    for s in similar_events(9) {
        assert!(!c.correlate(at(&clock, s)).unwrap().skip);
    }
    // The 10th distinct message is aggregated, and the bucket is empty.
    let r = c.correlate(at(&clock, similar_event())).unwrap();
    assert!(r.skip && r.aggregated);
    let r = c
        .correlate(at(&clock, similar_events(11).remove(10)))
        .unwrap();
    assert!(r.skip && r.aggregated);
    assert_eq!(c.pending_flushes(), 1);
    clock.advance(Duration::from_secs(60));
    let f = c.take_due_flushes();
    assert_eq!(f.len(), 1);
    assert!(f[0].aggregated);
    assert_eq!(f[0].event.count, Some(2));
    assert_eq!(
        f[0].event.message.as_deref(),
        Some("(combined from similar events): similar message-10-similar message")
    );
    // Both occurrences of the combined event were held back: it is created, not patched.
    assert!(f[0].patch.is_none());
    assert_eq!(f[0].carried, 2);
}

/// A combined event counts every occurrence its inputs stand for (the recorder's queue may
/// have merged several into one).
#[test]
fn a_combined_event_counts_merged_inputs() {
    let (clock, mut c) = fake(CorrelatorOptions::default());
    for s in similar_events(9) {
        assert!(!c.correlate(at(&clock, s)).unwrap().aggregated);
    }
    let mut merged = similar_event();
    merged.count = Some(3);
    let r = c.correlate(at(&clock, merged)).unwrap();
    assert!(r.aggregated && !r.skip);
    assert_eq!(r.event.count, Some(3));
    c.update_state(&r.event);
    let mut merged = similar_events(11).remove(10);
    merged.count = Some(4);
    let r = c.correlate(at(&clock, merged)).unwrap();
    assert!(r.aggregated);
    assert_eq!(r.event.count, Some(7));
}

/// `similar_messages_kept`: the combined event carries a bounded sample of the messages
/// folded into it, with a count each, on its create and in its one-request patch.
#[test]
fn similar_messages_are_kept_on_the_combined_event() {
    let (clock, mut c) = fake(CorrelatorOptions {
        similar_messages_kept: 2,
        ..Default::default()
    });
    let all = similar_events(13);
    for s in &all[..9] {
        let r = c.correlate(at(&clock, s.clone())).unwrap();
        assert!(!r.aggregated);
        assert_eq!(r.event.metadata.annotations, None);
    }
    let annotation = |r: &CorrelateResult| {
        let a = r.event.metadata.annotations.as_ref().expect("annotated");
        serde_json::from_str::<serde_json::Value>(&a[SIMILAR_MESSAGES_ANNOTATION]).unwrap()
    };
    let r = c.correlate(at(&clock, all[9].clone())).unwrap();
    assert!(r.aggregated && r.patch.is_none());
    let m9 = all[9].message.clone().unwrap();
    assert_eq!(
        annotation(&r),
        serde_json::json!({"kept": [{"message": m9, "count": 1}], "others": 0})
    );
    c.update_state(&r.event);
    let mut results = Vec::new();
    for s in &all[10..13] {
        let r = c.correlate(at(&clock, s.clone())).unwrap();
        c.update_state(&r.event);
        results.push(r);
    }
    let last = results.last().unwrap();
    let m10 = all[10].message.clone().unwrap();
    let expected = serde_json::json!({
        "kept": [{"message": m9, "count": 1}, {"message": m10, "count": 1}],
        "others": 2,
    });
    assert_eq!(annotation(last), expected);
    assert_eq!(last.event.count, Some(4), "kept counts + others = count");
    let patch: serde_json::Value = serde_json::from_slice(last.patch.as_ref().unwrap()).unwrap();
    assert_eq!(patch["count"], 4);
    let value = patch["metadata"]["annotations"][SIMILAR_MESSAGES_ANNOTATION]
        .as_str()
        .unwrap();
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(value).unwrap(),
        expected
    );
    // Off (the default): no annotation, client-go's patch.
    let (clock, mut c) = fake(CorrelatorOptions::default());
    let mut last = None;
    for s in all {
        let r = c.correlate(at(&clock, s)).unwrap();
        c.update_state(&r.event);
        last = Some(r);
    }
    let last = last.unwrap();
    assert_eq!(last.event.metadata.annotations, None);
    let patch: serde_json::Value = serde_json::from_slice(last.patch.as_ref().unwrap()).unwrap();
    assert!(patch.get("metadata").is_none(), "{patch}");
}

// ---- property: counts never decrease ----

#[derive(Debug, Clone)]
enum Step {
    Event {
        obj: u8,
        reason: u8,
        msg: u8,
        count: i32,
    },
    Advance(u16),
    LateWrite {
        back: u8,
        lower_by: i32,
    },
    Flush,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (0u8..3, 0u8..2, 0u8..12, 0i32..4)
            .prop_map(|(obj, reason, msg, count)| Step::Event { obj, reason, msg, count }),
        2 => (0u16..400).prop_map(Step::Advance),
        2 => (0u8..8, 0i32..5).prop_map(|(back, lower_by)| Step::LateWrite { back, lower_by }),
        1 => Just(Step::Flush),
    ]
}

fn dedup_key_of(r: &CorrelateResult) -> Vec<u8> {
    let mut k = vec![u8::from(r.aggregated)];
    if r.aggregated {
        let mut local = Vec::new();
        aggregate_by_reason(
            &r.event,
            &mut KeyBuilder::new(&mut k),
            &mut KeyBuilder::new(&mut local),
        );
    } else {
        event_key(&r.event, &mut KeyBuilder::new(&mut k));
    }
    k
}

fn check_not_lower(
    r: &CorrelateResult,
    seen: &mut HashMap<Vec<u8>, i32>,
) -> Result<(), TestCaseError> {
    let count = r.event.count.unwrap_or(0);
    let key = dedup_key_of(r);
    if let Some(&before) = seen.get(&key) {
        prop_assert!(count >= before, "count went from {} to {}", before, count);
    }
    seen.insert(key, count);
    Ok(())
}

proptest! {
    #[test]
    fn counts_per_dedup_key_never_decrease(steps in proptest::collection::vec(step(), 1..300),
                                           burst in 1u32..6) {
        let (clock, mut c) = fake(CorrelatorOptions { burst_size: burst, ..Default::default() });
        let mut seen: HashMap<Vec<u8>, i32> = HashMap::new();
        let mut written: Vec<Event> = Vec::new();
        for s in steps {
            match s {
                Step::Event { obj, reason, msg, count } => {
                    let mut r = reference("spec.containers{a}");
                    r.name = Some(format!("pod-{obj}"));
                    let mut e = make_event(&format!("r{reason}"), &format!("m{msg}"), r);
                    e.count = Some(count);
                    let res = c.correlate(at(&clock, e)).unwrap();
                    if !res.skip {
                        check_not_lower(&res, &mut seen)?;
                        c.update_state(&res.event);
                        written.push(res.event);
                    }
                }
                Step::Advance(secs) => clock.advance(Duration::from_secs(u64::from(secs))),
                Step::LateWrite { back, lower_by } => {
                    // A write that completes late, reporting an older (lower) count.
                    if let Some(w) = written.iter().rev().nth(usize::from(back)) {
                        let mut w = w.clone();
                        w.count = Some(w.count.unwrap_or(0) - lower_by);
                        c.update_state(&w);
                    }
                }
                Step::Flush => {
                    for res in c.take_due_flushes() {
                        check_not_lower(&res, &mut seen)?;
                        c.update_state(&res.event);
                    }
                }
            }
        }
    }
}

proptest! {
    /// The default key functions take a shortcut (the spam and event keys are copied from the
    /// aggregate key, repeated keys are not hashed again); the same functions handed in as
    /// the user's own go the general way. Both must give the same results, step by step,
    /// also with tiny caches (evictions) and small aggregation limits.
    #[test]
    fn default_key_functions_behave_the_same_as_the_same_functions_given_explicitly(
        steps in proptest::collection::vec(step(), 1..300),
        burst in 1u32..6,
        lru in 1usize..6,
        max_events in 1usize..5,
    ) {
        let options = CorrelatorOptions {
            burst_size: burst,
            lru_cache_size: lru,
            max_events,
            ..Default::default()
        };
        let explicit = CorrelatorOptions {
            key_func: Arc::new(aggregate_by_reason),
            spam_key_func: Arc::new(herald_runtime::record::correlator::spam_key),
            ..options.clone()
        };
        let (clock_a, mut a) = fake(options);
        let (clock_b, mut b) = fake(explicit);
        let mut written: Vec<Event> = Vec::new();
        for s in steps {
            match s {
                Step::Event { obj, reason, msg, count } => {
                    let mut r = reference(if msg % 3 == 0 { "spec.containers{a}" } else { "" });
                    r.name = Some(format!("pod-{obj}"));
                    let mut e = make_event(&format!("r{reason}"), &format!("m{msg}"), r);
                    e.count = Some(count);
                    let ra = a.correlate(at(&clock_a, e.clone())).unwrap();
                    let rb = b.correlate(at(&clock_b, e)).unwrap();
                    prop_assert_eq!(&ra, &rb);
                    if !ra.skip {
                        a.update_state(&ra.event);
                        b.update_state(&rb.event);
                        written.push(ra.event);
                    }
                }
                Step::Advance(secs) => {
                    clock_a.advance(Duration::from_secs(u64::from(secs)));
                    clock_b.advance(Duration::from_secs(u64::from(secs)));
                }
                Step::LateWrite { back, lower_by } => {
                    if let Some(w) = written.iter().rev().nth(usize::from(back)) {
                        let mut w = w.clone();
                        w.count = Some(w.count.unwrap_or(0) - lower_by);
                        a.update_state(&w);
                        b.update_state(&w);
                    }
                }
                Step::Flush => {
                    let (fa, fb) = (a.take_due_flushes(), b.take_due_flushes());
                    prop_assert_eq!(&fa, &fb);
                    for res in fa {
                        a.update_state(&res.event);
                        b.update_state(&res.event);
                    }
                }
            }
            prop_assert_eq!(a.stats(), b.stats());
            prop_assert_eq!(a.cache_sizes(), b.cache_sizes());
        }
    }
}

#[test]
fn correlator_and_options_can_move_between_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<EventCorrelator>();
    send_sync::<CorrelatorOptions>();
}
