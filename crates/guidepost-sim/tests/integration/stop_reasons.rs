//! Every stop reason, loop detection of both kinds, attempts and timeouts.

use std::sync::Arc;
use std::time::Duration;

use guidepost_llm::ChatRequest;
use guidepost_sim::policy::{ForbiddenAgentPhrases, RequireStepMatch};
use guidepost_sim::runner::{Budget, ScriptItem, run_trajectory};
use guidepost_sim::steps::{OnFailure, StepDefinition, StepStatus};
use guidepost_sim::{AgentError, AgentTurn, EngineExpectation, StopReason};

use crate::support::*;

fn abc() -> Vec<StepDefinition> {
    vec![StepDefinition::new("a", "Say hello"), StepDefinition::new("b", "Ask"), StepDefinition::new("c", "Book")]
}

#[tokio::test]
async fn customer_done_without_a_graph_reaches_the_goal_and_giving_up_ends_it() {
    let model = Models::new().customer(vec![say("hi"), done("goal_met")]).build();
    let result = run_trajectory(&setup(trajectory(None, None)), &mut ScriptedAgent::echo(), &env(&model, None)).await;
    assert_eq!((result.reason, result.completed, result.traces.len()), (StopReason::GoalReached, true, 1));
    let end = result.traces[0].end.as_ref().unwrap();
    assert!(end.is_final && end.completed);

    let model = Models::new().customer(vec![say("hi"), done("gave_up")]).build();
    let result = run_trajectory(&setup(trajectory(None, None)), &mut ScriptedAgent::echo(), &env(&model, None)).await;
    assert_eq!((result.reason, result.completed), (StopReason::CustomerEnded, false));
    assert!(!result.passed());
}

#[tokio::test]
async fn max_turns_zero_plays_no_turn() {
    let model = Models::new().customer(vec![say("hi")]).build();
    let result =
        run_trajectory(&setup(trajectory(None, Some(0))), &mut ScriptedAgent::echo(), &env(&model, None)).await;
    assert_eq!((result.reason, result.traces.len()), (StopReason::MaxTurns, 0));
    let model = Models::new().customer(vec![say("hi")]).build();
    let result =
        run_trajectory(&setup(trajectory(None, Some(2))), &mut ScriptedAgent::echo(), &env(&model, None)).await;
    assert_eq!((result.reason, result.traces.len()), (StopReason::MaxTurns, 2));
    assert_eq!(result.summary, "Maximum turns (2) reached");
}

#[tokio::test]
async fn forbidden_agent_phrases_are_a_policy_violation() {
    let model = Models::new().customer(vec![say("hi")]).build();
    let mut s = setup(trajectory(None, Some(5)));
    s.policies.push(Arc::new(ForbiddenAgentPhrases { phrases: vec!["guaranteed".into()] }));
    let mut agent = ScriptedAgent::new(|_, _| Ok(AgentTurn::text(["Returns are GUARANTEED."])));
    let result = run_trajectory(&s, &mut agent, &env(&model, None)).await;
    assert_eq!((result.reason, result.traces.len()), (StopReason::PolicyViolation, 1));
}

#[tokio::test]
async fn a_customer_that_keeps_speaking_as_the_agent_is_re_asked_then_stopped() {
    let model = Models::new().customer(vec![say("How can I help you today?")]).build();
    let result =
        run_trajectory(&setup(trajectory(None, Some(5))), &mut ScriptedAgent::echo(), &env(&model, None)).await;
    assert_eq!((result.reason, result.traces.len()), (StopReason::PolicyViolation, 0));
    let asks = model.requests();
    assert_eq!(asks.len(), 3, "two re-asks");
    assert_eq!(asks[0].temperature, Some(0.0), "the first ask is greedy");
    assert!(asks[1].last_user_message().contains("Rejected attempt 1"));
    assert!(asks[2].last_user_message().contains("Rejected attempt 2"));
    for ask in &asks[1..] {
        assert!(ask.last_user_message().contains("Your previous attempt was rejected"));
        assert!(ask.last_user_message().contains(": \"How can I help you today?\""));
        assert_eq!(ask.temperature, Some(0.7), "a re-ask samples");
    }
}

#[tokio::test]
async fn the_same_step_three_times_in_a_row_is_a_loop() {
    let model = Models::new().customer(vec![say("hi")]).ranking(vec![("b", 0.9)]).judge(false).build();
    let s = setup(trajectory(Some(graph(abc(), &["c"])), Some(20)));
    let result = run_trajectory(&s, &mut ScriptedAgent::echo(), &env(&model, None)).await;
    assert_eq!(result.reason, StopReason::AgentLoop);
    let ids: Vec<_> = result.traces.iter().map(|t| t.step_id.clone().unwrap()).collect();
    assert_eq!(ids, ["a", "b", "b"]);
    assert_eq!(result.summary, "Loop detected: step \"b\" selected 3 times in a row");
}

