//! SharedInformer: handlers, sync tracking, resync, relists, and bounded handler buffers.

mod cache_support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cache_support::*;
use futures::StreamExt;
use herald_runtime::cache::{
    DeletedObject, EventHandler, InformerError, InformerOptions, ListWatchError, ReflectorOptions,
    SharedInformer, WatchEvent, object_key,
};
use k8s_openapi::api::core::v1::ConfigMap;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

fn config() -> InformerOptions {
    InformerOptions {
        reflector: ReflectorOptions {
            watch_list: false,
            seed: Some(7),
            ..ReflectorOptions::default()
        },
        ..InformerOptions::default()
    }
}

fn desc(c: &ConfigMap) -> String {
    format!("{}@{}", object_key(c), rv_of(c))
}

/// Records every notification as a line; optionally waits for a gate before each one.
#[derive(Clone, Default)]
struct Rec {
    log: Arc<Mutex<Vec<String>>>,
    gate: Option<watch::Receiver<bool>>,
}

impl Rec {
    fn gated() -> (Self, watch::Sender<bool>) {
        let (tx, rx) = watch::channel(false);
        (
            Self {
                log: Arc::default(),
                gate: Some(rx),
            },
            tx,
        )
    }
    async fn pass(&self) {
        if let Some(g) = &self.gate {
            let mut g = g.clone();
            let _ = g.wait_for(|open| *open).await;
        }
    }
    fn lines(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
    fn len(&self) -> usize {
        self.log.lock().unwrap().len()
    }
}

impl EventHandler<ConfigMap> for Rec {
    async fn on_add(&self, obj: Arc<ConfigMap>, initial: bool) {
        self.pass().await;
        let tag = if initial { " initial" } else { "" };
        self.log
            .lock()
            .unwrap()
            .push(format!("add {}{tag}", desc(&obj)));
    }
    async fn on_update(&self, old: Arc<ConfigMap>, new: Arc<ConfigMap>) {
        self.pass().await;
        self.log.lock().unwrap().push(format!(
            "update {} {}->{}",
            object_key(new.as_ref()),
            rv_of(&old),
            rv_of(&new)
        ));
    }
    async fn on_delete(&self, obj: DeletedObject<ConfigMap>) {
        self.pass().await;
        let line = match &obj {
            DeletedObject::Known(o) => format!("delete {}", desc(o)),
            DeletedObject::FinalStateUnknown(t) => format!(
                "delete? {}@{}",
                t.key,
                t.obj.as_ref().map(|o| rv_of(o)).unwrap_or_default()
            ),
        };
        self.log.lock().unwrap().push(line);
    }
}

fn spawn(
    inf: &SharedInformer<ConfigMap>,
) -> (
    CancellationToken,
    tokio::task::JoinHandle<Result<(), InformerError>>,
) {
    let token = CancellationToken::new();
    let task = inf.spawn(token.clone());
    (token, task)
}

#[tokio::test(start_paused = true)]
async fn initial_list_then_watch_events_reach_handlers_in_order() {
    let lw = FakeLw::new();
    lw.push_page(vec![cm("ns", "a", "1"), cm("ns", "b", "1")], "10", None);
    lw.push_watch(vec![
        // Let handlers take the initial list first: a busy handler would see the add and
        // delete of b coalesce into nothing.
        Step::Sleep(Duration::from_secs(1)),
        modified(cm("ns", "a", "11")),
        deleted(cm("ns", "b", "12")),
        added(cm("ns", "c", "13")),
        Step::Hang,
    ]);
    let inf = SharedInformer::new(lw.clone(), config());
    let rec = Rec::default();
    let reg = inf.add_event_handler(rec.clone()).unwrap();
    assert!(!reg.has_synced());
    let (token, task) = spawn(&inf);
    assert!(inf.wait_for_cache_sync().await);
    assert!(reg.wait_synced().await);
    assert!(
        eventually(1000, || rec.len() == 5).await,
        "{:?}",
        rec.lines()
    );
    assert_eq!(
        rec.lines(),
        vec![
            "add ns/a@1 initial",
            "add ns/b@1 initial",
            "update ns/a 1->11",
            "delete ns/b@12",
            "add ns/c@13"
        ]
    );
    let mut keys = inf.indexer().list_keys();
    keys.sort();
    assert_eq!(keys, vec!["ns/a", "ns/c"]);
    assert_eq!(inf.last_sync_resource_version(), "13");
    assert!(inf.lister().namespaced("ns").get("c").is_ok());
    token.cancel();
    task.await.unwrap().unwrap();
    assert!(inf.is_stopped());
}

#[tokio::test(start_paused = true)]
async fn late_handler_gets_snapshot_first_and_syncs_only_after_processing_it() {
    let lw = FakeLw::new();
    lw.push_page(vec![cm("ns", "a", "1"), cm("ns", "b", "1")], "10", None);
    lw.push_watch(vec![
        Step::Sleep(Duration::from_secs(60)),
        modified(cm("ns", "a", "11")),
        Step::Hang,
    ]);
    let inf = SharedInformer::new(lw.clone(), config());
    let (token, task) = spawn(&inf);
    assert!(inf.wait_for_cache_sync().await);
    let (rec, gate) = Rec::gated();
    let reg = inf.add_event_handler(rec.clone()).unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!reg.has_synced(), "initial adds not processed yet");
    gate.send(true).unwrap();
    assert!(reg.wait_synced().await);
    let mut first: Vec<String> = rec.lines();
    first.sort();
    assert_eq!(first, vec!["add ns/a@1 initial", "add ns/b@1 initial"]);
    assert!(eventually(10_000, || rec.len() == 3).await);
    assert_eq!(rec.lines()[2], "update ns/a 1->11");
    token.cancel();
    task.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn removed_handler_gets_nothing_more_and_removal_is_idempotent() {
    let lw = FakeLw::new();
    lw.push_page(vec![cm("ns", "a", "1")], "10", None);
    lw.push_watch(vec![
        Step::Sleep(Duration::from_secs(5)),
        modified(cm("ns", "a", "2")),
        Step::Sleep(Duration::from_secs(5)),
        modified(cm("ns", "a", "3")),
        Step::Hang,
    ]);
    let inf = SharedInformer::new(lw.clone(), config());
    let (r1, r2) = (Rec::default(), Rec::default());
    let reg1 = inf.add_event_handler(r1.clone()).unwrap();
    let reg2 = inf.add_event_handler(r2.clone()).unwrap();
    // The same handler value registered twice gives two independent registrations.
    let reg1b = inf.add_event_handler(r1.clone()).unwrap();
    assert_ne!(reg1.id(), reg1b.id());
    assert_eq!(inf.handler_count(), 3);
    reg1b.remove();
    assert_eq!(inf.handler_count(), 2);
    let (token, task) = spawn(&inf);
    assert!(eventually(10_000, || r1.len() == 2 && r2.len() == 2).await);
    reg1.remove();
    reg1.remove();
    assert_eq!(inf.handler_count(), 1);
    assert!(!reg1.wait_synced().await || reg1.is_removed());
    assert!(eventually(10_000, || r2.len() == 3).await);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(r1.lines(), vec!["add ns/a@1 initial", "update ns/a 1->2"]);
    assert_eq!(r2.lines()[2], "update ns/a 2->3");
    reg2.remove();
    assert_eq!(inf.handler_count(), 0);
    token.cancel();
    task.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn each_handler_resyncs_on_its_own_period() {
    let lw = FakeLw::new();
    lw.push_page(vec![cm("ns", "a", "1")], "10", None);
    let cfg = InformerOptions {
        resync_period: Duration::from_secs(1),
        ..config()
    };
    let inf = SharedInformer::new(lw.clone(), cfg);
    let (r0, r2, r3) = (Rec::default(), Rec::default(), Rec::default());
    inf.add_event_handler_with_resync(r0.clone(), Duration::ZERO)
        .unwrap();
    inf.add_event_handler_with_resync(r2.clone(), Duration::from_secs(2))
        .unwrap();
    inf.add_event_handler_with_resync(r3.clone(), Duration::from_secs(3))
        .unwrap();
    let (token, task) = spawn(&inf);
    assert!(inf.wait_for_cache_sync().await);
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!((r0.len(), r2.len(), r3.len()), (1, 2, 1));
    assert_eq!(r2.lines()[1], "update ns/a 1->1");
    tokio::time::sleep(Duration::from_secs(1)).await; // t = 3.5 s
    assert_eq!((r0.len(), r2.len(), r3.len()), (1, 2, 2));
    tokio::time::sleep(Duration::from_secs(1)).await; // t = 4.5 s
    assert_eq!((r0.len(), r2.len(), r3.len()), (1, 3, 2));
    token.cancel();
    task.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn resync_periods_lower_the_check_period_before_start_and_are_raised_after() {
    let lw = FakeLw::new();
    lw.push_page(vec![], "10", None);
    let cfg = InformerOptions {
        resync_period: Duration::from_secs(12 * 3600),
        ..config()
    };
    let inf = SharedInformer::new(lw.clone(), cfg);
    let secs = |s| Duration::from_secs(s);
    let regs: Vec<_> = [0, 60, 55, 5]
        .into_iter()
        .map(|s| {
            inf.add_event_handler_with_resync(Rec::default(), secs(s))
                .unwrap()
        })
        .collect();
    let got: Vec<Duration> = regs.iter().map(|r| r.resync_period()).collect();
    assert_eq!(got, vec![secs(0), secs(60), secs(55), secs(5)]);
    let tiny = inf
        .add_event_handler_with_resync(Rec::default(), Duration::from_millis(200))
        .unwrap();
    assert_eq!(tiny.resync_period(), secs(1), "raised to the 1 s minimum");
    let (token, task) = spawn(&inf);
    assert!(inf.wait_for_cache_sync().await);
    let late = inf
        .add_event_handler_with_resync(Rec::default(), secs(2))
        .unwrap();
    assert_eq!(late.resync_period(), secs(2).max(secs(1)));
    token.cancel();
    task.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn relist_after_watch_disruption_updates_and_tombstones() {
    let lw = FakeLw::new();
    lw.push_page(
        vec![
            cm("ns", "p1", "1"),
            cm("ns", "p2", "1"),
            cm("ns", "p4", "1"),
        ],
        "10",
        None,
    );
    lw.push_watch(vec![
        Step::Sleep(Duration::from_secs(2)),
        Step::Err(expired()),
    ]);
    // Relist: p2 changed, p3 new, p4 gone (its delete was missed).
    lw.push_page(
        vec![
            cm("ns", "p1", "1"),
            cm("ns", "p2", "5"),
            cm("ns", "p3", "5"),
        ],
        "20",
        None,
    );
    let cfg = InformerOptions {
        resync_period: Duration::from_secs(3600),
        ..config()
    };
    let inf = SharedInformer::new(lw.clone(), cfg);
    let (plain, resyncing) = (Rec::default(), Rec::default());
    inf.add_event_handler_with_resync(plain.clone(), Duration::ZERO)
        .unwrap();
    inf.add_event_handler(resyncing.clone()).unwrap();
    let (token, task) = spawn(&inf);
    assert!(eventually(10_000, || lw.lists().len() == 2 && plain.len() == 6).await);
    assert!(eventually(100, || resyncing.len() == 7).await);
    assert_eq!(
        plain.lines()[3..],
        ["delete? ns/p4@1", "update ns/p2 1->5", "add ns/p3@5"]
    );
    // A handler that asked for resyncs also hears about unchanged relisted objects.
    assert_eq!(
        resyncing.lines()[3..],
        [
            "delete? ns/p4@1",
            "update ns/p1 1->1",
            "update ns/p2 1->5",
            "add ns/p3@5"
        ]
    );
    let mut keys = inf.indexer().list_keys();
    keys.sort();
    assert_eq!(keys, vec!["ns/p1", "ns/p2", "ns/p3"]);
    token.cancel();
    task.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn transform_and_watch_error_hook_and_lifecycle_errors() {
    let lw = FakeLw::new();
    lw.push_list_err(ListWatchError::Internal("etcd hiccup".into()));
    lw.push_page(vec![cm("ns", "a", "1")], "10", None);
    let inf = SharedInformer::new(lw.clone(), config());
    inf.set_transform(|mut c: ConfigMap| {
        c.metadata.managed_fields = None;
        c.metadata.annotations = Some([("trimmed".to_string(), "yes".to_string())].into());
        c
    })
    .unwrap();
    let errors: Arc<Mutex<Vec<ListWatchError>>> = Arc::default();
    let e2 = errors.clone();
    inf.set_watch_error_handler(move |e| e2.lock().unwrap().push(e.clone()))
        .unwrap();
    let seen: Arc<Mutex<Vec<bool>>> = Arc::default();
    let s2 = seen.clone();
    inf.add_event_handler(herald_runtime::cache::HandlerFns::new().on_add(
        move |o: Arc<ConfigMap>, _| {
            s2.lock().unwrap().push(
                o.metadata
                    .annotations
                    .as_ref()
                    .is_some_and(|a| a.contains_key("trimmed")),
            );
        },
    ))
    .unwrap();
    let (token, task) = spawn(&inf);
    assert!(inf.wait_for_cache_sync().await);
    assert!(eventually(100, || seen.lock().unwrap().len() == 1).await);
    assert_eq!(*seen.lock().unwrap(), vec![true]);
    let cached = inf.indexer().get_by_key("ns/a").unwrap();
    assert!(
        cached
            .metadata
            .annotations
            .as_ref()
            .unwrap()
            .contains_key("trimmed")
    );
    assert!(matches!(
        errors.lock().unwrap()[0],
        ListWatchError::Internal(_)
    ));
    assert_eq!(inf.set_transform(|c| c), Err(InformerError::AlreadyStarted));
    assert_eq!(
        inf.run(CancellationToken::new()).await,
        Err(InformerError::AlreadyStarted)
    );
    token.cancel();
    task.await.unwrap().unwrap();
    let err = inf.add_event_handler(Rec::default()).unwrap_err();
    assert!(
        err.to_string()
            .ends_with("was not added to shared informer because it has stopped already"),
        "{err}"
    );
}

#[tokio::test(start_paused = true)]
async fn wait_for_cache_sync_is_false_when_stopped_unsynced() {
    let lw = FakeLw::new(); // every list fails
    let inf = SharedInformer::new(lw.clone(), config());
    let reg = inf.add_event_handler(Rec::default()).unwrap();
    let (token, task) = spawn(&inf);
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(!inf.has_synced());
    token.cancel();
    assert!(!inf.wait_for_cache_sync().await);
    assert!(!reg.wait_synced().await);
    task.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn panicking_handler_is_isolated_and_still_syncs() {
    struct Panics;
    impl EventHandler<ConfigMap> for Panics {
        async fn on_add(&self, _obj: Arc<ConfigMap>, _initial: bool) {
            panic!("handler bug");
        }
    }
    let lw = FakeLw::new();
    lw.push_page(vec![cm("ns", "a", "1"), cm("ns", "b", "1")], "10", None);
    let inf = SharedInformer::new(lw.clone(), config());
    let bad = inf.add_event_handler(Panics).unwrap();
    let good = Rec::default();
    let good_reg = inf.add_event_handler(good.clone()).unwrap();
    let (token, task) = spawn(&inf);
    assert!(good_reg.wait_synced().await);
    assert!(bad.wait_synced().await);
    assert_eq!(bad.stats().panics, 2);
    assert_eq!(good.len(), 2);
    token.cancel();
    task.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn slow_handler_buffer_coalesces_by_key_with_documented_rules() {
    let lw = FakeLw::new();
    lw.push_page(vec![cm("ns", "x", "1"), cm("ns", "y", "1")], "10", None);
    lw.push_watch(vec![
        Step::Sleep(Duration::from_secs(1)),
        added(cm("ns", "a", "2")),
        modified(cm("ns", "a", "3")), // add + update = add of the latest
        added(cm("ns", "b", "4")),
        deleted(cm("ns", "b", "5")), // add + delete = nothing
        modified(cm("ns", "x", "6")),
        modified(cm("ns", "x", "7")), // updates merge, old = what the handler saw
        modified(cm("ns", "y", "8")),
        deleted(cm("ns", "y", "9")), // initial add + update + delete = nothing
        deleted(cm("ns", "x", "11")), // update + delete = delete
        added(cm("ns", "x", "12")),  // delete + add = both
        Step::Hang,
    ]);
    let inf = SharedInformer::new(lw.clone(), config());
    let (slow, gate) = Rec::gated();
    let reg = inf.add_event_handler(slow.clone()).unwrap();
    let fast = Rec::default();
    inf.add_event_handler(fast.clone()).unwrap();
    let (token, task) = spawn(&inf);
    assert!(
        eventually(10_000, || inf
            .indexer()
            .get_by_key("ns/x")
            .is_some_and(|x| rv_of(&x) == "12"))
        .await
    );
    // The other handler is not held up (it may coalesce too, having had no turn yet).
    assert!(
        eventually(100, || {
            let l = fast.lines();
            l.contains(&"add ns/x@12".to_string()) && l.contains(&"delete ns/y@9".to_string())
        })
        .await,
        "{:?}",
        fast.lines()
    );
    // In flight: the initial add of x. Pending: y (collapsed placeholder), a, b (collapsed), x.
    let stats = reg.stats();
    assert_eq!(stats.pending, 4, "{stats:?}");
    assert!(
        !reg.has_synced(),
        "the initial add of x is still in the handler"
    );
    gate.send(true).unwrap();
    assert!(reg.wait_synced().await);
    assert!(eventually(100, || slow.len() == 4).await);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        slow.lines(),
        vec![
            "add ns/x@1 initial",
            "add ns/a@3",
            "delete ns/x@11",
            "add ns/x@12"
        ]
    );
    assert_eq!(reg.stats().pending, 0);
    token.cancel();
    task.await.unwrap().unwrap();
}

/// Final state per key, as a handler that only keeps the latest version would see it.
#[derive(Clone, Default)]
struct Latest {
    state: Arc<Mutex<HashMap<String, String>>>,
    calls: Arc<std::sync::atomic::AtomicU64>,
    gate: Option<watch::Receiver<bool>>,
}

impl Latest {
    async fn pass(&self) {
        self.calls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if let Some(g) = &self.gate {
            let mut g = g.clone();
            let _ = g.wait_for(|open| *open).await;
        }
    }
}

impl EventHandler<ConfigMap> for Latest {
    async fn on_add(&self, obj: Arc<ConfigMap>, _initial: bool) {
        self.pass().await;
        self.state
            .lock()
            .unwrap()
            .insert(object_key(obj.as_ref()), rv_of(&obj));
    }
    async fn on_update(&self, _old: Arc<ConfigMap>, new: Arc<ConfigMap>) {
        self.pass().await;
        self.state
            .lock()
            .unwrap()
            .insert(object_key(new.as_ref()), rv_of(&new));
    }
}

#[tokio::test(start_paused = true)]
async fn stalled_handler_stays_bounded_under_a_million_updates_while_another_keeps_up() {
    const KEYS: usize = 10_000;
    const UPDATES: usize = 1_000_000;
    let lw = FakeLw::new();
    lw.push_page(
        (0..KEYS).map(|k| cm("ns", &format!("k{k}"), "1")).collect(),
        "1",
        None,
    );
    let stream = futures::stream::iter(0..UPDATES)
        .map(|i| {
            Ok(WatchEvent::Modified(cm(
                "ns",
                &format!("k{}", i % KEYS),
                &(i + 2).to_string(),
            )))
        })
        .boxed();
    lw.push_watch_stream(stream);
    let inf = SharedInformer::new(lw.clone(), config());
    let (tx, rx) = watch::channel(false);
    let stalled = Latest {
        gate: Some(rx),
        ..Latest::default()
    };
    let stalled_reg = inf.add_event_handler(stalled.clone()).unwrap();
    let fast = Latest::default();
    let fast_reg = inf.add_event_handler(fast.clone()).unwrap();
    let (token, task) = spawn(&inf);

    let final_rv = |k: usize| (UPDATES - KEYS + k + 2).to_string();
    let caught_up = |l: &Latest| {
        let s = l.state.lock().unwrap();
        s.len() == KEYS && (0..KEYS).all(|k| s.get(&format!("ns/k{k}")) == Some(&final_rv(k)))
    };
    let ok = eventually(100_000, || caught_up(&fast)).await;
    assert!(
        ok,
        "fast handler fell behind: {} keys, {:?} {:?} rv {} lists {} watches {}",
        fast.state.lock().unwrap().len(),
        fast_reg.stats(),
        stalled_reg.stats(),
        inf.last_sync_resource_version(),
        lw.lists().len(),
        lw.watches().len()
    );
    assert!(fast_reg.has_synced());
    // The stalled handler is still inside its first call; everything else coalesced.
    let s = stalled_reg.stats();
    assert!(s.max_pending <= KEYS, "{s:?}");
    assert!(s.pending <= KEYS, "{s:?}");
    assert!(s.coalesced as usize >= UPDATES - KEYS, "{s:?}");
    assert_eq!(stalled.calls.load(std::sync::atomic::Ordering::Relaxed), 1);
    assert!(!stalled_reg.has_synced());

    tx.send(true).unwrap();
    assert!(
        eventually(100_000, || caught_up(&stalled)).await,
        "stalled handler never caught up"
    );
    assert!(stalled_reg.wait_synced().await);
    // At most one call per key after the release, plus the one that was stuck.
    assert!(stalled.calls.load(std::sync::atomic::Ordering::Relaxed) as usize <= KEYS + 1);
    assert_eq!(stalled_reg.stats().pending, 0);
    token.cancel();
    task.await.unwrap().unwrap();
}
