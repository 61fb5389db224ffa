//! Authentication and RBAC through the real kubectl against a [`Server`] on 127.0.0.1, with
//! a token file and an RBAC file.
//!
//! The server speaks HTTPS with the certificates it generates (kubectl, like client-go's
//! `clientcmd`, sends a kubeconfig's credentials only to an `https://` server); kubectl
//! verifies it with the generated CA.
//!
//! kubectl must be on PATH (CI installs it); a missing kubectl fails these tests. Every
//! kubectl run gets a fresh HOME and cache dir, `--request-timeout=10s`, and a hard 60 s
//! bound on the process.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use herald_server::api::auth::AuthOptions;
use herald_server::api::tls::{ServingCertificate, TlsOptions};
use herald_server::server::{Server, ServerOptions, Transport};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio_rustls::rustls::pki_types::pem::PemObject as _;

const TOKENS: &str = "admin-token,admin,1,system:masters\n\
jane-token,jane,2,\"dev,viewers\"\n\
bob-token,bob,3\n";

const RBAC: &str = r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: event-writer, namespace: prod}
rules:
- apiGroups: ["", "events.k8s.io"]
  resources: [events]
  verbs: [get, list, watch, create, update, patch, delete, deletecollection]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: jane-writes-prod, namespace: prod}
subjects: [{kind: User, name: jane, apiGroup: rbac.authorization.k8s.io}]
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: event-writer}
"#;

const EVENT: &str = "apiVersion: v1
kind: Event
metadata:
  name: e1
  namespace: prod
involvedObject:
  kind: Pod
  name: web-1
  namespace: prod
reason: Started
message: hello from jane
type: Normal
source:
  component: test
";

struct Setup {
    dir: tempfile::TempDir,
    server: Server,
    /// The generated CA (PEM): kubectl and the raw client verify the server with it.
    ca: String,
}

async fn start() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.csv");
    let rbac = dir.path().join("rbac.yaml");
    std::fs::write(&tokens, TOKENS).unwrap();
    std::fs::write(&rbac, RBAC).unwrap();
    let server = Server::start(ServerOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        transport: Transport::Https(TlsOptions::default()),
        auth: AuthOptions {
            token_auth_file: Some(tokens),
            authorization_rbac_file: Some(rbac),
            ..AuthOptions::default()
        },
        ..ServerOptions::default()
    })
    .await
    .expect("server starts");
    let ca = server
        .pki()
        .expect("the HTTPS server made its certificates")
        .ca_cert()
        .to_string();
    Setup { dir, server, ca }
}

struct Output {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn show(o: &Output) -> String {
    format!(
        "rc={:?}\n--- stdout\n{}--- stderr\n{}",
        o.code, o.stdout, o.stderr
    )
}

impl Setup {
    /// A kubeconfig for `token` (`None`: a user without credentials).
    fn kubeconfig(&self, token: Option<&str>) -> PathBuf {
        let name = token.unwrap_or("none");
        let user = match token {
            Some(t) => format!("{{token: {t}}}"),
            // Over HTTPS a user with no credential at all makes kubectl prompt for a user
            // name and password. One with only a user name and password sends HTTP basic
            // auth, which kube-apiserver (since 1.19) and Herald do not take: a request
            // without a credential, as far as the server is concerned.
            None => "{username: nobody, password: secret}".to_string(),
        };
        let p = self.dir.path().join(format!("kubeconfig-{name}"));
        let ca = self.dir.path().join("ca.crt");
        std::fs::write(&ca, &self.ca).unwrap();
        std::fs::write(
            &p,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: herald\n  cluster:\n    server: {url}\n    certificate-authority: {ca}\ncontexts:\n- name: herald\n  context:\n    cluster: herald\n    namespace: default\n    user: u\ncurrent-context: herald\nusers:\n- name: u\n  user: {user}\n",
                url = self.server.url(),
                ca = ca.display(),
            ),
        )
        .unwrap();
        p
    }

