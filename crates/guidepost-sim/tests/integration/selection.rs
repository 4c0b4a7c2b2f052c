//! Unified selection, satisfaction, and the judge, end to end through `run_trajectory`.

use guidepost_llm::providers::scripted::schema_is;
use guidepost_llm::{ChatRequest, TaskKind};
use guidepost_sim::StopReason;
use guidepost_sim::observations::EngineObservations;
use guidepost_sim::runner::run_trajectory;
use guidepost_sim::satisfaction::SatisfactionMethod;
use guidepost_sim::selection::RANKING_THRESHOLD;
use guidepost_sim::steps::expr::Expr;
use guidepost_sim::steps::{StepDefinition, StepStatus};
use guidepost_sim::trajectory::SelectionMethod;
use guidepost_sim::{AgentTurn, EngineExpectation};

use crate::support::*;

fn methods(result: &guidepost_sim::RunResult) -> Vec<(SelectionMethod, Option<String>)> {
    result.traces.iter().map(|t| (t.selection.method, t.step_id.clone())).collect()
}

#[tokio::test]
async fn preconditions_come_first_in_graph_order_and_skip_the_ranker() {
    let model = Models::new().customer(vec![say("hi")]).ranking(vec![("b", 0.9)]).judge(true).build();
    let steps = vec![
        StepDefinition::new("a", "Say hello"),
        StepDefinition::new("b", "Ask about prices"),
        StepDefinition::new("c", "Give the address").after("a"),
        StepDefinition::new("d", "Confirm").after("c"),
    ];
    let setup = setup(trajectory(Some(graph(steps, &["d"])), Some(10)));
    let result = run_trajectory(&setup, &mut ScriptedAgent::echo(), &env(&model, None)).await;
    assert_eq!(result.reason, StopReason::GoalReached, "{}", result.summary);
    assert_eq!(
        methods(&result),
        vec![
            (SelectionMethod::Start, Some("a".into())),
            (SelectionMethod::PreconditionsOrdered, Some("c".into())),
            (SelectionMethod::PreconditionsOrdered, Some("d".into())),
        ]
    );
    assert_eq!(model.requests().iter().filter(|r| r.schema_name() == Some("StepRanking")).count(), 0);
    assert_eq!(result.steps.iter().find(|s| s.step_id == "b").unwrap().status, StepStatus::Idle);
}

#[tokio::test]
async fn ranking_keeps_candidates_at_the_threshold_and_drops_those_below() {
    assert!((RANKING_THRESHOLD - 0.5).abs() < f64::EPSILON);
    let model = Models::new()
        .customer(vec![say("hi")])
        .ranking(vec![("b", 0.49), ("c", 0.5), ("ghost", 0.99)])
        .judge(true)
        .build();
    let steps =
        vec![StepDefinition::new("a", "Say hello"), StepDefinition::new("b", "Ask"), StepDefinition::new("c", "Book")];
    let setup = setup(trajectory(Some(graph(steps, &["c"])), Some(10)));
    let result = run_trajectory(&setup, &mut ScriptedAgent::echo(), &env(&model, None)).await;
    assert_eq!(result.reason, StopReason::GoalReached);
    let second = &result.traces[1];
    assert_eq!(second.selection.method, SelectionMethod::LlmRanked);
    assert_eq!(second.step_id.as_deref(), Some("c"));
    let kept: Vec<&str> = second.selection.candidates.as_ref().unwrap().iter().map(|c| c.step_id.as_str()).collect();
    assert_eq!(kept, ["c"], "0.49 and unknown ids are dropped");
}

#[tokio::test]
async fn nothing_above_the_threshold_continues_without_a_step() {
    let model = Models::new().customer(vec![say("hi"), say("more")]).ranking(vec![("b", 0.2)]).judge(true).build();
    let steps = vec![StepDefinition::new("a", "Say hello"), StepDefinition::new("b", "Ask")];
    let setup = setup(trajectory(Some(graph(steps, &["b"])), Some(3)));
    let result = run_trajectory(&setup, &mut ScriptedAgent::echo(), &env(&model, None)).await;
    assert_eq!(result.reason, StopReason::MaxTurns);
    assert_eq!(result.traces.len(), 3);
    assert_eq!(result.traces[1].selection.method, SelectionMethod::None);
    assert_eq!(result.traces[1].step_id, None);
    assert_eq!(result.traces[1].selection.candidates.as_deref(), Some(&[][..]));
}

#[tokio::test]
async fn customer_led_steps_are_offered_and_satisfied_steps_are_not() {
    // The agent never asks anything; the customer must lead with its own steps.
    let model = Models::new()
        .customer(vec![say("hi"), say("how much is it?"), say("book it")])
        .ranking_with(|req: &ChatRequest| {
            let prompt = req.last_user_message();
            if prompt.contains("- ask_price:") { vec![("ask_price".into(), 0.8)] } else { vec![("book".into(), 0.7)] }
        })
        .judge(true)
        .build();
    let steps = vec![
        StepDefinition::new("greet", "Say hello"),
        StepDefinition::new("ask_price", "Ask how much the ride costs"),
        StepDefinition::new("book", "Ask to book the ride"),
    ];
    let setup = setup(trajectory(Some(graph(steps, &["book"])), Some(10)));
    let mut agent = ScriptedAgent::new(|_, _| Ok(AgentTurn::text(["Okay."])));
    let result = run_trajectory(&setup, &mut agent, &env(&model, None)).await;
    assert_eq!(result.reason, StopReason::GoalReached);
    let ids: Vec<_> = result.traces.iter().map(|t| t.step_id.clone().unwrap_or_default()).collect();
    assert_eq!(ids, ["greet", "ask_price", "book"]);
    let rankings = model.requests().into_iter().filter(|r| r.schema_name() == Some("StepRanking")).collect::<Vec<_>>();
    assert!(rankings[0].last_user_message().contains("the customer leads too"));
    assert!(!rankings[0].last_user_message().contains("- greet:"), "satisfied steps are not ranked");
    assert!(!rankings[1].last_user_message().contains("- ask_price:"));
}

