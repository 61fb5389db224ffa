//! The OpenAPI v3 documents of Herald's two group versions, and the unknown-field and
//! typed-conversion checks driven by the same schemas.
//!
//! kubectl uses these documents in two ways (the HTTP layer serves them):
//! - `kubectl create/apply -f` (default `--validate=strict`) fetches `/openapi/v3`, then the
//!   document of the manifest's group version, and looks for a path whose `patch` operation
//!   carries the manifest's `x-kubernetes-group-version-kind` and a `fieldValidation` query
//!   parameter. Finding it, kubectl leaves unknown-field checking to the server and sends
//!   `fieldValidation=Strict` (as against a real cluster). The server side of that check is
//!   [`unknown_fields`] / [`strict_decoding_error`].
//! - `kubectl explain events` reads `components.schemas`, finding the kind by its
//!   `x-kubernetes-group-version-kind` extension and following `$ref`s.
//!
//! Each document is built once ([`schema_document`]).

use std::collections::BTreeSet;
use std::sync::LazyLock;

use herald_core::status::ApiError;
use serde_json::{Map, Value, json};

use super::GroupVersion;

const META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1";
const CORE: &str = "io.k8s.api.core.v1";
const EVENTS: &str = "io.k8s.api.events.v1";

/// Upper bound on the JSON nesting [`unknown_fields`] walks; deeper values are not inspected
/// (no schema of ours is anywhere near that deep, so nothing legitimate is missed).
pub const MAX_WALK_DEPTH: usize = 32;

/// Upper bound on the unknown fields [`unknown_fields`] reports; the walk stops there.
pub const MAX_UNKNOWN_FIELDS: usize = 32;

fn reference(name: &str) -> Value {
    json!({ "$ref": format!("#/components/schemas/{name}") })
}

/// A property that is another schema: `allOf: [$ref]`, as kube-apiserver writes them.
fn obj(name: &str, description: &str) -> Value {
    json!({ "allOf": [reference(name)], "default": {}, "description": description })
}

fn string(description: &str) -> Value {
    json!({ "type": "string", "default": "", "description": description })
}

fn opt_string(description: &str) -> Value {
    json!({ "type": "string", "description": description })
}

fn int32(description: &str) -> Value {
    json!({ "type": "integer", "format": "int32", "description": description })
}

fn int64(description: &str) -> Value {
    json!({ "type": "integer", "format": "int64", "description": description })
}

fn boolean(description: &str) -> Value {
    json!({ "type": "boolean", "description": description })
}

fn string_map(description: &str) -> Value {
    json!({
        "type": "object",
        "additionalProperties": { "type": "string", "default": "" },
        "description": description,
    })
}

fn array_of(name: &str, description: &str) -> Value {
    json!({
        "type": "array",
        "items": { "allOf": [reference(name)], "default": {} },
        "description": description,
    })
}

fn gvk(group: &str, version: &str, kind: &str) -> Value {
    json!([{ "group": group, "version": version, "kind": kind }])
}

fn object_schema(description: &str, properties: Value, required: &[&str]) -> Value {
    let mut v = json!({ "type": "object", "description": description, "properties": properties });
    if !required.is_empty() {
        v["required"] = json!(required);
    }
    v
}

fn kind_and_version(props: &mut Value) {
    props["apiVersion"] =
        opt_string("APIVersion defines the versioned schema of this representation of an object.");
    props["kind"] =
        opt_string("Kind is a string value representing the REST resource this object represents.");
}

