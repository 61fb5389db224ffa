//! The etcd backend: many Herald replicas on one etcd cluster, in kube-apiserver's layout.
//!
//! [`EtcdBackend`] implements [`Backend`] on etcd v3 through the `etcd-client` crate, as the
//! plan in the [storage module docs](super#how-etcd-slots-in) lays out:
//!
//! - **keys**: the registry's `/events/<ns>/<name>` is `<prefix>/events/<ns>/<name>` in etcd
//!   (prefix `/registry` by default: kube-apiserver's layout); the prefix is stripped on the
//!   way back;
//! - **values**: kube-apiserver's JSON or protobuf, read in both forms ([`codec`]);
//! - **revisions**: etcd's — a key's `mod_revision` is its `resourceVersion`, so every replica
//!   reports the same one;
//! - **writes**: transactions. `create` is `If(CreateRevision == 0) Then(Put)`; `update` and
//!   `delete` with an expected revision are `If(ModRevision == expected) Then(…) Else(Get)`
//!   (the `Get` tells `Conflict` from `NotFound`), without one `If(CreateRevision > 0)`;
//! - **TTL**: etcd leases, granted per TTL and shared by the writes of a while (module `lease`);
//!   etcd deletes the keys itself, so [`Backend::expire_due`] returns 0 and a key lives
//!   between its TTL and its TTL plus [`EtcdOptions::lease_reuse`];
//! - **lists**: `Range`s of at most [`EtcdOptions::range_keys`] keys at one revision
//!   (later pages and ranges at the first one's), each requested while the one before is
//!   decoded; `ErrCompacted` is [`StorageError::Expired`], a future revision
//!   [`StorageError::FutureRevision`];
//! - **watches**: ONE etcd watch per backend on `<prefix>/` (with previous values) feeds the
//!   backend's [`WatchHub`] (module `feed`), which fans out to every client. Writes do not publish
//!   to the hub themselves: every replica sees every change, its own and the others', in
//!   revision order. A write returns once the hub has it too (or after
//!   [`EtcdOptions::request_timeout`] if the feed is down: the write is committed either
//!   way), so a client that wrote and then watches from before its write sees it. A watch
//!   from a revision older than the hub's window is `Expired` (410): the client re-lists;
//! - **compaction**: [`Backend::compact`] is etcd's `Compact`; a background compactor does
//!   what kube-apiserver's does every [`EtcdOptions::compaction_interval`];
//! - **health**: [`Backend::health`] reads the state the feed and a periodic probe keep
//!   (no I/O on the call).
//!
//! **`--max-events` does not apply**: [`Backend::live_keys`] is `None`. Each replica could
//! count from its own feed, but the count would lag the other replicas' writes and would
//! need a full count at every start; the TTL bounds the store instead.
//!
//! **Index queries** ([`ListOptions::index`]) are ignored: etcd has no secondary indexes, and
//! the query only narrows (the registry filters every item anyway).

pub mod codec;
mod compactor;
mod failure;
mod feed;
mod lease;
mod options;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use bytes::Bytes;
use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, DeleteOptions, GetOptions, PutOptions, Txn, TxnOp,
    TxnOpResponse, TxnResponse, WatchOptions,
};
use futures::future::BoxFuture;
use herald_core::clock::Clock;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::task::AbortOnDropHandle;

pub use codec::ValueCodec;
pub use options::{EtcdOptions, EtcdTlsOptions, StorageMediaType};

use super::types::prefix_end;
use super::{
    Backend, CachedWatchStream, Deleted, KeyValue, ListOptions, ListOrder, ListResult, Result,
    Revision, StorageError, WatchHub, WatchStream,
};
use failure::Failure;
use lease::LeaseManager;

/// The largest etcd response the backend accepts (a list's range, a watch response): gRPC's
/// default of 4 MiB would fail ranges of a few thousand events, so as kube-apiserver this is
/// 2 GiB, and the bound that applies is [`EtcdOptions::range_keys`] values.
const MAX_RESPONSE: usize = i32::MAX as usize;

