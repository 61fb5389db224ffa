//! The events registry: kube-apiserver's generic store semantics for events, for both API
//! groups, over any [`Backend`].
//!
//! - **One storage shape.** Every event is stored once as core/v1 JSON without
//!   `resourceVersion` ([`herald_wire::stored`]) under `/events/<namespace>/<name>`
//!   ([`keys`]); requests on `events.k8s.io/v1` are converted on the way in (by the caller,
//!   see [`herald_wire::body::decode_body`]) and rendered back by the HTTP layer. The
//!   `resourceVersion` is the key's mod revision, a decimal string.
//! - **One form of every answer: the stored bytes.** [`EventRegistry::get`],
//!   [`EventRegistry::list`] and [`EventRegistry::watch`] answer [`Stored`] events (bytes and
//!   revision), and writes answer the stored bytes beside the typed event, so the HTTP layer
//!   writes responses from the bytes ([`herald_wire`]'s transcoders). Decoding is a helper
//!   beside each: [`Stored::decode`], [`EventList::decode`], [`watch::decoded`].
//! - **Validation** per request group (`herald_core::event::validate`), generateName,
//!   uid/creationTimestamp, the namespace from the URL.
//! - **TTL**: every write (create, update, patch) gives the key `event_ttl` again, so an event
//!   disappears `event_ttl` after its last write; watchers see `DELETED`. Finalizers do not
//!   hold an expired event back (kube-apiserver's etcd leases ignore them too).
//! - **Finalizers**: a DELETE of an event with finalizers only marks it (`deletionTimestamp`
//!   from the injected clock, `deletionGracePeriodSeconds: 0`); the update that removes the
//!   last finalizer deletes it. No finalizer can be added while it is being deleted.
//! - **Lists** page with opaque, upstream-shaped continue tokens; every page of a list is read
//!   at the snapshot revision of the first one. `resourceVersion`/`resourceVersionMatch`
//!   follow kube's rules, including 410 `Expired` for compacted revisions.
//! - **Watches** replay from a revision or start with the current state as `ADDED`, apply the
//!   selectors the way kube-apiserver's etcd watcher does (an object that stops matching is
//!   `DELETED`, one that starts matching is `ADDED`), send the initial-events-end and periodic
//!   bookmarks when allowed, and end with an `ERROR` 410 when the history is gone. A watch
//!   from a revision the store has not reached waits up to 3 s for it, then ends with an
//!   `ERROR` 504 "Too large resource version" (kube's watch cache), so a client holding a
//!   resourceVersion from elsewhere relists instead of silently skipping changes.
//! - **Writes race safely**: unconditional updates and patches retry on a concurrent write
//!   (at most [`MAX_RETRIES`] times, then 409); a client resourceVersion is a precondition.
//! - **Admission**: with a hook ([`EventRegistry::with_admission`]), every create, update
//!   and patch is shown to it once the event is complete and valid (a patch: as patched) and
//!   before anything is stored; its error is the answer ([`admission`]). The hook's
//!   implementations (EventRateLimit) live in the HTTP layer, which the registry never
//!   imports.
//!
//! ```
//! use std::sync::Arc;
//! use herald_core::clock::SystemClock;
//! use herald_core::event::{ApiGroup, CoreEvent};
//! use herald_server::registry::{EventRegistry, ListParams, RegistryOptions, WriteOptions};
//! use herald_server::storage::{HistoryOptions, MemoryBackend};
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let clock = Arc::new(SystemClock);
//! let backend = Arc::new(MemoryBackend::new(clock.clone(), HistoryOptions::default()));
//! let reg = EventRegistry::new(backend, clock, RegistryOptions::default());
//! let mut ev = CoreEvent::default();
//! ev.metadata.generate_name = Some("web-".into());
//! ev.reason = Some("Started".into());
//! let created = reg.create(ApiGroup::Core, "default", ev, &WriteOptions::default()).await.unwrap();
//! assert!(created.event.metadata.name.as_deref().unwrap().starts_with("web-"));
//! // Lists (and gets and watches) answer the stored bytes; decoding is the caller's choice.
//! let list = reg.list(ApiGroup::Core, Some("default"), &ListParams::default()).await.unwrap();
//! assert_eq!(list.items.len(), 1);
//! assert_eq!(list.resource_version, created.event.metadata.resource_version.unwrap());
//! assert_eq!(list.decode()[0].reason.as_deref(), Some("Started"));
//! # });
//! ```

