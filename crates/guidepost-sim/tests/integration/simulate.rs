//! `run` end to end as the CLI calls it: scenario files, a command agent, the model stack with
//! record/replay (record once, then `replay-or-fail` with a model that cannot answer), reports,
//! artifacts and coverage; and the in-process engine contract.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use clap::Parser;
use guidepost_llm::providers::scripted::{ScriptedModel, schema_is};
use guidepost_llm::{ChatModel, ModelSettings, ModelSpec, TaskKind};
use guidepost_sim::agents::in_process::{EngineEvent, EngineSession, EngineSessionFactory, InProcessFactory};
use guidepost_sim::{AgentError, Plugins, SimulateArgs, StopReason, SuiteOptions, run, run_suite};
use serde_json::json;

use crate::support::*;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: SimulateArgs,
}

const AGENT: &str = r#"while IFS= read -r line; do case "$line" in *customer_message*) echo '{"type":"reply","messages":["Your taxi is booked."],"observations":{"journeys_entered":["book_taxi"],"journey_states":[{"journey":"book_taxi","state":"pickup"}],"guidelines_matched":["correction"]}}' ;; esac; done"#;

fn customer_model() -> Arc<dyn ChatModel> {
    Arc::new(ScriptedModel::new().when(schema_is("CustomerReply")).task(TaskKind::Simulation).reply_with(|req| {
        Ok(if customer_turns(req) == 0 { say("I need a taxi to the station") } else { done("goal_met") })
    }))
}

fn args(dir: &Path, cache: &str) -> SimulateArgs {
    let scenarios = dir.join("scenarios");
    let agent = format!("command:{AGENT}");
    let cli = Cli::parse_from([
        "simulate",
        scenarios.to_str().unwrap(),
        "--agent",
        &agent,
        "--definition",
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/agents/taxi.yaml").to_str().unwrap(),
        "--trials",
        "2",
        "--out",
        dir.join(".tally").to_str().unwrap(),
        "--report-json",
        dir.join("report.json").to_str().unwrap(),
        "--junit",
        dir.join("junit.xml").to_str().unwrap(),
        "--cache",
        cache,
        "--recordings",
        dir.join("recordings").to_str().unwrap(),
        "--no-progress",
    ]);
    cli.args
}

fn plugins(model: Arc<dyn ChatModel>) -> Plugins {
    Plugins { settings: Some(ModelSettings::single(ModelSpec::Scripted)), scripted: Some(model), ..Plugins::default() }
}

#[tokio::test]
async fn runs_recorded_then_replays_without_a_model() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("scenarios")).unwrap();
    std::fs::write(
        dir.path().join("scenarios/taxi.yaml"),
        "goal: Get a taxi to the station\npersona: { description: A commuter }\nmax_turns: 4\nexpect: [{ journey_entered: book_taxi }]\n",
    )
    .unwrap();

    let recorded = run(&args(dir.path(), "record"), plugins(customer_model())).await.unwrap();
    assert_eq!(recorded.report.exit_code(None), 0, "{:?}", recorded.report.totals);
    assert_eq!(recorded.runs.len(), 2);
    assert!(recorded.runs.iter().all(|r| r.reason == StopReason::GoalReached && r.passed()));

    // CI: every simulator call must come from the recordings; this model cannot answer anything.
    let replayed = run(&args(dir.path(), "replay-or-fail"), plugins(Arc::new(ScriptedModel::new()))).await.unwrap();
    assert_eq!(replayed.report.exit_code(None), 0);
    let texts = |o: &guidepost_sim::SuiteOutcome| -> Vec<String> {
        o.runs.iter().flat_map(|r| r.traces.iter().map(|t| t.user_message.text())).collect()
    };
    assert_eq!(texts(&recorded), texts(&replayed));

    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("report.json")).unwrap()).unwrap();
    assert_eq!(report["totals"]["passed"], 2);
    assert_eq!(report["scenarios"][0]["pass_hat_k"]["2"], 1.0);
    assert_eq!(report["coverage"][0]["guidelines_matched"]["correction"], 2);
    assert_eq!(report["coverage"][0]["journeys"][0]["runs_entered"], 2);
    let junit = std::fs::read_to_string(dir.path().join("junit.xml")).unwrap();
    assert!(junit.contains("tests=\"2\" failures=\"0\" errors=\"0\""));
    assert!(dir.path().join(".tally/conversations/taxi-trial1/stepTraces.json").exists());

    // The JSONL agent reaches only part of the taxi journey: --require-full-coverage fails
    // the suite that otherwise passed, and names what was missed.
    let missed = replayed.report.missed_states();
    assert!(missed.contains(&"Rita: book_taxi.booked".to_string()), "{missed:?}");
    assert_eq!(args(dir.path(), "replay-or-fail").exit_code(&replayed.report), 0);
    let strict = SimulateArgs { require_full_coverage: true, ..args(dir.path(), "replay-or-fail") };
    assert_eq!(strict.exit_code(&replayed.report), 1);

    // Without a recording, replay-or-fail ends the run with an error naming the miss.
    std::fs::write(
        dir.path().join("scenarios/taxi.yaml"),
        "goal: Something else entirely\npersona: { description: A commuter }\n",
    )
    .unwrap();
    let missed = run(&args(dir.path(), "replay-or-fail"), plugins(Arc::new(ScriptedModel::new()))).await.unwrap();
    assert_eq!(missed.runs[0].reason, StopReason::Error);
    assert!(missed.runs[0].error.as_deref().unwrap().contains("no recording"), "{:?}", missed.runs[0].error);
    assert_eq!(missed.runs[0].failure, Some(guidepost_sim::runner::FailureSource::Simulator));
    assert_eq!(missed.report.exit_code(None), 1);

    let bad = run(&SimulateArgs { agent: "telnet:x".into(), ..args(dir.path(), "live") }, Plugins::default()).await;
    assert!(bad.unwrap_err().to_string().contains("unknown agent `telnet:x`"));
}

