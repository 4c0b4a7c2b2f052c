//! HTTP plumbing shared by the hosted providers: sending a JSON body, mapping transport and
//! status failures to [`LlmError`], reading `Retry-After`, and opening SSE streams.

use std::time::Duration;

use eventsource_stream::{Event, Eventsource};
use futures::{Stream, StreamExt};
use reqwest::header::{HeaderMap, RETRY_AFTER};
use reqwest::{RequestBuilder, Response};
use serde_json::Value;

use crate::error::{LlmError, excerpt};

/// How long establishing a connection may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How much of an error body is kept in [`LlmError::Http`].
const MAX_ERROR_BODY: usize = 4_000;

/// A client with sane connection defaults. Per-call time limits belong to the timeout
/// middleware, not to the client.
pub(crate) fn default_client() -> reqwest::Client {
    crate::http::client_builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .pool_idle_timeout(Duration::from_secs(90))
        .build()
        .unwrap_or_else(|_| reqwest::Client::default())
}

/// Maps a transport failure to a typed error.
pub(crate) fn transport_error(error: &reqwest::Error) -> LlmError {
    if error.is_timeout() {
        LlmError::Timeout { after: Duration::ZERO }
    } else {
        LlmError::Connection(error.to_string())
    }
}

/// The delay a `Retry-After` header asks for: delta-seconds or an HTTP date.
pub fn parse_retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(seconds) = value.parse::<f64>() {
        return (seconds.is_finite() && seconds >= 0.0).then(|| Duration::from_secs_f64(seconds.min(3_600.0)));
    }
    let date = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    let wait = date.with_timezone(&chrono::Utc) - chrono::Utc::now();
    Some(wait.to_std().unwrap_or(Duration::ZERO))
}

/// Sends `request`; a non-2xx answer becomes [`LlmError::Http`] with its body and
/// `Retry-After`.
pub(crate) async fn send(request: RequestBuilder) -> Result<Response, LlmError> {
    let response = request.send().await.map_err(|e| transport_error(&e))?;
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let retry_after = parse_retry_after(response.headers());
    let body = response.text().await.unwrap_or_default();
    Err(LlmError::Http { status: status.as_u16(), body: excerpt(&body, MAX_ERROR_BODY), retry_after })
}

/// Sends `request` and parses the answer as JSON.
pub(crate) async fn send_json(request: RequestBuilder) -> Result<Value, LlmError> {
    let response = send(request).await?;
    let body = response.text().await.map_err(|e| transport_error(&e))?;
    serde_json::from_str(&body).map_err(|e| LlmError::InvalidResponse {
        detail: format!("body is not JSON: {e}"),
        body: excerpt(&body, 1_000),
    })
}

/// The server-sent events of a successful streaming response.
pub(crate) fn sse_events(response: Response) -> impl Stream<Item = Result<Event, LlmError>> + Send {
    response.bytes_stream().eventsource().map(|item| {
        item.map_err(|e| match e {
            eventsource_stream::EventStreamError::Transport(t) => transport_error(&t),
            other => {
                LlmError::InvalidResponse { detail: format!("malformed event stream: {other}"), body: String::new() }
            }
        })
    })
}

/// Parses the JSON payload of an SSE event.
pub(crate) fn event_json(event: &Event) -> Result<Value, LlmError> {
    serde_json::from_str(&event.data).map_err(|e| LlmError::InvalidResponse {
        detail: format!("stream event is not JSON: {e}"),
        body: excerpt(&event.data, 1_000),
    })
}

/// Parses a model's JSON answer, tolerating a surrounding Markdown code fence. A failure is a
/// [`LlmError::SchemaViolation`] so that the re-ask middleware can ask again.
pub(crate) fn parse_answer(text: &str, truncated: bool) -> Result<Value, LlmError> {
    let trimmed = text.trim();
    let unfenced = trimmed
        .strip_prefix("```json")
        .or_else(|| trimmed.strip_prefix("```"))
        .and_then(|rest| rest.trim_end().strip_suffix("```"))
        .unwrap_or(trimmed);
    serde_json::from_str(unfenced).map_err(|e| {
        let mut error = format!("answer is not valid JSON: {e}");
        if truncated {
            error.push_str(" (the answer was cut off by the token limit)");
        }
        LlmError::SchemaViolation { errors: vec![error], answer: text.to_string() }
    })
}

/// An `f32` as a JSON number with its shortest decimal form (`0.2`, not
/// `0.20000000298023224`), so request bodies say what the caller wrote.
pub(crate) fn f32_json(value: f32) -> Value {
    value.to_string().parse::<f64>().ok().and_then(serde_json::Number::from_f64).map_or(Value::Null, Value::Number)
}

/// Reads a non-negative integer field (absent or malformed counts as 0).
pub(crate) fn u64_at(value: &Value, pointer: &str) -> u64 {
    value.pointer(pointer).and_then(Value::as_u64).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use reqwest::header::HeaderValue;
    use serde_json::json;

    use super::*;

    fn headers(value: &str) -> HeaderMap {
        let mut map = HeaderMap::new();
        map.insert(RETRY_AFTER, HeaderValue::from_str(value).unwrap());
        map
    }

    #[test]
    fn retry_after_seconds_and_dates() {
        assert_eq!(parse_retry_after(&headers("2")), Some(Duration::from_secs(2)));
        assert_eq!(parse_retry_after(&headers("0.5")), Some(Duration::from_millis(500)));
        assert_eq!(parse_retry_after(&headers("-1")), None);
        assert_eq!(parse_retry_after(&headers("soon")), None);
        let past = parse_retry_after(&headers("Wed, 21 Oct 2015 07:28:00 GMT"));
        assert_eq!(past, Some(Duration::ZERO));
        let future = (chrono::Utc::now() + chrono::Duration::seconds(30)).to_rfc2822();
        let wait = parse_retry_after(&headers(&future)).unwrap();
        assert!(wait > Duration::from_secs(25) && wait <= Duration::from_secs(30), "{wait:?}");
        assert_eq!(parse_retry_after(&HeaderMap::new()), None);
    }

    #[test]
    fn floats_keep_their_short_form() {
        assert_eq!(f32_json(0.2).to_string(), "0.2");
        assert_eq!(f32_json(0.0).to_string(), "0.0");
        assert_eq!(f32_json(f32::NAN), Value::Null);
    }

    #[test]
    fn answers_parse_with_or_without_fences() {
        assert_eq!(parse_answer(" {\"a\":1} ", false).unwrap(), json!({"a": 1}));
        assert_eq!(parse_answer("```json\n{\"a\":1}\n```", false).unwrap(), json!({"a": 1}));
        let err = parse_answer("{\"a\":", true).unwrap_err().to_string();
        assert!(err.contains("cut off"), "{err}");
    }
}
