//! Realistic storms with default options, through `EventBroadcaster` into `MemorySink` on
//! paused tokio time: every property of `storm_support` (issue 26) holds for each.

mod storm_support;

use std::sync::Arc;
use std::time::Duration;

use herald_runtime::record::MemorySink;
use storm_support::{CallLog, Fault, FaultFn, Scenario};

async fn run_in_memory(scenario: Scenario, faults: Option<FaultFn>) -> storm_support::Run {
    let store = MemorySink::new();
    let log = CallLog::new(store.clone(), faults);
    let fetch = || {
        let store = store.clone();
        async move { store.events() }
    };
    storm_support::run(scenario, log, fetch).await
}

/// 200 unschedulable pods whose FailedScheduling messages keep changing: the aggregator
/// combines them and the spam filter limits each pod.
#[tokio::test(start_paused = true)]
async fn aggregated_storm_over_many_objects() {
    let run = run_in_memory(Scenario::aggregation(200, 20), None).await;
    run.check();
    let combined = run
        .stored
        .iter()
        .filter(|e| {
            e.message
                .as_deref()
                .is_some_and(|m| m.starts_with(herald_runtime::record::COMBINED_MESSAGE_PREFIX))
        })
        .count();
    assert_eq!(combined, 200, "one combined event per pod");
    assert!(
        run.stats.sinks[0].trailing_flushes >= 200,
        "{:?}",
        run.stats
    );
}

/// One object, several reasons under one spam key (one of which stops early) plus the Normal
/// events of its restart cycle.
#[tokio::test(start_paused = true)]
async fn one_object_with_several_reasons() {
    let run = run_in_memory(Scenario::several_reasons(1, 30), None).await;
    run.check();
    // BackOff, Unhealthy, FailedMount, Killing, Pulled, Created, Started: each one stored
    // event, each with held-back occurrences written once after the storm.
    assert_eq!(run.stored.len(), 7, "{:?}", run.stored);
    assert_eq!(run.stats.sinks[0].trailing_flushes, 7, "{:?}", run.stats);
}

/// A controller's hot loop of identical events, recorded faster than the pipeline takes them
/// (the queue merges them).
#[tokio::test(start_paused = true)]
async fn hot_loop_of_identical_events() {
    let run = run_in_memory(Scenario::hot_loop(3, 20, 10), None).await;
    run.check();
    assert!(run.stats.merged > 0, "{:?}", run.stats);
    assert_eq!(run.stored.len(), 3);
}

/// All three at once, while the sink answers every third call 503 and lets every seventh
/// time out (30 s, then a transport error) for the first 15 minutes of a 20 minute storm.
#[tokio::test(start_paused = true)]
async fn storm_with_sink_faults() {
    let scenario = Scenario::aggregation(40, 20)
        .and(Scenario::several_reasons(5, 20))
        .and(Scenario::hot_loop(2, 5, 20));
    let faults: FaultFn = Arc::new(|i, at| {
        if at >= Duration::from_secs(15 * 60) {
            None
        } else if i % 7 == 3 {
            Some(Fault::Timeout)
        } else if i % 3 == 1 {
            Some(Fault::Unavailable)
        } else {
            None
        }
    });
    let run = run_in_memory(scenario, Some(faults)).await;
    run.check();
    let s = &run.stats.sinks[0];
    assert!(s.retries > 0 && s.failed_calls > 0, "{s:?}");
}
