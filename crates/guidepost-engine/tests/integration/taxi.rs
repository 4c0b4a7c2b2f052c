//! Seed 000: taxi booking with forward progress (one and several steps), a correction
//! that backtracks, a tool state, and completion.

use std::sync::Arc;

use guidepost_engine::StagedToolResult;
use guidepost_engine::record::{FastPath, JourneyDecision};
use guidepost_llm::TaskKind;
use guidepost_llm::providers::scripted::{ScriptedModel, schema_is};
use guidepost_testkit::models::InFlight;
use serde_json::json;

use crate::support::*;

fn decide(condition: &str, msg: &str) -> bool {
    let msg = msg.to_lowercase();
    match condition {
        c if c.starts_with("The customer wants to book a taxi") => msg.contains("taxi"),
        c if c.starts_with("The customer corrects a detail") => msg.contains("actually"),
        c if c.starts_with("The customer asks how much") => msg.contains("how much"),
        _ => false,
    }
}

fn taxi_model() -> Arc<ScriptedModel> {
    Arc::new(
        ScriptedModel::new()
            .when(schema_is("ConditionChecks"))
            .reply_with(|req| Ok(checks(req, "## Conditions", decide)))
            .when(schema_is("LowCriticalityChecks"))
            .reply_with(|req| {
                let last = last_customer(req);
                let ids: Vec<String> =
                    items(req, "## Optional").into_iter().filter(|(_, c)| decide(c, &last)).map(|(id, _)| id).collect();
                Ok(json!({ "applies": ids }))
            })
            .when(schema_is("ReapplyChecks"))
            .reply_with(|req| Ok(reapply_none(req)))
            .when(schema_is("JourneySelectionAnswer"))
            .reply_with(|req| {
                let current = current_step(req);
                let msg = last_customer(req).to_lowercase();
                Ok(if msg.contains("actually") {
                    backtrack(step(req, "Ask for the pickup address"), "the customer corrected the pickup")
                } else if current.contains("Ask for the pickup address") && msg.contains("street") {
                    if msg.contains("airport") {
                        advance(
                            vec![step(req, "Ask where"), step(req, "Ask when"), step(req, "Repeat the pickup")],
                            "all details known",
                        )
                    } else {
                        advance(vec![step(req, "Ask where")], "pickup given")
                    }
                } else if current.contains("Ask where") && msg.contains("airport") {
                    if msg.contains("pm") {
                        advance(
                            vec![step(req, "Ask when"), step(req, "Repeat the pickup")],
                            "destination and time given",
                        )
                    } else {
                        advance(vec![step(req, "Ask when")], "destination given")
                    }
                } else if current.contains("Repeat the pickup") && msg.contains("yes") {
                    advance(vec![step(req, "call")], "confirmed")
                } else {
                    stay("waiting for the customer")
                })
            }),
    )
}

