//! The bounded, ordered fan-out [`Broadcaster`] (apimachinery's `watch.Broadcaster`).
//!
//! Producers hand items to the broadcaster; every [`Watcher`] receives, in order, each item
//! accepted after it registered. Two bounds, each with a documented outcome:
//!
//! - **Incoming queue** (`incoming_len`, 25 by [`Broadcaster::new`]): items accepted but not
//!   yet delivered to every watcher. When full, [`Broadcaster::action_or_drop`] returns
//!   `Ok(false)` (the caller counts the drop) and [`Broadcaster::action`] waits for room.
//! - **Watcher queue** (`watcher_queue_len`): items delivered to one watcher and not yet
//!   received. When full, [`FullChannelBehavior`] decides: drop the item for that watcher
//!   only (counted in [`Watcher::dropped`]), or hold it until the watcher reads or stops.
//!
//! Who distributes ([`Distribution`]) — the design choice, since core spawns no tasks:
//!
//! - [`Distribution::OnThread`] (the default): one dedicated OS thread per broadcaster, like
//!   client-go's distribution goroutine. A producer only appends to the incoming queue (and
//!   unparks the thread if it sleeps), so `action_or_drop` costs the same with 2 or 200
//!   watchers; the thread hands whatever accumulated to each watcher as one batch, with one
//!   lock and one wake-up per watcher. This batching is what makes fan-out to many
//!   watchers fast (see `herald-runtime/benches/broadcaster.rs`). The thread ends when
//!   shutdown completes (or the last handle is dropped).
//! - [`Distribution::InCaller`]: no thread. A producer that finds the distribution idle
//!   delivers the items itself, under the distribution lock (a consumer making room or a
//!   watcher stopping resumes a stalled one). Nothing runs behind the caller's back and, in
//!   Drop mode, an item is in every watcher's queue before `action_or_drop` returns —
//!   handy for deterministic tests and for a few watchers at a low rate, but each item
//!   pays the whole fan-out on the producer's thread.
//!
//! Either way the distribution step itself never blocks: a full watcher in Wait mode only
//! records how far it got.
//!
//! ```
//! use herald_core::watch::{Broadcaster, FullChannelBehavior};
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let b = Broadcaster::new(100, FullChannelBehavior::DropIfChannelFull);
//! let mut w = b.watch().unwrap();
//! assert_eq!(b.action_or_drop("created"), Ok(true));
//! b.shutdown().await;
//! assert_eq!(w.recv().await, Some("created"));
//! assert_eq!(w.recv().await, None);
//! assert!(b.watch().is_err());
//! # });
//! ```

mod core;
mod slot;
mod watcher;

use std::fmt;
use std::sync::Arc;

use self::core::{Offer, Shared};
pub use self::watcher::{TryRecvError, WatchStopper, Watcher};

/// The incoming queue length of [`Broadcaster::new`] (apimachinery's `incomingQueueLength`).
pub const INCOMING_QUEUE_LEN: usize = 25;

/// What the distribution does with an item for a watcher whose queue is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FullChannelBehavior {
    /// Hold the item until the watcher reads or stops. Other watchers keep receiving the
    /// items already accepted, but nothing is retired from the incoming queue past the
    /// item the slow watcher waits for, so once the incoming queue is full producers are
    /// refused (`action_or_drop`) or wait (`action`).
    WaitIfChannelFull,
    /// Skip the item for that watcher only and count it in its [`Watcher::dropped`].
    DropIfChannelFull,
}

/// Who runs the distribution step; the observable behaviour (order, bounds, drops) is the
/// same, only when the items reach the watchers differs. See the [module documentation](self).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Distribution {
    /// A dedicated OS thread (named `herald-broadcast`) runs it and exits when shutdown
    /// completes. Producers only enqueue; items reach watchers in batches. If the thread
    /// cannot be spawned the broadcaster falls back to [`Distribution::InCaller`].
    #[default]
    OnThread,
    /// The callers of `action`/`action_or_drop` (and consumers or stoppers resuming a
    /// stalled Wait-mode distribution) run it, one at a time, without ever waiting for each
    /// other. No threads; deterministic.
    InCaller,
}

/// The error of every operation on a broadcaster that has been shut down.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[error("broadcaster already stopped")]
pub struct Stopped;

/// Configures a [`Broadcaster`] beyond the two constructors.
#[derive(Debug, Clone, Copy)]
pub struct BroadcasterBuilder {
    incoming_len: usize,
    watcher_queue_len: usize,
    behavior: FullChannelBehavior,
    distribution: Distribution,
}

impl BroadcasterBuilder {
    /// Starts configuring a broadcaster with watcher queues of `watcher_queue_len`
    /// (incoming queue [`INCOMING_QUEUE_LEN`], [`Distribution::OnThread`]).
    pub fn new(watcher_queue_len: usize, behavior: FullChannelBehavior) -> Self {
        Self {
            incoming_len: INCOMING_QUEUE_LEN,
            watcher_queue_len,
            behavior,
            distribution: Distribution::OnThread,
        }
    }

    /// Sets the incoming queue bound (0 is treated as 1).
    pub fn incoming_capacity(mut self, incoming_len: usize) -> Self {
        self.incoming_len = incoming_len;
        self
    }

    /// Chooses who distributes.
    pub fn distribution(mut self, distribution: Distribution) -> Self {
        self.distribution = distribution;
        self
    }

