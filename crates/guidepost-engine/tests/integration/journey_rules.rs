//! Journey rules that hold whatever the model answers: a step that only tells something is
//! said and rested on; a move never rests on a fork; a journey waiting at a tool step still
//! reads the customer's message; a transition is taken only from the model's threshold; and
//! the record says which move was made and why.

use std::sync::Arc;

use guidepost_core::{JourneyPath, ToolId};
use guidepost_engine::batches::single::{choices_of, statement_of};
use guidepost_engine::record::JourneyDecision;
use guidepost_engine::{MatcherConfig, StagedToolResult};
use guidepost_llm::ModelCapabilities;
use guidepost_llm::providers::scripted::{ScriptedModel, schema_is};
use serde_json::json;

use crate::support::*;

const SHOP: &str = r#"
agent: { name: Otto }
journeys:
  - id: order
    title: Place an order
    conditions: [The customer wants to order something]
    start: item
    states:
      - { id: item, chat: Ask which item they want, next: [{ to: fee, when: The customer named an item }] }
      - { id: fee, chat: Explain the delivery fee of 5 euros, next: address }
      - { id: address, chat: Ask for the delivery address, next: [{ to: place, when: The customer gave an address }] }
      - { id: place, tool: place_order, next: route }
      - id: route
        fork: true
        next:
          - { to: stock, when: The order was placed }
          - { to: failed, when: The order failed }
      - id: stock
        fork: true
        next:
          - { to: today, when: The item ships today }
          - { to: later, when: The item ships later }
      - { id: today, chat: Confirm the order is placed and ships today, next: end }
      - { id: later, chat: Confirm the order is placed and say when it ships, next: end }
      - { id: failed, chat: Apologize that the order failed, next: end }
tools:
  - name: place_order
    description: Places an order
    parameters: { address: { type: string } }
"#;

/// The shop agent matched by `model`.
fn shop_matcher(model: Arc<ScriptedModel>) -> guidepost_engine::GuidelineMatcher {
    matcher(inline(SHOP), model)
}

/// A small model holding yes from 0.7 whose verdicts give p(yes) = `p(statement, the
/// customer's latest message)`; the caller adds how it answers other questions.
fn verdicts_by(p: impl Fn(&str, &str) -> f32 + Send + Sync + 'static) -> ScriptedModel {
    ScriptedModel::new()
        .with_capabilities(ModelCapabilities::small_constrained(None).with_verdict_threshold(0.7))
        .when(schema_is("Verdict"))
        .reply_odds(move |req| Ok(p(statement_of(user(req)).unwrap_or_default(), &last_customer(req))))
}

/// A small model reporting how likely "yes" was, holding yes from 0.7: `p` gives p(yes) from
/// the statement and the customer's latest message. A choice names the statement `pick`
/// prefers; a journey-wide selection exits.
fn small_model(p: fn(&str, &str) -> f32, pick: fn(&str) -> bool) -> Arc<ScriptedModel> {
    Arc::new(
        verdicts_by(p)
            .when(schema_is("Choice"))
            .reply_with(move |req| {
                let listed = choices_of(user(req)).expect("a numbered list");
                Ok(json!((listed.iter().position(|s| pick(s)).unwrap_or(0) + 1).to_string()))
            })
            .when(schema_is("JourneySelectionAnswer"))
            .reply_with(|_| Ok(json!({"rationale": "the customer gave up", "exits": {}, "decision": "exit", "steps": [], "backtrack_to": null}))),
    )
}

fn at(states_: &[&str]) -> Session {
    let mut session = Session::new();
    session.state.journey_paths.insert("order".into(), JourneyPath::from_states(states(states_)).unwrap());
    session
}

fn place_order() -> ToolId {
    inline(SHOP).tools[0].id.clone()
}

fn placed(ships: &str) -> StagedToolResult {
    StagedToolResult {
        tool: place_order(),
        arguments: json!({"address": "12 Main Street"}),
        result: json!({"placed": true, "ships": ships}),
    }
}

