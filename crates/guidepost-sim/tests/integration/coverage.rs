//! Engine-state satisfaction and journey coverage end to end, with a scripted agent that
//! reports engine observations like a Guidepost engine would.

use std::path::Path;

use guidepost_core::definition::{SourceFile, load_agent};
use guidepost_sim::agents::ToolCallRecord;
use guidepost_sim::coverage::compute_coverage;
use guidepost_sim::observations::ToolCalled;
use guidepost_sim::{
    AgentTurn, EngineObservations, JourneyStateReached, Scenario, StopReason, SuiteOptions, run_suite,
};
use serde_json::json;

use crate::support::*;

fn state(s: &str) -> JourneyStateReached {
    JourneyStateReached { journey: "book_taxi".into(), state: s.into(), edge: None }
}

#[tokio::test]
async fn engine_observations_satisfy_steps_and_measure_journey_coverage() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let scenario = Scenario::load(&root.join("scenarios/taxi-happy-path.yaml")).unwrap();
    let agent = ScriptedFactory::new(|turn, _| {
        let mut seen = EngineObservations::default();
        let mut t = AgentTurn::text([format!("step {turn}")]);
        match turn {
            0 => {
                seen.journeys_entered.push("book_taxi".into());
                seen.journey_states.push(state("pickup"));
            }
            1 => seen.journey_states.push(state("dropoff")),
            2 => {
                seen.journey_states.push(state("time"));
                seen.guidelines_matched.push("correction".into());
            }
            3 => seen.journey_states.push(state("confirm")),
            _ => {
                let args = json!({"pickup": "12 Oak Street", "dropoff": "central station", "time": "18:30"});
                seen.journey_states.extend([state("book"), state("booked"), state("end")]);
                seen.tools_called.push(ToolCalled { tool: "fixtures:book_taxi".into(), arguments: args.clone() });
                seen.journeys_completed.push("book_taxi".into());
                t.push_tool_call(ToolCallRecord::new("book_taxi", args, json!({})));
            }
        }
        t.observations = Some(seen);
        Ok(t)
    });
    let model = Models::new()
        .customer(vec![say("I need a taxi"), say("12 Oak Street"), say("central station"), say("18:30"), say("yes")])
        .build();
    let models = guidepost_sim::SimModels { customer: model.clone(), judge: model.clone() };
    let outcome = run_suite(std::slice::from_ref(&scenario), agent, &models, &SuiteOptions::default()).await;
    let run = &outcome.runs[0];
    assert_eq!(run.reason, StopReason::GoalReached, "{}", run.summary);
    assert!(run.passed(), "final expectations hold: {:?}", run.checkpoints);
    assert_eq!(run.traces.len(), 5);
    assert!(model.requests_for(&guidepost_llm::TaskKind::Judge).is_empty(), "engine state, not the judge");

    let path = scenario.agent_definition.clone().unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let definition = load_agent(&[SourceFile::new("taxi.yaml", text)]).definition.unwrap();
    let coverage = compute_coverage(&definition, &outcome.runs);
    let journey = &coverage.journeys[0];
    assert_eq!((journey.runs_entered, journey.runs_completed), (1, 1));
    assert!(journey.missed_states.is_empty(), "{:?}", journey.missed_states);
    let missed: Vec<(&str, &str)> =
        journey.transitions.iter().filter(|t| t.visits == 0).map(|t| (t.from.as_str(), t.to.as_str())).collect();
    assert_eq!(missed, [("confirm", "end")]);
    assert_eq!(coverage.guidelines_matched.get("correction"), Some(&1));
    assert!(coverage.guidelines_missed.contains(&"price_question".to_string()));
    let text = coverage.to_text();
    assert!(text.contains("transition never taken"), "{text}");
    assert!(text.contains("confirm -> end (when: The customer no longer wants the ride)"), "{text}");
    assert!(text.contains("never matched: price_question"), "{text}");
}
