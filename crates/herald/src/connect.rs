//! Reaching the API server the way kubectl does: kube's own kubeconfig loading (`KUBECONFIG`,
//! `~/.kube/config`, `--kubeconfig`, `--context`), `-s/--server` to override the URL, and the
//! namespace from `-n` or the context. So every command works the same against
//! herald-server and against a real cluster.
//!
//! Without any kubeconfig (and outside a cluster) the commands talk to
//! [`DEFAULT_SERVER`], where `herald serve` listens by default, as its admin: with the CA and
//! admin credential of the default data directory (`$HERALD_DATA`, else `./herald-data`),
//! when `herald serve` made them there. Without those, a server whose certificate cannot be
//! trusted is one line saying to run `herald kubeconfig`.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::usage::{UsageError, usage_bail};

/// Where `herald serve` listens by default; used when there is no kubeconfig at all.
pub const DEFAULT_SERVER: &str = "https://127.0.0.1:6443";

/// How long opening a connection may take before a command gives up on the server.
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The connection flags every client command shares.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ConnectArgs {
    /// Kubeconfig file [default: $KUBECONFIG, else ~/.kube/config; without either,
    /// https://127.0.0.1:6443 with the credentials in ./herald-data/pki]
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context to use [default: the current context]
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// API server URL, overriding the kubeconfig's (e.g. https://127.0.0.1:6443)
    #[arg(short = 's', long, value_name = "URL")]
    pub server: Option<String>,
    /// Namespace [default: the context's namespace, else "default"]
    #[arg(short = 'n', long, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
}

