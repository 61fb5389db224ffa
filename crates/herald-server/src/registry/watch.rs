//! The watch state machine: initial events, live changes through the selectors, bookmarks,
//! the timeout, the 410 at the end of history and the 504 for a revision never reached.
//!
//! It works on batches: each wake-up of the storage watch yields all the changes that are
//! ready, and they go out together. Without selectors a change is passed on as the shared
//! [`CachedEvent`] (no decoding per watcher: the HTTP layer encodes each change once for all
//! watchers); with selectors each change is decoded and judged for this watcher.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use herald_core::event::{ApiGroup, CoreEvent};
use herald_core::status::ApiError;
use herald_wire::encoding::WatchEncoding;
use rand::Rng;
use tokio::time::{Instant, Sleep};

use super::errors::{storage_error, too_large_rv};
use super::keys::{self, decode, parse_rv};
use super::{EventRegistry, Filter, ListParams, Resume, Stored};
use crate::storage::{
    CachedEvent, CachedWatchStream, ListOptions, ListOrder, Revision, StorageError, WatchEvent,
};
use herald_wire::stored::decode_at;

/// The longest a watch may last (one year); longer timeouts are clamped (tokio timers and
/// instants overflow far beyond it).
const MAX_WATCH: Duration = Duration::from_secs(365 * 24 * 3600);

/// How long a watch from a revision the store has not reached waits for it before it ends
/// with "Too large resource version" (kube-apiserver's watch cache waits the same 3 s).
pub(super) const FUTURE_RV_WAIT: Duration = Duration::from_secs(3);

/// The most initial events handed out in one batch.
const INITIAL_BATCH: usize = 512;

/// The 410 a watch from a revision outside the retained history gets (the watch cache's
/// wording, which kubectl prints as `too old resource version: …`).
fn too_old(requested: Revision, oldest: Revision) -> ApiError {
    ApiError::expired(format!("too old resource version: {requested} ({oldest})"))
}

/// One item of a watch ([`EventRegistry::watch`](super::EventRegistry::watch)), as stored
/// where nothing had to decode it.
#[derive(Debug, Clone)]
pub enum WatchItem {
    /// A stored change as a watcher without selectors sees it: the same [`Change`] goes to
    /// every such watcher, so an encoding of it made once ([`Change::encoding`]) serves them
    /// all.
    Change(Change),
    /// `ADDED` for a stored event: the initial events of a watch without selectors.
    Initial(Stored),
    /// A change as the selectors judged it, with the event they decoded to judge it (boxed:
    /// batches of the small variants stay small).
    Judged(ChangeKind, Box<CoreEvent>),
    /// A bookmark at `resource_version`; `initial_events_end` marks the end of the initial
    /// events of a `sendInitialEvents=true` watch.
    Bookmark {
        /// The revision the client may resume from.
        resource_version: String,
        /// Carries the `k8s.io/initial-events-end: "true"` annotation.
        initial_events_end: bool,
    },
    /// A failure (410 Expired when the history is gone); the stream ends after it.
    Error(Box<ApiError>),
}

/// A watch: batches of the items that were ready together, in revision order, never empty;
/// ends at the timeout, after an `Error`, or when the backend shuts down.
pub type EventWatch = BoxStream<'static, Vec<WatchItem>>;

/// A committed change, shared by every watcher without selectors (cheap to clone).
#[derive(Debug, Clone)]
pub struct Change(Arc<CachedEvent>);

/// The slots of a cached change are numbered by [`WatchEncoding::slot`]: there must be room.
const _: () = assert!(WatchEncoding::COUNT <= crate::storage::ENCODINGS);

impl Change {
    /// What the change is to a watcher that sees everything: `ADDED` for a create,
    /// `MODIFIED` for an update, `DELETED` for a deletion or expiry.
    pub fn kind(&self) -> ChangeKind {
        match &**self.0.event() {
            WatchEvent::Put { prev: None, .. } => ChangeKind::Added,
            WatchEvent::Put { prev: Some(_), .. } => ChangeKind::Modified,
            WatchEvent::Delete { .. } => ChangeKind::Deleted,
        }
    }

    /// The stored bytes to show and the resourceVersion to show them at: the new state of a
    /// create or update, the last state of a deleted event at the deletion's revision.
    pub fn stored(&self) -> (&[u8], Revision) {
        match &**self.0.event() {
            WatchEvent::Put { kv, .. } => (&kv.value, kv.mod_revision),
            WatchEvent::Delete { prev, revision } => (&prev.value, *revision),
        }
    }

