//! Herald's Kubernetes-compatible event store.
//!
//! - [`api`]: the static HTTP surface (discovery, OpenAPI, Tables, health, negotiation).
//! - [`storage`]: the revisioned key-value contract and its backends.
//! - [`registry`]: the events registry (kube-apiserver's store semantics for events).
//! - [`server`]: [`server::Server`], which wires storage, registry and HTTP together.

pub mod api;
pub mod registry;
pub mod server;
pub mod storage;
