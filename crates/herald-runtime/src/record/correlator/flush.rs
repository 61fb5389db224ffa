//! Trailing writes: the last word of a storm the spam filter silenced.
//!
//! client-go counts skipped events into the dedup cache but writes nothing until the next event
//! for the same key gets a token — which may never come, leaving the stored count short.
//! Herald remembers, per dedup key, the occurrences held back since its last write, and once
//! the storm is over writes each such event once more, carrying all of them.
//!
//! A storm is over for a spam key (source + object + type, the spam filter's unit) when no
//! event of that spam key has been correlated for [`TrailingFlushOptions::quiet`]. Then every
//! dedup key of that spam key with held occurrences is due, and due keys are written at most
//! at the trailing rate, earliest storm end first. The trailing budget is the correlator's own
//! token bucket, separate from the spam filter's per-object buckets: trailing writes take no
//! spam token, and no spam token waits for them.
//!
//! ```text
//! skip ──► pending[dedup key] (held += 1) ── member of ──► group[spam key] (last seen)
//!                 │ a write of the key carries the count: forgotten
//!                 ▼
//!   group quiet for `quiet` ──► due ──► trailing budget (rate, burst 1) ──► one write per key
//! ```

use std::time::Duration;

use hashbrown::DefaultHashBuilder;
use herald_core::clock::add_saturating;
use herald_core::flow::TokenBucket;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::keys::KeyBuf;
use super::lru::Lru;

/// Herald's trailing writes (see [`CorrelatorOptions::trailing_flush`]): after a storm, each
/// event whose occurrences the spam filter held back is written once more, carrying all of
/// them, so that stored counts become exact.
///
/// Bounds, and what happens at each:
/// - **Remembered keys** ([`max_keys`](Self::max_keys)): at the bound, remembering one more
///   dedup key forgets the least recently skipped one; its held occurrences are settled as
///   `skipped` at once and its stored count stays short until the key's next write (as every
///   skip is in client-go). Counted in [`CorrelatorStats::flush_evictions`].
/// - **Rate**: trailing writes go out at most at [`rate`](Self::rate) per second (a token
///   bucket of one token), earliest storm end first; a due key waits for its turn. With at
///   most `max_keys` keys remembered, none waits longer than `settle_within − quiet`.
/// - **Settle time**: so every stored count is exact within
///   [`settle_within`](Self::settle_within) of the last occurrence of its spam key, plus the
///   time the write itself takes (retries included).
///
/// The budget is per correlator, i.e. per sink of an [`EventBroadcaster`]: a broadcaster
/// recording to one sink makes at most `rate` trailing writes per second.
///
/// [`CorrelatorOptions::trailing_flush`]: super::CorrelatorOptions::trailing_flush
/// [`CorrelatorStats::flush_evictions`]: super::CorrelatorStats::flush_evictions
/// [`EventBroadcaster`]: crate::record::EventBroadcaster
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrailingFlushOptions {
    /// How long a spam key (source + object + type) must see no event before its storm counts
    /// as over and its held-back events are due. A storm whose events come closer together
    /// than this gets no trailing write until it ends, so its writes stay within the spam
    /// budget; one that pauses for longer gets its trailing writes in the pause (they take no
    /// spam token). Default 60 s.
    pub quiet: Duration,
    /// Stored counts are exact within this time after their spam key's last occurrence (plus
    /// the write's own time). Sets the trailing rate together with `quiet` and `max_keys`;
    /// at or below `quiet` trailing writes are not paced at all. Default 600 s.
    pub settle_within: Duration,
    /// Bound of remembered dedup keys (see the type's documentation for what happens at
    /// it); `0` means unbounded (and then trailing writes are not paced). Default 4096.
    pub max_keys: usize,
}

impl Default for TrailingFlushOptions {
    fn default() -> Self {
        Self {
            quiet: Duration::from_secs(60),
            settle_within: Duration::from_secs(600),
            max_keys: 4096,
        }
    }
}

impl TrailingFlushOptions {
    /// Trailing writes per second: `max_keys / (settle_within − quiet)`, so that a full set of
    /// remembered keys is written within `settle_within` of the storm's end; 4096 / 540 s ≈
    /// 7.6 by default. Infinite (no pacing) when `settle_within <= quiet` or `max_keys` is 0.
    pub fn rate(&self) -> f64 {
        let window = self.settle_within.saturating_sub(self.quiet).as_secs_f64();
        if window <= 0.0 || self.max_keys == 0 {
            f64::INFINITY
        } else {
            self.max_keys as f64 / window
        }
    }
}

