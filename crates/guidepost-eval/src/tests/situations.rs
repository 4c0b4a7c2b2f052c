//! Situations the format can state: tool calls of this turn, what matched before relational
//! resolution, the agent's description, several agents in one file; and runs that count
//! every request and resume where they stopped.

use std::sync::{Arc, Mutex};

use guidepost_engine::batches::single::statement_of;
use guidepost_llm::providers::scripted::{ScriptedModel, schema_is};
use guidepost_llm::{ChatRequest, ModelCapabilities, TaskKind};
use serde_json::json;

use super::{AGENT, CASES, always_yes, models};
use crate::run::Kind;
use crate::{Options, Outcome, Report};

const SHOP: &str = r#"
agent: { name: Otto, description: We sell kettles }
tags: [safety, sales]
guidelines:
  - { id: offtopic, condition: The customer asks for something the agent does not sell, action: Say what we sell }
  - { id: recall, condition: The customer mentions a recall, action: Explain the recall, tags: [safety] }
  - id: discount
    condition: The customer asks for a discount
    action: Offer 10 % off
    tags: [sales]
    priority_over: [recall]
  - { id: bundle, condition: The customer asks about bundles, action: Show the bundles, tags: [sales] }
relationships:
  - { kind: priority, source: "tag:safety", target: "tag:sales" }
journeys:
  - id: order
    title: Place an order
    conditions: [The customer wants to order a kettle]
    start: address
    states:
      - { id: address, chat: Ask for the delivery address, next: [{ to: place, when: The customer gave an address }] }
      - { id: place, tool: place_order, next: done }
      - { id: done, chat: Confirm the order is placed, next: end }
tools:
  - name: place_order
    description: Places an order
    parameters: { address: { type: string } }
"#;

/// A folder with the shop agent, the plain agent and `cases` as `cases.yaml`.
fn shop_dir(cases: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("shop.yaml"), SHOP).unwrap();
    std::fs::write(dir.path().join("agent.yaml"), AGENT).unwrap();
    std::fs::write(dir.path().join("cases.yaml"), cases).unwrap();
    dir
}

fn load(dir: &tempfile::TempDir) -> crate::Suite {
    crate::load(&[dir.path().join("cases.yaml")]).unwrap_or_else(|e| panic!("{e:?}"))
}

/// A small model answering yes-or-no questions: an address is given when the message names a
/// street; the kettle order is wanted when it says "order"; nothing else holds.
fn small_shop_model() -> Arc<ScriptedModel> {
    Arc::new(
        ScriptedModel::new()
            .with_capabilities(ModelCapabilities::small_constrained(None))
            .when(schema_is("Verdict"))
            .reply_with(|req: &ChatRequest| {
                let user = req.last_user_message();
                let latest = user.rsplit_once("The customer's latest message: \"").map_or("", |(_, m)| m);
                let holds = match statement_of(user).unwrap_or_default() {
                    "The customer gave an address" => latest.contains("Street"),
                    "The customer wants to order a kettle" => latest.contains("order"),
                    _ => false,
                };
                Ok(json!(if holds { "yes" } else { "no" }))
            }),
    )
}

#[tokio::test]
async fn tool_calls_of_this_turn_run_as_the_turn_does() {
    // The address moves the journey to the tool step; the order was placed in this turn
    // (the tool line after the message): the journey goes on past the tool step, and the tool
    // is not called again.
    let dir = shop_dir(
        r#"
agent: shop.yaml
cases:
  - id: placed-this-turn
    conversation:
      - customer: I'd like to order a kettle.
      - agent: Sure, what is the delivery address?
      - customer: 12 Main Street
      - tool: { name: place_order, arguments: { address: 12 Main Street }, result: { placed: true } }
    state: { journeys: { order: [initial, address] } }
    expect:
      journeys: { order: done }
      tools: { place_order: false }
  - id: standing-at-the-tool-step
    conversation:
      - customer: Yes, go ahead.
      - tool: { name: place_order, arguments: { address: 12 Main Street }, result: { placed: true } }
    state: { journeys: { order: [initial, address, place] } }
    expect:
      journeys: { order: done }
"#,
    );
    let suite = load(&dir);
    let model = small_shop_model();
    let outcome = crate::evaluate(&suite, &models(model.clone()), &Options::default()).await;
    assert!(outcome.errors.is_empty(), "{:?}", outcome.errors);
    for d in &outcome.decisions {
        assert!(d.correct, "{d:?}");
    }
    let journey = outcome.decisions.iter().find(|d| d.case == "placed-this-turn" && d.kind == Kind::Journey).unwrap();
    let why = journey.rationale.as_deref().unwrap();
    assert!(why.contains("pass 1: moved to `place`") && why.contains("pass 2: moved to `done`"), "{why}");
    // Each question is a request of its own, counted with its tokens.
    assert_eq!(outcome.calls.len(), model.requests().len());
    assert!(outcome.calls.iter().all(|c| c.task == "matching" || c.task == "journey"), "{:?}", outcome.calls);
}

