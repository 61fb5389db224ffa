//! Informers: a local, indexed cache of a Kubernetes collection kept in sync by list+watch,
//! and handlers told about every change.
//!
//! ```text
//! ListerWatcher ──► Reflector ──► RealFifo ──► Indexer (cache) ──► per-handler buffers ──► handlers
//!  (kube::Api)     list/watch,    every change   Arc<K>, indexes     coalescing by key,
//!                  410/backoff    in order       listers             one task each
//! ```
//!
//! - [`ListerWatcher`] / [`KubeListerWatcher`]: list one page, watch from a resourceVersion,
//!   with typed errors ([`ListWatchError`]).
//! - [`Reflector`]: client-go's list/watch rules (pagination, resourceVersion choice on
//!   relist, streaming lists with fallback, bookmarks, backoff, short-watch detection).
//! - [`RealFifo`]: every change in arrival order; relists produce
//!   [`DeletedFinalStateUnknown`] tombstones.
//! - [`Store`] / [`Indexer`] / [`Lister`]: the cache.
//! - [`SharedInformer`]: all of it together, with handlers added and removed at run time,
//!   per-handler resync and sync tracking, and bounded, key-coalescing handler buffers.

mod backoff;
mod delta;
mod error;
mod fifo;
mod handler;
mod indexer;
mod informer;
mod key;
mod lister;
mod lister_watcher;
mod reflector;

pub use backoff::BackoffOptions;
pub use delta::{DeletedFinalStateUnknown, DeletedObject, Delta, DeltaType};
pub use error::{IndexError, InformerError, KeyError, ListWatchError};
pub use fifo::{DEFAULT_FIFO_CAPACITY, Popped, RealFifo, RealFifoOptions, TransformFn};
pub use handler::{EventHandler, HandlerFns, HandlerStats};
pub use indexer::{IndexFn, Indexer, Indexers, NAMESPACE_INDEX, Store, namespace_index_fn};
pub use informer::{InformerOptions, MINIMUM_RESYNC_PERIOD, Registration, SharedInformer};
pub use key::{object_key, split_key};
pub use lister::{Lister, NamespaceLister, NotFound};
pub use lister_watcher::{
    Bookmark, INITIAL_EVENTS_END_ANNOTATION, KubeListerWatcher, ListPage, ListRequest,
    ListerWatcher, ResourceVersionMatch, WatchEvent, WatchRequest, WatchStream,
};
pub use reflector::{
    DEFAULT_PAGE_SIZE, Reflector, ReflectorOptions, ReflectorStore, ResourceVersionHandle,
    ShouldResyncFn, WatchErrorHandler,
};