#[tokio::test]
async fn booking_progresses_backtracks_on_correction_and_completes() {
    let def = example("taxi");
    let tool = def.tools.iter().find(|t| t.id.name == "book_taxi").unwrap().id.clone();
    let model = taxi_model();
    let matcher = matcher(def, model.clone());
    let mut session = Session::new();

    // 1. activation: the start has a single transition, no selection call
    let ctx = session.customer("I need a taxi please");
    let o = matcher.match_turn(&ctx).await.unwrap();
    assert_eq!(path_of(&o, "book_taxi"), Some(states(&["initial", "pickup"])));
    assert_eq!(o.record.journey("book_taxi").unwrap().fast_path, Some(FastPath::LoneCandidate));
    assert_eq!(model.calls(&TaskKind::JourneySelection), 0);
    session.reply(&o, "Where should I pick you up?");

    // 2. forward progress by one step
    let ctx = session.customer("Pick me up at 12 Main Street");
    let o = matcher.match_turn(&ctx).await.unwrap();
    assert_eq!(path_of(&o, "book_taxi"), Some(states(&["initial", "pickup", "dropoff"])));
    assert_eq!(model.calls(&TaskKind::JourneySelection), 1);
    session.reply(&o, "Where are you going?");

    // 3. the customer answers two questions at once: several steps
    let ctx = session.customer("To the airport, at 6pm");
    let o = matcher.match_turn(&ctx).await.unwrap();
    assert_eq!(path_of(&o, "book_taxi"), Some(states(&["initial", "pickup", "dropoff", "time", "confirm"])));
    assert_eq!(
        o.record.journey("book_taxi").unwrap().decision,
        JourneyDecision::Advanced { steps: states(&["time", "confirm"]) }
    );
    session.reply(&o, "12 Main Street to the airport at 6pm, correct?");

    // 4. a correction backtracks: the path is truncated to the revisited state
    let ctx = session.customer("Actually, my pickup is on Oak Avenue");
    let o = matcher.match_turn(&ctx).await.unwrap();
    assert_eq!(path_of(&o, "book_taxi"), Some(states(&["initial", "pickup"])));
    assert_eq!(o.record.journey("book_taxi").unwrap().decision, JourneyDecision::Backtracked { to: "pickup".into() });
    assert!(o.matched("correction"), "the correction guideline applies too");
    assert_eq!(o.matched_nodes(), vec![("book_taxi", "pickup")]);
    session.reply(&o, "Sure, what's the exact pickup address on Oak Avenue?");

    // 5. everything else is already known: fast-forward to the confirmation
    let ctx = session.customer("5 Oak Street, to the airport at 6pm");
    let o = matcher.match_turn(&ctx).await.unwrap();
    assert_eq!(path_of(&o, "book_taxi"), Some(states(&["initial", "pickup", "dropoff", "time", "confirm"])));
    session.reply(&o, "5 Oak Street to the airport at 6pm, correct?");

    // 6. confirmation: the tool state, then its single exit once the tool ran
    let ctx = session.customer("Yes, book it");
    let o = matcher.match_turn(&ctx).await.unwrap();
    assert_eq!(o.journey_node("book_taxi"), Some("book"));
    assert_eq!(o.tool_enabled().next().unwrap().tools, vec![tool.clone()]);
    let ctx = ctx.with_tool_results(vec![StagedToolResult {
        tool: tool.clone(),
        arguments: json!({"pickup": "5 Oak Street", "dropoff": "airport", "time": "18:00"}),
        result: json!({"booking_id": "TX-1042", "eta_minutes": 7}),
    }]);
    let calls = model.total_calls();
    let o = matcher.rematch(&ctx, &o).await.unwrap();
    assert_eq!(o.journey_node("book_taxi"), Some("booked"));
    assert_eq!(o.record.journey("book_taxi").unwrap().fast_path, Some(FastPath::ToolDone));
    assert_eq!(model.total_calls(), calls, "the tool state's single exit needs no call");
    session.reply(&o, "Booked: TX-1042, your driver arrives in 7 minutes.");

    // 7. completion: the last state's only transition goes to `end`
    let ctx = session.customer("Thanks!");
    let o = matcher.match_turn(&ctx).await.unwrap();
    assert_eq!(o.record.journey("book_taxi").unwrap().decision, JourneyDecision::Completed);
    assert!(!o.journey_paths.contains_key("book_taxi"));
    assert!(o.matched_nodes().is_empty());
}

const FORKED: &str = r#"
agent: { name: Otto }
journeys:
  - id: order
    title: Order
    conditions: [The customer wants to order]
    start: ask_item
    states:
      - id: ask_item
        chat: Ask what they want to order
        next:
          - { to: route, when: The customer named an item }
      - id: route
        fork: true
        next:
          - { to: ask_address, when: The customer wants delivery }
          - { to: tell_store, when: The customer will pick the order up }
      - { id: ask_address, chat: Ask for the delivery address, next: end }
      - { id: tell_store, chat: Tell them the store opening hours, next: end }
"#;

