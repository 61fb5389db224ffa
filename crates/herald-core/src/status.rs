//! Kubernetes `Status` errors: the one shape every API error takes on the wire.
//!
//! [`ApiError`] is a typed error that carries exactly what the HTTP layer needs to answer with
//! a `Status` body (`code`, `reason`, `message`, `details`). The constructors reproduce
//! kube-apiserver's messages word for word, because clients and people match on them.
//!
//! ```
//! use herald_core::status::{ApiError, Resource};
//! let err = ApiError::not_found(Resource::CORE_EVENTS, "web-1.17a");
//! assert_eq!(err.code, 404);
//! assert_eq!(err.message, r#"events "web-1.17a" not found"#);
//! let status = err.to_status();
//! assert_eq!(status.reason.as_deref(), Some("NotFound"));
//! ```

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    ListMeta, Status, StatusCause, StatusDetails,
};

/// Which resource an error is about: the group (empty for core) and the plural resource name,
/// used to render `events "x" not found` or `events.events.k8s.io "x" not found`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resource {
    /// API group; empty for the core group.
    pub group: &'static str,
    /// Plural resource name, e.g. `events`.
    pub resource: &'static str,
    /// The kind, e.g. `Event` (used by `Invalid` messages).
    pub kind: &'static str,
}

impl Resource {
    /// core/v1 events.
    pub const CORE_EVENTS: Resource = Resource {
        group: "",
        resource: "events",
        kind: "Event",
    };
    /// events.k8s.io/v1 events.
    pub const EVENTS_V1: Resource = Resource {
        group: "events.k8s.io",
        resource: "events",
        kind: "Event",
    };

    /// `events` or `events.events.k8s.io`: how kube-apiserver names the resource in messages.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.resource.to_string()
        } else {
            format!("{}.{}", self.resource, self.group)
        }
    }
}

/// The machine-readable reason of a failure (`Status.reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// 400: the request is malformed (a body that does not decode, a bad query).
    BadRequest,
    /// 401: no valid credentials.
    Unauthorized,
    /// 403: the user may not do this, or the object may not be changed this way.
    Forbidden,
    /// 404: no such object, or no such path.
    NotFound,
    /// 409: a create of a name that exists.
    AlreadyExists,
    /// 409: a stale resourceVersion, or a write that lost its retries to concurrent ones.
    Conflict,
    /// 410 without the watch-cache meaning (kube-apiserver uses `Expired` for history).
    Gone,
    /// 410: a resourceVersion or continue token older than the retained history.
    Expired,
    /// 422: the object fails validation; the causes say which fields.
    Invalid,
    /// 405: the path does not take this HTTP method.
    MethodNotAllowed,
    /// 406: no representation the `Accept` header allows.
    NotAcceptable,
    /// 413: the body is larger than the limit.
    RequestEntityTooLarge,
    /// 415: a body in a Content-Type the endpoint does not read.
    UnsupportedMediaType,
    /// 429: over a limit; `Retry-After` says when to try again.
    TooManyRequests,
    /// 500: the server failed (logged with the request's audit ID).
    InternalError,
    /// 503: the store cannot take the request now.
    ServiceUnavailable,
    /// 504: the request did not complete in time (or a resourceVersion never reached).
    Timeout,
}

impl Reason {
    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::BadRequest => "BadRequest",
            Reason::Unauthorized => "Unauthorized",
            Reason::Forbidden => "Forbidden",
            Reason::NotFound => "NotFound",
            Reason::AlreadyExists => "AlreadyExists",
            Reason::Conflict => "Conflict",
            Reason::Gone => "Gone",
            Reason::Expired => "Expired",
            Reason::Invalid => "Invalid",
            Reason::MethodNotAllowed => "MethodNotAllowed",
            Reason::NotAcceptable => "NotAcceptable",
            Reason::RequestEntityTooLarge => "RequestEntityTooLarge",
            Reason::UnsupportedMediaType => "UnsupportedMediaType",
            Reason::TooManyRequests => "TooManyRequests",
            Reason::InternalError => "InternalError",
            Reason::ServiceUnavailable => "ServiceUnavailable",
            Reason::Timeout => "Timeout",
        }
    }
}

/// One field-level cause of an `Invalid` (422) error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldCause {
    /// `FieldValueRequired`, `FieldValueInvalid`, `FieldValueTooLong`, `FieldValueNotSupported`, …
    pub reason: String,
    /// Human-readable text, e.g. `Required value`.
    pub message: String,
    /// The JSON path, e.g. `involvedObject.namespace`.
    pub field: String,
}

