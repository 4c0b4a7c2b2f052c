//! The on-disk form of recorded model calls: one pretty JSON file per request at
//! `<dir>/<task>/<hash>.json`, so recordings can be reviewed in a pull request; and the
//! explanation of a replay miss (what changed versus the closest recording).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::LlmError;
use crate::request::{ChatMessage, ChatRequest, ChatResponse, OutputFormat, TaskKind};

/// The parts of a request that decide its answer (no ledger, no timestamps).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedRequest {
    /// The conversation.
    pub messages: Vec<ChatMessage>,
    /// The answer shape, schema included.
    pub output: OutputFormat,
    /// Sampling temperature.
    #[serde(default)]
    pub temperature: Option<f32>,
    /// Completion token limit.
    #[serde(default)]
    pub max_tokens: Option<u32>,
    /// Stop sequences.
    #[serde(default)]
    pub stop: Vec<String>,
}

impl From<&ChatRequest> for RecordedRequest {
    fn from(req: &ChatRequest) -> Self {
        Self {
            messages: req.messages.clone(),
            output: req.output.clone(),
            temperature: req.temperature,
            max_tokens: req.max_tokens,
            stop: req.stop.clone(),
        }
    }
}

/// One recorded call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Recording {
    /// The sha256 (hex) of the model id and the normalized request.
    pub key: String,
    /// The task kind (also the directory name).
    pub task: TaskKind,
    /// The id of the model that answered.
    pub model: String,
    /// What was asked.
    pub request: RecordedRequest,
    /// What came back, with its usage.
    pub response: ChatResponse,
}

/// The cache key of `request` sent to `model`: sha256 over the compact JSON of both.
pub fn request_key(model: &str, request: &RecordedRequest) -> String {
    let material = serde_json::json!({"model": model, "request": request});
    hex::encode(Sha256::digest(material.to_string().as_bytes()))
}

/// The directory of one task kind's recordings (task names are made file-system safe).
pub fn task_dir(root: &Path, task: &TaskKind) -> PathBuf {
    let safe: String = task
        .as_str()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' })
        .collect();
    root.join(safe)
}

/// The file of the recording with `key`.
pub fn recording_path(root: &Path, task: &TaskKind, key: &str) -> PathBuf {
    let short: String = key.chars().take(16).collect();
    task_dir(root, task).join(format!("{short}.json"))
}

/// Reads a recording; `Ok(None)` when the file does not exist. A file that exists but is
/// not a recording (cut short, edited, binary, over
/// [`Limit::FileSize`](guidepost_core::limits::Limit::FileSize)) is a distinct error that
/// says the recording is corrupt, never a miss.
pub async fn load(path: &Path) -> Result<Option<Recording>, LlmError> {
    let owned = path.to_path_buf();
    let read = tokio::task::spawn_blocking(move || {
        guidepost_core::files::read(&owned, guidepost_core::limits::Limits::global())
    })
    .await
    .map_err(|e| LlmError::Storage(format!("cannot read {}: {e}", path.display())))?;
    match read {
        Ok(bytes) => decode(path, bytes).map(Some),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(LlmError::Storage(e.to_string())),
    }
}

/// Decodes the bytes of the recording at `path` (named in errors): UTF-8 JSON (a leading
/// byte-order mark is skipped) of a [`Recording`]. Anything else is an
/// [`LlmError::Storage`] saying the recording is corrupt and where the JSON went wrong.
pub fn decode(path: &Path, bytes: Vec<u8>) -> Result<Recording, LlmError> {
    let corrupt = |why: String| {
        LlmError::Storage(format!(
            "recording {} is corrupt: {why}; delete it and record again (GUIDEPOST_LLM_CACHE=record)",
            path.display()
        ))
    };
    let text = String::from_utf8(bytes).map_err(|e| corrupt(format!("not UTF-8 text ({e})")))?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    serde_json::from_str(text).map_err(|e| corrupt(e.to_string()))
}

