//! `herald kubeconfig`: a kubeconfig that points kubectl (and the client commands) at a
//! herald server. For an `https://` server it carries the server's CA
//! (`certificate-authority-data`) and the admin client certificate
//! (`client-certificate-data`, `client-key-data`), read from `<data>/pki` where `herald
//! serve` made them; for an `http://` one (`--insecure-plain-http`) no credentials. It is
//! written by the YAML serializer, so any `--name` reads back as itself, and `--server` is
//! checked like `-s`, so the file never holds a URL that the clients cannot use.

use std::path::PathBuf;

use base64::Engine as _;
use herald_server::api::tls::pki::{AdminCredentials, PKI_DIR};
use serde::Serialize;

/// Arguments of `herald kubeconfig`.
#[derive(Debug, clap::Args)]
pub struct KubeconfigArgs {
    /// The server's URL, with its scheme (http:// or https://).
    #[arg(long, default_value = crate::connect::DEFAULT_SERVER)]
    pub server: String,
    /// Name of the cluster, user and context in the kubeconfig.
    #[arg(long, default_value = "herald")]
    pub name: String,
    /// The server's data directory, whose pki/ holds the CA and the admin credential
    /// (read for an https:// server).
    #[arg(long, default_value = crate::DEFAULT_DATA, env = "HERALD_DATA")]
    pub data: PathBuf,
}

#[derive(Serialize)]
struct File<'a> {
    #[serde(rename = "apiVersion")]
    api_version: &'a str,
    kind: &'a str,
    clusters: [Named<'a, Cluster<'a>>; 1],
    users: [Named<'a, User>; 1],
    contexts: [Named<'a, Context<'a>>; 1],
    #[serde(rename = "current-context")]
    current_context: &'a str,
}

/// A `- name: …` entry of one of the kubeconfig's lists.
#[derive(Serialize)]
struct Named<'a, T> {
    name: &'a str,
    #[serde(flatten)]
    value: T,
}

#[derive(Serialize)]
struct Cluster<'a> {
    cluster: Server<'a>,
}

#[derive(Serialize)]
struct Server<'a> {
    server: &'a str,
    #[serde(
        rename = "certificate-authority-data",
        skip_serializing_if = "Option::is_none"
    )]
    certificate_authority_data: Option<String>,
}

#[derive(Serialize)]
struct User {
    user: Credentials,
}

/// The admin client certificate, or nothing (plain HTTP).
#[derive(Serialize)]
struct Credentials {
    #[serde(
        rename = "client-certificate-data",
        skip_serializing_if = "Option::is_none"
    )]
    client_certificate_data: Option<String>,
    #[serde(rename = "client-key-data", skip_serializing_if = "Option::is_none")]
    client_key_data: Option<String>,
}

#[derive(Serialize)]
struct Context<'a> {
    context: ContextRef<'a>,
}

#[derive(Serialize)]
struct ContextRef<'a> {
    cluster: &'a str,
    user: &'a str,
}

/// The kubeconfig text for `args`: with the credentials of `<data>/pki` for an `https://`
/// server. A usage error for a server URL the clients could not use or an empty name; a
/// one-line error saying what to do when the credentials cannot be read.
pub fn render(args: &KubeconfigArgs) -> anyhow::Result<String> {
    let uri = crate::connect::parse_server(&args.server)?;
    let credentials = if uri.scheme_str() == Some("https") {
        let dir = args.data.join(PKI_DIR);
        Some(AdminCredentials::read(&dir).map_err(|e| {
            let e = anyhow::Error::new(e);
            anyhow::anyhow!(
                "{e:#}: the CA and admin credential are made by `herald serve` at its first start; start it once, or pass the --data directory it uses"
            )
        })?)
    } else {
        None
    };
    render_for(&args.server, &args.name, credentials.as_ref())
}

