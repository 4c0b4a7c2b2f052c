//! A rule-driven model that answers every prompt of a turn the way a careful model would
//! for the test at hand, so tests pin the decisions the runtime makes from those answers.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use guidepost_core::AgentDefinition;
use guidepost_core::definition::{SourceFile, load_agent};
use guidepost_llm::providers::scripted::ScriptedModel;
use guidepost_llm::{ChatModel, ChatRequest, ChatResponse, LlmError, OutputFormat, StreamEvent, TaskKind, TextStream};
use guidepost_runtime::CustomerRef;
use guidepost_runtime::{AgentRuntime, EmittingLatch, MemorySession, RuntimeConfig, RuntimeModels, TurnOutcome};
use guidepost_tools::registry::ToolRegistry;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

pub fn example(name: &str) -> AgentDefinition {
    let path = format!("{}/../../examples/agents/{name}.yaml", env!("CARGO_MANIFEST_DIR"));
    inline(&std::fs::read_to_string(path).unwrap())
}

pub fn inline(yaml: &str) -> AgentDefinition {
    let loaded = load_agent(&[SourceFile::new("agent.yaml", yaml)]);
    loaded.definition.unwrap_or_else(|| panic!("{:?}", loaded.diagnostics))
}

pub fn prompt(req: &ChatRequest) -> String {
    req.messages.iter().map(|m| m.content.as_str()).collect::<Vec<_>>().join("\n")
}

/// Every message of a request under its role: how a chat-turn prompt reads.
pub fn turns(req: &ChatRequest) -> String {
    req.messages
        .iter()
        .map(|m| format!("===== {} =====\n{}", m.role.as_str(), m.content))
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// `[id] text` lines after `section`.
pub fn items(text: &str, section: &str) -> Vec<(String, String)> {
    let Some(part) = text.split(section).nth(1) else { return Vec::new() };
    part.lines()
        .take_while(|l| !l.starts_with("## ") || l.starts_with(section))
        .filter_map(|l| {
            let rest = l.trim_start().strip_prefix('[')?;
            let (id, text) = rest.split_once("] ")?;
            id.parse::<usize>().ok()?;
            Some((id.to_string(), text.trim_start_matches("when: ").to_string()))
        })
        .collect()
}

/// The last customer message in a prompt's conversation.
pub fn last_customer(text: &str) -> String {
    text.lines().rev().find_map(|l| l.strip_prefix("customer: ")).unwrap_or("").to_string()
}

/// Decides whether a condition holds, given (condition, last customer message, whole prompt).
pub type Oracle = Arc<dyn Fn(&str, &str, &str) -> bool + Send + Sync>;

/// Answers matching batches from `oracle`; journeys stay unmatched unless a test adds
/// rules first (rules are tried in order, so test-specific rules go before these).
pub fn with_matching(model: ScriptedModel, oracle: Oracle) -> ScriptedModel {
    let o1 = oracle.clone();
    let o3 = oracle;
    model
        .when_task(TaskKind::Matching)
        .and(|r| prompt(r).contains("## Guidelines already followed ("))
        .reply_with(|r| {
            let checks: Vec<Value> = items(&prompt(r), "## Guidelines already followed (")
                .into_iter()
                .map(|(id, _)| json!({"id": id, "rationale": "done", "condition_holds_again": false, "customer_completed": false, "should_apply": false}))
                .collect();
            Ok(json!({"checks": checks}))
        })
        .when_task(TaskKind::Matching)
        .and(|r| prompt(r).contains("## Optional guidelines ("))
        .reply_with(move |r| {
            let text = prompt(r);
            let last = last_customer(&text);
            let applies: Vec<String> = items(&text, "## Optional guidelines (").into_iter().filter(|(_, c)| o1(c, &last, &text)).map(|(id, _)| id).collect();
            Ok(json!({"applies": applies}))
        })
        .when_task(TaskKind::Matching)
        .and(|r| prompt(r).contains("## Conditions ("))
        .reply_with(move |r| Ok(checks(r, "## Conditions (", &o3)))
}

fn checks(r: &ChatRequest, section: &str, oracle: &Oracle) -> Value {
    let text = prompt(r);
    let last = last_customer(&text);
    let checks: Vec<Value> = items(&text, section)
        .into_iter()
        .map(|(id, c)| {
            let applies = oracle(&c, &last, &text);
            json!({"id": id, "rationale": format!("scripted: {applies}"), "applies": applies})
        })
        .collect();
    json!({"checks": checks})
}

/// A fluid reply: `reply(prompt)` decides the text.
pub fn with_reply(model: ScriptedModel, reply: impl Fn(&str) -> String + Send + Sync + 'static) -> ScriptedModel {
    let reply = Arc::new(reply);
    let r2 = reply.clone();
    model
        .when_task(TaskKind::Generation)
        .and(|r| matches!(r.output, OutputFormat::Json { .. }))
        .reply_with(move |r| {
            let text = reply(&prompt(r));
            Ok(json!({"draft": text, "problems": [], "reply": text}))
        })
        .when_task(TaskKind::Generation)
        .reply_text_with(move |r| Ok(r2(&prompt(r))))
}

/// Delays every call, so a second message can arrive while a turn prepares.
pub struct Slow {
    pub inner: Arc<ScriptedModel>,
    pub delay: Duration,
}

#[async_trait]
impl ChatModel for Slow {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }
    fn capabilities(&self) -> guidepost_llm::ModelCapabilities {
        self.inner.capabilities()
    }
    async fn complete(&self, req: ChatRequest) -> Result<ChatResponse, LlmError> {
        tokio::time::sleep(self.delay).await;
        self.inner.complete(req).await
    }
    async fn stream(&self, req: ChatRequest) -> Result<TextStream, LlmError> {
        tokio::time::sleep(self.delay).await;
        self.inner.stream(req).await
    }
}

