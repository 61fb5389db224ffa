//! `metadata.managedFields` and server-side apply, as kube-apiserver's field manager does them
//! (structured-merge-diff over the Event schemas of [`schema`]).
//!
//! - **Create, update and non-apply patches** ([`track_update`]): the fields the write adds or
//!   changes (compared in the request's API version) go to the writer's `Update` entry
//!   (manager = `fieldManager`, else the User-Agent up to its first `/`, else `unknown`),
//!   and leave every other manager; removed fields leave every manager. The entry's `time`
//!   moves only when it took fields.
//! - **Apply** ([`apply`]): the applied configuration is merged into the object; the
//!   applier's `Apply` entry becomes exactly the configuration's fields; fields it applied
//!   before, no longer applies and nobody else owns are removed from the object. A field the
//!   apply changes that another manager owns is a conflict: 409 with one cause per field and
//!   kube-apiserver's message (`Apply failed with 1 conflict: conflict with "kubectl-patch"
//!   using v1: .message`), unless `force` moves the field to the applier.
//! - Entries are per (manager, operation, and for updates the API version); both event
//!   versions share the entries, each entry's paths in its own version's shape. Sending
//!   `managedFields` on a write replaces the stored entries (`[]` or `[{}]` clears them);
//!   unreadable ones are ignored in favour of the stored ones.
//! - At most [`MAX_UPDATE_MANAGERS`] `Update` entries are kept: beyond that the oldest are
//!   merged into an `ancient-changes` entry per API version.
//! - Identity and server-set metadata (`name`, `namespace`, `uid`, `resourceVersion`,
//!   `creationTimestamp`, `generation`, `managedFields`, `selfLink`, `apiVersion`, `kind`)
//!   are never owned.

// Field-manager results are `Result<_, ApiError>` (a `Status` body) like the rest of the
// registry.
#![allow(clippy::result_large_err)]

mod created;
pub mod fieldpath;
pub mod schema;
pub mod typed;
mod updated;

use std::collections::BTreeMap;
use std::sync::LazyLock;

use herald_core::event::{ApiGroup, CoreEvent};
use herald_core::labels::go_quote;
use herald_core::status::{ApiError, FieldCause, Reason};
use herald_wire::json::event_json;
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry, Time};
use serde_json::Value;

use self::created::CreatedKey;
use self::fieldpath::{FieldSet, Path, PathElement};
use self::typed::Comparison;

/// The most `Update` entries kept before the oldest are merged (kube's default).
pub const MAX_UPDATE_MANAGERS: usize = 10;

/// The manager the oldest `Update` entries are merged into beyond [`MAX_UPDATE_MANAGERS`].
pub const ANCIENT_CHANGES: &str = "ancient-changes";

/// The longest `fieldManager` accepted (bytes).
pub const FIELD_MANAGER_MAX_LENGTH: usize = 128;

/// The `fieldsType` of every entry.
pub const FIELDS_V1: &str = "FieldsV1";

/// `operation` of an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Operation {
    /// Server-side apply.
    Apply,
    /// Create, update or a non-apply patch.
    Update,
}

impl Operation {
    fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

/// The identity of an entry: apply entries are per manager, update entries per manager and
/// API version (as kube's manager identifier).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ManagerId {
    /// `manager`.
    pub manager: String,
    /// `operation`.
    pub operation: Operation,
    /// The API version (`v1`, `events.k8s.io/v1`) for `Update` entries; `None` for `Apply`.
    pub version: Option<&'static str>,
    /// `subresource` (events have none; kept when a client sends one).
    pub subresource: String,
}

impl ManagerId {
    fn update(manager: &str, group: ApiGroup) -> Self {
        ManagerId {
            manager: manager.to_string(),
            operation: Operation::Update,
            version: Some(group.api_version()),
            subresource: String::new(),
        }
    }

    fn apply(manager: &str) -> Self {
        ManagerId {
            manager: manager.to_string(),
            operation: Operation::Apply,
            version: None,
            subresource: String::new(),
        }
    }

