//! `herald kubeconfig`: a kubeconfig that points kubectl (and the client commands) at a
//! herald server. It is written by the YAML serializer, so any `--name` reads back as
//! itself, and `--server` is checked like `-s`, so the file never holds a URL that the
//! clients cannot use.

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
}

/// No credentials: herald-server does not authenticate.
#[derive(Serialize)]
struct User {
    user: Empty,
}

#[derive(Serialize)]
struct Empty {}

#[derive(Serialize)]
struct Context<'a> {
    context: ContextRef<'a>,
}

#[derive(Serialize)]
struct ContextRef<'a> {
    cluster: &'a str,
    user: &'a str,
}

/// The kubeconfig text for `args`; a usage error for a server URL the clients could not
/// use or an empty name.
pub fn render(args: &KubeconfigArgs) -> anyhow::Result<String> {
    crate::connect::parse_server(&args.server)?;
    if args.name.is_empty() {
        crate::usage::usage_bail!("--name must not be empty");
    }
    let name = args.name.as_str();
    let file = File {
        api_version: "v1",
        kind: "Config",
        clusters: [Named {
            name,
            value: Cluster {
                cluster: Server {
                    server: &args.server,
                },
            },
        }],
        users: [Named {
            name,
            value: User { user: Empty {} },
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
            let text = render(&args("https://10.0.0.1:6443", name)).unwrap();
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
            assert_eq!(config.cluster_url.to_string(), "https://10.0.0.1:6443/");
        }
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
