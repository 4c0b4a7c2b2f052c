//! Record/replay: recordings are reviewable files, replays make no network calls, and
//! replay-or-fail explains what changed.

use std::sync::Arc;

use futures::StreamExt;
use guidepost_llm::providers::openai_compat::OpenAiChat;
use guidepost_llm::{CacheMode, ChatModel, ChatRequest, LlmError, Output, StackConfig, StreamEvent, TaskKind, layer};
use serde_json::{Value, json};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::support::{check_request, fast_config, openai_answer};

fn cached(server: &MockServer, dir: &std::path::Path, mode: CacheMode) -> Arc<dyn ChatModel> {
    let config = StackConfig { recordings: Some(dir.to_path_buf()), cache_mode: mode, ..fast_config() };
    layer(Arc::new(OpenAiChat::compatible(&format!("{}/v1", server.uri()), "m")), &config)
}

async fn record_one(server: &MockServer, dir: &std::path::Path) -> Value {
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(openai_answer(r#"{"rationale":"r","applies":true}"#)))
        .expect(1)
        .mount(server)
        .await;
    let answer = cached(server, dir, CacheMode::Record).complete(check_request()).await.unwrap();
    assert_eq!(answer.output, Output::Json(json!({"rationale": "r", "applies": true})));
    let files: Vec<_> = std::fs::read_dir(dir.join("matching")).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(files.len(), 1);
    let text = std::fs::read_to_string(&files[0]).unwrap();
    assert!(text.contains("\n  \"request\": {"), "pretty JSON for review:\n{text}");
    server.verify().await;
    server.reset().await;
    serde_json::from_str(&text).unwrap()
}

#[tokio::test]
async fn recording_is_a_readable_file_with_request_response_and_usage() {
    let server = MockServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let recording = record_one(&server, dir.path()).await;
    assert_eq!(recording["task"], "matching");
    assert_eq!(recording["key"].as_str().unwrap().len(), 64);
    assert_eq!(recording["request"]["messages"][1]["role"], "user");
    assert_eq!(recording["request"]["output"]["name"], "Check");
    assert_eq!(recording["request"]["temperature"], json!(0.0));
    assert_eq!(recording["response"]["output"], json!({"type": "json", "value": {"rationale": "r", "applies": true}}));
    assert_eq!(recording["response"]["usage"]["prompt_tokens"], 120);
    assert_eq!(recording["response"]["usage"]["cached_tokens"], 64);
}

#[tokio::test]
async fn replay_makes_no_network_calls() {
    let server = MockServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    record_one(&server, dir.path()).await;
    Mock::given(method("POST")).respond_with(ResponseTemplate::new(500)).expect(0).mount(&server).await;
    for mode in [CacheMode::Replay, CacheMode::ReplayOrFail] {
        let model = cached(&server, dir.path(), mode);
        let answer = model.complete(check_request()).await.unwrap();
        assert_eq!(answer.output, Output::Json(json!({"rationale": "r", "applies": true})));
        assert_eq!(answer.usage.prompt_tokens, 120, "the recorded usage is reported");
        // Ledgers are not part of the request's identity.
        let with_ledger = check_request().ledger(guidepost_llm::UsageLedger::new("turn"));
        model.complete(with_ledger).await.unwrap();
        let events: Vec<_> = model.stream(check_request()).await.unwrap().collect().await;
        assert!(matches!(events.last(), Some(Ok(StreamEvent::Done(_)))));
    }
    server.verify().await;
}

#[tokio::test]
async fn replay_or_fail_names_what_changed() {
    let server = MockServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    record_one(&server, dir.path()).await;
    Mock::given(method("POST")).respond_with(ResponseTemplate::new(500)).expect(0).mount(&server).await;
    let model = cached(&server, dir.path(), CacheMode::ReplayOrFail);

    let mut changed = check_request();
    changed.messages[1].content = "Customer: I want my money back.\nGuideline: the customer asks for a refund.".into();
    let err = model.complete(changed).await.unwrap_err();
    let LlmError::ReplayMiss { task, diff } = &err else { panic!("unexpected {err:?}") };
    assert_eq!(task, "matching");
    assert!(diff.contains("message 1 (user) changed:"), "{diff}");
    assert!(diff.contains("-Customer: I want a refund.\n+Customer: I want my money back."), "{diff}");
    assert!(err.to_string().contains("no recording for matching request"), "{err}");

    let other_schema = check_request().json_output("Verdict", json!({"type": "object"}));
    let err = model.complete(other_schema).await.unwrap_err().to_string();
    assert!(err.contains("schema changed: `Check` -> `Verdict`"), "{err}");

    let err = model.complete(check_request().temperature(0.7)).await.unwrap_err().to_string();
    assert!(err.contains("temperature changed: Some(0.0) -> Some(0.7)"), "{err}");

    let err = model.complete(ChatRequest::new(TaskKind::Judge).user("x")).await.unwrap_err().to_string();
    assert!(err.contains("no recordings exist"), "{err}");
    // Each miss is in the process's ledger, for the command that replays to fail the run
    // even where the caller degraded around the failed call (other tests of this binary may
    // add their own misses: these are looked up by their text).
    let ledger = guidepost_llm::middleware::cache::replay_misses();
    assert!(
        ledger.iter().any(|m| m.contains("-Customer: I want a refund.\n+Customer: I want my money back.")),
        "{ledger:?}"
    );
    assert!(ledger.iter().any(|m| m.contains("temperature changed: Some(0.0) -> Some(0.7)")), "{ledger:?}");
    server.verify().await;
}

#[tokio::test]
async fn replay_mode_records_what_it_misses() {
    let server = MockServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(openai_answer("Hello!")))
        .expect(1)
        .mount(&server)
        .await;
    let model = cached(&server, dir.path(), CacheMode::Replay);
    let req = || ChatRequest::new(TaskKind::Generation).user("Hi");
    let first = model.complete(req()).await.unwrap();
    let second = model.complete(req()).await.unwrap();
    assert_eq!(first.output, second.output);
    assert_eq!(std::fs::read_dir(dir.path().join("generation")).unwrap().count(), 1);
}

#[tokio::test]
async fn concurrent_identical_requests_record_one_intact_file() {
    let server = MockServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(openai_answer("Hello!")))
        .mount(&server)
        .await;
    let model = cached(&server, dir.path(), CacheMode::Record);
    let req = || ChatRequest::new(TaskKind::Generation).user("Hi");
    let answers = futures::future::join_all((0..8).map(|_| model.complete(req()))).await;
    assert!(answers.iter().all(Result::is_ok));
    let files: Vec<_> = std::fs::read_dir(dir.path().join("generation")).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let recording: Value = serde_json::from_str(&std::fs::read_to_string(&files[0]).unwrap()).unwrap();
    assert_eq!(recording["response"]["output"]["value"], "Hello!");
}