#[tokio::test]
async fn a_step_that_only_tells_something_is_rested_on() {
    // "Explain the fee" has a single unconditional way on, to the address question. The fee
    // is said in this reply and the journey rests there; the address is asked next turn.
    fn p(statement: &str, _: &str) -> f32 {
        if statement == "The customer named an item" { 0.9 } else { 0.1 }
    }
    let matcher = matcher(inline(SHOP), small_model(p, |_| true));
    let mut session = at(&["initial", "item"]);
    let o = matcher.match_turn(&session.customer("A blue kettle, please.")).await.unwrap();
    assert_eq!(path_of(&o, "order"), Some(states(&["initial", "item", "fee"])));
    let nodes = o.matched_nodes();
    assert_eq!(nodes, [("order", "fee")], "only the fee is said in this reply");
    session.reply(&o, "The delivery fee is 5 euros.");
    let next = matcher.match_turn(&session.customer("Fine.")).await.unwrap();
    assert_eq!(path_of(&next, "order").unwrap().last().map(String::as_str), Some("address"));
}

#[tokio::test]
async fn forks_in_a_row_are_decided_after_the_tool_ran() {
    // The order is placed (the tool ran in this turn's first pass): the tool step's one way on
    // leads to a fork, whose chosen exit leads to another fork. Neither is a place to rest.
    fn p(statement: &str, _: &str) -> f32 {
        match statement {
            "The customer gave an address" | "The order was placed" | "The item ships today" => 0.9,
            _ => 0.1,
        }
    }
    // Asked one exit at a time (each fork's exits compared is tested below).
    let each = MatcherConfig { compare_exits: false, ..MatcherConfig::default() };
    let matcher = matcher_with(inline(SHOP), small_model(p, |_| true), None, each);
    let mut session = at(&["initial", "item", "fee", "address"]);
    let ctx = session.customer("12 Main Street");
    let first = matcher.match_turn(&ctx).await.unwrap();
    assert_eq!(path_of(&first, "order").unwrap().last().map(String::as_str), Some("place"));
    let ctx = ctx.with_tool_results(vec![placed("today")]);
    let second = matcher.rematch(&ctx, &first).await.unwrap();
    assert_eq!(
        path_of(&second, "order"),
        Some(states(&["initial", "item", "fee", "address", "place", "route", "stock", "today"]))
    );
    let record = second.record.journey("order").unwrap();
    assert!(record.rationale.contains("The item ships today: yes (p 0.90"), "{}", record.rationale);
}

#[tokio::test]
async fn a_fork_whose_exits_all_fall_short_is_decided_by_choice() {
    // At the second fork the model is unsure of both exits (0.55 and 0.3): a fork cannot be
    // rested on, so it is asked which one holds, and names "ships later".
    fn p(statement: &str, _: &str) -> f32 {
        match statement {
            "The order was placed" => 0.9,
            "The item ships today" => 0.55,
            "The item ships later" => 0.3,
            _ => 0.1,
        }
    }
    let matcher = matcher(inline(SHOP), small_model(p, |s| s.contains("later")));
    let mut session = at(&["initial", "item", "fee", "address", "place"]);
    let ctx = session.customer("Ok, go ahead.").with_tool_results(vec![placed("next week")]);
    let o = matcher.match_turn(&ctx).await.unwrap();
    assert_eq!(path_of(&o, "order").unwrap().last().map(String::as_str), Some("later"));
    let rationale = &o.record.journey("order").unwrap().rationale;
    assert!(rationale.contains("which holds: The item ships later"), "{rationale}");
}

#[tokio::test]
async fn a_journey_waiting_at_a_tool_step_reads_a_changed_request() {
    // The order could not be placed last turn (no address); the journey waits at the tool
    // step. The customer now takes the request back: the correction question is asked beside
    // the checks, and the journey-wide selection lets the journey go.
    fn p(statement: &str, message: &str) -> f32 {
        if statement.contains("changes or corrects") && message.contains("rather not") { 0.8 } else { 0.1 }
    }
    let model = small_model(p, |_| true);
    let matcher = matcher(inline(SHOP), model.clone());
    let mut session = at(&["initial", "item", "fee", "address", "place"]);
    let o = matcher.match_turn(&session.customer("Hm, I'd rather not order it after all.")).await.unwrap();
    assert_eq!(o.record.journey("order").unwrap().decision, JourneyDecision::Exited);
    assert!(o.journey_paths.is_empty());
    // A message that changes nothing leaves it waiting for its tool.
    let mut session = at(&["initial", "item", "fee", "address", "place"]);
    let o = matcher.match_turn(&session.customer("It's 12 Main Street.")).await.unwrap();
    assert_eq!(path_of(&o, "order").unwrap().last().map(String::as_str), Some("place"));
    assert_eq!(o.tool_enabled().count(), 1, "the tool is called");
}

