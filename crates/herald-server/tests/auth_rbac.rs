//! RBAC semantics, client-certificate users, malformed files and reloading, without a
//! network (the kubectl tests are in `auth_kubectl.rs`).

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use herald_server::api::auth::attributes::Attributes;
use herald_server::api::auth::rbac::RbacPolicy;
use herald_server::api::auth::reload::{self, ReloadStatus};
use herald_server::api::auth::user::UserInfo;
use herald_server::api::auth::{Auth, AuthError, AuthOptions, RbacRules};
use herald_server::api::peer::VerifiedClientCertificates;
use http::Method;
use tokio_util::sync::CancellationToken;

const POLICY: &str = r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: reader, namespace: prod}
rules:
- apiGroups: [""]
  resources: [events]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: ann-reads-prod, namespace: prod}
subjects: [{kind: User, name: ann}]
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: reader}
---
# A RoleBinding to a ClusterRole grants it in the binding's namespace only.
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: events-v1-writer}
rules:
- apiGroups: [events.k8s.io]
  resources: [events]
  verbs: [create, update, patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: writers, namespace: staging}
subjects: [{kind: Group, name: writers}]
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: events-v1-writer}
---
apiVersion: v1
kind: List
items:
- apiVersion: rbac.authorization.k8s.io/v1
  kind: ClusterRole
  metadata: {name: one-event}
  rules:
  - apiGroups: ["*"]
    resources: [events]
    resourceNames: [special]
    verbs: ["*"]
  - nonResourceURLs: ["/metrics", "/debug/*"]
    verbs: [get]
- apiVersion: rbac.authorization.k8s.io/v1
  kind: ClusterRoleBinding
  metadata: {name: carl-one-event}
  subjects: [{kind: User, name: carl}, {kind: ServiceAccount, name: bot, namespace: ops}]
  roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: one-event}
"#;

fn user(name: &str, groups: &[&str]) -> UserInfo {
    UserInfo::authenticated(name, "", groups.iter().map(|g| g.to_string()).collect())
}

#[test]
fn rbac_semantics_table() {
    let policy = RbacPolicy::parse("policy.yaml", POLICY)
        .unwrap()
        .bootstrap();
    let ann = user("ann", &[]);
    let wendy = user("wendy", &["writers"]);
    let carl = user("carl", &[]);
    let bot = user("system:serviceaccount:ops:bot", &[]);
    let root = user("root", &["system:masters"]);
    let nobody = user("nobody", &[]);
    let anonymous = UserInfo::anonymous();
    let core = "/api/v1/namespaces";
    let v1 = "/apis/events.k8s.io/v1/namespaces";
    #[rustfmt::skip]
    let table: &[(&UserInfo, Method, String, Option<&str>, bool)] = &[
        // A Role grants its verbs, in its namespace, in its group only.
        (&ann, Method::GET, format!("{core}/prod/events"), None, true),
        (&ann, Method::GET, format!("{core}/prod/events/x"), None, true),
        (&ann, Method::GET, format!("{core}/prod/events"), Some("watch=true"), true),
        (&ann, Method::POST, format!("{core}/prod/events"), None, false),
        (&ann, Method::DELETE, format!("{core}/prod/events"), None, false),
        (&ann, Method::GET, format!("{core}/dev/events"), None, false),
        (&ann, Method::GET, "/api/v1/events".into(), None, false),
        (&ann, Method::GET, format!("{v1}/prod/events"), None, false),
        // A RoleBinding to a ClusterRole: that namespace only, that group only, by group.
        (&wendy, Method::POST, format!("{v1}/staging/events"), None, true),
        (&wendy, Method::PATCH, format!("{v1}/staging/events/x"), None, true),
        (&wendy, Method::DELETE, format!("{v1}/staging/events/x"), None, false),
        (&wendy, Method::POST, format!("{core}/staging/events"), None, false),
        (&wendy, Method::POST, format!("{v1}/prod/events"), None, false),
        // resourceNames with wildcards in groups and verbs, through a ClusterRoleBinding.
        (&carl, Method::GET, format!("{core}/any/events/special"), None, true),
        (&carl, Method::DELETE, format!("{v1}/other/events/special"), None, true),
        (&carl, Method::GET, format!("{core}/any/events"), Some("fieldSelector=metadata.name%3Dspecial"), true),
        (&carl, Method::GET, format!("{core}/any/events/plain"), None, false),
        (&carl, Method::GET, format!("{core}/any/events"), None, false),
        (&carl, Method::DELETE, format!("{core}/any/events"), None, false),
        // nonResourceURLs: exact and prefix.
        (&carl, Method::GET, "/metrics".into(), None, true),
        (&carl, Method::GET, "/debug/pprof".into(), None, true),
        (&carl, Method::POST, "/metrics".into(), None, false),
        (&carl, Method::GET, "/metricsx".into(), None, false),
        (&nobody, Method::GET, "/metrics".into(), None, false),
        // A ServiceAccount subject.
        (&bot, Method::GET, format!("{core}/x/events/special"), None, true),
        (&bot, Method::GET, format!("{core}/x/events/other"), None, false),
        // Bootstrap: discovery and self reviews for every authenticated user.
        (&nobody, Method::GET, "/apis".into(), None, true),
        (&nobody, Method::GET, "/api/v1".into(), None, true),
        (&nobody, Method::GET, "/openapi/v3/api/v1".into(), None, true),
        (&nobody, Method::POST, "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews".into(), None, true),
        (&nobody, Method::POST, "/apis/authentication.k8s.io/v1/selfsubjectreviews".into(), None, true),
        (&nobody, Method::GET, format!("{core}/prod/events"), None, false),
        (&anonymous, Method::GET, "/apis".into(), None, false),
        (&anonymous, Method::GET, "/version".into(), None, true),
        // system:masters may do anything.
        (&root, Method::DELETE, "/api/v1/events".into(), None, true),
        (&root, Method::GET, "/metrics".into(), None, true),
        (&root, Method::PUT, format!("{v1}/a/events/b"), None, true),
    ];
    for (u, method, path, query, want) in table {
        let a = Attributes::from_request(method, path, *query);
        assert_eq!(
            policy.allows(u, &a),
            *want,
            "{} {method} {path}?{}",
            u.name,
            query.unwrap_or("")
        );
    }
}