    /// The event [`Change::stored`] holds, typed.
    pub fn decode(&self) -> Result<CoreEvent, ApiError> {
        let (bytes, revision) = self.stored();
        decode_at(bytes, revision)
    }

    /// The change in `encoding`, made by `encode` the first time any watcher asks for it and
    /// shared after that (an empty `Bytes` from `encode` is kept too: the change is then
    /// skipped by every such watcher alike).
    pub fn encoding(
        &self,
        encoding: WatchEncoding,
        encode: impl FnOnce(&Change) -> Bytes,
    ) -> Bytes {
        self.0.encoding(encoding.slot(), |_| encode(self))
    }

    /// The decoded item; `None` (logged) when the stored bytes do not decode.
    pub fn decoded(&self) -> Option<DecodedItem> {
        match self.decode() {
            Ok(e) => Some(self.kind().item(e)),
            Err(err) => {
                tracing::warn!(key = %self.0.event().key(), error = %err, "skipping undecodable event in watch");
                None
            }
        }
    }
}

/// A watch item decoded ([`WatchItem::decode`], [`decoded`]): the typed form, for clients
/// of the registry that want events rather than bytes (tests, in-process consumers).
#[derive(Debug, Clone, PartialEq)]
pub enum DecodedItem {
    /// The event appeared (or started matching the selectors).
    Added(CoreEvent),
    /// The event changed.
    Modified(CoreEvent),
    /// The event was deleted (or expired, or stopped matching): its last state, with the
    /// resourceVersion of the deletion.
    Deleted(CoreEvent),
    /// A bookmark (see [`WatchItem::Bookmark`]).
    Bookmark {
        /// The revision the client may resume from.
        resource_version: String,
        /// Carries the `k8s.io/initial-events-end: "true"` annotation.
        initial_events_end: bool,
    },
    /// A failure; the stream ends after it.
    Error(ApiError),
}

/// The type of an object watch event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChangeKind {
    /// `ADDED`.
    Added,
    /// `MODIFIED`.
    Modified,
    /// `DELETED`.
    Deleted,
}

impl ChangeKind {
    /// The `type` of the watch line.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Added => "ADDED",
            ChangeKind::Modified => "MODIFIED",
            ChangeKind::Deleted => "DELETED",
        }
    }

    /// The decoded item of this kind for `e`.
    pub fn item(self, e: CoreEvent) -> DecodedItem {
        match self {
            ChangeKind::Added => DecodedItem::Added(e),
            ChangeKind::Modified => DecodedItem::Modified(e),
            ChangeKind::Deleted => DecodedItem::Deleted(e),
        }
    }
}

impl WatchItem {
    /// The decoded item; `None` (logged) when stored bytes do not decode.
    pub fn decode(self) -> Option<DecodedItem> {
        match self {
            WatchItem::Change(c) => c.decoded(),
            WatchItem::Initial(stored) => match stored.decode() {
                Ok(e) => Some(DecodedItem::Added(e)),
                Err(err) => {
                    tracing::warn!(revision = stored.revision, error = %err, "skipping undecodable event in watch");
                    None
                }
            },
            WatchItem::Judged(kind, e) => Some(kind.item(*e)),
            WatchItem::Bookmark {
                resource_version,
                initial_events_end,
            } => Some(DecodedItem::Bookmark {
                resource_version,
                initial_events_end,
            }),
            WatchItem::Error(e) => Some(DecodedItem::Error(*e)),
        }
    }
}

/// `w` as single decoded items (the decoding helper beside the stored form).
pub fn decoded(w: EventWatch) -> BoxStream<'static, DecodedItem> {
    w.flat_map(|batch| futures::stream::iter(batch.into_iter().filter_map(WatchItem::decode)))
        .boxed()
}

