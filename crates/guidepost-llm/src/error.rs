//! The one error type of the model layer.
//!
//! Every provider and middleware returns [`LlmError`]. Provider errors keep the HTTP status and
//! body the server sent, so a failure can be diagnosed from the error alone.

use std::time::Duration;

use guidepost_core::limits::LimitExceeded;

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
    /// A prompt template of the program failed to render: a bug, reported instead of sending
    /// the model the template's source.
    #[error("the prompt template `{template}` failed to render: {detail}")]
    Prompt {
        /// The template's name.
        template: String,
        /// What minijinja reported.
        detail: String,
    },
    /// The provider or model cannot do what was asked (for example embeddings on a chat-only API).
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// Reading or writing recordings failed.
    #[error("recording storage error: {0}")]
    Storage(String),
    /// A reply, a stream or a call went past one of the [limits on untrusted
    /// input](guidepost_core::limits) (reply size, stream duration or idle time, call time).
    #[error(transparent)]
    Limit(#[from] LimitExceeded),
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

impl LlmError {
    /// The error with `secret` (an API key) and anything shaped like a provider key or a
    /// bearer token replaced by `[redacted]` in every text it carries. Providers apply it to
    /// every error, so a server that echoes the key (a 401 body quoting the header, a proxy
    /// error page) cannot leak it into logs, traces or the console.
    pub fn redacted(self, secret: Option<&str>) -> Self {
        let scrub = |text: String| crate::secrets::redact(&text, secret);
        match self {
            LlmError::Http { status, body, retry_after } => LlmError::Http { status, body: scrub(body), retry_after },
            LlmError::Connection(detail) => LlmError::Connection(scrub(detail)),
            LlmError::InvalidResponse { detail, body } => {
                LlmError::InvalidResponse { detail: scrub(detail), body: scrub(body) }
            }
            LlmError::SchemaViolation { errors, answer } => {
                LlmError::SchemaViolation { errors: errors.into_iter().map(scrub).collect(), answer: scrub(answer) }
            }
            LlmError::Config(detail) => LlmError::Config(scrub(detail)),
            LlmError::Unsupported(detail) => LlmError::Unsupported(scrub(detail)),
            LlmError::Storage(detail) => LlmError::Storage(scrub(detail)),
            other => other,
        }
    }
}

/// The first `max` characters of `text`, with an ellipsis when cut (char-boundary safe).
pub fn excerpt(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_string()
    } else {
        let cut: String = text.chars().take(max).collect();
        format!("{cut}…")
    }
}

/// The last `max` characters of `text`, with a leading ellipsis when cut.
pub fn tail_excerpt(text: &str, max: usize) -> String {
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
    fn keys_are_redacted_from_every_text() {
        let key = "sk-proj-abcdefghijklmnopqrstuvwxyz0123";
        let body = format!("{{\"error\": \"Incorrect API key provided: {key}\", \"auth\": \"Bearer {key}\"}}");
        let error = LlmError::Http { status: 401, body, retry_after: None }.redacted(Some(key));
        let text = error.to_string();
        assert!(!text.contains("abcdefghijklmnop"), "{text}");
        assert!(text.contains("[redacted]"), "{text}");
        // Key-shaped words go even when the key is not known; short words stay.
        use crate::secrets::redact;
        assert_eq!(redact("key sk-ant-api03-0123456789abcdefXYZ, task-list", None), "key sk-[redacted], task-list");
        assert_eq!(redact("my-secret-value!", Some("secret-value")), "my-[redacted]!");
    }

    #[test]
    fn excerpts_respect_char_boundaries() {
        assert_eq!(excerpt("héllo", 2), "hé…");
        assert_eq!(tail_excerpt("héllo", 3), "…llo");
        assert_eq!(excerpt("ok", 5), "ok");
    }
}
