//! The case format, its errors, and the figures of a run on a scripted model.

mod situations;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use guidepost_llm::providers::scripted::ScriptedModel;
use guidepost_llm::{ChatRequest, TaskKind};
use serde_json::{Value, json};

use crate::run::Kind;
use crate::{Models, Options, Report};

pub(super) const AGENT: &str = r#"
agent: { name: Otto }
guidelines:
  - { id: refund, condition: The customer asks about refunds, action: Explain the refund policy }
  - { id: shipping, condition: The customer asks about shipping, action: Say shipping takes 3 days }
"#;

pub(super) const CASES: &str = r#"
agent: agent.yaml
cases:
  - id: refund-only
    conversation:
      - customer: Can I get a refund?
    expect:
      guidelines: {refund: true, shipping: false}
  - id: refund-again
    conversation:
      - customer: Hello
      - agent: Hi! How can I help?
      - customer: I want my money back.
    expect:
      guidelines: {refund: true}
"#;

/// A folder with the agent and a case file.
pub(super) fn suite_dir(cases: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("agent.yaml"), AGENT).unwrap();
    std::fs::write(dir.path().join("cases.yaml"), cases).unwrap();
    dir
}

/// A model that says every guideline applies.
pub(super) fn always_yes() -> Arc<ScriptedModel> {
    let answer = |req: &ChatRequest| {
        let text = format!("{}\n{}", req.system_text(), req.last_user_message());
        let conditions = text.split("## Conditions").nth(1).unwrap_or("");
        let checks: Vec<Value> = conditions
            .lines()
            .filter_map(|l| l.strip_prefix('[')?.split_once("] ").map(|(id, _)| id.to_string()))
            .map(|id| json!({"id": id, "rationale": "scripted yes", "applies": true}))
            .collect();
        Ok(json!({"checks": checks}))
    };
    Arc::new(ScriptedModel::new().when_task(TaskKind::Matching).reply_with(answer))
}

pub(super) fn models(model: Arc<ScriptedModel>) -> Models {
    Models { matching: model.clone(), journey_selection: model.clone(), tool_inference: model, embedder: None }
}

#[tokio::test]
async fn the_figures_count_every_decision_of_every_run() {
    let dir = suite_dir(CASES);
    let suite = crate::load(&[dir.path().to_path_buf()]).unwrap();
    assert_eq!(suite.cases.len(), 2);
    let outcome = crate::evaluate(&suite, &models(always_yes()), &Options { repeat: 2, ..Options::default() }).await;
    let report = Report::of(&outcome);
    // Each run: refund-only is right on refund, wrong on shipping; refund-again is right.
    let guideline = report.kinds.iter().find(|k| k.kind == Kind::Guideline).unwrap();
    assert_eq!((guideline.decisions, guideline.correct), (6, 4));
    assert_eq!(guideline.precision, Some(4.0 / 6.0));
    assert_eq!(guideline.recall, Some(1.0));
    assert_eq!(report.kinds.len(), 1, "kinds no case labels are left out");
    assert_eq!(report.pass_k, 0.5);
    assert_eq!(report.failures.len(), 2);
    assert!(report.failures.iter().all(|f| f.case == "refund-only" && f.subject == "shipping"));
    assert_eq!(report.failures[0].rationale.as_deref(), Some("matched (actionable): scripted yes"));
    let text = report.text(&outcome);
    assert!(text.contains("| guideline | 6 | 4 | 66.7 % | 66.7 % | 100.0 % |"), "{text}");
    assert!(text.contains("pass^2 50.0 %"), "{text}");
    assert!(
        text.contains("refund-only (") && text.contains("cases.yaml:4"),
        "the failure names its file and line: {text}"
    );
    let junit = report.junit(&outcome);
    assert!(junit.contains("tests=\"4\" failures=\"2\""), "{junit}");
    assert!(junit.contains("name=\"refund-again (run 2)\"/>"), "{junit}");
    let json = report.json(&outcome);
    assert_eq!(json["decisions"].as_array().map(Vec::len), Some(6));
    assert_eq!(json["report"]["kinds"][0]["kind"], "guideline");
}

/// The errors of loading `cases` (with the good agent beside it).
fn errors(cases: &str) -> Vec<String> {
    errors_in(&suite_dir(cases))
}

/// The errors of loading `cases.yaml` in `dir`.
pub(super) fn errors_in(dir: &tempfile::TempDir) -> Vec<String> {
    crate::load(&[dir.path().join("cases.yaml")]).unwrap_err().iter().map(ToString::to_string).collect()
}

