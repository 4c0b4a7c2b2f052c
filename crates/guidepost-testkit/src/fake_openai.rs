//! A fake OpenAI-compatible server for benchmarks and end-to-end tests.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

const STOP: &[&str] = &[
    "the", "a", "an", "and", "or", "to", "of", "in", "on", "for", "is", "are", "be", "with", "about", "customer",
    "user", "agent", "asks", "wants", "when", "that", "this", "their", "they", "it", "i", "my", "me", "you", "your",
    "do", "does", "can", "has", "have", "not", "if", "at", "by", "as", "please", "hi", "hello", "want", "would",
    "like", "need", "some", "any", "what", "how",
];

/// The reply text the fake writes.
pub const REPLY: &str = "Thanks for reaching out! I checked this for you: everything looks fine on our side. \
If you'd like, I can also send you the full details by email. Is there anything else I can help with?";

fn words(s: &str) -> Vec<String> {
    s.to_lowercase()
        .split(|c: char| !c.is_ascii_alphabetic())
        .filter(|w| w.len() > 2 && !STOP.contains(w))
        .map(String::from)
        .collect()
}

fn shares_word(a: &str, b: &str) -> bool {
    let wb = words(b);
    words(a).iter().any(|w| wb.contains(w))
}

/// The fake's judgement of a condition on the latest customer message: a condition about a
/// number (an order number given) holds when the message has one; any other holds when it
/// shares a word with the message.
fn holds(condition: &str, message: &str) -> bool {
    if words(condition).iter().any(|w| w == "number") {
        return first_number(message).is_some();
    }
    shares_word(condition, message)
}

fn first_number(s: &str) -> Option<String> {
    s.split(|c: char| !c.is_ascii_digit()).find(|d| d.len() >= 3).map(str::to_string)
}

/// One logged request.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LoggedRequest {
    /// `chat` or `embeddings`.
    pub kind: String,
    /// The response schema's name, for structured chat requests.
    pub schema: Option<String>,
    /// The model the request named.
    #[serde(default)]
    pub model: Option<String>,
    /// Prompt tokens (o200k).
    pub prompt_tokens: u64,
    /// Completion tokens of the answer.
    pub completion_tokens: u64,
    /// Milliseconds since the server started, at arrival and at answer.
    pub start_ms: f64,
    /// See `start_ms`.
    pub end_ms: f64,
}

/// Server state: latency and the request log.
pub struct FakeState {
    started: Instant,
    latency: Mutex<Duration>,
    log: Mutex<Vec<LoggedRequest>>,
    reject_keys: std::sync::atomic::AtomicBool,
    rejected_schemas: Mutex<Vec<String>>,
    keys_in_tool_arguments: std::sync::atomic::AtomicBool,
    holds: Mutex<Holds>,
    /// Signalled when a request is held.
    held_changed: tokio::sync::Notify,
    /// Signalled to let held requests answer.
    release: tokio::sync::Notify,
}

/// Requests to hold before answering, and how many are held now.
#[derive(Default)]
struct Holds {
    /// How many more requests for each structured output (by schema name) to hold.
    to_hold: std::collections::HashMap<String, usize>,
    /// How many requests are held now.
    held: usize,
}

/// A held request: no longer held once dropped.
struct HeldRequest<'a>(&'a FakeState);

impl Drop for HeldRequest<'_> {
    fn drop(&mut self) {
        self.0.holds.lock().unwrap_or_else(PoisonError::into_inner).held -= 1;
        self.0.held_changed.notify_waiters();
    }
}

/// The 401 a provider answers to a bad key, echoing the key as some providers do.
fn rejected(headers: &axum::http::HeaderMap) -> Response {
    let key = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim_start_matches("Bearer ").to_string())
        .unwrap_or_default();
    let body = json!({"error": {"message": format!("Incorrect API key provided: {key}."), "type": "invalid_request_error", "code": "invalid_api_key"}});
    (StatusCode::UNAUTHORIZED, Json(body)).into_response()
}

