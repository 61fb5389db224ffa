//! `--for KIND[.GROUP]/NAME`: which object events are about, as kubectl spells it
//! (`pod/web-1`, `deploy/api`, `deployment.apps/api`, `Pod/web-1`).
//!
//! Kinds are resolved from a table of Kubernetes' built-in resources (names, singular names,
//! short names and kinds, so it also works against herald-server, which serves no pods),
//! and otherwise through the server's discovery (custom resources on a real cluster).

use k8s_openapi::api::core::v1::ObjectReference;

use crate::connect::Connection;
use crate::usage::{UsageError, usage_bail};

/// `--for` as typed: a kind (lowercased), an optional group, a name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForArg {
    /// The kind part without its group, lowercased: `pod`, `deploy`, `deployment`.
    pub kind: String,
    /// The group after the first dot of the kind part (`deployment.apps` → `apps`).
    pub group: Option<String>,
    /// The object's name.
    pub name: String,
}

impl ForArg {
    /// Parses `KIND[.GROUP]/NAME`; anything else is a [`UsageError`] that shows the form.
    pub fn parse(s: &str) -> Result<ForArg, UsageError> {
        let Some((kind, name)) = s.split_once('/') else {
            return Err(UsageError(format!(
                "--for {s:?}: expected KIND/NAME, e.g. --for pod/web-1"
            )));
        };
        if kind.is_empty() || name.is_empty() || name.contains('/') {
            return Err(UsageError(format!(
                "--for {s:?}: expected KIND/NAME, e.g. --for pod/web-1"
            )));
        }
        if !herald_core::naming::is_dns1123_subdomain(name) && !is_path_segment_name(name) {
            return Err(UsageError(format!(
                "--for {s:?}: {name:?} is not a valid object name"
            )));
        }
        let (kind, group) = match kind.split_once('.') {
            Some((k, g)) if !k.is_empty() && !g.is_empty() => (k, Some(g.to_ascii_lowercase())),
            Some(_) => {
                return Err(UsageError(format!(
                    "--for {s:?}: expected KIND[.GROUP]/NAME, e.g. --for deployment.apps/web"
                )));
            }
            None => (kind, None),
        };
        Ok(ForArg {
            kind: kind.to_ascii_lowercase(),
            group,
            name: name.to_string(),
        })
    }
}

/// Object names the API accepts in a URL path even when they are not DNS subdomains
/// (some resources allow upper case or `:`, e.g. RBAC roles `system:controller`).
fn is_path_segment_name(name: &str) -> bool {
    name != "."
        && name != ".."
        && name.len() <= 253
        && !name.contains(['/', '%'])
        && !name.chars().any(char::is_whitespace)
}

/// A resolved resource kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectKind {
    /// `Pod`, `Deployment`.
    pub kind: String,
    /// `v1`, `apps/v1`.
    pub api_version: String,
    /// `pods`, `deployments`.
    pub plural: String,
    /// Whether objects of this kind live in a namespace.
    pub namespaced: bool,
}

/// The object `--for` names, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForObject {
    /// Its kind.
    pub kind: ObjectKind,
    /// Its name.
    pub name: String,
}

impl ForObject {
    /// The `involvedObject` reference for this object in `namespace` (no namespace for
    /// cluster-scoped kinds).
    pub fn reference(&self, namespace: &str) -> ObjectReference {
        ObjectReference {
            kind: Some(self.kind.kind.clone()),
            api_version: Some(self.kind.api_version.clone()),
            name: Some(self.name.clone()),
            namespace: self.kind.namespaced.then(|| namespace.to_string()),
            ..ObjectReference::default()
        }
    }

    /// The field selector terms that select this object's events.
    pub fn field_selector(&self) -> String {
        use herald_core::event::fields::escape_value;
        format!(
            "involvedObject.kind={},involvedObject.name={}",
            escape_value(&self.kind.kind),
            escape_value(&self.name)
        )
    }

