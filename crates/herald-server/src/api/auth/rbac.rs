//! RBAC authorization from a file (`--authorization-rbac-file`): kube-apiserver's RBAC
//! authorizer over `rbac.authorization.k8s.io/v1` `Role`, `ClusterRole`, `RoleBinding` and
//! `ClusterRoleBinding` objects read from YAML instead of from the cluster.
//!
//! The file holds one or more YAML documents (`---` between them), each one of those four
//! kinds or a `List` of them (`kind: List`, `items: [...]`). The rules are kube-apiserver's:
//!
//! - A `ClusterRoleBinding` grants its `ClusterRole`'s rules in every namespace and at the
//!   cluster scope; a `RoleBinding` grants its `Role` (of its own namespace) or `ClusterRole`
//!   only in its own namespace.
//! - A rule allows a resource request when its `verbs`, `apiGroups` and `resources` (or
//!   `resource/subresource`) each contain the request's value or `*`, and its
//!   `resourceNames` are empty or contain the request's object name (so a `resourceNames`
//!   rule never allows `list`, `watch`, `create` or `deletecollection` of the collection).
//!   A rule allows a non-resource request (`/metrics`, `/version`, …) when its `verbs` match
//!   and one of its `nonResourceURLs` is the path, `*`, or a prefix ending in `*`.
//! - Subjects: `User` (by name), `Group` (any of the user's groups) and `ServiceAccount`
//!   (user `system:serviceaccount:NS:NAME`).
//! - Members of `system:masters` may do anything, whatever the file says.
//!
//! [`RbacPolicy::bootstrap`] adds kube-apiserver's default roles and bindings that matter to
//! Herald, so a file only needs the grants particular to a site: `cluster-admin` (everything)
//! bound to `system:masters`; `system:discovery` (`get` on `/api`, `/api/*`, `/apis`,
//! `/apis/*`, `/openapi`, `/openapi/*`, `/version`, `/version/`, `/healthz`, `/livez`,
//! `/readyz`) and `system:basic-user` (`create` of `selfsubjectaccessreviews`,
//! `selfsubjectrulesreviews` and `selfsubjectreviews`) bound to `system:authenticated`;
//! `system:public-info-viewer` (`get` on `/healthz`, `/livez`, `/readyz`, `/version`,
//! `/version/`) bound to `system:authenticated` and `system:unauthenticated`; and the
//! user-facing `admin`, `edit` (every verb on events in both groups) and `view` (`get`,
//! `list`, `watch` on events) ClusterRoles, limited to what Herald serves.
//!
//! ```
//! use herald_server::api::auth::attributes::Attributes;
//! use herald_server::api::auth::rbac::RbacPolicy;
//! use herald_server::api::auth::user::UserInfo;
//! let policy = RbacPolicy::parse("rbac.yaml", r#"
//! apiVersion: rbac.authorization.k8s.io/v1
//! kind: RoleBinding
//! metadata: {name: jane-views, namespace: prod}
//! subjects: [{kind: User, name: jane}]
//! roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}
//! "#).unwrap().bootstrap();
//! let jane = UserInfo::authenticated("jane", "", vec![]);
//! let list = |ns: &str| Attributes::from_request(&http::Method::GET, &format!("/api/v1/namespaces/{ns}/events"), None);
//! assert!(policy.allows(&jane, &list("prod")));
//! assert!(!policy.allows(&jane, &list("dev")));
//! ```

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use serde::Deserialize;

use super::Decision;
use super::attributes::Attributes;
use super::user::{AUTHENTICATED, MASTERS, UNAUTHENTICATED, UserInfo};
use crate::api::discovery::EVENT_VERBS;

/// Why an RBAC file could not be used: the file, the line (when the YAML parser knows it)
/// and what is wrong.
#[derive(Debug, thiserror::Error)]
pub enum RbacFileError {
    /// The file could not be read.
    #[error("reading RBAC file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A document is not valid YAML or not a valid RBAC object.
    #[error("{path}:{line}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// 1-based line of the offending document or value.
        line: usize,
        /// What is wrong.
        message: String,
    },
}