/// The kubeconfig text for `server`, with `credentials` (the CA and the admin client
/// certificate) when given.
pub fn render_for(
    server: &str,
    name: &str,
    credentials: Option<&AdminCredentials>,
) -> anyhow::Result<String> {
    crate::connect::parse_server(server)?;
    if name.is_empty() {
        crate::usage::usage_bail!("--name must not be empty");
    }
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let file = File {
        api_version: "v1",
        kind: "Config",
        clusters: [Named {
            name,
            value: Cluster {
                cluster: Server {
                    server,
                    certificate_authority_data: credentials.map(|c| b64(&c.ca_cert)),
                },
            },
        }],
        users: [Named {
            name,
            value: User {
                user: Credentials {
                    client_certificate_data: credentials.map(|c| b64(&c.client_cert)),
                    client_key_data: credentials.map(|c| b64(&c.client_key)),
                },
            },
        }],
        contexts: [Named {
            name,
            value: Context {
                context: ContextRef {
                    cluster: name,
                    user: name,
                },
            },
        }],
        current_context: name,
    };
    serde_saphyr::to_string(&file)
        .map_err(|e| anyhow::anyhow!("cannot write the kubeconfig as YAML: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::usage::UsageError;

    fn args(server: &str, name: &str) -> KubeconfigArgs {
        KubeconfigArgs {
            server: server.into(),
            name: name.into(),
            data: "/nonexistent".into(),
        }
    }

    #[test]
    fn points_at_the_server() {
        let k = render(&args("http://127.0.0.1:7443", "h")).unwrap();
        assert!(k.contains("server: http://127.0.0.1:7443\n"), "{k}");
        assert!(k.contains("current-context: h\n"), "{k}");
    }

    /// Names YAML would otherwise read as something else come back as written, through
    /// kube's own kubeconfig loading.
    #[tokio::test]
    async fn any_name_reads_back_as_itself() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["a: b", "#x", "- y", "'q\"", "yes", "1.0", "{z}", "  pad "] {
            let text = render(&args("http://10.0.0.1:6443", name)).unwrap();
            let kc = kube::config::Kubeconfig::from_yaml(&text)
                .unwrap_or_else(|e| panic!("{name:?}: {e}\n{text}"));
            assert_eq!(kc.current_context.as_deref(), Some(name), "{text}");
            assert_eq!(kc.clusters[0].name, name, "{text}");
            assert_eq!(kc.auth_infos[0].name, name, "{text}");
            let ctx = kc.contexts[0].context.as_ref().unwrap();
            assert_eq!(
                (ctx.cluster.as_str(), ctx.user.as_deref()),
                (name, Some(name))
            );
            let path = dir.path().join("kc");
            std::fs::write(&path, &text).unwrap();
            let config = crate::connect::load_config(Some(&path), None, None)
                .await
                .unwrap_or_else(|e| panic!("{name:?}: {e:#}\n{text}"));
            assert_eq!(config.cluster_url.to_string(), "http://10.0.0.1:6443/");
        }
    }

    /// An https:// server's kubeconfig carries the CA and the admin credential of the data
    /// directory, and kube reads them back.
    #[tokio::test]
    async fn https_carries_the_data_directorys_credentials() {
        let dir = tempfile::tempdir().unwrap();
        let pki = herald_server::api::tls::pki::Pki::load_or_create(
            &dir.path().join(PKI_DIR),
            "127.0.0.1".parse().unwrap(),
        )
        .unwrap();
        let mut a = args("https://127.0.0.1:7443", "h");
        a.data = dir.path().to_path_buf();
        let text = render(&a).unwrap();
        let kc = kube::config::Kubeconfig::from_yaml(&text).unwrap();
        let cluster = kc.clusters[0].cluster.as_ref().unwrap();
        let ca = base64::engine::general_purpose::STANDARD
            .decode(cluster.certificate_authority_data.as_deref().unwrap())
            .unwrap();
        assert_eq!(ca, pki.ca_cert().as_bytes());
        let user = kc.auth_infos[0].auth_info.as_ref().unwrap();
        let cert = base64::engine::general_purpose::STANDARD
            .decode(user.client_certificate_data.as_deref().unwrap())
            .unwrap();
        assert_eq!(cert, pki.admin().client_cert.as_bytes());
        assert!(user.client_key_data.is_some());

        a.data = dir.path().join("elsewhere");
        let e = render(&a).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!(
                "cannot read {}: ",
                dir.path().join("elsewhere/pki/ca.crt").display()
            )),
            "{e}"
        );
        assert!(
            e.ends_with("start it once, or pass the --data directory it uses"),
            "{e}"
        );
        // Plain http: no credentials, none needed.
        let plain = render(&args("http://127.0.0.1:7443", "h")).unwrap();
        assert!(!plain.contains("-data"), "{plain}");
    }

    #[test]
    fn a_server_without_a_scheme_or_a_name_is_a_usage_error() {
        let e = render(&args("127.0.0.1:17100", "herald")).unwrap_err();
        assert!(e.is::<UsageError>(), "{e:#}");
        assert!(
            e.to_string()
                .contains("use a value like http://127.0.0.1:6443"),
            "{e:#}"
        );
        assert!(
            render(&args("http://127.0.0.1:1", ""))
                .unwrap_err()
                .is::<UsageError>()
        );
    }
}
