//! The watch feed: one etcd watch on `<prefix>/` publishing every change to the backend's
//! [`WatchHub`], in revision order.
//!
//! The watch starts just after the revision the backend started at and asks for previous
//! values (`prev_kv`) and progress notifications. When it breaks (etcd restarted, member
//! lost, no leader), the feed marks etcd down, waits (from 50 ms doubling to 2 s) and resumes
//! after the last revision it published, so nothing is skipped or repeated. If etcd compacted
//! past that revision meanwhile (the feed was away longer than the compaction interval), the
//! changes in between are gone: the hub is replaced by a new one starting at the compaction
//! revision and the old one is closed, which ends its watch streams; their clients watch
//! again, get `Expired` (410) and re-list.

use std::sync::{Arc, Weak};
use std::time::Duration;

use etcd_client::{EventType, WatchOptions};

use super::{Health, Inner, rev_i64, rev_u64};
use crate::storage::{HistoryOptions, INITIAL_REVISION, KeyValue, Revision, WatchEvent, WatchHub};

/// The first pause after the watch breaks; it doubles up to [`MAX_BACKOFF`].
const MIN_BACKOFF: Duration = Duration::from_millis(50);

/// The longest pause between two attempts to reopen the watch.
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// A hub for a store at `revision`: complete after it (on a new cluster, whose revision 1 has
/// no change, complete from 0, so a watch from `0` sees every write).
pub(super) fn new_hub(window: &HistoryOptions, revision: Revision) -> Arc<WatchHub> {
    let floor = if revision <= INITIAL_REVISION {
        0
    } else {
        revision
    };
    WatchHub::preloaded(window, floor, revision, Vec::new(), None)
}

/// Whether the feed's watch is open (read by the health probe).
pub(super) fn is_open(inner: &Inner) -> bool {
    inner.feed_open.load(std::sync::atomic::Ordering::Relaxed)
}

/// Runs the feed until the backend is dropped.
pub(super) async fn run(inner: Weak<Inner>, start: Revision) {
    let mut after = start;
    let mut backoff = MIN_BACKOFF;
    loop {
        let Some(i) = inner.upgrade() else {
            return;
        };
        match follow(&i, &inner, &mut after, &mut backoff).await {
            Stop::Dropped => return,
            Stop::Broken(why) => {
                i.feed_open
                    .store(false, std::sync::atomic::Ordering::Relaxed);
                i.set_health(Health::Down(format!("etcd watch: {why}")));
            }
            Stop::Compacted(at) => {
                tracing::warn!(
                    from = after + 1,
                    compacted = at,
                    "etcd compacted the changes the watch feed had not read; watches restart"
                );
                let hub = WatchHub::preloaded(&i.opts.history, at - 1, at - 1, Vec::new(), None);
                let old =
                    std::mem::replace(&mut *i.hub.write().unwrap_or_else(|e| e.into_inner()), hub);
                old.close();
                after = at - 1;
                i.seen.send_modify(|s| *s = (*s).max(after));
                continue;
            }
        }
        drop(i);
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

enum Stop {
    /// The backend is gone.
    Dropped,
    /// The watch failed or ended: the reason.
    Broken(String),
    /// The revisions after `after` are compacted; etcd serves from this one.
    Compacted(Revision),
}

async fn follow(
    i: &Arc<Inner>,
    weak: &Weak<Inner>,
    after: &mut Revision,
    backoff: &mut Duration,
) -> Stop {
    let mut wc = i
        .client
        .watch_client()
        .max_decoding_message_size(super::MAX_RESPONSE);
    let opts = WatchOptions::new()
        .with_prefix()
        .with_prev_key()
        .with_progress_notify()
        .with_start_revision(rev_i64(*after + 1));
    let mut stream = match tokio::time::timeout(
        i.opts.request_timeout,
        wc.watch(format!("{}/", i.prefix), Some(opts)),
    )
    .await
    {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return Stop::Broken(e.to_string()),
        Err(_) => return Stop::Broken("timed out opening the watch".into()),
    };
    loop {
        let msg = stream.message().await;
        if weak.strong_count() == 0 {
            return Stop::Dropped;
        }
        let resp = match msg {
            Ok(Some(r)) => r,
            Ok(None) => return Stop::Broken("the watch stream ended".into()),
            Err(e) => return Stop::Broken(e.to_string()),
        };
        if resp.compact_revision() > 0 {
            return Stop::Compacted(rev_u64(resp.compact_revision()));
        }
        if resp.canceled() {
            return Stop::Broken(format!("watch canceled: {}", resp.cancel_reason()));
        }
        if resp.created() {
            i.feed_open
                .store(true, std::sync::atomic::Ordering::Relaxed);
            i.set_health(Health::Up);
            *backoff = MIN_BACKOFF;
        }
        let mut events = Vec::with_capacity(resp.events().len());
        for ev in resp.events() {
            if let Some(e) = change(i, ev) {
                events.push(e);
            }
        }
        if let Some(last) = events.last() {
            *after = (*after).max(last.revision());
        }
        if !events.is_empty() {
            i.hub().publish(events);
            let seen = *after;
            i.seen.send_modify(|s| *s = (*s).max(seen));
        }
    }
}

/// The hub's event for an etcd one (`None` for a key outside the prefix).
fn change(i: &Inner, ev: &etcd_client::Event) -> Option<WatchEvent> {
    let kv = ev.kv()?;
    match ev.event_type() {
        EventType::Put => {
            let new = i.kv(kv)?;
            let prev = if new.create_revision == new.mod_revision {
                None
            } else {
                ev.prev_kv().and_then(|p| i.kv(p))
            };
            Some(WatchEvent::Put { kv: new, prev })
        }
        EventType::Delete => {
            let revision = rev_u64(kv.mod_revision());
            let prev = match ev.prev_kv().and_then(|p| i.kv(p)) {
                Some(p) => p,
                // etcd had compacted the previous value away: the key is all that is known.
                None => KeyValue {
                    key: i.short(kv.key())?,
                    value: bytes::Bytes::new(),
                    create_revision: rev_u64(kv.create_revision()),
                    mod_revision: revision,
                },
            };
            Some(WatchEvent::Delete { prev, revision })
        }
    }
}
