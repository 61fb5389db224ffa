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
            "/api/v1/events?includeObject=Everything",
            None,
            "",
            400,
            "BadRequest",
            "Unsupported value",
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
            "the accumulated size increase of copy is",
        ),
        case(
            "PATCH",
            format!("{cp}/good.1"),
            Some("application/json-patch+json"),
            serde_json::to_vec(&many).unwrap(),
            413,
            "RequestEntityTooLarge",
            "The allowed maximum operations in a JSON patch is 10000, got 10001",
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
            400,
            "BadRequest",
            "cannot be handled as a Event",
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
            400,
            "BadRequest",
            "fieldValidation",
        ),
        case(
            "POST",
            format!("{cp}?dryRun=Some"),
            json,
            ok.clone(),
            400,
            "BadRequest",
            "dryRun",
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
        assert!(
            s["message"].as_str().unwrap_or("").contains(c.message_has),
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
