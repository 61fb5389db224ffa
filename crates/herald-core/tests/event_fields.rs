//! Field selectors for events: syntax, escaping, each group's labels, and matching against
//! the stored core/v1 shape.

use herald_core::event::fields::{
    CORE_FIELD_LABELS, EVENTS_V1_FIELD_LABELS, FieldOp, FieldSelector, convert_field_label,
    escape_value, field_value, internal_field_value, supported_field_labels, unescape_value,
};
use herald_core::event::{ApiGroup, CoreEvent};
use k8s_openapi::api::core::v1::{EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

fn event() -> CoreEvent {
    CoreEvent {
        metadata: ObjectMeta {
            name: Some("web-0.17a".into()),
            namespace: Some("team-a".into()),
            ..Default::default()
        },
        involved_object: ObjectReference {
            api_version: Some("v1".into()),
            field_path: Some("spec.containers{web}".into()),
            kind: Some("Pod".into()),
            name: Some("web-0".into()),
            namespace: Some("team-a".into()),
            resource_version: Some("4711".into()),
            uid: Some("uid-1".into()),
        },
        reason: Some("BackOff".into()),
        reporting_component: Some("kubelet-rc".into()),
        source: Some(EventSource {
            component: Some("kubelet".into()),
            host: Some("node-1".into()),
        }),
        type_: Some("Warning".into()),
        ..Default::default()
    }
}

/// (core label, events.k8s.io label, expected value on `event()`).
const EXPECTED: [(&str, &str, &str); 13] = [
    ("involvedObject.kind", "regarding.kind", "Pod"),
    ("involvedObject.namespace", "regarding.namespace", "team-a"),
    ("involvedObject.name", "regarding.name", "web-0"),
    ("involvedObject.uid", "regarding.uid", "uid-1"),
    ("involvedObject.apiVersion", "regarding.apiVersion", "v1"),
    (
        "involvedObject.resourceVersion",
        "regarding.resourceVersion",
        "4711",
    ),
    (
        "involvedObject.fieldPath",
        "regarding.fieldPath",
        "spec.containers{web}",
    ),
    ("reason", "reason", "BackOff"),
    ("reportingComponent", "reportingController", "kubelet-rc"),
    ("source", "source", "kubelet"),
    ("type", "type", "Warning"),
    ("metadata.namespace", "metadata.namespace", "team-a"),
    ("metadata.name", "metadata.name", "web-0.17a"),
];

#[test]
fn label_lists_are_complete_and_exact() {
    let core: Vec<&str> = EXPECTED.iter().map(|e| e.0).collect();
    let v1: Vec<&str> = EXPECTED.iter().map(|e| e.1).collect();
    assert_eq!(supported_field_labels(ApiGroup::Core), core);
    assert_eq!(supported_field_labels(ApiGroup::EventsV1), v1);
    assert_eq!(CORE_FIELD_LABELS.len(), 13);
    assert_eq!(EVENTS_V1_FIELD_LABELS.len(), 13);
}

#[test]
fn every_label_of_both_groups_selects_its_field() {
    let ev = event();
    for (core, v1, want) in EXPECTED {
        assert_eq!(
            field_value(ApiGroup::Core, &ev, core).unwrap(),
            want,
            "{core}"
        );
        assert_eq!(
            field_value(ApiGroup::EventsV1, &ev, v1).unwrap(),
            want,
            "{v1}"
        );
        assert_eq!(convert_field_label(ApiGroup::EventsV1, v1).unwrap(), core);
        for (group, label) in [(ApiGroup::Core, core), (ApiGroup::EventsV1, v1)] {
            let eq = FieldSelector::parse_for(group, &format!("{label}={}", escape_value(want)))
                .unwrap();
            assert!(eq.matches(&ev), "{label}={want}");
            let eq2 = FieldSelector::parse_for(group, &format!("{label}=={}", escape_value(want)))
                .unwrap();
            assert!(eq2.matches(&ev), "{label}=={want}");
            let ne = FieldSelector::parse_for(group, &format!("{label}!={}", escape_value(want)))
                .unwrap();
            assert!(!ne.matches(&ev), "{label}!={want}");
            let other = FieldSelector::parse_for(group, &format!("{label}=zzz")).unwrap();
            assert!(!other.matches(&ev), "{label}=zzz");
        }
    }
}

#[test]
fn unsupported_labels_are_bad_requests() {
    for (group, label) in [
        (ApiGroup::Core, "regarding.name"),
        (ApiGroup::Core, "reportingController"),
        (ApiGroup::Core, "note"),
        (ApiGroup::Core, "spec.foo"),
        (ApiGroup::EventsV1, "involvedObject.name"),
        (ApiGroup::EventsV1, "involvedObject.kind"),
        (ApiGroup::EventsV1, "reportingComponent"),
        (ApiGroup::EventsV1, "metadata.uid"),
    ] {
        let err = FieldSelector::parse_for(group, &format!("{label}=x")).unwrap_err();
        assert_eq!(err.code, 400);
        assert_eq!(err.message, format!("field label not supported: {label}"));
        let err = field_value(group, &event(), label).unwrap_err();
        assert_eq!(err.message, format!("field label not supported: {label}"));
    }
    // An empty label is unsupported too (`=x` parses, then fails conversion).
    let err = FieldSelector::parse_for(ApiGroup::Core, "=x").unwrap_err();
    assert_eq!(err.message, "field label not supported: ");
}

#[test]
fn source_falls_back_to_reporting_controller() {
    let mut ev = event();
    ev.source = None;
    assert_eq!(internal_field_value(&ev, "source"), Some("kubelet-rc"));
    ev.source = Some(EventSource {
        component: Some(String::new()),
        host: Some("h".into()),
    });
    assert_eq!(internal_field_value(&ev, "source"), Some("kubelet-rc"));
    let sel = FieldSelector::parse_for(ApiGroup::EventsV1, "source=kubelet-rc").unwrap();
    assert!(sel.matches(&ev));
}

#[test]
fn absent_fields_read_as_empty() {
    let ev = CoreEvent::default();
    for (core, _, _) in EXPECTED {
        assert_eq!(internal_field_value(&ev, core), Some(""), "{core}");
    }
    assert_eq!(internal_field_value(&ev, "nope"), None);
    let sel = FieldSelector::parse_for(ApiGroup::Core, "type=").unwrap();
    assert!(sel.matches(&ev));
    let sel = FieldSelector::parse_for(ApiGroup::Core, "type!=").unwrap();
    assert!(!sel.matches(&ev));
}

#[test]
fn terms_are_anded() {
    let ev = event();
    let sel = FieldSelector::parse_for(
        ApiGroup::Core,
        "involvedObject.kind=Pod,type=Warning,reason!=Started",
    )
    .unwrap();
    assert_eq!(sel.terms().len(), 3);
    assert!(sel.matches(&ev));
    let sel =
        FieldSelector::parse_for(ApiGroup::Core, "involvedObject.kind=Pod,type=Normal").unwrap();
    assert!(!sel.matches(&ev));
}

#[test]
fn syntax_and_escaping() {
    let sel = FieldSelector::parse(r"a=x\,y\=z\\w").unwrap();
    assert_eq!(sel.terms()[0].field, "a");
    assert_eq!(sel.terms()[0].value, r"x,y=z\w");
    assert_eq!(sel.terms()[0].op, FieldOp::Equals);
    // The first operator splits; a later `=` in the value must be escaped.
    let sel = FieldSelector::parse("a!=b").unwrap();
    assert_eq!(sel.terms()[0].op, FieldOp::NotEquals);
    assert_eq!(sel.terms()[0].value, "b");
    let sel = FieldSelector::parse("a==b").unwrap();
    assert_eq!(sel.terms()[0].value, "b");
    // Empty terms are skipped; empty selector matches everything.
    let sel = FieldSelector::parse(",a=b,,").unwrap();
    assert_eq!(sel.terms().len(), 1);
    assert!(FieldSelector::parse("").unwrap().is_empty());
    assert!(FieldSelector::parse("").unwrap().matches(&event()));
    // Terms are sorted, as kube does; the canonical string escapes values.
    let sel = FieldSelector::parse(r"type=Warning,reason=a\,b").unwrap();
    assert_eq!(sel.to_string(), r"reason=a\,b,type=Warning");
    assert_eq!(escape_value(r"a\b,c=d"), r"a\\b\,c\=d");
    assert_eq!(unescape_value(r"a\\b\,c\=d").unwrap(), r"a\b,c=d");
}

#[test]
fn malformed_selectors_have_kube_messages() {
    let cases = [
        (
            "reason",
            "invalid selector: 'reason'; can't understand 'reason'",
        ),
        (
            "type=Normal,reason",
            "invalid selector: 'type=Normal,reason'; can't understand 'reason'",
        ),
        (
            "a=b=c",
            "invalid field selector: unescaped character in value: 61",
        ),
        (
            "a=b\\,c,d=e,f",
            "invalid selector: 'a=b\\,c,d=e,f'; can't understand 'f'",
        ),
        (
            "a=b\\x",
            "invalid field selector: invalid escape sequence: \\x",
        ),
        (
            "a=b\\",
            "invalid field selector: invalid escape sequence: \\",
        ),
    ];
    for (input, want) in cases {
        let err = FieldSelector::parse(input).unwrap_err();
        assert_eq!(err.code, 400, "{input}");
        assert_eq!(err.message, want, "{input}");
    }
    // A malformed selector is reported before any label check.
    let err = FieldSelector::parse_for(ApiGroup::EventsV1, "involvedObject.name").unwrap_err();
    assert_eq!(
        err.message,
        "invalid selector: 'involvedObject.name'; can't understand 'involvedObject.name'"
    );
}

#[test]
fn single_object_requests_pin_the_name() {
    let sel = FieldSelector::everything()
        .for_single_object("web-0.17a")
        .unwrap();
    assert_eq!(sel.to_string(), "metadata.name=web-0.17a");
    assert!(sel.matches(&event()));
    let sel =
        FieldSelector::parse_for(ApiGroup::Core, "metadata.name=web-0.17a,type=Warning").unwrap();
    assert!(sel.clone().for_single_object("web-0.17a").is_ok());
    let err = sel.for_single_object("other").unwrap_err();
    assert_eq!(err.code, 400);
    assert_eq!(
        err.message,
        "fieldSelector metadata.name doesn't match requested name"
    );
    let err = FieldSelector::parse_for(ApiGroup::Core, "type=Warning")
        .unwrap()
        .for_single_object("web-0.17a")
        .unwrap_err();
    assert_eq!(
        err.message,
        "fieldSelector metadata.name doesn't match requested name"
    );
    let sel = FieldSelector::parse_for(ApiGroup::Core, "metadata.name!=x").unwrap();
    assert_eq!(sel.requires_exact_match("metadata.name"), None);
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    fn selector_text() -> impl Strategy<Value = String> {
        let token = prop_oneof![
            "[a-z.]{1,6}",
            Just("=".to_string()),
            Just("==".to_string()),
            Just("!=".to_string()),
            Just(",".to_string()),
            Just("\\".to_string()),
            Just("\\,".to_string()),
            Just("\\=".to_string()),
            Just("!".to_string()),
        ];
        prop_oneof![
            proptest::collection::vec(token, 0..10).prop_map(|v| v.concat()),
            any::<String>(),
        ]
    }

    proptest! {
        #[test]
        fn parse_never_panics_and_canonical_form_reparses(s in selector_text()) {
            match FieldSelector::parse(&s) {
                Ok(sel) => {
                    let again = FieldSelector::parse(&sel.to_string())
                        .unwrap_or_else(|e| panic!("{s:?} -> {sel}: {e}"));
                    let mut a = sel.terms().to_vec();
                    let mut b = again.terms().to_vec();
                    a.sort_by(|x, y| (&x.field, &x.value).cmp(&(&y.field, &y.value)));
                    b.sort_by(|x, y| (&x.field, &x.value).cmp(&(&y.field, &y.value)));
                    prop_assert_eq!(a, b);
                }
                Err(e) => prop_assert_eq!(e.code, 400),
            }
        }

        #[test]
        fn escaping_round_trips(v in any::<String>()) {
            prop_assert_eq!(unescape_value(&escape_value(&v)).unwrap(), v.clone());
            let sel = FieldSelector::parse_for(ApiGroup::Core, &format!("reason={}", escape_value(&v))).unwrap();
            let mut ev = event();
            ev.reason = Some(v);
            prop_assert!(sel.matches(&ev));
        }
    }
}