/// A small model that takes every message for a correction (0.8), finds "12 Main Street" an
/// address (0.9), and answers the journey-wide selection with `full`.
fn takes_it_for_a_correction(full: serde_json::Value) -> Arc<ScriptedModel> {
    fn p(statement: &str, message: &str) -> f32 {
        match statement {
            s if s.contains("changes or corrects") => 0.8,
            "The customer gave an address" if message.contains("Main Street") => 0.9,
            _ => 0.1,
        }
    }
    Arc::new(verdicts_by(p).when(schema_is("JourneySelectionAnswer")).reply_with(move |_| Ok(full.clone())))
}

/// A journey-wide answer that names the current step `current` and then a step that does not
/// exist: a move the graph does not allow.
fn nowhere(current: &str) -> serde_json::Value {
    json!({"rationale": "moves on", "exits": {}, "decision": "advance", "steps": [current, "99"], "backtrack_to": null})
}

fn staying() -> serde_json::Value {
    json!({"rationale": "not yet", "exits": {}, "decision": "stay", "steps": [], "backtrack_to": null})
}

#[tokio::test]
async fn a_correction_cue_that_finds_no_step_to_go_back_to_still_reads_the_answer() {
    // The model takes the address for a correction of something said earlier; the
    // journey-wide selection then names no move the graph allows. The address still answers
    // the question the journey stands at.
    let model = takes_it_for_a_correction(nowhere("3"));
    let message = || at(&["initial", "item", "fee", "address"]).customer("And it goes to 12 Main Street.");
    let o = shop_matcher(model.clone()).match_turn(&message()).await.unwrap();
    assert_eq!(path_of(&o, "order").unwrap().last().map(String::as_str), Some("place"));
    let record = o.record.journey("order").unwrap();
    assert!(record.rationale.contains("the fuller look went nowhere, walked on"), "{}", record.rationale);
    assert!(model.requests().iter().any(|r| schema_is("JourneySelectionAnswer")(r)), "the fuller look was asked");
    // A fuller look that chooses to stay is followed.
    let o = shop_matcher(takes_it_for_a_correction(staying())).match_turn(&message()).await.unwrap();
    assert_eq!(path_of(&o, "order").unwrap().last().map(String::as_str), Some("address"));
}

#[tokio::test]
async fn a_move_made_without_reading_the_message_stands_when_the_correction_look_finds_nothing() {
    // The fee was told last turn; the journey moves on to the address question without
    // reading the message, and the checks find the address given. The model also takes the
    // message for a correction, but the journey-wide look names no move the graph allows: the
    // move and the answer stand, as without the cue.
    let model = takes_it_for_a_correction(nowhere("2"));
    let message = || at(&["initial", "item", "fee"]).customer("Send it to 12 Main Street.");
    let o = shop_matcher(model.clone()).match_turn(&message()).await.unwrap();
    assert!(model.requests().iter().any(|r| schema_is("JourneySelectionAnswer")(r)), "the fuller look was asked");
    assert_eq!(path_of(&o, "order"), Some(states(&["initial", "item", "fee", "address", "place"])));
    let record = o.record.journey("order").unwrap();
    let noted = "the fuller look after a correction cue went nowhere (moves on)";
    assert!(record.rationale.contains(noted), "{}", record.rationale);
    // A fuller look that chooses to stay is followed.
    let o = shop_matcher(takes_it_for_a_correction(staying())).match_turn(&message()).await.unwrap();
    assert_eq!(path_of(&o, "order"), Some(states(&["initial", "item", "fee"])));
}

