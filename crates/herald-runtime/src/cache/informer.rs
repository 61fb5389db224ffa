//! [`SharedInformer`]: one list+watch feeding one indexed cache and any number of handlers.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use kube::Resource;
use serde::de::DeserializeOwned;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::delta::{DeletedObject, Delta};
use super::error::{IndexError, InformerError, ListWatchError};
use super::fifo::{DEFAULT_FIFO_CAPACITY, RealFifo, RealFifoOptions, TransformFn};
use super::handler::{EventHandler, HandlerStats, Listener, Notification, run_listener};
use super::indexer::{Indexer, Indexers};
use super::key::{object_key, resource_version};
use super::lister::Lister;
use super::lister_watcher::{KubeListerWatcher, ListerWatcher};
use super::reflector::{Reflector, ReflectorOptions, ResourceVersionHandle, WatchErrorHandler};

/// Handlers cannot resync more often than this; shorter periods are raised to it.
pub const MINIMUM_RESYNC_PERIOD: Duration = Duration::from_secs(1);

/// Informer settings.
#[derive(Debug, Clone)]
pub struct InformerOptions {
    /// Default resync period of handlers, and the informer's resync check period (lowered,
    /// before `run`, by handlers asking for shorter ones). Zero (default) = no resync: then
    /// no handler resyncs, as in client-go.
    pub resync_period: Duration,
    /// Bound of the delta queue between the reflector and the cache (back-pressure on the
    /// watch when full; see [`RealFifoOptions::capacity`]).
    pub fifo_capacity: usize,
    /// Reflector settings (its `resync_period` is set by the informer).
    pub reflector: ReflectorOptions,
}

