//! What every response carries, over real HTTP: YAML when `Accept` prefers it, indented JSON
//! for `pretty` (and for curl), `Cache-Control` and `Audit-Id` headers; and that a client's
//! `selfLink` is never stored (kube-apiserver has left it unset since 1.24).

mod events_support;

use events_support::*;
use serde_json::{Value, json};

fn yaml(r: &Resp) -> Value {
    assert_eq!(
        r.headers["content-type"],
        "application/yaml",
        "{}",
        r.text()
    );
    serde_yaml_ng::from_slice(&r.body).unwrap_or_else(|e| panic!("not YAML ({e}): {}", r.text()))
}

#[tokio::test]
async fn yaml_when_accept_prefers_it() {
    let (server, _clock) = memory().await;
    let http = Http::new(&server);
    let created = http
        .post(&core_path("ns1"), &core_event("y.1", "ns1", "Started"))
        .await;
    assert_eq!(created.status, 201, "{}", created.text());

    let one = http
        .get_accept(&format!("{}/y.1", core_path("ns1")), "application/yaml")
        .await;
    assert_eq!(one.status, 200);
    let v = yaml(&one);
    assert_eq!(v, created.json(), "the same object, in YAML");
    assert!(
        one.text().starts_with("kind: Event\n") || one.text().starts_with("apiVersion: v1\n"),
        "field order kept: {}",
        one.text()
    );

    let list = http
        .get_accept(&core_path("ns1"), "application/yaml, application/json")
        .await;
    assert_eq!(yaml(&list)["items"][0]["metadata"]["name"], "y.1");

    // JSON first wins.
    let json_first = http
        .get_accept(&core_path("ns1"), "application/json, application/yaml")
        .await;
    assert_eq!(json_first.headers["content-type"], "application/json");

    // Errors come back in the asked-for format too.
    let missing = http
        .get_accept(&format!("{}/nope", core_path("ns1")), "application/yaml")
        .await;
    assert_eq!(missing.status, 404);
    let st = yaml(&missing);
    assert_eq!(st["kind"], "Status");
    assert_eq!(st["reason"], "NotFound");

    // Watches stream JSON lines: YAML cannot be streamed.
    let w = http
        .watch(
            &format!("{}?watch=true", core_path("ns1")),
            Some("application/yaml"),
        )
        .await;
    assert_eq!(w.status, 406);
    let mut w = http
        .watch(
            &format!("{}?watch=true", core_path("ns1")),
            Some("application/yaml, application/json"),
        )
        .await;
    assert_eq!(w.status, 200);
    let (kind, obj) = w.expect().await;
    assert_eq!(
        (kind.as_str(), &obj["metadata"]["name"]),
        ("ADDED", &json!("y.1"))
    );
}

#[tokio::test]
async fn pretty_json_when_asked_and_for_curl() {
    let (server, _clock) = memory().await;
    let http = Http::new(&server);
    let created = http
        .post(&core_path("ns1"), &core_event("p.1", "ns1", "Started"))
        .await;
    assert_eq!(created.status, 201);
    let path = format!("{}/p.1", core_path("ns1"));

    let compact = http.get(&path).await;
    assert!(!compact.text().contains('\n'), "{}", compact.text());

    let pretty = http.get(&format!("{path}?pretty=true")).await;
    assert!(
        pretty.text().starts_with("{\n  \""),
        "two-space indent: {}",
        pretty.text()
    );
    assert!(pretty.text().ends_with("}\n"));
    assert_eq!(pretty.json(), compact.json());

    let curl = http.get_with(&path, &[("user-agent", "curl/8.5.0")]).await;
    assert_eq!(curl.body, pretty.body, "curl gets kube's pretty output");
    let curl_compact = http
        .get_with(
            &format!("{path}?pretty=false"),
            &[("user-agent", "curl/8.5.0")],
        )
        .await;
    assert_eq!(curl_compact.body, compact.body);
    // A `pretty` that strconv.ParseBool cannot read is false, and decides alone.
    let curl_unreadable = http
        .get_with(
            &format!("{path}?pretty=maybe"),
            &[("user-agent", "curl/8.5.0")],
        )
        .await;
    assert_eq!(curl_unreadable.body, compact.body);
    let kubectl = http
        .get_with(&path, &[("user-agent", "kubectl/v1.32.4 (linux/amd64)")])
        .await;
    assert_eq!(kubectl.body, compact.body);
}

#[tokio::test]
async fn every_response_names_itself_and_is_not_cached() {
    let (server, _clock) = memory().await;
    let http = Http::new(&server);
    let mut ids = Vec::new();
    for path in ["/version", "/api/v1/namespaces/ns1/events", "/no/such/path"] {
        let r = http.get(path).await;
        assert_eq!(r.headers["cache-control"], "no-cache, private", "{path}");
        let id = r.headers["audit-id"].to_str().unwrap().to_string();
        assert!(uuid::Uuid::parse_str(&id).is_ok(), "{path}: {id}");
        ids.push(id);
    }
    ids.dedup();
    assert_eq!(ids.len(), 3, "one ID per request");
    let echoed = http
        .get_with("/version", &[("audit-id", "my-request-7")])
        .await;
    assert_eq!(echoed.headers["audit-id"], "my-request-7");
}