pub(super) async fn start(
    reg: &EventRegistry,
    group: ApiGroup,
    namespace: Option<&str>,
    name: Option<&str>,
    p: &ListParams,
) -> Result<EventWatch, ApiError> {
    let mut p = p.clone();
    p.watch = true;
    p.validate()?;
    let filter = Filter::new(group, &p, name)?;
    let r = group.resource();
    let prefix = keys::prefix(namespace);
    let rv = parse_rv(p.rv())?;
    let legacy_initial = matches!(rv, None | Some(0));
    let send_initial = p.send_initial_events.unwrap_or(legacy_initial);
    let mut initial = None;
    // Set when the watch asks for a revision beyond the store's: it subscribes at the current
    // revision instead and waits (bounded) for the requested one.
    let mut ahead = None;
    let start = if send_initial {
        let mut pages = Initial {
            backend: Arc::clone(&reg.backend),
            prefix: prefix.clone(),
            at: None,
            cursor: None,
            more: true,
            ready: VecDeque::new(),
            end: None,
        };
        pages
            .fill(&filter)
            .await
            .map_err(|e| storage_error(e, r, ""))?;
        let revision = pages.at.unwrap_or_default();
        if let Some(min) = rv.filter(|m| *m > revision) {
            return Err(too_large_rv(min, revision));
        }
        // kube-apiserver (1.32, WatchList on) defaults a watch from "" or "0" that names
        // neither sendInitialEvents nor resourceVersionMatch to `sendInitialEvents=true`, so
        // it too ends its initial events with the bookmark when bookmarks are allowed.
        let defaulted = p.send_initial_events.is_none() && p.rv_match().is_none();
        if (p.send_initial_events == Some(true) || defaulted) && p.allow_watch_bookmarks {
            pages.end = Some(WatchItem::Bookmark {
                resource_version: revision.to_string(),
                initial_events_end: true,
            });
        }
        initial = Some(pages);
        revision
    } else {
        let current = reg
            .backend
            .current_revision()
            .await
            .map_err(|e| storage_error(e, r, ""))?;
        match rv {
            Some(n) if n > current => {
                ahead = Some(n);
                current
            }
            // "0" without initial events means "from any revision": kube-apiserver starts
            // at the newest, it does not replay the history it still holds.
            Some(0) | None => current,
            Some(n) => n,
        }
    };
    let inner = match reg.backend.watch_batches(&prefix, start).await {
        Ok(s) => s,
        Err(StorageError::Expired { requested, oldest }) => {
            return Ok(futures::stream::once(async move {
                one(WatchItem::Error(Box::new(too_old(requested, oldest))))
            })
            .boxed());
        }
        Err(e) => return Err(storage_error(e, r, "")),
    };
    let timeout = match p.timeout_seconds {
        // Already over: kube-apiserver's timer for a negative timeout fires at once.
        Some(s) if s < 0 => Duration::ZERO,
        Some(s) if s > 0 => Duration::from_secs(u64::try_from(s).unwrap_or(u64::MAX).min(1 << 32)),
        _ => {
            // [d, 2d): spreads re-watches of many clients, like kube-apiserver.
            let base = reg.opts.default_watch_timeout;
            let extra = rand::rng().random_range(0.0..1.0) * base.as_secs_f64();
            base.saturating_add(Duration::try_from_secs_f64(extra).unwrap_or_default())
        }
    };
    let now = Instant::now();
    let timeout = timeout.min(MAX_WATCH);
    let ends_at = now.checked_add(timeout).unwrap_or(now);
    let bookmarks = if p.allow_watch_bookmarks {
        Bookmarks::new(
            reg.opts.bookmark_interval.max(Duration::from_millis(10)),
            ends_at,
            now,
        )
    } else {
        None
    };
    let state = State {
        initial,
        inner,
        filter,
        ahead: ahead.map(|n| Ahead {
            requested: n,
            current: start,
            until: Box::pin(tokio::time::sleep(FUTURE_RV_WAIT)),
        }),
        last_rv: ahead.unwrap_or(start),
        bookmarks,
        deadline: Box::pin(tokio::time::sleep_until(ends_at)),
        done: false,
    };
    Ok(futures::stream::unfold(state, State::next).boxed())
}

/// The initial events still to send: read from the store [`INITIAL_BATCH`] keys at a time at
/// the watch's start revision, as the client takes them, so that a watch of a large store
/// holds one page, not the store (a page read after the history of its revision was
/// compacted ends the watch with a 410, and the client re-lists).
///
/// They come in the order the backend reads fastest ([`ListOrder::Fastest`], as an unpaged
/// list): on SQLite the initial events of most of a large store are read in the order they
/// were last written, sequentially through the file. Kubernetes promises no order for them
/// (kube-apiserver sends its watch cache's), and informers do not need one.
struct Initial {
    backend: Arc<dyn crate::storage::Backend>,
    prefix: String,
    /// The snapshot revision (the first page's).
    at: Option<Revision>,
    /// Where the next page goes on from, in the order the first page was read in; `None`
    /// before the first page.
    cursor: Option<Resume>,
    /// Whether keys may follow the cursor.
    more: bool,
    /// Read and selected, not yet sent.
    ready: VecDeque<WatchItem>,
    /// The initial-events-end bookmark, sent after the last initial event.
    end: Option<WatchItem>,
}

