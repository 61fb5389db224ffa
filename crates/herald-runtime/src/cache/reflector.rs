//! The [`Reflector`]: keeps a store in sync with the server through list + watch, with
//! client-go's resourceVersion, pagination, streaming-list and backoff rules.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use kube::Resource;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::backoff::{Backoff, BackoffOptions};
use super::error::ListWatchError;
use super::fifo::RealFifo;
use super::indexer::Indexer;
use super::key::{object_key, resource_version};
use super::lister_watcher::{
    ListRequest, ListerWatcher, WatchEvent, WatchRequest, WatchStream, watch_timeout,
};

/// Where a [`Reflector`] writes what it observes. Implemented by [`RealFifo`] (the
/// informer's queue) and by [`Indexer`] (a plain mirror without handlers).
pub trait ReflectorStore<K>: Send + Sync {
    /// An object was added.
    fn add(&self, obj: K);
    /// An object was modified.
    fn update(&self, obj: K);
    /// An object was deleted (final state).
    fn delete(&self, obj: K);
    /// A (re)list completed at `resource_version`: the store must now hold exactly `list`.
    fn replace(&self, list: Vec<K>, resource_version: &str);
    /// Periodic resync (see [`ReflectorOptions::resync_period`]).
    fn resync(&self) {}
    /// A watch bookmark reached `resource_version`.
    fn bookmark(&self, _resource_version: &str) {}
    /// Resolves when the store can take another watch event (back-pressure).
    fn ready(&self) -> impl Future<Output = ()> + Send {
        async {}
    }
}

impl<K, S: ReflectorStore<K>> ReflectorStore<K> for Arc<S> {
    fn add(&self, obj: K) {
        (**self).add(obj)
    }
    fn update(&self, obj: K) {
        (**self).update(obj)
    }
    fn delete(&self, obj: K) {
        (**self).delete(obj)
    }
    fn replace(&self, list: Vec<K>, resource_version: &str) {
        (**self).replace(list, resource_version)
    }
    fn resync(&self) {
        (**self).resync()
    }
    fn bookmark(&self, resource_version: &str) {
        (**self).bookmark(resource_version)
    }
    fn ready(&self) -> impl Future<Output = ()> + Send {
        (**self).ready()
    }
}

impl<K: Resource + Send + Sync> ReflectorStore<K> for RealFifo<K> {
    fn add(&self, obj: K) {
        RealFifo::add(self, obj)
    }
    fn update(&self, obj: K) {
        RealFifo::update(self, obj)
    }
    fn delete(&self, obj: K) {
        RealFifo::delete(self, obj)
    }
    fn replace(&self, list: Vec<K>, resource_version: &str) {
        RealFifo::replace(self, list, resource_version)
    }
    fn resync(&self) {
        RealFifo::resync(self)
    }
    fn ready(&self) -> impl Future<Output = ()> + Send {
        self.wait_for_room()
    }
}

impl<K: Resource + Send + Sync> ReflectorStore<K> for Indexer<K> {
    fn add(&self, obj: K) {
        Indexer::add(self, Arc::new(obj))
    }
    fn update(&self, obj: K) {
        Indexer::add(self, Arc::new(obj))
    }
    fn delete(&self, obj: K) {
        Indexer::delete(self, &obj);
    }
    fn replace(&self, list: Vec<K>, resource_version: &str) {
        Indexer::replace(
            self,
            list.into_iter().map(Arc::new).collect(),
            resource_version.to_owned(),
        )
    }
    fn bookmark(&self, resource_version: &str) {
        self.set_resource_version(resource_version.to_owned())
    }
}

/// Decides, each resync period, whether to resync now.
pub type ShouldResyncFn = Arc<dyn Fn() -> bool + Send + Sync>;

/// Told about every list and watch error (after the reflector's own logging).
pub type WatchErrorHandler = Arc<dyn Fn(&ListWatchError) + Send + Sync>;

/// Default LIST page size.
pub const DEFAULT_PAGE_SIZE: u32 = 500;