impl FakeState {
    /// Answers every request with a 401 that repeats the caller's key (for tests that
    /// check the key never reaches a log or a response).
    pub fn reject_keys(self: &Arc<Self>) -> Arc<Self> {
        self.reject_keys.store(true, std::sync::atomic::Ordering::SeqCst);
        self.clone()
    }

    /// A server state with `latency` per request.
    pub fn new(latency: Duration) -> Arc<Self> {
        Arc::new(Self {
            started: Instant::now(),
            latency: Mutex::new(latency),
            log: Mutex::new(Vec::new()),
            reject_keys: std::sync::atomic::AtomicBool::new(false),
            rejected_schemas: Mutex::new(Vec::new()),
            keys_in_tool_arguments: std::sync::atomic::AtomicBool::new(false),
            holds: Mutex::default(),
            held_changed: tokio::sync::Notify::new(),
            release: tokio::sync::Notify::new(),
        })
    }

    /// Holds the next `n` requests for the structured output `schema` (by name, e.g.
    /// `reply`) until [`FakeState::release`], before answering them: a test can stop the
    /// process that asked while it waits, synchronising on what the model received rather
    /// than on time.
    pub fn hold_next(&self, schema: &str, n: usize) {
        self.holds.lock().unwrap_or_else(PoisonError::into_inner).to_hold.insert(schema.to_string(), n);
    }

    /// Lets every held request answer, and holds no more.
    pub fn release(&self) {
        self.holds.lock().unwrap_or_else(PoisonError::into_inner).to_hold.clear();
        self.release.notify_waiters();
    }

    /// How many requests are held now.
    pub fn held(&self) -> usize {
        self.holds.lock().unwrap_or_else(PoisonError::into_inner).held
    }

    /// Waits until at least `n` requests are held.
    pub async fn until_held(&self, n: usize) {
        loop {
            let changed = self.held_changed.notified();
            if self.held() >= n {
                return;
            }
            changed.await;
        }
    }

    /// Holds a request for `schema` when one is due to be held, until released.
    async fn maybe_hold(&self, schema: &str) {
        // Waiting for the release starts before the hold is counted, so a release right
        // after it cannot be missed.
        let released = self.release.notified();
        {
            let mut holds = self.holds.lock().unwrap_or_else(PoisonError::into_inner);
            match holds.to_hold.get_mut(schema) {
                Some(left) if *left > 0 => *left -= 1,
                _ => return,
            }
            holds.held += 1;
        }
        // Counted as held until released, or until the caller goes away (the server drops
        // the request's future).
        let _holding = HeldRequest(self);
        self.held_changed.notify_waiters();
        released.await;
    }

    /// Runs every tool it is asked about, with the caller's key as the value of every
    /// argument: a model copying a secret into a tool call (for tests that check the key
    /// never reaches an event, a trace or a log).
    pub fn keys_in_tool_arguments(self: &Arc<Self>) -> Arc<Self> {
        self.keys_in_tool_arguments.store(true, std::sync::atomic::Ordering::SeqCst);
        self.clone()
    }

    /// Answers requests for these structured outputs (by schema name, e.g.
    /// `LowCriticalityChecks`) with the 401 of [`FakeState::reject_keys`], and every other
    /// request normally: a provider failing some calls of a turn.
    pub fn reject_schemas(self: &Arc<Self>, names: &[&str]) -> Arc<Self> {
        self.rejected_schemas
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend(names.iter().map(|n| n.to_string()));
        self.clone()
    }
}

/// The router: `/v1/chat/completions`, `/v1/embeddings`, `GET /_log` (and `DELETE` to
/// clear it), `POST /_latency {"ms": n}`.
pub fn router(state: Arc<FakeState>) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(chat))
        .route("/v1/embeddings", post(embeddings))
        .route("/_log", get(read_log).delete(clear_log))
        .route("/_latency", post(set_latency))
        .with_state(state)
}

