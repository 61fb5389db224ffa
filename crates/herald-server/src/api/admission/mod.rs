//! Admission, kube-apiserver's way: HTTP → authn → authz → **admission** → storage.
//!
//! Authentication and authorization ([`auth`](super::auth)) judge a *request* before any
//! route runs. Admission judges the *object a write would store*, so it runs inside the
//! registry's writes, once the event is complete (for a patch: patched) and valid, and
//! before anything is stored. The registry defines the hook it calls
//! ([`registry::admission`](crate::registry::admission): the [`Admission`] trait and its
//! [`Attributes`]); this module implements the
//! plugins and reads their configuration, and the server hands them to the registry
//! ([`EventRegistry::with_admission`](crate::registry::EventRegistry::with_admission)). That
//! keeps the layers pointing down: the registry never imports the HTTP layer.
//!
//! Configured as on kube-apiserver ([`AdmissionOptions`]):
//!
//! - `--enable-admission-plugins=EventRateLimit`: the plugins to run ([`AdmissionPlugin`];
//!   EventRateLimit is the only one Herald has, and a name it does not know is an error
//!   that lists the ones it does).
//! - `--admission-control-config-file=FILE`: an `AdmissionConfiguration` ([`config`]) that
//!   gives each plugin its configuration. EventRateLimit needs one (its limits must not be
//!   empty).
//!
//! The plugins: [`event_rate_limit`], 429 with `Retry-After` over a rate of event writes.
//!
//! Every problem with the files is found at start, as one line naming the file and the
//! line ([`AdmissionError`]).
//!
//! ```
//! use std::sync::Arc;
//! use herald_core::clock::SystemClock;
//! use herald_server::api::admission::{AdmissionOptions, AdmissionPlugin, AdmissionPlugins};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let file = dir.path().join("admission.yaml");
//! std::fs::write(&file, "
//! apiVersion: apiserver.config.k8s.io/v1
//! kind: AdmissionConfiguration
//! plugins:
//! - name: EventRateLimit
//!   path: event-limits.yaml
//! ").unwrap();
//! std::fs::write(dir.path().join("event-limits.yaml"), "
//! apiVersion: eventratelimit.admission.k8s.io/v1alpha1
//! kind: Configuration
//! limits:
//! - type: Namespace
//!   qps: 50
//!   burst: 100
//! ").unwrap();
//! let options = AdmissionOptions {
//!     enable_plugins: vec!["EventRateLimit".parse::<AdmissionPlugin>().unwrap()],
//!     config_file: Some(file),
//! };
//! let metrics = herald_server::api::metrics::Metrics::default();
//! let plugins = AdmissionPlugins::new(&options, Arc::new(SystemClock), &metrics).unwrap();
//! assert_eq!(plugins.len(), 1);
//! // Then: registry.with_admission(Arc::new(plugins))
//! ```

pub mod config;
pub mod event_rate_limit;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use herald_core::clock::Clock;
use herald_core::status::ApiError;

use super::metrics::Metrics;
use crate::registry::admission::{Admission, Attributes};
use config::AdmissionConfiguration;
use event_rate_limit::EventRateLimit;

/// An admission plugin Herald has (`--enable-admission-plugins`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AdmissionPlugin {
    /// [`event_rate_limit`]: token buckets over event writes.
    EventRateLimit,
}

impl AdmissionPlugin {
    /// Every plugin Herald has.
    pub const ALL: [AdmissionPlugin; 1] = [AdmissionPlugin::EventRateLimit];

    /// The plugin's name, as kube-apiserver spells it.
    pub fn name(self) -> &'static str {
        match self {
            AdmissionPlugin::EventRateLimit => event_rate_limit::NAME,
        }
    }
}

impl fmt::Display for AdmissionPlugin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for AdmissionPlugin {
    type Err = AdmissionError;

    /// A plugin by its name (case-sensitive, as kube-apiserver's).
    fn from_str(s: &str) -> Result<Self, AdmissionError> {
        AdmissionPlugin::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| AdmissionError::UnknownPlugin {
                name: s.to_string(),
            })
    }
}

/// `herald serve`'s admission flags. `Default` enables nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AdmissionOptions {
    /// `--enable-admission-plugins`: the plugins to run, in this order (a plugin named twice
    /// runs once).
    pub enable_plugins: Vec<AdmissionPlugin>,
    /// `--admission-control-config-file`: the `AdmissionConfiguration` ([`config`]). Read
    /// and checked whenever given, even with no plugin enabled.
    pub config_file: Option<PathBuf>,
}

/// Why admission could not be set up: one line, naming the file and line where there is
/// one.
#[derive(Debug, thiserror::Error)]
pub enum AdmissionError {
    /// `--enable-admission-plugins` names a plugin Herald does not have.
    #[error(
        "unknown admission plugin {name:?} in --enable-admission-plugins: Herald supports {}",
        supported()
    )]
    UnknownPlugin {
        /// The name given.
        name: String,
    },
    /// A plugin that needs a configuration was enabled without `--admission-control-config-file`.
    #[error(
        "--enable-admission-plugins={plugin} needs --admission-control-config-file: an AdmissionConfiguration (apiserver.config.k8s.io/v1) with a plugins entry for {plugin}, whose limits must not be empty"
    )]
    NoConfigFile {
        /// The plugin.
        plugin: AdmissionPlugin,
    },
    /// The configuration file has no configuration for an enabled plugin that needs one.
    #[error(
        "{path}: no configuration for {plugin}: add a plugins entry named {plugin} with a path or a configuration (its limits must not be empty)"
    )]
    NotConfigured {
        /// The admission configuration file.
        path: PathBuf,
        /// The plugin.
        plugin: AdmissionPlugin,
    },
    /// A file could not be read.
    #[error("reading admission config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A file is not valid YAML, or not a valid configuration.
    #[error("{}", located(path, *line, message))]
    Invalid {
        /// The file (the admission configuration file, or the plugin file it names).
        path: PathBuf,
        /// 1-based line of the offending value, when the YAML parser knows it.
        line: Option<usize>,
        /// What is wrong.
        message: String,
    },
}

