//! The OpenAI-compatible provider against a fake server: exact bodies, answers, streaming,
//! the json_object fallback and embeddings.

use base64::Engine as _;
use futures::StreamExt;
use guidepost_llm::providers::openai_compat::{EmbeddingEncoding, OpenAiChat, OpenAiEmbedder, StructuredMode};
use guidepost_llm::{ChatModel, ChatRequest, Embedder, LlmError, Output, StreamEvent, TaskKind};
use serde_json::json;
use wiremock::matchers::{body_partial_json, header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::support::{bodies, check_request, check_schema, openai_answer, sse};

#[tokio::test]
async fn structured_request_body_and_answer() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(header("authorization", "Bearer sk-test"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(openai_answer(r#"{"rationale":"asks for a refund","applies":true}"#)),
        )
        .expect(1)
        .mount(&server)
        .await;
    let model = OpenAiChat::openai("gpt-4.1", Some("sk-test".into()), Some(format!("{}/v1", server.uri())));
    let answer = model.complete(check_request()).await.unwrap();

    assert_eq!(answer.output, Output::Json(json!({"rationale": "asks for a refund", "applies": true})));
    assert_eq!(answer.usage.model, "openai:gpt-4.1");
    assert_eq!(answer.usage.prompt_tokens, 120);
    assert_eq!(answer.usage.completion_tokens, 15);
    assert_eq!(answer.usage.cached_tokens, 64);
    assert_eq!(answer.usage.calls, 1);
    assert_eq!(
        bodies(&server).await,
        vec![json!({
            "model": "gpt-4.1",
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "Check", "schema": check_schema(), "strict": true}
            },
            "messages": [
                {"role": "system", "content": "You decide whether a guideline applies."},
                {"role": "user", "content": "Customer: I want a refund.\nGuideline: the customer asks for a refund."}
            ],
            "temperature": 0.0,
            "max_completion_tokens": 200
        })]
    );
}

#[tokio::test]
async fn text_request_body_for_a_compatible_server() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(openai_answer("Hello!")))
        .mount(&server)
        .await;
    let model = OpenAiChat::compatible(&format!("{}/v1/", server.uri()), "qwen2.5");
    let req = ChatRequest::new(TaskKind::Generation).user("Hi").temperature(0.2).max_tokens(50).stop("\n\n");
    let answer = model.complete(req).await.unwrap();
    assert_eq!(answer.output, Output::Text("Hello!".into()));
    let received = server.received_requests().await.unwrap();
    assert!(received[0].headers.get("authorization").is_none(), "no key configured, none sent");
    assert_eq!(
        received[0].body_json::<serde_json::Value>().unwrap(),
        json!({
            "model": "qwen2.5",
            "messages": [{"role": "user", "content": "Hi"}],
            "temperature": 0.2,
            "max_tokens": 50,
            "stop": ["\n\n"]
        })
    );
}

#[tokio::test]
async fn auto_mode_falls_back_to_json_object_after_a_400_and_remembers() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(body_partial_json(json!({"response_format": {"type": "json_schema"}})))
        .respond_with(ResponseTemplate::new(400).set_body_json(json!({
            "error": {"message": "response_format type json_schema is not supported", "type": "invalid_request_error"}
        })))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(body_partial_json(json!({"response_format": {"type": "json_object"}})))
        .respond_with(ResponseTemplate::new(200).set_body_json(openai_answer(r#"{"rationale":"r","applies":false}"#)))
        .mount(&server)
        .await;
    let model = OpenAiChat::compatible(&format!("{}/v1", server.uri()), "llama");
    let first = model.complete(check_request()).await.unwrap();
    assert_eq!(first.output, Output::Json(json!({"rationale": "r", "applies": false})));
    model.complete(check_request()).await.unwrap();

    let sent = bodies(&server).await;
    assert_eq!(sent.len(), 3, "one rejected json_schema call, then json_object only");
    assert_eq!(sent[1]["response_format"], json!({"type": "json_object"}));
    assert_eq!(sent[2]["response_format"], json!({"type": "json_object"}));
    let system = sent[1]["messages"][0]["content"].as_str().unwrap();
    assert!(system.starts_with("You decide whether a guideline applies.\n\nAnswer with one JSON object"));
    assert!(system.contains("\"applies\""), "the schema is in the prompt: {system}");
}

#[tokio::test]
async fn configured_json_object_mode_never_sends_json_schema() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(openai_answer("```json\n{\"rationale\":\"r\",\"applies\":true}\n```")),
        )
        .mount(&server)
        .await;
    let model =
        OpenAiChat::compatible(&format!("{}/v1", server.uri()), "m").with_structured_mode(StructuredMode::JsonObject);
    let answer = model.complete(check_request()).await.unwrap();
    assert_eq!(answer.output, Output::Json(json!({"rationale": "r", "applies": true})));
    assert_eq!(bodies(&server).await[0]["response_format"], json!({"type": "json_object"}));
}

