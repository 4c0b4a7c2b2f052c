//! The artifact folder, laid out as Tally's store does so its viewers read our runs:
//!
//! ```text
//! <root>/conversations/<conversationId>/
//!   meta.json              {id, createdAt, …Guidepost additions: status, reason, completed, error}
//!   conversation.jsonl     one line per step, appended after every turn
//!   stepTraces.json        StepTrace[]
//!   trajectory.meta.json   TrajectoryMetaV1
//!   runs/trajectory/<runId>.json   TrajectoryRunMeta, with the run's summary as `result`
//! ```
//!
//! Every file loads in Tally's viewers whatever the outcome: Guidepost's own stop reasons
//! (`customer-ended`, `budget-exceeded`, `checkpoint-failed`, `step-failed`, `script-ended`)
//! are written as the nearest of Tally's six where Tally reads a reason
//! ([`StopReason::to_tally`](crate::StopReason::to_tally)) and kept in `guidepostReason` and
//! the metadata; `conversation.jsonl` is never empty: it starts as a header-only line
//! (`{conversationId, conversationMetadata}`), which is also all a run that ended before its
//! first turn leaves, and steps are appended per turn, so a crash keeps what happened. When the
//! run ends the file is rewritten once, with the end marker on the last step and the run's
//! outcome in the first line's `conversationMetadata` (and in `trajectory.meta.json`'s
//! `metadata.runOutcome`).

use std::io::Write;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use crate::error::SimError;
use crate::output::tally::{
    conversation_header, conversation_line, run_outcome, trace_to_step, trajectory_meta, trajectory_run_meta,
};
use crate::runner::RunResult;
use crate::trajectory::{StepTrace, Trajectory};

/// Writes one run's artifacts.
#[derive(Debug, Clone)]
pub struct ArtifactWriter {
    dir: PathBuf,
    conversation_id: String,
    created_at: DateTime<Utc>,
    run_id: String,
    trajectory: Trajectory,
}

fn write(path: &Path, text: &str) -> Result<(), SimError> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).map_err(|e| SimError::io(&tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| SimError::io(path, e))
}

fn pretty(value: &impl serde::Serialize) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}

impl ArtifactWriter {
    /// Creates `<root>/conversations/<conversation_id>/` and writes `meta.json` (status
    /// `running`), `trajectory.meta.json` and a `conversation.jsonl` holding its header line.
    pub fn begin(root: &Path, trajectory: &Trajectory) -> Result<Self, SimError> {
        let conversation_id = trajectory.conversation_id.clone();
        let dir = root.join("conversations").join(&conversation_id);
        std::fs::create_dir_all(dir.join("runs").join("trajectory")).map_err(|e| SimError::io(&dir, e))?;
        let created_at = Utc::now();
        let run_id = format!("run-{}-{}", created_at.timestamp_millis(), base36_suffix(&conversation_id, created_at));
        let writer = Self { dir, conversation_id, created_at, run_id, trajectory: trajectory.clone() };
        writer.write_meta(json!({"status": "running"}))?;
        writer.write_trajectory_meta(None)?;
        let mut running = serde_json::Map::new();
        running.insert("status".into(), json!("running"));
        write(
            &writer.dir.join("conversation.jsonl"),
            &format!("{}\n", conversation_header(&writer.conversation_id, &running)),
        )?;
        Ok(writer)
    }

    fn write_trajectory_meta(&self, outcome: Option<serde_json::Map<String, Value>>) -> Result<(), SimError> {
        let mut meta = trajectory_meta(&self.trajectory, &self.conversation_id, self.created_at);
        if let (Some(outcome), Some(obj)) = (outcome, meta.as_object_mut()) {
            let metadata = obj.entry("metadata").or_insert_with(|| json!({}));
            if let Some(metadata) = metadata.as_object_mut() {
                metadata.insert("runOutcome".into(), Value::Object(outcome));
            }
        }
        write(&self.dir.join("trajectory.meta.json"), &pretty(&meta))
    }

