//! Reaching the API server the way kubectl does: kube's own kubeconfig loading (`KUBECONFIG`,
//! `~/.kube/config`, `--kubeconfig`, `--context`), `-s/--server` to override the URL, and the
//! namespace from `-n` or the context. So every command works the same against
//! herald-server and against a real cluster.
//!
//! Without any kubeconfig (and outside a cluster) the commands talk to
//! [`DEFAULT_SERVER`], where `herald serve` listens by default.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::usage::{UsageError, usage_bail};

/// Where `herald serve` listens by default; used when there is no kubeconfig at all.
pub const DEFAULT_SERVER: &str = "http://127.0.0.1:6443";

/// How long opening a connection may take before a command gives up on the server.
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The connection flags every client command shares.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ConnectArgs {
    /// Kubeconfig file [default: $KUBECONFIG, else ~/.kube/config; without either,
    /// http://127.0.0.1:6443]
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context to use [default: the current context]
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// API server URL, overriding the kubeconfig's (e.g. http://127.0.0.1:6443)
    #[arg(short = 's', long, value_name = "URL")]
    pub server: Option<String>,
    /// Namespace [default: the context's namespace, else "default"]
    #[arg(short = 'n', long, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
}

/// A client for the chosen server, and what messages need to know about it.
#[derive(Clone)]
pub struct Connection {
    /// The kube client (auth, TLS and timeouts from the kubeconfig).
    pub client: kube::Client,
    /// `-n`, else the context's namespace, else `default`.
    pub namespace: String,
    /// `host:port` of the server, for messages.
    pub server: String,
    loopback: bool,
}

impl ConnectArgs {
    /// The kube configuration these flags select, without contacting the server.
    pub async fn config(&self) -> anyhow::Result<kube::Config> {
        load_config(
            self.kubeconfig.as_deref(),
            self.context.as_deref(),
            self.server.as_deref(),
        )
        .await
    }

    /// Builds the client and checks the server answers `/version`, so an unreachable
    /// server is one clear line before any work starts.
    pub async fn connect(&self) -> anyhow::Result<Connection> {
        let mut config = self.config().await?;
        if let Some(ns) = &self.namespace {
            if !herald_core::naming::is_dns1123_label(ns) {
                usage_bail!(
                    "-n {ns:?} is not a namespace name (lowercase letters, digits and '-', at most 63)"
                );
            }
            config.default_namespace.clone_from(ns);
        }
        let conn = Connection::new(config)?;
        conn.probe().await?;
        Ok(conn)
    }
}

impl Connection {
    /// A connection for `config` (no request is made).
    pub fn new(mut config: kube::Config) -> anyhow::Result<Connection> {
        config.connect_timeout = Some(CONNECT_TIMEOUT);
        let server = host_port(&config.cluster_url);
        let loopback = is_loopback(&config.cluster_url);
        let namespace = config.default_namespace.clone();
        let client = kube::Client::try_from(config)
            .with_context(|| format!("cannot set up a client for {server}"))?;
        Ok(Connection {
            client,
            namespace,
            server,
            loopback,
        })
    }

    /// Asks the server for `/version`.
    pub async fn probe(&self) -> anyhow::Result<()> {
        match self.client.apiserver_version().await {
            Ok(_) => Ok(()),
            Err(e) => Err(self.explain(e)),
        }
    }

    /// Turns a kube error into the one line a user can act on.
    pub fn explain(&self, err: kube::Error) -> anyhow::Error {
        let server = &self.server;
        match err {
            kube::Error::Api(status) => {
                let hint = match status.code {
                    401 => ": check the kubeconfig's credentials",
                    403 => ": the kubeconfig's user is not allowed to do this",
                    _ => "",
                };
                anyhow::anyhow!(
                    "{server} answered {} {}: {}{hint}",
                    status.code,
                    status.reason,
                    status.message
                )
            }
            kube::Error::Auth(e) => {
                anyhow::anyhow!("cannot authenticate to {server}: {e}: check the kubeconfig's user")
            }
            other if self.loopback => {
                tracing::debug!(error = %other, "server unreachable");
                anyhow::anyhow!("cannot reach {server}: is `herald serve` running?")
            }
            other => anyhow::anyhow!(
                "cannot reach {server}: {}: check the kubeconfig's server and your network",
                root_cause(&other)
            ),
        }
    }
}

