//! Scenario files: the example scenarios, errors with file:line, and the committed JSON Schema.

use std::path::{Path, PathBuf};

use guidepost_core::definition::{SourceFile, load_agent};
use guidepost_sim::runner::ScriptItem;
use guidepost_sim::scenario::scenario_json_schema;
use guidepost_sim::{EngineExpectation, Scenario, SimError, load_scenarios};

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/scenarios")
}

/// The scenarios the default local model does not pass yet: they run like the others.
fn known_gaps() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/known-gaps")
}

fn check_expectation(e: &EngineExpectation, def: &guidepost_core::AgentDefinition, origin: &str) {
    let journey = |id: &str| def.journey(id).unwrap_or_else(|| panic!("{origin}: unknown journey `{id}`"));
    match e {
        EngineExpectation::JourneyEntered(j) | EngineExpectation::JourneyCompleted(j) => {
            journey(j);
        }
        EngineExpectation::JourneyState { journey: j, state } => {
            let j = journey(j);
            assert!(state == "end" || j.state(state).is_some(), "{origin}: unknown state `{state}` of `{}`", j.id);
        }
        EngineExpectation::ToolCalled { tool, .. } | EngineExpectation::ToolNotCalled(tool) => {
            assert!(def.tools.iter().any(|t| t.id.name == *tool), "{origin}: unknown tool `{tool}`");
        }
        EngineExpectation::GuidelineMatched(g) => {
            assert!(def.guideline(g).is_some(), "{origin}: unknown guideline `{g}`")
        }
    }
}

#[test]
fn example_scenarios_parse_and_reference_valid_steps_and_agent_elements() {
    let scenarios = load_scenarios(&[examples(), known_gaps()]).unwrap_or_else(|e| panic!("{e}"));
    assert!(scenarios.len() >= 8);
    for agent in ["taxi", "weather", "banking", "otto"] {
        assert!(scenarios.iter().any(|s| s.id.starts_with(agent)), "no scenario for {agent}");
    }
    assert!(scenarios.iter().filter(|s| s.file.tags.iter().any(|t| t == "indecisive")).count() >= 2);
    assert!(scenarios.iter().filter(|s| s.file.tags.iter().any(|t| t == "off-script")).count() >= 2);
    for scenario in &scenarios {
        let path = scenario.agent_definition.clone().expect("every example names its agent");
        let text = std::fs::read_to_string(&path).unwrap();
        let def = load_agent(&[SourceFile::new(path.display().to_string(), text)]).definition.expect("agent loads");
        let graph = scenario.graph().expect("every example has a step graph");
        assert!(graph.step(&graph.start).is_some());
        let origin = scenario.path.display().to_string();
        for step in &graph.steps {
            for e in &step.satisfaction.engine {
                check_expectation(e, &def, &origin);
            }
        }
        for e in &scenario.file.expect {
            check_expectation(e, &def, &origin);
        }
        for item in &scenario.setup(0).script {
            if let ScriptItem::Checkpoint { expect, .. } = item {
                expect.iter().for_each(|e| check_expectation(e, &def, &origin));
            }
        }
    }
}

#[test]
fn scenario_errors_name_the_file_line_and_step() {
    let path = Path::new("bad.yaml");
    let text = "goal: g\npersona: { description: d }\nstep_graph:\n  start: a\n  steps:\n    - id: a\n      instruction: x\n    - id: b\n      instruction: y\n      after: [nope]\n      preconditions:\n        - custom: { expr: 'satisfied(\"a\") &&' }\n";
    let errors = Scenario::parse(path, text).unwrap_err();
    let shown: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert!(shown.contains(&"bad.yaml:8: step `b`: `after` names unknown step `nope`".to_string()), "{shown:?}");
    assert!(shown.iter().any(|e| e.starts_with("bad.yaml:8: step `b`: invalid expression")), "{shown:?}");

    let errors = Scenario::parse(path, "goal: g\npersona: { description: d }\nmax_turns: many\n").unwrap_err();
    assert_eq!((errors[0].location.line, errors[0].location.column), (Some(3), Some(12)), "{}", errors[0]);
    let errors = Scenario::parse(path, "goal: g\npersona: { description: d }\nscript:\n  - shout: hi\n").unwrap_err();
    assert_eq!(errors[0].location.line, Some(4), "{}", errors[0]);
    let errors = Scenario::parse(
        path,
        "goal: g\npersona: { description: d }\nscript:\n  - customer: { text: hi, step: ghost }\n",
    )
    .unwrap_err();
    assert!(errors[0].message.contains("unknown step `ghost`"));
    // an unquoted comma in a flow mapping splits the line into an extra key: refused
    let errors = Scenario::parse(
        path,
        "goal: g\npersona: { description: d }\nscript:\n  - customer: { text: Thanks, bye!, step: a }\n",
    )
    .unwrap_err();
    assert_eq!(errors[0].location.line, Some(4), "{}", errors[0]);

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.yaml"), "id: same\ngoal: g\npersona: { description: d }\n").unwrap();
    std::fs::write(dir.path().join("b.yml"), "id: same\ngoal: g\npersona: { description: d }\n").unwrap();
    let err = load_scenarios(&[dir.path().to_path_buf()]).unwrap_err();
    assert!(matches!(&err, SimError::Scenarios(e) if e[0].message.contains("scenario id `same`")), "{err}");
}

