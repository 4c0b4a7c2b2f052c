//! Seed 004's relationship examples, end to end: the model's verdicts are fixed by rules,
//! the tests pin what relational resolution makes of them.

use std::sync::Arc;

use guidepost_engine::catalog::Entity;
use guidepost_engine::record::{Effect, ResolutionReason};
use guidepost_engine::{MatcherConfig, NumericPriority};
use guidepost_llm::providers::scripted::{ScriptedModel, schema_is};

use crate::support::*;

/// A model that applies a condition when one of its keywords is in the last customer
/// message. Keywords are given per condition prefix.
fn keyword_model(rules: &'static [(&'static str, &'static [&'static str])]) -> Arc<ScriptedModel> {
    let decide = move |condition: &str, msg: &str| {
        let msg = msg.to_lowercase();
        rules.iter().any(|(prefix, words)| condition.starts_with(prefix) && words.iter().any(|w| msg.contains(w)))
    };
    Arc::new(
        ScriptedModel::new()
            .when(schema_is("ConditionChecks"))
            .reply_with(move |req| Ok(checks(req, "## Conditions", decide))),
    )
}

const LOYALTY: &str = r#"
agent: { name: Otto }
guidelines:
  - id: vip
    condition: The customer is a VIP member
    entails: [loyalty]
  - id: loyalty
    condition: The customer has any loyalty status
  - id: lounge
    condition: The customer asks about perks
    action: Mention the members' lounge
    depends_on: [loyalty]
"#;

const LOYALTY_RULES: &[(&str, &[&str])] =
    &[("The customer is a VIP", &["vip"]), ("The customer asks about perks", &["perks"])];

#[tokio::test]
async fn vip_entails_loyalty_status_which_satisfies_a_dependency() {
    let model = keyword_model(LOYALTY_RULES);
    let matcher = matcher(inline(LOYALTY), model);
    let mut session = Session::new();
    let o = matcher.match_turn(&session.customer("I'm a VIP, what perks do I get?")).await.unwrap();
    assert!(o.matched("vip"));
    assert!(o.matched("loyalty"), "entailed without a model verdict");
    assert!(o.matched("lounge"), "its dependency is met through the entailment");
    assert_eq!(o.record.candidate("loyalty").unwrap().verdict, guidepost_engine::record::Verdict::NotMatched);
    let added = o.record.resolutions.iter().find(|r| r.entity == Entity::Guideline("loyalty".into())).unwrap();
    assert_eq!(added.effect, Effect::Added);
    assert!(matches!(&added.reason, ResolutionReason::Entailed { by, .. } if by == "vip"));
    let loyalty = o.matches.iter().find(|m| m.guideline_id == "loyalty").unwrap();
    assert_eq!(loyalty.rationale, "entailed by vip");
}

#[tokio::test]
async fn unmet_dependency_drops_the_match_and_says_why() {
    let model = keyword_model(LOYALTY_RULES);
    let matcher = matcher(inline(LOYALTY), model);
    let mut session = Session::new();
    let o = matcher.match_turn(&session.customer("What perks do you have?")).await.unwrap();
    assert!(!o.matched("lounge"));
    assert_eq!(o.record.candidate("lounge").unwrap().verdict, guidepost_engine::record::Verdict::Matched);
    let dropped = o.record.resolutions.iter().find(|r| r.entity == Entity::Guideline("lounge".into())).unwrap();
    assert_eq!(dropped.effect, Effect::Dropped);
    assert!(matches!(&dropped.reason, ResolutionReason::UnmetDependency { target, .. } if target.contains("loyalty")));
}

const UPSELL: &str = r#"
agent: { name: Otto }
guidelines:
  - id: declined
    condition: The customer explicitly declined an upsell
    priority_over: [upsell]
  - id: upsell
    condition: There is a good opportunity for an upsell
    action: Offer the premium bundle
  - id: thanks
    condition: The customer thanks the agent
    action: Say you're welcome
"#;