/// The journey selection ends its move on the fork; the fork's exits are then asked one at
/// a time, and `holds` says which hold.
fn forked_model(holds: &'static [&'static str]) -> Arc<ScriptedModel> {
    Arc::new(
        ScriptedModel::new()
            .when(schema_is("ConditionChecks"))
            .reply_with(|req| Ok(checks(req, "## Conditions", |c, _| c.contains("order"))))
            .when(schema_is("ReapplyChecks"))
            .reply_with(|req| Ok(reapply_none(req)))
            .when(schema_is("JourneySelectionAnswer"))
            .reply_with(|req| {
                let text = user(req);
                let fork = text
                    .split("## Steps")
                    .nth(1)
                    .unwrap_or("")
                    .lines()
                    .find_map(|l| {
                        let (id, body) = l.strip_prefix('[')?.split_once(']')?;
                        body.contains("fork").then(|| id.to_string())
                    })
                    .unwrap_or_else(|| panic!("no fork step in:\n{text}"));
                Ok(advance(vec![fork], "item named; the route depends on delivery"))
            })
            .when(schema_is("Verdict"))
            .reply_with(move |req| {
                let text = user(req);
                let statement = text.rsplit("Statement").next().unwrap_or("");
                Ok(json!(if holds.iter().any(|h| statement.contains(h)) { "yes" } else { "no" }))
            }),
    )
}

#[tokio::test]
async fn a_move_that_ends_on_a_fork_goes_on_along_the_exit_that_holds() {
    let m = matcher(inline(FORKED), forked_model(&["pick the order up"]));
    let mut session = Session::new();
    let o = m.match_turn(&session.customer("I want to order")).await.unwrap();
    session.reply(&o, "What would you like to order?");
    let o = m.match_turn(&session.customer("A large pizza, I'll pick it up")).await.unwrap();
    let path = path_of(&o, "order").unwrap();
    assert_eq!(path.last().map(String::as_str), Some("tell_store"), "{path:?}");
}

#[tokio::test]
async fn a_fork_with_no_exit_that_holds_is_not_a_resting_place() {
    let m = matcher(inline(FORKED), forked_model(&[]));
    let mut session = Session::new();
    let o = m.match_turn(&session.customer("I want to order")).await.unwrap();
    session.reply(&o, "What would you like to order?");
    let o = m.match_turn(&session.customer("A large pizza")).await.unwrap();
    // Neither way out holds: the journey stays where it was instead of resting on the fork.
    assert_eq!(path_of(&o, "order"), Some(states(&["initial", "ask_item"])));
    assert!(o.record.journey("order").unwrap().correction.as_deref().unwrap_or("").contains("fork"));
}

/// Judges the taxi journey's conditions and transitions by keywords of the latest message
/// (a street, a destination, a time, a yes, a correction).
fn knows_details(condition: &str, msg: &str) -> bool {
    let msg = msg.to_lowercase();
    match condition {
        c if c.starts_with("The customer wants to book a taxi") => msg.contains("taxi"),
        c if c.contains("gave the pickup address") => msg.contains("street"),
        c if c.contains("gave the destination") => msg.contains("airport"),
        c if c.contains("gave the pickup time") => msg.contains("pm"),
        c if c.contains("confirms the details") => msg.starts_with("yes"),
        c if c.contains("corrects something they said earlier") => msg.contains("actually"),
        _ => false,
    }
}

/// A capable model judging by [`knows_details`]; its journey selection backtracks to the
/// pickup on a correction and otherwise stays.
fn details_model() -> Arc<ScriptedModel> {
    Arc::new(
        ScriptedModel::new()
            .when(schema_is("ConditionChecks"))
            .reply_with(|req| Ok(checks(req, "## Conditions", knows_details)))
            .when(schema_is("LowCriticalityChecks"))
            .reply_json(json!({"applies": []}))
            .when(schema_is("ReapplyChecks"))
            .reply_with(|req| Ok(reapply_none(req)))
            .when(schema_is("JourneySelectionAnswer"))
            .reply_with(|req| {
                let msg = last_customer(req).to_lowercase();
                Ok(if msg.contains("actually") {
                    backtrack(step(req, "Ask for the pickup address"), "the customer corrected the pickup")
                } else if msg.contains("never mind") {
                    json!({"rationale": "the customer dropped the ride", "decision": "exit", "steps": [], "backtrack_to": null})
                } else {
                    stay("nothing new")
                })
            }),
    )
}

