//! Lists over real HTTP: selectors, pagination at one snapshot, resourceVersion rules,
//! Tables and metadata-only lists.

mod events_support;

use events_support::*;
use herald_server::server::{Server, StoreKind};
use herald_server::storage::EtcdOptions;
use herald_server::storage::INITIAL_REVISION as R0;
use serde_json::{Value, json};

mod etcd_support;

/// A server on a new etcd (revision 1, as a new memory store), and the etcd.
async fn etcd() -> (Server, etcd_support::EtcdProcess) {
    let etcd = etcd_support::EtcdProcess::start().await;
    let store = StoreKind::Etcd(Box::new(EtcdOptions {
        servers: vec![etcd.url.clone()],
        ..EtcdOptions::default()
    }));
    (start(store, fake_clock()).await, etcd)
}

fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            format!(
                "{}/{}",
                i["metadata"]["namespace"].as_str().unwrap(),
                i["metadata"]["name"].as_str().unwrap()
            )
        })
        .collect()
}

async fn seed(http: &Http) {
    for (ns, name, reason, ty, app) in [
        ("ns-a", "e.1", "Started", "Normal", "web"),
        ("ns-a", "e.2", "BackOff", "Warning", "web"),
        ("ns-b", "e.3", "Started", "Normal", "db"),
        ("ns-b", "e.4", "Killing", "Warning", "web"),
    ] {
        let mut body = core_event(name, ns, reason);
        body["type"] = json!(ty);
        body["metadata"]["labels"] = json!({"app": app});
        let r = http.post(&core_path(ns), &body).await;
        assert_eq!(r.status, 201, "{}", r.text());
    }
}

#[tokio::test]
async fn selectors_and_scopes() {
    selectors_and_scopes_on(memory().await.0).await;
}

#[tokio::test]
async fn etcd_selectors_and_scopes() {
    let (server, _etcd) = etcd().await;
    selectors_and_scopes_on(server).await;
}

