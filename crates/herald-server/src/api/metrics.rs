//! Prometheus metrics of the API: requests by verb and code, open watches, requests in
//! flight and those turned away at the inflight limits, open connections and those over the
//! connection bound or closed by a timeout, storage write latency, and writes refused by
//! [admission](super::admission) plugins.

use std::sync::Arc;
use std::sync::atomic::AtomicI64;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, header};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Labels of `herald_apiserver_requests_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`,
    /// or the lower-cased HTTP method for other paths.
    pub verb: &'static str,
    /// The HTTP status code.
    pub code: u16,
}

/// Labels of `herald_apiserver_current_inflight_requests` and
/// `herald_apiserver_dropped_requests_total` (kube-apiserver's names and label).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct InflightLabels {
    /// `readOnly` (GET, HEAD, OPTIONS) or `mutating` (every other method).
    pub request_kind: &'static str,
}

/// Labels of `herald_apiserver_connections_over_limit_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OverLimitLabels {
    /// `health_only`: served the health endpoints only (one request, then closed);
    /// `closed`: closed at once (the health-only connections were taken too).
    pub outcome: &'static str,
}

/// Labels of `herald_apiserver_connections_timed_out_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TimedOutLabels {
    /// `header`: a request's headers (or the first request of a connection) did not arrive
    /// in time; `idle`: a kept-alive connection waited too long for its next request;
    /// `handshake`: the connection's handshake did not finish in time.
    pub phase: &'static str,
}

/// Labels of `herald_apiserver_probe_lane_connections_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProbeLaneLabels {
    /// `probe`: a health probe, served on the probe lane; `handed_on`: anything else, moved
    /// to the API's runtime.
    pub outcome: &'static str,
}

/// Labels of `herald_apiserver_admission_rejections_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AdmissionRejectionLabels {
    /// The plugin that refused: `EventRateLimit`.
    pub plugin: &'static str,
    /// The plugin's limit that refused: `Server`, `Namespace`, `User` or `SourceAndObject`
    /// for EventRateLimit.
    pub limit_type: &'static str,
}

/// The counter family of admission refusals (cheap to clone; clones count together).
pub type AdmissionRejections = Family<AdmissionRejectionLabels, Counter>;

/// The server's metrics. The label sets are bounded (a fixed verb vocabulary × HTTP codes).
pub struct Metrics {
    registry: Registry,
    /// Requests by verb and code.
    pub requests: Family<RequestLabels, Counter>,
    /// Watches currently open.
    pub watches: Gauge<i64, AtomicI64>,
    /// Watches opened since start.
    pub watches_total: Counter,
    /// Seconds spent in storage writes (create/update/delete), as seen by the registry.
    pub write_seconds: Histogram,
    /// Requests being served that count against an inflight limit, by kind.
    pub inflight: Family<InflightLabels, Gauge<i64, AtomicI64>>,
    /// Requests answered 429 because their inflight limit was reached, by kind.
    pub dropped: Family<InflightLabels, Counter>,
    /// Connections open (health-only connections over the bound included).
    pub connections: Gauge<i64, AtomicI64>,
    /// Connections accepted while the connection bound was reached, by what became of them.
    pub connections_over_limit: Family<OverLimitLabels, Counter>,
    /// Connections closed by the header, idle or handshake timeout.
    pub connections_timed_out: Family<TimedOutLabels, Counter>,
    /// Connections the [probe lane](super::probe_lane) accepted, by where they were served.
    pub probe_lane_connections: Family<ProbeLaneLabels, Counter>,
    /// Writes refused by an admission plugin, by plugin and limit type: a write several
    /// limits refused counts once under each.
    pub admission_rejections: AdmissionRejections,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("herald");
        let requests = Family::<RequestLabels, Counter>::default();
        let watches = Gauge::<i64, AtomicI64>::default();
        let watches_total = Counter::default();
        let write_seconds = Histogram::new(exponential_buckets(0.0001, 2.0, 16));
        registry.register(
            "apiserver_requests",
            "API requests by verb and HTTP code",
            requests.clone(),
        );
        registry.register(
            "apiserver_watches",
            "Watch streams currently open",
            watches.clone(),
        );
        registry.register(
            "apiserver_watches_opened",
            "Watch streams opened",
            watches_total.clone(),
        );
        registry.register(
            "storage_write_duration_seconds",
            "Latency of durable storage writes",
            write_seconds.clone(),
        );
        let inflight = Family::<InflightLabels, Gauge<i64, AtomicI64>>::default();
        registry.register(
            "apiserver_current_inflight_requests",
            "Requests being served that count against --max-requests-inflight or --max-mutating-requests-inflight",
            inflight.clone(),
        );
        let dropped = Family::<InflightLabels, Counter>::default();
        registry.register(
            "apiserver_dropped_requests",
            "Requests answered 429 at an inflight limit",
            dropped.clone(),
        );
        let connections = Gauge::<i64, AtomicI64>::default();
        registry.register(
            "apiserver_open_connections",
            "HTTP connections open",
            connections.clone(),
        );
        let connections_over_limit = Family::<OverLimitLabels, Counter>::default();
        registry.register(
            "apiserver_connections_over_limit",
            "Connections accepted while --max-connections were open",
            connections_over_limit.clone(),
        );
        let connections_timed_out = Family::<TimedOutLabels, Counter>::default();
        registry.register(
            "apiserver_connections_timed_out",
            "Connections closed by the header, idle or handshake timeout",
            connections_timed_out.clone(),
        );
        let probe_lane_connections = Family::<ProbeLaneLabels, Counter>::default();
        registry.register(
            "apiserver_probe_lane_connections",
            "Connections accepted on the probe lane, by where they were served",
            probe_lane_connections.clone(),
        );
        let admission_rejections = AdmissionRejections::default();
        registry.register(
            "apiserver_admission_rejections",
            "Event writes refused (429) by an admission plugin, by plugin and limit type",
            admission_rejections.clone(),
        );
        Metrics {
            registry,
            requests,
            watches,
            watches_total,
            write_seconds,
            inflight,
            dropped,
            connections,
            connections_over_limit,
            connections_timed_out,
            probe_lane_connections,
            admission_rejections,
        }
    }
}

