//! Rendering registry results in the negotiated representation.

use herald_core::event::wire::event_json;
use herald_core::event::{ApiGroup, CoreEvent};
use jiff::Timestamp;
use serde_json::{Value, json};

use crate::api::negotiate::{IncludeObject, Output};
use crate::api::table::{
    TableMeta, TableOptions, event_table, partial_object_metadata, partial_object_metadata_list,
};
use crate::registry::{EventList, INITIAL_EVENTS_END_ANNOTATION, WatchItem};

/// One event in the requested representation.
pub fn object(
    group: ApiGroup,
    e: &CoreEvent,
    out: Output,
    include: IncludeObject,
    now: Timestamp,
    no_headers: bool,
) -> Value {
    match out {
        Output::Object => event_json(group, e),
        Output::Table(version) => {
            let meta = TableMeta {
                resource_version: e.metadata.resource_version.clone(),
                ..TableMeta::default()
            };
            let opts = TableOptions {
                version,
                include_object: include,
                no_headers,
            };
            event_table(std::slice::from_ref(e), &meta, now, &opts, &|e| {
                event_json(group, e)
            })
        }
        Output::PartialObjectMetadata(v) | Output::PartialObjectMetadataList(v) => {
            partial_object_metadata(&e.metadata, v)
        }
    }
}

/// A list in the requested representation.
pub fn list(
    group: ApiGroup,
    l: &EventList,
    out: Output,
    include: IncludeObject,
    now: Timestamp,
) -> Value {
    let meta = TableMeta {
        resource_version: Some(l.resource_version.clone()),
        continue_: l.continue_.clone(),
        remaining_item_count: None,
    };
    match out {
        Output::Table(version) => {
            let opts = TableOptions {
                version,
                include_object: include,
                no_headers: false,
            };
            event_table(&l.items, &meta, now, &opts, &|e| event_json(group, e))
        }
        Output::PartialObjectMetadataList(v) | Output::PartialObjectMetadata(v) => {
            partial_object_metadata_list(&l.items, &meta, v)
        }
        Output::Object => event_list(
            group,
            &l.items,
            Some(&l.resource_version),
            l.continue_.as_deref(),
        ),
    }
}

/// An `EventList` in `group`'s shape.
pub fn event_list(
    group: ApiGroup,
    items: &[CoreEvent],
    rv: Option<&str>,
    cont: Option<&str>,
) -> Value {
    let mut meta = serde_json::Map::new();
    if let Some(rv) = rv {
        meta.insert("resourceVersion".into(), rv.into());
    }
    if let Some(c) = cont {
        meta.insert("continue".into(), c.into());
    }
    let items: Vec<Value> = items
        .iter()
        .map(|e| {
            let mut v = event_json(group, e);
            if let Some(m) = v.as_object_mut() {
                m.remove("kind");
                m.remove("apiVersion");
            }
            v
        })
        .collect();
    json!({
        "kind": "EventList",
        "apiVersion": group.api_version(),
        "metadata": meta,
        "items": items,
    })
}

/// [`event_list`] serialized straight to bytes: each item is rendered, written and dropped
/// in turn instead of first building the whole list as one JSON tree (for 100,000 events that
/// tree is hundreds of MB of small allocations, and building then walking it dominated the
/// list time). Same JSON value as `serde_json::to_vec(&event_list(..))`.
pub fn event_list_bytes(
    group: ApiGroup,
    items: &[CoreEvent],
    rv: Option<&str>,
    cont: Option<&str>,
) -> Vec<u8> {
    // ~600 bytes per typical event; a guess only, the Vec grows as needed.
    let mut out = Vec::with_capacity(256 + items.len().saturating_mul(640));
    out.extend_from_slice(b"{\"apiVersion\":");
    write_json(&mut out, &group.api_version());
    out.extend_from_slice(b",\"items\":[");
    for (i, e) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let mut v = event_json(group, e);
        if let Some(m) = v.as_object_mut() {
            m.remove("kind");
            m.remove("apiVersion");
        }
        write_json(&mut out, &v);
    }
    out.extend_from_slice(b"],\"kind\":\"EventList\",\"metadata\":{");
    let mut first = true;
    for (k, v) in [("continue", cont), ("resourceVersion", rv)] {
        if let Some(v) = v {
            if !first {
                out.push(b',');
            }
            first = false;
            write_json(&mut out, &k);
            out.push(b':');
            write_json(&mut out, &v);
        }
    }
    out.extend_from_slice(b"}}");
    out
}

