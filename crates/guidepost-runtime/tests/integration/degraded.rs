//! Turns that lose a stage to failures: the reply never looks normal. A matching pass that
//! loses every call fails the turn; one that loses some of them, or a tool-call inference
//! that fails, sends the reply marked degraded (outcome status, trace, `ready` status event,
//! message event), with the first error free of secrets.

use std::sync::Arc;

use guidepost_core::EventKind;
use guidepost_engine::MatcherConfig;
use guidepost_llm::providers::scripted::ScriptedModel;
use guidepost_llm::{LlmError, TaskKind};
use guidepost_runtime::events::{message_text, status_of};
use guidepost_runtime::{AgentRuntime, MemorySession, RuntimeConfig, RuntimeModels, Stage, TurnStatus};

use crate::support::*;

const SHOP: &str = r#"
agent: {name: Otto}
guidelines:
  - {id: refund, condition: The customer asks about refunds, action: Explain the 30-day refund policy}
  - {id: shipping, condition: The customer asks about shipping, action: Say that shipping takes 3 days}
"#;

/// A key the provider's 401 body echoes; it must appear nowhere.
const PLANTED: &str = "sk-proj-PLANTEDkey0123456789abcdefXYZ";

fn unauthorized() -> LlmError {
    LlmError::Http {
        status: 401,
        body: format!("{{\"error\": \"Incorrect API key provided: {PLANTED}\", \"header\": \"Bearer {PLANTED}\"}}"),
        retry_after: None,
    }
}

fn oracle() -> Oracle {
    Arc::new(|c: &str, last: &str, _: &str| {
        let last = last.to_lowercase();
        (c.contains("refunds") && last.contains("refund")) || (c.contains("shipping") && last.contains("shipping"))
    })
}

fn reply(prompt: &str) -> String {
    let mut parts = Vec::new();
    if prompt.contains("30-day refund policy") {
        parts.push("You can return items within 30 days.");
    }
    if prompt.contains("shipping takes 3 days") {
        parts.push("Shipping takes 3 days.");
    }
    if parts.is_empty() { "How can I help?".into() } else { parts.join(" ") }
}

/// One guideline per matching call, so a failure costs one guideline, not all.
fn one_per_batch(model: Arc<ScriptedModel>) -> Arc<AgentRuntime> {
    let config = RuntimeConfig {
        matcher: MatcherConfig { max_guidelines_per_batch: 1, ..MatcherConfig::default() },
        ..RuntimeConfig::default()
    };
    Arc::new(AgentRuntime::new(
        Arc::new(inline(SHOP)),
        RuntimeModels::single(model, None),
        Arc::new(Default::default()),
        config,
    ))
}

fn everything_said(session: &MemorySession, outcome: &guidepost_runtime::TurnOutcome) -> String {
    let events: Vec<String> = session.events().iter().map(|e| e.data.to_string()).collect();
    format!("{}\n{}\n{:?}", events.join("\n"), serde_json::to_string(&outcome.trace).unwrap(), outcome.trace.error)
}

#[tokio::test]
async fn every_matching_call_failing_fails_the_turn_with_no_reply() {
    let model = ScriptedModel::new().when_task(TaskKind::Matching).fail(unauthorized());
    let model = Arc::new(with_reply(model, reply));
    let rt = runtime(inline(SHOP), model.clone(), Default::default());
    let session = MemorySession::new();
    let outcome =
        turn(&rt, &session, &Default::default(), "What is your refund policy and how long is shipping?").await;
    assert_eq!(outcome.status, TurnStatus::Failed);
    assert!(outcome.messages.is_empty(), "no reply without its guidelines: {:?}", outcome.messages);
    assert_eq!(model.calls(&TaskKind::Generation), 0, "nothing was composed");
    let error = outcome.trace.error.clone().unwrap_or_default();
    assert!(error.contains("every model call of this matching pass failed"), "{error}");
    let events = session.events();
    assert!(events.iter().all(|e| message_text(e).is_none() || e.source == guidepost_core::EventSource::Customer));
    assert!(events.iter().any(|e| status_of(e).is_some_and(|(s, _)| s == "error")), "an error status event");
    let said = everything_said(&session, &outcome);
    assert!(!said.contains("PLANTEDkey"), "the key leaked: {said}");
}

