//! One scenario, one agent, two ways: in process, and behind a fake Parlant 3.3.2 server
//! (`guidepost fake-parlant`: Parlant's routes, long polls and event sequence, with journey
//! states as `journey_node:<node>:<edge>` ids) driven by `simulate --agent parlant:…`. Both runs
//! replay the same recordings, so the engine answers alike, and the artifacts must agree on
//! journey coverage, the order of what the agent did, and the form of its tool calls.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::repo_root;
use crate::serve::{bin, start};

const SCENARIO: &str = "examples/scenarios/weather-cities.yaml";

fn simulate(agent: &str, out: &Path) -> Value {
    let output = Command::new(bin())
        .current_dir(repo_root())
        .env_remove("GUIDEPOST_MODEL")
        .env_remove("GUIDEPOST_EMBEDDER")
        .args(["simulate", SCENARIO, "--agent", agent, "--cache", "replay-or-fail"])
        .args(["--recordings", "examples/recordings", "--no-progress", "--out"])
        .arg(out.join(".tally"))
        .arg("--report-json")
        .arg(out.join("report.json"))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "simulate --agent {agent}:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap()
}

fn step_traces(out: &Path) -> Vec<Value> {
    let path = out.join(".tally/conversations/weather-cities-trial0/stepTraces.json");
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

#[tokio::test]
async fn a_scenario_in_process_and_over_parlant_gives_the_same_coverage_order_and_tool_calls() {
    let dir = tempfile::tempdir().unwrap();
    let in_process = simulate("in-process", &dir.path().join("in-process"));

    let mut cmd = Command::new(bin());
    cmd.env_remove("GUIDEPOST_MODEL").env_remove("GUIDEPOST_EMBEDDER").args([
        "fake-parlant",
        "examples/agents/weather.yaml",
        "--port",
        "0",
        "--cache",
        "replay-or-fail",
        "--recordings",
        "examples/recordings",
    ]);
    let server = start(cmd, "listening ");
    let url = format!("http://127.0.0.1:{}", server.url);
    let over_parlant = simulate(&format!("parlant:{url}#weather"), &dir.path().join("parlant"));

    // Both runs passed, for the same reason (the checkpoint on `ask_city` and the expectations
    // on the tool's arguments hold over Parlant too).
    let run = |report: &Value| report["scenarios"][0]["runs"][0].clone();
    assert_eq!(run(&in_process)["passed"], true, "{}", run(&in_process));
    assert_eq!(run(&over_parlant)["passed"], true, "{}", run(&over_parlant));
    assert_eq!(run(&in_process)["reason"], run(&over_parlant)["reason"]);

    // The same journey coverage: states, transitions, entries, completions, guidelines.
    let coverage = |report: &Value| report["coverage"].clone();
    assert_eq!(coverage(&in_process), coverage(&over_parlant));
    let visits: Vec<(String, u64)> = in_process["coverage"][0]["journeys"][0]["states"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["state"].as_str().unwrap().to_string(), s["visits"].as_u64().unwrap()))
        .collect();
    let visited = |state: &str| visits.iter().find(|(s, _)| s == state).map_or(0, |(_, v)| *v);
    assert_eq!([visited("ask_city"), visited("get_weather"), visited("ask_continue"), visited("end")], [1, 2, 2, 1]);

    // Turn by turn: what the agent did, in the same order and the same form (text, tool calls
    // with their service, arguments and results), and the same journey states.
    let (a, b) = (step_traces(&dir.path().join("in-process")), step_traces(&dir.path().join("parlant")));
    assert_eq!(a.len(), b.len());
    assert!(a.len() >= 4);
    let mut tool_calls = 0;
    for (turn, (x, y)) in a.iter().zip(&b).enumerate() {
        assert_eq!(x["userMessage"], y["userMessage"], "turn {turn}");
        assert_eq!(x["agentMessages"], y["agentMessages"], "turn {turn}");
        assert_eq!(states(x), states(y), "turn {turn}");
        assert_eq!(x["observations"]["tools_called"], y["observations"]["tools_called"], "turn {turn}");
        assert_eq!(x["observations"]["guidelines_matched"], y["observations"]["guidelines_matched"], "turn {turn}");
        for part in x["agentMessages"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        {
            if part["type"] == "tool-call" {
                tool_calls += 1;
                assert_eq!(part["toolName"], "get_weather");
                assert!(part["providerOptions"]["guidepost"]["service"].is_string(), "{part}");
            }
        }
    }
    assert_eq!(tool_calls, 2, "both lookups are in the artifacts");
    // Parlant's node guideline ids carried the transitions.
    let edges = b.iter().flat_map(|t| t["observations"]["journey_states"].as_array().cloned().unwrap_or_default());
    assert!(edges.into_iter().any(|s| s["edge"].is_string()), "{b:?}");

    // The run removed its session and its customer from the server.
    let http = reqwest::Client::new();
    let sessions: Value = http.get(format!("{url}/sessions")).send().await.unwrap().json().await.unwrap();
    assert_eq!(sessions, serde_json::json!([]));
    let customers: Value = http.get(format!("{url}/customers")).send().await.unwrap().json().await.unwrap();
    let ids: Vec<&str> = customers.as_array().unwrap().iter().filter_map(|c| c["id"].as_str()).collect();
    assert_eq!(ids, ["guest"]);
}
