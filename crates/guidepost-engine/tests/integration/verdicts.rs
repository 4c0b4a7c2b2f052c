//! Verdict styles: local models get single checks (one yes-or-no question per condition),
//! direct checks (one boolean per condition, keyed by the condition) for guidelines already
//! followed; hosted models keep a rationale per verdict; any style can be forced.

use std::sync::Arc;

use guidepost_engine::record::Verdict;
use guidepost_engine::{Category, MatcherConfig, VerdictStyle};
use guidepost_llm::providers::scripted::{ScriptedModel, schema_is};
use guidepost_llm::{ChatRequest, ModelCapabilities};
use serde_json::{Map, Value};

use crate::support::*;

const TAXI: &str = r#"
agent: { name: Rita }
guidelines:
  - id: correction
    condition: The customer corrects a detail they gave earlier
    action: Acknowledge the correction and use the new detail
  - id: price
    condition: The customer asks how much the ride will cost
    action: Explain that the fare is metered
  - id: student
    condition: The customer is a student
  - id: tone
    condition: The customer sounds in a hurry
    action: Keep replies short
    criticality: low
"#;

/// The schema's keys, in order.
fn keys(req: &ChatRequest) -> Vec<String> {
    let schema = match &req.output {
        guidepost_llm::OutputFormat::Json { schema, .. } => schema.clone(),
        other => panic!("not a JSON request: {other:?}"),
    };
    schema["properties"].as_object().unwrap().keys().cloned().collect()
}

/// A direct answer: every key whose condition contains one of `words` (lowercase) in
/// the last customer message holds.
fn direct(req: &ChatRequest, rules: &[(&str, &str)]) -> Value {
    let last = last_customer(req).to_lowercase();
    let answer: Map<String, Value> = keys(req)
        .into_iter()
        .map(|k| {
            let holds = rules.iter().any(|(cond, word)| k.contains(cond) && last.contains(word));
            (k, Value::Bool(holds))
        })
        .collect();
    Value::Object(answer)
}

/// The statement a single check asks about.
fn statement(req: &ChatRequest) -> String {
    let user = &req.messages[1].content;
    guidepost_engine::batches::single::statement_of(user).expect("a single check names its statement").to_string()
}

/// A single-check answer under the same rules as [`direct`].
fn single(req: &ChatRequest, rules: &[(&str, &str)]) -> Value {
    let last = last_customer(req).to_lowercase();
    let said = statement(req);
    let holds = rules.iter().any(|(cond, word)| said.contains(cond) && last.contains(word));
    Value::String(if holds { "yes" } else { "no" }.into())
}

/// A model that declares itself small: its name says nothing (it could be served over any API).
fn local_model(answer: fn(&ChatRequest) -> Value) -> Arc<ScriptedModel> {
    Arc::new(
        ScriptedModel::new()
            .with_capabilities(guidepost_llm::ModelCapabilities::small_constrained(None))
            .when(schema_is("DirectChecks"))
            .reply_with(move |req| Ok(answer(req))),
    )
}

/// A small model answering single checks by `rules`, and direct checks the same way.
fn local_single_model(rules: &'static [(&'static str, &'static str)]) -> Arc<ScriptedModel> {
    Arc::new(
        ScriptedModel::new()
            .with_capabilities(guidepost_llm::ModelCapabilities::small_constrained(None))
            .when(schema_is("Verdict"))
            .reply_with(move |req| Ok(single(req, rules)))
            .when(schema_is("DirectChecks"))
            .reply_with(move |req| Ok(direct(req, rules))),
    )
}