/// One remembered dedup key with occurrences held back since its last write.
#[derive(Debug)]
pub(crate) struct Pending {
    pub(crate) spam_hash: u64,
    pub(crate) spam_key: Vec<u8>,
    /// The observed event when the key was first remembered; count, lastTimestamp and message
    /// (the fields the dedup patch writes) follow the latest observation.
    pub(crate) event: Event,
    pub(crate) aggregated: bool,
    /// Whether a write of this key had been handed out at the latest observation (so the
    /// trailing write patches): used when the key's dedup entry is gone by flush time.
    pub(crate) written: bool,
    /// Skipped occurrences under this key since its last write: the write that carries
    /// them settles their outcome.
    pub(crate) held: u64,
}

/// A spam key with remembered dedup keys.
#[derive(Debug)]
struct Group {
    /// The last time an event of this spam key was correlated.
    last_seen: Timestamp,
    /// Remembered dedup keys of this spam key (≥ 1; a group with none is removed).
    members: usize,
}

/// The parts of a skipped observation a remembered key follows.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Observation<'a> {
    pub(crate) count: Option<i32>,
    pub(crate) last_timestamp: &'a Option<Time>,
    pub(crate) message: &'a Option<String>,
    pub(crate) aggregated: bool,
    pub(crate) written: bool,
}

/// Remembered keys, their spam keys' last activity, and the trailing budget.
///
/// Bounds: `max_keys` pending dedup keys (least recently skipped forgotten, counted in
/// `evictions`); groups are at most as many as pending keys.
#[derive(Debug)]
pub(crate) struct Flushes {
    pub(crate) pending: Lru<Pending>,
    /// Spam keys with pending dedup keys, least recently active first: the order in which
    /// their storms end.
    groups: Lru<Group>,
    budget: TokenBucket,
    quiet: Duration,
    pub(crate) evictions: u64,
}

