//! Disambiguation between "upgrade" targets: ask among the plausible targets only; no
//! ambiguity means no match at all.

use std::sync::Arc;

use guidepost_engine::MatchKind;
use guidepost_engine::record::Verdict;
use guidepost_llm::providers::scripted::{ScriptedModel, schema_is};
use serde_json::json;

use crate::support::*;

const UPGRADE: &str = r#"
agent: { name: Otto }
guidelines:
  - id: upgrade_unclear
    condition: The customer wants to upgrade something
    disambiguates: [upgrade_plan, upgrade_shipping, upgrade_device]
  - id: upgrade_plan
    condition: The customer wants to upgrade their subscription plan
    action: Explain the plan tiers
  - id: upgrade_shipping
    condition: The customer wants faster shipping
    action: Offer express shipping
  - id: upgrade_device
    condition: The customer wants a newer device
    action: Show trade-in offers
"#;

/// The model sees "upgrade" as ambiguous between plan and shipping (the customer has no
/// device with us), unless the message says which.
fn model() -> Arc<ScriptedModel> {
    Arc::new(
        ScriptedModel::new()
            .when(schema_is("DisambiguationAnswer"))
            .reply_with(|req| {
                let msg = last_customer(req).to_lowercase();
                let options = items(req, "## Options");
                let id_of = |needle: &str| options.iter().find(|(_, t)| t.contains(needle)).map(|(id, _)| id.clone()).unwrap();
                Ok(if msg.contains("shipping") {
                    json!({"rationale": "the customer said shipping", "ambiguous": false, "plausible_options": [], "question": null})
                } else if msg.contains("upgrade") {
                    json!({"rationale": "plan or shipping", "ambiguous": true,
                           "plausible_options": [id_of("subscription"), id_of("faster shipping")],
                           "question": "Do you want to upgrade your plan or your shipping?"})
                } else {
                    json!({"rationale": "nothing about upgrades", "ambiguous": false, "plausible_options": [], "question": null})
                })
            })
            .when(schema_is("ConditionChecks"))
            .reply_with(|req| {
                Ok(checks(req, "## Conditions", |cond, msg| {
                    let msg = msg.to_lowercase();
                    (cond.contains("subscription") && msg.contains("upgrade"))
                        || (cond.contains("shipping") && (msg.contains("shipping") || msg.contains("upgrade")))
                }))
            }),
    )
}

#[tokio::test]
async fn ambiguous_upgrade_asks_among_plausible_targets_only() {
    let matcher = matcher(inline(UPGRADE), model());
    let o = matcher.match_turn(&Session::new().customer("I want to upgrade")).await.unwrap();
    let clarify =
        o.matches.iter().find(|m| matches!(m.kind, MatchKind::Clarification { .. })).expect("a clarification");
    let MatchKind::Clarification { source, options } = &clarify.kind else { unreachable!() };
    assert_eq!(source, "upgrade_unclear");
    assert_eq!(options, &vec!["upgrade_plan".to_string(), "upgrade_shipping".to_string()]);
    assert_eq!(clarify.action.as_deref(), Some("Do you want to upgrade your plan or your shipping?"));
    // the targets it replaces are not followed directly
    assert!(!o.matched("upgrade_plan") && !o.matched("upgrade_shipping"));
    assert!(!o.matched("upgrade_unclear"));
}

#[tokio::test]
async fn no_ambiguity_is_no_match() {
    let matcher = matcher(inline(UPGRADE), model());
    let o = matcher.match_turn(&Session::new().customer("Can I upgrade my shipping?")).await.unwrap();
    assert!(o.matches.iter().all(|m| !matches!(m.kind, MatchKind::Clarification { .. })));
    assert!(!o.matched("upgrade_unclear"), "the observation does not count as matched");
    let head = o.record.candidate("upgrade_unclear").unwrap();
    assert_eq!(head.verdict, Verdict::NotMatched);
    assert_eq!(head.rationale.as_deref(), Some("no question: not ambiguous (the customer said shipping)"));
    assert!(o.matched("upgrade_shipping"));
}

const JOURNEY_TARGETS: &str = r#"
agent: { name: Otto }
guidelines:
  - id: change_unclear
    condition: The customer wants to change something about their account
    disambiguates: ["journey:address", "journey:plan"]
journeys:
  - id: address
    title: Change address
    conditions: [The customer wants to change something about their account]
    start: ask
    states:
      - { id: ask, chat: Ask for the new address, next: end }
  - id: plan
    title: Change plan
    conditions: [The customer wants a different plan]
    start: ask
    states:
      - { id: ask, chat: Ask which plan they want, next: end }
"#;

