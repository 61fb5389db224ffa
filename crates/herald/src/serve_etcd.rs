//! `herald serve`'s etcd flags, named as kube-apiserver's (see
//! `herald_server::storage::etcd`).

use std::path::PathBuf;
use std::time::Duration;

use herald_server::storage::{EtcdOptions, EtcdTlsOptions, StorageMediaType};

/// The flags, flattened into `herald serve`; they apply with `--store etcd`.
#[derive(Debug, Clone, clap::Args)]
pub struct EtcdArgs {
    /// etcd client URLs, comma separated, e.g.
    /// http://127.0.0.1:2379,http://127.0.0.1:22379 (required with --store etcd).
    /// (Checked in `options`, not by the flag parser, whose error would echo a URL with
    /// credentials.)
    #[arg(long, value_name = "URL,URL", value_delimiter = ',')]
    pub etcd_servers: Vec<String>,
    /// Prefix of every etcd key: events are stored under <prefix>/events/<namespace>/<name>,
    /// as kube-apiserver stores them.
    #[arg(long, value_name = "PREFIX", default_value = "/registry", value_parser = parse_prefix)]
    pub etcd_prefix: String,
    /// PEM file of the CAs that verify the etcd servers (for https:// servers).
    #[arg(long, value_name = "FILE")]
    pub etcd_cafile: Option<PathBuf>,
    /// PEM file of the client certificate presented to etcd.
    #[arg(long, value_name = "FILE", requires = "etcd_keyfile")]
    pub etcd_certfile: Option<PathBuf>,
    /// PEM file of the client certificate's private key.
    #[arg(long, value_name = "FILE", requires = "etcd_certfile")]
    pub etcd_keyfile: Option<PathBuf>,
    /// How often etcd is compacted to the revision seen one interval before, e.g. 5m ("0":
    /// never; then compact etcd yourself). As kube-apiserver's.
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = super::parse_duration)]
    pub etcd_compaction_interval: Duration,
    /// Seconds a lease granted for the event TTL is reused by later writes (a key may
    /// outlive its TTL by up to this much; at most 5 % of the TTL). As kube-apiserver's.
    #[arg(long, value_name = "SECONDS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    pub lease_reuse_duration_seconds: u64,
    /// How events are written to etcd: application/json or
    /// application/vnd.kubernetes.protobuf (kube-apiserver's default). Both are read.
    #[arg(long, value_name = "MEDIA-TYPE", default_value = "application/vnd.kubernetes.protobuf", value_parser = parse_media_type)]
    pub storage_media_type: StorageMediaType,
}

impl EtcdArgs {
    /// The backend settings of these flags; a one-line error when `--store etcd` lacks
    /// `--etcd-servers`.
    pub fn options(&self) -> anyhow::Result<EtcdOptions> {
        if self.etcd_servers.is_empty() {
            anyhow::bail!(
                "--store etcd needs --etcd-servers, e.g. --etcd-servers http://127.0.0.1:2379"
            );
        }
        let servers = self
            .etcd_servers
            .iter()
            .map(|s| parse_server(s))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| anyhow::anyhow!("--etcd-servers: {e}"))?;
        let tls =
            (self.etcd_cafile.is_some() || self.etcd_certfile.is_some()).then(|| EtcdTlsOptions {
                ca_file: self.etcd_cafile.clone(),
                cert_file: self.etcd_certfile.clone(),
                key_file: self.etcd_keyfile.clone(),
            });
        Ok(EtcdOptions {
            servers,
            prefix: self.etcd_prefix.clone(),
            tls,
            compaction_interval: self.etcd_compaction_interval,
            lease_reuse: Duration::from_secs(self.lease_reuse_duration_seconds),
            media_type: self.storage_media_type,
            ..EtcdOptions::default()
        })
    }
}

/// An etcd client URL: `http://` or `https://` with a host (credentials in URLs are refused,
/// so none reaches a log).
fn parse_server(s: &str) -> Result<String, String> {
    let s = s.trim();
    if s.contains('@') {
        return Err(
            "etcd URLs must not carry credentials; use --etcd-certfile and --etcd-keyfile"
                .to_string(),
        );
    }
    let rest = s
        .strip_prefix("http://")
        .or_else(|| s.strip_prefix("https://"))
        .ok_or_else(|| {
            format!("{s:?} is not an etcd URL; use http://HOST:PORT or https://HOST:PORT")
        })?;
    if rest.is_empty() || rest.starts_with('/') {
        return Err(format!("{s:?} has no host; use http://HOST:PORT"));
    }
    Ok(s.to_string())
}

/// `--etcd-prefix`: starts with `/`, no trailing `/` kept.
fn parse_prefix(s: &str) -> Result<String, String> {
    if !s.starts_with('/') {
        return Err(format!("{s:?} must start with /, e.g. /registry"));
    }
    Ok(s.trim_end_matches('/').to_string())
}

fn parse_media_type(s: &str) -> Result<StorageMediaType, String> {
    s.parse()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn servers_prefixes_and_media_types() {
        assert_eq!(
            parse_server("http://127.0.0.1:2379").unwrap(),
            "http://127.0.0.1:2379"
        );
        assert!(
            parse_server("127.0.0.1:2379")
                .unwrap_err()
                .contains("http://HOST:PORT")
        );
        assert!(parse_server("http://").unwrap_err().contains("no host"));
        for with_credentials in [
            "http://user:secret@127.0.0.1:2379",
            "user:secret@127.0.0.1:2379",
        ] {
            let e = parse_server(with_credentials).unwrap_err();
            assert!(!e.contains("secret"), "{e}");
        }
        assert_eq!(parse_prefix("/registry/").unwrap(), "/registry");
        assert!(parse_prefix("registry").is_err());
        assert_eq!(
            parse_media_type("application/json"),
            Ok(StorageMediaType::Json)
        );
        assert!(
            parse_media_type("application/yaml")
                .unwrap_err()
                .contains("application/json")
        );
    }
}
