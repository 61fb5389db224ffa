//! Finalizers over real HTTP, as kube-apiserver's generic store handles them for events: a
//! DELETE of an event with finalizers only marks it (`deletionTimestamp` from the injected
//! clock), updates cannot undo the mark or add finalizers, and the update that removes the
//! last finalizer deletes it. On memory and SQLite.

mod events_support;

use std::time::Duration;

use events_support::*;
use herald_core::clock::FakeClock;
use herald_server::server::StoreKind;
use serde_json::{Value, json};

const KEEP: &str = "example.com/keep";
const MERGE: &str = "application/merge-patch+json";

/// A core/v1 event in `default` carrying the finalizer [`KEEP`].
fn held_event(name: &str) -> Value {
    let mut body = core_event(name, "default", "Held");
    body["metadata"]["finalizers"] = json!([KEEP]);
    body
}

fn item(name: &str) -> String {
    format!("{}/{name}", core_path("default"))
}

fn meta<'a>(v: &'a Value, field: &str) -> &'a Value {
    &v["metadata"][field]
}

/// Delete marks, updates keep the mark, a merge patch that removes the last finalizer
/// deletes; then the same ending through a PUT.
async fn finalizer_scenario(http: &Http, clock: &FakeClock) {
    let created = http.post(&core_path("default"), &held_event("f.1")).await;
    assert_eq!(created.status, 201, "{}", created.text());
    let created = created.json();
    assert_eq!(meta(&created, "finalizers"), &json!([KEEP]));
    let mut w = http
        .watch(
            &format!(
                "{}?watch=true&resourceVersion={}",
                core_path("default"),
                rv(&created)
            ),
            None,
        )
        .await;
    assert_eq!(w.status, 200);

    // DELETE marks the event and answers it (200, the object, not a Status); the timestamp
    // is the injected clock's, cut to whole seconds.
    clock.set("2026-11-22T00:01:30.750Z".parse().unwrap());
    let r = http
        .delete(&item("f.1"), r#"{"propagationPolicy":"Background"}"#)
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let marked = r.json();
    assert_eq!(marked["kind"], "Event", "{marked}");
    assert_eq!(marked["apiVersion"], "v1");
    assert_eq!(meta(&marked, "deletionTimestamp"), "2026-11-22T00:01:30Z");
    assert_eq!(meta(&marked, "deletionGracePeriodSeconds"), 0);
    assert_eq!(meta(&marked, "finalizers"), &json!([KEEP]));
    assert_eq!(meta(&marked, "uid"), meta(&created, "uid"));
    assert!(rv(&marked) > rv(&created));
    let (ty, obj) = w.expect().await;
    assert_eq!(ty, "MODIFIED");
    assert_eq!(meta(&obj, "deletionTimestamp"), "2026-11-22T00:01:30Z");
    assert_eq!(rv(&obj), rv(&marked));

    // It is still there, marked.
    let got = http.get(&item("f.1")).await;
    assert_eq!(got.status, 200, "{}", got.text());
    let got = got.json();
    assert_eq!(meta(&got, "deletionTimestamp"), "2026-11-22T00:01:30Z");
    assert_eq!(rv(&got), rv(&marked));
    let list = http.get(&core_path("default")).await.json();
    assert_eq!(list["items"][0]["metadata"]["name"], "f.1");

    // A repeated DELETE (here on events.k8s.io/v1, answered in that shape) moves the mark.
    clock.advance(Duration::from_secs(60));
    let r = http
        .delete(&format!("{}/f.1", v1_path("default")), "")
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let again = r.json();
    assert_eq!(again["apiVersion"], "events.k8s.io/v1", "{again}");
    assert_eq!(again["note"], "message of f.1");
    assert_eq!(meta(&again, "deletionTimestamp"), "2026-11-22T00:02:30Z");
    let (ty, obj) = w.expect().await;
    assert_eq!(ty, "MODIFIED");
    assert_eq!(meta(&obj, "deletionTimestamp"), "2026-11-22T00:02:30Z");

    // A PUT cannot clear the mark: the stored deletion fields win, the rest is updated.
    let mut body = http.get(&item("f.1")).await.json();
    let m = body["metadata"].as_object_mut().unwrap();
    m.remove("deletionTimestamp");
    m.remove("deletionGracePeriodSeconds");
    m.remove("resourceVersion");
    body["message"] = json!("still held");
    let r = http.put(&item("f.1"), &body).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let put = r.json();
    assert_eq!(put["message"], "still held");
    assert_eq!(meta(&put, "deletionTimestamp"), "2026-11-22T00:02:30Z");
    assert_eq!(meta(&put, "deletionGracePeriodSeconds"), 0);
    let (ty, obj) = w.expect().await;
    assert_eq!(ty, "MODIFIED");
    assert_eq!(obj["message"], "still held");
    assert_eq!(meta(&obj, "deletionTimestamp"), "2026-11-22T00:02:30Z");
    // Neither can a merge patch (a no-op: nothing is written, the watch stays quiet).
    let r = http
        .patch(
            &item("f.1"),
            MERGE,
            &json!({"metadata": {"deletionTimestamp": null, "deletionGracePeriodSeconds": null}}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(meta(&r.json(), "deletionTimestamp"), "2026-11-22T00:02:30Z");
    assert_eq!(rv(&r.json()), rv(&put));
    // Changing the grace period is the immutable-field 422.
    let r = http
        .patch(
            &item("f.1"),
            MERGE,
            &json!({"metadata": {"deletionGracePeriodSeconds": 30}}),
        )
        .await;
    let s = r.status_failure(422, "Invalid");
    assert_eq!(
        s["message"],
        r#"Event "f.1" is invalid: metadata.deletionGracePeriodSeconds: Invalid value: 30: field is immutable"#
    );

    // No new finalizer while being deleted, whichever way it comes.
    let want = r#"Event "f.1" is invalid: metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{"x/y"}"#;
    let r = http
        .patch(
            &item("f.1"),
            MERGE,
            &json!({"metadata": {"finalizers": [KEEP, "x/y"]}}),
        )
        .await;
    let s = r.status_failure(422, "Invalid");
    assert_eq!(s["message"], want);
    assert_eq!(s["details"]["causes"][0]["field"], "metadata.finalizers");
    assert_eq!(s["details"]["causes"][0]["reason"], "FieldValueForbidden");
    let mut body = http.get(&item("f.1")).await.json();
    body["metadata"]["finalizers"] = json!(["x/y"]);
    let r = http.put(&item("f.1"), &body).await;
    assert_eq!(r.status_failure(422, "Invalid")["message"], want);
    let r = http
        .patch(
            &format!("{}?fieldManager=adder", item("f.1")),
            "application/apply-patch+yaml",
            &json!({"apiVersion": "v1", "kind": "Event",
                    "metadata": {"name": "f.1", "namespace": "default", "finalizers": ["x/y"]}}),
        )
        .await;
    assert_eq!(r.status_failure(422, "Invalid")["message"], want);
    assert_eq!(
        meta(&http.get(&item("f.1")).await.json(), "finalizers"),
        &json!([KEEP])
    );

    // The merge patch that removes the last finalizer deletes the event: 200 with the object
    // as the update left it, DELETED for watchers, then 404.
    let r = http
        .patch(
            &item("f.1"),
            MERGE,
            &json!({"metadata": {"finalizers": null}}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let last = r.json();
    assert_eq!(last["kind"], "Event", "{last}");
    assert_eq!(meta(&last, "finalizers"), &Value::Null);
    assert_eq!(meta(&last, "deletionTimestamp"), "2026-11-22T00:02:30Z");
    let (ty, obj) = w.expect().await;
    assert_eq!(ty, "DELETED");
    assert_eq!(meta(&obj, "name"), "f.1");
    assert!(rv(&obj) > rv(&put));
    http.get(&item("f.1")).await.status_failure(404, "NotFound");

    // The same ending through a PUT that drops the finalizer.
    let r = http.post(&core_path("default"), &held_event("f.2")).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let (ty, _) = w.expect().await;
    assert_eq!(ty, "ADDED");
    let r = http.delete(&item("f.2"), "").await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(meta(&r.json(), "deletionTimestamp"), "2026-11-22T00:02:30Z");
    let (ty, _) = w.expect().await;
    assert_eq!(ty, "MODIFIED");
    let mut body = r.json();
    body["metadata"]["finalizers"] = json!([]);
    let r = http.put(&item("f.2"), &body).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["metadata"]["name"], "f.2");
    let (ty, obj) = w.expect().await;
    assert_eq!(
        (ty.as_str(), &obj["metadata"]["name"]),
        ("DELETED", &json!("f.2"))
    );
    http.get(&item("f.2")).await.status_failure(404, "NotFound");
}

#[tokio::test]
async fn delete_marks_and_the_last_finalizer_deletes_memory() {
    let (server, clock) = memory().await;
    finalizer_scenario(&Http::new(&server), &clock).await;
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn delete_marks_and_the_last_finalizer_deletes_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let clock = fake_clock();
    let store = StoreKind::Sqlite {
        dir: dir.path().to_path_buf(),
    };
    let server = start(store, clock.clone()).await;
    finalizer_scenario(&Http::new(&server), &clock).await;
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn dry_run_delete_of_a_held_event_stores_nothing() {
    let (server, clock) = memory().await;
    let http = Http::new(&server);
    let created = http
        .post(&core_path("default"), &held_event("d.1"))
        .await
        .json();
    clock.advance(Duration::from_secs(5));
    let r = http
        .delete(&format!("{}?dryRun=All", item("d.1")), "")
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let would = r.json();
    assert_eq!(meta(&would, "deletionTimestamp"), "2026-11-22T00:00:05Z");
    assert_eq!(rv(&would), rv(&created));
    let r = http.delete(&item("d.1"), r#"{"dryRun":["All"]}"#).await;
    assert_eq!(meta(&r.json(), "deletionTimestamp"), "2026-11-22T00:00:05Z");
    let got = http.get(&item("d.1")).await.json();
    assert_eq!(meta(&got, "deletionTimestamp"), &Value::Null);
    assert_eq!(rv(&got), rv(&created));

    // A dry-run update that removes the finalizer of a marked event deletes nothing either.
    http.delete(&item("d.1"), "").await;
    let r = http
        .patch(
            &format!("{}?dryRun=All", item("d.1")),
            MERGE,
            &json!({"metadata": {"finalizers": null}}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let got = http.get(&item("d.1")).await;
    assert_eq!(got.status, 200, "{}", got.text());
    assert_eq!(meta(&got.json(), "finalizers"), &json!([KEEP]));
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn deletecollection_marks_held_events_and_removes_the_rest() {
    let (server, _) = memory().await;
    let http = Http::new(&server);
    for name in ["c.a", "c.b"] {
        let r = http
            .post(&core_path("default"), &core_event(name, "default", "R"))
            .await;
        assert_eq!(r.status, 201, "{}", r.text());
    }
    let r = http
        .post(&core_path("default"), &held_event("c.keep"))
        .await;
    assert_eq!(r.status, 201, "{}", r.text());

    let r = http.delete(&core_path("default"), "").await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(v["kind"], "EventList");
    let items = v["items"].as_array().unwrap();
    let names: Vec<&str> = items
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["c.a", "c.b", "c.keep"]);
    assert_eq!(
        items[2]["metadata"]["deletionTimestamp"],
        "2026-11-22T00:00:00Z"
    );
    assert_eq!(items[0]["metadata"]["deletionTimestamp"], Value::Null);

    let left = http.get(&core_path("default")).await.json();
    let left = left["items"].as_array().unwrap();
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(left[0]["metadata"]["name"], "c.keep");
    assert_eq!(
        left[0]["metadata"]["deletionTimestamp"],
        "2026-11-22T00:00:00Z"
    );
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn orphan_dependents_with_propagation_policy_is_invalid() {
    let (server, _) = memory().await;
    let http = Http::new(&server);
    let r = http.post(&core_path("default"), &held_event("o.1")).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let want = r#"DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Invalid value: "Background": orphanDependents and deletionPropagation cannot be both set"#;
    for (query, body) in [
        (
            "",
            r#"{"orphanDependents":true,"propagationPolicy":"Background"}"#,
        ),
        ("?orphanDependents=false&propagationPolicy=Background", ""),
        (
            "?orphanDependents=true",
            r#"{"propagationPolicy":"Background"}"#,
        ),
    ] {
        let r = http.delete(&format!("{}{query}", item("o.1")), body).await;
        let s = r.status_failure(422, "Invalid");
        assert_eq!(s["message"], want, "{query} {body}");
        assert_eq!(s["details"]["causes"][0]["field"], "propagationPolicy");
        let r = http
            .delete(&format!("{}{query}", core_path("default")), body)
            .await;
        assert_eq!(r.status_failure(422, "Invalid")["message"], want);
    }
    let got = http.get(&item("o.1")).await.json();
    assert_eq!(meta(&got, "deletionTimestamp"), &Value::Null);

    // orphanDependents alone is fine; `false` makes a delete that only marks answer 202.
    let r = http
        .delete(&item("o.1"), r#"{"orphanDependents":false}"#)
        .await;
    assert_eq!(r.status, 202, "{}", r.text());
    assert_eq!(r.json()["kind"], "Event");
    let r = http
        .delete(&format!("{}?orphanDependents=true", item("o.1")), "")
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    // Any value but 0 and false is true, as kube-apiserver reads query booleans.
    let r = http
        .delete(&format!("{}?orphanDependents=maybe", item("o.1")), "")
        .await;
    assert_eq!(r.status, 200, "{}", r.text());

    // Foreground propagation adds no garbage-collector finalizer (nothing would remove it).
    let r = http
        .delete(&item("o.1"), r#"{"propagationPolicy":"Foreground"}"#)
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(meta(&r.json(), "finalizers"), &json!([KEEP]));
    let r = http
        .post(&core_path("default"), &core_event("o.2", "default", "R"))
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let r = http
        .delete(&item("o.2"), r#"{"propagationPolicy":"Foreground"}"#)
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["kind"], "Status");
    http.get(&item("o.2")).await.status_failure(404, "NotFound");
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn create_clears_client_deletion_fields() {
    let (server, _) = memory().await;
    let http = Http::new(&server);
    let deleting = |name: &str| {
        let mut body = core_event(name, "default", "R");
        body["metadata"]["deletionTimestamp"] = json!("2020-01-01T00:00:00Z");
        body["metadata"]["deletionGracePeriodSeconds"] = json!(30);
        body
    };
    let posted = http.post(&core_path("default"), &deleting("n.post")).await;
    let put = http.put(&item("n.put"), &deleting("n.put")).await;
    let applied = http
        .patch(
            &format!("{}?fieldManager=applier", item("n.apply")),
            "application/apply-patch+yaml",
            &deleting("n.apply"),
        )
        .await;
    for (name, r) in [("n.post", posted), ("n.put", put), ("n.apply", applied)] {
        assert_eq!(r.status, 201, "{name}: {}", r.text());
        let v = r.json();
        assert_eq!(meta(&v, "deletionTimestamp"), &Value::Null, "{name}: {v}");
        assert_eq!(
            meta(&v, "deletionGracePeriodSeconds"),
            &Value::Null,
            "{name}"
        );
        let got = http.get(&item(name)).await.json();
        assert_eq!(meta(&got, "deletionTimestamp"), &Value::Null, "{name}");
        // Not being deleted: a finalizer may still be added.
        let r = http
            .patch(
                &item(name),
                MERGE,
                &json!({"metadata": {"finalizers": [KEEP]}}),
            )
            .await;
        assert_eq!(r.status, 200, "{name}: {}", r.text());
    }
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn ttl_removes_an_expired_event_despite_its_finalizers() {
    let (server, clock) = memory().await;
    let http = Http::new(&server);
    let r = http.post(&core_path("default"), &held_event("t.1")).await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(http.delete(&item("t.1"), "").await.status, 200);
    clock.advance(Duration::from_secs(61 * 60));
    assert_eq!(server.registry().backend().expire_due().await.unwrap(), 1);
    http.get(&item("t.1")).await.status_failure(404, "NotFound");
    server.shutdown().await.unwrap();
}
