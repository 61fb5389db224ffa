//! Server-side printing of events as a `meta.k8s.io` `Table`, the way kube-apiserver does it.
//!
//! kubectl's `LAST SEEN TYPE REASON OBJECT MESSAGE` output comes entirely from this Table.
//! The server always sends all ten columns (wide rows); kubectl hides the `priority: 1`
//! columns unless `-o wide`. Ages are computed against an injected clock with kube's
//! human-duration format (`45s`, `5m2s`, `2d3h`, `<unknown>` for a missing time).
//!
//! ```
//! use herald_wire::table::human_duration;
//! use std::time::Duration;
//! assert_eq!(human_duration(Duration::from_secs(302)), "5m2s");
//! assert_eq!(human_duration(Duration::from_secs(2 * 86400 + 3 * 3600)), "2d3h");
//! ```

pub mod transcode;

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Value, json};

use herald_core::status::ApiError;

/// The ten event columns: (name, priority, format, description). Descriptions are the API
/// field documentation, as the real server sends them.
pub const EVENT_COLUMNS: [(&str, u8, &str, &str); 10] = [
    (
        "Last Seen",
        0,
        "",
        "The time at which the most recent occurrence of this event was recorded.",
    ),
    (
        "Type",
        0,
        "",
        "Type of this event (Normal, Warning), new types could be added in the future",
    ),
    (
        "Reason",
        0,
        "",
        "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.",
    ),
    ("Object", 0, "", "The object that this event is about."),
    (
        "Subobject",
        1,
        "",
        "If referring to a piece of an object instead of an entire object, this string should contain a valid JSON/Go field access statement, such as desiredState.manifest.containers[2]. For example, if the object reference is to a container within a pod, this would take on a value like: \"spec.containers{name}\" (where \"name\" refers to the name of the container that triggered the event) or if no container name is specified \"spec.containers[2]\" (container with index 2 in this pod). This syntax is chosen only to have some well-defined way of referencing a part of an object.",
    ),
    (
        "Source",
        1,
        "",
        "The component reporting this event. Should be a short machine understandable string.",
    ),
    (
        "Message",
        0,
        "",
        "A human-readable description of the status of this operation.",
    ),
    (
        "First Seen",
        1,
        "",
        "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)",
    ),
    (
        "Count",
        1,
        "",
        "The number of times this event has occurred.",
    ),
    (
        "Name",
        1,
        "name",
        "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names",
    ),
];

/// The `columnDefinitions` array of an events Table.
pub fn event_column_definitions() -> Value {
    Value::Array(
        EVENT_COLUMNS
            .iter()
            .map(|(name, priority, format, description)| {
                json!({"name": name, "type": "string", "format": format, "description": description, "priority": priority})
            })
            .collect(),
    )
}

/// kube's `HumanDuration`: a short, rounded-down age. Under 2 minutes in seconds; then
/// minutes (with seconds under 10 minutes); hours (with minutes under 8 hours); days (with
/// hours under 8 days); years (with days under 8 years).
pub fn human_duration(d: Duration) -> String {
    let secs = d.as_secs();
    if secs < 120 {
        return format!("{secs}s");
    }
    let minutes = secs / 60;
    if minutes < 10 {
        let s = secs % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        let y = hours / 24 / 365;
        return if dy == 0 {
            format!("{y}y")
        } else {
            format!("{y}y{dy}d")
        };
    }
    format!("{}y", hours / 24 / 365)
}

/// The age of `t` at `now` as a Table cell: `<unknown>` when `t` is absent, `0s` when it is at
/// most a second in the future (clock skew), `<invalid>` further in the future.
pub fn age(t: Option<Timestamp>, now: Timestamp) -> String {
    let Some(t) = t else {
        return "<unknown>".into();
    };
    let d: SignedDuration = now.duration_since(t);
    if d.as_secs() < -1 {
        "<invalid>".into()
    } else if d.is_negative() {
        "0s".into()
    } else {
        human_duration(d.unsigned_abs())
    }
}

/// The ten cells of one event's row, by the real printer's rules (reference §2.6).
pub fn event_cells(event: &Event, now: Timestamp) -> Vec<Value> {
    row_cells(&RowFields::of(event), now)
}

