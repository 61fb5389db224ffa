//! What a request asks to do, in authorization's terms: kube-apiserver's `RequestInfo`,
//! derived from the HTTP method, the path and the query.
//!
//! - `/api/v1/…` and `/apis/{group}/{version}/…` with a resource are **resource requests**:
//!   `GET` of a named object is `get`, of a collection `list`, or `watch` with `watch=true`
//!   (or `1`) or under the `/watch/` path prefix; `POST` is `create`, `PUT` `update`,
//!   `PATCH` `patch`, `DELETE` of a named object `delete` and of a collection
//!   `deletecollection`. A list or watch with the field selector `metadata.name=X` is about
//!   the object `X` (so `resourceNames` rules apply to it, as upstream).
//! - Anything else (`/version`, `/healthz`, `/metrics`, `/api`, `/apis/events.k8s.io`, …) is
//!   a **non-resource request** whose verb is the lower-cased method (`get`, `post`, …).
//!
//! ```
//! use herald_server::api::auth::attributes::Attributes;
//! let a = Attributes::from_request(&http::Method::GET, "/api/v1/namespaces/prod/events", Some("watch=true"));
//! assert_eq!(a.verb, "watch");
//! assert_eq!(a.namespace, "prod");
//! assert_eq!(a.resource.as_deref(), Some("events"));
//! ```

use http::Method;

/// A request as authorization sees it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Attributes {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`
    /// (resource requests) or the lower-cased HTTP method (non-resource requests).
    pub verb: String,
    /// The resource (`events`); `None` for a non-resource request.
    pub resource: Option<String>,
    /// The subresource (`status`), empty when none.
    pub subresource: String,
    /// The API group (empty for core); empty for non-resource requests.
    pub api_group: String,
    /// The API version (`v1`).
    pub api_version: String,
    /// The namespace, empty for cluster-scoped requests and non-resource requests.
    pub namespace: String,
    /// The object's name, empty for collections.
    pub name: String,
    /// The request path.
    pub path: String,
}

impl Attributes {
    /// Whether this is a resource request.
    pub fn is_resource_request(&self) -> bool {
        self.resource.is_some()
    }

    /// The attributes of a request with `method`, `path` and raw `query`.
    pub fn from_request(method: &Method, path: &str, query: Option<&str>) -> Attributes {
        let non_resource = Attributes {
            verb: method.as_str().to_ascii_lowercase(),
            path: path.to_string(),
            ..Attributes::default()
        };
        let mut parts: Vec<&str> = path.trim_matches('/').split('/').collect();
        if parts.len() < 3 {
            return non_resource;
        }
        let mut a = Attributes {
            path: path.to_string(),
            ..Attributes::default()
        };
        match parts[0] {
            "api" => parts.drain(..1),
            "apis" if parts.len() >= 4 => {
                a.api_group = parts[1].to_string();
                parts.drain(..2)
            }
            _ => return non_resource,
        };
        a.api_version = parts[0].to_string();
        parts.remove(0);
        let via_path = parts[0] == "watch" || parts[0] == "proxy";
        if via_path {
            if parts.len() < 2 {
                return non_resource;
            }
            a.verb = parts.remove(0).to_string();
        } else {
            a.verb = match *method {
                Method::POST => "create",
                Method::GET | Method::HEAD => "get",
                Method::PUT => "update",
                Method::PATCH => "patch",
                Method::DELETE => "delete",
                _ => "",
            }
            .to_string();
        }
        if parts[0] == "namespaces"
            && let Some(ns) = parts.get(1)
        {
            a.namespace = ns.to_string();
            if parts.len() > 2 && !matches!(parts[2], "status" | "finalize") {
                parts.drain(..2);
            }
        }
        if parts.len() >= 3 && a.verb != "proxy" {
            a.subresource = parts[2].to_string();
        }
        if parts.len() >= 2 {
            a.name = parts[1].to_string();
        }
        a.resource = Some(parts[0].to_string());
        if a.name.is_empty() && a.verb == "get" {
            let mut watch = false;
            for (k, v) in form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
                match &*k {
                    "watch" => watch = matches!(&*v, "true" | "1" | "True" | "TRUE" | "t" | "T"),
                    "fieldSelector" => {
                        if let Some(name) = exact_name(&v) {
                            a.name = name;
                        }
                    }
                    _ => {}
                }
            }
            a.verb = if watch { "watch" } else { "list" }.to_string();
        }
        if a.name.is_empty() && a.verb == "delete" {
            a.verb = "deletecollection".to_string();
        }
        a
    }
}

