//! `/version` and API discovery: `/api`, `/apis`, `/api/v1`, `/apis/events.k8s.io[/v1]`.
//!
//! Herald serves exactly one resource, `events`, in two groups: the core group (`/api/v1`)
//! and `events.k8s.io/v1`, both with shortName `ev` like a real cluster (so kubectl prints
//! its "short name ev could also match lower priority resource" warning there too). The
//! kinds events are about (pods, deployments, …) are listed too, without verbs, so kubectl
//! can resolve `--for pod/NAME` (see [`super::referenced`]).
//!
//! `/api` and `/apis` come in two formats. kubectl asks for aggregated discovery
//! (`APIGroupDiscoveryList`) and only decodes it when the response Content-Type carries the
//! exact `g`/`v`/`as` parameters; kube-rs' `Discovery::run()` asks for plain JSON and gets the
//! legacy `APIVersions` / `APIGroupList`, then fetches the per-version `APIResourceList`s.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, HeaderValue, header};
use serde::Serialize;
use serde_json::{Value, json};

use super::ApiState;
use super::error::StatusError;
use super::negotiate::{DiscoveryFormat, Negotiated};
use super::referenced::{self, ReferencedKind};

/// The verbs both event resources support, in the order kube-apiserver lists them.
pub const EVENT_VERBS: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// The storage version hash kube-apiserver publishes for events in both groups (both are
/// stored as core `v1/Event`): base64 of the first 8 bytes of sha256(`/v1/Event`).
pub const EVENTS_STORAGE_VERSION_HASH: &str = "r2yiGXH7wu8=";

use herald_wire::schema::{EVENTS_GROUP, GroupVersion};

/// What `/version` reports. `minor` matters: the Google Cloud SDK kubectl dispatcher runs the
/// kubectl binary whose minor matches it, so Herald reports a minor that binary exists for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VersionInfo {
    /// Major version, `"1"`.
    pub major: String,
    /// Minor version, `"32"`.
    pub minor: String,
    /// `v1.32.4+herald`.
    pub git_version: String,
    /// The Herald version that built this server.
    pub git_commit: String,
    /// Always `clean`.
    pub git_tree_state: String,
    /// Empty: Herald builds are reproducible and carry no build date.
    pub build_date: String,
    /// The toolchain that built the server (there is no Go in Herald).
    pub go_version: String,
    /// `rustc`.
    pub compiler: String,
    /// `os/arch`, e.g. `linux/amd64`.
    pub platform: String,
}

impl Default for VersionInfo {
    fn default() -> Self {
        let arch = match std::env::consts::ARCH {
            "x86_64" => "amd64",
            "aarch64" => "arm64",
            other => other,
        };
        Self {
            major: "1".into(),
            minor: "32".into(),
            git_version: "v1.32.4+herald".into(),
            git_commit: format!("herald-{}", env!("CARGO_PKG_VERSION")),
            git_tree_state: "clean".into(),
            build_date: String::new(),
            go_version: String::new(),
            compiler: "rustc".into(),
            platform: format!("{}/{}", std::env::consts::OS, arch),
        }
    }
}

/// The legacy `APIResourceList` for one of Herald's event group versions: `events`, plus
/// (in core/v1) the [referenced kinds](super::referenced) without verbs.
pub fn api_resource_list(gv: GroupVersion) -> Value {
    let mut resources = vec![json!({
        "name": "events",
        "singularName": "event",
        "namespaced": true,
        "kind": "Event",
        "verbs": EVENT_VERBS,
        "shortNames": ["ev"],
        "storageVersionHash": EVENTS_STORAGE_VERSION_HASH,
    })];
    resources.extend(referenced::kinds_of(gv.group, gv.version).map(ReferencedKind::api_resource));
    resource_list(gv.group, gv.version, resources)
}

fn resource_list(group: &str, version: &str, resources: Vec<Value>) -> Value {
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    let mut v = json!({
        "kind": "APIResourceList",
        "groupVersion": gv,
        "resources": resources,
    });
    // Like kube-apiserver: the core list has no apiVersion, group lists say `v1`.
    if !group.is_empty() {
        v["apiVersion"] = "v1".into();
    }
    v
}

/// The legacy `APIResourceList` of a group Herald lists only for its referenced kinds
/// (`apps/v1`, `batch/v1`, …).
pub fn referenced_resource_list(group: &str, version: &str) -> Value {
    resource_list(
        group,
        version,
        referenced::kinds_of(group, version)
            .map(ReferencedKind::api_resource)
            .collect(),
    )
}

fn group_version_entry() -> Value {
    json!({"groupVersion": "events.k8s.io/v1", "version": "v1"})
}

