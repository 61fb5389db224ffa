//! Turning [`ApiError`] into an HTTP response: a `Status` body with the matching code.
//!
//! kube-apiserver answers every failure with a `Status` object whose `code` is also the HTTP
//! status, as `application/json`, and with a `Retry-After` header when the Status carries
//! `details.retryAfterSeconds > 0` (client-go only retries a 429 when that header is present).

use axum::response::{IntoResponse, Response};
use herald_core::status::{ApiError, Reason};
use http::{HeaderValue, StatusCode, header};

/// An [`ApiError`] that axum handlers can return (`Result<T, StatusError>`).
///
/// `ApiError` lives in `herald-core`, so the HTTP conversion lives in this newtype; `?` converts
/// through the `From` impl.
#[derive(Debug, Clone)]
pub struct StatusError(pub ApiError);

impl From<ApiError> for StatusError {
    fn from(e: ApiError) -> Self {
        Self(e)
    }
}

impl std::fmt::Display for StatusError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ({}): {}",
            self.0.code,
            self.0.reason.as_str(),
            self.0.message
        )
    }
}

impl std::error::Error for StatusError {}

impl IntoResponse for StatusError {
    fn into_response(self) -> Response {
        status_response(&self.0)
    }
}

/// The `Status` body of `err`: `err.to_json()`, plus empty `"details":{}` for an error whose
/// `group` is set while nothing else of the details is. kube-apiserver's generic answers
/// (`NewGenericServerResponse`: the 404 for an unknown path, the 405 for an unsupported
/// method) carry details with nothing in them, which `to_json` would leave out.
pub fn status_json(err: &ApiError) -> serde_json::Value {
    let mut v = err.to_json();
    if err.group.is_some()
        && let Some(obj) = v.as_object_mut()
    {
        obj.entry("details")
            .or_insert_with(|| serde_json::json!({}));
    }
    v
}

/// An error of `code`, `reason` and `message` whose `Status` has empty details
/// ([`status_json`]), as kube-apiserver's `NewGenericServerResponse` makes them.
fn generic(code: u16, reason: Reason, message: &str) -> ApiError {
    let mut e = ApiError::new(code, reason, message);
    e.group = Some(String::new());
    e
}

/// The response for `err`: HTTP code = `err.code` (500 if that is not a valid HTTP code),
/// `Content-Type: application/json`, body = [`status_json`].
pub fn status_response(err: &ApiError) -> Response {
    let code = StatusCode::from_u16(err.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = serde_json::to_vec(&status_json(err)).unwrap_or_default();
    let mut resp = (code, body).into_response();
    let headers = resp.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if let Some(secs) = err.retry_after_seconds.filter(|s| *s > 0) {
        headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    resp.extensions_mut()
        .insert(FailureStatus(std::sync::Arc::new(err.clone())));
    if code.is_server_error() {
        resp.extensions_mut().insert(ServerFailure {
            reason: err.reason.as_str().to_string(),
            message: err.message.clone(),
        });
    }
    resp
}

/// The error behind every `Status` answer ([`status_response`]), kept on the response for
/// the layers outside the handler that describe it: the [audit log](super::audit) records
/// its `status`, `message`, `reason` and `details`. Cheap to clone (one `Arc`).
#[derive(Debug, Clone)]
pub struct FailureStatus(pub std::sync::Arc<ApiError>);

/// The `Status` of a 5xx answer, kept on the response for the
/// [`output`](super::output) layer to log with the request's method, path and audit ID:
/// the server's operator needs to hear about its own failures, the client already has them.
#[derive(Debug, Clone)]
pub struct ServerFailure {
    /// The Status reason (`InternalError`, `ServiceUnavailable`, …).
    pub reason: String,
    /// The Status message.
    pub message: String,
}

/// The 404 kube-apiserver sends for a path it does not serve:
/// `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the server
/// could not find the requested resource","reason":"NotFound","details":{},"code":404}`.
pub fn path_not_found() -> ApiError {
    generic(
        404,
        Reason::NotFound,
        "the server could not find the requested resource",
    )
}

/// The 405 for a served path with an unsupported HTTP method (kube-apiserver's generic
/// answer, empty details included).
pub fn method_not_allowed() -> ApiError {
    generic(
        405,
        Reason::MethodNotAllowed,
        "the server does not allow this method on the requested resource",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use herald_core::status::Resource;

    async fn body_json(resp: Response) -> serde_json::Value {
        let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20)
            .await
            .unwrap();
        serde_json::from_slice(&bytes).unwrap()
    }

    #[tokio::test]
    async fn not_found_is_a_404_status() {
        let resp = StatusError(ApiError::not_found(Resource::CORE_EVENTS, "x")).into_response();
        assert_eq!(resp.status(), StatusCode::NOT_FOUND);
        assert_eq!(resp.headers()[header::CONTENT_TYPE], "application/json");
        assert!(resp.headers().get(header::RETRY_AFTER).is_none());
        let v = body_json(resp).await;
        assert_eq!(v["kind"], "Status");
        assert_eq!(v["code"], 404);
        assert_eq!(v["reason"], "NotFound");
        assert_eq!(v["message"], r#"events "x" not found"#);
    }

    #[tokio::test]
    async fn retry_after_header_only_when_positive() {
        let resp = status_response(&ApiError::too_many_requests("slow down", 3));
        assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(resp.headers()[header::RETRY_AFTER], "3");
        let resp = status_response(&ApiError::too_many_requests("slow down", 0));
        assert!(resp.headers().get(header::RETRY_AFTER).is_none());
    }

    #[tokio::test]
    async fn generic_answers_have_empty_details() {
        let v = body_json(status_response(&path_not_found())).await;
        assert_eq!(
            v,
            serde_json::json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the server could not find the requested resource","reason":"NotFound","details":{},"code":404})
        );
        let v = body_json(status_response(&method_not_allowed())).await;
        assert_eq!(v["details"], serde_json::json!({}));
        assert_eq!(v["reason"], "MethodNotAllowed");
        // Other errors keep their own details, or none.
        let v = body_json(status_response(&ApiError::bad_request("x"))).await;
        assert!(v.get("details").is_none());
        let v = body_json(status_response(&ApiError::not_found(
            Resource::CORE_EVENTS,
            "x",
        )))
        .await;
        assert_eq!(v["details"]["name"], "x");
    }

    #[tokio::test]
    async fn invalid_code_falls_back_to_500() {
        let resp = status_response(&ApiError::new(42, Reason::InternalError, "odd"));
        assert_eq!(resp.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(body_json(resp).await["code"], 42);
    }
}
