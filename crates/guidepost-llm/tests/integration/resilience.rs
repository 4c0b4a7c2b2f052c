//! Failure handling through the middleware stack against fake servers: rate limits, server
//! errors, timeouts, connection failures, truncated and schema-invalid answers, garbage bodies.

use std::sync::Arc;
use std::time::{Duration, Instant};

use guidepost_llm::providers::anthropic::AnthropicChat;
use guidepost_llm::providers::openai_compat::OpenAiChat;
use guidepost_llm::{ChatModel, LlmError, Output, StackConfig, layer};
use serde_json::json;
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::support::{bodies, check_request, fast_config, openai_answer};

fn stack(server: &MockServer, config: &StackConfig) -> Arc<dyn ChatModel> {
    layer(Arc::new(OpenAiChat::compatible(&format!("{}/v1", server.uri()), "m")), config)
}

const VALID: &str = r#"{"rationale":"r","applies":true}"#;

#[tokio::test]
async fn rate_limit_with_retry_after_is_honoured() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(429)
                .insert_header("retry-after", "1")
                .set_body_json(json!({"error": {"message": "Rate limit reached"}})),
        )
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(openai_answer(VALID)))
        .mount(&server)
        .await;
    let started = Instant::now();
    let answer = stack(&server, &fast_config()).complete(check_request()).await.unwrap();
    assert!(started.elapsed() >= Duration::from_secs(1), "waited {:?}", started.elapsed());
    assert_eq!(answer.usage.calls, 2);
    assert_eq!(bodies(&server).await.len(), 2);
}

#[tokio::test]
async fn server_error_then_success() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(500).set_body_string("internal error"))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(openai_answer(VALID)))
        .mount(&server)
        .await;
    let answer = stack(&server, &fast_config()).complete(check_request()).await.unwrap();
    assert_eq!(answer.output, Output::Json(json!({"rationale": "r", "applies": true})));
    assert_eq!(answer.usage.calls, 2);
}

#[tokio::test]
async fn persistent_rate_limit_ends_with_the_provider_error() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(429).set_body_string("slow down"))
        .expect(3)
        .mount(&server)
        .await;
    let err = stack(&server, &fast_config()).complete(check_request()).await.unwrap_err();
    assert_eq!(err, LlmError::Http { status: 429, body: "slow down".into(), retry_after: None });
}

#[tokio::test]
async fn client_errors_are_not_retried() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(400).set_body_string("bad temperature"))
        .expect(1)
        .mount(&server)
        .await;
    let err = stack(&server, &fast_config()).complete(check_request()).await.unwrap_err();
    assert!(matches!(err, LlmError::Http { status: 400, .. }), "{err}");
}

#[tokio::test]
async fn slow_server_times_out_on_every_attempt() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(openai_answer(VALID)).set_delay(Duration::from_secs(3)))
        .mount(&server)
        .await;
    let config = StackConfig {
        timeout: Some(Duration::from_millis(200)),
        retry: guidepost_llm::RetryPolicy { max_attempts: 2, ..fast_config().retry },
        ..fast_config()
    };
    // Each attempt cut off at 200 ms (an answer would have come after 3 s), and no more
    // attempts than allowed.
    let err = stack(&server, &config).complete(check_request()).await.unwrap_err();
    assert_eq!(err, LlmError::Timeout { after: Duration::from_millis(200) });
    assert_eq!(bodies(&server).await.len(), 2);
}

#[tokio::test]
async fn unreachable_server_is_a_connection_error() {
    let model = layer(Arc::new(OpenAiChat::compatible("http://127.0.0.1:9/v1", "m")), &fast_config());
    let err = model.complete(check_request()).await.unwrap_err();
    assert!(matches!(err, LlmError::Connection(_)), "{err:?}");
}