/// A compiled set of RBAC objects, ready to answer [`RbacPolicy::allows`]. Cheap to share
/// behind an `Arc`; immutable (a reload builds a new one).
#[derive(Debug, Clone, Default)]
pub struct RbacPolicy {
    roles: HashMap<(String, String), Vec<PolicyRule>>,
    cluster_roles: HashMap<String, Vec<PolicyRule>>,
    role_bindings: Vec<Binding>,
    cluster_role_bindings: Vec<Binding>,
}

#[derive(Debug, Clone)]
struct Binding {
    /// The binding's name (named in the reason of the decisions it allows).
    name: String,
    /// Empty for a ClusterRoleBinding.
    namespace: String,
    subjects: Vec<Subject>,
    role_ref: RoleRef,
}

/// One object of an RBAC file.
#[derive(Debug, Clone)]
pub enum RbacObject {
    /// A namespaced set of rules.
    Role(Role),
    /// A cluster-wide set of rules.
    ClusterRole(ClusterRole),
    /// Grants a Role or ClusterRole in one namespace.
    RoleBinding(RoleBinding),
    /// Grants a ClusterRole everywhere.
    ClusterRoleBinding(ClusterRoleBinding),
}

#[derive(Deserialize)]
struct Kind {
    kind: Option<String>,
}

#[derive(Deserialize)]
struct List {
    items: Vec<serde_yaml_ng::Value>,
}

fn line_of(e: &serde_yaml_ng::Error) -> Option<usize> {
    e.location().map(|l| l.line())
}

fn typed<'de, D>(kind: &str, de: D) -> Result<Option<RbacObject>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    Ok(Some(match kind {
        "Role" => RbacObject::Role(Role::deserialize(de)?),
        "ClusterRole" => RbacObject::ClusterRole(ClusterRole::deserialize(de)?),
        "RoleBinding" => RbacObject::RoleBinding(RoleBinding::deserialize(de)?),
        "ClusterRoleBinding" => {
            RbacObject::ClusterRoleBinding(ClusterRoleBinding::deserialize(de)?)
        }
        _ => return Ok(None),
    }))
}

const KINDS: &str = "Role, ClusterRole, RoleBinding, ClusterRoleBinding or List";

