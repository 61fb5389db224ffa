//! Rendered watch lines shared between watch streams.
//!
//! Every open watch renders each event it delivers; with many watchers on the same events
//! that is the same bytes rendered once per watcher. Plain JSON watch lines of an object
//! event depend only on (group, type, resourceVersion) — not on the clock, the stream or
//! whether the line is the first — so the first stream to render a line stores it here and
//! the others reuse it.
//!
//! Bound: [`LineCache::CAPACITY`] lines; at the bound the oldest inserted line is evicted
//! (a later stream that needs it simply renders it again).

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use axum::body::Bytes;

/// Which watch event type a line carries (part of the cache key).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LineKind {
    /// `ADDED`.
    Added,
    /// `MODIFIED`.
    Modified,
    /// `DELETED`.
    Deleted,
}

/// The key of a rendered line: group (0 core/v1, 1 events.k8s.io/v1), kind, revision.
pub type LineKey = (u8, LineKind, u64);

#[derive(Default)]
struct Inner {
    lines: HashMap<LineKey, Bytes>,
    order: VecDeque<LineKey>,
}

/// A bounded, shared cache of rendered watch lines (FIFO eviction).
#[derive(Default)]
pub struct LineCache {
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for LineCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LineCache").finish_non_exhaustive()
    }
}

impl LineCache {
    /// The most lines kept; beyond it the oldest is evicted.
    pub const CAPACITY: usize = 8192;

    /// The cached line for `key`, or `render()`'s result (stored for the next stream).
    /// The lock is not held while rendering.
    pub fn get_or_render(&self, key: LineKey, render: impl FnOnce() -> Vec<u8>) -> Bytes {
        if let Ok(inner) = self.inner.lock()
            && let Some(b) = inner.lines.get(&key)
        {
            return b.clone();
        }
        let line = Bytes::from(render());
        if let Ok(mut inner) = self.inner.lock()
            && !inner.lines.contains_key(&key)
        {
            if inner.order.len() >= Self::CAPACITY
                && let Some(old) = inner.order.pop_front()
            {
                inner.lines.remove(&old);
            }
            inner.order.push_back(key);
            inner.lines.insert(key, line.clone());
        }
        line
    }

    /// Lines currently cached.
    pub fn len(&self) -> usize {
        self.inner.lock().map(|i| i.lines.len()).unwrap_or(0)
    }

    /// True when no line is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_once_per_key_and_evicts_the_oldest_at_the_bound() {
        let c = LineCache::default();
        let mut renders = 0;
        for _ in 0..3 {
            let b = c.get_or_render((0, LineKind::Added, 1), || {
                renders += 1;
                b"a\n".to_vec()
            });
            assert_eq!(&b[..], b"a\n");
        }
        assert_eq!(renders, 1);
        // A different kind or group at the same revision is a different line.
        let b = c.get_or_render((1, LineKind::Added, 1), || b"b\n".to_vec());
        assert_eq!(&b[..], b"b\n");
        for rv in 2..(LineCache::CAPACITY as u64 + 2) {
            c.get_or_render((0, LineKind::Modified, rv), Vec::new);
        }
        assert_eq!(c.len(), LineCache::CAPACITY);
        let mut again = false;
        c.get_or_render((0, LineKind::Added, 1), || {
            again = true;
            Vec::new()
        });
        assert!(again, "the oldest line was evicted");
    }
}
