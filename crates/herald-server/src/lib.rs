//! Herald's Kubernetes-compatible event store.
//!
//! - [`api`]: the static HTTP surface (discovery, OpenAPI, Tables, health, negotiation).
//! - [`storage`]: the revisioned key-value contract and its backends.

pub mod api;
pub mod storage;