/// The same judgement from a small model, one yes-or-no question per condition.
fn small_details_model() -> Arc<ScriptedModel> {
    Arc::new(
        ScriptedModel::new()
            .with_capabilities(guidepost_llm::ModelCapabilities::small_constrained(None))
            .when(schema_is("Verdict"))
            .reply_with(|req| {
                let text = user(req);
                let statement = text.rsplit("Statement:").next().unwrap_or("").trim().trim_start_matches("- ");
                let statement = statement.trim_end_matches(':');
                Ok(json!(if knows_details(statement, &last_customer(req)) { "yes" } else { "no" }))
            }),
    )
}

#[tokio::test]
async fn an_opening_message_that_answers_the_first_questions_fast_forwards_the_journey() {
    for (name, model) in [("capable", details_model()), ("small", small_details_model())] {
        let matcher = matcher(example("taxi"), model.clone());
        // Everything the questions ask, in the message that starts the journey: on to the
        // confirmation, which waits for the customer.
        let o = matcher
            .match_turn(&Session::new().customer("I need a taxi from 12 Main Street to the airport at 6pm"))
            .await
            .unwrap();
        assert_eq!(
            path_of(&o, "book_taxi"),
            Some(states(&["initial", "pickup", "dropoff", "time", "confirm"])),
            "{name}: {:?}",
            o.record.journey("book_taxi")
        );
        assert_eq!(
            o.record.journey("book_taxi").unwrap().decision,
            JourneyDecision::Started { steps: states(&["pickup", "dropoff", "time", "confirm"]) },
            "{name}"
        );
        assert_eq!(o.matched_nodes(), vec![("book_taxi", "confirm")], "{name}");
        assert_eq!(model.calls(&TaskKind::JourneySelection), 0, "{name}: the checks' wave decided it");
        assert_eq!(o.record.waves, 1, "{name}");

        // Part of it: the journey goes as far as the answers reach.
        let o = matcher.match_turn(&Session::new().customer("Taxi from 12 Main Street please")).await.unwrap();
        assert_eq!(path_of(&o, "book_taxi"), Some(states(&["initial", "pickup", "dropoff"])), "{name}");

        // None of it: the journey starts at its first question.
        let o = matcher.match_turn(&Session::new().customer("I need a taxi")).await.unwrap();
        assert_eq!(path_of(&o, "book_taxi"), Some(states(&["initial", "pickup"])), "{name}");
    }
}

#[tokio::test]
async fn details_given_before_they_were_asked_are_not_asked_for_again() {
    let model = small_details_model();
    let matcher = matcher(example("taxi"), model.clone());
    let mut session = Session::new();
    // The destination and the time come before the pickup address: the journey waits for
    // the pickup, and keeps the two answers for when it gets there.
    let first = matcher.match_turn(&session.customer("I need a taxi to the airport at 6pm")).await.unwrap();
    assert_eq!(path_of(&first, "book_taxi"), Some(states(&["initial", "pickup"])));
    assert_eq!(first.journey_answers["book_taxi"].len(), 2, "{:?}", first.journey_answers);
    session.reply(&first, "Where should I pick you up?");
    // The pickup address alone: on past the questions answered before, to the confirmation.
    let second = matcher.match_turn(&session.customer("From 12 Main Street")).await.unwrap();
    assert_eq!(
        path_of(&second, "book_taxi"),
        Some(states(&["initial", "pickup", "dropoff", "time", "confirm"])),
        "{:?}",
        second.record.journey("book_taxi")
    );
    assert!(second.journey_answers.is_empty(), "answers used are dropped: {:?}", second.journey_answers);
    let why = &second.record.journey("book_taxi").unwrap().rationale;
    assert!(why.contains("The customer gave the destination: answered in an earlier message"), "{why}");

    // Without the earlier answers, the same message leaves the journey at the destination.
    let mut forgetful = Session::new();
    forgetful.state.journey_paths = first.journey_paths.clone();
    let o = matcher.match_turn(&forgetful.customer("From 12 Main Street")).await.unwrap();
    assert_eq!(path_of(&o, "book_taxi"), Some(states(&["initial", "pickup", "dropoff"])));

    // What moved the journey is no answer for later: the pickup given at the start is used
    // at once.
    let o = matcher.match_turn(&Session::new().customer("Taxi from 12 Main Street please")).await.unwrap();
    assert_eq!(path_of(&o, "book_taxi"), Some(states(&["initial", "pickup", "dropoff"])));
    assert!(o.journey_answers.is_empty(), "{:?}", o.journey_answers);
}