    /// kube-apiserver's rendering in conflict messages: `"name"`, plus `using <version>` for
    /// update entries.
    fn describe(&self) -> String {
        let mut s = go_quote(&self.manager);
        if !self.subresource.is_empty() {
            s = format!("{s} with subresource {}", go_quote(&self.subresource));
        }
        match self.version {
            Some(v) if self.operation == Operation::Update => format!("{s} using {v}"),
            _ => s,
        }
    }
}

/// One manager's fields.
#[derive(Debug, Clone, PartialEq)]
struct Entry {
    set: FieldSet,
    version: ApiGroup,
    time: Option<Timestamp>,
}

/// The decoded `managedFields` of an object.
#[derive(Debug, Clone, Default, PartialEq)]
struct Managed(BTreeMap<ManagerId, Entry>);

fn group_of(api_version: &str) -> Option<ApiGroup> {
    [ApiGroup::Core, ApiGroup::EventsV1]
        .into_iter()
        .find(|g| g.api_version() == api_version)
}

/// Why stored or sent `managedFields` cannot be used.
#[derive(Debug)]
struct Undecodable;

impl Managed {
    /// Decodes entries; entries of API versions Herald does not serve are dropped (kube drops
    /// managers whose version it cannot convert to).
    fn decode(entries: &[ManagedFieldsEntry]) -> Result<Managed, Undecodable> {
        let mut out = Managed::default();
        for e in entries {
            let operation = match e.operation.as_deref() {
                Some("Apply") => Operation::Apply,
                Some("Update") => Operation::Update,
                _ => return Err(Undecodable),
            };
            let api_version = e.api_version.as_deref().unwrap_or("");
            if api_version.is_empty() || e.fields_type.as_deref() != Some(FIELDS_V1) {
                return Err(Undecodable);
            }
            let set = match &e.fields_v1 {
                Some(FieldsV1(v)) => FieldSet::from_fields_v1(v).ok_or(Undecodable)?,
                None => FieldSet::new(),
            };
            let Some(group) = group_of(api_version) else {
                continue;
            };
            let id = ManagerId {
                manager: e.manager.clone().unwrap_or_default(),
                operation,
                version: (operation == Operation::Update).then_some(group.api_version()),
                subresource: e.subresource.clone().unwrap_or_default(),
            };
            out.0.insert(
                id,
                Entry {
                    set,
                    version: group,
                    time: e.time.as_ref().map(|t| t.0),
                },
            );
        }
        Ok(out)
    }

    /// The entries in kube's order: operation, time, manager, API version, subresource.
    fn encode(&self) -> Option<Vec<ManagedFieldsEntry>> {
        if self.0.is_empty() {
            return None;
        }
        let mut entries: Vec<(&ManagerId, &Entry)> = self.0.iter().collect();
        entries.sort_by(|(a, ea), (b, eb)| {
            let secs = |e: &Entry| e.time.map_or(0, |t| t.as_second());
            a.operation
                .cmp(&b.operation)
                .then(secs(ea).cmp(&secs(eb)))
                .then(a.manager.cmp(&b.manager))
                .then(ea.version.api_version().cmp(eb.version.api_version()))
                .then(a.subresource.cmp(&b.subresource))
        });
        Some(
            entries
                .into_iter()
                .map(|(id, e)| ManagedFieldsEntry {
                    api_version: Some(e.version.api_version().to_string()),
                    fields_type: Some(FIELDS_V1.to_string()),
                    fields_v1: Some(FieldsV1(e.set.to_fields_v1())),
                    manager: Some(id.manager.clone()),
                    operation: Some(id.operation.as_str().to_string()),
                    subresource: (!id.subresource.is_empty()).then(|| id.subresource.clone()),
                    time: e.time.map(Time),
                })
                .collect(),
        )
    }

    fn drop_empty(&mut self) {
        self.0.retain(|_, e| !e.set.is_empty());
    }