fn meta_schemas(s: &mut Map<String, Value>) {
    s.insert(
        format!("{META}.Time"),
        json!({"type": "string", "format": "date-time", "description": "A timestamp in RFC 3339 form with second precision."}),
    );
    s.insert(
        format!("{META}.MicroTime"),
        json!({"type": "string", "format": "date-time", "description": "A timestamp in RFC 3339 form with microsecond precision."}),
    );
    s.insert(
        format!("{META}.FieldsV1"),
        json!({"type": "object", "description": "The set of fields a manager owns, in the FieldsV1 trie format."}),
    );
    s.insert(
        format!("{META}.ManagedFieldsEntry"),
        object_schema(
            "Which fields a field manager owns, and from which operation.",
            json!({
                "apiVersion": opt_string("The version of the resource the fields are expressed in."),
                "fieldsType": opt_string("The format of fieldsV1; only \"FieldsV1\" exists."),
                "fieldsV1": obj(&format!("{META}.FieldsV1"), "The owned fields."),
                "manager": opt_string("The name of the field manager."),
                "operation": opt_string("Apply or Update."),
                "subresource": opt_string("The subresource the operation targeted, if any."),
                "time": obj(&format!("{META}.Time"), "When the fields were last changed by this manager."),
            }),
            &[],
        ),
    );
    s.insert(
        format!("{META}.OwnerReference"),
        {
            let mut v = object_schema(
                "Identifies an object that owns this one.",
                json!({
                    "apiVersion": string("API version of the owner."),
                    "blockOwnerDeletion": boolean("Whether the owner cannot be deleted before this object."),
                    "controller": boolean("Whether the owner is the managing controller."),
                    "kind": string("Kind of the owner."),
                    "name": string("Name of the owner."),
                    "uid": string("UID of the owner."),
                }),
                &["apiVersion", "kind", "name", "uid"],
            );
            v["x-kubernetes-map-type"] = "atomic".into();
            v
        },
    );
    s.insert(
        format!("{META}.ObjectMeta"),
        object_schema(
            "Metadata every persisted object has: name, namespace, labels, annotations and server-maintained fields.",
            json!({
                "annotations": string_map("Unstructured key/value data attached by tools; not queryable."),
                "creationTimestamp": obj(&format!("{META}.Time"), "When the server created the object. Read-only."),
                "deletionGracePeriodSeconds": int64("Seconds allowed for graceful termination once deletion was requested. Read-only."),
                "deletionTimestamp": obj(&format!("{META}.Time"), "When the object will be deleted. Read-only."),
                "finalizers": {"type": "array", "items": {"type": "string", "default": ""}, "description": "Conditions that must clear before the object is deleted.", "x-kubernetes-list-type": "set", "x-kubernetes-patch-strategy": "merge"},
                "generateName": opt_string("A prefix from which the server generates a unique name when name is empty."),
                "generation": int64("Sequence number of the desired state. Read-only."),
                "labels": string_map("Key/value pairs used to select and organise objects."),
                "managedFields": array_of(&format!("{META}.ManagedFieldsEntry"), "Which field managers own which fields."),
                "name": opt_string("Name, unique within the namespace. Required on create unless generateName is set."),
                "namespace": opt_string("The namespace the object lives in."),
                "ownerReferences": {
                    "type": "array",
                    "items": {"allOf": [reference(&format!("{META}.OwnerReference"))], "default": {}},
                    "description": "Objects this object depends on.",
                    "x-kubernetes-list-map-keys": ["uid"],
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-patch-merge-key": "uid",
                    "x-kubernetes-patch-strategy": "merge",
                },
                "resourceVersion": opt_string("Opaque version of this object, for optimistic concurrency and watches. Read-only."),
                "selfLink": opt_string("Deprecated and unset."),
                "uid": opt_string("Unique identifier over the whole lifetime of the cluster. Read-only."),
            }),
            &[],
        ),
    );
    s.insert(
        format!("{META}.ListMeta"),
        object_schema(
            "Metadata of a list: the resourceVersion it was read at and the continue token of the next page.",
            json!({
                "continue": opt_string("Token to fetch the next page; empty on the last page."),
                "remainingItemCount": int64("How many items follow this page, when known."),
                "resourceVersion": opt_string("The store revision the list was served at."),
                "selfLink": opt_string("Deprecated and unset."),
            }),
            &[],
        ),
    );
    s.insert(
        format!("{META}.StatusCause"),
        object_schema(
            "One cause of a failure.",
            json!({
                "field": opt_string("The field the cause is about, if any."),
                "message": opt_string("Human-readable description."),
                "reason": opt_string("Machine-readable reason."),
            }),
            &[],
        ),
    );
    s.insert(
        format!("{META}.StatusDetails"),
        object_schema(
            "Extra data about a failure.",
            json!({
                "causes": array_of(&format!("{META}.StatusCause"), "The individual causes."),
                "group": opt_string("The group of the resource."),
                "kind": opt_string("The resource (or kind) the failure is about."),
                "name": opt_string("The name of the object."),
                "retryAfterSeconds": int32("Seconds to wait before retrying."),
                "uid": opt_string("The UID of the object."),
            }),
            &[],
        ),
    );
    let mut status_props = json!({
        "code": int32("HTTP status code."),
        "details": obj(&format!("{META}.StatusDetails"), "Extra data about the failure."),
        "message": opt_string("Human-readable description."),
        "metadata": obj(&format!("{META}.ListMeta"), "Standard list metadata."),
        "reason": opt_string("Machine-readable reason."),
        "status": opt_string("Success or Failure."),
    });
    kind_and_version(&mut status_props);
    let mut status = object_schema(
        "The result of an operation that returns no object.",
        status_props,
        &[],
    );
    status["x-kubernetes-group-version-kind"] = gvk("", "v1", "Status");
    s.insert(format!("{META}.Status"), status);
    s.insert(
        format!("{META}.Preconditions"),
        object_schema(
            "Conditions that must hold for a delete to proceed.",
            json!({
                "resourceVersion": opt_string("The object's expected resourceVersion."),
                "uid": opt_string("The object's expected UID."),
            }),
            &[],
        ),
    );
    let mut del = json!({
        "dryRun": {"type": "array", "items": {"type": "string", "default": ""}, "description": "All: do not persist."},
        "gracePeriodSeconds": int64("Seconds before the object is deleted."),
        "orphanDependents": boolean("Deprecated: use propagationPolicy."),
        "preconditions": obj(&format!("{META}.Preconditions"), "Conditions that must hold."),
        "propagationPolicy": opt_string("Orphan, Background or Foreground."),
    });
    kind_and_version(&mut del);
    let mut del = object_schema("Options of a delete request.", del, &[]);
    del["x-kubernetes-group-version-kind"] = json!([
        {"group": "", "kind": "DeleteOptions", "version": "v1"},
        {"group": "events.k8s.io", "kind": "DeleteOptions", "version": "v1"},
    ]);
    s.insert(format!("{META}.DeleteOptions"), del);
    s.insert(
        format!("{META}.Patch"),
        json!({"type": "object", "description": "A patch body in the format named by the Content-Type."}),
    );
}

