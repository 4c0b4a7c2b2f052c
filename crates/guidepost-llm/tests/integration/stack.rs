//! Building a stack from configuration strings: routing per task kind, usage accounting,
//! key checks and the provider-factory hook for local models.

use std::collections::HashMap;
use std::sync::Arc;

use guidepost_llm::providers::scripted::{ScriptedModel, last_user_contains};
use guidepost_llm::{
    CacheMode, ChatModel, ChatRequest, Embedder, LlmError, ModelSettings, ModelSpec, ModelStackBuilder, Output,
    ProviderFactory, ProviderKeys, ProviderRegistry, StackConfig, TaskKind, UsageLedger, generate,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::support::{check_request, fast_config, openai_answer};

fn settings(vars: &[(&str, String)]) -> ModelSettings {
    let vars: HashMap<String, String> = vars.iter().map(|(k, v)| ((*k).to_string(), v.clone())).collect();
    ModelSettings::from_lookup(|k| vars.get(k).cloned()).unwrap()
}

#[tokio::test]
async fn routes_tasks_and_accounts_usage_per_turn_and_session() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(openai_answer(r#"{"rationale":"r","applies":true}"#)))
        .expect(2)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"data": [{"index": 0, "embedding": [0.6, 0.8]}]})),
        )
        .mount(&server)
        .await;
    let compat = format!("openai-compatible:{}/v1#gpt-4.1-mini", server.uri());
    let settings = settings(&[
        ("GUIDEPOST_MODEL", "scripted".into()),
        ("GUIDEPOST_MODEL_MATCHING", compat.clone()),
        ("GUIDEPOST_EMBEDDER", compat.clone()),
    ]);
    let scripted = Arc::new(
        ScriptedModel::new()
            .when(last_user_contains("refund"))
            .reply_text("I can help with your refund.")
            .on_text(TaskKind::Generation, |_| Ok("Hello!".into())),
    );
    let server_ledger = UsageLedger::new("server");
    let stack = ModelStackBuilder::new(settings)
        .config(StackConfig { ledger: Some(server_ledger.clone()), ..fast_config() })
        .scripted(scripted.clone())
        .build()
        .unwrap();
    assert_eq!(stack.model_for(&TaskKind::Matching).model_id(), compat);
    assert_eq!(stack.model_for(&TaskKind::Judge).model_id(), "scripted");

    let session = UsageLedger::new("session");
    let turn = session.child("turn-1");
    stack.complete(check_request().ledger(turn.clone())).await.unwrap();
    stack.complete(check_request().ledger(turn.clone())).await.unwrap();
    let reply = stack
        .complete(ChatRequest::new(TaskKind::Generation).user("I want a refund").ledger(turn.clone()))
        .await
        .unwrap();
    assert_eq!(reply.output, Output::Text("I can help with your refund.".into()));
    assert_eq!(scripted.calls(&TaskKind::Generation), 1);

    let totals = session.totals();
    assert_eq!(totals.answers, 3);
    assert_eq!(totals.prompt_tokens, 240 + reply.usage.prompt_tokens);
    assert_eq!(totals.cached_tokens, 128);
    // gpt-4.1-mini: 2 × (56 uncached × 0.4 + 64 cached × 0.1 + 15 × 1.6) per million
    let expected = 2.0 * (56.0 * 0.4 + 64.0 * 0.1 + 15.0 * 1.6) / 1e6;
    assert!((totals.cost_usd - expected).abs() < 1e-12, "{}", totals.cost_usd);
    assert!(totals.cost_is_complete(), "{:?}", totals.unpriced_models);
    assert_eq!(session.by_task()["matching"].answers, 2);
    assert_eq!(server_ledger.totals().answers, 3);

    let vectors = stack.embedder().embed(&["hello".to_string()]).await.unwrap();
    assert_eq!(vectors, vec![vec![0.6, 0.8]]);
    assert_eq!(stack.embedder().dimensions(), 2);
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Verdict {
    rationale: String,
    applies: bool,
}

#[tokio::test]
async fn generate_through_a_stack_re_asks_until_valid() {
    let scripted = Arc::new(
        ScriptedModel::new()
            .when_task(TaskKind::Matching)
            .times(1)
            .reply_json(json!({"rationale": "r"}))
            .on(TaskKind::Matching, |_| Ok(json!({"rationale": "r", "applies": true}))),
    );
    let stack = ModelStackBuilder::new(ModelSettings::single(ModelSpec::Scripted))
        .config(fast_config())
        .scripted(scripted.clone())
        .build()
        .unwrap();
    let (verdict, usage) = generate::<Verdict>(&stack, ChatRequest::new(TaskKind::Matching).user("q")).await.unwrap();
    assert!(verdict.applies);
    assert_eq!(verdict.rationale, "r");
    assert_eq!(usage.calls, 2);
    let second = &scripted.requests()[1];
    assert!(second.last_message().contains("missing required property `applies`"));
}

#[test]
fn missing_keys_and_local_without_factory_are_config_errors() {
    let openai = ModelStackBuilder::new(ModelSettings::single("openai:gpt-4.1".parse().unwrap()))
        .build()
        .unwrap_err()
        .to_string();
    assert!(openai.contains("OPENAI_API_KEY is not set (needed by `openai:gpt-4.1`)"), "{openai}");
    let anthropic = ModelStackBuilder::new(ModelSettings::single("anthropic:claude-sonnet-4-5".parse().unwrap()))
        .build()
        .unwrap_err()
        .to_string();
    assert!(anthropic.contains("ANTHROPIC_API_KEY"), "{anthropic}");
    let local = ModelStackBuilder::new(ModelSettings::default()).build().unwrap_err().to_string();
    assert!(local.contains("no provider is registered for `local:qwen2.5-coder-1.5b`"), "{local}");
    let keys = ProviderKeys::from_lookup(|k| (k == "OPENAI_API_KEY").then(|| "sk".to_string()));
    let built =
        ModelStackBuilder::new(settings(&[("GUIDEPOST_MODEL", "openai:gpt-4.1".into())])).keys(keys).build().unwrap();
    assert_eq!(built.model_id(), "openai:gpt-4.1");
    assert_eq!(built.embedder().model_id(), "openai:text-embedding-3-small");
}