    /// kube's cap on update entries: the oldest are merged into one `ancient-changes` entry
    /// per API version until at most `max` remain.
    fn cap_updates(&mut self, max: usize) {
        let mut updaters: Vec<ManagerId> = self
            .0
            .keys()
            .filter(|id| id.operation == Operation::Update)
            .cloned()
            .collect();
        if updaters.len() <= max {
            return;
        }
        let secs = |m: &Managed, id: &ManagerId| {
            m.0.get(id)
                .and_then(|e| e.time)
                .map_or(0, |t| t.as_second())
        };
        updaters.sort_by(|a, b| secs(self, a).cmp(&secs(self, b)).then(a.cmp(b)));
        let mut first_of_version: BTreeMap<&'static str, ManagerId> = BTreeMap::new();
        let mut length = updaters.len();
        for id in &updaters {
            if length <= max {
                break;
            }
            let Some(entry) = self.0.get(id).cloned() else {
                continue;
            };
            let bucket = ManagerId::update(ANCIENT_CHANGES, entry.version);
            match first_of_version.get(entry.version.api_version()) {
                Some(first) => {
                    if !self.0.contains_key(&bucket)
                        && let Some(moved) = self.0.remove(first)
                    {
                        self.0.insert(bucket.clone(), moved);
                    }
                    if let Some(b) = self.0.get_mut(&bucket) {
                        b.set = entry.set.union(&b.set);
                        b.time = entry.time;
                    }
                    if *id != bucket {
                        self.0.remove(id);
                    }
                    length -= 1;
                }
                None => {
                    first_of_version.insert(entry.version.api_version(), id.clone());
                }
            }
        }
    }
}

/// Paths no manager ever owns (kube's strip-meta manager).
static STRIPPED: LazyLock<FieldSet> = LazyLock::new(|| {
    let mut s = FieldSet::new();
    let f = PathElement::named;
    s.insert(&[f("apiVersion")]);
    s.insert(&[f("kind")]);
    s.insert(&[f("metadata")]);
    for m in [
        "name",
        "namespace",
        "creationTimestamp",
        "selfLink",
        "uid",
        "clusterName",
        "generation",
        "managedFields",
        "resourceVersion",
    ] {
        s.insert(&[f("metadata"), f(m)]);
    }
    s
});

/// The JSON of a new (zero) Event in each version: what a create is compared against.
static ZERO: LazyLock<[Value; 2]> = LazyLock::new(|| {
    [ApiGroup::Core, ApiGroup::EventsV1]
        .map(|g| without_managed_fields(event_json(g, &CoreEvent::default())))
});

fn zero(group: ApiGroup) -> &'static Value {
    match group {
        ApiGroup::Core => &ZERO[0],
        ApiGroup::EventsV1 => &ZERO[1],
    }
}

fn without_managed_fields(mut v: Value) -> Value {
    if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("managedFields");
    }
    v
}

/// `set`, written in `from`'s shape, in `to`'s shape.
fn convert(set: &FieldSet, from: ApiGroup, to: ApiGroup) -> FieldSet {
    if from == to {
        return set.clone();
    }
    set.rename_top(|pe| match pe {
        PathElement::Field(n) => match schema::rename_top(n, from, to) {
            Some(renamed) => PathElement::named(renamed),
            None => pe.clone(),
        },
        other => other.clone(),
    })
}

/// Whole seconds, as `metav1.Time` carries them.
fn seconds(t: Timestamp) -> Timestamp {
    Timestamp::from_second(t.as_second()).unwrap_or(t)
}

/// True when the sent entries ask for a reset: an empty list or one empty entry.
fn is_reset(entries: &[ManagedFieldsEntry]) -> bool {
    match entries {
        [] => true,
        [one] => *one == ManagedFieldsEntry::default(),
        _ => false,
    }
}

/// The manager of a non-apply write: `fieldManager`, else the User-Agent up to its first `/`
/// (printable characters, at most [`FIELD_MANAGER_MAX_LENGTH`] bytes), else `unknown`.
pub fn manager_name(field_manager: Option<&str>, user_agent: Option<&str>) -> String {
    if let Some(m) = field_manager.filter(|m| !m.is_empty()) {
        return m.to_string();
    }
    let prefix = user_agent.unwrap_or("").split('/').next().unwrap_or("");
    let mut out = String::new();
    for c in prefix.chars().filter(|c| !c.is_control()) {
        if out.len() + c.len_utf8() > FIELD_MANAGER_MAX_LENGTH {
            break;
        }
        out.push(c);
    }
    if out.is_empty() {
        "unknown".to_string()
    } else {
        out
    }
}

