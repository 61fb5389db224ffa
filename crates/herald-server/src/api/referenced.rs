//! The kinds events are usually about (pods, nodes, deployments, …), listed in discovery so
//! that kubectl can resolve them, and refused on their own paths.
//!
//! `kubectl events --for pod/web-1` turns `pod/web-1` into the `involvedObject` field
//! selector through its discovery-backed RESTMapper: a kind the server does not advertise
//! fails with `the server doesn't have a resource type "pod"`. Herald stores only events, so
//! these resources are advertised with **no verbs**: kubectl's RESTMapper and short-name
//! expander still resolve them, while `kubectl api-resources` (and tools that look for
//! capabilities in discovery) skip verbless resources, as they skip kube-apiserver's own. They
//! carry no categories (so `kubectl get all` does not reach them), and every request on their
//! paths is a 405 `MethodNotAllowed` `Status` whose message says why, which is what kubectl
//! prints for `kubectl get pods`. The groups (`apps/v1`, …) do show in `kubectl api-versions`.

use axum::Router;
use axum::routing::any;
use herald_core::status::ApiError;
use serde_json::{Value, json};

use super::error::StatusError;

/// One advertised resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReferencedKind {
    /// API group; empty for core.
    pub group: &'static str,
    /// Version.
    pub version: &'static str,
    /// Plural resource name.
    pub resource: &'static str,
    /// Singular resource name.
    pub singular: &'static str,
    /// Kind.
    pub kind: &'static str,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
    /// kubectl short names, as a real cluster publishes them.
    pub short_names: &'static [&'static str],
}

const fn kind(
    group: &'static str,
    version: &'static str,
    resource: &'static str,
    singular: &'static str,
    kind: &'static str,
    namespaced: bool,
    short_names: &'static [&'static str],
) -> ReferencedKind {
    ReferencedKind {
        group,
        version,
        resource,
        singular,
        kind,
        namespaced,
        short_names,
    }
}

/// The advertised kinds: the built-in kinds Kubernetes' own controllers write events about.
pub const REFERENCED_KINDS: &[ReferencedKind] = &[
    kind(
        "",
        "v1",
        "configmaps",
        "configmap",
        "ConfigMap",
        true,
        &["cm"],
    ),
    kind(
        "",
        "v1",
        "endpoints",
        "endpoints",
        "Endpoints",
        true,
        &["ep"],
    ),
    kind(
        "",
        "v1",
        "namespaces",
        "namespace",
        "Namespace",
        false,
        &["ns"],
    ),
    kind("", "v1", "nodes", "node", "Node", false, &["no"]),
    kind(
        "",
        "v1",
        "persistentvolumeclaims",
        "persistentvolumeclaim",
        "PersistentVolumeClaim",
        true,
        &["pvc"],
    ),
    kind(
        "",
        "v1",
        "persistentvolumes",
        "persistentvolume",
        "PersistentVolume",
        false,
        &["pv"],
    ),
    kind("", "v1", "pods", "pod", "Pod", true, &["po"]),
    kind(
        "",
        "v1",
        "replicationcontrollers",
        "replicationcontroller",
        "ReplicationController",
        true,
        &["rc"],
    ),
    kind("", "v1", "secrets", "secret", "Secret", true, &[]),
    kind(
        "",
        "v1",
        "serviceaccounts",
        "serviceaccount",
        "ServiceAccount",
        true,
        &["sa"],
    ),
    kind("", "v1", "services", "service", "Service", true, &["svc"]),
    kind(
        "apps",
        "v1",
        "daemonsets",
        "daemonset",
        "DaemonSet",
        true,
        &["ds"],
    ),
    kind(
        "apps",
        "v1",
        "deployments",
        "deployment",
        "Deployment",
        true,
        &["deploy"],
    ),
    kind(
        "apps",
        "v1",
        "replicasets",
        "replicaset",
        "ReplicaSet",
        true,
        &["rs"],
    ),
    kind(
        "apps",
        "v1",
        "statefulsets",
        "statefulset",
        "StatefulSet",
        true,
        &["sts"],
    ),
    kind(
        "autoscaling",
        "v2",
        "horizontalpodautoscalers",
        "horizontalpodautoscaler",
        "HorizontalPodAutoscaler",
        true,
        &["hpa"],
    ),
    kind(
        "batch",
        "v1",
        "cronjobs",
        "cronjob",
        "CronJob",
        true,
        &["cj"],
    ),
    kind("batch", "v1", "jobs", "job", "Job", true, &[]),
    kind(
        "networking.k8s.io",
        "v1",
        "ingresses",
        "ingress",
        "Ingress",
        true,
        &["ing"],
    ),
    kind(
        "policy",
        "v1",
        "poddisruptionbudgets",
        "poddisruptionbudget",
        "PodDisruptionBudget",
        true,
        &["pdb"],
    ),
];

