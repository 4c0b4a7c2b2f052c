//! Every artifact of every stop reason, checked against the schemas written from Tally's types
//! (`tests/tally-schemas`), for runs with turns and runs that end before their first turn, while
//! the run is under way and once it is finished; then, when a prepared validator is at hand
//! (`GUIDEPOST_TALLY_VALIDATOR`, see `tests/tally-schemas/README.md`), loaded by Tally itself.

use std::path::{Path, PathBuf};

use chrono::Utc;
use guidepost_sim::agents::{AgentTurn, AgentUnderTest, ToolCallRecord};
use guidepost_sim::observations::{EngineObservations, JourneyStateReached, UnattributedJourneyNode};
use guidepost_sim::output::artifacts::ArtifactWriter;
use guidepost_sim::runner::{FailureSource, RunResult};
use guidepost_sim::steps::StepDefinition;
use guidepost_sim::trajectory::{EndMarker, Selection, SelectionCandidate, SelectionMethod, TurnSource};
use guidepost_sim::{AgentError, StepTrace, StopReason, run_trajectory};
use serde_json::{Value, json};

use crate::support::*;
use crate::tally_schema::{load, violations};

fn agent_turn(turn: u32) -> AgentTurn {
    let mut t = AgentTurn::default();
    t.push_preamble("One moment, please.");
    t.push_tool_call(ToolCallRecord::new("fixtures:book_taxi", json!({"pickup": "Oak St"}), json!({"id": "TX-1"})));
    t.push_tool_call(ToolCallRecord {
        error: Some("Tool error (tool='fixtures:eta'): timeout".into()),
        ..ToolCallRecord::new("fixtures:eta", json!({}), json!("Tool call error"))
    });
    t.push_message(format!("Booked (turn {turn})."));
    t
}

fn trace(turn: u32) -> StepTrace {
    let selection = if turn == 0 {
        Selection {
            method: SelectionMethod::Start,
            candidates: Some(vec![SelectionCandidate { step_id: "hello".into(), score: 1.0, reasons: vec![] }]),
        }
    } else {
        Selection { method: SelectionMethod::None, candidates: None }
    };
    StepTrace {
        turn_index: turn,
        user_message: guidepost_sim::message::ModelMessage::user(format!("message {turn}")),
        agent_messages: agent_turn(turn).to_model_messages(turn),
        timestamp: Utc::now(),
        step_id: (turn == 0).then(|| "hello".to_string()),
        selection,
        end: None,
        source: if turn == 0 { TurnSource::Simulated } else { TurnSource::Scripted },
        observations: Some(EngineObservations {
            journey_states: vec![JourneyStateReached { journey: "taxi".into(), state: "pickup".into(), edge: None }],
            unattributed_journey_nodes: vec![UnattributedJourneyNode {
                node: "Xk3mQ9aLp0".into(),
                edge: None,
                candidates: vec!["taxi".into(), "billing".into()],
            }],
            ..EngineObservations::default()
        }),
        latency_ms: Some(12),
    }
}

/// Writes the run folder of a run that stops for `reason` after `turns` turns, checking the
/// files while it is under way; returns the folder.
fn write_run(root: &Path, reason: StopReason, completed: bool, turns: u32) -> PathBuf {
    let mut trajectory = trajectory(
        Some(graph(vec![StepDefinition::new("hello", "Say hello"), StepDefinition::new("book", "Book")], &["book"])),
        Some(6),
    );
    trajectory.conversation_id = format!("{reason}-{}-{turns}", if completed { "done" } else { "open" });
    let writer = ArtifactWriter::begin(root, &trajectory).unwrap();
    check_conversation_file(writer.dir(), 0);
    let mut traces = Vec::new();
    for turn in 0..turns {
        traces.push(trace(turn));
        writer.append(turn as usize, &traces[turn as usize]).unwrap();
        check_conversation_file(writer.dir(), turn as usize + 1);
    }
    let summary = format!("stopped: {reason}");
    if let Some(last) = traces.last_mut() {
        last.end = Some(EndMarker { is_final: true, reason, completed, summary: Some(summary.clone()) });
    }
    let error = (reason == StopReason::Error).then(|| "agent failed: connection reset".to_string());
    let result = RunResult {
        scenario_id: "tally".into(),
        trial: 0,
        conversation_id: trajectory.conversation_id.clone(),
        traces,
        preamble: vec!["Welcome!".into()],
        reason,
        completed,
        summary,
        failure: error.as_ref().map(|_| FailureSource::Agent),
        error,
        steps: Vec::new(),
        verdicts: Vec::new(),
        checkpoints: Vec::new(),
        observations: EngineObservations::default(),
        reports_engine: true,
        usage: Default::default(),
        started_at: Utc::now(),
        finished_at: Utc::now(),
        artifacts_dir: Some(writer.dir().to_path_buf()),
        cleanup_error: (turns == 0).then(|| "cleanup failed: session s1 was left on the server".to_string()),
    };
    writer.finish(&result).unwrap();
    writer.dir().to_path_buf()
}