#[test]
fn bootstrap_view_edit_roles_cover_events() {
    let policy = RbacPolicy::parse(
        "p.yaml",
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: v}\nsubjects: [{kind: User, name: vic}]\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}\n",
    )
    .unwrap()
    .bootstrap();
    let vic = user("vic", &[]);
    let get = |m: Method, p: &str| policy.allows(&vic, &Attributes::from_request(&m, p, None));
    assert!(get(Method::GET, "/api/v1/events"));
    assert!(get(
        Method::GET,
        "/apis/events.k8s.io/v1/namespaces/a/events"
    ));
    assert!(!get(Method::POST, "/api/v1/namespaces/a/events"));
}

fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.path().join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn malformed_files_name_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = write(&dir, "tokens.csv", "t1,jane,1\nt2,bob\n");
    let e = Auth::new(&AuthOptions {
        token_auth_file: Some(tokens.clone()),
        ..AuthOptions::default()
    })
    .unwrap_err();
    assert!(matches!(e, AuthError::TokenFile(_)));
    assert_eq!(
        e.to_string(),
        format!(
            "{}:2: a token line must have at least 3 columns (token, user name, user uid), found 2",
            tokens.display()
        )
    );

    let cases = [
        // YAML syntax error on line 3.
        ("kind: Role\nmetadata: {name: x\nrules: []\n", 3),
        // A required field (roleRef) missing in the second document, which starts on line 3.
        (
            "kind: ClusterRole\nmetadata: {name: x}\n---\nkind: RoleBinding\nmetadata: {name: b, namespace: a}\nsubjects: []\n",
            4,
        ),
        // A wrong type on line 5.
        (
            "kind: Role\nmetadata: {name: x, namespace: a}\nrules:\n- verbs: [get]\n  resources: 7\n",
            5,
        ),
        // An unknown kind on line 2.
        ("apiVersion: v1\nkind: Pod\nmetadata: {name: x}\n", 2),
    ];
    for (text, line) in cases {
        let rbac = write(&dir, "rbac.yaml", text);
        let e = Auth::new(&AuthOptions {
            token_auth_file: Some(write(&dir, "ok.csv", "t,u,1\n")),
            authorization_rbac_file: Some(rbac.clone()),
            ..AuthOptions::default()
        })
        .unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, AuthError::RbacFile(_)), "{msg}");
        assert!(
            msg.starts_with(&format!("{}:{line}: ", rbac.display())),
            "{text:?} → {msg}"
        );
        assert!(!msg.contains('\n'), "{msg}");
    }
}

