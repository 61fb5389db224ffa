//! The real kubectl against the static API served on 127.0.0.1 (ephemeral port).
//!
//! kubectl must be on PATH (CI installs it); a missing kubectl fails these tests. Every
//! kubectl run gets a fresh HOME and cache dir (no discovery cache leaks between tests),
//! `--request-timeout=10s`, and a hard 60 s bound on the process.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, RawQuery};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use herald_core::clock::FakeClock;
use herald_server::api::field_validation::{FieldValidation, add_warnings, check_fields};
use herald_server::api::{self, ApiState, StatusError};
use herald_wire::schema::GroupVersion;

struct Server {
    port: u16,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

impl Server {
    async fn start(app: axum::Router) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(api::serve(listener, app, async {
            let _ = rx.await;
        }));
        Server {
            port,
            stop: Some(tx),
            task: Some(task),
        }
    }

    async fn static_api() -> Self {
        let clock = Arc::new(FakeClock::new("2024-05-10T12:00:00Z".parse().unwrap()));
        Self::start(api::router(ApiState::new(clock))).await
    }

    async fn shutdown(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            let done = tokio::time::timeout(Duration::from_secs(10), task).await;
            done.expect("server stops")
                .expect("server task")
                .expect("serve ok");
        }
    }
}

struct Kubectl {
    dir: tempfile::TempDir,
    kubeconfig: PathBuf,
}