/// The name a field selector requires exactly (`metadata.name=x` or `metadata.name==x`,
/// alone or among other terms), if it is a valid path segment.
fn exact_name(selector: &str) -> Option<String> {
    selector.split(',').find_map(|term| {
        let (k, v) = term
            .split_once("==")
            .or_else(|| term.split_once('='))
            .filter(|(k, _)| !k.ends_with('!'))?;
        (k.trim() == "metadata.name"
            && !v.is_empty()
            && v != "."
            && v != ".."
            && !v.contains('/')
            && !v.contains('%'))
        .then(|| v.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(method: Method, path: &str, query: Option<&str>) -> (String, String, String, String) {
        let a = Attributes::from_request(&method, path, query);
        (a.verb, a.resource.unwrap_or_default(), a.namespace, a.name)
    }

    fn t(v: &str, r: &str, ns: &str, n: &str) -> (String, String, String, String) {
        (v.into(), r.into(), ns.into(), n.into())
    }

    #[test]
    fn verbs_like_request_info() {
        assert_eq!(
            at(Method::GET, "/api/v1/events", None),
            t("list", "events", "", "")
        );
        assert_eq!(
            at(Method::GET, "/api/v1/namespaces/a/events/x", None),
            t("get", "events", "a", "x")
        );
        assert_eq!(
            at(
                Method::GET,
                "/apis/events.k8s.io/v1/namespaces/a/events",
                Some("watch=1")
            ),
            t("watch", "events", "a", "")
        );
        assert_eq!(
            at(Method::GET, "/api/v1/watch/namespaces/a/events", None),
            t("watch", "events", "a", "")
        );
        assert_eq!(
            at(
                Method::GET,
                "/api/v1/namespaces/a/events",
                Some("fieldSelector=metadata.name%3Dx")
            ),
            t("list", "events", "a", "x")
        );
        assert_eq!(
            at(Method::POST, "/api/v1/namespaces/a/events", None),
            t("create", "events", "a", "")
        );
        assert_eq!(
            at(Method::PUT, "/api/v1/namespaces/a/events/x", None),
            t("update", "events", "a", "x")
        );
        assert_eq!(
            at(Method::PATCH, "/api/v1/namespaces/a/events/x", None),
            t("patch", "events", "a", "x")
        );
        assert_eq!(
            at(Method::DELETE, "/api/v1/namespaces/a/events/x", None),
            t("delete", "events", "a", "x")
        );
        assert_eq!(
            at(Method::DELETE, "/api/v1/namespaces/a/events", None),
            t("deletecollection", "events", "a", "")
        );
        assert_eq!(
            at(Method::GET, "/api/v1/namespaces/a", None),
            t("get", "namespaces", "a", "a")
        );
        let a = Attributes::from_request(&Method::GET, "/apis/events.k8s.io/v1/events", None);
        assert_eq!(a.api_group, "events.k8s.io");
        assert_eq!(a.api_version, "v1");
    }

    #[test]
    fn non_resource_paths() {
        for p in [
            "/version",
            "/healthz",
            "/metrics",
            "/api",
            "/api/v1",
            "/apis/events.k8s.io",
            "/apis/events.k8s.io/v1",
            "/openapi/v2",
            "/readyz/ping",
        ] {
            let a = Attributes::from_request(&Method::GET, p, None);
            assert!(!a.is_resource_request(), "{p}");
            assert_eq!(a.verb, "get");
            assert_eq!(a.path, p);
        }
        assert_eq!(
            Attributes::from_request(&Method::POST, "/metrics", None).verb,
            "post"
        );
    }
}
