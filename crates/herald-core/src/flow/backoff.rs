//! Per-item exponential backoff (client-go's `flowcontrol.Backoff`).

use std::collections::HashMap;
use std::fmt;
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use rand::{Rng, RngCore};

use crate::clock::Clock;

use super::retry::secs_saturating;

/// Decides whether an entry last updated at `last_update` has expired as seen from
/// `event_time`, given the backoff's `max`: `(event_time, last_update, max) -> expired`.
pub type HasExpiredFn = dyn Fn(Timestamp, Timestamp, Duration) -> bool + Send + Sync;

/// The default number of ids a [`Backoff`] tracks before it starts evicting.
pub const DEFAULT_MAX_ENTRIES: usize = 65_536;

#[derive(Debug, Clone, Copy)]
struct Entry {
    backoff: Duration,
    last_update: Timestamp,
}

struct Inner<K> {
    entries: HashMap<K, Entry>,
    rng: Option<Box<dyn RngCore + Send>>,
}

/// Exponential backoff kept per id: the first [`next`](Backoff::next) sets `initial`, every
/// further one doubles (plus jitter) up to `max`; an entry not updated for longer than
/// `2 · max` (or per a custom [`HasExpiredFn`]) has expired and starts over.
///
/// Thread-safe (`&self`, one internal lock). Reads the clock in `next` (the update time),
/// `is_in_backoff_since` and `gc`.
///
/// Bound: at most `max_entries` ids (default [`DEFAULT_MAX_ENTRIES`]). When `next` would
/// add one more, expired entries are collected first and, if still full, the entry updated
/// longest ago is evicted (it simply starts over at `initial` if it comes back).
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use herald_core::clock::{Clock, FakeClock};
/// use herald_core::flow::Backoff;
///
/// let clock = Arc::new(FakeClock::default());
/// let b: Backoff<String> = Backoff::new(Duration::from_secs(1), Duration::from_secs(60), clock.clone());
/// let id = "pod-a".to_string();
/// b.next(&id, clock.now());
/// b.next(&id, clock.now());
/// assert_eq!(b.get(&id), Duration::from_secs(2));
/// assert!(b.is_in_backoff_since_update(&id, clock.now()));
/// ```
pub struct Backoff<K> {
    initial: Duration,
    max: Duration,
    max_jitter_factor: f64,
    max_entries: usize,
    clock: Arc<dyn Clock>,
    has_expired: Option<Box<HasExpiredFn>>,
    inner: Mutex<Inner<K>>,
}

impl<K> fmt::Debug for Backoff<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Backoff")
            .field("initial", &self.initial)
            .field("max", &self.max)
            .field("max_jitter_factor", &self.max_jitter_factor)
            .field("max_entries", &self.max_entries)
            .finish_non_exhaustive()
    }
}

impl<K: Eq + Hash + Clone> Backoff<K> {
    /// Backoff from `initial` doubling up to `max`, without jitter, with the default expiry
    /// (`event_time − last_update > 2·max`).
    pub fn new(initial: Duration, max: Duration, clock: Arc<dyn Clock>) -> Self {
        Self {
            initial,
            max,
            max_jitter_factor: 0.0,
            max_entries: DEFAULT_MAX_ENTRIES,
            clock,
            has_expired: None,
            inner: Mutex::new(Inner {
                entries: HashMap::new(),
                rng: None,
            }),
        }
    }

    /// Adds up to `max_jitter_factor · d` of random extra to every step `d`, drawing from
    /// `rng` (a seeded `rand::rngs::StdRng` makes it reproducible). A factor `<= 0` disables
    /// jitter.
    pub fn with_jitter(
        mut self,
        max_jitter_factor: f64,
        rng: impl RngCore + Send + 'static,
    ) -> Self {
        self.max_jitter_factor = max_jitter_factor;
        self.lock_mut().rng = (max_jitter_factor > 0.0).then(|| Box::new(rng) as Box<_>);
        self
    }

    /// Replaces the expiry rule (client-go's `HasExpiredFunc`).
    pub fn with_has_expired(
        mut self,
        f: impl Fn(Timestamp, Timestamp, Duration) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.has_expired = Some(Box::new(f));
        self
    }

    /// Changes the bound on tracked ids (0 is treated as 1).
    pub fn with_max_entries(mut self, max_entries: usize) -> Self {
        self.max_entries = max_entries.max(1);
        self
    }

