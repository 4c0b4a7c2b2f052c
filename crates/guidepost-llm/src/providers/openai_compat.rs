//! OpenAI's chat-completions and embeddings protocol, spoken to OpenAI itself or to any
//! compatible server (vLLM, Ollama's `/v1`, llama.cpp server).
//!
//! Structured output uses `response_format: {type: json_schema, json_schema: {name, schema,
//! strict}}` (strict only when the schema is strict-compatible, see
//! [`make_strict`](crate::make_strict)). Servers that lack it get `{type: json_object}` with the schema written into the
//! system prompt, either by configuration ([`StructuredMode::JsonObject`]) or automatically after
//! the server rejects `response_format` with a 400 ([`StructuredMode::Auto`]).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Instant;

use async_trait::async_trait;
use base64::Engine as _;
use futures::StreamExt;
use serde_json::{Value, json};

use super::http::{
    default_client, event_json, f32_json, parse_answer, read_body, reply_too_large, send, send_json, sse_events, u64_at,
};
use crate::error::{LlmError, excerpt};
use crate::ports::{ChatModel, Embedder, TextStream};
use crate::request::{ChatRequest, ChatResponse, Output, OutputFormat, Role, StreamEvent, TokenDecision, TokenOption};
use crate::schema::is_strict_compatible;
use crate::tokens::{count_message_tokens, count_tokens};
use crate::usage::Usage;

/// OpenAI's default endpoint.
pub const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";

/// How structured answers are requested.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StructuredMode {
    /// `json_schema`, switching to `json_object` for good once the server rejects it.
    #[default]
    Auto,
    /// Always `json_schema`.
    JsonSchema,
    /// Always `json_object` with the schema in the prompt (servers without `json_schema`).
    JsonObject,
}

/// A chat model behind an OpenAI-compatible `/chat/completions` endpoint.
#[derive(Debug)]
pub struct OpenAiChat {
    client: reqwest::Client,
    base_url: String,
    api_key: Option<String>,
    model: String,
    id: String,
    mode: StructuredMode,
    max_tokens_field: &'static str,
    json_schema_rejected: AtomicBool,
    logprobs_rejected: AtomicBool,
    capabilities: crate::ModelCapabilities,
}

impl OpenAiChat {
    /// OpenAI's API (`base_url` overrides [`OPENAI_BASE_URL`]); uses `max_completion_tokens`.
    pub fn openai(model: impl Into<String>, api_key: Option<String>, base_url: Option<String>) -> Self {
        let model = model.into();
        let mut chat = Self::compatible(base_url.as_deref().unwrap_or(OPENAI_BASE_URL), model.clone());
        chat.id = format!("openai:{model}");
        chat.api_key = api_key;
        chat.max_tokens_field = "max_completion_tokens";
        chat.mode = StructuredMode::JsonSchema;
        chat
    }

    /// Any server speaking the protocol at `base_url` (up to and including `/v1`).
    pub fn compatible(base_url: &str, model: impl Into<String>) -> Self {
        let base_url = base_url.trim_end_matches('/').to_string();
        let model = model.into();
        Self {
            client: default_client(),
            id: format!("openai-compatible:{base_url}#{model}"),
            base_url,
            api_key: None,
            model,
            mode: StructuredMode::Auto,
            max_tokens_field: "max_tokens",
            json_schema_rejected: AtomicBool::new(false),
            logprobs_rejected: AtomicBool::new(false),
            capabilities: crate::ModelCapabilities::CAPABLE,
        }
    }

    /// Sets the bearer token.
    pub fn with_api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// Declares what the model can be relied on to do (capable unless said otherwise; a spec
    /// ending in `?small` declares [`ModelCapabilities::SMALL`](crate::ModelCapabilities::SMALL)).
    pub fn with_capabilities(mut self, capabilities: crate::ModelCapabilities) -> Self {
        self.capabilities = capabilities;
        self
    }

    /// Sets how structured answers are requested.
    pub fn with_structured_mode(mut self, mode: StructuredMode) -> Self {
        self.mode = mode;
        self
    }

    /// Uses `client` (shared connection pool, proxies ...).
    pub fn with_client(mut self, client: reqwest::Client) -> Self {
        self.client = client;
        self
    }

    fn use_json_object(&self) -> bool {
        match self.mode {
            StructuredMode::JsonObject => true,
            StructuredMode::JsonSchema => false,
            StructuredMode::Auto => self.json_schema_rejected.load(Ordering::Relaxed),
        }
    }

