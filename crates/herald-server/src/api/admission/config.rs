//! The `--admission-control-config-file`: kube-apiserver's `AdmissionConfiguration`
//! (`apiserver.config.k8s.io/v1`, or `v1alpha1`), whose `plugins` list gives each plugin its
//! configuration, in a file of its own or inline:
//!
//! ```yaml
//! apiVersion: apiserver.config.k8s.io/v1
//! kind: AdmissionConfiguration
//! plugins:
//! - name: EventRateLimit
//!   path: eventconfig.yaml        # relative to this file's directory, as upstream
//! # or, instead of path:
//! # configuration:
//! #   apiVersion: eventratelimit.admission.k8s.io/v1alpha1
//! #   kind: Configuration
//! #   limits: [{type: Namespace, qps: 50, burst: 100}]
//! ```
//!
//! As upstream: a non-empty `path` wins over `configuration`; the first entry of a name is
//! the one used; entries for plugins Herald does not have are allowed (a file shared with a
//! kube-apiserver works) and ignored. Errors name the file (the plugin's own file for
//! `path`) and the line; unknown fields are refused.
//!
//! ```
//! use herald_server::api::admission::config::AdmissionConfiguration;
//! let c = AdmissionConfiguration::parse("admission.yaml", "
//! apiVersion: apiserver.config.k8s.io/v1
//! kind: AdmissionConfiguration
//! plugins:
//! - name: EventRateLimit
//!   configuration:
//!     apiVersion: eventratelimit.admission.k8s.io/v1alpha1
//!     kind: Configuration
//!     limits: [{type: Server, qps: 10, burst: 20}]
//! - name: PodSecurity
//!   path: pod-security.yaml
//! ").unwrap();
//! assert_eq!(c.event_rate_limit.unwrap().limits[0].burst, 20);
//! assert_eq!(c.other_plugins, ["PodSecurity"]);
//! ```

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde::de::{self, Error as _, IgnoredAny, MapAccess, Visitor};

use super::event_rate_limit::{self, Configuration};
use super::{AdmissionError, yaml_error};

/// The `apiVersion`s of the file Herald reads.
pub const API_VERSIONS: [&str; 2] = [
    "apiserver.config.k8s.io/v1",
    "apiserver.config.k8s.io/v1alpha1",
];
/// The `kind` of the file.
pub const KIND: &str = "AdmissionConfiguration";

/// What an `AdmissionConfiguration` file configures, plugin files read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdmissionConfiguration {
    /// EventRateLimit's configuration, checked; `None` when no entry names it, or its entry
    /// has neither `path` nor `configuration`.
    pub event_rate_limit: Option<Configuration>,
    /// The names of the other plugins the file has entries for (Herald has none of them).
    pub other_plugins: Vec<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawFile {
    api_version: String,
    kind: String,
    #[serde(default)]
    plugins: Vec<PluginEntry>,
}

/// A `plugins` entry's inline `configuration`, read as its plugin's type when the entry's
/// `name` came before it (as it does in every example), so that errors keep their line.
enum Inline {
    Absent,
    EventRateLimit(Configuration),
    /// Another plugin's: not read.
    Ignored,
    /// `configuration` came before `name`: kept, and read once the name is known.
    Deferred(serde_yaml_ng::Value),
}

struct PluginEntry {
    name: String,
    path: Option<String>,
    configuration: Inline,
}

impl<'de> Deserialize<'de> for PluginEntry {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(EntryVisitor)
    }
}

struct EntryVisitor;

const ENTRY_FIELDS: &[&str] = &["name", "path", "configuration"];

/// A key of a plugin entry; an unknown one is refused while the key is read, so the error
/// has the key's line.
enum EntryField {
    Name,
    Path,
    Configuration,
}

impl<'de> Deserialize<'de> for EntryField {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct FieldVisitor;
        impl Visitor<'_> for FieldVisitor {
            type Value = EntryField;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("name, path or configuration")
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<EntryField, E> {
                match v {
                    "name" => Ok(EntryField::Name),
                    "path" => Ok(EntryField::Path),
                    "configuration" => Ok(EntryField::Configuration),
                    other => Err(E::unknown_field(other, ENTRY_FIELDS)),
                }
            }
        }
        d.deserialize_identifier(FieldVisitor)
    }
}