#[tokio::test]
async fn a_correction_undoes_a_move_that_would_not_read_the_message() {
    let all = ["initial", "pickup", "dropoff", "time", "confirm", "book", "booked"];
    let at_the_end = || {
        let mut session = Session::new();
        session
            .state
            .journey_paths
            .insert("book_taxi".into(), guidepost_core::JourneyPath::from_states(states(&all)).unwrap());
        session
    };
    // `booked` has one unconditional way on (the end): with nothing corrected, the journey
    // completes without a selection call ...
    let model = details_model();
    let matcher = matcher(example("taxi"), model.clone());
    let o = matcher.match_turn(&at_the_end().customer("Thanks!")).await.unwrap();
    assert_eq!(o.record.journey("book_taxi").unwrap().decision, JourneyDecision::Completed);
    assert_eq!(model.calls(&TaskKind::JourneySelection), 0);
    // ... but a customer correcting an earlier answer sends it back to the step that asked.
    let o = matcher.match_turn(&at_the_end().customer("Actually, the pickup is 5 Oak Street")).await.unwrap();
    assert_eq!(o.record.journey("book_taxi").unwrap().decision, JourneyDecision::Backtracked { to: "pickup".into() });
    assert_eq!(model.calls(&TaskKind::JourneySelection), 1);
    assert_eq!(o.record.waves, 2, "the selection waits for the correction's check");
}

#[tokio::test]
async fn a_customer_who_drops_the_request_leaves_the_journey_and_one_who_digresses_stays() {
    let at_pickup = || {
        let mut session = Session::new();
        session.state.journey_paths.insert(
            "book_taxi".into(),
            guidepost_core::JourneyPath::from_states(states(&["initial", "pickup"])).unwrap(),
        );
        session
    };
    let matcher = matcher(example("taxi"), details_model());
    let o = matcher.match_turn(&at_pickup().customer("Oh, never mind, I'll walk")).await.unwrap();
    assert_eq!(o.record.journey("book_taxi").unwrap().decision, JourneyDecision::Exited);
    assert!(!o.journey_paths.contains_key("book_taxi"));
    let o = matcher.match_turn(&at_pickup().customer("Do your drivers take cards?")).await.unwrap();
    assert_eq!(o.record.journey("book_taxi").unwrap().decision, JourneyDecision::Stayed);
    assert_eq!(path_of(&o, "book_taxi"), Some(states(&["initial", "pickup"])));
}

#[tokio::test]
async fn a_correction_the_small_model_is_unsure_of_still_opens_the_full_selection() {
    // The model finds the correction likelier than not (0.55) yet short of its 0.7. The
    // correction question only opens the selection that sees the whole journey, so the
    // likelier answer counts.
    fn p(statement: &str, message: &str) -> f32 {
        match statement {
            s if s.contains("corrects something they said earlier") => 0.55,
            s if knows_details(s, message) => 0.9,
            _ => 0.2,
        }
    }
    let model = leaning_taxi_model(p);
    let matcher = matcher(example("taxi"), model.clone());
    let mut session = taxi_at(&["initial", "pickup", "dropoff", "time", "confirm"]);
    let o = matcher.match_turn(&session.customer("Hmm, the pickup should be 5 Oak Street")).await.unwrap();
    assert_eq!(o.record.journey("book_taxi").unwrap().decision, JourneyDecision::Backtracked { to: "pickup".into() });
    assert_eq!(model.requests().iter().filter(|r| schema_is("JourneySelectionAnswer")(r)).count(), 1);
}

