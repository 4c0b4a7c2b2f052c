//! Every prompt the runtime writes, as rendered in a real turn, so a change to a prompt
//! shows up in review as a diff.

use std::sync::Arc;

use guidepost_llm::TaskKind;
use guidepost_llm::providers::scripted::ScriptedModel;
use guidepost_runtime::MemorySession;
use serde_json::json;

use crate::support::*;

const AGENT: &str = r#"
agent:
  name: Otto
  description: A concise assistant for an online store.
  composition_mode: canned_fluid
  preamble: {enabled: true, examples: [On it!, Let me look.]}
guidelines:
  - {id: order, condition: The customer asks about an order, action: Look up the order and report its status, tools: [order_status]}
  - {id: refunds, condition: The customer asks about refunds, action: Explain the 30-day refund policy, criticality: high}
tools:
  - name: order_status
    description: Status of an order
    parameters:
      order_number: {type: string, description: The order number, source: customer}
      priority: {type: string, enum: [normal, express], default: normal}
    fixture: {cases: [{args: {order_number: "48213"}, result: {status: shipped}}]}
canned_responses:
  - {id: thanks, template: "Thanks for your patience!"}
glossary:
  - {name: express, description: Next-day delivery}
"#;

fn oracle() -> Oracle {
    Arc::new(|c: &str, last: &str, _: &str| {
        (c.contains("order") && last.contains("order")) || (c.contains("refunds") && last.contains("refund"))
    })
}

/// Otto's model up to the reply: the order lookup and a preamble.
fn lookup_and_preamble() -> ScriptedModel {
    ScriptedModel::new()
        .when_task(TaskKind::ToolInference)
        .reply_json(json!({"tools": [{"tool": "order_status", "rationale": "asked", "decision": "needs_to_run", "calls": [{"arguments": {"order_number": "48213", "priority": null}}]}]}))
        .when_task(TaskKind::Generation)
        .and(|r| prompt(r).contains("very short acknowledgement"))
        .reply_text("On it!")
}

#[tokio::test]
async fn rendered_prompts() {
    let model = lookup_and_preamble();
    let model = Arc::new(with_reply(with_matching(model, oracle()), |_| "Your order 48213 has shipped.".into()));
    let definition = inline(AGENT);
    let rt = runtime(definition.clone(), model.clone(), fixtures(&definition));
    let outcome =
        turn(&rt, &MemorySession::new(), &Default::default(), "Where is my order 48213? And what about refunds?").await;
    assert_eq!(outcome.messages, ["Your order 48213 has shipped."]);
    let tool = model.requests_for(&TaskKind::ToolInference);
    insta::assert_snapshot!("tool_calls", prompt(&tool[0]));
    let generation = model.requests_for(&TaskKind::Generation);
    let preamble = generation.iter().find(|r| prompt(r).contains("very short acknowledgement")).unwrap();
    insta::assert_snapshot!("preamble", prompt(preamble));
    let compose = generation.iter().find(|r| prompt(r).contains("## Instructions")).unwrap();
    insta::assert_snapshot!("compose_canned_fluid", turns(compose));
}

#[tokio::test]
async fn rendered_strict_selection_prompt() {
    let yaml = AGENT.replace("composition_mode: canned_fluid", "composition_mode: canned_strict");
    let model = lookup_and_preamble()
        .when_task(TaskKind::Generation)
        .reply_json(json!({"template_id": "thanks", "fit": "high"}));
    let model = Arc::new(with_matching(model, oracle()));
    let definition = inline(&yaml);
    let rt = runtime(definition.clone(), model.clone(), fixtures(&definition));
    let outcome = turn(&rt, &MemorySession::new(), &Default::default(), "Where is my order 48213?").await;
    assert_eq!(outcome.messages, ["Thanks for your patience!"]);
    let selection =
        model.requests_for(&TaskKind::Generation).into_iter().find(|r| prompt(r).contains("Approved replies")).unwrap();
    insta::assert_snapshot!("select_template", prompt(&selection));
}

