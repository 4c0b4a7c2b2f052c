//! `guidepost eval` as a user runs it: a report written as the run goes, and resumed.

use std::time::Duration;

use serde_json::Value;

use crate::guidepost;

const CASES: &str = "agent: ../examples/eval/agents/bakery.yaml
cases:
  - id: tags-and-members
    conversation: [{customer: \"I'm allergic to nuts. What's new?\"}]
    matched: [allergy, cake_of_the_week]
    expect: {relationships: {allergy: false, cake_of_the_week: false}}
";

const MORE: &str = "  - id: tag-alone
    conversation: [{customer: \"I'm allergic to nuts. Any discount?\"}]
    matched: [allergy, loyalty_card]
    expect: {relationships: {allergy: true, loyalty_card: false}}
";

#[test]
fn the_report_is_written_as_the_run_goes_and_a_run_resumes_from_it() {
    let dir = tempfile::tempdir_in(crate::repo_root().join("target")).unwrap();
    let cases = dir.path().join("cases.yaml");
    let agent = crate::repo_root().join("examples/eval/agents/bakery.yaml");
    std::fs::write(&cases, CASES.replace("../examples/eval/agents/bakery.yaml", agent.to_str().unwrap())).unwrap();
    let report = dir.path().join("out/report.json");
    // No model installed: cases that no model decides run without one.
    let no_models = dir.path().join("no-models");
    let run = |extra: &[&str]| {
        guidepost()
            .env("GUIDEPOST_MODELS_DIR", &no_models)
            .arg("eval")
            .arg(&cases)
            .arg("--json")
            .arg(&report)
            .args(extra)
            .timeout(Duration::from_secs(60))
            .output()
            .unwrap()
    };
    // Relational resolution alone decides these cases: no model is loaded or asked.
    let first = run(&[]);
    let stderr = String::from_utf8_lossy(&first.stderr);
    assert!(first.status.success(), "{stderr}");
    assert!(!stderr.contains("loading"), "no model is loaded: {stderr}");
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(json["report"]["accuracy"], 1.0);
    assert_eq!(json["done"].as_array().map(Vec::len), Some(1));
    assert!(json["decisions"][0]["rationale"].as_str().unwrap().contains("deprioritized"), "{json}");

    // One more case: a resumed run keeps the first and runs only the new one.
    let more = std::fs::read_to_string(&cases).unwrap() + MORE;
    std::fs::write(&cases, more).unwrap();
    let second = run(&["--resume"]);
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(second.status.success(), "{stderr}");
    assert!(stderr.contains("[2/2] tag-alone") && !stderr.contains("tags-and-members"), "{stderr}");
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(json["done"].as_array().map(Vec::len), Some(2));
    assert_eq!(json["decisions"].as_array().map(Vec::len), Some(4));

    // A report made with other models is not resumed.
    let mut other = json.clone();
    other["models"] = serde_json::json!([["matching", "openai:gpt-4.1"]]);
    std::fs::write(&report, other.to_string()).unwrap();
    let refused = run(&["--resume"]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && stderr.contains("made with other models"), "{stderr}");
    // Nor without a report to resume.
    let alone = guidepost().arg("eval").arg(&cases).arg("--resume").timeout(Duration::from_secs(60)).output().unwrap();
    assert!(String::from_utf8_lossy(&alone.stderr).contains("give --json too"));
}

/// Every relationship case of the example suites that gives what matched before resolution is
/// decided by relational resolution alone, and decided right: no model is asked for them, so
/// they hold whatever model a deployment runs.
#[test]
fn relationship_cases_given_what_matched_are_all_right() {
    let root = crate::repo_root();
    let mut files = Vec::new();
    for entry in std::fs::read_dir(root.join("examples/eval")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            files.push(path);
        }
    }
    files.sort();
    let dir = tempfile::tempdir_in(root.join("target")).unwrap();
    let mut checked = 0;
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let doc: Value = yaml_serde::from_str(&text).unwrap();
        let given: Vec<Value> = doc["cases"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|case| case.get("matched").is_some() && case["expect"].get("relationships").is_some())
            .map(|case| {
                let mut case = case.clone();
                // Only the relationship decisions: the others need a model.
                case["expect"] = serde_json::json!({"relationships": case["expect"]["relationships"]});
                case
            })
            .collect();
        if given.is_empty() {
            continue;
        }
        // The agents' paths are relative to the case file: made absolute for the copy.
        let absolute =
            |relative: &Value| Value::from(file.parent().unwrap().join(relative.as_str().unwrap()).to_str().unwrap());
        let mut body = serde_json::json!({"cases": given});
        if let Some(agent) = doc.get("agent") {
            body["agent"] = absolute(agent);
        }
        if let Some(agents) = doc.get("agents").and_then(Value::as_object) {
            body["agents"] = agents.iter().map(|(name, path)| (name.clone(), absolute(path))).collect();
        }
        let cases = dir.path().join(file.file_name().unwrap());
        std::fs::write(&cases, body.to_string()).unwrap();
        let report = dir.path().join(format!("{}.json", checked));
        let out = guidepost()
            .env("GUIDEPOST_MODELS_DIR", dir.path().join("no-models")) // none is needed
            .arg("eval")
            .arg(&cases)
            .arg("--json")
            .arg(&report)
            .timeout(Duration::from_secs(900)) // a guard against a hang, not a time bound
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{}: {stderr}", file.display());
        assert!(!stderr.contains("loading"), "no model is loaded for {}: {stderr}", file.display());
        let json: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
        let decisions = json["decisions"].as_array().unwrap();
        assert!(!decisions.is_empty());
        for decision in decisions {
            assert_eq!(decision["kind"], "relationship");
            assert_eq!(decision["correct"], true, "{}: {decision}", file.display());
        }
        checked += decisions.len();
    }
    assert!(checked >= 10, "only {checked} relationship decisions were given what matched");
}
