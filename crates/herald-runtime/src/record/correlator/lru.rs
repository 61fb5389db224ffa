//! A least-recently-used map with `k8s.io/utils/lru` semantics, keyed by encoded key bytes.
//!
//! - `get` promotes the entry to most recently used; `peek` does not.
//! - Inserting a new key when the map holds `capacity` entries first evicts exactly the least
//!   recently used entry (client-go adds then evicts the oldest; the survivors are the same,
//!   because the new key is never the oldest) and reuses its slot and key buffer.
//! - `capacity == 0` means unbounded.
//!
//! Callers hash the key bytes themselves (once per event) and pass the hash in, so a lookup of
//! an existing key hashes once, compares bytes, and allocates nothing. Entries live in a dense
//! slab linked into a recency list; the hash table holds slab indices.
//!
//! Every change of which key lives in which slot (insert, remove, clear) advances the map's
//! `generation`. A [`KeyBuf`] remembers the slot its key was found in together with the
//! generation, so looking up the same key again while nothing was inserted or removed costs
//! neither a hash nor a probe ([`Lru::get_key`]).

use std::mem;

use hashbrown::{DefaultHashBuilder, HashTable};

use super::keys::KeyBuf;

const NIL: usize = usize::MAX;

#[derive(Debug)]
struct Slot<V> {
    hash: u64,
    key: Vec<u8>,
    value: V,
    /// Towards the most recently used end.
    prev: usize,
    /// Towards the least recently used end.
    next: usize,
}

/// The map. Bound: `capacity` entries (0 = unbounded); at the bound an insert evicts the
/// least recently used entry.
#[derive(Debug)]
pub(crate) struct Lru<V> {
    table: HashTable<usize>,
    slots: Vec<Slot<V>>,
    /// Most recently used.
    head: usize,
    /// Least recently used.
    tail: usize,
    capacity: usize,
    /// Advanced whenever a slot changes hands (insert, remove, clear).
    generation: u64,
}

impl<V> Lru<V> {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            table: HashTable::new(),
            slots: Vec::new(),
            head: NIL,
            tail: NIL,
            capacity,
            generation: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    pub(crate) fn clear(&mut self) {
        self.generation += 1;
        self.table.clear();
        self.slots.clear();
        self.head = NIL;
        self.tail = NIL;
    }

    /// The slot index of `key`, without touching recency.
    pub(crate) fn peek(&self, hash: u64, key: &[u8]) -> Option<usize> {
        let slots = &self.slots;
        self.table
            .find(hash, |&i| slots[i].hash == hash && slots[i].key == key)
            .copied()
    }

    /// The slot index of `key`, promoted to most recently used.
    pub(crate) fn get(&mut self, hash: u64, key: &[u8]) -> Option<usize> {
        let idx = self.peek(hash, key)?;
        self.promote(idx);
        Some(idx)
    }

    /// The slot of the key in `key`, promoted to most recently used. Uses and updates the slot
    /// `key` remembers; `key` must only ever be used with this map.
    #[inline]
    pub(crate) fn get_key(
        &mut self,
        key: &mut KeyBuf,
        hasher: &DefaultHashBuilder,
    ) -> Option<usize> {
        if let Some((idx, generation)) = key.slot
            && generation == self.generation
        {
            self.promote(idx);
            return Some(idx);
        }
        let hash = key.hash(hasher);
        let idx = self.get(hash, &key.bytes)?;
        key.slot = Some((idx, self.generation));
        Some(idx)
    }

    /// [`Lru::insert_with`] for the key in `key` (absent from the map), remembering the slot in
    /// `key`; `key` must only ever be used with this map.
    pub(crate) fn insert_key_with(
        &mut self,
        key: &mut KeyBuf,
        hasher: &DefaultHashBuilder,
        make: impl FnOnce() -> V,
        reset: impl FnOnce(&mut V),
    ) -> (usize, bool) {
        let hash = key.hash(hasher);
        let out = self.insert_with(hash, &key.bytes, make, reset);
        key.slot = Some((out.0, self.generation));
        out
    }

