//! The `audit.k8s.io/v1` [`Event`]: one line of the audit log, field for field as
//! kube-apiserver writes it (`k8s.io/apiserver/pkg/apis/audit/v1`), in its field order, with
//! its empty fields left out as Go's `omitempty` leaves them out.
//!
//! ```
//! use herald_server::api::audit::event::{Event, MicroTime, Stage};
//! let at: jiff::Timestamp = "2026-11-29T01:02:03.456789Z".parse().unwrap();
//! let mut e = Event::metadata("4f1c…", Stage::ResponseComplete, MicroTime(at));
//! e.request_uri = "/version".into();
//! e.verb = "get".into();
//! let line = serde_json::to_string(&e).unwrap();
//! assert!(line.starts_with(r#"{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","#));
//! assert!(line.contains(r#""requestReceivedTimestamp":"2026-11-29T01:02:03.456789Z""#));
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// `apiVersion` of every event.
pub const API_VERSION: &str = "audit.k8s.io/v1";
/// `kind` of every event.
pub const KIND: &str = "Event";
/// The annotation with the authorization decision: `allow` or `forbid`.
pub const DECISION_ANNOTATION: &str = "authorization.k8s.io/decision";
/// The annotation with the authorizer's reason (possibly empty).
pub const REASON_ANNOTATION: &str = "authorization.k8s.io/reason";
/// [`DECISION_ANNOTATION`]'s value for an allowed request.
pub const DECISION_ALLOW: &str = "allow";
/// [`DECISION_ANNOTATION`]'s value for a forbidden request.
pub const DECISION_FORBID: &str = "forbid";

/// How much of a request is recorded. Herald records every request at `Metadata`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Level {
    /// Nothing.
    None,
    /// Who, what, when and the outcome; no bodies.
    Metadata,
    /// Metadata and the request body.
    Request,
    /// Metadata and both bodies.
    RequestResponse,
}

/// When in the life of a request an event was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Stage {
    /// As soon as the request arrived (Herald does not write this stage).
    RequestReceived,
    /// The response headers went out, the body has not (long-running requests: watches;
    /// and requests refused by authentication, as kube-apiserver logs them).
    ResponseStarted,
    /// The response is complete.
    ResponseComplete,
    /// The handler panicked.
    Panic,
}

/// A timestamp with microseconds, as `metav1.MicroTime` writes it: RFC 3339 in UTC with
/// exactly six fractional digits (`2026-11-29T01:02:03.456789Z`), truncated, not rounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct MicroTime(pub jiff::Timestamp);

impl std::fmt::Display for MicroTime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let t = self.0;
        write!(
            f,
            "{}.{:06}Z",
            t.strftime("%Y-%m-%dT%H:%M:%S"),
            t.subsec_microsecond()
        )
    }
}

impl Serialize for MicroTime {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for MicroTime {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse()
            .map(MicroTime)
            .map_err(|e| serde::de::Error::custom(format!("not a timestamp {s:?}: {e}")))
    }
}

/// `authentication.k8s.io/v1` `UserInfo`: who made the request. Empty (`{}`) for a request
/// authentication refused.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventUser {
    /// The user name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub username: String,
    /// The user's uid.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// The user's groups.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    /// Extra attributes (Herald's authenticators give none).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, Vec<String>>,
}

/// The object a resource request is about (`objectRef`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectReference {
    /// The resource (`events`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub resource: String,
    /// The namespace; empty for cluster-wide requests.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// The object's name; empty for collections and creates.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The object's uid (not known at Metadata level in Herald).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// The API group; empty for the core group.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_group: String,
    /// The API version (`v1`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    /// The object's resourceVersion (not known at Metadata level in Herald).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub resource_version: String,
    /// The subresource.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub subresource: String,
}

/// `metav1.ListMeta` of a [`ResponseStatus`]: always empty, written `{}` as Go writes it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EmptyMeta {}

/// The outcome (`responseStatus`, a `metav1.Status`): the code always; for a failure also
/// `status: Failure`, the message, the reason and the details of the `Status` the client got.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ResponseStatus {
    /// Always `{}`.
    #[serde(default)]
    pub metadata: EmptyMeta,
    /// `Failure` for an error answer, empty otherwise.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub status: String,
    /// The error message.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// The error reason (`Forbidden`, `NotFound`, …).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// The error's details, as in the `Status` body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<StatusDetails>,
    /// The HTTP status code.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub code: u16,
}