/// How many times one request is sent again after a member could not be connected to
/// ([`Failure::NotSent`]), within its request timeout.
const MAX_RESENDS: usize = 8;

/// The longest a connection to one member may take to open (at most the request timeout):
/// past it the request is sent again through another member, so a member whose host is
/// gone does not take a whole request timeout.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// The pause between two tries of the first request while etcd cannot be reached or has no
/// leader (see [`EtcdBackend::connect`]).
const FIRST_READ_PAUSE: Duration = Duration::from_millis(100);

/// A [`Backend`] on an etcd v3 cluster (see the [module docs](self)).
///
/// Holds one gRPC connection (balanced over [`EtcdOptions::servers`]) and three tasks: the
/// watch feed, the health probe and the compactor; dropping the backend stops them and ends
/// every watch stream.
pub struct EtcdBackend {
    inner: Arc<Inner>,
    tasks: Vec<JoinHandle<()>>,
}

/// What the backend's tasks share with it.
struct Inner {
    client: Client,
    /// `EtcdOptions::prefix` without a trailing `/`.
    prefix: String,
    codec: ValueCodec,
    leases: LeaseManager,
    /// Replaced (the old one closed) only when the feed must resume past a compaction.
    hub: RwLock<Arc<WatchHub>>,
    /// The newest revision the feed has published to the hub.
    seen: watch::Sender<Revision>,
    health: RwLock<Health>,
    /// The newest revision this backend compacted etcd to.
    compacted: AtomicU64,
    /// Whether the feed's etcd watch is open.
    feed_open: std::sync::atomic::AtomicBool,
    opts: EtcdOptions,
}

/// What the backend last learnt of etcd.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Health {
    /// The watch feed is open and the last probe answered.
    Up,
    /// etcd did not answer (unreachable, no leader, timed out): the reason.
    Down(String),
}

/// Why the backend could not connect (see [`EtcdBackend::connect`]).
#[derive(Debug, thiserror::Error)]
pub enum EtcdError {
    /// The options are unusable (no server, a TLS file without its pair, …).
    #[error("invalid etcd options: {0}")]
    Options(String),
    /// A TLS file could not be read.
    #[error("cannot read {path}: {source}")]
    TlsFile {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// etcd did not answer within [`EtcdOptions::request_timeout`], or refused.
    #[error("cannot reach etcd at {servers}: {source}")]
    Connect {
        /// The servers tried.
        servers: String,
        /// The client's error.
        #[source]
        source: etcd_client::Error,
    },
    /// etcd did not answer within [`EtcdOptions::request_timeout`].
    #[error("etcd at {servers} did not answer within {timeout:?}")]
    Timeout {
        /// The servers tried.
        servers: String,
        /// The bound.
        timeout: Duration,
    },
}

impl EtcdBackend {
    /// Connects to `opts.servers`, reads the current revision and starts the watch feed, the
    /// health probe and (unless its interval is zero) the compactor. Fails if etcd does not
    /// answer within [`EtcdOptions::request_timeout`] (a member it cannot reach and a
    /// cluster without a leader are tried again until then), or refuses the request. Lease
    /// times are measured on `clock`. Must be called inside a tokio runtime.
    pub async fn connect(opts: EtcdOptions, clock: Arc<dyn Clock>) -> Result<Self, EtcdError> {
        if opts.servers.is_empty() {
            return Err(EtcdError::Options("no etcd server given".into()));
        }
        let servers = opts.servers.join(",");
        let mut connect = ConnectOptions::new()
            .with_connect_timeout(opts.request_timeout.min(CONNECT_TIMEOUT))
            .with_timeout(opts.request_timeout)
            .with_keep_alive(Duration::from_secs(10), opts.request_timeout)
            .with_require_leader(true);
        if let Some(tls) = &opts.tls {
            connect = connect.with_tls(tls_config(tls)?);
        }
        let client = tokio::time::timeout(
            opts.request_timeout,
            Client::connect(opts.servers.clone(), Some(connect)),
        )
        .await
        .map_err(|_| EtcdError::Timeout {
            servers: servers.clone(),
            timeout: opts.request_timeout,
        })?
        .map_err(|source| EtcdError::Connect {
            servers: servers.clone(),
            source,
        })?;
        let prefix = opts.prefix.trim_end_matches('/').to_string();
        let start = first_read(&client, &prefix, &servers, opts.request_timeout).await?;
        let revision = header_revision(start.header());
        let inner = Arc::new(Inner {
            client,
            codec: ValueCodec::new(opts.media_type),
            leases: LeaseManager::new(clock, opts.lease_reuse, opts.lease_max_objects),
            hub: RwLock::new(feed::new_hub(&opts.history, revision)),
            seen: watch::Sender::new(revision),
            health: RwLock::new(Health::Up),
            compacted: AtomicU64::new(0),
            feed_open: std::sync::atomic::AtomicBool::new(false),
            prefix,
            opts,
        });
        let mut tasks = vec![
            tokio::spawn(feed::run(Arc::downgrade(&inner), revision)),
            tokio::spawn(probe(Arc::downgrade(&inner))),
        ];
        if !inner.opts.compaction_interval.is_zero() {
            tasks.push(tokio::spawn(compactor::run(Arc::downgrade(&inner))));
        }
        Ok(EtcdBackend { inner, tasks })
    }

