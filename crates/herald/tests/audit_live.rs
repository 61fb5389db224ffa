//! The audit log of `herald serve --audit-log-path`, read back after the real kubectl used a
//! server over HTTPS with a token file and RBAC: who deleted an event, and who tried what
//! they may not (403) or without a valid credential (401).
//!
//! kubectl must be on PATH (a missing kubectl fails). Every wait is bounded; the log is read
//! after SIGTERM, once the server has written every queued line and exited.

mod support;

use std::path::Path;

use support::{Herald, Kubectl, core_event};

const TOKENS: &str = "jane-token-s3cret,jane,1001,\"dev\"\n";

const RBAC: &str = r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: jane, namespace: prod}
subjects: [{kind: User, name: jane, apiGroup: rbac.authorization.k8s.io}]
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: edit}
"#;

fn utf8(p: &Path) -> &str {
    p.to_str().expect("utf-8 temp path")
}

/// kubectl as the holder of `token`, trusting the server's generated CA.
fn kubectl_with_token(server: &Herald, data: &Path, token: &str) -> Kubectl {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: h\n  cluster:\n    server: {}\n    certificate-authority: {}\ncontexts:\n- name: h\n  context: {{cluster: h, user: u, namespace: prod}}\ncurrent-context: h\nusers:\n- name: u\n  user: {{token: {token}}}\n",
            server.url,
            utf8(&data.join("pki").join("ca.crt")),
        ),
    )
    .unwrap();
    Kubectl::using(dir, kubeconfig)
}

