//! Copies of events that another store holds (what `herald serve --mirror-kubeconfig`
//! writes): an upsert by uid that keeps the source's identity.
//!
//! A copy keeps what the source gave the event: namespace, name, `uid`,
//! `creationTimestamp`, `count`, `series`, timestamps and annotations. Only
//! `resourceVersion` is this store's, and every write gives the event the local TTL again
//! (so a copy outlives its source by that TTL). Which of two states of the same event is
//! newer is said by the source's resourceVersion, which the caller puts into an annotation
//! it names (the `version_annotation` of [`EventRegistry::upsert_copy`]); [`decide`] is the
//! whole rule:
//!
//! | stored at the same namespace/name | the copy becomes |
//! |---|---|
//! | nothing | [`CopyOutcome::Created`] |
//! | another `uid` (the name was reused at the source) | [`CopyOutcome::Replaced`]: deleted, then created (watchers see `DELETED`, `ADDED`) |
//! | the same `uid`, an older source version | [`CopyOutcome::Updated`] |
//! | the same `uid`, the same or a newer source version | [`CopyOutcome::Unchanged`]: nothing is written |
//!
//! Source versions are compared as numbers when both are decimal (kube-apiserver's and
//! herald's are: they are etcd's or the store's revisions), else only for equality, so a
//! replay of older states after a restart never rolls a copy back.
//!
//! Copies are not shown to [admission](super::admission): they were admitted at their
//! source, and a rate limit here would only make the copy incomplete. The store's
//! `max_events` bound applies to the creates (429).

use herald_core::event::names::ensure_namespace;
use herald_core::event::validate::validate_create;
use herald_core::event::{ApiGroup, CoreEvent};
use herald_core::status::{ApiError, Reason};

use super::errors::storage_error;
use super::keys::{self, decode};
use super::write::{check_room, check_segment};
use super::{EventRegistry, MAX_RETRIES};
use crate::storage::{KeyValue, StorageError};

/// What [`EventRegistry::upsert_copy`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CopyOutcome {
    /// No event had the name: the copy was created.
    Created,
    /// The stored event (same uid) was older: the copy replaced its state.
    Updated,
    /// The stored event had another uid: it was deleted and the copy created.
    Replaced,
    /// The stored event already had this state or a newer one: nothing was written.
    Unchanged,
}

impl CopyOutcome {
    /// The outcome as a lower-case word (`created`, `updated`, `replaced`, `unchanged`),
    /// for metric labels and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            CopyOutcome::Created => "created",
            CopyOutcome::Updated => "updated",
            CopyOutcome::Replaced => "replaced",
            CopyOutcome::Unchanged => "unchanged",
        }
    }
}

/// What a copy does to the event stored at its name, `stored` (see the module docs).
/// `version_annotation` names the annotation holding the source's resourceVersion.
pub fn decide(
    stored: Option<&CoreEvent>,
    incoming: &CoreEvent,
    version_annotation: &str,
) -> CopyOutcome {
    let Some(stored) = stored else {
        return CopyOutcome::Created;
    };
    if stored.metadata.uid != incoming.metadata.uid {
        return CopyOutcome::Replaced;
    }
    let version = |e: &CoreEvent| {
        e.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(version_annotation))
            .cloned()
    };
    match (version(incoming), version(stored)) {
        (Some(new), Some(old)) => match (new.parse::<u64>(), old.parse::<u64>()) {
            (Ok(n), Ok(o)) if n <= o => CopyOutcome::Unchanged,
            (Ok(_), Ok(_)) => CopyOutcome::Updated,
            _ if new == old => CopyOutcome::Unchanged,
            _ => CopyOutcome::Updated,
        },
        // Without a version to compare, the write decides: identical bytes are not
        // rewritten.
        _ => CopyOutcome::Updated,
    }
}