fn group_entry(group: &str, version: &str) -> Value {
    let gv = json!({"groupVersion": format!("{group}/{version}"), "version": version});
    json!({"name": group, "versions": [gv.clone()], "preferredVersion": gv})
}

/// The legacy `APIGroup` document of a referenced kinds' group.
pub fn referenced_api_group(group: &str, version: &str) -> Value {
    let mut v = group_entry(group, version);
    v["kind"] = "APIGroup".into();
    v["apiVersion"] = "v1".into();
    v
}

/// The legacy `APIGroup` document for `events.k8s.io`.
pub fn events_api_group() -> Value {
    json!({
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": EVENTS_GROUP,
        "versions": [group_version_entry()],
        "preferredVersion": group_version_entry(),
    })
}

/// One resource of a [review group](REVIEW_GROUPS): its plural, singular and kind.
pub type ReviewResource = (&'static str, &'static str, &'static str);

/// The groups of the self-review endpoints kubectl's `auth can-i` and `auth whoami` call
/// (served by `api::auth::reviews`): cluster-scoped resources with the one verb `create`,
/// as kube-apiserver lists them.
pub const REVIEW_GROUPS: &[(&str, &str, &[ReviewResource])] = &[
    (
        "authentication.k8s.io",
        "v1",
        &[(
            "selfsubjectreviews",
            "selfsubjectreview",
            "SelfSubjectReview",
        )],
    ),
    (
        "authorization.k8s.io",
        "v1",
        &[
            (
                "selfsubjectaccessreviews",
                "selfsubjectaccessreview",
                "SelfSubjectAccessReview",
            ),
            (
                "selfsubjectrulesreviews",
                "selfsubjectrulesreview",
                "SelfSubjectRulesReview",
            ),
        ],
    ),
];

/// The legacy `APIResourceList` of a review group.
pub fn review_resource_list(group: &str, version: &str, resources: &[ReviewResource]) -> Value {
    resource_list(
        group,
        version,
        resources
            .iter()
            .map(|(name, singular, kind)| {
                json!({"name": name, "singularName": singular, "namespaced": false,
                       "kind": kind, "verbs": ["create"]})
            })
            .collect(),
    )
}

fn review_aggregated(group: &str, version: &str, resources: &[ReviewResource]) -> Value {
    aggregated_group(
        group,
        version,
        resources
            .iter()
            .map(|(name, singular, kind)| {
                json!({"resource": name,
                       "responseKind": {"group": group, "version": version, "kind": kind},
                       "scope": "Cluster", "singularResource": singular, "verbs": ["create"]})
            })
            .collect(),
    )
}

/// The legacy `APIGroupList` for `/apis`.
pub fn api_group_list() -> Value {
    json!({
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": std::iter::once(group_entry(EVENTS_GROUP, "v1"))
            .chain(referenced::groups().into_iter().map(|(g, v)| group_entry(g, v)))
            .chain(REVIEW_GROUPS.iter().map(|(g, v, _)| group_entry(g, v)))
            .collect::<Vec<_>>(),
    })
}

/// The legacy `APIVersions` for `/api`; `server_address` is the `host:port` the client used.
pub fn api_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{
            "clientCIDR": "0.0.0.0/0",
            "serverAddress": server_address,
        }],
    })
}

fn aggregated_group(group: &str, version: &str, resources: Vec<Value>) -> Value {
    let metadata = if group.is_empty() {
        json!({"creationTimestamp": null})
    } else {
        json!({"name": group, "creationTimestamp": null})
    };
    json!({
        "metadata": metadata,
        "versions": [{
            "version": version,
            "resources": resources,
            "freshness": "Current",
        }],
    })
}

/// The aggregated `APIGroupDiscoveryList` for `/api` (`gv` = core/v1) or `/apis`
/// (`gv` = events.k8s.io/v1, followed by the referenced kinds' groups) in the given
/// aggregated format.
pub fn aggregated_discovery(gv: GroupVersion, format: DiscoveryFormat) -> Value {
    let mut resources = vec![json!({
        "resource": "events",
        "responseKind": {"group": gv.group, "version": gv.version, "kind": "Event"},
        "scope": "Namespaced",
        "singularResource": "event",
        "verbs": EVENT_VERBS,
        "shortNames": ["ev"],
    })];
    resources.extend(
        referenced::kinds_of(gv.group, gv.version).map(ReferencedKind::aggregated_resource),
    );
    let mut items = vec![aggregated_group(gv.group, gv.version, resources)];
    if !gv.group.is_empty() {
        for (g, v) in referenced::groups() {
            let resources = referenced::kinds_of(g, v)
                .map(ReferencedKind::aggregated_resource)
                .collect();
            items.push(aggregated_group(g, v, resources));
        }
        for (g, v, resources) in REVIEW_GROUPS {
            items.push(review_aggregated(g, v, resources));
        }
    }
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": format.api_version().unwrap_or("apidiscovery.k8s.io/v2"),
        "metadata": {},
        "items": items,
    })
}