    /// True when `r` refers to this object (kind and name; the namespace is the query's).
    pub fn matches(&self, r: &ObjectReference) -> bool {
        r.kind.as_deref() == Some(self.kind.kind.as_str())
            && r.name.as_deref() == Some(self.name.as_str())
    }
}

/// A built-in resource: the names users type for it (plural, singular, short names) and
/// what it is.
struct Builtin {
    names: &'static [&'static str],
    kind: &'static str,
    group: &'static str,
    version: &'static str,
    namespaced: bool,
}

const fn b(
    names: &'static [&'static str],
    kind: &'static str,
    group: &'static str,
    version: &'static str,
    namespaced: bool,
) -> Builtin {
    Builtin {
        names,
        kind,
        group,
        version,
        namespaced,
    }
}

/// Kubernetes' built-in resources that events are commonly about. The first name is the
/// plural (the URL path segment).
#[rustfmt::skip]
const BUILTIN: &[Builtin] = &[
    b(&["pods", "pod", "po"], "Pod", "", "v1", true),
    b(&["nodes", "node", "no"], "Node", "", "v1", false),
    b(&["services", "service", "svc"], "Service", "", "v1", true),
    b(&["namespaces", "namespace", "ns"], "Namespace", "", "v1", false),
    b(&["configmaps", "configmap", "cm"], "ConfigMap", "", "v1", true),
    b(&["secrets", "secret"], "Secret", "", "v1", true),
    b(&["serviceaccounts", "serviceaccount", "sa"], "ServiceAccount", "", "v1", true),
    b(&["persistentvolumeclaims", "persistentvolumeclaim", "pvc"], "PersistentVolumeClaim", "", "v1", true),
    b(&["persistentvolumes", "persistentvolume", "pv"], "PersistentVolume", "", "v1", false),
    b(&["endpoints", "ep"], "Endpoints", "", "v1", true),
    b(&["replicationcontrollers", "replicationcontroller", "rc"], "ReplicationController", "", "v1", true),
    b(&["events", "event", "ev"], "Event", "", "v1", true),
    b(&["deployments", "deployment", "deploy"], "Deployment", "apps", "v1", true),
    b(&["replicasets", "replicaset", "rs"], "ReplicaSet", "apps", "v1", true),
    b(&["statefulsets", "statefulset", "sts"], "StatefulSet", "apps", "v1", true),
    b(&["daemonsets", "daemonset", "ds"], "DaemonSet", "apps", "v1", true),
    b(&["jobs", "job"], "Job", "batch", "v1", true),
    b(&["cronjobs", "cronjob", "cj"], "CronJob", "batch", "v1", true),
    b(&["ingresses", "ingress", "ing"], "Ingress", "networking.k8s.io", "v1", true),
    b(&["horizontalpodautoscalers", "horizontalpodautoscaler", "hpa"], "HorizontalPodAutoscaler", "autoscaling", "v2", true),
    b(&["poddisruptionbudgets", "poddisruptionbudget", "pdb"], "PodDisruptionBudget", "policy", "v1", true),
    b(&["storageclasses", "storageclass", "sc"], "StorageClass", "storage.k8s.io", "v1", false),
    b(&["customresourcedefinitions", "customresourcedefinition", "crd", "crds"], "CustomResourceDefinition", "apiextensions.k8s.io", "v1", false),
];

/// The built-in kind `kind` (lowercased plural, singular, short name or kind) in `group`.
pub fn builtin(kind: &str, group: Option<&str>) -> Option<ObjectKind> {
    BUILTIN
        .iter()
        .find(|r| {
            (r.names.contains(&kind) || r.kind.eq_ignore_ascii_case(kind))
                && group
                    .is_none_or(|want| want == r.group || (want == "core" && r.group.is_empty()))
        })
        .map(|r| ObjectKind {
            kind: r.kind.to_string(),
            api_version: if r.group.is_empty() {
                r.version.to_string()
            } else {
                format!("{}/{}", r.group, r.version)
            },
            plural: r.names[0].to_string(),
            namespaced: r.namespaced,
        })
}