/// The shop agent whose order placing is consequential.
fn consequential_shop() -> guidepost_core::AgentDefinition {
    inline(&SHOP.replace("description: Places an order", "description: Places an order\n    consequential: true"))
}

#[tokio::test]
async fn a_transition_short_of_the_threshold_is_not_taken_and_the_record_says_so() {
    // At the address question, the model leans towards "an address was given" (0.62) but not
    // up to its 0.7, and the way on places the order: the journey stays, and the record says
    // it stayed and why. (A single exit gets no second look: there is nothing to compare it
    // with.)
    fn p(statement: &str, _: &str) -> f32 {
        if statement == "The customer gave an address" { 0.62 } else { 0.1 }
    }
    let model = small_model(p, |_| true);
    let matcher = matcher(consequential_shop(), model.clone());
    let o =
        matcher.match_turn(&at(&["initial", "item", "fee", "address"]).customer("Near the station.")).await.unwrap();
    assert_eq!(path_of(&o, "order").unwrap().last().map(String::as_str), Some("address"));
    let record = o.record.journey("order").unwrap();
    assert_eq!(record.decision, JourneyDecision::Stayed);
    assert!(record.rationale.starts_with("stayed at `address`"), "{}", record.rationale);
    assert!(
        record.rationale.contains("The customer gave an address: no (p 0.62, yes from 0.70)"),
        "{}",
        record.rationale
    );
    assert!(model.requests().iter().all(|r| !schema_is("Choice")(r)), "no comparison was asked");
}

/// A ride booked after a read-back (consequential), a greeting by name with the closing
/// question, and an order lookup whose result decides the way on.
const RIDE: &str = r#"
agent: { name: Rita }
journeys:
  - id: ride
    title: Book a ride
    conditions: [The customer wants a ride]
    start: time
    states:
      - id: time
        chat: Ask when they want to be picked up
        next: [{ to: confirm, when: The customer gave the time }]
      - id: confirm
        chat: Repeat the time and ask the customer to confirm
        next:
          - { to: book, when: The customer confirms }
          - { to: end, when: The customer no longer wants the ride }
      - { id: book, tool: book_ride, next: booked }
      - { id: booked, chat: Tell the customer the ride is booked, next: wrap }
      - { id: wrap, chat: Ask the customer if there is anything else you can help with, next: end }
  - id: greet
    title: Greet by name
    conditions: [The customer says hello]
    start: name
    states:
      - id: name
        chat: Ask for their name
        next: [{ to: hello, when: The customer gave their name }]
      - { id: hello, chat: Tell the customer they are welcome, next: wrap }
      - { id: wrap, chat: Ask the customer if there is anything else you can help with, next: end }
  - id: lookup
    title: Look up an order
    conditions: [The customer asks about an order]
    start: number
    states:
      - id: number
        chat: Ask for the order number
        next: [{ to: find, when: The customer gave the order number }]
      - id: find
        tool: find_order
        next:
          - { to: found, when: The order was found }
          - { to: missing, when: The order was not found }
      - { id: found, chat: Tell the customer the order status, next: end }
      - { id: missing, chat: Tell the customer the order was not found, next: end }
tools:
  - { name: book_ride, description: Books the ride, consequential: true }
  - { name: find_order, description: Finds an order }
"#;

#[test]
fn the_step_after_an_answer_is_told_from_the_journey_s_first_way_on() {
    let agent = guidepost_engine::CompiledAgent::new(Arc::new(inline(RIDE)));
    let g = agent.journey("ride").unwrap();
    assert_eq!(g.after_answer("time"), Some(vec!["confirm"]));
    // The first way on, through the tool step to the step that tells its result (and the
    // closing question after it).
    assert_eq!(g.after_answer("confirm"), Some(vec!["book", "booked", "wrap"]));
    // A step that tells asks nothing; a step that runs a tool is no question.
    assert_eq!(g.after_answer("booked"), None);
    assert_eq!(g.after_answer("book"), None);
    // A step that tells, with the closing question after it, is told with the question.
    assert_eq!(agent.journey("greet").unwrap().after_answer("name"), Some(vec!["hello", "wrap"]));
    // A tool step whose result decides the way on: the step after it is not known.
    assert_eq!(agent.journey("lookup").unwrap().after_answer("number"), None);
}