    /// The hub serving this backend's watches (replaced when the feed resumes past an etcd
    /// compaction; register [`WatchHub::bytes_gauge`] of the one at start for metrics).
    pub fn hub(&self) -> Arc<WatchHub> {
        self.inner.hub()
    }

    /// The etcd key of a registry key: `<prefix><key>`.
    pub fn etcd_key(&self, key: &str) -> String {
        self.inner.full(key)
    }
}

impl Drop for EtcdBackend {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
        self.inner.hub().close();
    }
}

/// The first request, which opens the connection: a linearizable read of the prefix key,
/// for etcd's current revision. Sent again, every [`FIRST_READ_PAUSE`] within `timeout`,
/// while it cannot reach a member ([`Failure::NotSent`]) or etcd has no leader yet
/// ([`Failure::Refused`]: a replica started with etcd, or during an election); any other
/// failure is returned at once.
async fn first_read(
    client: &Client,
    prefix: &str,
    servers: &str,
    timeout: Duration,
) -> Result<etcd_client::GetResponse, EtcdError> {
    let deadline = tokio::time::Instant::now() + timeout;
    let kv = client.kv_client();
    loop {
        let mut kv = kv.clone();
        let failed = match tokio::time::timeout_at(deadline, kv.get(prefix, None)).await {
            Ok(Ok(resp)) => return Ok(resp),
            Ok(Err(e)) => e,
            Err(_) => break,
        };
        let again = matches!(Failure::of(&failed), Failure::NotSent | Failure::Refused);
        if !again || tokio::time::Instant::now() + FIRST_READ_PAUSE >= deadline {
            return Err(EtcdError::Connect {
                servers: servers.to_owned(),
                source: failed,
            });
        }
        tracing::debug!(error = %failed, "etcd did not answer the first request; sending it again");
        tokio::time::sleep(FIRST_READ_PAUSE).await;
    }
    Err(EtcdError::Timeout {
        servers: servers.to_owned(),
        timeout,
    })
}