    /// Whether to ask for the answer's token log-probabilities: for structured answers of a
    /// model declared small, which get one yes-or-no question per condition and are held to
    /// their [`verdict_threshold`](crate::ModelCapabilities::verdict_threshold); unless the
    /// server rejected them before.
    fn wants_logprobs(&self, req: &ChatRequest, stream: bool) -> bool {
        !stream
            && !self.capabilities.follows_compound_instructions
            && matches!(req.output, OutputFormat::Json { .. })
            && !self.logprobs_rejected.load(Ordering::Relaxed)
    }

    /// The request body (public for inspection in tests and traces).
    pub fn body(&self, req: &ChatRequest, stream: bool, json_object: bool) -> Value {
        let mut messages: Vec<Value> =
            req.messages.iter().map(|m| json!({"role": m.role.as_str(), "content": m.content})).collect();
        let mut body = json!({"model": self.model});
        if let OutputFormat::Json { name, schema, strict } = &req.output {
            if json_object {
                let instruction = schema_instruction(schema);
                match req.messages.iter().position(|m| m.role == Role::System) {
                    Some(i) => {
                        let content = format!("{}\n\n{instruction}", req.messages[i].content);
                        messages[i] = json!({"role": "system", "content": content});
                    }
                    None => messages.insert(0, json!({"role": "system", "content": instruction})),
                }
                body["response_format"] = json!({"type": "json_object"});
            } else {
                // Strict mode rejects schemas that leave properties optional or open: ask for
                // it only when the schema allows it, rather than fail the call.
                let strict = *strict && is_strict_compatible(schema);
                body["response_format"] = json!({
                    "type": "json_schema",
                    "json_schema": {"name": name, "schema": schema, "strict": strict}
                });
            }
        }
        body["messages"] = Value::Array(messages);
        if let Some(t) = req.temperature {
            body["temperature"] = f32_json(t);
        }
        // Always bounded: a model that never stops writing costs time and memory.
        let max_tokens = req.max_tokens.unwrap_or(guidepost_core::limits::Limits::global().reply_tokens);
        body[self.max_tokens_field] = json!(max_tokens);
        if !req.stop.is_empty() {
            body["stop"] = json!(req.stop);
        }
        if stream {
            body["stream"] = json!(true);
            body["stream_options"] = json!({"include_usage": true});
        }
        if self.wants_logprobs(req, stream) {
            body["logprobs"] = json!(true);
            body["top_logprobs"] = json!(LOGPROB_OPTIONS);
        }
        body
    }

    fn post(&self, body: &Value) -> reqwest::RequestBuilder {
        let mut request = self.client.post(format!("{}/chat/completions", self.base_url)).json(body);
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key);
        }
        request
    }

    /// Sends with the current structured mode and, in auto mode, once more with `json_object`
    /// when the server rejects `response_format`.
    async fn open(&self, req: &ChatRequest, stream: bool) -> Result<reqwest::Response, LlmError> {
        self.open_unredacted(req, stream).await.map_err(|e| e.redacted(self.api_key.as_deref()))
    }

    async fn open_unredacted(&self, req: &ChatRequest, stream: bool) -> Result<reqwest::Response, LlmError> {
        let json_object = self.use_json_object();
        let result = send(self.post(&self.body(req, stream, json_object))).await;
        match result {
            Err(LlmError::Http { status: 400 | 422, body, .. })
                if !json_object
                    && self.mode == StructuredMode::Auto
                    && matches!(req.output, OutputFormat::Json { .. })
                    && (body.contains("response_format") || body.contains("json_schema")) =>
            {
                tracing::warn!(model = %self.id, "server rejected json_schema; using json_object from now on");
                self.json_schema_rejected.store(true, Ordering::Relaxed);
                send(self.post(&self.body(req, stream, true))).await
            }
            Err(LlmError::Http { status: 400 | 422, body, .. })
                if self.wants_logprobs(req, stream) && body.contains("logprobs") =>
            {
                tracing::warn!(model = %self.id, "server rejected logprobs; asking without them from now on");
                self.logprobs_rejected.store(true, Ordering::Relaxed);
                send(self.post(&self.body(req, stream, json_object))).await
            }
            other => other,
        }
    }

    fn usage(&self, value: &Value, started: Instant) -> Usage {
        let mut usage = Usage::new(self.id.clone());
        usage.prompt_tokens = u64_at(value, "/usage/prompt_tokens");
        usage.completion_tokens = u64_at(value, "/usage/completion_tokens");
        usage.cached_tokens = u64_at(value, "/usage/prompt_tokens_details/cached_tokens");
        usage.latency = started.elapsed();
        usage
    }
}