#[tokio::test]
async fn a_question_only_reached_is_not_asked_about_its_way_to_a_consequential_step() {
    // "At 7 pm." answers the time question and reaches the read-back, whose ways on book the
    // ride (consequential) or end the journey. The booking cannot be entered from a question
    // not yet asked, so only the way out is asked about; the journey waits at the read-back.
    fn p(statement: &str, _: &str) -> f32 {
        // A small model reads a confirmation into the time as well.
        match statement {
            "The customer wants a ride" | "The customer gave the time" | "The customer confirms" => 0.9,
            _ => 0.1,
        }
    }
    let verdicts_asked = |model: &ScriptedModel| -> Vec<String> {
        model
            .requests()
            .iter()
            .filter(|r| schema_is("Verdict")(r))
            .filter_map(|r| statement_of(user(r)).map(str::to_string))
            .collect()
    };
    let matcher_with_model = |model: &Arc<ScriptedModel>| matcher(inline(RIDE), model.clone());
    let model = small_model(p, |_| true);
    let matcher = matcher_with_model(&model);
    let mut session = Session::new();
    session.state.journey_paths.insert("ride".into(), JourneyPath::from_states(states(&["initial", "time"])).unwrap());
    let o = matcher.match_turn(&session.customer("At 7 pm.")).await.unwrap();
    assert_eq!(path_of(&o, "ride"), Some(states(&["initial", "time", "confirm"])));
    let asked = verdicts_asked(&model);
    assert!(asked.iter().any(|s| s == "The customer no longer wants the ride"), "{asked:?}");
    assert!(!asked.iter().any(|s| s == "The customer confirms"), "{asked:?}");
    // The same where the journey starts: the checks of the steps ahead leave it out too.
    let model = small_model(p, |_| true);
    let o = matcher_with_model(&model).match_turn(&Session::new().customer("A ride at 7 pm, please.")).await.unwrap();
    assert_eq!(path_of(&o, "ride"), Some(states(&["initial", "time", "confirm"])));
    let asked = verdicts_asked(&model);
    assert!(asked.iter().any(|s| s == "The customer gave the time"), "{asked:?}");
    assert!(!asked.iter().any(|s| s == "The customer confirms"), "{asked:?}");
    // Where the journey rested at the read-back, the confirmation is asked about and books.
    let mut session = Session::new();
    session
        .state
        .journey_paths
        .insert("ride".into(), JourneyPath::from_states(states(&["initial", "time", "confirm"])).unwrap());
    let o = matcher.match_turn(&session.customer("Yes.")).await.unwrap();
    assert_eq!(path_of(&o, "ride"), Some(states(&["initial", "time", "confirm", "book"])));
}

#[tokio::test]
async fn the_answer_to_the_question_asked_is_taken_when_likelier_than_not() {
    // "Something blue, please." after "Which item do you want?": the model puts it at 0.61 of
    // naming an item, short of its 0.7. The journey rested at that question and its one way on
    // only explains the fee, so the answer is taken: asking the same question again would
    // leave the journey a step behind the customer.
    fn p(statement: &str, last: &str) -> f32 {
        match (statement, last) {
            ("The customer named an item", "Something blue, please.") => 0.61,
            ("The customer gave an address", _) => 0.61,
            _ => 0.1,
        }
    }
    let model = small_model(p, |_| true);
    let matcher = matcher(consequential_shop(), model.clone());
    let o = matcher.match_turn(&at(&["initial", "item"]).customer("Something blue, please.")).await.unwrap();
    assert_eq!(path_of(&o, "order"), Some(states(&["initial", "item", "fee"])));
    let record = o.record.journey("order").unwrap();
    assert!(record.rationale.contains("the answer to the question asked, likelier than not"), "{}", record.rationale);
    // Less likely than not, it stays.
    let o = matcher.match_turn(&at(&["initial", "item"]).customer("What do you sell?")).await.unwrap();
    assert_eq!(path_of(&o, "order"), Some(states(&["initial", "item"])));
    // A question this move only reached (not yet asked) is not answered at 0.61: after the
    // fee, "Fine." goes on to the address question and waits there.
    let o = matcher.match_turn(&at(&["initial", "item", "fee"]).customer("Fine.")).await.unwrap();
    assert_eq!(path_of(&o, "order").unwrap().last().map(String::as_str), Some("address"));
    assert!(model.requests().iter().all(|r| !schema_is("Choice")(r)), "no comparison was asked");
}