/// A long conversation reaches composition and tool inference as its latest turns and a note
/// standing for the rest (what was done, what the tools found), so the prompts stop growing.
#[tokio::test]
async fn long_conversations_reach_the_prompts_bounded() {
    let model = lookup_and_preamble()
        // Every turn asks again, so the order guideline applies again and its tool runs again.
        .when_task(TaskKind::Matching)
        .and(|r| prompt(r).contains("## Guidelines already followed ("))
        .reply_with(|r| {
            let checks: Vec<serde_json::Value> = items(&prompt(r), "## Guidelines already followed (")
                .into_iter()
                .map(|(id, _)| json!({"id": id, "rationale": "asked again", "condition_holds_again": true, "customer_completed": false, "should_apply": true}))
                .collect();
            Ok(json!({"checks": checks}))
        });
    let model = Arc::new(with_reply(with_matching(model, oracle()), |_| "Your order 48213 has shipped.".into()));
    let definition = inline(AGENT);
    let config = guidepost_runtime::RuntimeConfig { history_turns: Some(3), ..Default::default() };
    let rt = guidepost_runtime::AgentRuntime::new(
        Arc::new(definition.clone()),
        guidepost_runtime::RuntimeModels::single(model.clone(), None),
        Arc::new(fixtures(&definition)),
        config,
    );
    let session = MemorySession::new();
    let mut state = guidepost_core::AgentState::default();
    let mut compose_sizes = Vec::new();
    for i in 1..=16 {
        let outcome = turn(&rt, &session, &state, &format!("Where is my order 48213? (message {i})")).await;
        assert_eq!(outcome.messages, ["Your order 48213 has shipped."], "turn {i}");
        state = outcome.state;
        let generation = model.requests_for(&TaskKind::Generation);
        let compose = generation.iter().rev().find(|r| prompt(r).contains("## Instructions")).unwrap();
        compose_sizes.push(prompt(compose).len());
        if i <= 3 {
            assert!(!prompt(compose).contains("not shown"), "turn {i}: nothing is hidden yet");
        }
    }
    let generation = model.requests_for(&TaskKind::Generation);
    let compose = prompt(generation.iter().rev().find(|r| prompt(r).contains("## Instructions")).unwrap());
    assert!(compose.contains("(message 14)") && compose.contains("(message 16)"), "{compose}");
    assert!(!compose.contains("(message 13)") && !compose.contains("(message 1)"), "{compose}");
    assert!(compose.contains("earlier messages of this conversation are not shown"), "{compose}");
    assert!(compose.contains("Done in them: Look up the order and report its status"), "{compose}");
    assert!(compose.contains(r#"Earlier tool results: fixtures:order_status({"order_number":"48213""#), "{compose}");
    assert_eq!(compose.matches("fixtures:order_status(").count(), 1, "the same lookup is said once: {compose}");
    let tools = model.requests_for(&TaskKind::ToolInference);
    let inference = prompt(tools.last().unwrap());
    assert!(inference.contains("not shown") && !inference.contains("(message 13)"), "{inference}");
    let (at_4, at_16) = (compose_sizes[3], compose_sizes[15]);
    assert!(at_16 as f64 <= at_4 as f64 * 1.5, "compose prompt grew from {at_4} to {at_16} characters");
}

const WAITING: &str = r#"
agent: { name: Otto }
journeys:
  - id: weather
    title: Weather
    conditions: [The customer asks about the weather]
    start: fetch
    states:
      - { id: fetch, tool: get_weather, next: end }
tools:
  - name: get_weather
    description: Weather of a city
    parameters:
      city: {type: string, description: The city, source: customer}
    fixture: {cases: [{args: {city: Paris}, result: {sky: clear}}]}
"#;

/// A journey resting at a tool step whose tool made no call this turn (a detail is missing):
/// the reply is told it has no result from it, so it cannot make one up.
#[tokio::test]
async fn a_reply_is_told_which_lookups_did_not_run() {
    let model = ScriptedModel::new().when_task(TaskKind::ToolInference).reply_with(|r| {
        let city = if prompt(r).contains("Paris") { json!("Paris") } else { json!(null) };
        Ok(json!({"tools": [{"tool": "get_weather", "rationale": "weather asked", "decision": "needs_to_run", "calls": [{"arguments": {"city": city}}]}]}))
    });
    let oracle: Oracle = Arc::new(|c: &str, last: &str, _: &str| c.contains("weather") && last.contains("weather"));
    let model = Arc::new(with_reply(with_matching(model, oracle), |_| "Which city?".into()));
    let definition = inline(WAITING);
    let rt = runtime(definition.clone(), model.clone(), fixtures(&definition));
    let reply_prompt = |model: &ScriptedModel| {
        let replies = model.requests_for(&TaskKind::Generation);
        prompt(replies.last().expect("a reply was composed"))
    };

    turn(&rt, &MemorySession::new(), &Default::default(), "What's the weather like?").await;
    let text = reply_prompt(&model);
    assert!(text.contains("## Not looked up this turn"), "{text}");
    assert!(text.contains("- get_weather (Weather of a city)"), "{text}");

    turn(&rt, &MemorySession::new(), &Default::default(), "What's the weather in Paris?").await;
    let text = reply_prompt(&model);
    assert!(!text.contains("Not looked up"), "the lookup ran: {text}");
    assert!(text.contains("clear"), "its result is shown instead: {text}");
}

const TWO_FLOWS_ONE_QUESTION: &str = r#"
agent: { name: Otto }
journeys:
  - id: track
    title: Track a parcel
    conditions: [The customer asks about an order]
    start: ask
    states:
      - { id: ask, chat: Ask the customer for their order number, next: end }
  - id: label
    title: Return label
    conditions: [The customer wants a return label for an order]
    start: ask
    states:
      - { id: ask, chat: Ask the customer for their order number, next: end }
"#;

/// Two flows at steps that say the same give the reply one instruction naming both.
#[tokio::test]
async fn flows_at_the_same_step_give_one_instruction() {
    let oracle: Oracle = Arc::new(|c: &str, last: &str, _: &str| c.contains("order") && last.contains("order"));
    let model =
        Arc::new(with_reply(with_matching(ScriptedModel::new(), oracle), |_| "What is your order number?".into()));
    let definition = inline(TWO_FLOWS_ONE_QUESTION);
    let rt = runtime(definition.clone(), model.clone(), fixtures(&definition));
    let outcome =
        turn(&rt, &MemorySession::new(), &Default::default(), "I want a return label for my order, and where is it?")
            .await;
    assert_eq!(outcome.messages, ["What is your order number?"]);
    let replies = model.requests_for(&TaskKind::Generation);
    let text = prompt(replies.last().expect("a reply was composed"));
    let instructions = &text[text.find("## Instructions").expect("instructions")..];
    let instructions = &instructions[..instructions.find("\n\n").unwrap_or(instructions.len())];
    assert_eq!(
        instructions,
        "## Instructions\n1. When the flows \"Return label\" and \"Track a parcel\" are at this step: Ask the customer for their order number",
        "{text}"
    );
}
