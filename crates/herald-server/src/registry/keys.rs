//! Where events are stored: the key of each event and the prefixes of a namespace's and of
//! all events, and the revision strings of requests. The stored bytes themselves are
//! [`herald_wire::stored`]'s.

use herald_core::status::ApiError;

use crate::storage::{KeyValue, Revision};

/// The key prefix of every event.
pub const EVENTS_PREFIX: &str = "/events/";

/// The key of one event.
pub fn key(namespace: &str, name: &str) -> String {
    format!("{EVENTS_PREFIX}{namespace}/{name}")
}

/// The prefix of the events of one namespace, or of all events when `namespace` is `None`.
pub fn prefix(namespace: Option<&str>) -> String {
    match namespace {
        Some(ns) => format!("{EVENTS_PREFIX}{ns}/"),
        None => EVENTS_PREFIX.to_string(),
    }
}

/// The event stored in `kv`, with `resourceVersion` = the key's mod revision.
pub fn decode(kv: &KeyValue) -> Result<herald_core::event::CoreEvent, ApiError> {
    herald_wire::stored::decode_at(&kv.value, kv.mod_revision)
}

/// Parses `resourceVersion` strings: `Ok(None)` for absent/empty, 400 for non-numbers.
pub fn parse_rv(rv: Option<&str>) -> Result<Option<Revision>, ApiError> {
    match rv.filter(|s| !s.is_empty()) {
        None => Ok(None),
        Some(s) => s
            .parse::<Revision>()
            .map(Some)
            .map_err(|_| ApiError::bad_request(format!("invalid resource version: {s:?}"))),
    }
}