impl Default for InformerOptions {
    fn default() -> Self {
        Self {
            resync_period: Duration::ZERO,
            fifo_capacity: DEFAULT_FIFO_CAPACITY,
            reflector: ReflectorOptions::default(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SyncState {
    Pending,
    Synced,
    Stopped,
}

type Spawner = Box<dyn FnOnce(&tokio::runtime::Handle) -> JoinHandle<()> + Send>;

struct State<K> {
    started: bool,
    stopped: bool,
    resync_check_period: Duration,
    listeners: Vec<Arc<Listener<K>>>,
    unstarted: Vec<Spawner>,
    tasks: Vec<JoinHandle<()>>,
    runtime: Option<tokio::runtime::Handle>,
    transform: Option<TransformFn<K>>,
    on_error: Option<WatchErrorHandler>,
}

struct Shared<K> {
    lw: Arc<dyn ListerWatcher<K>>,
    indexer: Indexer<K>,
    config: InformerOptions,
    state: Mutex<State<K>>,
    synced: watch::Sender<SyncState>,
    last_rv: Mutex<Option<ResourceVersionHandle>>,
    next_id: AtomicU64,
}

impl<K> Shared<K> {
    fn lock(&self) -> MutexGuard<'_, State<K>> {
        // Handler code never runs under this lock.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One list+watch of a collection, kept in an indexed cache, fanned out to any number of
/// handlers — client-go's `SharedIndexInformer`, with bounded handler buffers.
///
/// * Handlers can be added and removed while it runs. A late handler first receives the
///   current cache as adds (`is_in_initial_list = true`), then every later change.
/// * Each handler runs on its own task with its own buffer. A slow handler's pending
///   notifications **coalesce by object key** (latest state wins; the rules are in
///   [`Registration`]), so its buffer holds at most one entry per distinct object however
///   many events arrive, and nobody else waits for it.
/// * The cache is updated before handlers are told, so a handler always finds at least the
///   state it is told about.
/// * Resync: each handler may have its own period (≥ 1 s, rounded up to the informer's check
///   period); resyncs reach only the handlers that are due. A relisted object whose
///   resourceVersion did not change is news only to handlers with a resync period.
///
/// ```no_run
/// # async fn doc(client: kube::Client) {
/// use k8s_openapi::api::core::v1::Event;
/// use herald_runtime::cache::{HandlerFns, InformerOptions, SharedInformer};
///
/// let informer = SharedInformer::for_api(kube::Api::<Event>::all(client), InformerOptions::default());
/// let reg = informer
///     .add_event_handler(HandlerFns::new().on_add(|ev: std::sync::Arc<Event>, _| {
///         println!("{:?}", ev.reason);
///     }))
///     .unwrap();
/// let shutdown = tokio_util::sync::CancellationToken::new();
/// let task = informer.spawn(shutdown.clone());
/// informer.wait_for_cache_sync().await;
/// reg.wait_synced().await;
/// shutdown.cancel();
/// task.await.unwrap().unwrap();
/// # }
/// ```
pub struct SharedInformer<K> {
    shared: Arc<Shared<K>>,
}

impl<K> Clone for SharedInformer<K> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
        }
    }
}

impl<K> SharedInformer<K>
where
    K: Resource + DeserializeOwned + Clone + Send + Sync + 'static,
{
    /// An informer over `api` (see [`KubeListerWatcher`] for selectors).
    pub fn for_api(api: kube::Api<K>, config: InformerOptions) -> Self {
        Self::new(KubeListerWatcher::new(api), config)
    }
}

impl<K> SharedInformer<K>
where
    K: Resource + Send + Sync + 'static,
{
    /// An informer over any [`ListerWatcher`].
    pub fn new(lw: impl ListerWatcher<K>, config: InformerOptions) -> Self {
        Self::from_lister_watcher(Arc::new(lw), config)
    }

    /// An informer over a shared [`ListerWatcher`].
    pub fn from_lister_watcher(lw: Arc<dyn ListerWatcher<K>>, config: InformerOptions) -> Self {
        let (synced, _) = watch::channel(SyncState::Pending);
        Self {
            shared: Arc::new(Shared {
                lw,
                indexer: Indexer::new(),
                state: Mutex::new(State {
                    started: false,
                    stopped: false,
                    resync_check_period: config.resync_period,
                    listeners: Vec::new(),
                    unstarted: Vec::new(),
                    tasks: Vec::new(),
                    runtime: None,
                    transform: None,
                    on_error: None,
                }),
                config,
                synced,
                last_rv: Mutex::new(None),
                next_id: AtomicU64::new(1),
            }),
        }
    }

    /// The cache (shared handle).
    pub fn indexer(&self) -> Indexer<K> {
        self.shared.indexer.clone()
    }

    /// Adds secondary indexes (also while running: existing objects are indexed at once).
    pub fn add_indexers(&self, indexers: Indexers<K>) -> Result<(), InformerError> {
        if self.shared.lock().stopped {
            return Err(InformerError::Stopped("indexers".to_owned()));
        }
        self.shared
            .indexer
            .add_indexers(indexers)
            .map_err(|e: IndexError| e.into())
    }

    /// Sets the transform applied once to every object before it is cached and shared (for
    /// example to clear `managedFields`). Only before [`run`](Self::run).
    pub fn set_transform(
        &self,
        f: impl Fn(K) -> K + Send + Sync + 'static,
    ) -> Result<(), InformerError> {
        let mut st = self.shared.lock();
        if st.started {
            return Err(InformerError::AlreadyStarted);
        }
        st.transform = Some(Arc::new(f));
        Ok(())
    }

    /// Sets the hook told about every list/watch error. Only before [`run`](Self::run).
    pub fn set_watch_error_handler(
        &self,
        f: impl Fn(&ListWatchError) + Send + Sync + 'static,
    ) -> Result<(), InformerError> {
        let mut st = self.shared.lock();
        if st.started {
            return Err(InformerError::AlreadyStarted);
        }
        st.on_error = Some(Arc::new(f));
        Ok(())
    }

    /// Registers `handler` with the informer's default resync period.
    pub fn add_event_handler<H: EventHandler<K>>(
        &self,
        handler: H,
    ) -> Result<Registration<K>, InformerError> {
        let period = self.shared.config.resync_period;
        self.add_event_handler_with_resync(handler, period)
    }

    /// Registers `handler` with its own resync period (zero = never; raised to 1 s; before
    /// `run` a shorter period lowers the informer's check period, after `run` it is raised
    /// to the check period).
    pub fn add_event_handler_with_resync<H: EventHandler<K>>(
        &self,
        handler: H,
        resync: Duration,
    ) -> Result<Registration<K>, InformerError> {
        let mut st = self.shared.lock();
        if st.stopped {
            return Err(InformerError::Stopped(
                std::any::type_name::<H>().to_owned(),
            ));
        }
        let mut requested = resync;
        if !requested.is_zero() {
            if requested < MINIMUM_RESYNC_PERIOD {
                tracing::warn!(?requested, "resync period too small; raised to 1s");
                requested = MINIMUM_RESYNC_PERIOD;
            }
            if requested < st.resync_check_period {
                if st.started {
                    tracing::warn!(?requested, check = ?st.resync_check_period,
                        "resync period below the informer's check period; raised to it");
                    requested = st.resync_check_period;
                } else {
                    st.resync_check_period = requested;
                    for l in &st.listeners {
                        l.set_resync_period(effective_resync(l.requested_resync, requested));
                    }
                }
            }
        }
        let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        let listener = Arc::new(Listener::new(
            id,
            requested,
            effective_resync(requested, st.resync_check_period),
        ));
        let task_listener = listener.clone();
        let spawner: Spawner = Box::new(move |rt: &tokio::runtime::Handle| {
            rt.spawn(run_listener(task_listener, handler))
        });
        if st.started {
            // Under the same lock as event distribution: the snapshot and the later events
            // form one consistent sequence for this handler.
            for obj in self.shared.indexer.list() {
                let key = object_key(obj.as_ref());
                listener.push(key, Notification::Add { obj, initial: true });
            }
            if let Some(rt) = st.runtime.clone() {
                let task = spawner(&rt);
                st.tasks.push(task);
            }
        } else {
            st.unstarted.push(spawner);
        }
        st.listeners.push(listener.clone());
        Ok(Registration {
            listener,
            informer: Arc::downgrade(&self.shared),
            synced: self.shared.synced.subscribe(),
        })
    }

    /// Number of registered handlers.
    pub fn handler_count(&self) -> usize {
        self.shared.lock().listeners.len()
    }

    /// True once the initial list has been popped, cached and handed to every handler's
    /// buffer.
    pub fn has_synced(&self) -> bool {
        *self.shared.synced.borrow() == SyncState::Synced
    }

    /// Waits until [`has_synced`](Self::has_synced); `false` if the informer stopped first.
    pub async fn wait_for_cache_sync(&self) -> bool {
        let mut rx = self.shared.synced.subscribe();
        loop {
            match *rx.borrow_and_update() {
                SyncState::Synced => return true,
                SyncState::Stopped => return false,
                SyncState::Pending => {}
            }
            if rx.changed().await.is_err() {
                return false;
            }
        }
    }

    /// The resourceVersion the reflector last synced to (`""` before `run`).
    pub fn last_sync_resource_version(&self) -> String {
        self.shared
            .last_rv
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(ResourceVersionHandle::get)
            .unwrap_or_default()
    }

    /// True once [`run`](Self::run) was called.
    pub fn is_started(&self) -> bool {
        self.shared.lock().started
    }

    /// True once [`run`](Self::run) returned.
    pub fn is_stopped(&self) -> bool {
        self.shared.lock().stopped
    }

    /// Runs [`run`](Self::run) on a new task.
    pub fn spawn(&self, shutdown: CancellationToken) -> JoinHandle<Result<(), InformerError>> {
        let me = self.clone();
        tokio::spawn(async move { me.run(shutdown).await })
    }

    /// Lists, watches and distributes until `shutdown`. Then the reflector stops, queued
    /// deltas are still applied to the cache, every handler's pending notifications are
    /// dropped, and `run` returns once each handler finished the call it was in.
    /// A second call fails with [`InformerError::AlreadyStarted`].
    pub async fn run(&self, shutdown: CancellationToken) -> Result<(), InformerError> {
        let rt = tokio::runtime::Handle::current();
        let (fifo, reflector) = {
            let mut st = self.shared.lock();
            if st.started {
                return Err(InformerError::AlreadyStarted);
            }
            st.started = true;
            st.runtime = Some(rt.clone());
            let spawners = std::mem::take(&mut st.unstarted);
            for s in spawners {
                let task = s(&rt);
                st.tasks.push(task);
            }
            let fifo = Arc::new(RealFifo::new(RealFifoOptions {
                capacity: self.shared.config.fifo_capacity,
                known_objects: Some(self.shared.indexer.clone()),
                transform: st.transform.clone(),
            }));
            let mut rc = self.shared.config.reflector.clone();
            rc.resync_period = st.resync_check_period;
            let weak: Weak<Shared<K>> = Arc::downgrade(&self.shared);
            let mut reflector = Reflector::new(self.shared.lw.clone(), fifo.clone(), rc)
                .with_should_resync(Arc::new(move || {
                    weak.upgrade()
                        .is_some_and(|s| should_resync(&s.lock().listeners))
                }));
            if let Some(h) = st.on_error.clone() {
                reflector = reflector.with_watch_error_handler(h);
            }
            *self
                .shared
                .last_rv
                .lock()
                .unwrap_or_else(|e| e.into_inner()) = Some(reflector.resource_version_handle());
            (fifo, reflector)
        };
        let reflector_fifo = fifo.clone();
        let reflector_shutdown = shutdown.clone();
        let reflector_task = tokio::spawn(async move {
            reflector.run(reflector_shutdown).await;
            reflector_fifo.close();
        });

        self.process_loop(&fifo).await;
        if let Err(e) = reflector_task.await {
            tracing::error!(error = %e, "reflector task failed");
        }

        let tasks = {
            let mut st = self.shared.lock();
            st.stopped = true;
            for l in st.listeners.drain(..) {
                l.close();
            }
            std::mem::take(&mut st.tasks)
        };
        self.shared.synced.send_if_modified(|s| {
            if *s == SyncState::Pending {
                *s = SyncState::Stopped;
                true
            } else {
                false
            }
        });
        for t in tasks {
            if let Err(e) = t.await {
                tracing::error!(error = %e, "handler task failed");
            }
        }
        Ok(())
    }

    async fn process_loop(&self, fifo: &RealFifo<K>) {
        let mut synced = false;
        loop {
            while let Some(popped) = fifo.try_pop() {
                {
                    let st = self.shared.lock();
                    self.apply(&st.listeners, popped.delta(), popped.is_in_initial_list());
                }
                drop(popped);
                if !synced {
                    synced = self.check_synced(fifo);
                }
            }
            if !synced {
                synced = self.check_synced(fifo);
            }
            if fifo.is_closed() && fifo.is_empty() {
                return;
            }
            fifo.wait_readable(synced).await;
        }
    }

    fn check_synced(&self, fifo: &RealFifo<K>) -> bool {
        if !fifo.has_synced() {
            return false;
        }
        self.shared.synced.send_replace(SyncState::Synced);
        for l in &self.shared.lock().listeners {
            l.synced_notify().notify_waiters();
        }
        true
    }

    /// Applies one delta to the cache, then hands the notification to the handlers.
    fn apply(&self, listeners: &[Arc<Listener<K>>], delta: &Delta<K>, initial: bool) {
        let indexer = &self.shared.indexer;
        match delta {
            Delta::Added(obj) | Delta::Updated(obj) | Delta::Replaced(obj) | Delta::Sync(obj) => {
                let key = object_key(obj.as_ref());
                let old = indexer.get_by_key(&key);
                indexer.add(obj.clone());
                let Some(old) = old else {
                    for l in listeners {
                        l.push(
                            key.clone(),
                            Notification::Add {
                                obj: obj.clone(),
                                initial,
                            },
                        );
                    }
                    return;
                };
                let unchanged = {
                    let rv = resource_version(obj.as_ref());
                    !rv.is_empty() && rv == resource_version(old.as_ref())
                };
                for l in listeners {
                    let wanted = match delta {
                        Delta::Sync(_) => l.is_syncing(),
                        Delta::Replaced(_) if unchanged => !l.resync_period().is_zero(),
                        _ => true,
                    };
                    if wanted {
                        l.push(
                            key.clone(),
                            Notification::Update {
                                old: old.clone(),
                                new: obj.clone(),
                            },
                        );
                    }
                }
            }
            Delta::Deleted(d) => {
                let key = d.key();
                match d {
                    DeletedObject::Known(o) => {
                        indexer.delete(o.as_ref());
                    }
                    DeletedObject::FinalStateUnknown(_) => {
                        indexer.delete_key(&key);
                    }
                }
                for l in listeners {
                    l.push(key.clone(), Notification::Delete(d.clone()));
                }
            }
        }
    }

    fn remove_listener(shared: &Shared<K>, id: u64) {
        let mut st = shared.lock();
        st.listeners.retain(|l| l.id != id);
    }
}

impl<K> SharedInformer<K>
where
    K: Resource + Send + Sync + 'static,
    K::DynamicType: Default,
{
    /// A typed lister over the cache.
    pub fn lister(&self) -> Lister<K> {
        Lister::new(self.shared.indexer.clone())
    }
}

fn effective_resync(requested: Duration, check: Duration) -> Duration {
    if requested.is_zero() || check.is_zero() {
        Duration::ZERO
    } else {
        requested.max(check)
    }
}

fn should_resync<K>(listeners: &[Arc<Listener<K>>]) -> bool {
    let now = Instant::now();
    let mut any = false;
    for l in listeners {
        any |= l.check_resync(now);
    }
    any
}

/// A handler's registration with a [`SharedInformer`].
///
/// The handler's buffer coalesces by object key while the handler is busy (see
/// [`Registration::stats`]). For one key, with `pending` what is waiting and `next` what
/// arrives:
///
/// | pending | next | the handler will get |
/// |---|---|---|
/// | add(a) | update(_, b) | add(b) (still flagged as initial-list if it was) |
/// | add(a) | delete | nothing: it never knew the object |
/// | update(o, a) | update(_, b) | update(o, b): from the state it last saw to the latest |
/// | update(o, a) | delete(d) | delete(d) |
/// | delete(d) | add(b) or update(_, b) | delete(d), then add(b) (a re-creation is never hidden) |
/// | delete(d), add(b) | update / delete | delete(d), then add(latest) / only delete(d) |
/// | delete(d) | delete(e) | delete(d) (delete(e) if d was a final-state-unknown tombstone) |
///
/// Keys keep their first place in line, so order between keys is kept and a busy key cannot
/// starve others. Bound: at most one entry per distinct object key (holding at most two
/// notifications); a key whose notifications collapsed keeps an empty placeholder until its
/// turn, so the line never holds a key twice. At the bound nothing is dropped: new events
/// merge into the entries.
pub struct Registration<K> {
    listener: Arc<Listener<K>>,
    informer: Weak<Shared<K>>,
    synced: watch::Receiver<SyncState>,
}

impl<K> std::fmt::Debug for Registration<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registration")
            .field("id", &self.listener.id)
            .finish()
    }
}

