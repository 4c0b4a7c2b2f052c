//! Failures and odd model answers never fail a turn unless every call failed; journey
//! prediction prunes guidelines of unpredicted journeys.

use std::sync::Arc;

use guidepost_engine::record::{JourneyDecision, PredictionReason, Verdict};
use guidepost_engine::{EngineError, MatcherConfig};
use guidepost_llm::providers::hashing::HashingEmbedder;
use guidepost_llm::providers::scripted::{ScriptedModel, schema_is};
use guidepost_llm::{Embedder, LlmError, TaskKind};
use guidepost_testkit::embedders::InFlightEmbedder;
use guidepost_testkit::models::{Held, Hold};
use serde_json::json;

use crate::support::*;

const MIXED: &str = r#"
agent: { name: Otto }
guidelines:
  - id: refund
    condition: The customer asks about refunds
    action: Explain the refund policy
  - id: tone
    condition: Any time
    action: Be brief
    criticality: low
"#;

#[tokio::test]
async fn a_failed_batch_leaves_its_guidelines_unmatched_and_the_turn_goes_on() {
    let model = Arc::new(
        ScriptedModel::new()
            .when(schema_is("ConditionChecks"))
            .reply_text("{\"checks\": [{\"id\": \"1\", \"applies\": \"yes\"}]}")
            .when(schema_is("LowCriticalityChecks"))
            .reply_json(json!({"applies": ["1"]})),
    );
    let matcher = matcher(inline(MIXED), model);
    let o = matcher.match_turn(&Session::new().customer("refund please")).await.unwrap();
    assert!(!o.matched("refund"));
    assert_eq!(o.record.candidate("refund").unwrap().verdict, Verdict::Failed);
    let batch = o.record.candidate("refund").unwrap().batch.unwrap();
    assert!(o.record.batches[batch].error.as_deref().unwrap().contains("schema"));
    assert!(o.matched("tone"));
}

#[tokio::test]
async fn every_call_failing_fails_the_pass() {
    let model = Arc::new(
        ScriptedModel::new()
            .when_task(TaskKind::Matching)
            .fail(LlmError::Timeout { after: std::time::Duration::from_secs(1) }),
    );
    let matcher = matcher(inline(MIXED), model);
    let err = matcher.match_turn(&Session::new().customer("refund please")).await.unwrap_err();
    assert!(matches!(err, EngineError::AllBatchesFailed { failed: 2, .. }), "{err}");
}

#[tokio::test]
async fn unknown_ids_and_missing_verdicts_are_tolerated() {
    let model = Arc::new(
        ScriptedModel::new()
            .when(schema_is("ConditionChecks"))
            .reply_json(json!({"checks": [{"id": "7", "rationale": "?", "applies": true}]}))
            .when(schema_is("LowCriticalityChecks"))
            .reply_json(json!({"applies": ["[1]", "9"]})),
    );
    let matcher = matcher(inline(MIXED), model);
    let o = matcher.match_turn(&Session::new().customer("refund please")).await.unwrap();
    assert_eq!(o.record.candidate("refund").unwrap().verdict, Verdict::NoVerdict);
    assert!(o.matched("tone"), "bracketed ids are understood");
}

#[tokio::test]
async fn an_unreachable_advance_is_corrected_to_its_valid_prefix() {
    let model = Arc::new(
        ScriptedModel::new()
            .when(schema_is("ConditionChecks"))
            .reply_with(|req| Ok(checks(req, "## Conditions", |_, _| false)))
            .when(schema_is("LowCriticalityChecks"))
            .reply_json(json!({"applies": []}))
            .when(schema_is("JourneySelectionAnswer"))
            // from `pickup`: dropoff is reachable, then `booked` is not reachable from dropoff
            .reply_with(|req| Ok(advance(vec![step(req, "Ask where"), step(req, "ride is booked")], "skipping ahead"))),
    );
    let matcher = matcher(example("taxi"), model);
    let mut session = Session::new();
    session
        .state
        .journey_paths
        .insert("book_taxi".into(), guidepost_core::JourneyPath::from_states(states(&["initial", "pickup"])).unwrap());
    let o = matcher.match_turn(&session.customer("12 Main Street")).await.unwrap();
    assert_eq!(path_of(&o, "book_taxi"), Some(states(&["initial", "pickup", "dropoff"])));
    let record = o.record.journey("book_taxi").unwrap();
    assert_eq!(record.decision, JourneyDecision::Advanced { steps: states(&["dropoff"]) });
    assert!(record.correction.as_deref().unwrap().contains("not reachable"));
}