#[tokio::test]
async fn an_answer_moves_on_only_from_the_threshold() {
    // At `pickup`, the model finds "gave the pickup address" likely (0.8) and "gave the
    // destination" likelier than not (0.6) but short of its 0.7: the question just asked is
    // answered, the next one is not taken as answered too.
    fn p(statement: &str, _: &str) -> f32 {
        if statement.contains("pickup address") {
            0.8
        } else if statement.contains("destination") {
            0.6
        } else {
            0.1
        }
    }
    let matcher = matcher(example("taxi"), leaning_taxi_model(p));
    let o = matcher.match_turn(&taxi_at(&["initial", "pickup"]).customer("12 Baker Street")).await.unwrap();
    assert_eq!(path_of(&o, "book_taxi"), Some(states(&["initial", "pickup", "dropoff"])));
    // Short of the threshold (0.6) on the question just asked too: that question's answer is
    // still taken (likelier than not, and the way on only asks the next question), the next
    // question, not asked yet, is not taken as answered.
    fn unsure(statement: &str, _: &str) -> f32 {
        if statement.contains("pickup address") || statement.contains("destination") { 0.6 } else { 0.1 }
    }
    let unsure_matcher = matcher_with(example("taxi"), leaning_taxi_model(unsure), None, Default::default());
    let o = unsure_matcher.match_turn(&taxi_at(&["initial", "pickup"]).customer("12 Baker Street")).await.unwrap();
    assert_eq!(path_of(&o, "book_taxi"), Some(states(&["initial", "pickup", "dropoff"])));
    // Less likely than not: the journey waits.
    fn unlikely(statement: &str, _: &str) -> f32 {
        if statement.contains("pickup address") || statement.contains("destination") { 0.45 } else { 0.1 }
    }
    let unlikely_matcher = matcher_with(example("taxi"), leaning_taxi_model(unlikely), None, Default::default());
    let o = unlikely_matcher.match_turn(&taxi_at(&["initial", "pickup"]).customer("Hmm.")).await.unwrap();
    assert_eq!(path_of(&o, "book_taxi"), Some(states(&["initial", "pickup"])));
}

#[tokio::test]
async fn a_message_that_takes_back_an_answer_goes_to_the_full_selection_whatever_the_question_says() {
    // The model finds no correction (0.2), but "actually" is how customers take things back:
    // the selection that sees the whole journey decides, and goes back to the pickup.
    fn p(statement: &str, message: &str) -> f32 {
        if knows_details(statement, message) && !statement.contains("corrects") { 0.9 } else { 0.2 }
    }
    let model = leaning_taxi_model(p);
    let matcher = matcher(example("taxi"), model.clone());
    let at_confirm = || taxi_at(&["initial", "pickup", "dropoff", "time", "confirm"]);
    let o = matcher.match_turn(&at_confirm().customer("Sorry, the pickup is actually 5 Oak Street")).await.unwrap();
    assert_eq!(o.record.journey("book_taxi").unwrap().decision, JourneyDecision::Backtracked { to: "pickup".into() });
    let full = || model.requests().iter().filter(|r| schema_is("JourneySelectionAnswer")(r)).count();
    assert_eq!(full(), 1);
    // Without such a word, the question's "no" stands.
    let o = matcher.match_turn(&at_confirm().customer("Will the driver help with my luggage?")).await.unwrap();
    assert_eq!(o.record.journey("book_taxi").unwrap().decision, JourneyDecision::Stayed);
    assert_eq!(full(), 1, "no full selection");
}

/// A small model that reports its odds and holds "yes" from 0.7: `p` gives p(yes) from the
/// statement and the latest customer message; a full journey selection goes back to the
/// pickup.
fn leaning_taxi_model(p: fn(&str, &str) -> f32) -> Arc<ScriptedModel> {
    Arc::new(
        ScriptedModel::new()
            .with_capabilities(guidepost_llm::ModelCapabilities::small_constrained(None).with_verdict_threshold(0.7))
            .when(schema_is("Verdict"))
            .reply_odds(move |req| {
                let statement = guidepost_engine::batches::single::statement_of(user(req)).unwrap_or_default();
                Ok(p(statement, &last_customer(req)))
            })
            .when(schema_is("JourneySelectionAnswer"))
            .reply_with(|req| Ok(backtrack(step(req, "Ask for the pickup address"), "the pickup changed"))),
    )
}

