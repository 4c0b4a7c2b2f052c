//! The banking case of the response lifecycle: the premium offer can only match once the
//! balance is known, so it matches in the second preparation iteration.

use std::sync::Arc;

use guidepost_engine::record::Verdict;
use guidepost_llm::TaskKind;
use guidepost_llm::providers::scripted::ScriptedModel;
use guidepost_runtime::MemorySession;
use guidepost_runtime::events::{message_text, status_of};

use crate::support::*;

fn oracle() -> Oracle {
    Arc::new(|condition: &str, last: &str, prompt: &str| {
        if condition.contains("asks about their account balance") {
            return last.contains("money") || last.contains("balance");
        }
        if condition.contains("balance exceeds $10,000") {
            // Only a balance the tools returned in this turn can show it.
            let facts = prompt.split("## Tool results of this turn").nth(1).unwrap_or("");
            return facts.contains("\"balance\":15000");
        }
        false
    })
}

#[tokio::test]
async fn premium_offer_matches_in_the_second_iteration() {
    let definition = example("banking");
    let model = Arc::new(with_reply(with_matching(ScriptedModel::new(), oracle()), |prompt| {
        if prompt.contains("Recommend our premium investment options") {
            "You have $15,000 in checking. With that balance, our premium investment options could be a good fit."
                .into()
        } else {
            "Let me check.".into()
        }
    }));
    let registry = fixtures(&definition);
    let rt = runtime(definition, model.clone(), registry);
    let session = MemorySession::new();
    let outcome = turn(&rt, &session, &Default::default(), "How much money do I have?").await;

    assert_eq!(outcome.trace.iterations.len(), 2, "{:#?}", outcome.trace.iterations);
    let first = outcome.trace.iterations[0].matching.as_ref().unwrap();
    let second = outcome.trace.iterations[1].matching.as_ref().unwrap();
    assert_eq!(first.candidate("balance").unwrap().verdict, Verdict::Matched);
    assert_eq!(first.candidate("premium_offer").unwrap().verdict, Verdict::NotMatched);
    assert_eq!(second.candidate("premium_offer").unwrap().verdict, Verdict::Matched);
    // The balance tool has no parameter the customer must give: it ran without a model call.
    assert_eq!(model.calls(&TaskKind::ToolInference), 0);
    let calls = &outcome.trace.iterations[0].tool_calls;
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].tool.to_string(), "fixtures:get_balance");
    assert_eq!(calls[0].arguments["account"], "checking");
    assert!(outcome.trace.iterations[1].tool_calls.is_empty());

    // The reply followed both guidelines, and the ready status names them.
    assert!(outcome.messages[0].contains("premium investment options"));
    let generation = model.requests_for(&TaskKind::Generation);
    let compose_prompt = prompt(&generation[0]);
    assert!(compose_prompt.contains("Call get_balance and tell them their balance"));
    assert!(compose_prompt.contains("Recommend our premium investment options"));
    assert!(compose_prompt.contains("15000"));
    let events = session.events();
    let last = events.last().unwrap();
    assert_eq!(status_of(last), Some(("ready".into(), Some("completed".into()))));
    let matched: Vec<&str> =
        last.data["data"]["matched_guidelines"].as_array().unwrap().iter().filter_map(|m| m["id"].as_str()).collect();
    assert!(matched.contains(&"balance") && matched.contains(&"premium_offer"), "{matched:?}");
    assert_eq!(events.iter().filter(|e| message_text(e).is_some()).count(), 2, "customer message + one reply");
    assert!(outcome.state.applied_guideline_ids.contains(&"premium_offer".to_string()));
}

#[tokio::test]
async fn an_account_other_than_the_default_is_decided_by_the_model() {
    // "savings" is one of the account's fixed values and not its default: the defaults
    // would look up the wrong account, so the model decides the arguments.
    let definition = example("banking");
    let model = ScriptedModel::new().when_task(TaskKind::ToolInference).reply_with(|r| {
        assert!(prompt(r).contains("savings account"));
        Ok(serde_json::json!({"tools": [{"tool": "get_balance", "rationale": "the savings account", "decision": "needs_to_run", "calls": [{"arguments": {"account": "savings"}}]}]}))
    });
    let model = Arc::new(with_reply(with_matching(model, oracle()), |_| "Let me check.".into()));
    let registry = fixtures(&definition);
    let rt = runtime(definition, model.clone(), registry);
    let outcome =
        turn(&rt, &MemorySession::new(), &Default::default(), "How much money is in my savings account?").await;
    assert_eq!(model.calls(&TaskKind::ToolInference), 1);
    assert_eq!(outcome.trace.iterations[0].tool_calls[0].arguments["account"], "savings");
}