impl RbacPolicy {
    /// Reads and parses `path` (without the bootstrap roles; see [`RbacPolicy::bootstrap`]).
    pub fn read(path: &Path) -> Result<RbacPolicy, RbacFileError> {
        let text = std::fs::read_to_string(path).map_err(|source| RbacFileError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(path, &text)
    }

    /// Parses the text of an RBAC file; `path` only names it in errors.
    pub fn parse(path: impl AsRef<Path>, text: &str) -> Result<RbacPolicy, RbacFileError> {
        Ok(Self::from_objects(parse_objects(path.as_ref(), text)?))
    }

    /// A policy of `objects`.
    pub fn from_objects(objects: impl IntoIterator<Item = RbacObject>) -> RbacPolicy {
        let mut p = RbacPolicy::default();
        for o in objects {
            p.add(o);
        }
        p
    }

    fn add(&mut self, o: RbacObject) {
        match o {
            RbacObject::Role(r) => {
                let key = (
                    r.metadata.namespace.unwrap_or_default(),
                    r.metadata.name.unwrap_or_default(),
                );
                self.roles
                    .entry(key)
                    .or_default()
                    .extend(r.rules.unwrap_or_default());
            }
            RbacObject::ClusterRole(r) => {
                self.cluster_roles
                    .entry(r.metadata.name.unwrap_or_default())
                    .or_default()
                    .extend(r.rules.unwrap_or_default());
            }
            RbacObject::RoleBinding(b) => self.role_bindings.push(Binding {
                name: b.metadata.name.unwrap_or_default(),
                namespace: b.metadata.namespace.unwrap_or_default(),
                subjects: b.subjects.unwrap_or_default(),
                role_ref: b.role_ref,
            }),
            RbacObject::ClusterRoleBinding(b) => self.cluster_role_bindings.push(Binding {
                name: b.metadata.name.unwrap_or_default(),
                namespace: String::new(),
                subjects: b.subjects.unwrap_or_default(),
                role_ref: b.role_ref,
            }),
        }
    }

    /// This policy plus kube-apiserver's default roles and bindings (see the module docs).
    /// A ClusterRole of the same name in the file adds its rules to the default one.
    pub fn bootstrap(mut self) -> RbacPolicy {
        for o in bootstrap_objects() {
            self.add(o);
        }
        self
    }

    /// Whether `user` may do what `attrs` asks (no reason is put into words: the request
    /// path's check).
    pub fn allows(&self, user: &UserInfo, attrs: &Attributes) -> bool {
        self.grant(user, attrs).is_some()
    }

    /// The decision on what `attrs` asks of `user`, with kube-apiserver's reason: empty for
    /// `system:masters` (its privileged-group authorizer gives none) and for a denial,
    /// `RBAC: allowed by ClusterRoleBinding "b" of ClusterRole "r" to User "jane"` (or
    /// `RoleBinding "b/ns" of Role "r" to Group "dev"`) naming the first binding that allows.
    pub fn decide(&self, user: &UserInfo, attrs: &Attributes) -> Decision {
        match self.grant(user, attrs) {
            Some(Grant::Masters) => Decision::allow(String::new()),
            Some(Grant::Binding(b, subject)) => {
                Decision::allow(format!("RBAC: allowed by {}", describe(b, subject)))
            }
            None => Decision::deny(String::new()),
        }
    }

    /// What lets `user` do what `attrs` asks: membership in `system:masters`, else the first
    /// binding (cluster-wide ones first, then the request namespace's) naming the user whose
    /// role has a rule allowing it.
    fn grant<'a>(&'a self, user: &UserInfo, attrs: &Attributes) -> Option<Grant<'a>> {
        if user.in_group(MASTERS) {
            return Some(Grant::Masters);
        }
        let allowed_by = |b: &'a Binding| {
            let subject = b
                .subjects
                .iter()
                .find(|s| subject_matches(s, &b.namespace, user))?;
            self.rules_of(&b.namespace, &b.role_ref)
                .iter()
                .any(|r| rule_allows(r, attrs))
                .then_some(Grant::Binding(b, subject))
        };
        let namespaced = self
            .role_bindings
            .iter()
            .filter(|b| !attrs.namespace.is_empty() && b.namespace == attrs.namespace);
        self.cluster_role_bindings
            .iter()
            .chain(namespaced)
            .find_map(allowed_by)
    }

    /// The rules `user` has in `namespace` (cluster-wide ones included; for an empty
    /// namespace only cluster-wide ones), for `SelfSubjectRulesReview`. Members of
    /// `system:masters` get one rule allowing everything.
    pub fn rules_for(&self, user: &UserInfo, namespace: &str) -> Vec<PolicyRule> {
        if user.in_group(MASTERS) {
            return cluster_admin_rules();
        }
        let mut out = Vec::new();
        let bindings = self.cluster_role_bindings.iter().chain(
            self.role_bindings
                .iter()
                .filter(|b| !namespace.is_empty() && b.namespace == namespace),
        );
        for b in bindings {
            if b.subjects
                .iter()
                .any(|s| subject_matches(s, &b.namespace, user))
            {
                out.extend(self.rules_of(&b.namespace, &b.role_ref).iter().cloned());
            }
        }
        out
    }

    fn rules_of(&self, namespace: &str, role_ref: &RoleRef) -> &[PolicyRule] {
        let rules = match role_ref.kind.as_str() {
            "ClusterRole" => self.cluster_roles.get(&role_ref.name),
            "Role" if !namespace.is_empty() => self
                .roles
                .get(&(namespace.to_string(), role_ref.name.clone())),
            _ => None,
        };
        rules.map(Vec::as_slice).unwrap_or(&[])
    }
}

