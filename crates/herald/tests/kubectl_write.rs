//! The real kubectl writing events to a live `herald serve`: `create -f` with validation on,
//! server-side apply, the three patch types, label, annotate, delete (one, `--all`, and one
//! a finalizer holds until it is patched away), and events.k8s.io/v1 objects read back
//! through core/v1.
//!
//! Assertions are on what kubectl prints. kubectl must be on PATH (a missing kubectl fails).

mod support;

use support::{Herald, Kubectl, Output, core_event, seeded};

fn jsonpath(v: &serde_json::Value, path: &[&str]) -> serde_json::Value {
    let mut cur = v;
    for p in path {
        cur = &cur[*p];
    }
    cur.clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_with_strict_validation_accepts_a_valid_event_and_rejects_unknown_fields() {
    let server = Herald::suite().await;
    let k = Kubectl::new(&server).await;
    let good = k.write(
        "good.yaml",
        &core_event("my-event", "web-1", "Normal", "Testing", "hello from yaml"),
    );
    let o = k.run(&["create", "-f", &good]).await;
    assert_eq!(o.ok(), "event/my-event created\n", "{}", o.show());

    let o = k.run(&["get", "event", "my-event", "-o", "json"]).await;
    let v = o.json();
    assert_eq!(v["message"], "hello from yaml");
    assert_eq!(v["involvedObject"]["name"], "web-1");
    assert_eq!(v["source"]["component"], "e2e");
    assert!(v["metadata"]["uid"].as_str().is_some_and(|u| !u.is_empty()));
    assert!(
        v["metadata"]["resourceVersion"]
            .as_str()
            .is_some_and(|r| r.parse::<u64>().is_ok())
    );
    assert!(v["metadata"]["creationTimestamp"].as_str().is_some());

    // Creating it again: AlreadyExists, the way kube-apiserver words it.
    let o = k.run(&["create", "-f", &good]).await;
    assert!(
        o.failed().contains(&format!(
            "Error from server (AlreadyExists): error when creating \"{good}\": events \"my-event\" already exists"
        )),
        "{}",
        o.show()
    );
    // A server-side dry run checks the name too, so it fails the same way.
    let o = k.run(&["create", "-f", &good, "--dry-run=server"]).await;
    assert!(
        o.failed().contains(&format!(
            "Error from server (AlreadyExists): error when creating \"{good}\": events \"my-event\" already exists"
        )),
        "{}",
        o.show()
    );

    // Strict field validation: the server rejects an unknown field.
    let bad = k.write(
        "bad.yaml",
        "apiVersion: v1
kind: Event
metadata:
  name: bad-event
  namespace: default
involvedObject:
  kind: Pod
  name: web-1
  namespace: default
reason: Testing
message: hello
spec:
  foo: bar
",
    );
    let o = k.run(&["create", "-f", &bad]).await;
    assert!(
        o.failed().contains(&format!(
            "Error from server (BadRequest): error when creating \"{bad}\": Event in version \"v1\" \
             cannot be handled as a Event: strict decoding error: unknown field \"spec\""
        )),
        "{}",
        o.show()
    );
    let o = k.run(&["get", "event", "bad-event"]).await;
    assert!(
        o.failed()
            .contains("Error from server (NotFound): events \"bad-event\" not found"),
        "{}",
        o.show()
    );

    // A value of the wrong type: the error names the field.
    let typo = k.write(
        "typo.yaml",
        "apiVersion: v1
kind: Event
metadata:
  name: typo-event
  namespace: default
involvedObject:
  kind: Pod
  name: web-1
count: many
",
    );
    let o = k.run(&["create", "-f", &typo]).await;
    assert!(
        o.failed().contains(
            r#"Event in version "v1" cannot be handled as a Event: count: invalid type: string "many", expected i32"#
        ),
        "{}",
        o.show()
    );

    // generateName: the server picks the name.
    let gen_ = k.write(
        "gen.yaml",
        "apiVersion: v1
kind: Event
metadata:
  generateName: gen-
  namespace: default
involvedObject:
  kind: Pod
  name: web-1
  namespace: default
reason: Generated
message: named by the server
",
    );
    let o = k.run(&["create", "-f", &gen_]).await;
    let out = o.ok().trim();
    let name = out
        .strip_prefix("event/gen-")
        .and_then(|s| s.strip_suffix(" created"))
        .unwrap_or_else(|| panic!("{}", o.show()));
    assert_eq!(name.len(), 5, "{}", o.show());
    let o = k
        .run(&[
            "get",
            "event",
            &format!("gen-{name}"),
            "-o",
            "jsonpath={.message}",
        ])
        .await;
    assert_eq!(o.ok(), "named by the server", "{}", o.show());

    // A core/v1 event whose namespace disagrees with its object: 422 with the field cause.
    let mismatch = k.write(
        "mismatch.yaml",
        "apiVersion: v1
kind: Event
metadata:
  name: mismatch
  namespace: default
involvedObject:
  kind: Pod
  name: web-1
  namespace: other
reason: Testing
",
    );
    let o = k.run(&["create", "-f", &mismatch]).await;
    let err = o.failed();
    assert!(
        err.contains("The Event \"mismatch\" is invalid: involvedObject.namespace: Invalid value: \"other\": does not match event.namespace"),
        "{}",
        o.show()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_server_side_creates_then_updates() {
    let server = Herald::suite().await;
    let k = Kubectl::new(&server).await;
    let manifest = |message: &str| {
        format!(
            "apiVersion: v1
kind: Event
metadata:
  name: ssa-event
  namespace: default
  labels:
    stage: \"{message}\"
involvedObject:
  kind: Pod
  name: web
  namespace: default
reason: Applied
message: {message}
type: Normal
"
        )
    };
    let f = k.write("ssa.yaml", &manifest("first"));
    let o = k.run(&["apply", "--server-side", "-f", &f]).await;
    assert_eq!(
        o.ok(),
        "event/ssa-event serverside-applied\n",
        "{}",
        o.show()
    );
    let o = k.run(&["get", "event", "ssa-event", "-o", "json"]).await;
    let v1 = o.json();
    assert_eq!(v1["message"], "first");
    assert_eq!(v1["metadata"]["labels"]["stage"], "first");

    let f = k.write("ssa.yaml", &manifest("second"));
    let o = k.run(&["apply", "--server-side", "-f", &f]).await;
    assert_eq!(
        o.ok(),
        "event/ssa-event serverside-applied\n",
        "{}",
        o.show()
    );
    let o = k.run(&["get", "event", "ssa-event", "-o", "json"]).await;
    let v2 = o.json();
    assert_eq!(v2["message"], "second");
    assert_eq!(v2["metadata"]["labels"]["stage"], "second");
    assert_eq!(v2["metadata"]["uid"], v1["metadata"]["uid"], "same object");
    let rv = |v: &serde_json::Value| -> u64 {
        v["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap()
    };
    assert!(rv(&v2) > rv(&v1), "the update got a newer resourceVersion");

    let o = k.run(&["get", "events", "-o", "wide"]).await;
    let t = o.table();
    assert_eq!(t.column("NAME"), ["ssa-event"], "{}", o.show());
    assert_eq!(t.cell("NAME", "ssa-event", "MESSAGE"), "second");
}

/// Server-side apply owns fields: after `kubectl patch` changes a field kubectl applied, the
/// same apply is a conflict (kubectl's own error text, from the server's 409), nothing
/// changes, and `--force-conflicts` takes the field back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_server_side_conflicts_with_a_patch_until_forced() {
    let server = Herald::suite().await;
    let k = Kubectl::new(&server).await;
    let f = k.write(
        "ssa.yaml",
        "apiVersion: v1
kind: Event
metadata:
  name: owned.1
  namespace: default
involvedObject:
  kind: Pod
  name: web
  namespace: default
reason: Applied
message: from the manifest
type: Normal
",
    );
    k.run(&["apply", "--server-side", "-f", &f]).await.ok();
    let managers = |o: &Output| -> Vec<(String, String)> {
        o.json()["metadata"]["managedFields"]
            .as_array()
            .unwrap_or(&Vec::new())
            .iter()
            .map(|e| {
                (
                    e["manager"].as_str().unwrap_or("").to_string(),
                    e["operation"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect()
    };
    let o = k
        .run(&[
            "get",
            "event",
            "owned.1",
            "-o",
            "json",
            "--show-managed-fields",
        ])
        .await;
    assert_eq!(
        managers(&o),
        [("kubectl".into(), "Apply".into())],
        "{}",
        o.show()
    );
    assert_eq!(
        o.json()["metadata"]["managedFields"][0]["fieldsV1"],
        serde_json::json!({"f:involvedObject": {}, "f:message": {}, "f:reason": {}, "f:type": {}}),
        "{}",
        o.show()
    );

    let o = k
        .run(&[
            "patch",
            "event",
            "owned.1",
            "-p",
            r#"{"message":"patched"}"#,
        ])
        .await;
    assert_eq!(o.ok(), "event/owned.1 patched\n", "{}", o.show());

    let o = k.run(&["apply", "--server-side", "-f", &f]).await;
    let err = o.failed();
    assert!(
        err.contains(
            "error: Apply failed with 1 conflict: conflict with \"kubectl-patch\" using v1: .message"
        ),
        "{}",
        o.show()
    );
    assert!(err.contains("--force-conflicts"), "{}", o.show());
    let o = k
        .run(&[
            "get",
            "event",
            "owned.1",
            "-o",
            "json",
            "--show-managed-fields",
        ])
        .await;
    assert_eq!(o.json()["message"], "patched", "a conflict changes nothing");
    assert_eq!(
        managers(&o),
        [
            ("kubectl".into(), "Apply".into()),
            ("kubectl-patch".into(), "Update".into())
        ],
        "{}",
        o.show()
    );

    let o = k
        .run(&["apply", "--server-side", "--force-conflicts", "-f", &f])
        .await;
    assert_eq!(o.ok(), "event/owned.1 serverside-applied\n", "{}", o.show());
    let o = k
        .run(&[
            "get",
            "event",
            "owned.1",
            "-o",
            "json",
            "--show-managed-fields",
        ])
        .await;
    assert_eq!(o.json()["message"], "from the manifest");
    // kubectl-patch owned only .message; forced away, its entry is gone.
    assert_eq!(
        managers(&o),
        [("kubectl".into(), "Apply".into())],
        "{}",
        o.show()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patch_strategic_merge_and_json() {
    let (_server, k) = seeded().await;
    let get = |field: &'static str| {
        let k = &k;
        async move {
            let o = k
                .run(&[
                    "get",
                    "event",
                    "web-1.b",
                    "-o",
                    &format!("jsonpath={field}"),
                ])
                .await;
            o.ok().to_string()
        }
    };

    let o = k
        .run(&[
            "patch",
            "event",
            "web-1.b",
            "-p",
            r#"{"message":"strategic"}"#,
        ])
        .await;
    assert_eq!(o.ok(), "event/web-1.b patched\n", "{}", o.show());
    assert_eq!(get("{.message}").await, "strategic");

    let o = k
        .run(&[
            "patch",
            "event",
            "web-1.b",
            "--type=merge",
            "-p",
            r#"{"message":"merged","count":6}"#,
        ])
        .await;
    assert_eq!(o.ok(), "event/web-1.b patched\n", "{}", o.show());
    assert_eq!(get("{.message} {.count}").await, "merged 6");

    let o = k
        .run(&[
            "patch",
            "event",
            "web-1.b",
            "--type=json",
            "-p",
            r#"[{"op":"replace","path":"/message","value":"json-patched"},{"op":"remove","path":"/involvedObject/fieldPath"}]"#,
        ])
        .await;
    assert_eq!(o.ok(), "event/web-1.b patched\n", "{}", o.show());
    assert_eq!(get("{.message}").await, "json-patched");
    assert_eq!(get("{.involvedObject.fieldPath}").await, "");
    assert_eq!(get("{.involvedObject.name}").await, "web-1");

    // The same patch again changes nothing, and kubectl notices from the response.
    let o = k
        .run(&[
            "patch",
            "event",
            "web-1.b",
            "--type=merge",
            "-p",
            r#"{"message":"json-patched"}"#,
        ])
        .await;
    assert_eq!(
        o.ok(),
        "event/web-1.b patched (no change)\n",
        "{}",
        o.show()
    );

    // A json patch whose test fails is refused and nothing changes.
    let o = k
        .run(&[
            "patch",
            "event",
            "web-1.b",
            "--type=json",
            "-p",
            r#"[{"op":"test","path":"/message","value":"other"},{"op":"replace","path":"/message","value":"x"}]"#,
        ])
        .await;
    o.failed();
    assert_eq!(get("{.message}").await, "json-patched");

    // Patching a missing event is the server's NotFound.
    let o = k
        .run(&["patch", "event", "nope", "-p", r#"{"message":"x"}"#])
        .await;
    assert!(
        o.failed()
            .contains("Error from server (NotFound): events \"nope\" not found"),
        "{}",
        o.show()
    );

    // The table shows the new message.
    let o = k.run(&["get", "events", "-o", "wide"]).await;
    assert_eq!(
        o.table().cell("NAME", "web-1.b", "MESSAGE"),
        "json-patched",
        "{}",
        o.show()
    );
    assert_eq!(o.table().cell("NAME", "web-1.b", "COUNT"), "6");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replace_with_a_stale_resource_version_is_a_conflict() {
    let (_server, k) = seeded().await;
    let o = k.run(&["get", "event", "db-0.a", "-o", "json"]).await;
    let mut stale = o.json();
    let f = k.write("stale.json", &stale.to_string());
    // Someone else writes first.
    k.run(&["annotate", "event", "db-0.a", "by=someone"])
        .await
        .ok();
    stale["message"] = "mine".into();
    std::fs::write(&f, stale.to_string()).unwrap();
    let o = k.run(&["replace", "-f", &f]).await;
    assert!(
        o.failed().contains(
            "Error from server (Conflict): error when replacing \"FILE\": Operation cannot be \
             fulfilled on events \"db-0.a\": the object has been modified; please apply your \
             changes to the latest version and try again"
                .replace("FILE", &f)
                .as_str()
        ),
        "{}",
        o.show()
    );
    // Without a resourceVersion the update is unconditional (events allow it).
    stale["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("resourceVersion");
    std::fs::write(&f, stale.to_string()).unwrap();
    let o = k.run(&["replace", "-f", &f]).await;
    assert_eq!(o.ok(), "event/db-0.a replaced\n", "{}", o.show());
    let o = k
        .run(&["get", "event", "db-0.a", "-o", "jsonpath={.message}"])
        .await;
    assert_eq!(o.ok(), "mine", "{}", o.show());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn label_and_annotate() {
    let (_server, k) = seeded().await;
    let o = k.run(&["label", "event", "web-1.a", "tier=frontend"]).await;
    assert_eq!(o.ok(), "event/web-1.a labeled\n", "{}", o.show());
    let o = k
        .run(&["get", "events", "-l", "tier=frontend", "-o", "wide"])
        .await;
    assert_eq!(o.table().column("NAME"), ["web-1.a"], "{}", o.show());
    let o = k.run(&["get", "events", "--show-labels"]).await;
    let t = o.table();
    assert_eq!(
        t.column("LABELS"),
        ["<none>", "tier=frontend", "app=web"],
        "{}",
        o.show()
    );

    // Overwriting needs --overwrite, as on a cluster (client-side check on the GET result).
    let o = k.run(&["label", "event", "web-1.a", "tier=backend"]).await;
    assert!(
        o.failed().contains("already has a value (frontend)"),
        "{}",
        o.show()
    );
    let o = k
        .run(&["label", "event", "web-1.a", "tier=backend", "--overwrite"])
        .await;
    assert_eq!(o.ok(), "event/web-1.a labeled\n", "{}", o.show());
    let o = k.run(&["label", "event", "web-1.a", "tier-"]).await;
    assert_eq!(o.ok(), "event/web-1.a unlabeled\n", "{}", o.show());
    let o = k
        .run(&[
            "get",
            "event",
            "web-1.a",
            "-o",
            "jsonpath={.metadata.labels}",
        ])
        .await;
    assert_eq!(o.ok(), "", "{}", o.show());

    let o = k
        .run(&[
            "annotate",
            "event",
            "web-1.a",
            "owner=team-a",
            "note=seen by e2e",
        ])
        .await;
    assert_eq!(o.ok(), "event/web-1.a annotated\n", "{}", o.show());
    let o = k.run(&["get", "event", "web-1.a", "-o", "json"]).await;
    let v = o.json();
    assert_eq!(
        jsonpath(&v, &["metadata", "annotations", "owner"]),
        "team-a"
    );
    assert_eq!(
        jsonpath(&v, &["metadata", "annotations", "note"]),
        "seen by e2e"
    );
    // The rest of the event is untouched.
    assert_eq!(
        v["message"],
        "Successfully assigned default/web-1 to node-1"
    );

    // Labelling every event in a namespace.
    let o = k.run(&["label", "events", "--all", "audited=true"]).await;
    let mut lines: Vec<_> = o.ok().lines().collect();
    lines.sort();
    assert_eq!(
        lines,
        [
            "event/db-0.a labeled",
            "event/web-1.a labeled",
            "event/web-1.b labeled"
        ],
        "{}",
        o.show()
    );
    let o = k
        .run(&["get", "events", "-A", "-l", "audited=true", "-o", "name"])
        .await;
    assert_eq!(
        o.ok().lines().collect::<Vec<_>>(),
        ["event/db-0.a", "event/web-1.a", "event/web-1.b"],
        "{}",
        o.show()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_one_and_all() {
    let (_server, k) = seeded().await;
    let o = k.run(&["delete", "event", "web-1.a"]).await;
    assert_eq!(o.ok(), "event \"web-1.a\" deleted\n", "{}", o.show());
    let o = k.run(&["get", "event", "web-1.a"]).await;
    assert!(
        o.failed()
            .contains("Error from server (NotFound): events \"web-1.a\" not found"),
        "{}",
        o.show()
    );
    let o = k.run(&["delete", "event", "web-1.a"]).await;
    assert!(
        o.failed()
            .contains("Error from server (NotFound): events \"web-1.a\" not found"),
        "{}",
        o.show()
    );
    let o = k.run(&["get", "events", "-o", "wide"]).await;
    assert_eq!(
        o.table().column("NAME"),
        ["db-0.a", "web-1.b"],
        "{}",
        o.show()
    );

    // --all deletes every event of the namespace, and only that namespace.
    let o = k.run(&["delete", "events", "--all"]).await;
    assert_eq!(
        o.ok().lines().collect::<Vec<_>>(),
        ["event \"db-0.a\" deleted", "event \"web-1.b\" deleted"],
        "{}",
        o.show()
    );
    let o = k.run(&["get", "events"]).await;
    assert_eq!(o.ok(), "");
    assert!(
        o.stderr
            .contains("No resources found in default namespace."),
        "{}",
        o.show()
    );
    let o = k.run(&["get", "events", "-A", "-o", "wide"]).await;
    assert_eq!(o.table().column("NAME"), ["coredns.a"], "{}", o.show());

    // A label selector narrows --all style deletes.
    let f = k.write(
        "two.yaml",
        &format!(
            "{}---\n{}",
            core_event("keep.1", "keep", "Normal", "Keep", "keep me"),
            core_event("drop.1", "drop", "Normal", "Drop", "drop me")
        ),
    );
    k.run(&["create", "-f", &f]).await.ok();
    k.run(&["label", "event", "drop.1", "doomed=yes"])
        .await
        .ok();
    let o = k.run(&["delete", "events", "-l", "doomed=yes"]).await;
    assert_eq!(o.ok(), "event \"drop.1\" deleted\n", "{}", o.show());
    let o = k.run(&["get", "events", "-o", "name"]).await;
    assert_eq!(o.ok(), "event/keep.1\n", "{}", o.show());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_of_an_event_with_a_finalizer_waits_for_the_finalizer() {
    let server = Herald::suite().await;
    let k = Kubectl::new(&server).await;
    // The first `namespace: default` of the manifest is the event's own metadata.
    let manifest = core_event("held.1", "web-1", "Normal", "Held", "kept by a finalizer").replacen(
        "  namespace: default\n",
        "  namespace: default\n  finalizers: [example.com/keep]\n",
        1,
    );
    let f = k.write("held.yaml", &manifest);
    let o = k.run(&["create", "-f", &f]).await;
    assert_eq!(o.ok(), "event/held.1 created\n", "{}", o.show());

    // kubectl reports the delete, but the finalizer keeps the event, marked as deleting.
    let o = k.run(&["delete", "event", "held.1", "--wait=false"]).await;
    assert_eq!(o.ok(), "event \"held.1\" deleted\n", "{}", o.show());
    let o = k.run(&["get", "events", "-o", "name"]).await;
    assert_eq!(o.ok(), "event/held.1\n", "{}", o.show());
    let v = k
        .run(&["get", "event", "held.1", "-o", "json"])
        .await
        .json();
    assert!(
        jsonpath(&v, &["metadata", "deletionTimestamp"]).is_string(),
        "{v}"
    );

    // Removing the finalizer completes the delete.
    let o = k
        .run(&[
            "patch",
            "event",
            "held.1",
            "--type=merge",
            "-p",
            r#"{"metadata":{"finalizers":null}}"#,
        ])
        .await;
    assert_eq!(o.ok(), "event/held.1 patched\n", "{}", o.show());
    let o = k.run(&["get", "event", "held.1"]).await;
    assert!(
        o.failed()
            .contains("Error from server (NotFound): events \"held.1\" not found"),
        "{}",
        o.show()
    );
}

const NEW_STYLE: &str = "apiVersion: events.k8s.io/v1
kind: Event
metadata:
  name: pulled.1
  namespace: default
eventTime: \"2025-01-01T00:00:00.123456Z\"
action: Pulling
reason: Pulled
note: Container image pulled
regarding:
  apiVersion: v1
  kind: Pod
  name: web-1
  namespace: default
  fieldPath: spec.containers{app}
reportingController: example.com/puller
reportingInstance: puller-1
type: Normal
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_k8s_io_create_and_read_back_through_core_v1() {
    let server = Herald::suite().await;
    let k = Kubectl::new(&server).await;
    let f = k.write("new.yaml", NEW_STYLE);
    let o = k.run(&["create", "-f", &f]).await;
    assert_eq!(
        o.ok(),
        "event.events.k8s.io/pulled.1 created\n",
        "{}",
        o.show()
    );

    // Read through core/v1: converted field by field.
    let o = k.run(&["get", "events", "pulled.1", "-o", "json"]).await;
    let v = o.json();
    assert_eq!(v["apiVersion"], "v1", "{}", o.show());
    assert_eq!(v["message"], "Container image pulled");
    assert_eq!(v["involvedObject"]["name"], "web-1");
    assert_eq!(v["involvedObject"]["fieldPath"], "spec.containers{app}");
    assert_eq!(v["reportingComponent"], "example.com/puller");
    assert_eq!(v["reportingInstance"], "puller-1");
    assert_eq!(v["action"], "Pulling");
    assert_eq!(v["eventTime"], "2025-01-01T00:00:00.123456Z");
    assert!(v.get("note").is_none() && v.get("regarding").is_none());

    // The core table falls back to eventTime and reportingController.
    let o = k.run(&["get", "events", "-o", "wide"]).await;
    let t = o.table();
    assert_eq!(t.cell("NAME", "pulled.1", "OBJECT"), "pod/web-1");
    assert_eq!(
        t.cell("NAME", "pulled.1", "SOURCE"),
        "example.com/puller, puller-1"
    );
    assert_ne!(t.cell("NAME", "pulled.1", "LAST SEEN"), "<unknown>");
    assert_eq!(t.cell("NAME", "pulled.1", "COUNT"), "1");

    // And through events.k8s.io/v1 in its own shape.
    let o = k
        .run(&["get", "events.v1.events.k8s.io", "pulled.1", "-o", "json"])
        .await;
    let v = o.json();
    assert_eq!(v["apiVersion"], "events.k8s.io/v1", "{}", o.show());
    assert_eq!(v["note"], "Container image pulled");
    assert_eq!(v["regarding"]["name"], "web-1");
    assert_eq!(v["reportingController"], "example.com/puller");
    assert!(v.get("message").is_none() && v.get("involvedObject").is_none());

    // A core/v1 event read through events.k8s.io/v1: deprecated* fields carry the old ones.
    let f = k.write(
        "old.yaml",
        &core_event("old.1", "db-0", "Warning", "BackOff", "old style"),
    );
    k.run(&["create", "-f", &f]).await.ok();
    let o = k
        .run(&["get", "events.v1.events.k8s.io", "old.1", "-o", "json"])
        .await;
    let v = o.json();
    assert_eq!(v["note"], "old style", "{}", o.show());
    assert_eq!(v["regarding"]["name"], "db-0");
    assert_eq!(v["deprecatedSource"]["component"], "e2e");
    assert_eq!(v["deprecatedCount"], 1);
    assert_eq!(v["deprecatedLastTimestamp"], "2025-01-01T00:10:00Z");

    // The events.k8s.io table lists both, with the same columns as core.
    let o = k
        .run(&["get", "events.v1.events.k8s.io", "-o", "wide"])
        .await;
    let t = o.table();
    assert_eq!(t.column("NAME"), ["old.1", "pulled.1"], "{}", o.show());
    assert_eq!(t.cell("NAME", "old.1", "MESSAGE"), "old style");
    assert_eq!(t.cell("NAME", "pulled.1", "REASON"), "Pulled");

    // events.k8s.io field selectors use that group's vocabulary.
    let o = k
        .run(&[
            "get",
            "events.v1.events.k8s.io",
            "-o",
            "name",
            "--field-selector",
            "regarding.name=web-1",
        ])
        .await;
    assert_eq!(o.ok(), "event.events.k8s.io/pulled.1\n", "{}", o.show());
    let o = k
        .run(&[
            "get",
            "events.v1.events.k8s.io",
            "--field-selector",
            "involvedObject.name=web-1",
        ])
        .await;
    assert!(
        o.failed()
            .contains("field label not supported: involvedObject.name"),
        "{}",
        o.show()
    );

    // Writes through events.k8s.io/v1 land on the same object.
    let o = k
        .run(&[
            "label",
            "events.v1.events.k8s.io",
            "pulled.1",
            "via=events-k8s-io",
        ])
        .await;
    assert_eq!(
        o.ok(),
        "event.events.k8s.io/pulled.1 labeled\n",
        "{}",
        o.show()
    );
    let o = k
        .run(&["get", "events", "-l", "via=events-k8s-io", "-o", "name"])
        .await;
    assert_eq!(o.ok(), "event/pulled.1\n", "{}", o.show());
    let o = k
        .run(&["delete", "events.v1.events.k8s.io", "pulled.1"])
        .await;
    assert_eq!(
        o.ok(),
        "event.events.k8s.io \"pulled.1\" deleted\n",
        "{}",
        o.show()
    );
    let o = k.run(&["get", "events", "-o", "name"]).await;
    assert_eq!(o.ok(), "event/old.1\n", "{}", o.show());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_k8s_io_create_is_validated_strictly() {
    let server = Herald::suite().await;
    let k = Kubectl::new(&server).await;
    // core/v1 would accept this; events.k8s.io/v1 requires eventTime and a known type.
    let f = k.write(
        "bad.yaml",
        "apiVersion: events.k8s.io/v1
kind: Event
metadata:
  name: bad.1
  namespace: default
action: Pulling
reason: Pulled
note: no time
regarding:
  kind: Pod
  name: web-1
  namespace: default
reportingController: example.com/puller
reportingInstance: puller-1
type: Sometimes
",
    );
    let o = k.run(&["create", "-f", &f]).await;
    let err = o.failed();
    assert!(
        err.contains("The Event \"bad.1\" is invalid: "),
        "{}",
        o.show()
    );
    assert!(err.contains("eventTime: Required value"), "{}", o.show());
    // kube-apiserver's wording (field.Invalid with an empty value).
    assert!(
        err.contains("type: Invalid value: \"\": has invalid value: Sometimes"),
        "{}",
        o.show()
    );
    let o = k.run(&["get", "events", "-o", "name"]).await;
    assert_eq!(o.ok(), "", "nothing was stored: {}", o.show());

    // Unknown fields are refused on this group too.
    let f = k.write(
        "unknown.yaml",
        &NEW_STYLE.replace("type: Normal\n", "type: Normal\nmessage: core only\n"),
    );
    let o = k.run(&["create", "-f", &f]).await;
    assert!(
        o.failed()
            .contains("strict decoding error: unknown field \"message\""),
        "{}",
        o.show()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_k8s_io_watch_sees_a_core_v1_write() {
    let (_server, k) = seeded().await;
    let mut w = k.stream(&[
        "get",
        "events.v1.events.k8s.io",
        "-w",
        "--output-watch-events",
        "-o",
        "json",
    ]);
    // One compact JSON watch event per line; the listed events arrive first as ADDED.
    let named = |name: &'static str| {
        move |l: &str| {
            serde_json::from_str::<serde_json::Value>(l)
                .is_ok_and(|v| v["object"]["metadata"]["name"] == name)
        }
    };
    let listed = w.wait_for("the listed web-1.b", named("web-1.b")).await;
    let v: serde_json::Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(v["type"], "ADDED", "{listed}");
    assert_eq!(v["object"]["deprecatedCount"], 5, "{listed}");

    let f = k.write(
        "new.yaml",
        &core_event(
            "conv.1",
            "web-1",
            "Warning",
            "Converted",
            "written through core",
        ),
    );
    k.run(&["create", "-f", &f]).await.ok();
    // The watch of the other group delivers it in that group's shape.
    let line = w.wait_for("the new conv.1", named("conv.1")).await;
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["type"], "ADDED", "{line}");
    let o = &v["object"];
    assert_eq!(o["apiVersion"], "events.k8s.io/v1", "{line}");
    assert_eq!(o["note"], "written through core", "{line}");
    assert_eq!(o["regarding"]["name"], "web-1", "{line}");
    assert_eq!(o["deprecatedSource"]["component"], "e2e", "{line}");
    assert!(
        o.get("involvedObject").is_none() && o.get("message").is_none(),
        "{line}"
    );
    // Nothing listed was sent twice.
    assert_eq!(w.seen.len(), 4, "{}", w.seen.join("\n"));
}