// Registry methods answer `Result<_, ApiError>` (a `Status` body); errors are the cold
// path, so the size of `ApiError` is not worth a box.
#![allow(clippy::result_large_err)]

pub mod admission;
pub mod continue_token;
pub mod copy;
pub mod errors;
pub mod fieldmanager;
pub mod index;
pub mod keys;
pub mod options;
pub mod patch;
pub mod typed_patch;
pub mod watch;
pub mod write;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use herald_core::clock::Clock;
use herald_core::event::{ApiGroup, CoreEvent};
use herald_core::status::ApiError;
use serde_json::Value;

use crate::storage::{Backend, KeyValue, ListOptions, ListOrder, Revision, StorageError};

pub use herald_wire::stored::Stored;
pub use watch::{Change, ChangeKind, DecodedItem, EventWatch, WatchItem};

pub use copy::CopyOutcome;
pub use options::{DeleteParams, Filter, ListParams};
pub use patch::PatchKind;

use errors::{CONTINUE_TOO_OLD, LIST_TOO_OLD, too_large_rv};
use keys::parse_rv;

/// How many times a write that lost a race (or a generated name that collided) is retried
/// before the request fails with 409.
pub const MAX_RETRIES: usize = 16;

/// Registry settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegistryOptions {
    /// The TTL every write gives an event (`--event-ttl`, default 1 h); `None` keeps events
    /// forever.
    pub event_ttl: Option<Duration>,
    /// How often a watch that allows bookmarks gets a `BOOKMARK` (default 60 s); one more
    /// goes out 2 s before the watch's timeout, so the client resumes from a fresh revision.
    pub bookmark_interval: Duration,
    /// The watch duration when the client sets no `timeoutSeconds`: a random value in
    /// `[d, 2d)` (default 1800 s, kube's `--min-request-timeout`).
    pub default_watch_timeout: Duration,
    /// The most events the store may hold (`--max-events`, default [`DEFAULT_MAX_EVENTS`]);
    /// `None` = no limit. It bounds what a storm that outpaces the TTL can fill: the disk of a
    /// store that keeps its state on disk (SQLite), the memory of one that keeps it in memory
    /// (the memory backend; see [`DEFAULT_MAX_EVENTS_IN_MEMORY`]). At the bound a create is a
    /// 429 `TooManyRequests` (updates, patches and deletes still work). It counts events, not
    /// bytes. Concurrent creates may overshoot it by as many as are in flight at once (64
    /// `herald bench` clients overshot a million by 59). Applies only to backends that count
    /// their keys ([`Backend::live_keys`]); the server warns at start when its backend does
    /// not.
    pub max_events: Option<usize>,
    /// How many matching events an unpaged list reads at a time (default
    /// [`DEFAULT_LIST_PAGE_ITEMS`]; see [`EventRegistry::list_streamed`]): what such a list
    /// holds in memory while it is sent, about 1.6 KB per event. A server on etcd reads at
    /// least [`EtcdOptions::range_keys`](crate::storage::EtcdOptions::range_keys) at a time
    /// (etcd 3.4 counts the rest of the range on every read, so smaller pages cost it more).
    pub list_page_items: usize,
}

/// The default of [`RegistryOptions::list_page_items`]: about 6.5 MB of events at a time,
/// few enough reads that a long list costs no more than one query.
pub const DEFAULT_LIST_PAGE_ITEMS: usize = 4096;