/// The members of an event a row's cells are made from, borrowed: from a decoded event
/// ([`RowFields::of`]) or read from the stored bytes
/// ([`transcode`]). Each field is the event's member of that name;
/// `name` is `metadata.name`, the reference's members are `involvedObject`'s.
#[derive(Debug, Default)]
pub struct RowFields<'e> {
    /// `firstTimestamp`.
    pub first_timestamp: Option<Timestamp>,
    /// `lastTimestamp`.
    pub last_timestamp: Option<Timestamp>,
    /// `eventTime`.
    pub event_time: Option<Timestamp>,
    /// `series`, when set: its `count` and `lastObservedTime`.
    pub series: Option<(Option<i32>, Option<Timestamp>)>,
    /// `count`.
    pub count: Option<i32>,
    /// `involvedObject.kind`.
    pub kind: Option<&'e str>,
    /// `involvedObject.name`.
    pub object_name: Option<&'e str>,
    /// `involvedObject.fieldPath`.
    pub field_path: Option<&'e str>,
    /// `source.component`.
    pub component: Option<&'e str>,
    /// `source.host`.
    pub host: Option<&'e str>,
    /// `reportingComponent`.
    pub reporting_component: Option<&'e str>,
    /// `reportingInstance`.
    pub reporting_instance: Option<&'e str>,
    /// `type`.
    pub type_: Option<&'e str>,
    /// `reason`.
    pub reason: Option<&'e str>,
    /// `message`.
    pub message: Option<&'e str>,
    /// `metadata.name`.
    pub name: Option<&'e str>,
}

impl<'e> RowFields<'e> {
    /// The fields of a decoded event.
    pub fn of(event: &'e Event) -> Self {
        let io = &event.involved_object;
        let source = event.source.as_ref();
        RowFields {
            first_timestamp: event.first_timestamp.as_ref().map(|t| t.0),
            last_timestamp: event.last_timestamp.as_ref().map(|t| t.0),
            event_time: event.event_time.as_ref().map(|t| t.0),
            series: event
                .series
                .as_ref()
                .map(|s| (s.count, s.last_observed_time.as_ref().map(|t| t.0))),
            count: event.count,
            kind: io.kind.as_deref(),
            object_name: io.name.as_deref(),
            field_path: io.field_path.as_deref(),
            component: source.and_then(|s| s.component.as_deref()),
            host: source.and_then(|s| s.host.as_deref()),
            reporting_component: event.reporting_component.as_deref(),
            reporting_instance: event.reporting_instance.as_deref(),
            type_: event.type_.as_deref(),
            reason: event.reason.as_deref(),
            message: event.message.as_deref(),
            name: event.metadata.name.as_deref(),
        }
    }
}

/// The ten cells of the event `f` describes, with ages at `now`.
pub fn row_cells(f: &RowFields<'_>, now: Timestamp) -> Vec<Value> {
    let first_seen = match f.first_timestamp {
        Some(t) => age(Some(t), now),
        None => age(f.event_time, now),
    };
    let mut last_seen = match f.last_timestamp {
        Some(t) => age(Some(t), now),
        None => first_seen.clone(),
    };
    let count = match f.series {
        Some((count, last_observed)) => {
            last_seen = age(last_observed, now);
            i64::from(count.unwrap_or(0))
        }
        None => match f.count.unwrap_or(0) {
            0 => 1,
            n => i64::from(n),
        },
    };
    let kind = f.kind.unwrap_or("").to_lowercase();
    let object = match f.object_name.filter(|n| !n.is_empty()) {
        Some(name) => format!("{kind}/{name}"),
        None => kind,
    };
    let component = first_non_empty(f.component, f.reporting_component);
    let host = first_non_empty(f.host, f.reporting_instance);
    let source = if host.is_empty() {
        component.to_string()
    } else {
        format!("{component}, {host}")
    };
    vec![
        last_seen.into(),
        f.type_.unwrap_or_default().into(),
        f.reason.unwrap_or_default().into(),
        object.into(),
        f.field_path.unwrap_or_default().into(),
        source.into(),
        f.message.unwrap_or("").trim().into(),
        first_seen.into(),
        count.into(),
        f.name.unwrap_or_default().into(),
    ]
}

fn first_non_empty<'a>(a: Option<&'a str>, b: Option<&'a str>) -> &'a str {
    match a.filter(|s| !s.is_empty()) {
        Some(s) => s,
        None => b.unwrap_or(""),
    }
}