fn many_journeys() -> String {
    let mut yaml = String::from("agent: { name: Otto }\njourneys:\n");
    for (id, topic) in [
        ("returns", "return an item"),
        ("tracking", "track a parcel"),
        ("gift", "check a gift card balance"),
        ("store", "book a store appointment"),
    ] {
        yaml.push_str(&format!(
            "  - id: {id}\n    title: {topic}\n    conditions: [The customer wants to {topic}]\n    start: ask\n    states:\n      - {{ id: ask, chat: Ask the customer for details to {topic}, next: end }}\n    guidelines:\n      - {{ id: {id}_scoped, condition: The customer is upset about {topic}, action: Apologize }}\n"
        ));
    }
    yaml
}

#[tokio::test]
async fn prediction_prunes_guidelines_of_unpredicted_journeys() {
    let model = Arc::new(ScriptedModel::new().when(schema_is("ConditionChecks")).reply_with(|req| {
        Ok(checks(req, "## Conditions", |c, m| c.contains("wants to track") && m.contains("track")))
    }));
    let embedder = Arc::new(InFlightEmbedder::new(HashingEmbedder::new(256), std::time::Duration::from_millis(30)));
    let config = MatcherConfig { journey_top_k: 1, ..MatcherConfig::default() };
    let matcher = matcher_with(inline(&many_journeys()), model.clone(), Some(embedder.clone()), config);
    let mut session = Session::new();
    let o = matcher.match_turn(&session.customer("I want to track a parcel")).await.unwrap();
    let predicted: Vec<&str> = o
        .record
        .predictions
        .iter()
        .filter(|p| p.reason == PredictionReason::Similar)
        .map(|p| p.journey_id.as_str())
        .collect();
    assert_eq!(predicted, vec!["tracking"]);
    assert_eq!(o.record.candidate("returns_scoped").unwrap().verdict, Verdict::Pruned);
    assert_ne!(o.record.candidate("tracking_scoped").unwrap().verdict, Verdict::Pruned);
    assert_eq!(path_of(&o, "tracking"), Some(states(&["initial", "ask"])));
    assert_eq!(o.record.embedding_calls, 2, "journeys once, the conversation once");
    assert_eq!(embedder.most_in_flight(), 2, "both asked for at once: one wave");
    session.reply(&o, "What's the tracking number?");

    // next turn: the journey is active; journey embeddings are cached
    let o = matcher.match_turn(&session.customer("It's 123")).await.unwrap();
    assert_eq!(o.record.embedding_calls, 1);
    assert!(o.record.predictions.iter().any(|p| p.journey_id == "tracking" && p.reason == PredictionReason::Active));
}

#[tokio::test]
async fn the_first_checks_do_not_wait_for_journey_prediction() {
    // Model calls answered so far, read by the embedder when its (slow) answer is ready.
    let answered = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = answered.clone();
    let model = Arc::new(ScriptedModel::new().when(schema_is("ConditionChecks")).reply_with(move |req| {
        seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(checks(req, "## Conditions", |c, m| c.contains("wants to track") && m.contains("track")))
    }));
    let embedder = Arc::new(CountingAtEnd {
        inner: HashingEmbedder::new(256),
        delay: std::time::Duration::from_millis(80),
        answered: answered.clone(),
        seen_at_end: std::sync::Mutex::new(Vec::new()),
    });
    let config = MatcherConfig { journey_top_k: 1, ..MatcherConfig::default() };
    let matcher = matcher_with(inline(&many_journeys()), model.clone(), Some(embedder.clone()), config);
    let o = matcher.match_turn(&Session::new().customer("I want to track a parcel")).await.unwrap();
    let seen = embedder.seen_at_end.lock().unwrap().clone();
    assert!(seen.iter().all(|n| *n >= 1), "the checks were answered before the embeddings came back: {seen:?}");
    // Every journey's condition was checked, not only the predicted one's ...
    for journey in &matcher.agent().definition.journeys {
        let condition = o.record.candidate(&journey.conditions[0].id);
        assert!(condition.is_some_and(|c| c.verdict != Verdict::Pruned), "{}: {condition:?}", journey.id);
    }
    // ... and the predicted journey whose condition held got its scoped guidelines checked.
    assert_eq!(path_of(&o, "tracking"), Some(states(&["initial", "ask"])));
    assert_ne!(o.record.candidate("tracking_scoped").unwrap().verdict, Verdict::Pruned);
    assert_eq!(o.record.candidate("returns_scoped").unwrap().verdict, Verdict::Pruned);
    assert_eq!(o.record.waves, 1, "{:?}", o.record.batches);
    assert_eq!(o.considered_journeys.len(), 4);
}

/// An embedder that answers after `delay` and notes how many model calls were answered by
/// then.
struct CountingAtEnd {
    inner: HashingEmbedder,
    delay: std::time::Duration,
    answered: Arc<std::sync::atomic::AtomicUsize>,
    seen_at_end: std::sync::Mutex<Vec<usize>>,
}

