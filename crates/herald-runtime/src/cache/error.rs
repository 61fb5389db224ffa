//! Error types of the cache module.

use std::time::Duration;

/// A key that is neither `name` nor `namespace/name`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// More than one `/` in the key.
    #[error("unexpected key format: {0:?}")]
    UnexpectedFormat(String),
}

/// Errors from [`Indexer`](super::Indexer) index operations.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IndexError {
    /// The named index was never added.
    #[error("Index with name {0} does not exist")]
    NoSuchIndex(String),
    /// An index with this name already exists.
    #[error("indexer conflict: {0}")]
    Conflict(String),
}

/// Errors of a [`ListerWatcher`](super::ListerWatcher), classified so that the reflector can
/// apply client-go's recovery rules to each class.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ListWatchError {
    /// `410 Gone` / reason `Expired`: the requested resourceVersion (or continue token) is
    /// older than the server's history. The reflector relists.
    #[error("resource version expired (410): {0}")]
    Expired(String),
    /// The requested resourceVersion is newer than the server has ("Too large resource
    /// version"); the reflector retries with a quorum read (`resourceVersion=""`).
    #[error("too large resource version: {0}")]
    TooLargeResourceVersion(String),
    /// `429 Too Many Requests`: retried after a backoff step without relisting.
    #[error("too many requests (429): {message}")]
    TooManyRequests {
        /// The server's message.
        message: String,
        /// The server's `Retry-After`, when it sent one.
        retry_after: Option<Duration>,
    },
    /// The connection was refused (server restarting): retried after a backoff step without
    /// relisting.
    #[error("connection refused: {0}")]
    ConnectionRefused(String),
    /// Any other transport failure (reset, TLS, timeout).
    #[error("transport error: {0}")]
    Transport(String),
    /// A response or watch event that could not be decoded (a corrupt object).
    #[error("decode error: {0}")]
    Decode(String),
    /// `500 Internal Server Error` (for example a `StoreReadError` on the watch).
    #[error("internal server error: {0}")]
    Internal(String),
    /// `400 Bad Request` / `422 Invalid`: the server rejected the request itself (for example
    /// `sendInitialEvents` on a server without streaming lists).
    #[error("request rejected ({code}): {message}")]
    Invalid {
        /// The HTTP status code.
        code: u16,
        /// The server's message.
        message: String,
    },
    /// Any other API `Status` error.
    #[error("API error {code} {reason}: {message}")]
    Api {
        /// The HTTP status code.
        code: u16,
        /// The `Status` reason.
        reason: String,
        /// The server's message.
        message: String,
    },
    /// The watch closed with no event within a second of opening: treated as an error so that
    /// the reflector relists after a backoff step instead of spinning.
    #[error("very short watch: watch closed after {elapsed:?} with no events")]
    VeryShortWatch {
        /// How long the watch lasted.
        elapsed: Duration,
    },
    /// The streaming list did not complete (no `k8s.io/initial-events-end` bookmark); the
    /// reflector falls back to a paginated list.
    #[error("streaming list not supported: {0}")]
    WatchListUnsupported(String),
}

impl ListWatchError {
    /// Classifies an API `Status` (code, reason, message, cause reasons and messages) the way
    /// client-go does, including the three encodings of "too large resource version".
    pub fn from_status<'a>(
        code: u16,
        reason: &str,
        message: &str,
        causes: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Self {
        const TOO_LARGE: &str = "Too large resource version";
        let causes: Vec<(&str, &str)> = causes.into_iter().collect();
        let too_large = causes.iter().any(|(r, _)| *r == "ResourceVersionTooLarge")
            || (reason == "Timeout" && causes.iter().any(|(_, m)| m.contains(TOO_LARGE)))
            || message.contains(TOO_LARGE);
        let message = message.to_owned();
        if too_large {
            return Self::TooLargeResourceVersion(message);
        }
        match (code, reason) {
            (410, _) | (_, "Expired") | (_, "Gone") => Self::Expired(message),
            (429, _) | (_, "TooManyRequests") => Self::TooManyRequests {
                message,
                retry_after: None,
            },
            (500, _) | (_, "InternalError") => Self::Internal(message),
            (400 | 422, _) | (_, "Invalid") | (_, "BadRequest") => Self::Invalid { code, message },
            _ => Self::Api {
                code,
                reason: reason.to_owned(),
                message,
            },
        }
    }

    /// Classifies a `kube` client error.
    pub fn from_kube(err: kube::Error) -> Self {
        match err {
            kube::Error::Api(status) => {
                let causes: Vec<(String, String)> = status
                    .details
                    .as_ref()
                    .map(|d| {
                        d.causes
                            .iter()
                            .map(|c| (c.reason.clone(), c.message.clone()))
                            .collect()
                    })
                    .unwrap_or_default();
                let mut e = Self::from_status(
                    status.code,
                    &status.reason,
                    &status.message,
                    causes.iter().map(|(r, m)| (r.as_str(), m.as_str())),
                );
                if let Self::TooManyRequests { retry_after, .. } = &mut e {
                    *retry_after = status
                        .details
                        .as_ref()
                        .filter(|d| d.retry_after_seconds > 0)
                        .map(|d| Duration::from_secs(u64::from(d.retry_after_seconds)));
                }
                e
            }
            kube::Error::SerdeError(e) => Self::Decode(e.to_string()),
            other => {
                if refused(&other) {
                    Self::ConnectionRefused(other.to_string())
                } else {
                    Self::Transport(other.to_string())
                }
            }
        }
    }

    /// True for the errors client-go retries on the *watch* after one backoff step, without
    /// relisting: connection refused and 429.
    pub fn is_retryable_without_relist(&self) -> bool {
        matches!(
            self,
            Self::ConnectionRefused(_) | Self::TooManyRequests { .. }
        )
    }

    /// True when the requested resourceVersion is unavailable (410 or too large).
    pub fn is_resource_version_unavailable(&self) -> bool {
        matches!(self, Self::Expired(_) | Self::TooLargeResourceVersion(_))
    }
}

fn refused(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = cur {
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::ConnectionRefused
        {
            return true;
        }
        cur = e.source();
    }
    err.to_string().contains("Connection refused")
}

/// Errors of the [`SharedInformer`](super::SharedInformer) life cycle.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InformerError {
    /// `run` was called a second time, or a setter after `run`.
    #[error("informer has already started")]
    AlreadyStarted,
    /// The informer has stopped; no handler can be added.
    #[error("handler {0} was not added to shared informer because it has stopped already")]
    Stopped(String),
    /// An index operation failed.
    #[error(transparent)]
    Index(#[from] IndexError),
}