/// Writes a recording atomically (temporary file, then rename).
pub async fn save(path: &Path, recording: &Recording) -> Result<(), LlmError> {
    let storage = |e: std::io::Error| LlmError::Storage(format!("cannot write {}: {e}", path.display()));
    if let Some(dir) = path.parent() {
        tokio::fs::create_dir_all(dir).await.map_err(storage)?;
    }
    let mut text = serde_json::to_string_pretty(recording)
        .map_err(|e| LlmError::Storage(format!("cannot serialize a recording: {e}")))?;
    text.push('\n');
    // Unique per write: concurrent identical requests must not share a temporary file.
    static WRITES: AtomicU64 = AtomicU64::new(0);
    let n = WRITES.fetch_add(1, Ordering::Relaxed);
    let tmp = path.with_extension(format!("json.{}-{n}.tmp", std::process::id()));
    tokio::fs::write(&tmp, text).await.map_err(storage)?;
    tokio::fs::rename(&tmp, path).await.map_err(storage)
}

/// Explains a miss: what differs between `request` and the closest recording of the same task.
pub async fn explain_miss(root: &Path, task: &TaskKind, model: &str, request: &RecordedRequest) -> String {
    let dir = task_dir(root, task);
    let mut recordings = Vec::new();
    let mut corrupt = Vec::new();
    if let Ok(mut entries) = tokio::fs::read_dir(&dir).await {
        while let Ok(Some(entry)) = entries.next_entry().await {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "json") {
                match load(&path).await {
                    Ok(Some(recording)) => recordings.push((path, recording)),
                    Ok(None) => {}
                    Err(_) => corrupt.push(path.display().to_string()),
                }
            }
        }
    }
    corrupt.sort();
    let corrupt_note = if corrupt.is_empty() {
        String::new()
    } else {
        format!(" ({} corrupt recording(s) skipped: {})", corrupt.len(), corrupt.join(", "))
    };
    let closest =
        recordings.into_iter().min_by_key(|(path, r)| (distance(model, request, &r.model, &r.request), path.clone()));
    match closest {
        None => format!("no recordings exist in {}{corrupt_note}", dir.display()),
        Some((path, recording)) => format!(
            "closest recording {}{corrupt_note}:\n{}",
            path.display(),
            describe_changes(&recording.model, &recording.request, model, request)
        ),
    }
}

fn distance(model: &str, request: &RecordedRequest, other_model: &str, other: &RecordedRequest) -> usize {
    let mut d = 0;
    if model != other_model {
        d += 1_000;
    }
    if request.output != other.output {
        d += 100;
    }
    d += 10 * request.messages.len().abs_diff(other.messages.len());
    d += request.messages.iter().zip(&other.messages).filter(|(a, b)| a != b).count();
    d
}

/// Lists what changed from `old` to `new`, with a unified diff of changed messages.
pub fn describe_changes(old_model: &str, old: &RecordedRequest, new_model: &str, new: &RecordedRequest) -> String {
    let mut changes = Vec::new();
    if old_model != new_model {
        changes.push(format!("model changed: `{old_model}` -> `{new_model}`"));
    }
    match (&old.output, &new.output) {
        (OutputFormat::Json { name: a, .. }, OutputFormat::Json { name: b, .. }) if a != b => {
            changes.push(format!("schema changed: `{a}` -> `{b}`"));
        }
        (a, b) if a != b => {
            let name = |o: &OutputFormat| match o {
                OutputFormat::Json { name, .. } => format!("JSON `{name}`"),
                OutputFormat::Text => "text".into(),
            };
            if matches!((a, b), (OutputFormat::Json { .. }, OutputFormat::Json { .. })) {
                changes.push(format!("schema changed: the content of {} differs", name(b)));
            } else {
                changes.push(format!("output changed: {} -> {}", name(a), name(b)));
            }
        }
        _ => {}
    }
    if old.temperature != new.temperature {
        changes.push(format!("temperature changed: {:?} -> {:?}", old.temperature, new.temperature));
    }
    if old.max_tokens != new.max_tokens {
        changes.push(format!("max_tokens changed: {:?} -> {:?}", old.max_tokens, new.max_tokens));
    }
    if old.stop != new.stop {
        changes.push(format!("stop sequences changed: {:?} -> {:?}", old.stop, new.stop));
    }
    if old.messages.len() != new.messages.len() {
        changes.push(format!("message count changed: {} -> {}", old.messages.len(), new.messages.len()));
    }
    let mut shown = 0;
    for (i, (a, b)) in old.messages.iter().zip(&new.messages).enumerate() {
        if a == b {
            continue;
        }
        if shown == 2 {
            changes.push("(further messages differ too)".into());
            break;
        }
        shown += 1;
        if a.role != b.role {
            changes.push(format!("message {i} role changed: {:?} -> {:?}", a.role, b.role));
        }
        if a.content != b.content {
            changes.push(format!(
                "message {i} ({}) changed:\n{}",
                b.role.as_str(),
                unified_diff(&a.content, &b.content)
            ));
        }
    }
    if changes.is_empty() {
        "no difference in the recorded fields (was the recording edited by hand?)".into()
    } else {
        changes.join("\n")
    }
}