fn parse_objects(path: &Path, text: &str) -> Result<Vec<RbacObject>, RbacFileError> {
    let invalid = |line: Option<usize>, message: String| RbacFileError::Invalid {
        path: path.to_path_buf(),
        line: line.unwrap_or(1),
        message,
    };
    // First pass: each document's kind (YAML syntax errors are located here).
    let mut kinds = Vec::new();
    for doc in serde_yaml_ng::Deserializer::from_str(text) {
        let v = serde_yaml_ng::Value::deserialize(doc)
            .map_err(|e| invalid(line_of(&e), e.to_string()))?;
        if v.is_null() {
            kinds.push(None);
            continue;
        }
        let k: Kind = serde_yaml_ng::from_value(v.clone())
            .map_err(|e| invalid(line_of(&e), format!("not an object: {e}")))?;
        kinds.push(Some((k.kind.unwrap_or_default(), v)));
    }
    // Second pass: each document as its kind, where errors carry the offending line.
    let starts = document_starts(text);
    let mut out = Vec::new();
    for (i, (doc, kind)) in serde_yaml_ng::Deserializer::from_str(text)
        .zip(kinds)
        .enumerate()
    {
        let start = starts.get(i).copied();
        let Some((kind, value)) = kind else { continue };
        if kind == "List" {
            let list = List::deserialize(doc).map_err(|e| invalid(line_of(&e), e.to_string()))?;
            for (i, item) in list.items.into_iter().enumerate() {
                let k: Kind = serde_yaml_ng::from_value(item.clone())
                    .map_err(|e| invalid(None, format!("items[{i}]: {e}")))?;
                let k = k.kind.unwrap_or_default();
                match typed(&k, item) {
                    Ok(Some(o)) => {
                        check(&o).map_err(|m| invalid(start, format!("items[{i}]: {m}")))?;
                        out.push(o)
                    }
                    Ok(None) => {
                        return Err(invalid(
                            None,
                            format!("items[{i}]: kind {k:?} is not one of {KINDS}"),
                        ));
                    }
                    Err(e) => return Err(invalid(None, format!("items[{i}]: {e}"))),
                }
            }
            continue;
        }
        match typed(&kind, doc) {
            Ok(Some(o)) => {
                check(&o).map_err(|m| invalid(start, m))?;
                out.push(o)
            }
            Ok(None) => {
                let line = document_line(text, &value);
                return Err(invalid(
                    line,
                    format!("kind {kind:?} is not one of {KINDS}"),
                ));
            }
            Err(e) => return Err(invalid(line_of(&e), e.to_string())),
        }
    }
    Ok(out)
}

/// The first line of each YAML document of `text` (after each `---` separator).
fn document_starts(text: &str) -> Vec<usize> {
    let mut starts = Vec::new();
    let mut first = true;
    for (n, line) in text.lines().enumerate() {
        if line.starts_with("---") {
            starts.push(n + 2);
            first = false;
        } else if first && !line.trim().is_empty() && !line.trim_start().starts_with('#') {
            starts.push(n + 1);
            first = false;
        }
    }
    starts
}