#[tokio::test]
async fn a_move_states_where_it_went() {
    fn p(statement: &str, _: &str) -> f32 {
        if statement == "The customer gave an address" { 0.85 } else { 0.1 }
    }
    let matcher = matcher(inline(SHOP), small_model(p, |_| true));
    let o = matcher.match_turn(&at(&["initial", "item", "fee", "address"]).customer("12 Main Street")).await.unwrap();
    let record = o.record.journey("order").unwrap();
    assert!(record.rationale.starts_with("moved to `place`"), "{}", record.rationale);
    assert!(
        record.rationale.contains("The customer gave an address: yes (p 0.85, yes from 0.70)"),
        "{}",
        record.rationale
    );
}

const LOOKUP: &str = r#"
agent: { name: Sky }
journeys:
  - id: weather
    title: Weather
    conditions: [The customer wants to know the weather]
    start: lookup
    states:
      - { id: lookup, tool: get_weather, next: report }
      - id: report
        chat: Tell the weather and ask whether to look up another city
        next:
          - { to: lookup, when: The customer asks about a city }
          - { to: end, when: The customer wants no more lookups }
tools:
  - name: get_weather
    description: Looks up the weather
    parameters: { city: { type: string } }
"#;

fn weather_at_report() -> Session {
    let mut session = Session::new();
    let path = JourneyPath::from_states(states(&["initial", "lookup", "report"])).unwrap();
    session.state.journey_paths.insert("weather".into(), path);
    session
}

/// A model whose yes-or-no answers on the weather exits give p(yes) = `p(statement, the
/// customer's latest message)`, and which, set the exits side by side, names what the message
/// says: "No more, thanks." wants no more lookups, "And in Lyon?" asks about a city, anything
/// else none of these.
fn names_what_the_message_says(p: fn(&str, &str) -> f32) -> Arc<ScriptedModel> {
    Arc::new(verdicts_by(p).when(schema_is("Choice")).reply_with(move |req| {
        let listed = choices_of(user(req)).expect("a numbered list");
        let wanted = match last_customer(req).as_str() {
            "No more, thanks." => "The customer wants no more lookups",
            "And in Lyon?" => "The customer asks about a city",
            _ => "None of the statements above is true",
        };
        Ok(json!((listed.iter().position(|s| *s == wanted).expect("offered") + 1).to_string()))
    }))
}

/// Asked one exit at a time, this model affirms "asks about a city" for any message and
/// denies "wants no more lookups"; set side by side it names what the message says.
fn one_at_a_time_wrong() -> Arc<ScriptedModel> {
    fn p(statement: &str, _: &str) -> f32 {
        if statement == "The customer asks about a city" { 0.8 } else { 0.2 }
    }
    names_what_the_message_says(p)
}