impl EventRegistry {
    /// Stores `event`, a copy of an event another store holds, under its own namespace and
    /// name with its own uid and creationTimestamp, as [`decide`] says (see [`copy`](self)).
    ///
    /// `event` must have a namespace, a name and a uid (else 400) and be a valid core/v1
    /// event (else 422); a create at the store's `max_events` bound is a 429. A write that
    /// keeps losing races with other writers (more than [`MAX_RETRIES`] times) is a 409.
    /// Answers once the write is durable.
    pub async fn upsert_copy(
        &self,
        mut event: CoreEvent,
        version_annotation: &str,
    ) -> Result<CopyOutcome, ApiError> {
        let namespace = event.metadata.namespace.clone().unwrap_or_default();
        let name = event.metadata.name.clone().unwrap_or_default();
        check_segment("namespace", &namespace)?;
        check_segment("name", &name)?;
        if event.metadata.uid.as_deref().is_none_or(str::is_empty) {
            return Err(ApiError::bad_request(format!(
                "the copy of event {namespace}/{name} has no uid"
            )));
        }
        ensure_namespace(&mut event.metadata, &namespace)?;
        event.metadata.resource_version = None;
        event.metadata.self_link = None;
        event.metadata.generate_name = None;
        // A copy is not being deleted here, whatever its source was doing.
        event.metadata.deletion_timestamp = None;
        event.metadata.deletion_grace_period_seconds = None;
        validate_create(&event, ApiGroup::Core)?;
        let r = ApiGroup::Core.resource();
        let key = keys::key(&namespace, &name);
        for _ in 0..MAX_RETRIES {
            let cur = self
                .backend
                .get(&key)
                .await
                .map_err(|e| storage_error(e, r, &name))?;
            let old = cur.as_ref().map(decode).transpose()?;
            let outcome = decide(old.as_ref(), &event, version_annotation);
            let written = match (outcome, &cur) {
                (CopyOutcome::Unchanged, _) => return Ok(outcome),
                (CopyOutcome::Created, _) => self.create_copy(&key, &event, &name).await?,
                (CopyOutcome::Updated, Some(kv)) => self.update_copy(kv, &event, &name).await?,
                (CopyOutcome::Replaced, Some(kv)) => {
                    match self.backend.delete(&key, Some(kv.mod_revision)).await {
                        Ok(_) | Err(StorageError::NotFound { .. }) => {
                            self.create_copy(&key, &event, &name).await?
                        }
                        Err(StorageError::Conflict { .. }) => false,
                        Err(e) => return Err(storage_error(e, r, &name)),
                    }
                }
                // `decide` answers Updated and Replaced only for a stored event.
                (CopyOutcome::Updated | CopyOutcome::Replaced, None) => false,
            };
            if written {
                return Ok(outcome);
            }
        }
        Err(ApiError::conflict(r, &name))
    }

    /// Creates the copy at `key`; `Ok(false)` when another write took the name first.
    async fn create_copy(
        &self,
        key: &str,
        event: &CoreEvent,
        name: &str,
    ) -> Result<bool, ApiError> {
        let r = ApiGroup::Core.resource();
        match check_room(self, r, key, name).await {
            Ok(()) => {}
            Err(err) if err.reason == Reason::AlreadyExists => return Ok(false),
            Err(err) => return Err(err),
        }
        let bytes = herald_wire::stored::encode(event);
        let index = super::index::values(event);
        match self
            .backend
            .create_indexed(key, bytes, index, self.opts.event_ttl)
            .await
        {
            Ok(_) => Ok(true),
            Err(StorageError::AlreadyExists { .. }) => Ok(false),
            Err(e) => Err(storage_error(e, r, name)),
        }
    }

    /// Writes the copy over `kv` if it is still the stored state; `Ok(false)` when another
    /// write came first. Identical bytes are not rewritten.
    async fn update_copy(
        &self,
        kv: &KeyValue,
        event: &CoreEvent,
        name: &str,
    ) -> Result<bool, ApiError> {
        let bytes = herald_wire::stored::encode(event);
        if bytes == kv.value {
            return Ok(true);
        }
        match self
            .backend
            .update_indexed(
                &kv.key,
                bytes,
                Some(kv.mod_revision),
                super::index::values(event),
                self.opts.event_ttl,
            )
            .await
        {
            Ok(_) => Ok(true),
            Err(StorageError::Conflict { .. } | StorageError::NotFound { .. }) => Ok(false),
            Err(e) => Err(storage_error(e, ApiGroup::Core.resource(), name)),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use herald_core::clock::FakeClock;
    use k8s_openapi::api::core::v1::ObjectReference;

    use super::*;
    use crate::registry::{ListParams, RegistryOptions};
    use crate::storage::{HistoryOptions, MemoryBackend};

    const V: &str = "example.com/source-version";

    fn ev(name: &str, uid: &str, version: &str, count: i32) -> CoreEvent {
        let mut e = CoreEvent::default();
        e.metadata.namespace = Some("ns".into());
        e.metadata.name = Some(name.into());
        e.metadata.uid = Some(uid.into());
        e.metadata.creation_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            "2020-01-02T03:04:05Z".parse().unwrap(),
        ));
        e.metadata.annotations = Some(BTreeMap::from([(V.to_string(), version.to_string())]));
        e.involved_object = ObjectReference {
            kind: Some("Pod".into()),
            name: Some("web".into()),
            namespace: Some("ns".into()),
            ..ObjectReference::default()
        };
        e.reason = Some("BackOff".into());
        e.message = Some("back-off".into());
        e.count = Some(count);
        e
    }

