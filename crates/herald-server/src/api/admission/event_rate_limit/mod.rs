//! The EventRateLimit admission plugin: token buckets that refuse event writes over a rate
//! with 429 `TooManyRequests`, kube-apiserver's `plugin/pkg/admission/eventratelimit`.
//!
//! # How a write is judged
//!
//! Each [`Limit`] of the [`Configuration`] is a token bucket, or, except for
//! [`LimitType::Server`], one bucket per key in an LRU of `cacheSize` buckets. A bucket
//! starts full (`burst` tokens), gains `qps` tokens a second up to `burst`, and never
//! waits: a write takes a token if there is one and is refused if not (client-go's
//! `TryAccept`, over the injected [`Clock`], so tests drive time). For every create, update
//! and patch that is not a dry run, **every limit is consulted, in the configured order**,
//! so a write takes a token from each bucket that has one even when another bucket refuses
//! it, exactly as upstream. A key evicted from its LRU comes back with a full bucket.
//!
//! | type | key |
//! |---|---|
//! | `Server` | `""` (one bucket) |
//! | `Namespace` | the namespace of the request's URL |
//! | `User` | the authenticated user's name (`system:anonymous` without credentials) |
//! | `SourceAndObject` | see below |
//!
//! The `SourceAndObject` key is, as upstream, the concatenation **without separators** of
//! the event's source and involved object: on core/v1, `source.component`, `source.host`,
//! `involvedObject.kind`, `.namespace`, `.name`, `.uid`, `.apiVersion`. On events.k8s.io/v1,
//! which has no `source`, the equivalent fields take their place:
//! `reportingController` (for `source.component`) and `reportingInstance` (for
//! `source.host`), then `regarding.kind`, `.namespace`, `.name`, `.uid`, `.apiVersion` (for
//! `involvedObject`). The key is taken from the event as it would be stored: for a patch,
//! as patched.
//!
//! # Where Herald differs from upstream, on purpose
//!
//! - **Both API groups are limited.** Upstream compares the request's kind with the core
//!   `Event`, so writes through `/apis/events.k8s.io/v1` (kube-rs's and client-go's new
//!   recorders) are never limited; Herald limits them too.
//! - **A refusal says when to retry.** Upstream's 429 has no `Retry-After`, so client-go does
//!   not retry and recorders drop the event. Herald's carries a `Retry-After` header and
//!   `details.retryAfterSeconds`: the whole seconds (rounded up, at least 1) until every
//!   refusing bucket has a token again, which kube-rs, client-go and Herald's recorder
//!   honour.
//!
//! # The refusal
//!
//! Each refusing limit says `Too many requests: limit reached on type <Type> for key <key>`;
//! the messages are aggregated as kube does (one as it is, several as `[m1, m2]`, repeated
//! ones once) and prefixed once more, so one refusing limit answers
//! `Too many requests: Too many requests: limit reached on type Namespace for key default`.
//! Each refusing limit counts in `herald_apiserver_admission_rejections_total{plugin,
//! limit_type}`, and a warning is logged at most once per [`LOG_INTERVAL`] with the number of
//! refusals since the last one (keys and user names are logged; nothing a request
//! authenticates with ever is).
//!
//! ```
//! use std::sync::Arc;
//! use herald_core::clock::FakeClock;
//! use herald_core::event::{ApiGroup, CoreEvent};
//! use herald_server::api::admission::event_rate_limit::{EventRateLimit, config::Configuration};
//! use herald_server::registry::admission::{Admission, Attributes, Operation};
//!
//! let config = Configuration::parse("limits.yaml", "
//! apiVersion: eventratelimit.admission.k8s.io/v1alpha1
//! kind: Configuration
//! limits: [{type: Namespace, qps: 1, burst: 2}]
//! ").unwrap();
//! let clock = Arc::new(FakeClock::default());
//! let plugin = EventRateLimit::new(&config, clock.clone());
//! let event = CoreEvent::default();
//! let write = Attributes {
//!     operation: Operation::Create, group: ApiGroup::Core, namespace: "default",
//!     user: "jane", event: &event, dry_run: false,
//! };
//! assert!(plugin.validate(&write).is_ok());
//! assert!(plugin.validate(&write).is_ok());
//! let refused = plugin.validate(&write).unwrap_err();
//! assert_eq!(refused.code, 429);
//! assert_eq!(refused.message, "Too many requests: Too many requests: limit reached on type Namespace for key default");
//! assert_eq!(refused.retry_after_seconds, Some(1));
//! clock.advance(std::time::Duration::from_secs(1));
//! assert!(plugin.validate(&write).is_ok());
//! ```

pub mod config;

use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use herald_core::clock::Clock;
use herald_core::event::{ApiGroup, CoreEvent};
use herald_core::flow::TokenBucket;
use herald_core::status::ApiError;
use jiff::Timestamp;
use lru::LruCache;

pub use config::{Configuration, Limit, LimitType};

use super::aggregate;
use crate::api::log_throttle::{LOG_INTERVAL, Throttle};
use crate::api::metrics::{AdmissionRejectionLabels, AdmissionRejections};
use crate::registry::admission::{Admission, Attributes};

/// The plugin's name, in `--enable-admission-plugins` and in the `AdmissionConfiguration`.
pub const NAME: &str = "EventRateLimit";

/// The buckets of one limit.
#[derive(Debug)]
enum Buckets {
    /// `Server`: one bucket.
    One(TokenBucket),
    /// Every other type: a bucket per key, the least recently used evicted at the bound.
    PerKey(LruCache<String, TokenBucket>),
}

/// One limit and its buckets.
#[derive(Debug)]
struct Enforcer {
    limit: Limit,
    buckets: Mutex<Buckets>,
}