async fn read_log(State(state): State<Arc<FakeState>>) -> Json<Vec<LoggedRequest>> {
    Json(state.log.lock().unwrap_or_else(PoisonError::into_inner).clone())
}

async fn clear_log(State(state): State<Arc<FakeState>>) -> StatusCode {
    state.log.lock().unwrap_or_else(PoisonError::into_inner).clear();
    StatusCode::NO_CONTENT
}

async fn set_latency(State(state): State<Arc<FakeState>>, Json(body): Json<Value>) -> StatusCode {
    let ms = body.get("ms").and_then(Value::as_u64).unwrap_or(0);
    *state.latency.lock().unwrap_or_else(PoisonError::into_inner) = Duration::from_millis(ms);
    StatusCode::NO_CONTENT
}

/// `[id] text` items of a prompt, and the last customer message.
fn parse(prompt: &str) -> (Vec<(String, String)>, String) {
    let (items_part, conversation) = prompt.split_once("## Conversation").unwrap_or((prompt, ""));
    let last = conversation.lines().rev().find_map(|l| l.strip_prefix("customer: ")).unwrap_or("").to_string();
    let items = items_part
        .lines()
        .filter_map(|l| {
            let (id, text) = l.trim_start().strip_prefix('[')?.split_once("] ")?;
            id.parse::<usize>().ok()?;
            Some((id.to_string(), text.trim_start_matches("when: ").to_string()))
        })
        .collect();
    (items, last)
}