fn read(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn assert_valid(schema: &Value, value: &Value, what: &str) {
    let problems = violations(schema, value);
    assert!(problems.is_empty(), "{what}:\n{}", problems.join("\n"));
}

/// `conversation.jsonl` as Tally reads it: never empty, every line JSON, a header-only first
/// line or steps valid against the schema with `stepIndex` equal to their position; returns the
/// lines.
fn check_conversation_file(dir: &Path, steps: usize) -> Vec<Value> {
    let id = dir.file_name().unwrap().to_str().unwrap();
    let path = dir.join("conversation.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{}: not JSON ({e}): {l}", path.display())))
        .collect();
    assert!(!lines.is_empty(), "{} is empty", path.display());
    let schema = load("conversation-line.schema.json");
    let header = ["stepIndex", "input", "output"].iter().all(|k| lines[0].get(k).is_none());
    if header {
        assert_eq!(lines[0]["conversationId"], id);
        assert!(lines[0]["conversationMetadata"].is_object());
    }
    let step_lines = &lines[usize::from(header)..];
    assert_eq!(step_lines.len(), steps, "{}", path.display());
    for (i, line) in step_lines.iter().enumerate() {
        assert_valid(&schema, line, &format!("{} line {i}", path.display()));
        assert_eq!((line["stepIndex"].as_u64(), line["conversationId"].as_str()), (Some(i as u64), Some(id)));
    }
    lines
}

fn check_folder(dir: &Path, reason: StopReason, completed: bool, turns: usize) {
    let tally = reason.to_tally(completed).to_string();
    let what = |file: &str| format!("{reason} ({turns} turns): {file}");
    assert_valid(&load("conversation-meta.schema.json"), &read(&dir.join("meta.json")), &what("meta.json"));

    let lines = check_conversation_file(dir, turns);
    let outcome = &lines[0]["conversationMetadata"]["runOutcome"];
    assert_eq!(
        (outcome["reason"].as_str(), outcome["guidepostReason"].as_str()),
        (Some(&*tally), Some(reason.as_str()))
    );

    let traces = read(&dir.join("stepTraces.json"));
    assert_valid(&load("step-traces.schema.json"), &traces, &what("stepTraces.json"));
    assert_eq!(traces.as_array().map(Vec::len), Some(turns));
    if turns > 0 {
        let end = &traces[turns - 1]["end"];
        assert_eq!((end["reason"].as_str(), end["guidepostReason"].as_str()), (Some(&*tally), Some(reason.as_str())));
        assert_eq!(&lines[turns - 1]["metadata"]["end"], end, "both files carry the same end marker");
        let back: Vec<StepTrace> = serde_json::from_value(traces).unwrap();
        assert_eq!(back.last().and_then(|t| t.end.as_ref()).map(|e| e.reason), Some(reason));
    }

    let meta = read(&dir.join("trajectory.meta.json"));
    assert_valid(&load("trajectory-meta.schema.json"), &meta, &what("trajectory.meta.json"));
    assert_eq!(meta["metadata"]["runOutcome"]["guidepostReason"], reason.as_str());

    let runs: Vec<PathBuf> =
        std::fs::read_dir(dir.join("runs").join("trajectory")).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(runs.len(), 1, "one run file, nothing else under runs/");
    assert!(std::fs::read_dir(dir.join("runs")).unwrap().count() == 1, "only runs/trajectory");
    let run = read(&runs[0]);
    assert_valid(&load("trajectory-run-meta.schema.json"), &run, &what("runs/trajectory"));
    assert_eq!(runs[0].file_stem().and_then(|s| s.to_str()), run["runId"].as_str());
    assert_eq!((run["reason"].as_str(), run["totalTurns"].as_u64()), (Some(&*tally), Some(turns as u64)));
    assert_eq!(run["metadata"]["guidepostReason"], reason.as_str());
    assert_eq!(run["result"]["reason"], reason.as_str(), "the run summary keeps Guidepost's reason");
}