/// The default of [`RegistryOptions::max_events`], sized for disks: 10 million events of a
/// typical 1 KB take about 16 GB of SQLite file with their indexes and history (measured with
/// `herald bench`, see `crates/herald-server/benches/README.md`), a week of a busy cluster's
/// events, while the server's memory does not depend on it.
pub const DEFAULT_MAX_EVENTS: usize = 10_000_000;

/// The `--max-events` default of a store that holds every event in memory (`--store
/// memory`): about 1.4 GB for events of a typical 1 KB.
pub const DEFAULT_MAX_EVENTS_IN_MEMORY: usize = 1_000_000;

impl Default for RegistryOptions {
    fn default() -> Self {
        RegistryOptions {
            event_ttl: Some(Duration::from_secs(3600)),
            bookmark_interval: Duration::from_secs(60),
            default_watch_timeout: Duration::from_secs(1800),
            max_events: Some(DEFAULT_MAX_EVENTS),
            list_page_items: DEFAULT_LIST_PAGE_ITEMS,
        }
    }
}

/// Options common to create, update and patch.
#[derive(Default, Clone)]
pub struct WriteOptions {
    /// Every `dryRun` value the request sent. `All` validates and returns the would-be
    /// object without storing it ([`WriteOptions::is_dry_run`]); any other value is refused
    /// by kube's options validation ([`options::dry_run_causes`]).
    pub dry_run: Vec<String>,
    /// `fieldValidation` as the request sent it, for kube's options validation
    /// ([`options::field_validation_causes`]); the HTTP layer applies the directive
    /// ([`field_check`](Self::field_check)).
    pub field_validation: Option<String>,
    /// `force` as the request sent it: only an apply patch may set it.
    pub force: Option<bool>,
    /// `fieldManager` (required for apply patches).
    pub field_manager: Option<String>,
    /// The request's User-Agent: names the manager of a write without `fieldManager`.
    pub user_agent: Option<String>,
    /// For patches: checks the patched object (in the request group's JSON shape) for unknown
    /// fields per `fieldValidation`, returning warnings or the 400 of `Strict`.
    pub field_check: Option<FieldCheck>,
    /// The name of the authenticated user making the request, for the
    /// [admission] hook (EventRateLimit's `User` limits key on it); `None` when
    /// the caller does not know it (in-process writes), which admission sees as `""`.
    pub user: Option<String>,
}

impl WriteOptions {
    /// Whether the request asked for a dry run (`dryRun=All`).
    pub fn is_dry_run(&self) -> bool {
        options::asks_dry_run(&self.dry_run)
    }
}

impl std::fmt::Debug for WriteOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteOptions")
            .field("dry_run", &self.dry_run)
            .field("field_validation", &self.field_validation)
            .field("force", &self.force)
            .field("field_manager", &self.field_manager)
            .field("user_agent", &self.user_agent)
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

impl WriteOptions {
    /// The field manager of a non-apply write: `fieldManager`, else the User-Agent's product,
    /// else `unknown` (see [`fieldmanager::manager_name`]).
    pub fn manager(&self) -> String {
        fieldmanager::manager_name(self.field_manager.as_deref(), self.user_agent.as_deref())
    }
}

/// A check of a patched object's JSON: `Ok(warnings)` or the error to answer with.
pub type FieldCheck = Arc<dyn Fn(&Value) -> Result<Vec<String>, ApiError> + Send + Sync>;

/// The result of an update or patch.
#[derive(Debug, Clone, PartialEq)]
pub struct Written {
    /// The stored event (resourceVersion set; for dry runs, the would-be object).
    pub event: CoreEvent,
    /// The bytes stored for it and their revision, as [`Committed::stored`]: after a write
    /// that changed nothing, the bytes already stored. `None` for a dry run that would change
    /// the event and for an update that deleted it (its last finalizer removed).
    pub stored: Option<Stored>,
    /// True when the write created the event (PUT or apply on a missing name: HTTP 201).
    pub created: bool,
    /// Warnings to return (unknown fields under `fieldValidation=Warn`).
    pub warnings: Vec<String>,
}