#[tokio::test]
async fn streaming_yields_deltas_then_usage() {
    let server = MockServer::start().await;
    let chunk = |content: &str| {
        json!({"id": "c", "object": "chat.completion.chunk",
               "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": null}]})
    };
    let body = sse(&[
        ("", json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})),
        ("", chunk("Hel")),
        ("", chunk("lo, ")),
        ("", chunk("world")),
        ("", json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})),
        (
            "",
            json!({"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 3,
                                            "prompt_tokens_details": {"cached_tokens": 0}}}),
        ),
    ]) + "data: [DONE]\n\n";
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(
            ResponseTemplate::new(200).insert_header("content-type", "text/event-stream").set_body_string(body),
        )
        .mount(&server)
        .await;
    let model = OpenAiChat::compatible(&format!("{}/v1", server.uri()), "m");
    let req = ChatRequest::new(TaskKind::Generation).user("Say hello");
    let events: Vec<_> = model.stream(req).await.unwrap().collect().await;

    let deltas: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            Ok(StreamEvent::Delta(d)) => Some(d.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(deltas, ["Hel", "lo, ", "world"]);
    let Some(Ok(StreamEvent::Done(done))) = events.last() else {
        panic!("stream must end with Done: {events:?}");
    };
    assert_eq!(done.output, Output::Text("Hello, world".into()));
    assert_eq!((done.usage.prompt_tokens, done.usage.completion_tokens), (9, 3));
    let sent = bodies(&server).await;
    assert_eq!(sent[0]["stream"], json!(true));
    assert_eq!(sent[0]["stream_options"], json!({"include_usage": true}));
}

#[tokio::test]
async fn streaming_garbage_ends_in_a_typed_error() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200)
                .insert_header("content-type", "text/event-stream")
                .set_body_string("data: {\"choices\":[{\"delta\":{\"content\":\"ok\"}}]}\n\ndata: {not json\n\n"),
        )
        .mount(&server)
        .await;
    let model = OpenAiChat::compatible(&format!("{}/v1", server.uri()), "m");
    let events: Vec<_> = model.stream(ChatRequest::new(TaskKind::Generation).user("x")).await.unwrap().collect().await;
    assert!(matches!(events[0], Ok(StreamEvent::Delta(ref d)) if d == "ok"));
    assert!(matches!(events.last(), Some(Err(LlmError::InvalidResponse { .. }))), "{events:?}");
}

#[tokio::test]
async fn refusal_and_missing_choices_are_invalid_responses() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "choices": [{"message": {"role": "assistant", "content": null, "refusal": "I can't help with that."}}]
        })))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"choices": []})))
        .mount(&server)
        .await;
    let model = OpenAiChat::compatible(&format!("{}/v1", server.uri()), "m");
    let refused = model.complete(check_request()).await.unwrap_err();
    assert!(refused.to_string().contains("refused: I can't help"), "{refused}");
    let empty = model.complete(check_request()).await.unwrap_err();
    assert!(matches!(empty, LlmError::InvalidResponse { ref detail, .. } if detail.contains("no choices")));
}

#[tokio::test]
async fn embeddings_float_and_base64() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .and(body_partial_json(json!({"encoding_format": "float"})))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "object": "list",
            "data": [
                {"object": "embedding", "index": 1, "embedding": [0.0, 1.0, 0.5]},
                {"object": "embedding", "index": 0, "embedding": [1.0, 0.0, -0.5]}
            ],
            "model": "text-embedding-3-small",
            "usage": {"prompt_tokens": 4, "total_tokens": 4}
        })))
        .mount(&server)
        .await;
    let encode = |v: &[f32]| {
        base64::engine::general_purpose::STANDARD.encode(v.iter().flat_map(|f| f.to_le_bytes()).collect::<Vec<u8>>())
    };
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .and(body_partial_json(json!({"encoding_format": "base64"})))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "data": [
                {"index": 0, "embedding": encode(&[0.25, -1.0])},
                {"index": 1, "embedding": encode(&[0.5, 2.0])}
            ]
        })))
        .mount(&server)
        .await;
    let texts = vec!["refund".to_string(), "weather".to_string()];
    let base = format!("{}/v1", server.uri());

    let float = OpenAiEmbedder::new(&base, "text-embedding-3-small", "openai:text-embedding-3-small");
    assert_eq!(float.dimensions(), 0);
    let vectors = float.embed(&texts).await.unwrap();
    assert_eq!(vectors, vec![vec![1.0, 0.0, -0.5], vec![0.0, 1.0, 0.5]], "sorted by index");
    assert_eq!(float.dimensions(), 3);

    let b64 = OpenAiEmbedder::new(&base, "m", "x").with_encoding(EmbeddingEncoding::Base64);
    assert_eq!(b64.embed(&texts).await.unwrap(), vec![vec![0.25, -1.0], vec![0.5, 2.0]]);

    assert!(float.embed(&[]).await.unwrap().is_empty());
    let sent = bodies(&server).await;
    assert_eq!(sent.len(), 2, "an empty batch makes no request");
    assert_eq!(
        sent[0],
        json!({"model": "text-embedding-3-small", "input": ["refund", "weather"], "encoding_format": "float"})
    );
}