#[test]
fn bad_cases_are_errors_at_their_file_and_line() {
    let unknown_field = errors("agent: agent.yaml\ncases:\n  - id: a\n    conversaton: []\n");
    assert!(unknown_field[0].contains("cases.yaml:4") && unknown_field[0].contains("conversaton"), "{unknown_field:?}");

    let unknown_ids = errors(
        "agent: agent.yaml\ncases:\n  - id: a\n    conversation:\n      - customer: hi\n    expect:\n      guidelines: {refnd: true}\n      journeys: {flow: start}\n      tools: {lookup: false}\n",
    );
    assert!(unknown_ids.iter().all(|e| e.contains("cases.yaml:3: case `a`")), "{unknown_ids:?}");
    for needle in ["no guideline `refnd`", "no journey `flow`", "no tool `lookup`"] {
        assert!(unknown_ids.iter().any(|e| e.contains(needle)), "{needle}: {unknown_ids:?}");
    }

    let agent_last = errors(
        "agent: agent.yaml\ncases:\n  - id: a\n    conversation:\n      - customer: hi\n      - agent: hello\n    expect:\n      guidelines: {refund: false}\n",
    );
    assert!(agent_last[0].contains("must end with a customer message"), "{agent_last:?}");
    let no_customer = errors(
        "agent: agent.yaml\ncases:\n  - id: a\n    conversation:\n      - agent: hello\n    expect:\n      guidelines: {refund: false}\n",
    );
    assert!(no_customer[0].contains("a customer message to decide on"), "{no_customer:?}");

    let nothing =
        errors("agent: agent.yaml\ncases:\n  - id: a\n    conversation:\n      - customer: hi\n    expect: {}\n");
    assert!(nothing[0].contains("holds no decision"), "{nothing:?}");

    let missing_agent = errors("agent: nowhere.yaml\ncases: []\n");
    assert!(missing_agent[0].contains("nowhere.yaml") && missing_agent[0].contains("cannot read"), "{missing_agent:?}");

    let twice = "agent: agent.yaml\ncases:\n  - id: a\n    conversation: [{customer: hi}]\n    expect: {guidelines: {refund: false}}\n  - id: a\n    conversation: [{customer: hi}]\n    expect: {guidelines: {refund: false}}\n";
    assert!(errors(twice).iter().any(|e| e.contains("case id `a` is also used")), "{:?}", errors(twice));

    let not_yaml = errors("agent: agent.yaml\ncases:\n  - id: a\n    conversation: [customer: hi: there]\n");
    assert!(not_yaml[0].contains("cases.yaml:4"), "{not_yaml:?}");
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn the_example_suite_loads_and_labels_every_kind() {
    let suite = crate::load(&[workspace().join("examples/eval")]).unwrap_or_else(|e| panic!("{e:?}"));
    assert!(suite.cases.len() >= 30, "{} cases", suite.cases.len());
    let expect = |f: fn(&crate::case::Expect) -> bool| suite.cases.iter().filter(|c| f(&c.spec.expect)).count();
    assert!(expect(|e| !e.guidelines.is_empty()) > 0);
    assert!(expect(|e| !e.journeys.is_empty()) > 0);
    assert!(expect(|e| !e.relationships.is_empty()) > 0);
    assert!(expect(|e| e.clarification.is_some()) > 0);
    assert!(expect(|e| !e.tools.is_empty()) > 0);
}

/// The committed schema must match the format; regenerate with `UPDATE_SCHEMA=1`.
#[test]
fn the_committed_schema_matches_the_format() {
    let path = workspace().join("crates/guidepost-eval/schema/eval.schema.json");
    let generated = serde_json::to_string_pretty(&crate::case::schema()).unwrap() + "\n";
    if std::env::var_os("UPDATE_SCHEMA").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(committed == generated, "schema/eval.schema.json is stale; run the tests with UPDATE_SCHEMA=1");
}

#[tokio::test]
async fn failed_model_calls_break_the_run_whatever_the_accuracy() {
    let dir = suite_dir(CASES);
    let suite = crate::load(&[dir.path().to_path_buf()]).unwrap();
    let down = Arc::new(
        ScriptedModel::new()
            .when_task(TaskKind::Matching)
            .fail(guidepost_llm::LlmError::Connection("connection refused".into())),
    );
    let outcome = crate::evaluate(&suite, &models(down), &Options::default()).await;
    let report = Report::of(&outcome);
    assert_eq!(report.errors.len(), 2, "{:?}", report.errors);
    assert!(report.errors.iter().all(|(_, e)| e.contains("connection refused")), "{:?}", report.errors);
    assert_eq!(report.accuracy, 0.0);
    assert!(report.text(&outcome).contains("Failed model calls (2):"));
}

/// The smallest answer `schema` admits: the first of an enum or of alternatives, `false`,
/// `""`, `0`, `[]`, and objects with their required properties.
fn minimal(schema: &Value, root: &Value) -> Value {
    if let Some(target) = schema.get("$ref").and_then(Value::as_str) {
        return minimal(root.pointer(target.trim_start_matches('#')).unwrap_or(&Value::Null), root);
    }
    if let Some(first) = schema.get("enum").and_then(Value::as_array).and_then(|e| e.first()) {
        return first.clone();
    }
    if let Some(value) = schema.get("const") {
        return value.clone();
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(first) = schema.get(key).and_then(Value::as_array).and_then(|a| a.first()) {
            return minimal(first, root);
        }
    }
    let kind = match schema.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(Value::Array(types)) => types.iter().filter_map(Value::as_str).find(|t| *t != "null").unwrap_or("null"),
        _ => "object",
    };
    match kind {
        "boolean" => json!(false),
        "string" => json!(""),
        "integer" | "number" => json!(0),
        "array" => json!([]),
        "null" => Value::Null,
        _ => {
            let required = schema.get("required").and_then(Value::as_array).cloned().unwrap_or_default();
            let properties = schema.get("properties").cloned().unwrap_or_else(|| json!({}));
            let object: serde_json::Map<String, Value> = required
                .iter()
                .filter_map(Value::as_str)
                .map(|name| (name.to_string(), minimal(properties.get(name).unwrap_or(&json!({})), root)))
                .collect();
            Value::Object(object)
        }
    }
}

