//! Names and namespaces on the write path: `generateName` expansion and the metadata steps
//! kube-apiserver takes before validating a create or an update.
//!
//! ```
//! use herald_core::event::names::generate_name;
//! use rand::SeedableRng;
//! let mut rng = rand::rngs::StdRng::seed_from_u64(7);
//! let name = generate_name("web-", &mut rng);
//! assert_eq!(name.len(), 9);
//! assert!(name.starts_with("web-"));
//! ```

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use rand::Rng;

use crate::status::ApiError;

use super::meta::st;

/// The characters of a generated suffix: no vowels and no look-alikes (`0`, `1`, `3`), so a
/// suffix never spells a word.
pub const GENERATE_NAME_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
/// The length of the random suffix `generateName` gets.
pub const RANDOM_SUFFIX_LENGTH: usize = 5;
/// The longest base kept from `generateName` (63 − 5): a longer base is cut to this many bytes.
pub const MAX_GENERATE_NAME_BASE: usize = 58;

/// `base` cut to [`MAX_GENERATE_NAME_BASE`] bytes (at a character boundary) plus
/// [`RANDOM_SUFFIX_LENGTH`] characters from [`GENERATE_NAME_ALPHABET`] drawn from `rng`.
/// A collision with an existing name is the caller's to retry.
pub fn generate_name<R: Rng + ?Sized>(base: &str, rng: &mut R) -> String {
    let mut cut = base.len().min(MAX_GENERATE_NAME_BASE);
    while !base.is_char_boundary(cut) {
        cut -= 1;
    }
    let mut out = String::with_capacity(cut + RANDOM_SUFFIX_LENGTH);
    out.push_str(&base[..cut]);
    for _ in 0..RANDOM_SUFFIX_LENGTH {
        let i = rng.random_range(0..GENERATE_NAME_ALPHABET.len());
        out.push(char::from(GENERATE_NAME_ALPHABET[i]));
    }
    out
}

/// kube's namespace rule for a write: an object without a namespace takes the request's; an
/// empty request namespace (a collection URL without `/namespaces/{ns}`) clears the object's,
/// so validation then reports it missing; a different namespace is 400
/// `the namespace of the provided object does not match the namespace sent on the request`.
pub fn ensure_namespace(meta: &mut ObjectMeta, request_namespace: &str) -> Result<(), ApiError> {
    let ns = st(&meta.namespace);
    if ns == request_namespace {
        Ok(())
    } else if ns.is_empty() {
        meta.namespace = Some(request_namespace.to_string());
        Ok(())
    } else if request_namespace.is_empty() {
        meta.namespace = None;
        Ok(())
    } else {
        Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ))
    }
}

/// kube's check that an update or patch body names the object of the URL: a different name
/// is 400 `the name of the object (<body>) does not match the name on the URL (<url>)`, a
/// different non-empty namespace is 400
/// `the namespace of the object (<body>) does not match the namespace on the request (<url>)`.
pub fn check_url_name(
    meta: &ObjectMeta,
    url_namespace: &str,
    url_name: &str,
) -> Result<(), ApiError> {
    let name = st(&meta.name);
    if name != url_name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({name}) does not match the name on the URL ({url_name})"
        )));
    }
    let ns = st(&meta.namespace);
    if !url_namespace.is_empty() && !ns.is_empty() && ns != url_namespace {
        return Err(ApiError::bad_request(format!(
            "the namespace of the object ({ns}) does not match the namespace on the request ({url_namespace})"
        )));
    }
    Ok(())
}

/// `now` cut to whole seconds, as kube-apiserver's metadata timestamps are serialized
/// (RFC 3339, seconds, UTC).
pub fn whole_seconds(now: Timestamp) -> Time {
    Time(Timestamp::from_second(now.as_second()).unwrap_or(now))
}

