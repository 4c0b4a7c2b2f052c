//! Anthropic's Messages API (`POST /v1/messages`).
//!
//! Structured output is a single forced tool: the schema becomes the tool's `input_schema`,
//! `tool_choice` names it, and the answer is the `tool_use` block's `input`. Tool inputs must
//! be objects, so a schema whose root is not an object is wrapped in `{"value": ...}` and
//! unwrapped on the way back.

use std::time::Instant;

use async_trait::async_trait;
use futures::StreamExt;
use serde_json::{Value, json};

use super::http::{
    default_client, event_json, f32_json, parse_answer, reply_too_large, send, send_json, sse_events, u64_at,
};
use crate::error::{LlmError, excerpt};
use crate::ports::{ChatModel, TextStream};
use crate::request::{ChatRequest, ChatResponse, Output, OutputFormat, Role, StreamEvent};
use crate::usage::Usage;

/// Anthropic's default endpoint.
pub const ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com";
/// The API version header value.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";
/// `max_tokens` is mandatory in the Messages API; when the request sets none,
/// [`Limit::ReplyTokens`](guidepost_core::limits::Limit::ReplyTokens) is sent (4,096 unless
/// configured).
pub const DEFAULT_MAX_TOKENS: u32 = 4_096;

/// A chat model behind Anthropic's Messages API.
#[derive(Debug)]
pub struct AnthropicChat {
    client: reqwest::Client,
    base_url: String,
    api_key: Option<String>,
    model: String,
    id: String,
    prompt_caching: bool,
}

impl AnthropicChat {
    /// `model` at `base_url` (default [`ANTHROPIC_BASE_URL`]).
    pub fn new(model: impl Into<String>, api_key: Option<String>, base_url: Option<String>) -> Self {
        let model = model.into();
        Self {
            client: default_client(),
            base_url: base_url.as_deref().unwrap_or(ANTHROPIC_BASE_URL).trim_end_matches('/').to_string(),
            api_key,
            id: format!("anthropic:{model}"),
            model,
            prompt_caching: true,
        }
    }

    /// Marks the system prompt as a cache breakpoint (`cache_control: ephemeral`), on by
    /// default: Guidepost puts the static part of every prompt first, and Anthropic caches a
    /// prefix only where it is told to. Prompts under the provider's minimum length are simply
    /// not cached.
    pub fn with_prompt_caching(mut self, on: bool) -> Self {
        self.prompt_caching = on;
        self
    }

    /// Uses `client` (shared connection pool, proxies ...).
    pub fn with_client(mut self, client: reqwest::Client) -> Self {
        self.client = client;
        self
    }

    /// The request body (public for inspection in tests and traces).
    pub fn body(&self, req: &ChatRequest, stream: bool) -> Value {
        let system = req.system_text();
        // The API wants alternating turns: consecutive messages of one role are merged.
        let mut messages: Vec<(Role, String)> = Vec::new();
        for m in req.messages.iter().filter(|m| m.role != Role::System) {
            match messages.last_mut() {
                Some((role, content)) if *role == m.role => {
                    content.push_str("\n\n");
                    content.push_str(&m.content);
                }
                _ => messages.push((m.role, m.content.clone())),
            }
        }
        let messages: Vec<Value> =
            messages.into_iter().map(|(role, content)| json!({"role": role.as_str(), "content": content})).collect();
        let mut body = json!({
            "model": self.model,
            "max_tokens": req.max_tokens.unwrap_or(guidepost_core::limits::Limits::global().reply_tokens),
        });
        if !system.is_empty() {
            body["system"] = if self.prompt_caching {
                json!([{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}])
            } else {
                json!(system)
            };
        }
        body["messages"] = Value::Array(messages);
        if let Some(t) = req.temperature {
            body["temperature"] = f32_json(t);
        }
        if !req.stop.is_empty() {
            body["stop_sequences"] = json!(req.stop);
        }
        if let OutputFormat::Json { name, schema, .. } = &req.output {
            let input_schema = if wraps(schema) {
                json!({"type": "object", "properties": {"value": schema}, "required": ["value"]})
            } else {
                schema.clone()
            };
            body["tools"] = json!([{
                "name": name,
                "description": format!("Record the answer. Its input must conform to the `{name}` schema."),
                "input_schema": input_schema,
            }]);
            body["tool_choice"] = json!({"type": "tool", "name": name});
        }
        if stream {
            body["stream"] = json!(true);
        }
        body
    }