#[tokio::test]
async fn a_repeated_cycle_is_a_loop() {
    let model = Models::new()
        .customer(vec![say("hi")])
        .ranking_with(|req: &ChatRequest| {
            let turns = req.last_user_message().matches("Customer:").count();
            vec![(if turns % 2 == 1 { "b" } else { "c" }.to_string(), 0.9)]
        })
        .judge(false)
        .build();
    let s = setup(trajectory(Some(graph(abc(), &[])), Some(20)));
    let result = run_trajectory(&s, &mut ScriptedAgent::echo(), &env(&model, None)).await;
    assert_eq!(result.reason, StopReason::AgentLoop, "{}", result.summary);
    let ids: Vec<_> = result.traces.iter().map(|t| t.step_id.clone().unwrap()).collect();
    assert_eq!(ids, ["a", "b", "c", "b", "c", "b"]);
    assert_eq!(result.summary, "Cycle detected: pattern [b -> c] repeated 3 times");
}

#[tokio::test]
async fn turns_without_a_step_can_be_refused() {
    let model = Models::new().customer(vec![say("hi")]).ranking(vec![]).judge(true).build();
    let mut s = setup(trajectory(Some(graph(abc(), &["c"])), Some(20)));
    s.policies.push(Arc::new(RequireStepMatch { max_turns_without_step: 1 }));
    let result = run_trajectory(&s, &mut ScriptedAgent::echo(), &env(&model, None)).await;
    assert_eq!((result.reason, result.traces.len()), (StopReason::NoStepMatch, 3));
}

#[tokio::test]
async fn agent_errors_end_the_run_with_the_partial_run_kept() {
    let model = Models::new().customer(vec![say("hi"), say("again")]).build();
    let mut agent = ScriptedAgent::new(|turn, _| {
        if turn == 0 { Ok(AgentTurn::text(["hello"])) } else { Err(AgentError::Transport("boom".into())) }
    });
    let result = run_trajectory(&setup(trajectory(None, Some(5))), &mut agent, &env(&model, None)).await;
    assert_eq!(result.reason, StopReason::Error);
    assert_eq!(result.traces.len(), 2);
    assert!(result.error.as_deref().unwrap().contains("boom"));
    assert_eq!(result.failure, Some(guidepost_sim::runner::FailureSource::Agent));
    assert!(result.traces[1].agent_messages.is_empty());
    assert_eq!(result.traces[1].end.as_ref().unwrap().reason, StopReason::Error);
}

#[tokio::test]
async fn budgets_stop_runs_cleanly() {
    let model = Models::new().customer(vec![say("hi")]).build();
    let mut e = env(&model, None);
    e.budgets.push((e.ledgers.run.clone(), Budget { max_tokens: Some(1), max_cost_usd: None }));
    let result = run_trajectory(&setup(trajectory(None, Some(5))), &mut ScriptedAgent::echo(), &e).await;
    assert_eq!((result.reason, result.traces.len()), (StopReason::BudgetExceeded, 1));
    assert!(result.usage.customer.prompt_tokens > 0);
}

#[tokio::test]
async fn checkpoints_and_final_expectations_are_checked() {
    let model = Models::new().customer(vec![say("hi")]).build();
    let mut s = setup(trajectory(None, Some(5)));
    s.script = vec![
        ScriptItem::Customer { text: "I need a taxi".into(), step: None },
        ScriptItem::Checkpoint {
            name: "entered".into(),
            expect: vec![EngineExpectation::JourneyEntered("book_taxi".into())],
        },
        ScriptItem::Simulate { turns: None },
    ];
    let result = run_trajectory(&s, &mut ScriptedAgent::echo(), &env(&model, None)).await;
    assert_eq!((result.reason, result.traces.len()), (StopReason::CheckpointFailed, 1));
    assert_eq!(result.checkpoints[0].failures, ["journey `book_taxi` entered"]);
    assert_eq!(result.traces[0].source, guidepost_sim::trajectory::TurnSource::Scripted);
}

