//! The values that cross the [`Backend`](super::Backend) boundary.

use std::sync::Arc;

use bytes::Bytes;
use futures::stream::BoxStream;

use super::StorageError;

/// A global store revision. Every successful write (create, update, delete, TTL expiry) takes
/// the next one; it is what Kubernetes calls `resourceVersion`. A new store starts at
/// [`INITIAL_REVISION`]; `0` is never a store's revision.
pub type Revision = u64;

/// The revision of a new, empty store (etcd's: a new cluster is at revision 1, its first write
/// takes 2). Starting above `0` keeps every resourceVersion the API reports — even that of an
/// empty list or of a bookmark on an idle store — a real point to resume from: in requests
/// Kubernetes reserves `"0"` for "any version", and a watch from `"0"` replays the current
/// state as ADDED events, which cannot report what was deleted meanwhile.
pub const INITIAL_REVISION: Revision = 1;

/// One stored key with its value and the revisions that describe its history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyValue {
    /// The full key, e.g. `/events/<namespace>/<name>`.
    pub key: String,
    /// The opaque value (the registry stores JSON without `resourceVersion`).
    pub value: Bytes,
    /// The revision at which this incarnation of the key was created.
    pub create_revision: Revision,
    /// The revision of the last write to the key: the object's `resourceVersion`.
    pub mod_revision: Revision,
}

/// A change seen by a watcher. Events are delivered in strictly increasing revision order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchEvent {
    /// The key was created (`prev` is `None`) or updated (`prev` is the state before).
    Put {
        /// The new state; `kv.mod_revision` is the event's revision.
        kv: KeyValue,
        /// The state before this write, if the key existed.
        prev: Option<KeyValue>,
    },
    /// The key was deleted, explicitly or because its TTL ran out.
    Delete {
        /// The last state of the key before the deletion.
        prev: KeyValue,
        /// The revision of the deletion itself (Kubernetes puts it on the `DELETED` object).
        revision: Revision,
    },
}

impl WatchEvent {
    /// The revision this event was written at.
    pub fn revision(&self) -> Revision {
        match self {
            WatchEvent::Put { kv, .. } => kv.mod_revision,
            WatchEvent::Delete { revision, .. } => *revision,
        }
    }

    /// The key the event is about.
    pub fn key(&self) -> &str {
        match self {
            WatchEvent::Put { kv, .. } => &kv.key,
            WatchEvent::Delete { prev, .. } => &prev.key,
        }
    }
}

/// What a successful delete reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deleted {
    /// The state of the key just before it was deleted.
    pub prev: KeyValue,
    /// The revision of the deletion.
    pub revision: Revision,
}

/// One page of a [`Backend::list`](super::Backend::list).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListResult {
    /// The keys under the prefix as they were at `revision`, in the page's [`order`](Self::order).
    pub items: Vec<KeyValue>,
    /// The snapshot revision the page was read at (the list's `resourceVersion`). Pass it back
    /// as `at_revision` to read the next page of the same snapshot: in key order with
    /// `start_after` = the last item's key, in write order with `order` =
    /// [`ListOrder::Written`] after the last item's mod revision.
    pub revision: Revision,
    /// Whether more keys under the prefix follow the last returned item at `revision`.
    pub more: bool,
    /// The order the page was read in: [`ListOrder::Key`] or [`ListOrder::Written`] (never
    /// [`ListOrder::Fastest`]), `Written`'s `after` being the last item's mod revision (the
    /// asked one for an empty page).
    pub order: ListOrder,
}

/// The order of a list's items, and so where its next page starts.
///
/// Kubernetes lists that are paged (`limit`, continue tokens) are in key order, and that is
/// the default. A list read whole by one request (no `limit`) has no promised order, and some
/// backends read a large one much faster in the order it was written ([`ListOrder::Fastest`]
/// lets the backend choose): the SQLite store keeps versions in write order, so a key-order
/// read of most of the store costs a random page read per item, a write-order read one
/// sequential page per few items.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ListOrder {
    /// Bytewise key order; a page continues after [`ListOptions::start_after`].
    #[default]
    Key,
    /// Increasing mod revision (the order of the keys' last writes at the list's revision):
    /// only keys whose mod revision is greater than `after` (`0`: from the start).
    /// [`ListOptions::start_after`] is ignored. Backends that cannot read in this order
    /// ([`EtcdBackend`](super::EtcdBackend)) refuse it with [`StorageError::Backend`]; they
    /// never answer [`ListOrder::Fastest`] with it.
    Written {
        /// The mod revision of the previous page's last item.
        after: Revision,
    },
    /// The first page of a list that may come in either order: the backend picks the one it
    /// reads faster for this prefix and [index query](ListOptions::index), and
    /// [`ListResult::order`] says which, so later pages ask for that one. With
    /// `start_after` set it is [`ListOrder::Key`].
    Fastest,
}

/// Parameters of a [`Backend::list`](super::Backend::list).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListOptions {
    /// Only keys strictly greater than this one (the continue position of the previous page).
    pub start_after: Option<String>,
    /// At most this many items; `None` or `Some(0)` means all of them.
    pub limit: Option<usize>,
    /// Read the snapshot at this revision; `None` means the latest. A revision older than the
    /// retained history is [`StorageError::Expired`]; one newer than the store is
    /// [`StorageError::FutureRevision`].
    pub at_revision: Option<Revision>,
    /// Only keys whose write put this value in this index slot, for backends that keep
    /// indexes (others ignore it): a narrowing, not a filter the caller can rely on alone (see
    /// [`index`](super::index)). Paging works as without it, over the narrowed keys.
    pub index: Option<super::IndexQuery>,
    /// The order to read in (key order by default).
    pub order: ListOrder,
}

/// The stream a watch returns: events strictly after the requested revision, in order.
///
/// Items are shared (`Arc`) because one event fans out to every watcher without a copy. The
/// stream ends with one `Err(StorageError::Expired)` if the watcher falls so far behind that the
/// events it still needs left the bounded history window; the caller re-lists and watches again.
/// It ends without an error when the backend shuts down.
pub type WatchStream = BoxStream<'static, Result<Arc<WatchEvent>, StorageError>>;

/// The smallest string greater than every string starting with `prefix`, or `None` when no
/// such bound exists (empty prefix or a prefix of only `char::MAX`).
pub(crate) fn prefix_end(prefix: &str) -> Option<String> {
    let mut chars: Vec<char> = prefix.chars().collect();
    while let Some(c) = chars.pop() {
        let next = (c as u32 + 1..=char::MAX as u32).find_map(char::from_u32);
        if let Some(n) = next {
            chars.push(n);
            return Some(chars.into_iter().collect());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::prefix_end;

    #[test]
    fn prefix_end_bounds_the_range() {
        assert_eq!(prefix_end("/events/").as_deref(), Some("/events0"));
        assert_eq!(prefix_end("a").as_deref(), Some("b"));
        assert_eq!(prefix_end(""), None);
        let p = format!("x{}", char::MAX);
        assert_eq!(prefix_end(&p).as_deref(), Some("y"));
    }
}
