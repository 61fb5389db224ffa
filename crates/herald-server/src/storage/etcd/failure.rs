//! What a failed etcd request means for its caller: sent again, refused, or unknown.
//!
//! The distinction decides both the answer and whether the backend may send the request
//! once more by itself:
//!
//! - [`Failure::NotSent`]: no connection could be made to the member the client picked (a
//!   stopped member, refused or timed-out connect). etcd never saw the request, so sending it
//!   again (the balanced channel picks a member again) cannot apply it twice. The backend
//!   does, within the request's time bound ([`super::EtcdOptions::request_timeout`]).
//! - [`Failure::Refused`]: etcd answered without applying it (no leader, too many requests):
//!   503 ServiceUnavailable, the client may retry.
//! - [`Failure::Unknown`]: it may or may not have been applied (etcd's "request timed out"
//!   after a leader was lost, a connection reset mid-request, the time bound ran out): 504
//!   Timeout. A client that retries a create may find it there (409 AlreadyExists).
//! - [`Failure::Other`]: anything else (a bad request): 500.

use crate::storage::StorageError;

/// The kinds of failure, see the [module docs](self).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Failure {
    /// The request never reached etcd: safe to send again.
    NotSent,
    /// etcd refused it without applying it.
    Refused,
    /// It may or may not have been applied.
    Unknown,
    /// Anything else.
    Other,
}

impl Failure {
    /// The kind of `e`.
    pub(super) fn of(e: &etcd_client::Error) -> Failure {
        match e {
            // The client could not even open its channel.
            etcd_client::Error::TransportError(_) => Failure::NotSent,
            etcd_client::Error::GRpcStatus(s) => Failure::of_status(s),
            _ => Failure::Other,
        }
    }

    fn of_status(s: &tonic::Status) -> Failure {
        let message = s.message();
        match s.code() {
            tonic::Code::Unavailable if connect_failed(s) => Failure::NotSent,
            // etcd's own refusals (ErrNoLeader, ErrTooManyRequests, a member not started).
            tonic::Code::Unavailable
                if message.contains("no leader")
                    || message.contains("too many requests")
                    || message.contains("not capable")
                    || message.contains("stopped") =>
            {
                Failure::Refused
            }
            tonic::Code::ResourceExhausted => Failure::Refused,
            tonic::Code::Unavailable | tonic::Code::DeadlineExceeded | tonic::Code::Unknown => {
                Failure::Unknown
            }
            _ => Failure::Other,
        }
    }

    /// The storage error of a request that failed this way (`what` names it, `e` is etcd's
    /// error).
    pub(super) fn error(self, what: &str, e: &dyn std::fmt::Display) -> StorageError {
        let msg = format!("etcd {what}: {e}");
        match self {
            Failure::NotSent | Failure::Refused => StorageError::Unavailable(msg),
            Failure::Unknown => StorageError::Timeout(msg),
            Failure::Other => StorageError::Backend(msg),
        }
    }
}

/// Whether `s` is the client's report of a connection it could not make (tonic turns a
/// failed connect into `Unavailable` with the transport error as its source).
fn connect_failed(s: &tonic::Status) -> bool {
    if s.message().contains("connect error") || s.message().contains("error trying to connect") {
        return true;
    }
    let mut source = std::error::Error::source(s);
    while let Some(e) = source {
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::ConnectionRefused
        {
            return true;
        }
        if e.to_string().contains("connect error") {
            return true;
        }
        source = e.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: tonic::Code, message: &str) -> etcd_client::Error {
        etcd_client::Error::GRpcStatus(tonic::Status::new(code, message))
    }

    #[test]
    fn a_refused_connect_is_sent_again_and_a_lost_leader_is_unknown() {
        use tonic::Code::*;
        assert_eq!(
            Failure::of(&status(Unavailable, "tcp connect error")),
            Failure::NotSent
        );
        assert_eq!(
            Failure::of(&status(Unavailable, "etcdserver: no leader")),
            Failure::Refused
        );
        assert_eq!(
            Failure::of(&status(
                Unavailable,
                "etcdserver: request timed out, possibly due to previous leader failure"
            )),
            Failure::Unknown
        );
        assert_eq!(
            Failure::of(&status(Unknown, "transport error")),
            Failure::Unknown
        );
        assert_eq!(
            Failure::of(&status(DeadlineExceeded, "context deadline exceeded")),
            Failure::Unknown
        );
        assert_eq!(
            Failure::of(&status(InvalidArgument, "etcdserver: key is not provided")),
            Failure::Other
        );
    }

    #[test]
    fn each_kind_has_its_status() {
        let e = "x";
        assert!(matches!(
            Failure::NotSent.error("create", &e),
            StorageError::Unavailable(m) if m == "etcd create: x"
        ));
        assert!(matches!(
            Failure::Refused.error("create", &e),
            StorageError::Unavailable(_)
        ));
        assert!(matches!(
            Failure::Unknown.error("create", &e),
            StorageError::Timeout(_)
        ));
        assert!(matches!(
            Failure::Other.error("create", &e),
            StorageError::Backend(_)
        ));
    }
}
