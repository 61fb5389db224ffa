//! create, update, patch, delete and deletecollection.

use std::sync::atomic::Ordering;

use herald_core::event::meta::NameRule;
use herald_core::event::names::{
    check_url_name, mark_deleting, prepare_for_create, prepare_for_update,
    should_delete_during_update,
};
use herald_core::event::validate::{validate_create, validate_update};
use herald_core::event::{ApiGroup, CoreEvent};
use herald_core::status::{ApiError, Reason, Resource};
use herald_wire::json::event_json;
use serde_json::Value;

use super::admission::Operation;
use super::errors::{storage_error, store_full};
use super::fieldmanager;
use super::keys::{self, decode, parse_rv};
use super::options::{
    DeleteParams, ListParams, dry_run_causes, field_validation_causes, options_invalid,
};
use super::patch::{self, PatchKind};
use super::typed_patch;
use super::{
    Committed, DeletedEvents, Deletion, EventRegistry, MAX_RETRIES, Stored, WriteOptions, Written,
};
use crate::storage::{KeyValue, StorageError};
use herald_wire::body::decode_body;

fn rv_of(e: &CoreEvent) -> Option<&str> {
    e.metadata
        .resource_version
        .as_deref()
        .filter(|s| !s.is_empty())
}

/// The resourceVersion a write body makes a precondition of. kube-apiserver reads it as an
/// integer where `0` is unset, so `"0"` (which some clients send for "any") makes an
/// unconditional write, as an empty one does; a non-numeric one is a 400.
fn precondition_rv(rv: Option<&str>) -> Result<Option<u64>, ApiError> {
    Ok(parse_rv(rv)?.filter(|&rv| rv != 0))
}

/// A URL name or namespace that cannot be a key segment is a 400 (it can never name an
/// object; letting `/` through would address other keys).
pub fn check_segment(what: &str, s: &str) -> Result<(), ApiError> {
    let errs = NameRule::PathSegment.errors(s, false);
    if s.is_empty() || !errs.is_empty() {
        return Err(ApiError::bad_request(format!(
            "invalid {what} {s:?}: [{}]",
            if errs.is_empty() {
                "may not be empty".to_string()
            } else {
                errs.join(", ")
            }
        )));
    }
    Ok(())
}

pub(super) async fn create(
    reg: &EventRegistry,
    group: ApiGroup,
    namespace: &str,
    event: CoreEvent,
    opts: &WriteOptions,
) -> Result<Committed, ApiError> {
    check_options(opts, None)?;
    insert(reg, group, namespace, event, opts, Some(&opts.manager())).await
}

/// kube's `ValidateCreateOptions`, `ValidateUpdateOptions` and `ValidatePatchOptions`: one
/// 422 on `CreateOptions` (`patch` `None`; the options of an update are checked the same
/// way, see [`check_update_options`]) or `PatchOptions` with every cause, in kube's order:
/// for a patch, `force` on a non-apply patch or the missing `fieldManager` of an apply; then
/// the `fieldManager` rules (length, printable), unsupported `dryRun` values and an
/// unsupported `fieldValidation`.
///
/// The registry's writes check their options; the HTTP layer checks them too, before it
/// decodes the body, as kube-apiserver does.
pub fn check_options(opts: &WriteOptions, patch: Option<PatchKind>) -> Result<(), ApiError> {
    options_check(
        if patch.is_some() {
            "PatchOptions"
        } else {
            "CreateOptions"
        },
        opts,
        patch,
    )
}

/// [`check_options`] for an update (`UpdateOptions`).
pub fn check_update_options(opts: &WriteOptions) -> Result<(), ApiError> {
    options_check("UpdateOptions", opts, None)
}

