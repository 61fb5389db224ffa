//! Mapping storage failures to kube-apiserver's `Status` errors.

use herald_core::status::{ApiError, Reason, Resource};

use crate::storage::{Revision, StorageError};

/// The message of a 410 for a list at a compacted revision (etcd's wording).
pub const LIST_TOO_OLD: &str = "The resourceVersion for the provided list is too old.";
/// The message of a 410 for a watch from a revision out of the history window.
pub const WATCH_TOO_OLD: &str = "The resourceVersion for the provided watch is too old.";
/// The message of a 410 for an expired continue token.
pub const CONTINUE_TOO_OLD: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

/// 504 Timeout `Too large resource version: N, current: C` (kube's answer to a read at a
/// revision the store has not reached).
pub fn too_large_rv(requested: Revision, current: Revision) -> ApiError {
    let mut e = ApiError::new(
        504,
        Reason::Timeout,
        format!("Too large resource version: {requested}, current: {current}"),
    );
    e.causes.push(herald_core::status::FieldCause {
        reason: "ResourceVersionTooLarge".into(),
        message: "Too large resource version".into(),
        field: String::new(),
    });
    e.retry_after_seconds = Some(1);
    e
}

/// Maps a storage error about `name` to the `Status` kube-apiserver would send.
pub fn storage_error(err: StorageError, r: Resource, name: &str) -> ApiError {
    match err {
        StorageError::NotFound { .. } => ApiError::not_found(r, name),
        StorageError::AlreadyExists { .. } => ApiError::already_exists(r, name),
        StorageError::Conflict { .. } => ApiError::conflict(r, name),
        StorageError::Expired { .. } => ApiError::expired(LIST_TOO_OLD),
        StorageError::FutureRevision { requested, current } => too_large_rv(requested, current),
        StorageError::Closed => ApiError::unavailable("the storage backend is shutting down"),
        e @ (StorageError::Locked { .. } | StorageError::DataDir { .. }) => {
            ApiError::internal(e.to_string())
        }
        StorageError::Backend(msg) => ApiError::internal(msg),
    }
}