/// Alternatives asked for at each token of a small model's structured answer.
const LOGPROB_OPTIONS: u32 = 5;

/// The points of an answer where the server reports more than one likely token
/// (`logprobs.content[].top_logprobs`), offsets counted in the answer's text.
fn decisions(tokens: &[Value]) -> Vec<TokenDecision> {
    let mut offset = 0;
    let mut out = Vec::new();
    for token in tokens {
        let start = offset;
        offset += token.get("token").and_then(Value::as_str).map_or(0, str::len);
        let options: Vec<TokenOption> = token
            .get("top_logprobs")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|t| {
                let text = t.get("token")?.as_str()?;
                let logprob = t.get("logprob")?.as_f64()?;
                Some(TokenOption { token: text.to_string(), probability: logprob.exp() as f32 })
            })
            .collect();
        if options.len() > 1 {
            out.push(TokenDecision { offset: start, options });
        }
    }
    out
}

fn schema_instruction(schema: &Value) -> String {
    let pretty = serde_json::to_string_pretty(schema).unwrap_or_else(|_| schema.to_string());
    format!("Answer with one JSON object and nothing else. It must conform to this JSON Schema:\n{pretty}")
}

fn output_for(req: &ChatRequest, text: String, truncated: bool) -> Result<Output, LlmError> {
    match req.output {
        OutputFormat::Json { .. } => parse_answer(&text, truncated).map(Output::Json),
        OutputFormat::Text => Ok(Output::Text(text)),
    }
}

#[async_trait]
impl ChatModel for OpenAiChat {
    fn model_id(&self) -> &str {
        &self.id
    }
    /// A hosted model is taken to be capable; a small one behind the same API is declared so
    /// in configuration.
    fn capabilities(&self) -> crate::ModelCapabilities {
        self.capabilities
    }

    async fn complete(&self, req: ChatRequest) -> Result<ChatResponse, LlmError> {
        let started = Instant::now();
        let response = self.open(&req, false).await?;
        let body = read_body(response, &self.id).await.map_err(|e| e.redacted(self.api_key.as_deref()))?;
        let value: Value = serde_json::from_str(&body).map_err(|e| LlmError::InvalidResponse {
            detail: format!("body is not JSON: {e}"),
            body: excerpt(&body, 1_000),
        })?;
        let choice = value.pointer("/choices/0").ok_or_else(|| LlmError::InvalidResponse {
            detail: "no choices in the answer".into(),
            body: excerpt(&body, 1_000),
        })?;
        let content = match choice.pointer("/message/content") {
            Some(Value::String(text)) => text.clone(),
            _ => {
                let detail = match choice.pointer("/message/refusal").and_then(Value::as_str) {
                    Some(refusal) => format!("the model refused: {refusal}"),
                    None => "the answer has no message content".to_string(),
                };
                return Err(LlmError::InvalidResponse { detail, body: excerpt(&body, 1_000) });
            }
        };
        let truncated = choice.get("finish_reason").and_then(Value::as_str) == Some("length");
        let decisions =
            choice.pointer("/logprobs/content").and_then(Value::as_array).map_or_else(Vec::new, |t| decisions(t));
        let output = output_for(&req, content, truncated)?;
        let mut response = ChatResponse::new(output, self.usage(&value, started));
        response.decisions = decisions;
        Ok(response)
    }

    async fn stream(&self, req: ChatRequest) -> Result<TextStream, LlmError> {
        let started = Instant::now();
        let response = self.open(&req, true).await?;
        Ok(self.decode_stream(req, response, started))
    }
}

