//! The audit log: who did what to which event, and what came of it, one line per request
//! stage, in kube-apiserver's format (`--audit-log-path`).
//!
//! Each line is an `audit.k8s.io/v1` [`Event`](event::Event) at level `Metadata`, as
//! kube-apiserver's log backend writes it:
//!
//! ```text
//! {"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"0b5f…","stage":"ResponseComplete",
//!  "requestURI":"/api/v1/namespaces/prod/events/x","verb":"delete","user":{"username":"jane","uid":"1001",
//!  "groups":["dev","system:authenticated"]},"sourceIPs":["127.0.0.1"],"userAgent":"kubectl/v1.32.4 …",
//!  "objectRef":{"resource":"events","namespace":"prod","name":"x","apiVersion":"v1"},
//!  "responseStatus":{"metadata":{},"code":200},"requestReceivedTimestamp":"2026-11-29T01:13:55.123456Z",
//!  "stageTimestamp":"2026-11-29T01:13:55.125310Z","annotations":{"authorization.k8s.io/decision":"allow",
//!  "authorization.k8s.io/reason":"RBAC: allowed by RoleBinding \"jane/prod\" of ClusterRole \"edit\" to User \"jane\""}}
//! ```
//!
//! (one line in the file). What goes in:
//!
//! - `auditID`: the request's `Audit-Id` response header (the client's `Audit-ID` when it
//!   sent a usable one, else a UUID, see [`output`](crate::api::output)).
//! - `verb`, `objectRef` (resource, namespace, name, apiGroup, apiVersion, subresource): from
//!   the request line, as authorization sees it ([`Attributes`](crate::api::auth::Attributes));
//!   non-resource requests (`/version`, discovery, `/metrics`) have the lower-cased method as
//!   verb and no `objectRef`. The name of a created event is not known at this level (it is
//!   in the body, which is never read).
//! - `user`: the authenticated user; `{}` for a request authentication refused.
//! - `sourceIPs`: `X-Forwarded-For`, `X-Real-Ip`, then the connection's peer
//!   ([`layer::source_ips`]); `userAgent`.
//! - `responseStatus`: the code; for a failure also `status`, `message`, `reason` and
//!   `details` of the `Status` the client got. A 401's message says which credentials were
//!   tried (`Authentication failed, attempted: bearer`), never what they were.
//! - `annotations`: `authorization.k8s.io/decision` (`allow`/`forbid`) and
//!   `authorization.k8s.io/reason` (RBAC's reason, or empty) for every authorized request.
//!
//! **Stages**, as kube-apiserver writes them: `ResponseComplete` for an ordinary request
//! (when its response is ready to go out); for a watch `ResponseStarted` when the stream
//! starts and `ResponseComplete` when it ends, both with the same `auditID`; for a request
//! refused by authentication (401) `ResponseStarted` only. `RequestReceived` is not written
//! (as with the usual policies' `omitStages: [RequestReceived]`).
//!
//! **What is logged**: kube-apiserver logs nothing without an audit policy; Herald has no
//! policy file and logs every API request at `Metadata`, including those refused with 401
//! and 403 (that is who tried), **except** the health probes (`/healthz`, `/livez`,
//! `/readyz` and their checks), which load balancers send every few seconds. Never logged:
//! request and response bodies, and the `Authorization` header or any other credential.
//! Requests turned away before the HTTP layer (a connection over `--max-connections`) are
//! not logged either.
//!
//! **Never in the way**: requests hand their events to a bounded queue and go on; a thread
//! writes the lines ([`sink`], which says what happens at the bound). The file is rotated
//! with kube-apiserver's `--audit-log-maxsize`, `--audit-log-maxbackup` and
//! `--audit-log-maxage` semantics and names ([`rotate`]), owner-only (`0600`).
//!
//! ```no_run
//! use std::sync::Arc;
//! use herald_core::clock::SystemClock;
//! use herald_server::api::audit::{self, AuditOptions, AuditTarget};
//! # fn run() -> Result<(), audit::AuditError> {
//! let options = AuditOptions {
//!     target: Some(AuditTarget::File("/var/log/herald/audit.log".into())),
//!     ..AuditOptions::default()
//! };
//! if let Some((layer, metrics, writer)) = audit::open(&options, Arc::new(SystemClock))? {
//!     // Apply `layer` outermost (api::Guards::audit) and register `metrics`; at shutdown,
//!     // drop the router, then `writer.finished(…)` waits for the queued lines.
//!     # let _ = (layer, metrics, writer);
//! }
//! # Ok(()) }
//! ```

