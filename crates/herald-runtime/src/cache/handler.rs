//! Event handlers and their per-handler, key-coalescing notification buffers.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::FutureExt;
use kube::Resource;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::delta::DeletedObject;

/// Reacts to changes of the informer's cache. Each registered handler runs on its own task,
/// one notification at a time, in order; a slow handler never slows the informer or other
/// handlers (its pending notifications coalesce instead — see [`Registration`](super::Registration)).
///
/// All methods have empty defaults. Handlers should be quick (typically: enqueue a key into a
/// work queue); they may await.
///
/// ```
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use herald_runtime::cache::{DeletedObject, EventHandler};
///
/// struct Log;
/// impl EventHandler<ConfigMap> for Log {
///     async fn on_add(&self, obj: Arc<ConfigMap>, initial: bool) {
///         println!("add {:?} (initial list: {initial})", obj.metadata.name);
///     }
///     async fn on_delete(&self, obj: DeletedObject<ConfigMap>) {
///         println!("delete (final state unknown: {})", obj.is_final_state_unknown());
///     }
/// }
/// ```
pub trait EventHandler<K>: Send + Sync + 'static {
    /// An object appeared. `is_in_initial_list` is true for objects of the initial list (and
    /// for the snapshot a late-registered handler receives first).
    fn on_add(&self, obj: Arc<K>, is_in_initial_list: bool) -> impl Future<Output = ()> + Send {
        let _ = (obj, is_in_initial_list);
        async {}
    }
    /// An object changed from `old` (the state this handler last saw) to `new`; also
    /// periodic resyncs (`old` and `new` then have the same resourceVersion).
    fn on_update(&self, old: Arc<K>, new: Arc<K>) -> impl Future<Output = ()> + Send {
        let _ = (old, new);
        async {}
    }
    /// An object was deleted, or vanished across a relist (final state unknown).
    fn on_delete(&self, obj: DeletedObject<K>) -> impl Future<Output = ()> + Send {
        let _ = obj;
        async {}
    }
}

type AddFn<K> = Box<dyn Fn(Arc<K>, bool) + Send + Sync>;
type UpdateFn<K> = Box<dyn Fn(Arc<K>, Arc<K>) + Send + Sync>;
type DeleteFn<K> = Box<dyn Fn(DeletedObject<K>) + Send + Sync>;

/// An [`EventHandler`] made of plain closures (client-go's `ResourceEventHandlerFuncs`).
///
/// ```
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use herald_runtime::cache::HandlerFns;
/// let h = HandlerFns::<ConfigMap>::new().on_add(|obj, _initial| {
///     println!("{:?}", obj.metadata.name);
/// });
/// ```
pub struct HandlerFns<K> {
    add: Option<AddFn<K>>,
    update: Option<UpdateFn<K>>,
    delete: Option<DeleteFn<K>>,
}

impl<K> Default for HandlerFns<K> {
    fn default() -> Self {
        Self {
            add: None,
            update: None,
            delete: None,
        }
    }
}

impl<K> HandlerFns<K> {
    /// No callbacks.
    pub fn new() -> Self {
        Self::default()
    }
    /// Sets the add callback.
    #[must_use]
    pub fn on_add(mut self, f: impl Fn(Arc<K>, bool) + Send + Sync + 'static) -> Self {
        self.add = Some(Box::new(f));
        self
    }
    /// Sets the update callback.
    #[must_use]
    pub fn on_update(mut self, f: impl Fn(Arc<K>, Arc<K>) + Send + Sync + 'static) -> Self {
        self.update = Some(Box::new(f));
        self
    }
    /// Sets the delete callback.
    #[must_use]
    pub fn on_delete(mut self, f: impl Fn(DeletedObject<K>) + Send + Sync + 'static) -> Self {
        self.delete = Some(Box::new(f));
        self
    }
}