/// Stands in for the local-inference crate's factory.
struct FakeLocalFactory;

impl ProviderFactory for FakeLocalFactory {
    fn scheme(&self) -> &str {
        "local"
    }
    fn chat_model(&self, spec: &ModelSpec) -> Result<Arc<dyn ChatModel>, LlmError> {
        let ModelSpec::Local { model } = spec else {
            return Err(LlmError::Unsupported(spec.to_string()));
        };
        let answer = format!("local {model} says hi");
        Ok(Arc::new(
            ScriptedModel::new()
                .with_id(format!("local:{model}"))
                .on_text(TaskKind::Generation, move |_| Ok(answer.clone())),
        ))
    }
    fn embedder(&self, _spec: &ModelSpec) -> Result<Arc<dyn Embedder>, LlmError> {
        Ok(Arc::new(guidepost_llm::providers::hashing::HashingEmbedder::new(8)))
    }
}

#[tokio::test]
async fn local_specs_are_built_by_the_registered_factory() {
    let mut registry = ProviderRegistry::new();
    registry.register(Arc::new(FakeLocalFactory));
    let ledger = UsageLedger::new("s");
    let stack = ModelStackBuilder::new(settings(&[("GUIDEPOST_MODEL", "local:smollm2".into())]))
        .registry(registry)
        .build()
        .unwrap();
    let answer =
        stack.complete(ChatRequest::new(TaskKind::Generation).user("hi").ledger(ledger.clone())).await.unwrap();
    assert_eq!(answer.output, Output::Text("local smollm2 says hi".into()));
    assert_eq!(stack.embedder().dimensions(), 8);
    assert!(ledger.totals().cost_is_complete(), "local models are free");
}

#[test]
fn a_model_declared_small_is_small_through_every_layer_of_the_stack() {
    let declared = |spec: &str| {
        let vars = [("GUIDEPOST_MODEL", spec.to_string()), ("GUIDEPOST_EMBEDDER", "scripted".to_string())];
        let stack = ModelStackBuilder::new(settings(&vars)).build().unwrap();
        [TaskKind::Matching, TaskKind::JourneySelection, TaskKind::ToolInference, TaskKind::Generation]
            .map(|task| stack.model_for(&task).capabilities())
    };
    let small = declared("openai-compatible:http://127.0.0.1:11434/v1#qwen2.5:1.5b?small");
    assert!(small.iter().all(|c| *c == guidepost_llm::ModelCapabilities::SMALL), "{small:?}");
    assert!(small.iter().all(|c| !c.follows_compound_instructions));
    let capable = declared("openai-compatible:http://127.0.0.1:11434/v1#qwen2.5:72b");
    assert!(capable.iter().all(|c| *c == guidepost_llm::ModelCapabilities::CAPABLE), "{capable:?}");
}

#[tokio::test]
async fn reading_ahead_passes_every_layer_but_never_leaves_recordings() {
    let dir = tempfile::tempdir().unwrap();
    for (mode, reaches) in [(CacheMode::Live, true), (CacheMode::Replay, true), (CacheMode::ReplayOrFail, false)] {
        let scripted = Arc::new(ScriptedModel::new());
        let config = StackConfig { recordings: Some(dir.path().to_path_buf()), cache_mode: mode, ..fast_config() };
        let stack = ModelStackBuilder::new(settings(&[("GUIDEPOST_MODEL", "scripted".into())]))
            .config(config)
            .scripted(scripted.clone())
            .build()
            .unwrap();
        assert_eq!(stack.model_for(&TaskKind::Matching).reads_ahead(), reaches, "{mode:?}");
        assert_eq!(stack.reads_ahead(), reaches, "{mode:?}");
        let request = ChatRequest::new(TaskKind::Matching).system("You check conditions.").user("");
        // Through the task's model (every middleware layer) and through the stack itself.
        let read = stack.model_for(&TaskKind::Matching).read_ahead(request.clone()).await.unwrap();
        assert_eq!(read, reaches, "{mode:?}");
        assert_eq!(stack.read_ahead(request).await.unwrap(), reaches, "{mode:?}");
        assert_eq!(scripted.read_ahead_requests().len(), if reaches { 2 } else { 0 }, "{mode:?}");
        assert!(scripted.requests().is_empty(), "reading ahead is no call ({mode:?})");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "nothing recorded ({mode:?})");
    }
    // A hosted model keeps nothing between calls: nothing is worth reading ahead for it.
    let hosted = ModelStackBuilder::new(settings(&[
        ("GUIDEPOST_MODEL", "openai-compatible:http://127.0.0.1:9/v1#gpt-4.1-mini".into()),
        ("GUIDEPOST_EMBEDDER", "scripted".into()),
    ]))
    .build()
    .unwrap();
    assert!(!hosted.reads_ahead());
    let request = ChatRequest::new(TaskKind::Matching).user("");
    assert!(!hosted.model_for(&TaskKind::Matching).read_ahead(request).await.unwrap());
}