/// kube's `fieldManager` validation: at most [`FIELD_MANAGER_MAX_LENGTH`] bytes of printable
/// characters. The causes of a 422 on `<Create|Update|Patch>Options`.
pub fn field_manager_causes(field_manager: &str) -> Vec<FieldCause> {
    let mut causes = Vec::new();
    if field_manager.len() > FIELD_MANAGER_MAX_LENGTH {
        causes.push(herald_core::event::causes::too_long(
            "fieldManager",
            FIELD_MANAGER_MAX_LENGTH,
        ));
    }
    for (i, c) in field_manager.chars().enumerate() {
        if c.is_control() {
            causes.push(herald_core::event::causes::invalid(
                "fieldManager",
                field_manager,
                &format!("invalid character U+{:04X} (at position {i})", u32::from(c)),
            ));
        }
    }
    causes
}

/// Records a create, update or non-apply patch by `manager` in `new.metadata.managedFields`.
/// `live` is the stored object (`None` for a create); the comparison is made in `group`'s
/// shape. Fields `new` carries in `managedFields` replace the stored entries when readable.
pub fn track_update(
    group: ApiGroup,
    live: Option<&CoreEvent>,
    new: &mut CoreEvent,
    manager: &str,
    now: Timestamp,
) {
    if live.is_none() && new.metadata.managed_fields.is_none() {
        // A create that sends no entries, the hottest write: the writer's one entry, without
        // the merge bookkeeping of the general path (`tests` holds the two equal).
        new.metadata.managed_fields = created_fields_v1(group, new).map(|fields| {
            vec![ManagedFieldsEntry {
                api_version: Some(group.api_version().to_string()),
                fields_type: Some(FIELDS_V1.to_string()),
                fields_v1: Some(FieldsV1(fields)),
                manager: Some(manager.to_string()),
                operation: Some(Operation::Update.as_str().to_string()),
                subresource: None,
                time: Some(Time(seconds(now))),
            }]
        });
        return;
    }
    track_update_general(group, live, new, manager, now);
}

/// How many created field sets' `fieldsV1` each thread remembers; a new one beyond that
/// replaces the one used least recently (a miss only costs building the set and its JSON).
const CREATED_FIELDS_CACHE: usize = 8;

/// The `fieldsV1` of the fields a create of `e` sets, `None` when it sets none; remembered
/// per thread for the last few [`CreatedKey`]s: the events one client creates almost always
/// set the same fields, and comparing a key with the event and copying the JSON costs less
/// than building the set.
fn created_fields_v1(group: ApiGroup, e: &CoreEvent) -> Option<Value> {
    thread_local! {
        static RECENT: std::cell::RefCell<Vec<(CreatedKey, Option<Value>)>> =
            const { std::cell::RefCell::new(Vec::new()) };
    }
    RECENT.with_borrow_mut(|recent| {
        if let Some(at) = recent.iter().position(|(k, _)| k.matches(group, e)) {
            // Move to the front so the common key is found first.
            recent[..=at].rotate_right(1);
            return recent[0].1.clone();
        }
        let key = CreatedKey::of(group, e);
        let set = key.fields();
        let v = (!set.is_empty()).then(|| set.to_fields_v1());
        if recent.len() == CREATED_FIELDS_CACHE {
            recent.pop();
        }
        recent.insert(0, (key, v.clone()));
        v
    })
}