    /// [`Lru::insert`] for the key in `key` (absent from the map), remembering the slot in
    /// `key`; `key` must only ever be used with this map.
    pub(crate) fn insert_key(
        &mut self,
        key: &mut KeyBuf,
        hasher: &DefaultHashBuilder,
        value: V,
    ) -> (usize, Option<V>) {
        let hash = key.hash(hasher);
        let out = self.insert(hash, &key.bytes, value);
        key.slot = Some((out.0, self.generation));
        out
    }

    pub(crate) fn value(&self, idx: usize) -> &V {
        &self.slots[idx].value
    }

    pub(crate) fn value_mut(&mut self, idx: usize) -> &mut V {
        &mut self.slots[idx].value
    }

    pub(crate) fn key(&self, idx: usize) -> &[u8] {
        &self.slots[idx].key
    }

    pub(crate) fn hash(&self, idx: usize) -> u64 {
        self.slots[idx].hash
    }

    /// Inserts `key`, which must not be present, as most recently used. At capacity the least
    /// recently used entry is evicted first and its slot reused in place: `reset` turns its
    /// value into the new one (so allocations can be reused). Below capacity `make` builds the
    /// value. Returns the slot index and whether an entry was evicted.
    pub(crate) fn insert_with(
        &mut self,
        hash: u64,
        key: &[u8],
        make: impl FnOnce() -> V,
        reset: impl FnOnce(&mut V),
    ) -> (usize, bool) {
        match self.reuse_lru_slot(hash, key) {
            Some(idx) => {
                reset(&mut self.slots[idx].value);
                (idx, true)
            }
            None => (self.push_front(hash, key, make()), false),
        }
    }

    /// Inserts `key` (which must not be present) as most recently used; returns the slot index
    /// and the evicted value, if the map was at capacity.
    pub(crate) fn insert(&mut self, hash: u64, key: &[u8], value: V) -> (usize, Option<V>) {
        match self.reuse_lru_slot(hash, key) {
            Some(idx) => {
                let old = mem::replace(&mut self.slots[idx].value, value);
                (idx, Some(old))
            }
            None => (self.push_front(hash, key, value), None),
        }
    }

    /// At capacity: re-keys the least recently used slot to `key` as most recently used (its
    /// value is left for the caller to replace) and returns it; otherwise `None`.
    fn reuse_lru_slot(&mut self, hash: u64, key: &[u8]) -> Option<usize> {
        if self.capacity == 0 || self.slots.len() < self.capacity || self.tail == NIL {
            return None;
        }
        self.generation += 1;
        let idx = self.tail;
        self.unlink(idx);
        let old_hash = self.slots[idx].hash;
        if let Ok(entry) = self.table.find_entry(old_hash, |&i| i == idx) {
            entry.remove();
        }
        let slot = &mut self.slots[idx];
        slot.hash = hash;
        slot.key.clear();
        slot.key.extend_from_slice(key);
        self.link_front(idx);
        let slots = &self.slots;
        self.table.insert_unique(hash, idx, |&i| slots[i].hash);
        Some(idx)
    }

    fn push_front(&mut self, hash: u64, key: &[u8], value: V) -> usize {
        self.generation += 1;
        let idx = self.slots.len();
        self.slots.push(Slot {
            hash,
            key: key.to_vec(),
            value,
            prev: NIL,
            next: NIL,
        });
        self.link_front(idx);
        let slots = &self.slots;
        self.table.insert_unique(hash, idx, |&i| slots[i].hash);
        idx
    }

    /// Removes and returns the least recently used entry as (hash, key, value).
    pub(crate) fn pop_lru(&mut self) -> Option<(u64, Vec<u8>, V)> {
        if self.tail == NIL {
            return None;
        }
        Some(self.remove(self.tail))
    }