/// An event as a write committed it: the result of a create ([`EventRegistry::create`]),
/// and the part of an update's [`Written`] the store decides.
#[derive(Debug, Clone, PartialEq)]
pub struct Committed {
    /// The stored event, resourceVersion set (for dry runs, the would-be object).
    pub event: CoreEvent,
    /// The bytes stored for it and its revision, from which an answer can be written without
    /// encoding the event again; `None` for a dry run that would store something.
    pub stored: Option<Stored>,
}

/// The result of a delete ([`EventRegistry::delete`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Deletion {
    /// The event is gone: its last state, with the resourceVersion of the deletion (for dry
    /// runs, the stored state).
    Deleted(CoreEvent),
    /// The event has finalizers, so it was only marked: `deletionTimestamp` set to now,
    /// `deletionGracePeriodSeconds` 0, stored as an update (watchers see `MODIFIED`). It goes
    /// away when an update leaves it without finalizers, or when its TTL runs out.
    Marked(CoreEvent),
}

impl Deletion {
    /// The event either way, by value.
    pub fn into_event(self) -> CoreEvent {
        match self {
            Deletion::Deleted(e) | Deletion::Marked(e) => e,
        }
    }
}

/// One page of a list: the matching events as stored, in key order (namespace, then name).
/// [`EventList::decode`] gives the typed events.
#[derive(Debug, Clone, PartialEq)]
pub struct EventList {
    /// The matching events' stored bytes and resourceVersions, in key order.
    pub items: Vec<Stored>,
    /// The snapshot revision the list was read at (the list's resourceVersion).
    pub resource_version: String,
    /// The token for the next page, when more may follow.
    pub continue_: Option<String>,
}

/// The pages of an unpaged list after its first ([`EventRegistry::list_streamed`]), read
/// one at a time at the list's revision with the list's selectors.
pub struct ListRest {
    registry: EventRegistry,
    group: ApiGroup,
    prefix: String,
    filter: Filter,
    revision: Revision,
    /// Where to go on from; `None` once the list is complete.
    cursor: Option<Resume>,
}

/// Where the next read of a list goes on from, in the order its first page was read in
/// (see [`ListOrder`]).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Resume {
    /// After this key, in key order.
    Key(String),
    /// After this mod revision, in write order.
    Written(Revision),
}

impl Resume {
    /// Where to go on from after `kv`, read in `order` (the order a backend page reports).
    fn after(order: ListOrder, kv: &KeyValue) -> Resume {
        match order {
            ListOrder::Written { .. } => Resume::Written(kv.mod_revision),
            _ => Resume::Key(kv.key.clone()),
        }
    }

    /// The order and start key of a backend read from here.
    fn read(self) -> (ListOrder, Option<String>) {
        match self {
            Resume::Key(key) => (ListOrder::Key, Some(key)),
            Resume::Written(after) => (ListOrder::Written { after }, None),
        }
    }
}

impl std::fmt::Debug for ListRest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ListRest")
            .field("prefix", &self.prefix)
            .field("revision", &self.revision)
            .field("cursor", &self.cursor)
            .finish_non_exhaustive()
    }
}

impl ListRest {
    /// The next page: at most [`RegistryOptions::list_page_items`] matching events (never
    /// empty), after the previous page in the list's order; `None` once the list is complete. If
    /// the list's revision has been compacted away meanwhile (the history window moved past
    /// it during a long list), a 410 `Expired`: the list cannot be completed at its revision.
    pub async fn next_page(&mut self) -> Result<Option<Vec<Stored>>, ApiError> {
        let Some(cursor) = self.cursor.take() else {
            return Ok(None);
        };
        let limit = Some(self.registry.opts.list_page_items.max(1));
        let (order, start_after) = cursor.read();
        let page = self
            .registry
            .read_page(
                self.group,
                &self.prefix,
                &self.filter,
                limit,
                Some(self.revision),
                order,
                start_after,
                false,
                None,
            )
            .await?;
        self.cursor = page.next;
        if page.items.is_empty() {
            return Ok(None);
        }
        Ok(Some(page.items.into_iter().map(stored).collect()))
    }

