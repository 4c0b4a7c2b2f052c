//! Short human-readable summaries of runs.

use crate::runner::RunResult;

/// A few lines on how a run went: outcome, reason, turns, summary, then each customer message
/// (first 50 characters) with its step.
pub fn summarize(result: &RunResult) -> String {
    let mut out = vec![
        format!("Trajectory {}", if result.completed { "completed" } else { "incomplete" }),
        format!("Reason: {}", result.reason),
        format!("Total turns: {}", result.traces.len()),
    ];
    if !result.summary.is_empty() {
        out.push(format!("Summary: {}", result.summary));
    }
    if let Some(error) = &result.error {
        out.push(format!("Error: {error}"));
    }
    out.push("Steps:".to_string());
    for trace in &result.traces {
        let text: String = trace.user_message.text().chars().take(50).collect();
        out.push(format!("  {}. [{}] {text}", trace.turn_index + 1, trace.step_id.as_deref().unwrap_or("-")));
    }
    for check in &result.checkpoints {
        out.push(format!("  checkpoint {}: {}", check.name, if check.passed { "passed" } else { "FAILED" }));
    }
    out.join("\n")
}
