//! Herald's Kubernetes-compatible event store.
//!
//! Four layers, each importing only the ones below it (a test, `tests/layers.rs`, holds the
//! source to that):
//!
//! - [`server`]: [`server::Server`] wires the others together (and nothing imports it).
//! - [`api`]: HTTP. The accept loop and TLS ([`api::listen`], [`api::tls`]), authentication
//!   and authorization ([`api::auth`]), admission plugins ([`api::admission`]), the audit log
//!   ([`api::audit`]), negotiation, the events endpoints, discovery, OpenAPI, health,
//!   metrics, the output layer. It reaches events only through the [`registry`], never
//!   [`storage`].
//! - [`registry`]: kube-apiserver's store semantics for events: validation, resourceVersion,
//!   TTL, selectors, pagination, watch rules, patches and `managedFields`. It answers events
//!   as stored ([`registry::Stored`]: bytes and revision) and knows nothing of HTTP.
//! - [`storage`]: the revisioned key-value contract ([`storage::Backend`]), its backends
//!   (SQLite, memory) and the watch cache ([`storage::WatchHub`]).
//!
//! Beside them, [`files`] creates the owner-only files and directories every layer writes under
//! the data directory (the store's, the generated certificates of [`api::tls::pki`]).
//!
//! Beside them all, [`herald_wire`] turns events into bytes and back: the stored form, the
//! JSON, protobuf and Table encodings, request bodies and the schema. The API and the
//! registry call it; it calls none of them.
//!
//! # A create
//!
//! ```text
//! POST /api/v1/namespaces/ns/events
//!  api::output            negotiate once → Negotiated (encoding, Accept) as an extension
//!  api::events::create    read the body (≤ herald_wire::limits::MAX_BODY_BYTES)
//!   └ herald_wire::body / protobuf::event_body / schema::known_fields   body → CoreEvent
//!  registry::EventRegistry::create → registry::write::create
//!   ├ herald_core::event::validate, generateName, uid, managedFields (registry::fieldmanager)
//!   ├ registry::admission hook → api::admission (EventRateLimit: 429 + Retry-After)
//!   ├ herald_wire::stored::encode                                        CoreEvent → stored bytes
//!   └ storage::Backend::create (SQLite: group commit, fsync)             → revision
//!  api::events::event_response  stored bytes + revision → JSON (or protobuf) answer, 201
//!  api::output            YAML / pretty / gzip where negotiated; Audit-Id; metrics
//! ```
//!
//! # A list
//!
//! ```text
//! GET /api/v1/namespaces/ns/events?limit=500
//!  api::output → Negotiated;  api::events::read → Negotiated::output (object, Table, metadata)
//!  registry::EventRegistry::list  → storage::Backend::list (a snapshot revision, a page)
//!   └ selectors: registry::keys::decode + registry::options::Filter for each item
//!  registry::EventList { items: Vec<Stored>, resourceVersion, continue }
//!  api::events::render::list / parallel_list / protobuf_list
//!   └ herald_wire::{stored::splice_resource_version, events_v1, table::transcode,
//!                   protobuf::write_list_items}: items written from the stored bytes,
//!     decoded only where a transcoder declines
//! ```
//!
//! # A watch
//!
//! ```text
//! GET /api/v1/events?watch=1&resourceVersion=N
//!  api::events::read → registry::EventRegistry::watch → registry::watch::start
//!   ├ initial events (a list) or storage::Backend::watch_batches from N (the WatchHub ring;
//!   │   410 Expired when N left the window)
//!   └ registry::watch::State::next: batches of WatchItem (Change, Initial, Judged,
//!     Bookmark, Error), selectors applied, bookmarks, timeout
//!  api::events::render::WatchLines::line / protobuf_frame: each Change encoded once per
//!   herald_wire::encoding::WatchEncoding and shared by every watcher without selectors
//!  api::events::stream_response: one chunk per batch, until the timeout or shutdown
//! ```

pub mod api;
pub mod files;
pub mod registry;
pub mod server;
pub mod storage;
