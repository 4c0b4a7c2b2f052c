//! Shared helpers: canned provider answers and request builders.

use std::time::Duration;

use guidepost_llm::{ChatRequest, RetryPolicy, StackConfig, TaskKind};
use serde_json::{Value, json};
use wiremock::{MockServer, Request};

/// The schema used by structured tests.
pub fn check_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "rationale": {"type": "string"},
            "applies": {"type": "boolean"}
        },
        "required": ["rationale", "applies"],
        "additionalProperties": false
    })
}

/// A structured matching request.
pub fn check_request() -> ChatRequest {
    ChatRequest::new(TaskKind::Matching)
        .system("You decide whether a guideline applies.")
        .user("Customer: I want a refund.\nGuideline: the customer asks for a refund.")
        .json_output("Check", check_schema())
        .temperature(0.0)
        .max_tokens(200)
}

/// An OpenAI chat-completions answer with `content`.
pub fn openai_answer(content: &str) -> Value {
    json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-4.1-2025-04-14",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": content},
            "finish_reason": "stop"
        }],
        "usage": {
            "prompt_tokens": 120,
            "completion_tokens": 15,
            "total_tokens": 135,
            "prompt_tokens_details": {"cached_tokens": 64}
        }
    })
}

/// Server-sent events text from data payloads.
pub fn sse(events: &[(&str, Value)]) -> String {
    let mut out = String::new();
    for (name, data) in events {
        if !name.is_empty() {
            out.push_str(&format!("event: {name}\n"));
        }
        out.push_str(&format!("data: {data}\n\n"));
    }
    out
}

/// Middleware settings for fast tests: short retry delays, no jitter.
pub fn fast_config() -> StackConfig {
    StackConfig {
        timeout: Some(Duration::from_secs(5)),
        retry: RetryPolicy {
            max_attempts: 3,
            base_delay: Duration::from_millis(10),
            max_delay: Duration::from_millis(50),
            max_retry_after: Duration::from_secs(5),
            jitter: false,
        },
        ..StackConfig::default()
    }
}

/// The JSON bodies the server received, in order.
pub async fn bodies(server: &MockServer) -> Vec<Value> {
    server
        .received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .map(|r: &Request| r.body_json::<Value>().expect("JSON body"))
        .collect()
}
