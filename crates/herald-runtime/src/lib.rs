//! Herald's client side.
//!
//! - [`record`]: record Kubernetes events with client-go's semantics (aggregation, counting,
//!   spam control), never blocking the caller and never losing an event silently.
//! - [`events`]: record events.k8s.io/v1 events with series (client-go's `tools/events`),
//!   through the same pipeline and with the same guarantees.
//! - [`cache`]: informers — a local, indexed cache kept in sync by list+watch.
//! - [`workqueue`]: rate-limited work queues that feed your reconcile loop.
//! - [`time`]: a clock that follows tokio's (paused) time, for deterministic tests.

pub mod cache;
pub mod events;
pub mod record;
pub mod time;
pub mod workqueue;