#[tokio::test]
async fn what_matched_before_resolution_is_decided_without_a_model() {
    // Safety outranks sales as tags; the discount rule outranks the recall rule on its own.
    let dir = shop_dir(
        r#"
agent: shop.yaml
cases:
  - id: tags-and-members
    conversation: [{ customer: "The kettle was recalled; any discount or bundle?" }]
    matched: [recall, discount, bundle]
    expect: { relationships: { recall: false, discount: false, bundle: false } }
  - id: tag-alone
    conversation: [{ customer: "The kettle was recalled; any bundle?" }]
    matched: [recall, bundle]
    expect: { relationships: { recall: true, bundle: false, offtopic: false } }
  - id: journey-active
    conversation: [{ customer: "Order a kettle" }]
    matched: ["journey:order"]
    expect: { relationships: { "journey:order": true } }
"#,
    );
    let suite = load(&dir);
    let no_model = Arc::new(ScriptedModel::new());
    let outcome = crate::evaluate(&suite, &models(no_model.clone()), &Options::default()).await;
    assert_eq!(no_model.total_calls(), 0, "no model is asked");
    assert!(outcome.errors.is_empty() && outcome.calls.is_empty());
    let report = Report::of(&outcome);
    assert_eq!(report.accuracy, 1.0, "{}", report.text(&outcome));
    let recall = outcome.decisions.iter().find(|d| d.case == "tags-and-members" && d.subject == "recall").unwrap();
    assert!(recall.rationale.as_deref().unwrap().contains("deprioritized"), "{recall:?}");
    let offtopic = outcome.decisions.iter().find(|d| d.subject == "offtopic").unwrap();
    assert_eq!(offtopic.rationale.as_deref(), Some("not matched, and nothing in resolution added it"));

    let only_relationships = super::errors_in(&shop_dir(
        "agent: shop.yaml\ncases:\n  - id: a\n    conversation: [{customer: hi}]\n    matched: [recal]\n    expect: {guidelines: {recall: true}}\n",
    ));
    assert!(
        only_relationships.iter().any(|e| e.contains("cases.yaml:3") && e.contains("`recal`")),
        "{only_relationships:?}"
    );
    assert!(only_relationships.iter().any(|e| e.contains("expect only `relationships`")), "{only_relationships:?}");
}

#[tokio::test]
async fn a_case_can_give_the_agent_its_description() {
    // "Do you sell teapots?" is off-topic for an agent that sells kettles, not for one that
    // sells teapots: the checks read the description the case gives.
    let dir = shop_dir(
        r#"
agent: shop.yaml
cases:
  - id: kettles-only
    conversation: [{ customer: Do you sell teapots? }]
    expect: { guidelines: { offtopic: true } }
  - id: teapots-too
    agent_description: We sell kettles and teapots
    conversation: [{ customer: Do you sell teapots? }]
    expect: { guidelines: { offtopic: false } }
"#,
    );
    let suite = load(&dir);
    assert_eq!(suite.agents.len(), 2, "the agent, and the agent with the case's description");
    let model = Arc::new(
        ScriptedModel::new()
            .with_capabilities(ModelCapabilities::small_constrained(None))
            .when(schema_is("Verdict"))
            .reply_with(|req: &ChatRequest| {
                let text = format!("{}\n{}", req.messages[0].content, req.last_user_message());
                let asks_offtopic = statement_of(req.last_user_message()).is_some_and(|s| s.contains("does not sell"));
                Ok(json!(if asks_offtopic && !text.contains("kettles and teapots") { "yes" } else { "no" }))
            }),
    );
    let outcome = crate::evaluate(&suite, &models(model), &Options::default()).await;
    assert!(outcome.decisions.iter().all(|d| d.correct), "{:?}", outcome.decisions);
}

