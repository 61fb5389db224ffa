//! Create, get, update, patch and delete over real HTTP, in both API groups, on memory and
//! SQLite.

mod events_support;

use events_support::*;
use herald_server::server::StoreKind;
use serde_json::json;

async fn crud_scenario(http: &Http) {
    // create in core/v1
    let r = http
        .post(
            &core_path("default"),
            &core_event("web.1", "default", "Started"),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let created = r.json();
    assert_eq!(created["kind"], "Event");
    assert_eq!(created["apiVersion"], "v1");
    assert!(
        created["metadata"]["uid"]
            .as_str()
            .is_some_and(|u| u.len() == 36)
    );
    assert_eq!(
        created["metadata"]["creationTimestamp"],
        "2026-11-22T00:00:00Z"
    );
    let rv1 = rv(&created);
    assert!(rv1 > 0);

    // get in both groups: converted shapes
    let got = http
        .get(&format!("{}/web.1", core_path("default")))
        .await
        .json();
    assert_eq!(got["message"], "message of web.1");
    assert_eq!(got["involvedObject"]["name"], "pod-web.1");
    assert_eq!(rv(&got), rv1);
    let v1 = http.get(&format!("{}/web.1", v1_path("default"))).await;
    assert_eq!(v1.status, 200, "{}", v1.text());
    let v1 = v1.json();
    assert_eq!(v1["apiVersion"], "events.k8s.io/v1");
    assert_eq!(v1["note"], "message of web.1");
    assert_eq!(v1["regarding"]["name"], "pod-web.1");
    assert_eq!(v1["deprecatedSource"]["component"], "kubelet");
    assert_eq!(v1["deprecatedCount"], 1);
    assert_eq!(v1["eventTime"], serde_json::Value::Null);

    // create in events.k8s.io/v1, read back on core
    let r = http
        .post(
            &v1_path("default"),
            &v1_event("job.1", "default", "Pulling"),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.json()["eventTime"], "2026-11-21T23:59:00.123456Z");
    let core = http
        .get(&format!("{}/job.1", core_path("default")))
        .await
        .json();
    assert_eq!(core["message"], "note of job.1");
    assert_eq!(core["reportingComponent"], "example.com/ctl");
    assert_eq!(core["involvedObject"]["kind"], "Pod");

    // duplicate create
    let r = http
        .post(
            &core_path("default"),
            &core_event("web.1", "default", "Started"),
        )
        .await;
    let s = r.status_failure(409, "AlreadyExists");
    assert_eq!(s["message"], r#"events "web.1" already exists"#);

    // update with the current RV, then a stale one
    let mut upd = got.clone();
    upd["message"] = json!("updated");
    let r = http
        .put(&format!("{}/web.1", core_path("default")), &upd)
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let rv2 = rv(&r.json());
    assert!(rv2 > rv1);
    let r = http
        .put(&format!("{}/web.1", core_path("default")), &upd)
        .await;
    let s = r.status_failure(409, "Conflict");
    assert_eq!(
        s["message"],
        r#"Operation cannot be fulfilled on events "web.1": the object has been modified; please apply your changes to the latest version and try again"#
    );
    // unconditional update (no RV) overwrites
    upd["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("resourceVersion");
    upd["message"] = json!("unconditional");
    let r = http
        .put(&format!("{}/web.1", core_path("default")), &upd)
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["message"], "unconditional");
    assert_eq!(r.json()["metadata"]["uid"], created["metadata"]["uid"]);

    // delete: Status Success with uid, then 404
    let r = http
        .delete(
            &format!("{}/web.1", core_path("default")),
            r#"{"propagationPolicy":"Background"}"#,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let s = r.json();
    assert_eq!(s["kind"], "Status");
    assert_eq!(s["status"], "Success");
    assert_eq!(s["details"]["name"], "web.1");
    assert_eq!(s["details"]["kind"], "events");
    assert_eq!(s["details"]["uid"], created["metadata"]["uid"]);
    let r = http.get(&format!("{}/web.1", core_path("default"))).await;
    assert_eq!(
        r.status_failure(404, "NotFound")["message"],
        r#"events "web.1" not found"#
    );
    let r = http
        .delete(&format!("{}/web.1", v1_path("default")), "{}")
        .await;
    assert_eq!(
        r.status_failure(404, "NotFound")["message"],
        r#"events.events.k8s.io "web.1" not found"#
    );
}

#[tokio::test]
async fn crud_both_groups_memory() {
    let (server, _clock) = memory().await;
    crud_scenario(&Http::new(&server)).await;
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn crud_both_groups_sqlite_survives_restart() {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreKind::Sqlite {
        dir: dir.path().to_path_buf(),
    };
    let server = start(store.clone(), fake_clock()).await;
    let http = Http::new(&server);
    crud_scenario(&http).await;
    server.shutdown().await.unwrap();
    let server = start(store, fake_clock()).await;
    let http = Http::new(&server);
    let r = http.get(&format!("{}/job.1", core_path("default"))).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["message"], "note of job.1");
    server.shutdown().await.unwrap();
}

/// The value of the unlabelled sample `name` in a Prometheus text exposition.
fn sample(metrics: &str, name: &str) -> Option<f64> {
    metrics.lines().find_map(|l| {
        let (n, v) = l.split_once(' ')?;
        (n == name).then(|| v.parse().ok())?
    })
}

#[tokio::test]
async fn sqlite_group_commits_are_in_the_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreKind::Sqlite {
        dir: dir.path().to_path_buf(),
    };
    let server = start(store, fake_clock()).await;
    let http = Http::new(&server);
    for n in ["m.1", "m.2", "m.3"] {
        let r = http
            .post(&core_path("default"), &core_event(n, "default", "Metric"))
            .await;
        assert_eq!(r.status, 201, "{}", r.text());
    }
    let metrics = http.get("/metrics").await.text();
    let commits = sample(&metrics, "herald_storage_commit_batch_size_count").expect(&metrics);
    let writes = sample(&metrics, "herald_storage_commit_batch_size_sum").expect(&metrics);
    // Sequential creates each wait for their commit; a TTL sweep may add its own.
    assert!(commits >= 3.0 && writes >= 3.0, "{metrics}");
    assert!(writes >= commits, "{metrics}");
    assert_eq!(
        sample(&metrics, "herald_storage_commit_duration_seconds_count"),
        Some(commits),
        "{metrics}"
    );
    // Each create's index change is either waiting in memory or merged, in one snapshot.
    let unmerged = sample(&metrics, "herald_storage_index_unmerged_changes").expect(&metrics);
    let merged = sample(&metrics, "herald_storage_index_merged_changes_total").expect(&metrics);
    assert_eq!(unmerged + merged, 3.0, "{metrics}");
    assert!(
        metrics
            .lines()
            .any(|l| l == r#"herald_storage_index_merges_total{outcome="failed"} 0"#),
        "{metrics}"
    );
    server.shutdown().await.unwrap();

    let (server, _) = memory().await;
    let metrics = Http::new(&server).get("/metrics").await.text();
    assert!(
        !metrics.contains("herald_storage_commit_batch_size")
            && !metrics.contains("herald_storage_index_"),
        "the memory store has no commits and no index thread: {metrics}"
    );
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn generate_name_and_create_on_update() {
    let (server, _) = memory().await;
    let http = Http::new(&server);
    let mut body = core_event("", "default", "Gen");
    body["metadata"] = json!({"generateName": "gen-"});
    let r = http.post(&core_path("default"), &body).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let name = r.json()["metadata"]["name"].as_str().unwrap().to_string();
    assert!(name.starts_with("gen-") && name.len() == 9, "{name}");
    assert!(
        name[4..]
            .chars()
            .all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c))
    );

    // PUT to a missing name creates (201)
    let r = http
        .put(
            &format!("{}/made.by.put", core_path("ns1")),
            &core_event("made.by.put", "ns1", "Put"),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    // name mismatch with the URL is 400
    let r = http
        .put(
            &format!("{}/other", core_path("ns1")),
            &core_event("made.by.put", "ns1", "Put"),
        )
        .await;
    let s = r.status_failure(400, "BadRequest");
    assert_eq!(
        s["message"],
        "the name of the object (made.by.put) does not match the name on the URL (other)"
    );
    // namespace mismatch on create is 400
    let r = http
        .post(&core_path("ns2"), &core_event("x", "ns1", "R"))
        .await;
    assert_eq!(
        r.status_failure(400, "BadRequest")["message"],
        "the namespace of the provided object does not match the namespace sent on the request"
    );
    // namespace from the URL when the body has none
    let mut body = core_event("nons", "ns3", "R");
    body["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("namespace");
    let r = http.post(&core_path("ns3"), &body).await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.json()["metadata"]["namespace"], "ns3");
    // a client resourceVersion on create is rejected as upstream does
    let mut body = core_event("with-rv", "ns1", "R");
    body["metadata"]["resourceVersion"] = json!("5");
    let r = http.post(&core_path("ns1"), &body).await;
    assert!(
        r.status_failure(500, "InternalError")["message"]
            .as_str()
            .unwrap()
            .contains("resourceVersion should not be set")
    );
    // kube-apiserver reads the version as an integer where 0 is unset, and one it cannot
    // read as unset: both creates succeed with the store's own resourceVersion.
    for (name, rv) in [("rv-zero", "0"), ("rv-text", "abc")] {
        let mut body = core_event(name, "ns1", "R");
        body["metadata"]["resourceVersion"] = json!(rv);
        let r = http.post(&core_path("ns1"), &body).await;
        assert_eq!(r.status, 201, "{}", r.text());
        let got = http
            .get(&format!("{}/{name}", core_path("ns1")))
            .await
            .json();
        assert_eq!(
            got["metadata"]["resourceVersion"],
            r.json()["metadata"]["resourceVersion"]
        );
        assert_ne!(got["metadata"]["resourceVersion"], json!(rv));
    }
    // On a write over an existing event, "0" is an unconditional write, like an empty one.
    let path = format!("{}/rv-zero", core_path("ns1"));
    let mut body = http.get(&path).await.json();
    body["metadata"]["resourceVersion"] = json!("0");
    body["message"] = json!("put over 0");
    let r = http.put(&path, &body).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["message"], "put over 0");
    let r = http
        .patch(
            &path,
            "application/merge-patch+json",
            &json!({"metadata": {"resourceVersion": "0"}, "message": "patched over 0"}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["message"], "patched over 0");
    // Any other stale one is still a 409.
    body["metadata"]["resourceVersion"] = json!("1");
    http.put(&path, &body).await.status_failure(409, "Conflict");
    server.shutdown().await.unwrap();
}

/// Every core/v1 write answers with the object a GET then shows (the answers are written from
/// the stored bytes): a PUT that updates, one that creates, an apply that creates, dry runs
/// (nothing stored: the answer is the would-be object at the old resourceVersion), and a PUT
/// that takes the last finalizer off an event being deleted (answered with the object; it is
/// gone).
#[tokio::test]
async fn write_answers_are_what_a_get_shows() {
    let (server, _) = memory().await;
    let http = Http::new(&server);
    let path = |name: &str| format!("{}/{name}", core_path("default"));

    let created = http.create_core("default", "w.1", "R").await.json();
    let mut changed = created.clone();
    changed["message"] = json!("updated by PUT");
    let r = http.put(&path("w.1"), &changed).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let updated = r.json();
    assert_eq!(updated["message"], "updated by PUT");
    assert_eq!(updated, http.get(&path("w.1")).await.json());

    let r = http
        .put(&path("w.put"), &core_event("w.put", "default", "Put"))
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.json(), http.get(&path("w.put")).await.json());

    let r = http
        .patch(
            &format!("{}?fieldManager=tester", path("w.apply")),
            "application/apply-patch+yaml",
            &core_event("w.apply", "default", "Applied"),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.json(), http.get(&path("w.apply")).await.json());

    // Dry runs store nothing: the answer carries the change at the stored resourceVersion.
    let mut dry = updated.clone();
    dry["message"] = json!("dry PUT");
    let r = http.put(&format!("{}?dryRun=All", path("w.1")), &dry).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let answer = r.json();
    assert_eq!(answer["message"], "dry PUT");
    assert_eq!(rv(&answer), rv(&updated));
    let r = http
        .patch(
            &format!("{}?dryRun=All", path("w.1")),
            "application/strategic-merge-patch+json",
            &json!({"message": "dry patch"}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["message"], "dry patch");
    assert_eq!(rv(&r.json()), rv(&updated));
    assert_eq!(updated, http.get(&path("w.1")).await.json());

    // The last finalizer taken off an event being deleted: answered, then gone.
    let mut held = core_event("w.held", "default", "Held");
    held["metadata"]["finalizers"] = json!(["example.com/hold"]);
    assert_eq!(http.post(&core_path("default"), &held).await.status, 201);
    let r = http.delete(&path("w.held"), "").await;
    assert_eq!(r.status, 200, "{}", r.text());
    let mut marked = http.get(&path("w.held")).await.json();
    assert!(
        marked["metadata"]["deletionTimestamp"].is_string(),
        "{marked}"
    );
    marked["metadata"]["finalizers"] = json!([]);
    let r = http.put(&path("w.held"), &marked).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["metadata"]["name"], "w.held");
    http.get(&path("w.held"))
        .await
        .status_failure(404, "NotFound");
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn validation_per_group() {
    let (server, _) = memory().await;
    let http = Http::new(&server);
    // events.k8s.io/v1 is strict: type must be Normal/Warning, eventTime required
    let mut body = v1_event("bad", "default", "R");
    body["type"] = json!("Sideways");
    body.as_object_mut().unwrap().remove("eventTime");
    let r = http.post(&v1_path("default"), &body).await;
    let s = r.status_failure(422, "Invalid");
    let msg = s["message"].as_str().unwrap();
    assert!(
        msg.starts_with(r#"Event.events.k8s.io "bad" is invalid: "#),
        "{msg}"
    );
    assert!(msg.contains("eventTime: Required value"), "{msg}");
    // the same (converted) body is fine on core/v1, which is lax
    let mut core = core_event("bad", "default", "R");
    core["type"] = json!("Sideways");
    assert_eq!(http.post(&core_path("default"), &core).await.status, 201);
    // core: involvedObject.namespace must match
    let mut core = core_event("mismatch", "default", "R");
    core["involvedObject"]["namespace"] = json!("elsewhere");
    let s = http
        .post(&core_path("default"), &core)
        .await
        .status_failure(422, "Invalid");
    assert_eq!(
        s["message"],
        r#"Event "mismatch" is invalid: involvedObject.namespace: Invalid value: "elsewhere": does not match event.namespace"#
    );
    assert_eq!(
        s["details"]["causes"][0]["field"],
        "involvedObject.namespace"
    );
    // events.k8s.io/v1 update: note is immutable
    assert_eq!(
        http.post(&v1_path("default"), &v1_event("imm", "default", "R"))
            .await
            .status,
        201
    );
    let r = http
        .patch(
            &format!("{}/imm", v1_path("default")),
            "application/merge-patch+json",
            &json!({"note": "changed"}),
        )
        .await;
    let s = r.status_failure(422, "Invalid");
    assert!(
        s["message"]
            .as_str()
            .unwrap()
            .contains(r#"message: Invalid value: "changed": field is immutable"#),
        "{s}"
    );
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn every_patch_type() {
    let (server, _) = memory().await;
    let http = Http::new(&server);
    let path = format!("{}/p.1", core_path("default"));
    let mut body = core_event("p.1", "default", "R");
    body["metadata"]["finalizers"] = json!(["example.com/a"]);
    let created = http.post(&core_path("default"), &body).await.json();

    // strategic merge (kubectl patch default)
    let r = http
        .patch(
            &path,
            "application/strategic-merge-patch+json",
            &json!({"message": "smp", "count": 3, "metadata": {"finalizers": ["example.com/b"]}}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(v["message"], "smp");
    assert_eq!(v["count"], 3);
    assert_eq!(
        v["metadata"]["finalizers"],
        json!(["example.com/a", "example.com/b"])
    );
    assert!(rv(&v) > rv(&created));
    // The answer is the object as stored: what a GET shows.
    assert_eq!(v, http.get(&path).await.json());

    // merge patch (kubectl label): lists replaced, null deletes
    let r = http
        .patch(
            &path,
            "application/merge-patch+json",
            &json!({"metadata": {"labels": {"a": "b"}, "finalizers": null}}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(v["metadata"]["labels"]["a"], "b");
    assert!(v["metadata"].get("finalizers").is_none());

    // a no-op patch changes nothing (kubectl's "patched (no change)")
    let same = http
        .patch(
            &path,
            "application/merge-patch+json",
            &json!({"metadata": {"labels": {"a": "b"}}}),
        )
        .await
        .json();
    assert_eq!(rv(&same), rv(&v));
    assert_eq!(same, http.get(&path).await.json());

    // JSON patch, with a failing test op
    let r = http
        .patch(
            &path,
            "application/json-patch+json",
            &json!([{"op": "replace", "path": "/message", "value": "jp"}]),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["message"], "jp");
    let r = http
        .patch(
            &path,
            "application/json-patch+json",
            &json!([{"op": "test", "path": "/message", "value": "nope"}]),
        )
        .await;
    r.status_failure(422, "Invalid");

    // resourceVersion in the patch is a precondition
    let r = http
        .patch(
            &path,
            "application/merge-patch+json",
            &json!({"metadata": {"resourceVersion": "1"}, "message": "x"}),
        )
        .await;
    r.status_failure(409, "Conflict");
    let cur = http.get(&path).await.json();
    let r = http
        .patch(&path, "application/merge-patch+json", &json!({"metadata": {"resourceVersion": cur["metadata"]["resourceVersion"]}, "message": "ok"}))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());

    // patch of a missing event is 404
    let r = http
        .patch(
            &format!("{}/missing", core_path("default")),
            "application/merge-patch+json",
            &json!({"message": "m"}),
        )
        .await;
    r.status_failure(404, "NotFound");

    // server-side apply creates a missing event (201), then updates it (200); fieldManager required
    let apply = format!(
        "{}/applied?fieldManager=kubectl&fieldValidation=Strict&force=false",
        core_path("default")
    );
    let r = http
        .patch(
            &apply,
            "application/apply-patch+yaml",
            &core_event("applied", "default", "Applied"),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let mut again = core_event("applied", "default", "Applied");
    again["message"] = json!("re-applied");
    let r = http
        .patch(&apply, "application/apply-patch+yaml", &again)
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["message"], "re-applied");
    let r = http
        .patch(
            &format!("{}/applied", core_path("default")),
            "application/apply-patch+yaml",
            &again,
        )
        .await;
    r.status_failure(422, "Invalid");

    // events.k8s.io/v1 merge patch with the whole event plus a series (kube-rs Recorder)
    let r = http
        .post(&v1_path("default"), &v1_event("rec.1", "default", "R"))
        .await;
    assert_eq!(r.status, 201);
    let mut whole = v1_event("rec.1", "default", "R");
    whole["series"] = json!({"count": 2, "lastObservedTime": "2026-11-22T00:00:01.000000Z"});
    let r = http
        .patch(
            &format!("{}/rec.1", v1_path("default")),
            "application/merge-patch+json",
            &whole,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["series"]["count"], 2);

    // unknown patch type is 415
    let r = http.patch(&path, "text/plain", &json!({})).await;
    r.status_failure(415, "UnsupportedMediaType");
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn field_validation_and_dry_run() {
    let (server, _) = memory().await;
    let http = Http::new(&server);
    let mut body = core_event("fv", "default", "R");
    body["spec"] = json!({});
    let r = http
        .post(
            &format!("{}?fieldValidation=Strict", core_path("default")),
            &body,
        )
        .await;
    let s = r.status_failure(400, "BadRequest");
    assert!(
        s["message"]
            .as_str()
            .unwrap()
            .ends_with(r#"strict decoding error: unknown field "spec""#),
        "{s}"
    );
    let r = http.post(&core_path("default"), &body).await;
    assert_eq!(r.status, 201);
    let warning = r.headers.get("warning").unwrap().to_str().unwrap();
    assert_eq!(warning, r#"299 - "unknown field \"spec\"""#);
    let r = http
        .post(
            &format!("{}?fieldValidation=Ignore", core_path("default")),
            &core_event("fv2", "default", "R"),
        )
        .await;
    assert_eq!(r.status, 201);
    assert!(r.headers.get("warning").is_none());

    // dryRun=All: validated, not stored
    let r = http
        .post(
            &format!("{}?dryRun=All", core_path("default")),
            &core_event("dry", "default", "R"),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.json()["metadata"]["name"], "dry");
    http.get(&format!("{}/dry", core_path("default")))
        .await
        .status_failure(404, "NotFound");
    // A dry run of a name that is taken is the 409 the real create would be.
    let r = http
        .post(
            &format!("{}?dryRun=All", core_path("default")),
            &core_event("fv2", "default", "R"),
        )
        .await;
    let s = r.status_failure(409, "AlreadyExists");
    assert_eq!(s["message"], r#"events "fv2" already exists"#);
    // kube's dry-run storage does not check a client resourceVersion (a real create would
    // be a 500): the object comes back as sent.
    let mut body = core_event("dry-rv", "default", "R");
    body["metadata"]["resourceVersion"] = json!("5");
    let r = http
        .post(&format!("{}?dryRun=All", core_path("default")), &body)
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.json()["metadata"]["resourceVersion"], "5");
    let r = http
        .delete(&format!("{}/fv2?dryRun=All", core_path("default")), "")
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(
        http.get(&format!("{}/fv2", core_path("default")))
            .await
            .status,
        200
    );
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn delete_preconditions_and_collection() {
    let (server, _) = memory().await;
    let http = Http::new(&server);
    for (i, app) in ["a", "a", "b"].iter().enumerate() {
        let mut body = core_event(&format!("d.{i}"), "default", "R");
        body["metadata"]["labels"] = json!({"app": app});
        assert_eq!(http.post(&core_path("default"), &body).await.status, 201);
    }
    let path = format!("{}/d.0", core_path("default"));
    let cur = http.get(&path).await.json();
    let (uid, cur_rv) = (
        cur["metadata"]["uid"].as_str().unwrap().to_string(),
        cur["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .to_string(),
    );
    // kube-apiserver's rest.BeforeDelete: about the internal kind `Event` (group "", in
    // both API groups), naming both sides.
    for p in [path.clone(), format!("{}/d.0", v1_path("default"))] {
        let r = http
            .delete(&p, r#"{"preconditions":{"uid":"not-the-uid"}}"#)
            .await;
        let s = r.status_failure(409, "Conflict");
        assert_eq!(
            s["message"],
            format!(
                r#"Operation cannot be fulfilled on Event "d.0": the UID in the precondition (not-the-uid) does not match the UID in record ({uid}). The object might have been deleted and then recreated"#
            ),
            "{p}"
        );
        assert_eq!(s["details"], json!({"kind": "Event", "name": "d.0"}), "{p}");
        let r = http
            .delete(&p, r#"{"preconditions":{"resourceVersion":"1"}}"#)
            .await;
        let s = r.status_failure(409, "Conflict");
        assert_eq!(
            s["message"],
            format!(
                r#"Operation cannot be fulfilled on Event "d.0": the ResourceVersion in the precondition (1) does not match the ResourceVersion in record ({cur_rv}). The object might have been modified"#
            ),
            "{p}"
        );
        assert_eq!(s["details"], json!({"kind": "Event", "name": "d.0"}), "{p}");
    }
    let r = http
        .delete(&path, r#"{"propagationPolicy":"Sideways"}"#)
        .await;
    r.status_failure(422, "Invalid");
    let cur = http.get(&path).await.json();
    let body = json!({"preconditions": {"uid": cur["metadata"]["uid"], "resourceVersion": cur["metadata"]["resourceVersion"]}}).to_string();
    assert_eq!(http.delete(&path, &body).await.status, 200);

    // deletecollection with a label selector returns the deleted items, as a list read at
    // the revision before the deletes
    let before = rv(&http.get(&core_path("default")).await.json());
    let r = http
        .delete(
            &format!("{}?labelSelector=app%3Da", core_path("default")),
            "",
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(v["kind"], "EventList");
    let names: Vec<&str> = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["d.1"]);
    assert_eq!(rv(&v), before, "{v}");
    let left = http.get(&core_path("default")).await.json();
    assert_eq!(left["items"].as_array().unwrap().len(), 1);
    assert_eq!(left["items"][0]["metadata"]["name"], "d.2");

    // The delete options apply to every item, preconditions included: a uid no item has
    // deletes nothing; a resourceVersion that only the first item (in key order) has deletes
    // it and stops at the next with that item's 409.
    http.create_core("default", "d.3", "Started").await;
    let r = http
        .delete(
            &core_path("default"),
            r#"{"preconditions":{"uid":"not-a-uid"}}"#,
        )
        .await;
    let s = r.status_failure(409, "Conflict");
    assert!(
        s["message"].as_str().unwrap().starts_with(
            r#"Operation cannot be fulfilled on Event "d.2": the UID in the precondition (not-a-uid) does not match the UID in record ("#
        ),
        "{s}"
    );
    let first = http
        .get(&format!("{}/d.2", core_path("default")))
        .await
        .json();
    let body = json!({"preconditions": {"resourceVersion": first["metadata"]["resourceVersion"]}});
    let r = http.delete(&core_path("default"), &body.to_string()).await;
    let s = r.status_failure(409, "Conflict");
    assert!(
        s["message"]
            .as_str()
            .unwrap()
            .starts_with(r#"Operation cannot be fulfilled on Event "d.3": the ResourceVersion in the precondition ("#),
        "{s}"
    );
    let left = http.get(&core_path("default")).await.json();
    let names: Vec<&str> = left["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["d.3"]);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn kube_rs_api_both_groups() {
    use k8s_openapi::api::core::v1::Event as CoreEvent;
    use k8s_openapi::api::events::v1::Event as V1Event;
    use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};

    let (server, _) = memory().await;
    let client = kube_client(&server);
    let core: Api<CoreEvent> = Api::namespaced(client.clone(), "default");
    let v1: Api<V1Event> = Api::namespaced(client.clone(), "default");
    let e: CoreEvent = serde_json::from_value(core_event("kr.1", "default", "Started")).unwrap();
    let created = core.create(&PostParams::default(), &e).await.unwrap();
    assert!(created.metadata.resource_version.is_some());
    let as_v1 = v1.get("kr.1").await.unwrap();
    assert_eq!(as_v1.note.as_deref(), Some("message of kr.1"));
    assert!(core.get_opt("nope").await.unwrap().is_none());

    let ev: V1Event = serde_json::from_value(v1_event("kr.2", "default", "Pulled")).unwrap();
    v1.create(&PostParams::default(), &ev).await.unwrap();
    let l = v1
        .list(&ListParams::default().fields("regarding.name=pod-kr.2"))
        .await
        .unwrap();
    assert_eq!(l.items.len(), 1);
    assert_eq!(l.items[0].reason.as_deref(), Some("Pulled"));
    let l = core.list(&ListParams::default()).await.unwrap();
    assert_eq!(l.items.len(), 2);

    let mut replaced = core.get("kr.1").await.unwrap();
    replaced.message = Some("replaced".into());
    let out = core
        .replace("kr.1", &PostParams::default(), &replaced)
        .await
        .unwrap();
    assert_eq!(out.message.as_deref(), Some("replaced"));
    let err = core
        .replace("kr.1", &PostParams::default(), &replaced)
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 409),
        "{err:?}"
    );

    let applied = core
        .patch(
            "kr.3",
            &PatchParams::apply("rs-mgr").force(),
            &Patch::Apply(core_event("kr.3", "default", "Applied")),
        )
        .await
        .unwrap();
    assert_eq!(applied.reason.as_deref(), Some("Applied"));
    let merged = core
        .patch(
            "kr.3",
            &PatchParams::default(),
            &Patch::Merge(json!({"message": "m"})),
        )
        .await
        .unwrap();
    assert_eq!(merged.message.as_deref(), Some("m"));
    // The merge patch took .message from the applier: applying the old message again is a
    // conflict with that writer (named after kube-rs' User-Agent), unless forced.
    let mf = merged.metadata.managed_fields.clone().unwrap_or_default();
    let updater = mf
        .iter()
        .find(|e| e.operation.as_deref() == Some("Update"))
        .and_then(|e| e.manager.clone())
        .expect("the merge patch is recorded");
    let err = core
        .patch(
            "kr.3",
            &PatchParams::apply("rs-mgr"),
            &Patch::Apply(core_event("kr.3", "default", "Applied")),
        )
        .await
        .unwrap_err();
    match err {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 409);
            assert_eq!(
                s.message,
                format!(
                    "Apply failed with 1 conflict: conflict with \"{updater}\" using v1: .message"
                )
            );
        }
        other => panic!("expected a 409, got {other:?}"),
    }
    let smp = core
        .patch(
            "kr.3",
            &PatchParams::default(),
            &Patch::Strategic(json!({"count": 9})),
        )
        .await
        .unwrap();
    assert_eq!(smp.count, Some(9));

    let del = core.delete("kr.3", &DeleteParams::default()).await.unwrap();
    assert!(del.is_right(), "events delete answers a Status");
    let gone = v1
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await
        .unwrap();
    let list = gone.left().expect("deletecollection answers the list");
    assert_eq!(list.items.len(), 2);
    assert!(
        core.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    server.shutdown().await.unwrap();
}

/// `application/yaml` bodies on create and update, YAML apply bodies, and the
/// `managedFields` every write records (manager, operation, API version, fields, time).
#[tokio::test]
async fn yaml_bodies_and_managed_fields() {
    let (server, clock) = memory().await;
    let http = Http::new(&server);
    let now = herald_core::clock::Clock::now(&*clock);
    let now = jiff::Timestamp::from_second(now.as_second())
        .unwrap()
        .to_string();
    let yaml = "apiVersion: v1
kind: Event
metadata:
  name: y.1
  labels: {app: web}
involvedObject: {kind: Pod, name: web-1, namespace: default}
reason: Started
message: from yaml
type: Normal
count: 2
";
    let r = http
        .send(
            "POST",
            &format!("{}?fieldManager=yaml-writer", core_path("default")),
            Some("application/yaml"),
            None,
            yaml,
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let created = r.json();
    assert_eq!(created["message"], "from yaml");
    assert_eq!(created["count"], 2);
    let mf = &created["metadata"]["managedFields"];
    assert_eq!(
        mf,
        &json!([{
            "apiVersion": "v1", "fieldsType": "FieldsV1", "manager": "yaml-writer",
            "operation": "Update", "time": now,
            "fieldsV1": {"f:count": {}, "f:involvedObject": {}, "f:message": {},
                         "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                         "f:reason": {}, "f:type": {}},
        }]),
        "{created}"
    );

    // events.k8s.io/v1 in YAML: the entry is in that version's shape.
    let r = http
        .send(
            "POST",
            &v1_path("default"),
            Some("application/yaml"),
            None,
            "apiVersion: events.k8s.io/v1
kind: Event
metadata: {name: y.2}
eventTime: \"2026-11-21T23:59:00.123456Z\"
regarding: {kind: Pod, name: web-1, namespace: default}
reason: Pulled
note: pulled
type: Normal
action: Pull
reportingController: example.com/ctl
reportingInstance: ctl-1
",
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let v = r.json();
    let e = &v["metadata"]["managedFields"][0];
    assert_eq!(e["apiVersion"], "events.k8s.io/v1");
    assert_eq!(e["manager"], "unknown", "no fieldManager and no User-Agent");
    assert!(e["fieldsV1"].get("f:note").is_some(), "{v}");

    // PUT in YAML: the replacing manager takes what it changed.
    let put = yaml.replace("from yaml", "replaced in yaml");
    let r = http
        .send(
            "PUT",
            &format!("{}/y.1?fieldManager=replacer", core_path("default")),
            Some("application/yaml"),
            None,
            put,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(v["message"], "replaced in yaml");
    let mf = v["metadata"]["managedFields"].as_array().unwrap().clone();
    assert_eq!(mf.len(), 2, "{v}");
    // Same second on the fake clock: entries are then ordered by manager name.
    assert_eq!(mf[0]["manager"], "replacer");
    assert_eq!(mf[0]["fieldsV1"], json!({"f:message": {}}));
    assert_eq!(mf[1]["manager"], "yaml-writer");
    assert!(mf[1]["fieldsV1"].get("f:message").is_none(), "{v}");

    // A YAML apply body (not JSON) creates, then applies again.
    let apply = "apiVersion: v1
kind: Event
metadata:
  name: y.3
involvedObject:
  kind: Pod
  name: web-1
  namespace: default
reason: Applied
message: applied in yaml
type: Normal
";
    let path = format!("{}/y.3?fieldManager=applier", core_path("default"));
    let r = http
        .send(
            "PATCH",
            &path,
            Some("application/apply-patch+yaml"),
            None,
            apply,
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let v = r.json();
    assert_eq!(v["metadata"]["managedFields"][0]["operation"], "Apply");
    assert_eq!(v["metadata"]["managedFields"][0]["manager"], "applier");
    let r = http
        .send(
            "PATCH",
            &path,
            Some("application/apply-patch+yaml"),
            None,
            apply.replace("type: Normal\n", ""),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert!(
        v.get("type").is_none(),
        "a field the applier stopped applying is removed: {v}"
    );
    assert_eq!(
        v["metadata"]["managedFields"][0]["fieldsV1"],
        json!({"f:involvedObject": {}, "f:message": {}, "f:reason": {}})
    );
    server.shutdown().await.unwrap();
}