/// [`track_update`] for any write: merges into the stored (or sent) entries.
fn track_update_general(
    group: ApiGroup,
    live: Option<&CoreEvent>,
    new: &mut CoreEvent,
    manager: &str,
    now: Timestamp,
) {
    let sent = new.metadata.managed_fields.take();
    let stored = || {
        live.and_then(|l| l.metadata.managed_fields.as_deref())
            .map(|e| Managed::decode(e).unwrap_or_default())
            .unwrap_or_default()
    };
    let mut managed = match sent.as_deref() {
        Some(entries) if is_reset(entries) => Managed::default(),
        Some(entries) => match Managed::decode(entries) {
            Ok(m) if !m.0.is_empty() => m,
            _ => stored(),
        },
        None => stored(),
    };
    // What the write adds or changes, and what it removes.
    let (changed, removed) = match live {
        // Nothing is removed from the zero object; the typed reading skips the JSON.
        None => (created::created_fields(group, new), FieldSet::new()),
        Some(l) => {
            // The typed reading (what patches take) skips both JSON trees.
            let cmp = updated::compare(group, l, new).unwrap_or_else(|| {
                typed::compare(
                    schema::event(group),
                    &without_managed_fields(event_json(group, l)),
                    &event_json(group, new),
                )
                .without(&STRIPPED)
            });
            (cmp.changed(), cmp.removed)
        }
    };
    if !managed.0.is_empty() {
        take_from_others(&mut managed, group, &changed.union(&removed), None);
    }
    if !changed.is_empty() {
        let id = ManagerId::update(manager, group);
        let e = managed.0.entry(id).or_insert(Entry {
            set: FieldSet::new(),
            version: group,
            time: None,
        });
        e.set = e.set.union(&changed);
        e.time = Some(seconds(now));
    }
    managed.drop_empty();
    managed.cap_updates(MAX_UPDATE_MANAGERS);
    new.metadata.managed_fields = managed.encode();
}

/// One manager's conflicting fields, in the manager's version.
type Conflicts = Vec<(ManagerId, Vec<Path>)>;

/// The fields other managers own that `cmp` (in `group`'s shape) adds or changes: an
/// applier's conflicts, per manager in the manager's own version.
fn conflicts(
    managed: &Managed,
    group: ApiGroup,
    cmp: &Comparison,
    applier: &ManagerId,
) -> Conflicts {
    let changed = cmp.changed();
    let mut out = Conflicts::new();
    for (id, e) in managed.0.iter().filter(|(id, _)| *id != applier) {
        let c = e.set.intersection(&convert(&changed, group, e.version));
        if !c.is_empty() {
            out.push((id.clone(), c.paths()));
        }
    }
    out
}

/// Takes `touched` (fields in `group`'s shape a write added, changed or removed) away from
/// every manager except `except`.
fn take_from_others(
    managed: &mut Managed,
    group: ApiGroup,
    touched: &FieldSet,
    except: Option<&ManagerId>,
) {
    if touched.is_empty() {
        return;
    }
    for (id, e) in managed.0.iter_mut() {
        if except != Some(id) {
            e.set = e.set.difference(&convert(touched, group, e.version));
        }
    }
}

/// The 409 of an apply that conflicts with other managers, worded as kube-apiserver does.
fn conflict_error(conflicts: &Conflicts) -> ApiError {
    let total: usize = conflicts.iter().map(|(_, p)| p.len()).sum();
    let mut causes = Vec::with_capacity(total);
    for (id, paths) in conflicts {
        for p in paths {
            causes.push(FieldCause {
                reason: "FieldManagerConflict".into(),
                message: format!("conflict with {}", id.describe()),
                field: p.to_string(),
            });
        }
    }
    let message = match conflicts.as_slice() {
        [(id, paths)] if paths.len() == 1 => format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            id.describe(),
            paths[0]
        ),
        _ => {
            let mut sorted: Vec<&(ManagerId, Vec<Path>)> = conflicts.iter().collect();
            sorted.sort_by_key(|(id, _)| id.describe());
            let mut lines = Vec::new();
            for (id, paths) in sorted {
                lines.push(format!("conflicts with {}:", id.describe()));
                lines.extend(paths.iter().map(|p| format!("- {p}")));
            }
            format!("Apply failed with {total} conflicts: {}", lines.join("\n"))
        }
    };
    let mut e = ApiError::new(409, Reason::Conflict, message);
    e.causes = causes;
    e
}