/// A JSON response with the given Content-Type.
pub(crate) fn json_response(body: &Value, content_type: &'static str) -> Response {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    let mut resp = bytes.into_response();
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp
}

fn discovery_response(
    neg: &Negotiated,
    gv: GroupVersion,
    legacy: impl FnOnce() -> Value,
) -> Result<Response, StatusError> {
    let format = neg.discovery()?;
    let mut resp = match format {
        DiscoveryFormat::Legacy => json_response(&legacy(), format.content_type()),
        _ => json_response(&aggregated_discovery(gv, format), format.content_type()),
    };
    resp.headers_mut()
        .insert(header::VARY, HeaderValue::from_static("Accept"));
    Ok(resp)
}

/// `GET /version`.
pub async fn version(State(state): State<ApiState>) -> Response {
    let body = serde_json::to_value(&state.version).unwrap_or_default();
    json_response(&body, "application/json")
}

/// `GET /api`.
pub async fn api(neg: Negotiated, headers: HeaderMap) -> Result<Response, StatusError> {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("")
        .to_string();
    discovery_response(&neg, GroupVersion::CORE_V1, || api_versions(&host))
}

/// `GET /apis`.
pub async fn apis(neg: Negotiated) -> Result<Response, StatusError> {
    discovery_response(&neg, GroupVersion::EVENTS_V1, api_group_list)
}

/// `GET /api/v1`.
pub async fn core_v1() -> Response {
    json_response(
        &api_resource_list(GroupVersion::CORE_V1),
        "application/json",
    )
}

/// `GET /apis/events.k8s.io`.
pub async fn events_group() -> Response {
    json_response(&events_api_group(), "application/json")
}

/// `GET /apis/{group}` for a referenced kinds' group.
pub fn referenced_group(group: &'static str, version: &'static str) -> Response {
    json_response(&referenced_api_group(group, version), "application/json")
}

/// `GET /apis/{group}/{version}` for a referenced kinds' group.
pub fn referenced_group_version(group: &'static str, version: &'static str) -> Response {
    json_response(
        &referenced_resource_list(group, version),
        "application/json",
    )
}

/// `GET /apis/events.k8s.io/v1`.
pub async fn events_v1() -> Response {
    json_response(
        &api_resource_list(GroupVersion::EVENTS_V1),
        "application/json",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_reports_minor_32() {
        let v = serde_json::to_value(VersionInfo::default()).unwrap();
        assert_eq!(v["major"], "1");
        assert_eq!(v["minor"], "32");
        assert!(v["gitVersion"].as_str().unwrap().starts_with("v1.32."));
        assert!(v.get("gitTreeState").is_some());
    }

    #[test]
    fn resource_lists_match_the_real_server() {
        let core = api_resource_list(GroupVersion::CORE_V1);
        assert_eq!(core["groupVersion"], "v1");
        assert!(core.get("apiVersion").is_none());
        let r = &core["resources"][0];
        assert_eq!(r["name"], "events");
        assert_eq!(r["singularName"], "event");
        assert_eq!(r["namespaced"], true);
        assert_eq!(r["kind"], "Event");
        assert_eq!(r["shortNames"], json!(["ev"]));
        assert_eq!(r["verbs"].as_array().unwrap().len(), 8);
        assert_eq!(r["storageVersionHash"], "r2yiGXH7wu8=");
        let ev = api_resource_list(GroupVersion::EVENTS_V1);
        assert_eq!(ev["groupVersion"], "events.k8s.io/v1");
        assert_eq!(ev["apiVersion"], "v1");
        assert_eq!(ev["resources"][0]["storageVersionHash"], "r2yiGXH7wu8=");
    }

    #[test]
    fn aggregated_shapes() {
        let core = aggregated_discovery(GroupVersion::CORE_V1, DiscoveryFormat::AggregatedV2);
        assert_eq!(core["apiVersion"], "apidiscovery.k8s.io/v2");
        assert!(core["items"][0]["metadata"].get("name").is_none());
        let res = &core["items"][0]["versions"][0]["resources"][0];
        assert_eq!(
            res["responseKind"],
            json!({"group":"","version":"v1","kind":"Event"})
        );
        assert_eq!(res["scope"], "Namespaced");
        let ev = aggregated_discovery(GroupVersion::EVENTS_V1, DiscoveryFormat::AggregatedV2Beta1);
        assert_eq!(ev["apiVersion"], "apidiscovery.k8s.io/v2beta1");
        assert_eq!(ev["items"][0]["metadata"]["name"], "events.k8s.io");
        assert_eq!(ev["items"][0]["versions"][0]["freshness"], "Current");
    }
}