#[tokio::test]
async fn embeddings_with_a_missing_vector_are_rejected() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"data": [{"index": 0, "embedding": [1.0]}]})))
        .mount(&server)
        .await;
    let embedder = OpenAiEmbedder::new(&format!("{}/v1", server.uri()), "m", "x");
    let err = embedder.embed(&["a".into(), "b".into()]).await.unwrap_err();
    assert!(err.to_string().contains("1 vectors for 2 texts"), "{err}");
}

/// A yes-or-no answer as a compatible server reports it with `logprobs`: the quote, then
/// `yes` at 0.6 beside `no` at 0.4, then the closing quote.
fn answer_with_logprobs() -> serde_json::Value {
    let mut answer = openai_answer(r#""yes""#);
    let ln = |p: f64| p.ln();
    answer["choices"][0]["logprobs"] = json!({"content": [
        {"token": "\"", "logprob": 0.0, "top_logprobs": [{"token": "\"", "logprob": 0.0}]},
        {"token": "yes", "logprob": ln(0.6), "top_logprobs": [
            {"token": "yes", "logprob": ln(0.6)}, {"token": "no", "logprob": ln(0.4)}
        ]},
        {"token": "\"", "logprob": 0.0, "top_logprobs": [{"token": "\"", "logprob": 0.0}]}
    ]});
    answer
}

fn verdict_request() -> ChatRequest {
    ChatRequest::new(TaskKind::Matching)
        .user("Statement: the customer greets the agent")
        .json_output("Verdict", json!({"type": "string", "enum": ["yes", "no"]}))
}

#[tokio::test]
async fn a_small_model_is_asked_for_log_probabilities_and_reports_its_odds() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(body_partial_json(json!({"logprobs": true, "top_logprobs": 5})))
        .respond_with(ResponseTemplate::new(200).set_body_json(answer_with_logprobs()))
        .expect(1)
        .mount(&server)
        .await;
    let small = OpenAiChat::compatible(&format!("{}/v1", server.uri()), "qwen2.5:1.5b")
        .with_capabilities(guidepost_llm::ModelCapabilities::SMALL);
    let answer = small.complete(verdict_request()).await.unwrap();
    assert_eq!(answer.output, Output::Json(json!("yes")));
    assert_eq!(answer.decisions.len(), 1, "only the token with alternatives: {:?}", answer.decisions);
    assert_eq!(answer.decisions[0].offset, 1);
    let odds = answer.odds("yes", "no").unwrap();
    assert!((odds - 0.6).abs() < 1e-4, "{odds}");

    // A capable model is not asked: its checks give reasons, not odds.
    let capable_server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(openai_answer(r#""yes""#)))
        .mount(&capable_server)
        .await;
    let capable = OpenAiChat::compatible(&format!("{}/v1", capable_server.uri()), "big");
    capable.complete(verdict_request()).await.unwrap();
    assert!(bodies(&capable_server).await[0].get("logprobs").is_none());
}

#[tokio::test]
async fn a_server_that_rejects_log_probabilities_is_asked_without_them_from_then_on() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(body_partial_json(json!({"logprobs": true})))
        .respond_with(ResponseTemplate::new(400).set_body_json(json!({
            "error": {"message": "logprobs is not supported", "type": "invalid_request_error"}
        })))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(openai_answer(r#""no""#)))
        .mount(&server)
        .await;
    let small = OpenAiChat::compatible(&format!("{}/v1", server.uri()), "tiny")
        .with_capabilities(guidepost_llm::ModelCapabilities::SMALL);
    let first = small.complete(verdict_request()).await.unwrap();
    assert_eq!(first.output, Output::Json(json!("no")));
    assert!(first.decisions.is_empty());
    small.complete(verdict_request()).await.unwrap();
    let sent = bodies(&server).await;
    assert_eq!(sent.len(), 3, "one rejected call, then two without logprobs");
    assert!(sent[1].get("logprobs").is_none() && sent[2].get("logprobs").is_none());
}