fn lines(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_delete_by_jane_and_the_refused_attempts_are_in_the_audit_log() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let tokens = dir.path().join("tokens.csv");
    let rbac = dir.path().join("rbac.yaml");
    let audit = dir.path().join("logs").join("audit.log");
    std::fs::write(&tokens, TOKENS).unwrap();
    std::fs::write(&rbac, RBAC).unwrap();
    let mut server = Herald::start_https(&[
        "--data",
        utf8(&data),
        "--token-auth-file",
        utf8(&tokens),
        "--authorization-rbac-file",
        utf8(&rbac),
        "--audit-log-path",
        utf8(&audit),
    ])
    .await;
    let jane = kubectl_with_token(&server, &data, "jane-token-s3cret");
    let manifest = jane.write(
        "x.yaml",
        &core_event("x", "web-1", "Normal", "Started", "hello").replace("default", "prod"),
    );
    let o = jane.run(&["create", "-f", &manifest]).await;
    assert_eq!(o.ok(), "event/x created\n", "{}", o.show());
    // -v=8 prints the response headers: the Audit-Id of the DELETE is the line's auditID.
    let deleted = jane.run(&["delete", "event", "x", "-v=8"]).await;
    assert_eq!(deleted.ok(), "event \"x\" deleted\n", "{}", deleted.show());
    // Elsewhere jane may not (403)…
    let o = jane.run(&["get", "events", "-n", "default"]).await;
    assert!(o.failed().contains("forbidden"), "{}", o.show());
    // …and a wrong token is nobody (401).
    let stranger = kubectl_with_token(&server, &data, "wrong-t0ken");
    let o = stranger
        .run(&["get", "--raw", "/api/v1/namespaces/prod/events"])
        .await;
    assert!(o.failed().contains("Unauthorized"), "{}", o.show());
    let status = server.terminate().await;
    assert!(status.success(), "{status:?}: {}", server.logs.text());

    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&audit).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
    let text = std::fs::read_to_string(&audit).unwrap();
    for secret in ["jane-token-s3cret", "wrong-t0ken", "Bearer"] {
        assert!(
            !text.contains(secret),
            "a credential in the audit log: {text}"
        );
    }
    let events = lines(&audit);
    for e in &events {
        assert_eq!(e["kind"], "Event", "{e}");
        assert_eq!(e["apiVersion"], "audit.k8s.io/v1", "{e}");
        assert_eq!(e["level"], "Metadata", "{e}");
        assert!(
            !e["requestURI"].as_str().unwrap().starts_with("/readyz"),
            "{e}"
        );
    }

    let delete = events
        .iter()
        .find(|e| e["verb"] == "delete")
        .unwrap_or_else(|| panic!("no delete in the audit log:\n{text}"));
    assert_eq!(delete["stage"], "ResponseComplete", "{delete}");
    // kubectl adds its --request-timeout.
    assert_eq!(
        delete["requestURI"], "/api/v1/namespaces/prod/events/x?timeout=10s",
        "{delete}"
    );
    assert_eq!(delete["user"]["username"], "jane", "{delete}");
    assert_eq!(delete["user"]["uid"], "1001", "{delete}");
    assert_eq!(
        delete["user"]["groups"],
        serde_json::json!(["dev", "system:authenticated"]),
        "{delete}"
    );
    assert_eq!(
        delete["objectRef"],
        serde_json::json!({"resource": "events", "namespace": "prod", "name": "x", "apiVersion": "v1"}),
        "{delete}"
    );
    assert_eq!(
        delete["responseStatus"],
        serde_json::json!({"metadata": {}, "code": 200}),
        "{delete}"
    );
    assert_eq!(
        delete["sourceIPs"],
        serde_json::json!(["127.0.0.1"]),
        "{delete}"
    );
    assert!(
        delete["userAgent"]
            .as_str()
            .unwrap()
            .starts_with("kubectl/"),
        "{delete}"
    );
    assert_eq!(
        delete["annotations"]["authorization.k8s.io/decision"], "allow",
        "{delete}"
    );
    assert_eq!(
        delete["annotations"]["authorization.k8s.io/reason"],
        r#"RBAC: allowed by RoleBinding "jane/prod" of ClusterRole "edit" to User "jane""#,
        "{delete}"
    );
    let id = delete["auditID"].as_str().unwrap();
    assert_eq!(id.len(), 36, "a UUID: {delete}");
    assert!(
        deleted.stderr.contains(id),
        "the DELETE's Audit-Id header is {id}:\n{}",
        deleted.stderr
    );
    assert!(
        delete["requestReceivedTimestamp"].as_str().unwrap()
            <= delete["stageTimestamp"].as_str().unwrap(),
        "{delete}"
    );

    let forbidden = events
        .iter()
        .find(|e| e["responseStatus"]["code"] == 403)
        .unwrap_or_else(|| panic!("no 403 in the audit log:\n{text}"));
    assert_eq!(forbidden["verb"], "list", "{forbidden}");
    assert_eq!(forbidden["user"]["username"], "jane", "{forbidden}");
    assert_eq!(
        forbidden["objectRef"]["namespace"], "default",
        "{forbidden}"
    );
    assert_eq!(
        forbidden["responseStatus"]["status"], "Failure",
        "{forbidden}"
    );
    assert_eq!(
        forbidden["responseStatus"]["reason"], "Forbidden",
        "{forbidden}"
    );
    assert_eq!(
        forbidden["responseStatus"]["message"],
        r#"events is forbidden: User "jane" cannot list resource "events" in API group "" in the namespace "default""#,
        "{forbidden}"
    );
    assert_eq!(
        forbidden["annotations"]["authorization.k8s.io/decision"], "forbid",
        "{forbidden}"
    );
    assert_eq!(
        forbidden["annotations"]["authorization.k8s.io/reason"], "",
        "{forbidden}"
    );

    let refused = events
        .iter()
        .find(|e| e["responseStatus"]["code"] == 401)
        .unwrap_or_else(|| panic!("no 401 in the audit log:\n{text}"));
    assert_eq!(refused["stage"], "ResponseStarted", "{refused}");
    assert_eq!(refused["user"], serde_json::json!({}), "{refused}");
    assert_eq!(refused["verb"], "list", "{refused}");
    assert!(
        refused["requestURI"]
            .as_str()
            .unwrap()
            .starts_with("/api/v1/namespaces/prod/events"),
        "{refused}"
    );
    assert_eq!(
        refused["sourceIPs"],
        serde_json::json!(["127.0.0.1"]),
        "{refused}"
    );
    assert_eq!(
        refused["responseStatus"]["message"], "Authentication failed, attempted: bearer",
        "{refused}"
    );
    assert_eq!(
        refused["responseStatus"]["reason"], "Unauthorized",
        "{refused}"
    );
    assert!(refused.get("annotations").is_none(), "{refused}");
}

/// An audit path herald cannot create is a one-line start-up error naming it.
#[tokio::test]
async fn an_unwritable_audit_path_is_a_one_line_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("not-a-dir");
    std::fs::write(&blocker, b"").unwrap();
    let path = blocker.join("audit.log");
    let lines = support::serve_refused(&[
        "--insecure-plain-http",
        "--store",
        "memory",
        "--listen",
        "127.0.0.1:0",
        "--audit-log-path",
        utf8(&path),
    ])
    .await;
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains(&format!("cannot open the audit log {}", path.display())),
        "{lines:?}"
    );
    assert!(lines[0].contains("--audit-log-path"), "{lines:?}");
}
