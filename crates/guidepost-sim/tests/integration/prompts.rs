//! Snapshots of the prompts of the simulated customer, the ranker and the judge, so a change to a
//! template shows up in review as a diff.

use guidepost_llm::{ChatRequest, Role};
use guidepost_sim::StepTrace;
use guidepost_sim::customer::{CustomerOptions, SimulatedCustomer, TurnContext};
use guidepost_sim::judge::Judge;
use guidepost_sim::message::ModelMessage;
use guidepost_sim::observations::EngineObservations;
use guidepost_sim::selection::StepRanker;
use guidepost_sim::steps::{RunView, StepDefinition, StepRuntime};
use guidepost_sim::trajectory::{Selection, SelectionMethod, TurnSource};

use crate::support::*;

fn show(req: &ChatRequest) -> String {
    req.messages
        .iter()
        .map(|m| {
            let role = match m.role {
                Role::System => "system",
                Role::User => "user",
                Role::Assistant => "assistant",
            };
            format!("--- {role}\n{}", m.content)
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn traces() -> Vec<StepTrace> {
    let long = "I really need to get to the station early because my train leaves at seven. ".repeat(4);
    ["Hi, I need a taxi", long.as_str(), "12 Oak Street"]
        .iter()
        .enumerate()
        .map(|(i, text)| StepTrace {
            turn_index: u32::try_from(i).unwrap(),
            user_message: ModelMessage::user(*text),
            agent_messages: guidepost_sim::AgentTurn::text([format!("Agent reply {i}")]).to_model_messages(0),
            timestamp: chrono::DateTime::from_timestamp(0, 0).unwrap(),
            step_id: None,
            selection: Selection { method: SelectionMethod::None, candidates: None },
            end: None,
            source: TurnSource::Simulated,
            observations: None,
            latency_ms: None,
        })
        .collect()
}

#[test]
fn customer_prompt() {
    let model = Models::new().build();
    let options = CustomerOptions { history_budget_chars: 120, ..CustomerOptions::default() };
    let customer = SimulatedCustomer::new(model, guidepost_llm::UsageLedger::new("t"), options);
    let trajectory = trajectory(None, Some(5));
    let mut step = StepDefinition::new("time", "Say when you want to be picked up");
    step.hints = vec!["18:30".into()];
    let traces = traces();
    let ctx = TurnContext { trajectory: &trajectory, traces: &traces, preamble: &[], step: Some(&step) };
    insta::assert_snapshot!("customer_prompt", show(&customer.request(ctx, None)));
    let opening = TurnContext { trajectory: &trajectory, traces: &[], preamble: &[], step: None };
    insta::assert_snapshot!(
        "customer_opening_prompt",
        show(&customer.request(opening, Some("it starts with the role label `agent:`.")))
    );
}

#[test]
fn ranker_and_judge_prompts() {
    let model = Models::new().build();
    let steps = [
        StepDefinition::new("pickup", "Give the pickup address"),
        StepDefinition::new("ask_price", "Ask what the ride costs"),
    ];
    let refs: Vec<&StepDefinition> = steps.iter().collect();
    let traces = traces();
    let runtime = StepRuntime::default();
    let seen = EngineObservations::default();
    let view = RunView { traces: &traces, steps: &runtime, observations: &seen };
    let ranker = StepRanker::new(model.clone(), guidepost_llm::UsageLedger::new("t"));
    insta::assert_snapshot!("ranker_prompt", show(&ranker.request("Book a taxi", &refs, &view, &[])));
    let judge = Judge::new(model, guidepost_llm::UsageLedger::new("t"));
    insta::assert_snapshot!(
        "judge_prompt",
        show(&judge.request(&steps[0], &traces, &["Welcome to Taxi!".to_string()]))
    );
}
