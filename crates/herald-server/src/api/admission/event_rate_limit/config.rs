//! EventRateLimit's configuration: kube-apiserver's
//! `eventratelimit.admission.k8s.io/v1alpha1` `Configuration`, checked as upstream's
//! validation checks it.
//!
//! ```yaml
//! apiVersion: eventratelimit.admission.k8s.io/v1alpha1
//! kind: Configuration
//! limits:
//! - type: Namespace        # Server | Namespace | User | SourceAndObject
//!   qps: 50                # > 0: tokens added per second
//!   burst: 100             # > 0: the bucket's size (each bucket starts full)
//!   cacheSize: 2000        # >= 0: buckets kept (least recently used evicted); 0 or absent = 4096; ignored for Server
//! ```
//!
//! Every check runs while the YAML is read, so an error carries the line of the limit (or
//! value) it is about: `limits` must not be empty; each limit's `type` must be one of the
//! four, `qps` and `burst` positive and `cacheSize` not negative, in upstream's words
//! (`qps: Invalid value: 0: must be positive`; several errors of one limit as
//! `[burst: …, qps: …]`). Fields Herald does not know are refused rather than ignored, so a
//! misspelt `cachesize` is not silently the default.
//!
//! ```
//! use herald_server::api::admission::event_rate_limit::config::{Configuration, LimitType};
//! let config = Configuration::parse("limits.yaml", "
//! apiVersion: eventratelimit.admission.k8s.io/v1alpha1
//! kind: Configuration
//! limits:
//! - {type: Namespace, qps: 5, burst: 10}
//! ").unwrap();
//! assert_eq!(config.limits[0].limit_type, LimitType::Namespace);
//! assert_eq!(config.limits[0].cache_size, 4096);
//!
//! let bad = Configuration::parse("limits.yaml", "
//! apiVersion: eventratelimit.admission.k8s.io/v1alpha1
//! kind: Configuration
//! limits:
//! - {type: Namespace, qps: 5, burst: 10}
//! - {type: User, qps: 0, burst: 10}
//! ").unwrap_err();
//! assert_eq!(bad.to_string(), "limits.yaml:6: limits[1]: qps: Invalid value: 0: must be positive");
//! ```

use std::fmt;
use std::path::Path;

use serde::Deserialize;

use crate::api::admission::{AdmissionError, aggregate, checked_map, yaml_error};

/// The `apiVersion` of the configuration.
pub const API_VERSION: &str = "eventratelimit.admission.k8s.io/v1alpha1";
/// The `kind` of the configuration.
pub const KIND: &str = "Configuration";
/// The LRU size of a limit whose `cacheSize` is 0 or absent (upstream's default).
pub const DEFAULT_CACHE_SIZE: usize = 4096;

/// What a limit's buckets are keyed by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LimitType {
    /// One bucket for the whole server.
    Server,
    /// One bucket per namespace (of the request's URL).
    Namespace,
    /// One bucket per user name (as authentication found it).
    User,
    /// One bucket per event source and involved object (see
    /// [`EventRateLimit`](super::EventRateLimit) for the exact key in each API group).
    SourceAndObject,
}

impl LimitType {
    /// Every type, in upstream's (sorted) order of its "supported values".
    pub const ALL: [LimitType; 4] = [
        LimitType::Namespace,
        LimitType::Server,
        LimitType::SourceAndObject,
        LimitType::User,
    ];

    /// The name used in the configuration, in messages and as the metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            LimitType::Server => "Server",
            LimitType::Namespace => "Namespace",
            LimitType::User => "User",
            LimitType::SourceAndObject => "SourceAndObject",
        }
    }
}

impl fmt::Display for LimitType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for LimitType {
    type Err = String;

    /// A type by its configuration name (case-sensitive, as upstream).
    fn from_str(s: &str) -> Result<Self, String> {
        LimitType::ALL
            .into_iter()
            .find(|t| t.as_str() == s)
            .ok_or_else(|| {
                let supported: Vec<String> = LimitType::ALL
                    .iter()
                    .map(|t| format!("{:?}", t.as_str()))
                    .collect();
                format!(
                    "type: Unsupported value: {s:?}: supported values: {}",
                    supported.join(", ")
                )
            })
    }
}

