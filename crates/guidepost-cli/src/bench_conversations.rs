//! `guidepost bench --conversations`: the demo conversations on the configured model (the
//! embedded default unless `GUIDEPOST_MODEL` says otherwise), through `guidepost serve` in a
//! child process, as a customer on the web page lives them.
//!
//! Each server binary given (`--server`, this one by default) serves the conversations'
//! agents from an in-memory store and loads its models before the first turn. The
//! conversations then run in turn on every server, one server at a time, each conversation on
//! each server before the next conversation: two builds are measured side by side under the
//! same machine load. Per turn it prints the model calls, prompt tokens, the new ones (not
//! reused from a cached prefix), generated tokens, the time from posting the message to the
//! turn's `ready` status, the longest wait between two events of the turn as a client
//! long-polling the session sees them, and the server's resident memory after the turn and
//! at its peak since its models loaded (the peak while loading is reported on its own).

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::child::ChildProcess;

/// Options of `guidepost bench --conversations`.
pub struct ConversationOptions {
    /// The conversations file.
    pub file: PathBuf,
    /// The server binaries to compare; empty: this one.
    pub servers: Vec<PathBuf>,
    /// CPU threads for local models, passed to each server.
    pub threads: Option<usize>,
    /// Also write the tables here.
    pub out: Option<PathBuf>,
    /// How long one turn may take.
    pub turn_limit: Duration,
    /// The pause before each message: after the conversation opens, or the reply before.
    pub writing: Duration,
    /// Write each server's standard error to `server-<n>.log` in this folder.
    pub logs: Option<PathBuf>,
}

/// The conversations file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConversationsFile {
    /// The folder served, relative to the file.
    agents: PathBuf,
    conversations: Vec<Conversation>,
}

/// One conversation: a session with `agent`, one customer message per turn.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Conversation {
    id: String,
    agent: String,
    turns: Vec<String>,
}

fn load_file(path: &Path) -> Result<(PathBuf, Vec<Conversation>)> {
    let text = std::fs::read_to_string(path).with_context(|| {
        format!("reading {} (run from the repository root, or give --conversations FILE)", path.display())
    })?;
    let file: ConversationsFile = yaml_serde::from_str(&text).with_context(|| format!("{}", path.display()))?;
    if file.conversations.is_empty() {
        bail!("{}: `conversations` is empty", path.display());
    }
    for c in &file.conversations {
        if c.turns.is_empty() {
            bail!("{}: conversation `{}` has no turns", path.display(), c.id);
        }
    }
    let agents = path.parent().unwrap_or(Path::new(".")).join(&file.agents);
    Ok((agents, file.conversations))
}

/// A `guidepost serve` in a child process, its models loaded.
struct Served {
    /// How the tables name it.
    label: String,
    base: String,
    pid: u32,
    /// From spawning it to its models being loaded.
    ready: Duration,
    _child: ChildProcess,
}

/// What the server said on standard error, line by line, until it ends; every line is also
/// written to `log` when given.
fn drain(stderr: std::process::ChildStderr, mut log: Option<std::fs::File>) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(file) = &mut log {
                let _ = writeln!(file, "{line}");
            }
            // Nobody listens once the models are loaded: the rest is only drained.
            let _ = tx.send(line);
        }
    });
    rx
}