    /// The revision the list is read at (its resourceVersion).
    pub fn revision(&self) -> Revision {
        self.revision
    }
}

/// What a list sends of a stored key: its bytes at its revision.
fn stored(kv: KeyValue) -> Stored {
    Stored {
        bytes: kv.value,
        revision: kv.mod_revision,
    }
}

/// Matching events read by [`EventRegistry::read_page`].
struct ListPage {
    items: Vec<KeyValue>,
    /// Where to continue from, when more may follow.
    next: Option<Resume>,
    /// The revision they were read at.
    revision: Revision,
}

impl EventList {
    /// The typed events, in order; an item whose bytes do not decode is left out and logged
    /// (as every list the server sends leaves it out).
    pub fn decode(&self) -> Vec<CoreEvent> {
        self.items
            .iter()
            .filter_map(|item| match item.decode() {
                Ok(e) => Some(e),
                Err(err) => {
                    tracing::warn!(revision = item.revision, error = %err, "skipping undecodable stored event");
                    None
                }
            })
            .collect()
    }
}

/// The events a collection delete removed (or marked), in their last state.
#[derive(Debug, Clone, PartialEq)]
pub struct DeletedEvents {
    /// Every selected event: removed ones in their last state, marked ones as marked.
    pub items: Vec<CoreEvent>,
    /// The revision the selection was read at.
    pub resource_version: String,
}

/// The events registry (see the module docs). Cheap to clone.
#[derive(Clone)]
pub struct EventRegistry {
    backend: Arc<dyn Backend>,
    clock: Arc<dyn Clock>,
    opts: RegistryOptions,
    /// Set while creates are refused at `max_events`, so the warning is logged once per
    /// episode, not once per refused create.
    full: Arc<AtomicBool>,
    /// Asked before every create, update and patch is stored ([`admission`]).
    admission: Option<Arc<dyn admission::Admission>>,
}

impl std::fmt::Debug for EventRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventRegistry")
            .field("opts", &self.opts)
            .field("admission", &self.admission.is_some())
            .finish_non_exhaustive()
    }
}

impl EventRegistry {
    /// A registry over `backend`; `clock` stamps `creationTimestamp`.
    pub fn new(backend: Arc<dyn Backend>, clock: Arc<dyn Clock>, opts: RegistryOptions) -> Self {
        EventRegistry {
            backend,
            clock,
            opts,
            full: Arc::new(AtomicBool::new(false)),
            admission: None,
        }
    }

    /// This registry, asking `hook` before it stores any create, update or patch (see
    /// [`admission`] for when exactly). Replaces an earlier hook; combine several in one.
    pub fn with_admission(mut self, hook: Arc<dyn admission::Admission>) -> Self {
        self.admission = Some(hook);
        self
    }

    /// Runs the admission hook, if any, on `event` about to be written by `operation`.
    pub(crate) fn admit(
        &self,
        operation: admission::Operation,
        group: ApiGroup,
        namespace: &str,
        event: &CoreEvent,
        opts: &WriteOptions,
    ) -> Result<(), ApiError> {
        let Some(hook) = &self.admission else {
            return Ok(());
        };
        hook.validate(&admission::Attributes {
            operation,
            group,
            namespace,
            user: opts.user.as_deref().unwrap_or(""),
            event,
            dry_run: opts.is_dry_run(),
        })
    }

    /// The backend (for sweeps, compaction and health checks).
    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    /// The options.
    pub fn options(&self) -> &RegistryOptions {
        &self.opts
    }