/// The non-core groups of [`REFERENCED_KINDS`] with their one version, in order.
pub fn groups() -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&str, &str)> = Vec::new();
    for k in REFERENCED_KINDS.iter().filter(|k| !k.group.is_empty()) {
        if !out.iter().any(|(g, _)| *g == k.group) {
            out.push((k.group, k.version));
        }
    }
    out
}

/// The kinds of one group version.
pub fn kinds_of(group: &str, version: &str) -> impl Iterator<Item = &'static ReferencedKind> {
    let (group, version) = (group.to_string(), version.to_string());
    REFERENCED_KINDS
        .iter()
        .filter(move |k| k.group == group && k.version == version)
}

impl ReferencedKind {
    /// The legacy `APIResource` entry.
    pub fn api_resource(&self) -> Value {
        json!({
            "name": self.resource,
            "singularName": self.singular,
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": [],
            "shortNames": self.short_names,
        })
    }

    /// The aggregated `APIResourceDiscovery` entry.
    pub fn aggregated_resource(&self) -> Value {
        json!({
            "resource": self.resource,
            "responseKind": {"group": self.group, "version": self.version, "kind": self.kind},
            "scope": if self.namespaced { "Namespaced" } else { "Cluster" },
            "singularResource": self.singular,
            "verbs": [],
            "shortNames": self.short_names,
        })
    }

    fn base(&self) -> String {
        if self.group.is_empty() {
            format!("/api/{}", self.version)
        } else {
            format!("/apis/{}/{}", self.group, self.version)
        }
    }

    /// The 405 every request on this resource's paths gets.
    pub fn refusal(&self) -> ApiError {
        ApiError::method_not_allowed(format!(
            "the server does not allow this method on the requested resource: herald-server \
             stores only events; {} are listed in discovery (with no verbs) so that \
             `kubectl events --for {}/NAME` can find their events",
            self.resource, self.singular
        ))
    }
}

/// Routes answering every method on every advertised resource's paths (collection, object
/// and subresources, namespaced or not) with its 405.
pub fn routes() -> Router {
    let mut r = Router::new();
    for k in REFERENCED_KINDS {
        let base = k.base();
        let refuse = move || async move { StatusError(k.refusal()) };
        let res = k.resource;
        let mut paths = vec![format!("{base}/{res}")];
        if res == "namespaces" {
            // `/api/v1/namespaces/{ns}/…` is the prefix of every namespaced path; only the
            // namespace object itself is refused.
            paths.push(format!("{base}/namespaces/{{ns}}"));
        } else if k.namespaced {
            paths.push(format!("{base}/namespaces/{{ns}}/{res}"));
            paths.push(format!("{base}/namespaces/{{ns}}/{res}/{{name}}"));
            paths.push(format!("{base}/namespaces/{{ns}}/{res}/{{name}}/{{*sub}}"));
        } else {
            paths.push(format!("{base}/{res}/{{name}}"));
            paths.push(format!("{base}/{res}/{{name}}/{{*sub}}"));
        }
        for p in paths {
            r = r.route(&p, any(refuse));
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_is_unique_and_groups_are_listed_once() {
        for (i, a) in REFERENCED_KINDS.iter().enumerate() {
            for b in &REFERENCED_KINDS[i + 1..] {
                assert!(
                    !(a.group == b.group && a.resource == b.resource),
                    "{a:?} twice"
                );
                for s in a.short_names {
                    assert!(!b.short_names.contains(s), "short name {s} twice");
                }
            }
            assert!(!a.short_names.contains(&"ev"));
        }
        let g = groups();
        assert_eq!(g.len(), 5, "{g:?}");
        assert!(g.contains(&("apps", "v1")));
        assert_eq!(kinds_of("apps", "v1").count(), 4);
    }
}