/// What the API server's validation would refuse in a binding (k8s-openapi defaults missing
/// required fields instead of refusing them).
fn check(o: &RbacObject) -> Result<(), String> {
    let (role_ref, subjects, namespaced) = match o {
        RbacObject::RoleBinding(b) => (&b.role_ref, &b.subjects, true),
        RbacObject::ClusterRoleBinding(b) => (&b.role_ref, &b.subjects, false),
        RbacObject::Role(r) if r.metadata.namespace.as_deref().unwrap_or("").is_empty() => {
            return Err("a Role needs metadata.namespace".into());
        }
        _ => return Ok(()),
    };
    match role_ref.kind.as_str() {
        "ClusterRole" => {}
        "Role" if namespaced => {}
        "" => return Err("roleRef is required (kind Role or ClusterRole, and name)".into()),
        other => {
            return Err(format!(
                "roleRef.kind {other:?} is not {}",
                if namespaced {
                    "Role or ClusterRole"
                } else {
                    "ClusterRole"
                }
            ));
        }
    }
    if role_ref.name.is_empty() {
        return Err("roleRef.name is required".into());
    }
    if namespaced
        && matches!(o, RbacObject::RoleBinding(b) if b.metadata.namespace.as_deref().unwrap_or("").is_empty())
    {
        return Err("a RoleBinding needs metadata.namespace".into());
    }
    for s in subjects.iter().flatten() {
        if !matches!(s.kind.as_str(), "User" | "Group" | "ServiceAccount") {
            return Err(format!(
                "subject kind {:?} is not User, Group or ServiceAccount",
                s.kind
            ));
        }
    }
    Ok(())
}

/// The line of the `kind:` key of the document `value` came from, found by its text
/// (best effort, for kinds the parser accepted as strings).
fn document_line(text: &str, value: &serde_yaml_ng::Value) -> Option<usize> {
    let kind = value.get("kind")?.as_str()?;
    text.lines()
        .position(|l| l.trim_start().starts_with("kind:") && l.contains(kind))
        .map(|n| n + 1)
}

/// What allowed a request ([`RbacPolicy::grant`]).
enum Grant<'a> {
    /// The user is in `system:masters`.
    Masters,
    /// This binding, through this subject of it.
    Binding(&'a Binding, &'a Subject),
}

/// How kube-apiserver's RBAC authorizer names the binding and subject that allowed a request.
fn describe(b: &Binding, s: &Subject) -> String {
    let subject = match s.kind.as_str() {
        "ServiceAccount" => {
            let ns = s.namespace.as_deref().unwrap_or(&b.namespace);
            format!("{} {:?}", s.kind, format!("{}/{ns}", s.name))
        }
        _ => format!("{} {:?}", s.kind, s.name),
    };
    if b.namespace.is_empty() {
        format!(
            "ClusterRoleBinding {:?} of {} {:?} to {subject}",
            b.name, b.role_ref.kind, b.role_ref.name
        )
    } else {
        format!(
            "RoleBinding {:?} of {} {:?} to {subject}",
            format!("{}/{}", b.name, b.namespace),
            b.role_ref.kind,
            b.role_ref.name
        )
    }
}

fn subject_matches(s: &Subject, binding_namespace: &str, user: &UserInfo) -> bool {
    match s.kind.as_str() {
        "User" => s.name == user.name,
        "Group" => user.in_group(&s.name),
        "ServiceAccount" => {
            let ns = s.namespace.as_deref().unwrap_or(binding_namespace);
            user.name == format!("system:serviceaccount:{ns}:{}", s.name)
        }
        _ => false,
    }
}

fn has(list: &Option<Vec<String>>, value: &str) -> bool {
    list.as_ref()
        .is_some_and(|l| l.iter().any(|x| x == "*" || x == value))
}

fn rule_allows(rule: &PolicyRule, a: &Attributes) -> bool {
    if !rule.verbs.iter().any(|v| v == "*" || *v == a.verb) {
        return false;
    }
    match &a.resource {
        Some(resource) => {
            has(&rule.api_groups, &a.api_group)
                && resource_matches(rule, resource, &a.subresource)
                && rule
                    .resource_names
                    .as_ref()
                    .is_none_or(|names| names.is_empty() || names.contains(&a.name))
        }
        None => rule.non_resource_urls.as_ref().is_some_and(|urls| {
            urls.iter().any(|u| {
                u == "*"
                    || *u == a.path
                    || u.strip_suffix('*').is_some_and(|p| a.path.starts_with(p))
            })
        }),
    }
}