    async fn kubectl(&self, token: Option<&str>, args: &[&str]) -> Output {
        let kubeconfig = self.kubeconfig(token);
        let home = self
            .dir
            .path()
            .join(format!("home-{}", token.unwrap_or("none")));
        std::fs::create_dir_all(&home).unwrap();
        let mut cmd = tokio::process::Command::new("kubectl");
        cmd.args(args)
            .arg("--request-timeout=10s")
            .env("HOME", &home)
            .env("KUBECONFIG", &kubeconfig)
            .env("KUBECACHEDIR", home.join("cache"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => panic!("cannot start kubectl (these tests need it on PATH): {e}"),
        };
        let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
            .await
            .unwrap_or_else(|_| panic!("kubectl {args:?} did not finish within 60 s"))
            .expect("kubectl output");
        Output {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// A raw HTTP/1.1 GET over TLS (verifying the server with the CA, no client
    /// certificate); returns the status code and the body.
    async fn get(&self, path: &str, token: Option<&str>) -> (u16, String) {
        use tokio_rustls::rustls;
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls::pki_types::CertificateDer::pem_slice_iter(self.ca.as_bytes()) {
            roots.add(cert.unwrap()).unwrap();
        }
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
        let tcp = tokio::net::TcpStream::connect(self.server.addr())
            .await
            .unwrap();
        let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
        let mut s = tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(name, tcp)
            .await
            .expect("TLS handshake with the server");
        let auth = token
            .map(|t| format!("Authorization: Bearer {t}\r\n"))
            .unwrap_or_default();
        s.write_all(
            format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}Connection: close\r\n\r\n")
                .as_bytes(),
        )
        .await
        .unwrap();
        let mut buf = Vec::new();
        tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut buf))
            .await
            .expect("response within bound")
            .unwrap();
        let text = String::from_utf8_lossy(&buf).into_owned();
        let code = text
            .get(9..12)
            .and_then(|c| c.parse().ok())
            .unwrap_or_else(|| panic!("not an HTTP response: {text}"));
        let body = text
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_string())
            .unwrap_or_default();
        (code, body)
    }
}