    /// The conversation folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The run id (`run-<ms>-<6 base36 chars>`).
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    fn write_meta(&self, extra: Value) -> Result<(), SimError> {
        let mut meta = json!({"id": self.conversation_id, "createdAt": self.created_at});
        if let (Some(obj), Value::Object(more)) = (meta.as_object_mut(), extra) {
            obj.extend(more);
        }
        write(&self.dir.join("meta.json"), &pretty(&meta))
    }

    /// Appends the line of trace number `index` to `conversation.jsonl` and flushes it.
    pub fn append(&self, index: usize, trace: &StepTrace) -> Result<(), SimError> {
        let path = self.dir.join("conversation.jsonl");
        let line = conversation_line(&self.conversation_id, &trace_to_step(index, trace), None);
        let mut file =
            std::fs::OpenOptions::new().append(true).create(true).open(&path).map_err(|e| SimError::io(&path, e))?;
        writeln!(file, "{line}").and_then(|()| file.flush()).map_err(|e| SimError::io(&path, e))
    }

    /// Writes the final files: `conversation.jsonl` (rewritten with the end marker, or the
    /// header line alone when there was no turn), `stepTraces.json`, `trajectory.meta.json`
    /// and `meta.json` with the outcome, and `runs/trajectory/<runId>.json`.
    pub fn finish(&self, result: &RunResult) -> Result<(), SimError> {
        let outcome = run_outcome(result);
        let mut conversation_metadata = serde_json::Map::new();
        conversation_metadata.insert("status".into(), json!("finished"));
        conversation_metadata.insert("runOutcome".into(), Value::Object(outcome.clone()));
        if !result.preamble.is_empty() {
            // Scripted agent lines before the first customer turn (not the agent's preambles,
            // which are marked on their messages).
            conversation_metadata.insert("openingAgentLines".into(), json!(result.preamble));
        }
        let mut lines: Vec<String> = result
            .traces
            .iter()
            .enumerate()
            .map(|(i, t)| {
                conversation_line(
                    &self.conversation_id,
                    &trace_to_step(i, t),
                    if i == 0 { Some(&conversation_metadata) } else { None },
                )
            })
            .collect();
        if lines.is_empty() {
            lines.push(conversation_header(&self.conversation_id, &conversation_metadata));
        }
        write(&self.dir.join("conversation.jsonl"), &format!("{}\n", lines.join("\n")))?;
        write(&self.dir.join("stepTraces.json"), &pretty(&result.traces))?;
        self.write_trajectory_meta(Some(outcome))?;
        let mut meta = json!({
            "status": "finished",
            "reason": result.reason,
            "tallyReason": result.reason.to_tally(result.completed),
            "completed": result.completed,
            "finishedAt": result.finished_at,
        });
        if let Some(obj) = meta.as_object_mut() {
            for (key, value) in [
                ("error", result.error.as_ref().map(|e| json!(e))),
                ("failure", result.failure.map(|f| json!(f))),
                ("cleanupError", result.cleanup_error.as_ref().map(|e| json!(e))),
            ] {
                if let Some(value) = value {
                    obj.insert(key.into(), value);
                }
            }
        }
        self.write_meta(meta)?;
        let run = trajectory_run_meta(&self.run_id, &self.trajectory, result);
        write(&self.dir.join("runs").join("trajectory").join(format!("{}.json", self.run_id)), &pretty(&run))
    }
}

fn base36_suffix(seed: &str, at: DateTime<Utc>) -> String {
    // Not random on purpose: deterministic from the id and time, unique enough per folder.
    let mut n: u64 = at.timestamp_subsec_nanos().into();
    for b in seed.bytes() {
        n = n.wrapping_mul(31).wrapping_add(u64::from(b));
    }
    let digits: Vec<char> = "0123456789abcdefghijklmnopqrstuvwxyz".chars().collect();
    (0..6)
        .map(|_| {
            let c = digits[usize::try_from(n % 36).unwrap_or(0)];
            n /= 36;
            c
        })
        .collect()
}