#[tokio::test]
async fn declined_upsell_suppresses_the_upsell() {
    let rules: &'static [(&str, &[&str])] = &[
        ("The customer explicitly declined", &["no thanks"]),
        ("There is a good opportunity", &["buy", "extras"]),
        ("The customer thanks", &["thank"]),
    ];
    let matcher = matcher(inline(UPSELL), keyword_model(rules));
    let mut session = Session::new();
    let o =
        matcher.match_turn(&session.customer("No thanks, I don't want extras, I'll just buy the phone")).await.unwrap();
    assert!(o.matched("declined"));
    assert!(!o.matched("upsell"));
    let dropped = o.record.resolutions.iter().find(|r| r.entity == Entity::Guideline("upsell".into())).unwrap();
    assert!(matches!(&dropped.reason, ResolutionReason::Deprioritized { by, .. } if by == "declined"));

    // without the refusal the upsell stands
    let mut session = Session::new();
    let o = matcher.match_turn(&session.customer("I'd like to buy the phone with extras")).await.unwrap();
    assert!(o.matched("upsell"));
}

const PRICING: &str = r#"
agent: { name: Otto }
guidelines:
  - id: standard
    condition: The customer asks about pricing
    action: Quote standard pricing
  - id: enterprise
    condition: The customer is on the enterprise tier
    action: Quote enterprise pricing
    priority_over: [standard]
  - id: greeting
    condition: The customer greets
    action: Greet them back
  - id: urgent
    condition: The customer says it is urgent
    action: Prioritize the answer
    priority: 1
"#;

const PRICING_RULES: &[(&str, &[&str])] = &[
    ("The customer asks about pricing", &["price", "cost"]),
    ("The customer is on the enterprise tier", &["enterprise"]),
    ("The customer greets", &["hello"]),
    ("The customer says it is urgent", &["urgent"]),
];

#[tokio::test]
async fn enterprise_pricing_takes_priority_over_standard() {
    let matcher = matcher(inline(PRICING), keyword_model(PRICING_RULES));
    let mut session = Session::new();
    let o =
        matcher.match_turn(&session.customer("Hello, we're an enterprise customer, what's the price?")).await.unwrap();
    assert!(o.matched("enterprise"));
    assert!(!o.matched("standard"));
    assert!(o.matched("greeting"), "unrelated matches are untouched");
}

#[tokio::test]
async fn numeric_priority_does_not_silence_unrelated_matches_unless_asked() {
    let msg = "Hello, it's urgent: what's the price?";
    let matcher_default = matcher(inline(PRICING), keyword_model(PRICING_RULES));
    let o = matcher_default.match_turn(&Session::new().customer(msg)).await.unwrap();
    assert!(o.matched("urgent") && o.matched("greeting") && o.matched("standard"));

    let config = MatcherConfig { numeric_priority: NumericPriority::HighestWins, ..MatcherConfig::default() };
    let highest = matcher_with(inline(PRICING), keyword_model(PRICING_RULES), None, config);
    let o = highest.match_turn(&Session::new().customer(msg)).await.unwrap();
    assert!(o.matched("urgent"));
    assert!(!o.matched("greeting") && !o.matched("standard"), "opt-in: the highest number wins");
    assert!(o.record.resolutions.iter().any(
        |r| matches!(&r.reason, ResolutionReason::NumericPriority { by, winner: 1, priority: 0 } if by == "urgent")
    ));
}

const GROUPS: &str = r#"
agent: { name: Otto }
tags: [payment]
guidelines:
  - id: card
    condition: The customer pays by card
    tags: [payment]
  - id: paypal
    condition: The customer pays with PayPal
    tags: [payment]
  - id: verified
    condition: The customer is verified
  - id: refund
    condition: The customer asks for a refund
    action: Start the refund to the original payment method
relationships:
  - kind: dependency_any
    source: refund
    target: [card, paypal]
    group: method
  - kind: dependency
    source: refund
    target: verified
"#;