/// An API failure that becomes a `Status` body with HTTP status `code`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// `Status.reason`.
    pub reason: Reason,
    /// `Status.message`, in kube-apiserver's words.
    pub message: String,
    /// `details.name`.
    pub name: Option<String>,
    /// `details.group`.
    pub group: Option<String>,
    /// `details.kind` (the resource name for most errors, the kind for `Invalid`).
    pub kind: Option<String>,
    /// `details.causes`.
    pub causes: Vec<FieldCause>,
    /// `details.retryAfterSeconds` (429, 503).
    pub retry_after_seconds: Option<u32>,
    /// `metadata.continue` on a 410 for an expired continue token.
    pub continue_token: Option<String>,
}

impl ApiError {
    /// An error with just a code, reason and message.
    pub fn new(code: u16, reason: Reason, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            name: None,
            group: None,
            kind: None,
            causes: Vec::new(),
            retry_after_seconds: None,
            continue_token: None,
        }
    }

    /// The same error, with `details` naming the object it is about (`name`, `group`, and
    /// `kind` set to the resource, as kube-apiserver's `Status` details do).
    pub fn about(mut self, r: Resource, name: &str) -> Self {
        self.name = Some(name.to_string());
        self.group = Some(r.group.to_string());
        self.kind = Some(r.resource.to_string());
        self
    }

    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, Reason::BadRequest, message)
    }

    /// 404 NotFound: `events "x" not found`.
    pub fn not_found(r: Resource, name: &str) -> Self {
        Self::new(
            404,
            Reason::NotFound,
            format!("{} \"{name}\" not found", r.qualified()),
        )
        .about(r, name)
    }

    /// 409 AlreadyExists: `events "x" already exists`.
    pub fn already_exists(r: Resource, name: &str) -> Self {
        Self::new(
            409,
            Reason::AlreadyExists,
            format!("{} \"{name}\" already exists", r.qualified()),
        )
        .about(r, name)
    }

    /// 409 Conflict for a stale resourceVersion, with kube-apiserver's exact message.
    pub fn conflict(r: Resource, name: &str) -> Self {
        Self::new(
            409,
            Reason::Conflict,
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; \
                 please apply your changes to the latest version and try again",
                r.qualified()
            ),
        )
        .about(r, name)
    }

    /// 422 Invalid: `Event "x" is invalid: <field>: <message>, …` with one cause per field.
    pub fn invalid(r: Resource, name: &str, causes: Vec<FieldCause>) -> Self {
        let detail = causes
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect::<Vec<_>>();
        let detail = match detail.len() {
            0 => String::new(),
            1 => detail[0].clone(),
            _ => format!("[{}]", detail.join(", ")),
        };
        let mut e = Self::new(
            422,
            Reason::Invalid,
            format!("{} \"{name}\" is invalid: {detail}", r.kind),
        );
        e.name = Some(name.to_string());
        e.group = Some(r.group.to_string());
        e.kind = Some(r.kind.to_string());
        e.causes = causes;
        e
    }

    /// 410 Expired: a resourceVersion older than the retained history.
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, Reason::Expired, message)
    }

    /// 405 MethodNotAllowed.
    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(405, Reason::MethodNotAllowed, message)
    }

    /// 406 NotAcceptable.
    pub fn not_acceptable(message: impl Into<String>) -> Self {
        Self::new(406, Reason::NotAcceptable, message)
    }

    /// 413 RequestEntityTooLarge, worded as kube-apiserver's `NewRequestEntityTooLargeError`:
    /// `Request entity too large: <message>`.
    pub fn too_large(message: impl std::fmt::Display) -> Self {
        Self::new(
            413,
            Reason::RequestEntityTooLarge,
            format!("Request entity too large: {message}"),
        )
    }

    /// 415 UnsupportedMediaType for the body of a create, update or delete, naming the types
    /// that are accepted (JSON, YAML and protobuf, in kube-apiserver's order).
    pub fn unsupported_media_type(content_type: &str) -> Self {
        Self::unsupported_media_type_of(
            &[
                "application/json",
                "application/yaml",
                "application/vnd.kubernetes.protobuf",
            ],
            content_type,
        )
    }

    /// 415 UnsupportedMediaType for the body of a PATCH, naming the four patch types.
    pub fn unsupported_patch_type(content_type: &str) -> Self {
        Self::unsupported_media_type_of(
            &[
                "application/json-patch+json",
                "application/merge-patch+json",
                "application/strategic-merge-patch+json",
                "application/apply-patch+yaml",
            ],
            content_type,
        )
    }

    fn unsupported_media_type_of(accepted: &[&str], content_type: &str) -> Self {
        Self::new(
            415,
            Reason::UnsupportedMediaType,
            format!(
                "the body of the request was in an unknown format - accepted media types include: {}; got {content_type:?}",
                accepted.join(", ")
            ),
        )
    }

    /// 429 TooManyRequests with `retryAfterSeconds`.
    pub fn too_many_requests(message: impl Into<String>, retry_after_seconds: u32) -> Self {
        let mut e = Self::new(429, Reason::TooManyRequests, message);
        e.retry_after_seconds = Some(retry_after_seconds);
        e
    }

    /// 500 InternalError.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(
            500,
            Reason::InternalError,
            format!("Internal error occurred: {}", message.into()),
        )
    }

    /// 503 ServiceUnavailable.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(503, Reason::ServiceUnavailable, message)
    }

    /// The `Status` object to send as the response body.
    pub fn to_status(&self) -> Status {
        let has_details = self.name.is_some()
            || self.kind.is_some()
            || !self.causes.is_empty()
            || self.retry_after_seconds.is_some();
        Status {
            code: Some(i32::from(self.code)),
            message: Some(self.message.clone()),
            reason: Some(self.reason.as_str().to_string()),
            status: Some("Failure".to_string()),
            metadata: ListMeta {
                continue_: self.continue_token.clone(),
                ..ListMeta::default()
            },
            details: has_details.then(|| StatusDetails {
                name: self.name.clone(),
                group: self.group.clone().filter(|g| !g.is_empty()),
                kind: self.kind.clone(),
                uid: None,
                retry_after_seconds: self.retry_after_seconds.map(|s| s as i32),
                causes: (!self.causes.is_empty()).then(|| {
                    self.causes
                        .iter()
                        .map(|c| StatusCause {
                            // `omitempty` upstream: a cause about no field has none.
                            field: (!c.field.is_empty()).then(|| c.field.clone()),
                            message: Some(c.message.clone()),
                            reason: Some(c.reason.clone()),
                        })
                        .collect()
                }),
            }),
        }
    }

    /// The `Status` as JSON with `kind: Status` and `apiVersion: v1` set.
    pub fn to_json(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(self.to_status()).unwrap_or_default();
        if let Some(obj) = v.as_object_mut() {
            obj.insert("kind".into(), "Status".into());
            obj.insert("apiVersion".into(), "v1".into());
            obj.entry("metadata")
                .or_insert_with(|| serde_json::json!({}));
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_match_kube_apiserver() {
        assert_eq!(
            ApiError::not_found(Resource::EVENTS_V1, "x").message,
            r#"events.events.k8s.io "x" not found"#
        );
        assert_eq!(
            ApiError::already_exists(Resource::CORE_EVENTS, "x").message,
            r#"events "x" already exists"#
        );
        assert_eq!(
            ApiError::conflict(Resource::CORE_EVENTS, "x").message,
            r#"Operation cannot be fulfilled on events "x": the object has been modified; please apply your changes to the latest version and try again"#
        );
        let inv = ApiError::invalid(
            Resource::CORE_EVENTS,
            "x",
            vec![FieldCause {
                reason: "FieldValueRequired".into(),
                message: "Required value".into(),
                field: "involvedObject.namespace".into(),
            }],
        );
        assert_eq!(inv.code, 422);
        assert_eq!(
            inv.message,
            r#"Event "x" is invalid: involvedObject.namespace: Required value"#
        );
    }

    #[test]
    fn status_json_shape() {
        let v = ApiError::not_found(Resource::CORE_EVENTS, "x").to_json();
        assert_eq!(v["kind"], "Status");
        assert_eq!(v["apiVersion"], "v1");
        assert_eq!(v["status"], "Failure");
        assert_eq!(v["code"], 404);
        assert_eq!(v["reason"], "NotFound");
        assert_eq!(v["details"]["kind"], "events");
        assert_eq!(v["details"]["name"], "x");
        assert!(v["details"].get("group").is_none());
        assert_eq!(v["metadata"], serde_json::json!({}));
    }
}
