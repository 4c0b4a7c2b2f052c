//! Snapshots of every prompt template rendered for a fixed context, so a prompt change
//! shows up in review as a diff.

use std::sync::Arc;

use guidepost_core::{EventSource, JourneyPath, ToolId};
use guidepost_engine::batches::{disambiguation, journey_selection, local_items, render_checks, render_direct, single};
use guidepost_engine::context::events::message;
use guidepost_engine::prompt::{ConversationView, RenderedPrompt};
use guidepost_engine::{Category, CompiledAgent, MatchingContext, StagedToolResult};
use serde_json::json;

use crate::support::*;

const AGENT: &str = r#"
agent:
  name: Otto
  description: A friendly customer service agent for an online store.
guidelines:
  - id: refund
    condition: The customer asks about refunds
    action: Explain the 30-day refund policy
  - id: order_number
    condition: The customer wants to return an item
    action: Ask for their order number
  - id: competitor
    condition: The customer mentions a competitor
  - id: tone
    condition: Any time
    action: Keep it short
    criticality: low
  - id: upgrade
    condition: The customer wants to upgrade something
    disambiguates: [plan, shipping]
  - id: plan
    condition: The customer wants a better subscription plan
    action: Explain the plan tiers
  - id: shipping
    condition: The customer wants faster shipping
    action: Offer express shipping
journeys:
  - id: order_status
    title: Order Status
    description: Helps the customer check the status of an order.
    conditions: [The customer wants to check the status of an order]
    start: ask
    states:
      - id: ask
        chat: Ask the customer for their order number
        next:
          - to: lookup
            when: The customer provided the order number
      - id: lookup
        tool: check_order_status
        next: report
      - id: report
        chat: Tell the customer the result of the lookup
        next: end
tools:
  - name: check_order_status
    description: Look up the status of an order
    parameters:
      order_number: { type: string }
"#;

fn fixture() -> (Arc<CompiledAgent>, ConversationView) {
    let agent = Arc::new(CompiledAgent::new(Arc::new(inline(AGENT))));
    let mut events = Vec::new();
    let texts = [
        "Hi, I bought shoes at another store and here.",
        "Hello! How can I help?",
        "I want to check my order.",
        "Sure, what is your order number?",
        "It's 48213. Also, can I upgrade?",
    ];
    for (i, t) in texts.iter().enumerate() {
        let source = if i % 2 == 0 { EventSource::Customer } else { EventSource::AiAgent };
        events.push(message(source, i as u64, t));
    }
    let mut ctx = MatchingContext::new(events, Default::default());
    ctx.customer_name = Some("Dana".into());
    ctx.variables.insert("plan".into(), json!("premium"));
    ctx.history_summary = Some("The customer greeted the agent and mentioned shopping elsewhere.".into());
    ctx.staged_tool_results = vec![StagedToolResult {
        tool: ToolId::new("fixtures", "check_order_status"),
        arguments: json!({"order_number": "48213"}),
        result: json!({"status": "shipped"}),
    }];
    let conversation = ConversationView::build(&agent.definition, &ctx, 3);
    (agent, conversation)
}

fn show(prompt: &RenderedPrompt) -> String {
    format!("{}\n\n===== per-turn part =====\n\n{}", prompt.system, prompt.user)
}

fn check_prompt(category: Category, ids: &[&str]) -> String {
    let (agent, conversation) = fixture();
    let items: Vec<_> = ids.iter().map(|id| agent.guideline(id).unwrap()).collect();
    let (prompt, _) = render_checks(category, &items, &conversation);
    show(&prompt.unwrap())
}

#[test]
fn condition_prompt() {
    // an observation and two guidelines not applied before share one batch; it lists
    // conditions alone
    insta::assert_snapshot!(check_prompt(Category::Actionable, &["competitor", "refund", "order_number"]));
}

#[test]
fn previously_applied_prompt() {
    // one plain and one customer-dependent item: both categories share the batch kind
    insta::assert_snapshot!(check_prompt(Category::PreviouslyApplied, &["refund", "order_number"]));
}

#[test]
fn low_criticality_prompt() {
    insta::assert_snapshot!(check_prompt(Category::LowCriticality, &["tone"]));
}

fn direct_prompt(category: Category, ids: &[&str]) -> String {
    let (agent, conversation) = fixture();
    let items: Vec<_> = ids.iter().map(|id| agent.guideline(id).unwrap()).collect();
    let (prompt, schema, _) = render_direct(category, &items, &conversation);
    format!(
        "{}\n\n===== answer schema =====\n\n{}",
        show(&prompt.unwrap()),
        serde_json::to_string_pretty(&schema).unwrap()
    )
}

#[test]
fn direct_checks_prompt() {
    insta::assert_snapshot!(direct_prompt(Category::Actionable, &["refund", "competitor", "tone"]));
}

#[test]
fn direct_reapply_prompt() {
    // the customer-dependent item is flagged; the rule for it is in the fixed part
    insta::assert_snapshot!(direct_prompt(Category::PreviouslyApplied, &["refund", "order_number"]));
}