#[tokio::test]
async fn a_client_self_link_is_not_stored() {
    let (server, _clock) = memory().await;
    let http = Http::new(&server);
    let mut ev = core_event("s.1", "ns1", "Started");
    ev["metadata"]["selfLink"] = json!("/api/v1/namespaces/ns1/events/s.1");
    let created = http.post(&core_path("ns1"), &ev).await;
    assert_eq!(created.status, 201, "{}", created.text());
    assert!(created.json()["metadata"].get("selfLink").is_none());

    let path = format!("{}/s.1", core_path("ns1"));
    let mut put = http.get(&path).await.json();
    put["metadata"]["selfLink"] = json!("/somewhere/else");
    put["message"] = json!("changed");
    let updated = http.put(&path, &put).await;
    assert_eq!(updated.status, 200, "{}", updated.text());
    assert!(updated.json()["metadata"].get("selfLink").is_none());
    assert!(
        http.get(&path).await.json()["metadata"]
            .get("selfLink")
            .is_none()
    );
}

/// Responses of 128 KiB or more are gzipped for clients that accept it (kube-apiserver's
/// `APIResponseCompression`); small ones and watches are not.
#[tokio::test]
async fn large_responses_are_gzipped_for_clients_that_ask() {
    use std::io::Read as _;
    let (server, _clock) = memory().await;
    let http = Http::new(&server);
    for i in 0..300 {
        let name = format!("big-{i:03}.1");
        let mut e = core_event(&name, "ns1", "Started");
        e["message"] = json!("x".repeat(400));
        assert_eq!(http.post(&core_path("ns1"), &e).await.status, 201);
    }
    let gzip = [("accept-encoding", "gzip")];
    let plain = http.get(&core_path("ns1")).await;
    assert!(plain.body.len() >= 128 * 1024, "{} bytes", plain.body.len());
    assert!(plain.headers.get("content-encoding").is_none());

    let zipped = http.get_with(&core_path("ns1"), &gzip).await;
    assert_eq!(zipped.status, 200);
    assert_eq!(zipped.headers["content-encoding"], "gzip");
    assert!(
        zipped.body.len() * 10 < plain.body.len(),
        "{} bytes",
        zipped.body.len()
    );
    let mut unzipped = Vec::new();
    flate2::read::GzDecoder::new(&zipped.body[..])
        .read_to_end(&mut unzipped)
        .unwrap();
    assert_eq!(unzipped, plain.body);

    // Protobuf lists too, by their size: this one is large; a page of it is not.
    let pb = "application/vnd.kubernetes.protobuf";
    let pb_plain = http.get_with(&core_path("ns1"), &[("accept", pb)]).await;
    assert_eq!(pb_plain.headers["content-type"], pb);
    assert_eq!(
        pb_plain.headers["content-length"],
        pb_plain.body.len().to_string()
    );
    let pb_zipped = http
        .get_with(&core_path("ns1"), &[("accept", pb), gzip[0]])
        .await;
    assert_eq!(pb_zipped.headers["content-encoding"], "gzip");
    let mut unzipped = Vec::new();
    flate2::read::GzDecoder::new(&pb_zipped.body[..])
        .read_to_end(&mut unzipped)
        .unwrap();
    assert_eq!(unzipped, pb_plain.body);
    let pb_page = http
        .get_with(
            &format!("{}?limit=2", core_path("ns1")),
            &[("accept", pb), gzip[0]],
        )
        .await;
    assert_eq!(pb_page.status, 200);
    assert!(pb_page.headers.get("content-encoding").is_none());
    assert_eq!(
        pb_page.headers["content-length"],
        pb_page.body.len().to_string()
    );

    let one = http
        .get_with(&format!("{}/big-000.1", core_path("ns1")), &gzip)
        .await;
    assert_eq!(one.status, 200);
    assert!(one.headers.get("content-encoding").is_none());
    assert_eq!(one.json()["metadata"]["name"], "big-000.1");

    let mut w = http
        .watch_with(&format!("{}?watch=true", core_path("ns1")), &gzip)
        .await;
    assert!(w.headers.get("content-encoding").is_none());
    assert_eq!(w.expect().await.0, "ADDED");
}

/// A watch is streamed whatever else the request asks for: a percent-encoded `watch` key
/// with a curl user agent (pretty JSON) or a YAML preference must not make the server hold
/// the stream back to re-encode it.
#[tokio::test]
async fn watches_are_never_held_back_for_re_encoding() {
    let (server, _clock) = memory().await;
    let http = Http::new(&server);
    let path = core_path("ns1");
    let mut curl = http
        .watch_with(
            &format!("{path}?wat%63h=1"),
            &[("user-agent", "curl/8.5.0")],
        )
        .await;
    let mut yaml = http
        .watch_with(
            &format!("{path}?wat%63h=true"),
            &[("accept", "application/yaml, application/json")],
        )
        .await;
    let mut legacy = http
        .watch_with(
            "/api/v1/watch/namespaces/ns1/events",
            &[("user-agent", "curl/8.5.0"), ("accept-encoding", "gzip")],
        )
        .await;
    for w in [&curl, &yaml, &legacy] {
        assert_eq!(w.status, 200);
        assert_eq!(w.headers["content-type"], "application/json");
        assert!(w.headers.get("content-encoding").is_none());
    }
    http.create_core("ns1", "a.1", "Started").await;
    for w in [&mut curl, &mut yaml, &mut legacy] {
        assert_eq!(w.expect().await.0, "ADDED");
    }
    // A watch that accepts only YAML is refused, on the deprecated path too.
    let only_yaml = http
        .watch(
            "/api/v1/watch/namespaces/ns1/events",
            Some("application/yaml"),
        )
        .await;
    assert_eq!(only_yaml.status, 406);
}