/// A line diff of `old` and `new` in unified style (`-` removed, `+` added, two lines of
/// context, `@@` between distant hunks).
pub fn unified_diff(old: &str, new: &str) -> String {
    const MAX_LINES: usize = 2_000;
    const CONTEXT: usize = 2;
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    if a.len() > MAX_LINES || b.len() > MAX_LINES {
        return format!("(texts too long to diff: {} and {} lines)", a.len(), b.len());
    }
    // Longest common subsequence table, filled from the end.
    let mut lcs = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] { lcs[i + 1][j + 1] + 1 } else { lcs[i + 1][j].max(lcs[i][j + 1]) };
        }
    }
    let mut ops: Vec<(char, &str)> = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            ops.push((' ', a[i]));
            i += 1;
            j += 1;
        } else if i < a.len() && (j == b.len() || lcs[i + 1][j] >= lcs[i][j + 1]) {
            ops.push(('-', a[i]));
            i += 1;
        } else {
            ops.push(('+', b[j]));
            j += 1;
        }
    }
    let near_change = |k: usize| {
        let lo = k.saturating_sub(CONTEXT);
        let hi = (k + CONTEXT).min(ops.len().saturating_sub(1));
        (lo..=hi).any(|n| ops.get(n).is_some_and(|(op, _)| *op != ' '))
    };
    let mut out = Vec::new();
    let mut skipped = false;
    for (k, (op, line)) in ops.iter().enumerate() {
        if near_change(k) {
            if skipped && !out.is_empty() {
                out.push("@@".to_string());
            }
            skipped = false;
            out.push(format!("{op}{line}"));
        } else {
            skipped = true;
        }
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unified_diff_shows_changed_lines_with_context() {
        let old = "a\nb\nc\nd\ne\nf\ng\nh\ni\nj";
        let new = "a\nb\nc\nD\ne\nf\ng\nh\ni\nj\nk";
        let diff = unified_diff(old, new);
        assert_eq!(diff, " b\n c\n-d\n+D\n e\n f\n@@\n i\n j\n+k");
    }

    #[test]
    fn keys_ignore_ledger_but_not_content() {
        let req = ChatRequest::new(TaskKind::Matching).user("x");
        let a = request_key("m", &RecordedRequest::from(&req));
        let with_ledger = req.clone().ledger(crate::UsageLedger::new("t"));
        assert_eq!(a, request_key("m", &RecordedRequest::from(&with_ledger)));
        assert_ne!(a, request_key("m2", &RecordedRequest::from(&req)));
        let changed = req.temperature(0.5);
        assert_ne!(a, request_key("m", &RecordedRequest::from(&changed)));
        assert_eq!(a.len(), 64);
    }

    #[test]
    fn changes_name_the_schema_and_the_message() {
        let old = RecordedRequest::from(
            &ChatRequest::new(TaskKind::Matching).user("hello there").json_output("A", serde_json::json!({})),
        );
        let new = RecordedRequest::from(
            &ChatRequest::new(TaskKind::Matching).user("hello world").json_output("B", serde_json::json!({})),
        );
        let text = describe_changes("m", &old, "m", &new);
        assert!(text.contains("schema changed: `A` -> `B`"), "{text}");
        assert!(text.contains("-hello there\n+hello world"), "{text}");
    }
}