impl Enforcer {
    fn new(limit: Limit) -> Self {
        let buckets = match limit.limit_type {
            LimitType::Server => Buckets::One(bucket(&limit)),
            _ => Buckets::PerKey(LruCache::new(
                NonZeroUsize::new(limit.cache_size).unwrap_or(NonZeroUsize::MIN),
            )),
        };
        Enforcer {
            limit,
            buckets: Mutex::new(buckets),
        }
    }

    /// Takes a token from `key`'s bucket at `now`; `Err(wait)` until it has one when it has
    /// none.
    fn try_accept(&self, key: &str, now: Timestamp) -> Result<(), Duration> {
        let mut buckets = self.buckets.lock().unwrap_or_else(PoisonError::into_inner);
        let b = match &mut *buckets {
            Buckets::One(b) => b,
            Buckets::PerKey(lru) => lru.get_or_insert_mut_ref(key, || bucket(&self.limit)),
        };
        if b.try_accept_at(now) {
            return Ok(());
        }
        // Never `None`: qps and burst are positive.
        Err(b
            .time_until_available(now)
            .unwrap_or(Duration::from_secs(1)))
    }
}

/// A full bucket for `limit`.
fn bucket(limit: &Limit) -> TokenBucket {
    // Exact: a configured qps is an int32.
    TokenBucket::new(limit.qps as f32, limit.burst)
}

/// The bucket key of `limit_type` for the write `a` (see the module docs).
pub fn key(limit_type: LimitType, a: &Attributes<'_>) -> String {
    match limit_type {
        LimitType::Server => String::new(),
        LimitType::Namespace => a.namespace.to_string(),
        LimitType::User => a.user.to_string(),
        LimitType::SourceAndObject => source_and_object(a.group, a.event),
    }
}

fn source_and_object(group: ApiGroup, e: &CoreEvent) -> String {
    fn s(v: &Option<String>) -> &str {
        v.as_deref().unwrap_or("")
    }
    let (source, host) = match group {
        ApiGroup::Core => {
            let src = e.source.as_ref();
            (
                src.map_or("", |x| s(&x.component)),
                src.map_or("", |x| s(&x.host)),
            )
        }
        ApiGroup::EventsV1 => (s(&e.reporting_component), s(&e.reporting_instance)),
    };
    let o = &e.involved_object;
    [
        source,
        host,
        s(&o.kind),
        s(&o.namespace),
        s(&o.name),
        s(&o.uid),
        s(&o.api_version),
    ]
    .concat()
}

/// The EventRateLimit plugin (see the module docs). Shared by every request; each limit's
/// buckets sit behind a lock held for one bucket update.
pub struct EventRateLimit {
    enforcers: Vec<Enforcer>,
    clock: Arc<dyn Clock>,
    rejections: AdmissionRejections,
    log: Mutex<Throttle>,
}

impl std::fmt::Debug for EventRateLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventRateLimit")
            .field("enforcers", &self.enforcers)
            .finish_non_exhaustive()
    }
}

impl EventRateLimit {
    /// The plugin with `config`'s limits, all buckets full, reading the time from `clock`.
    pub fn new(config: &Configuration, clock: Arc<dyn Clock>) -> Self {
        EventRateLimit {
            enforcers: config.limits.iter().copied().map(Enforcer::new).collect(),
            clock,
            rejections: AdmissionRejections::default(),
            log: Mutex::new(Throttle::new(LOG_INTERVAL)),
        }
    }

    /// Counts refusals in `rejections` (the server's
    /// [`Metrics::admission_rejections`](crate::api::metrics::Metrics::admission_rejections),
    /// `herald_apiserver_admission_rejections_total`) instead of a counter of its own.
    pub fn with_rejections(mut self, rejections: AdmissionRejections) -> Self {
        self.rejections = rejections;
        self
    }

    /// The limits, in the order they are consulted.
    pub fn limits(&self) -> impl Iterator<Item = &Limit> {
        self.enforcers.iter().map(|e| &e.limit)
    }
}

impl Admission for EventRateLimit {
    /// Creates and updates alike (the only operations admission sees).
    fn validate(&self, a: &Attributes<'_>) -> Result<(), ApiError> {
        // A dry run stores nothing, so it takes no token (upstream's rule).
        if a.dry_run {
            return Ok(());
        }
        let now = self.clock.now();
        let mut refusals: Vec<String> = Vec::new();
        let mut wait = Duration::ZERO;
        for e in &self.enforcers {
            let key = key(e.limit.limit_type, a);
            if let Err(w) = e.try_accept(&key, now) {
                wait = wait.max(w);
                self.rejections
                    .get_or_create(&AdmissionRejectionLabels {
                        plugin: NAME,
                        limit_type: e.limit.limit_type.as_str(),
                    })
                    .inc();
                let message = format!(
                    "Too many requests: limit reached on type {} for key {key}",
                    e.limit.limit_type
                );
                if !refusals.contains(&message) {
                    refusals.push(message);
                }
            }
        }
        if refusals.is_empty() {
            return Ok(());
        }
        let message = format!("Too many requests: {}", aggregate(&refusals));
        let retry_after = retry_after_seconds(wait);
        let suppressed = self
            .log
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .ready();
        if let Some(suppressed) = suppressed {
            tracing::warn!(
                namespace = a.namespace,
                user = a.user,
                retry_after_seconds = retry_after,
                suppressed,
                "EventRateLimit refused an event write (429): {message}"
            );
        }
        Err(ApiError::too_many_requests(message, retry_after))
    }
}

/// `wait` in whole seconds, rounded up, at least 1 (a `Retry-After` of 0 means "now").
pub fn retry_after_seconds(wait: Duration) -> u32 {
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    u32::try_from(secs).unwrap_or(u32::MAX).max(1)
}
