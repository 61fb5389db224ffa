//! The admission hook of writes: what the registry asks before it stores a create, an
//! update or a patch, as kube-apiserver's generic store calls its validating admission
//! plugins.
//!
//! The registry knows nothing of HTTP or of the plugins themselves (the HTTP layer
//! implements them, in `api::admission`, and the server hands them to the registry with
//! [`EventRegistry::with_admission`](super::EventRegistry::with_admission)): it only says
//! what is about to be written, through [`Attributes`], and stops the write when the hook
//! answers an error, which the client gets as its `Status`.
//!
//! **When the hook runs** (where kube-apiserver's store runs validating admission):
//!
//! - **create** (POST; a PUT or an apply patch that creates): after the event is complete
//!   (generated name, uid, `managedFields`) and has passed validation, before the name is
//!   checked against the store and before anything is written; [`Operation::Create`].
//! - **update** (PUT) and **patch** (every patch type): after the patch is applied to the
//!   stored event and the result has passed validation, so the hook sees the event *as
//!   patched*, before it is written; [`Operation::Update`].
//! - **Dry runs** call the hook too, with [`Attributes::dry_run`] set; a plugin decides
//!   whether they count (EventRateLimit exempts them, as upstream).
//! - A write that loses a race with another and is retried (a generated name that was
//!   taken, a conflicting concurrent update) calls the hook again on its next attempt, as
//!   kube-apiserver's retries do.
//!
//! Deletes are not admitted (no plugin Herald has looks at them).
//!
//! ```
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicUsize, Ordering};
//! use herald_core::clock::SystemClock;
//! use herald_core::event::{ApiGroup, CoreEvent};
//! use herald_core::status::ApiError;
//! use herald_server::registry::admission::{Admission, Attributes};
//! use herald_server::registry::{EventRegistry, RegistryOptions, WriteOptions};
//! use herald_server::storage::{HistoryOptions, MemoryBackend};
//!
//! /// Admits the first `n` writes, then answers 429.
//! struct FirstN(usize, AtomicUsize);
//! impl Admission for FirstN {
//!     fn validate(&self, a: &Attributes<'_>) -> Result<(), ApiError> {
//!         if self.1.fetch_add(1, Ordering::Relaxed) < self.0 {
//!             Ok(())
//!         } else {
//!             Err(ApiError::too_many_requests(format!("enough in {}", a.namespace), 1))
//!         }
//!     }
//! }
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let clock = Arc::new(SystemClock);
//! let backend = Arc::new(MemoryBackend::new(clock.clone(), HistoryOptions::default()));
//! let reg = EventRegistry::new(backend, clock, RegistryOptions::default())
//!     .with_admission(Arc::new(FirstN(1, AtomicUsize::new(0))));
//! let mut ev = CoreEvent::default();
//! ev.metadata.generate_name = Some("web-".into());
//! let opts = WriteOptions::default();
//! assert!(reg.create(ApiGroup::Core, "default", ev.clone(), &opts).await.is_ok());
//! let refused = reg.create(ApiGroup::Core, "default", ev, &opts).await.unwrap_err();
//! assert_eq!((refused.code, refused.message.as_str()), (429, "enough in default"));
//! # });
//! ```

use herald_core::event::{ApiGroup, CoreEvent};
use herald_core::status::ApiError;

/// What a write does to the event (kube's admission operations; a patch is an update).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// A new event: POST, or a PUT or apply patch of a name that does not exist.
    Create,
    /// A stored event replaced (PUT) or patched (PATCH, any patch type).
    Update,
}

/// What is about to be written, for an [`Admission`] hook: kube-apiserver's
/// `admission.Attributes`, limited to what Herald's plugins read.
#[derive(Debug, Clone, Copy)]
pub struct Attributes<'a> {
    /// Create or update.
    pub operation: Operation,
    /// The API group the request came in on (the event is in core/v1 shape either way).
    pub group: ApiGroup,
    /// The namespace of the request's URL.
    pub namespace: &'a str,
    /// The name of the user making the request ([`WriteOptions::user`](super::WriteOptions::user));
    /// empty when the caller named none.
    pub user: &'a str,
    /// The event as it would be stored: complete and validated; for a patch, as patched.
    pub event: &'a CoreEvent,
    /// Whether the request is a dry run (nothing will be stored).
    pub dry_run: bool,
}

/// A validating admission hook: may refuse a write before it is stored, with the `Status`
/// the client gets. Called synchronously on the request's task, so it must not block
/// (a lock held for a few instructions is fine).
pub trait Admission: Send + Sync + 'static {
    /// `Ok(())` admits the write; an error refuses it and is the answer.
    fn validate(&self, attributes: &Attributes<'_>) -> Result<(), ApiError>;
}
