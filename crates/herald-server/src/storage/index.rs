//! Secondary indexes: a few values of each stored object, given by the writer, that a list can
//! select on without reading every key.
//!
//! Storage does not know what the values mean: the layer above names [`INDEX_SLOTS`] slots
//! (the registry: the involved object's name and uid, reason, type, source, reporting
//! component) and hands the values of each write in [`IndexValues`]. A backend that keeps
//! indexes stores each value's [`term`] (a stable 64-bit hash) beside the version; a list with
//! an [`IndexQuery`] then reads only the versions whose slot holds that term.
//!
//! **An index query narrows, it does not decide.** Two values can share a term, and backends
//! without indexes ignore the query, so the caller filters every item it gets as it would
//! without the query. What the query guarantees is the other direction: no key whose value in
//! the slot equals the queried value is left out, and pages, revisions and `more` keep their
//! meaning over the narrowed set (a page of `limit` items of it, in the list's
//! [order](super::ListOrder), at one snapshot).

/// How many slots a write can fill.
pub const INDEX_SLOTS: usize = 6;

/// The index values of one write, kept as their [`term`]s (`None`: not indexed in that slot).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IndexValues([Option<i64>; INDEX_SLOTS]);

impl IndexValues {
    /// The values of `slots` (each `None` or a value; no allocation).
    pub fn of(slots: [Option<&str>; INDEX_SLOTS]) -> Self {
        IndexValues(slots.map(|v| v.map(term)))
    }

    /// The [`term`] of each slot's value.
    pub fn terms(&self) -> [Option<i64>; INDEX_SLOTS] {
        self.0
    }
}

/// "Only keys whose value in `slot` is `value`" (see the module docs for what that promises).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexQuery {
    /// The slot, `0..INDEX_SLOTS`; a larger one is ignored (the list reads every key).
    pub slot: usize,
    /// The value the slot must hold.
    pub value: String,
}

/// The stored form of an index value: 64-bit FNV-1a of its UTF-8 bytes, as SQLite's signed
/// integer. Stable across versions and platforms (it is written to disk), so never change it
/// without re-indexing.
pub fn term(value: &str) -> i64 {
    use std::hash::Hasher as _;
    let mut h = fnv::FnvHasher::default();
    h.write(value.as_bytes());
    // The bits as they are: SQLite integers are signed.
    h.finish() as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hash is on disk: these values must never change.
    #[test]
    fn terms_are_stable() {
        assert_eq!(term(""), 0xcbf2_9ce4_8422_2325_u64 as i64);
        assert_eq!(term("a"), 0xaf63_dc4c_8601_ec8c_u64 as i64);
        assert_ne!(term("web-0"), term("web-1"));
    }
}