#[tokio::test]
async fn the_judge_decides_satisfaction_when_the_agent_reports_no_engine_state() {
    let model = Models::new().customer(vec![say("hi")]).judge(false).build();
    let mut pickup = StepDefinition::new("pickup", "Give the pickup address");
    pickup.satisfaction.engine =
        vec![EngineExpectation::JourneyState { journey: "book_taxi".into(), state: "dropoff".into() }];
    pickup.max_attempts = Some(2);
    let setup = setup(trajectory(Some(graph(vec![pickup], &["pickup"])), Some(5)));
    let result = run_trajectory(&setup, &mut ScriptedAgent::echo(), &env(&model, None)).await;
    assert_eq!(result.verdicts[0].method, SatisfactionMethod::Judge);
    assert!(!result.verdicts[0].satisfied);
    let judge_req = model.requests_for(&TaskKind::Judge);
    assert!(judge_req[0].last_user_message().contains("Milestone: Give the pickup address"));
    assert!(judge_req[0].last_user_message().contains("Agent heard: hi"));
}

#[tokio::test]
async fn engine_state_decides_satisfaction_without_the_judge_and_notices_steps_met_along_the_way() {
    let model = Models::new().customer(vec![say("taxi from Oak St to the station, now")]).judge(true).build();
    let mut pickup = StepDefinition::new("pickup", "Give the pickup address");
    pickup.satisfaction.engine =
        vec![EngineExpectation::JourneyState { journey: "book_taxi".into(), state: "dropoff".into() }];
    let mut time = StepDefinition::new("time", "Give the time");
    time.satisfaction.engine =
        vec![EngineExpectation::JourneyState { journey: "book_taxi".into(), state: "confirm".into() }];
    let mut said = StepDefinition::new("said", "Mention the station");
    said.satisfaction.expr = Some(Expr::parse(r#"customer_said("station")"#).unwrap());
    let setup = setup(trajectory(Some(graph(vec![pickup, time, said], &[])), Some(5)));
    let mut agent = ScriptedAgent::new(|_, _| {
        let mut turn = AgentTurn::text(["Please confirm."]);
        turn.observations = Some(EngineObservations {
            journeys_entered: vec!["book_taxi".into()],
            journey_states: ["pickup", "dropoff", "time", "confirm"]
                .iter()
                .map(|s| guidepost_sim::JourneyStateReached {
                    journey: "book_taxi".into(),
                    state: (*s).into(),
                    edge: None,
                })
                .collect(),
            ..Default::default()
        });
        Ok(turn)
    });
    let result = run_trajectory(&setup, &mut agent, &env(&model, None)).await;
    assert_eq!(result.reason, StopReason::GoalReached, "all steps satisfied after one turn: {}", result.summary);
    assert_eq!(result.traces.len(), 1);
    assert!(model.requests_for(&TaskKind::Judge).is_empty(), "no judge call");
    let methods: Vec<_> = result.verdicts.iter().map(|v| (v.step_id.as_str(), v.method)).collect();
    assert_eq!(
        methods,
        [
            ("pickup", SatisfactionMethod::Engine),
            ("time", SatisfactionMethod::Engine),
            ("said", SatisfactionMethod::Expression)
        ]
    );
    assert!(result.reports_engine);
    let _ = schema_is("x");
}

#[tokio::test]
async fn rust_closures_work_as_preconditions_and_satisfaction_checks() {
    use guidepost_sim::steps::{CustomCheck, Precondition};
    use std::sync::Arc;
    let model = Models::new().customer(vec![say("hi"), say("later"), say("now")]).ranking(vec![]).judge(false).build();
    let mut gated = StepDefinition::new("gated", "Ask after two turns");
    gated.preconditions.push(Precondition::Custom {
        name: Some("two turns played".into()),
        check: CustomCheck::Closure(Arc::new(|view| view.traces.len() >= 2)),
    });
    gated.satisfaction.closure = Some(Arc::new(|view, step| {
        step.id == "gated" && view.traces.last().is_some_and(|t| t.user_message.text() == "now")
    }));
    let mut start = StepDefinition::new("start", "Say hello");
    start.satisfaction.closure = Some(Arc::new(|_, _| true));
    let setup = setup(trajectory(Some(graph(vec![start, gated], &["gated"])), Some(6)));
    let result = run_trajectory(&setup, &mut ScriptedAgent::echo(), &env(&model, None)).await;
    assert_eq!(result.reason, StopReason::GoalReached, "{}", result.summary);
    assert_eq!(
        methods(&result),
        vec![
            (SelectionMethod::Start, Some("start".into())),
            (SelectionMethod::None, None),
            (SelectionMethod::PreconditionsOrdered, Some("gated".into())),
        ]
    );
    assert!(result.verdicts.iter().all(|v| v.method == SatisfactionMethod::Closure));
}
