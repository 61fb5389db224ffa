//! Label selectors: kube's syntax, matching, canonical strings and parse errors.

use std::collections::BTreeMap;

use herald_core::labels::{
    Operator, Selector, dns1123_label_errors, dns1123_subdomain_errors, label_value_errors,
    qualified_name_errors,
};

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

const QNAME_MSG: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

#[test]
fn matching_table() {
    let web = labels(&[
        ("app", "web"),
        ("tier", "front"),
        ("replicas", "3"),
        ("empty", ""),
    ]);
    let none = labels(&[]);
    let cases: [(&str, bool, bool); 26] = [
        // (selector, matches web, matches none)
        ("", true, true),
        ("app=web", true, false),
        ("app==web", true, false),
        ("app = web", true, false),
        ("app=api", false, false),
        ("app!=api", true, true),
        ("app!=web", false, true),
        ("app", true, false),
        ("!app", false, true),
        ("!missing", true, true),
        ("app in (web,api)", true, false),
        ("app in (api)", false, false),
        ("app notin (api)", true, true),
        ("app notin (web)", false, true),
        ("app=web,tier=front", true, false),
        ("app=web,tier=back", false, false),
        ("replicas>2", true, false),
        ("replicas>3", false, false),
        ("replicas<4", true, false),
        ("app>1", false, false),
        ("empty=", true, false),
        ("empty in ()", true, false),
        ("empty", true, false),
        ("app in (,web)", true, false),
        ("  app  in  ( web , api )  ,  tier  ", true, false),
        ("example.com/key!=x", true, true),
    ];
    for (sel, want_web, want_none) in cases {
        let s = Selector::parse(sel).unwrap_or_else(|e| panic!("{sel}: {e}"));
        assert_eq!(s.matches(&web), want_web, "{sel} on web");
        assert_eq!(s.matches(&none), want_none, "{sel} on none");
        assert_eq!(s.matches_opt(None), want_none, "{sel} on absent labels");
    }
}

#[test]
fn keywords_are_identifiers_outside_operator_position() {
    let s = Selector::parse("in=notin").unwrap();
    assert!(s.matches(&labels(&[("in", "notin")])));
    let s = Selector::parse("notin in (in)").unwrap();
    assert_eq!(s.requirements()[0].key(), "notin");
    assert_eq!(s.requirements()[0].operator(), Operator::In);
    assert_eq!(s.requirements()[0].values(), ["in"]);
}

#[test]
fn canonical_strings_are_sorted() {
    let cases = [
        ("tier in (b,a,b),app=web", "app=web,tier in (a,b)"),
        ("!x,a==b,c!=d", "a==b,c!=d,!x"),
        ("k notin (v)", "k notin (v)"),
        ("n>5,m<2", "m<2,n>5"),
        ("a", "a"),
        ("a=", "a="),
        ("", ""),
    ];
    for (input, want) in cases {
        assert_eq!(Selector::parse(input).unwrap().to_string(), want, "{input}");
        let again: Selector = want.parse().unwrap();
        assert_eq!(again.to_string(), want);
    }
}

#[test]
fn exact_match_lookup() {
    let s = Selector::parse("app=web,tier in (a),x in (a,b),y!=z").unwrap();
    assert_eq!(s.requires_exact_match("app"), Some("web"));
    assert_eq!(s.requires_exact_match("tier"), Some("a"));
    assert_eq!(s.requires_exact_match("x"), None);
    assert_eq!(s.requires_exact_match("y"), None);
    assert!(Selector::everything().is_empty());
}