pub mod event;
pub mod layer;
pub mod rotate;
pub mod sink;

use std::path::PathBuf;
use std::sync::Arc;

use herald_core::clock::Clock;

pub use layer::AuditLayer;
pub use rotate::RotationOptions;
pub use sink::{AuditMetrics, AuditSink, AuditWriter};

/// The bound of the queue between requests and the writer when
/// [`AuditOptions::queue_capacity`] is not changed (kube-apiserver's
/// `--audit-log-buffer-size` default).
pub const DEFAULT_QUEUE_CAPACITY: usize = 10_000;

/// Where the audit log goes (`--audit-log-path`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuditTarget {
    /// Standard output (`--audit-log-path -`); not rotated.
    Stdout,
    /// A file, rotated.
    File(PathBuf),
}

impl From<PathBuf> for AuditTarget {
    /// `-` is [`AuditTarget::Stdout`], anything else a file.
    fn from(p: PathBuf) -> Self {
        if p.as_os_str() == "-" {
            AuditTarget::Stdout
        } else {
            AuditTarget::File(p)
        }
    }
}

/// Audit log settings (`herald serve`'s `--audit-log-*` flags). `Default`: no audit log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditOptions {
    /// `--audit-log-path`; `None` = no audit log.
    pub target: Option<AuditTarget>,
    /// `--audit-log-maxsize`, `--audit-log-maxbackup`, `--audit-log-maxage` (files only).
    pub rotation: RotationOptions,
    /// Events that may wait for the writer ([`DEFAULT_QUEUE_CAPACITY`]); beyond it they are
    /// dropped and counted ([`sink`]). Each waiting event holds about a kilobyte.
    pub queue_capacity: usize,
}

impl Default for AuditOptions {
    fn default() -> Self {
        AuditOptions {
            target: None,
            rotation: RotationOptions::default(),
            queue_capacity: DEFAULT_QUEUE_CAPACITY,
        }
    }
}

/// Why the audit log could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// The file (or its directory) cannot be created or opened for writing.
    #[error("cannot open the audit log {}: {source}", path.display())]
    Open {
        /// The `--audit-log-path`.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The writer thread could not be started.
    #[error("cannot start the audit log writer: {0}")]
    Thread(#[source] std::io::Error),
}

/// Opens the audit log of `options` (creating the file `0600` now, so that an unwritable path
/// fails the start) and starts its writer: the layer to apply, the counters to register, and
/// the writer to wait for at shutdown. `None` when `options` has no target.
pub fn open(
    options: &AuditOptions,
    clock: Arc<dyn Clock>,
) -> Result<Option<(AuditLayer, AuditMetrics, AuditWriter)>, AuditError> {
    let Some(target) = &options.target else {
        return Ok(None);
    };
    let output = match target {
        AuditTarget::Stdout => sink::AuditOutput::Stdout,
        AuditTarget::File(path) => sink::AuditOutput::File(
            rotate::RotatingFile::open(path, options.rotation, clock.clone()).map_err(
                |source| AuditError::Open {
                    path: path.clone(),
                    source,
                },
            )?,
        ),
    };
    let metrics = AuditMetrics::default();
    let (sink, writer) = AuditSink::start(output, options.queue_capacity, metrics.clone())
        .map_err(AuditError::Thread)?;
    Ok(Some((AuditLayer::new(sink, clock), metrics, writer)))
}
