//! Shared helpers of the events_* integration tests: a live server on 127.0.0.1, a raw HTTP
//! client, a watch-line reader and a kube client.

#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use herald_core::clock::FakeClock;
use herald_server::server::{Server, ServerOptions, StoreKind};
use herald_server::storage::HistoryOptions;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};

pub const TBL: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";

/// A guard on every network wait, so a broken server fails the test instead of hanging it.
pub const GUARD: Duration = Duration::from_secs(20);

pub fn fake_clock() -> Arc<FakeClock> {
    Arc::new(FakeClock::new("2026-11-22T00:00:00Z".parse().unwrap()))
}

pub async fn start(store: StoreKind, clock: Arc<FakeClock>) -> Server {
    start_with(store, clock, HistoryOptions::default()).await
}

pub async fn start_with(
    store: StoreKind,
    clock: Arc<FakeClock>,
    history: HistoryOptions,
) -> Server {
    let cfg = ServerOptions {
        store,
        listen: "127.0.0.1:0".parse().unwrap(),
        history,
        // Tests force sweeps with expire_due; the background one must not race them.
        sweep_interval: Duration::from_secs(3600),
        clock,
        ..ServerOptions::default()
    };
    Server::start(cfg).await.expect("server starts")
}

/// A SQLite server in `dir` whose unpaged lists are read `list_page_items` events a page, so
/// a few dozen events make a list of many pages; otherwise as [`start`] sets it up.
pub fn paged_sqlite(dir: &std::path::Path, list_page_items: usize) -> ServerOptions {
    ServerOptions {
        store: StoreKind::Sqlite {
            dir: dir.to_path_buf(),
        },
        listen: "127.0.0.1:0".parse().unwrap(),
        sweep_interval: Duration::from_secs(3600),
        clock: fake_clock(),
        registry: herald_server::registry::RegistryOptions {
            list_page_items,
            ..Default::default()
        },
        ..ServerOptions::default()
    }
}

/// Creates `n` core/v1 events `e.00000`… in `ns` with `reason`, through the registry.
pub async fn create_many(server: &Server, ns: &str, reason: &str, n: usize) {
    use herald_core::event::ApiGroup;
    use herald_server::registry::WriteOptions;
    for i in 0..n {
        let e = serde_json::from_value(core_event(&format!("e.{i:05}"), ns, reason)).unwrap();
        server
            .registry()
            .create(ApiGroup::Core, ns, e, &WriteOptions::default())
            .await
            .unwrap();
    }
}

pub async fn memory() -> (Server, Arc<FakeClock>) {
    let clock = fake_clock();
    (start(StoreKind::Memory, clock.clone()).await, clock)
}

pub fn kube_client(server: &Server) -> kube::Client {
    let config = kube::Config::new(server.url().parse().unwrap());
    kube::Client::try_from(config).unwrap()
}

#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: http::HeaderMap,
    pub body: Bytes,
}

impl Resp {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
    /// Asserts a Status failure with this code and reason; returns the Status.
    pub fn status_failure(&self, code: u16, reason: &str) -> Value {
        assert_eq!(self.status, code, "{}", self.text());
        let v = self.json();
        assert_eq!(v["kind"], "Status", "{v}");
        assert_eq!(v["status"], "Failure", "{v}");
        assert_eq!(v["code"], code, "{v}");
        assert_eq!(v["reason"], reason, "{v}");
        v
    }
}

pub struct Http {
    base: String,
    client: Client<HttpConnector, Full<Bytes>>,
}