impl Flushes {
    pub(crate) fn new(options: &TrailingFlushOptions) -> Self {
        let rate = options.rate();
        let qps = if rate.is_finite() {
            rate as f32
        } else {
            f32::INFINITY
        };
        Self {
            pending: Lru::new(options.max_keys),
            groups: Lru::new(0),
            budget: TokenBucket::new(qps, 1),
            quiet: options.quiet,
            evictions: 0,
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// An event of the spam key `(spam_hash, spam_key)` was correlated at `now`: if that
    /// spam key has remembered keys, its storm goes on.
    #[inline]
    pub(crate) fn touch(&mut self, spam_hash: u64, spam_key: &[u8], now: Timestamp) {
        if let Some(idx) = self.groups.get(spam_hash, spam_key) {
            self.groups.value_mut(idx).last_seen = now;
        }
    }

    fn join(&mut self, spam_hash: u64, spam_key: &[u8], now: Timestamp) {
        match self.groups.get(spam_hash, spam_key) {
            Some(idx) => {
                let g = self.groups.value_mut(idx);
                g.members += 1;
                g.last_seen = g.last_seen.max(now);
            }
            None => {
                self.groups.insert(
                    spam_hash,
                    spam_key,
                    Group {
                        last_seen: now,
                        members: 1,
                    },
                );
            }
        }
    }

    fn leave(&mut self, spam_hash: u64, spam_key: &[u8]) {
        if let Some(idx) = self.groups.peek(spam_hash, spam_key) {
            let g = self.groups.value_mut(idx);
            g.members -= 1;
            if g.members == 0 {
                self.groups.remove(idx);
            }
        }
    }

    /// Forgets the remembered key `key`, if any (a write for it just went out, carrying its
    /// count); returns the occurrences it held.
    #[inline]
    pub(crate) fn clear_key(&mut self, key: &mut KeyBuf, hasher: &DefaultHashBuilder) -> u64 {
        if self.pending.is_empty() {
            return 0;
        }
        match self.pending.peek(key.hash(hasher), &key.bytes) {
            Some(idx) => {
                let (_, _, p) = self.pending.remove(idx);
                self.leave(p.spam_hash, &p.spam_key);
                p.held
            }
            None => 0,
        }
    }

    /// Forgets every remembered key; returns the occurrences they held.
    pub(crate) fn forget_all(&mut self) -> u64 {
        let mut held = 0;
        while let Some((_, _, p)) = self.pending.pop_lru() {
            held += p.held;
        }
        self.groups.clear();
        held
    }

    /// Updates the remembered key `key` with the latest skipped observation (of spam key
    /// `spam_key`, at `now`); false when `key` is not remembered.
    pub(crate) fn update_existing(
        &mut self,
        key: &mut KeyBuf,
        hasher: &DefaultHashBuilder,
        spam_hash: u64,
        spam_key: &[u8],
        observed: Observation<'_>,
        now: Timestamp,
    ) -> bool {
        if self.pending.is_empty() {
            return false;
        }
        let Some(idx) = self.pending.get(key.hash(hasher), &key.bytes) else {
            return false;
        };
        let p = self.pending.value_mut(idx);
        p.event.count = observed.count;
        p.event.last_timestamp.clone_from(observed.last_timestamp);
        p.event.message.clone_from(observed.message);
        p.aggregated = observed.aggregated;
        p.written = observed.written;
        p.held += 1;
        if p.spam_hash != spam_hash || p.spam_key != spam_key {
            let old_hash = std::mem::replace(&mut p.spam_hash, spam_hash);
            let old_key = std::mem::replace(&mut p.spam_key, spam_key.to_vec());
            self.leave(old_hash, &old_key);
            self.join(spam_hash, spam_key, now);
        }
        true
    }

    /// Remembers a new key (absent before) at `now`, forgetting the least recently skipped key
    /// at the bound; returns the occurrences the forgotten key held (0 when none was).
    pub(crate) fn insert_new(
        &mut self,
        hash: u64,
        key: &[u8],
        pending: Pending,
        now: Timestamp,
    ) -> u64 {
        self.join(pending.spam_hash, &pending.spam_key, now);
        let (_, evicted) = self.pending.insert(hash, key, pending);
        match evicted {
            Some(evicted) => {
                self.evictions += 1;
                self.leave(evicted.spam_hash, &evicted.spam_key);
                evicted.held
            }
            None => 0,
        }
    }

    /// When the earliest remembered key is due and the budget lets it go, judged at `now`:
    /// its spam key's last activity plus `quiet`, or the budget's next token if later.
    pub(crate) fn next_flush_at(&self, now: Option<Timestamp>) -> Option<Timestamp> {
        let oldest = self.groups.indices_lru_first().next()?;
        let due = add_saturating(self.groups.value(oldest).last_seen, self.quiet);
        let Some(now) = now else {
            return Some(due);
        };
        let token = self
            .budget
            .time_until_available(now)
            .map(|d| add_saturating(now, d))?;
        Some(due.max(token))
    }

    /// Takes the remembered keys due at `now` as far as the budget allows (all of them when
    /// `ignore_budget`, due or not), earliest storm end first, then least recently skipped.
    pub(crate) fn take(
        &mut self,
        now: Timestamp,
        ignore_budget: bool,
    ) -> Vec<(u64, Vec<u8>, Pending)> {
        if self.pending.is_empty() {
            return Vec::new();
        }
        // Due spam keys, in the order their storms ended.
        let mut due: Vec<(u64, Vec<u8>)> = Vec::new();
        for idx in self.groups.indices_lru_first() {
            let g = self.groups.value(idx);
            if !ignore_budget && add_saturating(g.last_seen, self.quiet) > now {
                break;
            }
            due.push((self.groups.hash(idx), self.groups.key(idx).to_vec()));
        }
        if due.is_empty() {
            return Vec::new();
        }
        let rank: hashbrown::HashMap<(u64, &[u8]), usize> = due
            .iter()
            .enumerate()
            .map(|(i, (h, k))| ((*h, k.as_slice()), i))
            .collect();
        // (group rank, position in skip order, slot) of each due key.
        let mut picked: Vec<(usize, usize, usize)> = self
            .pending
            .indices_lru_first()
            .enumerate()
            .filter_map(|(pos, idx)| {
                let p = self.pending.value(idx);
                rank.get(&(p.spam_hash, p.spam_key.as_slice()))
                    .map(|&r| (r, pos, idx))
            })
            .collect();
        drop(rank);
        picked.sort_unstable();
        if !ignore_budget {
            let mut allowed = 0;
            while allowed < picked.len() && self.budget.try_accept_at(now) {
                allowed += 1;
            }
            picked.truncate(allowed);
        }
        // Slots move on removal: name the picked keys first, then remove them one by one.
        let picked: Vec<(u64, Vec<u8>)> = picked
            .into_iter()
            .map(|(_, _, idx)| (self.pending.hash(idx), self.pending.key(idx).to_vec()))
            .collect();
        let mut out = Vec::with_capacity(picked.len());
        for (hash, key) in picked {
            if let Some(idx) = self.pending.peek(hash, &key) {
                let (hash, key, p) = self.pending.remove(idx);
                self.leave(p.spam_hash, &p.spam_key);
                out.push((hash, key, p));
            }
        }
        out
    }
}