fn options_check(
    options: &'static str,
    opts: &WriteOptions,
    patch: Option<PatchKind>,
) -> Result<(), ApiError> {
    let mut causes = Vec::new();
    match patch {
        Some(PatchKind::Apply { .. })
            if opts.field_manager.as_deref().is_none_or(str::is_empty) =>
        {
            causes.push(herald_core::event::causes::required(
                "fieldManager",
                "is required for apply patch",
            ));
        }
        Some(PatchKind::Apply { .. }) => {}
        Some(_) if opts.force.is_some() => causes.push(herald_core::event::causes::forbidden(
            "force",
            "may not be specified for non-apply patch",
        )),
        _ => {}
    }
    if let Some(m) = opts.field_manager.as_deref() {
        causes.extend(fieldmanager::field_manager_causes(m));
    }
    causes.extend(dry_run_causes(&opts.dry_run));
    causes.extend(field_validation_causes(opts.field_validation.as_deref()));
    if causes.is_empty() {
        Ok(())
    } else {
        Err(options_invalid(options, causes))
    }
}

/// Stores a new event; with `manager`, the write is recorded in `managedFields` as that
/// manager's `Update` (an apply that creates has recorded itself already).
async fn insert(
    reg: &EventRegistry,
    group: ApiGroup,
    namespace: &str,
    mut event: CoreEvent,
    opts: &WriteOptions,
    manager: Option<&str>,
) -> Result<Committed, ApiError> {
    // As kube-apiserver's storage: only a number other than 0 is refused (it reads the
    // version as an integer, and one it cannot read as unset); the store assigns its own. Its
    // dry-run storage does not look.
    if !opts.is_dry_run()
        && rv_of(&event)
            .and_then(|rv| rv.parse::<u64>().ok())
            .is_some_and(|rv| rv != 0)
    {
        return Err(ApiError::internal(
            "resourceVersion should not be set on objects to be created",
        ));
    }
    let r = group.resource();
    let generated = event.metadata.name.as_deref().is_none_or(str::is_empty);
    for _ in 0..MAX_RETRIES {
        // Only a generated name is retried (with a new one): otherwise the one attempt takes
        // the event instead of copying it.
        let mut e = if generated {
            event.clone()
        } else {
            std::mem::take(&mut event)
        };
        // A v4 UUID from the thread-local generator (`Uuid::new_v4` asks the kernel for
        // randomness, a syscall, on every create), encoded in a stack buffer (`to_string`
        // goes through `fmt`, at eight times the cost).
        let uid = uuid::Builder::from_random_bytes(rand::random())
            .into_uuid()
            .hyphenated()
            .encode_lower(&mut uuid::Uuid::encode_buffer())
            .to_owned();
        let now = reg.clock.now();
        prepare_for_create(&mut e.metadata, namespace, &uid, now, &mut rand::rng())?;
        if let Some(m) = manager {
            fieldmanager::track_update(group, None, &mut e, m, now);
        }
        validate_create(&e, group)?;
        reg.admit(Operation::Create, group, namespace, &e, opts)?;
        let name = e.metadata.name.clone().unwrap_or_default();
        let ns = e.metadata.namespace.clone().unwrap_or_default();
        let key = keys::key(&ns, &name);
        if opts.is_dry_run() {
            // As kube-apiserver's dry-run storage: a taken name is still a 409; nothing is
            // written, so the store's bound does not apply.
            let taken = reg
                .backend
                .get(&key)
                .await
                .map_err(|err| storage_error(err, r, &name))?
                .is_some();
            match taken {
                true if generated => continue,
                true => return Err(ApiError::already_exists(r, &name)),
                false => {
                    return Ok(Committed {
                        event: e,
                        stored: None,
                    });
                }
            }
        }
        match check_room(reg, r, &key, &name).await {
            Ok(()) => {}
            Err(err) if generated && err.reason == Reason::AlreadyExists => continue,
            Err(err) => return Err(err),
        }
        let index = super::index::values(&e);
        let (bytes, mut e) = herald_wire::stored::encode_owned(e);
        match reg
            .backend
            .create_indexed(&key, bytes.clone(), index, reg.opts.event_ttl)
            .await
        {
            Ok(kv) => {
                e.metadata.resource_version = Some(kv.mod_revision.to_string());
                return Ok(Committed {
                    event: e,
                    stored: Some(Stored {
                        bytes,
                        revision: kv.mod_revision,
                    }),
                });
            }
            Err(StorageError::AlreadyExists { .. }) if generated => continue,
            Err(err) => return Err(storage_error(err, r, &name)),
        }
    }
    Err(ApiError::new(
        500,
        Reason::InternalError,
        "Internal error occurred: could not generate a unique name",
    ))
}