#[tokio::test]
async fn schema_invalid_answer_is_re_asked_with_the_validation_error() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(openai_answer(r#"{"rationale":"r","applies":"yes"}"#)))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(openai_answer(VALID)))
        .mount(&server)
        .await;
    let answer = stack(&server, &fast_config()).complete(check_request()).await.unwrap();
    assert_eq!(answer.output, Output::Json(json!({"rationale": "r", "applies": true})));
    assert_eq!(answer.usage.calls, 2);
    assert_eq!(answer.usage.prompt_tokens, 240, "both calls' tokens are counted");
    let sent = bodies(&server).await;
    let messages = sent[1]["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 4);
    assert_eq!(messages[2], json!({"role": "assistant", "content": r#"{"rationale":"r","applies":"yes"}"#}));
    assert_eq!(
        messages[3],
        json!({"role": "user", "content": "Your answer does not conform to the `Check` JSON Schema:\n\
            - $.applies: expected boolean, got string \"yes\"\nAnswer again with only the corrected JSON."})
    );
}

#[tokio::test]
async fn truncated_json_is_re_asked_then_given_up() {
    let server = MockServer::start().await;
    let mut truncated = openai_answer(r#"{"rationale":"the customer ask"#);
    truncated["choices"][0]["finish_reason"] = json!("length");
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(truncated))
        .expect(3)
        .mount(&server)
        .await;
    let err = stack(&server, &fast_config()).complete(check_request()).await.unwrap_err();
    match &err {
        LlmError::SchemaViolation { errors, answer } => {
            assert_eq!(answer, r#"{"rationale":"the customer ask"#);
            assert!(errors[0].contains("cut off by the token limit"), "{errors:?}");
        }
        other => panic!("unexpected {other:?}"),
    }
    let sent = bodies(&server).await;
    let last = sent[1]["messages"][3]["content"].as_str().unwrap();
    assert!(last.contains("not valid JSON"), "{last}");
}

#[tokio::test]
async fn garbage_bodies_end_in_typed_errors() {
    let garbage: Vec<(u16, &str)> = vec![
        (200, "<html>502 Bad Gateway</html>"),
        (200, ""),
        (200, "{\"choices\": \"nope\"}"),
        (200, "{\"choices\": [{\"message\": {\"content\": 42}}]}"),
        (200, "null"),
        (200, "\u{0}\u{1}binary"),
    ];
    for (status, body) in garbage {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(status).set_body_string(body))
            .mount(&server)
            .await;
        let err = stack(&server, &fast_config()).complete(check_request()).await.unwrap_err();
        assert!(matches!(err, LlmError::InvalidResponse { .. }), "{body:?}: {err:?}");
        let anthropic = layer(Arc::new(AnthropicChat::new("c", None, Some(server.uri()))), &fast_config());
        let err = anthropic.complete(check_request()).await.unwrap_err();
        assert!(matches!(err, LlmError::InvalidResponse { .. }), "{body:?}: {err:?}");
    }
}

#[tokio::test]
async fn gateway_errors_with_html_are_retried_then_reported() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(502).set_body_string("<html>Bad Gateway</html>"))
        .expect(3)
        .mount(&server)
        .await;
    let err = stack(&server, &fast_config()).complete(check_request()).await.unwrap_err();
    assert!(err.to_string().contains("HTTP 502: <html>Bad Gateway</html>"), "{err}");
}

#[tokio::test]
async fn stream_opening_is_retried() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(503).set_body_string("warming up"))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    let body = crate::support::sse(&[("", json!({"choices": [{"index": 0, "delta": {"content": "ok"}}]}))])
        + "data: [DONE]\n\n";
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200).insert_header("content-type", "text/event-stream").set_body_string(body),
        )
        .mount(&server)
        .await;
    let req = guidepost_llm::ChatRequest::new(guidepost_llm::TaskKind::Generation).user("x");
    let events: Vec<_> = futures::StreamExt::collect(stack(&server, &fast_config()).stream(req).await.unwrap()).await;
    assert!(
        matches!(events.last(), Some(Ok(guidepost_llm::StreamEvent::Done(d))) if d.output == Output::Text("ok".into()))
    );
    assert_eq!(bodies(&server).await.len(), 2);
}

#[tokio::test]
async fn embeddings_are_retried_and_cached() {
    let server = MockServer::start().await;
    Mock::given(method("POST")).respond_with(ResponseTemplate::new(500)).up_to_n_times(1).mount(&server).await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"data": [{"index": 0, "embedding": [1.0, 0.0]}]})),
        )
        .mount(&server)
        .await;
    let embedder = guidepost_llm::layer_embedder(
        Arc::new(guidepost_llm::providers::openai_compat::OpenAiEmbedder::new(
            &format!("{}/v1", server.uri()),
            "e",
            "e",
        )),
        &fast_config(),
    );
    let texts = vec!["refund".to_string()];
    assert_eq!(embedder.embed(&texts).await.unwrap(), vec![vec![1.0, 0.0]]);
    assert_eq!(embedder.embed(&texts).await.unwrap(), vec![vec![1.0, 0.0]]);
    assert_eq!(bodies(&server).await.len(), 2, "one failed attempt, one success, then the cache");
}
