//! The one error type of the model layer.
//!
//! Every provider and middleware returns [`LlmError`]. Provider errors keep the HTTP status and
//! body the server sent, so a failure can be diagnosed from the error alone.

use std::time::Duration;

/// Everything that can go wrong when asking a model for an answer or an embedding.
///
/// The type is `Clone` so that middleware (retries, caches) can keep and return copies.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LlmError {
    /// The provider answered with a non-success HTTP status.
    #[error("provider answered HTTP {status}: {}", excerpt(body, 500))]
    Http {
        /// HTTP status code.
        status: u16,
        /// Response body (possibly truncated by the provider).
        body: String,
        /// Delay requested by the server through `Retry-After`, if any.
        retry_after: Option<Duration>,
    },
    /// The call did not finish within its time budget.
    #[error("model call timed out after {after:?}")]
    Timeout {
        /// The budget that was exceeded.
        after: Duration,
    },
    /// The provider could not be reached (DNS, refused connection, reset, TLS ...).
    #[error("connection to provider failed: {0}")]
    Connection(String),
    /// The provider answered 2xx but the body is not what its protocol promises.
    #[error("invalid response from provider: {detail} (body: {})", excerpt(body, 300))]
    InvalidResponse {
        /// What was wrong.
        detail: String,
        /// An excerpt of the body that was received.
        body: String,
    },
    /// A structured answer did not conform to the requested JSON Schema (after any re-asks).
    #[error("answer violates the output schema: {}; answer: {}", errors.join("; "), excerpt(answer, 300))]
    SchemaViolation {
        /// One message per violation, each naming the JSON path.
        errors: Vec<String>,
        /// The raw answer text the model gave.
        answer: String,
    },
    /// A local rate limit refused the call (for example a request larger than the token budget).
    #[error("rate limited: {0}")]
    RateLimited(String),
    /// The call was cancelled before it finished.
    #[error("model call cancelled")]
    Cancelled,
    /// Replay-only mode found no recording for a request.
    #[error("no recording for {task} request; {diff}")]
    ReplayMiss {
        /// The task kind of the request.
        task: String,
        /// What differs from the closest recording of the same task kind.
        diff: String,
    },
    /// A configuration string or environment variable is wrong.
    #[error("configuration error: {0}")]
    Config(String),
    /// A scripted model received a request that none of its rules matches.
    #[error("no scripted rule matches this {task} request (calls so far: {calls}); prompt excerpt: {excerpt}")]
    NoScriptedRule {
        /// The task kind of the request.
        task: String,
        /// The end of the last message, to tell which request it was.
        excerpt: String,
        /// How many requests the model had seen before this one.
        calls: usize,
    },
    /// The provider or model cannot do what was asked (for example embeddings on a chat-only API).
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// Reading or writing recordings failed.
    #[error("recording storage error: {0}")]
    Storage(String),
}

impl LlmError {
    /// Whether retrying the same request may succeed: 408, 409, 429, 5xx, timeouts and
    /// connection errors.
    pub fn is_retryable(&self) -> bool {
        match self {
            LlmError::Http { status, .. } => matches!(status, 408 | 409 | 429) || (500..=599).contains(status),
            LlmError::Timeout { .. } | LlmError::Connection(_) => true,
            _ => false,
        }
    }

    /// The delay the server asked for, if it sent one.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            LlmError::Http { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

/// The first `max` characters of `text`, with an ellipsis when cut (char-boundary safe).
pub(crate) fn excerpt(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_string()
    } else {
        let cut: String = text.chars().take(max).collect();
        format!("{cut}…")
    }
}

/// The last `max` characters of `text`, with a leading ellipsis when cut.
pub(crate) fn tail_excerpt(text: &str, max: usize) -> String {
    let count = text.chars().count();
    if count <= max {
        text.to_string()
    } else {
        let tail: String = text.chars().skip(count - max).collect();
        format!("…{tail}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retryable_statuses() {
        let http = |status| LlmError::Http { status, body: String::new(), retry_after: None };
        assert!(http(429).is_retryable());
        assert!(http(503).is_retryable());
        assert!(!http(400).is_retryable());
        assert!(!http(401).is_retryable());
        assert!(LlmError::Connection("reset".into()).is_retryable());
        assert!(!LlmError::Cancelled.is_retryable());
    }

    #[test]
    fn excerpts_respect_char_boundaries() {
        assert_eq!(excerpt("héllo", 2), "hé…");
        assert_eq!(tail_excerpt("héllo", 3), "…llo");
        assert_eq!(excerpt("ok", 5), "ok");
    }
}
