//! Bad input over real HTTP: every case gets its exact status code and a `Status` body, and
//! the server keeps answering (and keeps its data) afterwards.

mod events_support;

use events_support::*;
use serde_json::json;

struct Case {
    method: &'static str,
    path: String,
    ct: Option<&'static str>,
    body: Vec<u8>,
    code: u16,
    reason: &'static str,
    message_has: &'static str,
}

fn case(
    method: &'static str,
    path: impl Into<String>,
    ct: Option<&'static str>,
    body: impl Into<Vec<u8>>,
    code: u16,
    reason: &'static str,
    message_has: &'static str,
) -> Case {
    Case {
        method,
        path: path.into(),
        ct,
        body: body.into(),
        code,
        reason,
        message_has,
    }
}

#[tokio::test]
async fn bad_input_table() {
    let (server, _) = memory().await;
    let http = Http::new(&server);
    let ok = serde_json::to_vec(&core_event("good.1", "default", "R")).unwrap();
    let r = http
        .send(
            "POST",
            &core_path("default"),
            Some("application/json"),
            None,
            ok.clone(),
        )
        .await;
    assert_eq!(r.status, 201);
    let stale = http
        .get(&format!("{}/good.1", core_path("default")))
        .await
        .json();
    assert_eq!(
        http.patch(
            &format!("{}/good.1", core_path("default")),
            "application/merge-patch+json",
            &json!({"count": 5})
        )
        .await
        .status,
        200
    );

    // History before the current revision is compacted: lists at older revisions are gone.
    let now_rv = http.get("/api/v1/events").await.json()["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse::<u64>()
        .unwrap();
    server.registry().backend().compact(now_rv).await.unwrap();

    let json = Some("application/json");
    let cp = core_path("default");
    let vp = v1_path("default");
    let mut bad_name = v1_event("Bad_Name!", "default", "R");
    bad_name["metadata"]["name"] = json!("Bad_Name!");
    let mut no_observed = v1_event("series.1", "default", "R");
    no_observed["series"] = json!({"count": 3});
    let mut null_series = v1_event("series.2", "default", "R");
    null_series["series"] = json!({"count": null, "lastObservedTime": null});
    let mut slash = core_event("a/b", "default", "R");
    slash["metadata"]["name"] = json!("a/b");
    let mut bad_ns = core_event("x", "Bad_NS", "R");
    bad_ns["involvedObject"]["namespace"] = json!("Bad_NS");
    let huge = format!(r#"{{"message":"{}"}}"#, "x".repeat(4 * 1024 * 1024));
    // JSON patches that grow the object without bound: each copy doubles the nesting, or
    // the whole object; and more operations than kube-apiserver takes.
    let mut nest = vec![json!({"op": "add", "path": "/x", "value": {"a": {}}})];
    let mut deepest = "/x/a".to_string();
    for _ in 0..17 {
        nest.push(json!({"op": "copy", "from": "/x", "path": format!("{deepest}/b")}));
        deepest = format!("{deepest}/b{}", &deepest["/x".len()..]);
    }
    let grow: Vec<_> = (0..40)
        .map(|i| json!({"op": "copy", "from": "", "path": format!("/k{i}")}))
        .collect();
    let many = vec![json!({"op": "test", "path": "/reason", "value": "R"}); 10_001];
    let deep = format!(
        r#"{{"metadata":{{"name":"d.1","managedFields":[{{"fieldsV1":{}{}}}]}}}}"#,
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let cases = vec![
        case(
            "POST",
            &cp,
            json,
            r#"{"metadata": {"name": "x""#,
            400,
            "BadRequest",
            "line 1 column",
        ),
        case(
            "POST",
            &cp,
            json,
            "[1,2]",
            400,
            "BadRequest",
            "expected a JSON object",
        ),
        case("POST", &cp, json, "", 400, "BadRequest", "json parse error"),
        // Nested far too deep: refused, and no stack overflow.
        case(
            "POST",
            &cp,
            json,
            deep.as_str(),
            400,
            "BadRequest",
            "recursion limit",
        ),
        // Not UTF-8 inside a string: an error that says where, never a stored mangled text.
        case(
            "POST",
            &cp,
            json,
            &b"{\"metadata\":{\"name\":\"u.1\"},\"message\":\"caf\xe9\"}"[..],
            400,
            "BadRequest",
            "line 1 column",
        ),
        case(
            "POST",
            &cp,
            json,
            r#"{"metadata":{"name":"t"},"count":"many"}"#,
            400,
            "BadRequest",
            r#"Event in version "v1" cannot be handled as a Event: count: invalid type: string "many", expected i32 at line 1 column 39"#,
        ),
        // A type error names the field, nested ones with their path…
        case(
            "POST",
            &cp,
            json,
            r#"{"metadata":{"name":"t","labels":{"a":1}},"involvedObject":{"name":"p"}}"#,
            400,
            "BadRequest",
            "cannot be handled as a Event: metadata.labels.a: invalid type: integer `1`, expected a string at line 1 column",
        ),
        case(
            "POST",
            v1_path("default"),
            json,
            r#"{"metadata":{"name":"t"},"regarding":{"name":["p"]}}"#,
            400,
            "BadRequest",
            "regarding.name: invalid type: sequence, expected a string at line 1 column",
        ),
        // …and, in YAML, where it is in what the client wrote.
        case(
            "POST",
            &cp,
            Some("application/yaml"),
            "metadata:\n  name: t\ninvolvedObject:\n  name: p\ncount: many\n",
            400,
            "BadRequest",
            r#"count: invalid type: string "many", expected i32 at line 5 column 8"#,
        ),
        case(
            "POST",
            &cp,
            json,
            r#"{"apiVersion":"events.k8s.io/v1","kind":"Event","metadata":{"name":"t"}}"#,
            400,
            "BadRequest",
            "does not match the expected API version (v1)",
        ),
        case(
            "POST",
            &cp,
            json,
            r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"t"}}"#,
            400,
            "BadRequest",
            "the kind in the data (Pod)",
        ),
        case(
            "POST",
            &cp,
            Some("text/plain"),
            ok.clone(),
            415,
            "UnsupportedMediaType",
            "text/plain",
        ),
        case(
            "POST",
            &cp,
            Some("application/x-www-form-urlencoded"),
            ok.clone(),
            415,
            "UnsupportedMediaType",
            "accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf; got",
        ),
        case(
            "POST",
            &cp,
            Some("application/vnd.kubernetes.protobuf"),
            ok.clone(),
            400,
            "BadRequest",
            "the object provided is unrecognized (must be of type Event): provided data does not appear to be a protobuf message, expected prefix [107 56 115 0] ({",
        ),
        case(
            "POST",
            &cp,
            json,
            huge.clone(),
            413,
            "RequestEntityTooLarge",
            "limit is 3145728",
        ),
        case(
            "PATCH",
            format!("{cp}/good.1"),
            Some("application/merge-patch+json"),
            huge,
            413,
            "RequestEntityTooLarge",
            "limit",
        ),
        case(
            "POST",
            &vp,
            json,
            serde_json::to_vec(&bad_name).unwrap(),
            422,
            "Invalid",
            "metadata.name: Invalid value: \"Bad_Name!\"",
        ),
        case(
            "POST",
            &vp,
            json,
            serde_json::to_vec(&no_observed).unwrap(),
            422,
            "Invalid",
            "series.lastObservedTime: Required value",
        ),
        case(
            "POST",
            &vp,
            json,
            serde_json::to_vec(&null_series).unwrap(),
            422,
            "Invalid",
            "should be at least 2",
        ),
        case(
            "POST",
            &cp,
            json,
            serde_json::to_vec(&slash).unwrap(),
            422,
            "Invalid",
            "may not contain '/'",
        ),
        case(
            "POST",
            core_path("Bad_NS"),
            json,
            serde_json::to_vec(&bad_ns).unwrap(),
            422,
            "Invalid",
            r#"namespace: Invalid value: "Bad_NS""#,
        ),
        case(
            "POST",
            &cp,
            json,
            r#"{"metadata":{}}"#,
            422,
            "Invalid",
            "name or generateName is required",
        ),
        case(
            "GET",
            "/api/v1/namespaces/a%2Fb/events",
            None,
            "",
            400,
            "BadRequest",
            "may not contain '/'",
        ),
        // Bytes that are not UTF-8 once percent-decoded: a Status, not axum's plain text.
        case(
            "GET",
            "/api/v1/namespaces/%ff%fe/events",
            None,
            "",
            400,
            "BadRequest",
            "the namespace in the URL path is not valid UTF-8",
        ),
        case(
            "DELETE",
            format!("{cp}/%c3"),
            None,
            "",
            400,
            "BadRequest",
            "the name in the URL path is not valid UTF-8",
        ),
        case(
            "GET",
            format!("{cp}/%2E%2E"),
            None,
            "",
            400,
            "BadRequest",
            "may not be '..'",
        ),
        case(
            "GET",
            format!("{cp}/missing"),
            None,
            "",
            404,
            "NotFound",
            r#"events "missing" not found"#,
        ),
        case(
            "GET",
            "/api/v1/events?fieldSelector=spec.nodeName%3Dx",
            None,
            "",
            400,
            "BadRequest",
            "field label not supported: spec.nodeName",
        ),
        case(
            "GET",
            "/api/v1/events?fieldSelector=reason%3Da%3Db",
            None,
            "",
            400,
            "BadRequest",
            "invalid field selector",
        ),
        case(
            "GET",
            "/api/v1/events?labelSelector=%21%21%21",
            None,
            "",
            400,
            "BadRequest",
            "",
        ),
        case(
            "GET",
            "/api/v1/events?limit=abc",
            None,
            "",
            400,
            "BadRequest",
            "limit",
        ),
        case(
            "GET",
            "/api/v1/events?resourceVersion=abc",
            None,
            "",
            400,
            "BadRequest",
            "invalid resource version",
        ),
        case(
            "GET",
            "/api/v1/events?watch=true&resourceVersion=-4",
            None,
            "",
            400,
            "BadRequest",
            "invalid resource version",
        ),
        case(
            "GET",
            "/api/v1/events?continue=%7B%7D",
            None,
            "",
            400,
            "BadRequest",
            "continue key is not valid",
        ),
        case(
            "PUT",
            format!("{cp}/good.1"),
            json,
            serde_json::to_vec(&stale).unwrap(),
            409,
            "Conflict",
            "the object has been modified",
        ),
        case(
            "PUT",
            format!("{cp}/good.1"),
            json,
            r#"{"metadata":{"name":"good.1","resourceVersion":"x1"}}"#,
            400,
            "BadRequest",
            "invalid resource version",
        ),
        case(
            "PATCH",
            format!("{cp}/good.1"),
            Some("application/json-patch+json"),
            r#"{"op":"add"}"#,
            400,
            "BadRequest",
            "error decoding patch",
        ),
        case(
            "PATCH",
            format!("{cp}/good.1"),
            Some("application/json-patch+json"),
            serde_json::to_vec(&nest).unwrap(),
            422,
            "Invalid",
            "would nest the object deeper than 128 levels",
        ),
        case(
            "PATCH",
            format!("{cp}/good.1"),
            Some("application/json-patch+json"),
            serde_json::to_vec(&grow).unwrap(),
            422,
            "Invalid",
            "the accumulated size increase of copy",
        ),
        case(
            "PATCH",
            format!("{cp}/good.1"),
            Some("application/json-patch+json"),
            serde_json::to_vec(&many).unwrap(),
            413,
            "RequestEntityTooLarge",
            "Request entity too large: The allowed maximum operations in a JSON patch is 10000, got 10001",
        ),
        case(
            "PATCH",
            format!("{cp}/good.1"),
            Some("application/merge-patch+json"),
            "[]",
            400,
            "BadRequest",
            "must be a JSON object",
        ),
        case(
            "PATCH",
            format!("{cp}/good.1"),
            Some("application/merge-patch+json"),
            r#"{"metadata":{"name":"renamed"}}"#,
            400,
            "BadRequest",
            "does not match the name on the URL",
        ),
        case(
            "PATCH",
            format!("{cp}/good.1"),
            Some("application/merge-patch+json"),
            r#"{"count":"many"}"#,
            422,
            "Invalid",
            r#" "" is invalid: patch: Invalid value: "{"#,
        ),
        case(
            "PATCH",
            format!("{cp}/good.1"),
            Some("application/json"),
            "{}",
            415,
            "UnsupportedMediaType",
            "accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml; got \"application/json\"",
        ),
        case(
            "PATCH",
            format!("{cp}/good.1?fieldValidation=Strict"),
            Some("application/merge-patch+json"),
            r#"{"bogus":1}"#,
            400,
            "BadRequest",
            r#"unknown field "bogus""#,
        ),
        case(
            "PATCH",
            format!("{cp}/good.1?fieldValidation=Strict"),
            Some("application/merge-patch+json"),
            r#"{"count":1,"count":2}"#,
            400,
            "BadRequest",
            r#"strict decoding error: duplicate field "count""#,
        ),
        case(
            "POST",
            format!("{cp}?fieldValidation=Strict"),
            json,
            r#"{"metadata":{"name":"dup.1","labels":{"a":"1","a":"2"}},"involvedObject":{"name":"p"},"reason":"A","reason":"B"}"#,
            400,
            "BadRequest",
            r#"strict decoding error: duplicate field "metadata.labels.a", duplicate field "reason""#,
        ),
        case(
            "POST",
            format!("{cp}?fieldValidation=Sometimes"),
            json,
            ok.clone(),
            422,
            "Invalid",
            r#"CreateOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: "Sometimes": supported values: "", "Ignore", "Strict", "Warn""#,
        ),
        case(
            "POST",
            format!("{cp}?dryRun=Some"),
            json,
            ok.clone(),
            422,
            "Invalid",
            r#"CreateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: []string{"Some"}: supported values: "All""#,
        ),
        case(
            "DELETE",
            format!("{cp}/good.1"),
            json,
            "{not json",
            400,
            "BadRequest",
            "json parse error",
        ),
        case(
            "DELETE",
            format!("{cp}/good.1"),
            json,
            r#"{"gracePeriodSeconds":"soon"}"#,
            400,
            "BadRequest",
            "gracePeriodSeconds",
        ),
        case(
            "POST",
            "/api/v1/events",
            json,
            ok.clone(),
            405,
            "MethodNotAllowed",
            "",
        ),
        case(
            "GET",
            "/api/v1/namespaces/default/widgets",
            None,
            "",
            404,
            "NotFound",
            "could not find the requested resource",
        ),
        case(
            "GET",
            "/api/v1/namespaces/default/pods",
            None,
            "",
            405,
            "MethodNotAllowed",
            "herald-server stores only events",
        ),
        case(
            "POST",
            &cp,
            Some("application/yaml"),
            "metadata:\n  name: y.1\n   bad: indent\n",
            400,
            "BadRequest",
            "line 3 column",
        ),
        case(
            "POST",
            &cp,
            Some("application/yaml"),
            "metadata:\n  name: y.1\ncount: many\n",
            400,
            "BadRequest",
            "line 3 column",
        ),
        case(
            "POST",
            &cp,
            Some("application/yaml"),
            "- a\n- b\n",
            400,
            "BadRequest",
            "expected a mapping",
        ),
        case(
            "POST",
            &cp,
            Some("application/x-yaml"),
            "metadata: {name: y.1}",
            415,
            "UnsupportedMediaType",
            "application/x-yaml",
        ),
        case(
            "PATCH",
            format!("{cp}/good.1?fieldManager=m"),
            Some("application/apply-patch+yaml"),
            "apiVersion: v1\nkind: Event\nmetadata: {name: good.1\n",
            400,
            "BadRequest",
            "error decoding YAML",
        ),
        case(
            "PATCH",
            format!("{cp}/good.1"),
            Some("application/apply-patch+yaml"),
            "apiVersion: v1\nkind: Event\n",
            422,
            "Invalid",
            "fieldManager: Required value: is required for apply patch",
        ),
        case(
            "PATCH",
            format!("{cp}/good.1?fieldManager=m"),
            Some("application/apply-patch+yaml"),
            "kind: Event\nmetadata: {name: good.1}\n",
            400,
            "BadRequest",
            "Incorrect version specified in apply patch",
        ),
        case(
            "PATCH",
            format!("{cp}/good.1?fieldManager=m"),
            Some("application/apply-patch+yaml"),
            "apiVersion: v1\nkind: Event\nmetadata:\n  name: good.1\n  managedFields: []\n",
            400,
            "BadRequest",
            "metadata.managedFields must be nil",
        ),
        case(
            "PATCH",
            format!("{cp}/good.1?force=true"),
            Some("application/merge-patch+json"),
            "{}",
            422,
            "Invalid",
            "force: Forbidden: may not be specified for non-apply patch",
        ),
        case(
            "POST",
            format!("{cp}?fieldManager={}", "m".repeat(129)),
            json,
            ok.clone(),
            422,
            "Invalid",
            "fieldManager: Too long: may not be more than 128 bytes",
        ),
        case(
            "GET",
            "/api/v1/events?resourceVersion=1&resourceVersionMatch=Exact",
            None,
            "",
            410,
            "Expired",
            "too old",
        ),
        case(
            "GET",
            "/api/v1/events?resourceVersion=1&limit=1",
            None,
            "",
            410,
            "Expired",
            "too old",
        ),
        case(
            "GET",
            "/api/v1/events?resourceVersion=999999&resourceVersionMatch=NotOlderThan",
            None,
            "",
            504,
            "Timeout",
            "Too large resource version: 999999",
        ),
        case(
            "GET",
            "/api/v1/events?resourceVersion=1&resourceVersionMatch=Sometimes",
            None,
            "",
            422,
            "Invalid",
            "resourceVersionMatch",
        ),
        case("GET", "/api/v1/events", None, "", 200, "", ""),
    ];
    for c in &cases {
        let r = http
            .send(c.method, &c.path, c.ct, None, c.body.clone())
            .await;
        let label = format!("{} {} ({:?})", c.method, c.path, c.ct);
        if c.code == 200 {
            assert_eq!(r.status, 200, "{label}: {}", r.text());
            continue;
        }
        assert_eq!(r.status, c.code, "{label}: {}", r.text());
        assert_eq!(r.headers["content-type"], "application/json", "{label}");
        let s = r.status_failure(c.code, c.reason);
        // The message, or a cause's (kube-apiserver puts a JSON patch's failure there).
        let causes = s["details"]["causes"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let said = std::iter::once(&s["message"])
            .chain(causes.iter().map(|c| &c["message"]))
            .filter_map(|m| m.as_str());
        assert!(
            said.into_iter().any(|m| m.contains(c.message_has)),
            "{label}: {s}"
        );
    }

    // still up, and the data is intact
    assert_eq!(http.get("/healthz").await.status, 200);
    let list = http.get("/api/v1/events").await.json();
    let items = list["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{list}");
    assert_eq!(items[0]["count"], 5);
    server.shutdown().await.unwrap();
}

/// Deterministic garbage (mutated valid bodies and random bytes) on every write endpoint:
/// only 2xx/4xx `Status` answers, never a 5xx or a dropped connection.
#[tokio::test]
async fn garbage_never_breaks_the_server() {
    let (server, _) = memory().await;
    let http = Http::new(&server);
    http.create_core("default", "fz", "R").await;
    let seed_bodies: Vec<Vec<u8>> = vec![
        serde_json::to_vec(&core_event("fz", "default", "R")).unwrap(),
        serde_json::to_vec(&v1_event("fz", "default", "R")).unwrap(),
        br#"[{"op":"replace","path":"/message","value":"x"}]"#.to_vec(),
    ];
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    let mut rnd = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let targets = [
        ("POST", core_path("default"), "application/json"),
        ("POST", v1_path("default"), "application/json"),
        (
            "PUT",
            format!("{}/fz", core_path("default")),
            "application/json",
        ),
        (
            "PATCH",
            format!("{}/fz", core_path("default")),
            "application/merge-patch+json",
        ),
        (
            "PATCH",
            format!("{}/fz", v1_path("default")),
            "application/strategic-merge-patch+json",
        ),
        (
            "PATCH",
            format!("{}/fz", core_path("default")),
            "application/json-patch+json",
        ),
        (
            "PATCH",
            format!("{}/fz?fieldManager=f", core_path("default")),
            "application/apply-patch+yaml",
        ),
    ];
    for i in 0..300 {
        let mut body = seed_bodies[i % seed_bodies.len()].clone();
        for _ in 0..(rnd() % 6) {
            if body.is_empty() {
                break;
            }
            let pos = (rnd() as usize) % body.len();
            match rnd() % 3 {
                0 => body[pos] = (rnd() % 256) as u8,
                1 => {
                    body.remove(pos);
                }
                _ => body.insert(pos, b"{}[]\",:\\0x"[(rnd() % 10) as usize]),
            }
        }
        let (method, path, ct) = &targets[(rnd() as usize) % targets.len()];
        let r = http.send(method, path, Some(ct), None, body.clone()).await;
        assert!(
            r.status < 500,
            "{method} {path} {}: {} -> {}",
            String::from_utf8_lossy(&body),
            r.status,
            r.text()
        );
        if r.status >= 400 {
            assert_eq!(r.json()["kind"], "Status", "{}", r.text());
        }
    }
    assert_eq!(http.get("/readyz").await.status, 200);
    assert_eq!(http.get("/api/v1/events").await.status, 200);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_repeated_key_is_a_warning_unless_strict_and_the_last_value_counts() {
    let (server, _) = memory().await;
    let http = Http::new(&server);
    let body =
        r#"{"metadata":{"name":"dup.1"},"involvedObject":{"name":"p"},"reason":"A","reason":"B"}"#;
    let r = http
        .send(
            "POST",
            &core_path("default"),
            Some("application/json"),
            None,
            body,
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let warnings: Vec<_> = r.headers.get_all("warning").iter().collect();
    assert_eq!(warnings, [r#"299 - "duplicate field \"reason\"""#]);
    assert_eq!(r.json()["reason"], "B");

    let ignored = http
        .send(
            "POST",
            &format!("{}?fieldValidation=Ignore", core_path("default")),
            Some("application/json"),
            None,
            body.replace("dup.1", "dup.2"),
        )
        .await;
    assert_eq!(ignored.status, 201, "{}", ignored.text());
    assert!(ignored.headers.get("warning").is_none());

    let patched = http
        .send(
            "PATCH",
            &format!("{}/dup.1", core_path("default")),
            Some("application/strategic-merge-patch+json"),
            None,
            r#"{"message":"x","message":"y"}"#,
        )
        .await;
    assert_eq!(patched.status, 200, "{}", patched.text());
    assert_eq!(
        patched.headers["warning"],
        r#"299 - "duplicate field \"message\"""#
    );
    assert_eq!(patched.json()["message"], "y");
}

const APPLY: &str = "application/apply-patch+yaml";

/// Server-side apply converts the applied configuration to the Event schema first
/// (structured-merge-diff's `ObjectToTyped`): a field the schema does not declare refuses
/// the apply with upstream's message, whatever `fieldValidation` says, and nothing is stored.
#[tokio::test]
async fn apply_refuses_fields_the_schema_does_not_declare() {
    let (server, _) = memory().await;
    let http = Http::new(&server);
    http.create_core("default", "b.1", "R").await;
    let before = http
        .get(&format!("{}/b.1", core_path("default")))
        .await
        .json();
    let core = |extra: serde_json::Value| {
        let mut body = json!({"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "a.1", "namespace": "default"},
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"}});
        json_merge(&mut body, extra);
        body
    };
    let cases = [
        (
            core_path("default"),
            "a.1",
            core(json!({"foo": 1})),
            "(default/a.1; /v1, Kind=Event): .foo: field not declared in schema",
        ),
        (
            core_path("default"),
            "a.1",
            core(json!({"metadata": {"foo": "x"}})),
            "(default/a.1; /v1, Kind=Event): .metadata.foo: field not declared in schema",
        ),
        (
            core_path("default"),
            "a.1",
            core(json!({"involvedObject": {"bar": true}})),
            "(default/a.1; /v1, Kind=Event): .involvedObject.bar: field not declared in schema",
        ),
        // Events have no status.
        (
            core_path("default"),
            "a.1",
            core(json!({"status": {}})),
            "(default/a.1; /v1, Kind=Event): .status: field not declared in schema",
        ),
        // Two objects, one error each; list items by their key.
        (
            core_path("default"),
            "a.1",
            core(json!({"source": {"x": 1}, "metadata": {"ownerReferences": [
                {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u1", "extra": 1}]}})),
            "(default/a.1; /v1, Kind=Event): errors:\n  .metadata.ownerReferences[uid=\"u1\"].extra: field not declared in schema\n  .source.x: field not declared in schema",
        ),
        // The names are the configuration's own (none here).
        (
            core_path("default"),
            "a.1",
            json!({"apiVersion": "v1", "kind": "Event", "message": "m", "spec": {}}),
            "(/; /v1, Kind=Event): .spec: field not declared in schema",
        ),
        // A core field is unknown to events.k8s.io.
        (
            v1_path("default"),
            "a.1",
            json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
                   "metadata": {"name": "a.1", "namespace": "default"}, "message": "m"}),
            "(default/a.1; events.k8s.io/v1, Kind=Event): .message: field not declared in schema",
        ),
        // On an existing event too.
        (
            core_path("default"),
            "b.1",
            json!({"apiVersion": "v1", "kind": "Event",
                   "metadata": {"name": "b.1", "namespace": "default"}, "foo": 1}),
            "(default/b.1; /v1, Kind=Event): .foo: field not declared in schema",
        ),
    ];
    for (base, name, body, want) in &cases {
        for fv in [
            "",
            "&fieldValidation=Ignore",
            "&fieldValidation=Warn",
            "&fieldValidation=Strict",
        ] {
            let path = format!("{base}/{name}?fieldManager=m{fv}");
            let r = http.patch(&path, APPLY, body).await;
            let s = r.status_failure(400, "BadRequest");
            assert_eq!(
                s["message"],
                format!("failed to create typed patch object {want}"),
                "{path}"
            );
            assert!(r.headers.get("warning").is_none(), "{path}");
        }
    }
    // Nothing was created or changed.
    for base in [core_path("default"), v1_path("default")] {
        let r = http.get(&format!("{base}/a.1")).await;
        r.status_failure(404, "NotFound");
    }
    assert_eq!(
        http.get(&format!("{}/b.1", core_path("default")))
            .await
            .json(),
        before
    );
    // managedFields is refused before the schema is looked at, as upstream does.
    let r = http
        .patch(
            &format!("{}/a.1?fieldManager=m", core_path("default")),
            APPLY,
            &core(json!({"metadata": {"managedFields": [{"manager": "x"}]}, "foo": 1})),
        )
        .await;
    let s = r.status_failure(400, "BadRequest");
    assert_eq!(s["message"], "metadata.managedFields must be nil");
    server.shutdown().await.unwrap();
}

/// Merges `extra` into `target` (objects key by key).
fn json_merge(target: &mut serde_json::Value, extra: serde_json::Value) {
    match (target, extra) {
        (serde_json::Value::Object(t), serde_json::Value::Object(e)) => {
            for (k, v) in e {
                json_merge(t.entry(k).or_insert(serde_json::Value::Null), v);
            }
        }
        (t, e) => *t = e,
    }
}

/// Every field the Event schemas declare can be applied, in both groups.
#[tokio::test]
async fn apply_takes_every_declared_field() {
    let (server, _) = memory().await;
    let http = Http::new(&server);
    let meta = |name: &str| {
        json!({"name": name, "namespace": "default",
            "labels": {"app": "web"}, "annotations": {"note": "x"},
            "finalizers": ["example.com/keep"],
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u1",
                                 "controller": true, "blockOwnerDeletion": false}],
            "creationTimestamp": null})
    };
    let reference = json!({"apiVersion": "v1", "kind": "Pod", "name": "p", "namespace": "default",
        "uid": "u1", "resourceVersion": "7", "fieldPath": "spec.containers{c}"});
    let core = json!({"apiVersion": "v1", "kind": "Event", "metadata": meta("all.1"),
        "involvedObject": reference, "related": reference,
        "reason": "Started", "message": "m", "type": "Normal", "action": "Start",
        "source": {"component": "kubelet", "host": "n1"},
        "firstTimestamp": "2026-11-21T23:00:00Z", "lastTimestamp": "2026-11-21T23:00:01Z",
        "count": 2, "eventTime": "2026-11-21T23:00:00.000000Z",
        "series": {"count": 2, "lastObservedTime": "2026-11-21T23:00:01.000000Z"},
        "reportingComponent": "kubelet", "reportingInstance": "n1"});
    let r = http
        .patch(
            &format!(
                "{}/all.1?fieldManager=m&fieldValidation=Strict",
                core_path("default")
            ),
            APPLY,
            &core,
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let got = r.json();
    assert_eq!(got["related"]["fieldPath"], "spec.containers{c}");
    assert_eq!(got["metadata"]["ownerReferences"][0]["uid"], "u1");
    assert_eq!(got["series"]["count"], 2);
    let v1 = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": meta("all.2"),
        "regarding": reference, "related": reference,
        "reason": "Started", "note": "m", "type": "Normal", "action": "Start",
        "eventTime": "2026-11-21T23:00:00.000000Z",
        "series": {"count": 2, "lastObservedTime": "2026-11-21T23:00:01.000000Z"},
        "reportingController": "kubelet", "reportingInstance": "n1",
        "deprecatedSource": {}, "deprecatedCount": 0,
        "deprecatedFirstTimestamp": null, "deprecatedLastTimestamp": null});
    let r = http
        .patch(
            &format!(
                "{}/all.2?fieldManager=m&fieldValidation=Strict",
                v1_path("default")
            ),
            APPLY,
            &v1,
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.json()["regarding"]["fieldPath"], "spec.containers{c}");
    // Applied again, unchanged: 200.
    let r = http
        .patch(
            &format!(
                "{}/all.2?fieldManager=m&fieldValidation=Strict",
                v1_path("default")
            ),
            APPLY,
            &v1,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    server.shutdown().await.unwrap();
}

/// Method, path, Content-Type, body, the options kind of the 422 and its message's detail.
type OptionsCase<'a> = (&'a str, String, Option<&'a str>, Vec<u8>, &'a str, String);

/// kube's `Validate{Create,Update,Patch,Delete}Options`: an unsupported `dryRun` or
/// `fieldValidation` is a 422 on the options kind, with every other options error in one.
#[tokio::test]
async fn unsupported_dry_run_and_field_validation_are_invalid_options() {
    let (server, _) = memory().await;
    let http = Http::new(&server);
    http.create_core("default", "o.1", "R").await;
    let cp = core_path("default");
    let item = format!("{cp}/o.1");
    let event = serde_json::to_vec(&core_event("o.2", "default", "R")).unwrap();
    let put = serde_json::to_vec(&core_event("o.1", "default", "R")).unwrap();
    let dry = r#"dryRun: Unsupported value: []string{"Foo"}: supported values: "All""#;
    let fv = r#"fieldValidation: Unsupported value: "Bogus": supported values: "", "Ignore", "Strict", "Warn""#;
    let json = Some("application/json");
    let merge = Some("application/merge-patch+json");
    let long = "m".repeat(129);
    let cases: Vec<OptionsCase> = vec![
        (
            "POST",
            format!("{cp}?dryRun=Foo"),
            json,
            event.clone(),
            "CreateOptions",
            dry.into(),
        ),
        (
            "POST",
            format!("{cp}?fieldValidation=Bogus"),
            json,
            event.clone(),
            "CreateOptions",
            fv.into(),
        ),
        // Checked before the body is decoded, as upstream does.
        (
            "POST",
            format!("{cp}?dryRun=Foo"),
            json,
            b"{not json".to_vec(),
            "CreateOptions",
            dry.into(),
        ),
        (
            "PUT",
            format!("{item}?dryRun=Foo"),
            json,
            put.clone(),
            "UpdateOptions",
            dry.into(),
        ),
        (
            "PUT",
            format!("{item}?fieldValidation=Bogus"),
            json,
            put.clone(),
            "UpdateOptions",
            fv.into(),
        ),
        (
            "PATCH",
            format!("{item}?dryRun=Foo"),
            merge,
            b"{}".to_vec(),
            "PatchOptions",
            dry.into(),
        ),
        (
            "PATCH",
            format!("{item}?fieldValidation=Bogus"),
            merge,
            b"{}".to_vec(),
            "PatchOptions",
            fv.into(),
        ),
        (
            "PATCH",
            format!("{item}?fieldValidation=Bogus&fieldManager=m"),
            Some(APPLY),
            b"{}".to_vec(),
            "PatchOptions",
            fv.into(),
        ),
        (
            "DELETE",
            format!("{item}?dryRun=Foo"),
            None,
            Vec::new(),
            "DeleteOptions",
            dry.into(),
        ),
        (
            "DELETE",
            item.clone(),
            json,
            br#"{"dryRun":["Foo"]}"#.to_vec(),
            "DeleteOptions",
            dry.into(),
        ),
        (
            "DELETE",
            format!("{cp}?dryRun=Foo"),
            None,
            Vec::new(),
            "DeleteOptions",
            dry.into(),
        ),
        (
            "DELETE",
            cp.clone(),
            json,
            br#"{"dryRun":["Foo"]}"#.to_vec(),
            "DeleteOptions",
            dry.into(),
        ),
        // Every value counts, an empty one too.
        (
            "POST",
            format!("{cp}?dryRun=All&dryRun="),
            json,
            event.clone(),
            "CreateOptions",
            r#"dryRun: Unsupported value: []string{"All", ""}: supported values: "All""#.into(),
        ),
        // Several errors: one 422, kube's aggregate.
        (
            "POST",
            format!("{cp}?fieldManager={long}&dryRun=Foo&fieldValidation=Bogus"),
            json,
            event.clone(),
            "CreateOptions",
            format!("[fieldManager: Too long: may not be more than 128 bytes, {dry}, {fv}]"),
        ),
        (
            "PATCH",
            format!("{item}?force=true&dryRun=Foo"),
            merge,
            b"{}".to_vec(),
            "PatchOptions",
            format!("[force: Forbidden: may not be specified for non-apply patch, {dry}]"),
        ),
        (
            "PATCH",
            format!("{item}?fieldValidation=Bogus"),
            Some(APPLY),
            b"{}".to_vec(),
            "PatchOptions",
            format!("[fieldManager: Required value: is required for apply patch, {fv}]"),
        ),
        (
            "DELETE",
            item.clone(),
            json,
            br#"{"dryRun":["Foo"],"propagationPolicy":"Sideways"}"#.to_vec(),
            "DeleteOptions",
            format!(
                r#"[propagationPolicy: Unsupported value: "Sideways": supported values: "Background", "Foreground", "Orphan", "nil", {dry}]"#
            ),
        ),
    ];
    for (method, path, ct, body, kind, detail) in cases {
        let r = http.send(method, &path, ct, None, body).await;
        let s = r.status_failure(422, "Invalid");
        assert_eq!(
            s["message"],
            format!(r#"{kind}.meta.k8s.io "" is invalid: {detail}"#),
            "{method} {path}"
        );
        assert_eq!(s["details"]["kind"], kind, "{method} {path}");
        assert_eq!(s["details"]["group"], "meta.k8s.io", "{method} {path}");
        let causes = s["details"]["causes"].as_array().unwrap();
        for (field, reason) in [
            ("dryRun", "FieldValueNotSupported"),
            ("fieldValidation", "FieldValueNotSupported"),
        ] {
            if detail.contains(&format!("{field}: ")) {
                assert!(
                    causes
                        .iter()
                        .any(|c| c["field"] == field && c["reason"] == reason),
                    "{method} {path}: {s}"
                );
            }
        }
    }
    // Nothing was written or deleted.
    let list = http.get(&cp).await.json();
    let names: Vec<_> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].clone())
        .collect();
    assert_eq!(names, [json!("o.1")]);
    server.shutdown().await.unwrap();
}

/// A patched object that does not decode is kube-apiserver's 422 `NewInvalid(GroupKind{},
/// "", patch: Invalid value)`; a JSON patch that cannot be applied is its generic 422, the
/// library's reason in the causes.
#[tokio::test]
async fn patches_that_fail_after_applying_are_invalid() {
    let (server, _) = memory().await;
    let http = Http::new(&server);
    http.create_core("default", "p.1", "R").await;
    let item = format!("{}/p.1", core_path("default"));
    let before = http.get(&item).await.json();

    let patch_invalid = |r: &Resp| {
        let s = r.status_failure(422, "Invalid");
        let message = s["message"].as_str().unwrap().to_string();
        assert!(
            message.starts_with(r#" "" is invalid: patch: Invalid value: ""#),
            "{s}"
        );
        let causes = s["details"]["causes"].as_array().unwrap();
        assert_eq!(causes.len(), 1, "{s}");
        assert_eq!(causes[0]["field"], "patch");
        assert_eq!(causes[0]["reason"], "FieldValueInvalid");
        assert_eq!(
            format!(
                r#" "" is invalid: patch: {}"#,
                causes[0]["message"].as_str().unwrap()
            ),
            message
        );
        // No kind, no name: upstream's empty GroupKind.
        let details = s["details"].as_object().unwrap();
        assert_eq!(details.keys().collect::<Vec<_>>(), ["causes"], "{s}");
        message
    };
    // Merge and JSON patches quote the patched object's JSON…
    for fv in ["", "?fieldValidation=Strict"] {
        let r = http
            .patch(
                &format!("{item}{fv}"),
                "application/merge-patch+json",
                &json!({"count": "notanint"}),
            )
            .await;
        let m = patch_invalid(&r);
        assert!(m.contains(r#"\"count\":\"notanint\""#), "{m}");
        assert!(m.contains(r#"\"name\":\"p.1\""#), "{m}");
        assert!(
            m.contains("count: invalid type: string \"notanint\", expected i32"),
            "{m}"
        );
        assert!(!m.contains("cannot be handled"), "{m}");
    }
    // …even when the patch also has an unknown field, under Strict (the decode error wins).
    let r = http
        .patch(
            &format!("{item}?fieldValidation=Strict"),
            "application/merge-patch+json",
            &json!({"count": "x", "bogus": 1}),
        )
        .await;
    patch_invalid(&r);
    let r = http
        .patch(
            &item,
            "application/json-patch+json",
            &json!([{"op": "replace", "path": "/count", "value": "x"}]),
        )
        .await;
    assert!(patch_invalid(&r).contains(r#"\"count\":\"x\""#));
    // …a strategic-merge patch quotes the patch, as Go prints a map.
    let r = http
        .patch(
            &item,
            "application/strategic-merge-patch+json",
            &json!({"count": "notanint", "metadata": {"labels": {"a": "b"}}}),
        )
        .await;
    let m = patch_invalid(&r);
    assert!(
        m.starts_with(r#" "" is invalid: patch: Invalid value: "map[count:notanint metadata:map[labels:map[a:b]]]": "#),
        "{m}"
    );
    // An unknown field alone under Strict stays the 400.
    let r = http
        .patch(
            &format!("{item}?fieldValidation=Strict"),
            "application/merge-patch+json",
            &json!({"bogus": 1}),
        )
        .await;
    let s = r.status_failure(400, "BadRequest");
    assert!(
        s["message"]
            .as_str()
            .unwrap()
            .contains("strict decoding error"),
        "{s}"
    );

    // A JSON patch that cannot be applied: the generic 422, its reason in the causes.
    let rejected = |r: &Resp| {
        let s = r.status_failure(422, "Invalid");
        assert_eq!(
            s["message"], "the server rejected our request due to an error in our request",
            "{s}"
        );
        let causes = s["details"]["causes"].as_array().unwrap();
        assert_eq!(causes.len(), 1, "{s}");
        assert_eq!(causes[0]["reason"], "UnexpectedServerResponse");
        causes[0]["message"].as_str().unwrap().to_string()
    };
    let cases = [
        (
            json!([{"op": "frob", "path": "/x"}]),
            "Unexpected kind: frob",
        ),
        (json!([{"path": "/x"}]), "Unexpected kind: unknown"),
        (
            json!([{"op": "test", "path": "/reason", "value": "R"},
                   {"op": "test", "path": "/message", "value": "nope"}]),
            "operation '/1' failed at path '/message': value did not match",
        ),
        (
            json!([{"op": "remove", "path": "/nothing/here"}]),
            "operation '/0' failed at path '/nothing/here': path is invalid",
        ),
    ];
    for (ops, want) in &cases {
        let r = http.patch(&item, "application/json-patch+json", ops).await;
        assert_eq!(rejected(&r), *want, "{ops}");
    }
    // evanphx/json-patch reads `op` only when applying: one that is not a string is
    // `unknown` there. What its decoder refuses (an element that is no object) is a 400.
    let r = http
        .patch(
            &item,
            "application/json-patch+json",
            &json!([{"op": 1, "path": "/x"}]),
        )
        .await;
    assert_eq!(rejected(&r), "Unexpected kind: unknown");
    let r = http
        .patch(&item, "application/json-patch+json", &json!([1]))
        .await;
    r.status_failure(400, "BadRequest");
    // Nothing changed.
    assert_eq!(http.get(&item).await.json(), before);
    server.shutdown().await.unwrap();
}

/// `includeObject` only matters to a Table: other answers ignore it, a Table refuses an
/// unknown value with kube's message.
#[tokio::test]
async fn include_object_is_read_only_for_tables() {
    let (server, _) = memory().await;
    let http = Http::new(&server);
    http.create_core("default", "i.1", "R").await;
    let list = "/api/v1/events?includeObject=Bogus";
    let one = format!("{}/i.1?includeObject=Bogus", core_path("default"));
    assert_eq!(http.get(list).await.status, 200);
    assert_eq!(http.get(&one).await.status, 200);
    let pom = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io";
    assert_eq!(http.get_accept(list, pom).await.status, 200);
    for path in [list, one.as_str()] {
        let r = http.get_accept(path, TBL).await;
        let s = r.status_failure(400, "BadRequest");
        assert_eq!(
            s["message"],
            r#"Unable to convert to Table as requested: includeObject: Invalid value: "Bogus": must be 'Metadata', 'Object', 'None', or empty"#
        );
    }
    server.shutdown().await.unwrap();
}

/// The generic 404 and 405 are kube-apiserver's, empty details included.
#[tokio::test]
async fn generic_404_and_405_have_empty_details() {
    let (server, _) = memory().await;
    let http = Http::new(&server);
    let r = http.get("/api/v1/namespaces/default/widgets").await;
    assert_eq!(r.status, 404);
    assert_eq!(
        r.json(),
        json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the server could not find the requested resource","reason":"NotFound","details":{},"code":404})
    );
    let r = http
        .send(
            "POST",
            "/api/v1/events",
            Some("application/json"),
            None,
            "{}",
        )
        .await;
    assert_eq!(
        r.json(),
        json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the server does not allow this method on the requested resource","reason":"MethodNotAllowed","details":{},"code":405})
    );
    server.shutdown().await.unwrap();
}
