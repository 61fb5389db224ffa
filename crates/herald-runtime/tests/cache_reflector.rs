//! Reflector behaviour against a scripted ListerWatcher (paused tokio time).

mod cache_support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use cache_support::*;
use herald_runtime::cache::{
    BackoffOptions, Indexer, ListWatchError, Reflector, ReflectorOptions, ResourceVersionMatch,
};
use k8s_openapi::api::core::v1::ConfigMap;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

fn config() -> ReflectorOptions {
    ReflectorOptions {
        watch_list: false,
        seed: Some(42),
        ..ReflectorOptions::default()
    }
}

fn no_jitter(initial_ms: u64, max_ms: u64) -> BackoffOptions {
    BackoffOptions {
        initial: Duration::from_millis(initial_ms),
        max: Duration::from_millis(max_ms),
        factor: 2.0,
        jitter: 0.0,
        reset_after: Duration::from_secs(120),
    }
}

type Errors = Arc<Mutex<Vec<ListWatchError>>>;

fn start(
    lw: &FakeLw,
    cfg: ReflectorOptions,
) -> (
    Indexer<ConfigMap>,
    CancellationToken,
    Errors,
    tokio::task::JoinHandle<()>,
) {
    let store: Indexer<ConfigMap> = Indexer::new();
    let errors: Errors = Arc::default();
    let e2 = errors.clone();
    let r = Reflector::new(Arc::new(lw.clone()), store.clone(), cfg)
        .with_watch_error_handler(Arc::new(move |e| e2.lock().unwrap().push(e.clone())));
    let token = CancellationToken::new();
    let task = tokio::spawn(r.run(token.clone()));
    (store, token, errors, task)
}

fn names(store: &Indexer<ConfigMap>) -> Vec<String> {
    let mut v: Vec<String> = store
        .list()
        .iter()
        .map(|c| format!("{}@{}", c.metadata.name.clone().unwrap(), rv_of(c)))
        .collect();
    v.sort();
    v
}