    /// Slot indices from least to most recently used.
    pub(crate) fn indices_lru_first(&self) -> LruOrder<'_, V> {
        LruOrder {
            lru: self,
            at: self.tail,
        }
    }

    /// Removes the entry at `idx`, returning (hash, key, value). The entry that occupied the
    /// highest index moves to `idx`, so removing several entries must go from the highest index
    /// down.
    pub(crate) fn remove(&mut self, idx: usize) -> (u64, Vec<u8>, V) {
        self.generation += 1;
        self.unlink(idx);
        let hash = self.slots[idx].hash;
        if let Ok(entry) = self.table.find_entry(hash, |&i| i == idx) {
            entry.remove();
        }
        let last = self.slots.len() - 1;
        if idx != last {
            let moved_hash = self.slots[last].hash;
            if let Some(i) = self.table.find_mut(moved_hash, |&i| i == last) {
                *i = idx;
            }
            let (prev, next) = (self.slots[last].prev, self.slots[last].next);
            if prev != NIL {
                self.slots[prev].next = idx;
            } else {
                self.head = idx;
            }
            if next != NIL {
                self.slots[next].prev = idx;
            } else {
                self.tail = idx;
            }
        }
        let slot = self.slots.swap_remove(idx);
        (slot.hash, slot.key, slot.value)
    }

    fn unlink(&mut self, idx: usize) {
        let (prev, next) = (self.slots[idx].prev, self.slots[idx].next);
        if prev != NIL {
            self.slots[prev].next = next;
        } else {
            self.head = next;
        }
        if next != NIL {
            self.slots[next].prev = prev;
        } else {
            self.tail = prev;
        }
        self.slots[idx].prev = NIL;
        self.slots[idx].next = NIL;
    }

    fn promote(&mut self, idx: usize) {
        if self.head == idx {
            return;
        }
        self.unlink(idx);
        self.link_front(idx);
    }

    /// Links the unlinked slot `idx` in as most recently used.
    fn link_front(&mut self, idx: usize) {
        self.slots[idx].prev = NIL;
        self.slots[idx].next = self.head;
        if self.head != NIL {
            self.slots[self.head].prev = idx;
        } else {
            self.tail = idx;
        }
        self.head = idx;
    }
}

/// Iterator over slot indices from least to most recently used.
pub(crate) struct LruOrder<'a, V> {
    lru: &'a Lru<V>,
    at: usize,
}