    /// GET one event. `resourceVersion` `""`/`"0"` read the latest state; `N` must not be
    /// newer than the store (504 otherwise). The event as stored: [`Stored::decode`] types it.
    pub async fn get(
        &self,
        group: ApiGroup,
        namespace: &str,
        name: &str,
        resource_version: Option<&str>,
    ) -> Result<Stored, ApiError> {
        let r = group.resource();
        let min = parse_rv(resource_version)?;
        let kv = self
            .backend
            .get(&keys::key(namespace, name))
            .await
            .map_err(|e| errors::storage_error(e, r, name))?;
        if let Some(min) = min.filter(|m| *m > 0) {
            let cur = self
                .backend
                .current_revision()
                .await
                .map_err(|e| errors::storage_error(e, r, name))?;
            if min > cur {
                return Err(too_large_rv(min, cur));
            }
        }
        match kv {
            Some(kv) => Ok(Stored {
                bytes: kv.value,
                revision: kv.mod_revision,
            }),
            None => Err(ApiError::not_found(r, name)),
        }
    }

    /// LIST events of `namespace` (all namespaces when `None`), with selectors, paging and
    /// resourceVersion semantics (see the module docs), as stored: without selectors nothing
    /// is decoded, which is what keeps large lists cheap. `p.watch` must be false.
    ///
    /// An unpaged list (no `limit`) is read whole into memory, in key order: the HTTP layer
    /// streams one instead ([`list_streamed`](Self::list_streamed)).
    pub async fn list(
        &self,
        group: ApiGroup,
        namespace: Option<&str>,
        p: &ListParams,
    ) -> Result<EventList, ApiError> {
        let (mut list, rest) = self.list_in(group, namespace, p, ListOrder::Key).await?;
        if let Some(mut rest) = rest {
            while let Some(items) = rest.next_page().await? {
                list.items.extend(items);
            }
        }
        Ok(list)
    }

    /// [`list`](Self::list), with an unpaged list (no `limit`) read a page of at most
    /// [`RegistryOptions::list_page_items`] matching events at a time: the first page comes
    /// with the list's resourceVersion, the [`ListRest`] reads the others at the same
    /// revision, so a list of any length is sent while it is read, in bounded memory. A
    /// paged list (with `limit`) is one page and no rest, as from `list`.
    ///
    /// **Order.** A paged list is in key order (namespace, then name), as its continue token
    /// needs. An unpaged list is in the order the backend reads fastest
    /// ([`ListOrder::Fastest`]): on SQLite a list of a large part of the store comes in the
    /// order the events were last written, which it reads sequentially rather than one random
    /// page per event; smaller lists, and every list on the other backends, in key order. Kubernetes does not promise an unpaged list's order (lists
    /// kube-apiserver served from its watch cache before 1.27 came in no order at all), and
    /// kubectl sorts what it shows.
    pub async fn list_streamed(
        &self,
        group: ApiGroup,
        namespace: Option<&str>,
        p: &ListParams,
    ) -> Result<(EventList, Option<ListRest>), ApiError> {
        self.list_in(group, namespace, p, ListOrder::Fastest).await
    }