#[tokio::test]
async fn dependency_any_groups_and_all_dependencies() {
    let rules: &'static [(&str, &[&str])] = &[
        ("The customer pays by card", &["card"]),
        ("The customer pays with PayPal", &["paypal"]),
        ("The customer is verified", &["verified"]),
        ("The customer asks for a refund", &["refund"]),
    ];
    let matcher = matcher(inline(GROUPS), keyword_model(rules));
    let o = matcher.match_turn(&Session::new().customer("I'm verified, refund my paypal order")).await.unwrap();
    assert!(o.matched("refund"));
    let o = matcher.match_turn(&Session::new().customer("I'm verified, refund my order")).await.unwrap();
    assert!(!o.matched("refund"));
    assert!(
        o.record
            .resolutions
            .iter()
            .any(|r| matches!(&r.reason, ResolutionReason::UnmetDependencyAny { group } if group == "method"))
    );
    let o = matcher.match_turn(&Session::new().customer("refund my card payment")).await.unwrap();
    assert!(!o.matched("refund"), "the plain dependency on `verified` is unmet");
}

const CHAIN: &str = r#"
agent: { name: Otto }
guidelines:
  - id: legal
    condition: The customer mentions a lawyer
    action: Refer them to the legal team
    priority_over: [manager]
  - id: manager
    condition: The customer asks for a manager
    action: Offer a call with a manager
    priority_over: [faq]
  - id: faq
    condition: The customer has a question
    action: Answer from the FAQ
"#;

const CHAIN_RULES: &[(&str, &[&str])] = &[
    ("The customer mentions a lawyer", &["lawyer"]),
    ("The customer asks for a manager", &["manager"]),
    ("The customer has a question", &["?"]),
];

#[tokio::test]
async fn an_outranked_match_still_outranks_the_ones_below_it() {
    let matcher = matcher(inline(CHAIN), keyword_model(CHAIN_RULES));
    // legal over manager over faq, all three matched: only legal remains
    let o = matcher.match_turn(&Session::new().customer("My lawyer says I need a manager, ok?")).await.unwrap();
    assert!(o.matched("legal"));
    assert!(!o.matched("manager") && !o.matched("faq"), "{:?}", o.record.resolutions);
    // without the top of the chain, the middle wins over the bottom
    let o = matcher.match_turn(&Session::new().customer("Can I talk to a manager?")).await.unwrap();
    assert!(o.matched("manager") && !o.matched("faq"));
    // and the bottom alone stands
    let o = matcher.match_turn(&Session::new().customer("When do you open?")).await.unwrap();
    assert!(o.matched("faq"));
}

const TIERS: &str = r#"
agent: { name: Otto }
tags: [safety, sales]
guidelines:
  - { id: recall, condition: The customer mentions a recall, action: Explain the recall, tags: [safety] }
  - { id: injury, condition: The customer mentions an injury, action: Offer medical help, tags: [safety] }
  - id: discount
    condition: The customer asks for a discount
    action: Offer 10 % off
    tags: [sales]
    priority_over: [recall]
  - { id: bundle, condition: The customer asks about bundles, action: Show the bundles, tags: [sales] }
relationships:
  - { kind: priority, source: "tag:safety", target: "tag:sales" }
"#;

#[tokio::test]
async fn a_tag_priority_removes_a_member_whose_own_priority_still_holds() {
    // Safety outranks sales as tags; the discount rule (sales) outranks the recall rule
    // (safety) on its own. All four matched: the tags remove both sales rules, and the
    // discount rule, though removed, still removes the recall rule, as the reference composes
    // them.
    let rules: &'static [(&str, &[&str])] = &[
        ("The customer mentions a recall", &["recall"]),
        ("The customer mentions an injury", &["hurt"]),
        ("The customer asks for a discount", &["discount"]),
        ("The customer asks about bundles", &["bundle"]),
    ];
    let matcher = matcher(inline(TIERS), keyword_model(rules));
    let msg = "I got hurt by the recalled kettle; any discount or bundle for a new one?";
    let o = matcher.match_turn(&Session::new().customer(msg)).await.unwrap();
    let followed: Vec<&str> = o.matches.iter().map(|m| m.guideline_id.as_str()).collect();
    assert_eq!(followed, ["injury"]);
    let recall = o.record.resolutions.iter().find(|r| r.entity == Entity::Guideline("recall".into())).unwrap();
    assert!(matches!(&recall.reason, ResolutionReason::Deprioritized { by, .. } if by == "discount"), "{recall:?}");
}
