//! The bounds on what a request may make Herald read, in one place.
//!
//! - [`MAX_BODY_BYTES`]: a request body (create, update, patch, delete options) of more
//!   bytes is refused with 413 before it is parsed, as kube-apiserver does.
//! - [`MAX_DEPTH`]: the stored-bytes scanner declines values nested deeper (the caller then
//!   takes the decoding path, whose parser has its own recursion limit of 128).
//! - [`MAX_YAML_DEPTH`]: a YAML body nested deeper is refused with 400 while it is scanned,
//!   before it is read whole, so refusing it costs no more than its first levels (JSON bodies
//!   have `serde_json`'s limit of 128, checked as they are parsed).
//! - [`MAX_WALK_DEPTH`] and [`MAX_UNKNOWN_FIELDS`]: the unknown-field check walks no deeper
//!   and reports no more; what lies beyond is not inspected (no schema of ours is that deep).

pub use crate::body::yaml_depth::MAX_YAML_DEPTH;
pub use crate::scan::MAX_DEPTH;
pub use crate::schema::openapi::{MAX_UNKNOWN_FIELDS, MAX_WALK_DEPTH};

/// The largest request body accepted (kube-apiserver's 3 MiB); larger bodies get 413.
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;