/// One limit: a token bucket (or an LRU of them, one per key) that every admitted write
/// takes a token from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    /// What the buckets are keyed by.
    pub limit_type: LimitType,
    /// Tokens added per second (at least 1; upstream's `int32`).
    pub qps: u32,
    /// Tokens a bucket holds, and starts with (at least 1).
    pub burst: u32,
    /// How many keys keep their bucket (defaulted: 0 or absent is [`DEFAULT_CACHE_SIZE`]).
    /// At the bound the least recently used key's bucket is dropped, and that key starts
    /// again with a full bucket. Unused for [`LimitType::Server`] (one bucket).
    pub cache_size: usize,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawLimit {
    #[serde(rename = "type", default)]
    limit_type: String,
    #[serde(default)]
    qps: i32,
    #[serde(default)]
    burst: i32,
    #[serde(default)]
    cache_size: i32,
}

impl RawLimit {
    /// Upstream's validation of one limit, every error in upstream's order (type, burst,
    /// qps, cacheSize), and its defaulting.
    fn check(self) -> Result<Limit, String> {
        let mut errors = Vec::new();
        let limit_type = self
            .limit_type
            .parse::<LimitType>()
            .map_err(|e| errors.push(e))
            .ok();
        if self.burst <= 0 {
            errors.push(format!(
                "burst: Invalid value: {}: must be positive",
                self.burst
            ));
        }
        if self.qps <= 0 {
            errors.push(format!(
                "qps: Invalid value: {}: must be positive",
                self.qps
            ));
        }
        if limit_type != Some(LimitType::Server) && self.cache_size < 0 {
            errors.push(format!(
                "cacheSize: Invalid value: {}: must not be negative",
                self.cache_size
            ));
        }
        match (limit_type, errors.is_empty()) {
            (Some(limit_type), true) => Ok(Limit {
                limit_type,
                qps: self.qps.unsigned_abs(),
                burst: self.burst.unsigned_abs(),
                cache_size: match usize::try_from(self.cache_size) {
                    Ok(n) if n > 0 => n,
                    _ => DEFAULT_CACHE_SIZE,
                },
            }),
            _ => Err(aggregate(&errors)),
        }
    }
}

impl<'de> Deserialize<'de> for Limit {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        checked_map(d, RawLimit::check)
    }
}

/// EventRateLimit's configuration: its limits, in the order they are checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Configuration {
    /// At least one.
    pub limits: Vec<Limit>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawConfiguration {
    api_version: String,
    kind: String,
    #[serde(default)]
    limits: Vec<Limit>,
}

impl RawConfiguration {
    fn check(self) -> Result<Configuration, String> {
        if self.api_version != API_VERSION || self.kind != KIND {
            return Err(format!(
                "EventRateLimit's configuration is apiVersion {API_VERSION}, kind {KIND}; this is apiVersion {:?}, kind {:?}",
                self.api_version, self.kind
            ));
        }
        if self.limits.is_empty() {
            return Err("limits: must not be empty".to_string());
        }
        Ok(Configuration {
            limits: self.limits,
        })
    }
}

impl<'de> Deserialize<'de> for Configuration {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        checked_map(d, RawConfiguration::check)
    }
}

impl Configuration {
    /// Reads and checks the file at `path`; errors name it and the line.
    pub fn read(path: &Path) -> Result<Configuration, AdmissionError> {
        let text = std::fs::read_to_string(path).map_err(|source| AdmissionError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(path, &text)
    }

    /// Parses and checks the text of a configuration file; `path` only names it in errors.
    pub fn parse(path: impl AsRef<Path>, text: &str) -> Result<Configuration, AdmissionError> {
        serde_yaml_ng::from_str(text).map_err(|e| yaml_error(path.as_ref(), &e))
    }
}