    /// Builds the broadcaster (and starts its thread for [`Distribution::OnThread`]).
    pub fn build<T: Clone + Send + 'static>(self) -> Broadcaster<T> {
        let shared = Arc::new(Shared::new(
            self.incoming_len.max(1),
            self.watcher_queue_len.max(1),
            self.behavior,
        ));
        shared.start(self.distribution);
        Broadcaster {
            handle: Arc::new(Handle { shared }),
        }
    }
}

/// Bounded, ordered fan-out of `T` to any number of [`Watcher`]s. A cheap handle: clones
/// share one broadcaster. When the last handle is dropped the broadcaster shuts down (as
/// [`request_shutdown`](Self::request_shutdown)), so watchers' streams end.
///
/// Items are cloned once per watcher: broadcast an `Arc` for anything large.
///
/// Bounds: see the [module documentation](self); a queue length of 0 is treated as 1
/// (there is no rendezvous hand-off).
pub struct Broadcaster<T: Clone + Send + 'static> {
    handle: Arc<Handle<T>>,
}

struct Handle<T: Clone + Send + 'static> {
    shared: Arc<Shared<T>>,
}

impl<T: Clone + Send + 'static> Drop for Handle<T> {
    fn drop(&mut self) {
        self.shared.request_shutdown();
    }
}

impl<T: Clone + Send + 'static> Clone for Broadcaster<T> {
    fn clone(&self) -> Self {
        Self {
            handle: Arc::clone(&self.handle),
        }
    }
}

impl<T: Clone + Send + 'static> fmt::Debug for Broadcaster<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.handle.shared;
        f.debug_struct("Broadcaster")
            .field("incoming_len", &s.incoming_len)
            .field("watcher_queue_len", &s.watcher_queue_len)
            .field("behavior", &s.behavior)
            .field("stopped", &s.is_stopped())
            .finish_non_exhaustive()
    }
}

impl<T: Clone + Send + 'static> Broadcaster<T> {
    /// A broadcaster with an incoming queue of [`INCOMING_QUEUE_LEN`] (25) and watcher
    /// queues of `watcher_queue_len` (apimachinery's `NewBroadcaster`), distributing on its
    /// own thread.
    pub fn new(watcher_queue_len: usize, behavior: FullChannelBehavior) -> Self {
        BroadcasterBuilder::new(watcher_queue_len, behavior).build()
    }

    /// A broadcaster with an incoming queue of `incoming_len` (apimachinery's
    /// `NewLongQueueBroadcaster` passes the watcher queue length here).
    pub fn with_incoming_capacity(
        incoming_len: usize,
        watcher_queue_len: usize,
        behavior: FullChannelBehavior,
    ) -> Self {
        BroadcasterBuilder::new(watcher_queue_len, behavior)
            .incoming_capacity(incoming_len)
            .build()
    }

    /// A new watcher that receives every item accepted from now on.
    pub fn watch(&self) -> Result<Watcher<T>, Stopped> {
        self.watch_with_prefix(Vec::new())
    }

    /// A new watcher that first receives `prefix`, then every item accepted from now on.
    /// Its queue holds `max(watcher_queue_len, prefix.len() + 1)` items.
    pub fn watch_with_prefix(&self, prefix: Vec<T>) -> Result<Watcher<T>, Stopped> {
        let shared = &self.handle.shared;
        let cap = if prefix.is_empty() {
            shared.watcher_queue_len
        } else {
            shared.watcher_queue_len.max(prefix.len() + 1)
        };
        let slot = shared.register(cap, prefix).ok_or(Stopped)?;
        Ok(Watcher::new(slot, Arc::clone(shared)))
    }

    /// Offers `item` without ever waiting: `Ok(true)` if accepted, `Ok(false)` if the
    /// incoming queue is full (the item is dropped; count it).
    pub fn action_or_drop(&self, item: T) -> Result<bool, Stopped> {
        match self.handle.shared.offer(item) {
            Offer::Accepted => Ok(true),
            Offer::Full(_) => Ok(false),
            Offer::Stopped(_) => Err(Stopped),
        }
    }

    /// Offers `item`, waiting for room in the incoming queue if it is full. Fails if the
    /// broadcaster is (or, while waiting, gets) shut down. Cancel-safe: dropping the future
    /// before it completes drops the item unsent.
    pub async fn action(&self, item: T) -> Result<(), Stopped> {
        self.handle
            .shared
            .offer_waiting(item)
            .await
            .map_err(|_| Stopped)
    }

    /// Shuts down and waits until it is complete: new items and watchers are refused with
    /// [`Stopped`], every item already accepted is delivered (per the behaviour), then every
    /// watcher's stream ends. Idempotent. In Wait mode this waits for slow watchers to read
    /// or stop.
    pub async fn shutdown(&self) {
        self.request_shutdown();
        self.handle.shared.wait_finished().await;
    }

    /// Starts the shutdown without waiting for it (usable outside async code); see
    /// [`shutdown`](Self::shutdown). Idempotent.
    pub fn request_shutdown(&self) {
        self.handle.shared.request_shutdown();
    }

    /// Whether shutdown has been requested.
    pub fn is_stopped(&self) -> bool {
        self.handle.shared.is_stopped()
    }

    /// Whether shutdown has completed: everything accepted was delivered and every watcher's
    /// stream has ended.
    pub fn is_finished(&self) -> bool {
        self.handle.shared.is_finished()
    }
}