/// Reflector settings. [`Default`] is client-go's.
#[derive(Debug, Clone)]
pub struct ReflectorOptions {
    /// Name used in logs.
    pub name: String,
    /// Fixed LIST page size. `None` (default): 500 for list requests at `""`/`"0"` (or when
    /// the server paginated an RV `"0"` list, meaning its watch cache is off), unpaginated
    /// for relists at a known resourceVersion so that the watch cache can serve them.
    pub page_size: Option<u32>,
    /// Lower bound of the randomized watch timeout: each watch asks for a timeout uniform in
    /// `[min, 2·min)`. Values up to 5 min mean the default 5 min (as in client-go).
    pub min_watch_timeout: Duration,
    /// Retry delays.
    pub backoff: BackoffOptions,
    /// Try streaming lists (`sendInitialEvents=true`) before paginated lists.
    pub watch_list: bool,
    /// A streaming list that sees no event for this long without its
    /// `k8s.io/initial-events-end` bookmark is abandoned for a paginated list (and streaming
    /// is not tried again by this reflector): servers that ignore `sendInitialEvents` would
    /// otherwise leave the cache unsynced forever.
    pub initial_events_idle_timeout: Duration,
    /// How often [`ReflectorStore::resync`] is considered; zero = never.
    pub resync_period: Duration,
    /// Seed for jitter and timeouts; `None` = random.
    pub seed: Option<u64>,
}

impl Default for ReflectorOptions {
    fn default() -> Self {
        Self {
            name: "reflector".to_owned(),
            page_size: None,
            min_watch_timeout: Duration::from_secs(300),
            backoff: BackoffOptions::default(),
            watch_list: true,
            initial_events_idle_timeout: Duration::from_secs(10),
            resync_period: Duration::ZERO,
            seed: None,
        }
    }
}

/// The last resourceVersion a reflector synced to, readable while it runs.
#[derive(Debug, Clone, Default)]
pub struct ResourceVersionHandle(Arc<Mutex<String>>);

impl ResourceVersionHandle {
    /// The last synced resourceVersion (`""` before the first list).
    pub fn get(&self) -> String {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn set(&self, rv: &str) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = rv.to_owned();
    }
}

/// Lists and watches a collection into a [`ReflectorStore`].
///
/// * First list at resourceVersion `"0"` (any freshness, served from the watch cache),
///   500 per page; relists at the last synced resourceVersion ("not older than"); after a
///   410 or "too large resource version" an immediate quorum read (`""`). A continue token
///   that expires mid-list becomes one full, unpaginated list at the original
///   resourceVersion.
/// * Watches from the list's resourceVersion with bookmarks and a random 5–10 min timeout;
///   a normal close re-watches from the last resourceVersion without relisting; a 410
///   relists; 429 and connection-refused retry the watch after a backoff step; a watch
///   that closes within 1 s with no event is an error (relist after backoff).
/// * Only a watch opened from `""`/`"0"` (after a list that reported no usable
///   resourceVersion) holds back the resourceVersions of its leading synthetic ADDEDs; the
///   stream a streaming list hands over does not, whatever its bookmark said. A watch that
///   would be *re*-opened from `""`/`"0"` becomes a relist instead: such a watch replays the
///   current state as ADDEDs and cannot report what was deleted in between.
/// * Streaming lists first (when enabled), falling back to a paginated list when the
///   server rejects or ignores them.
/// * Between attempts: backoff 800 ms → 30 s with jitter, reset every 2 min.
pub struct Reflector<K, L: ?Sized, S> {
    lw: Arc<L>,
    store: S,
    config: ReflectorOptions,
    should_resync: Option<ShouldResyncFn>,
    on_error: Option<WatchErrorHandler>,
    last_sync: ResourceVersionHandle,
    strategy: ListStrategy,
    backoff: Backoff,
    start: Start,
    _k: std::marker::PhantomData<fn() -> K>,
}

/// How the reflector's first round begins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Start {
    /// With a list (or streaming list), as client-go's.
    List,
    /// With a watch from the resourceVersion given to [`Reflector::resume_from`]; every
    /// later round (after an error, a 410 included) lists.
    Watch,
}

enum Step<T> {
    Stopped,
    Done(T),
}

