//! `herald serve --mirror-kubeconfig FILE [--mirror-context NAME]`: the server also
//! follows a real cluster's events and keeps a copy of each in its own store, for its own
//! retention (`--event-ttl`), where `kubectl get events` and `kubectl events --for` read
//! them after the cluster has deleted them.
//!
//! ```text
//! source API server ── KubeListerWatcher ── Reflector (list, watch with bookmarks, 410 → relist)
//!                                             └─ queue (bounded: back-pressure on the watch)
//!                                                 └─ applier ── EventRegistry::upsert_copy ── store
//!                                                      └─ position file (after the writes are durable)
//! ```
//!
//! - **Which API group.** In kube-apiserver, core/v1 `events` and `events.k8s.io/v1` are two
//!   views of one store: the same objects (same uid, same resourceVersion), so following
//!   both would copy every event twice. The mirror follows core/v1, herald's own storage
//!   shape, and falls back to events.k8s.io/v1 (converted to core/v1) only when the source
//!   does not serve core/v1 events (a 404 on its list). An event written through either
//!   group at the source is copied once either way.
//! - **Same identity.** A copy has the source's namespace, name, uid, creationTimestamp,
//!   counts and series; updates at the source (count, series, lastTimestamp) are applied to
//!   it. Events deleted or expired at the source are kept until the local TTL removes them.
//! - **Marked.** Every copy carries the annotations [`SOURCE_ANNOTATION`] (the source's URL,
//!   as in the kubeconfig) and [`VERSION_ANNOTATION`] (its resourceVersion at the source), so a
//!   reader can tell copies from events written to herald directly
//!   (`kubectl get events -o jsonpath='{.items[?(@.metadata.annotations.herald\.dev/mirrored-from)].metadata.name}'`).
//! - **Resumable.** The source resourceVersion the copy is complete up to is persisted in
//!   `<data>/mirror-position.json` ([`position`]) after the local writes it covers are
//!   durable; after a restart the watch resumes from it ([`Reflector::resume_from`]): no
//!   change is copied twice, none is missed. When the source no longer has that history
//!   (410 Expired), the mirror lists the source and reconciles by uid
//!   ([`herald_server::registry::copy`]): unchanged events are not rewritten, an event with
//!   another uid at a known name replaces the copy, events missing at the source are kept.
//!   With `--store memory` nothing is persisted (the copy does not outlive the process
//!   either).
//! - **Accounted.** What could not be copied is counted and logged ([`apply`]);
//!   `/metrics` has the lag and the counts ([`metrics`]).

pub mod apply;
pub mod metrics;
pub mod position;
pub mod queue;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use herald_core::event::{CoreEvent, EventsV1Event};
use herald_runtime::cache::{KubeListerWatcher, Reflector, ReflectorOptions};
use herald_server::registry::EventRegistry;
use kube::config::{KubeConfigOptions, Kubeconfig, KubeconfigError};
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use crate::usage::UsageError;
use apply::Applier;
use metrics::MirrorMetrics;
use position::PositionFile;
use queue::SourceEvent;

/// The annotation naming the source of a mirrored event: the source API server's URL.
pub const SOURCE_ANNOTATION: &str = "herald.dev/mirrored-from";
/// The annotation holding a mirrored event's resourceVersion at its source.
pub const VERSION_ANNOTATION: &str = "herald.dev/mirrored-resource-version";

/// The mirror's flags of `herald serve`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct MirrorArgs {
    /// Also follow the events of the cluster this kubeconfig points at (its current
    /// context, or --mirror-context) and keep a copy of each here, for --event-ttl: same
    /// namespace, name and uid, counts updated, kept after the cluster deletes them. Copies
    /// are annotated herald.dev/mirrored-from (the cluster's URL) and
    /// herald.dev/mirrored-resource-version (their resourceVersion there). The position is
    /// kept in <data>/mirror-position.json, so a restart resumes where it stopped. Follows
    /// core/v1 events (events.k8s.io/v1 if the cluster does not serve them: both are views
    /// of the same events). The credentials need list and watch on events in all namespaces.
    #[arg(long, value_name = "FILE")]
    pub mirror_kubeconfig: Option<PathBuf>,
    /// The context of --mirror-kubeconfig to follow [default: its current context].
    #[arg(long, value_name = "NAME", requires = "mirror_kubeconfig")]
    pub mirror_context: Option<String>,
}

/// A source the flags named, checked at start.
pub struct Source {
    client: kube::Client,
    /// The source's URL: the annotation of copies, and the owner of the position.
    url: String,
}

