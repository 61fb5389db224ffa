//! Herald's Kubernetes-compatible event store.
//!
//! - [`storage`]: the revisioned key-value contract and its backends.

pub mod storage;
