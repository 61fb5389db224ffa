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

/// The `Retry-After` of a create refused because the store is full while events expire: the
/// TTL sweep runs about once a second, and each sweep can make room.
pub const STORE_FULL_RETRY_SECONDS: u32 = 1;

/// 429 TooManyRequests for a create of `name` into a store at its bound of `max` events (the
/// registry's `max_events`). Updates and deletes still work. With a `ttl`, room comes back as
/// events expire, so the client is told to retry ([`STORE_FULL_RETRY_SECONDS`]); without one
/// only deletes make room, so no `Retry-After` is sent (clients would retry in vain).
pub fn store_full(
    r: Resource,
    name: &str,
    max: usize,
    ttl: Option<std::time::Duration>,
) -> ApiError {
    let room = match ttl {
        Some(ttl) => format!("room is made as events expire ({ttl:?} after their last write)"),
        None => "events do not expire here, so delete some to make room".to_string(),
    };
    let events = if max == 1 { "event" } else { "events" };
    let message = format!(
        "{} {name:?} cannot be created: the event store is at its limit of {max} {events} (max-events); {room}",
        r.qualified()
    );
    match ttl {
        Some(_) => ApiError::too_many_requests(message, STORE_FULL_RETRY_SECONDS),
        None => ApiError::new(429, Reason::TooManyRequests, message),
    }
    .about(r, name)
}

/// The `Retry-After` of a request the store could not take (unreachable, no quorum, timed
/// out): etcd elects a new leader within about a second.
pub const STORE_UNAVAILABLE_RETRY_SECONDS: u32 = 1;

/// Maps a storage error about `name` to the `Status` kube-apiserver would send.
pub fn storage_error(err: StorageError, r: Resource, name: &str) -> ApiError {
    match err {
        StorageError::NotFound { .. } => ApiError::not_found(r, name),
        StorageError::AlreadyExists { .. } => ApiError::already_exists(r, name),
        StorageError::Conflict { .. } => ApiError::conflict(r, name),
        StorageError::Expired { .. } => ApiError::expired(LIST_TOO_OLD),
        StorageError::FutureRevision { requested, current } => too_large_rv(requested, current),
        StorageError::Closed => ApiError::unavailable("the storage backend is shutting down"),
        StorageError::Unavailable(msg) => {
            let mut e = ApiError::unavailable(msg);
            e.retry_after_seconds = Some(STORE_UNAVAILABLE_RETRY_SECONDS);
            e
        }
        StorageError::Timeout(msg) => {
            let mut e = ApiError::new(504, Reason::Timeout, msg);
            e.retry_after_seconds = Some(STORE_UNAVAILABLE_RETRY_SECONDS);
            e
        }
        e @ (StorageError::Locked { .. } | StorageError::DataDir { .. }) => {
            ApiError::internal(e.to_string())
        }
        // kube-apiserver answers etcd's "mvcc: database space exceeded" with a 500 too.
        StorageError::Backend(msg) | StorageError::NoSpace(msg) => ApiError::internal(msg),
    }
}