impl<V> Iterator for LruOrder<'_, V> {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        if self.at == NIL {
            return None;
        }
        let idx = self.at;
        self.at = self.lru.slots[idx].prev;
        Some(idx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(k: &str) -> u64 {
        // A deliberately weak hash so that collisions are exercised.
        k.len() as u64
    }

    fn put(l: &mut Lru<u32>, k: &str, v: u32) -> Option<u32> {
        match l.get(h(k), k.as_bytes()) {
            Some(i) => {
                *l.value_mut(i) = v;
                None
            }
            None => l.insert(h(k), k.as_bytes(), v).1,
        }
    }

    fn get(l: &mut Lru<u32>, k: &str) -> Option<u32> {
        l.get(h(k), k.as_bytes()).map(|i| *l.value(i))
    }

    fn order(l: &Lru<u32>) -> Vec<String> {
        l.indices_lru_first()
            .map(|i| String::from_utf8(l.key(i).to_vec()).unwrap())
            .collect()
    }

    #[test]
    fn get_promotes_and_add_evicts_exactly_the_oldest() {
        let mut l = Lru::new(3);
        assert_eq!(put(&mut l, "a", 1), None);
        assert_eq!(put(&mut l, "b", 2), None);
        assert_eq!(put(&mut l, "c", 3), None);
        assert_eq!(get(&mut l, "a"), Some(1));
        assert_eq!(put(&mut l, "d", 4), Some(2), "b was least recently used");
        assert_eq!(order(&l), ["c", "a", "d"]);
        // Replacing a value promotes it and evicts nothing.
        assert_eq!(put(&mut l, "c", 30), None);
        assert_eq!(order(&l), ["a", "d", "c"]);
        assert_eq!(l.len(), 3);
        assert_eq!(get(&mut l, "b"), None);
        // peek does not promote.
        let i = l.peek(h("a"), b"a").unwrap();
        assert_eq!(*l.value(i), 1);
        assert_eq!(order(&l), ["a", "d", "c"]);
    }

    #[test]
    fn zero_capacity_is_unbounded() {
        let mut l = Lru::new(0);
        for i in 0..1000u32 {
            assert_eq!(put(&mut l, &i.to_string(), i), None);
        }
        assert_eq!(l.len(), 1000);
        assert_eq!(get(&mut l, "0"), Some(0));
    }

    #[test]
    fn remove_keeps_links_and_table_consistent() {
        let mut l = Lru::new(0);
        for k in ["a", "b", "c", "d", "e"] {
            put(&mut l, k, 0);
        }
        get(&mut l, "b");
        // order: a c d e b ; remove "c" (index 2) — "b" (index 1) stays, "e" (index 4) moves
        let i = l.peek(h("c"), b"c").unwrap();
        let (_, key, _) = l.remove(i);
        assert_eq!(key, b"c");
        assert_eq!(order(&l), ["a", "d", "e", "b"]);
        for k in ["a", "d", "e", "b"] {
            assert!(l.peek(h(k), k.as_bytes()).is_some(), "{k}");
        }
        assert_eq!(l.pop_lru().map(|(_, k, _)| k), Some(b"a".to_vec()));
        assert_eq!(l.pop_lru().map(|(_, k, _)| k), Some(b"d".to_vec()));
        assert_eq!(l.pop_lru().map(|(_, k, _)| k), Some(b"e".to_vec()));
        assert_eq!(l.pop_lru().map(|(_, k, _)| k), Some(b"b".to_vec()));
        assert!(l.pop_lru().is_none());
        assert!(l.is_empty());
        put(&mut l, "z", 9);
        assert_eq!(order(&l), ["z"]);
    }

    #[test]
    fn a_remembered_slot_is_trusted_only_while_no_slot_changed_hands() {
        let hasher = DefaultHashBuilder::default();
        let mut l: Lru<u32> = Lru::new(2);
        let key = |k: &str| {
            let mut b = KeyBuf::default();
            b.build(|kb| {
                kb.push(k);
            });
            b
        };
        let (mut a, mut b, mut c) = (key("a"), key("b"), key("c"));
        let ia = l.insert_key(&mut a, &hasher, 1).0;
        assert_eq!(a.slot, Some((ia, l.generation)));
        assert_eq!(l.get_key(&mut a, &hasher), Some(ia));
        l.insert_key(&mut b, &hasher, 2);
        // `a`'s memo is stale now; the lookup probes and finds the same slot.
        assert_ne!(a.slot.map(|s| s.1), Some(l.generation));
        assert_eq!(l.get_key(&mut a, &hasher), Some(ia));
        assert_eq!(a.slot, Some((ia, l.generation)));
        // "c" evicts "b" (a was used last) and takes its slot: b's memo must not find it.
        let ic = l.insert_key(&mut c, &hasher, 3).0;
        assert_eq!(*l.value(ic), 3);
        assert_eq!(l.get_key(&mut b, &hasher), None);
        assert_eq!(l.get_key(&mut c, &hasher), Some(ic));
        l.clear();
        assert_eq!(l.get_key(&mut c, &hasher), None);
    }

    #[test]
    fn capacity_one_keeps_the_newest() {
        let mut l = Lru::new(1);
        put(&mut l, "a", 1);
        assert_eq!(put(&mut l, "b", 2), Some(1));
        assert_eq!(get(&mut l, "a"), None);
        assert_eq!(get(&mut l, "b"), Some(2));
    }
}