/// A 429 when the store holds `max_events` already (see
/// [`RegistryOptions::max_events`](super::RegistryOptions::max_events)), or a 409 when it does
/// and `key` is taken (no wait would make that create succeed). Logs a warning when creates
/// start being refused, and that there is room again only once the store is below 90 % of
/// the bound, so a storm that refills each second's expiries does not log every second.
pub(super) async fn check_room(
    reg: &EventRegistry,
    r: Resource,
    key: &str,
    name: &str,
) -> Result<(), ApiError> {
    let Some(max) = reg.opts.max_events else {
        return Ok(());
    };
    let Some(live) = reg.backend.live_keys() else {
        return Ok(());
    };
    if live < max {
        if live <= max - max / 10
            && reg
                .full
                .compare_exchange(true, false, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            tracing::info!(live, max_events = max, "the event store has room again");
        }
        return Ok(());
    }
    let taken = reg
        .backend
        .get(key)
        .await
        .map_err(|e| storage_error(e, r, name))?;
    if taken.is_some() {
        return Err(ApiError::already_exists(r, name));
    }
    if reg
        .full
        .compare_exchange(false, true, Ordering::Relaxed, Ordering::Relaxed)
        .is_ok()
    {
        tracing::warn!(
            live,
            max_events = max,
            "the event store is full: creates are refused (429) until events expire or are deleted"
        );
    }
    Err(store_full(r, name, max, reg.opts.event_ttl))
}

pub(super) async fn update(
    reg: &EventRegistry,
    group: ApiGroup,
    namespace: &str,
    name: &str,
    event: CoreEvent,
    opts: &WriteOptions,
) -> Result<Written, ApiError> {
    check_segment("name", name)?;
    check_update_options(opts)?;
    check_url_name(&event.metadata, namespace, name)?;
    let client_rv = precondition_rv(rv_of(&event))?;
    let r = group.resource();
    let key = keys::key(namespace, name);
    for _ in 0..MAX_RETRIES {
        let cur = reg
            .backend
            .get(&key)
            .await
            .map_err(|e| storage_error(e, r, name))?;
        let Some(kv) = cur else {
            let mut e = event.clone();
            e.metadata.resource_version = None;
            match create(reg, group, namespace, e, opts).await {
                Ok(c) => {
                    return Ok(Written {
                        event: c.event,
                        stored: c.stored,
                        created: true,
                        warnings: Vec::new(),
                    });
                }
                Err(err) if err.code == 409 && err.reason == Reason::AlreadyExists => continue,
                Err(err) => return Err(err),
            }
        };
        if client_rv.is_some_and(|rv| rv != kv.mod_revision) {
            return Err(ApiError::conflict(r, name));
        }
        let old = decode(&kv)?;
        let mut e = event.clone();
        prepare_for_update(&mut e.metadata, &old.metadata, namespace)?;
        fieldmanager::track_update(group, Some(&old), &mut e, &opts.manager(), reg.clock.now());
        validate_update(&e, &old, group)?;
        reg.admit(Operation::Update, group, namespace, &e, opts)?;
        match commit_update(reg, r, name, &old, e, &kv, opts.is_dry_run()).await? {
            Some(c) => {
                return Ok(Written {
                    event: c.event,
                    stored: c.stored,
                    created: false,
                    warnings: Vec::new(),
                });
            }
            None if client_rv.is_some() => return Err(ApiError::conflict(r, name)),
            None => continue,
        }
    }
    Err(ApiError::conflict(r, name))
}