struct Unreachable;

#[async_trait::async_trait]
impl AgentUnderTest for Unreachable {
    async fn start(&mut self, _: &str) -> Result<(), AgentError> {
        Err(AgentError::Transport("connection refused".into()))
    }
    async fn reply(&mut self, _: &str) -> Result<AgentTurn, AgentError> {
        Err(AgentError::Protocol("not started".into()))
    }
}

/// Loads `root` with Tally's own loaders when `GUIDEPOST_TALLY_VALIDATOR` names a directory
/// prepared by `tests/tally-schemas/tools/setup-tally-validator.sh`; says whether it ran.
fn load_with_tally(root: &Path, folders: usize) {
    let Some(dir) = std::env::var_os("GUIDEPOST_TALLY_VALIDATOR").map(PathBuf::from) else {
        println!(
            "Tally's own loaders: skipped (set GUIDEPOST_TALLY_VALIDATOR to a directory prepared by tests/tally-schemas/tools/setup-tally-validator.sh)"
        );
        return;
    };
    let local = dir.join("node_modules/.bin/bun");
    let bun = if local.exists() { local } else { PathBuf::from("bun") };
    let output = std::process::Command::new(&bun)
        .arg(dir.join("validate-tally-folder.ts"))
        .arg(root)
        .arg("--json")
        .output()
        .unwrap_or_else(|e| panic!("GUIDEPOST_TALLY_VALIDATOR is set but {} does not run: {e}", bun.display()));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let report: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!("Tally's validator said ({e}): {stdout}\n{}", String::from_utf8_lossy(&output.stderr))
    });
    let findings: Vec<&Value> =
        report["findings"].as_array().into_iter().flatten().filter(|f| f["level"] != "note").collect();
    assert!(output.status.success() && findings.is_empty(), "Tally's loaders found problems: {findings:#?}");
    assert_eq!(report["conversations"].as_array().map(Vec::len), Some(folders));
    println!("Tally's own loaders: ran on {folders} run folders, 0 errors, 0 warnings");
}

#[tokio::test]
async fn every_stop_reason_writes_artifacts_tally_loads() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join(".tally");
    let mut cases: Vec<(StopReason, bool)> =
        StopReason::ALL.iter().map(|r| (*r, *r == StopReason::GoalReached)).collect();
    cases.push((StopReason::ScriptEnded, true));
    cases.push((StopReason::CustomerEnded, true));
    let mut folders = 0;
    for (reason, completed) in cases {
        for turns in [0, 2] {
            let folder = write_run(&root, reason, completed, turns);
            check_folder(&folder, reason, completed, turns as usize);
            folders += 1;
        }
    }

    // A real run that fails before its first turn: the agent cannot be reached.
    let model = Models::new().build();
    let mut setup = setup(trajectory(None, Some(3)));
    setup.trajectory.conversation_id = "unreachable".into();
    let result = run_trajectory(&setup, &mut Unreachable, &env(&model, Some(&root))).await;
    assert_eq!((result.reason, result.traces.len()), (StopReason::Error, 0));
    check_folder(&root.join("conversations").join("unreachable"), StopReason::Error, false, 0);
    folders += 1;

    load_with_tally(&root, folders);
}