#[tokio::test]
async fn small_models_get_one_question_per_condition_and_no_actions() {
    let model = local_single_model(&[("how much", "cost"), ("student", "student")]);
    let matcher = matcher(inline(TAXI), Arc::clone(&model));
    let mut session = Session::new();
    let o =
        matcher.match_turn(&session.customer("Hi, I'm a student. What would it cost to the harbour?")).await.unwrap();
    assert!(o.matched("price"));
    assert!(o.matched("student"));
    assert!(!o.matched("correction"));
    assert!(!o.matched("tone"));
    let requests = model.requests();
    let statements: Vec<String> = requests.iter().map(statement).collect();
    assert_eq!(requests.len(), 4, "one call per condition: {statements:?}");
    for req in &requests {
        assert!(schema_is("Verdict")(req));
        let text = format!("{}{}", req.messages[0].content, req.messages[1].content);
        assert!(!text.contains("Explain that the fare is metered"), "actions stay out of the checks:\n{text}");
        // Every call shares its prefix (instructions, agent, conversation) with the others.
        let prefix = req.messages[1].content.rsplit_once("Statement:").unwrap().0;
        assert_eq!(prefix, requests[0].messages[1].content.rsplit_once("Statement:").unwrap().0);
    }
    assert!(statements.contains(&"The customer asks how much the ride will cost".to_string()), "{statements:?}");
    let price = o.record.candidate("price").unwrap();
    assert_eq!(price.verdict, Verdict::Matched);
    assert_eq!(price.rationale, None);
}

#[tokio::test]
async fn capable_models_keep_the_reasoned_checks() {
    let model = Arc::new(
        ScriptedModel::new()
            .with_id("local:named-like-a-small-model")
            .when(schema_is("ConditionChecks"))
            .reply_with(|req| Ok(checks(req, "## Conditions", |c, m| c.contains("how much") && m.contains("cost"))))
            .when(schema_is("LowCriticalityChecks"))
            .reply_json(serde_json::json!({"applies": []})),
    );
    let matcher = matcher(inline(TAXI), Arc::clone(&model));
    let mut session = Session::new();
    let o = matcher.match_turn(&session.customer("What would it cost?")).await.unwrap();
    assert!(o.matched("price"));
    assert_eq!(o.record.candidate("price").unwrap().rationale.as_deref(), Some("scripted: true"));
    assert_eq!(model.requests().iter().filter(|r| schema_is("DirectChecks")(r)).count(), 0);
}

#[tokio::test]
async fn the_style_can_be_forced_either_way() {
    let (small, capable) = (ModelCapabilities::small_constrained(Some(32_768)), ModelCapabilities::CAPABLE);
    assert_eq!(VerdictStyle::Auto.for_model(&small), VerdictStyle::Single);
    assert_eq!(VerdictStyle::Auto.for_model(&capable), VerdictStyle::Reasoned);
    assert_eq!(VerdictStyle::Reasoned.for_model(&small), VerdictStyle::Reasoned);
    assert_eq!(VerdictStyle::Direct.for_model(&capable), VerdictStyle::Direct);

    let model = Arc::new(
        ScriptedModel::new()
            .with_id("openai:gpt-4.1")
            .when(schema_is("DirectChecks"))
            .reply_with(|req| Ok(direct(req, &[("how much", "cost")]))),
    );
    let config = MatcherConfig { verdicts: VerdictStyle::Direct, ..MatcherConfig::default() };
    let matcher = matcher_with(inline(TAXI), model, None, config);
    let mut session = Session::new();
    assert!(matcher.match_turn(&session.customer("What would it cost?")).await.unwrap().matched("price"));
}

#[tokio::test]
async fn a_condition_left_out_of_the_answer_has_no_verdict() {
    // A lax provider may drop required keys: the missing ones are recorded as such, not
    // taken as "does not apply".
    let model = local_model(|req| {
        let first = keys(req).into_iter().next().unwrap();
        let mut answer = Map::new();
        answer.insert(first, Value::Bool(false));
        Value::Object(answer)
    });
    let config = MatcherConfig { verdicts: VerdictStyle::Direct, ..MatcherConfig::default() };
    let matcher = matcher_with(inline(TAXI), model, None, config);
    let mut session = Session::new();
    let o = matcher.match_turn(&session.customer("Hello")).await.unwrap();
    let verdicts: Vec<(Option<Category>, Verdict)> = ["correction", "price"]
        .iter()
        .map(|id| o.record.candidate(id).unwrap())
        .map(|c| (c.category, c.verdict))
        .collect();
    assert_eq!(verdicts[0].1, Verdict::NotMatched);
    assert_eq!(verdicts[1].1, Verdict::NoVerdict, "{verdicts:?}");
}