impl<K: Send + Sync + 'static> EventHandler<K> for HandlerFns<K> {
    fn on_add(&self, obj: Arc<K>, is_in_initial_list: bool) -> impl Future<Output = ()> + Send {
        if let Some(f) = &self.add {
            f(obj, is_in_initial_list);
        }
        async {}
    }
    fn on_update(&self, old: Arc<K>, new: Arc<K>) -> impl Future<Output = ()> + Send {
        if let Some(f) = &self.update {
            f(old, new);
        }
        async {}
    }
    fn on_delete(&self, obj: DeletedObject<K>) -> impl Future<Output = ()> + Send {
        if let Some(f) = &self.delete {
            f(obj);
        }
        async {}
    }
}

/// One pending notification.
pub(crate) enum Notification<K> {
    Add { obj: Arc<K>, initial: bool },
    Update { old: Arc<K>, new: Arc<K> },
    Delete(DeletedObject<K>),
}

impl<K> Notification<K> {
    fn initial(&self) -> bool {
        matches!(self, Self::Add { initial: true, .. })
    }
}

/// What one key has pending: at most two notifications (a delete, then a re-add).
struct Entry<K> {
    /// `None` for a placeholder: everything pending for the key collapsed away.
    first: Option<Notification<K>>,
    then: Option<Notification<K>>,
}

enum Merged<K> {
    Gone,
    One(Notification<K>),
    Two(Notification<K>, Notification<K>),
}

/// Coalesces `next` into `pending` for the same key. The rules keep what a handler would
/// conclude from the full sequence:
///
/// | pending | next | result |
/// |---|---|---|
/// | add(a) | update(_, b) | add(b) |
/// | add(a) | delete | nothing (the handler never saw the object) |
/// | update(o, a) | update(_, b) | update(o, b) |
/// | update(o, a) | delete(d) | delete(d) |
/// | delete(d) | add(b) / update(_, b) | delete(d), then add(b) |
/// | delete(d) | delete(e) | delete(d), or delete(e) when d is a tombstone and e is not |
fn merge<K>(pending: Notification<K>, next: Notification<K>) -> Merged<K> {
    use Notification::{Add, Delete, Update};
    match (pending, next) {
        (Add { initial, .. }, Add { obj, .. } | Update { new: obj, .. }) => {
            Merged::One(Add { obj, initial })
        }
        (Add { .. }, Delete(_)) => Merged::Gone,
        (Update { old, .. }, Add { obj: new, .. } | Update { new, .. }) => {
            Merged::One(Update { old, new })
        }
        (Update { .. }, Delete(d)) => Merged::One(Delete(d)),
        (Delete(d), Add { obj, initial }) => Merged::Two(Delete(d), Add { obj, initial }),
        (Delete(d), Update { new, .. }) => Merged::Two(
            Delete(d),
            Add {
                obj: new,
                initial: false,
            },
        ),
        (Delete(d), Delete(e)) => {
            if d.is_final_state_unknown() && !e.is_final_state_unknown() {
                Merged::One(Delete(e))
            } else {
                Merged::One(Delete(d))
            }
        }
    }
}

struct Buffer<K> {
    order: VecDeque<String>,
    entries: HashMap<String, Entry<K>>,
    closed: bool,
    high_water: usize,
}

/// Counters of one handler's buffer (see [`Registration::stats`](super::Registration::stats)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HandlerStats {
    /// Keys with an entry in the buffer now (its size; bounded by the number of distinct
    /// objects, and never more than one entry per key).
    pub pending: usize,
    /// Largest `pending` seen.
    pub max_pending: usize,
    /// Notifications merged into an already pending one.
    pub coalesced: u64,
    /// Notifications handed to the handler.
    pub delivered: u64,
    /// Handler calls that panicked.
    pub panics: u64,
}

/// One registered handler's state, shared by the informer and the handler's task.
pub(crate) struct Listener<K> {
    pub(crate) id: u64,
    buf: Mutex<Buffer<K>>,
    wake: Notify,
    pending_initial: AtomicUsize,
    synced_changed: Notify,
    coalesced: AtomicU64,
    delivered: AtomicU64,
    panics: AtomicU64,
    removed: AtomicBool,
    pub(crate) requested_resync: Duration,
    resync: Mutex<ResyncState>,
    syncing: AtomicBool,
}