/// An engine that remembers which conversations it opened, for which definitions.
#[derive(Default)]
struct Engine {
    opened: Mutex<Vec<(String, Option<PathBuf>)>>,
}
struct Session(usize);

#[async_trait]
impl EngineSession for Session {
    async fn process(&mut self, message: &str) -> Result<Vec<EngineEvent>, AgentError> {
        self.0 += 1;
        Ok(vec![
            EngineEvent::JourneyEntered { journey: "book_taxi".into() },
            EngineEvent::GuidelineMatched { guideline: "journey_node:book_taxi.pickup:edge_001".into() },
            EngineEvent::GuidelineMatched { guideline: "price_question".into() },
            EngineEvent::ToolCall(guidepost_sim::ToolCallRecord::new(
                "fixtures:book_taxi",
                json!({"pickup": message}),
                json!({}),
            )),
            EngineEvent::Message { text: format!("turn {}", self.0) },
        ])
    }
    async fn append_agent_message(&mut self, _text: &str) -> Result<(), AgentError> {
        Ok(())
    }
}

#[async_trait]
impl EngineSessionFactory for Engine {
    fn describe(&self) -> String {
        "test engine".into()
    }
    async fn open(
        &self,
        conversation_id: &str,
        definition: Option<&Path>,
    ) -> Result<Box<dyn EngineSession>, AgentError> {
        let mut opened = self.opened.lock().unwrap();
        opened.push((conversation_id.to_string(), definition.map(Path::to_path_buf)));
        Ok(Box::new(Session(0)))
    }
}

#[tokio::test]
async fn each_scenario_runs_against_its_own_agent_definition_unless_one_is_forced() {
    let scenario = |id: &str, agent: &str| {
        guidepost_sim::Scenario::parse(
            Path::new("scenarios/s.yaml"),
            &format!("id: {id}\nagent: ../agents/{agent}.yaml\ngoal: g\npersona: {{ description: d }}\nscript:\n  - customer: hi\n"),
        )
        .unwrap()
    };
    let scenarios = [scenario("w", "weather"), scenario("t", "taxi")];
    let model = Models::new().build();
    let models = guidepost_sim::SimModels { customer: model.clone(), judge: model };
    let opened = |definition: Option<PathBuf>| async {
        let engine = Arc::new(Engine::default());
        let factory = Arc::new(InProcessFactory { sessions: engine.clone(), definition });
        let options = SuiteOptions { concurrency: 1, ..SuiteOptions::default() };
        run_suite(&scenarios, factory, &models, &options).await;
        let mut opened = engine.opened.lock().unwrap().clone();
        opened.sort();
        opened
    };
    assert_eq!(
        opened(None).await,
        [
            ("t-trial0".to_string(), Some(PathBuf::from("scenarios/../agents/taxi.yaml"))),
            ("w-trial0".to_string(), Some(PathBuf::from("scenarios/../agents/weather.yaml")))
        ]
    );
    let forced = opened(Some(PathBuf::from("agent.yaml"))).await;
    assert!(forced.iter().all(|(_, d)| d.as_deref() == Some(Path::new("agent.yaml"))), "{forced:?}");
}

#[tokio::test]
async fn the_in_process_engine_reports_observations() {
    let scenario = guidepost_sim::Scenario::parse(
        Path::new("s.yaml"),
        "goal: g\npersona: { description: d }\nscript:\n  - agent: Welcome!\n  - customer: Oak St\n  - checkpoint: { expect: [{ journey_state: { journey: book_taxi, state: pickup } }, { guideline_matched: price_question }, { tool_called: { tool: book_taxi, arguments: { pickup: oak st } } }] }\n",
    )
    .unwrap();
    let model = Models::new().build();
    let models = guidepost_sim::SimModels { customer: model.clone(), judge: model };
    let factory = Arc::new(InProcessFactory { sessions: Arc::new(Engine::default()), definition: None });
    let outcome = run_suite(&[scenario], factory, &models, &SuiteOptions::default()).await;
    let run = &outcome.runs[0];
    assert!(run.checkpoints[0].passed, "{:?}", run.checkpoints);
    assert_eq!(run.preamble, ["Welcome!"]);
    assert_eq!(run.traces[0].agent_texts(), ["turn 1"]);
    assert_eq!(
        (run.reason, run.completed),
        (StopReason::ScriptEnded, true),
        "a script without a graph that ends is complete"
    );
}
