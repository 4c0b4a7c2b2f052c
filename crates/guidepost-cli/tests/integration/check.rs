use predicates::prelude::*;

use crate::{guidepost, repo_root};

#[test]
fn examples_pass() {
    guidepost()
        .args(["check", "examples/agents"])
        .assert()
        .success()
        .stdout(predicate::str::contains("checked 4 agent(s): 0 error(s), 0 warning(s)"))
        .stdout(predicate::str::contains("ok weather (examples/agents/weather.yaml)"));
}

#[test]
fn broken_definitions_fail_with_positions_in_human_output() {
    guidepost()
        .args(["check", "crates/guidepost-core/tests/corpus/broken/unknown_fields.yaml"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("error[unknown-field]: unknown field `criticalty` in guideline"))
        .stderr(predicate::str::contains("crates/guidepost-core/tests/corpus/broken/unknown_fields.yaml:8:5"))
        .stderr(predicate::str::contains("= hint: did you mean `criticality`?"))
        .stdout(predicate::str::contains("FAILED"));
}

#[test]
fn json_output_lists_every_diagnostic() {
    let out = guidepost()
        .args([
            "check",
            "--format",
            "json",
            "crates/guidepost-core/tests/corpus/broken/journey_graph.yaml",
            "examples/agents/taxi.yaml",
        ])
        .assert()
        .code(1)
        .get_output()
        .stdout
        .clone();
    let doc: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(doc["ok"], false);
    assert_eq!(doc["agents"].as_array().unwrap().len(), 2);
    let broken = &doc["agents"][0];
    assert_eq!(broken["ok"], false);
    let diagnostics = broken["diagnostics"].as_array().unwrap();
    assert!(diagnostics.len() >= 5);
    for d in diagnostics {
        assert!(d["line"].as_u64().unwrap() >= 1 && d["column"].as_u64().unwrap() >= 1);
        assert!(d["file"].as_str().unwrap().ends_with("journey_graph.yaml"));
        assert!(matches!(d["severity"].as_str(), Some("error" | "warning")));
    }
    assert!(diagnostics.iter().any(|d| d["code"] == "unreachable-state" && d["line"] == 15 && d["column"] == 13));
    assert_eq!(doc["agents"][1]["ok"], true);
    assert_eq!(doc["agents"][1]["agent"], "taxi");
}

#[test]
fn agent_directories_combine_their_files() {
    let dir = tempfile::tempdir().unwrap();
    let agent = dir.path().join("support");
    std::fs::create_dir_all(agent.join("journeys")).unwrap();
    std::fs::write(
        agent.join("agent.yaml"),
        "agent:\n  name: Support\ntools:\n  - name: lookup\n    fixture: {cases: [{args: {}, result: ok}]}\n",
    )
    .unwrap();
    std::fs::write(
        agent.join("journeys/returns.yaml"),
        "journeys:\n  - id: returns\n    title: Returns\n    conditions: [The customer wants to return an item]\n    start: ask\n    states:\n      - {id: ask, chat: Ask for the order number, next: look}\n      - {id: look, tool: lookup, next: end}\n",
    )
    .unwrap();
    std::fs::write(
        agent.join("guidelines.json"),
        r#"{"guidelines": [{"id": "hi", "condition": "The customer greets", "action": "Greet back"}]}"#,
    )
    .unwrap();
    guidepost()
        .arg("check")
        .arg(dir.path())
        .assert()
        .success()
        .stdout(predicate::str::contains("ok support"))
        .stdout(predicate::str::contains("1 guidelines, 1 journeys, 1 tools"));
}

#[test]
fn warnings_fail_only_when_denied() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("warn.yaml");
    std::fs::write(&file, "agent: {name: W}\njourneys:\n  - {id: j, title: J, conditions: [x], start: a, states: [{id: a, chat: Hi, next: end}]}\n").unwrap();
    guidepost()
        .arg("check")
        .arg(&file)
        .assert()
        .success()
        .stderr(predicate::str::contains("warning[single-state-journey]"));
    guidepost().arg("check").arg("--deny-warnings").arg(&file).assert().code(1);
}

#[test]
fn missing_paths_are_usage_errors() {
    guidepost()
        .args(["check", "no/such/dir"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("no/such/dir does not exist"));
}

#[test]
fn schema_matches_the_committed_file() {
    let out = guidepost().arg("schema").assert().success().get_output().stdout.clone();
    let committed = std::fs::read_to_string(repo_root().join("schema/agent.schema.json")).unwrap();
    assert_eq!(String::from_utf8(out).unwrap(), committed);
}