#[tokio::test]
async fn exits_compared_side_by_side_take_the_one_the_message_gives_or_none() {
    let compared = MatcherConfig { compare_exits: true, ..MatcherConfig::default() };
    let last = |o: &guidepost_engine::MatchingOutcome| path_of(o, "weather").and_then(|p| p.last().cloned());
    // One question per exit: the wrong exit holds.
    let one_at_a_time = MatcherConfig { compare_exits: false, ..MatcherConfig::default() };
    let each = matcher_with(inline(LOOKUP), one_at_a_time_wrong(), None, one_at_a_time);
    let o = each.match_turn(&weather_at_report().customer("No more, thanks.")).await.unwrap();
    assert_eq!(last(&o).as_deref(), Some("lookup"), "one exit at a time takes the wrong way");
    // Compared, with "none of these" beside them.
    let matcher = matcher_with(inline(LOOKUP), one_at_a_time_wrong(), None, compared);
    let o = matcher.match_turn(&weather_at_report().customer("No more, thanks.")).await.unwrap();
    assert_eq!(last(&o), None, "the journey ended");
    let record = o.record.journey("weather").unwrap();
    assert!(record.rationale.contains("compared: The customer asks about a city (p 0.00)"), "{}", record.rationale);
    assert!(
        record.rationale.contains("None of the statements above is true (p 0.00); on to `end`"),
        "{}",
        record.rationale
    );
    let o = matcher.match_turn(&weather_at_report().customer("And in Lyon?")).await.unwrap();
    assert_eq!(last(&o).as_deref(), Some("lookup"));
    let o = matcher.match_turn(&weather_at_report().customer("What a lovely day.")).await.unwrap();
    assert_eq!(last(&o).as_deref(), Some("report"), "none holds: the journey waits at its question");
    assert!(o.record.journey("weather").unwrap().rationale.contains("none holds"));
}

#[tokio::test]
async fn exits_the_questions_left_unsure_or_contested_get_a_second_look() {
    // One question per exit (the default): "And in Lyon?" is put at 0.6 of asking about a
    // city, short of 0.7; "No more, thanks." is found both to ask about a city and to want no
    // more lookups. Set side by side, the model names what the message says. "What a lovely
    // day." is denied both ways with no doubt: no second look, the journey waits.
    fn p(statement: &str, message: &str) -> f32 {
        match (message, statement) {
            ("And in Lyon?", "The customer asks about a city") => 0.6,
            ("No more, thanks.", _) => 0.75,
            _ => 0.1,
        }
    }
    let model = || names_what_the_message_says(p);
    let last = |o: &guidepost_engine::MatchingOutcome| path_of(o, "weather").and_then(|p| p.last().cloned());
    let scripted = model();
    let matcher = matcher_with(inline(LOOKUP), scripted.clone(), None, MatcherConfig::default());
    let o = matcher.match_turn(&weather_at_report().customer("And in Lyon?")).await.unwrap();
    assert_eq!(last(&o).as_deref(), Some("lookup"));
    let rationale = &o.record.journey("weather").unwrap().rationale;
    assert!(rationale.contains("unsure: a second look; compared: The customer asks about a city"), "{rationale}");
    let choices = |m: &ScriptedModel| m.requests().iter().filter(|r| schema_is("Choice")(r)).count();
    assert_eq!(choices(&scripted), 2, "two exits and none of these: asked in both orders");
    let o = matcher.match_turn(&weather_at_report().customer("No more, thanks.")).await.unwrap();
    assert_eq!(last(&o), None, "the journey ended");
    assert!(o.record.journey("weather").unwrap().rationale.contains("contested: a second look"));
    let before = choices(&scripted);
    let o = matcher.match_turn(&weather_at_report().customer("What a lovely day.")).await.unwrap();
    assert_eq!(last(&o).as_deref(), Some("report"), "the journey waits at its question");
    assert_eq!(choices(&scripted), before, "no second look where the answers were sure");
    // Without it, the unsure answer leaves the journey where it was.
    let off = MatcherConfig { second_look: false, ..MatcherConfig::default() };
    let matcher = matcher_with(inline(LOOKUP), model(), None, off);
    let o = matcher.match_turn(&weather_at_report().customer("And in Lyon?")).await.unwrap();
    assert_eq!(last(&o).as_deref(), Some("report"));
}

/// [`LOOKUP`] with the report told in a step of its own and the question asked after it.
fn report_then_ask() -> guidepost_core::AgentDefinition {
    let question = "      - id: report\n        chat: Tell the weather and ask whether to look up another city\n";
    let told_then_asked = "      - { id: report, chat: Tell the weather, next: more }\n      - id: more\n        chat: Ask whether to look up another city\n";
    assert!(LOOKUP.contains(question));
    inline(&LOOKUP.replace(question, told_then_asked))
}

