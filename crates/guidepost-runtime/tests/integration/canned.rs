//! Canned responses: strict mode never sends text outside its templates.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use guidepost_llm::TaskKind;
use guidepost_llm::providers::scripted::ScriptedModel;
use guidepost_runtime::MemorySession;
use serde_json::json;

use crate::support::*;

const STRICT: &str = r#"
agent: {name: Bank, composition_mode: canned_strict, no_match_reply: "Sorry, I can only help with balances and cards."}
guidelines:
  - {id: balance, condition: The customer asks about their balance, action: Tell them their balance, tools: [get_balance], canned_responses: [balance_reply]}
tools:
  - {name: get_balance, fixture: {cases: [{args: {}, result: {balance: 1200}}]}}
canned_responses:
  - {id: greeting, template: "Hello! How can I help with your account today?"}
  - {id: balance_reply, template: "Your balance is {{ balance }} dollars.", field_dependencies: [balance]}
  - {id: card_lost, template: "I have blocked your card. A new one is on its way."}
"#;

#[tokio::test]
async fn strict_mode_only_sends_templates_or_the_no_match_reply() {
    // Whatever the model answers (valid ids, unknown ids, "none", poor fits, garbage),
    // the reply is one of the rendered templates or the no-match reply.
    let answers = [
        json!({"template_id": "greeting", "fit": "high"}),
        json!({"template_id": "card_lost", "fit": "partial"}),
        json!({"template_id": "made_up", "fit": "high"}),
        json!({"template_id": "none", "fit": "low"}),
        json!({"template_id": "greeting", "fit": "low"}),
        json!({"unexpected": true}),
    ];
    let allowed = [
        "Hello! How can I help with your account today?",
        "I have blocked your card. A new one is on its way.",
        "Sorry, I can only help with balances and cards.",
    ];
    let n = Arc::new(AtomicUsize::new(0));
    let counter = n.clone();
    let model = ScriptedModel::new()
        .when_task(TaskKind::Generation)
        .reply_with(move |_| Ok(answers[counter.fetch_add(1, Ordering::SeqCst) % answers.len()].clone()));
    let model = Arc::new(with_matching(model, Arc::new(|_: &str, _: &str, _: &str| false)));
    let definition = inline(STRICT);
    let rt = runtime(definition.clone(), model, fixtures(&definition));
    let mut sent = Vec::new();
    for _ in 0..6 {
        let outcome = turn(&rt, &MemorySession::new(), &Default::default(), "hello there").await;
        for m in &outcome.messages {
            assert!(allowed.contains(&m.as_str()), "strict mode sent `{m}`");
        }
        sent.extend(outcome.messages);
    }
    assert_eq!(n.load(Ordering::SeqCst), 6);
    assert_eq!(sent[0], allowed[0]);
    assert_eq!(sent[1], allowed[1]);
    assert_eq!(&sent[2..], [allowed[2]; 4]);
}

#[tokio::test]
async fn strict_templates_are_rendered_with_tool_fields() {
    let definition = inline(STRICT);
    let model = ScriptedModel::new().when_task(TaskKind::Generation).reply_with(|r| {
        let p = prompt(r);
        assert!(p.contains("[balance_reply] Your balance is 1200 dollars."), "{p}");
        Ok(json!({"template_id": "balance_reply", "fit": "high"}))
    });
    let model = Arc::new(with_matching(
        model,
        Arc::new(|c: &str, last: &str, _: &str| c.contains("balance") && last.contains("balance")),
    ));
    let rt = runtime(definition.clone(), model, fixtures(&definition));
    let outcome = turn(&rt, &MemorySession::new(), &Default::default(), "what's my balance").await;
    assert_eq!(outcome.messages, ["Your balance is 1200 dollars."]);
    assert_eq!(outcome.trace.composition.template_id.as_deref(), Some("balance_reply"));
}

const COMPOSITED: &str = r#"
agent: {name: Bank, composition_mode: canned_composited}
guidelines:
  - {id: balance, condition: The customer asks about their balance, action: Tell them their balance, tools: [get_balance], canned_responses: [balance_reply]}
tools:
  - {name: get_balance, fixture: {cases: [{args: {}, result: {balance: 1200}}]}}
canned_responses:
  - {id: balance_reply, template: "Your balance is {{ balance }} dollars.", field_dependencies: [balance]}
"#;

#[tokio::test]
async fn composited_replies_are_written_in_the_templates_style_and_checked() {
    // The model sees the approved reply rendered with the tool's fields as the style to
    // follow; its first reply states a figure the tool never gave and is asked for again.
    let n = Arc::new(AtomicUsize::new(0));
    let counter = n.clone();
    let model = with_reply(ScriptedModel::new(), move |p| {
        assert!(p.contains("Write in the style and tone of these approved replies"), "{p}");
        assert!(p.contains("- Your balance is 1200 dollars."), "{p}");
        if counter.fetch_add(1, Ordering::SeqCst) == 0 {
            "Your balance is 1,500 dollars.".into()
        } else {
            "Your balance is 1,200 dollars today.".into()
        }
    });
    let model = Arc::new(with_matching(model, Arc::new(|c: &str, _: &str, _: &str| c.contains("balance"))));
    let definition = inline(COMPOSITED);
    let rt = runtime(definition.clone(), model, fixtures(&definition));
    let outcome = turn(&rt, &MemorySession::new(), &Default::default(), "what's my balance").await;
    assert_eq!(outcome.messages, ["Your balance is 1,200 dollars today."]);
    assert_eq!(outcome.trace.composition.mode, "canned_composited");
    assert_eq!(n.load(Ordering::SeqCst), 2);
    assert_eq!(outcome.trace.composition.reply_checks[0][0].evidence, "1,500");
}

#[tokio::test]
async fn a_template_tied_to_a_guideline_is_offered_only_while_it_matches() {
    let definition = inline(
        r#"
agent: {name: Bank, composition_mode: canned_strict}
guidelines:
  - {id: lost, condition: The customer lost their card, action: Block the card, canned_responses: [card_lost]}
canned_responses:
  - {id: greeting, template: "Hello! How can I help with your account today?"}
  - {id: card_lost, template: "I have blocked your card. A new one is on its way."}
"#,
    );
    let model = ScriptedModel::new().when_task(TaskKind::Generation).reply_with(|r| {
        let p = prompt(r);
        let lost = last_customer(&p).contains("lost");
        assert_eq!(p.contains("[card_lost]"), lost, "card_lost offered only while its guideline matches: {p}");
        assert!(p.contains("[greeting]"), "a template tied to nothing is always offered: {p}");
        Ok(json!({"template_id": if lost { "card_lost" } else { "greeting" }, "fit": "high"}))
    });
    let model = Arc::new(with_matching(
        model,
        Arc::new(|c: &str, last: &str, _: &str| c.contains("lost") && last.contains("lost")),
    ));
    let rt = runtime(definition.clone(), model, fixtures(&definition));
    let outcome = turn(&rt, &MemorySession::new(), &Default::default(), "hello there").await;
    assert_eq!(outcome.messages, ["Hello! How can I help with your account today?"]);
    let outcome = turn(&rt, &MemorySession::new(), &Default::default(), "I lost my card").await;
    assert_eq!(outcome.messages, ["I have blocked your card. A new one is on its way."]);
}