impl MirrorArgs {
    /// The source these flags name, `None` without `--mirror-kubeconfig`. A kubeconfig
    /// that cannot be read or used, or an unknown context, is a one-line error naming the
    /// file (and the context); no credential is ever printed.
    pub async fn source(&self) -> anyhow::Result<Option<Source>> {
        let Some(path) = &self.mirror_kubeconfig else {
            return Ok(None);
        };
        let which = path.display();
        let kc = Kubeconfig::read_from(path).map_err(|e| match e {
            KubeconfigError::ReadConfig(io, _) => {
                anyhow::anyhow!("--mirror-kubeconfig {which}: cannot read it: {io}")
            }
            // The YAML parser's message goes on with a drawing of the spot: its first line
            // says what is wrong and where.
            other => anyhow::anyhow!(
                "--mirror-kubeconfig {which}: not a usable kubeconfig: {}",
                other.to_string().lines().next().unwrap_or_default()
            ),
        })?;
        let options = KubeConfigOptions {
            context: self.mirror_context.clone(),
            ..KubeConfigOptions::default()
        };
        let config = kube::Config::from_custom_kubeconfig(kc, &options)
            .await
            .map_err(|e| match (&e, &self.mirror_context) {
                (KubeconfigError::LoadContext(_), Some(ctx)) => UsageError(format!(
                    "--mirror-context {ctx}: no such context in the kubeconfig {which}"
                ))
                .into(),
                _ => anyhow::anyhow!("--mirror-kubeconfig {which}: cannot use it: {e}"),
            })?;
        let url = &config.cluster_url;
        if !matches!(
            (url.scheme_str(), url.host()),
            (Some("http" | "https"), Some(_))
        ) {
            anyhow::bail!(
                "--mirror-kubeconfig {which}: its server {:?} needs an http:// or https:// scheme and a host",
                url.to_string()
            );
        }
        let url = url.to_string().trim_end_matches('/').to_owned();
        let client = kube::Client::try_from(config)
            .map_err(|e| anyhow::anyhow!("--mirror-kubeconfig {which}: cannot use it: {e}"))?;
        Ok(Some(Source { client, url }))
    }
}

impl Source {
    /// The source's URL.
    pub fn url(&self) -> &str {
        &self.url
    }
}

/// The API groups the mirror can follow (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Group {
    /// core/v1 `events`.
    Core,
    /// `events.k8s.io/v1`, when the source does not serve core/v1 events.
    EventsV1,
}

impl Group {
    fn name(self) -> &'static str {
        match self {
            Group::Core => "v1",
            Group::EventsV1 => "events.k8s.io/v1",
        }
    }
}

/// The first wait before the source is asked again when it cannot be reached at start.
const PROBE_RETRY_INITIAL: Duration = Duration::from_millis(800);
/// The longest wait between those attempts.
const PROBE_RETRY_MAX: Duration = Duration::from_secs(30);

/// Follows `source` into `registry` until `shutdown` (see the module docs); the position
/// is kept in `data` (`None`: not kept).
pub async fn run(
    source: Source,
    registry: EventRegistry,
    data: Option<PathBuf>,
    metrics: Arc<MirrorMetrics>,
    shutdown: CancellationToken,
) {
    let Some(group) = choose_group(&source, &shutdown).await else {
        return;
    };
    tracing::info!(source = %source.url, group = group.name(), "mirror: following the source's events");
    let position = PositionFile::new(data.as_deref());
    match group {
        Group::Core => {
            follow::<CoreEvent>(source, group, registry, position, metrics, shutdown).await
        }
        Group::EventsV1 => {
            follow::<EventsV1Event>(source, group, registry, position, metrics, shutdown).await
        }
    }
}

/// core/v1, unless the source answers its list with 404; retried while the source cannot
/// be reached. `None` when stopped first.
async fn choose_group(source: &Source, shutdown: &CancellationToken) -> Option<Group> {
    let api = kube::Api::<CoreEvent>::all(source.client.clone());
    let one = kube::api::ListParams::default().limit(1);
    let mut wait = PROBE_RETRY_INITIAL;
    loop {
        let probe = tokio::select! {
            _ = shutdown.cancelled() => return None,
            r = api.list_metadata(&one) => r,
        };
        match probe {
            Ok(_) => return Some(Group::Core),
            Err(kube::Error::Api(s)) if s.code == 404 => return Some(Group::EventsV1),
            Err(e) => {
                tracing::warn!(source = %source.url, error = %e, "mirror: cannot list the source's events; retrying");
            }
        }
        tokio::select! {
            _ = shutdown.cancelled() => return None,
            _ = tokio::time::sleep(wait) => {}
        }
        wait = (wait * 2).min(PROBE_RETRY_MAX);
    }
}

async fn follow<K>(
    source: Source,
    group: Group,
    registry: EventRegistry,
    position: PositionFile,
    metrics: Arc<MirrorMetrics>,
    shutdown: CancellationToken,
) where
    K: SourceEvent + DeserializeOwned + Clone + std::fmt::Debug,
    K: kube::Resource<DynamicType = ()>,
{
    let resume = position.load(&source.url, group.name()).unwrap_or_default();
    if !resume.is_empty() {
        tracing::info!(resource_version = %resume, "mirror: resuming from the saved position");
    }
    let lw = Arc::new(KubeListerWatcher::new(kube::Api::<K>::all(source.client)));
    let (tx, rx) = queue::queue();
    let reflector = Reflector::new(
        lw,
        tx,
        ReflectorOptions {
            name: "mirror".to_owned(),
            ..ReflectorOptions::default()
        },
    )
    .resume_from(&resume);
    let applier = Applier {
        target: Arc::new(registry),
        position,
        metrics,
        source: source.url,
        group: group.name().to_owned(),
    };
    tokio::join!(reflector.run(shutdown.clone()), applier.run(rx, shutdown));
}