/// Starts `binary` serving `agents` and waits until its models are loaded; its standard
/// error goes to `log` when given.
fn serve(binary: &Path, label: String, agents: &Path, threads: Option<usize>, log: Option<&Path>) -> Result<Served> {
    let started = Instant::now();
    let mut command = Command::new(binary);
    command.args(["serve", "--ephemeral", "--port", "0"]).arg(agents);
    if let Some(n) = threads {
        command.args(["--threads", &n.to_string()]);
    }
    let mut child = command
        .env_remove("GUIDEPOST_DATABASE_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {} serve", binary.display()))?;
    let stderr = child.stderr.take().context("server stderr")?;
    let log = match log {
        Some(path) => Some(std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?),
        None => None,
    };
    let lines = drain(stderr, log);
    let stdout = child.stdout.take().context("server stdout")?;
    let child = ChildProcess(child);
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line)?;
    let Some(base) = line.trim().strip_prefix("listening on ").map(str::to_string) else {
        let said: Vec<String> = lines.try_iter().collect();
        bail!("{} serve did not start: {}", binary.display(), said.join("\n"));
    };
    // `loading ...` comes before `web page: ...` when there are models to load; then wait for
    // `loaded ... in N s` (`models loaded` from older builds).
    let mut loading = false;
    loop {
        let line = lines
            .recv_timeout(Duration::from_secs(600))
            .with_context(|| format!("{} serve stopped talking before its models loaded", binary.display()))?;
        if line.starts_with("loading ") {
            loading = true;
        } else if line.starts_with("warning: loading ") {
            bail!("{}: {line}", binary.display());
        } else if line.starts_with("loaded ")
            || line.starts_with("models loaded")
            || (line.starts_with("web page:") && !loading)
        {
            break;
        }
    }
    let pid = child.0.id();
    Ok(Served { label, base, pid, ready: started.elapsed(), _child: child })
}