#[tokio::test]
async fn an_ambiguous_request_does_not_start_a_journey_it_names() {
    let model = Arc::new(
        ScriptedModel::new()
            .when(schema_is("DisambiguationAnswer"))
            .reply_with(|req| {
                let options: Vec<String> = items(req, "## Options").into_iter().map(|(id, _)| id).collect();
                Ok(json!({"rationale": "address or plan", "ambiguous": true, "plausible_options": options, "question": null}))
            })
            .when(schema_is("ConditionChecks"))
            .reply_with(|req| Ok(checks(req, "## Conditions", |c, _| c.contains("account")))),
    );
    let matcher = matcher(inline(JOURNEY_TARGETS), model);
    let o = matcher.match_turn(&Session::new().customer("I need to change my account")).await.unwrap();
    assert!(o.journey_paths.is_empty(), "the journey waits for the customer's choice");
    let clarify = o.matches.iter().find(|m| matches!(m.kind, MatchKind::Clarification { .. })).unwrap();
    let MatchKind::Clarification { options, .. } = &clarify.kind else { unreachable!() };
    assert_eq!(options, &vec!["journey:address".to_string(), "journey:plan".to_string()]);
    // a generated question names the options when the model gives none
    assert_eq!(clarify.action.as_deref(), Some("Ask the customer which one they mean: Change address or Change plan"));
    let address = o.record.journey("address").unwrap();
    assert_eq!(address.decision, guidepost_engine::record::JourneyDecision::NotStarted);
    assert!(address.correction.as_deref().unwrap().contains("disambiguation"));
}

/// A model that finds "upgrade" ambiguous among all three targets, whatever the checks of
/// the targets say; those checks match the targets whose keyword `applies` names.
fn ambiguous_among_all(applies: &'static [&'static str]) -> Arc<ScriptedModel> {
    Arc::new(
        ScriptedModel::new()
            .when(schema_is("DisambiguationAnswer"))
            .reply_with(|req| {
                let options: Vec<String> = items(req, "## Options").into_iter().map(|(id, _)| id).collect();
                Ok(json!({"rationale": "any of them", "ambiguous": true, "plausible_options": options, "question": "Which upgrade: plan, shipping or device?"}))
            })
            .when(schema_is("ConditionChecks"))
            .reply_with(move |req| Ok(checks(req, "## Conditions", |cond, _| applies.iter().any(|k| cond.contains(k))))),
    )
}

#[tokio::test]
async fn an_ambiguous_request_is_asked_about_though_no_target_applies_on_its_own() {
    // "An upgrade" says neither which plan nor which shipping: each target's own check is
    // rightly no, and that is what makes it ambiguous. The question offers what the
    // disambiguation found plausible.
    let matcher = matcher(inline(UPGRADE), ambiguous_among_all(&[]));
    let o = matcher.match_turn(&Session::new().customer("I want an upgrade")).await.unwrap();
    let clarify =
        o.matches.iter().find(|m| matches!(m.kind, MatchKind::Clarification { .. })).expect("a clarification");
    let MatchKind::Clarification { options, .. } = &clarify.kind else { unreachable!() };
    assert_eq!(
        options,
        &vec!["upgrade_plan".to_string(), "upgrade_shipping".to_string(), "upgrade_device".to_string()]
    );
    assert_eq!(clarify.action.as_deref(), Some("Which upgrade: plan, shipping or device?"));
    let head = o.record.candidate("upgrade_unclear").unwrap();
    assert_eq!(head.verdict, Verdict::Matched);
    assert!(head.rationale.as_deref().unwrap().starts_with("ambiguous among `upgrade_plan`"), "{head:?}");
}

#[tokio::test]
async fn a_target_that_applies_on_its_own_does_not_cancel_the_question() {
    // The shipping check reads "upgrade" as shipping; the disambiguation, which weighs the
    // targets against each other, finds all three plausible. The targets it offers are not
    // followed directly.
    let matcher = matcher(inline(UPGRADE), ambiguous_among_all(&["faster shipping"]));
    let o = matcher.match_turn(&Session::new().customer("I want an upgrade")).await.unwrap();
    assert!(o.matches.iter().any(|m| matches!(m.kind, MatchKind::Clarification { .. })), "{:?}", o.matches);
    assert!(!o.matched("upgrade_shipping"));
}

#[tokio::test]
async fn one_plausible_target_is_no_question_and_the_record_says_why() {
    let model = Arc::new(
        ScriptedModel::new()
            .when(schema_is("DisambiguationAnswer"))
            .reply_with(|req| {
                let options = items(req, "## Options");
                let shipping = options.iter().find(|(_, t)| t.contains("faster shipping")).unwrap().0.clone();
                Ok(json!({"rationale": "shipping only", "ambiguous": true, "plausible_options": [shipping], "question": "Which one?"}))
            })
            .when(schema_is("ConditionChecks"))
            .reply_with(|req| Ok(checks(req, "## Conditions", |c, _| c.contains("faster shipping")))),
    );
    let matcher = matcher(inline(UPGRADE), model);
    let o = matcher.match_turn(&Session::new().customer("Upgrade the delivery please")).await.unwrap();
    assert!(o.matches.iter().all(|m| !matches!(m.kind, MatchKind::Clarification { .. })));
    assert!(o.matched("upgrade_shipping"));
    let head = o.record.candidate("upgrade_unclear").unwrap();
    assert_eq!(head.verdict, Verdict::NotMatched);
    assert_eq!(
        head.rationale.as_deref(),
        Some("no question: found ambiguous, but named only `upgrade_shipping` as plausible (shipping only)")
    );
}