/// The answer to one structured request, by the schema's name. `customer_turns` counts the
/// request's user messages (a reply request carries the conversation as chat turns).
pub fn answer(schema_name: &str, schema: &Value, prompt: &str, customer_turns: usize) -> Value {
    let (items, last) = parse(prompt);
    let check = |id: &str, applies: bool| json!({"id": id, "rationale": "The most recent customer message is directly relevant here.", "applies": applies});
    match schema_name {
        "ConditionChecks" => {
            json!({"checks": items.iter().map(|(id, c)| check(id, holds(c, &last))).collect::<Vec<_>>()})
        }
        "DirectChecks" => {
            // Keys are "[n] condition"; an item applied before is never followed again.
            let reapply = prompt.contains("already followed");
            let verdicts: serde_json::Map<String, Value> = schema
                .pointer("/properties")
                .and_then(Value::as_object)
                .map(|o| {
                    o.keys()
                        .map(|k| {
                            let condition = k.split_once("] ").map_or(k.as_str(), |(_, c)| c);
                            (k.clone(), Value::Bool(!reapply && holds(condition, &last)))
                        })
                        .collect()
                })
                .unwrap_or_default();
            Value::Object(verdicts)
        }
        "ReapplyChecks" => {
            json!({"checks": items.iter().map(|(id, _)| json!({"id": id, "rationale": "Already done.", "condition_holds_again": false, "customer_completed": false, "should_apply": false})).collect::<Vec<_>>()})
        }
        "LowCriticalityChecks" => {
            json!({"applies": items.iter().filter(|(_, c)| holds(c, &last)).map(|(id, _)| id.clone()).collect::<Vec<_>>()})
        }
        "DisambiguationAnswer" => {
            json!({"rationale": "Clear.", "ambiguous": false, "plausible_options": [], "question": null})
        }
        "JourneySelectionAnswer" => {
            let lines: Vec<&str> = prompt.lines().collect();
            let at = lines.iter().position(|l| l.contains("[CURRENT]")).unwrap_or(0);
            let waits = lines.get(at).is_some_and(|l| l.contains("[waits for customer]"));
            let first = lines.get(at + 1).and_then(|l| l.trim().strip_prefix("-> [")).and_then(|l| l.split(']').next());
            let staying = waits && first_number(&last).is_none();
            // The verdicts agree with the decision: when the step is done every conditional exit
            // holds (the first transition is taken); while waiting, none does.
            let exits: serde_json::Map<String, Value> = schema
                .pointer("/properties/exits/properties")
                .and_then(Value::as_object)
                .map(|o| o.keys().map(|k| (k.clone(), Value::Bool(!staying))).collect())
                .unwrap_or_default();
            match first {
                _ if staying => {
                    json!({"exits": exits, "rationale": "Waiting.", "decision": "stay", "steps": [], "backtrack_to": null})
                }
                Some(step) => {
                    json!({"exits": exits, "rationale": "Step done.", "decision": "advance", "steps": [step], "backtrack_to": null})
                }
                None => {
                    json!({"exits": exits, "rationale": "Nothing left.", "decision": "exit", "steps": [], "backtrack_to": null})
                }
            }
        }
        "tool_calls" => {
            let tools: Vec<Value> = schema
                .pointer("/properties/tools/items/properties/tool/enum")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let params: Vec<String> = schema
                .pointer("/properties/tools/items/properties/calls/items/properties/arguments/properties")
                .and_then(Value::as_object)
                .map(|o| o.keys().cloned().collect())
                .unwrap_or_default();
            let number = first_number(&last);
            let answers: Vec<Value> = tools
                .iter()
                .map(|t| {
                    let arguments: serde_json::Map<String, Value> = params.iter().map(|p| (p.clone(), number.clone().map_or(Value::Null, Value::String))).collect();
                    let decision = if number.is_some() { "needs_to_run" } else { "cannot_run" };
                    json!({"tool": t, "rationale": "The customer gave what the tool needs.", "decision": decision, "calls": [{"arguments": arguments}]})
                })
                .collect();
            json!({"tools": answers})
        }
        "reply" => {
            // One reply per customer turn (a reply identical to an earlier one would be asked
            // for again, as it should be).
            let reply = format!("{REPLY} ({customer_turns})");
            let mut out = json!({"draft": reply, "problems": [], "reply": reply});
            if schema.pointer("/properties/template_id").is_some() {
                out["template_id"] = json!("none");
                out["fit"] = json!("low");
            }
            if let Some(tracked) = schema.pointer("/properties/followed/items/enum") {
                // The canned reply stands for one that carries out every instruction.
                out["followed"] = tracked.clone();
            }
            out
        }
        "template_choice" => json!({"template_id": "none", "fit": "low"}),
        // The simulator's customer asks one question and goes on asking it; its judge finds
        // every milestone reached.
        "CustomerReply" => json!({"message": "How long does shipping take?", "done": false, "outcome": null}),
        "StepJudgement" => json!({"reasoning": "The customer asked it.", "satisfied": true}),
        "GuidelineEvaluation" => {
            // A rule whose action asks the customer for something depends on the customer.
            let action =
                prompt.lines().find_map(|l| l.trim().strip_prefix("- Action (what the agent does): ")).unwrap_or("");
            let asks = action.to_lowercase().contains("ask");
            let mut out = json!({
                "continuous": false,
                "is_customer_dependent": asks,
                "customer_action": if asks { Value::String("The customer gives what was asked for".into()) } else { Value::Null },
                "agent_action": action,
            });
            if schema.pointer("/properties/proposed_action").is_some() {
                out["proposed_action"] = json!("Look it up with the tool and tell the customer what it returned");
            }
            out
        }
        _ => json!({}),
    }
}

/// A `tool_calls` answer that runs every tool with the caller's key as every argument.
fn put_key_in_arguments(answer: &mut Value, headers: &axum::http::HeaderMap) {
    let key = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim_start_matches("Bearer ").to_string())
        .unwrap_or_default();
    for tool in answer.get_mut("tools").and_then(Value::as_array_mut).into_iter().flatten() {
        tool["decision"] = json!("needs_to_run");
        for call in tool.get_mut("calls").and_then(Value::as_array_mut).into_iter().flatten() {
            for value in
                call.get_mut("arguments").and_then(Value::as_object_mut).into_iter().flat_map(|a| a.values_mut())
            {
                *value = json!(key);
            }
        }
    }
}