struct Output {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Kubectl {
    fn new(port: u16) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: herald\n  cluster:\n    server: http://127.0.0.1:{port}\ncontexts:\n- name: herald\n  context:\n    cluster: herald\n    namespace: default\n    user: herald\ncurrent-context: herald\nusers:\n- name: herald\n  user: {{}}\n"
            ),
        )
        .unwrap();
        Kubectl { dir, kubeconfig }
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    async fn run(&self, args: &[&str]) -> Output {
        let home = self.dir.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let mut cmd = tokio::process::Command::new("kubectl");
        cmd.args(args)
            .arg("--request-timeout=10s")
            .env("HOME", &home)
            .env("KUBECONFIG", &self.kubeconfig)
            .env("KUBECACHEDIR", self.dir.path().join("cache"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!(
                "kubectl is not on PATH: these tests need the real kubectl (CI installs it): {e}"
            ),
            Err(e) => panic!("cannot start kubectl: {e}"),
        };
        let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
            .await
            .unwrap_or_else(|_| panic!("kubectl {args:?} did not finish within 60 s"))
            .expect("kubectl output");
        Output {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

fn show(o: &Output) -> String {
    format!(
        "rc={:?}\n--- stdout\n{}--- stderr\n{}",
        o.code, o.stdout, o.stderr
    )
}

const GOOD_CORE: &str = "apiVersion: v1
kind: Event
metadata:
  name: my-event
  namespace: default
involvedObject:
  kind: Pod
  name: x
  namespace: default
reason: Testing
message: hello from yaml
type: Normal
source:
  component: me
";

const BAD_CORE: &str = "apiVersion: v1
kind: Event
metadata:
  name: my-event
  namespace: default
involvedObject:
  kind: Pod
  name: x
reason: Testing
message: hello
spec:
  foo: bar
";

const BAD_EVENTS_V1: &str = "apiVersion: events.k8s.io/v1
kind: Event
metadata:
  generateName: gen-
  namespace: default
eventTime: \"2025-01-01T00:00:00.000000Z\"
action: Test
reason: Testing
note: hello
message: core/v1 only
regarding:
  kind: Pod
  name: x
  namespace: default
reportingController: example.com/me
reportingInstance: me-1
type: Normal
";

fn rows(stdout: &str) -> Vec<Vec<&str>> {
    stdout
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|r| !r.is_empty())
        .collect()
}

#[tokio::test]
async fn kubectl_version_shows_the_server_version() {
    let server = Server::static_api().await;
    let k = Kubectl::new(server.port);
    let o = k.run(&["version"]).await;
    assert_eq!(o.code, Some(0), "{}", show(&o));
    assert!(
        o.stdout
            .lines()
            .any(|l| l.trim() == "Server Version: v1.32.4+herald"),
        "{}",
        show(&o)
    );
    // The dispatcher picked the 1.32 kubectl from the server's minor.
    assert!(o.stdout.contains("Client Version: v1.32."), "{}", show(&o));
    assert!(
        !o.stderr.contains("WARNING: version difference"),
        "{}",
        show(&o)
    );
    server.shutdown().await;
}

#[tokio::test]
async fn kubectl_api_resources_lists_events_in_both_groups() {
    let server = Server::static_api().await;
    let k = Kubectl::new(server.port);
    let o = k.run(&["api-resources"]).await;
    assert_eq!(o.code, Some(0), "{}", show(&o));
    let r = rows(&o.stdout);
    assert_eq!(
        r[0],
        ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"],
        "{}",
        show(&o)
    );
    // The header, events in both groups, and (as on kube-apiserver) the three self-review
    // resources kubectl's `auth` commands create.
    assert_eq!(r.len(), 6, "{}", show(&o));
    assert!(
        r.contains(&vec![
            "selfsubjectreviews",
            "authentication.k8s.io/v1",
            "false",
            "SelfSubjectReview"
        ]),
        "{}",
        show(&o)
    );
    assert!(
        r.contains(&vec!["events", "ev", "v1", "true", "Event"]),
        "{}",
        show(&o)
    );
    assert!(
        r.contains(&vec!["events", "ev", "events.k8s.io/v1", "true", "Event"]),
        "{}",
        show(&o)
    );

    let o = k
        .run(&["api-resources", "-o", "wide", "--api-group=events.k8s.io"])
        .await;
    assert_eq!(o.code, Some(0), "{}", show(&o));
    let r = rows(&o.stdout);
    assert_eq!(r[0][5], "VERBS", "{}", show(&o));
    assert_eq!(
        r[1],
        [
            "events",
            "ev",
            "events.k8s.io/v1",
            "true",
            "Event",
            "create,delete,deletecollection,get,list,patch,update,watch"
        ],
        "{}",
        show(&o)
    );
    assert_eq!(r.len(), 2, "only the events.k8s.io group: {}", show(&o));
    server.shutdown().await;
}

#[tokio::test]
async fn kubectl_explain_reads_openapi_v3() {
    let server = Server::static_api().await;
    let k = Kubectl::new(server.port);

    let o = k.run(&["explain", "events"]).await;
    assert_eq!(o.code, Some(0), "{}", show(&o));
    let out = &o.stdout;
    assert!(
        out.contains("KIND:       Event\nVERSION:    v1\n"),
        "{}",
        show(&o)
    );
    for field in [
        "involvedObject\t<ObjectReference> -required-",
        "metadata\t<ObjectMeta> -required-",
        "count\t<integer>",
        "lastTimestamp\t<string>",
        "series\t<EventSeries>",
        "source\t<EventSource>",
        "reportingComponent\t<string>",
    ] {
        assert!(out.contains(field), "missing {field:?}: {}", show(&o));
    }

    let o = k
        .run(&["explain", "events", "--api-version=events.k8s.io/v1"])
        .await;
    assert_eq!(o.code, Some(0), "{}", show(&o));
    let out = &o.stdout;
    assert!(out.contains("GROUP:      events.k8s.io"), "{}", show(&o));
    for field in [
        "eventTime\t<string> -required-",
        "note\t<string>",
        "regarding\t<ObjectReference>",
        "deprecatedCount\t<integer>",
    ] {
        assert!(out.contains(field), "missing {field:?}: {}", show(&o));
    }
    assert!(!out.contains("involvedObject"), "{}", show(&o));

    let o = k.run(&["explain", "events.metadata.labels"]).await;
    assert_eq!(o.code, Some(0), "{}", show(&o));
    assert!(
        o.stdout.contains("FIELD: labels <map[string]string>"),
        "{}",
        show(&o)
    );

    let o = k.run(&["explain", "events.series"]).await;
    assert_eq!(o.code, Some(0), "{}", show(&o));
    assert!(
        o.stdout.contains("lastObservedTime\t<string>"),
        "{}",
        show(&o)
    );

    let o = k.run(&["explain", "events.bogus"]).await;
    assert_ne!(o.code, Some(0), "{}", show(&o));
    assert!(
        o.stderr.contains(r#"field "bogus" does not exist"#),
        "{}",
        show(&o)
    );
    server.shutdown().await;
}

#[tokio::test]
async fn kubectl_create_dry_run_client_accepts_a_valid_event() {
    let server = Server::static_api().await;
    let k = Kubectl::new(server.port);
    let f = k.write("event.yaml", GOOD_CORE);
    let o = k
        .run(&["create", "-f", f.to_str().unwrap(), "--dry-run=client"])
        .await;
    assert_eq!(o.code, Some(0), "{}", show(&o));
    assert_eq!(
        o.stdout.trim(),
        "event/my-event created (dry run)",
        "{}",
        show(&o)
    );

    let o = k
        .run(&[
            "create",
            "-f",
            f.to_str().unwrap(),
            "--dry-run=client",
            "-o",
            "jsonpath={.involvedObject.name}/{.message}",
        ])
        .await;
    assert_eq!(o.code, Some(0), "{}", show(&o));
    assert_eq!(o.stdout, "x/hello from yaml", "{}", show(&o));
    server.shutdown().await;
}

/// Stands in for the events create handler (built elsewhere): applies the request's
/// `fieldValidation` with the api module's checker and echoes the body back as created.
async fn create_fixture(
    gv: GroupVersion,
    query: Option<String>,
    body: axum::body::Bytes,
    seen: Arc<std::sync::Mutex<Vec<String>>>,
) -> Result<Response, StatusError> {
    let query = query.unwrap_or_default();
    seen.lock().unwrap().push(query.clone());
    let directive = query
        .split('&')
        .find_map(|kv| kv.strip_prefix("fieldValidation="));
    // An unsupported directive is the options validation's 422, as in the real handler.
    let directive = FieldValidation::from_query(directive).ok_or_else(|| {
        herald_server::registry::options::options_invalid(
            "CreateOptions",
            herald_server::registry::options::field_validation_causes(directive),
        )
    })?;
    let obj: serde_json::Value = serde_json::from_slice(&body)
        .map_err(|e| herald_core::status::ApiError::bad_request(e.to_string()))?;
    let warnings = check_fields(gv, directive, &obj, &[])?;
    let mut resp = (StatusCode::CREATED, axum::Json(obj)).into_response();
    add_warnings(&mut resp, &warnings);
    Ok(resp)
}

async fn server_with_create_fixture() -> (Server, Arc<std::sync::Mutex<Vec<String>>>) {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (s1, s2) = (seen.clone(), seen.clone());
    let events = axum::Router::new()
        .route(
            "/api/v1/namespaces/{ns}/events",
            post(move |_: Path<String>, RawQuery(q): RawQuery, body| {
                create_fixture(GroupVersion::CORE_V1, q, body, s1.clone())
            }),
        )
        .route(
            "/apis/events.k8s.io/v1/namespaces/{ns}/events",
            post(move |_: Path<String>, RawQuery(q): RawQuery, body| {
                create_fixture(GroupVersion::EVENTS_V1, q, body, s2.clone())
            }),
        );
    let clock = Arc::new(FakeClock::new("2024-05-10T12:00:00Z".parse().unwrap()));
    let server = Server::start(api::router_with(ApiState::new(clock), events)).await;
    (server, seen)
}

#[tokio::test]
async fn kubectl_create_rejects_unknown_fields_with_kubectls_message() {
    let (server, seen) = server_with_create_fixture().await;
    let k = Kubectl::new(server.port);

    let good = k.write("good.yaml", GOOD_CORE);
    let o = k.run(&["create", "-f", good.to_str().unwrap()]).await;
    assert_eq!(o.code, Some(0), "{}", show(&o));
    assert_eq!(o.stdout.trim(), "event/my-event created", "{}", show(&o));
    // kubectl found fieldValidation in the OpenAPI document and asked the server to be strict.
    assert!(
        seen.lock()
            .unwrap()
            .iter()
            .any(|q| q.contains("fieldValidation=Strict")),
        "{:?}",
        seen.lock().unwrap()
    );

    let bad = k.write("bad.yaml", BAD_CORE);
    let o = k.run(&["create", "-f", bad.to_str().unwrap()]).await;
    assert_eq!(o.code, Some(1), "{}", show(&o));
    assert_eq!(
        o.stderr.trim(),
        format!(
            r#"Error from server (BadRequest): error when creating "{}": Event in version "v1" cannot be handled as a Event: strict decoding error: unknown field "spec""#,
            bad.display()
        ),
        "{}",
        show(&o)
    );

    let o = k
        .run(&["create", "-f", bad.to_str().unwrap(), "--dry-run=server"])
        .await;
    assert_eq!(o.code, Some(1), "{}", show(&o));
    assert!(
        o.stderr
            .contains(r#"strict decoding error: unknown field "spec""#),
        "{}",
        show(&o)
    );

    let o = k
        .run(&["create", "-f", bad.to_str().unwrap(), "--validate=warn"])
        .await;
    assert_eq!(o.code, Some(0), "{}", show(&o));
    assert!(
        o.stderr.contains(r#"Warning: unknown field "spec""#),
        "{}",
        show(&o)
    );

    let bad_v1 = k.write("bad-v1.yaml", BAD_EVENTS_V1);
    let o = k.run(&["create", "-f", bad_v1.to_str().unwrap()]).await;
    assert_eq!(o.code, Some(1), "{}", show(&o));
    assert!(
        o.stderr.contains(r#"Event in version "v1" cannot be handled as a Event: strict decoding error: unknown field "message""#),
        "{}",
        show(&o)
    );
    server.shutdown().await;
}

/// Like against a real cluster: because the server advertises `fieldValidation`, kubectl does
/// no schema check of its own, so a client-side dry run cannot see unknown fields. The
/// rejection happens on the server (test above).
#[tokio::test]
async fn kubectl_client_dry_run_leaves_unknown_fields_to_the_server() {
    let (server, seen) = server_with_create_fixture().await;
    let k = Kubectl::new(server.port);
    let bad = k.write("bad.yaml", BAD_CORE);
    let o = k
        .run(&["create", "-f", bad.to_str().unwrap(), "--dry-run=client"])
        .await;
    assert_eq!(o.code, Some(0), "{}", show(&o));
    assert_eq!(
        o.stdout.trim(),
        "event/my-event created (dry run)",
        "{}",
        show(&o)
    );
    assert!(
        seen.lock().unwrap().is_empty(),
        "a client dry run sends nothing"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn kubectl_raw_health_endpoints() {
    let server = Server::static_api().await;
    let k = Kubectl::new(server.port);
    let o = k.run(&["get", "--raw", "/healthz"]).await;
    assert_eq!((o.code, o.stdout.as_str()), (Some(0), "ok"), "{}", show(&o));
    let o = k.run(&["get", "--raw", "/readyz?verbose"]).await;
    assert_eq!(o.code, Some(0), "{}", show(&o));
    assert_eq!(
        o.stdout,
        "[+]ping ok\n[+]log ok\nreadyz check passed\n",
        "{}",
        show(&o)
    );
    let o = k.run(&["get", "--raw", "/livez/ping"]).await;
    assert_eq!((o.code, o.stdout.as_str()), (Some(0), "ok"), "{}", show(&o));
    server.shutdown().await;
}

#[tokio::test]
async fn kubectl_get_events_without_the_events_routes_is_a_clean_404() {
    // The static router alone: discovery works, the resource path is a Status 404.
    let server = Server::static_api().await;
    let k = Kubectl::new(server.port);
    let o = k.run(&["get", "events"]).await;
    assert_eq!(o.code, Some(1), "{}", show(&o));
    assert!(
        o.stderr.trim()
            == r#"Error from server (NotFound): Unable to list "/v1, Resource=events": the server could not find the requested resource"#,
        "{}",
        show(&o)
    );
    server.shutdown().await;
}

fn fixture_events() -> Vec<k8s_openapi::api::core::v1::Event> {
    use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
    let ev =
        |ns: &str, name: &str, obj: &str, reason: &str, first: &str, last: &str, count: i32| {
            Event {
                metadata: ObjectMeta {
                    name: Some(name.into()),
                    namespace: Some(ns.into()),
                    resource_version: Some("7".into()),
                    labels: Some([("app".to_string(), "web".to_string())].into()),
                    ..Default::default()
                },
                involved_object: ObjectReference {
                    kind: Some("Pod".into()),
                    name: Some(obj.into()),
                    namespace: Some(ns.into()),
                    field_path: Some("spec.containers{app}".into()),
                    ..Default::default()
                },
                reason: Some(reason.into()),
                message: Some(format!("{reason} happened ")),
                type_: Some("Warning".into()),
                source: Some(EventSource {
                    component: Some("kubelet".into()),
                    host: Some("node-1".into()),
                }),
                first_timestamp: Some(Time(first.parse().unwrap())),
                last_timestamp: Some(Time(last.parse().unwrap())),
                count: Some(count),
                ..Default::default()
            }
        };
    vec![
        ev(
            "default",
            "web-1.a",
            "web-1",
            "BackOff",
            "2024-05-08T09:00:00Z",
            "2024-05-10T11:55:00Z",
            7,
        ),
        ev(
            "default",
            "web-2.b",
            "web-2",
            "Failed",
            "2024-05-10T11:59:15Z",
            "2024-05-10T11:59:15Z",
            1,
        ),
        ev(
            "kube-system",
            "dns.c",
            "dns",
            "Unhealthy",
            "2024-05-10T09:00:00Z",
            "2024-05-10T10:30:00Z",
            3,
        ),
    ]
}

/// Stands in for the events list handler (built elsewhere): negotiates the output and prints
/// fixed events through the api module's Table printer.
async fn list_fixture(
    ns: Option<String>,
    headers: axum::http::HeaderMap,
    query: Option<String>,
    now: jiff::Timestamp,
) -> Result<Response, StatusError> {
    use herald_server::api::negotiate::{
        IncludeObject, Output, Target, accept_header, negotiate_output,
    };
    use herald_wire::table::{TableMeta, TableOptions, core_v1_object, event_table};
    let events: Vec<_> = fixture_events()
        .into_iter()
        .filter(|e| ns.is_none() || e.metadata.namespace == ns)
        .collect();
    let query = query.unwrap_or_default();
    let include = query
        .split('&')
        .find_map(|kv| kv.strip_prefix("includeObject="));
    let meta = TableMeta {
        resource_version: Some("103".into()),
        ..Default::default()
    };
    if query.split('&').any(|kv| kv == "watch=true") {
        // A finite watch: the later events of the fixture as one-row Tables, column
        // definitions only in the first (like kube-apiserver), then the stream ends.
        assert!(
            query.contains("resourceVersion=103"),
            "watch from the list RV: {query}"
        );
        let Output::Table(version) =
            negotiate_output(accept_header(&headers).as_deref(), Target::Object)?
        else {
            panic!("fixture only streams Tables");
        };
        let mut lines = String::new();
        for (i, e) in events.iter().enumerate() {
            let opts = TableOptions {
                version,
                include_object: IncludeObject::Metadata,
                no_headers: i > 0,
            };
            let mut changed = e.clone();
            changed.count = Some(100 + i as i32);
            let t = event_table(
                std::slice::from_ref(&changed),
                &TableMeta::default(),
                now,
                &opts,
                &core_v1_object,
            );
            lines.push_str(&serde_json::json!({"type": "MODIFIED", "object": t}).to_string());
            lines.push('\n');
        }
        return Ok((
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            lines,
        )
            .into_response());
    }
    let body = match negotiate_output(accept_header(&headers).as_deref(), Target::List)? {
        Output::Table(version) => {
            let opts = TableOptions {
                version,
                include_object: IncludeObject::from_query(include)?,
                no_headers: false,
            };
            event_table(&events, &meta, now, &opts, &core_v1_object)
        }
        _ => serde_json::json!({
            "kind": "EventList", "apiVersion": "v1", "metadata": {"resourceVersion": "103"},
            "items": events.iter().map(core_v1_object).collect::<Vec<_>>(),
        }),
    };
    Ok(axum::Json(body).into_response())
}

async fn server_with_list_fixture() -> Server {
    use axum::routing::get;
    let now: jiff::Timestamp = "2024-05-10T12:00:00Z".parse().unwrap();
    let events = axum::Router::new()
        .route(
            "/api/v1/events",
            get(move |h: axum::http::HeaderMap, RawQuery(q): RawQuery| {
                list_fixture(None, h, q, now)
            }),
        )
        .route(
            "/api/v1/namespaces/{ns}/events",
            get(
                move |Path(ns): Path<String>, h: axum::http::HeaderMap, RawQuery(q): RawQuery| {
                    list_fixture(Some(ns), h, q, now)
                },
            ),
        );
    let clock = Arc::new(FakeClock::new(now));
    Server::start(api::router_with(ApiState::new(clock), events)).await
}

#[tokio::test]
async fn kubectl_get_events_prints_the_server_table() {
    let server = server_with_list_fixture().await;
    let k = Kubectl::new(server.port);

    let o = k.run(&["get", "events"]).await;
    assert_eq!(o.code, Some(0), "{}", show(&o));
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", show(&o));
    assert_eq!(
        rows(lines[0]),
        [vec!["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]],
        "{}",
        show(&o)
    );
    assert_eq!(
        rows(lines[1]),
        [vec![
            "5m",
            "Warning",
            "BackOff",
            "pod/web-1",
            "BackOff",
            "happened"
        ]],
        "{}",
        show(&o)
    );
    assert_eq!(
        rows(lines[2])[0][..4],
        ["45s", "Warning", "Failed", "pod/web-2"],
        "{}",
        show(&o)
    );

    let o = k.run(&["get", "events", "-o", "wide"]).await;
    assert_eq!(o.code, Some(0), "{}", show(&o));
    let header = o.stdout.lines().next().unwrap_or("");
    let cols: Vec<&str> = header
        .split("   ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    assert_eq!(
        cols,
        [
            "LAST SEEN",
            "TYPE",
            "REASON",
            "OBJECT",
            "SUBOBJECT",
            "SOURCE",
            "MESSAGE",
            "FIRST SEEN",
            "COUNT",
            "NAME"
        ],
        "{}",
        show(&o)
    );
    let line = o.stdout.lines().nth(1).unwrap_or("");
    for cell in [
        "spec.containers{app}",
        "kubelet, node-1",
        "BackOff happened",
        "2d3h",
        " 7 ",
        "web-1.a",
    ] {
        assert!(line.contains(cell), "missing {cell:?}: {}", show(&o));
    }

    // -A: the NAMESPACE column comes from each row's PartialObjectMetadata.
    let o = k.run(&["get", "events", "-A", "--show-labels"]).await;
    assert_eq!(o.code, Some(0), "{}", show(&o));
    let r = rows(&o.stdout);
    assert_eq!(r[0][0], "NAMESPACE", "{}", show(&o));
    assert_eq!(*r[0].last().unwrap(), "LABELS", "{}", show(&o));
    assert_eq!(r[3][..3], ["kube-system", "90m", "Warning"], "{}", show(&o));
    assert_eq!(*r[3].last().unwrap(), "app=web", "{}", show(&o));

    // --sort-by needs the full objects embedded (includeObject=Object).
    let o = k
        .run(&["get", "events", "-A", "--sort-by=.lastTimestamp"])
        .await;
    assert_eq!(o.code, Some(0), "{}", show(&o));
    let order: Vec<&str> = rows(&o.stdout).iter().skip(1).map(|r| r[3]).collect();
    assert_eq!(order, ["Unhealthy", "BackOff", "Failed"], "{}", show(&o));
    server.shutdown().await;
}

/// kubectl against the legacy discovery documents (what kube-rs' `Discovery::run()` reads):
/// a layer drops the aggregated-discovery Accept clauses, as an older server would ignore them.
#[tokio::test]
async fn kubectl_api_resources_through_legacy_discovery() {
    use axum::http::{HeaderValue, Request, header};
    let seen = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let log = seen.clone();
    let clock = Arc::new(FakeClock::new("2024-05-10T12:00:00Z".parse().unwrap()));
    let app = api::router(ApiState::new(clock)).layer(axum::middleware::map_request(
        move |mut req: Request<axum::body::Body>| {
            let log = log.clone();
            async move {
                log.lock().unwrap().push(req.uri().path().to_string());
                if req.uri().path() == "/api" || req.uri().path() == "/apis" {
                    req.headers_mut()
                        .insert(header::ACCEPT, HeaderValue::from_static("application/json"));
                }
                req
            }
        },
    ));
    let server = Server::start(app).await;
    let k = Kubectl::new(server.port);
    let o = k.run(&["api-resources"]).await;
    assert_eq!(o.code, Some(0), "{}", show(&o));
    let r = rows(&o.stdout);
    assert!(
        r.contains(&vec!["events", "ev", "v1", "true", "Event"]),
        "{}",
        show(&o)
    );
    assert!(
        r.contains(&vec!["events", "ev", "events.k8s.io/v1", "true", "Event"]),
        "{}",
        show(&o)
    );
    let paths = seen.lock().unwrap().clone();
    for p in ["/api/v1", "/apis/events.k8s.io/v1"] {
        assert!(
            paths.iter().any(|s| s == p),
            "legacy discovery fetched {p}: {paths:?}"
        );
    }
    server.shutdown().await;
}

#[tokio::test]
async fn kubectl_get_events_watch_prints_table_rows_from_the_stream() {
    let server = server_with_list_fixture().await;
    let k = Kubectl::new(server.port);
    let o = k.run(&["get", "events", "-w", "-o", "wide"]).await;
    // The fixture's watch ends after its events; kubectl then exits cleanly.
    assert_eq!(o.code, Some(0), "{}", show(&o));
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert_eq!(
        lines.len(),
        5,
        "header + 2 listed + 2 watched: {}",
        show(&o)
    );
    assert!(lines[0].starts_with("LAST SEEN"), "{}", show(&o));
    assert!(
        lines[3].contains("BackOff happened") && lines[3].contains(" 100 "),
        "{}",
        show(&o)
    );
    assert!(
        lines[4].contains("Failed happened") && lines[4].contains(" 101 "),
        "{}",
        show(&o)
    );
    server.shutdown().await;
}