#[test]
fn malformed_selectors() {
    let cases: Vec<(&str, String)> = vec![
        ("app in web", "unable to parse requirement: found 'web' expected: '('".into()),
        ("app web", "unable to parse requirement: found 'web', expected: in, notin, =, ==, !=, gt, lt".into()),
        ("app!web", "unable to parse requirement: found '!', expected: in, notin, =, ==, !=, gt, lt".into()),
        (",", "found ',', expected: !, identifier, or 'end of string'".into()),
        ("(a)", "found '(', expected: !, identifier, or 'end of string'".into()),
        ("a,", "found '', expected: identifier after ','".into()),
        ("a,,b", "found ',', expected: identifier after ','".into()),
        ("a=b c", "found 'c', expected: ',' or 'end of string'".into()),
        ("!a=b", "found '=', expected: ',' or 'end of string'".into()),
        ("a=b=c", "found '=', expected: ',' or 'end of string'".into()),
        ("a in (b,c", "unable to parse requirement: found '', expected: ',' or ')'".into()),
        ("a in (b c)", "unable to parse requirement: found 'c', expected: ',' or ')'".into()),
        ("a in (=)", "unable to parse requirement: found '=', expected: ',', ')' or identifier".into()),
        ("a=(b)", "unable to parse requirement: found '(', expected: identifier".into()),
        ("!", "unable to parse requirement: found '', expected: identifier".into()),
        ("!!a", "unable to parse requirement: found '!', expected: identifier".into()),
        (
            "a@b=c",
            format!("unable to parse requirement: <nil>: Invalid value: \"a@b\": {QNAME_MSG}"),
        ),
        (
            "a=b@",
            format!("unable to parse requirement: values[0][a]: Invalid value: \"b@\": {VALUE_MSG}"),
        ),
        (
            "a>x",
            "unable to parse requirement: values[0]: Invalid value: \"x\": for 'Gt', 'Lt' operators, the value must be an integer".into(),
        ),
        (
            "a/b/c=d",
            "unable to parse requirement: <nil>: Invalid value: \"a/b/c\": a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')".into(),
        ),
        (
            "/a",
            "unable to parse requirement: <nil>: Invalid value: \"/a\": prefix part must be non-empty".into(),
        ),
    ];
    for (input, want) in cases {
        let err = Selector::parse(input).unwrap_err();
        assert_eq!(err.code, 400, "{input}");
        assert_eq!(err.message, want, "{input}");
    }
    // Long keys and values.
    let long = "k".repeat(64);
    let err = Selector::parse(&format!("{long}=v")).unwrap_err();
    assert_eq!(
        err.message,
        format!(
            "unable to parse requirement: <nil>: Invalid value: \"{long}\": name part must be no more than 63 characters"
        )
    );
    let err = Selector::parse(&format!("k={long}")).unwrap_err();
    assert_eq!(
        err.message,
        format!(
            "unable to parse requirement: values[0][k]: Invalid value: \"{long}\": must be no more than 63 characters"
        )
    );
    // Two bad values in one requirement are aggregated.
    let err = Selector::parse("k in (a@,b@)").unwrap_err();
    assert_eq!(
        err.message,
        format!(
            "unable to parse requirement: [values[0][k]: Invalid value: \"a@\": {VALUE_MSG}, values[1][k]: Invalid value: \"b@\": {VALUE_MSG}]"
        )
    );
}

#[test]
fn syntax_rule_messages() {
    assert!(dns1123_subdomain_errors("a.b-c").is_empty());
    assert!(dns1123_label_errors("kube-system").is_empty());
    assert_eq!(dns1123_label_errors("a.b"), ["must not contain dots"]);
    assert_eq!(
        dns1123_label_errors("A"),
        [
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
        ]
    );
    assert_eq!(
        dns1123_label_errors(&"a".repeat(64)),
        ["must be no more than 63 characters"]
    );
    assert_eq!(dns1123_subdomain_errors(&"a".repeat(254)).len(), 1);
    assert!(qualified_name_errors("example.com/My_Name.1").is_empty());
    assert_eq!(
        qualified_name_errors("example.com/"),
        ["name part must be non-empty", QNAME_MSG]
    );
    assert!(label_value_errors("").is_empty());
    assert_eq!(label_value_errors("-x"), [VALUE_MSG]);
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    fn selector_text() -> impl Strategy<Value = String> {
        // Mostly selector-shaped input, plus arbitrary strings.
        let token = prop_oneof![
            "[a-z]{1,4}",
            Just("in".to_string()),
            Just("notin".to_string()),
            Just("=".to_string()),
            Just("==".to_string()),
            Just("!=".to_string()),
            Just("!".to_string()),
            Just(",".to_string()),
            Just("(".to_string()),
            Just(")".to_string()),
            Just(">".to_string()),
            Just("<".to_string()),
            Just(" ".to_string()),
            "[0-9]{1,3}",
        ];
        prop_oneof![
            proptest::collection::vec(token, 0..12).prop_map(|v| v.concat()),
            any::<String>(),
        ]
    }

    proptest! {
        #[test]
        fn parse_never_panics_and_canonical_form_reparses(s in selector_text()) {
            if let Ok(sel) = Selector::parse(&s) {
                let canonical = sel.to_string();
                let again = Selector::parse(&canonical)
                    .unwrap_or_else(|e| panic!("{s:?} -> {canonical:?}: {e}"));
                prop_assert_eq!(&again, &sel);
                prop_assert_eq!(again.to_string(), canonical);
            }
        }

        #[test]
        fn every_parse_error_is_a_bad_request(s in any::<String>()) {
            if let Err(e) = Selector::parse(&s) {
                prop_assert_eq!(e.code, 400);
                prop_assert!(!e.message.is_empty());
            }
        }
    }
}