    /// [`list_streamed`](Self::list_streamed), with an unpaged list read in `unpaged` order
    /// (a paged list is in key order whatever it says).
    async fn list_in(
        &self,
        group: ApiGroup,
        namespace: Option<&str>,
        p: &ListParams,
        unpaged: ListOrder,
    ) -> Result<(EventList, Option<ListRest>), ApiError> {
        p.validate()?;
        let filter = Filter::new(group, p, None)?;
        let prefix = keys::prefix(namespace);
        let limit = p
            .limit
            .filter(|l| *l > 0)
            .map(|l| usize::try_from(l).unwrap_or(usize::MAX));
        let rv = parse_rv(p.rv())?;
        let mut min_rv = None;
        let (at, cursor, continuing) = match p.continue_token() {
            Some(tok) => {
                if p.rv().is_some_and(|v| v != "0") {
                    return Err(ApiError::bad_request(
                        "specifying resource version is not allowed when using continue",
                    ));
                }
                let c = continue_token::decode(&prefix, tok)?;
                (c.revision, Some(c.start_after), true)
            }
            None => match (rv, p.rv_match()) {
                (None | Some(0), _) => (None, None, false),
                (Some(n), Some(options::MATCH_EXACT)) => (Some(n), None, false),
                (Some(n), Some(_)) => {
                    min_rv = Some(n);
                    (None, None, false)
                }
                (Some(n), None) if limit.is_some() => (Some(n), None, false),
                (Some(n), None) => {
                    min_rv = Some(n);
                    (None, None, false)
                }
            },
        };
        let streamed = limit.is_none();
        let page_limit = limit.or(Some(self.opts.list_page_items.max(1)));
        let order = if streamed && !continuing {
            unpaged
        } else {
            ListOrder::Key
        };
        let page = self
            .read_page(
                group, &prefix, &filter, page_limit, at, order, cursor, continuing, min_rv,
            )
            .await?;
        let list = |next: Option<String>| EventList {
            items: page.items.into_iter().map(stored).collect(),
            resource_version: page.revision.to_string(),
            continue_: next,
        };
        if streamed {
            let rest = page.next.map(|cursor| ListRest {
                registry: self.clone(),
                group,
                prefix,
                filter,
                revision: page.revision,
                cursor: Some(cursor),
            });
            return Ok((list(None), rest));
        }
        let next = match page.next {
            Some(Resume::Key(key)) => {
                Some(continue_token::encode(&prefix, &key, Some(page.revision)))
            }
            Some(Resume::Written(_)) => {
                // A paged list reads in key order (`order` above): its backend broke that.
                return Err(ApiError::internal(
                    "the store answered a paged list out of key order",
                ));
            }
            None => None,
        };
        Ok((list(next), None))
    }