    fn post(&self, body: &Value) -> reqwest::RequestBuilder {
        let mut request = self
            .client
            .post(format!("{}/v1/messages", self.base_url))
            .header("anthropic-version", ANTHROPIC_VERSION)
            .json(body);
        if let Some(key) = &self.api_key {
            request = request.header("x-api-key", key);
        }
        request
    }
}

/// Whether the schema must be wrapped to be a tool input (its root is not an object).
fn wraps(schema: &Value) -> bool {
    schema.get("type").and_then(Value::as_str) != Some("object")
}

fn unwrap_input(schema: &Value, mut input: Value) -> Value {
    if wraps(schema) { input.get_mut("value").map(Value::take).unwrap_or(Value::Null) } else { input }
}

/// Fills `usage` from an Anthropic usage object. `input_tokens` excludes cache reads and
/// writes; Guidepost's prompt tokens include them, like OpenAI's.
fn add_usage(usage: &mut Usage, value: &Value) {
    let input = u64_at(value, "/input_tokens");
    let read = u64_at(value, "/cache_read_input_tokens");
    let written = u64_at(value, "/cache_creation_input_tokens");
    if input + read + written > 0 {
        usage.prompt_tokens = input + read + written;
        usage.cached_tokens = read;
    }
    let output = u64_at(value, "/output_tokens");
    if output > 0 {
        usage.completion_tokens = output;
    }
}

fn finish(req: &ChatRequest, text: String, tool_input: Option<Value>, truncated: bool) -> Result<Output, LlmError> {
    match &req.output {
        OutputFormat::Text => Ok(Output::Text(text)),
        OutputFormat::Json { schema, .. } => match tool_input {
            Some(input) => Ok(Output::Json(unwrap_input(schema, input))),
            // No tool call: accept JSON written as text rather than fail outright.
            None => parse_answer(&text, truncated).map(Output::Json),
        },
    }
}

#[async_trait]
impl ChatModel for AnthropicChat {
    fn model_id(&self) -> &str {
        &self.id
    }
    /// A hosted model is taken to be capable; a small one behind the same API is declared so
    /// in configuration.
    fn capabilities(&self) -> crate::ModelCapabilities {
        crate::ModelCapabilities::CAPABLE
    }

    async fn complete(&self, req: ChatRequest) -> Result<ChatResponse, LlmError> {
        let started = Instant::now();
        let value = send_json(self.post(&self.body(&req, false)), &self.id)
            .await
            .map_err(|e| e.redacted(self.api_key.as_deref()))?;
        let blocks = value.get("content").and_then(Value::as_array).ok_or_else(|| LlmError::InvalidResponse {
            detail: "no `content` blocks in the answer".into(),
            body: excerpt(&value.to_string(), 1_000),
        })?;
        let mut text = String::new();
        let mut tool_input = None;
        for block in blocks {
            match block.get("type").and_then(Value::as_str) {
                Some("text") => text.push_str(block.get("text").and_then(Value::as_str).unwrap_or("")),
                Some("tool_use") => tool_input = block.get("input").cloned(),
                _ => {}
            }
        }
        let truncated = value.get("stop_reason").and_then(Value::as_str) == Some("max_tokens");
        let mut usage = Usage::new(self.id.clone());
        if let Some(u) = value.get("usage") {
            add_usage(&mut usage, u);
        }
        usage.latency = started.elapsed();
        let output = finish(&req, text, tool_input, truncated)?;
        Ok(ChatResponse::new(output, usage))
    }

    async fn stream(&self, req: ChatRequest) -> Result<TextStream, LlmError> {
        let started = Instant::now();
        let response =
            send(self.post(&self.body(&req, true))).await.map_err(|e| e.redacted(self.api_key.as_deref()))?;
        Ok(self.decode_stream(req, response, started))
    }
}