/// The metadata steps of a create before validation (kube's `BeforeCreate`): namespace from
/// the request (see [`ensure_namespace`]), `selfLink` and the deletion fields cleared, `uid`
/// and `creationTimestamp` (whole seconds) assigned, and `generateName` expanded when `name`
/// is empty (`name` wins when both are set). `generation` is left alone: events get none.
/// `resourceVersion` is the caller's policy (kube rejects a client-set one on create).
pub fn prepare_for_create<R: Rng + ?Sized>(
    meta: &mut ObjectMeta,
    request_namespace: &str,
    uid: &str,
    now: Timestamp,
    rng: &mut R,
) -> Result<(), ApiError> {
    ensure_namespace(meta, request_namespace)?;
    // kube-apiserver has left selfLink unset on every object since 1.24 (RemoveSelfLink).
    meta.self_link = None;
    meta.deletion_timestamp = None;
    meta.deletion_grace_period_seconds = None;
    meta.uid = Some(uid.to_string());
    meta.creation_timestamp = Some(whole_seconds(now));
    let generate = st(&meta.generate_name);
    if st(&meta.name).is_empty() && !generate.is_empty() {
        meta.name = Some(generate_name(generate, rng));
    }
    Ok(())
}

/// The metadata steps of an update before validation (kube's `BeforeUpdate` and the store's
/// unconditional-update rule): namespace from the request, an empty `resourceVersion` takes
/// the stored one (events allow unconditional updates), an empty `uid` takes the stored one,
/// `creationTimestamp` and `generation` are carried over from `old`, and `selfLink` is
/// cleared. Once `old` is being deleted its `deletionTimestamp` is kept whatever the update
/// says, and a `deletionGracePeriodSeconds` the update leaves out is taken from `old` (one it
/// changes is left for validation to reject as immutable, as kube does).
pub fn prepare_for_update(
    new: &mut ObjectMeta,
    old: &ObjectMeta,
    request_namespace: &str,
) -> Result<(), ApiError> {
    ensure_namespace(new, request_namespace)?;
    new.self_link = None;
    if st(&new.resource_version).is_empty() {
        new.resource_version = old.resource_version.clone();
    }
    new.generation = old.generation;
    if st(&new.uid).is_empty() {
        new.uid = old.uid.clone();
    }
    if old.creation_timestamp.is_some() {
        new.creation_timestamp = old.creation_timestamp.clone();
    }
    if old.deletion_timestamp.is_some() {
        new.deletion_timestamp = old.deletion_timestamp.clone();
    }
    if new.deletion_grace_period_seconds.is_none() {
        new.deletion_grace_period_seconds = old.deletion_grace_period_seconds;
    }
    Ok(())
}

/// kube's `markAsDeleting`, what a DELETE does to an object that still has finalizers (and
/// no graceful-deletion strategy, as for events): `deletionTimestamp` becomes `now` (whole
/// seconds; a repeated DELETE moves it again), `deletionGracePeriodSeconds` 0, and a positive
/// `generation` is bumped on the first mark. The caller stores the result as an update.
pub fn mark_deleting(meta: &mut ObjectMeta, now: Timestamp) {
    if meta.deletion_timestamp.is_none()
        && let Some(g) = meta.generation.filter(|g| *g > 0)
    {
        meta.generation = Some(g.saturating_add(1));
    }
    meta.deletion_timestamp = Some(whole_seconds(now));
    meta.deletion_grace_period_seconds = Some(0);
}

/// Whether an update of `old` to `new` is really the end of a deletion (kube's
/// `shouldDeleteDuringUpdate`): `old` is being deleted with no grace period left (absent or 0)
/// and the update leaves no finalizer. The registry then deletes the object instead of
/// storing `new`.
pub fn should_delete_during_update(new: &ObjectMeta, old: &ObjectMeta) -> bool {
    new.finalizers.as_ref().is_none_or(Vec::is_empty)
        && old.deletion_timestamp.is_some()
        && old.deletion_grace_period_seconds.is_none_or(|s| s == 0)
}