#[tokio::test]
async fn max_engine_iterations_bounds_a_tool_chain() {
    let yaml = r#"
agent: {name: Chain, max_engine_iterations: 2}
guidelines:
  - {id: g1, condition: The customer asks for the report, action: Fetch step one, tools: [step1]}
  - {id: g2, condition: Step one has returned, action: Fetch step two, tools: [step2], reevaluate_after: [step1]}
  - {id: g3, condition: Step two has returned, action: Fetch step three, tools: [step3], reevaluate_after: [step2]}
tools:
  - {name: step1, fixture: {cases: [{args: {}, result: {done: step-one}}]}}
  - {name: step2, fixture: {cases: [{args: {}, result: {done: step-two}}]}}
  - {name: step3, fixture: {cases: [{args: {}, result: {done: step-three}}]}}
"#;
    let oracle: Oracle = Arc::new(|condition: &str, last: &str, prompt: &str| {
        let facts = prompt.split("## Tool results of this turn").nth(1).unwrap_or("");
        match condition {
            c if c.contains("asks for the report") => last.contains("report"),
            c if c.contains("Step one has returned") => facts.contains("step-one"),
            c if c.contains("Step two has returned") => facts.contains("step-two"),
            _ => false,
        }
    });
    let definition = inline(yaml);
    let model = Arc::new(with_reply(with_matching(ScriptedModel::new(), oracle), |_| "Here is what I found.".into()));
    let registry = fixtures(&definition);
    let rt = runtime(definition, model, registry);
    let outcome = turn(&rt, &MemorySession::new(), &Default::default(), "Can I have the report?").await;
    let ran: Vec<String> =
        outcome.trace.iterations.iter().flat_map(|i| i.tool_calls.iter().map(|c| c.tool.name.clone())).collect();
    assert_eq!(ran, ["step1", "step2"], "the third step would need a third iteration");
    assert_eq!(outcome.trace.iterations.len(), 2);
    assert_eq!(outcome.messages, ["Here is what I found."]);
}

/// The banking agent without its `reevaluate_after` link: what the lookup brings still
/// reaches the premium offer, whose condition speaks of the balance the tool returns.
fn banking_unlinked() -> guidepost_core::AgentDefinition {
    let path = format!("{}/../../examples/agents/banking.yaml", env!("CARGO_MANIFEST_DIR"));
    let yaml = std::fs::read_to_string(path).unwrap();
    let unlinked: String = yaml.lines().filter(|l| !l.contains("reevaluate_after")).map(|l| format!("{l}\n")).collect();
    assert_ne!(unlinked.len(), yaml.len(), "the example links the offer to the lookup");
    inline(&unlinked)
}

fn banking_runtime(
    definition: guidepost_core::AgentDefinition,
    recheck: guidepost_engine::RecheckAfterTools,
) -> (Arc<guidepost_runtime::AgentRuntime>, Arc<ScriptedModel>) {
    let model = Arc::new(with_reply(with_matching(ScriptedModel::new(), oracle()), |_| "Here it is.".into()));
    let registry = fixtures(&definition);
    let mut config = guidepost_runtime::RuntimeConfig::default();
    config.matcher.recheck_after_tools = recheck;
    let rt = Arc::new(guidepost_runtime::AgentRuntime::new(
        Arc::new(definition),
        guidepost_runtime::RuntimeModels::single(model.clone(), None),
        Arc::new(registry),
        config,
    ));
    (rt, model)
}

