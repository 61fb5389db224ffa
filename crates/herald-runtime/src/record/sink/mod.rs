//! Where recorded events are written: the [`EventSink`] trait and its error taxonomy.
//!
//! A sink performs one API call per method; retries, ordering and coalescing are the
//! recorder's job. What the recorder does after a failure depends only on the
//! [`SinkError`] variant (see [`SinkError::retry_class`]), so sinks must classify precisely.

mod kube;
mod memory;

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use k8s_openapi::api::core::v1::Event;

pub use self::kube::KubeSink;
pub use self::memory::{EventsApi, MemorySink, SinkCall, SinkOp};

/// A boxed future returned by [`EventSink`] methods (keeps the trait dyn-compatible).
pub type SinkFuture<'a, E = Event> =
    Pin<Box<dyn Future<Output = Result<E, SinkError>> + Send + 'a>>;

/// Writes events to an API server (or anything shaped like one): core/v1 events (`E`'s
/// default, used by [`record`](crate::record)) or events.k8s.io/v1 events (used by
/// [`events`](crate::events)). One trait for both, so sinks, retries, ordering and accounting
/// are shared by the two recorders.
///
/// Each call is one attempt; it returns the object as the server stored it.
pub trait EventSink<E = Event>: Send + Sync + 'static {
    /// Creates `event` in its namespace (POST).
    fn create<'a>(&'a self, event: &'a E) -> SinkFuture<'a, E>;
    /// Replaces `event` (PUT). The recorders never call this; it exists for completeness.
    fn update<'a>(&'a self, event: &'a E) -> SinkFuture<'a, E>;
    /// Applies a strategic-merge `patch` to the event named like `event` (PATCH).
    fn patch<'a>(&'a self, event: &'a E, patch: &'a [u8]) -> SinkFuture<'a, E>;
}

/// Why a sink call failed. The variants are the recorder's decision table.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SinkError {
    /// The request could not be built (bad input): never retried.
    #[error("unable to construct request: {0}")]
    RequestConstruction(String),
    /// The server answered with a `Status` failure.
    #[error("server rejected the request ({code} {reason}): {message}")]
    Status {
        /// HTTP status code (0 when the server sent none).
        code: u16,
        /// `Status.reason`, e.g. `AlreadyExists`.
        reason: String,
        /// `Status.message`.
        message: String,
        /// `details.causes[].type` values, e.g. `NamespaceTerminating`.
        cause_types: Vec<String>,
        /// How long the server asked us to wait (`Retry-After` / `retryAfterSeconds`).
        retry_after: Option<Duration>,
    },
    /// The server answered with something that is not the expected object: retried.
    #[error("unexpected object in response: {0}")]
    UnexpectedObject(String),
    /// The server could not be reached or the connection failed: retried.
    #[error("transport error: {0}")]
    Transport(String),
}

/// What the recorder does after a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryClass {
    /// Try again after a backoff (at least `Some(d)` when the server said so).
    Retry(Option<Duration>),
    /// The server is throttling (`429` with a `Retry-After`, as Herald's EventRateLimit and
    /// kube-apiserver's API Priority and Fairness send): try again after that long. The write
    /// is not failing, the server asked it to slow down, so the wait does not use up an
    /// attempt (within [`RetryOptions::max_throttled_wait`](crate::record::RetryOptions::max_throttled_wait)).
    Throttled(Duration),
    /// Give up and log it as an error.
    GiveUp,
    /// Give up quietly: an expected rejection (AlreadyExists, NamespaceTerminating).
    GiveUpQuietly,
}

impl SinkError {
    /// A `Status` error with only a code and reason.
    pub fn status(code: u16, reason: &str, message: impl Into<String>) -> Self {
        SinkError::Status {
            code,
            reason: reason.to_string(),
            message: message.into(),
            cause_types: Vec::new(),
            retry_after: None,
        }
    }

    /// True for a `Status` with HTTP code 404 (reason ignored, like client-go's
    /// `IsKeyNotFoundError`): a patch target that expired, so the recorder creates instead.
    pub fn is_not_found(&self) -> bool {
        matches!(self, SinkError::Status { code: 404, .. })
    }

    /// True for a `Status` with reason `AlreadyExists` (HTTP 409).
    pub fn is_already_exists(&self) -> bool {
        matches!(self, SinkError::Status { reason, .. } if reason == "AlreadyExists")
    }

    /// The recorder's decision for this error. A 429 with a retry-after is throttling;
    /// transport errors, unexpected objects, other 429s and 5xx are retried (honouring the
    /// server's retry-after); any other `Status` gives up at once; AlreadyExists and
    /// NamespaceTerminating give up quietly.
    pub fn retry_class(&self) -> RetryClass {
        match self {
            SinkError::RequestConstruction(_) => RetryClass::GiveUp,
            SinkError::UnexpectedObject(_) | SinkError::Transport(_) => RetryClass::Retry(None),
            SinkError::Status {
                code,
                reason,
                cause_types,
                retry_after,
                ..
            } => {
                if let (429, Some(after)) = (*code, retry_after) {
                    RetryClass::Throttled(*after)
                } else if *code == 429 || (500..600).contains(code) {
                    RetryClass::Retry(*retry_after)
                } else if reason == "AlreadyExists"
                    || cause_types.iter().any(|c| c == "NamespaceTerminating")
                {
                    RetryClass::GiveUpQuietly
                } else {
                    RetryClass::GiveUp
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification_follows_the_issue() {
        assert_eq!(
            SinkError::RequestConstruction("x".into()).retry_class(),
            RetryClass::GiveUp
        );
        assert_eq!(
            SinkError::Transport("refused".into()).retry_class(),
            RetryClass::Retry(None)
        );
        assert_eq!(
            SinkError::UnexpectedObject("x".into()).retry_class(),
            RetryClass::Retry(None)
        );
        // An empty StatusError (code 0) gives up, as client-go's TestWriteEventError expects.
        assert_eq!(
            SinkError::status(0, "", "").retry_class(),
            RetryClass::GiveUp
        );
        assert_eq!(
            SinkError::status(422, "Invalid", "").retry_class(),
            RetryClass::GiveUp
        );
        assert_eq!(
            SinkError::status(409, "AlreadyExists", "").retry_class(),
            RetryClass::GiveUpQuietly
        );
        let terminating = SinkError::Status {
            code: 403,
            reason: "Forbidden".into(),
            message: "namespace is being terminated".into(),
            cause_types: vec!["NamespaceTerminating".into()],
            retry_after: None,
        };
        assert_eq!(terminating.retry_class(), RetryClass::GiveUpQuietly);
        let throttled = SinkError::Status {
            code: 429,
            reason: "TooManyRequests".into(),
            message: String::new(),
            cause_types: vec![],
            retry_after: Some(Duration::from_secs(3)),
        };
        assert_eq!(
            throttled.retry_class(),
            RetryClass::Throttled(Duration::from_secs(3))
        );
        let unavailable = SinkError::Status {
            code: 503,
            reason: "ServiceUnavailable".into(),
            message: String::new(),
            cause_types: vec![],
            retry_after: Some(Duration::from_secs(3)),
        };
        assert_eq!(
            unavailable.retry_class(),
            RetryClass::Retry(Some(Duration::from_secs(3)))
        );
        assert_eq!(
            SinkError::status(503, "ServiceUnavailable", "").retry_class(),
            RetryClass::Retry(None)
        );
        assert!(SinkError::status(404, "", "").is_not_found());
    }
}