fn prompt_of(body: &Value) -> String {
    body.get("messages")
        .and_then(Value::as_array)
        .map(|m| m.iter().filter_map(|x| x.get("content").and_then(Value::as_str)).collect::<Vec<_>>().join("\n"))
        .unwrap_or_default()
}

/// `POST /v1/chat/completions`.
pub(crate) async fn chat(
    State(state): State<Arc<FakeState>>,
    headers: axum::http::HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    if state.reject_keys.load(std::sync::atomic::Ordering::SeqCst) {
        return rejected(&headers);
    }
    let start_ms = state.started.elapsed().as_secs_f64() * 1000.0;
    let prompt = prompt_of(&body);
    let latency = *state.latency.lock().unwrap_or_else(PoisonError::into_inner);
    let format = body.get("response_format").cloned().unwrap_or(Value::Null);
    if let Some(name) = format.pointer("/json_schema/name").and_then(Value::as_str)
        && state.rejected_schemas.lock().unwrap_or_else(PoisonError::into_inner).iter().any(|n| n == name)
    {
        return rejected(&headers);
    }
    let (schema_name, content) = match format.get("type").and_then(Value::as_str) {
        Some("json_schema") => {
            let name = format.pointer("/json_schema/name").and_then(Value::as_str).unwrap_or("").to_string();
            state.maybe_hold(&name).await;
            let schema = format.pointer("/json_schema/schema").cloned().unwrap_or(Value::Null);
            let users = body
                .get("messages")
                .and_then(Value::as_array)
                .map_or(0, |m| m.iter().filter(|x| x.get("role").and_then(Value::as_str) == Some("user")).count());
            let mut value = answer(&name, &schema, &prompt, users);
            if name == "tool_calls" && state.keys_in_tool_arguments.load(std::sync::atomic::Ordering::SeqCst) {
                put_key_in_arguments(&mut value, &headers);
            }
            (Some(name), value.to_string())
        }
        _ => (None, REPLY.to_string()),
    };
    let prompt_tokens = guidepost_llm::count_tokens(&prompt) as u64;
    let completion_tokens = guidepost_llm::count_tokens(&content) as u64;
    let streamed = body.get("stream").and_then(Value::as_bool) == Some(true);
    // A streamed answer ends when a whole one would: its words are spread over the call's
    // latency (see `streamed_answer`), so the log shows the same duration either way.
    if !streamed {
        tokio::time::sleep(latency).await;
    }
    let end_ms = if streamed {
        start_ms + latency.as_secs_f64() * 1000.0
    } else {
        state.started.elapsed().as_secs_f64() * 1000.0
    };
    state.log.lock().unwrap_or_else(PoisonError::into_inner).push(LoggedRequest {
        kind: "chat".into(),
        schema: schema_name,
        model: body.get("model").and_then(Value::as_str).map(str::to_string),
        prompt_tokens,
        completion_tokens,
        start_ms,
        end_ms,
    });
    let usage = json!({"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, "total_tokens": prompt_tokens + completion_tokens, "prompt_tokens_details": {"cached_tokens": 0}});
    let model = body.get("model").cloned().unwrap_or(json!("fake"));
    if streamed {
        return streamed_answer(&content, &model, usage, latency);
    }
    Json(json!({
        "id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": usage,
    }))
    .into_response()
}

/// The share of a call's latency before a streamed answer's first words: the time a
/// provider takes to read the prompt before it writes.
const FIRST_TOKEN_SHARE: u32 = 4;

/// A streamed answer as OpenAI sends it: the first words after a quarter of `latency`, the
/// others evenly over the rest of it, then the usage and `[DONE]`.
fn streamed_answer(content: &str, model: &Value, usage: Value, latency: Duration) -> Response {
    let pieces: Vec<String> = content.split_inclusive(' ').map(str::to_string).collect();
    let first = latency / FIRST_TOKEN_SHARE;
    let gap = (latency - first) / u32::try_from(pieces.len().max(1)).unwrap_or(u32::MAX);
    let model = model.clone();
    let chunk = move |delta: Value, finish: Value, usage: Option<&Value>| {
        let mut chunk = json!({"id": "c", "object": "chat.completion.chunk", "model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        if let Some(usage) = usage {
            chunk["usage"] = usage.clone();
        }
        format!("data: {chunk}\n\n")
    };
    // Each piece is due at its own time from the start, so the timer's rounding does not add
    // up over many pieces.
    let start = tokio::time::Instant::now();
    let body = async_stream::stream! {
        let count = u32::try_from(pieces.len()).unwrap_or(u32::MAX);
        for (i, piece) in (0u32..).zip(pieces) {
            tokio::time::sleep_until(start + first + gap * i).await;
            yield Ok::<_, std::io::Error>(chunk(json!({"content": piece}), Value::Null, None));
        }
        tokio::time::sleep_until(start + first + gap * count).await;
        yield Ok(chunk(json!({}), json!("stop"), Some(&usage)) + "data: [DONE]\n\n");
    };
    ([("content-type", "text/event-stream")], axum::body::Body::from_stream(body)).into_response()
}

fn embed(text: &str, dims: usize) -> Vec<f32> {
    let mut v = vec![0f32; dims];
    for w in words(text) {
        let h = w.bytes().fold(2166136261u32, |h, b| (h ^ u32::from(b)).wrapping_mul(16777619));
        v[(h as usize) % dims] += 1.0;
    }
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if n > 0.0 {
        v.iter_mut().for_each(|x| *x /= n);
    }
    v
}

async fn embeddings(
    State(state): State<Arc<FakeState>>,
    headers: axum::http::HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    if state.reject_keys.load(std::sync::atomic::Ordering::SeqCst) {
        return rejected(&headers);
    }
    let start_ms = state.started.elapsed().as_secs_f64() * 1000.0;
    let inputs: Vec<String> = match body.get("input") {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(a)) => a.iter().filter_map(|x| x.as_str().map(str::to_string)).collect(),
        _ => Vec::new(),
    };
    let latency = *state.latency.lock().unwrap_or_else(PoisonError::into_inner);
    tokio::time::sleep(latency).await;
    let base64 = body.get("encoding_format").and_then(Value::as_str) == Some("base64");
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let v = embed(t, 256);
            let embedding = if base64 {
                use base64::Engine as _;
                let bytes: Vec<u8> = v.iter().flat_map(|f| f.to_le_bytes()).collect();
                json!(base64::engine::general_purpose::STANDARD.encode(bytes))
            } else {
                json!(v)
            };
            json!({"object": "embedding", "index": i, "embedding": embedding})
        })
        .collect();
    let tokens: u64 = inputs.iter().map(|t| guidepost_llm::count_tokens(t) as u64).sum();
    let end_ms = state.started.elapsed().as_secs_f64() * 1000.0;
    state.log.lock().unwrap_or_else(PoisonError::into_inner).push(LoggedRequest {
        kind: "embeddings".into(),
        schema: None,
        model: body.get("model").and_then(Value::as_str).map(str::to_string),
        prompt_tokens: tokens,
        completion_tokens: 0,
        start_ms,
        end_ms,
    });
    Json(json!({"object": "list", "data": data, "model": "fake-embed", "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})).into_response()
}

/// Serves on `127.0.0.1:port` (0 for any) and prints `listening <port>` once bound.
pub async fn serve(port: u16, latency: Duration, reject_keys: bool) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    // The token counter loads its vocabulary on first use; the first request of a
    // measurement must not pay for it.
    guidepost_llm::count_tokens("warm up");
    println!("listening {}", listener.local_addr()?.port());
    let state = FakeState::new(latency);
    if reject_keys {
        state.reject_keys();
    }
    axum::serve(listener, router(state)).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

    #[test]
    fn a_condition_about_a_number_holds_only_when_the_message_gives_one() {
        let opening = "Hi, I want to check the status of an order I placed last week.";
        assert!(holds("The customer wants to check the status of an order", opening));
        assert!(!holds("The customer provided the order number", opening), "sharing `order` is not giving one");
        assert!(holds("The customer provided the order number", "Sure, my order number is 48213."));
        assert!(!holds("The customer asks about shipping", opening));
    }
    use guidepost_llm::providers::openai_compat::OpenAiChat;
    use guidepost_llm::{ChatModel, ChatRequest, StreamEvent, TaskKind};

    /// Serves the fake with `latency` on a free port; returns its state and `/v1` URL.
    async fn start(latency: Duration) -> (Arc<FakeState>, String) {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let state = FakeState::new(latency);
        let app = router(state.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        (state, format!("http://127.0.0.1:{port}/v1"))
    }

    fn logged(state: &FakeState) -> Vec<LoggedRequest> {
        state.log.lock().unwrap().clone()
    }

    #[tokio::test]
    async fn a_streamed_reply_arrives_in_pieces_spread_over_the_latency() {
        let latency = Duration::from_millis(120);
        let (state, url) = start(latency).await;
        let model = OpenAiChat::compatible(&url, "fake");
        let started = Instant::now();
        let mut stream = model.stream(ChatRequest::new(TaskKind::Generation).user("Hello")).await.unwrap();
        let (mut pieces, mut first, mut done) = (Vec::new(), None, None);
        while let Some(event) = stream.next().await {
            match event.unwrap() {
                StreamEvent::Delta(text) => {
                    first.get_or_insert(started.elapsed());
                    pieces.push(text);
                }
                StreamEvent::Done(response) => done = Some(response),
            }
        }
        let ended = started.elapsed();
        // Lower bounds only: the sleeps guarantee them, however loaded the machine.
        assert!(first.unwrap() >= latency / FIRST_TOKEN_SHARE, "first piece after {:?}", first);
        assert!(ended >= latency, "whole answer after {ended:?}");
        assert!(pieces.len() > 10, "{} pieces", pieces.len());
        assert_eq!(pieces.concat(), REPLY);
        let usage = done.unwrap().usage;
        assert!(usage.prompt_tokens > 0 && usage.completion_tokens > 0, "{usage:?}");
        let log = logged(&state);
        assert_eq!(log.len(), 1);
        assert_eq!((log[0].kind.as_str(), log[0].schema.as_deref()), ("chat", None));
        assert!((log[0].end_ms - log[0].start_ms - 120.0).abs() < 1e-6, "{:?}", log[0]);
    }

    #[tokio::test]
    async fn a_whole_reply_waits_the_latency_and_is_logged_with_its_schema() {
        let latency = Duration::from_millis(60);
        let (state, url) = start(latency).await;
        let model = OpenAiChat::compatible(&url, "fake");
        let schema = json!({"type": "object", "properties": {"reply": {"type": "string"}}, "required": ["reply"]});
        let request = ChatRequest::new(TaskKind::Generation).user("Hello").output(guidepost_llm::OutputFormat::Json {
            name: "reply".into(),
            schema,
            strict: true,
        });
        let started = Instant::now();
        let response = model.complete(request).await.unwrap();
        assert!(started.elapsed() >= latency);
        assert!(response.output.as_json().and_then(|v| v["reply"].as_str()).is_some(), "{:?}", response.output);
        let log = logged(&state);
        assert_eq!(log.len(), 1);
        assert_eq!(log[0].schema.as_deref(), Some("reply"));
        assert!(log[0].end_ms - log[0].start_ms >= 60.0, "{:?}", log[0]);
    }
}