/// The reflector's list strategy: how its next list is made. It changes only in
/// [`ListStrategy::step`], one `match` over the strategy and what a list or watch observed
/// ([`ListEvent`]).
///
/// ```text
///             ResourceVersionUnavailable            StreamUnsupported
///  from: LastSynced ──────────────────► Quorum    Stream ─────────────► List (for good)
///        ▲ Listed / StreamSynced          │
///        └────────────────────────────────┘       pages: AtZeroOnly ──► Always
///                                                  (Listed { paged_at_zero: true }, for good)
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ListStrategy {
    /// Streaming lists (`sendInitialEvents=true`) first, when the lister–watcher supports
    /// them; a round whose streaming list fails for a reason that may pass falls back to a
    /// paginated list, and the next round streams again. The start when
    /// [`ReflectorOptions::watch_list`] is on.
    Stream { from: ListFrom, pages: Pages },
    /// Paginated lists only: streaming lists are off, or the server rejected or ignored one
    /// (they are not tried again by this reflector).
    List { from: ListFrom, pages: Pages },
}

/// Where the next list (or streaming list) reads from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ListFrom {
    /// The last synced resourceVersion (`"0"` for a list before the first sync): "not older
    /// than", which the server's watch cache can serve.
    LastSynced,
    /// A quorum read (`""`): the resourceVersion listed or watched from was answered 410 or
    /// "too large". Until a list or streaming list succeeds.
    Quorum,
}

/// Page size of lists when [`ReflectorOptions::page_size`] is not set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pages {
    /// Lists at `""`/`"0"` take [`DEFAULT_PAGE_SIZE`] per page; a relist at a known
    /// resourceVersion is unpaginated, so that the watch cache can serve it.
    AtZeroOnly,
    /// Every list takes [`DEFAULT_PAGE_SIZE`] per page: the server paginated a list at
    /// `"0"`, so its watch cache is off.
    Always,
}

/// What a list or watch observed that changes the [`ListStrategy`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ListEvent {
    /// The resourceVersion listed or watched from is gone (410) or too large.
    ResourceVersionUnavailable,
    /// A paginated list completed; `paged_at_zero`: it was asked at `"0"` and the server
    /// answered in pages.
    Listed { paged_at_zero: bool },
    /// A streaming list reached its `initial-events-end` bookmark.
    StreamSynced,
    /// The server rejected a streaming list as invalid, or ignored `sendInitialEvents`.
    StreamUnsupported,
}

impl ListStrategy {
    fn new(watch_list: bool) -> Self {
        let (from, pages) = (ListFrom::LastSynced, Pages::AtZeroOnly);
        if watch_list {
            ListStrategy::Stream { from, pages }
        } else {
            ListStrategy::List { from, pages }
        }
    }

    /// The strategy after `event`.
    fn step(self, event: ListEvent) -> Self {
        use ListEvent::*;
        use ListStrategy::*;
        let paged = |pages, paged_at_zero| if paged_at_zero { Pages::Always } else { pages };
        match (self, event) {
            (Stream { pages, .. }, ResourceVersionUnavailable) => Stream {
                from: ListFrom::Quorum,
                pages,
            },
            (List { pages, .. }, ResourceVersionUnavailable) => List {
                from: ListFrom::Quorum,
                pages,
            },
            (Stream { pages, .. }, Listed { paged_at_zero }) => Stream {
                from: ListFrom::LastSynced,
                pages: paged(pages, paged_at_zero),
            },
            (List { pages, .. }, Listed { paged_at_zero }) => List {
                from: ListFrom::LastSynced,
                pages: paged(pages, paged_at_zero),
            },
            (Stream { pages, .. }, StreamSynced) => Stream {
                from: ListFrom::LastSynced,
                pages,
            },
            // A stream only syncs in the Stream strategy; nothing to change.
            (List { .. }, StreamSynced) => self,
            (Stream { from, pages }, StreamUnsupported) => List { from, pages },
            (List { .. }, StreamUnsupported) => self,
        }
    }

    fn from(self) -> ListFrom {
        match self {
            ListStrategy::Stream { from, .. } | ListStrategy::List { from, .. } => from,
        }
    }

    fn pages(self) -> Pages {
        match self {
            ListStrategy::Stream { pages, .. } | ListStrategy::List { pages, .. } => pages,
        }
    }
}

/// How a streaming list ended before its `initial-events-end` bookmark, when it is retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StreamEnd {
    /// Closed, or failed in a way a retry may fix: counts towards the three early closes
    /// that rule streaming lists out, and waits a backoff step.
    Closed,
    /// Its resourceVersion is gone: retried at once from a quorum read.
    Expired,
}