#[tokio::test]
async fn a_lost_matching_call_sends_the_reply_marked_degraded() {
    let model = ScriptedModel::new()
        .when_task(TaskKind::Matching)
        .and(|r| prompt(r).contains("asks about shipping"))
        .fail(unauthorized());
    let model = Arc::new(with_reply(with_matching(model, oracle()), reply));
    let rt = one_per_batch(model);
    let session = MemorySession::new();
    let outcome =
        turn(&rt, &session, &Default::default(), "What is your refund policy and how long is shipping?").await;
    assert_eq!(outcome.status, TurnStatus::Degraded);
    assert!(outcome.status.replied());
    assert_eq!(outcome.messages, ["You can return items within 30 days."], "shipping was lost, refund was not");
    assert_eq!(outcome.trace.degraded.len(), 1, "{:?}", outcome.trace.degraded);
    let lost = &outcome.trace.degraded[0];
    assert_eq!((lost.stage, lost.iteration, lost.failed, lost.attempted), (Stage::Matching, 1, 1, 2));
    assert!(lost.error.contains("401"), "{}", lost.error);
    assert_eq!(outcome.state.applied_guideline_ids, ["refund"], "the state carries over");

    let events = session.events();
    let message = events
        .iter()
        .find(|e| {
            e.kind == EventKind::Message
                && message_text(e).is_some()
                && e.source != guidepost_core::EventSource::Customer
        })
        .unwrap();
    assert_eq!(message.data["degraded"][0]["stage"], "matching");
    let ready = events.iter().rev().find(|e| status_of(e).is_some_and(|(s, _)| s == "ready")).unwrap();
    assert_eq!(ready.data["data"]["degraded"][0]["failed"], 1, "{}", ready.data);
    let said = everything_said(&session, &outcome);
    assert!(!said.contains("PLANTEDkey"), "the key leaked: {said}");
}

#[tokio::test]
async fn a_normal_turn_is_not_marked_degraded() {
    let model = Arc::new(with_reply(with_matching(ScriptedModel::new(), oracle()), reply));
    let rt = one_per_batch(model);
    let session = MemorySession::new();
    let outcome = turn(&rt, &session, &Default::default(), "How long is shipping?").await;
    assert_eq!(outcome.status, TurnStatus::Completed);
    assert!(outcome.trace.degraded.is_empty());
    let json = serde_json::to_value(&outcome.trace).unwrap();
    assert!(json.get("degraded").is_none(), "absent when nothing was lost");
    assert!(
        session.events().iter().all(|e| e.data.get("degraded").is_none() && e.data["data"].get("degraded").is_none())
    );
}

const WEATHER: &str = r#"
agent: {name: Sky}
guidelines:
  - id: weather
    condition: The customer asks about the weather
    action: Look up the weather for their city and tell them
    tools: [get_weather]
tools:
  - name: get_weather
    description: Current weather for a city
    parameters:
      city: {type: string, description: The city name, display_name: city}
    fixture:
      cases:
        - {args: {city: Paris}, result: {temperature: 12}}
"#;

#[tokio::test]
async fn a_failed_tool_inference_sends_the_reply_marked_degraded() {
    let definition = inline(WEATHER);
    let model = ScriptedModel::new().when_task(TaskKind::ToolInference).fail(unauthorized());
    let weather: Oracle = Arc::new(|c: &str, last: &str, _: &str| c.contains("weather") && last.contains("weather"));
    let model = Arc::new(with_reply(with_matching(model, weather), |_| "I cannot check the weather right now.".into()));
    let registry = fixtures(&definition);
    let rt = runtime(definition, model, registry);
    let session = MemorySession::new();
    let outcome = turn(&rt, &session, &Default::default(), "What's the weather in Paris?").await;
    assert_eq!(outcome.status, TurnStatus::Degraded);
    assert_eq!(outcome.messages.len(), 1);
    let lost = &outcome.trace.degraded[0];
    assert_eq!((lost.stage, lost.failed, lost.attempted), (Stage::ToolInference, 1, 1));
    assert!(outcome.trace.iterations[0].tool_calls.is_empty(), "the tool did not run");
    let said = everything_said(&session, &outcome);
    assert!(!said.contains("PLANTEDkey"), "the key leaked: {said}");
}