#[tokio::test]
async fn a_move_made_without_reading_the_message_gets_a_second_look_where_its_checks_were_unsure() {
    // The report was told and rested on; the unconditional move on to "more" does not read
    // "And in Lyon?", whose check puts "asks about a city" at 0.6: compared side by side, it
    // holds, and the move goes on to the lookup in the same pass.
    fn p(statement: &str, message: &str) -> f32 {
        match (message, statement) {
            ("And in Lyon?", "The customer asks about a city") => 0.6,
            _ => 0.1,
        }
    }
    let model = names_what_the_message_says(p);
    let at_report = || {
        let mut session = Session::new();
        let path = JourneyPath::from_states(states(&["initial", "lookup", "report"])).unwrap();
        session.state.journey_paths.insert("weather".into(), path);
        session
    };
    let matcher = matcher_with(report_then_ask(), model.clone(), None, MatcherConfig::default());
    let o = matcher.match_turn(&at_report().customer("And in Lyon?")).await.unwrap();
    assert_eq!(path_of(&o, "weather").and_then(|p| p.last().cloned()).as_deref(), Some("lookup"));
    let rationale = &o.record.journey("weather").unwrap().rationale;
    assert!(rationale.contains("at `more`, unsure: a second look; compared:"), "{rationale}");
    // A message the checks are sure of moves nothing and asks nothing more.
    let choices = model.requests().iter().filter(|r| schema_is("Choice")(r)).count();
    let o = matcher.match_turn(&at_report().customer("Nice.")).await.unwrap();
    assert_eq!(path_of(&o, "weather").and_then(|p| p.last().cloned()).as_deref(), Some("more"));
    assert_eq!(model.requests().iter().filter(|r| schema_is("Choice")(r)).count(), choices);
    // Without the second look, the unsure check leaves the journey at the question.
    let off = MatcherConfig { second_look: false, ..MatcherConfig::default() };
    let matcher = matcher_with(report_then_ask(), model, None, off);
    let o = matcher.match_turn(&at_report().customer("And in Lyon?")).await.unwrap();
    assert_eq!(path_of(&o, "weather").and_then(|p| p.last().cloned()).as_deref(), Some("more"));
}

const PLAN: &str = r#"
agent: { name: Tess }
journeys:
  - id: plan
    title: Change plan
    conditions: [The customer wants another plan]
    start: ask_plan
    states:
      - { id: ask_plan, chat: Ask which plan they want, next: [{ to: confirm, when: The customer chose a plan }] }
      - id: confirm
        chat: Repeat the plan and ask the customer to confirm
        next:
          - { to: switch, when: The customer confirms the change }
          - { to: ask_plan, when: The customer wants a different plan }
      - { id: switch, chat: Say the plan is switched, next: end }
"#;

#[tokio::test]
async fn a_move_never_comes_back_and_a_question_it_only_reached_needs_a_sure_answer() {
    // "Plus sounds right" chooses a plan: on to the confirmation. There the model leans to
    // "wants a different plan" (0.5, short of 0.7): a question the move only reached is not
    // answered by a lean, and a move never comes back to where it began.
    let model = Arc::new(
        verdicts_by(|statement, _| if statement == "The customer chose a plan" { 0.9 } else { 0.1 })
            .when(schema_is("Choice"))
            .reply_label_odds(|req| {
                let listed = choices_of(user(req)).expect("a numbered list");
                Ok(listed
                    .iter()
                    .map(|s| match *s {
                        "The customer chose a plan" => 0.9,
                        "The customer wants a different plan" => 0.5,
                        "The customer confirms the change" => 0.4,
                        _ => 0.05,
                    })
                    .collect())
            }),
    );
    let compared = MatcherConfig { compare_exits: true, ..MatcherConfig::default() };
    let matcher = matcher_with(inline(PLAN), model, None, compared);
    let mut session = Session::new();
    session
        .state
        .journey_paths
        .insert("plan".into(), JourneyPath::from_states(states(&["initial", "ask_plan"])).unwrap());
    let o = matcher.match_turn(&session.customer("Plus sounds right.")).await.unwrap();
    assert_eq!(path_of(&o, "plan"), Some(states(&["initial", "ask_plan", "confirm"])));
    let rationale = &o.record.journey("plan").unwrap().rationale;
    assert!(rationale.contains("short of 0.70, none taken"), "{rationale}");
}