impl Metrics {
    /// Adds `metric` as `herald_<name>` (the server adds the storage backend's own metrics
    /// this way: the HTTP layer does not know the storage layer).
    pub fn with_metric(
        mut self,
        name: &str,
        help: &str,
        metric: impl prometheus_client::registry::Metric,
    ) -> Self {
        self.registry.register(name, help, metric);
        self
    }

    /// Adds `collector`, asked for its metrics at every scrape (their names get the
    /// `herald_` prefix): how parts outside the server (the `herald` binary's mirror) serve
    /// their metrics at `/metrics`.
    pub fn with_collector(mut self, collector: Arc<dyn Collector>) -> Self {
        self.registry
            .register_collector(Box::new(SharedCollector(collector)));
        self
    }

    /// The Prometheus text exposition of every metric.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        if prometheus_client::encoding::text::encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }
}

/// A collector shared with its owner, who keeps updating what it reports.
#[derive(Debug)]
struct SharedCollector(Arc<dyn Collector>);

impl Collector for SharedCollector {
    fn encode(
        &self,
        encoder: prometheus_client::encoding::DescriptorEncoder,
    ) -> Result<(), std::fmt::Error> {
        self.0.encode(encoder)
    }
}

/// Keeps the open-watch gauge up while a watch stream lives.
pub struct WatchGuard(Arc<Metrics>);

impl WatchGuard {
    /// Counts a new watch.
    pub fn new(m: Arc<Metrics>) -> Self {
        m.watches.inc();
        m.watches_total.inc();
        WatchGuard(m)
    }
}

impl Drop for WatchGuard {
    fn drop(&mut self) {
        self.0.watches.dec();
    }
}

/// The verb of a request, kube-style.
pub fn verb_of(method: &http::Method, path: &str, query: Option<&str>) -> &'static str {
    let is_events = path.contains("/events");
    if !is_events {
        return match *method {
            http::Method::GET => "get",
            http::Method::POST => "post",
            http::Method::PUT => "put",
            http::Method::PATCH => "patch",
            http::Method::DELETE => "delete",
            _ => "other",
        };
    }
    let collection = super::path::is_collection(path);
    let watch = super::path::is_watch(
        path,
        super::negotiate::query_value(query, "watch")
            .is_some_and(|v| crate::registry::options::parse_bool(&v)),
    );
    match (method.as_str(), collection) {
        ("GET", _) if watch => "watch",
        ("GET", true) => "list",
        ("GET", false) => "get",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "deletecollection",
        ("DELETE", false) => "delete",
        _ => "other",
    }
}

impl Metrics {
    /// Counts one answered request of `method` on `uri` with HTTP `code`
    /// ([`OutputLayer::counting`](crate::api::output::OutputLayer::counting) calls it for
    /// every request).
    pub fn count_request(&self, method: &http::Method, uri: &http::Uri, code: u16) {
        let verb = verb_of(method, uri.path(), uri.query());
        self.requests
            .get_or_create(&RequestLabels { verb, code })
            .inc();
    }
}

/// `GET /metrics`.
pub async fn metrics_handler(State(m): State<Arc<Metrics>>) -> Response {
    let mut resp = m.encode().into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    resp
}

#[cfg(test)]
mod tests {
    use super::verb_of;
    use http::Method;

    #[test]
    fn verbs_as_kube_names_them() {
        let ns = "/api/v1/namespaces/ns1/events";
        for (method, path, query, want) in [
            (Method::GET, ns, None, "list"),
            (Method::GET, ns, Some("watch=true"), "watch"),
            (Method::GET, ns, Some("wat%63h=True"), "watch"),
            (Method::GET, ns, Some("watch=false"), "list"),
            // An event named "events" is an object, not the collection.
            (
                Method::GET,
                "/api/v1/namespaces/ns1/events/events",
                Some("watch=1"),
                "get",
            ),
            (
                Method::GET,
                "/api/v1/namespaces/ns1/events/a.1",
                None,
                "get",
            ),
            // kube-apiserver ignores `watch` on one object's path.
            (
                Method::GET,
                "/api/v1/namespaces/ns1/events/a.1",
                Some("watch=1"),
                "get",
            ),
            (
                Method::GET,
                "/api/v1/watch/namespaces/ns1/events/a.1",
                None,
                "watch",
            ),
            (
                Method::GET,
                "/apis/events.k8s.io/v1/watch/events",
                None,
                "watch",
            ),
            (Method::POST, ns, None, "create"),
            (Method::DELETE, ns, None, "deletecollection"),
            (
                Method::DELETE,
                "/api/v1/namespaces/ns1/events/a.1",
                None,
                "delete",
            ),
            (Method::GET, "/api/v1", None, "get"),
        ] {
            assert_eq!(
                verb_of(&method, path, query),
                want,
                "{method} {path}?{query:?}"
            );
        }
    }
}