/// A `PartialObjectMetadata` for `meta`, in the given `meta.k8s.io` version.
pub fn partial_object_metadata(meta: &ObjectMeta, version: MetaVersion) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": version.api_version(),
        "metadata": serde_json::to_value(meta).unwrap_or_else(|_| json!({})),
    })
}

/// Appends the [`partial_object_metadata`] of `meta` (keys in another order) without
/// building a `Value` tree: the form a long list streams its items in.
pub fn write_partial_object_metadata(
    out: &mut Vec<u8>,
    meta: &ObjectMeta,
    version: MetaVersion,
) -> serde_json::Result<()> {
    write_partial_object_metadata_with(out, version, |out| serde_json::to_writer(out, meta))
}

/// Appends a `PartialObjectMetadata` in `version` whose `metadata` object `metadata`
/// appends (from a decoded event, or as stored).
pub fn write_partial_object_metadata_with<E>(
    out: &mut Vec<u8>,
    version: MetaVersion,
    metadata: impl FnOnce(&mut Vec<u8>) -> Result<(), E>,
) -> Result<(), E> {
    // The version's text has nothing to escape.
    out.extend_from_slice(br#"{"kind":"PartialObjectMetadata","apiVersion":""#);
    out.extend_from_slice(version.api_version().as_bytes());
    out.extend_from_slice(br#"","metadata":"#);
    metadata(out)?;
    out.push(b'}');
    Ok(())
}

/// Appends one row, `{"cells":…,"object":…}`: `cells`, then the object `include` asks
/// for: `null`, the `PartialObjectMetadata` that `metadata` appends, or the event that
/// `full_object` appends. The rows of a decoded and of a stored event share it.
pub fn write_row<E>(
    out: &mut Vec<u8>,
    cells: &[Value],
    include: IncludeObject,
    metadata: impl FnOnce(&mut Vec<u8>) -> Result<(), E>,
    full_object: impl FnOnce(&mut Vec<u8>) -> Result<(), E>,
) -> Result<(), E> {
    out.extend_from_slice(br#"{"cells":"#);
    // `Value`s serialize into a `Vec` without error.
    let _ = serde_json::to_writer(&mut *out, cells);
    out.extend_from_slice(br#","object":"#);
    match include {
        IncludeObject::None => out.extend_from_slice(b"null"),
        IncludeObject::Metadata => metadata(out)?,
        IncludeObject::Object => full_object(out)?,
    }
    out.push(b'}');
    Ok(())
}

/// List-level metadata of a Table (or a PartialObjectMetadataList).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TableMeta {
    /// The list's resourceVersion (for a single object, the object's). kubectl's `get -w`
    /// watches from it; without it the watch replays everything as ADDED.
    pub resource_version: Option<String>,
    /// The continue token of the next page.
    pub continue_: Option<String>,
    /// Remaining items after this page, when known.
    pub remaining_item_count: Option<i64>,
}

impl TableMeta {
    /// The `metadata` member of the Table or list: an empty `continue` is left out.
    pub(crate) fn to_json(&self) -> Value {
        let mut m = serde_json::Map::new();
        if let Some(rv) = &self.resource_version {
            m.insert("resourceVersion".into(), rv.clone().into());
        }
        if let Some(c) = self.continue_.as_ref().filter(|c| !c.is_empty()) {
            m.insert("continue".into(), c.clone().into());
        }
        if let Some(n) = self.remaining_item_count {
            m.insert("remainingItemCount".into(), n.into());
        }
        Value::Object(m)
    }
}

/// How to render a Table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableOptions {
    /// `meta.k8s.io` version of the Table (and of row `PartialObjectMetadata`).
    pub version: MetaVersion,
    /// What each row's `object` holds.
    pub include_object: IncludeObject,
    /// Omit `columnDefinitions` (sent as `null`): watch events after the first.
    pub no_headers: bool,
}

impl Default for TableOptions {
    fn default() -> Self {
        Self {
            version: MetaVersion::V1,
            include_object: IncludeObject::Metadata,
            no_headers: false,
        }
    }
}

/// One Table row for `event`. `full_object` renders the event in the requested group's shape
/// (with `kind`/`apiVersion`); it is only called for `includeObject=Object`.
pub fn event_row(
    event: &Event,
    now: Timestamp,
    opts: &TableOptions,
    full_object: &dyn Fn(&Event) -> Value,
) -> Value {
    let object = match opts.include_object {
        IncludeObject::None => Value::Null,
        IncludeObject::Metadata => partial_object_metadata(&event.metadata, opts.version),
        IncludeObject::Object => full_object(event),
    };
    json!({"cells": event_cells(event, now), "object": object})
}

/// A Table of `events`, with ages computed at `now`.
///
/// For a watch, render each event as a one-row Table and set `no_headers` on all but the
/// first, like kube-apiserver.
pub fn event_table(
    events: &[Event],
    meta: &TableMeta,
    now: Timestamp,
    opts: &TableOptions,
    full_object: &dyn Fn(&Event) -> Value,
) -> Value {
    let rows: Vec<Value> = events
        .iter()
        .map(|e| event_row(e, now, opts, full_object))
        .collect();
    let mut table = table_head(meta, opts);
    table.insert("rows".into(), rows.into());
    Value::Object(table)
}

/// An events Table without its `rows`: kind, apiVersion, list metadata and the column
/// definitions (`null` when `opts.no_headers`).
pub fn table_head(meta: &TableMeta, opts: &TableOptions) -> serde_json::Map<String, Value> {
    let columns = if opts.no_headers {
        Value::Null
    } else {
        event_column_definitions()
    };
    let mut head = serde_json::Map::new();
    head.insert("kind".into(), "Table".into());
    head.insert("apiVersion".into(), opts.version.api_version().into());
    head.insert("metadata".into(), meta.to_json());
    head.insert("columnDefinitions".into(), columns);
    head
}

/// A `PartialObjectMetadataList` of `events`' metadata.
pub fn partial_object_metadata_list(
    events: &[Event],
    meta: &TableMeta,
    version: MetaVersion,
) -> Value {
    let items: Vec<Value> = events
        .iter()
        .map(|e| partial_object_metadata(&e.metadata, version))
        .collect();
    let mut list = metadata_list_head(meta, version);
    list.insert("items".into(), items.into());
    Value::Object(list)
}

/// A `PartialObjectMetadataList` without its `items`: kind, apiVersion and list metadata.
pub fn metadata_list_head(
    meta: &TableMeta,
    version: MetaVersion,
) -> serde_json::Map<String, Value> {
    let mut head = serde_json::Map::new();
    head.insert("kind".into(), "PartialObjectMetadataList".into());
    head.insert("apiVersion".into(), version.api_version().into());
    head.insert("metadata".into(), meta.to_json());
    head
}

/// The core/v1 rendering for `includeObject=Object`: the event with `kind: Event` and
/// `apiVersion: v1`.
pub fn core_v1_object(event: &Event) -> Value {
    let mut v = serde_json::to_value(event).unwrap_or_else(|_| json!({}));
    if let Some(m) = v.as_object_mut() {
        m.insert("kind".into(), "Event".into());
        m.insert("apiVersion".into(), "v1".into());
    }
    v
}

/// The `meta.k8s.io` version a transform was requested in; the response uses the same one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetaVersion {
    /// `meta.k8s.io/v1`.
    V1,
    /// `meta.k8s.io/v1beta1` (older clients).
    V1Beta1,
}

impl MetaVersion {
    /// `meta.k8s.io/v1` or `meta.k8s.io/v1beta1`.
    pub fn api_version(self) -> &'static str {
        match self {
            MetaVersion::V1 => "meta.k8s.io/v1",
            MetaVersion::V1Beta1 => "meta.k8s.io/v1beta1",
        }
    }

    /// The version named by a media type's `v` parameter (`v1`, `v1beta1`).
    pub fn parse(v: &str) -> Option<Self> {
        match v {
            "v1" => Some(MetaVersion::V1),
            "v1beta1" => Some(MetaVersion::V1Beta1),
            _ => None,
        }
    }
}

