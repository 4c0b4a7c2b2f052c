//! One scenario, one agent, two ways: in process, and behind a fake Parlant 3.3.2 server
//! (in this process: Parlant's routes, long polls and event sequence, with journey states as
//! `journey_node:<node>:<edge>` ids) driven by `simulate --agent parlant:…`. The engine
//! answers alike both ways (the same recordings, or the same rule-based fake model), so the
//! artifacts must agree on journey coverage, the order of what the agent did (preambles, tool
//! calls, messages) and the form of its tool calls; and the server must be left clean.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::fake_parlant_engine::{self, EngineModels};
use crate::repo_root;
use crate::serve::{FakeModel, bin, fake_model};

/// How the engine's models are reached: the recordings, or a fake model server.
#[derive(Clone, Copy)]
enum Models<'a> {
    Recordings,
    Fake(&'a FakeModel),
}

impl Models<'_> {
    fn apply(self, cmd: &mut Command) {
        cmd.env_remove("GUIDEPOST_MODEL").env_remove("GUIDEPOST_EMBEDDER");
        match self {
            Self::Recordings => {
                cmd.args(["--cache", "replay-or-fail", "--recordings", "examples/recordings"]);
            }
            Self::Fake(fake) => {
                cmd.args(["--cache", "live"])
                    .env("GUIDEPOST_MODEL", format!("openai-compatible:{}/v1#gpt-4.1", fake.url))
                    .env("GUIDEPOST_EMBEDDER", format!("openai-compatible:{}/v1#fake-embed", fake.url));
            }
        }
    }
}