/// Streams text answers word by word.
pub struct Chunking(pub Arc<ScriptedModel>);

#[async_trait]
impl ChatModel for Chunking {
    fn model_id(&self) -> &str {
        self.0.model_id()
    }
    fn capabilities(&self) -> guidepost_llm::ModelCapabilities {
        self.0.capabilities()
    }
    async fn complete(&self, req: ChatRequest) -> Result<ChatResponse, LlmError> {
        self.0.complete(req).await
    }
    async fn stream(&self, req: ChatRequest) -> Result<TextStream, LlmError> {
        let response = self.0.complete(req).await?;
        let text = response.output.to_text();
        let mut events: Vec<Result<StreamEvent, LlmError>> =
            text.split_inclusive(' ').map(|w| Ok(StreamEvent::Delta(w.to_string()))).collect();
        events.push(Ok(StreamEvent::Done(response)));
        Ok(futures::stream::iter(events).boxed())
    }
}

pub fn runtime(definition: AgentDefinition, model: Arc<dyn ChatModel>, registry: ToolRegistry) -> Arc<AgentRuntime> {
    Arc::new(AgentRuntime::new(
        Arc::new(definition),
        RuntimeModels::single(model, None),
        Arc::new(registry),
        RuntimeConfig::default(),
    ))
}

pub fn fixtures(definition: &AgentDefinition) -> ToolRegistry {
    ToolRegistry::from_definition(definition).unwrap()
}

/// Runs one turn for `text` in `session`, with the state of the previous turn.
/// Reads ahead after the turns `session` holds, the conversation's state being `state` (see
/// [`AgentRuntime::read_ahead_after`]); how many prompts were read.
pub async fn read_ahead_after(
    runtime: &AgentRuntime,
    session: &MemorySession,
    state: &guidepost_core::AgentState,
) -> usize {
    let input = guidepost_runtime::TurnInput {
        session_id: "s1".into(),
        customer: CustomerRef { id: "guest".into(), tags: vec![] },
        customer_name: None,
        events: session.events(),
        previous_state: state.clone(),
        trace_id: String::new(),
    };
    runtime.read_ahead_after(&input).await
}

pub async fn turn(
    runtime: &AgentRuntime,
    session: &MemorySession,
    previous: &guidepost_core::AgentState,
    text: &str,
) -> TurnOutcome {
    let input = session.customer_turn("s1", CustomerRef { id: "guest".into(), tags: vec![] }, text, previous);
    runtime.process(input, session, CancellationToken::new(), EmittingLatch::default()).await
}
