//! Hostile and careless request bodies over real HTTP (issue 29, findings 1 and 2, and the
//! decoder fuzzing): every body costs work bounded by its size, and every rejection is a
//! `Status` whose code is the response's.
//!
//! The fuzz targets are proptest-driven: each runs a bounded number of cases (`FUZZ_CASES`, or
//! `PROPTEST_CASES` when set) of bodies made from valid events and then damaged (bytes flipped,
//! cut, duplicated, nested deeper), and plain noise, for every decoder (JSON, YAML, protobuf
//! create bodies; delete options) and every patch path (JSON patch, merge, strategic merge,
//! apply as YAML and as JSON).

mod events_support;

use std::sync::Arc;

use events_support::*;
use herald_core::event::ApiGroup;
use herald_server::server::Server;
use herald_wire::limits::MAX_YAML_DEPTH;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{Value, json};

const EVENTS: &str = "/api/v1/namespaces/default/events";

/// A body of `n` nested flow sequences under an otherwise valid event, as in the issue.
fn nested_yaml(n: usize) -> String {
    format!(
        "metadata: {{name: x}}\ninvolvedObject: {{}}\nx: {}{}\n",
        "[".repeat(n),
        "]".repeat(n)
    )
}

/// Finding 1: a deeply nested YAML body is refused where its nesting passes the bound, before
/// the rest of it is read (the YAML check's own tests assert where it stops reading: the
/// 128th `[`, whatever the size). The same for a server-side apply body.
#[tokio::test]
async fn finding_1_deeply_nested_yaml_is_refused_at_its_bound() {
    let (server, _clock) = memory().await;
    let http = Http::new(&server);
    let column = 3 + MAX_YAML_DEPTH;
    for n in [50_000, 200_000] {
        let body = nested_yaml(n);
        let r = http
            .send("POST", EVENTS, Some("application/yaml"), None, body.clone())
            .await;
        let s = r.status_failure(400, "BadRequest");
        let msg = s["message"].as_str().unwrap();
        assert!(
            msg.contains(&format!(
                "nested deeper than {MAX_YAML_DEPTH} levels at line 3 column {column}"
            )),
            "{msg}"
        );
        let r = http
            .send(
                "PATCH",
                &format!("{EVENTS}/x?fieldManager=m"),
                Some("application/apply-patch+yaml"),
                None,
                body,
            )
            .await;
        let s = r.status_failure(400, "BadRequest");
        assert!(
            s["message"]
                .as_str()
                .unwrap()
                .contains("nested deeper than"),
            "{s}"
        );
    }
    // Within the bound, YAML is read as before.
    let ok = "metadata: {name: ok}\ninvolvedObject: {kind: Pod, name: p}\nmessage: '[fine]'\n";
    let r = http
        .send("POST", EVENTS, Some("application/yaml"), None, ok)
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.json()["message"], "[fine]");
}

