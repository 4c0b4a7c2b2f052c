//! The artifact folder, laid out as Tally's store does so its viewers read our runs:
//!
//! ```text
//! <root>/conversations/<conversationId>/
//!   meta.json              {id, createdAt, …Guidepost additions: status, reason, completed, error}
//!   conversation.jsonl     one line per step, appended after every turn
//!   stepTraces.json        StepTrace[]
//!   trajectory.meta.json   TrajectoryMetaV1
//!   runs/trajectory/<runId>.json   the run's result summary
//! ```
//!
//! `conversation.jsonl` is appended per turn, so a crash keeps what happened; when the run ends
//! the file is rewritten once with the end marker on the last line.

use std::io::Write;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use crate::error::SimError;
use crate::output::tally::{conversation_line, trace_to_step, trajectory_meta};
use crate::runner::RunResult;
use crate::trajectory::{StepTrace, Trajectory};

/// Writes one run's artifacts.
#[derive(Debug, Clone)]
pub struct ArtifactWriter {
    dir: PathBuf,
    conversation_id: String,
    created_at: DateTime<Utc>,
    run_id: String,
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
    /// `running`), `trajectory.meta.json` and an empty `conversation.jsonl`.
    pub fn begin(root: &Path, trajectory: &Trajectory) -> Result<Self, SimError> {
        let conversation_id = trajectory.conversation_id.clone();
        let dir = root.join("conversations").join(&conversation_id);
        std::fs::create_dir_all(dir.join("runs").join("trajectory")).map_err(|e| SimError::io(&dir, e))?;
        let created_at = Utc::now();
        let run_id = format!("run-{}-{}", created_at.timestamp_millis(), base36_suffix(&conversation_id, created_at));
        let writer = Self { dir, conversation_id, created_at, run_id };
        writer.write_meta(json!({"status": "running"}))?;
        write(
            &writer.dir.join("trajectory.meta.json"),
            &pretty(&trajectory_meta(trajectory, &writer.conversation_id, created_at)),
        )?;
        write(&writer.dir.join("conversation.jsonl"), "")?;
        Ok(writer)
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

    /// Writes the final files: `conversation.jsonl` (rewritten with the end marker),
    /// `stepTraces.json`, `meta.json` with the outcome, and `runs/trajectory/<runId>.json`.
    pub fn finish(&self, result: &RunResult) -> Result<(), SimError> {
        let preamble = (!result.preamble.is_empty()).then(|| {
            let mut m = serde_json::Map::new();
            m.insert("preamble".into(), json!(result.preamble));
            m
        });
        let lines: Vec<String> = result
            .traces
            .iter()
            .enumerate()
            .map(|(i, t)| {
                conversation_line(
                    &self.conversation_id,
                    &trace_to_step(i, t),
                    if i == 0 { preamble.as_ref() } else { None },
                )
            })
            .collect();
        let mut text = lines.join("\n");
        if !text.is_empty() {
            text.push('\n');
        }
        write(&self.dir.join("conversation.jsonl"), &text)?;
        write(&self.dir.join("stepTraces.json"), &pretty(&result.traces))?;
        self.write_meta(json!({
            "status": "finished",
            "reason": result.reason,
            "completed": result.completed,
            "error": result.error,
            "failure": result.failure,
            "finishedAt": result.finished_at,
        }))?;
        let run = json!({"runId": self.run_id, "type": "trajectory", "result": result.summary_record()});
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
