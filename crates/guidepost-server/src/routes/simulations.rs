//! `/simulations` (extension): the runs `guidepost simulate` wrote, for the web page.
//!
//! The folder is the simulator's artifact folder (`--simulations`, `.tally` by default):
//! `conversations/<id>/` holds each run's `meta.json` and `stepTraces.json`, and
//! `reports/*.json` the suite reports with each run's outcome and the journey coverage.

use std::path::{Path, PathBuf};

use axum::Json;
use axum::extract::Path as UrlPath;
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

use crate::error::{ApiError, ApiResult};
use crate::routes::operation::Operation;
use crate::state::{AppState, State};

/// What this resource serves, each operation declared once (see [`crate::routes::operation`]).
pub fn operations() -> Vec<Operation> {
    vec![
        Operation::get(
            "/simulations",
            list,
            "list_simulations",
            "The simulator's runs in the server's --simulations folder, newest first",
        )
        .answers::<Vec<SimulationRunDto>>()
        .extension(),
        Operation::get(
            "/simulations/{conversation_id}",
            read,
            "read_simulation",
            "A simulated conversation with its steps and its suite's journey coverage",
        )
        .answers::<SimulationDto>()
        .extension(),
    ]
}

/// One simulated conversation.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SimulationRunDto {
    /// The conversation id.
    pub id: String,
    /// The scenario.
    pub scenario: Option<String>,
    /// The agent simulated against (its name, as the report gives it).
    pub agent: Option<String>,
    /// Whether it passed.
    pub passed: Option<bool>,
    /// Why it stopped (`goal-reached`, `turn-limit`, ...).
    pub reason: Option<String>,
    /// Customer turns.
    pub turns: Option<u64>,
    /// When it started (ISO 8601).
    pub created: Option<String>,
    /// The run's outcome as the suite report has it.
    pub report: Option<Value>,
}

/// A run with its conversation and the coverage of its suite.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SimulationDto {
    /// The run.
    pub run: SimulationRunDto,
    /// Each turn: the customer's message, the agent's replies, the step and how it was chosen.
    pub steps: Vec<Value>,
    /// Journey coverage of the suite the run belongs to (one entry per agent it tested).
    pub coverage: Vec<Value>,
}

fn read_json(path: &Path) -> Option<Value> {
    // The folder is the user's: a FIFO or device there must not hang or fill the server.
    let text = guidepost_core::files::read_text(path, guidepost_core::limits::Limits::global()).ok()?;
    serde_json::from_str(&text).ok()
}

fn reports(root: &Path) -> Vec<Value> {
    let Ok(entries) = std::fs::read_dir(root.join("reports")) else { return Vec::new() };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    files.iter().filter_map(|p| read_json(p)).collect()
}

/// The report's entry for a run, and the report itself (newest report first).
fn report_of<'a>(reports: &'a [Value], id: &str) -> Option<(&'a Value, &'a Value)> {
    reports.iter().rev().find_map(|report| {
        report["scenarios"]
            .as_array()?
            .iter()
            .flat_map(|s| s["runs"].as_array().into_iter().flatten())
            .find(|r| r["conversation_id"] == id)
            .map(|run| (run, report))
    })
}

fn run_dto(root: &Path, id: &str, reports: &[Value]) -> Option<SimulationRunDto> {
    let meta = read_json(&root.join("conversations").join(id).join("meta.json"))?;
    let found = report_of(reports, id);
    let run = found.map(|(r, _)| r.clone());
    Some(SimulationRunDto {
        id: id.to_string(),
        scenario: run.as_ref().and_then(|r| r["scenario_id"].as_str()).map(str::to_string),
        agent: found.and_then(|(_, report)| report["agent"].as_str()).map(str::to_string),
        passed: run.as_ref().and_then(|r| r["passed"].as_bool()),
        reason: meta["reason"]
            .as_str()
            .map(str::to_string)
            .or_else(|| run.as_ref().and_then(|r| r["reason"].as_str()).map(str::to_string)),
        turns: run.as_ref().and_then(|r| r["turns"].as_u64()),
        created: meta["createdAt"].as_str().map(str::to_string),
        report: run,
    })
}

fn root(state: &AppState) -> ApiResult<&Path> {
    state.simulations.as_deref().ok_or_else(|| ApiError::NotFound {
        kind: "simulation folder",
        id: "(start the server with --simulations DIR)".into(),
    })
}

/// `GET /simulations`: every run in the folder, newest first.
pub async fn list(state: State) -> ApiResult<Json<Vec<SimulationRunDto>>> {
    let Ok(root) = root(&state) else { return Ok(Json(Vec::new())) };
    let root = root.to_path_buf();
    let runs = tokio::task::spawn_blocking(move || {
        let reports = reports(&root);
        let mut out: Vec<SimulationRunDto> = std::fs::read_dir(root.join("conversations"))
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().to_str().map(str::to_string))
            .filter_map(|id| run_dto(&root, &id, &reports))
            .collect();
        out.sort_by(|a, b| b.created.cmp(&a.created).then(a.id.cmp(&b.id)));
        out
    })
    .await
    .map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(Json(runs))
}

/// `GET /simulations/{conversation_id}`: the run, its conversation and its coverage.
pub async fn read(state: State, UrlPath(id): UrlPath<String>) -> ApiResult<Json<SimulationDto>> {
    if id.is_empty() || id.contains(['/', '\\']) || id.starts_with('.') {
        return Err(ApiError::NotFound { kind: "simulation", id });
    }
    let root = root(&state)?.to_path_buf();
    let wanted = id.clone();
    let found = tokio::task::spawn_blocking(move || {
        let reports = reports(&root);
        let run = run_dto(&root, &id, &reports)?;
        let steps = read_json(&root.join("conversations").join(&id).join("stepTraces.json"))
            .and_then(|v| v.as_array().cloned())
            .unwrap_or_default();
        let coverage =
            report_of(&reports, &id).and_then(|(_, report)| report["coverage"].as_array().cloned()).unwrap_or_default();
        Some(SimulationDto { run, steps, coverage })
    })
    .await
    .map_err(|e| ApiError::Internal(e.to_string()))?;
    found.map(Json).ok_or(ApiError::NotFound { kind: "simulation", id: wanted })
}