#[test]
fn scripts_parse_into_items() {
    let text = "goal: g\npersona: { description: d }\nstep_graph: { start: a, steps: [{ id: a, instruction: x }] }\nscript:\n  - agent: Hello!\n  - customer: hi\n  - customer: { text: x, step: a }\n  - simulate: 2\n  - checkpoint: { expect: [{ journey_entered: j }] }\n  - simulate: rest\n";
    let scenario = Scenario::parse(Path::new("s.yaml"), text).unwrap();
    assert_eq!(
        scenario.setup(1).script,
        vec![
            ScriptItem::Agent { text: "Hello!".into() },
            ScriptItem::Customer { text: "hi".into(), step: None },
            ScriptItem::Customer { text: "x".into(), step: Some("a".into()) },
            ScriptItem::Simulate { turns: Some(2) },
            ScriptItem::Checkpoint {
                name: "checkpoint 5".into(),
                expect: vec![EngineExpectation::JourneyEntered("j".into())]
            },
            ScriptItem::Simulate { turns: None },
        ]
    );
    assert_eq!(scenario.setup(1).trajectory.conversation_id, "s-trial1");
}

/// The committed schema must match the format; regenerate with `UPDATE_SCHEMA=1`.
#[test]
fn committed_json_schema_matches_the_format() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("schema/scenario.schema.json");
    let generated = serde_json::to_string_pretty(&scenario_json_schema()).unwrap() + "\n";
    if std::env::var_os("UPDATE_SCHEMA").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(committed == generated, "schema/scenario.schema.json is stale; run the tests with UPDATE_SCHEMA=1");
}

/// Every example and known gap runs end to end (scripted customer, judge and agent): no run
/// ends in an error and every run leaves its artifacts.
#[tokio::test]
async fn example_scenarios_run_against_a_scripted_agent() {
    use crate::support::*;
    let scenarios = load_scenarios(&[examples(), known_gaps()]).unwrap();
    let model = Models::new()
        .customer(vec![say("Hello"), say("Could you help me?"), done("gave_up")])
        .ranking(vec![])
        .judge(false)
        .build();
    let models = guidepost_sim::SimModels { customer: model.clone(), judge: model };
    let agent: std::sync::Arc<dyn guidepost_sim::AgentFactory> = ScriptedFactory::new(|turn, m| {
        // Not an echo of the customer (the reply checks would stop the run), but a reply
        // to each message.
        let words = m.split_whitespace().count().min(9);
        Ok(guidepost_sim::AgentTurn::text([format!(
            "Reply {turn}: I can talk to an advisor about those {words} words."
        )]))
    });
    let dir = tempfile::tempdir().unwrap();
    let options = guidepost_sim::SuiteOptions { artifacts_root: Some(dir.path().to_path_buf()), ..Default::default() };
    let outcome = guidepost_sim::run_suite(&scenarios, std::sync::Arc::clone(&agent), &models, &options).await;
    for run in &outcome.runs {
        assert!(run.error.is_none(), "{}: {:?}", run.scenario_id, run.error);
        assert!(dir.path().join("conversations").join(&run.conversation_id).join("stepTraces.json").exists());
    }
    // Scripted lines name their steps.
    let advice = outcome.runs.iter().find(|r| r.scenario_id == "banking-advice-off-script").unwrap();
    let steps: Vec<Option<&str>> = advice.traces.iter().map(|t| t.step_id.as_deref()).collect();
    assert_eq!(steps, [Some("ask_advice"), Some("ask_advice"), Some("accept_call")]);
    let off_script = outcome.runs.iter().find(|r| r.scenario_id == "taxi-off-script").unwrap();
    assert_eq!(off_script.reason, guidepost_sim::StopReason::CheckpointFailed, "the echo agent enters no journey");

    // The same scenario without its script: the agent mentioned an advisor, so the custom
    // precondition `agent_said("advisor")` opens the gated step, which precondition-first
    // selection picks at once.
    let text = std::fs::read_to_string(examples().join("banking-advice-off-script.yaml")).unwrap();
    let start = text.find("\nscript:").unwrap();
    let end = text[start + 1..].find("\npolicies:").map_or(text.len(), |i| start + 1 + i);
    let unscripted = format!("{}{}", &text[..start], &text[end..]);
    let file = dir.path().join("advice-unscripted.yaml");
    std::fs::write(&file, unscripted).unwrap();
    let scenarios = load_scenarios(&[file]).unwrap();
    let model = Models::new()
        .customer(vec![say("Hello"), say("Could you help me?"), done("gave_up")])
        .ranking(vec![])
        .judge(false)
        .build();
    let models = guidepost_sim::SimModels { customer: model.clone(), judge: model };
    let outcome = guidepost_sim::run_suite(&scenarios, std::sync::Arc::clone(&agent), &models, &options).await;
    let advice = &outcome.runs[0];
    assert_eq!(advice.traces[1].step_id.as_deref(), Some("accept_call"));
    assert_eq!(advice.traces[1].selection.method, guidepost_sim::trajectory::SelectionMethod::PreconditionsOrdered);
}