/// Which watch of one list-and-watch is being opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WatchRound {
    /// The first, right after the list (or the stream a streaming list handed over).
    First,
    /// A later one, after a watch ended.
    Resumed,
}

/// Whether the resourceVersions of a watch's events become the resume point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LeadingAdds {
    /// A watch opened from `""`/`"0"` starts with synthetic ADDEDs in arbitrary order: their
    /// resourceVersions are held back until the first event of another kind.
    Hold,
    /// Every event's resourceVersion is the resume point.
    Follow,
}

impl<K, L, S> Reflector<K, L, S>
where
    K: Resource + Send + 'static,
    L: ListerWatcher<K> + ?Sized,
    S: ReflectorStore<K>,
{
    /// A reflector from `lw` into `store`.
    pub fn new(lw: Arc<L>, store: S, config: ReflectorOptions) -> Self {
        let seed = config.seed.unwrap_or_else(rand::random);
        Self {
            lw,
            store,
            backoff: Backoff::new(config.backoff.clone(), Instant::now(), seed),
            strategy: ListStrategy::new(config.watch_list),
            config,
            should_resync: None,
            on_error: None,
            last_sync: ResourceVersionHandle::default(),
            start: Start::List,
            _k: std::marker::PhantomData,
        }
    }

    /// Consulted at every resync period; without it every period resyncs.
    #[must_use]
    pub fn with_should_resync(mut self, f: ShouldResyncFn) -> Self {
        self.should_resync = Some(f);
        self
    }

    /// Called with every list/watch error.
    #[must_use]
    pub fn with_watch_error_handler(mut self, f: WatchErrorHandler) -> Self {
        self.on_error = Some(f);
        self
    }

    /// Starts with a watch from `resource_version` instead of a list: for a store that
    /// already holds everything up to that resourceVersion (a copy persisted across a
    /// restart), so that it receives exactly the changes after it, none twice, none missed.
    /// If the server answers that watch with 410 `Expired` (its history no longer reaches
    /// back so far) or "too large resource version", the reflector relists as after any
    /// watch error ([`ReflectorStore::replace`] then brings the store up to date). An empty
    /// `resource_version` or `"0"` (no real position) keeps the usual list-first start.
    #[must_use]
    pub fn resume_from(self, resource_version: &str) -> Self {
        if resource_version.is_empty() || resource_version == "0" {
            return self;
        }
        self.last_sync.set(resource_version);
        Self {
            start: Start::Watch,
            ..self
        }
    }

    /// A handle on the last synced resourceVersion.
    pub fn resource_version_handle(&self) -> ResourceVersionHandle {
        self.last_sync.clone()
    }

    /// The last synced resourceVersion.
    pub fn last_sync_resource_version(&self) -> String {
        self.last_sync.get()
    }

    /// Runs list-and-watch until `shutdown`, sleeping one backoff step after every return
    /// (error or not).
    pub async fn run(mut self, shutdown: CancellationToken) {
        while !shutdown.is_cancelled() {
            if let Err(e) = self.list_and_watch(&shutdown).await {
                self.report(&e);
            }
            if shutdown.is_cancelled() {
                break;
            }
            let d = self.backoff.next_delay(Instant::now());
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(d) => {}
            }
        }
        tracing::debug!(reflector = %self.config.name, "reflector stopped");
    }

    /// One list (or streaming list) followed by watches until an error or `shutdown`.
    /// `Ok(())` when stopped.
    pub async fn list_and_watch(
        &mut self,
        shutdown: &CancellationToken,
    ) -> Result<(), ListWatchError> {
        if shutdown.is_cancelled() {
            return Ok(());
        }
        if std::mem::replace(&mut self.start, Start::List) == Start::Watch {
            return self.watch_loop(None, shutdown).await;
        }
        let mut stream = None;
        let stream_first = matches!(self.strategy, ListStrategy::Stream { .. });
        if stream_first && self.lw.supports_watch_list() {
            match self.watch_list(shutdown).await {
                Ok(Step::Stopped) => return Ok(()),
                Ok(Step::Done(s)) => stream = Some(s),
                Err(e) => {
                    if matches!(
                        e,
                        ListWatchError::Invalid { .. } | ListWatchError::WatchListUnsupported(_)
                    ) {
                        self.step(ListEvent::StreamUnsupported);
                    }
                    tracing::info!(reflector = %self.config.name, error = %e,
                        "streaming list failed; falling back to a paginated list");
                    self.report(&e);
                }
            }
        }
        if stream.is_none() {
            match self.list(shutdown).await? {
                Step::Stopped => return Ok(()),
                Step::Done(()) => {}
            }
        }
        self.watch_loop(stream, shutdown).await
    }

    fn report(&self, e: &ListWatchError) {
        match e {
            ListWatchError::Expired(_) => {
                tracing::debug!(reflector = %self.config.name, error = %e, "watch closed")
            }
            _ => tracing::warn!(reflector = %self.config.name, error = %e, "list/watch failed"),
        }
        if let Some(f) = &self.on_error {
            f(e);
        }
    }

    fn step(&mut self, event: ListEvent) {
        self.strategy = self.strategy.step(event);
    }

    fn relist_resource_version(&self) -> String {
        if self.strategy.from() == ListFrom::Quorum {
            return String::new();
        }
        let last = self.last_sync.get();
        if last.is_empty() {
            "0".to_owned()
        } else {
            last
        }
    }

    fn set_last_sync(&self, rv: &str) {
        if !rv.is_empty() {
            self.last_sync.set(rv);
        }
    }

    async fn backoff_sleep(&mut self, shutdown: &CancellationToken) -> Step<()> {
        let d = self.backoff.next_delay(Instant::now());
        tokio::select! {
            _ = shutdown.cancelled() => Step::Stopped,
            _ = tokio::time::sleep(d) => Step::Done(()),
        }
    }

    fn next_watch_timeout(&mut self) -> u32 {
        let min = self.config.min_watch_timeout.max(Duration::from_secs(300));
        watch_timeout(min, self.backoff.unit())
    }

    async fn list(&mut self, shutdown: &CancellationToken) -> Result<Step<()>, ListWatchError> {
        let rv = self.relist_resource_version();
        match self.list_at(rv, shutdown).await {
            Err(e) if e.is_resource_version_unavailable() => {
                tracing::debug!(reflector = %self.config.name, error = %e,
                    "list resourceVersion unavailable; retrying with a quorum read");
                self.step(ListEvent::ResourceVersionUnavailable);
                self.list_at(String::new(), shutdown).await
            }
            other => other,
        }
    }

    async fn list_at(
        &mut self,
        rv: String,
        shutdown: &CancellationToken,
    ) -> Result<Step<()>, ListWatchError> {
        let limit = match self.config.page_size {
            Some(n) if n > 0 => Some(n),
            _ if self.strategy.pages() == Pages::Always || rv.is_empty() || rv == "0" => {
                Some(DEFAULT_PAGE_SIZE)
            }
            _ => None,
        };
        let mut items: Vec<K> = Vec::new();
        let mut req = ListRequest {
            resource_version: rv.clone(),
            resource_version_match: None,
            limit,
            continue_token: None,
        };
        let mut paginated = false;
        let list_rv = loop {
            let page = tokio::select! {
                _ = shutdown.cancelled() => return Ok(Step::Stopped),
                p = self.lw.list(req.clone()) => p,
            };
            let page = match page {
                Ok(p) => p,
                Err(ListWatchError::Expired(msg)) if req.continue_token.is_some() => {
                    // The continue token expired mid-list: one full list at the original RV.
                    tracing::debug!(reflector = %self.config.name, %msg,
                        "continue token expired; falling back to a full list");
                    let full = ListRequest {
                        resource_version: rv.clone(),
                        resource_version_match: None,
                        limit: None,
                        continue_token: None,
                    };
                    let page = tokio::select! {
                        _ = shutdown.cancelled() => return Ok(Step::Stopped),
                        p = self.lw.list(full) => p?,
                    };
                    items.clear();
                    self.report_corrupt(&page.corrupt);
                    items.extend(page.items);
                    break page.resource_version;
                }
                Err(e) => return Err(e),
            };
            self.report_corrupt(&page.corrupt);
            items.extend(page.items);
            match page.continue_token {
                Some(token) => {
                    paginated = true;
                    req = ListRequest {
                        resource_version: String::new(),
                        resource_version_match: None,
                        limit,
                        continue_token: Some(token),
                    };
                }
                None => break page.resource_version,
            }
        };
        self.step(ListEvent::Listed {
            paged_at_zero: rv == "0" && paginated,
        });
        self.store.replace(items, &list_rv);
        self.set_last_sync(&list_rv);
        Ok(Step::Done(()))
    }

    fn report_corrupt(&self, corrupt: &[String]) {
        for msg in corrupt {
            self.report(&ListWatchError::Decode(msg.clone()));
        }
    }

    /// Streaming list: initial events into a temporary map, swapped into the store at the
    /// `initial-events-end` bookmark; the same stream then carries on as the watch.
    async fn watch_list(
        &mut self,
        shutdown: &CancellationToken,
    ) -> Result<Step<WatchStream<K>>, ListWatchError> {
        let mut closed_early = 0u32;
        loop {
            let rv = match self.strategy.from() {
                ListFrom::Quorum => String::new(),
                ListFrom::LastSynced => self.last_sync.get(),
            };
            let req = WatchRequest {
                resource_version: rv,
                timeout_seconds: self.next_watch_timeout(),
                allow_bookmarks: true,
                send_initial_events: true,
            };
            let opened = tokio::select! {
                _ = shutdown.cancelled() => return Ok(Step::Stopped),
                s = self.lw.watch(req) => s,
            };
            let mut stream = match opened {
                Ok(s) => s,
                Err(e) if e.is_retryable_without_relist() => {
                    self.report(&e);
                    if let Step::Stopped = self.backoff_sleep(shutdown).await {
                        return Ok(Step::Stopped);
                    }
                    continue;
                }
                Err(e)
                    if e.is_resource_version_unavailable()
                        && self.strategy.from() == ListFrom::LastSynced =>
                {
                    self.step(ListEvent::ResourceVersionUnavailable);
                    continue;
                }
                Err(e) => return Err(e),
            };
            let mut temp: HashMap<String, K> = HashMap::new();
            let mut deadline = Instant::now() + self.config.initial_events_idle_timeout;
            let end = loop {
                let ev = tokio::select! {
                    _ = shutdown.cancelled() => return Ok(Step::Stopped),
                    _ = tokio::time::sleep_until(deadline) => {
                        return Err(ListWatchError::WatchListUnsupported(format!(
                            "no {} bookmark within {:?} of the last event",
                            super::lister_watcher::INITIAL_EVENTS_END_ANNOTATION,
                            self.config.initial_events_idle_timeout
                        )));
                    }
                    ev = stream.next() => ev,
                };
                deadline = Instant::now() + self.config.initial_events_idle_timeout;
                match ev {
                    None => break StreamEnd::Closed,
                    Some(Ok(WatchEvent::Added(o) | WatchEvent::Modified(o))) => {
                        temp.insert(object_key(&o), o);
                    }
                    Some(Ok(WatchEvent::Deleted(o))) => {
                        temp.remove(&object_key(&o));
                    }
                    Some(Ok(WatchEvent::Bookmark(b))) if b.initial_events_end => {
                        self.store
                            .replace(temp.into_values().collect(), &b.resource_version);
                        self.set_last_sync(&b.resource_version);
                        self.step(ListEvent::StreamSynced);
                        return Ok(Step::Done(stream));
                    }
                    Some(Ok(WatchEvent::Bookmark(_))) => {}
                    Some(Err(e)) if e.is_resource_version_unavailable() => {
                        self.step(ListEvent::ResourceVersionUnavailable);
                        break StreamEnd::Expired;
                    }
                    Some(Err(e)) if e.is_retryable_without_relist() => {
                        self.report(&e);
                        break StreamEnd::Closed;
                    }
                    Some(Err(e)) => return Err(e),
                }
            };
            if end == StreamEnd::Closed {
                closed_early += 1;
                if closed_early >= 3 {
                    return Err(ListWatchError::WatchListUnsupported(
                        "streaming list closed three times before its initial-events-end bookmark"
                            .to_owned(),
                    ));
                }
                if let Step::Stopped = self.backoff_sleep(shutdown).await {
                    return Ok(Step::Stopped);
                }
            }
        }
    }

    async fn watch_loop(
        &mut self,
        mut stream: Option<WatchStream<K>>,
        shutdown: &CancellationToken,
    ) -> Result<(), ListWatchError> {
        let period = self.config.resync_period;
        let mut resync = (!period.is_zero()).then(|| {
            let mut i = tokio::time::interval_at(Instant::now() + period, period);
            i.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            i
        });
        let mut round = WatchRound::First;
        loop {
            if shutdown.is_cancelled() {
                return Ok(());
            }
            let start_rv = self.last_sync.get();
            // A stream carried over from a streaming list has delivered its initial events
            // already; only a watch opened here from "" or "0" starts with synthetic ADDEDs.
            let carried = stream.is_some();
            let s = match stream.take() {
                Some(s) => s,
                None if round == WatchRound::Resumed
                    && (start_rv.is_empty() || start_rv == "0") =>
                {
                    // No real resume point: a watch from "" or "0" would replay the current
                    // state as ADDEDs and never delete what vanished meanwhile. Relist
                    // instead (Replace turns the vanished objects into deletes).
                    tracing::debug!(reflector = %self.config.name, rv = %start_rv,
                        "no resourceVersion to resume the watch from; relisting");
                    return Ok(());
                }
                None => {
                    let req = WatchRequest {
                        resource_version: start_rv.clone(),
                        timeout_seconds: self.next_watch_timeout(),
                        allow_bookmarks: true,
                        send_initial_events: false,
                    };
                    let opened = tokio::select! {
                        _ = shutdown.cancelled() => return Ok(()),
                        s = self.lw.watch(req) => s,
                    };
                    match opened {
                        Ok(s) => s,
                        Err(e) if e.is_retryable_without_relist() => {
                            self.report(&e);
                            if let Step::Stopped = self.backoff_sleep(shutdown).await {
                                return Ok(());
                            }
                            continue;
                        }
                        Err(e) => return Err(e),
                    }
                }
            };
            let leading_adds = if !carried && (start_rv.is_empty() || start_rv == "0") {
                LeadingAdds::Hold
            } else {
                LeadingAdds::Follow
            };
            let handled = self
                .handle_watch(s, leading_adds, resync.as_mut(), shutdown)
                .await;
            round = WatchRound::Resumed;
            match handled {
                Ok(()) => {}
                Err(e @ ListWatchError::TooManyRequests { .. }) => {
                    self.report(&e);
                    if let Step::Stopped = self.backoff_sleep(shutdown).await {
                        return Ok(());
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    async fn handle_watch(
        &mut self,
        mut stream: WatchStream<K>,
        mut leading_adds: LeadingAdds,
        mut resync: Option<&mut tokio::time::Interval>,
        shutdown: &CancellationToken,
    ) -> Result<(), ListWatchError> {
        let started = Instant::now();
        let mut events = 0u64;
        loop {
            let ev = tokio::select! {
                _ = shutdown.cancelled() => return Ok(()),
                _ = async {
                    match resync.as_mut() {
                        Some(i) => { i.tick().await; }
                        None => std::future::pending::<()>().await,
                    }
                } => {
                    if self.should_resync.as_ref().is_none_or(|f| f()) {
                        self.store.resync();
                    }
                    continue;
                }
                ev = stream.next() => ev,
            };
            let ev = match ev {
                None => {
                    let elapsed = started.elapsed();
                    if events == 0 && elapsed < Duration::from_secs(1) {
                        return Err(ListWatchError::VeryShortWatch { elapsed });
                    }
                    return Ok(());
                }
                Some(Err(e)) => return Err(e),
                Some(Ok(ev)) => ev,
            };
            events += 1;
            tokio::select! {
                _ = shutdown.cancelled() => return Ok(()),
                _ = self.store.ready() => {}
            }
            let (rv, added) = match ev {
                WatchEvent::Added(o) => {
                    let rv = resource_version(&o).to_owned();
                    self.store.add(o);
                    (rv, true)
                }
                WatchEvent::Modified(o) => {
                    let rv = resource_version(&o).to_owned();
                    self.store.update(o);
                    (rv, false)
                }
                WatchEvent::Deleted(o) => {
                    let rv = resource_version(&o).to_owned();
                    self.store.delete(o);
                    (rv, false)
                }
                WatchEvent::Bookmark(b) => {
                    self.store.bookmark(&b.resource_version);
                    (b.resource_version, false)
                }
            };
            if leading_adds == LeadingAdds::Hold && added {
                continue;
            }
            leading_adds = LeadingAdds::Follow;
            self.set_last_sync(&rv);
        }
    }
}