/// A client for the chosen server, and what messages need to know about it.
#[derive(Clone)]
pub struct Connection {
    /// The kube client (auth, TLS and timeouts from the kubeconfig). Like client-go's, it
    /// retries 429, 503 and 504 answers itself: right for reads, which are idempotent and
    /// whose callers count nothing.
    pub client: kube::Client,
    /// What `client` was built from, for [`Connection::client_without_retries`].
    config: kube::Config,
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
        let client = kube::Client::try_from(config.clone())
            .with_context(|| format!("cannot set up a client for {server}"))?;
        Ok(Connection {
            client,
            config,
            namespace,
            server,
            loopback,
        })
    }

    /// A client like [`Connection::client`] without kube's retry layer, so every answer
    /// reaches the caller: for a `KubeSink`, whose recorder retries and counts each attempt
    /// itself (kube's layer would repeat a 429 up to 15 times unseen).
    pub fn client_without_retries(&self) -> anyhow::Result<kube::Client> {
        let mut config = self.config.clone();
        config.default_retry = false;
        kube::Client::try_from(config)
            .with_context(|| format!("cannot set up a client for {}", self.server))
    }

    fn https(&self) -> bool {
        self.config.cluster_url.scheme_str() == Some("https")
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
            other if self.https() && not_tls(&other) => anyhow::anyhow!(
                "cannot reach {server}: it does not speak TLS; try http:// instead of https://"
            ),
            other if self.https() && untrusted(&other) => anyhow::anyhow!(
                "cannot trust {server}'s certificate: for a herald server, write a kubeconfig with its CA (herald kubeconfig --data ITS-DATA-DIR > herald.kubeconfig) and pass --kubeconfig herald.kubeconfig"
            ),
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

/// True when a TLS handshake failed because the server answered in something other than
/// TLS (a plain-http server answers the ClientHello with an HTTP response). rustls says so
/// as `InvalidMessage(InvalidContentType)`.
fn not_tls(err: &(dyn std::error::Error + 'static)) -> bool {
    rustls_error_is(err, "InvalidContentType")
}

/// True when the TLS handshake failed because the server's certificate did not verify
/// (rustls's `InvalidCertificate`, e.g. `UnknownIssuer`).
fn untrusted(err: &(dyn std::error::Error + 'static)) -> bool {
    rustls_error_is(err, "InvalidCertificate")
}

/// True when a rustls error whose debug form contains `what` is in the chain of `err`:
/// inside the I/O errors hyper wraps it in, which `source()` skips; so this looks into them.
fn rustls_error_is(err: &(dyn std::error::Error + 'static), what: &str) -> bool {
    let mut next = Some(err);
    while let Some(e) = next {
        let mut inner: &(dyn std::error::Error + 'static) = e;
        while let Some(io) = inner.downcast_ref::<std::io::Error>() {
            match io.get_ref() {
                Some(i) => inner = i,
                None => break,
            }
        }
        if format!("{inner:?}").contains(what) {
            return true;
        }
        next = e.source();
    }
    false
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
        let which = path.display().to_string();
        let kc = Kubeconfig::read_from(path).map_err(|e| unreadable(e, &which))?;
        let config = kube::Config::from_custom_kubeconfig(kc, &options)
            .await
            .map_err(|e| kubeconfig_error(e, &which, context))?;
        checked_server(config, &which, server)?
    } else if kubeconfig_present() {
        let which = default_kubeconfig_name();
        let config = kube::Config::from_kubeconfig(&options)
            .await
            .map_err(|e| kubeconfig_error(e, &which, context))?;
        checked_server(config, &which, server)?
    } else if let Some(ctx) = context {
        usage_bail!("--context {ctx}: there is no kubeconfig (set KUBECONFIG or pass --kubeconfig)")
    } else if let Ok(c) = kube::Config::incluster() {
        c
    } else {
        default_server_config().await?
    };
    if let Some(s) = server {
        config.cluster_url = parse_server(s)?;
    }
    Ok(config)
}

/// [`DEFAULT_SERVER`], as the admin of the default data directory when `herald serve` made
/// its credentials there (else without credentials: an untrusted certificate then says what
/// to do, see [`Connection::explain`]).
async fn default_server_config() -> anyhow::Result<kube::Config> {
    let data = std::env::var_os("HERALD_DATA")
        .filter(|v| !v.is_empty())
        .map_or_else(|| PathBuf::from(crate::DEFAULT_DATA), PathBuf::from);
    let pki = data.join(herald_server::api::tls::pki::PKI_DIR);
    if let Ok(credentials) = herald_server::api::tls::pki::AdminCredentials::read(&pki) {
        let text = crate::kubeconfig::render_for(DEFAULT_SERVER, "herald", Some(&credentials))?;
        let kc = Kubeconfig::from_yaml(&text)
            .map_err(|e| anyhow::anyhow!("cannot use the credentials in {}: {e}", pki.display()))?;
        return kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .map_err(|e| anyhow::anyhow!("cannot use the credentials in {}: {e}", pki.display()));
    }
    Ok(kube::Config::new(DEFAULT_SERVER.parse().unwrap_or_else(
        |_| unreachable!("the default server URL is valid"),
    )))
}

/// A kubeconfig that cannot be read, its cause said once (kube's error repeats its source
/// in its own message).
fn unreadable(err: kube::config::KubeconfigError, which: &str) -> anyhow::Error {
    match err {
        kube::config::KubeconfigError::ReadConfig(io, _) => {
            anyhow::anyhow!("cannot read kubeconfig {which}: {io}")
        }
        other => anyhow::anyhow!("cannot read kubeconfig {which}: {other}"),
    }
}

/// `config` when its server URL is one the client can use (kube panics on a URL without a
/// scheme); the one-line error names the kubeconfig and the value. `-s/--server` replaces
/// the URL, so then the kubeconfig's is not checked.
fn checked_server(
    config: kube::Config,
    which: &str,
    server: Option<&str>,
) -> anyhow::Result<kube::Config> {
    let url = &config.cluster_url;
    if server.is_some()
        || matches!(
            (url.scheme_str(), url.host()),
            (Some("http" | "https"), Some(_))
        )
    {
        return Ok(config);
    }
    let text = url.to_string();
    let like = if url.scheme_str().is_none() && url.host().is_some() {
        format!("http://{text}")
    } else {
        DEFAULT_SERVER.to_string()
    };
    anyhow::bail!(
        "the kubeconfig {which} has server {text:?}, which needs an http:// or https:// scheme and a host; write it like {like}"
    )
}

/// How messages name the kubeconfig kube finds by itself.
fn default_kubeconfig_name() -> String {
    match std::env::var("KUBECONFIG") {
        Ok(v) if !v.is_empty() => v,
        _ => "~/.kube/config".to_string(),
    }
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

    #[tokio::test]
    async fn a_kubeconfig_server_without_a_scheme_is_named_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kc");
        std::fs::write(
            &path,
            "apiVersion: v1\nkind: Config\nclusters:\n- name: a\n  cluster: {server: '127.0.0.1:17100'}\nusers:\n- name: u\n  user: {}\ncontexts:\n- name: a\n  context: {cluster: a, user: u}\ncurrent-context: a\n",
        )
        .unwrap();
        let e = load_config(Some(&path), None, None).await.unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "the kubeconfig {} has server \"127.0.0.1:17100\", which needs an http:// or https:// scheme and a host; write it like http://127.0.0.1:17100",
                path.display()
            )
        );
        // -s replaces the kubeconfig's URL, so then it does not matter.
        let c = load_config(Some(&path), None, Some("http://127.0.0.1:17100"))
            .await
            .unwrap();
        assert_eq!(c.cluster_url.to_string(), "http://127.0.0.1:17100/");
    }

    #[tokio::test]
    async fn a_missing_kubeconfig_says_its_cause_once() {
        let e = load_config(Some(Path::new("/nonexistent/kc")), None, None)
            .await
            .unwrap_err();
        let text = format!("{e:#}");
        assert!(
            text.starts_with("cannot read kubeconfig /nonexistent/kc: "),
            "{text}"
        );
        assert!(text.ends_with("(os error 2)"), "{text}");
        assert_eq!(text.matches("os error 2").count(), 1, "{text}");
    }

    /// A plain-http listener answering a TLS ClientHello with an HTTP response.
    #[tokio::test]
    async fn https_to_a_plain_http_server_says_it_does_not_speak_tls() {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            // Bounded: the probe makes one connection (kube does not retry handshakes).
            for _ in 0..4 {
                let Ok((mut s, _)) = listener.accept().await else {
                    return;
                };
                let mut buf = [0u8; 1024];
                let _ = s.read(&mut buf).await;
                let _ = s
                    .write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")
                    .await;
            }
        });
        let config = kube::Config::new(format!("https://{addr}").parse().unwrap());
        let conn = Connection::new(config).unwrap();
        let e = conn.probe().await.unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("cannot reach {addr}: it does not speak TLS; try http:// instead of https://")
        );
    }
}