fn resource_matches(rule: &PolicyRule, resource: &str, subresource: &str) -> bool {
    let Some(resources) = &rule.resources else {
        return false;
    };
    resources.iter().any(|r| {
        if r == "*" {
            return true;
        }
        if subresource.is_empty() {
            return r == resource;
        }
        *r == format!("{resource}/{subresource}") || *r == format!("*/{subresource}")
    })
}

fn strings(s: &[&str]) -> Option<Vec<String>> {
    Some(s.iter().map(|s| s.to_string()).collect())
}

fn resource_rule(verbs: &[&str], groups: &[&str], resources: &[&str]) -> PolicyRule {
    PolicyRule {
        verbs: strings(verbs).unwrap_or_default(),
        api_groups: strings(groups),
        resources: strings(resources),
        ..PolicyRule::default()
    }
}

fn url_rule(verbs: &[&str], urls: &[&str]) -> PolicyRule {
    PolicyRule {
        verbs: strings(verbs).unwrap_or_default(),
        non_resource_urls: strings(urls),
        ..PolicyRule::default()
    }
}

fn cluster_admin_rules() -> Vec<PolicyRule> {
    vec![
        resource_rule(&["*"], &["*"], &["*"]),
        url_rule(&["*"], &["*"]),
    ]
}

fn cluster_role(name: &str, rules: Vec<PolicyRule>) -> RbacObject {
    let mut r = ClusterRole::default();
    r.metadata.name = Some(name.to_string());
    r.rules = Some(rules);
    RbacObject::ClusterRole(r)
}

fn group_binding(role: &str, groups: &[&str]) -> RbacObject {
    let mut b = ClusterRoleBinding {
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "ClusterRole".into(),
            name: role.into(),
        },
        subjects: Some(
            groups
                .iter()
                .map(|g| Subject {
                    api_group: Some("rbac.authorization.k8s.io".into()),
                    kind: "Group".into(),
                    name: g.to_string(),
                    namespace: None,
                })
                .collect(),
        ),
        ..ClusterRoleBinding::default()
    };
    b.metadata.name = Some(role.to_string());
    RbacObject::ClusterRoleBinding(b)
}

const EVENT_GROUPS: &[&str] = &["", "events.k8s.io"];

/// kube-apiserver's default roles and bindings that matter to Herald (see the module docs).
pub fn bootstrap_objects() -> Vec<RbacObject> {
    vec![
        cluster_role("cluster-admin", cluster_admin_rules()),
        group_binding("cluster-admin", &[MASTERS]),
        cluster_role(
            "system:discovery",
            vec![url_rule(
                &["get"],
                &[
                    "/api",
                    "/api/*",
                    "/apis",
                    "/apis/*",
                    "/healthz",
                    "/livez",
                    "/openapi",
                    "/openapi/*",
                    "/readyz",
                    "/version",
                    "/version/",
                ],
            )],
        ),
        group_binding("system:discovery", &[AUTHENTICATED]),
        cluster_role(
            "system:basic-user",
            vec![
                resource_rule(
                    &["create"],
                    &["authorization.k8s.io"],
                    &["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                ),
                resource_rule(
                    &["create"],
                    &["authentication.k8s.io"],
                    &["selfsubjectreviews"],
                ),
            ],
        ),
        group_binding("system:basic-user", &[AUTHENTICATED]),
        cluster_role(
            "system:public-info-viewer",
            vec![url_rule(
                &["get"],
                &["/healthz", "/livez", "/readyz", "/version", "/version/"],
            )],
        ),
        group_binding(
            "system:public-info-viewer",
            &[AUTHENTICATED, UNAUTHENTICATED],
        ),
        cluster_role(
            "admin",
            vec![resource_rule(&EVENT_VERBS, EVENT_GROUPS, &["events"])],
        ),
        cluster_role(
            "edit",
            vec![resource_rule(&EVENT_VERBS, EVENT_GROUPS, &["events"])],
        ),
        cluster_role(
            "view",
            vec![resource_rule(
                &["get", "list", "watch"],
                EVENT_GROUPS,
                &["events"],
            )],
        ),
    ]
}
