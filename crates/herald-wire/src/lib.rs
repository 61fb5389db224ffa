//! Herald's wire encodings of events: how an event is stored, and every form it is read or
//! written in on the Kubernetes API.
//!
//! An event is stored once, as core/v1 JSON without `kind`, `apiVersion` and
//! `resourceVersion` ([`stored::encode`]). Every answer the API gives is made from those
//! bytes, most of them without decoding the event:
//!
//! ```text
//! stored bytes ──┬─ stored::splice_resource_version ─▶ core/v1 JSON list item / watch object
//!   (+revision)  ├─ events_v1::write_item ───────────▶ events.k8s.io/v1 JSON
//!                ├─ protobuf::transcode ─────────────▶ protobuf (k8s\0 envelope) items
//!                ├─ table::transcode ────────────────▶ Table rows, PartialObjectMetadata
//!                └─ stored::decode_at ───────────────▶ typed event (every other case)
//!                        │ read in place by stored::read (scan: bounded, 16/64 bytes at a time)
//! request body ──── body (JSON, YAML) / protobuf::event_body ──▶ typed event (storage shape)
//!                        │ checked against schema (OpenAPI documents, known fields)
//! ```
//!
//! A transcoder that meets anything it does not handle exactly as the decoding path would
//! *declines* ([`scan::Decline`]) and the caller takes the decoding path; property tests in
//! each module hold the two equal.
//!
//! - [`stored`]: the stored form: [`stored::encode`], [`stored::decode_at`], the core/v1 list
//!   item, and reading members in place ([`stored::read`], [`stored::time`]).
//! - [`scan`]: the bounded JSON scanner the transcoders read stored bytes with.
//! - [`json`]: events as JSON values and text in either group's shape.
//! - [`events_v1`]: stored bytes → `events.k8s.io/v1` JSON.
//! - [`protobuf`]: Kubernetes' protobuf encoding, both ways.
//! - [`table`]: `Table` rows and `PartialObjectMetadata`.
//! - [`body`]: request bodies (JSON, YAML) → the event in its storage shape.
//! - [`schema`]: group versions, the OpenAPI documents and field checks driven by them.
//! - [`limits`]: the size and depth bounds every decoder here applies.
//! - [`encoding`]: the encodings of one change that watchers share.
//!
//! This crate knows nothing of HTTP or storage: it depends on `herald-core` only among
//! Herald's crates, and the server's layers call it.

// Decoders answer `Result<_, ApiError>` (a `Status` body); errors are the cold path, so the
// size of `ApiError` is not worth a box.
#![allow(clippy::result_large_err)]

pub mod body;
pub mod encoding;
pub mod events_v1;
pub mod json;
pub mod limits;
pub mod protobuf;
pub mod scan;
pub mod schema;
pub mod stored;
pub mod table;

/// A store revision: what Kubernetes calls `resourceVersion`, as the stored bytes' writer
/// and readers pass it (the storage layer's revision, a `u64`).
pub type Revision = u64;

#[cfg(any(test, feature = "testing"))]
pub mod testing;

/// Any event, for property tests of what reads stored bytes.
#[cfg(test)]
pub(crate) use testing::event as any_event;