    fn registry() -> EventRegistry {
        let clock = Arc::new(FakeClock::new("2026-01-01T00:00:00Z".parse().unwrap()));
        let backend = Arc::new(MemoryBackend::new(clock.clone(), HistoryOptions::default()));
        EventRegistry::new(backend, clock, RegistryOptions::default())
    }

    async fn stored(reg: &EventRegistry) -> Vec<CoreEvent> {
        reg.list(ApiGroup::Core, None, &ListParams::default())
            .await
            .unwrap()
            .decode()
    }

    #[test]
    fn the_rule() {
        let a = ev("a", "u1", "10", 1);
        assert_eq!(decide(None, &a, V), CopyOutcome::Created);
        assert_eq!(decide(Some(&a), &a, V), CopyOutcome::Unchanged);
        assert_eq!(
            decide(Some(&a), &ev("a", "u1", "11", 2), V),
            CopyOutcome::Updated
        );
        // An older state (a replay after a restart) never rolls the copy back.
        assert_eq!(
            decide(Some(&ev("a", "u1", "11", 2)), &a, V),
            CopyOutcome::Unchanged
        );
        assert_eq!(
            decide(Some(&a), &ev("a", "u2", "5", 1), V),
            CopyOutcome::Replaced
        );
        // Opaque versions: only equality says anything.
        assert_eq!(
            decide(Some(&ev("a", "u1", "x", 1)), &ev("a", "u1", "x", 1), V),
            CopyOutcome::Unchanged
        );
        assert_eq!(
            decide(Some(&ev("a", "u1", "y", 1)), &ev("a", "u1", "x", 2), V),
            CopyOutcome::Updated
        );
    }

    #[tokio::test]
    async fn copies_keep_the_source_identity_and_counts() {
        let reg = registry();
        let out = reg.upsert_copy(ev("a", "u1", "10", 1), V).await.unwrap();
        assert_eq!(out, CopyOutcome::Created);
        let out = reg.upsert_copy(ev("a", "u1", "12", 7), V).await.unwrap();
        assert_eq!(out, CopyOutcome::Updated);
        let rv = stored(&reg).await[0].metadata.resource_version.clone();
        // The same state again, and an older one: nothing is written.
        for older in [ev("a", "u1", "12", 7), ev("a", "u1", "11", 3)] {
            assert_eq!(
                reg.upsert_copy(older, V).await.unwrap(),
                CopyOutcome::Unchanged
            );
        }
        let all = stored(&reg).await;
        assert_eq!(all.len(), 1);
        let e = &all[0];
        assert_eq!(
            e.metadata.resource_version, rv,
            "unchanged copies are not rewritten"
        );
        assert_eq!(e.metadata.uid.as_deref(), Some("u1"));
        assert_eq!(e.count, Some(7));
        assert_eq!(
            e.metadata
                .creation_timestamp
                .as_ref()
                .unwrap()
                .0
                .to_string(),
            "2020-01-02T03:04:05Z"
        );
    }

    #[tokio::test]
    async fn another_uid_at_the_name_replaces_the_copy() {
        let reg = registry();
        reg.upsert_copy(ev("a", "u1", "10", 4), V).await.unwrap();
        reg.upsert_copy(ev("b", "u9", "10", 1), V).await.unwrap();
        let out = reg.upsert_copy(ev("a", "u2", "20", 1), V).await.unwrap();
        assert_eq!(out, CopyOutcome::Replaced);
        let all = stored(&reg).await;
        let uids: Vec<_> = all
            .iter()
            .map(|e| {
                (
                    e.metadata.name.clone().unwrap(),
                    e.metadata.uid.clone().unwrap(),
                    e.count,
                )
            })
            .collect();
        assert_eq!(
            uids,
            vec![
                ("a".to_string(), "u2".to_string(), Some(1)),
                ("b".to_string(), "u9".to_string(), Some(1))
            ]
        );
    }

    #[tokio::test]
    async fn a_copy_without_uid_or_valid_shape_is_refused() {
        let reg = registry();
        let mut no_uid = ev("a", "", "1", 1);
        no_uid.metadata.uid = None;
        let err = reg.upsert_copy(no_uid, V).await.unwrap_err();
        assert_eq!(err.code, 400, "{err:?}");
        let mut bad = ev("a", "u1", "1", 1);
        bad.involved_object.namespace = Some("other".into());
        let err = reg.upsert_copy(bad, V).await.unwrap_err();
        assert_eq!(err.code, 422, "{err:?}");
        assert!(stored(&reg).await.is_empty());
    }
}
