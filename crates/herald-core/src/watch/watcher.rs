//! The receiving end of a broadcaster.

use std::collections::VecDeque;
use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};

use super::core::Shared;
use super::slot::Slot;

/// Why [`Watcher::try_recv`] returned no item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TryRecvError {
    /// Nothing queued right now; more may come.
    #[error("no item queued")]
    Empty,
    /// The stream has ended: the watcher was stopped or the broadcaster shut down, and every
    /// queued item has been received.
    #[error("watch ended")]
    Ended,
}

/// One subscriber of a [`Broadcaster`](super::Broadcaster): receives, in order, every item
/// accepted after it registered (minus those dropped for it in Drop mode).
///
/// Bound: holds at most its queue length of undelivered items (including the batch it is
/// working through); what happens when it is full depends on the broadcaster's
/// [`FullChannelBehavior`](super::FullChannelBehavior).
///
/// Dropping a watcher stops it.
pub struct Watcher<T: Clone + Send + 'static> {
    slot: Arc<Slot<T>>,
    shared: Arc<Shared<T>>,
    /// Items taken from the shared queue in one swap, handed out without locking.
    local: VecDeque<T>,
}

impl<T: Clone + Send + 'static> fmt::Debug for Watcher<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Watcher")
            .field("id", &self.slot.id)
            .field("capacity", &self.slot.cap)
            .field("dropped", &self.dropped())
            .finish_non_exhaustive()
    }
}

impl<T: Clone + Send + 'static> Watcher<T> {
    pub(crate) fn new(slot: Arc<Slot<T>>, shared: Arc<Shared<T>>) -> Self {
        Self {
            slot,
            shared,
            local: VecDeque::new(),
        }
    }

    /// The next item, waiting for one if none is queued; `None` once the watch has ended
    /// (stopped or broadcaster shut down) and everything queued before has been received.
    pub async fn recv(&mut self) -> Option<T> {
        std::future::poll_fn(|cx| self.poll_recv(cx)).await
    }

    /// The next item if one is queued right now.
    pub fn try_recv(&mut self) -> Result<T, TryRecvError> {
        if let Some(item) = self.take_local() {
            return Ok(item);
        }
        let mut q = self.slot.lock();
        if q.buf.is_empty() {
            return Err(if q.closed {
                TryRecvError::Ended
            } else {
                TryRecvError::Empty
            });
        }
        std::mem::swap(&mut q.buf, &mut self.local);
        self.slot
            .hot
            .0
            .local_len
            .store(self.local.len(), Ordering::SeqCst);
        drop(q);
        self.take_local().ok_or(TryRecvError::Empty)
    }

    /// Polls for the next item (the building block of [`recv`](Self::recv) and the
    /// `Stream` implementation).
    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<T>> {
        if let Some(item) = self.take_local() {
            return Poll::Ready(Some(item));
        }
        let mut q = self.slot.lock();
        if q.buf.is_empty() {
            if q.closed {
                return Poll::Ready(None);
            }
            match &q.waker {
                Some(w) if w.will_wake(cx.waker()) => {}
                _ => q.waker = Some(cx.waker().clone()),
            }
            return Poll::Pending;
        }
        // Take the whole queue in one swap: the items are still counted against the bound
        // (through `local_len`) until they are handed out.
        std::mem::swap(&mut q.buf, &mut self.local);
        self.slot
            .hot
            .0
            .local_len
            .store(self.local.len(), Ordering::SeqCst);
        drop(q);
        Poll::Ready(self.take_local())
    }

    /// Stops this watcher: no further item is delivered to it, a Wait-mode distribution
    /// waiting for it moves on, and it is removed from the broadcaster. Items already queued
    /// can still be received, then the stream ends. Idempotent.
    pub fn stop(&self) {
        stop(&self.slot, &self.shared);
    }

    /// A handle that can stop this watcher from elsewhere (another task) while this one is
    /// borrowed by `recv`.
    pub fn stopper(&self) -> WatchStopper<T> {
        WatchStopper {
            slot: Arc::clone(&self.slot),
            shared: Arc::clone(&self.shared),
        }
    }

    /// How many items were dropped for this watcher because its queue was full
    /// ([`DropIfChannelFull`](super::FullChannelBehavior::DropIfChannelFull) only).
    pub fn dropped(&self) -> u64 {
        self.slot.dropped.load(Ordering::Relaxed)
    }

    /// This watcher's id (0, 1, 2, … in registration order per broadcaster).
    pub fn id(&self) -> u64 {
        self.slot.id
    }

    /// The bound of this watcher's queue.
    pub fn capacity(&self) -> usize {
        self.slot.cap
    }

    fn take_local(&mut self) -> Option<T> {
        let item = self.local.pop_front()?;
        let hot = &self.slot.hot.0;
        hot.local_len.store(self.local.len(), Ordering::SeqCst);
        // Resume a Wait-mode distribution stalled on us once half the queue is free (or we
        // ran dry), rather than once per item. Paired with the store above (SeqCst on both
        // sides): either the distribution sees the room or we see its flag.
        if self.local.len() <= self.slot.cap / 2
            && hot.runner_waiting.load(Ordering::SeqCst)
            && hot.runner_waiting.swap(false, Ordering::SeqCst)
        {
            self.shared.kick();
        }
        Some(item)
    }
}

impl<T: Clone + Send + 'static> Drop for Watcher<T> {
    fn drop(&mut self) {
        self.local.clear();
        self.slot.hot.0.local_len.store(0, Ordering::SeqCst);
        stop(&self.slot, &self.shared);
    }
}

// Nothing inside a watcher is ever pinned structurally (items are moved in and out of
// queues by value), so it may move freely whatever `T` is.
impl<T: Clone + Send + 'static> Unpin for Watcher<T> {}

impl<T: Clone + Send + 'static> futures_core::Stream for Watcher<T> {
    type Item = T;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        self.get_mut().poll_recv(cx)
    }
}

/// Stops a [`Watcher`] from anywhere; see [`Watcher::stop`]. Cloneable.
pub struct WatchStopper<T: Clone + Send + 'static> {
    slot: Arc<Slot<T>>,
    shared: Arc<Shared<T>>,
}

impl<T: Clone + Send + 'static> Clone for WatchStopper<T> {
    fn clone(&self) -> Self {
        Self {
            slot: Arc::clone(&self.slot),
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<T: Clone + Send + 'static> fmt::Debug for WatchStopper<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WatchStopper")
            .field("id", &self.slot.id)
            .finish()
    }
}

impl<T: Clone + Send + 'static> WatchStopper<T> {
    /// Stops the watcher; see [`Watcher::stop`].
    pub fn stop(&self) {
        stop(&self.slot, &self.shared);
    }
}

fn stop<T: Clone + Send + 'static>(slot: &Slot<T>, shared: &Shared<T>) {
    if slot.stopped.swap(true, Ordering::SeqCst) {
        return;
    }
    slot.close();
    // Unblocks a distribution waiting on this watcher and unregisters it.
    shared.kick();
}