#[tokio::test(start_paused = true)]
async fn first_list_at_zero_paginated_then_watch_from_list_rv() {
    let lw = FakeLw::new();
    lw.push_page(vec![cm("ns", "a", "1")], "5", None);
    lw.push_watch(vec![added(cm("ns", "b", "6")), Step::Hang]);
    let (store, token, _, task) = start(&lw, config());
    assert!(eventually(100, || store.len() == 2).await);
    let lists = lw.lists();
    assert_eq!(lists.len(), 1);
    assert_eq!(lists[0].resource_version, "0");
    assert_eq!(lists[0].limit, Some(500));
    assert_eq!(
        lists[0].resource_version_match,
        None::<ResourceVersionMatch>
    );
    let watches = lw.watches();
    assert_eq!(watches.len(), 1);
    assert_eq!(watches[0].resource_version, "5");
    assert!(watches[0].allow_bookmarks);
    assert!(!watches[0].send_initial_events);
    assert!(
        (300..600).contains(&watches[0].timeout_seconds),
        "{}",
        watches[0].timeout_seconds
    );
    assert_eq!(store.last_sync_resource_version(), "6");
    token.cancel();
    task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn pagination_follows_continue_tokens_and_clears_rv() {
    let lw = FakeLw::new();
    let items: Vec<ConfigMap> = (0..10).map(|i| cm("ns", &format!("o{i}"), "1")).collect();
    lw.push_page(items[0..4].to_vec(), "10", Some("c1"));
    lw.push_page(items[4..8].to_vec(), "10", Some("c2"));
    lw.push_page(items[8..10].to_vec(), "10", None);
    let cfg = ReflectorOptions {
        page_size: Some(4),
        ..config()
    };
    let (store, token, _, task) = start(&lw, cfg);
    assert!(eventually(100, || store.len() == 10).await);
    let lists = lw.lists();
    assert_eq!(lists.len(), 3);
    assert!(lists.iter().all(|l| l.limit == Some(4)));
    assert_eq!(lists[0].continue_token, None);
    assert_eq!(lists[1].continue_token.as_deref(), Some("c1"));
    assert_eq!(lists[2].continue_token.as_deref(), Some("c2"));
    assert_eq!(lists[1].resource_version, "");
    assert_eq!(lw.watches()[0].resource_version, "10");
    token.cancel();
    task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn relist_after_410_mid_watch_uses_last_synced_rv_unpaginated() {
    let lw = FakeLw::new();
    lw.push_page(vec![cm("ns", "a", "1")], "10", None);
    lw.push_watch(vec![modified(cm("ns", "a", "11")), Step::Err(expired())]);
    lw.push_page(vec![cm("ns", "a", "12"), cm("ns", "b", "12")], "12", None);
    lw.push_watch(vec![Step::Hang]);
    let (store, token, errors, task) = start(&lw, config());
    assert!(eventually(1000, || lw.lists().len() == 2 && store.len() == 2).await);
    assert_eq!(lw.list_rvs(), vec!["0", "11"]);
    // A relist at a known RV is not paginated so that the watch cache can serve it.
    assert_eq!(lw.lists()[1].limit, None);
    assert_eq!(names(&store), vec!["a@12", "b@12"]);
    assert_eq!(lw.watches()[1].resource_version, "12");
    assert!(matches!(
        errors.lock().unwrap()[0],
        ListWatchError::Expired(_)
    ));
    token.cancel();
    task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn expired_list_rv_retries_at_once_with_quorum_read() {
    let lw = FakeLw::new();
    lw.push_page(vec![cm("ns", "a", "1")], "10", None);
    lw.push_watch(vec![
        Step::Sleep(Duration::from_secs(2)),
        Step::Err(expired()),
    ]);
    lw.push_list_err(expired());
    lw.push_page(vec![cm("ns", "b", "20")], "20", None);
    let (store, token, _, task) = start(&lw, config());
    assert!(eventually(1000, || lw.lists().len() == 3).await);
    let times = lw.list_times();
    assert_eq!(lw.list_rvs(), vec!["0", "10", ""]);
    // The quorum-read retry is immediate (no backoff between the 2nd and 3rd list).
    assert_eq!(times[2], times[1]);
    // A quorum read is paginated again.
    assert_eq!(lw.lists()[2].limit, Some(500));
    assert!(eventually(100, || names(&store) == vec!["b@20"]).await);
    token.cancel();
    task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn too_large_rv_in_all_three_encodings_triggers_quorum_read() {
    let encodings = [
        ListWatchError::from_status(504, "Timeout", "x", [("ResourceVersionTooLarge", "")]),
        ListWatchError::from_status(504, "Timeout", "x", [("", "Too large resource version")]),
        ListWatchError::from_status(504, "Timeout", "Too large resource version: 30", []),
    ];
    for e in encodings {
        assert!(
            matches!(e, ListWatchError::TooLargeResourceVersion(_)),
            "{e:?}"
        );
        let lw = FakeLw::new();
        lw.push_page(vec![cm("ns", "a", "1")], "20", None);
        lw.push_watch(vec![
            Step::Sleep(Duration::from_secs(2)),
            Step::Err(expired()),
        ]);
        lw.push_list_err(e);
        lw.push_page(vec![cm("ns", "a", "30")], "30", None);
        let (_store, token, _, task) = start(&lw, config());
        assert!(eventually(1000, || lw.lists().len() == 3).await);
        assert_eq!(lw.list_rvs(), vec!["0", "20", ""]);
        token.cancel();
        task.await.unwrap();
    }
}

#[tokio::test(start_paused = true)]
async fn expired_continue_token_falls_back_to_full_list_at_original_rv() {
    let lw = FakeLw::new();
    lw.push_page(vec![cm("ns", "a", "1")], "10", None);
    lw.push_watch(vec![
        Step::Sleep(Duration::from_secs(2)),
        Step::Err(expired()),
    ]);
    // Relist at "10" with a fixed page size: the continue page expires.
    lw.push_page(vec![cm("ns", "a", "1")], "10", Some("c1"));
    lw.push_list_err(expired());
    lw.push_page(vec![cm("ns", "a", "1"), cm("ns", "z", "9")], "10", None);
    let cfg = ReflectorOptions {
        page_size: Some(1),
        ..config()
    };
    let (store, token, _, task) = start(&lw, cfg);
    assert!(eventually(1000, || lw.lists().len() == 4 && store.len() == 2).await);
    let lists = lw.lists();
    assert_eq!(lists[2].continue_token.as_deref(), Some("c1"));
    assert_eq!(lists[3].resource_version, "10");
    assert_eq!(lists[3].limit, None);
    assert_eq!(lists[3].continue_token, None);
    assert_eq!(names(&store), vec!["a@1", "z@9"]);
    token.cancel();
    task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn watch_closing_at_once_is_a_very_short_watch_and_relists_after_backoff() {
    let lw = FakeLw::new();
    lw.push_page(vec![cm("ns", "a", "1")], "10", None);
    lw.push_watch(vec![]); // closes immediately, no events
    lw.push_page(vec![cm("ns", "a", "1")], "10", None);
    let (_store, token, errors, task) = start(&lw, config());
    assert!(eventually(1000, || lw.lists().len() == 2).await);
    let e = errors.lock().unwrap()[0].clone();
    assert!(matches!(e, ListWatchError::VeryShortWatch { .. }), "{e:?}");
    let times = lw.list_times();
    let gap = times[1] - times[0];
    // One default backoff step: 800 ms plus up to 100 % jitter.
    assert!(
        gap >= Duration::from_millis(800) && gap < Duration::from_millis(1600),
        "{gap:?}"
    );
    assert_eq!(lw.list_rvs(), vec!["0", "10"]);
    token.cancel();
    task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn normal_watch_end_rewatches_from_last_rv_without_relist() {
    let lw = FakeLw::new();
    lw.push_page(vec![cm("ns", "a", "1")], "10", None);
    lw.push_watch(vec![
        modified(cm("ns", "a", "11")),
        Step::Sleep(Duration::from_secs(300)),
        bookmark("15", false),
    ]);
    lw.push_watch(vec![deleted(cm("ns", "a", "16")), Step::Hang]);
    let (store, token, _, task) = start(&lw, config());
    assert!(eventually(100_000, || lw.watches().len() == 2 && store.is_empty()).await);
    assert_eq!(lw.lists().len(), 1);
    let w = lw.watches();
    // The bookmark moved the resume point.
    assert_eq!(w[1].resource_version, "15");
    assert_ne!(w[0].timeout_seconds, 0);
    assert_eq!(store.last_sync_resource_version(), "16");
    token.cancel();
    task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn corrupt_object_in_watch_relists_and_corrupt_list_items_are_skipped() {
    let lw = FakeLw::new();
    lw.push_page(vec![cm("ns", "a", "1"), cm("ns", "b", "1")], "10", None);
    lw.push_watch(vec![
        modified(cm("ns", "a", "11")),
        Step::Err(ListWatchError::Decode(
            "invalid type: string, expected a map".into(),
        )),
    ]);
    let mut p = page(vec![cm("ns", "a", "12")], "12", None);
    p.corrupt.push("b: invalid type".into());
    lw.push_list(ListScript::Page(p));
    let (store, token, errors, task) = start(&lw, config());
    assert!(eventually(1000, || lw.lists().len() == 2 && store.len() == 1).await);
    assert_eq!(lw.list_rvs(), vec!["0", "11"]);
    assert_eq!(names(&store), vec!["a@12"]);
    let errs = errors.lock().unwrap().clone();
    assert_eq!(
        errs.iter()
            .filter(|e| matches!(e, ListWatchError::Decode(_)))
            .count(),
        2,
        "{errs:?}"
    );
    token.cancel();
    task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn too_many_requests_and_refused_retry_the_watch_without_relist() {
    let lw = FakeLw::new();
    lw.push_page(vec![cm("ns", "a", "1")], "10", None);
    let tmr = || ListWatchError::TooManyRequests {
        message: "slow down".into(),
        retry_after: None,
    };
    lw.push_watch_err(tmr());
    lw.push_watch_err(ListWatchError::ConnectionRefused("refused".into()));
    lw.push_watch(vec![Step::Err(tmr())]);
    lw.push_watch_err(tmr());
    let cfg = ReflectorOptions {
        backoff: no_jitter(10, 100),
        ..config()
    };
    let (_store, token, _, task) = start(&lw, cfg);
    assert!(eventually(1000, || lw.watches().len() == 5).await);
    assert_eq!(lw.lists().len(), 1);
    assert!(lw.watches().iter().all(|w| w.resource_version == "10"));
    let t = lw.watch_times();
    let gaps: Vec<u128> = t.windows(2).map(|w| (w[1] - w[0]).as_millis()).collect();
    assert_eq!(gaps, vec![10, 20, 40, 80]);
    token.cancel();
    task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn list_failures_back_off_exponentially_to_the_cap() {
    let lw = FakeLw::new(); // every list fails: script exhausted
    let cfg = ReflectorOptions {
        backoff: no_jitter(10, 100),
        ..config()
    };
    let (_store, token, errors, task) = start(&lw, cfg);
    assert!(eventually(1000, || lw.lists().len() >= 7).await);
    let t = lw.list_times();
    let gaps: Vec<u128> = t
        .windows(2)
        .take(6)
        .map(|w| (w[1] - w[0]).as_millis())
        .collect();
    assert_eq!(gaps, vec![10, 20, 40, 80, 100, 100]);
    assert!(matches!(
        errors.lock().unwrap()[0],
        ListWatchError::Transport(_)
    ));
    token.cancel();
    task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn default_backoff_with_jitter_stays_within_client_go_bounds() {
    let lw = FakeLw::new();
    let (_store, token, _, task) = start(&lw, config());
    assert!(eventually(100_000, || lw.lists().len() >= 12).await);
    let t = lw.list_times();
    let gaps: Vec<Duration> = t.windows(2).map(|w| w[1] - w[0]).collect();
    // 800 ms, 1.6 s, ... each plus up to 100 % jitter (six steps stay within the 2 min window).
    let mut expect = Duration::from_millis(800);
    for gap in &gaps[..6] {
        assert!(*gap >= expect && *gap < expect * 2, "{gap:?} vs {expect:?}");
        expect *= 2;
    }
    // The 7th step is capped at 30 s (+ jitter) unless the 2-minute periodic reset fired.
    assert!(gaps[6] < Duration::from_secs(60), "{:?}", gaps[6]);
    // The sequence restarts at 800 ms once 2 min have passed since it started.
    assert!(
        gaps[6..].iter().any(|g| *g < Duration::from_millis(1600)),
        "no reset: {gaps:?}"
    );
    token.cancel();
    task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn streaming_list_then_same_stream_carries_on() {
    let lw = FakeLw::with_watch_list();
    lw.push_watch(vec![
        added(cm("ns", "a", "1")),
        added(cm("ns", "b", "2")),
        modified(cm("ns", "a", "3")),
        deleted(cm("ns", "b", "4")),
        bookmark("5", false),
        added(cm("ns", "c", "5")),
        bookmark("6", true),
        modified(cm("ns", "c", "7")),
        Step::Hang,
    ]);
    let cfg = ReflectorOptions {
        watch_list: true,
        ..config()
    };
    let (store, token, _, task) = start(&lw, cfg);
    assert!(eventually(100, || store.last_sync_resource_version() == "7").await);
    assert_eq!(names(&store), vec!["a@3", "c@7"]);
    assert!(lw.lists().is_empty());
    let w = lw.watches();
    assert_eq!(w.len(), 1);
    assert_eq!(w[0].resource_version, "");
    assert!(w[0].send_initial_events && w[0].allow_bookmarks);
    token.cancel();
    task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn streaming_list_rejected_falls_back_to_list_and_is_not_retried() {
    let lw = FakeLw::with_watch_list();
    lw.push_watch_err(ListWatchError::Invalid {
        code: 422,
        message: "sendInitialEvents is forbidden".into(),
    });
    lw.push_page(vec![cm("ns", "a", "1")], "10", None);
    lw.push_watch(vec![
        Step::Sleep(Duration::from_secs(2)),
        Step::Err(expired()),
    ]);
    lw.push_page(vec![cm("ns", "a", "1")], "10", None);
    let cfg = ReflectorOptions {
        watch_list: true,
        ..config()
    };
    let (store, token, _, task) = start(&lw, cfg);
    assert!(eventually(1000, || lw.lists().len() == 2).await);
    assert_eq!(store.len(), 1);
    let w = lw.watches();
    assert!(w[0].send_initial_events);
    assert!(w[1..].iter().all(|w| !w.send_initial_events));
    token.cancel();
    task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn streaming_list_ignored_by_server_falls_back_after_idle_timeout() {
    let lw = FakeLw::with_watch_list();
    // An old server: sends the current objects as ADDED but never the terminal bookmark.
    lw.push_watch(vec![added(cm("ns", "a", "1")), Step::Hang]);
    lw.push_page(vec![cm("ns", "a", "1")], "10", None);
    let cfg = ReflectorOptions {
        watch_list: true,
        ..config()
    };
    let started = Instant::now();
    let (store, token, errors, task) = start(&lw, cfg);
    assert!(eventually(10_000, || store.len() == 1).await);
    assert!(started.elapsed() >= Duration::from_secs(10));
    assert_eq!(lw.list_rvs(), vec!["0"]);
    assert!(matches!(
        errors.lock().unwrap()[0],
        ListWatchError::WatchListUnsupported(_)
    ));
    token.cancel();
    task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn streaming_list_410_retries_with_quorum_rv() {
    let lw = FakeLw::with_watch_list();
    lw.push_watch(vec![
        added(cm("ns", "a", "1")),
        bookmark("5", true),
        Step::Err(expired()),
    ]);
    // Relist by streaming from the last synced RV: expired, so again from "".
    lw.push_watch_err(expired());
    lw.push_watch(vec![
        added(cm("ns", "b", "9")),
        bookmark("9", true),
        Step::Hang,
    ]);
    let cfg = ReflectorOptions {
        watch_list: true,
        ..config()
    };
    let (store, token, _, task) = start(&lw, cfg);
    assert!(eventually(1000, || names(&store) == vec!["b@9"]).await);
    let rvs: Vec<String> = lw
        .watches()
        .into_iter()
        .map(|w| w.resource_version)
        .collect();
    assert_eq!(rvs, vec!["", "5", ""]);
    token.cancel();
    task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn watch_timeouts_are_randomized_between_5_and_10_minutes() {
    let lw = FakeLw::new();
    lw.push_page(vec![], "10", None);
    for _ in 0..20 {
        lw.push_watch(vec![Step::Sleep(Duration::from_secs(2))]);
    }
    let (_store, token, _, task) = start(&lw, config());
    assert!(eventually(10_000, || lw.watches().len() >= 20).await);
    let t: Vec<u32> = lw.watches().iter().map(|w| w.timeout_seconds).collect();
    assert!(t.iter().all(|s| (300..600).contains(s)), "{t:?}");
    assert!(t.iter().any(|s| *s != t[0]), "not randomized: {t:?}");
    assert_eq!(lw.lists().len(), 1);
    token.cancel();
    task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn cancelled_before_start_calls_nothing() {
    let lw = FakeLw::new();
    let store: Indexer<ConfigMap> = Indexer::new();
    let mut r = Reflector::new(Arc::new(lw.clone()), store, config());
    let token = CancellationToken::new();
    token.cancel();
    r.list_and_watch(&token).await.unwrap();
    r.run(token).await;
    assert!(lw.lists().is_empty() && lw.watches().is_empty());
}

#[tokio::test(start_paused = true)]
async fn streaming_list_bookmark_at_zero_does_not_freeze_the_resume_point() {
    // A server whose empty store reports resourceVersion "0" on the initial-events-end
    // bookmark. The same stream then carries real changes: their RVs are the resume point
    // (only a watch *opened* from "0" starts with synthetic ADDEDs).
    let lw = FakeLw::with_watch_list();
    lw.push_watch(vec![
        bookmark("0", true),
        added(cm("ns", "a", "1")),
        added(cm("ns", "b", "2")),
        Step::Sleep(Duration::from_secs(300)),
    ]);
    lw.push_watch(vec![deleted(cm("ns", "a", "3")), Step::Hang]);
    let cfg = ReflectorOptions {
        watch_list: true,
        ..config()
    };
    let (store, token, _, task) = start(&lw, cfg);
    assert!(eventually(100_000, || lw.watches().len() == 2 && store.len() == 1).await);
    let w = lw.watches();
    assert_eq!(w[1].resource_version, "2");
    assert!(!w[1].send_initial_events);
    assert!(lw.lists().is_empty());
    assert_eq!(names(&store), vec!["b@2"]);
    token.cancel();
    task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_watch_is_never_resumed_from_zero_it_relists() {
    // A list that reports "0": the first watch from it is allowed, but when it ends with only
    // ADDEDs seen (their RVs held back) a re-watch from "0" would replay the current state and
    // miss what was deleted in between, so the reflector relists and Replace deletes it.
    let lw = FakeLw::new();
    lw.push_page(vec![], "0", None);
    lw.push_watch(vec![
        added(cm("ns", "a", "5")),
        Step::Sleep(Duration::from_secs(300)),
    ]);
    lw.push_page(vec![cm("ns", "c", "9")], "9", None);
    lw.push_watch(vec![Step::Hang]);
    let (store, token, _, task) = start(&lw, config());
    assert!(eventually(100_000, || lw.lists().len() == 2 && lw.watches().len() == 2).await);
    let w = lw.watches();
    assert_eq!(w[0].resource_version, "0");
    assert_eq!(w[1].resource_version, "9", "no watch from 0 in between");
    assert_eq!(names(&store), vec!["c@9"]);
    token.cancel();
    task.await.unwrap();
}

/// A reflector over `lw` that starts from `rv` ([`Reflector::resume_from`]).
fn start_resumed(
    lw: &FakeLw,
    rv: &str,
) -> (
    Indexer<ConfigMap>,
    CancellationToken,
    tokio::task::JoinHandle<()>,
) {
    let store: Indexer<ConfigMap> = Indexer::new();
    let r = Reflector::new(Arc::new(lw.clone()), store.clone(), config()).resume_from(rv);
    let want = if rv == "0" { "" } else { rv };
    assert_eq!(r.last_sync_resource_version(), want);
    let token = CancellationToken::new();
    let task = tokio::spawn(r.run(token.clone()));
    (store, token, task)
}

#[tokio::test(start_paused = true)]
async fn resume_from_watches_first_without_listing() {
    let lw = FakeLw::new();
    lw.push_watch(vec![modified(cm("ns", "a", "31")), Step::Hang]);
    let (store, token, task) = start_resumed(&lw, "30");
    assert!(eventually(100, || store.len() == 1).await);
    assert!(lw.lists().is_empty(), "{:?}", lw.lists());
    let watches = lw.watches();
    assert_eq!(watches.len(), 1);
    assert_eq!(watches[0].resource_version, "30");
    assert!(watches[0].allow_bookmarks);
    assert_eq!(names(&store), vec!["a@31"]);
    token.cancel();
    task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn resume_from_a_gone_revision_relists_from_it() {
    let lw = FakeLw::new();
    lw.push_watch_err(expired());
    lw.push_page(vec![cm("ns", "a", "40")], "45", None);
    lw.push_watch(vec![Step::Hang]);
    let (store, token, task) = start_resumed(&lw, "30");
    assert!(eventually(1000, || lw.watches().len() == 2).await);
    assert_eq!(lw.list_rvs(), vec!["30"]);
    assert_eq!(names(&store), vec!["a@40"]);
    assert_eq!(lw.watches()[1].resource_version, "45");
    token.cancel();
    task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn resume_from_nothing_lists_first() {
    let lw = FakeLw::new();
    lw.push_page(vec![cm("ns", "a", "1")], "5", None);
    lw.push_watch(vec![Step::Hang]);
    let (_, token, task) = start_resumed(&lw, "0");
    assert!(eventually(100, || lw.watches().len() == 1).await);
    assert_eq!(lw.list_rvs(), vec!["0"]);
    token.cancel();
    task.await.unwrap();
}