/// `VmRSS` and `VmHWM` of a process, in MiB.
fn memory_mb(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
            .map_or(f64::NAN, |kb| kb / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Starts the peak resident memory of process `pid` over from its current resident memory
/// (Linux: `5` written to `/proc/PID/clear_refs`); false where that cannot be done.
fn reset_peak(pid: u32) -> bool {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").is_ok()
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// The figures of one turn.
struct TurnFigures {
    calls: u64,
    prompt_tokens: u64,
    cached_tokens: u64,
    generated: u64,
    time: Duration,
    /// The longest wait between two events of the turn (the posted message first, `ready`
    /// last), and the stage the turn was in while it waited.
    longest_gap: Duration,
    gap_after: String,
    rss_mb: f64,
    peak_mb: f64,
    reply: String,
}

/// Where a turn stood after an event, for the gap report.
fn stage_of(event: &Value) -> Option<String> {
    match event["kind"].as_str()? {
        "status" => {
            let status = event["data"]["status"].as_str().unwrap_or("?");
            Some(match event["data"]["data"]["stage"].as_str() {
                Some(stage) => format!("{status}: {stage}"),
                None => status.to_string(),
            })
        }
        "message" => Some("message".into()),
        "tool" => Some("tool".into()),
        other => Some(other.to_string()),
    }
}

/// Posts `message` in session `sid` and follows the turn to its `ready` status.
async fn turn(
    http: &reqwest::Client,
    server: &Served,
    sid: &str,
    message: &str,
    limit: Duration,
) -> Result<TurnFigures> {
    let base = &server.base;
    let started = Instant::now();
    let (trace, mut next) = crate::load::post_customer_message(http, base, sid, message).await?;
    let (mut last_seen, mut stage) = (Duration::ZERO, "posted".to_string());
    let (mut longest_gap, mut gap_after) = (Duration::ZERO, String::new());
    let mut reply = Vec::new();
    'turn: loop {
        if started.elapsed() > limit {
            bail!("{}: no reply within {} s to {message:?}", server.label, limit.as_secs());
        }
        let resp = http.get(format!("{base}/sessions/{sid}/events?min_offset={next}&wait_for_data=30")).send().await?;
        if resp.status() == reqwest::StatusCode::GATEWAY_TIMEOUT {
            continue;
        }
        let events: Vec<Value> = resp.error_for_status()?.json().await?;
        let now = started.elapsed();
        next = events.last().and_then(|e| e["offset"].as_u64()).map_or(next, |o| o + 1);
        for event in events.iter().filter(|e| e["trace_id"] == trace.as_str() && e["source"] != "customer") {
            if now - last_seen > longest_gap {
                longest_gap = now - last_seen;
                gap_after.clone_from(&stage);
            }
            last_seen = now;
            if let Some(s) = stage_of(event) {
                stage = s;
            }
            if event["kind"] == "message"
                && let Some(text) = event["data"]["message"].as_str()
            {
                reply.push(text.to_string());
            }
            if event["data"]["status"] == "ready" && event["data"]["data"]["stage"] == "completed" {
                break 'turn;
            }
        }
    }
    let time = started.elapsed();
    let (rss_mb, peak_mb) = memory_mb(server.pid);
    let record: Value =
        http.get(format!("{base}/sessions/{sid}/turns/{trace}")).send().await?.error_for_status()?.json().await?;
    let usage = &record["trace"]["usage"];
    let n = |k: &str| usage[k].as_u64().unwrap_or(0);
    Ok(TurnFigures {
        calls: n("calls"),
        prompt_tokens: n("prompt_tokens"),
        cached_tokens: n("cached_tokens"),
        generated: n("completion_tokens"),
        time,
        longest_gap,
        gap_after,
        rss_mb,
        peak_mb,
        reply: reply.join(" / "),
    })
}

/// One conversation on one server.
async fn conversation(
    http: &reqwest::Client,
    server: &Served,
    conversation: &Conversation,
    (limit, writing): (Duration, Duration),
) -> Result<Vec<TurnFigures>> {
    let session: Value = http
        .post(format!("{}/sessions", server.base))
        .json(&json!({"agent_id": conversation.agent}))
        .send()
        .await?
        .error_for_status()
        .with_context(|| format!("{}: creating a session with `{}`", server.label, conversation.agent))?
        .json()
        .await?;
    let sid = session["id"].as_str().context("the new session has no id")?.to_string();
    let mut turns = Vec::new();
    for message in &conversation.turns {
        // The customer writes: the first message after the conversation opens, each other
        // one after the reply before it.
        tokio::time::sleep(writing).await;
        let figures = turn(http, server, &sid, message, limit).await?;
        eprintln!(
            "  {message:?}: {:.1} s, {} calls, {} new tokens",
            figures.time.as_secs_f64(),
            figures.calls,
            figures.prompt_tokens.saturating_sub(figures.cached_tokens)
        );
        turns.push(figures);
    }
    // The customer reads the last reply: what the server reads ahead then is done before
    // the next server's conversation starts, so one server's background work does not land
    // in another's turns.
    tokio::time::sleep(writing).await;
    Ok(turns)
}

/// A table cell: `|` would end it.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

/// Runs the conversations and prints the tables.
pub async fn run(options: ConversationOptions) -> Result<ExitCode> {
    let (agents, conversations) = load_file(&options.file)?;
    let binaries = if options.servers.is_empty() { vec![std::env::current_exe()?] } else { options.servers.clone() };
    let http = guidepost_llm::http::client_builder().build()?;
    let mut text = format!("load average before: {}\n\n", load_average());
    if !options.writing.is_zero() {
        let _ = writeln!(
            text,
            "each message is sent {} s after the conversation opens or the reply before it\n",
            options.writing.as_secs()
        );
    }
    let mut servers = Vec::new();
    for (i, binary) in binaries.iter().enumerate() {
        let label = if binaries.len() == 1 { "this".to_string() } else { format!("{}: {}", i + 1, binary.display()) };
        let log = match &options.logs {
            Some(dir) => {
                std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
                Some(dir.join(format!("server-{}.log", i + 1)))
            }
            None => None,
        };
        let served = serve(binary, label, &agents, options.threads, log.as_deref())?;
        let (rss, loading_peak) = memory_mb(served.pid);
        // The conversations' peaks are their own: loading is reported on its own line.
        let since = if reset_peak(served.pid) {
            format!("peak while loading {loading_peak:.0} MiB; peaks below are since loading")
        } else {
            format!("peak so far {loading_peak:.0} MiB; peaks below include loading")
        };
        let _ = writeln!(
            text,
            "server {}: models loaded {:.1} s after start, {rss:.0} MiB resident, {since}",
            served.label,
            served.ready.as_secs_f64()
        );
        servers.push(served);
    }
    let mut table = String::from(
        "| conversation | server | turn | message | calls | prompt tokens | new tokens | generated | time s | longest gap s (after) | RSS / peak MiB | load |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    let mut replies = String::from("| conversation | server | turn | reply |\n|---|---|---|---|\n");
    // figures[conversation][server][turn]
    let mut figures: Vec<Vec<Vec<TurnFigures>>> = Vec::new();
    for c in &conversations {
        let mut per_server = Vec::new();
        for (s, server) in servers.iter().enumerate() {
            let load = load_average();
            eprintln!("{} on server {}: {} turns", c.id, s + 1, c.turns.len());
            let turns = conversation(&http, server, c, (options.turn_limit, options.writing)).await?;
            for (t, f) in turns.iter().enumerate() {
                let _ = writeln!(
                    table,
                    "| {} | {} | {} | {} | {} | {} | {} | {} | {:.1} | {:.1} ({}) | {:.0} / {:.0} | {load} |",
                    c.id,
                    s + 1,
                    t + 1,
                    cell(&c.turns[t]),
                    f.calls,
                    f.prompt_tokens,
                    f.prompt_tokens.saturating_sub(f.cached_tokens),
                    f.generated,
                    f.time.as_secs_f64(),
                    f.longest_gap.as_secs_f64(),
                    cell(&f.gap_after),
                    f.rss_mb,
                    f.peak_mb,
                );
                let _ = writeln!(replies, "| {} | {} | {} | {} |", c.id, s + 1, t + 1, cell(&f.reply));
            }
            per_server.push(turns);
        }
        figures.push(per_server);
    }
    let _ = write!(text, "\n## Every turn\n\n{table}\n## Replies\n\n{replies}");
    if servers.len() > 1 {
        let mut compare = String::from("| conversation | turn |");
        for s in 1..=servers.len() {
            let _ = write!(compare, " time s ({s}) | new tokens ({s}) |");
        }
        let _ = writeln!(compare, " time {} / 1 |", servers.len());
        compare.push_str(&"|---".repeat(3 + 2 * servers.len()));
        compare.push_str("|\n");
        for (c, per_server) in conversations.iter().zip(&figures) {
            for t in 0..c.turns.len() {
                let _ = write!(compare, "| {} | {} |", c.id, t + 1);
                for turns in per_server {
                    let f = &turns[t];
                    let _ = write!(
                        compare,
                        " {:.1} | {} |",
                        f.time.as_secs_f64(),
                        f.prompt_tokens.saturating_sub(f.cached_tokens)
                    );
                }
                let first = per_server.first().map_or(f64::NAN, |turns| turns[t].time.as_secs_f64());
                let last = per_server.last().map_or(f64::NAN, |turns| turns[t].time.as_secs_f64());
                let _ = writeln!(compare, " {:.2} |", last / first);
            }
        }
        let _ = write!(text, "\n## Side by side\n\n{compare}");
    }
    let _ = writeln!(text);
    for server in &servers {
        let (rss, peak) = memory_mb(server.pid);
        let _ = writeln!(text, "server {}: {rss:.0} MiB resident at the end, peak {peak:.0} MiB", server.label);
    }
    let _ = writeln!(text, "load average after: {}", load_average());
    outln!("{text}");
    if let Some(path) = options.out {
        std::fs::write(&path, &text).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_peak_starts_over_from_the_resident_memory() {
        let pid = std::process::id();
        // 64 MiB touched and freed: resident for a moment, then gone, the peak remembering it.
        let block = vec![1u8; 64 << 20];
        std::hint::black_box(&block);
        drop(block);
        let (rss, peak) = memory_mb(pid);
        assert!(peak - rss > 48.0, "resident {rss} MiB, peak {peak} MiB");
        assert!(reset_peak(pid), "the peak could not be reset");
        let (rss, peak) = memory_mb(pid);
        assert!(peak - rss < 16.0, "resident {rss} MiB, peak {peak} MiB after the reset");
    }
}