/// The rustls configuration of `tls`.
fn tls_config(tls: &EtcdTlsOptions) -> Result<etcd_client::TlsOptions, EtcdError> {
    let read = |p: &std::path::Path| {
        std::fs::read(p).map_err(|source| EtcdError::TlsFile {
            path: p.display().to_string(),
            source,
        })
    };
    let mut cfg = etcd_client::TlsOptions::new();
    if let Some(ca) = &tls.ca_file {
        cfg = cfg.ca_certificate(etcd_client::Certificate::from_pem(read(ca)?));
    }
    match (&tls.cert_file, &tls.key_file) {
        (Some(cert), Some(key)) => {
            cfg = cfg.identity(etcd_client::Identity::from_pem(read(cert)?, read(key)?));
        }
        (None, None) => {}
        _ => {
            return Err(EtcdError::Options(
                "a client certificate needs both --etcd-certfile and --etcd-keyfile".into(),
            ));
        }
    }
    Ok(cfg)
}

/// The revision in a response header (etcd's are positive; a missing header is 0).
fn header_revision(h: Option<&etcd_client::ResponseHeader>) -> Revision {
    h.map_or(0, |h| u64::try_from(h.revision()).unwrap_or(0))
}

fn rev_i64(r: Revision) -> i64 {
    i64::try_from(r).unwrap_or(i64::MAX)
}

fn rev_u64(r: i64) -> Revision {
    u64::try_from(r).unwrap_or(0)
}

impl Inner {
    fn hub(&self) -> Arc<WatchHub> {
        Arc::clone(&self.hub.read().unwrap_or_else(|e| e.into_inner()))
    }

    fn full(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }

    /// The registry key of an etcd key (`None` for a key outside the prefix or not UTF-8).
    fn short(&self, key: &[u8]) -> Option<String> {
        let key = std::str::from_utf8(key).ok()?;
        key.strip_prefix(&self.prefix).map(str::to_owned)
    }

    /// A registry [`KeyValue`] of an etcd one, its value decoded.
    fn kv(&self, kv: &etcd_client::KeyValue) -> Option<KeyValue> {
        Some(KeyValue {
            key: self.short(kv.key())?,
            value: self.codec.decode(Bytes::copy_from_slice(kv.value())),
            create_revision: rev_u64(kv.create_revision()),
            mod_revision: rev_u64(kv.mod_revision()),
        })
    }

    fn set_health(&self, h: Health) {
        let mut cur = self.health.write().unwrap_or_else(|e| e.into_inner());
        if *cur != h {
            match &h {
                Health::Up => tracing::info!("etcd is reachable"),
                Health::Down(why) => tracing::warn!(reason = %why, "etcd is unreachable"),
            }
            *cur = h;
        }
    }