#[tokio::test]
async fn a_condition_that_speaks_of_a_lookup_is_checked_again_without_configuration() {
    use guidepost_engine::RecheckAfterTools;
    let (rt, _) = banking_runtime(banking_unlinked(), RecheckAfterTools::Related);
    let outcome = turn(&rt, &MemorySession::new(), &Default::default(), "How much money do I have?").await;
    assert_eq!(outcome.trace.iterations.len(), 2, "{:#?}", outcome.trace.iterations);
    let second = outcome.trace.iterations[1].matching.as_ref().unwrap();
    assert_eq!(second.candidate("premium_offer").unwrap().verdict, Verdict::Matched);
    // What the balance says nothing about keeps its verdict without a second check.
    assert_eq!(second.candidate("no_advice").unwrap().verdict, Verdict::Carried);
    assert!(outcome.state.applied_guideline_ids.contains(&"premium_offer".to_string()));

    // Checking only what is declared, as the reference does, misses the offer.
    let (rt, _) = banking_runtime(banking_unlinked(), RecheckAfterTools::Declared);
    let outcome = turn(&rt, &MemorySession::new(), &Default::default(), "How much money do I have?").await;
    let second = outcome.trace.iterations[1].matching.as_ref().unwrap();
    assert_eq!(second.candidate("premium_offer").unwrap().verdict, Verdict::Carried);
    assert!(!outcome.state.applied_guideline_ids.contains(&"premium_offer".to_string()));

    // Checking everything not matched yet asks about the unrelated guideline too.
    let (rt, _) = banking_runtime(banking_unlinked(), RecheckAfterTools::Unmatched);
    let outcome = turn(&rt, &MemorySession::new(), &Default::default(), "How much money do I have?").await;
    let second = outcome.trace.iterations[1].matching.as_ref().unwrap();
    assert_eq!(second.candidate("premium_offer").unwrap().verdict, Verdict::Matched);
    assert_eq!(second.candidate("no_advice").unwrap().verdict, Verdict::NotMatched);
}

#[tokio::test]
async fn a_chain_of_lookups_goes_on_until_nothing_new_is_found() {
    // No `reevaluate_after` anywhere: each step's condition speaks of what the one before
    // returned, and the loop runs until a pass starts no tool.
    let yaml = r#"
agent: {name: Chain, max_engine_iterations: 5}
guidelines:
  - {id: order, condition: The customer asks where their parcel is, action: Look up the order, tools: [get_order]}
  - {id: carrier, condition: The order was handed to a carrier, action: Track the shipment with the carrier, tools: [track_shipment]}
  - {id: delayed, condition: The shipment is delayed at customs, action: Apologise and explain customs delays}
  - {id: refund, condition: The customer asks for a refund, action: Explain the refund policy}
tools:
  - {name: get_order, description: The customer's latest order, fixture: {cases: [{args: {}, result: {status: handed to carrier, carrier: DHL}}]}}
  - {name: track_shipment, description: Where a shipment is, fixture: {cases: [{args: {}, result: {location: customs, delayed: true}}]}}
"#;
    let oracle: Oracle = Arc::new(|condition: &str, last: &str, prompt: &str| {
        let facts = prompt.split("## Tool results of this turn").nth(1).unwrap_or("");
        match condition {
            c if c.contains("where their parcel is") => last.contains("parcel"),
            c if c.contains("handed to a carrier") => facts.contains("handed to carrier"),
            c if c.contains("delayed at customs") => facts.contains("customs"),
            _ => false,
        }
    });
    let definition = inline(yaml);
    let model = Arc::new(with_reply(with_matching(ScriptedModel::new(), oracle), |_| "It is at customs.".into()));
    let registry = fixtures(&definition);
    let rt = runtime(definition, model, registry);
    let outcome = turn(&rt, &MemorySession::new(), &Default::default(), "Where is my parcel?").await;
    let ran: Vec<String> =
        outcome.trace.iterations.iter().flat_map(|i| i.tool_calls.iter().map(|c| c.tool.name.clone())).collect();
    assert_eq!(ran, ["get_order", "track_shipment"]);
    assert_eq!(outcome.trace.iterations.len(), 3, "the third pass runs no tool: stable");
    let third = outcome.trace.iterations[2].matching.as_ref().unwrap();
    assert_eq!(third.candidate("delayed").unwrap().verdict, Verdict::Matched);
    assert_eq!(third.candidate("refund").unwrap().verdict, Verdict::Carried);
    for id in ["order", "carrier", "delayed"] {
        assert!(outcome.state.applied_guideline_ids.contains(&id.to_string()), "{id}");
    }
}