/// Finding 2: metadata maps and lists of many entries cost what their size does on every
/// write path (create, apply, merge and strategic-merge patches). The unknown-field check,
/// the managed-fields comparison and merge, and the strategic merge of finalizers and owner
/// references each looked items up by a linear scan: 150,000 labels took 20 s of CPU. Here
/// they are written and read back whole; the benches (`cargo bench -p herald-server --bench
/// create -- many_labels`) show the cost per label stays flat as their number grows.
#[tokio::test]
async fn finding_2_many_labels_finalizers_and_owners_are_written_whole() {
    let (server, _clock) = memory().await;
    let http = Http::new(&server);
    let n = 150_000;
    let labels: serde_json::Map<String, Value> =
        (0..n).map(|i| (format!("l{i}"), json!("v"))).collect();
    let body = json!({"metadata": {"name": "labels", "labels": labels},
        "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"}});
    let r = http.post(EVENTS, &body).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let got = http.get(&format!("{EVENTS}/labels")).await.json();
    assert_eq!(got["metadata"]["labels"].as_object().unwrap().len(), n);

    let m = 20_000;
    let finalizers: Vec<String> = (0..m).map(|i| format!("x.io/f{i}")).collect();
    let owners: Vec<Value> = (0..m)
        .map(|i| json!({"apiVersion": "v1", "kind": "Pod", "name": format!("p{i}"), "uid": format!("u{i}")}))
        .collect();
    let body = json!({"apiVersion": "v1", "kind": "Event",
        "metadata": {"name": "lists", "finalizers": finalizers, "ownerReferences": owners},
        "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"}});
    let r = http
        .send(
            "PATCH",
            &format!("{EVENTS}/lists?fieldManager=m"),
            Some("application/apply-patch+yaml"),
            None,
            serde_json::to_vec(&body).unwrap(),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    // A strategic merge adding as many again, and removing the first half of the owners.
    let more: Vec<String> = (m..2 * m).map(|i| format!("x.io/f{i}")).collect();
    let gone: Vec<Value> = (0..m / 2)
        .map(|i| json!({"uid": format!("u{i}"), "$patch": "delete"}))
        .collect();
    let patch = json!({"metadata": {"finalizers": more, "ownerReferences": gone}});
    let r = http
        .send(
            "PATCH",
            &format!("{EVENTS}/lists"),
            Some("application/strategic-merge-patch+json"),
            None,
            serde_json::to_vec(&patch).unwrap(),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let got = r.json();
    assert_eq!(
        got["metadata"]["finalizers"].as_array().unwrap().len(),
        2 * m
    );
    let owners = got["metadata"]["ownerReferences"].as_array().unwrap();
    assert_eq!(owners.len(), m / 2);
    assert_eq!(owners[0]["uid"], format!("u{}", m / 2));
    let r = http
        .send(
            "PATCH",
            &format!("{EVENTS}/lists"),
            Some("application/merge-patch+json"),
            None,
            serde_json::to_vec(&json!({"message": "still whole"})).unwrap(),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.json()["metadata"]["finalizers"].as_array().unwrap().len(),
        2 * m
    );
}

// ---- fuzzing -------------------------------------------------------------------------------

/// Cases per fuzz target when `PROPTEST_CASES` is not set.
const FUZZ_CASES: u32 = 128;

fn runner() -> TestRunner {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(FUZZ_CASES);
    TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    })
}

/// Damage done to a valid body.
#[derive(Debug, Clone)]
enum Damage {
    None,
    /// Cut after this fraction (per mille) of the body.
    Truncate(u16),
    /// Bytes at these per-mille positions replaced.
    Flip(Vec<(u16, u8)>),
    /// A slice (per-mille range) repeated this many times in place.
    Repeat(u16, u16, u8),
    /// `[`/`{` (or their protobuf-ish bytes) inserted this many times at a position.
    Nest(u16, u16),
    /// Replaced by noise.
    Noise(Vec<u8>),
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        Just(Damage::None),
        (0u16..1000).prop_map(Damage::Truncate),
        proptest::collection::vec((0u16..1000, any::<u8>()), 1..8).prop_map(Damage::Flip),
        (0u16..1000, 0u16..1000, 1u8..50).prop_map(|(a, b, n)| Damage::Repeat(a, b, n)),
        (0u16..1000, 100u16..5000).prop_map(|(at, n)| Damage::Nest(at, n)),
        proptest::collection::vec(any::<u8>(), 0..512).prop_map(Damage::Noise),
    ]
}

fn at(len: usize, per_mille: u16) -> usize {
    len * usize::from(per_mille.min(1000)) / 1000
}

