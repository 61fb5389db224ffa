//! `herald serve`'s audit log flags, named and behaving as kube-apiserver's (see
//! `herald_server::api::audit`).

use std::path::PathBuf;

use herald_server::api::audit::{AuditOptions, RotationOptions};

/// The flags, flattened into `herald serve`.
#[derive(Debug, Clone, clap::Args)]
pub struct AuditArgs {
    /// Write an audit log: one audit.k8s.io/v1 Event (JSON) per line for every API request
    /// at level Metadata (who, verb, which event, response code, source IP; never bodies or
    /// credentials), health probes excepted. "-" writes to standard output. Created 0600.
    #[arg(long, value_name = "PATH")]
    pub audit_log_path: Option<PathBuf>,
    /// Megabytes the audit log may reach before it is rotated to
    /// <name>-<UTC time as 2006-01-02T15-04-05.000>.<ext> (0 = 100, as kube-apiserver).
    #[arg(long, value_name = "MB", default_value_t = 0)]
    pub audit_log_maxsize: u64,
    /// Rotated audit logs to keep, the newest (0 = all).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub audit_log_maxbackup: usize,
    /// Days to keep a rotated audit log, by the time in its name (0 = forever).
    #[arg(long, value_name = "DAYS", default_value_t = 0)]
    pub audit_log_maxage: u64,
}

impl AuditArgs {
    /// The server settings of these flags.
    pub fn options(&self) -> AuditOptions {
        AuditOptions {
            target: self.audit_log_path.clone().map(Into::into),
            rotation: RotationOptions {
                max_size_mb: self.audit_log_maxsize,
                max_backups: self.audit_log_maxbackup,
                max_age_days: self.audit_log_maxage,
            },
            ..AuditOptions::default()
        }
    }
}
