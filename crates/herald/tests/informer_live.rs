//! An informer on `Event` against a live herald-server on 127.0.0.1 (SQLite): it stays in sync
//! through server restarts and heavy churn against a 16-event history window (where its
//! resume point can expire), also when it reconnects while several clients write and delete
//! on the restarted server, and its final cache equals a fresh list. Which path a reconnect
//! takes (resume, or 410 and relist) depends on timing; the paths themselves are pinned
//! deterministically by the reflector and FIFO tests (scripted ListerWatcher), the registry's
//! watch tests and the storage tests.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use herald_runtime::cache::{HandlerFns, InformerOptions, ListWatchError, SharedInformer};
use herald_server::server::{Server, ServerOptions, StoreKind};
use herald_server::storage::HistoryOptions;
use k8s_openapi::api::core::v1::{Event, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ListParams, PostParams};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// The history window of most tests here: small enough that churn expires resume points.
const SMALL_WINDOW: usize = 16;

fn config(dir: &std::path::Path, listen: std::net::SocketAddr) -> ServerOptions {
    config_with_window(dir, listen, SMALL_WINDOW)
}

fn config_with_window(
    dir: &std::path::Path,
    listen: std::net::SocketAddr,
    window: usize,
) -> ServerOptions {
    ServerOptions {
        store: StoreKind::Sqlite {
            dir: dir.to_path_buf(),
        },
        listen,
        history: HistoryOptions {
            watch_window: window,
            keep_revisions: window as u64,
            ..HistoryOptions::default()
        },
        ..ServerOptions::default()
    }
}

fn event(i: usize) -> Event {
    Event {
        metadata: ObjectMeta {
            name: Some(format!("ev-{i}")),
            namespace: Some("default".into()),
            ..ObjectMeta::default()
        },
        involved_object: ObjectReference {
            kind: Some("Pod".into()),
            name: Some(format!("pod-{}", i % 7)),
            namespace: Some("default".into()),
            ..ObjectReference::default()
        },
        reason: Some("Test".into()),
        message: Some(format!("event {i}")),
        type_: Some("Normal".into()),
        ..Event::default()
    }
}

async fn create(api: &Api<Event>, range: std::ops::Range<usize>) {
    for i in range {
        api.create(&PostParams::default(), &event(i)).await.unwrap();
    }
}

/// name → resourceVersion of everything the server lists now.
async fn fresh_list(api: &Api<Event>) -> BTreeMap<String, String> {
    api.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|e| {
            (
                e.metadata.name.unwrap_or_default(),
                e.metadata.resource_version.unwrap_or_default(),
            )
        })
        .collect()
}

fn cached(informer: &SharedInformer<Event>) -> BTreeMap<String, String> {
    informer
        .indexer()
        .list()
        .iter()
        .map(|e| {
            (
                e.metadata.name.clone().unwrap_or_default(),
                e.metadata.resource_version.clone().unwrap_or_default(),
            )
        })
        .collect()
}

/// Waits for handler activity until the cache equals a fresh list; bounded by a total number
/// of quiet periods, never sleeping for its own sake.
async fn until_in_sync(informer: &SharedInformer<Event>, api: &Api<Event>, changed: &Notify) {
    for _ in 0..60 {
        let want = fresh_list(api).await;
        if cached(informer) == want {
            return;
        }
        // Wake on the next change the handler sees, or re-check after a quiet second (a
        // relist that changes nothing notifies nobody).
        let _ = tokio::time::timeout(Duration::from_secs(1), changed.notified()).await;
    }
    let (have, want) = (cached(informer), fresh_list(api).await);
    let stale: Vec<_> = have.keys().filter(|k| !want.contains_key(*k)).collect();
    let missing: Vec<_> = want.keys().filter(|k| !have.contains_key(*k)).collect();
    panic!(
        "informer never caught up: cached {} events, server has {}; stale {stale:?}, missing {missing:?}",
        have.len(),
        want.len()
    );
}

/// A free port on loopback.
fn any_port() -> std::net::SocketAddr {
    std::net::SocketAddr::from(([127, 0, 0, 1], 0))
}

/// Starts a server with `config`, and the [`Fixture`] on it taken apart.
async fn serve(config: ServerOptions) -> (Server, Api<Event>, SharedInformer<Event>, Arc<Notify>) {
    let server = Server::start(config).await.unwrap();
    let Fixture {
        api,
        informer,
        changed,
    } = fixture(&server);
    (server, api, informer, changed)
}

/// A client `Api` on the default namespace of `server`, and an informer (not yet spawned) on
/// the events of every namespace whose handlers wake `changed` on each notification.
struct Fixture {
    api: Api<Event>,
    informer: SharedInformer<Event>,
    changed: Arc<Notify>,
}