#[tokio::test]
async fn max_attempts_fail_a_step() {
    let model = Models::new().customer(vec![say("hi")]).ranking(vec![("a", 0.9)]).judge(false).build();
    let mut steps = abc();
    steps[0].max_attempts = Some(2);
    let s = setup(trajectory(Some(graph(steps, &["c"])), Some(20)));
    let result = run_trajectory(&s, &mut ScriptedAgent::echo(), &env(&model, None)).await;
    assert_eq!((result.reason, result.traces.len()), (StopReason::StepFailed, 2));
    assert_eq!(result.summary, "Step \"a\" ran out of attempts");
    assert_eq!(result.steps[0].status, StepStatus::Failed);
}

#[tokio::test]
async fn step_timeouts_cut_a_slow_agent_and_skipping_blocks_dependent_steps() {
    let model = Models::new().customer(vec![say("hi")]).ranking(vec![("c", 0.9)]).judge(true).build();
    let mut steps = abc();
    steps[0].timeout = Some(Duration::from_millis(50));
    steps[0].on_failure = OnFailure::Skip;
    steps[1] = StepDefinition::new("b", "Ask").after("a");
    let s = setup(trajectory(Some(graph(steps, &["c"])), Some(20)));
    // The first reply is cut by the step's timeout before it counts as a turn of the agent.
    let mut agent = ScriptedAgent::new(|_, _| Ok(AgentTurn::text(["ok"])));
    agent.delay = Some(Duration::from_millis(300));
    let result = run_trajectory(&s, &mut agent, &env(&model, None)).await;
    let status = |id: &str| result.steps.iter().find(|s| s.step_id == id).unwrap().status;
    assert_eq!(status("a"), StepStatus::Skipped);
    assert_eq!(status("b"), StepStatus::Blocked);
    assert_eq!(result.reason, StopReason::GoalReached, "{}", result.summary);

    let model = Models::new().customer(vec![say("hi")]).judge(true).build();
    let mut steps = abc();
    steps[0].timeout = Some(Duration::from_millis(50));
    let s = setup(trajectory(Some(graph(steps, &["c"])), Some(20)));
    let mut agent = ScriptedAgent::echo();
    agent.delay = Some(Duration::from_millis(300));
    let result = run_trajectory(&s, &mut agent, &env(&model, None)).await;
    assert_eq!(result.reason, StopReason::StepFailed);
    assert_eq!(result.summary, "Step \"a\" ran out of time");
}

#[tokio::test]
async fn a_goodbye_the_last_step_needs_is_sent_before_the_run_is_judged() {
    use guidepost_sim::observations::EngineObservations;
    let steps = || {
        let mut finish = StepDefinition::new("finish", "Say you need nothing else").after("a");
        finish.satisfaction.engine = vec![EngineExpectation::JourneyCompleted("lookup".into())];
        vec![StepDefinition::new("a", "Ask for the weather"), finish]
    };
    // The agent closes its journey when it hears the goodbye.
    let closing_agent = || {
        ScriptedAgent::new(|_, message| {
            let mut turn = AgentTurn::text(["Anything else?"]);
            let mut seen = EngineObservations::default();
            if message == "Bye" {
                seen.journeys_completed.push("lookup".into());
            }
            turn.observations = Some(seen);
            Ok(turn)
        })
    };
    let model = Models::new().customer(vec![say("Weather in Paris?"), done("goal_met")]).judge(true).build();
    let s = setup(trajectory(Some(graph(steps(), &["finish"])), Some(5)));
    let result = run_trajectory(&s, &mut closing_agent(), &env(&model, None)).await;
    assert_eq!((result.reason, result.completed), (StopReason::GoalReached, true), "{}", result.summary);
    let sent: Vec<_> = result.traces.iter().map(|t| t.user_message.text()).collect();
    assert_eq!(sent, ["Weather in Paris?", "Bye"]);

    // An agent that ignores the goodbye leaves the terminal step unmet: the customer ended early.
    let model = Models::new().customer(vec![say("Weather in Paris?"), done("goal_met")]).judge(true).build();
    let mut deaf = ScriptedAgent::new(|_, _| {
        let mut turn = AgentTurn::text(["Anything else?"]);
        turn.observations = Some(EngineObservations::default());
        Ok(turn)
    });
    let result = run_trajectory(&s, &mut deaf, &env(&model, None)).await;
    assert_eq!((result.reason, result.traces.len()), (StopReason::CustomerEnded, 2), "{}", result.summary);

    // Giving up is not delivered: nothing is left for the agent to act on.
    let model = Models::new().customer(vec![say("Weather in Paris?"), done("gave_up")]).judge(true).build();
    let result = run_trajectory(&s, &mut closing_agent(), &env(&model, None)).await;
    assert_eq!((result.reason, result.traces.len()), (StopReason::CustomerEnded, 1));
}