impl<'de> Visitor<'de> for EntryVisitor {
    type Value = PluginEntry;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a plugin entry: name, and path or configuration")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<PluginEntry, A::Error> {
        let mut name: Option<String> = None;
        let mut path: Option<String> = None;
        let mut configuration = Inline::Absent;
        while let Some(key) = map.next_key::<EntryField>()? {
            match key {
                EntryField::Name => name = Some(map.next_value()?),
                EntryField::Path => path = map.next_value()?,
                EntryField::Configuration => {
                    configuration = match name.as_deref() {
                        Some(event_rate_limit::NAME) => {
                            Inline::EventRateLimit(map.next_value::<Configuration>()?)
                        }
                        Some(_) => {
                            map.next_value::<IgnoredAny>()?;
                            Inline::Ignored
                        }
                        None => Inline::Deferred(map.next_value()?),
                    }
                }
            }
        }
        let name = name.ok_or_else(|| A::Error::missing_field("name"))?;
        Ok(PluginEntry {
            name,
            path,
            configuration,
        })
    }
}

impl AdmissionConfiguration {
    /// Reads and checks the file at `path` and the plugin files it names; errors name the
    /// file and the line.
    pub fn read(path: &Path) -> Result<AdmissionConfiguration, AdmissionError> {
        let text = std::fs::read_to_string(path).map_err(|source| AdmissionError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(path, &text)
    }

    /// Parses the text of the file at `path` (which locates relative plugin paths and names
    /// the file in errors), reading the plugin files it names.
    pub fn parse(
        path: impl AsRef<Path>,
        text: &str,
    ) -> Result<AdmissionConfiguration, AdmissionError> {
        let path = path.as_ref();
        let raw: RawFile = serde_yaml_ng::from_str(text).map_err(|e| yaml_error(path, &e))?;
        let invalid = |message: String| AdmissionError::Invalid {
            path: path.to_path_buf(),
            line: version_line(text),
            message,
        };
        if !API_VERSIONS.contains(&raw.api_version.as_str()) || raw.kind != KIND {
            return Err(invalid(format!(
                "apiVersion {:?}, kind {:?} is not an AdmissionConfiguration (apiVersion {}, kind {KIND})",
                raw.api_version,
                raw.kind,
                API_VERSIONS.join(" or ")
            )));
        }
        let mut event_rate_limit = None;
        let mut seen = false;
        let mut other_plugins = Vec::new();
        for entry in raw.plugins {
            if entry.name != event_rate_limit::NAME {
                if !other_plugins.contains(&entry.name) {
                    other_plugins.push(entry.name);
                }
                continue;
            }
            // Upstream reads the first entry of a name.
            if std::mem::replace(&mut seen, true) {
                continue;
            }
            event_rate_limit = match (entry.path.filter(|p| !p.is_empty()), entry.configuration) {
                (Some(file), _) => Some(Configuration::read(&relative_to(path, &file))?),
                (None, Inline::EventRateLimit(c)) => Some(c),
                (None, Inline::Deferred(v)) => Some(
                    // Read from a tree, which has no lines left.
                    serde_yaml_ng::from_value::<Configuration>(v).map_err(|e| {
                        AdmissionError::Invalid {
                            path: path.to_path_buf(),
                            line: None,
                            message: format!(
                                "plugins: {}: configuration: {e}",
                                event_rate_limit::NAME
                            ),
                        }
                    })?,
                ),
                (None, Inline::Absent | Inline::Ignored) => None,
            };
        }
        Ok(AdmissionConfiguration {
            event_rate_limit,
            other_plugins,
        })
    }
}

/// `file` as upstream finds a plugin's `path`: as it is when absolute, else relative to the
/// directory of the admission configuration file `config`.
fn relative_to(config: &Path, file: &str) -> PathBuf {
    let file = Path::new(file);
    if file.is_absolute() {
        return file.to_path_buf();
    }
    config
        .parent()
        .map(|dir| dir.join(file))
        .unwrap_or_else(|| file.to_path_buf())
}

/// The line of the `apiVersion:` key, where a wrong version or kind is reported.
fn version_line(text: &str) -> Option<usize> {
    text.lines()
        .position(|l| l.trim_start().starts_with("apiVersion:"))
        .map(|n| n + 1)
}