fn shared_core_schemas(s: &mut Map<String, Value>) {
    let mut reference = object_schema(
        "Enough information to inspect or modify the referred object.",
        json!({
            "apiVersion": opt_string("API version of the referent."),
            "fieldPath": opt_string("The part of the object the reference points at, e.g. spec.containers{name}."),
            "kind": opt_string("Kind of the referent."),
            "name": opt_string("Name of the referent."),
            "namespace": opt_string("Namespace of the referent."),
            "resourceVersion": opt_string("The referent's resourceVersion, if the reference is to one version."),
            "uid": opt_string("UID of the referent."),
        }),
        &[],
    );
    reference["x-kubernetes-map-type"] = "atomic".into();
    s.insert(format!("{CORE}.ObjectReference"), reference);
    s.insert(
        format!("{CORE}.EventSource"),
        object_schema(
            "Which component, on which host, produced an event.",
            json!({
                "component": opt_string("Component from which the event is generated."),
                "host": opt_string("Node name on which the event is generated."),
            }),
            &[],
        ),
    );
}

fn core_schemas(s: &mut Map<String, Value>) {
    shared_core_schemas(s);
    s.insert(
        format!("{CORE}.EventSeries"),
        object_schema(
            "A series of repeated events.",
            json!({
                "count": int32("Number of occurrences in this series up to the last heartbeat time."),
                "lastObservedTime": obj(&format!("{META}.MicroTime"), "Time of the last occurrence observed."),
            }),
            &[],
        ),
    );
    let mut props = json!({
        "action": opt_string("What action was taken or failed regarding the involved object."),
        "count": int32("The number of times this event has occurred."),
        "eventTime": obj(&format!("{META}.MicroTime"), "Time when this event was first observed."),
        "firstTimestamp": obj(&format!("{META}.Time"), "The time at which the event was first recorded."),
        "involvedObject": obj(&format!("{CORE}.ObjectReference"), "The object that this event is about."),
        "lastTimestamp": obj(&format!("{META}.Time"), "The time at which the most recent occurrence of this event was recorded."),
        "message": opt_string("A human-readable description of the status of this operation."),
        "metadata": obj(&format!("{META}.ObjectMeta"), "Standard object metadata."),
        "reason": opt_string("A short, machine-understandable reason for the transition into the object's current status."),
        "related": obj(&format!("{CORE}.ObjectReference"), "Optional secondary object for more complex actions."),
        "reportingComponent": string("Name of the controller that emitted this event, e.g. kubernetes.io/kubelet."),
        "reportingInstance": string("ID of the controller instance, e.g. kubelet-xyzf."),
        "series": obj(&format!("{CORE}.EventSeries"), "Data about the series this event represents, or nil for a singleton event."),
        "source": obj(&format!("{CORE}.EventSource"), "The component reporting this event."),
        "type": opt_string("Type of this event (Normal, Warning); new types could be added in the future."),
    });
    kind_and_version(&mut props);
    let mut event = object_schema(
        "A report of something that happened to an object. Events have a limited retention time; treat them as informative, best-effort data.",
        props,
        &["metadata", "involvedObject"],
    );
    event["x-kubernetes-group-version-kind"] = gvk("", "v1", "Event");
    s.insert(format!("{CORE}.Event"), event);
    s.insert(
        format!("{CORE}.EventList"),
        list_schema(&format!("{CORE}.Event"), "", "EventList"),
    );
}

