//! Where the bench sends its load: `--server`, else the server of the kubeconfig (loaded like
//! every other command does, see [`crate::connect`]), else `https://127.0.0.1:6443` with the
//! default data directory's credentials. For an `https://` server the kubeconfig's CA and
//! client certificate make the TLS setup (as kube's own client would), whether the URL came
//! from `--server` or from the kubeconfig, and the kubeconfig's bearer token (`token`, else
//! `tokenFile`) goes with every request. Exec plugins and auth providers are not run: the
//! bench measures the server, so it wants a credential it can send as-is.

use std::path::Path;

use anyhow::Context as _;
use kube::client::ConfigExt as _;
use tokio_rustls::rustls::pki_types::ServerName;

use super::conn::Endpoint;

/// The resolved server.
pub struct Target {
    /// Where to connect, and how.
    pub endpoint: Endpoint,
    /// `host:port` as the user wrote it, for messages.
    pub display: String,
}

/// Resolves the server from the flags and the kubeconfig.
pub async fn resolve(
    server: Option<&str>,
    kubeconfig: Option<&Path>,
    context: Option<&str>,
) -> anyhow::Result<Target> {
    // A plain-http --server needs nothing from a kubeconfig (which may not even exist).
    let plain_server = server.filter(|s| s.starts_with("http://"));
    let config = match plain_server {
        Some(_) => None,
        None => Some(crate::connect::load_config(kubeconfig, context, server).await?),
    };
    let url = match (plain_server, &config) {
        (Some(s), _) => s.to_string(),
        (None, Some(c)) => c.cluster_url.to_string().trim_end_matches('/').to_string(),
        (None, None) => unreachable!("a config is loaded unless the server is plain http"),
    };
    let uri: http::Uri = url.parse().with_context(|| {
        format!("{url:?} is not a URL; use a value like https://127.0.0.1:6443")
    })?;
    let https = match uri.scheme_str() {
        Some("http") | None => false,
        Some("https") => true,
        Some(other) => anyhow::bail!(
            "herald bench speaks http and https, not {other}: point --server at an https:// or http:// server"
        ),
    };
    let host = uri
        .host()
        .with_context(|| format!("{url:?} has no host"))?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
    let display = format!("{}:{port}", uri.host().unwrap_or(&host));
    let addr = tokio::net::lookup_host((host.as_str(), port))
        .await
        .ok()
        .and_then(|mut a| a.next())
        .with_context(|| format!("cannot resolve {display}"))?;
    let endpoint = match (https, config) {
        (true, Some(config)) => {
            let tls = config
                .rustls_client_config()
                .map_err(|e| anyhow::anyhow!("cannot set up TLS for {display}: {e}"))?;
            let name = ServerName::try_from(host.clone())
                .map_err(|_| anyhow::anyhow!("{host:?} is not a host name TLS can verify"))?;
            let endpoint = Endpoint::tls(addr, name, tls);
            match bearer_token(&config.auth_info)? {
                Some(token) => endpoint.with_bearer_token(&token)?,
                None => endpoint,
            }
        }
        _ => Endpoint::plain(addr),
    };
    Ok(Target { endpoint, display })
}

/// The kubeconfig user's static bearer token: `token`, else the contents of `tokenFile`
/// (trimmed, as client-go reads it).
fn bearer_token(auth: &kube::config::AuthInfo) -> anyhow::Result<Option<String>> {
    use secrecy::ExposeSecret as _;
    if let Some(token) = &auth.token {
        return Ok(Some(token.expose_secret().to_string()));
    }
    match &auth.token_file {
        Some(path) => {
            let token = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read the kubeconfig's tokenFile {path}"))?;
            Ok(Some(token.trim().to_string()))
        }
        None => Ok(None),
    }
}
