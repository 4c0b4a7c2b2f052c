//! The JUnit XML report of a suite: one `<testsuite>` per scenario, one `<testcase>` per trial;
//! a run that did not pass is a `<failure>` (or an `<error>` when it ended with an error).

use std::path::Path;

use crate::error::SimError;
use crate::suite::SuiteReport;

fn escape(text: &str) -> String {
    text.chars()
        .filter(|c| !c.is_control() || matches!(c, '\n' | '\t' | '\r'))
        .map(|c| match c {
            '&' => "&amp;".to_string(),
            '<' => "&lt;".to_string(),
            '>' => "&gt;".to_string(),
            '"' => "&quot;".to_string(),
            '\'' => "&apos;".to_string(),
            c => c.to_string(),
        })
        .collect()
}

/// The report as JUnit XML.
pub fn to_junit(report: &SuiteReport) -> String {
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let total_secs = (report.finished_at - report.started_at).num_milliseconds().max(0) as f64 / 1000.0;
    out.push_str(&format!(
        "<testsuites name=\"guidepost simulate\" tests=\"{}\" failures=\"{}\" errors=\"{}\" time=\"{total_secs:.3}\">\n",
        report.totals.runs,
        report.totals.failed - report.totals.errors,
        report.totals.errors
    ));
    for scenario in &report.scenarios {
        let errors = scenario.runs.iter().filter(|r| r.error.is_some()).count();
        let failures = scenario.runs.iter().filter(|r| !r.passed && r.error.is_none()).count();
        out.push_str(&format!(
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\" errors=\"{errors}\">\n",
            escape(&scenario.id),
            scenario.runs.len()
        ));
        for run in &scenario.runs {
            let secs = run.duration_ms as f64 / 1000.0;
            out.push_str(&format!(
                "    <testcase classname=\"{}\" name=\"trial {}\" time=\"{secs:.3}\">\n",
                escape(&scenario.id),
                run.trial
            ));
            let detail = format!("reason: {}; {}", run.reason, run.summary);
            if let Some(error) = &run.error {
                out.push_str(&format!("      <error message=\"{}\">{}</error>\n", escape(error), escape(&detail)));
            } else if !run.passed {
                let failed: Vec<String> =
                    run.checkpoints.iter().filter(|c| !c.passed).flat_map(|c| c.failures.clone()).collect();
                let message = if failed.is_empty() { run.reason.to_string() } else { failed.join("; ") };
                out.push_str(&format!(
                    "      <failure message=\"{}\">{}</failure>\n",
                    escape(&message),
                    escape(&detail)
                ));
            }
            if let Some(dir) = &run.artifacts_dir {
                out.push_str(&format!("      <system-out>{}</system-out>\n", escape(&dir.display().to_string())));
            }
            out.push_str("    </testcase>\n");
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}

/// Writes the JUnit report to `path`.
pub fn write_junit(report: &SuiteReport, path: &Path) -> Result<(), SimError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| SimError::io(dir, e))?;
    }
    std::fs::write(path, to_junit(report)).map_err(|e| SimError::io(path, e))
}