/// `includeObject` of a Table request: what each row's `object` holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IncludeObject {
    /// `null`.
    None,
    /// A `PartialObjectMetadata` (the default; kubectl needs it for NAMESPACE and labels).
    #[default]
    Metadata,
    /// The full object in the requested version (`kubectl get --sort-by` asks for it).
    Object,
}

impl IncludeObject {
    /// Parses the query value of a Table request (kube's `ValidateTableOptions`): absent or
    /// empty means [`IncludeObject::Metadata`]; an unknown value is kube-apiserver's 400
    /// `Unable to convert to Table as requested: includeObject: Invalid value: "x": must be
    /// 'Metadata', 'Object', 'None', or empty`.
    pub fn from_query(v: Option<&str>) -> Result<Self, ApiError> {
        match v.unwrap_or("") {
            "" | "Metadata" => Ok(IncludeObject::Metadata),
            "None" => Ok(IncludeObject::None),
            "Object" => Ok(IncludeObject::Object),
            other => {
                let cause = herald_core::event::causes::invalid(
                    "includeObject",
                    other,
                    "must be 'Metadata', 'Object', 'None', or empty",
                );
                Err(ApiError::bad_request(format!(
                    "Unable to convert to Table as requested: {}: {}",
                    cause.field, cause.message
                )))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{EventSeries, EventSource, ObjectReference};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    const NOW: &str = "2024-05-10T12:00:00Z";

    fn base() -> Event {
        Event {
            metadata: ObjectMeta {
                name: Some("web-1.17a".into()),
                namespace: Some("default".into()),
                resource_version: Some("42".into()),
                ..Default::default()
            },
            involved_object: ObjectReference {
                kind: Some("Pod".into()),
                name: Some("web-1".into()),
                field_path: Some("spec.containers{app}".into()),
                ..Default::default()
            },
            type_: Some("Warning".into()),
            reason: Some("BackOff".into()),
            message: Some("  Back-off restarting failed container \n".into()),
            source: Some(EventSource {
                component: Some("kubelet".into()),
                host: Some("node-1".into()),
            }),
            first_timestamp: Some(Time(ts("2024-05-08T09:00:00Z"))),
            last_timestamp: Some(Time(ts("2024-05-10T11:55:00Z"))),
            count: Some(7),
            ..Default::default()
        }
    }

    #[test]
    fn human_duration_boundaries() {
        let cases: [(u64, &str); 22] = [
            (0, "0s"),
            (59, "59s"),
            (119, "119s"),
            (120, "2m"),
            (121, "2m1s"),
            (599, "9m59s"),
            (600, "10m"),
            (3 * 3600 - 1, "179m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 60, "3h1m"),
            (8 * 3600 - 1, "7h59m"),
            (8 * 3600, "8h"),
            (47 * 3600 + 3599, "47h"),
            (48 * 3600, "2d"),
            (51 * 3600, "2d3h"),
            (8 * 86400 - 1, "7d23h"),
            (8 * 86400, "8d"),
            (2 * 365 * 86400 - 1, "729d"),
            (2 * 365 * 86400, "2y"),
            (2 * 365 * 86400 + 86400, "2y1d"),
            (8 * 365 * 86400, "8y"),
            (8 * 365 * 86400 + 86400 * 40, "8y"),
        ];
        for (secs, want) in cases {
            assert_eq!(human_duration(Duration::from_secs(secs)), want, "{secs}s");
        }
        assert_eq!(human_duration(Duration::from_millis(1999)), "1s");
    }

    #[test]
    fn age_handles_missing_and_future_times() {
        let now = ts(NOW);
        assert_eq!(age(None, now), "<unknown>");
        assert_eq!(age(Some(ts("2024-05-10T11:55:00Z")), now), "5m");
        assert_eq!(age(Some(ts("2024-05-10T12:00:01Z")), now), "0s");
        assert_eq!(age(Some(ts("2024-05-10T12:00:05Z")), now), "<invalid>");
    }

    #[test]
    fn cells_of_a_classic_event() {
        let cells = event_cells(&base(), ts(NOW));
        assert_eq!(
            cells,
            vec![
                json!("5m"),
                json!("Warning"),
                json!("BackOff"),
                json!("pod/web-1"),
                json!("spec.containers{app}"),
                json!("kubelet, node-1"),
                json!("Back-off restarting failed container"),
                json!("2d3h"),
                json!(7),
                json!("web-1.17a"),
            ]
        );
        assert!(cells[8].is_i64(), "count is an integer cell");
    }

    #[test]
    fn cells_of_a_new_style_event() {
        // events.k8s.io-style: eventTime, series, reporting fields, no source or timestamps.
        let mut e = base();
        e.first_timestamp = None;
        e.last_timestamp = None;
        e.count = None;
        e.source = None;
        e.event_time = Some(MicroTime(ts("2024-05-10T11:00:00Z")));
        e.series = Some(EventSeries {
            count: Some(12),
            last_observed_time: Some(MicroTime(ts("2024-05-10T11:59:30Z"))),
        });
        e.reporting_component = Some("example.com/ctrl".into());
        e.reporting_instance = Some("ctrl-0".into());
        e.involved_object.name = None;
        let cells = event_cells(&e, ts(NOW));
        assert_eq!(cells[0], "30s");
        assert_eq!(cells[3], "pod");
        assert_eq!(cells[5], "example.com/ctrl, ctrl-0");
        assert_eq!(cells[7], "60m");
        assert_eq!(cells[8], 12);
    }

    #[test]
    fn cells_defaults() {
        let mut e = base();
        e.last_timestamp = None;
        e.count = Some(0);
        e.source = Some(EventSource {
            component: Some("c".into()),
            host: None,
        });
        let cells = event_cells(&e, ts(NOW));
        assert_eq!(cells[0], cells[7], "last seen falls back to first seen");
        assert_eq!(cells[8], 1, "a zero count prints as 1");
        assert_eq!(cells[5], "c");
        let empty = Event::default();
        let cells = event_cells(&empty, ts(NOW));
        assert_eq!(cells[0], "<unknown>");
        assert_eq!(cells[7], "<unknown>");
        assert_eq!(cells[3], "");
        assert_eq!(cells[8], 1);
    }

    #[test]
    fn columns_and_priorities() {
        let cols = event_column_definitions();
        let cols = cols.as_array().unwrap();
        let names: Vec<&str> = cols.iter().map(|c| c["name"].as_str().unwrap()).collect();
        assert_eq!(
            names,
            [
                "Last Seen",
                "Type",
                "Reason",
                "Object",
                "Subobject",
                "Source",
                "Message",
                "First Seen",
                "Count",
                "Name"
            ]
        );
        let prio: Vec<u64> = cols
            .iter()
            .map(|c| c["priority"].as_u64().unwrap())
            .collect();
        assert_eq!(prio, [0, 0, 0, 0, 1, 1, 0, 1, 1, 1]);
        assert!(cols.iter().all(|c| c["type"] == "string"));
        assert_eq!(cols[9]["format"], "name");
        assert!(
            cols.iter()
                .all(|c| !c["description"].as_str().unwrap().is_empty())
        );
    }

    #[test]
    fn table_include_object_and_meta() {
        let events = [base()];
        let meta = TableMeta {
            resource_version: Some("103".into()),
            continue_: Some("tok".into()),
            remaining_item_count: None,
        };
        let now = ts(NOW);
        let t = event_table(
            &events,
            &meta,
            now,
            &TableOptions::default(),
            &core_v1_object,
        );
        assert_eq!(t["kind"], "Table");
        assert_eq!(t["apiVersion"], "meta.k8s.io/v1");
        assert_eq!(
            t["metadata"],
            json!({"resourceVersion": "103", "continue": "tok"})
        );
        assert_eq!(t["columnDefinitions"].as_array().unwrap().len(), 10);
        let obj = &t["rows"][0]["object"];
        assert_eq!(obj["kind"], "PartialObjectMetadata");
        assert_eq!(obj["metadata"]["namespace"], "default");
        assert_eq!(obj["metadata"]["resourceVersion"], "42");

        let opts = TableOptions {
            include_object: IncludeObject::None,
            no_headers: true,
            version: MetaVersion::V1Beta1,
        };
        let t = event_table(&events, &TableMeta::default(), now, &opts, &core_v1_object);
        assert_eq!(t["apiVersion"], "meta.k8s.io/v1beta1");
        assert!(t["columnDefinitions"].is_null());
        assert!(t["rows"][0]["object"].is_null());
        assert_eq!(t["metadata"], json!({}));

        let opts = TableOptions {
            include_object: IncludeObject::Object,
            ..Default::default()
        };
        let t = event_table(&events, &meta, now, &opts, &core_v1_object);
        let obj = &t["rows"][0]["object"];
        assert_eq!(obj["kind"], "Event");
        assert_eq!(obj["apiVersion"], "v1");
        assert_eq!(obj["count"], 7);
    }

    #[test]
    fn partial_list() {
        let l = partial_object_metadata_list(
            &[base()],
            &TableMeta {
                resource_version: Some("9".into()),
                ..Default::default()
            },
            MetaVersion::V1,
        );
        assert_eq!(l["kind"], "PartialObjectMetadataList");
        assert_eq!(l["metadata"]["resourceVersion"], "9");
        assert_eq!(l["items"][0]["metadata"]["name"], "web-1.17a");
        assert_eq!(l["items"][0]["kind"], "PartialObjectMetadata");
    }
}
