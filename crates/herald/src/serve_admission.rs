//! `herald serve`'s admission flags, named and behaving as kube-apiserver's (see
//! `herald_server::api::admission`).

use std::path::PathBuf;

use herald_server::api::admission::{AdmissionError, AdmissionOptions, AdmissionPlugin};

/// The flags, flattened into `herald serve`.
#[derive(Debug, Clone, clap::Args)]
pub struct AdmissionArgs {
    /// Admission plugins to run on event writes, comma-separated (repeatable). Herald has
    /// EventRateLimit: 429 TooManyRequests, with Retry-After, over the rates its
    /// configuration sets (needs --admission-control-config-file).
    #[arg(long, value_name = "PLUGINS", value_delimiter = ',')]
    pub enable_admission_plugins: Vec<String>,
    /// An AdmissionConfiguration (apiserver.config.k8s.io/v1) whose plugins list configures
    /// each plugin, by a path relative to this file or inline (kube-apiserver's format).
    /// Read at start; a mistake stops the start with the file and line.
    #[arg(long, value_name = "FILE")]
    pub admission_control_config_file: Option<PathBuf>,
}

impl AdmissionArgs {
    /// The server settings of these flags; a plugin Herald does not have is an error that
    /// lists those it has.
    pub fn options(&self) -> Result<AdmissionOptions, AdmissionError> {
        Ok(AdmissionOptions {
            enable_plugins: self
                .enable_admission_plugins
                .iter()
                .map(|s| s.trim())
                .filter(|s| !s.is_empty())
                .map(str::parse::<AdmissionPlugin>)
                .collect::<Result<_, _>>()?,
            config_file: self.admission_control_config_file.clone(),
        })
    }
}
