//! Reply checks: a reply in the customer's voice, with a figure from nowhere, denying a
//! lookup that succeeded, or in the wrong language is asked for again, and replaced by the
//! fallback when it fails twice; the trace and the message event say so.

use std::sync::{Arc, Mutex};

use guidepost_core::EventKind;
use guidepost_core::reply_check::ReplyCheck;
use guidepost_llm::TaskKind;
use guidepost_llm::providers::scripted::ScriptedModel;
use guidepost_runtime::MemorySession;
use serde_json::json;

use crate::support::*;

const WEATHER: &str = r#"
agent: {name: Tian, language: zh, description: 天气助手}
guidelines:
  - {id: weather, condition: The customer asks about the weather, action: 告诉用户天气, tools: [get_weather]}
tools:
  - name: get_weather
    parameters: {city: {type: string, source: customer}}
    fixture:
      cases: [{args: {city: 上海}, result: {city: 上海, temperature: 20, condition: 多云}}]
      otherwise: {error: 暂不支持该城市}
"#;

/// A model whose replies are taken in order from `replies` (the last one repeats), and that
/// records the compose prompts it was given.
fn replying(replies: &[&str], prompts: Arc<Mutex<Vec<String>>>) -> Arc<ScriptedModel> {
    let replies: Vec<String> = replies.iter().map(|r| r.to_string()).collect();
    let tools = ScriptedModel::new().when_task(TaskKind::ToolInference).reply_with(|r| {
        let last = last_customer(&prompt(r));
        let city = if last.contains("上海") || last.contains("Shanghai") { "上海" } else { "Paris" };
        Ok(json!({"tools": [{"tool": "get_weather", "rationale": "asked", "decision": "needs_to_run", "calls": [{"arguments": {"city": city}}]}]}))
    });
    let model = with_reply(tools, move |p| {
        let mut seen = prompts.lock().unwrap();
        seen.push(p.to_string());
        replies[(seen.len() - 1).min(replies.len() - 1)].clone()
    });
    Arc::new(with_matching(model, Arc::new(|c: &str, _: &str, _: &str| c.contains("weather"))))
}

async fn one_turn(replies: &[&str], text: &str) -> (guidepost_runtime::TurnOutcome, Vec<String>, MemorySession) {
    let prompts = Arc::new(Mutex::new(Vec::new()));
    let definition = inline(WEATHER);
    let rt = runtime(definition.clone(), replying(replies, prompts.clone()), fixtures(&definition));
    let session = MemorySession::new();
    let outcome = turn(&rt, &session, &Default::default(), text).await;
    let prompts = prompts.lock().unwrap().clone();
    (outcome, prompts, session)
}

#[tokio::test]
async fn a_reply_in_the_customers_voice_is_asked_for_again() {
    let (outcome, prompts, _) = one_turn(
        &["你好，我想查询巴黎明天的天气。", "抱歉，暂不支持巴黎。"],
        "Hi, what is the weather in Paris tomorrow?",
    )
    .await;
    assert_eq!(outcome.messages, ["抱歉，暂不支持巴黎。"]);
    assert_eq!(prompts.len(), 2);
    assert!(prompts[1].contains("speaks as the customer"), "the second call says why: {}", prompts[1]);
    let checks = &outcome.trace.composition.reply_checks;
    assert_eq!(checks.len(), 2, "{checks:?}");
    assert_eq!(checks[0][0].check, ReplyCheck::CustomerVoice);
    assert!(checks[1].is_empty());
    assert!(!outcome.trace.composition.fallback);
}

#[tokio::test]
async fn a_figure_from_nowhere_twice_gives_the_fallback_marked_as_such() {
    let (outcome, _, session) =
        one_turn(&["巴黎明天晴，气温18度。", "巴黎明天多云，气温21度。"], "Hi, what is the weather in Paris tomorrow?")
            .await;
    assert!(outcome.trace.composition.fallback);
    assert_eq!(outcome.trace.composition.reply_checks[0][0].check, ReplyCheck::InventedFact);
    assert_eq!(outcome.trace.composition.reply_checks[0][0].evidence, "18");
    // The agent speaks Chinese: so does its fallback.
    assert!(outcome.messages[0].starts_with("抱歉"), "{:?}", outcome.messages);
    let message = session.events().into_iter().rev().find(|e| e.kind == EventKind::Message).unwrap();
    assert_eq!(message.data["reply_checks"]["fallback"], true);
    assert_eq!(message.data["reply_checks"]["problems"][1][0]["check"], "invented_fact");
}

#[tokio::test]
async fn figures_the_tool_returned_pass() {
    let (outcome, prompts, _) = one_turn(&["上海今天多云，气温20度。"], "上海天气怎么样？").await;
    assert_eq!(outcome.messages, ["上海今天多云，气温20度。"]);
    assert_eq!(prompts.len(), 1);
    assert!(outcome.trace.composition.reply_checks.is_empty());
}

#[tokio::test]
async fn the_agents_language_is_required_and_stated_in_the_prompt() {
    let (outcome, prompts, _) = one_turn(
        &["Shanghai is cloudy today, 20 degrees.", "上海今天多云，20度。"],
        "What's the weather in 上海 today?",
    )
    .await;
    assert!(prompts[0].contains("Reply in Chinese"), "{}", prompts[0]);
    assert_eq!(
        outcome.trace.composition.reply_checks[0][0].check,
        ReplyCheck::WrongLanguage,
        "{:?} {:?}",
        outcome.trace.composition.reply_checks,
        outcome.trace.iterations
    );
    assert_eq!(outcome.messages, ["上海今天多云，20度。"]);
}

#[tokio::test]
async fn an_echo_is_asked_for_again() {
    let (outcome, prompts, _) = one_turn(&["上海天气怎么样？", "上海今天多云。"], "上海天气怎么样？").await;
    assert_eq!(outcome.trace.composition.reply_checks[0][0].check, ReplyCheck::Echo);
    assert!(prompts[1].contains("only repeats the customer's words"));
    assert_eq!(outcome.messages, ["上海今天多云。"]);
}

#[tokio::test]
async fn a_reply_denying_a_lookup_that_succeeded_is_asked_for_again() {
    let (outcome, prompts, _) =
        one_turn(&["对不起，我无法提供上海的天气信息。", "上海今天多云，气温20度。"], "上海呢？").await;
    assert_eq!(outcome.trace.composition.reply_checks[0][0].check, ReplyCheck::DeniesToolResult);
    assert_eq!(outcome.trace.composition.reply_checks[0][0].evidence, "无法");
    assert!(prompts[1].contains("the tool call of this turn succeeded"), "{}", prompts[1]);
    assert_eq!(outcome.messages, ["上海今天多云，气温20度。"]);
}

#[tokio::test]
async fn an_apology_after_a_failed_lookup_passes() {
    let (outcome, prompts, _) = one_turn(&["抱歉，暂时无法查询巴黎的天气。可以查询上海。"], "What about Paris?").await;
    assert_eq!(outcome.messages, ["抱歉，暂时无法查询巴黎的天气。可以查询上海。"]);
    assert_eq!(prompts.len(), 1);
}
