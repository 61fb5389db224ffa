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

use futures::StreamExt;
use herald_core::event::{ApiGroup, CoreEvent};
use herald_core::status::ApiError;
use rand::Rng;
use tokio::time::{Instant, Sleep};

use super::codec::{self, decode, decode_at, parse_rv};
use super::errors::{storage_error, too_large_rv};
use super::{EventRegistry, Filter, ListParams, RawEventWatch, RawWatchItem, WatchItem};
use crate::storage::{
    CachedEvent, CachedWatchStream, ListOptions, Revision, StorageError, WatchEvent,
};

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

/// What a stored change is to a watcher that sees everything: `ADDED` for a create,
/// `MODIFIED` for an update, `DELETED` with the last state at the deletion's revision.
/// Returns the kind, the stored value and the resourceVersion to show.
pub fn change_parts(ev: &WatchEvent) -> (ChangeKind, &[u8], Revision) {
    match ev {
        WatchEvent::Put { kv, prev: None } => (ChangeKind::Added, &kv.value, kv.mod_revision),
        WatchEvent::Put { kv, prev: Some(_) } => (ChangeKind::Modified, &kv.value, kv.mod_revision),
        WatchEvent::Delete { prev, revision } => (ChangeKind::Deleted, &prev.value, *revision),
    }
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

    /// The watch item of this kind for `e`.
    pub fn item(self, e: CoreEvent) -> WatchItem {
        match self {
            ChangeKind::Added => WatchItem::Added(e),
            ChangeKind::Modified => WatchItem::Modified(e),
            ChangeKind::Deleted => WatchItem::Deleted(e),
        }
    }
}

impl RawWatchItem {
    /// The decoded [`WatchItem`]; `None` (logged) when stored bytes do not decode.
    pub fn into_item(self) -> Option<WatchItem> {
        let decoded = |key: &str, value: &[u8], rev: Revision| match decode_at(value, rev) {
            Ok(e) => Some(e),
            Err(err) => {
                tracing::warn!(key = %key, error = %err, "skipping undecodable event in watch");
                None
            }
        };
        match self {
            RawWatchItem::Change(ev) => {
                let (kind, value, rev) = change_parts(ev.event());
                decoded(ev.event().key(), value, rev).map(|e| kind.item(e))
            }
            RawWatchItem::Initial(kv) => {
                decoded(&kv.key, &kv.value, kv.mod_revision).map(WatchItem::Added)
            }
            RawWatchItem::Item(item) => Some(*item),
        }
    }
}

/// [`start`] as single decoded items.
pub(super) async fn start_decoded(
    reg: &EventRegistry,
    group: ApiGroup,
    namespace: Option<&str>,
    name: Option<&str>,
    p: &ListParams,
) -> Result<super::EventWatch, ApiError> {
    let raw = start(reg, group, namespace, name, p).await?;
    Ok(raw
        .flat_map(|batch| {
            futures::stream::iter(batch.into_iter().filter_map(RawWatchItem::into_item))
        })
        .boxed())
}

pub(super) async fn start(
    reg: &EventRegistry,
    group: ApiGroup,
    namespace: Option<&str>,
    name: Option<&str>,
    p: &ListParams,
) -> Result<RawEventWatch, ApiError> {
    let mut p = p.clone();
    p.watch = true;
    p.validate()?;
    let filter = Filter::new(group, &p, name)?;
    let r = group.resource();
    let prefix = codec::prefix(namespace);
    let rv = parse_rv(p.rv())?;
    let legacy_initial = matches!(rv, None | Some(0));
    let send_initial = p.send_initial_events.unwrap_or(legacy_initial);
    let mut initial = VecDeque::new();
    // Set when the watch asks for a revision beyond the store's: it subscribes at the current
    // revision instead and waits (bounded) for the requested one.
    let mut ahead = None;
    let start = if send_initial {
        let page = reg
            .backend
            .list(&prefix, ListOptions::default())
            .await
            .map_err(|e| storage_error(e, r, ""))?;
        if let Some(min) = rv.filter(|m| *m > page.revision) {
            return Err(too_large_rv(min, page.revision));
        }
        let everything = filter.is_everything();
        for kv in page.items {
            if everything {
                initial.push_back(RawWatchItem::Initial(kv));
            } else if let Ok(ev) = decode(&kv)
                && filter.matches(&ev)
            {
                initial.push_back(RawWatchItem::Item(Box::new(WatchItem::Added(ev))));
            }
        }
        // kube-apiserver (1.32, WatchList on) defaults a watch from "" or "0" that names
        // neither sendInitialEvents nor resourceVersionMatch to `sendInitialEvents=true`, so
        // it too ends its initial events with the bookmark when bookmarks are allowed.
        let defaulted = p.send_initial_events.is_none() && p.rv_match().is_none();
        if (p.send_initial_events == Some(true) || defaulted) && p.allow_watch_bookmarks {
            initial.push_back(RawWatchItem::Item(Box::new(WatchItem::Bookmark {
                resource_version: page.revision.to_string(),
                initial_events_end: true,
            })));
        }
        page.revision
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
                one(WatchItem::Error(too_old(requested, oldest)))
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

struct State {
    initial: VecDeque<RawWatchItem>,
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

fn one(item: WatchItem) -> Vec<RawWatchItem> {
    vec![RawWatchItem::Item(Box::new(item))]
}

impl State {
    async fn next(mut self) -> Option<(Vec<RawWatchItem>, Self)> {
        loop {
            if !self.initial.is_empty() {
                let n = self.initial.len().min(INITIAL_BATCH);
                let batch: Vec<RawWatchItem> = self.initial.drain(..n).collect();
                return Some((batch, self));
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
                        return Some((one(WatchItem::Error(too_old(requested, oldest))), self));
                    }
                    Some(Err(e)) => {
                        self.done = true;
                        return Some((one(WatchItem::Error(ApiError::internal(e.to_string()))), self));
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
                    return Some((one(WatchItem::Error(too_large_rv(requested, current))), self));
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
    fn transform(&self, cached: Arc<CachedEvent>) -> Option<RawWatchItem> {
        if self.filter.is_everything() {
            return Some(RawWatchItem::Change(cached));
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
                    return cur_ok.then(|| RawWatchItem::Item(Box::new(WatchItem::Added(cur))));
                };
                let old = decoded(&prev.value, kv.mod_revision)?;
                match (cur_ok, self.filter.matches(&old)) {
                    (true, true) => WatchItem::Modified(cur),
                    (true, false) => WatchItem::Added(cur),
                    (false, true) => WatchItem::Deleted(old),
                    (false, false) => return None,
                }
            }
            WatchEvent::Delete { prev, revision } => {
                let old = decoded(&prev.value, *revision)?;
                if !self.filter.matches(&old) {
                    return None;
                }
                WatchItem::Deleted(old)
            }
        };
        Some(RawWatchItem::Item(Box::new(item)))
    }
}