fn apply_damage(mut body: Vec<u8>, d: &Damage) -> Vec<u8> {
    match d {
        Damage::None => body,
        Damage::Truncate(p) => {
            body.truncate(at(body.len(), *p));
            body
        }
        Damage::Flip(flips) => {
            for (p, b) in flips {
                let i = at(body.len(), *p);
                if let Some(x) = body.get_mut(i) {
                    *x = *b;
                }
            }
            body
        }
        Damage::Repeat(a, b, n) => {
            let (a, b) = (at(body.len(), *a.min(b)), at(body.len(), *a.max(b)));
            let piece = body[a..b].to_vec();
            let mut out = body[..b].to_vec();
            for _ in 0..*n {
                out.extend_from_slice(&piece);
            }
            out.extend_from_slice(&body[b..]);
            out
        }
        Damage::Nest(p, n) => {
            let i = at(body.len(), *p);
            let mut out = body[..i].to_vec();
            for k in 0..*n {
                out.push(if k % 2 == 0 { b'[' } else { b'{' });
            }
            out.extend_from_slice(&body[i..]);
            out
        }
        Damage::Noise(noise) => noise.clone(),
    }
}

/// The response to a hostile body: a success, or a `Status` whose code is the response's and
/// is a client error. A 5xx, a body that is not a `Status`, or no answer in time fails.
fn check_answer(r: &Resp, ok: &[u16]) -> Result<(), TestCaseError> {
    if ok.contains(&r.status) {
        return Ok(());
    }
    prop_assert!(
        (400..500).contains(&r.status),
        "status {}: {}",
        r.status,
        r.text()
    );
    let v: Value = serde_json::from_slice(&r.body)
        .map_err(|e| TestCaseError::fail(format!("not a JSON Status ({e}): {}", r.text())))?;
    prop_assert_eq!(&v["kind"], "Status", "{}", v);
    prop_assert_eq!(&v["status"], "Failure", "{}", v);
    prop_assert_eq!(v["code"].as_u64(), Some(u64::from(r.status)), "{}", v);
    prop_assert!(v["reason"].as_str().is_some_and(|s| !s.is_empty()), "{}", v);
    Ok(())
}

/// A server on its own runtime, for proptest's synchronous runner.
struct Fuzzed {
    rt: tokio::runtime::Runtime,
    server: Option<Server>,
    http: Arc<Http>,
}

impl Fuzzed {
    fn start() -> Self {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let (server, http) = rt.block_on(async {
            let (server, _clock) = memory().await;
            let http = Arc::new(Http::new(&server));
            (server, http)
        });
        Fuzzed {
            rt,
            server: Some(server),
            http,
        }
    }

    fn send(&self, method: &str, path: &str, ct: &str, body: Vec<u8>) -> Resp {
        self.rt
            .block_on(self.http.send(method, path, Some(ct), None, body))
    }

    /// The server still answers, and still has `name` (nothing acknowledged was lost).
    fn still_serves(&self, name: &str) {
        let r = self.rt.block_on(self.http.get(&format!("{EVENTS}/{name}")));
        assert_eq!(r.status, 200, "{}", r.text());
    }
}

impl Drop for Fuzzed {
    fn drop(&mut self) {
        if let Some(s) = self.server.take() {
            let _ = self.rt.block_on(s.shutdown());
        }
    }
}

/// A valid event body in each encoding, from the shared event strategy.
#[derive(Debug, Clone, Copy)]
enum Encoding {
    Json,
    Yaml,
    Protobuf,
}

impl Encoding {
    fn content_type(self) -> &'static str {
        match self {
            Encoding::Json => "application/json",
            Encoding::Yaml => "application/yaml",
            Encoding::Protobuf => "application/vnd.kubernetes.protobuf",
        }
    }

    fn encode(self, e: &herald_core::event::CoreEvent) -> Vec<u8> {
        match self {
            Encoding::Json => serde_json::to_vec(e).unwrap(),
            Encoding::Yaml => serde_yaml_ng::to_string(e).unwrap().into_bytes(),
            Encoding::Protobuf => herald_wire::protobuf::event_object(ApiGroup::Core, e),
        }
    }
}