#[tokio::test]
async fn applied_guidelines_are_asked_whether_to_follow_them_again() {
    let model = local_single_model(&[("how much", "cost")]);
    let matcher = matcher(inline(TAXI), Arc::clone(&model));
    let mut session = Session::new();
    let first = matcher.match_turn(&session.customer("What would it cost?")).await.unwrap();
    assert!(first.matched("price"));
    session.reply(&first, "The fare is metered.");
    let before = model.requests().len();
    let second = matcher.match_turn(&session.customer("And what would it cost at night?")).await.unwrap();
    assert!(second.matched("price"), "the condition holds again for a new reason");
    // Followed before, it is asked about the latest message alone.
    let asked: Vec<String> = model.requests()[before..].iter().map(statement).collect();
    assert!(
        asked.contains(
            &"In the customer's latest message, not only earlier: The customer asks how much the ride will cost"
                .to_string()
        ),
        "{asked:?}"
    );
    assert_eq!(second.record.candidate("price").unwrap().category, Some(Category::PreviouslyApplied));
}

#[tokio::test]
async fn every_style_sees_earlier_tool_results_in_the_conversation() {
    const BANK: &str = r#"
agent: { name: Penny }
guidelines:
  - id: premium
    condition: The customer's balance exceeds $10,000
    action: Recommend the premium investment options
"#;
    const SHOWN: &str = r#"tool: get_balance({"account":"checking"}) -> {"balance":15000}
agent: You have $15,000 in checking."#;
    fn shown(req: &ChatRequest) -> bool {
        req.messages.iter().any(|m| m.content.contains(SHOWN))
    }
    for style in [VerdictStyle::Reasoned, VerdictStyle::Direct, VerdictStyle::Single] {
        let model = Arc::new(
            ScriptedModel::new()
                .when(schema_is("ConditionChecks"))
                .reply_with(|req| {
                    let holds = shown(req);
                    Ok(checks(req, "## Conditions", move |c, _| c.contains("exceeds") && holds))
                })
                .when(schema_is("DirectChecks"))
                .reply_with(|req| {
                    let holds = shown(req);
                    Ok(Value::Object(keys(req).into_iter().map(|k| (k, Value::Bool(holds))).collect()))
                })
                .when(schema_is("Verdict"))
                .reply_with(|req| Ok(Value::String(if shown(req) { "yes" } else { "no" }.into()))),
        );
        let matcher = matcher_with(
            inline(BANK),
            model.clone(),
            None,
            MatcherConfig { verdicts: style, ..MatcherConfig::default() },
        );
        let events = vec![
            guidepost_engine::context::events::message(guidepost_core::EventSource::Customer, 0, "What is my balance?"),
            guidepost_engine::context::events::tool(
                1,
                "fixtures:get_balance",
                serde_json::json!({"account": "checking"}),
                serde_json::json!({"balance": 15000}),
            ),
            guidepost_engine::context::events::message(
                guidepost_core::EventSource::AiAgent,
                2,
                "You have $15,000 in checking.",
            ),
            guidepost_engine::context::events::message(
                guidepost_core::EventSource::Customer,
                3,
                "Anything you would suggest?",
            ),
        ];
        let ctx = guidepost_engine::MatchingContext::new(events, Default::default());
        let o = matcher.match_turn(&ctx).await.unwrap();
        assert!(o.matched("premium"), "{style:?}: {:#?}", model.requests());
        assert!(model.requests().iter().all(shown), "{style:?}");
    }
}

