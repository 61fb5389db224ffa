//! The self-review endpoints kubectl's `auth` commands call, each a `POST` answered `201`
//! with the review and its `status` filled in (nothing is stored):
//!
//! - `kubectl auth can-i VERB RESOURCE` → `POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews`:
//!   whether the caller may do that, by the same authorizer that guards the requests;
//! - `kubectl auth can-i --list` → `POST /apis/authorization.k8s.io/v1/selfsubjectrulesreviews`:
//!   the caller's rules in a namespace;
//! - `kubectl auth whoami` → `POST /apis/authentication.k8s.io/v1/selfsubjectreviews`: the
//!   caller's [`UserInfo`].
//!
//! Bodies are protobuf (what kubectl sends for these built-in kinds) or JSON; anything else
//! is 415. Answers are JSON (kubectl accepts them). The caller needs RBAC
//! permission to `create` these resources, which the bootstrap role `system:basic-user`
//! grants every authenticated user.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Extension, State};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use herald_core::status::ApiError;
use http::{HeaderMap, Method, StatusCode, header};
use k8s_openapi::api::authentication::v1::{SelfSubjectReview, SelfSubjectReviewStatus};
use k8s_openapi::api::authorization::v1::{
    NonResourceRule, ResourceRule, SelfSubjectAccessReview, SelfSubjectRulesReview,
    SubjectAccessReviewStatus, SubjectRulesReviewStatus,
};
use k8s_pb::api as pb;
use prost::Message as _;
use serde::de::DeserializeOwned;

use super::attributes::Attributes;
use super::user::UserInfo;
use super::{Auth, Authorization};
use crate::api::error::StatusError;

/// The path of `SelfSubjectAccessReview`s.
pub const ACCESS_REVIEWS: &str = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
/// The path of `SelfSubjectRulesReview`s.
pub const RULES_REVIEWS: &str = "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews";
/// The path of `SelfSubjectReview`s.
pub const SELF_REVIEWS: &str = "/apis/authentication.k8s.io/v1/selfsubjectreviews";

/// The three review routes, answering with `auth`'s authorizer.
pub fn routes(auth: Arc<Auth>) -> Router {
    Router::new()
        .route(ACCESS_REVIEWS, post(access_review))
        .route(RULES_REVIEWS, post(rules_review))
        .route(SELF_REVIEWS, post(self_review))
        .with_state(auth)
}

/// The review in `bytes`: JSON, or protobuf (a `runtime.Unknown` of `kind` whose message
/// `from_pb` decodes).
fn body<T: DeserializeOwned + Default>(
    headers: &HeaderMap,
    bytes: &[u8],
    kind: &str,
    from_pb: impl FnOnce(&[u8]) -> Result<T, prost::DecodeError>,
) -> Result<T, StatusError> {
    let ct = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let invalid = |e: &dyn std::fmt::Display| {
        StatusError(ApiError::bad_request(format!(
            "the request body is not a valid {kind}: {e}"
        )))
    };
    match ct.split(';').next().unwrap_or("").trim() {
        "application/json" => serde_json::from_slice(bytes).map_err(|e| invalid(&e)),
        "application/vnd.kubernetes.protobuf" => {
            let unwrapped = herald_wire::protobuf::unwrap(bytes, kind).map_err(StatusError)?;
            from_pb(&unwrapped.raw).map_err(|e| invalid(&e))
        }
        _ => Err(StatusError(ApiError::unsupported_media_type(ct))),
    }
}

fn access_review_pb(raw: &[u8]) -> Result<SelfSubjectAccessReview, prost::DecodeError> {
    use k8s_openapi::api::authorization::v1 as api;
    let pb = pb::authorization::v1::SelfSubjectAccessReview::decode(raw)?;
    let spec = pb.spec.unwrap_or_default();
    Ok(SelfSubjectAccessReview {
        spec: api::SelfSubjectAccessReviewSpec {
            resource_attributes: spec.resource_attributes.map(|r| api::ResourceAttributes {
                namespace: r.namespace,
                verb: r.verb,
                group: r.group,
                version: r.version,
                resource: r.resource,
                subresource: r.subresource,
                name: r.name,
                ..api::ResourceAttributes::default()
            }),
            non_resource_attributes: spec.non_resource_attributes.map(|n| {
                api::NonResourceAttributes {
                    path: n.path,
                    verb: n.verb,
                }
            }),
        },
        ..SelfSubjectAccessReview::default()
    })
}

fn rules_review_pb(raw: &[u8]) -> Result<SelfSubjectRulesReview, prost::DecodeError> {
    let pb = pb::authorization::v1::SelfSubjectRulesReview::decode(raw)?;
    let mut review = SelfSubjectRulesReview::default();
    review.spec.namespace = pb.spec.and_then(|s| s.namespace);
    Ok(review)
}

