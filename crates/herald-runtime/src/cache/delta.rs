//! What flows through the FIFO and into handlers: deltas, and deletions whose final state may
//! be unknown.

use std::sync::Arc;

use kube::Resource;

use super::key::object_key;

/// A deletion the informer inferred instead of observing: the object was in the cache (or in
/// the queue) but absent from a relist, so the delete event itself was missed (for example
/// during a watch outage). `obj` is the last state this client knew, which may be stale;
/// `None` when even that is unknown. Same meaning as client-go's `DeletedFinalStateUnknown`.
#[derive(Debug)]
pub struct DeletedFinalStateUnknown<K> {
    /// The cache key of the deleted object (`namespace/name` or `name`).
    pub key: String,
    /// The last known state of the object, possibly stale.
    pub obj: Option<Arc<K>>,
}

impl<K> Clone for DeletedFinalStateUnknown<K> {
    fn clone(&self) -> Self {
        Self {
            key: self.key.clone(),
            obj: self.obj.clone(),
        }
    }
}

/// The object a deletion carries: the server's final state when the delete was observed on
/// the watch, or a [`DeletedFinalStateUnknown`] tombstone when it was inferred from a relist.
#[derive(Debug)]
pub enum DeletedObject<K> {
    /// Observed deletion; the object is its final state as sent by the server.
    Known(Arc<K>),
    /// Inferred deletion (relist): the final state is unknown.
    FinalStateUnknown(DeletedFinalStateUnknown<K>),
}

impl<K> Clone for DeletedObject<K> {
    fn clone(&self) -> Self {
        match self {
            Self::Known(o) => Self::Known(o.clone()),
            Self::FinalStateUnknown(t) => Self::FinalStateUnknown(t.clone()),
        }
    }
}

impl<K: Resource> DeletedObject<K> {
    /// The cache key of the deleted object.
    pub fn key(&self) -> String {
        match self {
            Self::Known(o) => object_key(o.as_ref()),
            Self::FinalStateUnknown(t) => t.key.clone(),
        }
    }
}

impl<K> DeletedObject<K> {
    /// The object, if any state is known (possibly stale for a tombstone).
    pub fn object(&self) -> Option<&Arc<K>> {
        match self {
            Self::Known(o) => Some(o),
            Self::FinalStateUnknown(t) => t.obj.as_ref(),
        }
    }

    /// True for an inferred deletion.
    pub fn is_final_state_unknown(&self) -> bool {
        matches!(self, Self::FinalStateUnknown(_))
    }
}

/// One change, queued in arrival order by [`RealFifo`](super::RealFifo).
#[derive(Debug)]
pub enum Delta<K> {
    /// Watch `ADDED`.
    Added(Arc<K>),
    /// Watch `MODIFIED`.
    Updated(Arc<K>),
    /// Watch `DELETED`, or a deletion inferred by a relist.
    Deleted(DeletedObject<K>),
    /// An object from a (re)list.
    Replaced(Arc<K>),
    /// A periodic resync of a cached object (delivered only to handlers due for resync).
    Sync(Arc<K>),
}

impl<K> Clone for Delta<K> {
    fn clone(&self) -> Self {
        match self {
            Self::Added(o) => Self::Added(o.clone()),
            Self::Updated(o) => Self::Updated(o.clone()),
            Self::Deleted(d) => Self::Deleted(d.clone()),
            Self::Replaced(o) => Self::Replaced(o.clone()),
            Self::Sync(o) => Self::Sync(o.clone()),
        }
    }
}

/// The kind of a [`Delta`], without its payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeltaType {
    /// See [`Delta::Added`].
    Added,
    /// See [`Delta::Updated`].
    Updated,
    /// See [`Delta::Deleted`].
    Deleted,
    /// See [`Delta::Replaced`].
    Replaced,
    /// See [`Delta::Sync`].
    Sync,
}

impl<K> Delta<K> {
    /// The kind of this delta.
    pub fn kind(&self) -> DeltaType {
        match self {
            Self::Added(_) => DeltaType::Added,
            Self::Updated(_) => DeltaType::Updated,
            Self::Deleted(_) => DeltaType::Deleted,
            Self::Replaced(_) => DeltaType::Replaced,
            Self::Sync(_) => DeltaType::Sync,
        }
    }

    /// The object this delta carries (for a tombstone: its last known state, if any).
    pub fn object(&self) -> Option<&Arc<K>> {
        match self {
            Self::Added(o) | Self::Updated(o) | Self::Replaced(o) | Self::Sync(o) => Some(o),
            Self::Deleted(d) => d.object(),
        }
    }
}

impl<K: Resource> Delta<K> {
    /// The cache key of the object this delta is about.
    pub fn key(&self) -> String {
        match self {
            Self::Added(o) | Self::Updated(o) | Self::Replaced(o) | Self::Sync(o) => {
                object_key(o.as_ref())
            }
            Self::Deleted(d) => d.key(),
        }
    }
}
