//! Where the bench sends its load: `--server`, else the kubeconfig's server, else
//! `http://127.0.0.1:6443`.

use std::net::SocketAddr;
use std::path::Path;

use anyhow::Context as _;

/// The resolved server.
pub struct Target {
    /// The socket address to connect to.
    pub addr: SocketAddr,
    /// `host:port` as the user wrote it, for messages.
    pub display: String,
}

/// Resolves the server from the flags and the kubeconfig.
pub async fn resolve(
    server: Option<&str>,
    kubeconfig: Option<&Path>,
    context: Option<&str>,
) -> anyhow::Result<Target> {
    let url = match server {
        Some(s) => s.to_string(),
        None => from_kubeconfig(kubeconfig, context)
            .await?
            .unwrap_or_else(|| "http://127.0.0.1:6443".to_string()),
    };
    let uri: http::Uri = url
        .parse()
        .with_context(|| format!("{url:?} is not a URL; use a value like http://127.0.0.1:6443"))?;
    match uri.scheme_str() {
        Some("http") | None => {}
        Some(other) => anyhow::bail!(
            "herald bench speaks plain http, not {other}: point --server at an http:// listener"
        ),
    }
    let host = uri
        .host()
        .with_context(|| format!("{url:?} has no host"))?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let port = uri.port_u16().unwrap_or(80);
    let display = format!("{}:{port}", uri.host().unwrap_or(&host));
    let addr = tokio::net::lookup_host((host.as_str(), port))
        .await
        .ok()
        .and_then(|mut a| a.next())
        .with_context(|| format!("cannot resolve {display}"))?;
    Ok(Target { addr, display })
}

/// The server of the kubeconfig's (given or current) context. `None` when no kubeconfig
/// was named and none exists at the usual places.
async fn from_kubeconfig(
    path: Option<&Path>,
    context: Option<&str>,
) -> anyhow::Result<Option<String>> {
    let options = kube::config::KubeConfigOptions {
        context: context.map(str::to_string),
        ..Default::default()
    };
    let config = match path {
        Some(p) => {
            let kc = kube::config::Kubeconfig::read_from(p)
                .with_context(|| format!("cannot read kubeconfig {}", p.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &options)
                .await
                .with_context(|| format!("kubeconfig {}", p.display()))?
        }
        None => match kube::Config::from_kubeconfig(&options).await {
            Ok(c) => c,
            Err(_) if context.is_none() => return Ok(None),
            Err(e) => return Err(e).context("loading the kubeconfig"),
        },
    };
    Ok(Some(
        config
            .cluster_url
            .to_string()
            .trim_end_matches('/')
            .to_string(),
    ))
}