async fn selectors_and_scopes_on(server: Server) {
    let http = Http::new(&server);
    seed(&http).await;
    let all = http.get("/api/v1/events").await.json();
    assert_eq!(all["kind"], "EventList");
    assert_eq!(all["apiVersion"], "v1");
    assert_eq!(
        names(&all),
        ["ns-a/e.1", "ns-a/e.2", "ns-b/e.3", "ns-b/e.4"]
    );
    assert!(
        all["items"][0].get("kind").is_none(),
        "items omit kind like the real server"
    );
    assert_eq!(
        names(&http.get(&core_path("ns-b")).await.json()),
        ["ns-b/e.3", "ns-b/e.4"]
    );

    let q = |s: &str| format!("/api/v1/events?{s}");
    assert_eq!(
        names(&http.get(&q("labelSelector=app%3Dweb")).await.json()),
        ["ns-a/e.1", "ns-a/e.2", "ns-b/e.4"]
    );
    assert_eq!(
        names(&http.get(&q("labelSelector=app+in+(db)")).await.json()),
        ["ns-b/e.3"]
    );
    assert_eq!(
        names(&http.get(&q("fieldSelector=type%3DWarning")).await.json()),
        ["ns-a/e.2", "ns-b/e.4"]
    );
    assert_eq!(
        names(
            &http
                .get(&q(
                    "&fieldSelector=reason%21%3DStarted,involvedObject.name%3Dpod-e.4"
                ))
                .await
                .json()
        ),
        ["ns-b/e.4"]
    );
    assert_eq!(
        names(
            &http
                .get(&q(
                    "fieldSelector=metadata.namespace%3Dns-a,source%3Dkubelet"
                ))
                .await
                .json()
        ),
        ["ns-a/e.1", "ns-a/e.2"]
    );
    // events.k8s.io vocabulary
    let v1 = http
        .get("/apis/events.k8s.io/v1/events?fieldSelector=regarding.name%3Dpod-e.1")
        .await
        .json();
    assert_eq!(v1["apiVersion"], "events.k8s.io/v1");
    assert_eq!(names(&v1), ["ns-a/e.1"]);
    let r = http
        .get("/apis/events.k8s.io/v1/events?fieldSelector=involvedObject.name%3Dx")
        .await;
    assert_eq!(
        r.status_failure(400, "BadRequest")["message"],
        "field label not supported: involvedObject.name"
    );
    let r = http.get(&q("fieldSelector=foo%3Dbar")).await;
    assert_eq!(
        r.status_failure(400, "BadRequest")["message"],
        "field label not supported: foo"
    );
    let r = http.get(&q("fieldSelector=nonsense")).await;
    assert_eq!(
        r.status_failure(400, "BadRequest")["message"],
        "invalid selector: 'nonsense'; can't understand 'nonsense'"
    );
    http.get(&q("labelSelector=a%20in%20("))
        .await
        .status_failure(400, "BadRequest");
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn pagination_serves_one_snapshot_while_writes_happen() {
    pagination_serves_one_snapshot_while_writes_happen_on(memory().await.0).await;
}

#[tokio::test]
async fn etcd_pagination_serves_one_snapshot_while_writes_happen() {
    let (server, _etcd) = etcd().await;
    pagination_serves_one_snapshot_while_writes_happen_on(server).await;
}

async fn pagination_serves_one_snapshot_while_writes_happen_on(server: Server) {
    let http = Http::new(&server);
    seed(&http).await;
    let p1 = http.get("/api/v1/events?limit=2").await.json();
    assert_eq!(names(&p1), ["ns-a/e.1", "ns-a/e.2"]);
    let list_rv = p1["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let token = p1["metadata"]["continue"]
        .as_str()
        .expect("a continue token")
        .to_string();

    // writes between pages: a new event in the remaining range, an update, a delete
    http.create_core("ns-b", "e.35", "New").await;
    let r = http
        .patch(
            &format!("{}/e.4", core_path("ns-b")),
            "application/merge-patch+json",
            &json!({"message": "changed"}),
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(
        http.delete(&format!("{}/e.3", core_path("ns-b")), "")
            .await
            .status,
        200
    );

    let p2 = http
        .get(&format!("/api/v1/events?limit=2&continue={token}"))
        .await;
    assert_eq!(p2.status, 200, "{}", p2.text());
    let p2 = p2.json();
    assert_eq!(
        names(&p2),
        ["ns-b/e.3", "ns-b/e.4"],
        "the snapshot of the first page"
    );
    assert_eq!(p2["items"][1]["message"], "message of e.4");
    assert_eq!(p2["metadata"]["resourceVersion"], list_rv.as_str());
    assert!(
        p2["metadata"].get("continue").is_none(),
        "last page has no continue"
    );

    // a fresh list sees the writes
    assert_eq!(
        names(&http.get("/api/v1/events").await.json()),
        ["ns-a/e.1", "ns-a/e.2", "ns-b/e.35", "ns-b/e.4"]
    );

    // paging with a selector fills pages with matches only
    let p = http
        .get("/api/v1/events?limit=1&labelSelector=app%3Dweb")
        .await
        .json();
    assert_eq!(names(&p), ["ns-a/e.1"]);
    let mut seen = names(&p);
    let mut token = p["metadata"]["continue"].as_str().map(str::to_string);
    let mut pages = 0;
    while let Some(t) = token {
        pages += 1;
        assert!(pages < 10);
        let p = http
            .get(&format!(
                "/api/v1/events?limit=1&labelSelector=app%3Dweb&continue={t}"
            ))
            .await
            .json();
        seen.extend(names(&p));
        token = p["metadata"]["continue"].as_str().map(str::to_string);
    }
    assert_eq!(seen, ["ns-a/e.1", "ns-a/e.2", "ns-b/e.4"]);

    // a continue token with a resourceVersion is 400; a garbage token is 400
    let r = http
        .get(&format!(
            "/api/v1/events?limit=1&resourceVersion=3&continue={}",
            p1["metadata"]["continue"].as_str().unwrap()
        ))
        .await;
    assert_eq!(
        r.status_failure(400, "BadRequest")["message"],
        "specifying resource version is not allowed when using continue"
    );
    http.get("/api/v1/events?continue=garbage")
        .await
        .status_failure(400, "BadRequest");
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn resource_version_semantics() {
    resource_version_semantics_on(memory().await.0).await;
}

#[tokio::test]
async fn etcd_resource_version_semantics() {
    let (server, _etcd) = etcd().await;
    resource_version_semantics_on(server).await;
}

async fn resource_version_semantics_on(server: Server) {
    let http = Http::new(&server);
    seed(&http).await;
    let before = http.get("/api/v1/events").await.json();
    let rv0: u64 = before["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(rv0, R0 + 4, "the list RV is the store revision");
    let r = http
        .patch(
            &format!("{}/e.1", core_path("ns-a")),
            "application/merge-patch+json",
            &json!({"message": "new"}),
        )
        .await;
    assert_eq!(r.status, 200);

    // Exact at an older revision shows the old state; unset/0/NotOlderThan show the latest
    let exact = http
        .get(&format!(
            "/api/v1/events?resourceVersion={rv0}&resourceVersionMatch=Exact"
        ))
        .await
        .json();
    assert_eq!(exact["items"][0]["message"], "message of e.1");
    assert_eq!(exact["metadata"]["resourceVersion"], rv0.to_string());
    for q in [
        "",
        "?resourceVersion=0",
        "?resourceVersion=2&resourceVersionMatch=NotOlderThan",
        "?resourceVersion=2",
    ] {
        let l = http.get(&format!("/api/v1/events{q}")).await.json();
        assert_eq!(l["items"][0]["message"], "new", "{q}");
        assert_eq!(
            l["metadata"]["resourceVersion"],
            (R0 + 5).to_string(),
            "{q}"
        );
    }
    // legacy: an RV with a limit is Exact
    let l = http
        .get(&format!("/api/v1/events?resourceVersion={rv0}&limit=10"))
        .await
        .json();
    assert_eq!(l["items"][0]["message"], "message of e.1");
    // the future is 504 Timeout
    let r = http
        .get("/api/v1/events?resourceVersion=99&resourceVersionMatch=NotOlderThan")
        .await;
    assert_eq!(
        r.status_failure(504, "Timeout")["message"],
        format!("Too large resource version: 99, current: {}", R0 + 5)
    );
    http.get(&format!("{}/e.1?resourceVersion=99", core_path("ns-a")))
        .await
        .status_failure(504, "Timeout");
    assert_eq!(
        http.get(&format!("{}/e.1?resourceVersion=0", core_path("ns-a")))
            .await
            .status,
        200
    );

    // a continue token from before a compaction: 410 with a fresh token
    let p1 = http.get("/api/v1/events?limit=1").await.json();
    let token = p1["metadata"]["continue"].as_str().unwrap().to_string();
    http.create_core("ns-c", "late", "R").await;
    server.registry().backend().compact(R0 + 6).await.unwrap();
    let r = http
        .get(&format!(
            "/api/v1/events?resourceVersion={rv0}&resourceVersionMatch=Exact"
        ))
        .await;
    assert_eq!(
        r.status_failure(410, "Expired")["message"],
        "The resourceVersion for the provided list is too old."
    );
    let r = http
        .get(&format!("/api/v1/events?limit=1&continue={token}"))
        .await;
    let s = r.status_failure(410, "Expired");
    assert!(
        s["message"]
            .as_str()
            .unwrap()
            .starts_with("The provided continue parameter is too old")
    );
    let fresh = s["metadata"]["continue"]
        .as_str()
        .expect("a fresh continue token in the Status");
    let rest = http
        .get(&format!("/api/v1/events?continue={fresh}"))
        .await
        .json();
    assert_eq!(
        names(&rest),
        ["ns-a/e.2", "ns-b/e.3", "ns-b/e.4", "ns-c/late"]
    );
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn list_options_validation() {
    let (server, _) = memory().await;
    let http = Http::new(&server);
    for (q, msg) in [
        (
            "resourceVersionMatch=Exact",
            r#"ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"#,
        ),
        (
            "resourceVersion=0&resourceVersionMatch=Exact",
            r#"ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch "exact" is forbidden for resourceVersion "0""#,
        ),
        (
            "resourceVersion=1&resourceVersionMatch=Sometimes",
            r#"ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Unsupported value: "Sometimes": supported values: "Exact", "NotOlderThan", """#,
        ),
        (
            "sendInitialEvents=true",
            r#"ListOptions.meta.k8s.io "" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list"#,
        ),
        (
            "watch=true&sendInitialEvents=true&allowWatchBookmarks=true",
            r#"ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"#,
        ),
        (
            "watch=true&resourceVersion=1&resourceVersionMatch=NotOlderThan",
            r#"ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"#,
        ),
    ] {
        let r = http.get(&format!("/api/v1/events?{q}")).await;
        let s = r.status_failure(422, "Invalid");
        assert_eq!(s["message"], msg, "{q}");
        assert_eq!(s["details"]["kind"], "ListOptions");
    }
    http.get("/api/v1/events?limit=ten")
        .await
        .status_failure(400, "BadRequest");
    http.get("/api/v1/events?resourceVersion=abc")
        .await
        .status_failure(400, "BadRequest");
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn tables_and_metadata_lists() {
    let (server, _) = memory().await;
    let http = Http::new(&server);
    seed(&http).await;
    let t = http.get_accept("/api/v1/events?limit=3", TBL).await.json();
    assert_eq!(t["kind"], "Table");
    assert_eq!(t["apiVersion"], "meta.k8s.io/v1");
    assert_eq!(t["metadata"]["resourceVersion"], (R0 + 4).to_string());
    assert!(t["metadata"]["continue"].is_string(), "{t}");
    assert_eq!(t["columnDefinitions"].as_array().unwrap().len(), 10);
    let rows = t["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[1]["cells"][1], "Warning");
    assert_eq!(rows[1]["cells"][2], "BackOff");
    assert_eq!(rows[1]["cells"][3], "pod/pod-e.2");
    assert_eq!(rows[1]["cells"][5], "kubelet, node-1");
    assert_eq!(
        rows[1]["cells"][0], "30s",
        "last seen against the fake clock"
    );
    assert_eq!(rows[0]["object"]["kind"], "PartialObjectMetadata");
    assert_eq!(rows[0]["object"]["metadata"]["namespace"], "ns-a");

    let t = http
        .get_accept("/api/v1/events?includeObject=Object", TBL)
        .await
        .json();
    assert_eq!(t["rows"][0]["object"]["kind"], "Event");
    assert_eq!(t["rows"][0]["object"]["message"], "message of e.1");
    let t = http
        .get_accept("/apis/events.k8s.io/v1/events?includeObject=Object", TBL)
        .await
        .json();
    assert_eq!(t["rows"][0]["object"]["apiVersion"], "events.k8s.io/v1");
    let t = http
        .get_accept("/api/v1/events?includeObject=None", TBL)
        .await
        .json();
    assert_eq!(t["rows"][0]["object"], Value::Null);
    let one = http
        .get_accept(&format!("{}/e.3", core_path("ns-b")), TBL)
        .await
        .json();
    assert_eq!(one["rows"].as_array().unwrap().len(), 1);

    let pom = http
        .get_accept(
            &core_path("ns-a"),
            "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
        )
        .await
        .json();
    assert_eq!(pom["kind"], "PartialObjectMetadataList");
    assert_eq!(pom["items"].as_array().unwrap().len(), 2);
    assert!(pom["items"][0].get("reason").is_none());
    http.get_accept("/api/v1/events", "application/xml")
        .await
        .status_failure(406, "NotAcceptable");
    // protobuf first, JSON accepted (kubectl events): protobuf, as kube-apiserver answers
    // (events_protobuf.rs reads it).
    let r = http
        .get_accept(
            "/api/v1/events",
            "application/vnd.kubernetes.protobuf,application/json",
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.headers["content-type"],
        "application/vnd.kubernetes.protobuf"
    );
    assert!(r.body.starts_with(b"k8s\0"));
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn kube_rs_list_pages_and_metadata() {
    use k8s_openapi::api::core::v1::Event as CoreEvent;
    use kube::api::{Api, ListParams};
    let (server, _) = memory().await;
    let http = Http::new(&server);
    seed(&http).await;
    let api: Api<CoreEvent> = Api::all(kube_client(&server));
    let mut lp = ListParams::default().limit(1);
    let mut all = Vec::new();
    for _ in 0..10 {
        let page = api.list(&lp).await.unwrap();
        all.extend(page.items.into_iter().map(|e| e.metadata.name.unwrap()));
        match page.metadata.continue_ {
            Some(c) if !c.is_empty() => lp = lp.continue_token(&c),
            _ => break,
        }
    }
    assert_eq!(all, ["e.1", "e.2", "e.3", "e.4"]);
    let meta = api
        .list_metadata(&ListParams::default().labels("app=web"))
        .await
        .unwrap();
    assert_eq!(meta.items.len(), 3);
    server.shutdown().await.unwrap();
}

/// A list longer than one render block (`events.k8s.io/v1` renders blocks on both cores)
/// has every event once, in key order, with the same items a short list has.
#[tokio::test]
async fn long_events_k8s_io_lists_are_whole_and_in_order() {
    use herald_server::api::events::render::LIST_BLOCK;

    let (server, _) = memory().await;
    let http = Http::new(&server);
    let n = LIST_BLOCK + 10;
    create_many(&server, "ns-l", "R", n).await;
    let path = "/apis/events.k8s.io/v1/namespaces/ns-l/events";
    let whole = http.get(path).await;
    assert_eq!(whole.status, 200);
    let whole = whole.json();
    let items = whole["items"].as_array().unwrap();
    assert_eq!(items.len(), n);
    let want: Vec<String> = (0..n).map(|i| format!("ns-l/e.{i:05}")).collect();
    assert_eq!(names(&whole), want);
    // The same items as pages short enough for one block.
    let page = http.get(&format!("{path}?limit=3")).await.json();
    assert_eq!(page["items"].as_array().unwrap()[..], items[..3]);
    server.shutdown().await.unwrap();
}

/// A Table (what `kubectl get events` asks for) and a `PartialObjectMetadataList` longer
/// than one render block are streamed whole and in key order in both groups: every event's
/// row once, with its cells and its metadata, and a short page holds the same first rows.
#[tokio::test]
async fn long_tables_and_metadata_lists_are_whole_and_in_order() {
    use herald_server::api::events::render::LIST_BLOCK;

    const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";
    const META: &str = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io";
    let (server, _) = memory().await;
    let http = Http::new(&server);
    let n = LIST_BLOCK + 10;
    create_many(&server, "ns-t", "Pulled", n).await;
    let want: Vec<String> = (0..n).map(|i| format!("e.{i:05}")).collect();
    for path in [core_path("ns-t"), v1_path("ns-t")] {
        let table = http.get_accept(&path, TABLE).await;
        assert_eq!(table.status, 200, "{path}");
        let table = table.json();
        assert_eq!(table["kind"], "Table");
        assert_eq!(table["columnDefinitions"].as_array().unwrap().len(), 10);
        let rows = table["rows"].as_array().unwrap();
        let row_names: Vec<String> = rows
            .iter()
            .map(|r| r["cells"][9].as_str().unwrap().to_string())
            .collect();
        assert_eq!(row_names, want, "{path}");
        for r in rows {
            assert_eq!(r["cells"][2], "Pulled");
            assert_eq!(r["object"]["kind"], "PartialObjectMetadata");
            assert_eq!(r["object"]["metadata"]["name"], r["cells"][9]);
            assert!(rv(&r["object"]) > 0, "{r}");
        }
        let page = http
            .get_accept(&format!("{path}?limit=3"), TABLE)
            .await
            .json();
        assert_eq!(page["rows"].as_array().unwrap()[..], rows[..3]);
        assert!(page["metadata"]["continue"].is_string());

        let meta = http.get_accept(&path, META).await;
        assert_eq!(meta.status, 200, "{path}");
        let meta = meta.json();
        assert_eq!(meta["kind"], "PartialObjectMetadataList");
        let items = meta["items"].as_array().unwrap();
        let item_names: Vec<&str> = items
            .iter()
            .map(|i| i["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(item_names, want, "{path}");
        assert_eq!(items[0], rows[0]["object"]);
    }
    server.shutdown().await.unwrap();
}

/// Creates `n` core/v1 events `e.00000`, `e.00001`, … with `reason` in `ns`, through the
/// registry (faster than HTTP for thousands).
/// An unpaged list is read and sent a page of `list_page_items` matching events at a time
/// at one revision: every shape and group, with selectors (indexed or not), has the items
/// of the paged list, each once, and none written after its revision. Lists of most of the
/// store come in the order of the events' last writes (see `EventRegistry::list_streamed`),
/// the others in key order.
#[tokio::test]
async fn unpaged_lists_are_read_a_page_at_a_time() {
    use herald_server::server::ServerOptions;

    const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";
    const META: &str = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io";
    let dir = tempfile::tempdir().unwrap();
    let cfg = ServerOptions {
        // A short history: a dozen writes compact a list's revision away.
        history: herald_server::storage::HistoryOptions {
            keep_revisions: 8,
            ..Default::default()
        },
        ..paged_sqlite(dir.path(), 5)
    };
    let server = Server::start(cfg).await.unwrap();
    let http = Http::new(&server);
    create_many(&server, "ns-s", "Pulled", 17).await;
    create_many(&server, "ns-t", "Pulled", 3).await;
    for i in [2, 5, 6, 11, 16] {
        let path = format!("{}/e.{i:05}", core_path("ns-s"));
        let r = http
            .patch(
                &path,
                "application/merge-patch+json",
                &json!({"reason": "BackOff", "metadata": {"labels": {"odd": "yes"}}}),
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
    }
    let queries = [
        "",
        "?fieldSelector=reason%3DBackOff",
        "?fieldSelector=reason%21%3DBackOff",
        "?labelSelector=odd",
    ];
    for base in [
        core_path("ns-s"),
        v1_path("ns-s"),
        "/api/v1/events".to_string(),
    ] {
        for query in queries {
            for accept in ["application/json", TABLE, META] {
                let path = format!("{base}{query}");
                let whole = http.get_accept(&path, accept).await;
                assert_eq!(whole.status, 200, "{path} {accept}: {}", whole.text());
                let whole = whole.json();
                let array = if accept == TABLE { "rows" } else { "items" };
                // The same list, paged by the client.
                let sep = if query.is_empty() { '?' } else { '&' };
                let mut paged = Vec::new();
                let mut next = format!("{path}{sep}limit=4");
                loop {
                    let page = http.get_accept(&next, accept).await.json();
                    paged.extend(page[array].as_array().unwrap().iter().cloned());
                    match page["metadata"]["continue"].as_str() {
                        Some(c) if !c.is_empty() => {
                            next = format!("{path}{sep}limit=4&continue={c}");
                        }
                        _ => break,
                    }
                }
                let items = whole[array].as_array().unwrap();
                // ((namespace, name), resourceVersion) of an item or a Table row's object.
                let id = |v: &Value| {
                    let m = if accept == TABLE {
                        &v["object"]["metadata"]
                    } else {
                        &v["metadata"]
                    };
                    let rv = m["resourceVersion"]
                        .as_str()
                        .unwrap()
                        .parse::<u64>()
                        .unwrap();
                    let key = (m["namespace"].to_string(), m["name"].to_string());
                    (key, rv)
                };
                let ids: Vec<_> = items.iter().map(id).collect();
                let by_key = ids.windows(2).all(|w| w[0].0 < w[1].0);
                let by_write = ids.windows(2).all(|w| w[0].1 < w[1].1);
                assert!(by_key || by_write, "{path} {accept}: {ids:?}");
                let mut sorted = items.clone();
                sorted.sort_by_key(id);
                assert_eq!(&sorted, &paged, "{path} {accept}");
                // ns-t's three events are in the list of every namespace.
                let others = if base == "/api/v1/events" { 3 } else { 0 };
                let want = match query {
                    "" => 17 + others,
                    "?fieldSelector=reason%21%3DBackOff" => 12 + others,
                    _ => 5,
                };
                assert_eq!(items.len(), want, "{path} {accept}");
                assert!(
                    whole["metadata"].get("continue").is_none_or(|c| c == ""),
                    "{whole}"
                );
            }
        }
    }

    // Straight from the registry: the pages after the first are read at the first one's
    // revision, whatever is written meanwhile; a revision compacted away ends the list
    // with a 410.
    let reg = server.registry();
    let unpaged = herald_server::registry::ListParams::default();
    let (first, rest) = reg
        .list_streamed(herald_core::event::ApiGroup::Core, Some("ns-s"), &unpaged)
        .await
        .unwrap();
    assert_eq!(first.items.len(), 5);
    let mut rest = rest.expect("more pages");
    assert_eq!(rest.revision().to_string(), first.resource_version);
    let r = http.create_core("ns-s", "e.00005a", "Later").await;
    assert_eq!(r.status, 201);
    let name = |s: &herald_server::registry::Stored| s.decode().unwrap().metadata.name.unwrap();
    let mut names: Vec<String> = first.items.iter().map(name).collect();
    while let Some(items) = rest.next_page().await.unwrap() {
        assert!(items.len() <= 5);
        names.extend(items.iter().map(name));
    }
    names.sort();
    let want: Vec<String> = (0..17).map(|i| format!("e.{i:05}")).collect();
    assert_eq!(names, want, "nothing written after the list's revision");

    let (_, rest) = reg
        .list_streamed(herald_core::event::ApiGroup::Core, Some("ns-s"), &unpaged)
        .await
        .unwrap();
    let mut rest = rest.expect("more pages");
    for i in 0..12 {
        let r = http.create_core("ns-t", &format!("x.{i}"), "Later").await;
        assert_eq!(r.status, 201);
    }
    let e = rest.next_page().await.unwrap_err();
    assert_eq!(e.code, 410, "{e:?}");
    server.shutdown().await.unwrap();
}