fn events_v1_schemas(s: &mut Map<String, Value>) {
    shared_core_schemas(s);
    s.insert(
        format!("{EVENTS}.EventSeries"),
        object_schema(
            "A series of repeated events, with its heartbeat.",
            json!({
                "count": {"type": "integer", "format": "int32", "default": 0, "description": "Number of occurrences in this series up to the last heartbeat time."},
                "lastObservedTime": obj(&format!("{META}.MicroTime"), "Time of the last occurrence observed."),
            }),
            &["count", "lastObservedTime"],
        ),
    );
    let mut props = json!({
        "action": opt_string("What action was taken or failed regarding the regarding object. Required for new events; at most 128 characters."),
        "deprecatedCount": int32("Deprecated field kept for compatibility with core/v1 Event."),
        "deprecatedFirstTimestamp": obj(&format!("{META}.Time"), "Deprecated field kept for compatibility with core/v1 Event."),
        "deprecatedLastTimestamp": obj(&format!("{META}.Time"), "Deprecated field kept for compatibility with core/v1 Event."),
        "deprecatedSource": obj(&format!("{CORE}.EventSource"), "Deprecated field kept for compatibility with core/v1 Event."),
        "eventTime": obj(&format!("{META}.MicroTime"), "Time when this event was first observed. Required."),
        "metadata": obj(&format!("{META}.ObjectMeta"), "Standard object metadata."),
        "note": opt_string("A human-readable description of the status of this operation; at most 1 kB."),
        "reason": opt_string("Why the action was taken. Required for new events; at most 128 characters."),
        "regarding": obj(&format!("{CORE}.ObjectReference"), "The object this event is about."),
        "related": obj(&format!("{CORE}.ObjectReference"), "Optional secondary object for more complex actions."),
        "reportingController": opt_string("Name of the controller that emitted this event, e.g. kubernetes.io/kubelet. Required for new events."),
        "reportingInstance": opt_string("ID of the controller instance, e.g. kubelet-xyzf. Required for new events."),
        "series": obj(&format!("{EVENTS}.EventSeries"), "Data about the series this event represents, or nil for a singleton event."),
        "type": opt_string("Normal or Warning. Required for new events."),
    });
    kind_and_version(&mut props);
    let mut event = object_schema(
        "A report of something that happened to an object. Events have a limited retention time; treat them as informative, best-effort data.",
        props,
        &["eventTime"],
    );
    event["x-kubernetes-group-version-kind"] = gvk("events.k8s.io", "v1", "Event");
    s.insert(format!("{EVENTS}.Event"), event);
    s.insert(
        format!("{EVENTS}.EventList"),
        list_schema(&format!("{EVENTS}.Event"), "events.k8s.io", "EventList"),
    );
}

fn list_schema(item: &str, group: &str, kind: &str) -> Value {
    let mut props = json!({
        "items": array_of(item, "The events."),
        "metadata": obj(&format!("{META}.ListMeta"), "Standard list metadata."),
    });
    kind_and_version(&mut props);
    let mut v = object_schema("A list of events.", props, &["items"]);
    v["x-kubernetes-group-version-kind"] = gvk(group, "v1", kind);
    v
}

fn query_param(name: &str, ty: &str, description: &str) -> Value {
    json!({"name": name, "in": "query", "description": description, "schema": {"type": ty, "uniqueItems": true}})
}

fn write_params(patch: bool) -> Vec<Value> {
    let mut v = vec![
        query_param(
            "dryRun",
            "string",
            "All: run every stage except persisting.",
        ),
        query_param(
            "fieldManager",
            "string",
            "The name of the actor making the change.",
        ),
        query_param(
            "fieldValidation",
            "string",
            "How to treat unknown or duplicate fields: Ignore, Warn or Strict.",
        ),
    ];
    if patch {
        v.push(query_param(
            "force",
            "boolean",
            "Apply requests only: take ownership of conflicting fields.",
        ));
    }
    v
}

fn list_params() -> Vec<Value> {
    [
        ("allowWatchBookmarks", "boolean"),
        ("continue", "string"),
        ("fieldSelector", "string"),
        ("labelSelector", "string"),
        ("limit", "integer"),
        ("resourceVersion", "string"),
        ("resourceVersionMatch", "string"),
        ("sendInitialEvents", "boolean"),
        ("timeoutSeconds", "integer"),
        ("watch", "boolean"),
    ]
    .into_iter()
    .map(|(n, t)| query_param(n, t, "List option; see the Kubernetes API conventions."))
    .collect()
}

fn json_content(schema: &str) -> Value {
    json!({
        "application/json": {"schema": reference(schema)},
        "application/yaml": {"schema": reference(schema)},
    })
}

fn op(
    id: &str,
    action: &str,
    gv: GroupVersion,
    params: Vec<Value>,
    request: Option<Value>,
    response: &str,
    codes: &[&str],
) -> Value {
    let mut responses = Map::new();
    for c in codes {
        responses.insert(
            (*c).to_string(),
            json!({"description": "OK", "content": json_content(response)}),
        );
    }
    responses.insert("401".into(), json!({"description": "Unauthorized"}));
    let mut v = json!({
        "operationId": id,
        "tags": [if gv.group.is_empty() { "core_v1" } else { "events_v1" }],
        "parameters": params,
        "responses": responses,
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {"group": gv.group, "version": gv.version, "kind": "Event"},
    });
    if let Some(body) = request {
        v["requestBody"] = json!({"required": true, "content": body});
    }
    v
}

