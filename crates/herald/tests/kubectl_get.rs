//! The real kubectl reading events from a live `herald serve`: `get events` in every output
//! mode, paging, field selectors, sorting and watching; `kubectl events`; `api-resources`.
//!
//! Assertions are on what kubectl prints. kubectl must be on PATH (a missing kubectl fails).

mod support;

use support::{Herald, Kubectl, SEED, Table, core_event, seeded};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_events_in_the_default_namespace_prints_the_server_table() {
    let (_server, k) = seeded().await;
    let o = k.run(&["get", "events"]).await;
    let t = o.table();
    assert_eq!(
        t.headers,
        ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"],
        "{}",
        o.show()
    );
    // etcd key order: by name within the namespace; kube-system is not shown.
    assert_eq!(
        t.column("OBJECT"),
        ["pod/db-0", "pod/web-1", "pod/web-1"],
        "{}",
        o.show()
    );
    assert_eq!(
        t.column("REASON"),
        ["FailedMount", "Scheduled", "BackOff"],
        "{}",
        o.show()
    );
    assert_eq!(
        t.cell("REASON", "BackOff", "MESSAGE"),
        "Back-off restarting failed container"
    );
    assert_eq!(t.cell("REASON", "BackOff", "TYPE"), "Warning");
    assert_eq!(t.cell("REASON", "Scheduled", "TYPE"), "Normal");
    // Ages come from lastTimestamp (2025), so never "<unknown>".
    for age in t.column("LAST SEEN") {
        assert!(
            age.ends_with('d') || age.ends_with('y'),
            "age {age:?}: {}",
            o.show()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_events_all_namespaces_and_one_namespace() {
    let (_server, k) = seeded().await;
    let o = k.run(&["get", "events", "-A"]).await;
    let t = o.table();
    assert_eq!(
        t.headers,
        [
            "NAMESPACE",
            "LAST SEEN",
            "TYPE",
            "REASON",
            "OBJECT",
            "MESSAGE"
        ],
        "{}",
        o.show()
    );
    assert_eq!(
        t.column("NAMESPACE"),
        ["default", "default", "default", "kube-system"],
        "{}",
        o.show()
    );
    assert_eq!(
        t.cell("NAMESPACE", "kube-system", "OBJECT"),
        "deployment/coredns"
    );
    assert_eq!(
        t.cell("NAMESPACE", "kube-system", "MESSAGE"),
        "Scaled up replica set coredns-5d78c9869d to 2"
    );

    let o = k.run(&["get", "events", "-n", "kube-system"]).await;
    let t = o.table();
    assert_eq!(t.rows.len(), 1, "{}", o.show());
    assert_eq!(t.column("REASON"), ["ScalingReplicaSet"], "{}", o.show());

    // One object by its short name: the server's one-row table, and kubectl's warning that
    // both groups claim "ev" (as on a real cluster).
    let o = k.run(&["get", "ev", "web-1.b"]).await;
    let t = o.table();
    assert_eq!(t.column("REASON"), ["BackOff"], "{}", o.show());
    assert!(
        o.stderr.contains(
            "Warning: short name \"ev\" could also match lower priority resource events.events.k8s.io"
        ),
        "{}",
        o.show()
    );
    let o = k.run(&["get", "events", "nope"]).await;
    assert!(
        o.failed()
            .contains("Error from server (NotFound): events \"nope\" not found"),
        "{}",
        o.show()
    );

    let o = k.run(&["get", "events", "-n", "nowhere"]).await;
    assert_eq!(o.ok(), "", "{}", o.show());
    assert!(
        o.stderr
            .contains("No resources found in nowhere namespace."),
        "{}",
        o.show()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_events_wide_shows_every_column() {
    let (_server, k) = seeded().await;
    let o = k.run(&["get", "events", "-o", "wide"]).await;
    let t = o.table();
    assert_eq!(
        t.headers,
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
        o.show()
    );
    let r = t.row("NAME", "web-1.b");
    assert_eq!(
        r[t.col("SUBOBJECT")],
        "spec.containers{app}",
        "{}",
        o.show()
    );
    assert_eq!(r[t.col("SOURCE")], "kubelet, node-1", "{}", o.show());
    assert_eq!(r[t.col("COUNT")], "5", "{}", o.show());
    assert_eq!(
        t.cell("NAME", "web-1.a", "SOURCE"),
        "default-scheduler",
        "{}",
        o.show()
    );
    assert_eq!(t.cell("NAME", "web-1.a", "SUBOBJECT"), "", "{}", o.show());
    assert_eq!(t.cell("NAME", "db-0.a", "COUNT"), "2", "{}", o.show());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_events_as_json_and_yaml() {
    let (_server, k) = seeded().await;
    let o = k.run(&["get", "events", "-o", "json"]).await;
    let v = o.json();
    assert_eq!(v["kind"], "List", "{}", o.show());
    let items = v["items"].as_array().expect("items");
    let names: Vec<_> = items
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["db-0.a", "web-1.a", "web-1.b"], "{}", o.show());
    let b = &items[2];
    assert_eq!(b["kind"], "Event");
    assert_eq!(b["apiVersion"], "v1");
    assert_eq!(b["count"], 5);
    assert_eq!(b["involvedObject"]["fieldPath"], "spec.containers{app}");
    assert_eq!(b["source"]["host"], "node-1");
    assert_eq!(b["lastTimestamp"], "2025-01-01T00:05:00Z");
    assert_eq!(b["metadata"]["labels"]["app"], "web");
    // Server-assigned metadata.
    assert!(b["metadata"]["uid"].as_str().is_some_and(|u| u.len() == 36));
    let rvs: Vec<u64> = items
        .iter()
        .map(|i| {
            i["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect();
    // Created in the order web-1.a, web-1.b, db-0.a.
    assert!(rvs[1] < rvs[2] && rvs[2] < rvs[0], "{rvs:?}");
    assert!(b["metadata"]["creationTimestamp"].as_str().is_some());

    let o = k.run(&["get", "events", "-o", "yaml"]).await;
    let y = o.ok();
    assert!(y.starts_with("apiVersion: v1\nitems:\n"), "{}", o.show());
    assert!(y.lines().any(|l| l == "kind: List"), "{}", o.show());
    assert_eq!(y.matches("\n  kind: Event\n").count(), 3, "{}", o.show());

    // The raw API answer is the server's EventList.
    let o = k
        .run(&["get", "--raw", "/api/v1/namespaces/default/events"])
        .await;
    let v = o.json();
    assert_eq!(v["kind"], "EventList", "{}", o.show());
    assert_eq!(v["apiVersion"], "v1");
    assert_eq!(v["items"].as_array().unwrap().len(), 3);
    assert!(v["metadata"]["resourceVersion"].as_str().is_some());

    let o = k.run(&["get", "events", "web-1.b", "-o", "yaml"]).await;
    let y = o.ok();
    for line in [
        "apiVersion: v1",
        "kind: Event",
        "count: 5",
        "  name: web-1.b",
        "  namespace: default",
        "  fieldPath: spec.containers{app}",
        "reason: BackOff",
        "type: Warning",
        "lastTimestamp: \"2025-01-01T00:05:00Z\"",
    ] {
        assert!(
            y.lines().any(|l| l == line),
            "missing {line:?}:\n{}",
            o.show()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_events_with_chunk_size_pages_through_continue_tokens() {
    let (_server, k) = seeded().await;
    let o = k
        .run(&[
            "get",
            "events",
            "-A",
            "--chunk-size=1",
            "-o",
            "wide",
            "-v=6",
        ])
        .await;
    let t = o.table();
    assert_eq!(
        t.column("NAME"),
        ["db-0.a", "web-1.a", "web-1.b", "coredns.a"],
        "{}",
        o.show()
    );
    // kubectl logs every request at -v=6: one per page, each page after the first with the
    // continue token of the previous one.
    let gets: Vec<&str> = o
        .stderr
        .lines()
        .filter(|l| l.contains("GET http") && l.contains("/api/v1/events?"))
        .collect();
    assert_eq!(gets.len(), 4, "{}", o.show());
    assert!(
        gets[0].contains("/api/v1/events?limit=1&") && gets[0].contains(" 200 OK"),
        "{}",
        o.show()
    );
    for g in &gets[1..] {
        assert!(
            g.contains("?continue=") && g.contains("&limit=1&") && g.contains(" 200 OK"),
            "{}",
            o.show()
        );
    }

    // A JSON list assembled from pages has every item too.
    let o = k
        .run(&["get", "events", "-A", "--chunk-size=3", "-o", "json"])
        .await;
    assert_eq!(
        o.json()["items"].as_array().unwrap().len(),
        4,
        "{}",
        o.show()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_events_with_field_selectors() {
    let (_server, k) = seeded().await;
    let names = |o: &support::Output| -> Vec<String> {
        let t = o.table();
        t.column("NAME").iter().map(|s| s.to_string()).collect()
    };

    let o = k
        .run(&[
            "get",
            "events",
            "-o",
            "wide",
            "--field-selector",
            "involvedObject.name=web-1",
        ])
        .await;
    assert_eq!(names(&o), ["web-1.a", "web-1.b"], "{}", o.show());

    let o = k
        .run(&[
            "get",
            "events",
            "-A",
            "-o",
            "wide",
            "--field-selector",
            "type=Warning",
        ])
        .await;
    assert_eq!(names(&o), ["db-0.a", "web-1.b"], "{}", o.show());

    let o = k
        .run(&[
            "get",
            "events",
            "-o",
            "wide",
            "--field-selector",
            "involvedObject.name=web-1,type=Warning",
        ])
        .await;
    assert_eq!(names(&o), ["web-1.b"], "{}", o.show());

    let o = k
        .run(&[
            "get",
            "events",
            "-A",
            "-o",
            "wide",
            "--field-selector",
            "type!=Warning",
        ])
        .await;
    assert_eq!(names(&o), ["web-1.a", "coredns.a"], "{}", o.show());

    let o = k
        .run(&[
            "get",
            "events",
            "-A",
            "-o",
            "wide",
            "--field-selector",
            "source=kubelet,involvedObject.kind=Pod",
        ])
        .await;
    assert_eq!(names(&o), ["db-0.a", "web-1.b"], "{}", o.show());

    // Label selectors work alongside.
    let o = k
        .run(&["get", "events", "-o", "wide", "-l", "app=web"])
        .await;
    assert_eq!(names(&o), ["web-1.b"], "{}", o.show());

    // Nothing matches: kubectl's own message.
    let o = k
        .run(&[
            "get",
            "events",
            "--field-selector",
            "involvedObject.name=nope",
        ])
        .await;
    assert_eq!(o.ok(), "");
    assert!(
        o.stderr
            .contains("No resources found in default namespace."),
        "{}",
        o.show()
    );

    // An unsupported field label is the server's 400, shown verbatim by kubectl.
    let o = k
        .run(&["get", "events", "--field-selector", "spec.foo=bar"])
        .await;
    let err = o.failed();
    assert!(
        err.contains(
            "Error from server (BadRequest): Unable to find \"/v1, Resource=events\" that match \
             label selector \"\", field selector \"spec.foo=bar\": field label not supported: spec.foo"
        ),
        "{}",
        o.show()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_events_sorted_by_last_timestamp() {
    let (_server, k) = seeded().await;
    let o = k
        .run(&[
            "get",
            "events",
            "-A",
            "-o",
            "wide",
            "--sort-by=.lastTimestamp",
        ])
        .await;
    let t = o.table();
    assert_eq!(
        t.column("NAME"),
        ["web-1.a", "db-0.a", "coredns.a", "web-1.b"],
        "{}",
        o.show()
    );
    // The same data sorted by a different field gives a different order.
    let o = k
        .run(&["get", "events", "-o", "wide", "--sort-by=.count"])
        .await;
    assert_eq!(
        o.table().column("NAME"),
        ["web-1.a", "db-0.a", "web-1.b"],
        "{}",
        o.show()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_events_watch_sees_an_event_created_after_it_started() {
    let (_server, k) = seeded().await;
    let mut w = k.stream(&["get", "events", "-w"]);
    w.wait_for("the table header", |l| l.starts_with("LAST SEEN"))
        .await;
    // The initial list ends with the last event by name.
    w.wait_for("the listed web-1.b", |l| l.contains("Back-off restarting"))
        .await;

    let f = k.write(
        "new.yaml",
        &core_event(
            "late.1",
            "late",
            "Warning",
            "Unhealthy",
            "Readiness probe failed",
        ),
    );
    k.run(&["create", "-f", &f]).await.ok();
    let line = w
        .wait_for("the new event", |l| l.contains("Readiness probe failed"))
        .await;
    let cells: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(
        &cells[1..5],
        ["Warning", "Unhealthy", "pod/late", "Readiness"],
        "{line}"
    );
    // The watch started at the list's resourceVersion: nothing listed was sent again.
    for reason in ["Scheduled", "BackOff", "FailedMount"] {
        let n = w.seen.iter().filter(|l| l.contains(reason)).count();
        assert_eq!(n, 1, "{reason} printed {n} times:\n{}", w.seen.join("\n"));
    }

    // Updates show up as new rows too.
    k.run(&["label", "event", "late.1", "seen=yes"]).await.ok();
    let o = k
        .run(&[
            "patch",
            "event",
            "late.1",
            "--type=merge",
            "-p",
            r#"{"message":"probe ok"}"#,
        ])
        .await;
    o.ok();
    w.wait_for("the patched event", |l| l.contains("probe ok"))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_events_watch_only_json_with_watch_event_types() {
    let (_server, k) = seeded().await;
    let mut w = k.stream(&["get", "events", "-w", "--output-watch-events", "-o", "wide"]);
    w.wait_for("the header", |l| l.starts_with("EVENT")).await;
    w.wait_for("the listed web-1.b", |l| l.contains("web-1.b"))
        .await;
    let f = k.write(
        "new.yaml",
        &core_event(
            "gone.1",
            "gone",
            "Normal",
            "Killing",
            "Stopping container app",
        ),
    );
    k.run(&["create", "-f", &f]).await.ok();
    let added = w.wait_for("ADDED gone.1", |l| l.contains("gone.1")).await;
    assert!(added.starts_with("ADDED "), "{added}");
    k.run(&["delete", "event", "gone.1"]).await.ok();
    let deleted = w
        .wait_for("DELETED gone.1", |l| {
            l.starts_with("DELETED") && l.contains("gone.1")
        })
        .await;
    assert!(deleted.contains("Stopping container app"), "{deleted}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_events_lists_filters_types_and_watches() {
    let (_server, k) = seeded().await;
    let o = k.run(&["events"]).await;
    let t = o.table();
    assert_eq!(
        t.headers,
        ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"],
        "{}",
        o.show()
    );
    // kubectl events sorts client-side, oldest first, and prints Kind/name.
    assert_eq!(
        t.column("REASON"),
        ["Scheduled", "FailedMount", "BackOff"],
        "{}",
        o.show()
    );
    assert_eq!(
        t.column("OBJECT"),
        ["Pod/web-1", "Pod/db-0", "Pod/web-1"],
        "{}",
        o.show()
    );
    // The count shows up as "(x5 over <age of firstTimestamp>)".
    assert!(
        t.cell("REASON", "BackOff", "LAST SEEN")
            .contains(" (x5 over "),
        "{}",
        o.show()
    );

    // kubectl events reads through client-go's typed clientset, which asks for protobuf
    // first: the table above was decoded from Herald's protobuf EventList.
    let o = k.run(&["events", "-v=8"]).await;
    assert!(
        o.stderr
            .contains("Content-Type: application/vnd.kubernetes.protobuf"),
        "{}",
        o.show()
    );
    assert_eq!(
        o.table().column("REASON"),
        ["Scheduled", "FailedMount", "BackOff"]
    );

    let o = k.run(&["events", "--types=Warning"]).await;
    let t = o.table();
    assert_eq!(
        t.column("REASON"),
        ["FailedMount", "BackOff"],
        "{}",
        o.show()
    );

    let o = k.run(&["events", "-A"]).await;
    let t = o.table();
    assert_eq!(
        t.column("NAMESPACE"),
        ["default", "default", "kube-system", "default"],
        "{}",
        o.show()
    );
    assert_eq!(
        t.cell("NAMESPACE", "kube-system", "OBJECT"),
        "Deployment/coredns"
    );

    // -w: no list first, the watch without a resourceVersion replays the current state.
    let mut w = k.stream(&["events", "-w"]);
    w.wait_for("the replayed BackOff", |l| l.contains("BackOff"))
        .await;
    let f = k.write(
        "new.yaml",
        &core_event(
            "web-2.1",
            "web-2",
            "Normal",
            "Pulled",
            "Container image pulled",
        ),
    );
    k.run(&["create", "-f", &f]).await.ok();
    let line = w
        .wait_for("the new event", |l| l.contains("Container image pulled"))
        .await;
    assert!(line.contains("Pod/web-2"), "{line}");
    assert!(line.contains("Pulled"), "{line}");
}

/// `kubectl events --for pod/NAME` (and `deploy/NAME`): kubectl resolves the kind through
/// discovery, where herald lists the kinds events are about without verbs, then asks for
/// `involvedObject.kind,apiVersion,name`. The output holds that object's events only, also
/// with `-w`; reading pods themselves is refused with a message that says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_events_for_a_pod_and_a_deployment() {
    let (_server, k) = seeded().await;
    let o = k.run(&["events", "--for", "pod/web-1"]).await;
    let t = o.table();
    assert_eq!(t.column("REASON"), ["Scheduled", "BackOff"], "{}", o.show());
    assert_eq!(
        t.column("OBJECT"),
        ["Pod/web-1", "Pod/web-1"],
        "{}",
        o.show()
    );
    // Short names resolve too.
    let o = k.run(&["events", "--for", "po/db-0"]).await;
    assert_eq!(o.table().column("REASON"), ["FailedMount"], "{}", o.show());
    let o = k
        .run(&["events", "-n", "kube-system", "--for", "deploy/coredns"])
        .await;
    let t = o.table();
    assert_eq!(t.column("OBJECT"), ["Deployment/coredns"], "{}", o.show());
    // The apiVersion is part of the selector: a Pod named coredns has no events.
    let o = k
        .run(&["events", "-n", "kube-system", "--for", "pod/coredns"])
        .await;
    assert_eq!(o.ok(), "", "{}", o.show());
    assert_eq!(
        o.stderr.trim(),
        "No events found in kube-system namespace.",
        "{}",
        o.show()
    );

    let mut w = k.stream(&["events", "--for", "pod/web-1", "-w"]);
    w.wait_for("the replayed BackOff", |l| l.contains("BackOff"))
        .await;
    // The decoy (another pod) is written first: were it not filtered, it would come first.
    let decoy = core_event("db-0.w", "db-0", "Normal", "Decoy", "about db-0");
    let mine = core_event("web-1.w", "web-1", "Normal", "Pulled", "about web-1");
    let f = k.write("both.yaml", &format!("{decoy}---\n{mine}"));
    k.run(&["create", "-f", &f]).await.ok();
    let line = w
        .wait_for("the new web-1 event", |l| l.contains("about web-1"))
        .await;
    assert!(line.contains("Pod/web-1"), "{line}");
    assert!(
        !w.seen
            .iter()
            .any(|l| l.contains("Decoy") || l.contains("db-0")),
        "{}",
        w.seen.join("\n")
    );

    // Pods are only names to kubectl here: reading them is a clear one-line refusal.
    let o = k.run(&["get", "pods"]).await;
    let err = o.failed();
    assert_eq!(err.trim().lines().count(), 1, "{}", o.show());
    assert!(
        err.starts_with("Error from server (MethodNotAllowed): ")
            && err.contains("herald-server stores only events"),
        "{}",
        o.show()
    );
}

/// `kubectl events --for KIND/NAME` resolves the kind through discovery and asks the server for
/// `involvedObject.kind,apiVersion,name`; here the object is an Event (events about events, as
/// `kubectl describe event` looks them up), next to a Pod of the same name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_events_for_one_object() {
    let (_server, k) = seeded().await;
    let about = r#"apiVersion: v1
kind: Event
metadata:
  name: about-web-1.b
  namespace: default
involvedObject:
  apiVersion: v1
  kind: Event
  name: web-1.b
  namespace: default
reason: Noticed
message: an event about an event
type: Normal
source:
  component: e2e
---
apiVersion: v1
kind: Event
metadata:
  name: about-pod-web-1.b
  namespace: default
involvedObject:
  apiVersion: v1
  kind: Pod
  name: web-1.b
  namespace: default
reason: Decoy
message: same name, another kind
type: Normal
source:
  component: e2e
"#;
    let f = k.write("about.yaml", about);
    k.run(&["create", "-f", &f]).await.ok();
    let o = k.run(&["events", "--for", "event/web-1.b"]).await;
    let t = o.table();
    assert_eq!(t.column("REASON"), ["Noticed"], "{}", o.show());
    assert_eq!(t.column("OBJECT"), ["Event/web-1.b"], "{}", o.show());

    // -w with --for: the filtered watch replays the match, then only new matches arrive.
    let mut w = k.stream(&["events", "--for", "event/web-1.b", "-w"]);
    w.wait_for("the replayed Noticed", |l| l.contains("Noticed"))
        .await;
    // The decoy is written first: were it not filtered, it would be printed before the match.
    let (matching, decoy) = about.split_once("---\n").unwrap();
    let more = format!("{decoy}---\n{matching}")
        .replace("about-web-1.b", "again-web-1.b")
        .replace("about-pod-web-1.b", "again-pod-web-1.b")
        .replace("Noticed", "NoticedAgain")
        .replace("Decoy", "DecoyAgain");
    let f = k.write("more.yaml", &more);
    k.run(&["create", "-f", &f]).await.ok();
    w.wait_for("the new match", |l| l.contains("NoticedAgain"))
        .await;
    assert!(
        !w.seen.iter().any(|l| l.contains("Decoy")),
        "{}",
        w.seen.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_resources_lists_events_in_both_groups() {
    let server = Herald::suite().await;
    let k = Kubectl::new(&server).await;
    let o = k.run(&["api-resources"]).await;
    let t = o.table();
    assert_eq!(
        t.headers,
        ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"],
        "{}",
        o.show()
    );
    assert_eq!(
        t.rows,
        [
            ["events", "ev", "v1", "true", "Event"],
            // `kubectl auth whoami` and `kubectl auth can-i`, as on kube-apiserver.
            [
                "selfsubjectreviews",
                "",
                "authentication.k8s.io/v1",
                "false",
                "SelfSubjectReview"
            ],
            [
                "selfsubjectaccessreviews",
                "",
                "authorization.k8s.io/v1",
                "false",
                "SelfSubjectAccessReview"
            ],
            [
                "selfsubjectrulesreviews",
                "",
                "authorization.k8s.io/v1",
                "false",
                "SelfSubjectRulesReview"
            ],
            ["events", "ev", "events.k8s.io/v1", "true", "Event"]
        ],
        "{}",
        o.show()
    );
    let o = k
        .run(&["api-resources", "--api-group=events.k8s.io", "-o", "wide"])
        .await;
    let t = o.table();
    assert_eq!(t.rows.len(), 1, "{}", o.show());
    assert_eq!(
        t.cell("APIVERSION", "events.k8s.io/v1", "VERBS"),
        "create,delete,deletecollection,get,list,patch,update,watch",
        "{}",
        o.show()
    );
    // The dispatcher ran the kubectl matching the server's minor.
    let o = k.run(&["version"]).await;
    let out = o.ok();
    assert!(out.contains("Client Version: v1.32."), "{}", o.show());
    assert!(out.contains("Server Version: v1.32."), "{}", o.show());
    assert!(!o.stderr.contains("version difference"), "{}", o.show());

    // The groups of the kinds events are about are listed (their resources have no verbs, so
    // `api-resources` above leaves them out).
    let o = k.run(&["api-versions"]).await;
    assert_eq!(
        o.ok().lines().collect::<Vec<_>>(),
        [
            "apps/v1",
            "authentication.k8s.io/v1",
            "authorization.k8s.io/v1",
            "autoscaling/v2",
            "batch/v1",
            "events.k8s.io/v1",
            "networking.k8s.io/v1",
            "policy/v1",
            "v1"
        ],
        "{}",
        o.show()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_table_parser_keeps_empty_cells() {
    // The helper every test above relies on, checked on a fixed kubectl-style table.
    let t = Table::parse("NAME   AGE\nlonger-than-name 5m\n");
    assert!(t.is_err(), "misaligned rows are rejected");
    let t = Table::parse(
        "LAST SEEN   TYPE      SUBOBJECT   SOURCE            NAME\n\
         5m          Normal                kubelet, node-1   a.1\n\
         <unknown>   Warning   x           me                b.2\n",
    )
    .unwrap();
    assert_eq!(
        t.headers,
        ["LAST SEEN", "TYPE", "SUBOBJECT", "SOURCE", "NAME"]
    );
    assert_eq!(t.rows[0], ["5m", "Normal", "", "kubelet, node-1", "a.1"]);
    assert_eq!(t.cell("NAME", "b.2", "SUBOBJECT"), "x");
    assert!(SEED.contains("name: coredns.a"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_kubectl_fails_the_test_with_a_clear_message() {
    let server = Herald::suite().await;
    let mut k = Kubectl::new(&server).await;
    let empty = tempfile::tempdir().unwrap();
    k.path = Some(empty.path().to_path_buf());
    let err = tokio::spawn(async move { k.run(&["version"]).await })
        .await
        .expect_err("running a kubectl that is not there must fail, never skip");
    let msg = err.into_panic();
    let msg = msg.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(msg.contains("kubectl is not on PATH"), "{msg}");
}

/// A list of more than 128 KiB comes back gzipped (kubectl's Go transport asks for it and
/// unpacks it); kubectl prints every event of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_events_reads_a_large_compressed_list() {
    let server = Herald::suite().await;
    let k = Kubectl::new(&server).await;
    let manifests: Vec<String> = (0..300)
        .map(|i| {
            core_event(
                &format!("web-{i:03}.a"),
                &format!("web-{i:03}"),
                "Warning",
                "BackOff",
                &format!("Back-off restarting failed container {}", "x".repeat(300)),
            )
        })
        .collect();
    let f = k.write("big.yaml", &manifests.join("---\n"));
    k.run(&["create", "-f", &f]).await.ok();
    let o = k.run(&["get", "events", "-o", "name"]).await;
    let names: Vec<&str> = o.ok().lines().collect();
    assert_eq!(names.len(), 300, "{}", o.show());
    assert_eq!(names[0], "event/web-000.a");
    let o = k.run(&["get", "events", "-o", "json"]).await;
    assert_eq!(o.json()["items"].as_array().map(Vec::len), Some(300));
}
