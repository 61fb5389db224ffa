//! The RBAC rules in force, and their reloading when `--authorization-rbac-file` changes.
//!
//! [`spawn`] polls the file's modification time and size every
//! [`AuthOptions::rbac_reload_interval`](super::AuthOptions::rbac_reload_interval) on tokio's
//! clock (so paused-time tests drive it). A change is read and parsed; a valid file replaces
//! the rules at once (requests in flight finish under the rules they started with), an
//! invalid or unreadable one keeps the last good rules and logs why at `warn`, once per
//! change. [`RbacRules::reloads`] reports each outcome.

use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::rbac::{RbacFileError, RbacPolicy};

/// What the reloader has done so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReloadStatus {
    /// Changes of the file that were applied.
    pub applied: u64,
    /// Changes of the file that were refused (the last good rules stayed).
    pub failed: u64,
    /// Why the latest refused change was refused, `None` once a later change applied.
    pub last_error: Option<String>,
}

/// The RBAC policy in force (file rules plus the bootstrap roles), shared by the
/// authorization layer, the review endpoints and the reloader. Cloning shares it.
#[derive(Debug, Clone)]
pub struct RbacRules {
    path: Option<PathBuf>,
    current: Arc<RwLock<Arc<RbacPolicy>>>,
    status: Arc<watch::Sender<ReloadStatus>>,
}

impl RbacRules {
    /// Rules from `path` (the bootstrap roles only when `None`), read now.
    pub fn load(path: Option<PathBuf>) -> Result<RbacRules, RbacFileError> {
        let policy = match &path {
            Some(p) => RbacPolicy::read(p)?,
            None => RbacPolicy::default(),
        };
        Ok(RbacRules {
            path,
            current: Arc::new(RwLock::new(Arc::new(policy.bootstrap()))),
            status: Arc::new(watch::channel(ReloadStatus::default()).0),
        })
    }

    /// Rules of `policy` (plus the bootstrap roles), with no file behind them.
    pub fn fixed(policy: RbacPolicy) -> RbacRules {
        RbacRules {
            path: None,
            current: Arc::new(RwLock::new(Arc::new(policy.bootstrap()))),
            status: Arc::new(watch::channel(ReloadStatus::default()).0),
        }
    }

    /// The policy in force now.
    pub fn current(&self) -> Arc<RbacPolicy> {
        match self.current.read() {
            Ok(g) => g.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// The reloader's outcomes; `changed()` wakes on each one.
    pub fn reloads(&self) -> watch::Receiver<ReloadStatus> {
        self.status.subscribe()
    }

    /// The file behind the rules.
    pub fn path(&self) -> Option<&PathBuf> {
        self.path.as_ref()
    }

    fn set(&self, policy: RbacPolicy) {
        let policy = Arc::new(policy.bootstrap());
        match self.current.write() {
            Ok(mut g) => *g = policy,
            Err(poisoned) => *poisoned.into_inner() = policy,
        }
    }
}

type Stamp = Option<(SystemTime, u64)>;

fn stamp(path: &PathBuf) -> Stamp {
    // (mtime, size): a rewrite within the file system's timestamp granularity that keeps the
    // size is missed until the next change.
    let m = std::fs::metadata(path).ok()?;
    Some((m.modified().ok()?, m.len()))
}

/// Polls the file behind `rules` every `interval` until `stop` is cancelled (returns at once
/// when there is no file). Must be called inside a tokio runtime.
pub fn spawn(
    rules: RbacRules,
    interval: Duration,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    // The file as it is now is the one loaded (or about to be): changes count from here.
    let mut seen = rules.path.as_ref().and_then(stamp);
    tokio::spawn(async move {
        let Some(path) = rules.path.clone() else {
            return;
        };
        let mut ticks = tokio::time::interval(interval.max(Duration::from_millis(1)));
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticks.tick().await;
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = ticks.tick() => {}
            }
            let now = stamp(&path);
            if now == seen {
                continue;
            }
            seen = now;
            match RbacPolicy::read(&path) {
                Ok(policy) => {
                    rules.set(policy);
                    tracing::info!(file = %path.display(), "RBAC file reloaded");
                    rules.status.send_modify(|s| {
                        s.applied += 1;
                        s.last_error = None;
                    });
                }
                Err(e) => {
                    tracing::warn!(error = %e, "RBAC file changed but cannot be used; keeping the last good rules");
                    rules.status.send_modify(|s| {
                        s.failed += 1;
                        s.last_error = Some(e.to_string());
                    });
                }
            }
        }
    })
}
