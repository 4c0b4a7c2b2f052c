//! Streams through the middleware: accounting and recording at the end of a stream, replayed
//! streams, idle timeouts, and concurrency permits held for a stream's lifetime.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::{StreamExt, stream};
use guidepost_llm::middleware::limits::{Limits, LimitsConfig};
use guidepost_llm::middleware::timeout::Timeout;
use guidepost_llm::providers::openai_compat::OpenAiChat;
use guidepost_llm::{
    CacheMode, ChatModel, ChatRequest, ChatResponse, LlmError, Output, StackConfig, StreamEvent, TaskKind, TextStream,
    UsageLedger, layer,
};
use serde_json::json;
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::support::{fast_config, sse};

fn hello_stream() -> String {
    let chunk = |c: &str| json!({"choices": [{"index": 0, "delta": {"content": c}}]});
    sse(&[
        ("", chunk("Hello")),
        ("", chunk(" there")),
        ("", json!({"choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 2}})),
    ]) + "data: [DONE]\n\n"
}

async fn collect_text(stream: TextStream) -> (String, Option<ChatResponse>) {
    let events: Vec<_> = stream.collect().await;
    let mut text = String::new();
    let mut done = None;
    for event in events {
        match event.unwrap() {
            StreamEvent::Delta(d) => text.push_str(&d),
            StreamEvent::Done(r) => done = Some(r),
        }
    }
    (text, done)
}

#[tokio::test]
async fn streamed_answers_are_accounted_recorded_and_replayed() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200)
                .insert_header("content-type", "text/event-stream")
                .set_body_string(hello_stream()),
        )
        .expect(1)
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let make = |mode| {
        let config = StackConfig { recordings: Some(dir.path().to_path_buf()), cache_mode: mode, ..fast_config() };
        layer(Arc::new(OpenAiChat::compatible(&format!("{}/v1", server.uri()), "m")), &config)
    };
    let ledger = UsageLedger::new("turn");
    let req = || ChatRequest::new(TaskKind::Generation).user("Greet me").ledger(ledger.clone());

    let (text, done) = collect_text(make(CacheMode::Replay).stream(req()).await.unwrap()).await;
    assert_eq!(text, "Hello there");
    assert_eq!(done.unwrap().usage.prompt_tokens, 11);
    assert_eq!(ledger.totals().answers, 1, "recorded when the stream finished");
    server.verify().await;
    server.reset().await;

    Mock::given(method("POST")).respond_with(ResponseTemplate::new(500)).expect(0).mount(&server).await;
    let replay = make(CacheMode::ReplayOrFail);
    let (text, _) = collect_text(replay.stream(req()).await.unwrap()).await;
    assert_eq!(text, "Hello there");
    let whole = replay.complete(req()).await.unwrap();
    assert_eq!(whole.output, Output::Text("Hello there".into()));
    assert_eq!(ledger.totals().answers, 3);
    server.verify().await;
}

/// Sends one piece, then nothing more.
struct StallingModel;

#[async_trait]
impl ChatModel for StallingModel {
    fn model_id(&self) -> &str {
        "stalling"
    }
    fn capabilities(&self) -> guidepost_llm::ModelCapabilities {
        guidepost_llm::ModelCapabilities::CAPABLE
    }
    async fn complete(&self, _req: ChatRequest) -> Result<ChatResponse, LlmError> {
        std::future::pending().await
    }
    async fn stream(&self, _req: ChatRequest) -> Result<TextStream, LlmError> {
        let first = stream::iter([Ok(StreamEvent::Delta("Hel".into()))]);
        Ok(Box::pin(first.chain(stream::pending())))
    }
}

#[tokio::test(start_paused = true)]
async fn a_stalled_stream_times_out_between_pieces() {
    let model = Timeout::new(StallingModel, Duration::from_secs(2))
        .with_stream_budgets(Duration::from_secs(3), Duration::from_secs(60));
    let started = tokio::time::Instant::now();
    let events: Vec<_> = model.stream(ChatRequest::new(TaskKind::Generation).user("x")).await.unwrap().collect().await;
    assert_eq!(events.len(), 2);
    assert!(matches!(&events[0], Ok(StreamEvent::Delta(d)) if d == "Hel"));
    assert!(
        matches!(&events[1], Err(LlmError::Limit(e)) if e.limit == guidepost_core::limits::Limit::StreamIdle && e.allowed == "3 s"),
        "{:?}",
        events[1]
    );
    assert_eq!(started.elapsed(), Duration::from_secs(3));
    let err = model.complete(ChatRequest::new(TaskKind::Generation).user("x")).await.unwrap_err();
    assert!(matches!(err, LlmError::Timeout { .. }));
}

#[tokio::test(start_paused = true)]
async fn an_open_stream_holds_its_concurrency_slot() {
    let limited = Limits::new(StallingModel, LimitsConfig { max_concurrency: Some(1), ..LimitsConfig::default() });
    let req = || ChatRequest::new(TaskKind::Generation).user("x");
    let first = limited.stream(req()).await.unwrap();
    let blocked = tokio::time::timeout(Duration::from_secs(1), limited.stream(req())).await;
    assert!(blocked.is_err(), "the second stream waits for the first one's slot");
    drop(first);
    let second = tokio::time::timeout(Duration::from_secs(1), limited.stream(req())).await;
    assert!(second.is_ok(), "dropping the first stream frees the slot");
}