impl<K: Resource + Send + Sync + 'static> Registration<K> {
    /// Unique id of this registration within its informer.
    pub fn id(&self) -> u64 {
        self.listener.id
    }

    /// True once the informer has synced and this handler has finished every initial-list
    /// add it was given (a panic in the handler counts as finished).
    pub fn has_synced(&self) -> bool {
        *self.synced.borrow() == SyncState::Synced && self.listener.pending_initial() == 0
    }

    /// Waits for [`has_synced`](Self::has_synced); `false` if the handler was removed or
    /// the informer stopped first.
    pub async fn wait_synced(&self) -> bool {
        let mut rx = self.synced.clone();
        loop {
            let changed = self.listener.synced_changed();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if self.has_synced() {
                return true;
            }
            if self.listener.is_removed() || *rx.borrow_and_update() == SyncState::Stopped {
                return false;
            }
            tokio::select! {
                r = rx.changed() => if r.is_err() { return false },
                _ = changed => {}
            }
        }
    }

    /// Unregisters the handler: no notification is delivered after the one in progress.
    /// Idempotent; a no-op once the informer is gone.
    pub fn remove(&self) {
        if let Some(shared) = self.informer.upgrade() {
            SharedInformer::remove_listener(&shared, self.listener.id);
        }
        self.listener.close();
    }

    /// True after [`remove`](Self::remove) (or once the informer stopped).
    pub fn is_removed(&self) -> bool {
        self.listener.is_removed()
    }

    /// Buffer introspection: pending entries, high-water mark, coalesced and delivered counts.
    pub fn stats(&self) -> HandlerStats {
        self.listener.stats()
    }

    /// Entries in this handler's buffer now (bounded by the number of distinct objects).
    pub fn pending(&self) -> usize {
        self.listener.stats().pending
    }

    /// The effective resync period (zero = never).
    pub fn resync_period(&self) -> Duration {
        self.listener.resync_period()
    }
}