impl OpenAiChat {
    /// Decodes a successful streaming response to `req` (OpenAI's server-sent events) into
    /// the reply's deltas and its end: what [`ChatModel::stream`] does once the request is
    /// sent. A reply is complete only with `[DONE]` or a finish reason; a malformed event, an
    /// error event or a reply past [`Limit::ReplySize`](guidepost_core::limits::Limit::ReplySize)
    /// ends the stream with an error. Public so captured traffic can be decoded (and fuzzed).
    pub fn decode_stream(&self, req: ChatRequest, response: reqwest::Response, started: Instant) -> TextStream {
        let id = self.id.clone();
        let events = sse_events(response, id.clone());
        let secret = self.api_key.clone();
        let max_reply = guidepost_core::limits::Limits::global().reply_size;
        let stream = async_stream::stream! {
            let mut events = Box::pin(events);
            let mut text = String::new();
            let mut usage_json: Option<Value> = None;
            let mut truncated = false;
            // A reply is complete only with its end: `[DONE]`, or a finish reason followed by
            // the end of the body. A connection that simply closes mid-reply is an error.
            let mut finished = false;
            let mut done = false;
            while let Some(event) = events.next().await {
                let event = match event {
                    Ok(event) => event,
                    Err(error) => { yield Err(error.redacted(secret.as_deref())); return; }
                };
                if event.data.trim() == "[DONE]" {
                    done = true;
                    break;
                }
                let chunk = match event_json(&event) {
                    Ok(chunk) => chunk,
                    Err(error) => { yield Err(error); return; }
                };
                if let Some(error) = chunk.get("error") {
                    yield Err(LlmError::InvalidResponse {
                        detail: "the server reported an error mid-stream".into(),
                        body: excerpt(&error.to_string(), 1_000),
                    });
                    return;
                }
                if let Some(Value::String(delta)) = chunk.pointer("/choices/0/delta/content")
                    && !delta.is_empty()
                {
                    if text.len() + delta.len() > max_reply {
                        yield Err(reply_too_large(&id, text.len() + delta.len()));
                        return;
                    }
                    text.push_str(delta);
                    yield Ok(StreamEvent::Delta(delta.clone()));
                }
                match chunk.pointer("/choices/0/finish_reason").and_then(Value::as_str) {
                    Some("length") => { truncated = true; finished = true; }
                    Some(_) => finished = true,
                    None => {}
                }
                if chunk.get("usage").is_some_and(Value::is_object) {
                    usage_json = Some(chunk);
                }
            }
            if !done && !finished {
                // The connection closed early: a transport failure, retryable like one.
                yield Err(LlmError::Connection(format!(
                    "the stream ended without its end marker (no `[DONE]` and no finish_reason) after {} bytes of text; \
                     the reply was cut short",
                    text.len()
                )));
                return;
            }
            let mut usage = Usage::new(id);
            match usage_json {
                Some(value) => {
                    usage.prompt_tokens = u64_at(&value, "/usage/prompt_tokens");
                    usage.completion_tokens = u64_at(&value, "/usage/completion_tokens");
                    usage.cached_tokens = u64_at(&value, "/usage/prompt_tokens_details/cached_tokens");
                }
                None => {
                    // Servers that ignore stream_options: estimate so budgets still work.
                    usage.prompt_tokens = count_message_tokens(&req.messages) as u64;
                    usage.completion_tokens = count_tokens(&text) as u64;
                }
            }
            usage.latency = started.elapsed();
            match output_for(&req, text, truncated) {
                Ok(output) => yield Ok(StreamEvent::Done(ChatResponse::new(output, usage))),
                Err(error) => yield Err(error),
            }
        };
        Box::pin(stream)
    }
}

/// How `/embeddings` returns vectors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EmbeddingEncoding {
    /// JSON arrays of floats.
    #[default]
    Float,
    /// Base64 of little-endian `f32`s (a third of the bytes on the wire).
    Base64,
}

/// An embedder behind an OpenAI-compatible `/embeddings` endpoint.
#[derive(Debug)]
pub struct OpenAiEmbedder {
    client: reqwest::Client,
    base_url: String,
    api_key: Option<String>,
    model: String,
    id: String,
    encoding: EmbeddingEncoding,
    requested_dimensions: Option<usize>,
    dimensions: AtomicUsize,
}

impl OpenAiEmbedder {
    /// An embedder for `model` at `base_url` (up to and including `/v1`).
    pub fn new(base_url: &str, model: impl Into<String>, id: impl Into<String>) -> Self {
        Self {
            client: default_client(),
            base_url: base_url.trim_end_matches('/').to_string(),
            api_key: None,
            model: model.into(),
            id: id.into(),
            encoding: EmbeddingEncoding::Float,
            requested_dimensions: None,
            dimensions: AtomicUsize::new(0),
        }
    }

    /// Sets the bearer token.
    pub fn with_api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// Sets the wire encoding of the vectors.
    pub fn with_encoding(mut self, encoding: EmbeddingEncoding) -> Self {
        self.encoding = encoding;
        self
    }

    /// Asks for vectors of `n` dimensions (models that support shortening).
    pub fn with_dimensions(mut self, n: usize) -> Self {
        self.requested_dimensions = Some(n);
        self.dimensions.store(n, Ordering::Relaxed);
        self
    }
}