#[test]
fn single_check_prompt() {
    let (agent, conversation) = fixture();
    let (items, _) = local_items(&[agent.guideline("refund").unwrap()]);
    let prompt = single::render_single(&items[0], &conversation, single::Asked::Now).unwrap();
    insta::assert_snapshot!(format!("{}\n\n===== answer schema =====\n\n{}", show(&prompt), single::answer_schema()));
}

#[test]
fn single_check_prompt_in_chinese_about_the_latest_message() {
    // A statement in Chinese is asked under Chinese instructions; a guideline followed
    // before is asked about the latest message alone.
    let (agent, conversation) = fixture();
    let (mut items, _) = local_items(&[agent.guideline("refund").unwrap()]);
    items[0].condition = "顾客想要退款".into();
    let prompt = single::render_single(&items[0], &conversation, single::Asked::Anew).unwrap();
    assert!(prompt.user.contains("在顾客最新的消息里（不只是之前）：顾客想要退款"), "{}", prompt.user);
    insta::assert_snapshot!(show(&prompt));
}

#[test]
fn chinese_is_told_apart_from_japanese_and_korean() {
    assert!(single::writes_chinese("用户想知道天气"));
    assert!(!single::writes_chinese("お客様は天気を知りたい"), "kana: Japanese");
    assert!(!single::writes_chinese("고객이 날씨를 묻는다"));
    assert!(!single::writes_chinese("The customer asks about 北京"), "a Chinese name in an English statement");
    assert!(single::writes_chinese("用户问了 Beijing 的天气"), "an English name in a Chinese statement");
}

#[test]
fn disambiguation_prompt() {
    let (agent, conversation) = fixture();
    let head = agent.guideline("upgrade").unwrap();
    let targets = disambiguation::targets_of(&agent, "upgrade");
    insta::assert_snapshot!(show(&disambiguation::render_prompt(head, &targets, &conversation).unwrap()));
}

#[test]
fn journey_selection_prompt() {
    let (agent, conversation) = fixture();
    let graph = agent.journey("order_status").unwrap();
    let path = JourneyPath::from_states(states(&["initial", "ask"])).unwrap();
    insta::assert_snapshot!(show(&journey_selection::render_prompt(graph, &path, &conversation).unwrap()));
}

#[test]
fn static_part_comes_first_and_is_identical_across_turns() {
    let (agent, conversation) = fixture();
    let refund = agent.guideline("refund").unwrap();
    let (a, _) = render_checks(Category::Actionable, &[refund], &conversation);
    let ctx = MatchingContext::new(vec![message(EventSource::Customer, 0, "other text")], Default::default());
    let other = ConversationView::build(&agent.definition, &ctx, 12);
    let (b, _) = render_checks(Category::Actionable, &[refund], &other);
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(a.system, b.system);
    assert_ne!(a.user, b.user);
    assert!(!a.system.contains("Otto"), "nothing per-agent in the static part");
}

#[test]
fn a_check_asked_both_ways_differs_only_in_its_statement() {
    let (agent, conversation) = fixture();
    let (items, _) = local_items(&[agent.guideline("refund").unwrap()]);
    let plain = single::render_single(&items[0], &conversation, single::Asked::Now).unwrap();
    let mut negated = items[0].clone();
    negated.condition = single::negated(&items[0].condition);
    let other = single::render_single(&negated, &conversation, single::Asked::Now).unwrap();
    assert_eq!(plain.system, other.system, "the instructions are shared (the model keeps the prefix)");
    let differing: Vec<(&str, &str)> = plain.user.lines().zip(other.user.lines()).filter(|(a, b)| a != b).collect();
    assert_eq!(differing.len(), 1, "{differing:?}");
    insta::assert_snapshot!(differing[0].1);
    assert_eq!(single::negated("用户想知道天气"), "并非用户想知道天气");
    assert_eq!(single::negated("API access was granted"), "It is not true that API access was granted");
    assert_eq!(single::negated("I am done"), "It is not true that I am done");
}

#[test]
fn a_check_shows_the_examples_the_author_labelled() {
    let (agent, conversation) = fixture();
    let (mut items, _) = local_items(&[agent.guideline("refund").unwrap()]);
    items[0].examples = vec![
        guidepost_core::GuidelineExample { message: "Can I get my money back?".into(), applies: true },
        guidepost_core::GuidelineExample { message: "Where is my parcel?".into(), applies: false },
    ];
    let prompt = single::render_single(&items[0], &conversation, single::Asked::Now).unwrap();
    let examples =
        prompt.user.split("Examples of this statement").nth(1).unwrap().split("The customer's latest").next().unwrap();
    insta::assert_snapshot!(examples);
    // Without examples, the prompt is as before.
    items[0].examples.clear();
    let plain = single::render_single(&items[0], &conversation, single::Asked::Now).unwrap();
    assert!(!plain.user.contains("Examples of this statement"));
    let (checks, _) = render_checks(Category::Actionable, &[agent.guideline("refund").unwrap()], &conversation);
    assert!(!checks.unwrap().user.contains("e.g."));
}
