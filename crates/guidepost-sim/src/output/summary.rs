//! Short human-readable summaries of runs.

use crate::runner::RunResult;
use crate::suite::SuiteReport;

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
    if let Some(cleanup) = &result.cleanup_error {
        out.push(format!("Cleanup: {cleanup}"));
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

/// A few lines on a suite: one per scenario (passes, pass^k), totals, usage per participant
/// and, when computed, the coverage gaps.
pub fn summarize_suite(report: &SuiteReport) -> String {
    let mut out = vec![format!("Agent: {}", report.agent)];
    for s in &report.scenarios {
        let pass_k: Vec<String> = s.pass_hat_k.iter().map(|(k, v)| format!("pass^{k}={v:.2}")).collect();
        let reasons: Vec<String> = s.runs.iter().map(|r| r.reason.to_string()).collect();
        out.push(format!("  {} {}/{} passed [{}] {}", s.id, s.passed, s.trials, reasons.join(", "), pass_k.join(" ")));
    }
    for run in report.scenarios.iter().flat_map(|s| &s.runs) {
        if let Some(cleanup) = &run.cleanup_error {
            out.push(format!("  {} trial {}: {cleanup}", run.scenario_id, run.trial));
        }
    }
    let t = &report.totals;
    out.push(format!(
        "Runs: {} passed, {} failed ({} errors), pass rate {:.2}",
        t.passed, t.failed, t.errors, t.pass_rate
    ));
    let u = &report.usage;
    for (who, totals) in [("customer", &u.customer), ("judge", &u.judge), ("agent", &u.agent)] {
        out.push(format!(
            "  {who}: {} calls, {} prompt + {} completion tokens, ${:.4}",
            totals.calls, totals.prompt_tokens, totals.completion_tokens, totals.cost_usd
        ));
    }
    for coverage in &report.coverage {
        out.push(coverage.to_text());
    }
    out.join("\n")
}