struct ResyncState {
    period: Duration,
    next: Instant,
}

impl<K> Listener<K> {
    pub(crate) fn new(id: u64, requested_resync: Duration, period: Duration) -> Self {
        Self {
            id,
            buf: Mutex::new(Buffer {
                order: VecDeque::new(),
                entries: HashMap::new(),
                closed: false,
                high_water: 0,
            }),
            wake: Notify::new(),
            pending_initial: AtomicUsize::new(0),
            synced_changed: Notify::new(),
            coalesced: AtomicU64::new(0),
            delivered: AtomicU64::new(0),
            panics: AtomicU64::new(0),
            removed: AtomicBool::new(false),
            requested_resync,
            resync: Mutex::new(ResyncState {
                period,
                next: Instant::now() + period,
            }),
            syncing: AtomicBool::new(false),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Buffer<K>> {
        // Only our own merge code runs under this lock.
        self.buf.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lock_resync(&self) -> MutexGuard<'_, ResyncState> {
        self.resync.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn resync_period(&self) -> Duration {
        self.lock_resync().period
    }

    pub(crate) fn set_resync_period(&self, period: Duration) {
        let mut r = self.lock_resync();
        r.period = period;
        r.next = Instant::now() + period;
    }

    /// Decides whether this listener is due for a resync at `now` (and remembers it).
    pub(crate) fn check_resync(&self, now: Instant) -> bool {
        let mut r = self.lock_resync();
        let due = !r.period.is_zero() && now >= r.next;
        if due {
            r.next = now + r.period;
        }
        self.syncing.store(due, Ordering::SeqCst);
        due
    }

    pub(crate) fn is_syncing(&self) -> bool {
        self.syncing.load(Ordering::SeqCst)
    }

    pub(crate) fn pending_initial(&self) -> usize {
        self.pending_initial.load(Ordering::SeqCst)
    }

    pub(crate) fn is_removed(&self) -> bool {
        self.removed.load(Ordering::SeqCst)
    }

    fn finish_initial(&self, n: usize) {
        if n == 0 {
            return;
        }
        let prev = self
            .pending_initial
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |v| {
                Some(v.saturating_sub(n))
            })
            .unwrap_or(0);
        if prev <= n {
            self.synced_changed.notify_waiters();
        }
    }

    /// Queues `n` for the object `key`, coalescing with what is pending for that key.
    pub(crate) fn push(&self, key: String, n: Notification<K>) {
        let mut b = self.lock();
        if b.closed {
            return;
        }
        if n.initial() {
            self.pending_initial.fetch_add(1, Ordering::SeqCst);
        }
        let entry = match b.entries.get_mut(&key) {
            Some(e) => e,
            None => {
                b.entries.insert(
                    key.clone(),
                    Entry {
                        first: Some(n),
                        then: None,
                    },
                );
                b.order.push_back(key);
                b.high_water = b.high_water.max(b.entries.len());
                drop(b);
                self.wake.notify_one();
                return;
            }
        };
        let Some(first) = entry.first.take() else {
            // A placeholder left by an add+delete collapse: reuse its place in line.
            entry.first = Some(n);
            return;
        };
        self.coalesced.fetch_add(1, Ordering::Relaxed);
        let then = entry.then.take();
        let before = usize::from(first.initial())
            + usize::from(then.as_ref().is_some_and(|t| t.initial()))
            + usize::from(n.initial());
        let merged = match then {
            None => merge(first, n),
            Some(then) => match merge(then, n) {
                Merged::Gone => Merged::One(first),
                Merged::One(t) => Merged::Two(first, t),
                // A re-add merged with anything never yields two notifications.
                Merged::Two(_, t) => Merged::Two(first, t),
            },
        };
        // The entry keeps its place in line whatever the merge gives: a busy key never
        // starves the others, and a collapsed key leaves an empty placeholder (skipped when
        // popped) so that the line never holds a key twice.
        let after = match merged {
            Merged::Gone => 0,
            Merged::One(a) => {
                let c = usize::from(a.initial());
                entry.first = Some(a);
                c
            }
            Merged::Two(a, t) => {
                let c = usize::from(a.initial()) + usize::from(t.initial());
                entry.first = Some(a);
                entry.then = Some(t);
                c
            }
        };
        drop(b);
        self.finish_initial(before.saturating_sub(after));
    }

    fn pop(&self) -> Option<(Notification<K>, Option<Notification<K>>)> {
        let mut b = self.lock();
        while let Some(key) = b.order.pop_front() {
            if let Some(Entry {
                first: Some(first),
                then,
            }) = b.entries.remove(&key)
            {
                return Some((first, then));
            }
        }
        None
    }

    /// Stops the listener: pending notifications are dropped; the one being handled
    /// completes.
    pub(crate) fn close(&self) {
        let dropped = {
            let mut b = self.lock();
            b.closed = true;
            b.order.clear();
            b.entries.drain().fold(0, |acc, (_, e)| {
                acc + usize::from(e.first.as_ref().is_some_and(|f| f.initial()))
                    + usize::from(e.then.as_ref().is_some_and(|t| t.initial()))
            })
        };
        self.removed.store(true, Ordering::SeqCst);
        self.finish_initial(dropped);
        self.wake.notify_one();
        self.synced_changed.notify_waiters();
    }

    pub(crate) fn stats(&self) -> HandlerStats {
        let b = self.lock();
        HandlerStats {
            pending: b.entries.len(),
            max_pending: b.high_water,
            coalesced: self.coalesced.load(Ordering::Relaxed),
            delivered: self.delivered.load(Ordering::Relaxed),
            panics: self.panics.load(Ordering::Relaxed),
        }
    }

    pub(crate) fn synced_changed(&self) -> tokio::sync::futures::Notified<'_> {
        self.synced_changed.notified()
    }

    pub(crate) fn synced_notify(&self) -> &Notify {
        &self.synced_changed
    }
}

/// The handler's task: hands notifications to `handler` one at a time until closed.
pub(crate) async fn run_listener<K, H>(listener: Arc<Listener<K>>, handler: H)
where
    K: Resource + Send + Sync + 'static,
    H: EventHandler<K>,
{
    loop {
        let entry = loop {
            let woken = listener.wake.notified();
            if let Some(e) = listener.pop() {
                break Some(e);
            }
            if listener.lock().closed {
                break None;
            }
            woken.await;
        };
        let Some(entry) = entry else {
            return;
        };
        let (first, then) = entry;
        deliver(&listener, &handler, first).await;
        if let Some(then) = then {
            deliver(&listener, &handler, then).await;
        }
    }
}

async fn deliver<K, H>(listener: &Listener<K>, handler: &H, n: Notification<K>)
where
    K: Resource + Send + Sync + 'static,
    H: EventHandler<K>,
{
    let initial = n.initial();
    // Kept (cheaply: an Arc) only to name the object if the handler panics.
    let subject = match &n {
        Notification::Add { obj, .. } => DeletedObject::Known(obj.clone()),
        Notification::Update { new, .. } => DeletedObject::Known(new.clone()),
        Notification::Delete(d) => d.clone(),
    };
    let result = match n {
        Notification::Add { obj, initial } => {
            AssertUnwindSafe(handler.on_add(obj, initial))
                .catch_unwind()
                .await
        }
        Notification::Update { old, new } => {
            AssertUnwindSafe(handler.on_update(old, new))
                .catch_unwind()
                .await
        }
        Notification::Delete(d) => AssertUnwindSafe(handler.on_delete(d)).catch_unwind().await,
    };
    listener.delivered.fetch_add(1, Ordering::Relaxed);
    // A panicking handler still counts its initial add as handled, so that its
    // registration cannot be wedged unsynced forever (client-go's k/k#129024).
    if initial {
        listener.finish_initial(1);
    }
    if result.is_err() {
        listener.panics.fetch_add(1, Ordering::Relaxed);
        let key = subject.key();
        tracing::error!(handler = listener.id, %key, "event handler panicked; notification skipped");
        // Like client-go: pause a second so a handler that always panics does not spin.
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
