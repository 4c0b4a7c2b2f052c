//! Context for the reply: context variables (a tool-backed one refreshed only when stale,
//! judged by the turn's clock), capabilities and glossary retrieval.

use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Duration, Utc};
use guidepost_llm::providers::hashing::HashingEmbedder;
use guidepost_llm::providers::scripted::ScriptedModel;
use guidepost_runtime::MemorySession;
use guidepost_runtime::clock::Clock;
use guidepost_testkit::embedders::InFlightEmbedder;
use guidepost_tools::native::NativeTool;
use serde_json::json;

use crate::support::*;

struct TestClock(AtomicI64);

impl Clock for TestClock {
    fn now(&self) -> DateTime<Utc> {
        DateTime::from_timestamp(self.0.load(Ordering::SeqCst), 0).unwrap_or_default()
    }
}

const AGENT: &str = r#"
agent: {name: Otto}
guidelines:
  - {id: plan, condition: The customer asks about their plan, action: Tell them their plan}
tools:
  - {name: get_plan, service: native}
variables:
  - {name: plan, description: The customer's subscription plan, tool: get_plan, freshness: 1h}
  - {name: store_hours, value: "9:00-18:00"}
capabilities:
  - {title: Gift wrapping, description: Wrap any order as a gift for 3 euros}
"#;

#[tokio::test]
async fn tool_backed_variables_refresh_only_when_stale() {
    let definition = inline(AGENT);
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    let mut registry = fixtures(&definition);
    registry.register_native(NativeTool::new("get_plan", move |_, _| {
        let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
        async move { Ok::<_, String>(json!({"tier": "gold", "lookup": n})) }
    }));
    let prompts = Arc::new(Mutex::new(Vec::new()));
    let seen = prompts.clone();
    let model = Arc::new(with_reply(
        with_matching(ScriptedModel::new(), Arc::new(|_: &str, _: &str, _: &str| true)),
        move |p| {
            let mut seen = seen.lock().unwrap();
            seen.push(p.to_string());
            // Each turn's reply differs (a repeated reply would be asked for again).
            format!("You are on the gold plan (answer {}).", seen.len())
        },
    ));
    let clock = Arc::new(TestClock(AtomicI64::new(1_700_000_000)));
    let rt = Arc::into_inner(runtime(definition, model, registry)).unwrap().with_clock(clock.clone());
    let session = MemorySession::new();
    let mut state = Default::default();
    for (advance, expected_calls) in
        [(0, 1), (Duration::minutes(30).num_seconds(), 1), (Duration::hours(2).num_seconds(), 2)]
    {
        clock.0.fetch_add(advance, Ordering::SeqCst);
        let outcome = turn(&rt, &session, &state, "What plan am I on?").await;
        state = outcome.state;
        assert_eq!(calls.load(Ordering::SeqCst), expected_calls, "after {advance} s");
    }
    let prompts = prompts.lock().unwrap();
    assert!(
        prompts[0].contains("## Context") && prompts[0].contains("- plan: {\"tier\":\"gold\",\"lookup\":1}"),
        "{}",
        prompts[0]
    );
    assert!(prompts[1].contains("\"lookup\":1"), "the fresh value is reused");
    assert!(prompts[2].contains("\"lookup\":2"), "the stale value was refreshed");
    assert!(prompts[0].contains("- store_hours: 9:00-18:00"));
    assert!(prompts[0].contains("- Gift wrapping: Wrap any order as a gift for 3 euros"));
}

/// Glossary terms and capabilities are retrieved side by side: with more of each than a
/// prompt takes, their embedding calls overlap instead of adding a wave each.
#[tokio::test]
async fn terms_and_capabilities_are_retrieved_in_one_wave() {
    let terms: String = (0..21).map(|i| format!("  - {{name: term{i}, description: Term number {i}}}\n")).collect();
    let capabilities: String =
        (0..4).map(|i| format!("  - {{title: Service {i}, description: What service {i} does}}\n")).collect();
    let definition = inline(&format!(
        "agent: {{name: Otto}}\nguidelines:\n  - {{id: hi, condition: The customer greets, action: Greet back}}\nglossary:\n{terms}capabilities:\n{capabilities}"
    ));
    let model =
        Arc::new(with_reply(with_matching(ScriptedModel::new(), Arc::new(|_: &str, _: &str, _: &str| false)), |_| {
            "Hello!".into()
        }));
    let embedder = Arc::new(InFlightEmbedder::new(HashingEmbedder::new(2), std::time::Duration::from_millis(50)));
    let rt = guidepost_runtime::AgentRuntime::new(
        Arc::new(definition.clone()),
        guidepost_runtime::RuntimeModels::single(model, Some(embedder.clone())),
        Arc::new(fixtures(&definition)),
        guidepost_runtime::RuntimeConfig::default(),
    );
    let outcome = turn(&rt, &MemorySession::new(), &Default::default(), "Hello there").await;
    assert_eq!(outcome.messages, ["Hello!"]);
    assert!(embedder.calls() >= 4, "entries and query, for terms and for capabilities");
    assert_eq!(embedder.most_in_flight(), 2, "the two retrievals overlap");
}