/// kube-apiserver's conversion of an applied configuration to its typed schema
/// (structured-merge-diff's `ObjectToTyped`), before anything is merged or stored and
/// whatever `fieldValidation` says: a field the Event schema does not declare, or a keyed
/// list item without its key or with a duplicate one, refuses the apply
/// ([`typed_conversion_errors`](herald_wire::schema::openapi::typed_conversion_errors)).
///
/// The message is upstream's word for word, e.g. `failed to create typed patch object
/// (default/a.1; /v1, Kind=Event): .foo: field not declared in schema`, naming the namespace,
/// name and kind the configuration itself gives. Upstream answers it as a 500 without a
/// reason (kubernetes/kubernetes#122480, with a fix proposed to make it a 400 BadRequest);
/// Herald answers the 400: the request is at fault.
fn check_typed(group: ApiGroup, config: &Value) -> Result<(), ApiError> {
    let gv = herald_wire::schema::GroupVersion::of(group);
    let errors = herald_wire::schema::openapi::typed_conversion_errors(gv, config);
    if errors.is_empty() {
        return Ok(());
    }
    fn text(v: Option<&Value>) -> &str {
        v.and_then(Value::as_str).unwrap_or("")
    }
    let meta = config.get("metadata");
    let detail = match errors.as_slice() {
        [one] => one.clone(),
        many => format!("errors:\n  {}", many.join("\n  ")),
    };
    Err(ApiError::bad_request(format!(
        "failed to create typed patch object ({}/{}; {}/{}, Kind={}): {detail}",
        text(meta.and_then(|m| m.get("namespace"))),
        text(meta.and_then(|m| m.get("name"))),
        gv.group,
        gv.version,
        text(config.get("kind")),
    )))
}

/// Server-side apply of `config` (the request body, in `group`'s shape) by `manager` onto
/// `live` (`None` when the event does not exist yet). Returns the new object in `group`'s
/// shape with its `managedFields`, or the 400/409 to answer.
pub fn apply(
    group: ApiGroup,
    live: Option<&CoreEvent>,
    config: &Value,
    manager: &str,
    force: bool,
    now: Timestamp,
) -> Result<Value, ApiError> {
    if config
        .pointer("/metadata/managedFields")
        .is_some_and(|v| !v.is_null())
    {
        return Err(ApiError::bad_request("metadata.managedFields must be nil"));
    }
    let sent_version = config
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    if sent_version != group.api_version() {
        return Err(ApiError::bad_request(format!(
            "Incorrect version specified in apply patch. Specified patch version: {sent_version}, expected: {}",
            group.api_version()
        )));
    }
    check_typed(group, config)?;
    let mut managed = live
        .and_then(|l| l.metadata.managed_fields.as_deref())
        .map(|e| Managed::decode(e).unwrap_or_default())
        .unwrap_or_default();
    let node = schema::event(group);
    let lhs = match live {
        Some(l) => without_managed_fields(event_json(group, l)),
        None => zero(group).clone(),
    };
    let mut new = typed::merge(node, &lhs, config);
    let me = ManagerId::apply(manager);
    let last = managed.0.remove(&me);
    let set = typed::to_set(node, config).difference(&STRIPPED);
    managed.0.insert(
        me.clone(),
        Entry {
            set,
            version: group,
            time: last.as_ref().and_then(|l| l.time),
        },
    );
    if let Some(last) = last.filter(|l| !l.set.is_empty()) {
        let mut owned = FieldSet::new();
        for e in managed.0.values() {
            owned = owned.union(&convert(&e.set, e.version, group));
        }
        let gone = convert(&last.set, last.version, group).difference(&owned);
        typed::remove(node, &mut new, &gone);
    }
    let cmp = typed::compare(node, &lhs, &new).without(&STRIPPED);
    if !force {
        let conflicts = conflicts(&managed, group, &cmp, &me);
        if !conflicts.is_empty() {
            return Err(conflict_error(&conflicts));
        }
    }
    take_from_others(
        &mut managed,
        group,
        &cmp.changed().union(&cmp.removed),
        Some(&me),
    );
    if new != lhs
        && let Some(e) = managed.0.get_mut(&me)
    {
        e.time = Some(seconds(now));
    }
    managed.drop_empty();
    managed.cap_updates(MAX_UPDATE_MANAGERS);
    if let Some(entries) = managed.encode()
        && let Some(meta) = new
            .as_object_mut()
            .map(|m| {
                m.entry("metadata")
                    .or_insert_with(|| Value::Object(Default::default()))
            })
            .and_then(Value::as_object_mut)
    {
        meta.insert(
            "managedFields".into(),
            serde_json::to_value(entries).unwrap_or(Value::Null),
        );
    }
    Ok(new)
}

#[cfg(test)]
mod tests;