fn is_zero(c: &u16) -> bool {
    *c == 0
}

/// `metav1.StatusDetails`, in Go's field order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusDetails {
    /// The object's name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The API group.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub group: String,
    /// The resource (or kind).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// The object's uid.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// What was wrong, field by field.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub causes: Vec<StatusCause>,
    /// When to retry (429, 503).
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub retry_after_seconds: i32,
}

fn is_zero_i32(c: &i32) -> bool {
    *c == 0
}

/// `metav1.StatusCause`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusCause {
    /// `FieldValueRequired`, `FieldValueInvalid`, …
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// What is wrong.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// The field's path.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub field: String,
}

/// One audit event: a line of the audit log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    /// Always [`KIND`].
    pub kind: String,
    /// Always [`API_VERSION`].
    pub api_version: String,
    /// How much is recorded ([`Level::Metadata`] in Herald).
    pub level: Level,
    /// The request's ID, also its `Audit-Id` response header: the client's `Audit-ID` when
    /// it sent a usable one, else a UUID. Every stage of a request has the same one.
    #[serde(rename = "auditID")]
    pub audit_id: String,
    /// When this event was written.
    pub stage: Stage,
    /// The path and query as the client sent them.
    #[serde(rename = "requestURI")]
    pub request_uri: String,
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`
    /// for resource requests, the lower-cased HTTP method for the others.
    pub verb: String,
    /// Who made the request.
    pub user: EventUser,
    /// The impersonated user (Herald does not impersonate; always absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub impersonated_user: Option<EventUser>,
    /// `X-Forwarded-For`'s addresses, then `X-Real-Ip`, then the connection's peer, as
    /// kube-apiserver lists them.
    #[serde(rename = "sourceIPs", default, skip_serializing_if = "Vec::is_empty")]
    pub source_ips: Vec<String>,
    /// The client's `User-Agent` (the client's own claim).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub user_agent: String,
    /// The object of a resource request; absent for the others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_ref: Option<ObjectReference>,
    /// The outcome; absent only in [`Stage::RequestReceived`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_status: Option<ResponseStatus>,
    /// When the request arrived.
    pub request_received_timestamp: MicroTime,
    /// When this stage was reached.
    pub stage_timestamp: MicroTime,
    /// The authorization decision and reason ([`DECISION_ANNOTATION`],
    /// [`REASON_ANNOTATION`]), sorted by key as Go writes a map.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

impl Event {
    /// A [`Level::Metadata`] event of request `audit_id` at `stage`, received and staged at
    /// `at`, with everything else empty.
    pub fn metadata(audit_id: impl Into<String>, stage: Stage, at: MicroTime) -> Event {
        Event {
            kind: KIND.to_string(),
            api_version: API_VERSION.to_string(),
            level: Level::Metadata,
            audit_id: audit_id.into(),
            stage,
            request_uri: String::new(),
            verb: String::new(),
            user: EventUser::default(),
            impersonated_user: None,
            source_ips: Vec::new(),
            user_agent: String::new(),
            object_ref: None,
            response_status: None,
            request_received_timestamp: at,
            stage_timestamp: at,
            annotations: BTreeMap::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An upstream line at Metadata level (the shape of kube-apiserver's log backend, as in
    /// the published examples of its audit log), RBAC reason included.
    const UPSTREAM: &str = r#"{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"d30b40b8-4f6a-4219-9828-a7f732518541","stage":"ResponseComplete","requestURI":"/api/v1/namespaces/default/endpoints/kubernetes","verb":"get","user":{"username":"system:apiserver","uid":"0f440c21-a1c6-4ec3-84a4-50cd5dee2eb7","groups":["system:masters"]},"sourceIPs":["::1"],"userAgent":"kube-apiserver/v1.15.2 (linux/amd64) kubernetes/f627830","objectRef":{"resource":"endpoints","namespace":"default","name":"kubernetes","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200},"requestReceivedTimestamp":"2019-10-21T10:37:55.270181Z","stageTimestamp":"2019-10-21T10:37:55.272000Z","annotations":{"authorization.k8s.io/decision":"allow","authorization.k8s.io/reason":"RBAC: allowed by ClusterRoleBinding \"system:public-info-viewer\" of ClusterRole \"system:public-info-viewer\" to Group \"system:authenticated\""}}"#;

    /// A 403 as kube-apiserver logs it: the Status's fields, details included.
    const UPSTREAM_403: &str = r#"{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"5c1b4a7e-8a3c-4e51-9a43-0b1f0f4e8d21","stage":"ResponseComplete","requestURI":"/apis/events.k8s.io/v1/namespaces/prod/events/x","verb":"delete","user":{"username":"jane","groups":["system:authenticated"]},"sourceIPs":["127.0.0.1"],"userAgent":"kubectl/v1.32.4 (linux/amd64) kubernetes/59526cd","objectRef":{"resource":"events","namespace":"prod","name":"x","apiGroup":"events.k8s.io","apiVersion":"v1"},"responseStatus":{"metadata":{},"status":"Failure","message":"events.events.k8s.io \"x\" is forbidden: User \"jane\" cannot delete resource \"events\" in API group \"events.k8s.io\" in the namespace \"prod\"","reason":"Forbidden","details":{"name":"x","group":"events.k8s.io","kind":"events"},"code":403},"requestReceivedTimestamp":"2026-11-29T01:02:03.000001Z","stageTimestamp":"2026-11-29T01:02:03.100000Z","annotations":{"authorization.k8s.io/decision":"forbid","authorization.k8s.io/reason":""}}"#;

    fn at(s: &str) -> MicroTime {
        MicroTime(s.parse().unwrap())
    }

    #[test]
    fn builds_upstreams_line_byte_for_byte() {
        let mut e = Event::metadata(
            "d30b40b8-4f6a-4219-9828-a7f732518541",
            Stage::ResponseComplete,
            at("2019-10-21T10:37:55.270181Z"),
        );
        e.stage_timestamp = at("2019-10-21T10:37:55.272Z");
        e.request_uri = "/api/v1/namespaces/default/endpoints/kubernetes".into();
        e.verb = "get".into();
        e.user = EventUser {
            username: "system:apiserver".into(),
            uid: "0f440c21-a1c6-4ec3-84a4-50cd5dee2eb7".into(),
            groups: vec!["system:masters".into()],
            ..EventUser::default()
        };
        e.source_ips = vec!["::1".into()];
        e.user_agent = "kube-apiserver/v1.15.2 (linux/amd64) kubernetes/f627830".into();
        e.object_ref = Some(ObjectReference {
            resource: "endpoints".into(),
            namespace: "default".into(),
            name: "kubernetes".into(),
            api_version: "v1".into(),
            ..ObjectReference::default()
        });
        e.response_status = Some(ResponseStatus {
            code: 200,
            ..ResponseStatus::default()
        });
        e.annotations
            .insert(DECISION_ANNOTATION.into(), DECISION_ALLOW.into());
        e.annotations.insert(
            REASON_ANNOTATION.into(),
            r#"RBAC: allowed by ClusterRoleBinding "system:public-info-viewer" of ClusterRole "system:public-info-viewer" to Group "system:authenticated""#.into(),
        );
        assert_eq!(serde_json::to_string(&e).unwrap(), UPSTREAM);
    }

    #[test]
    fn upstream_lines_round_trip_unchanged() {
        for line in [UPSTREAM, UPSTREAM_403] {
            let e: Event = serde_json::from_str(line).unwrap();
            assert_eq!(serde_json::to_string(&e).unwrap(), line);
        }
        let e: Event = serde_json::from_str(UPSTREAM_403).unwrap();
        let status = e.response_status.unwrap();
        assert_eq!((status.code, status.reason.as_str()), (403, "Forbidden"));
        assert_eq!(e.annotations[REASON_ANNOTATION], "");
    }

    #[test]
    fn micro_time_truncates_to_six_digits_in_utc() {
        let t: jiff::Timestamp = "2026-01-02T03:04:05.123456789+02:00".parse().unwrap();
        assert_eq!(MicroTime(t).to_string(), "2026-01-02T01:04:05.123456Z");
        let t: jiff::Timestamp = "2026-01-02T03:04:05Z".parse().unwrap();
        assert_eq!(MicroTime(t).to_string(), "2026-01-02T03:04:05.000000Z");
    }

    #[test]
    fn a_refused_users_is_empty() {
        assert_eq!(serde_json::to_string(&EventUser::default()).unwrap(), "{}");
    }
}