fn self_review_pb(raw: &[u8]) -> Result<SelfSubjectReview, prost::DecodeError> {
    pb::authentication::v1::SelfSubjectReview::decode(raw)?;
    Ok(SelfSubjectReview::default())
}

fn created(value: impl serde::Serialize) -> Response {
    let bytes = serde_json::to_vec(&value).unwrap_or_default();
    let mut resp = (StatusCode::CREATED, bytes).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    resp
}

fn user_of(user: Option<Extension<UserInfo>>) -> UserInfo {
    user.map(|Extension(u)| u)
        .unwrap_or_else(UserInfo::anonymous)
}

/// `POST …/selfsubjectaccessreviews`.
pub async fn access_review(
    State(auth): State<Arc<Auth>>,
    user: Option<Extension<UserInfo>>,
    headers: HeaderMap,
    bytes: Bytes,
) -> Result<Response, StatusError> {
    let user = user_of(user);
    let mut review = body(
        &headers,
        &bytes,
        "SelfSubjectAccessReview",
        access_review_pb,
    )?;
    let spec = &review.spec;
    let attrs = if let Some(r) = &spec.resource_attributes {
        Attributes {
            verb: r.verb.clone().unwrap_or_default(),
            resource: Some(r.resource.clone().unwrap_or_default()),
            subresource: r.subresource.clone().unwrap_or_default(),
            api_group: r.group.clone().unwrap_or_default(),
            api_version: r.version.clone().unwrap_or_default(),
            namespace: r.namespace.clone().unwrap_or_default(),
            name: r.name.clone().unwrap_or_default(),
            path: String::new(),
        }
    } else if let Some(n) = &spec.non_resource_attributes {
        Attributes {
            verb: n.verb.clone().unwrap_or_default(),
            path: n.path.clone().unwrap_or_default(),
            ..Attributes::default()
        }
    } else {
        return Err(StatusError(ApiError::bad_request(
            "spec: one of resourceAttributes or nonResourceAttributes is required",
        )));
    };
    let allowed = auth.authorization.allows(&user, &attrs);
    review.status = Some(SubjectAccessReviewStatus {
        allowed,
        ..SubjectAccessReviewStatus::default()
    });
    Ok(created(review))
}

/// `POST …/selfsubjectrulesreviews`.
pub async fn rules_review(
    State(auth): State<Arc<Auth>>,
    user: Option<Extension<UserInfo>>,
    headers: HeaderMap,
    bytes: Bytes,
) -> Result<Response, StatusError> {
    let user = user_of(user);
    let mut review = body(&headers, &bytes, "SelfSubjectRulesReview", rules_review_pb)?;
    let namespace = review.spec.namespace.clone().unwrap_or_default();
    let all = || Some(vec!["*".to_string()]);
    let rules = match &auth.authorization {
        Authorization::AlwaysAllow => vec![
            k8s_openapi::api::rbac::v1::PolicyRule {
                verbs: vec!["*".into()],
                api_groups: all(),
                resources: all(),
                ..Default::default()
            },
            k8s_openapi::api::rbac::v1::PolicyRule {
                verbs: vec!["*".into()],
                non_resource_urls: all(),
                ..Default::default()
            },
        ],
        Authorization::Rbac(r) => r.current().rules_for(&user, &namespace),
    };
    let mut status = SubjectRulesReviewStatus::default();
    for r in rules {
        if let Some(urls) = r.non_resource_urls.filter(|u| !u.is_empty()) {
            status.non_resource_rules.push(NonResourceRule {
                non_resource_urls: Some(urls),
                verbs: r.verbs.clone(),
            });
        }
        if r.resources.as_ref().is_some_and(|v| !v.is_empty()) {
            status.resource_rules.push(ResourceRule {
                api_groups: r.api_groups,
                resource_names: r.resource_names,
                resources: r.resources,
                verbs: r.verbs,
            });
        }
    }
    review.status = Some(status);
    Ok(created(review))
}

/// `POST …/selfsubjectreviews`.
pub async fn self_review(
    method: Method,
    user: Option<Extension<UserInfo>>,
    headers: HeaderMap,
    bytes: Bytes,
) -> Result<Response, StatusError> {
    debug_assert_eq!(method, Method::POST);
    let user = user_of(user);
    let mut review = body(&headers, &bytes, "SelfSubjectReview", self_review_pb)?;
    review.status = Some(SelfSubjectReviewStatus {
        user_info: Some(k8s_openapi::api::authentication::v1::UserInfo {
            username: Some(user.name),
            uid: (!user.uid.is_empty()).then_some(user.uid),
            groups: Some(user.groups),
            extra: None,
        }),
    });
    Ok(created(review))
}