#[test]
fn a_client_certificate_names_user_and_groups() {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "cert-user");
    params
        .distinguished_name
        .push(rcgen::DnType::OrganizationName, "team-a");
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    let der = cert.der().clone();
    let chain = VerifiedClientCertificates(Arc::from(vec![der]));

    let auth = Auth::new(&AuthOptions {
        client_certificates: true,
        ..AuthOptions::default()
    })
    .unwrap();
    let mut req = Request::builder()
        .uri("/apis/authentication.k8s.io/v1/selfsubjectreviews")
        .method(Method::POST)
        .body(Body::empty())
        .unwrap();
    req.extensions_mut().insert(chain.clone());
    auth.admit(&mut req)
        .expect("a verified certificate is a user");
    let u = req.extensions().get::<UserInfo>().unwrap();
    assert_eq!(u.name, "cert-user");
    assert_eq!(u.groups, ["team-a", "system:authenticated"]);

    // Without the extension (plain HTTP, no client certificate): 401.
    let mut req = Request::builder()
        .uri("/api/v1/events")
        .body(Body::empty())
        .unwrap();
    assert_eq!(auth.admit(&mut req).unwrap_err().code, 401);

    // Authenticated but not authorized for events: 403.
    let mut req = Request::builder()
        .uri("/api/v1/events")
        .body(Body::empty())
        .unwrap();
    req.extensions_mut().insert(chain.clone());
    let e = auth.admit(&mut req).unwrap_err();
    assert_eq!(e.code, 403);
    assert_eq!(
        e.message,
        r#"events is forbidden: User "cert-user" cannot list resource "events" in API group "" at the cluster scope"#
    );

    // Certificates are ignored when not configured as an authenticator.
    let tokens_only = Auth::new(&AuthOptions {
        anonymous_auth: false,
        token_auth_file: Some({
            let dir = tempfile::tempdir().unwrap();
            let p = write(&dir, "t.csv", "t,u,1\n");
            std::mem::forget(dir);
            p
        }),
        ..AuthOptions::default()
    })
    .unwrap();
    let mut req = Request::builder().uri("/apis").body(Body::empty()).unwrap();
    req.extensions_mut().insert(chain);
    assert_eq!(tokens_only.admit(&mut req).unwrap_err().code, 401);
}

#[test]
fn anonymous_auth_lets_requests_in_as_system_anonymous() {
    let dir = tempfile::tempdir().unwrap();
    let rbac = write(
        &dir,
        "rbac.yaml",
        "kind: ClusterRoleBinding\napiVersion: rbac.authorization.k8s.io/v1\nmetadata: {name: anon-view}\nsubjects: [{kind: Group, name: system:unauthenticated}]\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}\n",
    );
    let auth = Auth::new(&AuthOptions {
        anonymous_auth: true,
        authorization_rbac_file: Some(rbac),
        ..AuthOptions::default()
    })
    .unwrap();
    let mut req = Request::builder()
        .uri("/api/v1/events")
        .body(Body::empty())
        .unwrap();
    auth.admit(&mut req).unwrap();
    assert_eq!(
        req.extensions().get::<UserInfo>(),
        Some(&UserInfo::anonymous())
    );
    let mut req = Request::builder()
        .method(Method::DELETE)
        .uri("/api/v1/namespaces/a/events/x")
        .body(Body::empty())
        .unwrap();
    assert_eq!(
        auth.admit(&mut req).unwrap_err().message,
        r#"events "x" is forbidden: User "system:anonymous" cannot delete resource "events" in API group "" in the namespace "a""#
    );
    // A wrong token is refused even with anonymous access on.
    let mut req = Request::builder()
        .uri("/api/v1/events")
        .header("authorization", "Bearer nope")
        .body(Body::empty())
        .unwrap();
    assert_eq!(auth.admit(&mut req).unwrap_err().code, 401);
}

const GRANT: &str = "kind: ClusterRoleBinding\napiVersion: rbac.authorization.k8s.io/v1\nmetadata: {name: g}\nsubjects: [{kind: User, name: ann}]\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}\n";

async fn next(rx: &mut tokio::sync::watch::Receiver<ReloadStatus>) -> ReloadStatus {
    rx.changed().await.expect("reloader alive");
    rx.borrow_and_update().clone()
}

#[tokio::test(start_paused = true)]
async fn reload_applies_good_changes_and_keeps_the_last_good_rules() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(&dir, "rbac.yaml", "");
    let rules = RbacRules::load(Some(path.clone())).unwrap();
    let ann = user("ann", &[]);
    let list = Attributes::from_request(&Method::GET, "/api/v1/events", None);
    assert!(!rules.current().allows(&ann, &list));

    let stop = CancellationToken::new();
    let task = reload::spawn(rules.clone(), Duration::from_secs(10), stop.clone());
    let mut rx = rules.reloads();

    // A good change is applied (paused time: the poll runs when the test waits).
    std::fs::write(&path, GRANT).unwrap();
    let s = next(&mut rx).await;
    assert_eq!((s.applied, s.failed), (1, 0));
    assert!(rules.current().allows(&ann, &list));

    // A bad change is refused with the file and line; the last good rules stay.
    std::fs::write(&path, "kind: ClusterRoleBinding\nmetadata: [oops\n").unwrap();
    let s = next(&mut rx).await;
    assert_eq!((s.applied, s.failed), (1, 1));
    let why = s.last_error.unwrap();
    assert!(why.starts_with(&format!("{}:", path.display())), "{why}");
    assert!(rules.current().allows(&ann, &list));

    // Emptying the file takes the grant away.
    std::fs::write(&path, "# nothing\n").unwrap();
    let s = next(&mut rx).await;
    assert_eq!((s.applied, s.failed, s.last_error), (2, 1, None));
    assert!(!rules.current().allows(&ann, &list));

    stop.cancel();
    task.await.unwrap();
}