/// A session whose taxi journey stands at `states`' last state.
fn taxi_at(path: &[&str]) -> Session {
    let mut session = Session::new();
    session
        .state
        .journey_paths
        .insert("book_taxi".into(), guidepost_core::JourneyPath::from_states(states(path)).unwrap());
    session
}

#[tokio::test]
async fn a_booking_waits_for_the_confirmation_it_asks_for() {
    // A small model reads a confirmation into the pickup time (every statement about the
    // ride sounds true to it). The time moves the journey to the confirmation question, and
    // no further: the booking tool is consequential, and the customer has not been asked to
    // confirm yet.
    fn yes_to_all(statement: &str, _: &str) -> f32 {
        if statement.contains("corrects") || statement.contains("no longer") { 0.1 } else { 0.9 }
    }
    let matcher = matcher(example("taxi"), leaning_taxi_model(yes_to_all));
    let mut at_time = taxi_at(&["initial", "pickup", "dropoff", "time"]);
    let o = matcher.match_turn(&at_time.customer("At 7 pm.")).await.unwrap();
    assert_eq!(path_of(&o, "book_taxi"), Some(states(&["initial", "pickup", "dropoff", "time", "confirm"])));
    assert_eq!(o.tool_enabled().count(), 0, "nothing is booked");

    // Asked to confirm, the customer confirms: the ride is booked.
    let mut at_confirm = taxi_at(&["initial", "pickup", "dropoff", "time", "confirm"]);
    let o = matcher.match_turn(&at_confirm.customer("Yes, that's right.")).await.unwrap();
    assert_eq!(path_of(&o, "book_taxi"), Some(states(&["initial", "pickup", "dropoff", "time", "confirm", "book"])));
    assert_eq!(o.tool_enabled().count(), 1, "the booking tool runs");
}

#[tokio::test]
async fn a_model_that_reads_ahead_is_asked_the_way_on_beside_the_correction_question() {
    fn p(statement: &str, _: &str) -> f32 {
        if statement.contains("pickup time") { 0.9 } else { 0.1 }
    }
    let mut seen = Vec::new();
    for reads_ahead in [false, true] {
        let scripted = leaning_taxi_model(p);
        let journey_calls = |req: &guidepost_llm::ChatRequest| req.task == TaskKind::JourneySelection;
        let model = Arc::new(InFlight::new(scripted.clone(), journey_calls).reading_ahead(reads_ahead));
        let matcher = matcher_with(example("taxi"), model.clone(), None, Default::default());
        let mut session = taxi_at(&["initial", "pickup", "dropoff", "time"]);
        let o = matcher.match_turn(&session.customer("At 7 pm.")).await.unwrap();
        assert_eq!(path_of(&o, "book_taxi"), Some(states(&["initial", "pickup", "dropoff", "time", "confirm"])));
        let journey = o.record.journey("book_taxi").unwrap();
        let statements: Vec<String> = scripted
            .requests_for(&TaskKind::JourneySelection)
            .iter()
            .filter_map(|r| guidepost_engine::batches::single::statement_of(user(r)).map(str::to_string))
            .collect();
        seen.push((journey.rationale.clone(), statements, model.most_in_flight()));
    }
    let (alone, together) = (&seen[0], &seen[1]);
    // The same questions and the same decision, said the same way.
    assert_eq!(together.0, alone.0);
    assert!(alone.0.contains("no correction"), "{}", alone.0);
    assert_eq!(together.1.len(), 3, "the correction, the time's way on, the read-back's way out: {:?}", together.1);
    let mut sorted = (alone.1.clone(), together.1.clone());
    sorted.0.sort();
    sorted.1.sort();
    assert_eq!(sorted.0, sorted.1);
    // One at a time without reading ahead; the correction question and the way on at once with it.
    assert_eq!(alone.2, 1);
    assert_eq!(together.2, 2);
}