/// Writes `new` over the stored `old` (read as `kv`). `Ok(None)` when another write won the
/// race (the caller retries or answers 409). Unchanged bytes are not written (no new
/// resourceVersion, no TTL refresh), as kube-apiserver does.
async fn store_update(
    reg: &EventRegistry,
    r: Resource,
    name: &str,
    old: &CoreEvent,
    new: CoreEvent,
    kv: &KeyValue,
    dry_run: bool,
) -> Result<Option<Committed>, ApiError> {
    let (bytes, mut new) = herald_wire::stored::encode_owned(new);
    if bytes == kv.value {
        return Ok(Some(Committed {
            event: old.clone(),
            stored: Some(Stored {
                bytes: kv.value.clone(),
                revision: kv.mod_revision,
            }),
        }));
    }
    if dry_run {
        new.metadata.resource_version = old.metadata.resource_version.clone();
        return Ok(Some(Committed {
            event: new,
            stored: None,
        }));
    }
    let ns = new.metadata.namespace.clone().unwrap_or_default();
    match reg
        .backend
        .update_indexed(
            &keys::key(&ns, name),
            bytes.clone(),
            Some(kv.mod_revision),
            super::index::values(&new),
            reg.opts.event_ttl,
        )
        .await
    {
        Ok(stored) => {
            new.metadata.resource_version = Some(stored.mod_revision.to_string());
            Ok(Some(Committed {
                event: new,
                stored: Some(Stored {
                    bytes,
                    revision: stored.mod_revision,
                }),
            }))
        }
        Err(StorageError::Conflict { .. } | StorageError::NotFound { .. }) => Ok(None),
        Err(e) => Err(storage_error(e, r, name)),
    }
}

/// Ends a validated update of the stored `old` (read as `kv`) to `new`: stores `new`
/// ([`store_update`]), unless the update took the last finalizer off an event being deleted
/// (kube's `shouldDeleteDuringUpdate`). Then the event is deleted instead, and the answer is
/// still `new`, the object a PUT or PATCH expects back (kube's `deleteWithoutFinalizers`),
/// with no stored bytes. `Ok(None)` when another write won the race.
async fn commit_update(
    reg: &EventRegistry,
    r: Resource,
    name: &str,
    old: &CoreEvent,
    new: CoreEvent,
    kv: &KeyValue,
    dry_run: bool,
) -> Result<Option<Committed>, ApiError> {
    if !should_delete_during_update(&new.metadata, &old.metadata) {
        return store_update(reg, r, name, old, new, kv, dry_run).await;
    }
    let deleted = Committed {
        event: new,
        stored: None,
    };
    if dry_run {
        return Ok(Some(deleted));
    }
    match reg.backend.delete(&kv.key, Some(kv.mod_revision)).await {
        Ok(_) => Ok(Some(deleted)),
        // Deleted by a concurrent update that emptied the finalizers too: same outcome, as
        // kube-apiserver treats it.
        Err(StorageError::NotFound { .. }) => Ok(Some(deleted)),
        Err(StorageError::Conflict { .. }) => Ok(None),
        Err(e) => Err(storage_error(e, r, name)),
    }
}