    /// Records one more failure of `id` at `event_time`: starts at `initial` (plus jitter) if
    /// `id` has no entry or its entry has expired as seen from `event_time`, otherwise doubles
    /// (plus jitter of the previous value) up to `max`. The update time recorded is the
    /// clock's now, not `event_time`.
    pub fn next(&self, id: &K, event_time: Timestamp) {
        let now = self.clock.now();
        let mut guard = self.lock();
        let inner = &mut *guard;
        let current = inner
            .entries
            .get(id)
            .filter(|e| !self.expired(event_time, e.last_update))
            .map(|e| e.backoff);
        let backoff = match current {
            None => self
                .initial
                .saturating_add(self.jitter(&mut inner.rng, self.initial)),
            Some(prev) => prev
                .saturating_mul(2)
                .saturating_add(self.jitter(&mut inner.rng, prev))
                .min(self.max),
        };
        if !inner.entries.contains_key(id) && inner.entries.len() >= self.max_entries {
            self.make_room(&mut inner.entries, now);
        }
        inner.entries.insert(
            id.clone(),
            Entry {
                backoff,
                last_update: now,
            },
        );
    }

    /// The current backoff of `id`, or zero if it has none.
    pub fn get(&self, id: &K) -> Duration {
        self.lock()
            .entries
            .get(id)
            .map_or(Duration::ZERO, |e| e.backoff)
    }

    /// Forgets `id` (client-go's `Reset` and `DeleteEntry`).
    pub fn reset(&self, id: &K) {
        self.lock().entries.remove(id);
    }

    /// Whether less than the current backoff of `id` has passed between `event_time` and now.
    /// False if `id` has no entry or it has expired as seen from `event_time`.
    pub fn is_in_backoff_since(&self, id: &K, event_time: Timestamp) -> bool {
        let now = self.clock.now();
        match self.live_entry(id, event_time) {
            Some(e) => now.duration_since(event_time) < signed(e.backoff),
            None => false,
        }
    }

    /// Whether `event_time` is less than the current backoff of `id` after its last update.
    /// False if `id` has no entry or it has expired as seen from `event_time`.
    pub fn is_in_backoff_since_update(&self, id: &K, event_time: Timestamp) -> bool {
        match self.live_entry(id, event_time) {
            Some(e) => event_time.duration_since(e.last_update) < signed(e.backoff),
            None => false,
        }
    }

    /// Removes every entry that has expired as seen from the clock's now.
    pub fn gc(&self) {
        let now = self.clock.now();
        self.lock()
            .entries
            .retain(|_, e| !self.expired(now, e.last_update));
    }

    /// How many ids are tracked.
    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }

    /// Whether no id is tracked.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn live_entry(&self, id: &K, event_time: Timestamp) -> Option<Entry> {
        self.lock()
            .entries
            .get(id)
            .copied()
            .filter(|e| !self.expired(event_time, e.last_update))
    }

    fn expired(&self, event_time: Timestamp, last_update: Timestamp) -> bool {
        match &self.has_expired {
            Some(f) => f(event_time, last_update, self.max),
            None => event_time.duration_since(last_update) > signed(self.max.saturating_mul(2)),
        }
    }

    fn jitter(&self, rng: &mut Option<Box<dyn RngCore + Send>>, d: Duration) -> Duration {
        match rng {
            Some(rng) => {
                let u: f64 = rng.random();
                secs_saturating(u * self.max_jitter_factor * d.as_secs_f64())
            }
            None => Duration::ZERO,
        }
    }

    fn make_room(&self, entries: &mut HashMap<K, Entry>, now: Timestamp) {
        entries.retain(|_, e| !self.expired(now, e.last_update));
        if entries.len() < self.max_entries {
            return;
        }
        let oldest = entries
            .iter()
            .min_by_key(|(_, e)| e.last_update)
            .map(|(k, _)| k.clone());
        if let Some(k) = oldest {
            entries.remove(&k);
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner<K>> {
        // Entries are replaced whole; a panic elsewhere cannot leave one half-written.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lock_mut(&mut self) -> &mut Inner<K> {
        self.inner.get_mut().unwrap_or_else(|e| e.into_inner())
    }
}

fn signed(d: Duration) -> SignedDuration {
    SignedDuration::try_from(d).unwrap_or(SignedDuration::MAX)
}