fn paths(gv: GroupVersion) -> Value {
    let (prefix, item, list, id) = if gv.group.is_empty() {
        (
            "/api/v1",
            format!("{CORE}.Event"),
            format!("{CORE}.EventList"),
            "CoreV1",
        )
    } else {
        (
            "/apis/events.k8s.io/v1",
            format!("{EVENTS}.Event"),
            format!("{EVENTS}.EventList"),
            "EventsV1",
        )
    };
    let patch_body = {
        let mut m = Map::new();
        for ct in [
            "application/apply-patch+yaml",
            "application/json-patch+json",
            "application/merge-patch+json",
            "application/strategic-merge-patch+json",
        ] {
            m.insert(
                ct.into(),
                json!({"schema": reference(&format!("{META}.Patch"))}),
            );
        }
        Value::Object(m)
    };
    let ns = json!({"name": "namespace", "in": "path", "required": true, "description": "object name and auth scope", "schema": {"type": "string", "uniqueItems": true}});
    let name = json!({"name": "name", "in": "path", "required": true, "description": "name of the Event", "schema": {"type": "string", "uniqueItems": true}});
    let pretty = query_param(
        "pretty",
        "string",
        "If 'true', the output is pretty printed.",
    );
    let del_body = json_content(&format!("{META}.DeleteOptions"));
    json!({
        format!("{prefix}/events"): {
            "get": op(&format!("list{id}EventForAllNamespaces"), "list", gv, list_params(), None, &list, &["200"]),
            "parameters": [pretty],
        },
        format!("{prefix}/namespaces/{{namespace}}/events"): {
            "get": op(&format!("list{id}NamespacedEvent"), "list", gv, list_params(), None, &list, &["200"]),
            "post": op(&format!("create{id}NamespacedEvent"), "post", gv, write_params(false), Some(json_content(&item)), &item, &["200", "201", "202"]),
            "delete": op(&format!("deletecollection{id}NamespacedEvent"), "deletecollection", gv, list_params(), Some(del_body.clone()), &format!("{META}.Status"), &["200"]),
            "parameters": [ns, pretty],
        },
        format!("{prefix}/namespaces/{{namespace}}/events/{{name}}"): {
            "get": op(&format!("read{id}NamespacedEvent"), "get", gv, vec![], None, &item, &["200"]),
            "put": op(&format!("replace{id}NamespacedEvent"), "put", gv, write_params(false), Some(json_content(&item)), &item, &["200", "201"]),
            "patch": op(&format!("patch{id}NamespacedEvent"), "patch", gv, write_params(true), Some(patch_body), &item, &["200", "201"]),
            "delete": op(&format!("delete{id}NamespacedEvent"), "delete", gv, vec![query_param("dryRun", "string", "All: do not persist."), query_param("gracePeriodSeconds", "integer", "Seconds before deletion."), query_param("propagationPolicy", "string", "Orphan, Background or Foreground.")], Some(del_body), &format!("{META}.Status"), &["200", "202"]),
            "parameters": [name, ns, pretty],
        },
    })
}

/// The OpenAPI v3 document of `gv` (core/v1 or events.k8s.io/v1).
pub fn document(gv: GroupVersion) -> Value {
    let mut schemas = Map::new();
    meta_schemas(&mut schemas);
    if gv.group.is_empty() {
        core_schemas(&mut schemas);
    } else {
        events_v1_schemas(&mut schemas);
    }
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.32.4+herald"},
        "paths": paths(gv),
        "components": {
            "schemas": schemas,
            "securitySchemes": {"BearerToken": {"type": "apiKey", "description": "Bearer Token authentication", "name": "authorization", "in": "header"}},
        },
    })
}

static CORE_DOC: LazyLock<Value> = LazyLock::new(|| document(GroupVersion::CORE_V1));
static EVENTS_DOC: LazyLock<Value> = LazyLock::new(|| document(GroupVersion::EVENTS_V1));

/// The OpenAPI document of `gv`, built once: what `/openapi/v3` serves, and whose
/// `components.schemas` drive the unknown-field checks.
pub fn schema_document(gv: GroupVersion) -> &'static Value {
    if gv.group.is_empty() {
        &CORE_DOC
    } else {
        &EVENTS_DOC
    }
}

/// Follows `schema`'s `$ref` (or `allOf: [$ref]`) chain to the schema it names.
pub fn resolve<'a>(schemas: &'a Map<String, Value>, mut schema: &'a Value) -> &'a Value {
    // Follow `$ref` / `allOf: [$ref]` chains; bounded, since a cycle would otherwise spin.
    for _ in 0..MAX_WALK_DEPTH {
        let r = schema
            .get("$ref")
            .or_else(|| {
                schema
                    .get("allOf")
                    .and_then(|a| a.get(0))
                    .and_then(|f| f.get("$ref"))
            })
            .and_then(Value::as_str)
            .and_then(|r| r.strip_prefix("#/components/schemas/"));
        match r.and_then(|name| schemas.get(name)) {
            Some(next) => schema = next,
            None => return schema,
        }
    }
    schema
}