impl Initial {
    /// Reads pages until one has an event the filter selects, or none are left.
    async fn fill(&mut self, filter: &Filter) -> Result<(), StorageError> {
        let everything = filter.is_everything();
        while self.ready.is_empty() && self.more {
            let (order, start_after) = match self.cursor.clone() {
                Some(cursor) => cursor.read(),
                None => (ListOrder::Fastest, None),
            };
            let page = self
                .backend
                .list(
                    &self.prefix,
                    ListOptions {
                        start_after,
                        limit: Some(INITIAL_BATCH),
                        at_revision: self.at,
                        index: filter.index_query(),
                        order,
                    },
                )
                .await?;
            self.at = Some(page.revision);
            self.more = page.more;
            if let Some(kv) = page.items.last() {
                self.cursor = Some(Resume::after(page.order, kv));
            }
            for kv in page.items {
                if everything {
                    self.ready.push_back(WatchItem::Initial(Stored {
                        bytes: kv.value,
                        revision: kv.mod_revision,
                    }));
                } else if let Ok(ev) = decode(&kv)
                    && filter.matches(&ev)
                {
                    self.ready
                        .push_back(WatchItem::Judged(ChangeKind::Added, Box::new(ev)));
                }
            }
        }
        Ok(())
    }
}

struct State {
    initial: Option<Initial>,
    inner: CachedWatchStream,
    filter: Filter,
    /// A requested start revision the store had not reached when the watch began.
    ahead: Option<Ahead>,
    /// The revision of the last change seen (delivered or filtered out).
    last_rv: Revision,
    bookmarks: Option<Bookmarks>,
    deadline: Pin<Box<Sleep>>,
    done: bool,
}

/// Waiting for the store to reach the revision a watch asked to start from. Changes up to it
/// are not the watch's (it starts after them) and are skipped.
struct Ahead {
    requested: Revision,
    /// The newest revision seen meanwhile (reported when giving up).
    current: Revision,
    /// When the wait gives up with "Too large resource version".
    until: Pin<Box<Sleep>>,
}

async fn give_up(ahead: &mut Option<Ahead>) {
    match ahead {
        Some(a) => a.until.as_mut().await,
        None => std::future::pending().await,
    }
}

/// When the next `BOOKMARK` goes out: every `period`, and once more shortly before the
/// watch's deadline so that the client re-watches from a fresh resourceVersion (kube-apiserver's
/// `nextBookmarkTime`). No more after that last one.
struct Bookmarks {
    next: Pin<Box<Sleep>>,
    period: Duration,
    /// [`BOOKMARK_BEFORE_END`] before the deadline.
    last_call: Instant,
}

/// How long before a watch's deadline its last bookmark goes out (kube-apiserver: 2 s).
const BOOKMARK_BEFORE_END: Duration = Duration::from_secs(2);

impl Bookmarks {
    /// `None` when the watch ends too soon for any bookmark.
    fn new(period: Duration, ends_at: Instant, now: Instant) -> Option<Self> {
        let last_call = ends_at.checked_sub(BOOKMARK_BEFORE_END)?;
        let next = Self::after(now, period, last_call)?;
        Some(Self {
            next: Box::pin(tokio::time::sleep_until(next)),
            period,
            last_call,
        })
    }

    /// The bookmark after one sent at `now`: `period` later, but not after `last_call`;
    /// none once `last_call` has come.
    fn after(now: Instant, period: Duration, last_call: Instant) -> Option<Instant> {
        let next = now.checked_add(period).unwrap_or(last_call).min(last_call);
        (next > now).then_some(next)
    }
}

/// Waits for the next bookmark; then schedules the one after it, or ends the schedule.
async fn tick(b: &mut Option<Bookmarks>) {
    let Some(sched) = b else {
        return std::future::pending().await;
    };
    sched.next.as_mut().await;
    match Bookmarks::after(Instant::now(), sched.period, sched.last_call) {
        Some(next) => sched.next.as_mut().reset(next),
        None => *b = None,
    }
}

fn one(item: WatchItem) -> Vec<WatchItem> {
    vec![item]
}

