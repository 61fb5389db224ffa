//! The settings of the [`EtcdBackend`](super::EtcdBackend), named after kube-apiserver's
//! `--etcd-*` flags.

use std::path::PathBuf;
use std::time::Duration;

use crate::storage::HistoryOptions;

/// How event values are written to etcd (kube-apiserver's `--storage-media-type`). Both
/// forms are read whatever this says (see [`codec`](super::codec)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum StorageMediaType {
    /// `application/json`: core/v1 JSON with `kind` and `apiVersion`.
    Json,
    /// `application/vnd.kubernetes.protobuf` (kube-apiserver's default): the `k8s\0`
    /// envelope around the core/v1 `Event` message.
    #[default]
    Protobuf,
}

impl StorageMediaType {
    /// The media type's name as kube-apiserver's flag takes it.
    pub fn as_str(&self) -> &'static str {
        match self {
            StorageMediaType::Json => "application/json",
            StorageMediaType::Protobuf => "application/vnd.kubernetes.protobuf",
        }
    }
}

impl std::str::FromStr for StorageMediaType {
    type Err = String;

    /// `application/json` or `application/vnd.kubernetes.protobuf` (what kube-apiserver's
    /// `--storage-media-type` accepts, YAML aside); anything else is an error naming both.
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "application/json" => Ok(StorageMediaType::Json),
            "application/vnd.kubernetes.protobuf" => Ok(StorageMediaType::Protobuf),
            other => Err(format!(
                "unsupported storage media type {other:?}: use application/json or \
                 application/vnd.kubernetes.protobuf"
            )),
        }
    }
}

/// TLS to etcd (`--etcd-cafile`, `--etcd-certfile`, `--etcd-keyfile`): PEM files read once,
/// when the backend connects.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EtcdTlsOptions {
    /// CA bundle that verifies the etcd servers (`None`: the system's roots are not used,
    /// so give one whenever the servers use `https`).
    pub ca_file: Option<PathBuf>,
    /// Client certificate presented to etcd; needs `key_file`.
    pub cert_file: Option<PathBuf>,
    /// The client certificate's private key; needs `cert_file`.
    pub key_file: Option<PathBuf>,
}

/// Options of the [`EtcdBackend`](super::EtcdBackend).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdOptions {
    /// The etcd client URLs (`--etcd-servers`), e.g. `http://127.0.0.1:2379`. At least one;
    /// the client balances requests over them and fails over when one is down.
    pub servers: Vec<String>,
    /// Prepended to every key (`--etcd-prefix`, default `/registry`): the registry's
    /// `/events/<ns>/<name>` is etcd's `/registry/events/<ns>/<name>`, kube-apiserver's
    /// layout. The backend watches everything under `<prefix>/`: give Herald the events
    /// etcd (kube-apiserver's `--etcd-servers-overrides=/events#…`) or a prefix of its own,
    /// not a whole cluster's store.
    pub prefix: String,
    /// TLS to etcd; `None` for plain `http://` servers.
    pub tls: Option<EtcdTlsOptions>,
    /// How often the background compactor runs (`--etcd-compaction-interval`, default 5
    /// minutes; zero turns it off). Like kube-apiserver's, each run compacts etcd to the
    /// revision seen at the previous run, so about one interval of history stays for lists at
    /// older revisions and watches from them; replicas (and kube-apiserver) sharing the etcd
    /// agree through etcd's `compact_rev_key` on who compacts.
    pub compaction_interval: Duration,
    /// How long a lease granted for a TTL is reused by later writes with the same TTL
    /// (`--lease-reuse-duration-seconds`, default 60 s): like kube-apiserver, a lease is
    /// granted for the TTL plus this (at most 5 % of the TTL), so a key may outlive its TTL by
    /// up to that much. Bounds the leases etcd holds to about one per TTL per this duration.
    pub lease_reuse: Duration,
    /// Most keys attached to one lease (default 1,000, kube-apiserver's): past it a new
    /// lease is granted, so a lease's expiry never deletes too many keys in one etcd request.
    pub lease_max_objects: u64,
    /// The longest one etcd request may take (default 10 s), resends to another member
    /// included: past it the request fails with [`StorageError::Timeout`] (the API answers
    /// 504 Timeout) and a write may or may not have happened, as with any timed-out etcd
    /// request. Also bounds connecting.
    ///
    /// [`StorageError::Timeout`]: crate::storage::StorageError::Timeout
    pub request_timeout: Duration,
    /// How often the backend probes etcd for [`Backend::health`](crate::storage::Backend::health)
    /// (default 5 s; `/readyz` reads the last answer, so it turns false within one interval
    /// plus `request_timeout` of etcd losing quorum).
    pub health_interval: Duration,
    /// How event values are written (`--storage-media-type`, default protobuf as in
    /// kube-apiserver).
    pub media_type: StorageMediaType,
    /// The most keys one etcd `Range` reads (default 25,000; at least 1): a longer list is
    /// read in ranges of this many keys at one revision, each requested while the one
    /// before is decoded, so etcd and Herald work at once. It bounds one gRPC response to
    /// this many values (about 15 MiB of typical events). Smaller costs etcd more: etcd 3.4
    /// counts the rest of the range for every request (on this 2-core machine a list of
    /// 100,000 took etcd about twice the CPU in ranges of 8,192 as in one range). A server
    /// on etcd reads an unpaged list in pages of at least this many, for the same reason.
    pub range_keys: usize,
    /// The watch cache window ([`HistoryOptions::watch_window`] and
    /// [`HistoryOptions::watch_window_bytes`]; the other fields do not apply: etcd keeps the
    /// history for lists, compacted by the compactor).
    pub history: HistoryOptions,
}

impl Default for EtcdOptions {
    fn default() -> Self {
        EtcdOptions {
            servers: Vec::new(),
            prefix: "/registry".to_string(),
            tls: None,
            compaction_interval: Duration::from_secs(300),
            lease_reuse: Duration::from_secs(60),
            lease_max_objects: 1_000,
            request_timeout: Duration::from_secs(10),
            health_interval: Duration::from_secs(5),
            media_type: StorageMediaType::default(),
            range_keys: 25_000,
            history: HistoryOptions::default(),
        }
    }
}
