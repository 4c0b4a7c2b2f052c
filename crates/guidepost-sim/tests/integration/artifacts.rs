//! The artifact folder, field by field against Tally's documented shapes, and persistence after
//! a mid-run failure.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use guidepost_sim::agents::ToolCallRecord;
use guidepost_sim::output::jsonl::to_jsonl;
use guidepost_sim::output::summary::summarize;
use guidepost_sim::output::tally::{parse_conversation_jsonl, to_conversation};
use guidepost_sim::runner::run_trajectory;
use guidepost_sim::steps::expr::Expr;
use guidepost_sim::steps::{CustomCheck, Precondition, StepDefinition};
use guidepost_sim::{AgentError, AgentTurn, StepTrace, StopReason};
use serde_json::{Value, json};

use crate::support::*;

fn read_json(path: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn keys(value: &Value) -> Vec<&str> {
    value.as_object().unwrap().keys().map(String::as_str).collect()
}

#[tokio::test]
async fn artifacts_have_the_reference_shapes() {
    let dir = tempfile::tempdir().unwrap();
    let model =
        Models::new().customer(vec![say("hi"), say("book it")]).ranking(vec![("book", 0.9)]).judge(true).build();
    let mut hello = StepDefinition::new("hello", "Say hello");
    hello.hints = vec!["Oak Street".into()];
    hello.max_attempts = Some(3);
    hello.timeout = Some(std::time::Duration::from_millis(60_000));
    let mut book = StepDefinition::new("book", "Ask to book").after("hello");
    book.preconditions.push(Precondition::Custom {
        name: Some("two turns".into()),
        check: CustomCheck::Expr(Expr::parse("turns >= 1").unwrap()),
    });
    let s = setup(trajectory(Some(graph(vec![hello, book], &["book"])), Some(6)));
    let mut agent = ScriptedAgent::new(|turn, _| {
        let mut t = AgentTurn::default();
        if turn == 1 {
            t.push_tool_call(ToolCallRecord::new(
                "fixtures:book_taxi",
                json!({"pickup": "Oak Street"}),
                json!({"booking_id": "TX-1"}),
            ));
        }
        t.push_message("Booked.");
        Ok(t)
    });
    let result = run_trajectory(&s, &mut agent, &env(&model, Some(dir.path()))).await;
    assert_eq!(result.reason, StopReason::GoalReached, "{}", result.summary);
    let folder = dir.path().join("conversations").join("test-trial0");
    assert_eq!(result.artifacts_dir.as_deref(), Some(folder.as_path()));

    let meta = read_json(&folder.join("meta.json"));
    assert_eq!(meta["id"], "test-trial0");
    assert!(chrono::DateTime::parse_from_rfc3339(meta["createdAt"].as_str().unwrap()).is_ok());
    assert_eq!(meta["reason"], "goal-reached");

    let text = std::fs::read_to_string(folder.join("conversation.jsonl")).unwrap();
    let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(
        keys(&lines[0]),
        ["stepIndex", "input", "output", "timestamp", "metadata", "conversationId", "conversationMetadata"]
    );
    assert_eq!(lines[0]["conversationMetadata"]["runOutcome"]["reason"], "goal-reached");
    assert!(lines[1].get("conversationMetadata").is_none());
    assert_eq!(lines[0]["conversationId"], "test-trial0");
    assert_eq!(lines[1]["conversationId"], "test-trial0", "one conversation id per run");
    assert_eq!(lines[0]["input"], json!({"role": "user", "content": "hi"}));
    assert_eq!(keys(&lines[0]["metadata"]), ["originalTurnIndex", "stepId", "selection"]);
    assert_eq!(lines[0]["metadata"]["selection"]["method"], "start");
    assert_eq!(keys(&lines[0]["metadata"]["selection"]["candidates"][0]), ["stepId", "score", "reasons"]);
    assert_eq!(lines[1]["metadata"]["selection"]["method"], "preconditions-ordered");
    assert_eq!(
        lines[1]["metadata"]["end"],
        json!({"isFinal": true, "reason": "goal-reached", "completed": true, "summary": "Terminal step \"book\" satisfied",
            "guidepostReason": "goal-reached"})
    );
    let output = &lines[1]["output"];
    assert_eq!(output[0]["role"], "assistant");
    assert_eq!(
        output[0]["content"][0],
        json!({"type": "tool-call", "toolCallId": "call-1-0", "toolName": "book_taxi", "input": {"pickup": "Oak Street"},
            "providerOptions": {"guidepost": {"service": "fixtures"}}})
    );
    assert_eq!(output[1]["role"], "tool");
    assert_eq!(
        output[1]["content"][0],
        json!({"type": "tool-result", "toolCallId": "call-1-0", "toolName": "book_taxi", "output": {"type": "json", "value": {"booking_id": "TX-1"}}})
    );
    assert_eq!(output[2], json!({"role": "assistant", "content": "Booked."}));

    let traces = read_json(&folder.join("stepTraces.json"));
    let first = &traces[0];
    for key in ["turnIndex", "userMessage", "agentMessages", "timestamp", "stepId", "selection"] {
        assert!(first.get(key).is_some(), "stepTraces.json lacks {key}");
    }
    assert!(first.get("end").is_none() && traces[1].get("end").is_some());
    let back: Vec<StepTrace> = serde_json::from_value(traces).unwrap();
    assert_eq!(back, result.traces);

    let tm = read_json(&folder.join("trajectory.meta.json"));
    assert_eq!(tm["version"], 1);
    assert_eq!(tm["trajectoryId"], "test-trial0");
    assert_eq!(tm["goal"], "Book a taxi to the station");
    assert_eq!(tm["persona"], json!({"name": "Ann", "description": "A busy commuter", "guardrails": ["Be brief"]}));
    assert_eq!(tm["maxTurns"], 6);
    assert_eq!(tm["loopDetection"]["maxConsecutiveSameStep"], 3);
    assert_eq!(tm["stepGraph"]["start"], "hello");
    assert_eq!(tm["stepGraph"]["terminals"], json!(["book"]));
    assert_eq!(
        tm["stepGraph"]["steps"][0],
        json!({"id": "hello", "instruction": "Say hello", "hints": ["Oak Street"], "maxAttempts": 3, "timeoutMs": 60000})
    );
    assert_eq!(
        tm["stepGraph"]["steps"][1]["preconditions"],
        json!([{"type": "stepSatisfied", "stepId": "hello"}, {"type": "custom", "name": "two turns"}])
    );

    let runs: Vec<_> =
        std::fs::read_dir(folder.join("runs").join("trajectory")).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(runs.len(), 1);
    let name = runs[0].to_string_lossy().to_string();
    let id = name.strip_suffix(".json").unwrap();
    let parts: Vec<&str> = id.split('-').collect();
    assert_eq!(parts[0], "run");
    assert!(parts[1].chars().all(|c| c.is_ascii_digit()));
    assert!(parts[2].len() == 6 && parts[2].chars().all(|c| c.is_ascii_digit() || c.is_ascii_lowercase()));

    let conversation = parse_conversation_jsonl(&text).unwrap();
    assert_eq!(conversation, to_conversation("test-trial0", &result.traces, conversation.metadata.clone()));
    assert_eq!(conversation.metadata.unwrap()["status"], "finished");
    let jsonl = to_jsonl(&result);
    let line: Value = serde_json::from_str(&jsonl[1]).unwrap();
    assert_eq!(line["conversationId"], "test-trial0");
    assert_eq!(line["metadata"]["reason"], "goal-reached");
    assert_eq!(line["stepId"], "book");
    assert!(summarize(&result).starts_with("Trajectory completed\nReason: goal-reached\nTotal turns: 2"));
}

#[tokio::test]
async fn a_mid_run_failure_keeps_the_appended_lines_and_meta_says_error() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let seen_lines = Arc::new(AtomicUsize::new(usize::MAX));
    let seen = Arc::clone(&seen_lines);
    let file = root.join("conversations").join("test-trial0").join("conversation.jsonl");
    let mut agent = ScriptedAgent::new(move |turn, _| {
        if turn < 2 {
            return Ok(AgentTurn::text(["fine"]));
        }
        // While the run is under way, the turns played so far are already on disk.
        seen.store(std::fs::read_to_string(&file).unwrap().lines().count(), Ordering::SeqCst);
        Err(AgentError::Transport("connection reset".into()))
    });
    let model = Models::new().customer(vec![say("one"), say("two"), say("three")]).build();
    let result = run_trajectory(&setup(trajectory(None, Some(10))), &mut agent, &env(&model, Some(&root))).await;
    assert_eq!(result.reason, StopReason::Error);
    // The header line, then the two turns.
    assert_eq!(seen_lines.load(Ordering::SeqCst), 3);
    let folder = root.join("conversations").join("test-trial0");
    let meta = read_json(&folder.join("meta.json"));
    assert_eq!(meta["reason"], "error");
    assert_eq!(meta["status"], "finished");
    assert_eq!(meta["failure"], "agent");
    assert!(meta["error"].as_str().unwrap().contains("connection reset"));
    let lines = std::fs::read_to_string(folder.join("conversation.jsonl")).unwrap();
    assert_eq!(lines.lines().count(), 3);
    let last: Value = serde_json::from_str(lines.lines().last().unwrap()).unwrap();
    assert_eq!(last["metadata"]["end"]["reason"], "error");
}