#[tokio::test]
async fn a_check_asked_both_ways_weighs_the_statement_and_its_negation_together() {
    // The model gives "asks about the cost" 0.6, short of its 0.7; asked the negation, it is
    // sure the customer does not not ask (p(yes) 0.1): together 0.75, and the check holds. The
    // student statement leans yes (0.65) but its negation too (0.6): 0.525, it does not.
    fn p(statement: &str) -> f32 {
        match statement {
            "The customer asks how much the ride will cost" => 0.6,
            "It is not true that the customer asks how much the ride will cost" => 0.1,
            "The customer is a student" => 0.65,
            "It is not true that the customer is a student" => 0.6,
            _ => 0.1,
        }
    }
    let model = |_: ()| {
        Arc::new(
            ScriptedModel::new()
                .with_capabilities(ModelCapabilities::small_constrained(None).with_verdict_threshold(0.7))
                .when(schema_is("Verdict"))
                .reply_odds(|req| Ok(p(&statement(req))))
                .when(schema_is("DirectChecks"))
                .reply_with(|req| Ok(direct(req, &[]))),
        )
    };
    let msg = "What would it cost to the harbour?";
    let one_way = matcher(inline(TAXI), model(()));
    let o = one_way.match_turn(&Session::new().customer(msg)).await.unwrap();
    assert!(!o.matched("price"), "0.6 alone is short of 0.7");

    let config = MatcherConfig { ask_both_ways: true, ..MatcherConfig::default() };
    let both = model(());
    let matcher = matcher_with(inline(TAXI), both.clone(), None, config);
    let o = matcher.match_turn(&Session::new().customer(msg)).await.unwrap();
    assert!(o.matched("price") && !o.matched("student"));
    let price = o.record.candidate("price").unwrap();
    assert_eq!(price.rationale.as_deref(), Some("yes: p(yes) 0.75 (asked 0.60, its negation 0.10), yes from 0.70"));
    assert_eq!(price.probability, Some(0.75));
    let asked: Vec<String> = both.requests().iter().filter(|r| schema_is("Verdict")(r)).map(statement).collect();
    assert!(asked.contains(&"It is not true that the customer is a student".to_string()), "{asked:?}");
}

#[tokio::test]
async fn a_guidelines_labelled_examples_reach_its_checks_both_ways() {
    const WITH_EXAMPLES: &str = r#"
agent: { name: Rita }
guidelines:
  - id: price
    condition: The customer asks how much the ride will cost
    action: Explain that the fare is metered
    examples:
      - { message: "Is it expensive to the airport?", applies: true }
      - { message: "How long is the ride?", applies: false }
"#;
    let model = Arc::new(
        ScriptedModel::new()
            .with_capabilities(ModelCapabilities::small_constrained(None).with_verdict_threshold(0.7))
            .when(schema_is("Verdict"))
            .reply_odds(|_| Ok(0.5)),
    );
    let config = MatcherConfig { ask_both_ways: true, ..MatcherConfig::default() };
    let matcher = matcher_with(inline(WITH_EXAMPLES), model.clone(), None, config);
    matcher.match_turn(&Session::new().customer("What's the fare to the harbour?")).await.unwrap();
    let prompts: Vec<String> = model.requests().iter().map(|r| user(r).to_string()).collect();
    assert_eq!(prompts.len(), 2);
    assert!(
        prompts[0].contains("- \"Is it expensive to the airport?\": yes\n- \"How long is the ride?\": no"),
        "{}",
        prompts[0]
    );
    // Asked the negation, the labels are the negation's.
    assert!(
        prompts[1].contains("- \"Is it expensive to the airport?\": no\n- \"How long is the ride?\": yes"),
        "{}",
        prompts[1]
    );
}
