//! Per-group event validation: exact field paths, reasons and messages as kube-apiserver
//! answers them.

use std::collections::BTreeMap;

use herald_core::event::convert::events_v1_to_core;
use herald_core::event::validate::{create_strategy_causes, validate_create, validate_update};
use herald_core::event::{ApiGroup, CoreEvent, EventsV1Event};
use herald_core::status::{ApiError, Reason};
use k8s_openapi::api::core::v1::{EventSeries, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;

const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const QNAME_MSG: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

/// A legacy core/v1 event as client-go's recorder posts it.
fn legacy() -> CoreEvent {
    CoreEvent {
        metadata: ObjectMeta {
            name: Some("web-0.17a".into()),
            namespace: Some("team-a".into()),
            ..Default::default()
        },
        involved_object: ObjectReference {
            kind: Some("Pod".into()),
            name: Some("web-0".into()),
            namespace: Some("team-a".into()),
            ..Default::default()
        },
        reason: Some("BackOff".into()),
        message: Some("Back-off restarting".into()),
        source: Some(EventSource {
            component: Some("kubelet".into()),
            host: Some("node-1".into()),
        }),
        first_timestamp: Some(Time(ts("2026-01-01T00:00:00Z"))),
        last_timestamp: Some(Time(ts("2026-01-01T00:00:00Z"))),
        count: Some(1),
        type_: Some("Warning".into()),
        ..Default::default()
    }
}

/// A valid events.k8s.io/v1 event, in storage shape.
fn modern() -> CoreEvent {
    let v1 = EventsV1Event {
        metadata: ObjectMeta {
            name: Some("web-0.17b".into()),
            namespace: Some("team-a".into()),
            resource_version: Some("5".into()),
            ..Default::default()
        },
        event_time: Some(MicroTime(ts("2026-01-01T00:00:00.123456Z"))),
        reporting_controller: Some("example.com/controller".into()),
        reporting_instance: Some("controller-7f".into()),
        action: Some("Reconcile".into()),
        reason: Some("Synced".into()),
        regarding: Some(ObjectReference {
            kind: Some("Deployment".into()),
            name: Some("web".into()),
            namespace: Some("team-a".into()),
            ..Default::default()
        }),
        note: Some("synced".into()),
        type_: Some("Normal".into()),
        ..Default::default()
    };
    events_v1_to_core(v1)
}

fn causes(err: &ApiError) -> Vec<(String, String, String)> {
    err.causes
        .iter()
        .map(|c| (c.reason.clone(), c.field.clone(), c.message.clone()))
        .collect()
}

fn c(reason: &str, field: &str, message: &str) -> (String, String, String) {
    (reason.into(), field.into(), message.into())
}

type Case = (
    &'static str,
    fn(&mut CoreEvent),
    Vec<(String, String, String)>,
);

fn run_create(group: ApiGroup, base: fn() -> CoreEvent, cases: Vec<Case>) {
    for (name, mutate, want) in cases {
        let mut ev = base();
        mutate(&mut ev);
        let got = validate_create(&ev, group);
        if want.is_empty() {
            assert!(got.is_ok(), "{name}: expected OK, got {got:?}");
            continue;
        }
        let err = got.expect_err(name);
        assert_eq!(err.code, 422, "{name}");
        assert_eq!(err.reason, Reason::Invalid, "{name}");
        assert_eq!(causes(&err), want, "{name}");
    }
}

#[test]
fn core_create_is_lax() {
    let long = "x".repeat(2000);
    let cases: Vec<Case> = vec![
        ("valid legacy event", |_| {}, vec![]),
        (
            "any type is accepted on core/v1",
            |e| e.type_ = Some("Info".into()),
            vec![],
        ),
        ("no type at all", |e| e.type_ = None, vec![]),
        (
            "name with capitals and underscores",
            |e| e.metadata.name = Some("Web_0".into()),
            vec![],
        ),
        (
            "deprecated-looking fields are fine",
            |e| e.count = Some(9),
            vec![],
        ),
        (
            "involvedObject namespace differs",
            |e| e.involved_object.namespace = Some("other".into()),
            vec![c(
                "FieldValueInvalid",
                "involvedObject.namespace",
                r#"Invalid value: "other": does not match event.namespace"#,
            )],
        ),
        (
            "cluster-scoped object in default is fine",
            |e| {
                e.involved_object.namespace = None;
                e.metadata.namespace = Some("default".into());
            },
            vec![],
        ),
        (
            "cluster-scoped object outside default",
            |e| {
                e.involved_object.namespace = None;
                e.metadata.namespace = Some("kube-system".into());
            },
            vec![c(
                "FieldValueInvalid",
                "involvedObject.namespace",
                r#"Invalid value: "": does not match event.namespace"#,
            )],
        ),
        (
            "namespace must be a DNS subdomain",
            |e| {
                e.involved_object.namespace = Some("Team_A".into());
                e.metadata.namespace = Some("Team_A".into());
            },
            vec![c(
                "FieldValueInvalid",
                "namespace",
                &format!(r#"Invalid value: "Team_A": {SUBDOMAIN_MSG}"#),
            )],
        ),
        (
            "generic rule: namespace must be a DNS label",
            |e| {
                e.involved_object.namespace = Some("team.a".into());
                e.metadata.namespace = Some("team.a".into());
            },
            vec![c(
                "FieldValueInvalid",
                "metadata.namespace",
                r#"Invalid value: "team.a": must not contain dots"#,
            )],
        ),
        (
            "generic rule: name is a path segment",
            |e| e.metadata.name = Some("a/b%c".into()),
            vec![
                c(
                    "FieldValueInvalid",
                    "metadata.name",
                    r#"Invalid value: "a/b%c": may not contain '/'"#,
                ),
                c(
                    "FieldValueInvalid",
                    "metadata.name",
                    r#"Invalid value: "a/b%c": may not contain '%'"#,
                ),
            ],
        ),
        (
            "generic rule: name may not be ..",
            |e| e.metadata.name = Some("..".into()),
            vec![c(
                "FieldValueInvalid",
                "metadata.name",
                r#"Invalid value: "..": may not be '..'"#,
            )],
        ),
        (
            "generic rule: name or generateName",
            |e| e.metadata.name = None,
            vec![c(
                "FieldValueRequired",
                "metadata.name",
                "Required value: name or generateName is required",
            )],
        ),
        (
            "new-style event on core needs reporting fields",
            |e| {
                e.event_time = Some(MicroTime(ts("2026-01-01T00:00:00Z")));
                e.action = None;
                e.reason = None;
            },
            vec![
                c("FieldValueRequired", "reportingComponent", "Required value"),
                c(
                    "FieldValueInvalid",
                    "reportingComponent",
                    r#"Invalid value: "": name part must be non-empty"#,
                ),
                c(
                    "FieldValueInvalid",
                    "reportingComponent",
                    &format!(r#"Invalid value: "": {QNAME_MSG}"#),
                ),
                c("FieldValueRequired", "reportingInstance", "Required value"),
                c("FieldValueRequired", "action", "Required value"),
                c("FieldValueRequired", "reason", "Required value"),
            ],
        ),
        (
            "new-style event: cluster-scoped object outside default/kube-system",
            |e| {
                e.event_time = Some(MicroTime(ts("2026-01-01T00:00:00Z")));
                e.reporting_component = Some("kubelet".into());
                e.reporting_instance = Some("node-1".into());
                e.action = Some("Act".into());
                e.involved_object.namespace = None;
            },
            vec![c(
                "FieldValueInvalid",
                "involvedObject.namespace",
                r#"Invalid value: "": does not match event.namespace"#,
            )],
        ),
        (
            "legacy event: message length is not limited",
            |e| e.message = Some("m".repeat(5000)),
            vec![],
        ),
    ];
    run_create(ApiGroup::Core, legacy, cases);
    // Length limits only bite when eventTime is set.
    let mut ev = legacy();
    ev.event_time = Some(MicroTime(ts("2026-01-01T00:00:00Z")));
    ev.reporting_component = Some("kubelet".into());
    ev.reporting_instance = Some(long[..129].to_string());
    ev.action = Some(long[..129].to_string());
    ev.reason = Some(long[..129].to_string());
    ev.message = Some(long[..1025].to_string());
    let err = validate_create(&ev, ApiGroup::Core).unwrap_err();
    assert_eq!(
        causes(&err),
        vec![
            c(
                "FieldValueInvalid",
                "reportingInstance",
                r#"Invalid value: "": can have at most 128 characters"#
            ),
            c(
                "FieldValueInvalid",
                "action",
                r#"Invalid value: "": can have at most 128 characters"#
            ),
            c(
                "FieldValueInvalid",
                "reason",
                r#"Invalid value: "": can have at most 128 characters"#
            ),
            c(
                "FieldValueInvalid",
                "message",
                r#"Invalid value: "": can have at most 1024 characters"#
            ),
        ]
    );
    // Exactly at the limits is fine.
    ev.reporting_instance = Some(long[..128].to_string());
    ev.action = Some(long[..128].to_string());
    ev.reason = Some(long[..128].to_string());
    ev.message = Some(long[..1024].to_string());
    assert!(validate_create(&ev, ApiGroup::Core).is_ok());
}

#[test]
fn events_v1_create_is_strict() {
    let cases: Vec<Case> = vec![
        ("valid", |_| {}, vec![]),
        (
            "Warning is a type",
            |e| e.type_ = Some("Warning".into()),
            vec![],
        ),
        (
            "eventTime required",
            |e| {
                e.event_time = None;
            },
            vec![c("FieldValueRequired", "eventTime", "Required value")],
        ),
        (
            "type must be Normal or Warning",
            |e| e.type_ = Some("Info".into()),
            vec![c(
                "FieldValueInvalid",
                "type",
                r#"Invalid value: "": has invalid value: Info"#,
            )],
        ),
        (
            "type missing",
            |e| e.type_ = None,
            vec![c(
                "FieldValueInvalid",
                "type",
                r#"Invalid value: "": has invalid value: "#,
            )],
        ),
        (
            "deprecated fields must be unset",
            |e| {
                e.first_timestamp = Some(Time(ts("2026-01-01T00:00:00Z")));
                e.last_timestamp = Some(Time(ts("2026-01-01T00:00:00Z")));
                e.count = Some(3);
                e.source = Some(EventSource {
                    component: None,
                    host: Some("h".into()),
                });
            },
            vec![
                c(
                    "FieldValueInvalid",
                    "firstTimestamp",
                    r#"Invalid value: "": needs to be unset"#,
                ),
                c(
                    "FieldValueInvalid",
                    "lastTimestamp",
                    r#"Invalid value: "": needs to be unset"#,
                ),
                c(
                    "FieldValueInvalid",
                    "count",
                    r#"Invalid value: "": needs to be unset"#,
                ),
                c(
                    "FieldValueInvalid",
                    "source",
                    r#"Invalid value: "": needs to be unset"#,
                ),
            ],
        ),
        (
            "empty deprecated values count as unset",
            |e| {
                e.count = Some(0);
                e.source = Some(EventSource {
                    component: Some(String::new()),
                    host: None,
                });
            },
            vec![],
        ),
        (
            "series needs count >= 2 and lastObservedTime",
            |e| {
                e.series = Some(EventSeries {
                    count: Some(1),
                    last_observed_time: None,
                });
            },
            vec![
                c(
                    "FieldValueInvalid",
                    "series.count",
                    r#"Invalid value: "": should be at least 2"#,
                ),
                c(
                    "FieldValueRequired",
                    "series.lastObservedTime",
                    "Required value",
                ),
            ],
        ),
        (
            "valid series",
            |e| {
                e.series = Some(EventSeries {
                    count: Some(2),
                    last_observed_time: Some(MicroTime(ts("2026-01-01T00:01:00Z"))),
                });
            },
            vec![],
        ),
        (
            "name must be a DNS subdomain",
            |e| e.metadata.name = Some("Web_0".into()),
            vec![c(
                "FieldValueInvalid",
                "metadata.name",
                &format!(r#"Invalid value: "Web_0": {SUBDOMAIN_MSG}"#),
            )],
        ),
        (
            "name too long",
            |e| e.metadata.name = Some("a".repeat(254)),
            vec![c(
                "FieldValueInvalid",
                "metadata.name",
                &format!(
                    r#"Invalid value: "{}": must be no more than 253 characters"#,
                    "a".repeat(254)
                ),
            )],
        ),
        (
            "generateName prefix may end with a dash",
            |e| e.metadata.generate_name = Some("web-".into()),
            vec![],
        ),
        (
            "bad generateName",
            |e| e.metadata.generate_name = Some("Web-".into()),
            vec![c(
                "FieldValueInvalid",
                "metadata.generateName",
                &format!(r#"Invalid value: "Web-": {SUBDOMAIN_MSG}"#),
            )],
        ),
        (
            "reportingController must be a qualified name",
            |e| e.reporting_component = Some("a/b/c".into()),
            vec![c(
                "FieldValueInvalid",
                "reportingController",
                "Invalid value: \"a/b/c\": a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
            )],
        ),
        (
            "reportingController prefix must be a subdomain",
            |e| e.reporting_component = Some("Example.com/ctl".into()),
            vec![c(
                "FieldValueInvalid",
                "reportingController",
                &format!(r#"Invalid value: "Example.com/ctl": prefix part {SUBDOMAIN_MSG}"#),
            )],
        ),
        (
            "reportingInstance too long",
            |e| e.reporting_instance = Some("i".repeat(129)),
            vec![c(
                "FieldValueInvalid",
                "reportingInstance",
                r#"Invalid value: "": can have at most 128 characters"#,
            )],
        ),
        (
            "note too long (reported on message)",
            |e| e.message = Some("n".repeat(1025)),
            vec![c(
                "FieldValueInvalid",
                "message",
                r#"Invalid value: "": can have at most 1024 characters"#,
            )],
        ),
        (
            "regarding namespace must match for legacy-style (no eventTime)",
            |e| {
                e.event_time = None;
                e.involved_object.namespace = Some("other".into());
            },
            vec![
                c(
                    "FieldValueInvalid",
                    "involvedObject.namespace",
                    r#"Invalid value: "other": does not match event.namespace"#,
                ),
                c("FieldValueRequired", "eventTime", "Required value"),
            ],
        ),
        (
            "labels: bad key and value",
            |e| {
                let mut l = BTreeMap::new();
                l.insert("bad key".to_string(), "ok".to_string());
                l.insert("app".to_string(), "-bad".to_string());
                e.metadata.labels = Some(l);
            },
            vec![
                c(
                    "FieldValueInvalid",
                    "metadata.labels",
                    "Invalid value: \"-bad\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
                ),
                c(
                    "FieldValueInvalid",
                    "metadata.labels",
                    &format!(r#"Invalid value: "bad key": {QNAME_MSG}"#),
                ),
            ],
        ),
        (
            "label value too long",
            |e| {
                let mut l = BTreeMap::new();
                l.insert("app".to_string(), "v".repeat(64));
                e.metadata.labels = Some(l);
            },
            vec![c(
                "FieldValueInvalid",
                "metadata.labels",
                &format!(
                    r#"Invalid value: "{}": must be no more than 63 characters"#,
                    "v".repeat(64)
                ),
            )],
        ),
        (
            "annotations: keys are case-insensitive qualified names, total size limited",
            |e| {
                let mut a = BTreeMap::new();
                a.insert("Example.COM/Key".to_string(), "fine".to_string());
                a.insert("big".to_string(), "x".repeat(256 * 1024));
                e.metadata.annotations = Some(a);
            },
            vec![c(
                "FieldValueTooLong",
                "metadata.annotations",
                "Too long: may not be more than 262144 bytes",
            )],
        ),
        (
            "namespace is required in metadata",
            |e| {
                e.metadata.namespace = None;
                e.involved_object.namespace = None;
            },
            vec![
                c(
                    "FieldValueInvalid",
                    "involvedObject.namespace",
                    r#"Invalid value: "": does not match event.namespace"#,
                ),
                c(
                    "FieldValueInvalid",
                    "namespace",
                    &format!(r#"Invalid value: "": {SUBDOMAIN_MSG}"#),
                ),
                c("FieldValueRequired", "metadata.namespace", "Required value"),
            ],
        ),
        (
            "finalizers: unqualified non-standard names",
            |e| e.metadata.finalizers = Some(vec!["custom".into(), "kubernetes".into()]),
            vec![c(
                "FieldValueInvalid",
                "metadata.finalizers[0]",
                r#"Invalid value: "custom": name is neither a standard finalizer name nor is it fully qualified"#,
            )],
        ),
        (
            "owner references need version, kind, name, uid",
            |e| {
                e.metadata.owner_references = Some(vec![OwnerReference {
                    api_version: "apps/".into(),
                    ..Default::default()
                }])
            },
            vec![
                c(
                    "FieldValueInvalid",
                    "metadata.ownerReferences.apiVersion",
                    r#"Invalid value: "apps/": version must not be empty"#,
                ),
                c(
                    "FieldValueInvalid",
                    "metadata.ownerReferences.kind",
                    r#"Invalid value: "": must not be empty"#,
                ),
                c(
                    "FieldValueInvalid",
                    "metadata.ownerReferences.name",
                    r#"Invalid value: "": must not be empty"#,
                ),
                c(
                    "FieldValueInvalid",
                    "metadata.ownerReferences.uid",
                    r#"Invalid value: "": must not be empty"#,
                ),
            ],
        ),
        (
            "negative generation",
            |e| e.metadata.generation = Some(-1),
            vec![c(
                "FieldValueInvalid",
                "metadata.generation",
                "Invalid value: -1: must be greater than or equal to 0",
            )],
        ),
    ];
    run_create(ApiGroup::EventsV1, modern, cases);
}

#[test]
fn invalid_message_names_the_qualified_kind_and_joins_causes() {
    let mut ev = modern();
    ev.type_ = Some("Info".into());
    ev.event_time = None;
    let err = validate_create(&ev, ApiGroup::EventsV1).unwrap_err();
    assert_eq!(
        err.message,
        r#"Event.events.k8s.io "web-0.17b" is invalid: [eventTime: Required value, type: Invalid value: "": has invalid value: Info]"#
    );
    let status = err.to_json();
    assert_eq!(status["details"]["kind"], "Event");
    assert_eq!(status["details"]["group"], "events.k8s.io");
    assert_eq!(
        status["details"]["causes"][0]["reason"],
        "FieldValueRequired"
    );
    assert_eq!(status["details"]["causes"][0]["field"], "eventTime");

    let mut ev = legacy();
    ev.involved_object.namespace = Some("x".into());
    let err = validate_create(&ev, ApiGroup::Core).unwrap_err();
    assert_eq!(
        err.message,
        r#"Event "web-0.17a" is invalid: involvedObject.namespace: Invalid value: "x": does not match event.namespace"#
    );
}

#[test]
fn strategy_errors_come_before_generic_metadata_errors() {
    // Both a strategy error and a generic metadata error: only the strategy one is reported.
    let mut ev = legacy();
    ev.metadata.name = Some("a/b".into());
    ev.involved_object.namespace = Some("other".into());
    let err = validate_create(&ev, ApiGroup::Core).unwrap_err();
    assert_eq!(err.causes.len(), 1);
    assert_eq!(err.causes[0].field, "involvedObject.namespace");
    // Strategy rules alone do not include the generic path-segment name rule.
    ev.involved_object.namespace = Some("team-a".into());
    assert!(create_strategy_causes(&ev, ApiGroup::Core).is_empty());
    assert!(validate_create(&ev, ApiGroup::Core).is_err());
}

#[test]
fn events_v1_rules_apply_to_the_request_group_not_the_object() {
    // A legacy object is fine through core/v1 and rejected through events.k8s.io/v1.
    let ev = legacy();
    assert!(validate_create(&ev, ApiGroup::Core).is_ok());
    let err = validate_create(&ev, ApiGroup::EventsV1).unwrap_err();
    let fields: Vec<&str> = err.causes.iter().map(|c| c.field.as_str()).collect();
    assert_eq!(
        fields,
        [
            "eventTime",
            "firstTimestamp",
            "lastTimestamp",
            "count",
            "source"
        ]
    );
}

fn updated(base: fn() -> CoreEvent, f: fn(&mut CoreEvent)) -> (CoreEvent, CoreEvent) {
    let old = base();
    let mut new = old.clone();
    f(&mut new);
    (new, old)
}

#[test]
fn core_update_has_no_immutability() {
    let mut old = legacy();
    old.metadata.resource_version = Some("3".into());
    let mut new = old.clone();
    new.reason = Some("Other".into());
    new.message = Some("changed".into());
    new.count = Some(5);
    new.type_ = Some("Anything".into());
    new.involved_object.name = Some("web-1".into());
    assert!(validate_update(&new, &old, ApiGroup::Core).is_ok());
    // But legacy rules and generic metadata update rules still hold.
    new.involved_object.namespace = Some("other".into());
    new.metadata.uid = Some("changed".into());
    let err = validate_update(&new, &old, ApiGroup::Core).unwrap_err();
    assert_eq!(
        causes(&err),
        vec![
            c(
                "FieldValueInvalid",
                "metadata.uid",
                r#"Invalid value: "changed": field is immutable"#
            ),
            c(
                "FieldValueInvalid",
                "involvedObject.namespace",
                r#"Invalid value: "other": does not match event.namespace"#
            ),
        ]
    );
}

#[test]
fn events_v1_update_immutability() {
    let cases: Vec<Case> = vec![
        ("no change", |_| {}, vec![]),
        (
            "labels may change",
            |e| {
                e.metadata.labels = Some(BTreeMap::from([("a".to_string(), "b".to_string())]));
            },
            vec![],
        ),
        (
            "reason is checked twice, as kube does",
            |e| e.reason = Some("New".into()),
            vec![
                c(
                    "FieldValueInvalid",
                    "reason",
                    r#"Invalid value: "New": field is immutable"#,
                ),
                c(
                    "FieldValueInvalid",
                    "reason",
                    r#"Invalid value: "New": field is immutable"#,
                ),
            ],
        ),
        (
            "note",
            |e| e.message = Some("other".into()),
            vec![c(
                "FieldValueInvalid",
                "message",
                r#"Invalid value: "other": field is immutable"#,
            )],
        ),
        (
            "regarding",
            |e| e.involved_object.name = Some("api".into()),
            vec![c(
                "FieldValueInvalid",
                "involvedObject",
                r#"Invalid value: core.ObjectReference{Kind:"Deployment", Namespace:"team-a", Name:"api", UID:"", APIVersion:"", ResourceVersion:"", FieldPath:""}: field is immutable"#,
            )],
        ),
        (
            "eventTime within the same microsecond is tolerated",
            |e| e.event_time = Some(MicroTime(ts("2026-01-01T00:00:00.123456999Z"))),
            vec![],
        ),
        (
            "eventTime",
            |e| e.event_time = Some(MicroTime(ts("2026-01-01T00:00:00.123457Z"))),
            vec![c(
                "FieldValueInvalid",
                "eventTime",
                "Invalid value: 2026-01-01 00:00:00.123457 +0000 UTC: field is immutable",
            )],
        ),
        (
            "deprecated fields",
            |e| {
                e.count = Some(2);
                e.first_timestamp = Some(Time(ts("2026-01-01T00:00:01Z")));
                e.source = Some(EventSource {
                    component: Some("c".into()),
                    host: None,
                });
            },
            vec![
                c(
                    "FieldValueInvalid",
                    "source",
                    r#"Invalid value: core.EventSource{Component:"c", Host:""}: field is immutable"#,
                ),
                c(
                    "FieldValueInvalid",
                    "firstTimestamp",
                    "Invalid value: 2026-01-01 00:00:01 +0000 UTC: field is immutable",
                ),
                c(
                    "FieldValueInvalid",
                    "count",
                    "Invalid value: 2: field is immutable",
                ),
            ],
        ),
        (
            "type, action, related, reporting fields",
            |e| {
                e.type_ = Some("Warning".into());
                e.action = Some("Other".into());
                e.related = Some(ObjectReference {
                    kind: Some("Node".into()),
                    ..Default::default()
                });
                e.reporting_component = Some("other".into());
                e.reporting_instance = Some("other-1".into());
            },
            vec![
                c(
                    "FieldValueInvalid",
                    "type",
                    r#"Invalid value: "Warning": field is immutable"#,
                ),
                c(
                    "FieldValueInvalid",
                    "action",
                    r#"Invalid value: "Other": field is immutable"#,
                ),
                c(
                    "FieldValueInvalid",
                    "related",
                    r#"Invalid value: core.ObjectReference{Kind:"Node", Namespace:"", Name:"", UID:"", APIVersion:"", ResourceVersion:"", FieldPath:""}: field is immutable"#,
                ),
                c(
                    "FieldValueInvalid",
                    "reportingController",
                    r#"Invalid value: "other": field is immutable"#,
                ),
                c(
                    "FieldValueInvalid",
                    "reportingInstance",
                    r#"Invalid value: "other-1": field is immutable"#,
                ),
            ],
        ),
        (
            "series may change but is re-validated",
            |e| {
                e.series = Some(EventSeries {
                    count: Some(1),
                    last_observed_time: None,
                })
            },
            vec![
                c(
                    "FieldValueInvalid",
                    "series.count",
                    r#"Invalid value: "": should be at least 2"#,
                ),
                c(
                    "FieldValueRequired",
                    "series.lastObservedTime",
                    "Required value",
                ),
            ],
        ),
        (
            "a valid series update is fine",
            |e| {
                e.series = Some(EventSeries {
                    count: Some(3),
                    last_observed_time: Some(MicroTime(ts("2026-01-01T00:05:00Z"))),
                })
            },
            vec![],
        ),
        (
            "name is immutable (reported by generic and strict rules)",
            |e| e.metadata.name = Some("renamed".into()),
            vec![
                c(
                    "FieldValueInvalid",
                    "metadata.name",
                    r#"Invalid value: "renamed": field is immutable"#,
                ),
                c(
                    "FieldValueInvalid",
                    "metadata.name",
                    r#"Invalid value: "renamed": field is immutable"#,
                ),
            ],
        ),
        (
            "resourceVersion is required",
            |e| e.metadata.resource_version = None,
            vec![
                c(
                    "FieldValueInvalid",
                    "metadata.resourceVersion",
                    r#"Invalid value: "": must be specified for an update"#,
                ),
                c(
                    "FieldValueInvalid",
                    "metadata.resourceVersion",
                    r#"Invalid value: "": must be specified for an update"#,
                ),
            ],
        ),
    ];
    for (name, f, want) in cases {
        let (new, old) = updated(modern, f);
        match validate_update(&new, &old, ApiGroup::EventsV1) {
            Ok(()) => assert!(want.is_empty(), "{name}: expected {want:?}"),
            Err(e) => assert_eq!(causes(&e), want, "{name}"),
        }
    }
}

#[test]
fn duplicate_causes_appear_once_in_the_message() {
    let (new, old) = updated(modern, |e| e.reason = Some("New".into()));
    let err = validate_update(&new, &old, ApiGroup::EventsV1).unwrap_err();
    assert_eq!(err.causes.len(), 2);
    assert_eq!(
        err.message,
        r#"Event.events.k8s.io "web-0.17b" is invalid: reason: Invalid value: "New": field is immutable"#
    );
}

#[test]
fn kube_rs_style_merge_patch_resending_event_time_passes() {
    // kube-rs' recorder patches series and resends the original eventTime: must be accepted.
    let old = modern();
    let mut new = old.clone();
    new.series = Some(EventSeries {
        count: Some(2),
        last_observed_time: Some(MicroTime(ts("2026-01-01T00:00:30.000001Z"))),
    });
    assert_eq!(validate_update(&new, &old, ApiGroup::EventsV1), Ok(()));
}