/// A model of the given capabilities that answers every request with the smallest answer
/// its schema admits.
fn minimal_model(capabilities: guidepost_llm::ModelCapabilities) -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::new().with_capabilities(capabilities).when(|_| true).reply_with(|req: &ChatRequest| {
        match &req.output {
            guidepost_llm::OutputFormat::Json { schema, .. } => Ok(minimal(schema, schema)),
            guidepost_llm::OutputFormat::Text => Ok(json!("")),
        }
    }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_suite_runs_on_weak_and_strong_models_each_in_its_own_prompt_style() {
    use guidepost_llm::ModelCapabilities;
    let suite = crate::load(&[workspace().join("examples/eval")]).unwrap_or_else(|e| panic!("{e:?}"));
    let schemas = |model: &ScriptedModel, task: TaskKind| -> std::collections::BTreeSet<String> {
        model.requests_for(&task).iter().filter_map(|r| r.schema_name().map(str::to_string)).collect()
    };
    let mut kinds_reported = Vec::new();
    for (name, capabilities) in
        [("weak", ModelCapabilities::small_constrained(Some(32_768))), ("strong", ModelCapabilities::CAPABLE)]
    {
        let model = minimal_model(capabilities);
        let outcome = crate::evaluate(&suite, &models(model.clone()), &Options::default()).await;
        let report = Report::of(&outcome);
        assert!(report.errors.is_empty(), "{name}: {:?}", report.errors);
        kinds_reported.push(report.kinds.len());
        let matching = schemas(&model, TaskKind::Matching);
        let journeys = schemas(&model, TaskKind::JourneySelection);
        if name == "weak" {
            // one yes-or-no question per condition, and journeys walked step by step
            assert!(matching.contains("Verdict"), "{name}: {matching:?}");
            assert!(!matching.contains("ConditionChecks") && !matching.contains("ReapplyChecks"), "{matching:?}");
            assert!(journeys.contains("Verdict"), "{name}: {journeys:?}");
        } else {
            // conditions judged in batches with a rationale, journeys in one selection call
            assert!(matching.contains("ConditionChecks") && matching.contains("ReapplyChecks"), "{matching:?}");
            assert!(!matching.contains("Verdict"), "{name}: {matching:?}");
            assert!(journeys.contains("JourneySelectionAnswer"), "{name}: {journeys:?}");
        }
        assert!(model.calls(&TaskKind::ToolInference) > 0, "{name}: tool decisions were asked for");
    }
    assert_eq!(kinds_reported, vec![5, 5], "every kind is reported on both");
}