    /// Reads matching events in `order` from `cursor` on (the key to go on after, in key
    /// order; exclusive; from the start when `None`) at revision `at` (the current one when
    /// `None`), at most `limit` of them: as many backend pages as it takes to find them.
    /// `next` is where to continue from when more may follow, in the order the backend
    /// chose. `continuing` makes a compacted revision the 410 of a stale continue token;
    /// `min_rv` is a resourceVersion the revision read must not be older than.
    #[allow(clippy::too_many_arguments)]
    async fn read_page(
        &self,
        group: ApiGroup,
        prefix: &str,
        filter: &Filter,
        limit: Option<usize>,
        mut at: Option<Revision>,
        mut order: ListOrder,
        mut cursor: Option<String>,
        continuing: bool,
        min_rv: Option<Revision>,
    ) -> Result<ListPage, ApiError> {
        let mut items = Vec::new();
        let mut next = None;
        'pages: loop {
            let page = match self
                .backend
                .list(
                    prefix,
                    ListOptions {
                        start_after: cursor.clone(),
                        limit,
                        at_revision: at,
                        index: filter.index_query(),
                        order,
                    },
                )
                .await
            {
                Ok(page) => page,
                Err(StorageError::Expired { .. }) if continuing => {
                    let mut e = ApiError::expired(CONTINUE_TOO_OLD);
                    let last = cursor.clone().unwrap_or_default();
                    e.continue_token = Some(continue_token::encode(prefix, &last, None));
                    return Err(e);
                }
                Err(StorageError::Expired { .. }) => return Err(ApiError::expired(LIST_TOO_OLD)),
                Err(e) => return Err(errors::storage_error(e, group.resource(), "")),
            };
            if let Some(min) = min_rv
                && page.revision < min
            {
                return Err(too_large_rv(min, page.revision));
            }
            at = Some(page.revision);
            let n = page.items.len();
            let everything = filter.is_everything();
            let more = page.more;
            let read_in = page.order;
            let position = |kv: &KeyValue| Resume::after(read_in, kv);
            let last = page.items.last().map(position);
            if everything && items.is_empty() && limit.is_none_or(|l| n < l) {
                // The whole page is the answer so far: taken as it is, no copy.
                items = page.items;
            } else {
                for (i, kv) in page.items.into_iter().enumerate() {
                    if !everything {
                        match keys::decode(&kv) {
                            Ok(ev) if filter.matches(&ev) => {}
                            Ok(_) => continue,
                            Err(e) => {
                                tracing::warn!(key = %kv.key, error = %e, "skipping undecodable stored event");
                                continue;
                            }
                        }
                    }
                    let here = (limit == Some(items.len() + 1)).then(|| position(&kv));
                    items.push(kv);
                    if let Some(here) = here {
                        if i + 1 < n || more {
                            next = Some(here);
                        }
                        break 'pages;
                    }
                }
            }
            match last {
                Some(last) if more => (order, cursor) = last.read(),
                _ => break,
            }
        }
        Ok(ListPage {
            items,
            next,
            revision: at.unwrap_or(0),
        })
    }

    /// WATCH events of `namespace` (all when `None`), or of the single event `name`, in
    /// batches of the items that were ready together (never empty). See the module docs for
    /// the semantics; a revision out of the history window yields a stream with one `ERROR`
    /// 410 item. What a watcher without selectors receives is not decoded: a change comes as
    /// the shared [`Change`], whose encodings the HTTP layer makes once for all watchers
    /// ([`watch::decoded`] gives typed items instead).
    pub async fn watch(
        &self,
        group: ApiGroup,
        namespace: Option<&str>,
        name: Option<&str>,
        p: &ListParams,
    ) -> Result<EventWatch, ApiError> {
        watch::start(self, group, namespace, name, p).await
    }

    /// POST: creates `event` in `namespace` (see the module docs). The answer holds the
    /// stored bytes, from which the HTTP layer renders the response without encoding the
    /// event again.
    pub async fn create(
        &self,
        group: ApiGroup,
        namespace: &str,
        event: CoreEvent,
        opts: &WriteOptions,
    ) -> Result<Committed, ApiError> {
        write::create(self, group, namespace, event, opts).await
    }

    /// PUT: replaces (or creates) `name` with `event`; a resourceVersion in `event` is a
    /// precondition (409 when stale), an empty one means unconditional.
    pub async fn update(
        &self,
        group: ApiGroup,
        namespace: &str,
        name: &str,
        event: CoreEvent,
        opts: &WriteOptions,
    ) -> Result<Written, ApiError> {
        write::update(self, group, namespace, name, event, opts).await
    }

    /// PATCH `name` with `body` of `kind`. The patch applies to the event in `group`'s shape;
    /// a resourceVersion left in the patched object is a precondition. Apply creates a
    /// missing event; other kinds answer 404.
    pub async fn patch(
        &self,
        group: ApiGroup,
        namespace: &str,
        name: &str,
        kind: PatchKind,
        body: &[u8],
        opts: &WriteOptions,
    ) -> Result<Written, ApiError> {
        write::patch(self, group, namespace, name, kind, body, opts).await
    }

    /// DELETE `name`, honouring the preconditions: removes the event, or, while it has
    /// finalizers, only marks it as being deleted (see [`Deletion`]).
    pub async fn delete(
        &self,
        group: ApiGroup,
        namespace: &str,
        name: &str,
        p: &DeleteParams,
    ) -> Result<Deletion, ApiError> {
        write::delete(self, group, namespace, name, p).await
    }

    /// DELETE on the collection: deletes every event the list options select (all pages),
    /// one by one in key order as [`EventRegistry::delete`] does with the same `p` (events
    /// with finalizers are only marked), and returns every selected event: removed ones in
    /// their last state, marked ones as marked, ones another request removed meanwhile as
    /// listed. The list's resourceVersion is the one the selection was read at, as
    /// kube-apiserver answers. The first item that fails (a precondition in `p` it does not
    /// meet: 409) ends the request with its error; the items before it stay deleted.
    pub async fn delete_collection(
        &self,
        group: ApiGroup,
        namespace: Option<&str>,
        list: &ListParams,
        p: &DeleteParams,
    ) -> Result<DeletedEvents, ApiError> {
        write::delete_collection(self, group, namespace, list, p).await
    }
}