impl AnthropicChat {
    /// Decodes a successful streaming response to `req` (Anthropic's server-sent events) into
    /// the reply's deltas and its end: what [`ChatModel::stream`] does once the request is
    /// sent. A reply is complete only with `message_stop`; a malformed event, an error event
    /// or a reply past [`Limit::ReplySize`](guidepost_core::limits::Limit::ReplySize) ends the
    /// stream with an error. Public so captured traffic can be decoded (and fuzzed).
    pub fn decode_stream(&self, req: ChatRequest, response: reqwest::Response, started: Instant) -> TextStream {
        let events = sse_events(response, self.id.clone());
        let id = self.id.clone();
        let model = self.id.clone();
        let secret = self.api_key.clone();
        let max_reply = guidepost_core::limits::Limits::global().reply_size;
        let stream = async_stream::stream! {
            let mut events = Box::pin(events);
            let mut usage = Usage::new(id);
            let mut text = String::new();
            let mut partial_json = String::new();
            let mut saw_tool = false;
            let mut truncated = false;
            let mut stopped = false;
            while let Some(event) = events.next().await {
                let event = match event {
                    Ok(event) => event,
                    Err(error) => { yield Err(error.redacted(secret.as_deref())); return; }
                };
                if text.len() + partial_json.len() > max_reply {
                    yield Err(reply_too_large(&model, text.len() + partial_json.len()));
                    return;
                }
                if event.event == "ping" || event.data.trim().is_empty() {
                    continue;
                }
                let data = match event_json(&event) {
                    Ok(data) => data,
                    Err(error) => { yield Err(error); return; }
                };
                match data.get("type").and_then(Value::as_str).unwrap_or(event.event.as_str()) {
                    "message_start" => {
                        if let Some(u) = data.pointer("/message/usage") {
                            add_usage(&mut usage, u);
                        }
                    }
                    "content_block_start"
                        if data.pointer("/content_block/type").and_then(Value::as_str) == Some("tool_use") =>
                    {
                        saw_tool = true;
                    }
                    "content_block_delta" => {
                        match data.pointer("/delta/type").and_then(Value::as_str) {
                            Some("text_delta") => {
                                let piece = data.pointer("/delta/text").and_then(Value::as_str).unwrap_or("");
                                text.push_str(piece);
                                yield Ok(StreamEvent::Delta(piece.to_string()));
                            }
                            Some("input_json_delta") => {
                                let piece = data.pointer("/delta/partial_json").and_then(Value::as_str).unwrap_or("");
                                partial_json.push_str(piece);
                                yield Ok(StreamEvent::Delta(piece.to_string()));
                            }
                            _ => {}
                        }
                    }
                    "message_delta" => {
                        if data.pointer("/delta/stop_reason").and_then(Value::as_str) == Some("max_tokens") {
                            truncated = true;
                        }
                        if let Some(u) = data.get("usage") {
                            add_usage(&mut usage, u);
                        }
                    }
                    "message_stop" => { stopped = true; break; }
                    "error" => {
                        yield Err(LlmError::InvalidResponse {
                            detail: "the server reported an error mid-stream".into(),
                            body: excerpt(&data.to_string(), 1_000),
                        });
                        return;
                    }
                    _ => {}
                }
            }
            if !stopped {
                // The connection closed early: a transport failure, retryable like one.
                yield Err(LlmError::Connection(format!(
                    "the stream ended without its end marker (message_stop) after {} bytes; the reply was cut short",
                    text.len() + partial_json.len()
                )));
                return;
            }
            usage.latency = started.elapsed();
            let tool_input = if saw_tool {
                let raw = if partial_json.trim().is_empty() { "{}" } else { partial_json.as_str() };
                match parse_answer(raw, truncated) {
                    Ok(input) => Some(input),
                    Err(error) => { yield Err(error); return; }
                }
            } else {
                None
            };
            match finish(&req, text, tool_input, truncated) {
                Ok(output) => yield Ok(StreamEvent::Done(ChatResponse::new(output, usage))),
                Err(error) => yield Err(error),
            }
        };
        Box::pin(stream)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::TaskKind;

    #[test]
    fn merges_same_role_turns_and_wraps_non_object_schemas() {
        let chat = AnthropicChat::new("claude-x", None, None);
        let req = ChatRequest::new(TaskKind::Matching)
            .system("a")
            .system("b")
            .user("one")
            .user("two")
            .json_output("List", json!({"type": "array", "items": {"type": "string"}}));
        let body = chat.body(&req, false);
        assert_eq!(body["system"][0]["text"], "a\nb");
        let plain = AnthropicChat::new("claude-x", None, None).with_prompt_caching(false);
        assert_eq!(plain.body(&req, false)["system"], "a\nb");
        assert_eq!(body["messages"], json!([{"role": "user", "content": "one\n\ntwo"}]));
        assert_eq!(body["tools"][0]["input_schema"]["properties"]["value"]["type"], "array");
        assert_eq!(unwrap_input(&json!({"type": "array"}), json!({"value": [1]})), json!([1]));
    }
}
