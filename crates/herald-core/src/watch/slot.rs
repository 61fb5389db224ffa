//! One watcher's bounded queue, shared between the distribution and the [`Watcher`] handle.
//!
//! [`Watcher`]: super::Watcher

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::task::Waker;

/// Keeps the consumer's hot counter off the cache line the distribution locks.
#[repr(align(128))]
pub(crate) struct Padded<T>(pub(crate) T);

pub(crate) struct SlotQueue<T> {
    /// Items delivered and not yet taken by the consumer.
    pub(crate) buf: VecDeque<T>,
    /// No further item will be delivered (watcher stopped or broadcaster shut down).
    pub(crate) closed: bool,
    /// The consumer waiting for `buf` to become non-empty or `closed`.
    pub(crate) waker: Option<Waker>,
}

/// The shared half of a watcher.
///
/// Capacity accounting: `buf.len() + local_len <= cap`, where `local_len` counts the items
/// the consumer has moved out of `buf` in one swap and not yet returned from `recv`. The
/// consumer only ever lowers `local_len` between swaps, so a stale read by the distribution
/// under-estimates the room and can never overfill the queue.
pub(crate) struct Slot<T> {
    pub(crate) id: u64,
    pub(crate) cap: usize,
    /// Sequence number of the first broadcast item this watcher receives.
    pub(crate) start_seq: u64,
    pub(crate) queue: Mutex<SlotQueue<T>>,
    pub(crate) stopped: AtomicBool,
    pub(crate) dropped: AtomicU64,
    pub(crate) hot: Padded<Hot>,
}

pub(crate) struct Hot {
    pub(crate) local_len: AtomicUsize,
    /// Set by a Wait-mode distribution that could not deliver everything to this watcher;
    /// the consumer clears it and triggers a distribution once it has made room.
    pub(crate) runner_waiting: AtomicBool,
}

impl<T> Slot<T> {
    pub(crate) fn new(id: u64, cap: usize, start_seq: u64, prefix: Vec<T>) -> Self {
        Self {
            id,
            cap,
            start_seq,
            queue: Mutex::new(SlotQueue {
                buf: VecDeque::from(prefix),
                closed: false,
                waker: None,
            }),
            stopped: AtomicBool::new(false),
            dropped: AtomicU64::new(0),
            hot: Padded(Hot {
                local_len: AtomicUsize::new(0),
                runner_waiting: AtomicBool::new(false),
            }),
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, SlotQueue<T>> {
        // Every critical section leaves the queue consistent before anything can panic
        // (only `T::clone` can, and it runs before the push), so a poisoned lock is usable.
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Room for more items, as seen now (see the capacity accounting above).
    pub(crate) fn room(&self, q: &SlotQueue<T>) -> usize {
        self.cap
            .saturating_sub(q.buf.len() + self.hot.0.local_len.load(Ordering::SeqCst))
    }

    /// Marks the queue closed and wakes the consumer; items already queued stay readable.
    pub(crate) fn close(&self) {
        let waker = {
            let mut q = self.lock();
            q.closed = true;
            q.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}