#[async_trait::async_trait]
impl Embedder for CountingAtEnd {
    fn model_id(&self) -> &str {
        "counting-at-end"
    }
    fn dimensions(&self) -> usize {
        self.inner.dimensions()
    }
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, guidepost_llm::LlmError> {
        tokio::time::sleep(self.delay).await;
        self.seen_at_end.lock().unwrap().push(self.answered.load(std::sync::atomic::Ordering::SeqCst));
        self.inner.embed(texts).await
    }
}

#[tokio::test]
async fn journeys_checked_before_the_tools_ran_are_not_embedded_or_checked_again() {
    let model = Arc::new(
        ScriptedModel::new()
            .when(schema_is("ConditionChecks"))
            .reply_with(|req| {
                Ok(checks(req, "## Conditions", |c, m| {
                    (c.contains("wants to track") && m.contains("track"))
                        || (c.contains("wants to return") && tool_results(req).contains("return"))
                }))
            })
            .when(schema_is("JourneySelectionAnswer"))
            .reply_with(|_| Ok(stay("waiting"))),
    );
    let embedder = Arc::new(InFlightEmbedder::new(HashingEmbedder::new(256), std::time::Duration::from_millis(30)));
    let config = MatcherConfig { journey_top_k: 1, ..MatcherConfig::default() };
    let matcher = matcher_with(inline(&many_journeys()), model.clone(), Some(embedder.clone()), config);
    let ctx = Session::new().customer("I want to track a parcel");
    let first = matcher.match_turn(&ctx).await.unwrap();
    assert_eq!(first.considered_journeys.len(), 4, "every condition was checked in the first pass");
    let ctx = ctx.with_tool_results(vec![guidepost_engine::StagedToolResult {
        tool: guidepost_core::ToolId::new("native", "lookup"),
        arguments: json!({}),
        result: json!({"advice": "return an item"}),
    }]);
    let calls = model.total_calls();
    let matching = model.calls(&TaskKind::Matching);
    let second = matcher.rematch(&ctx, &first).await.unwrap();
    assert_eq!(second.record.embedding_calls, 0, "nothing is embedded after the tools ran");
    // What the customer wants is not changed by a lookup: only the condition the result
    // speaks of is asked again, in one call.
    assert_eq!(model.total_calls(), calls + 1);
    let rechecked = user(&model.requests_for(&TaskKind::Matching)[matching]).to_string();
    assert!(rechecked.contains("The customer is upset about return an item"), "{rechecked}");
    assert!(!rechecked.contains("The customer wants to"), "{rechecked}");
    assert_eq!(path_of(&second, "returns"), None);
    assert!(!second.matched("returns_scoped"));
    assert_eq!(path_of(&second, "tracking"), path_of(&first, "tracking"), "the first pass's journey is kept");
}

const ENTAILED_JOURNEY: &str = r#"
agent: { name: Otto }
tags: [claims]
guidelines:
  - id: lost
    condition: The customer says their parcel is lost
    action: Apologize
    entails: ["tag:claims"]
journeys:
  - id: claim
    title: File a claim
    tags: [claims]
    conditions: [The customer wants to file a claim]
    start: ask
    states:
      - { id: ask, chat: Ask for the order number, next: end }
    guidelines:
      - { id: claim_lost, condition: The item in the claim is lost, action: Explain the claim takes two days }
  - id: lost_report
    title: My parcel is lost in transit
    conditions: [The customer reports my parcel is lost]
    start: ask
    states:
      - { id: ask, chat: Ask where they expected it, next: end }
"#;

#[tokio::test]
async fn a_journey_activated_by_entailment_gets_a_second_pass() {
    let model = Arc::new(
        ScriptedModel::new()
            .when(schema_is("ConditionChecks"))
            // the `lost_report` journey's own condition is judged false: only the entailment starts a journey
            .reply_with(|req| {
                Ok(checks(req, "## Conditions", |c, m| {
                    c.contains("lost") && !c.contains("reports") && m.contains("lost")
                }))
            }),
    );
    let embedder: Arc<dyn Embedder> = Arc::new(HashingEmbedder::new(256));
    let config = MatcherConfig { journey_top_k: 1, ..MatcherConfig::default() };
    let matcher = matcher_with(inline(ENTAILED_JOURNEY), model, Some(embedder), config);
    let o = matcher.match_turn(&Session::new().customer("my parcel is lost")).await.unwrap();
    assert!(o.matched("lost"));
    assert_eq!(path_of(&o, "claim"), Some(states(&["initial", "ask"])));
    assert_eq!(o.matched_nodes(), vec![("claim", "ask")]);
    let claim = o.record.predictions.iter().find(|p| p.journey_id == "claim").unwrap();
    assert_eq!(claim.reason, PredictionReason::SecondPass, "the journey was not predicted");
    // its scoped guideline, pruned at first, is checked in the second pass
    assert!(o.matched("claim_lost"));
    assert_eq!(o.record.candidate("claim_lost").unwrap().verdict, Verdict::Matched);
    assert_eq!(o.record.waves, 2);
}

