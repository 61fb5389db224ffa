//! URL paths: path parameters whose failures are `Status`es, and what an events path is
//! ([`is_watch`], [`is_collection`]).
//!
//! axum's `Path` answers a segment it cannot decode (`/api/v1/namespaces/%ff/events`: the
//! bytes are not UTF-8) with a plain-text 400; every client of this API reads errors as a
//! `Status`, so [`ApiPath`] answers the same 400 as one, naming the segment.

use axum::extract::path::ErrorKind;
use axum::extract::rejection::PathRejection;
use axum::extract::{FromRequestParts, Path};
use herald_core::status::ApiError;
use http::request::Parts;
use serde::de::DeserializeOwned;

use super::error::StatusError;

/// The path parameters of a route, as axum's [`Path`] extracts them; a segment that cannot
/// be decoded is a 400 `BadRequest` `Status`, a route whose parameters do not fit `T` a 500.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiPath<T>(pub T);

impl<T, S> FromRequestParts<S> for ApiPath<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = StatusError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match Path::<T>::from_request_parts(parts, state).await {
            Ok(Path(value)) => Ok(ApiPath(value)),
            // A 5xx rejection means a route is wired wrongly (a missing or mistyped
            // parameter), not that the client erred: it stays a 500 and is logged as one.
            Err(rejection) if rejection.status().is_server_error() => Err(StatusError(
                ApiError::internal(format!("path parameters: {}", rejection.body_text())),
            )),
            Err(rejection) => Err(StatusError(ApiError::bad_request(message(&rejection)))),
        }
    }
}

fn message(rejection: &PathRejection) -> String {
    if let PathRejection::FailedToDeserializePathParams(e) = rejection
        && let ErrorKind::InvalidUtf8InPathParam { key } = e.kind()
    {
        return format!(
            "the {} in the URL path is not valid UTF-8 once percent-decoded",
            segment_name(key)
        );
    }
    rejection.body_text()
}

/// What a route's parameter is called in messages.
fn segment_name(key: &str) -> &str {
    match key {
        "ns" => "namespace",
        "path" => "document",
        other => other,
    }
}

/// The paths that stream a watch: a collection with `?watch`, or a deprecated `/watch/` path
/// (with or without `?watch`). A GET of one event with `?watch` is a plain GET.
pub fn is_watch(path: &str, query_watch: bool) -> bool {
    group_relative(path).is_some_and(|rest| rest.starts_with("watch/"))
        || (query_watch && is_collection(path))
}

/// The part of an events API path after `/api/v1/` or `/apis/events.k8s.io/v1/`.
fn group_relative(path: &str) -> Option<&str> {
    let path = path.trim_end_matches('/');
    path.strip_prefix("/api/v1/")
        .or_else(|| path.strip_prefix("/apis/events.k8s.io/v1/"))
}

/// True for the collection paths: `…/events` of all namespaces or of one (not an event
/// named `events`).
pub fn is_collection(path: &str) -> bool {
    let Some(rest) = group_relative(path) else {
        return false;
    };
    rest == "events"
        || rest
            .strip_prefix("namespaces/")
            .and_then(|r| r.split_once('/'))
            .is_some_and(|(_, tail)| tail == "events")
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::Router;
    use axum::body::Body;
    use axum::routing::get;
    use http::{Request, StatusCode};
    use http_body_util::BodyExt as _;
    use tower::ServiceExt as _;

    #[tokio::test]
    async fn a_segment_that_is_not_utf8_is_a_400_status_naming_it() {
        let app =
            Router::new().route(
                "/namespaces/{ns}/events/{name}",
                get(
                    |ApiPath((ns, name)): ApiPath<(String, String)>| async move {
                        format!("{ns}/{name}")
                    },
                ),
            );
        let call = |uri: &'static str| {
            let app = app.clone();
            async move {
                let resp = app
                    .oneshot(Request::get(uri).body(Body::empty()).unwrap())
                    .await
                    .unwrap();
                let status = resp.status();
                let body = resp.into_body().collect().await.unwrap().to_bytes();
                (status, body)
            }
        };
        let (status, body) = call("/namespaces/a%20b/events/x").await;
        assert_eq!((status, &body[..]), (StatusCode::OK, &b"a b/x"[..]));

        // A route whose parameters do not fit the type is the server's fault.
        let miswired = Router::new().route(
            "/namespaces/{ns}",
            get(|ApiPath((_, _)): ApiPath<(String, String)>| async { "unreachable" }),
        );
        let resp = miswired
            .oneshot(Request::get("/namespaces/a").body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::INTERNAL_SERVER_ERROR);

        for (uri, segment) in [
            ("/namespaces/%ff%fe/events/x", "namespace"),
            ("/namespaces/default/events/%c3", "name"),
        ] {
            let (status, body) = call(uri).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{uri}");
            let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(v["kind"], "Status", "{uri}: {v}");
            assert_eq!(v["reason"], "BadRequest", "{uri}: {v}");
            assert_eq!(
                v["message"],
                format!("the {segment} in the URL path is not valid UTF-8 once percent-decoded"),
                "{uri}"
            );
        }
    }
}
