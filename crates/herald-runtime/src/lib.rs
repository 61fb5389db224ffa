//! Herald's client side.
//!
//! - [`record`]: record Kubernetes events with client-go's semantics (aggregation, counting,
//!   spam control), never blocking the caller and never losing an event silently.
//! - [`cache`]: informers — a local, indexed cache kept in sync by list+watch.
//! - [`workqueue`]: rate-limited work queues that feed your reconcile loop.

pub mod cache;
pub mod record;
pub mod workqueue;