fn simulate(scenario: &Path, agent: &str, models: Models<'_>, out: &Path) -> Value {
    let mut cmd = Command::new(bin());
    cmd.current_dir(repo_root()).arg("simulate").arg(scenario).args(["--agent", agent, "--no-progress"]);
    models.apply(&mut cmd);
    let output =
        cmd.arg("--out").arg(out.join(".tally")).arg("--report-json").arg(out.join("report.json")).output().unwrap();
    assert!(
        output.status.success(),
        "simulate --agent {agent}:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap()
}

fn step_traces(out: &Path, conversation: &str) -> Vec<Value> {
    let path = out.join(".tally/conversations").join(conversation).join("stepTraces.json");
    serde_json::from_str::<Value>(&std::fs::read_to_string(path).unwrap()).unwrap().as_array().unwrap().clone()
}

/// `(journey, state)` of each state a turn reached, edges left out (the in-process engine
/// reports none; Parlant names the edge in its node guideline ids).
fn states(trace: &Value) -> Vec<(String, String)> {
    trace["observations"]["journey_states"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| (s["journey"].as_str().unwrap().to_string(), s["state"].as_str().unwrap().to_string()))
        .collect()
}

/// Both runs of `scenario` against `definition`: in process, then over the fake Parlant server.
/// Checks that they agree turn by turn and that the server was cleaned up; returns both
/// reports and both runs' step traces.
async fn both_ways(
    scenario: &Path,
    definition: &Path,
    conversation: &str,
    models: Models<'_>,
) -> ((Value, Value), (Vec<Value>, Vec<Value>)) {
    let dir = tempfile::tempdir().unwrap();
    let in_process = simulate(scenario, "in-process", models, &dir.path().join("in-process"));
    let engine_models = match models {
        Models::Recordings => EngineModels::Recordings(&repo_root().join("examples/recordings")),
        Models::Fake(fake) => EngineModels::Server(&fake.url),
    };
    let server = fake_parlant_engine::start(definition, engine_models).await;
    let url = server.url.clone();
    let agent_id = if conversation.starts_with("weather") { "weather" } else { "otto" };
    let over_parlant = simulate(scenario, &format!("parlant:{url}#{agent_id}"), models, &dir.path().join("parlant"));

    // Both runs passed, for the same reason, with the same journey coverage (states,
    // transitions, entries, completions, guidelines).
    let run = |report: &Value| report["scenarios"][0]["runs"][0].clone();
    assert_eq!(run(&in_process)["passed"], true, "{}", run(&in_process));
    assert_eq!(run(&over_parlant)["passed"], true, "{}", run(&over_parlant));
    assert_eq!(run(&in_process)["reason"], run(&over_parlant)["reason"]);
    assert_eq!(in_process["coverage"], over_parlant["coverage"]);

    // Turn by turn: what the agent did, in the same order and the same form (preambles, text,
    // tool calls with their service, arguments and results), and the same journey states.
    let a = step_traces(&dir.path().join("in-process"), conversation);
    let b = step_traces(&dir.path().join("parlant"), conversation);
    assert_eq!(a.len(), b.len());
    for (turn, (x, y)) in a.iter().zip(&b).enumerate() {
        assert_eq!(x["userMessage"], y["userMessage"], "turn {turn}");
        assert_eq!(x["agentMessages"], y["agentMessages"], "turn {turn}");
        assert_eq!(states(x), states(y), "turn {turn}");
        for key in ["tools_called", "guidelines_matched"] {
            assert_eq!(x["observations"][key], y["observations"][key], "turn {turn}: {key}");
        }
    }
    // Parlant's node guideline ids carried the transitions.
    let reached = b.iter().flat_map(|t| t["observations"]["journey_states"].as_array().cloned().unwrap_or_default());
    assert!(reached.into_iter().any(|s| s["edge"].is_string()), "{b:?}");

    // The run removed its session and its customer from the server.
    let http = guidepost_llm::http::client_builder().build().unwrap();
    let sessions: Value = http.get(format!("{url}/sessions")).send().await.unwrap().json().await.unwrap();
    assert_eq!(sessions, serde_json::json!([]));
    let customers: Value = http.get(format!("{url}/customers")).send().await.unwrap().json().await.unwrap();
    let ids: Vec<&str> = customers.as_array().unwrap().iter().filter_map(|c| c["id"].as_str()).collect();
    assert_eq!(ids, ["guest"]);
    ((in_process, over_parlant), (a, b))
}

/// The parts of a turn's agent messages, as `kind` strings in order.
fn kinds(trace: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for message in trace["agentMessages"].as_array().unwrap() {
        let preamble = message["providerOptions"]["guidepost"]["preamble"] == true;
        match &message["content"] {
            Value::String(_) => out.push(if preamble { "preamble" } else { "text" }.to_string()),
            Value::Array(parts) => out.extend(parts.iter().map(|p| p["type"].as_str().unwrap_or("?").to_string())),
            _ => out.push("?".into()),
        }
    }
    out
}

// Multi-threaded: the simulator runs as a child process the test waits for, while the fake
// server answers it from this runtime.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scenario_in_process_and_over_parlant_gives_the_same_coverage_order_and_tool_calls() {
    let root = repo_root();
    let ((in_process, _), (_, over_parlant)) = both_ways(
        &root.join("examples/scenarios/weather-english.yaml"),
        &root.join("examples/agents/weather.yaml"),
        "weather-english-trial0",
        Models::Recordings,
    )
    .await;
    let visits: Vec<(String, u64)> = in_process["coverage"][0]["journeys"][0]["states"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["state"].as_str().unwrap().to_string(), s["visits"].as_u64().unwrap()))
        .collect();
    let visited = |state: &str| visits.iter().find(|(s, _)| s == state).map_or(0, |(_, v)| *v);
    // The report is a step that only tells something: the journey rests on it for the turn.
    assert_eq!([visited("get_weather"), visited("show_result"), visited("ask_continue")], [1, 1, 0], "{visits:?}");
    let turns: Vec<Vec<String>> = over_parlant.iter().map(kinds).collect();
    assert_eq!(turns[0], ["tool-call", "tool-result", "text"], "the lookup comes before the answer");
    let call = &over_parlant[0]["agentMessages"][0]["content"][0];
    assert_eq!(
        (&call["toolName"], &call["input"]["location"]),
        (&Value::from("get_weather"), &Value::from("Hangzhou"))
    );
    assert_eq!(call["providerOptions"]["guidepost"]["service"], "fixtures");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preambles_stay_preambles_and_first_over_parlant_too() {
    // Otto with preambles on, and a model server answering by fixed rules (so the engine
    // answers alike in both runs without recordings).
    let root = repo_root();
    let dir = tempfile::tempdir().unwrap();
    let otto = std::fs::read_to_string(root.join("examples/agents/otto.yaml")).unwrap();
    let description = otto.lines().find(|l| l.starts_with("  description:")).unwrap();
    let otto = otto.replacen(description, &format!("{description}\n  preamble: {{ enabled: true }}"), 1);
    let definition: PathBuf = dir.path().join("agents/otto.yaml");
    std::fs::create_dir_all(definition.parent().unwrap()).unwrap();
    std::fs::write(&definition, otto).unwrap();
    let scenario = dir.path().join("scenarios/otto-preamble.yaml");
    std::fs::create_dir_all(scenario.parent().unwrap()).unwrap();
    std::fs::write(
        &scenario,
        "id: otto-preamble\nagent: ../agents/otto.yaml\ngoal: Find out where order 48213 is.\n\
         persona: { description: A patient online shopper. }\nscript:\n\
         \x20 - customer: Hi, I want to check the status of an order I placed last week.\n\
         \x20 - customer: Sure, my order number is 48213.\n\
         expect:\n  - tool_called: { tool: check_order_status, arguments: { order_number: \"48213\" } }\n",
    )
    .unwrap();
    let fake = fake_model();
    let (_, (in_process, over_parlant)) =
        both_ways(&scenario, &definition, "otto-preamble-trial0", Models::Fake(&fake)).await;
    for traces in [&in_process, &over_parlant] {
        let turns: Vec<Vec<String>> = traces.iter().map(kinds).collect();
        assert_eq!(turns[0].first().map(String::as_str), Some("preamble"), "{turns:?}");
        assert_eq!(turns[1], ["preamble", "tool-call", "tool-result", "text"], "{turns:?}");
    }
}