impl Http {
    pub fn new(server: &Server) -> Self {
        Http {
            base: server.url(),
            client: Client::builder(TokioExecutor::new()).build_http(),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    fn request(
        &self,
        method: &str,
        path: &str,
        ct: Option<&str>,
        accept: Option<&str>,
        body: impl Into<Bytes>,
    ) -> http::Request<Full<Bytes>> {
        let mut b = http::Request::builder().method(method).uri(self.url(path));
        if let Some(ct) = ct {
            b = b.header(http::header::CONTENT_TYPE, ct);
        }
        if let Some(a) = accept {
            b = b.header(http::header::ACCEPT, a);
        }
        b.body(Full::new(body.into())).unwrap()
    }

    pub async fn send(
        &self,
        method: &str,
        path: &str,
        ct: Option<&str>,
        accept: Option<&str>,
        body: impl Into<Bytes>,
    ) -> Resp {
        let req = self.request(method, path, ct, accept, body);
        self.exchange(req).await
    }

    async fn exchange(&self, req: http::Request<Full<Bytes>>) -> Resp {
        let resp = tokio::time::timeout(GUARD, self.client.request(req))
            .await
            .expect("response in time")
            .expect("request sent");
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let body = tokio::time::timeout(GUARD, resp.into_body().collect())
            .await
            .expect("body in time")
            .unwrap()
            .to_bytes();
        Resp {
            status,
            headers,
            body,
        }
    }

    /// GET with extra request headers (user agent, audit ID, …).
    pub async fn get_with(&self, path: &str, headers: &[(&str, &str)]) -> Resp {
        let mut req = self.request("GET", path, None, None, Bytes::new());
        for (k, v) in headers {
            req.headers_mut().insert(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                http::HeaderValue::from_str(v).unwrap(),
            );
        }
        self.exchange(req).await
    }

    pub async fn get(&self, path: &str) -> Resp {
        self.send("GET", path, None, None, Bytes::new()).await
    }

    pub async fn get_accept(&self, path: &str, accept: &str) -> Resp {
        self.send("GET", path, None, Some(accept), Bytes::new())
            .await
    }

    pub async fn post(&self, path: &str, body: &Value) -> Resp {
        self.send(
            "POST",
            path,
            Some("application/json"),
            None,
            serde_json::to_vec(body).unwrap(),
        )
        .await
    }

    /// POSTs [`core_event`]`(name, ns, reason)` to its namespace and asserts it was created.
    pub async fn create_core(&self, ns: &str, name: &str, reason: &str) -> Resp {
        let r = self
            .post(&core_path(ns), &core_event(name, ns, reason))
            .await;
        assert_eq!(r.status, 201, "creating {ns}/{name}: {}", r.text());
        r
    }

    pub async fn put(&self, path: &str, body: &Value) -> Resp {
        self.send(
            "PUT",
            path,
            Some("application/json"),
            None,
            serde_json::to_vec(body).unwrap(),
        )
        .await
    }

    pub async fn patch(&self, path: &str, ct: &str, body: &Value) -> Resp {
        self.send(
            "PATCH",
            path,
            Some(ct),
            None,
            serde_json::to_vec(body).unwrap(),
        )
        .await
    }

    pub async fn delete(&self, path: &str, body: &str) -> Resp {
        self.send(
            "DELETE",
            path,
            Some("application/json"),
            None,
            body.to_string(),
        )
        .await
    }

    /// Opens a watch; returns the response head and a line reader.
    pub async fn watch(&self, path: &str, accept: Option<&str>) -> Watch {
        let req = self.request("GET", path, None, accept, Bytes::new());
        self.open_watch(req).await
    }

    /// Opens a watch with extra request headers.
    pub async fn watch_with(&self, path: &str, headers: &[(&str, &str)]) -> Watch {
        let mut req = self.request("GET", path, None, None, Bytes::new());
        for (k, v) in headers {
            req.headers_mut().insert(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                http::HeaderValue::from_str(v).unwrap(),
            );
        }
        self.open_watch(req).await
    }

    async fn open_watch(&self, req: http::Request<Full<Bytes>>) -> Watch {
        let resp = tokio::time::timeout(GUARD, self.client.request(req))
            .await
            .expect("watch in time")
            .expect("watch sent");
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        Watch {
            status,
            headers,
            body: resp.into_body(),
            buf: Vec::new(),
        }
    }
}

pub struct Watch {
    pub status: u16,
    pub headers: http::HeaderMap,
    body: hyper::body::Incoming,
    buf: Vec<u8>,
}

impl Watch {
    /// The next message of the stream, whatever its framing: `len_of` says how many bytes
    /// the first complete message at the front of the buffer takes (`None`: not complete
    /// yet). `None` when the stream ended.
    pub async fn next_message(
        &mut self,
        len_of: impl Fn(&[u8]) -> Option<usize>,
    ) -> Option<Vec<u8>> {
        loop {
            if let Some(n) = len_of(&self.buf) {
                return Some(self.buf.drain(..n).collect());
            }
            let frame = tokio::time::timeout(GUARD, self.body.frame())
                .await
                .expect("a watch message in time");
            match frame {
                None => {
                    assert!(self.buf.is_empty(), "stream ended mid-message");
                    return None;
                }
                Some(Ok(f)) => {
                    if let Ok(data) = f.into_data() {
                        self.buf.extend_from_slice(&data);
                    }
                }
                Some(Err(e)) => panic!("watch stream failed: {e}"),
            }
        }
    }

    /// The next watch line as JSON; `None` when the stream ended.
    pub async fn next(&mut self) -> Option<Value> {
        let line = self
            .next_message(|buf| buf.iter().position(|b| *b == b'\n').map(|i| i + 1))
            .await?;
        Some(serde_json::from_slice(&line[..line.len() - 1]).expect("a JSON watch line"))
    }

    /// The next line, which must exist: `(type, object)`.
    pub async fn expect(&mut self) -> (String, Value) {
        let v = self.next().await.expect("another watch event");
        (
            v["type"].as_str().unwrap_or("").to_string(),
            v["object"].clone(),
        )
    }
}

/// A minimal valid core/v1 event body.
pub fn core_event(name: &str, ns: &str, reason: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": name, "namespace": ns},
        "involvedObject": {"kind": "Pod", "name": format!("pod-{name}"), "namespace": ns, "apiVersion": "v1", "uid": "u-1"},
        "reason": reason, "message": format!("message of {name}"), "type": "Normal",
        "source": {"component": "kubelet", "host": "node-1"},
        "firstTimestamp": "2026-11-21T23:59:00Z", "lastTimestamp": "2026-11-21T23:59:30Z", "count": 1
    })
}

/// A minimal valid events.k8s.io/v1 event body.
pub fn v1_event(name: &str, ns: &str, reason: &str) -> Value {
    json!({
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": name, "namespace": ns},
        "eventTime": "2026-11-21T23:59:00.123456Z",
        "regarding": {"kind": "Pod", "name": format!("pod-{name}"), "namespace": ns, "apiVersion": "v1"},
        "reason": reason, "note": format!("note of {name}"), "type": "Warning",
        "action": "Pulling", "reportingController": "example.com/ctl", "reportingInstance": "ctl-1"
    })
}

pub fn core_path(ns: &str) -> String {
    format!("/api/v1/namespaces/{ns}/events")
}

pub fn v1_path(ns: &str) -> String {
    format!("/apis/events.k8s.io/v1/namespaces/{ns}/events")
}

pub fn rv(v: &Value) -> u64 {
    v["metadata"]["resourceVersion"]
        .as_str()
        .expect("a resourceVersion")
        .parse()
        .expect("numeric RV")
}