/// Resolves `arg` from the built-in table, else through the server's discovery.
pub async fn resolve(arg: &ForArg, conn: &Connection) -> anyhow::Result<ForObject> {
    if let Some(kind) = builtin(&arg.kind, arg.group.as_deref()) {
        return Ok(ForObject {
            kind,
            name: arg.name.clone(),
        });
    }
    let discovery = kube::discovery::Discovery::new(conn.client.clone())
        .run()
        .await
        .map_err(|e| conn.explain(e))?;
    for group in discovery.groups() {
        if arg.group.as_deref().is_some_and(|g| g != group.name()) {
            continue;
        }
        for (res, caps) in group.recommended_resources() {
            if res.plural == arg.kind || res.kind.eq_ignore_ascii_case(&arg.kind) {
                return Ok(ForObject {
                    kind: ObjectKind {
                        kind: res.kind,
                        api_version: res.api_version,
                        plural: res.plural,
                        namespaced: caps.scope == kube::discovery::Scope::Namespaced,
                    },
                    name: arg.name.clone(),
                });
            }
        }
    }
    let typed = match &arg.group {
        Some(g) => format!("{}.{g}", arg.kind),
        None => arg.kind.clone(),
    };
    usage_bail!(
        "--for {typed}/{}: the server has no resource {typed:?}; use a kind like pod, deployment or node",
        arg.name
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kind_group_and_name() {
        assert_eq!(
            ForArg::parse("pod/web-1").unwrap(),
            ForArg {
                kind: "pod".into(),
                group: None,
                name: "web-1".into()
            }
        );
        assert_eq!(
            ForArg::parse("Deployment.apps/api").unwrap(),
            ForArg {
                kind: "deployment".into(),
                group: Some("apps".into()),
                name: "api".into()
            }
        );
        assert_eq!(
            ForArg::parse("clusterrole/system:controller").unwrap().name,
            "system:controller"
        );
    }

    #[test]
    fn bad_values_say_what_to_write() {
        for bad in ["web-1", "pod/", "/web-1", "pod/a/b", ".apps/x", "pod./x"] {
            let e = ForArg::parse(bad).unwrap_err();
            assert!(e.0.starts_with(&format!("--for {bad:?}")), "{e}");
            assert!(e.0.contains("e.g. --for"), "{e}");
        }
        let e = ForArg::parse("pod/web 1").unwrap_err();
        assert!(e.0.contains("not a valid object name"), "{e}");
    }

    #[test]
    fn builtin_kinds_by_any_name() {
        for name in ["pods", "pod", "po", "Pod"] {
            let k = builtin(&name.to_ascii_lowercase(), None).unwrap();
            assert_eq!((k.kind.as_str(), k.api_version.as_str()), ("Pod", "v1"));
        }
        let d = builtin("deploy", Some("apps")).unwrap();
        assert_eq!(d.api_version, "apps/v1");
        assert!(builtin("deploy", Some("batch")).is_none());
        assert!(!builtin("node", None).unwrap().namespaced);
        assert!(builtin("widget", None).is_none());
    }

    #[test]
    fn references_and_selectors() {
        let o = ForObject {
            kind: builtin("pod", None).unwrap(),
            name: "web-1".into(),
        };
        let r = o.reference("prod");
        assert_eq!(r.namespace.as_deref(), Some("prod"));
        assert!(o.matches(&r));
        assert_eq!(
            o.field_selector(),
            "involvedObject.kind=Pod,involvedObject.name=web-1"
        );
        let n = ForObject {
            kind: builtin("node", None).unwrap(),
            name: "n1".into(),
        };
        assert_eq!(n.reference("prod").namespace, None);
    }
}
