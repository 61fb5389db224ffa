//! Where the bench sends its load: `--server`, else the server of the kubeconfig (loaded like
//! every other command does, see [`crate::connect`]), else `http://127.0.0.1:6443`.

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
        None => crate::connect::load_config(kubeconfig, context, None)
            .await?
            .cluster_url
            .to_string()
            .trim_end_matches('/')
            .to_string(),
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