/// The innermost message of an error chain (where "connection refused" lives).
fn root_cause(err: &(dyn std::error::Error + 'static)) -> String {
    let mut e = err;
    while let Some(next) = e.source() {
        e = next;
    }
    e.to_string()
}

/// Loads the kube configuration: `path` (or `KUBECONFIG` / `~/.kube/config` when present),
/// else the in-cluster service account, else [`DEFAULT_SERVER`]; then `server` overrides
/// the URL.
pub async fn load_config(
    path: Option<&Path>,
    context: Option<&str>,
    server: Option<&str>,
) -> anyhow::Result<kube::Config> {
    let options = KubeConfigOptions {
        context: context.map(str::to_string),
        ..KubeConfigOptions::default()
    };
    let mut config = if let Some(path) = path {
        let kc = Kubeconfig::read_from(path)
            .with_context(|| format!("cannot read kubeconfig {}", path.display()))?;
        kube::Config::from_custom_kubeconfig(kc, &options)
            .await
            .map_err(|e| kubeconfig_error(e, &path.display().to_string(), context))?
    } else if kubeconfig_present() {
        kube::Config::from_kubeconfig(&options)
            .await
            .map_err(|e| kubeconfig_error(e, "from $KUBECONFIG or ~/.kube/config", context))?
    } else if let Some(ctx) = context {
        usage_bail!("--context {ctx}: there is no kubeconfig (set KUBECONFIG or pass --kubeconfig)")
    } else if let Ok(c) = kube::Config::incluster() {
        c
    } else {
        kube::Config::new(
            DEFAULT_SERVER
                .parse()
                .unwrap_or_else(|_| unreachable!("the default server URL is valid")),
        )
    };
    if let Some(s) = server {
        config.cluster_url = parse_server(s)?;
    }
    Ok(config)
}

fn kubeconfig_error(
    err: kube::config::KubeconfigError,
    which: &str,
    context: Option<&str>,
) -> anyhow::Error {
    use kube::config::KubeconfigError as E;
    match (&err, context) {
        (E::LoadContext(_), Some(ctx)) => UsageError(format!(
            "--context {ctx}: no such context in the kubeconfig {which}"
        ))
        .into(),
        _ => anyhow::anyhow!("cannot use the kubeconfig {which}: {err}"),
    }
}

/// True when `KUBECONFIG` names something or `~/.kube/config` exists: then a broken
/// kubeconfig is an error rather than a reason to fall back to the default server.
fn kubeconfig_present() -> bool {
    if std::env::var_os("KUBECONFIG").is_some_and(|v| !v.is_empty()) {
        return true;
    }
    std::env::var_os("HOME")
        .map(|h| PathBuf::from(h).join(".kube").join("config"))
        .is_some_and(|p| p.exists())
}

/// Parses `--server`: an absolute http(s) URL.
pub fn parse_server(s: &str) -> anyhow::Result<http::Uri> {
    let uri: http::Uri = match s.parse() {
        Ok(u) => u,
        Err(_) => {
            usage_bail!("--server {s:?} is not a URL; use a value like http://127.0.0.1:6443")
        }
    };
    match (uri.scheme_str(), uri.host()) {
        (Some("http" | "https"), Some(_)) => Ok(uri),
        _ => usage_bail!(
            "--server {s:?} needs a scheme and a host; use a value like http://127.0.0.1:6443"
        ),
    }
}

/// `host:port` of a URL, with the scheme's default port when none is given.
pub fn host_port(uri: &http::Uri) -> String {
    let host = uri.host().unwrap_or("localhost");
    let port = uri
        .port_u16()
        .unwrap_or(if uri.scheme_str() == Some("https") {
            443
        } else {
            80
        });
    format!("{host}:{port}")
}

fn is_loopback(uri: &http::Uri) -> bool {
    let host = uri
        .host()
        .unwrap_or("")
        .trim_start_matches('[')
        .trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_port_fills_the_default_port() {
        assert_eq!(
            host_port(&"http://127.0.0.1:6443".parse().unwrap()),
            "127.0.0.1:6443"
        );
        assert_eq!(
            host_port(&"https://k8s.example.com".parse().unwrap()),
            "k8s.example.com:443"
        );
        assert_eq!(host_port(&"http://[::1]".parse().unwrap()), "[::1]:80");
    }

    #[test]
    fn loopback_hosts() {
        for u in [
            "http://127.0.0.1:6443",
            "http://localhost",
            "http://[::1]:1",
        ] {
            assert!(is_loopback(&u.parse().unwrap()), "{u}");
        }
        assert!(!is_loopback(&"https://10.0.0.1".parse().unwrap()));
    }

    #[test]
    fn server_urls_need_scheme_and_host() {
        assert!(parse_server("http://127.0.0.1:6443").is_ok());
        let e = parse_server("127.0.0.1:6443").unwrap_err();
        assert!(e.to_string().contains("http://127.0.0.1:6443"), "{e}");
        assert!(e.is::<UsageError>());
    }

    #[tokio::test]
    async fn an_explicit_kubeconfig_and_context_are_used() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kc");
        std::fs::write(
            &path,
            "apiVersion: v1\nkind: Config\nclusters:\n- name: a\n  cluster: {server: 'http://127.0.0.1:7001'}\n- name: b\n  cluster: {server: 'http://127.0.0.1:7002'}\nusers:\n- name: u\n  user: {}\ncontexts:\n- name: a\n  context: {cluster: a, user: u}\n- name: b\n  context: {cluster: b, user: u, namespace: prod}\ncurrent-context: a\n",
        )
        .unwrap();
        let c = load_config(Some(&path), None, None).await.unwrap();
        assert_eq!(c.cluster_url.to_string(), "http://127.0.0.1:7001/");
        assert_eq!(c.default_namespace, "default");
        let c = load_config(Some(&path), Some("b"), None).await.unwrap();
        assert_eq!(c.cluster_url.to_string(), "http://127.0.0.1:7002/");
        assert_eq!(c.default_namespace, "prod");
        let c = load_config(Some(&path), Some("b"), Some("http://127.0.0.1:9"))
            .await
            .unwrap();
        assert_eq!(host_port(&c.cluster_url), "127.0.0.1:9");
        let e = load_config(Some(&path), Some("nope"), None)
            .await
            .unwrap_err();
        assert!(e.is::<UsageError>(), "{e:#}");
        assert!(e.to_string().contains("--context nope"), "{e:#}");
    }
}