#[tokio::test]
async fn a_corrupt_recording_is_reported_as_corrupt_not_as_missing() {
    let server = MockServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    record_one(&server, dir.path()).await;
    let file = std::fs::read_dir(dir.path().join("matching")).unwrap().next().unwrap().unwrap().path();
    let text = std::fs::read_to_string(&file).unwrap();
    for broken in [text[..text.len() / 2].to_string(), format!("{}\0", &text[..10]), String::new()] {
        std::fs::write(&file, &broken).unwrap();
        let error = cached(&server, dir.path(), CacheMode::ReplayOrFail).complete(check_request()).await.unwrap_err();
        assert!(matches!(&error, LlmError::Storage(m) if m.contains("is corrupt")), "{error}");
        assert!(error.to_string().contains(&file.display().to_string()), "{error}");
    }
    // A missing one is a miss, which names the corrupt neighbours it skipped.
    std::fs::rename(&file, file.with_file_name("0000000000000000.json")).unwrap();
    let error = cached(&server, dir.path(), CacheMode::ReplayOrFail).complete(check_request()).await.unwrap_err();
    assert!(matches!(&error, LlmError::ReplayMiss { .. }), "{error}");
    assert!(error.to_string().contains("1 corrupt recording(s) skipped"), "{error}");
}