fn seed_event(f: &Fuzzed) {
    let r = f.send(
        "POST",
        EVENTS,
        "application/json",
        serde_json::to_vec(&json!({"metadata": {"name": "keep", "labels": {"a": "b"},
            "finalizers": ["x.io/f"]},
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"}}))
        .unwrap(),
    );
    assert_eq!(r.status, 201, "{}", r.text());
}

/// Fuzz target per create decoder: JSON, YAML and protobuf bodies, valid then damaged.
#[test]
fn fuzz_create_bodies_json_yaml_protobuf() {
    let f = Fuzzed::start();
    seed_event(&f);
    let strategy = (
        herald_wire::testing::event(),
        prop_oneof![
            Just(Encoding::Json),
            Just(Encoding::Yaml),
            Just(Encoding::Protobuf)
        ],
        damage(),
    );
    runner()
        .run(&strategy, |(mut e, enc, d)| {
            e.metadata.namespace = None;
            let body = apply_damage(enc.encode(&e), &d);
            let r = f.send("POST", EVENTS, enc.content_type(), body);
            check_answer(&r, &[201])
        })
        .unwrap();
    f.still_serves("keep");
}

/// Fuzz target per patch path: JSON patch, merge, strategic merge, apply (YAML and JSON), on a
/// stored event; patches made from valid ones and then damaged.
#[test]
fn fuzz_patch_bodies_every_patch_type() {
    let f = Fuzzed::start();
    seed_event(&f);
    let patch = prop_oneof![
        Just((
            "application/json-patch+json",
            json!([{"op": "add", "path": "/metadata/labels/x", "value": "y"},
                   {"op": "copy", "from": "/metadata/labels", "path": "/metadata/annotations"},
                   {"op": "test", "path": "/metadata/name", "value": "keep"}])
        )),
        Just((
            "application/merge-patch+json",
            json!({"message": "m", "metadata": {"labels": {"a": null, "c": "d"}}})
        )),
        Just((
            "application/strategic-merge-patch+json",
            json!({"metadata": {"finalizers": ["x.io/g"],
                "$deleteFromPrimitiveList/finalizers": ["x.io/f"],
                "ownerReferences": [{"uid": "1", "name": "n", "kind": "Pod", "apiVersion": "v1"}]}})
        )),
        Just((
            "application/apply-patch+yaml",
            json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "keep"},
                "message": "applied", "involvedObject": {"kind": "Pod", "name": "p"}})
        )),
    ];
    let strategy = (patch, any::<bool>(), damage());
    runner()
        .run(&strategy, |((ct, body), as_yaml, d)| {
            let text = if as_yaml && ct == "application/apply-patch+yaml" {
                serde_yaml_ng::to_string(&body).unwrap().into_bytes()
            } else {
                serde_json::to_vec(&body).unwrap()
            };
            let body = apply_damage(text, &d);
            let path = format!("{EVENTS}/keep?fieldManager=fuzz&force=true");
            let r = f.send("PATCH", &path, ct, body);
            check_answer(&r, &[200, 201])
        })
        .unwrap();
    f.still_serves("keep");
}

/// Fuzz target of the delete-options decoder (JSON and YAML) on a missing event: the body is
/// decoded before the event is looked up.
#[test]
fn fuzz_delete_options_bodies() {
    let f = Fuzzed::start();
    seed_event(&f);
    let options = json!({"kind": "DeleteOptions", "apiVersion": "v1",
        "gracePeriodSeconds": 0, "propagationPolicy": "Background", "dryRun": ["All"]});
    let strategy = (any::<bool>(), damage());
    runner()
        .run(&strategy, |(yaml, d)| {
            let (ct, text) = if yaml {
                (
                    "application/yaml",
                    serde_yaml_ng::to_string(&options).unwrap().into_bytes(),
                )
            } else {
                ("application/json", serde_json::to_vec(&options).unwrap())
            };
            let r = f.send(
                "DELETE",
                &format!("{EVENTS}/missing"),
                ct,
                apply_damage(text, &d),
            );
            check_answer(&r, &[])
        })
        .unwrap();
    f.still_serves("keep");
}