fn supported() -> String {
    let names: Vec<&str> = AdmissionPlugin::ALL.iter().map(|p| p.name()).collect();
    names.join(", ")
}

fn located(path: &Path, line: Option<usize>, message: &str) -> String {
    match line {
        Some(line) => format!("{}:{line}: {message}", path.display()),
        None => format!("{}: {message}", path.display()),
    }
}

/// A YAML error of the file at `path` as an [`AdmissionError::Invalid`]: the line from the
/// parser (1 for an error about the whole document, which the parser does not locate), the
/// message without the parser's own " at line L column C" (the line is said once, up front,
/// as the token and RBAC files say it).
pub(crate) fn yaml_error(path: &Path, e: &serde_yaml_ng::Error) -> AdmissionError {
    let mut message = e.to_string();
    let line = e.location().map_or(1, |l| {
        let suffix = format!(" at line {} column {}", l.line(), l.column());
        if let Some(stripped) = message.strip_suffix(&suffix) {
            message = stripped.to_string();
        }
        l.line()
    });
    AdmissionError::Invalid {
        path: path.to_path_buf(),
        line: Some(line),
        message,
    }
}

/// Deserializes a mapping as `R`, then turns it into a `T` with `check`, *while the mapping
/// is being read*: an error of `check` is raised inside the mapping, so the YAML parser gives
/// it the mapping's line and path (`limits[1]`), as it does its own errors. (An error
/// raised after the mapping was read would get its parent's.)
pub(crate) fn checked_map<'de, D, R, T>(
    d: D,
    check: impl FnOnce(R) -> Result<T, String>,
) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    R: serde::Deserialize<'de>,
{
    struct Checked<R, F>(F, std::marker::PhantomData<R>);
    impl<'de, R, T, F> serde::de::Visitor<'de> for Checked<R, F>
    where
        R: serde::Deserialize<'de>,
        F: FnOnce(R) -> Result<T, String>,
    {
        type Value = T;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a mapping")
        }

        fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
            let raw = R::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
            (self.0)(raw).map_err(serde::de::Error::custom)
        }
    }
    d.deserialize_map(Checked(check, std::marker::PhantomData))
}

/// kube's aggregate of several error messages (`utilerrors.NewAggregate`): one as it is,
/// several as `[a, b]`.
pub(crate) fn aggregate(messages: &[String]) -> String {
    match messages {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

/// The enabled plugins, configured, run in order on every write; the first refusal is the
/// answer (kube-apiserver's validating chain). What the server hands the registry.
pub struct AdmissionPlugins {
    plugins: Vec<(AdmissionPlugin, Box<dyn Admission>)>,
}

impl fmt::Debug for AdmissionPlugins {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<AdmissionPlugin> = self.enabled().collect();
        f.debug_struct("AdmissionPlugins")
            .field("plugins", &names)
            .finish_non_exhaustive()
    }
}

impl AdmissionPlugins {
    /// Reads `options.config_file` (and the plugin files it names) and sets up the enabled
    /// plugins, reading the time from `clock` and counting refusals in `metrics`. Errors
    /// name the file and line.
    pub fn new(
        options: &AdmissionOptions,
        clock: Arc<dyn Clock>,
        metrics: &Metrics,
    ) -> Result<AdmissionPlugins, AdmissionError> {
        let config = options
            .config_file
            .as_deref()
            .map(AdmissionConfiguration::read)
            .transpose()?;
        if let Some(c) = &config
            && !c.other_plugins.is_empty()
        {
            tracing::info!(
                plugins = ?c.other_plugins,
                "the admission configuration file configures plugins Herald does not have; ignored"
            );
        }
        let mut plugins: Vec<(AdmissionPlugin, Box<dyn Admission>)> = Vec::new();
        for plugin in &options.enable_plugins {
            if plugins.iter().any(|(p, _)| p == plugin) {
                continue;
            }
            match plugin {
                AdmissionPlugin::EventRateLimit => {
                    let (Some(file), Some(c)) = (&options.config_file, &config) else {
                        return Err(AdmissionError::NoConfigFile { plugin: *plugin });
                    };
                    let Some(erl) = &c.event_rate_limit else {
                        return Err(AdmissionError::NotConfigured {
                            path: file.clone(),
                            plugin: *plugin,
                        });
                    };
                    let hook = EventRateLimit::new(erl, clock.clone())
                        .with_rejections(metrics.admission_rejections.clone());
                    plugins.push((*plugin, Box::new(hook)));
                }
            }
        }
        Ok(AdmissionPlugins { plugins })
    }

    /// How many plugins run.
    pub fn len(&self) -> usize {
        self.plugins.len()
    }

    /// Whether no plugin runs (the server then gives the registry no hook at all).
    pub fn is_empty(&self) -> bool {
        self.plugins.is_empty()
    }

    /// The plugins that run, in order.
    pub fn enabled(&self) -> impl Iterator<Item = AdmissionPlugin> + '_ {
        self.plugins.iter().map(|(p, _)| *p)
    }
}

impl Admission for AdmissionPlugins {
    fn validate(&self, attributes: &Attributes<'_>) -> Result<(), ApiError> {
        self.plugins
            .iter()
            .try_for_each(|(_, hook)| hook.validate(attributes))
    }
}
