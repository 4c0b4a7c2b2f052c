//! HTTP plumbing shared by the hosted providers: sending a JSON body, mapping transport and
//! status failures to [`LlmError`], reading `Retry-After`, and opening SSE streams.

use std::time::Duration;

use eventsource_stream::{Event, Eventsource};
use futures::{Stream, StreamExt};
use reqwest::header::{HeaderMap, RETRY_AFTER};
use reqwest::{RequestBuilder, Response};
use serde_json::Value;

use guidepost_core::limits::{Limit, Limits};

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
    // Only the start of an error body is kept, so only the start is read.
    let body = match read_prefix(response, MAX_ERROR_BODY * 4).await {
        Ok((body, _)) => body,
        Err(_) => String::new(),
    };
    Err(LlmError::Http { status: status.as_u16(), body: excerpt(&body, MAX_ERROR_BODY), retry_after })
}

/// Reads at most `max` bytes of a body; the flag says whether there was more.
async fn read_prefix(mut response: Response, max: usize) -> Result<(String, bool), LlmError> {
    let mut bytes = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| transport_error(&e))? {
        if bytes.len() + chunk.len() > max {
            bytes.extend_from_slice(&chunk[..max - bytes.len()]);
            return Ok((String::from_utf8_lossy(&bytes).into_owned(), true));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok((String::from_utf8_lossy(&bytes).into_owned(), false))
}

/// Reads a whole answer body of at most [`Limit::ReplySize`] bytes, refusing a longer one as
/// soon as it gets past the limit (nothing past it is held in memory).
pub(crate) async fn read_body(response: Response, model: &str) -> Result<String, LlmError> {
    let limits = Limits::global();
    let (body, more) = read_prefix(response, limits.reply_size).await?;
    if more {
        let what = format!("an answer of more than {} bytes", limits.reply_size);
        return Err(limits.exceeded(Limit::ReplySize, format!("model {model}"), what).into());
    }
    Ok(body)
}

/// Sends `request` and parses the answer (at most [`Limit::ReplySize`] bytes) as JSON.
pub(crate) async fn send_json(request: RequestBuilder, model: &str) -> Result<Value, LlmError> {
    let response = send(request).await?;
    let body = read_body(response, model).await?;
    serde_json::from_str(&body).map_err(|e| LlmError::InvalidResponse {
        detail: format!("body is not JSON: {e}"),
        body: excerpt(&body, 1_000),
    })
}

/// The error for a streamed reply of `model` whose text went past [`Limit::ReplySize`].
pub(crate) fn reply_too_large(model: &str, bytes: usize) -> LlmError {
    let limits = Limits::global();
    limits.exceeded(Limit::ReplySize, format!("model {model}"), format!("a streamed reply of {bytes} bytes")).into()
}

/// Bytes a stream may carry on the wire for a reply of [`Limit::ReplySize`] bytes of text:
/// each piece of text comes wrapped in an event of JSON around it.
const WIRE_OVERHEAD: usize = 16;

/// Takes UTF-8 byte-order marks off the start of a stream, even when they arrive split over
/// chunks. The event-stream format allows one there, and the event parser underneath slices
/// its first text one byte past a leading mark's start, which panics (a mark is three bytes);
/// so no mark may begin the text it sees: every leading one is dropped (a second one would
/// only have made the first field's name unreadable).
#[derive(Debug, Default)]
struct LeadingBom {
    /// The stream's first bytes while they may still be marks or the start of one.
    pending: Vec<u8>,
    /// Whether the start of the stream has been dealt with.
    done: bool,
}

impl LeadingBom {
    const MARK: [u8; 3] = [0xEF, 0xBB, 0xBF];

    /// The chunk to pass on: empty while the start may still be a mark.
    fn strip(&mut self, chunk: bytes::Bytes) -> bytes::Bytes {
        if self.done {
            return chunk;
        }
        self.pending.extend_from_slice(&chunk);
        let mut start = 0;
        while self.pending[start..].starts_with(&Self::MARK) {
            start += 3;
        }
        let rest = &self.pending[start..];
        if rest.len() < 3 && Self::MARK.starts_with(rest) {
            // Only marks so far, perhaps a partial one: wait for more.
            self.pending.drain(..start);
            return bytes::Bytes::new();
        }
        self.done = true;
        let mut out = std::mem::take(&mut self.pending);
        out.drain(..start);
        bytes::Bytes::from(out)
    }
}

/// The server-sent events of a successful streaming response. The stream of bytes is cut
/// (with a [`Limit::ReplySize`] error) past the limit's wire allowance, so one endless event
/// without a line break cannot grow the parser's buffer without bound.
pub(crate) fn sse_events(response: Response, model: String) -> impl Stream<Item = Result<Event, LlmError>> + Send {
    let limits = Limits::global();
    let allowance = limits.reply_size.saturating_mul(WIRE_OVERHEAD).max(1 << 20);
    // One line (one event's data) may not outgrow what one reply may hold: the event
    // parser keeps an unfinished line in memory and looks through it again for each chunk.
    let longest_line = limits.reply_size.saturating_mul(2).max(64 * 1024);
    let (mut seen, mut line) = (0usize, 0usize);
    let mut bom = LeadingBom::default();
    let bytes = response.bytes_stream().map(move |chunk| {
        let chunk = chunk?;
        seen = seen.saturating_add(chunk.len());
        line = match chunk.iter().rposition(|b| *b == b'\n') {
            Some(at) => chunk.len() - at - 1,
            None => line.saturating_add(chunk.len()),
        };
        if seen > allowance || line > longest_line {
            return Err(StreamCut::TooLarge(seen));
        }
        Ok(bom.strip(chunk))
    });
    bytes.eventsource().map(move |item| {
        item.map_err(|e| match e {
            eventsource_stream::EventStreamError::Transport(StreamCut::Transport(t)) => transport_error(&t),
            eventsource_stream::EventStreamError::Transport(StreamCut::TooLarge(n)) => reply_too_large(&model, n),
            other => {
                LlmError::InvalidResponse { detail: format!("malformed event stream: {other}"), body: String::new() }
            }
        })
    })
}

/// Why the byte stream under an event stream stopped early.
#[derive(Debug)]
pub(crate) enum StreamCut {
    /// The connection failed.
    Transport(reqwest::Error),
    /// More bytes than a reply may take.
    TooLarge(usize),
}

impl From<reqwest::Error> for StreamCut {
    fn from(error: reqwest::Error) -> Self {
        StreamCut::Transport(error)
    }
}

impl std::fmt::Display for StreamCut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StreamCut::Transport(e) => e.fmt(f),
            StreamCut::TooLarge(n) => write!(f, "{n} bytes"),
        }
    }
}

impl std::error::Error for StreamCut {}

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
    fn a_leading_byte_order_mark_is_dropped_even_split_over_chunks() {
        let whole = |chunks: &[&[u8]]| {
            let mut bom = LeadingBom::default();
            chunks.iter().flat_map(|c| bom.strip(bytes::Bytes::copy_from_slice(c)).to_vec()).collect::<Vec<u8>>()
        };
        assert_eq!(whole(&[b"\xEF\xBB\xBFdata: x\n\n"]), b"data: x\n\n");
        assert_eq!(whole(&[b"\xEF", b"", b"\xBB", b"\xBFdata", b": x"]), b"data: x");
        assert_eq!(whole(&[b"\xEF\xBBdata"]), b"\xEF\xBBdata", "not a mark: passed on as it is");
        assert_eq!(whole(&[b"da", b"\xEF\xBB\xBF"]), b"da\xEF\xBB\xBF", "only at the start");
        assert_eq!(whole(&[b"\xEF\xBB\xBF\xEF\xBB", b"\xBF\xEF\xBB\xBFdata"]), b"data", "every leading mark");
        assert_eq!(whole(&[b"\xEF\xBB\xBF\xEF"]), b"", "a stream of marks alone is empty");
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