pub(super) async fn patch(
    reg: &EventRegistry,
    group: ApiGroup,
    namespace: &str,
    name: &str,
    kind: PatchKind,
    body: &[u8],
    opts: &WriteOptions,
) -> Result<Written, ApiError> {
    check_segment("name", name)?;
    let r = group.resource();
    check_options(opts, Some(kind))?;
    let (applier, force) = match kind {
        PatchKind::Apply { force } => (opts.field_manager.as_deref().unwrap_or(""), force),
        _ => ("", false),
    };
    let doc = patch::parse(kind, body)?;
    let key = keys::key(namespace, name);
    let check = |v: &Value| -> Result<Vec<String>, ApiError> {
        match &opts.field_check {
            Some(f) => f(v),
            None => Ok(Vec::new()),
        }
    };
    for _ in 0..MAX_RETRIES {
        let cur = reg
            .backend
            .get(&key)
            .await
            .map_err(|e| storage_error(e, r, name))?;
        let Some(kv) = cur else {
            let patch::PatchDoc::Object(applied) = &doc else {
                return Err(ApiError::not_found(r, name));
            };
            if !matches!(kind, PatchKind::Apply { .. }) {
                return Err(ApiError::not_found(r, name));
            }
            let new = fieldmanager::apply(group, None, applied, applier, force, reg.clock.now())?;
            let warnings = check(&new)?;
            let mut e = decode_body(group, new, None)?;
            if e.metadata.name.as_deref().is_none_or(str::is_empty) {
                e.metadata.name = Some(name.to_string());
            }
            check_url_name(&e.metadata, namespace, name)?;
            e.metadata.resource_version = None;
            match insert(reg, group, namespace, e, opts, None).await {
                Ok(c) => {
                    return Ok(Written {
                        event: c.event,
                        stored: c.stored,
                        created: true,
                        warnings,
                    });
                }
                Err(err) if err.code == 409 && err.reason == Reason::AlreadyExists => continue,
                Err(err) => return Err(err),
            }
        };
        let old = decode(&kv)?;
        let now = reg.clock.now();
        let typed = match &doc {
            patch::PatchDoc::Object(p) => typed_patch::apply(group, kind, p, &old).map(|e| (e, p)),
            patch::PatchDoc::Json(_) => None,
        };
        let (mut e, warnings) = match typed {
            // A recorder's repeat, set on the typed event. The patched object's unknown
            // fields would be the patch's, and a typed patch has none: checking the patch
            // reports what its text repeats. It cannot carry a resourceVersion.
            Some((e, p)) => (e, check(p)?),
            None => {
                let patched = match (&doc, kind) {
                    (patch::PatchDoc::Object(config), PatchKind::Apply { .. }) => {
                        fieldmanager::apply(group, Some(&old), config, applier, force, now)?
                    }
                    _ => {
                        let mut patched = event_json(group, &old);
                        patch::apply(kind, &doc, &mut patched)?;
                        patched
                    }
                };
                // As kube-apiserver's patchers: an object that does not decode is that
                // error, whatever else is wrong with it; then the unknown fields, then the
                // resourceVersion precondition.
                let checked = check(&patched);
                let precondition = precondition_rv(
                    patched
                        .pointer("/metadata/resourceVersion")
                        .and_then(Value::as_str),
                );
                let e = match kind {
                    PatchKind::Apply { .. } => decode_body(group, patched, None)?,
                    _ => herald_wire::body::decode_patched(group, patched, |patched, err| {
                        patch::patched_invalid(kind, &doc, patched, err)
                    })?,
                };
                let warnings = checked?;
                if precondition?.is_some_and(|rv| rv != kv.mod_revision) {
                    return Err(ApiError::conflict(r, name));
                }
                (e, warnings)
            }
        };
        check_url_name(&e.metadata, namespace, name)?;
        prepare_for_update(&mut e.metadata, &old.metadata, namespace)?;
        if !matches!(kind, PatchKind::Apply { .. }) {
            fieldmanager::track_update(group, Some(&old), &mut e, &opts.manager(), now);
        }
        validate_update(&e, &old, group)?;
        reg.admit(Operation::Update, group, namespace, &e, opts)?;
        match commit_update(reg, r, name, &old, e, &kv, opts.is_dry_run()).await? {
            Some(c) => {
                return Ok(Written {
                    event: c.event,
                    stored: c.stored,
                    created: false,
                    warnings,
                });
            }
            // Another write won: patch the new state (a resourceVersion the patch itself
            // carries is checked against it above).
            None => continue,
        }
    }
    Err(ApiError::conflict(r, name))
}

/// The 409 of a delete whose `preconditions` the event fails, as kube-apiserver's
/// `rest.BeforeDelete` words it: about the internal kind `Event` (group `""` in both API
/// groups, both being served by the core internal type), e.g. `Operation cannot be
/// fulfilled on Event "x": the UID in the precondition (a) does not match the UID in record
/// (b). The object might have been deleted and then recreated`.
fn precondition_failed(name: &str, detail: &str) -> ApiError {
    let mut e = ApiError::new(
        409,
        Reason::Conflict,
        format!(
            "Operation cannot be fulfilled on Event {}: {detail}",
            herald_core::labels::go_quote(name)
        ),
    );
    e.name = Some(name.to_string());
    e.group = Some(String::new());
    e.kind = Some("Event".to_string());
    e
}