    /// Runs one etcd request bounded by the request timeout. A request that never reached
    /// etcd (a member that cannot be connected to, see [`Failure::NotSent`]) is sent again,
    /// up to [`MAX_RESENDS`] times within the same bound: the balanced channel then picks
    /// another member. Other failures become a [`StorageError`] by their kind (and mark etcd
    /// down when it refuses).
    async fn call<T, F, Fut>(&self, what: &str, send: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = std::result::Result<T, etcd_client::Error>>,
    {
        match self.send(what, send).await {
            Ok(v) => Ok(v),
            Err(Some(e)) => Err(self.failed(what, e)),
            Err(None) => Err(self.timed_out(what)),
        }
    }

    /// [`call`](Self::call) returning etcd's own error (`Some`) for the caller to read, or
    /// `None` when the request timeout ran out.
    async fn send<T, F, Fut>(
        &self,
        what: &str,
        mut send: F,
    ) -> std::result::Result<T, Option<etcd_client::Error>>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = std::result::Result<T, etcd_client::Error>>,
    {
        let deadline = tokio::time::Instant::now() + self.opts.request_timeout;
        let mut resends = 0;
        loop {
            match tokio::time::timeout_at(deadline, send()).await {
                Ok(Ok(v)) => return Ok(v),
                Ok(Err(e)) if Failure::of(&e) == Failure::NotSent && resends < MAX_RESENDS => {
                    resends += 1;
                    tracing::debug!(request = what, error = %e, "etcd member unreachable; sending again");
                }
                Ok(Err(e)) => return Err(Some(e)),
                Err(_) => return Err(None),
            }
        }
    }

    /// The error of a request that failed with `e`; etcd is marked down when it refused or
    /// could not be reached at all.
    fn failed(&self, what: &str, e: etcd_client::Error) -> StorageError {
        let kind = Failure::of(&e);
        if matches!(kind, Failure::NotSent | Failure::Refused) {
            self.set_health(Health::Down(format!("etcd {what}: {e}")));
        }
        kind.error(what, &e)
    }

    /// The error of a request that ran out of [`EtcdOptions::request_timeout`]: it may or may
    /// not have been applied (504).
    fn timed_out(&self, what: &str) -> StorageError {
        let msg = format!(
            "etcd {what} timed out after {:?}",
            self.opts.request_timeout
        );
        self.set_health(Health::Down(msg.clone()));
        StorageError::Timeout(msg)
    }

    async fn txn(&self, what: &str, txn: Txn) -> Result<TxnResponse> {
        let kv = self.client.kv_client();
        self.call(what, || {
            let mut kv = kv.clone();
            let txn = txn.clone();
            async move { kv.txn(txn).await }
        })
        .await
    }

    /// The lease for a write with `ttl`, if any.
    async fn lease(&self, ttl: Option<Duration>) -> Result<Option<i64>> {
        let Some(ttl) = ttl else {
            return Ok(None);
        };
        let id = self
            .leases
            .lease_for(ttl, |secs| async move {
                let lc = self.client.lease_client();
                self.call("lease grant", || {
                    let mut lc = lc.clone();
                    async move { lc.grant(secs, None).await }
                })
                .await
                .map(|r| r.id())
            })
            .await?;
        Ok(Some(id))
    }

    fn put_op(&self, key: &str, value: &Bytes, lease: Option<i64>, prev: bool) -> TxnOp {
        let mut opts = PutOptions::new();
        if let Some(id) = lease {
            opts = opts.with_lease(id);
        }
        if prev {
            opts = opts.with_prev_key();
        }
        TxnOp::put(key, self.codec.encode(value).to_vec(), Some(opts))
    }

    /// Waits (at most the request timeout) until the feed has published `revision`, so the
    /// hub holds every write acknowledged to a caller of this backend.
    async fn published(&self, revision: Revision) {
        let mut rx = self.seen.subscribe();
        let wait = rx.wait_for(|seen| *seen >= revision);
        if tokio::time::timeout(self.opts.request_timeout, wait)
            .await
            .is_err()
        {
            tracing::debug!(revision, "the watch feed has not delivered a write yet");
        }
    }

    /// The key's state from an `Else(Get)` branch: `Conflict` if present, else `NotFound`.
    fn refused(&self, key: &str, expected: Option<Revision>, resp: &TxnResponse) -> StorageError {
        let current = resp.op_responses().into_iter().find_map(|r| match r {
            TxnOpResponse::Get(g) => g.kvs().first().map(|kv| rev_u64(kv.mod_revision())),
            _ => None,
        });
        match (current, expected) {
            (Some(actual), Some(expected)) => StorageError::Conflict {
                key: key.to_owned(),
                expected,
                actual,
            },
            _ => StorageError::NotFound {
                key: key.to_owned(),
            },
        }
    }

    /// The oldest revision etcd still serves, learnt from a watch created at `requested`
    /// (etcd cancels it and names its compaction revision).
    async fn compacted_at(&self, requested: Revision) -> Revision {
        let known = self.compacted.load(Ordering::Relaxed);
        let mut wc = self.client.watch_client();
        let probe = async {
            let mut stream = wc
                .watch(
                    self.full("/"),
                    Some(
                        WatchOptions::new()
                            .with_prefix()
                            .with_start_revision(rev_i64(requested.max(1))),
                    ),
                )
                .await
                .ok()?;
            while let Ok(Some(resp)) = stream.message().await {
                if resp.compact_revision() > 0 {
                    return Some(rev_u64(resp.compact_revision()));
                }
                if resp.canceled() || !resp.events().is_empty() {
                    return None;
                }
            }
            None
        };
        match tokio::time::timeout(self.opts.request_timeout, probe).await {
            Ok(Some(r)) => r.max(known),
            _ => known.max(requested + 1),
        }
    }

    /// The limit of the next range of a list that still wants `wanted` keys (`None`: all).
    fn range_keys(&self, wanted: Option<usize>) -> usize {
        let most = self.opts.range_keys.max(1);
        wanted.map_or(most, |w| w.min(most))
    }

    /// One etcd `Range` of a list: at most `limit` keys from `start` (inclusive) to `end`, at
    /// `revision` (the current one when `None`); etcd's refusals as the storage errors the
    /// registry answers (a compacted revision is `Expired`, a future one `FutureRevision`).
    async fn range(
        &self,
        start: impl Into<Vec<u8>>,
        end: String,
        limit: usize,
        revision: Option<Revision>,
    ) -> Result<etcd_client::GetResponse> {
        let start = start.into();
        let mut get = GetOptions::new()
            .with_range(end)
            .with_limit(i64::try_from(limit).unwrap_or(i64::MAX));
        if let Some(at) = revision {
            get = get.with_revision(rev_i64(at));
        }
        // A range is as large as `range_keys` makes it (kube-apiserver lifts gRPC's 4 MiB
        // bound on responses too).
        let kv = self
            .client
            .kv_client()
            .max_decoding_message_size(MAX_RESPONSE);
        let range = self
            .send("range", || {
                let (mut kv, start, get) = (kv.clone(), start.clone(), get.clone());
                async move { kv.get(start, Some(get)).await }
            })
            .await;
        match range {
            Ok(r) => Ok(r),
            Err(Some(e)) => {
                let text = e.to_string();
                let requested = revision.unwrap_or(0);
                if text.contains("required revision has been compacted") {
                    return Err(StorageError::Expired {
                        requested,
                        oldest: self.compacted_at(requested).await,
                    });
                }
                if text.contains("required revision is a future revision") {
                    return Err(StorageError::FutureRevision {
                        requested,
                        current: self.current().await?,
                    });
                }
                Err(self.failed("range", e))
            }
            Err(None) => Err(self.timed_out("range")),
        }
    }

    /// etcd's current revision: the header of a linearizable read of one key (the prefix
    /// itself, which holds nothing), so it costs the same whatever the store holds.
    async fn current(&self) -> Result<Revision> {
        let kv = self.client.kv_client();
        let resp = self
            .call("get", || {
                let mut kv = kv.clone();
                async move { kv.get(self.prefix.as_str(), None).await }
            })
            .await?;
        Ok(header_revision(resp.header()))
    }

    async fn compact_to(&self, revision: Revision) -> Result<()> {
        let current = self.current().await?;
        let target = revision.min(current);
        if target == 0 || target <= self.compacted.load(Ordering::Relaxed) {
            return Ok(());
        }
        let mut kv = self.client.kv_client();
        match tokio::time::timeout(self.opts.request_timeout, kv.compact(rev_i64(target), None))
            .await
        {
            Ok(Ok(_)) => {}
            // Compacted already (by another replica or kube-apiserver): as good.
            Ok(Err(e)) if e.to_string().contains("compacted") => {}
            Ok(Err(e)) => return Err(self.failed("compact", e)),
            Err(_) => return Err(self.timed_out("compact")),
        }
        self.compacted.fetch_max(target, Ordering::Relaxed);
        self.hub().compact(target);
        Ok(())
    }
}

/// Keeps [`Health`] current: a linearizable read every [`EtcdOptions::health_interval`]
/// (it fails without a leader).
async fn probe(inner: std::sync::Weak<Inner>) {
    loop {
        let Some(i) = inner.upgrade() else {
            return;
        };
        let interval = i.opts.health_interval.max(Duration::from_millis(100));
        match i.current().await {
            Ok(_) => {
                if feed::is_open(&i) {
                    i.set_health(Health::Up);
                }
            }
            Err(e) => i.set_health(Health::Down(e.to_string())),
        }
        drop(i);
        tokio::time::sleep(interval).await;
    }
}

impl Backend for EtcdBackend {
    fn create<'a>(
        &'a self,
        key: &'a str,
        value: Bytes,
        ttl: Option<Duration>,
    ) -> BoxFuture<'a, Result<KeyValue>> {
        Box::pin(async move {
            let i = &self.inner;
            let full = i.full(key);
            let lease = i.lease(ttl).await?;
            let txn = Txn::new()
                .when([Compare::create_revision(full.as_str(), CompareOp::Equal, 0)])
                .and_then([i.put_op(&full, &value, lease, false)]);
            let resp = i.txn("create", txn).await?;
            if !resp.succeeded() {
                return Err(StorageError::AlreadyExists {
                    key: key.to_owned(),
                });
            }
            let revision = header_revision(resp.header());
            i.published(revision).await;
            Ok(KeyValue {
                key: key.to_owned(),
                value,
                create_revision: revision,
                mod_revision: revision,
            })
        })
    }

    fn update<'a>(
        &'a self,
        key: &'a str,
        value: Bytes,
        expected: Option<Revision>,
        ttl: Option<Duration>,
    ) -> BoxFuture<'a, Result<KeyValue>> {
        Box::pin(async move {
            let i = &self.inner;
            let full = i.full(key);
            let lease = i.lease(ttl).await?;
            let cond = match expected {
                Some(e) => Compare::mod_revision(full.as_str(), CompareOp::Equal, rev_i64(e)),
                None => Compare::create_revision(full.as_str(), CompareOp::Greater, 0),
            };
            let txn = Txn::new()
                .when([cond])
                .and_then([i.put_op(&full, &value, lease, true)])
                .or_else([TxnOp::get(full.as_str(), None)]);
            let resp = i.txn("update", txn).await?;
            if !resp.succeeded() {
                return Err(i.refused(key, expected, &resp));
            }
            let revision = header_revision(resp.header());
            let create_revision = resp
                .op_responses()
                .into_iter()
                .find_map(|r| match r {
                    TxnOpResponse::Put(p) => p.prev_key().map(|kv| rev_u64(kv.create_revision())),
                    _ => None,
                })
                .unwrap_or(revision);
            i.published(revision).await;
            Ok(KeyValue {
                key: key.to_owned(),
                value,
                create_revision,
                mod_revision: revision,
            })
        })
    }

    fn delete<'a>(
        &'a self,
        key: &'a str,
        expected: Option<Revision>,
    ) -> BoxFuture<'a, Result<Deleted>> {
        Box::pin(async move {
            let i = &self.inner;
            let full = i.full(key);
            let cond = match expected {
                Some(e) => Compare::mod_revision(full.as_str(), CompareOp::Equal, rev_i64(e)),
                None => Compare::create_revision(full.as_str(), CompareOp::Greater, 0),
            };
            let txn = Txn::new()
                .when([cond])
                .and_then([TxnOp::delete(
                    full.as_str(),
                    Some(DeleteOptions::new().with_prev_key()),
                )])
                .or_else([TxnOp::get(full.as_str(), None)]);
            let resp = i.txn("delete", txn).await?;
            if !resp.succeeded() {
                return Err(i.refused(key, expected, &resp));
            }
            let revision = header_revision(resp.header());
            let prev = resp
                .op_responses()
                .into_iter()
                .find_map(|r| match r {
                    TxnOpResponse::Delete(d) => d.prev_kvs().first().and_then(|kv| i.kv(kv)),
                    _ => None,
                })
                .ok_or_else(|| StorageError::NotFound {
                    key: key.to_owned(),
                })?;
            i.published(revision).await;
            Ok(Deleted { prev, revision })
        })
    }

    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<KeyValue>>> {
        Box::pin(async move {
            let i = &self.inner;
            let kv = i.client.kv_client();
            let full = i.full(key);
            let resp = i
                .call("get", || {
                    let (mut kv, full) = (kv.clone(), full.clone());
                    async move { kv.get(full, None).await }
                })
                .await?;
            Ok(resp.kvs().first().and_then(|kv| i.kv(kv)))
        })
    }

    fn list<'a>(&'a self, prefix: &'a str, opts: ListOptions) -> BoxFuture<'a, Result<ListResult>> {
        Box::pin(async move {
            if let ListOrder::Written { .. } = opts.order {
                // etcd sorts by anything but the key only after reading the whole range, on
                // every page: this backend never reads in write order (`Fastest` is key order).
                return Err(StorageError::Backend(
                    "the etcd backend lists in key order only (ListOrder::Written)".into(),
                ));
            }
            let i = &self.inner;
            let full_prefix = i.full(prefix);
            let start = match opts.start_after.as_deref() {
                // Just after the last key of the previous page.
                Some(s) if s >= prefix => format!("{}\0", i.full(s)),
                _ => full_prefix.clone(),
            };
            let end = prefix_end(&full_prefix).unwrap_or_else(|| "\0".to_string());
            // How many keys are still wanted (`None`: all of them).
            let mut wanted = opts.limit.filter(|&l| l > 0);
            let mut resp = i
                .range(start, end.clone(), i.range_keys(wanted), opts.at_revision)
                .await?;
            // Later ranges read the first one's revision.
            let revision = opts
                .at_revision
                .unwrap_or_else(|| header_revision(resp.header()));
            let mut items = Vec::new();
            loop {
                let got = resp.kvs().len();
                wanted = wanted.map(|w| w.saturating_sub(got));
                let more = resp.more();
                // The next range is on its way while this one is decoded.
                let next = match resp.kvs().last() {
                    Some(last) if more && wanted != Some(0) => {
                        let mut after = last.key().to_vec();
                        after.push(0);
                        let (inner, end) = (Arc::clone(i), end.clone());
                        let limit = i.range_keys(wanted);
                        Some(AbortOnDropHandle::new(tokio::spawn(async move {
                            inner.range(after, end, limit, Some(revision)).await
                        })))
                    }
                    _ => None,
                };
                items.reserve(got);
                items.extend(resp.kvs().iter().filter_map(|kv| i.kv(kv)));
                match next {
                    Some(next) => {
                        resp = next.await.map_err(|e| {
                            StorageError::Backend(format!("etcd range task failed: {e}"))
                        })??;
                    }
                    None => {
                        return Ok(ListResult {
                            items,
                            revision,
                            more,
                            order: ListOrder::Key,
                        });
                    }
                }
            }
        })
    }

    fn watch<'a>(
        &'a self,
        prefix: &'a str,
        after_revision: Revision,
    ) -> BoxFuture<'a, Result<WatchStream>> {
        Box::pin(std::future::ready(
            self.inner.hub().subscribe(prefix, after_revision),
        ))
    }

    fn watch_batches<'a>(
        &'a self,
        prefix: &'a str,
        after_revision: Revision,
    ) -> BoxFuture<'a, Result<CachedWatchStream>> {
        Box::pin(std::future::ready(
            self.inner.hub().subscribe_batches(prefix, after_revision),
        ))
    }

    fn current_revision(&self) -> BoxFuture<'_, Result<Revision>> {
        Box::pin(self.inner.current())
    }

    fn expire_due(&self) -> BoxFuture<'_, Result<usize>> {
        // etcd deletes keys whose lease ran out by itself.
        Box::pin(std::future::ready(Ok(0)))
    }

    fn compact(&self, revision: Revision) -> BoxFuture<'_, Result<()>> {
        Box::pin(self.inner.compact_to(revision))
    }

    fn health(&self) -> std::result::Result<(), String> {
        match &*self.inner.health.read().unwrap_or_else(|e| e.into_inner()) {
            Health::Up => Ok(()),
            Health::Down(why) => Err(why.clone()),
        }
    }
}