/// Walks `value` against `schema`, appending unknown fields' paths to `out`. `path` is a
/// reused buffer holding the current path (restored before returning): the walk runs on
/// every write with field validation, so it allocates only for the paths it reports.
fn walk(
    schemas: &Map<String, Value>,
    schema: &Value,
    value: &Value,
    path: &mut String,
    depth: usize,
    out: &mut Vec<String>,
) {
    if depth >= MAX_WALK_DEPTH || out.len() >= MAX_UNKNOWN_FIELDS {
        return;
    }
    let schema = resolve(schemas, schema);
    let len = path.len();
    match value {
        Value::Object(map) => {
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (k, v) in map {
                    if len > 0 {
                        path.push('.');
                    }
                    path.push_str(k);
                    match props.get(k) {
                        Some(s) => walk(schemas, s, v, path, depth + 1, out),
                        None => {
                            if out.len() < MAX_UNKNOWN_FIELDS {
                                out.push(path.clone());
                            }
                        }
                    }
                    path.truncate(len);
                }
            } else if let Some(item) = schema.get("additionalProperties").filter(|a| a.is_object())
            {
                for (k, v) in map {
                    path.push('.');
                    path.push_str(k);
                    walk(schemas, item, v, path, depth + 1, out);
                    path.truncate(len);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = schema.get("items") {
                for (i, v) in items.iter().enumerate() {
                    use std::fmt::Write as _;
                    let _ = write!(path, "[{i}]");
                    walk(schemas, item, v, path, depth + 1, out);
                    path.truncate(len);
                }
            }
        }
        _ => {}
    }
}

/// The schemas of `gv`'s document and its Event schema among them.
fn event_schema(gv: GroupVersion) -> Option<(&'static Map<String, Value>, &'static Value)> {
    let root = if gv.group.is_empty() {
        format!("{CORE}.Event")
    } else {
        format!("{EVENTS}.Event")
    };
    let schemas = schema_document(gv)["components"]["schemas"].as_object()?;
    Some((schemas, schemas.get(&root)?))
}

/// The fields of `object` (an Event in `gv`'s shape, as JSON) that its schema does not know,
/// as dotted paths (`spec`, `metadata.foo`, `metadata.ownerReferences[0].bar`), in document
/// order. Free-form maps (labels, annotations, `fieldsV1`) accept any key. At most
/// [`MAX_UNKNOWN_FIELDS`] are reported and nesting deeper than [`MAX_WALK_DEPTH`] is not
/// inspected.
///
/// ```
/// use herald_wire::schema::{GroupVersion, openapi::unknown_fields};
/// let ev = serde_json::json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "x", "bogus": 1}, "spec": {}});
/// assert_eq!(unknown_fields(GroupVersion::CORE_V1, &ev), vec!["metadata.bogus", "spec"]);
/// ```
pub fn unknown_fields(gv: GroupVersion, object: &Value) -> Vec<String> {
    let Some((schemas, schema)) = event_schema(gv) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    walk(schemas, schema, object, &mut String::new(), 0, &mut out);
    let mut seen = BTreeSet::new();
    out.retain(|p| seen.insert(p.clone()));
    out
}

/// What structured-merge-diff refuses when kube-apiserver converts an applied configuration
/// (`object`, an Event in `gv`'s shape) to its typed schema before a server-side apply
/// (`typeConverter.ObjectToTyped`), whatever `fieldValidation` says: a field the schema
/// does not declare (`.foo: field not declared in schema`, `.metadata.foo: …`), an item of a
/// keyed list without its key (`.metadata.ownerReferences: element 0: associative list with
/// keys has an element that omits key field "uid" (and doesn't have default value)`), and
/// two items of a keyed list or a set with the same key (`.metadata.finalizers: duplicate
/// entries for key [="a"]`). Each error is `<path>: <message>`, the path in
/// structured-merge-diff's notation (`.a.b`, `[uid="u"]`, `[="v"]`, `[0]`).
///
/// As upstream's walk, it stops at the first undeclared field of each object (upstream
/// visits the fields in Go's random map order; here they are visited in key order), and
/// leaves the values' types to the decode. At most [`MAX_UNKNOWN_FIELDS`] errors are
/// reported and nesting deeper than [`MAX_WALK_DEPTH`] is not inspected.
///
/// ```
/// use herald_wire::schema::{GroupVersion, openapi::typed_conversion_errors};
/// let ev = serde_json::json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "x", "bogus": 1}});
/// assert_eq!(
///     typed_conversion_errors(GroupVersion::CORE_V1, &ev),
///     vec![".metadata.bogus: field not declared in schema"],
/// );
/// ```
pub fn typed_conversion_errors(gv: GroupVersion, object: &Value) -> Vec<String> {
    let Some((schemas, schema)) = event_schema(gv) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    typed_walk(schemas, schema, object, &mut String::new(), 0, &mut out);
    out
}

/// structured-merge-diff's rendering of a key value in a path (`value.ToString`): strings
/// Go-quoted, other scalars as JSON prints them.
fn smd_value(v: &Value) -> String {
    match v {
        Value::String(s) => herald_core::labels::go_quote(s),
        other => other.to_string(),
    }
}

fn typed_walk(
    schemas: &Map<String, Value>,
    schema: &Value,
    value: &Value,
    path: &mut String,
    depth: usize,
    out: &mut Vec<String>,
) {
    if depth >= MAX_WALK_DEPTH || out.len() >= MAX_UNKNOWN_FIELDS {
        return;
    }
    let schema = resolve(schemas, schema);
    let len = path.len();
    match value {
        Value::Object(map) => {
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (k, v) in map {
                    path.push('.');
                    path.push_str(k);
                    match props.get(k) {
                        Some(s) => typed_walk(schemas, s, v, path, depth + 1, out),
                        None => {
                            out.push(format!("{path}: field not declared in schema"));
                            path.truncate(len);
                            return;
                        }
                    }
                    path.truncate(len);
                }
            } else if let Some(item) = schema.get("additionalProperties").filter(|a| a.is_object())
            {
                for (k, v) in map {
                    path.push('.');
                    path.push_str(k);
                    typed_walk(schemas, item, v, path, depth + 1, out);
                    path.truncate(len);
                }
            }
        }
        Value::Array(items) => {
            let Some(item_schema) = schema.get("items") else {
                return;
            };
            let keys: Vec<&str> = match schema.get("x-kubernetes-list-type").and_then(Value::as_str)
            {
                Some("map") => schema
                    .get("x-kubernetes-list-map-keys")
                    .and_then(Value::as_array)
                    .map(|k| k.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default(),
                _ => Vec::new(),
            };
            let set = schema.get("x-kubernetes-list-type").and_then(Value::as_str) == Some("set");
            let mut seen = BTreeSet::new();
            for (i, item) in items.iter().enumerate() {
                use std::fmt::Write as _;
                let element = if !keys.is_empty() {
                    let Some(obj) = item.as_object() else {
                        out.push(format!(
                            "{path}: element {i}: associative list with keys may not have non-map elements"
                        ));
                        return;
                    };
                    let mut parts = Vec::with_capacity(keys.len());
                    for k in &keys {
                        match obj.get(*k) {
                            Some(v) => parts.push(format!("{k}={}", smd_value(v))),
                            None => {
                                out.push(format!(
                                    "{path}: element {i}: associative list with keys has an element that omits key field {} (and doesn't have default value)",
                                    herald_core::labels::go_quote(k)
                                ));
                                return;
                            }
                        }
                    }
                    format!("[{}]", parts.join(","))
                } else if set {
                    format!("[={}]", smd_value(item))
                } else {
                    format!("[{i}]")
                };
                if (set || !keys.is_empty()) && !seen.insert(element.clone()) {
                    out.push(format!("{path}: duplicate entries for key {element}"));
                }
                let _ = write!(path, "{element}");
                typed_walk(schemas, item_schema, item, path, depth + 1, out);
                path.truncate(len);
                if out.len() >= MAX_UNKNOWN_FIELDS {
                    return;
                }
            }
        }
        _ => {}
    }
}

/// The 400 kube-apiserver answers under `fieldValidation=Strict`, from the body's problems
/// as the server's field validation words them, e.g.
/// `Event in version "v1" cannot be handled as a Event: strict decoding error: unknown field "spec"`.
pub fn strict_decoding_error(gv: GroupVersion, problems: &[String]) -> ApiError {
    ApiError::bad_request(format!(
        "Event in version {:?} cannot be handled as a Event: strict decoding error: {}",
        gv.version,
        problems.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn patch_op(doc: &Value) -> &Value {
        let paths = doc["paths"].as_object().unwrap();
        paths
            .values()
            .find_map(|p| p.get("patch"))
            .expect("a patch operation")
    }

    #[test]
    fn patch_operation_advertises_field_validation() {
        for (gv, group) in [
            (GroupVersion::CORE_V1, ""),
            (GroupVersion::EVENTS_V1, "events.k8s.io"),
        ] {
            let doc = document(gv);
            let patch = patch_op(&doc);
            assert_eq!(
                patch["x-kubernetes-group-version-kind"],
                json!({"group": group, "version": "v1", "kind": "Event"})
            );
            let params = patch["parameters"].as_array().unwrap();
            assert!(
                params
                    .iter()
                    .any(|p| p["name"] == "fieldValidation" && p["in"] == "query")
            );
        }
    }

    #[test]
    fn schemas_carry_gvk_and_resolve() {
        let doc = document(GroupVersion::EVENTS_V1);
        let schemas = doc["components"]["schemas"].as_object().unwrap();
        let ev = &schemas["io.k8s.api.events.v1.Event"];
        assert_eq!(
            ev["x-kubernetes-group-version-kind"][0]["group"],
            "events.k8s.io"
        );
        for name in [
            "regarding",
            "series",
            "deprecatedSource",
            "metadata",
            "eventTime",
        ] {
            let p = &ev["properties"][name];
            let target = resolve(schemas, p);
            assert!(!std::ptr::eq(target, p), "{name} resolves to a component");
        }
        // Every $ref points at a schema that exists.
        let text = doc.to_string();
        for part in text.split("#/components/schemas/").skip(1) {
            let name = &part[..part.find('"').unwrap()];
            assert!(schemas.contains_key(name), "dangling $ref {name}");
        }
    }

    #[test]
    fn unknown_fields_core_and_events() {
        let ok = json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "x", "labels": {"any": "thing"}, "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u"}],
                         "managedFields": [{"manager": "m", "fieldsV1": {"f:message": {}}}]},
            "involvedObject": {"kind": "Pod", "name": "x"},
            "source": {"component": "c"}, "series": {"count": 2, "lastObservedTime": "2024-01-01T00:00:00.000000Z"},
            "count": 3, "message": "m",
        });
        assert!(unknown_fields(GroupVersion::CORE_V1, &ok).is_empty());
        let bad = json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "x", "ownerReferences": [{"uid": "u", "extra": true}]},
            "involvedObject": {"kind": "Pod", "nme": "x"},
            "note": "core has no note",
        });
        assert_eq!(
            unknown_fields(GroupVersion::CORE_V1, &bad),
            vec![
                "involvedObject.nme",
                "metadata.ownerReferences[0].extra",
                "note"
            ]
        );
        let ev = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "note": "n", "message": "core only",
                        "regarding": {"kind": "Pod"}, "series": {"count": 1, "lastObservedTime": "x", "state": "old"}});
        assert_eq!(
            unknown_fields(GroupVersion::EVENTS_V1, &ev),
            vec!["message", "series.state"]
        );
    }

    #[test]
    fn typed_conversion_errors_as_structured_merge_diff() {
        let gv = GroupVersion::CORE_V1;
        let ok = json!({"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "x", "labels": {"any": "thing"}, "finalizers": ["a", "b"],
                         "ownerReferences": [{"uid": "u1", "name": "p"}, {"uid": "u2"}]},
            "involvedObject": {"kind": "Pod", "fieldPath": "spec"}, "count": "types are the decode's"});
        assert!(typed_conversion_errors(gv, &ok).is_empty());
        // The first undeclared field of each object, in key order; keyed items by key.
        let bad = json!({"zz": 1, "aa": 1, "metadata": {"foo": 1},
            "source": {"host": "h", "bar": 2},
            "related": {"uid": "u"}});
        assert_eq!(
            typed_conversion_errors(gv, &bad),
            vec![".aa: field not declared in schema"]
        );
        let nested = json!({"metadata": {"foo": 1, "ownerReferences": [{"uid": "u", "x": 1}]},
            "source": {"bar": 2}});
        assert_eq!(
            typed_conversion_errors(gv, &nested),
            vec![
                ".metadata.foo: field not declared in schema",
                ".source.bar: field not declared in schema"
            ]
        );
        let owners = json!({"metadata": {"ownerReferences": [{"uid": "u", "x": 1}]}});
        assert_eq!(
            typed_conversion_errors(gv, &owners),
            vec![r#".metadata.ownerReferences[uid="u"].x: field not declared in schema"#]
        );
        let lists = json!({"metadata": {"finalizers": ["a", "a"],
            "ownerReferences": [{"uid": "u"}, {"uid": "u"}]}});
        assert_eq!(
            typed_conversion_errors(gv, &lists),
            vec![
                r#".metadata.finalizers: duplicate entries for key [="a"]"#,
                r#".metadata.ownerReferences: duplicate entries for key [uid="u"]"#
            ]
        );
        let keyless = json!({"metadata": {"ownerReferences": [{"uid": "u"}, {"name": "p"}]}});
        assert_eq!(
            typed_conversion_errors(gv, &keyless),
            vec![
                r#".metadata.ownerReferences: element 1: associative list with keys has an element that omits key field "uid" (and doesn't have default value)"#
            ]
        );
        let v1 = json!({"note": "n", "regarding": {"kind": "Pod"}, "deprecatedSource": {"x": 1}});
        assert_eq!(
            typed_conversion_errors(GroupVersion::EVENTS_V1, &v1),
            vec![".deprecatedSource.x: field not declared in schema"]
        );
        // Bounded.
        let mut deep = json!({});
        for _ in 0..200 {
            deep = json!({"metadata": deep});
        }
        assert_eq!(
            typed_conversion_errors(gv, &deep),
            vec![".metadata.metadata: field not declared in schema"]
        );
    }

    #[test]
    fn strict_error_message() {
        let problems = [
            r#"unknown field "spec""#.to_string(),
            r#"duplicate field "metadata.name""#.to_string(),
        ];
        let e = strict_decoding_error(GroupVersion::CORE_V1, &problems);
        assert_eq!(e.code, 400);
        assert_eq!(
            e.message,
            r#"Event in version "v1" cannot be handled as a Event: strict decoding error: unknown field "spec", duplicate field "metadata.name""#
        );
    }

    #[test]
    fn unknown_fields_bounded() {
        let mut m = Map::new();
        for i in 0..100 {
            m.insert(format!("f{i}"), json!(1));
        }
        assert_eq!(
            unknown_fields(GroupVersion::CORE_V1, &Value::Object(m)).len(),
            MAX_UNKNOWN_FIELDS
        );
        let mut deep = json!({});
        for _ in 0..200 {
            deep = json!({"metadata": deep});
        }
        // Nested far past the schema: reported once at the first unknown level, no overflow.
        let found = unknown_fields(GroupVersion::CORE_V1, &deep);
        assert_eq!(found, vec!["metadata.metadata"]);
    }
}
