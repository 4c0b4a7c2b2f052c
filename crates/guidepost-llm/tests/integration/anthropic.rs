//! The Anthropic Messages provider against a fake server.

use futures::StreamExt;
use guidepost_llm::providers::anthropic::AnthropicChat;
use guidepost_llm::{ChatModel, ChatRequest, LlmError, Output, StreamEvent, TaskKind};
use serde_json::json;
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::support::{bodies, check_request, check_schema, sse};

fn model(server: &MockServer) -> AnthropicChat {
    AnthropicChat::new("claude-sonnet-4-5", Some("sk-ant".into()), Some(server.uri()))
}

#[tokio::test]
async fn structured_output_is_a_forced_tool() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .and(header("x-api-key", "sk-ant"))
        .and(header("anthropic-version", "2023-06-01"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "Check",
                 "input": {"rationale": "asks for a refund", "applies": true}}
            ],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 100, "output_tokens": 20,
                      "cache_read_input_tokens": 50, "cache_creation_input_tokens": 0}
        })))
        .expect(1)
        .mount(&server)
        .await;
    let answer = model(&server).complete(check_request()).await.unwrap();
    assert_eq!(answer.output, Output::Json(json!({"rationale": "asks for a refund", "applies": true})));
    assert_eq!(answer.usage.model, "anthropic:claude-sonnet-4-5");
    assert_eq!(answer.usage.prompt_tokens, 150, "input + cache reads");
    assert_eq!(answer.usage.cached_tokens, 50);
    assert_eq!(answer.usage.completion_tokens, 20);
    assert_eq!(
        bodies(&server).await,
        vec![json!({
            "model": "claude-sonnet-4-5",
            "max_tokens": 200,
            "system": [{
                "type": "text",
                "text": "You decide whether a guideline applies.",
                "cache_control": {"type": "ephemeral"}
            }],
            "messages": [
                {"role": "user", "content": "Customer: I want a refund.\nGuideline: the customer asks for a refund."}
            ],
            "temperature": 0.0,
            "tools": [{
                "name": "Check",
                "description": "Record the answer. Its input must conform to the `Check` schema.",
                "input_schema": check_schema()
            }],
            "tool_choice": {"type": "tool", "name": "Check"}
        })]
    );
}

#[tokio::test]
async fn text_answer_and_default_max_tokens() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "content": [{"type": "text", "text": "Hello "}, {"type": "text", "text": "there"}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 5, "output_tokens": 2}
        })))
        .mount(&server)
        .await;
    let req = ChatRequest::new(TaskKind::Generation).user("Hi").assistant("Hello").user("How are you?");
    let answer = model(&server).complete(req).await.unwrap();
    assert_eq!(answer.output, Output::Text("Hello there".into()));
    assert_eq!(
        bodies(&server).await[0],
        json!({
            "model": "claude-sonnet-4-5",
            "max_tokens": 4096,
            "messages": [
                {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": "Hello"},
                {"role": "user", "content": "How are you?"}
            ]
        })
    );
}

#[tokio::test]
async fn streaming_text_with_usage_from_start_and_delta() {
    let server = MockServer::start().await;
    let body = sse(&[
        (
            "message_start",
            json!({"type": "message_start", "message": {"id": "m", "content": [],
            "usage": {"input_tokens": 30, "cache_read_input_tokens": 10, "output_tokens": 1}}}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "text", "text": ""}}),
        ),
        ("ping", json!({"type": "ping"})),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": "Good "}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": "morning"}}),
        ),
        ("content_block_stop", json!({"type": "content_block_stop", "index": 0})),
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 4}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ]);
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200).insert_header("content-type", "text/event-stream").set_body_string(body),
        )
        .mount(&server)
        .await;
    let events: Vec<_> =
        model(&server).stream(ChatRequest::new(TaskKind::Generation).user("Greet me")).await.unwrap().collect().await;
    assert!(matches!(&events[0], Ok(StreamEvent::Delta(d)) if d == "Good "));
    let Some(Ok(StreamEvent::Done(done))) = events.last() else {
        panic!("no Done: {events:?}");
    };
    assert_eq!(done.output, Output::Text("Good morning".into()));
    assert_eq!((done.usage.prompt_tokens, done.usage.cached_tokens, done.usage.completion_tokens), (40, 10, 4));
    assert_eq!(bodies(&server).await[0]["stream"], json!(true));
}

#[tokio::test]
async fn streaming_tool_input_is_assembled() {
    let server = MockServer::start().await;
    let body = sse(&[
        ("message_start", json!({"type": "message_start", "message": {"usage": {"input_tokens": 7}}})),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "tool_use", "id": "t", "name": "Check", "input": {}}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": "{\"rationale\": \"r\", "}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": "\"applies\": false}"}}),
        ),
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ]);
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200).insert_header("content-type", "text/event-stream").set_body_string(body),
        )
        .mount(&server)
        .await;
    let events: Vec<_> = model(&server).stream(check_request()).await.unwrap().collect().await;
    let Some(Ok(StreamEvent::Done(done))) = events.last() else {
        panic!("no Done: {events:?}");
    };
    assert_eq!(done.output, Output::Json(json!({"rationale": "r", "applies": false})));
}

#[tokio::test]
async fn stream_cut_before_message_stop_and_error_events_are_errors() {
    let server = MockServer::start().await;
    let cut = sse(&[(
        "content_block_delta",
        json!({"type": "content_block_delta", "delta": {"type": "text_delta", "text": "par"}}),
    )]);
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200).insert_header("content-type", "text/event-stream").set_body_string(cut),
        )
        .up_to_n_times(1)
        .mount(&server)
        .await;
    let overloaded =
        sse(&[("error", json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}))]);
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200).insert_header("content-type", "text/event-stream").set_body_string(overloaded),
        )
        .mount(&server)
        .await;
    let chat = model(&server);
    let req = || ChatRequest::new(TaskKind::Generation).user("x");
    let first: Vec<_> = chat.stream(req()).await.unwrap().collect().await;
    assert!(matches!(first.last(), Some(Err(LlmError::Connection(m))) if m.contains("message_stop")));
    let second: Vec<_> = chat.stream(req()).await.unwrap().collect().await;
    assert!(matches!(second.last(), Some(Err(LlmError::InvalidResponse { body, .. })) if body.contains("Overloaded")));
}

#[tokio::test]
async fn http_errors_keep_status_and_body() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(401).set_body_json(json!({
            "type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}
        })))
        .mount(&server)
        .await;
    let err = model(&server).complete(check_request()).await.unwrap_err();
    match err {
        LlmError::Http { status, body, retry_after } => {
            assert_eq!(status, 401);
            assert!(body.contains("invalid x-api-key"));
            assert_eq!(retry_after, None);
        }
        other => panic!("unexpected {other:?}"),
    }
}