#[tokio::test]
async fn one_file_holds_cases_of_several_agents() {
    let dir = shop_dir(
        r#"
agents: { shop: shop.yaml, plain: agent.yaml }
cases:
  - id: shop-case
    agent: shop
    conversation: [{ customer: hi }]
    matched: [bundle]
    expect: { relationships: { bundle: true } }
  - id: plain-case
    agent: plain
    conversation: [{ customer: Can I get a refund? }]
    expect: { guidelines: { refund: true } }
"#,
    );
    let suite = load(&dir);
    assert_eq!(suite.agents.len(), 2);
    assert_ne!(suite.cases[0].agent, suite.cases[1].agent);
    let outcome = crate::evaluate(&suite, &models(always_yes()), &Options::default()).await;
    assert!(outcome.decisions.iter().all(|d| d.correct), "{:?}", outcome.decisions);

    let errors = |cases: &str| super::errors_in(&shop_dir(cases));
    let which = errors(
        "agents: {shop: shop.yaml, plain: agent.yaml}\ncases:\n  - id: a\n    conversation: [{customer: hi}]\n    expect: {guidelines: {refund: true}}\n",
    );
    assert!(which[0].contains("cases.yaml:3") && which[0].contains("which agent?"), "{which:?}");
    let unknown = errors(
        "agents: {shop: shop.yaml}\ncases:\n  - id: a\n    agent: shoop\n    conversation: [{customer: hi}]\n    expect: {guidelines: {bundle: true}}\n",
    );
    assert!(unknown[0].contains("no agent `shoop`"), "{unknown:?}");
    let both = errors("agent: shop.yaml\nagents: {plain: agent.yaml}\ncases: []\n");
    assert!(both[0].contains("cases.yaml:2") && both[0].contains("not both"), "{both:?}");
}

#[tokio::test]
async fn a_stopped_run_resumes_where_it_stopped() {
    let dir = super::suite_dir(CASES);
    let suite = crate::load(&[dir.path().to_path_buf()]).unwrap();
    // The first run stops after its first case: what the report held then is kept.
    let partial: Mutex<Option<Outcome>> = Mutex::new(None);
    let record = |done: &crate::CaseDone<'_>, so_far: &Outcome| {
        if done.finished == 1 {
            *partial.lock().unwrap() = Some(so_far.clone());
        }
    };
    let first = always_yes();
    crate::evaluate_with(&suite, &models(first.clone()), &Options::default(), Outcome::default(), &record).await;
    let partial = partial.into_inner().unwrap().unwrap();
    assert_eq!(partial.done.len(), 1);
    // Through its JSON, as `--json` writes it and `--resume` reads it.
    let json = Report::of(&partial).json(&partial);
    let reread: Outcome = serde_json::from_value(json).unwrap();
    let second = always_yes();
    let resumed =
        crate::evaluate_with(&suite, &models(second.clone()), &Options::default(), reread.clone(), &|_, _| {}).await;
    assert_eq!(second.calls(&TaskKind::Matching), 1, "only the case not done yet is run");
    assert_eq!(resumed.done.len(), 2);
    assert_eq!(resumed.decisions.len(), 3, "both cases' decisions");
    assert_eq!(resumed.decisions[0].case, "refund-only", "in suite order");

    // A case changed since is run again.
    let changed = CASES.replace("Can I get a refund?", "Can I get my money back?");
    let dir = super::suite_dir(&changed);
    let suite = crate::load(&[dir.path().to_path_buf()]).unwrap();
    let third = always_yes();
    crate::evaluate_with(&suite, &models(third.clone()), &Options::default(), reread, &|_, _| {}).await;
    assert_eq!(third.calls(&TaskKind::Matching), 2);
}

#[tokio::test]
async fn thresholds_are_weighed_on_the_odds_the_checks_reported() {
    // "Refund" gets p(yes) 0.6 and holds; "shipping" gets 0.4 and does not.
    let dir = super::suite_dir(CASES);
    let suite = crate::load(&[dir.path().to_path_buf()]).unwrap();
    let model = Arc::new(
        ScriptedModel::new()
            .with_capabilities(ModelCapabilities::small_constrained(None).with_verdict_threshold(0.7))
            .when(schema_is("Verdict"))
            .reply_odds(|req: &ChatRequest| {
                Ok(if statement_of(req.last_user_message()).unwrap_or_default().contains("refunds") {
                    0.6
                } else {
                    0.4
                })
            }),
    );
    let outcome = crate::evaluate(&suite, &models(model), &Options::default()).await;
    let refund = outcome.decisions.iter().find(|d| d.subject == "refund").unwrap();
    assert_eq!(refund.probability, Some(0.6));
    assert!(!refund.correct, "0.6 is short of the model's 0.7");
    let figures = crate::report::calibration(&outcome);
    let at = |t: f32| figures.iter().find(|f| (f.threshold - t).abs() < 1e-6).unwrap();
    assert_eq!((at(0.7).correct, at(0.7).decisions), (1, 3), "only shipping is right from 0.7");
    assert_eq!(at(0.5).correct, 3, "from 0.5 all three are");
    let text = crate::report::calibration_text(&figures);
    assert!(text.contains("engine.verdict_threshold: 0.45"), "{text}");
}