fn fixture(server: &Server) -> Fixture {
    let client = kube::Client::try_from(kube::Config::new(server.url().parse().unwrap())).unwrap();
    let informer = SharedInformer::for_api(
        Api::<Event>::all(client.clone()),
        InformerOptions::default(),
    );
    let changed = Arc::new(Notify::new());
    let (c1, c2, c3) = (changed.clone(), changed.clone(), changed.clone());
    informer
        .add_event_handler(
            HandlerFns::new()
                .on_add(move |_, _| c1.notify_waiters())
                .on_update(move |_, _| c2.notify_waiters())
                .on_delete(move |_| c3.notify_waiters()),
        )
        .unwrap();
    Fixture {
        api: Api::namespaced(client, "default"),
        informer,
        changed,
    }
}

/// Counts the 410 `Expired` errors `informer`'s watches report (and logs every watch error).
fn count_expired(informer: &SharedInformer<Event>) -> Arc<AtomicUsize> {
    let expired = Arc::new(AtomicUsize::new(0));
    let e2 = expired.clone();
    informer
        .set_watch_error_handler(move |err: &ListWatchError| {
            eprintln!("informer watch error: {err:?}");
            if matches!(err, ListWatchError::Expired(_)) {
                e2.fetch_add(1, Ordering::SeqCst);
            }
        })
        .unwrap();
    expired
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn informer_survives_restart_and_expired_history() {
    let dir = tempfile::tempdir().unwrap();
    let (server, api, informer, changed) = serve(config(dir.path(), any_port())).await;
    let addr = server.addr();
    let expired = count_expired(&informer);
    let stop = CancellationToken::new();
    let task = informer.spawn(stop.clone());

    create(&api, 0..20).await;
    assert!(informer.wait_for_cache_sync().await);
    until_in_sync(&informer, &api, &changed).await;

    // Restart on the same address and data directory; nothing written before is lost.
    server.shutdown().await.unwrap();
    let server = Server::start(config(dir.path(), addr)).await.unwrap();
    create(&api, 20..30).await;
    until_in_sync(&informer, &api, &changed).await;

    // More writes and deletes on the restarted server, past the 16-event history window.
    create(&api, 30..140).await;
    for i in (0..140).step_by(3) {
        api.delete(&format!("ev-{i}"), &Default::default())
            .await
            .unwrap();
    }
    until_in_sync(&informer, &api, &changed).await;
    assert_eq!(cached(&informer).len(), 140 - 47);
    eprintln!(
        "410 Expired seen by the informer: {}",
        expired.load(Ordering::SeqCst)
    );

    stop.cancel();
    task.await.unwrap().unwrap();
    server.shutdown().await.unwrap();
}

/// Runs `ops` (`(true, i)` deletes `ev-{i}`, `(false, j)` creates `ev-{j}`) from `tasks`
/// concurrent clients, each taking the next op when it is done with its last.
async fn churn(api: &Api<Event>, ops: Vec<(bool, usize)>, tasks: usize) {
    let ops = Arc::new(std::sync::Mutex::new(ops.into_iter()));
    let mut handles = Vec::new();
    for _ in 0..tasks {
        let (api, ops) = (api.clone(), ops.clone());
        handles.push(tokio::spawn(async move {
            loop {
                let op = ops.lock().unwrap().next();
                match op {
                    None => return,
                    Some((true, i)) => {
                        api.delete(&format!("ev-{i}"), &Default::default())
                            .await
                            .unwrap();
                    }
                    Some((false, j)) => {
                        api.create(&PostParams::default(), &event(j)).await.unwrap();
                    }
                }
            }
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
}

/// Syncs an informer on 40 events, restarts the server and at once has 4 clients delete the
/// pre-restart events among 360 creates, then delete 120 of the new ones, while the informer
/// reconnects. The final cache must equal a fresh list. Returns how many 410s it saw.
async fn reconnect_to_restarted_server_under_concurrent_writes(window: usize) -> usize {
    let dir = tempfile::tempdir().unwrap();
    let (server, api, informer, changed) =
        serve(config_with_window(dir.path(), any_port(), window)).await;
    let addr = server.addr();
    let expired = count_expired(&informer);
    let stop = CancellationToken::new();
    let task = informer.spawn(stop.clone());

    create(&api, 0..40).await;
    assert!(informer.wait_for_cache_sync().await);
    until_in_sync(&informer, &api, &changed).await;

    // Restart, then at once delete events written before the restart and create new ones
    // from several clients while the informer reconnects.
    server.shutdown().await.unwrap();
    let server = Server::start(config_with_window(dir.path(), addr, window))
        .await
        .unwrap();
    // Deletes of pre-restart events interleaved with creates, then deletes of new ones.
    let mut ops: Vec<(bool, usize)> = Vec::new();
    let mut old = (0..40).step_by(3);
    for j in 40..400 {
        if j % 20 == 0
            && let Some(i) = old.next()
        {
            ops.push((true, i));
        }
        ops.push((false, j));
    }
    ops.extend(old.map(|i| (true, i)));
    churn(&api, ops, 4).await;
    churn(&api, (42..400).step_by(3).map(|i| (true, i)).collect(), 4).await;
    until_in_sync(&informer, &api, &changed).await;
    assert_eq!(cached(&informer).len(), 400 - 134);

    stop.cancel();
    task.await.unwrap().unwrap();
    server.shutdown().await.unwrap();
    expired.load(Ordering::SeqCst)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn informer_resumes_on_restarted_server_under_concurrent_writes() {
    // The window holds everything written meanwhile: the informer resumes its pre-restart
    // watch on the new server (no 410), so every delete has to arrive on that watch.
    let expired = reconnect_to_restarted_server_under_concurrent_writes(4096).await;
    assert_eq!(expired, 0, "the resume point was in the window");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn informer_recovers_on_restarted_server_under_concurrent_writes_past_the_window() {
    // A 16-event window: depending on how fast the informer reconnects, it resumes or gets a
    // 410 and relists; either way the deletes reach the cache.
    let expired = reconnect_to_restarted_server_under_concurrent_writes(SMALL_WINDOW).await;
    eprintln!("410 Expired seen by the informer under concurrent writes: {expired}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn informer_relists_after_410_when_the_store_moved_on_while_the_server_was_down() {
    use herald_core::clock::SystemClock;
    use herald_core::event::ApiGroup;
    use herald_server::registry::{DeleteParams, EventRegistry, RegistryOptions, WriteOptions};
    use herald_server::storage::{SqliteBackend, SqliteOptions};

    let dir = tempfile::tempdir().unwrap();
    let (server, api, informer, changed) = serve(config(dir.path(), any_port())).await;
    let addr = server.addr();
    // Errors after which the reflector relists: normally the 410 on the watch from its old
    // resourceVersion; sometimes a transport error first, when its reconnect picked a
    // connection the old server had closed (it then relists, as client-go does, and never
    // asks for the old revision). Refused connections only retry the watch.
    let expired = Arc::new(AtomicUsize::new(0));
    let relisting = Arc::new(AtomicUsize::new(0));
    let (e2, r2) = (expired.clone(), relisting.clone());
    informer
        .set_watch_error_handler(move |err: &ListWatchError| {
            if matches!(err, ListWatchError::Expired(_)) {
                e2.fetch_add(1, Ordering::SeqCst);
            }
            if !err.is_retryable_without_relist() {
                r2.fetch_add(1, Ordering::SeqCst);
            }
        })
        .unwrap();
    let stop = CancellationToken::new();
    let task = informer.spawn(stop.clone());
    create(&api, 0..20).await;
    assert!(informer.wait_for_cache_sync().await);
    until_in_sync(&informer, &api, &changed).await;

    // While the server is down, another writer on the same data directory deletes half the
    // events and writes 40 more: far more than the 16-event window the restarted server
    // preloads, so the informer's resume point is gone for certain. From here on, without a
    // relisting error the informer can only re-watch from its old revision, which is a 410.
    expired.store(0, Ordering::SeqCst);
    relisting.store(0, Ordering::SeqCst);
    server.shutdown().await.unwrap();
    let path = dir.path().to_path_buf();
    let opts = SqliteOptions {
        history: HistoryOptions {
            watch_window: SMALL_WINDOW,
            keep_revisions: SMALL_WINDOW as u64,
            ..HistoryOptions::default()
        },
        ..SqliteOptions::default()
    };
    let backend = tokio::task::spawn_blocking(move || {
        SqliteBackend::open(path, Arc::new(SystemClock), opts).unwrap()
    })
    .await
    .unwrap();
    let backend = Arc::new(backend);
    let reg = EventRegistry::new(
        backend.clone(),
        Arc::new(SystemClock),
        RegistryOptions::default(),
    );
    for i in (0..20).step_by(2) {
        reg.delete(
            ApiGroup::Core,
            "default",
            &format!("ev-{i}"),
            &DeleteParams::default(),
        )
        .await
        .unwrap();
    }
    for i in 20..60 {
        reg.create(
            ApiGroup::Core,
            "default",
            event(i),
            &WriteOptions::default(),
        )
        .await
        .unwrap();
    }
    drop(reg);
    // Closing the store joins its writer thread.
    tokio::task::spawn_blocking(move || drop(backend))
        .await
        .unwrap();

    let server = Server::start(config(dir.path(), addr)).await.unwrap();
    until_in_sync(&informer, &api, &changed).await;
    assert_eq!(cached(&informer).len(), 60 - 10);
    let (expired, relisting) = (
        expired.load(Ordering::SeqCst),
        relisting.load(Ordering::SeqCst),
    );
    eprintln!("after the offline writes: {relisting} relisting errors, {expired} of them 410");
    assert!(
        relisting >= 1,
        "the informer cannot have resumed from a revision outside the window"
    );

    stop.cancel();
    task.await.unwrap().unwrap();
    server.shutdown().await.unwrap();
}
