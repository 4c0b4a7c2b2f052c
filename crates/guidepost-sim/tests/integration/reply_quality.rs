//! Reply checks in every simulated conversation: a reply that echoes the customer, speaks in
//! their voice, states a figure from nowhere or uses the wrong language stops the run with
//! `policy-violation` naming the check; so does an engine's fallback reply.

use std::sync::Arc;

use guidepost_core::definition::{SourceFile, load_agent};
use guidepost_sim::agents::ToolCallRecord;
use guidepost_sim::observations::EngineObservations;
use guidepost_sim::{AgentTurn, Scenario, StopReason, SuiteOptions, run_suite};
use serde_json::json;

use crate::support::*;

const SCENARIO: &str = r#"
id: weather
goal: Learn the weather in Shanghai
persona: { description: A customer }
max_turns: 5
script:
  - customer: "上海天气怎么样？"
  - customer: "谢谢"
"#;

const AGENT: &str = "agent: {name: Tian, language: zh}\n";

async fn run(extra: &str, reply: impl Fn(usize) -> AgentTurn + Send + Sync + 'static) -> guidepost_sim::RunResult {
    let scenario = Scenario::parse(std::path::Path::new("weather.yaml"), &format!("{SCENARIO}{extra}")).unwrap();
    let definition = load_agent(&[SourceFile::new("tian.yaml", AGENT)]).definition.unwrap();
    let mut options = SuiteOptions::default();
    options.definitions.insert("weather".into(), Arc::new(definition));
    let model = Models::new().judge(true).build();
    let models = guidepost_sim::SimModels { customer: model.clone(), judge: model };
    let agent = ScriptedFactory::new(move |turn, _| Ok(reply(turn)));
    let mut outcome = run_suite(&[scenario], agent, &models, &options).await;
    outcome.runs.remove(0)
}

fn weather_turn(text: &str) -> AgentTurn {
    let mut turn = AgentTurn::default();
    turn.push_tool_call(ToolCallRecord::new(
        "get_weather",
        json!({"city": "上海"}),
        json!({"city": "上海", "temperature": 20, "condition": "多云"}),
    ));
    turn.push_message(text.to_string());
    turn
}

#[tokio::test]
async fn good_replies_pass() {
    let result = run("", |turn| {
        if turn == 0 { weather_turn("上海今天多云，20度。") } else { AgentTurn::text(["不客气！"]) }
    })
    .await;
    assert_eq!(result.reason, StopReason::ScriptEnded, "{}", result.summary);
}

#[tokio::test]
async fn each_bad_reply_stops_the_run_naming_its_check() {
    let cases: [(&str, &str); 4] = [
        ("上海天气怎么样？", "echo"),
        ("你好，我想查询上海的天气。", "customer_voice"),
        ("上海今天多云，25度。", "invented_fact: states 25"),
        ("Shanghai is cloudy today, 20 degrees.", "wrong_language: not in Chinese"),
    ];
    for (reply, check) in cases {
        let reply = reply.to_string();
        let result = run("", move |_| weather_turn(&reply)).await;
        assert_eq!(result.reason, StopReason::PolicyViolation, "{check}: {}", result.summary);
        assert!(result.summary.contains(check), "{check}: {}", result.summary);
        assert!(result.summary.starts_with("Turn 1:"), "{}", result.summary);
    }
}

#[tokio::test]
async fn an_engine_fallback_fails_the_run() {
    let result = run("", |_| {
        let mut turn = AgentTurn::text(["抱歉，我现在没法给您一个可靠的答复。"]);
        turn.observations = Some(EngineObservations {
            reply_fallbacks: vec!["invented_fact: states 25 from nowhere".into()],
            ..Default::default()
        });
        turn
    })
    .await;
    assert_eq!(result.reason, StopReason::PolicyViolation);
    assert!(result.summary.contains("fallback reply") && result.summary.contains("states 25"), "{}", result.summary);
}

#[tokio::test]
async fn checks_can_be_chosen_or_turned_off() {
    let english = |_| weather_turn("Shanghai is cloudy today, 20 degrees.");
    let result = run("reply_checks: false\n", english).await;
    assert_eq!(result.reason, StopReason::ScriptEnded, "{}", result.summary);
    let result = run("reply_checks: [echo, invented_fact]\n", english).await;
    assert_eq!(result.reason, StopReason::ScriptEnded, "{}", result.summary);
    let result = run("reply_checks: [wrong_language]\n", english).await;
    assert_eq!(result.reason, StopReason::PolicyViolation);
}

#[tokio::test]
async fn a_bad_reply_in_the_turn_that_reaches_the_goal_still_fails_the_run() {
    let goal = r#"step_graph:
  start: ask
  terminals: [ask]
  steps:
    - id: ask
      instruction: Ask for the weather
      satisfied_when: { engine: [{ tool_called: { tool: get_weather } }] }
"#;
    let result = run(goal, |_| {
        let mut turn = weather_turn("上海今天多云，25度。");
        turn.observations = Some(EngineObservations {
            tools_called: vec![guidepost_sim::observations::ToolCalled {
                tool: "get_weather".into(),
                arguments: json!({}),
            }],
            ..Default::default()
        });
        turn
    })
    .await;
    assert_eq!(result.reason, StopReason::PolicyViolation, "{}", result.summary);
    assert!(result.summary.contains("invented_fact"), "{}", result.summary);
}
