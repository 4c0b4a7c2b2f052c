//! Every error the API can answer, and the one table that maps each to its status and
//! body.
//!
//! Bodies follow the wire the official clients parse: validation failures are FastAPI's
//! `{"detail": [{"loc": [...], "msg": ..., "type": ...}]}` with status 422; every other
//! error is `{"detail": "text"}`.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use guidepost_conversation::ConversationError;
use guidepost_store::StoreError;
use serde::Serialize;
use serde_json::{Value, json};

/// One problem with a request, located the way FastAPI locates them: `["body", "name"]`,
/// `["query", "limit"]`, `["path", "session_id"]`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FieldError {
    /// Where: the request part, then the path to the field.
    pub loc: Vec<Value>,
    /// What is wrong, for people.
    pub msg: String,
    /// What is wrong, for programs (`missing`, `string_type`, `enum`, `json_invalid`, ...).
    #[serde(rename = "type")]
    pub kind: String,
    /// The value that was refused, when there was one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
}

impl FieldError {
    /// A problem at `loc`.
    pub fn new(loc: Vec<Value>, kind: &str, msg: impl Into<String>) -> Self {
        Self { loc, msg: msg.into(), kind: kind.into(), input: None }
    }

    /// A problem with a body field.
    pub fn body(path: &[&str], kind: &str, msg: impl Into<String>) -> Self {
        let mut loc = vec![json!("body")];
        loc.extend(path.iter().map(|p| json!(p)));
        Self::new(loc, kind, msg)
    }

    /// A problem with a query parameter.
    pub fn query(name: &str, kind: &str, msg: impl Into<String>) -> Self {
        Self::new(vec![json!("query"), json!(name)], kind, msg)
    }

    /// With the refused value.
    pub fn with_input(mut self, input: Value) -> Self {
        self.input = Some(input);
        self
    }
}

/// An API error.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The id names nothing (404).
    #[error("{kind} `{id}` not found")]
    NotFound {
        /// What was looked for.
        kind: &'static str,
        /// The id.
        id: String,
    },
    /// The request does not fit the operation (422, FastAPI's shape).
    #[error("invalid request")]
    Validation(Vec<FieldError>),
    /// The id is taken, or the entity changed too often under the update (409).
    #[error("{0}")]
    Conflict(String),
    /// A long poll or a wait ended with nothing to return (504).
    #[error("Request timed out")]
    Timeout,
    /// A service the operation needs did not answer (503).
    #[error("{0}")]
    Unavailable(String),
    /// The body is larger than the server accepts (413).
    #[error("the request body is larger than {0} bytes")]
    TooLarge(usize),
    /// What was posted is larger than the server keeps (413), and why.
    #[error("{0}")]
    Oversized(String),
    /// The caller may not do this (403).
    #[error("{0}")]
    Forbidden(String),
    /// No credentials where some are needed, or credentials that match nothing (401).
    #[error("{0}")]
    Unauthorized(String),
    /// Too many requests; try again after this long (429 with `Retry-After`).
    #[error("too many requests: try again in {} s", .0.as_secs().max(1))]
    TooManyRequests(std::time::Duration),
    /// Something failed on the server's side (500; details go to the log, not the body).
    #[error("internal error: {0}")]
    Internal(String),
}

impl ApiError {
    /// A single validation problem.
    pub fn invalid(error: FieldError) -> Self {
        Self::Validation(vec![error])
    }

    /// The status this error answers with.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::NotFound { .. } => StatusCode::NOT_FOUND,
            Self::Validation(_) => StatusCode::UNPROCESSABLE_ENTITY,
            Self::Conflict(_) => StatusCode::CONFLICT,
            Self::Timeout => StatusCode::GATEWAY_TIMEOUT,
            Self::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            Self::TooLarge(_) | Self::Oversized(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Self::Forbidden(_) => StatusCode::FORBIDDEN,
            Self::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            Self::TooManyRequests(_) => StatusCode::TOO_MANY_REQUESTS,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The JSON body.
    pub fn body(&self) -> Value {
        match self {
            Self::Validation(errors) => json!({"detail": errors}),
            Self::Internal(_) => json!({"detail": "Internal server error"}),
            other => json!({"detail": other.to_string()}),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if let Self::Internal(detail) = &self {
            tracing::error!(%detail, "request failed");
        }
        let mut response = (self.status(), axum::Json(self.body())).into_response();
        match &self {
            Self::Unauthorized(_) => {
                response
                    .headers_mut()
                    .insert(axum::http::header::WWW_AUTHENTICATE, axum::http::HeaderValue::from_static("Bearer"));
            }
            Self::TooManyRequests(wait) => {
                let secs = wait.as_secs_f64().ceil().max(1.0) as u64;
                if let Ok(v) = axum::http::HeaderValue::from_str(&secs.to_string()) {
                    response.headers_mut().insert(axum::http::header::RETRY_AFTER, v);
                }
            }
            _ => {}
        }
        response
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::NotFound { kind, id } => Self::NotFound { kind, id },
            StoreError::AlreadyExists { kind, id } => Self::Conflict(format!("{kind} `{id}` already exists")),
            StoreError::Conflict { .. } => Self::Conflict(error.to_string()),
            StoreError::Invalid(message) => Self::invalid(FieldError::new(vec![json!("body")], "value_error", message)),
            StoreError::Unavailable(_) => Self::Unavailable(error.to_string()),
            StoreError::SplitsTurn { .. } => {
                Self::invalid(FieldError::query("min_offset", "value_error", error.to_string()))
            }
            other => Self::Internal(other.to_string()),
        }
    }
}

impl From<ConversationError> for ApiError {
    fn from(error: ConversationError) -> Self {
        match error {
            ConversationError::Store(e) => e.into(),
            ConversationError::Unavailable(_) => Self::Unavailable(error.to_string()),
            ConversationError::Timeout => Self::Timeout,
            ConversationError::AgentCannotRun { .. } | ConversationError::Internal(_) => {
                Self::Internal(error.to_string())
            }
        }
    }
}

/// API result.
pub type ApiResult<T> = Result<T, ApiError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_have_the_fastapi_shapes() {
        let e = ApiError::invalid(FieldError::body(&["name"], "missing", "Field required"));
        assert_eq!(e.status(), StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(
            e.body(),
            json!({"detail": [{"loc": ["body", "name"], "msg": "Field required", "type": "missing"}]})
        );
        let nf = ApiError::NotFound { kind: "session", id: "x".into() };
        assert_eq!((nf.status(), nf.body()), (StatusCode::NOT_FOUND, json!({"detail": "session `x` not found"})));
        assert_eq!(ApiError::Timeout.body(), json!({"detail": "Request timed out"}));
        assert_eq!(ApiError::Internal("db on fire".into()).body(), json!({"detail": "Internal server error"}));
    }
}