#[tokio::test]
async fn a_user_bound_to_one_namespace_works_there_and_is_forbidden_elsewhere() {
    let s = start().await;
    let file = s.dir.path().join("event.yaml");
    std::fs::write(&file, EVENT).unwrap();
    let file = file.to_str().unwrap();

    let o = s.kubectl(Some("jane-token"), &["create", "-f", file]).await;
    assert_eq!(o.code, Some(0), "{}", show(&o));
    assert!(o.stdout.contains("event/e1 created"), "{}", show(&o));

    let o = s
        .kubectl(Some("jane-token"), &["get", "events", "-n", "prod"])
        .await;
    assert_eq!(o.code, Some(0), "{}", show(&o));
    assert!(o.stdout.contains("hello from jane"), "{}", show(&o));

    let o = s
        .kubectl(
            Some("jane-token"),
            &[
                "get",
                "events.events.k8s.io",
                "e1",
                "-n",
                "prod",
                "-o",
                "name",
            ],
        )
        .await;
    assert_eq!(o.code, Some(0), "{}", show(&o));

    let o = s
        .kubectl(Some("jane-token"), &["get", "events", "-n", "dev"])
        .await;
    assert_eq!(o.code, Some(1), "{}", show(&o));
    assert!(
        o.stderr.contains(r#"Error from server (Forbidden): events is forbidden: User "jane" cannot list resource "events" in API group "" in the namespace "dev""#),
        "{}",
        show(&o)
    );

    let o = s
        .kubectl(Some("jane-token"), &["get", "events", "-A"])
        .await;
    assert_eq!(o.code, Some(1), "{}", show(&o));
    assert!(
        o.stderr.contains(r#"events is forbidden: User "jane" cannot list resource "events" in API group "" at the cluster scope"#),
        "{}",
        show(&o)
    );

    // bob is authenticated but bound to nothing.
    let o = s
        .kubectl(Some("bob-token"), &["delete", "event", "e1", "-n", "prod"])
        .await;
    assert_eq!(o.code, Some(1), "{}", show(&o));
    assert!(
        o.stderr.contains(r#"events "e1" is forbidden: User "bob" cannot delete resource "events" in API group "" in the namespace "prod""#),
        "{}",
        show(&o)
    );

    // system:masters may do anything.
    let o = s
        .kubectl(Some("admin-token"), &["get", "events", "-A"])
        .await;
    assert_eq!(o.code, Some(0), "{}", show(&o));
    assert!(o.stdout.contains("hello from jane"), "{}", show(&o));

    let o = s
        .kubectl(Some("jane-token"), &["delete", "event", "e1", "-n", "prod"])
        .await;
    assert_eq!(o.code, Some(0), "{}", show(&o));
    s.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn can_i_and_whoami_answer() {
    let s = start().await;
    let o = s
        .kubectl(
            Some("jane-token"),
            &["auth", "can-i", "list", "events", "-n", "prod"],
        )
        .await;
    assert_eq!((o.code, o.stdout.trim()), (Some(0), "yes"), "{}", show(&o));
    let o = s
        .kubectl(
            Some("jane-token"),
            &["auth", "can-i", "list", "events", "-n", "dev"],
        )
        .await;
    assert_eq!((o.code, o.stdout.trim()), (Some(1), "no"), "{}", show(&o));
    let o = s
        .kubectl(
            Some("jane-token"),
            &[
                "auth",
                "can-i",
                "create",
                "events.events.k8s.io",
                "-n",
                "prod",
            ],
        )
        .await;
    assert_eq!((o.code, o.stdout.trim()), (Some(0), "yes"), "{}", show(&o));
    let o = s
        .kubectl(
            Some("admin-token"),
            &["auth", "can-i", "delete", "events", "-A"],
        )
        .await;
    assert_eq!((o.code, o.stdout.trim()), (Some(0), "yes"), "{}", show(&o));
    let o = s
        .kubectl(Some("jane-token"), &["auth", "can-i", "get", "/metrics"])
        .await;
    assert_eq!((o.code, o.stdout.trim()), (Some(1), "no"), "{}", show(&o));

    let o = s.kubectl(Some("jane-token"), &["auth", "whoami"]).await;
    assert_eq!(o.code, Some(0), "{}", show(&o));
    let line = |key: &str| {
        o.stdout
            .lines()
            .find(|l| l.starts_with(key))
            .map(|l| l[key.len()..].trim().to_string())
            .unwrap_or_else(|| panic!("no {key} in {}", show(&o)))
    };
    assert_eq!(line("Username"), "jane");
    assert_eq!(line("UID"), "2");
    assert_eq!(line("Groups"), "[dev viewers system:authenticated]");

    let o = s
        .kubectl(
            Some("jane-token"),
            &["auth", "can-i", "--list", "-n", "prod"],
        )
        .await;
    assert_eq!(o.code, Some(0), "{}", show(&o));
    assert!(o.stdout.contains("events "), "{}", show(&o));
    s.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn no_credential_and_a_wrong_token_are_unauthorized() {
    let s = start().await;
    // kubectl's words for a 401: the Status message, or, where its discovery client met the
    // 401 first, "the server has asked for the client to provide credentials".
    for token in [None, Some("wrong-token")] {
        for args in [&["get", "events"][..], &["auth", "whoami"]] {
            let o = s.kubectl(token, args).await;
            assert_eq!(o.code, Some(1), "{}", show(&o));
            let last = o.stderr.lines().last().unwrap_or("");
            assert!(
                last == "error: You must be logged in to the server (Unauthorized)"
                    || last
                        == "error: You must be logged in to the server (the server has asked for the client to provide credentials)",
                "{token:?} {args:?}: {}",
                show(&o)
            );
        }
    }
    let (code, body) = s.get("/api/v1/events", Some("wrong-token")).await;
    assert_eq!(code, 401);
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        v,
        serde_json::json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401})
    );
    s.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn health_and_version_are_open_metrics_is_not() {
    let s = start().await;
    for path in [
        "/healthz",
        "/livez",
        "/readyz",
        "/readyz/storage",
        "/version",
    ] {
        assert_eq!(s.get(path, None).await.0, 200, "{path}");
        // A bad credential does not close them either.
        assert_eq!(s.get(path, Some("wrong")).await.0, 200, "{path}");
    }
    assert_eq!(s.get("/metrics", None).await.0, 401);
    assert_eq!(s.get("/api", None).await.0, 401);
    let (code, body) = s.get("/metrics", Some("jane-token")).await;
    assert_eq!(code, 403);
    assert!(
        body.contains(r#"forbidden: User \"jane\" cannot get path \"/metrics\""#),
        "{body}"
    );
    let (code, body) = s.get("/metrics", Some("admin-token")).await;
    assert_eq!(code, 200, "{body}");
    // Discovery is open to every authenticated user.
    assert_eq!(s.get("/apis", Some("bob-token")).await.0, 200);
    s.server.shutdown().await.unwrap();
}

/// A CA, a serving certificate for 127.0.0.1 and a client certificate for `CN=jane, O=dev`
/// (PEM: CA, serving cert, serving key, client cert, client key).
fn client_certificate_pki() -> [String; 5] {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    };
    let ca_key = KeyPair::generate().unwrap();
    let ca_params = || {
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.distinguished_name.push(DnType::CommonName, "test-ca");
        p
    };
    let ca = ca_params().self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params(), &ca_key);
    let serving_key = KeyPair::generate().unwrap();
    let serving = CertificateParams::new(vec!["127.0.0.1".to_string()])
        .unwrap()
        .signed_by(&serving_key, &issuer)
        .unwrap();
    let mut client = CertificateParams::new(Vec::<String>::new()).unwrap();
    client.distinguished_name.push(DnType::CommonName, "jane");
    client
        .distinguished_name
        .push(DnType::OrganizationName, "dev");
    client.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let client_key = KeyPair::generate().unwrap();
    let client = client.signed_by(&client_key, &issuer).unwrap();
    [
        ca.pem(),
        serving.pem(),
        serving_key.serialize_pem(),
        client.pem(),
        client_key.serialize_pem(),
    ]
}

/// kubectl with a client certificate (`--client-ca-file`, own serving certificate): CN is
/// the user, O the groups; RBAC applies to it as to a token's user.
#[tokio::test]
async fn a_client_certificate_user_is_bound_like_a_token_user() {
    let dir = tempfile::tempdir().unwrap();
    let [ca, serving, serving_key, client, client_key] = client_certificate_pki();
    let file = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let ca_file = file("ca.crt", &ca);
    let server = Server::start(ServerOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        transport: Transport::Https(TlsOptions {
            serving: ServingCertificate::Files {
                cert_file: file("serving.crt", &serving),
                key_file: file("serving.key", &serving_key),
            },
            client_ca_file: Some(ca_file.clone()),
        }),
        auth: AuthOptions {
            authorization_rbac_file: Some(file("rbac.yaml", RBAC)),
            ..AuthOptions::default()
        },
        ..ServerOptions::default()
    })
    .await
    .expect("server starts");
    let kubeconfig = file(
        "kubeconfig",
        &format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: herald\n  cluster:\n    server: {url}\n    certificate-authority: {ca}\ncontexts:\n- name: herald\n  context:\n    cluster: herald\n    namespace: prod\n    user: jane\ncurrent-context: herald\nusers:\n- name: jane\n  user:\n    client-certificate: {cert}\n    client-key: {key}\n",
            url = server.url(),
            ca = ca_file.display(),
            cert = file("jane.crt", &client).display(),
            key = file("jane.key", &client_key).display(),
        ),
    );
    let event = file("event.yaml", EVENT);
    let kubectl = |args: &[&str]| {
        let mut cmd = tokio::process::Command::new("kubectl");
        cmd.args(args)
            .arg("--request-timeout=10s")
            .env("HOME", dir.path())
            .env("KUBECONFIG", &kubeconfig)
            .env("KUBECACHEDIR", dir.path().join("cache"))
            .stdin(Stdio::null())
            .kill_on_drop(true);
        async move {
            let out = tokio::time::timeout(Duration::from_secs(60), cmd.output())
                .await
                .expect("kubectl finishes within 60 s")
                .expect("kubectl runs (it must be on PATH)");
            Output {
                code: out.status.code(),
                stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            }
        }
    };

    let o = kubectl(&["create", "-f", event.to_str().unwrap()]).await;
    assert_eq!(o.code, Some(0), "{}", show(&o));
    assert!(o.stdout.contains("event/e1 created"), "{}", show(&o));
    let o = kubectl(&["get", "events", "-n", "prod"]).await;
    assert_eq!(o.code, Some(0), "{}", show(&o));
    assert!(o.stdout.contains("hello from jane"), "{}", show(&o));
    let o = kubectl(&["get", "events", "-n", "dev"]).await;
    assert_eq!(o.code, Some(1), "{}", show(&o));
    assert!(
        o.stderr.contains(r#"Error from server (Forbidden): events is forbidden: User "jane" cannot list resource "events" in API group "" in the namespace "dev""#),
        "{}",
        show(&o)
    );
    let o = kubectl(&["auth", "whoami", "-o", "json"]).await;
    assert_eq!(o.code, Some(0), "{}", show(&o));
    let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(v["status"]["userInfo"]["username"], "jane", "{v}");
    assert_eq!(
        v["status"]["userInfo"]["groups"],
        serde_json::json!(["dev", "system:authenticated"]),
        "{v}"
    );
    server.shutdown().await.unwrap();
}