fn decode_embedding(value: &Value) -> Result<Vec<f32>, String> {
    match value {
        #[allow(clippy::cast_possible_truncation)]
        Value::Array(items) => {
            items.iter().map(|x| x.as_f64().map(|f| f as f32).ok_or_else(|| format!("not a number: {x}"))).collect()
        }
        Value::String(encoded) => {
            let bytes =
                base64::engine::general_purpose::STANDARD.decode(encoded).map_err(|e| format!("bad base64: {e}"))?;
            if bytes.len() % 4 != 0 {
                return Err(format!("{} bytes is not a whole number of f32s", bytes.len()));
            }
            Ok(bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
        }
        other => Err(format!("unexpected embedding value {}", excerpt(&other.to_string(), 80))),
    }
}

#[async_trait]
impl Embedder for OpenAiEmbedder {
    fn model_id(&self) -> &str {
        &self.id
    }

    fn dimensions(&self) -> usize {
        self.dimensions.load(Ordering::Relaxed)
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, LlmError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let encoding = match self.encoding {
            EmbeddingEncoding::Float => "float",
            EmbeddingEncoding::Base64 => "base64",
        };
        let mut body = json!({"model": self.model, "input": texts, "encoding_format": encoding});
        if let Some(n) = self.requested_dimensions {
            body["dimensions"] = json!(n);
        }
        let mut request = self.client.post(format!("{}/embeddings", self.base_url)).json(&body);
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key);
        }
        let value = send_json(request, &self.id).await.map_err(|e| e.redacted(self.api_key.as_deref()))?;
        let invalid = |detail: String| LlmError::InvalidResponse { detail, body: excerpt(&value.to_string(), 500) };
        let data = value.get("data").and_then(Value::as_array).ok_or_else(|| invalid("no `data` array".into()))?;
        let mut vectors: Vec<(u64, Vec<f32>)> = Vec::with_capacity(data.len());
        for (position, item) in data.iter().enumerate() {
            let index = item.get("index").and_then(Value::as_u64).unwrap_or(position as u64);
            let embedding =
                item.get("embedding").ok_or_else(|| invalid(format!("item {position} has no embedding")))?;
            let vector = decode_embedding(embedding).map_err(|e| invalid(format!("item {position}: {e}")))?;
            vectors.push((index, vector));
        }
        if vectors.len() != texts.len() {
            return Err(invalid(format!("{} vectors for {} texts", vectors.len(), texts.len())));
        }
        vectors.sort_by_key(|(index, _)| *index);
        let vectors: Vec<Vec<f32>> = vectors.into_iter().map(|(_, v)| v).collect();
        if let Some(first) = vectors.first() {
            if vectors.iter().any(|v| v.len() != first.len()) {
                return Err(invalid("vectors of different lengths".into()));
            }
            self.dimensions.store(first.len(), Ordering::Relaxed);
        }
        Ok(vectors)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::request::TaskKind;

    #[test]
    fn json_object_mode_puts_the_schema_in_the_system_prompt() {
        let chat = OpenAiChat::compatible("http://h/v1/", "m");
        let req = ChatRequest::new(TaskKind::Matching).user("hi").json_output("A", json!({"type": "object"}));
        let body = chat.body(&req, false, true);
        assert_eq!(body["response_format"], json!({"type": "json_object"}));
        assert_eq!(body["messages"][0]["role"], "system");
        assert!(body["messages"][0]["content"].as_str().unwrap().contains("JSON Schema"));
        assert_eq!(chat.model_id(), "openai-compatible:http://h/v1#m");
    }

    #[test]
    fn strict_is_only_requested_for_compatible_schemas() {
        let chat = OpenAiChat::compatible("http://h/v1", "m");
        let open = json!({"type": "object", "properties": {"a": {"type": "string"}}});
        let req = ChatRequest::new(TaskKind::Matching).user("x").json_output("A", open);
        assert_eq!(chat.body(&req, false, false)["response_format"]["json_schema"]["strict"], json!(false));
    }

    #[test]
    fn schema_instruction_snapshot() {
        let schema = json!({"type": "object", "properties": {"applies": {"type": "boolean"}},
                            "required": ["applies"], "additionalProperties": false});
        insta::assert_snapshot!(schema_instruction(&schema));
    }

    #[test]
    fn base64_embeddings_decode() {
        let floats = [1.0f32, -0.5, 0.25];
        let bytes: Vec<u8> = floats.iter().flat_map(|f| f.to_le_bytes()).collect();
        let encoded = base64::engine::general_purpose::STANDARD.encode(bytes);
        assert_eq!(decode_embedding(&json!(encoded)).unwrap(), floats);
        assert!(decode_embedding(&json!("AAA=")).is_err());
        assert!(decode_embedding(&json!(["x"])).is_err());
    }
}