pub(super) async fn delete(
    reg: &EventRegistry,
    group: ApiGroup,
    namespace: &str,
    name: &str,
    p: &DeleteParams,
) -> Result<Deletion, ApiError> {
    check_segment("name", name)?;
    p.validate()?;
    let r = group.resource();
    let key = keys::key(namespace, name);
    for _ in 0..MAX_RETRIES {
        let Some(kv) = reg
            .backend
            .get(&key)
            .await
            .map_err(|e| storage_error(e, r, name))?
        else {
            return Err(ApiError::not_found(r, name));
        };
        let old = decode(&kv)?;
        if let Some(uid) = p.precondition_uid.as_deref() {
            let have = old.metadata.uid.as_deref().unwrap_or("");
            if uid != have {
                return Err(precondition_failed(
                    name,
                    &format!(
                        "the UID in the precondition ({uid}) does not match the UID in record ({have}). The object might have been deleted and then recreated"
                    ),
                ));
            }
        }
        if let Some(rv) = p.precondition_resource_version.as_deref() {
            let have = kv.mod_revision.to_string();
            if rv != have {
                return Err(precondition_failed(
                    name,
                    &format!(
                        "the ResourceVersion in the precondition ({rv}) does not match the ResourceVersion in record ({have}). The object might have been modified"
                    ),
                ));
            }
        }
        if old
            .metadata
            .finalizers
            .as_ref()
            .is_some_and(|f| !f.is_empty())
        {
            // Finalizers hold the event: it is marked as being deleted, stored like any
            // update, and removed once an update takes the last finalizer off.
            let mut marked = old.clone();
            mark_deleting(&mut marked.metadata, reg.clock.now());
            match store_update(reg, r, name, &old, marked, &kv, p.is_dry_run()).await? {
                Some(c) => return Ok(Deletion::Marked(c.event)),
                None => continue,
            }
        }
        if p.is_dry_run() {
            return Ok(Deletion::Deleted(old));
        }
        match reg.backend.delete(&key, Some(kv.mod_revision)).await {
            Ok(d) => {
                let mut old = old;
                old.metadata.resource_version = Some(d.revision.to_string());
                return Ok(Deletion::Deleted(old));
            }
            Err(StorageError::NotFound { .. }) => return Err(ApiError::not_found(r, name)),
            Err(StorageError::Conflict { .. }) => continue,
            Err(e) => return Err(storage_error(e, r, name)),
        }
    }
    Err(ApiError::conflict(r, name))
}

pub(super) async fn delete_collection(
    reg: &EventRegistry,
    group: ApiGroup,
    namespace: Option<&str>,
    list: &ListParams,
    p: &DeleteParams,
) -> Result<DeletedEvents, ApiError> {
    p.validate()?;
    let mut lp = list.clone();
    lp.watch = false;
    lp.limit = None;
    lp.continue_ = None;
    let page = reg.list(group, namespace, &lp).await?;
    let mut out = Vec::with_capacity(page.items.len());
    for ev in page.decode() {
        let ns = ev.metadata.namespace.clone().unwrap_or_default();
        let name = ev.metadata.name.clone().unwrap_or_default();
        // Every item is deleted with the request's options, preconditions included, as
        // kube-apiserver does: a precondition that one item fails stops the collection
        // delete with that item's 409 rather than being ignored.
        match delete(reg, group, &ns, &name, p).await {
            Ok(d) => out.push(d.into_event()),
            // Removed by another request since the list: kube still answers with every item
            // it listed.
            Err(e) if e.code == 404 => out.push(ev),
            Err(e) => return Err(e),
        }
    }
    Ok(DeletedEvents {
        items: out,
        resource_version: page.resource_version,
    })
}
