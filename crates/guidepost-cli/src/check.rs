//! `guidepost check`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use guidepost_core::definition::Severity;
use serde_json::json;

use crate::discover::discover;

pub fn run(paths: &[PathBuf], as_json: bool, deny_warnings: bool) -> Result<ExitCode> {
    let agents = discover(paths)?;
    let mut errors = 0usize;
    let mut warnings = 0usize;
    let mut reports = Vec::new();
    for found in &agents {
        let loaded = found.load();
        let agent_errors = loaded.diagnostics.iter().filter(|d| d.severity == Severity::Error).count();
        errors += agent_errors;
        warnings += loaded.diagnostics.len() - agent_errors;
        if as_json {
            reports.push(json!({
                "path": found.origin.display().to_string(),
                "agent": loaded.definition.as_ref().map(|d| d.agent.id.clone()),
                "ok": agent_errors == 0,
                "diagnostics": loaded.diagnostics,
            }));
            continue;
        }
        for d in &loaded.diagnostics {
            let source = found.sources.iter().find(|s| s.name == d.file).map(|s| s.text.as_str());
            eprintln!("{}", d.render(source));
        }
        match &loaded.definition {
            Some(def) => outln!(
                "ok {} ({}): {} guidelines, {} journeys, {} tools",
                def.agent.id,
                found.origin.display(),
                def.guidelines.len(),
                def.journeys.len(),
                def.tools.len()
            ),
            None => outln!("FAILED {}: {agent_errors} error(s)", found.origin.display()),
        }
    }
    let failed = errors > 0 || (deny_warnings && warnings > 0);
    if as_json {
        let doc = json!({ "agents": reports, "errors": errors, "warnings": warnings, "ok": !failed });
        outln!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        outln!("checked {} agent(s): {errors} error(s), {warnings} warning(s)", agents.len());
    }
    if agents.is_empty() {
        eprintln!("error: no definition files (.yaml, .yml, .json) found");
        return Ok(ExitCode::FAILURE);
    }
    Ok(if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}