const TWO_FLOWS: &str = r#"
agent: { name: Otto }
journeys:
  - id: address
    title: Change address
    conditions: [The customer wants to change their address]
    start: ask
    states:
      - { id: ask, chat: Ask for the new address, next: [{ to: done, when: The customer gave the address }] }
      - { id: done, chat: Confirm the new address, next: end }
  - id: card
    title: Replace card
    conditions: [The customer wants a new card]
    start: ask
    states:
      - { id: ask, chat: Ask why they need a new card, next: [{ to: done, when: The customer gave a reason }] }
      - { id: done, chat: Confirm the replacement, next: end }
"#;

#[tokio::test]
async fn several_journeys_are_active_at_once() {
    let model = Arc::new(
        ScriptedModel::new()
            .when(schema_is("ConditionChecks"))
            .reply_with(|req| {
                // the journeys' conditions hold; their steps' transitions ("gave the address") do not yet
                Ok(checks(req, "## Conditions", |c, m| {
                    c.contains("wants")
                        && ((c.contains("address") && m.contains("address"))
                            || (c.contains("card") && m.contains("card")))
                }))
            })
            .when(schema_is("JourneySelectionAnswer"))
            .reply_with(|req| {
                let msg = last_customer(req);
                Ok(if user(req).contains("Journey: Change address") && msg.contains("Elm") {
                    advance(vec![step(req, "Confirm the new address")], "address given")
                } else {
                    stay("waiting")
                })
            }),
    );
    let matcher = matcher(inline(TWO_FLOWS), model.clone());
    let mut session = Session::new();
    let o = matcher.match_turn(&session.customer("I moved, new address, and I need a new card")).await.unwrap();
    assert_eq!(path_of(&o, "address"), Some(states(&["initial", "ask"])));
    assert_eq!(path_of(&o, "card"), Some(states(&["initial", "ask"])));
    assert_eq!(o.matched_nodes().len(), 2);
    session.reply(&o, "What's the new address, and why do you need a new card?");

    let o = matcher.match_turn(&session.customer("It's 5 Elm Street")).await.unwrap();
    assert_eq!(o.journey_node("address"), Some("done"));
    assert_eq!(o.journey_node("card"), Some("ask"));
    assert_eq!(model.calls(&TaskKind::JourneySelection), 2);
    assert_eq!(o.record.waves, 1, "both selections run in the same wave");
}

// The clock is paused: it moves only while every task waits, so the time limit below fires
// only if the matcher waits for the check held forever, never because the machine is busy.
#[tokio::test(start_paused = true)]
async fn speculative_work_of_a_journey_whose_condition_failed_is_dropped() {
    // The prediction (instant) picks `tracking`; its scoped check would never answer. The
    // first wave finds no journey condition true, so that check is dropped and the pass ends.
    let scripted = Arc::new(
        ScriptedModel::new()
            .when(schema_is("ConditionChecks"))
            .reply_with(|req| Ok(checks(req, "## Conditions", |_, _| false))),
    );
    let model = Arc::new(Held::new(scripted, |req| {
        let text: String = req.messages.iter().map(|m| m.content.as_str()).collect();
        if text.contains("upset about track a parcel") {
            Hold::Forever
        } else {
            Hold::Delay(std::time::Duration::from_millis(50))
        }
    }));
    let embedder: Arc<dyn Embedder> = Arc::new(HashingEmbedder::new(256));
    let config = MatcherConfig { journey_top_k: 1, ..MatcherConfig::default() };
    let matcher = matcher_with(inline(&many_journeys()), model, Some(embedder), config);
    let ctx = Session::new().customer("I want to track a parcel");
    let o = tokio::time::timeout(std::time::Duration::from_secs(5), matcher.match_turn(&ctx))
        .await
        .expect("the dropped check was waited for")
        .unwrap();
    let predicted: Vec<&str> = o
        .record
        .predictions
        .iter()
        .filter(|p| p.reason == PredictionReason::Similar)
        .map(|p| p.journey_id.as_str())
        .collect();
    assert_eq!(predicted, ["tracking"]);
    assert!(o.journey_paths.is_empty(), "no journey started");
    assert_eq!(o.record.candidate("tracking_scoped").unwrap().verdict, Verdict::Pruned, "its check was dropped");
}