fn write_json<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, v: &T) {
    // Serializing plain JSON values and strings into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, v);
}

/// The object of a BOOKMARK: the kind with only `metadata.resourceVersion` (and the
/// initial-events-end annotation).
fn bookmark_object(group: ApiGroup, rv: &str, end: bool, out: Output) -> Value {
    let mut meta = json!({"resourceVersion": rv});
    if end {
        meta["annotations"] = json!({INITIAL_EVENTS_END_ANNOTATION: "true"});
    }
    match out {
        Output::Object => {
            json!({"kind": "Event", "apiVersion": group.api_version(), "metadata": meta})
        }
        Output::Table(v) => json!({
            "kind": "Table", "apiVersion": v.api_version(), "metadata": meta,
            "columnDefinitions": null, "rows": []
        }),
        Output::PartialObjectMetadata(v) | Output::PartialObjectMetadataList(v) => {
            json!({"kind": "PartialObjectMetadata", "apiVersion": v.api_version(), "metadata": meta})
        }
    }
}

/// One watch line (`{"type":…,"object":…}\n`). `first` is true for the first object event
/// of the stream (only it carries Table column definitions).
pub fn watch_line(
    group: ApiGroup,
    item: &WatchItem,
    out: Output,
    include: IncludeObject,
    now: Timestamp,
    first: bool,
) -> Vec<u8> {
    let (ty, obj) = match item {
        WatchItem::Added(e) => ("ADDED", object(group, e, out, include, now, !first)),
        WatchItem::Modified(e) => ("MODIFIED", object(group, e, out, include, now, !first)),
        WatchItem::Deleted(e) => ("DELETED", object(group, e, out, include, now, !first)),
        WatchItem::Bookmark {
            resource_version,
            initial_events_end,
        } => (
            "BOOKMARK",
            bookmark_object(group, resource_version, *initial_events_end, out),
        ),
        WatchItem::Error(e) => ("ERROR", e.to_json()),
    };
    let mut line = serde_json::to_vec(&json!({"type": ty, "object": obj})).unwrap_or_default();
    line.push(b'\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ObjectReference;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn ev(name: &str, rv: &str) -> CoreEvent {
        CoreEvent {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                resource_version: Some(rv.into()),
                annotations: Some([("a\"b".to_string(), "c\\d".to_string())].into()),
                ..Default::default()
            },
            involved_object: ObjectReference {
                kind: Some("Pod".into()),
                name: Some("web-0".into()),
                ..Default::default()
            },
            reason: Some("BackOff".into()),
            message: Some("line\nbreak \u{e9}".into()),
            count: Some(3),
            ..Default::default()
        }
    }

    #[test]
    fn streamed_list_is_the_same_json_as_the_tree() {
        let items = [ev("a", "5"), ev("b", "6")];
        for group in [ApiGroup::Core, ApiGroup::EventsV1] {
            for (rv, cont) in [
                (Some("7"), None),
                (Some("7"), Some("tok")),
                (None, None),
                (None, Some("tok")),
            ] {
                for items in [&items[..], &[]] {
                    let bytes = event_list_bytes(group, items, rv, cont);
                    let streamed: Value = serde_json::from_slice(&bytes).unwrap();
                    assert_eq!(streamed, event_list(group, items, rv, cont));
                }
            }
        }
    }
}