impl State {
    async fn next(mut self) -> Option<(Vec<WatchItem>, Self)> {
        loop {
            if let Some(init) = &mut self.initial {
                if let Err(e) = init.fill(&self.filter).await {
                    self.initial = None;
                    self.done = true;
                    let err = match e {
                        StorageError::Expired { requested, oldest } => too_old(requested, oldest),
                        e => ApiError::internal(e.to_string()),
                    };
                    return Some((one(WatchItem::Error(Box::new(err))), self));
                }
                if !init.ready.is_empty() {
                    let n = init.ready.len().min(INITIAL_BATCH);
                    let batch: Vec<WatchItem> = init.ready.drain(..n).collect();
                    return Some((batch, self));
                }
                let end = init.end.take();
                self.initial = None;
                if let Some(bookmark) = end {
                    return Some((one(bookmark), self));
                }
            }
            if self.done {
                return None;
            }
            tokio::select! {
                biased;
                _ = &mut self.deadline => return None,
                batch = self.inner.next() => match batch {
                    None => return None,
                    Some(Err(StorageError::Expired { requested, oldest })) => {
                        self.done = true;
                        return Some((one(WatchItem::Error(Box::new(too_old(requested, oldest)))), self));
                    }
                    Some(Err(e)) => {
                        self.done = true;
                        return Some((one(WatchItem::Error(Box::new(ApiError::internal(e.to_string())))), self));
                    }
                    Some(Ok(events)) => {
                        let mut out = Vec::with_capacity(events.len());
                        for ev in events {
                            if let Some(a) = &mut self.ahead {
                                if ev.revision() <= a.requested {
                                    a.current = ev.revision();
                                    if ev.revision() == a.requested {
                                        self.ahead = None;
                                    }
                                    continue;
                                }
                                self.ahead = None;
                            }
                            self.last_rv = ev.revision();
                            if let Some(item) = self.transform(ev) {
                                out.push(item);
                            }
                        }
                        if !out.is_empty() {
                            return Some((out, self));
                        }
                    }
                },
                // After the batch branch: what the store has ready is judged before giving up.
                _ = give_up(&mut self.ahead) => {
                    let (requested, current) = self
                        .ahead
                        .take()
                        .map_or((self.last_rv, self.last_rv), |a| (a.requested, a.current));
                    let reached = self.inner.progress();
                    if reached >= requested {
                        // The store got there through writes outside this watch's prefix;
                        // every change here up to `requested` has been passed over.
                        self.last_rv = self.last_rv.max(requested);
                        continue;
                    }
                    self.done = true;
                    let current = current.max(reached);
                    return Some((one(WatchItem::Error(Box::new(too_large_rv(requested, current)))), self));
                }
                _ = tick(&mut self.bookmarks), if self.ahead.is_none() => {
                    // The storage watch has read past changes outside the prefix too: a
                    // quiet namespace's watcher can resume from the store's revision, not
                    // from its own last change (which may have left the history window).
                    self.last_rv = self.last_rv.max(self.inner.progress());
                    let item = WatchItem::Bookmark {
                        resource_version: self.last_rv.to_string(),
                        initial_events_end: false,
                    };
                    return Some((one(item), self));
                }
            }
        }
    }

    /// kube-apiserver's etcd watcher rules for one change under selectors.
    fn transform(&self, cached: Arc<CachedEvent>) -> Option<WatchItem> {
        if self.filter.is_everything() {
            return Some(WatchItem::Change(Change(cached)));
        }
        let ev = cached.event();
        let decoded = |value: &[u8], rev: Revision| -> Option<CoreEvent> {
            match decode_at(value, rev) {
                Ok(e) => Some(e),
                Err(err) => {
                    tracing::warn!(key = %ev.key(), error = %err, "skipping undecodable event in watch");
                    None
                }
            }
        };
        let item = match &**ev {
            WatchEvent::Put { kv, prev } => {
                let cur = decoded(&kv.value, kv.mod_revision)?;
                let cur_ok = self.filter.matches(&cur);
                let Some(prev) = prev else {
                    return cur_ok.then(|| WatchItem::Judged(ChangeKind::Added, Box::new(cur)));
                };
                let old = decoded(&prev.value, kv.mod_revision)?;
                match (cur_ok, self.filter.matches(&old)) {
                    (true, true) => (ChangeKind::Modified, cur),
                    (true, false) => (ChangeKind::Added, cur),
                    (false, true) => (ChangeKind::Deleted, old),
                    (false, false) => return None,
                }
            }
            WatchEvent::Delete { prev, revision } => {
                let old = decoded(&prev.value, *revision)?;
                if !self.filter.matches(&old) {
                    return None;
                }
                (ChangeKind::Deleted, old)
            }
        };
        Some(WatchItem::Judged(item.0, Box::new(item.1)))
    }
}
