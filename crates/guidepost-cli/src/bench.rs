//! `guidepost bench`: the performance workload against a fake OpenAI-compatible server.
//!
//! The fake runs in a child process (`guidepost-fake-llm`, built beside `guidepost`), so this process's CPU time is
//! the engine's own: matching, journeys, tool calls, composition, prompt building and the
//! HTTP client, without the model. Per turn it reports model calls, prompt tokens,
//! sequential waves of model calls (calls overlapping in time form one wave), engine CPU
//! and wall time, and, from a second run in `stream` output mode, when the reply's first words
//! arrive on turns without tools. A third run per size continues the conversation to 50 turns (the workload's
//! messages over again) and reports the prompt tokens at turns 1, 10 and 50: composition and
//! tool inference see only the latest turns, so a long conversation costs about what a short
//! one does.

use std::fmt::Write as _;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use guidepost_core::AgentState;
use guidepost_llm::{ModelSettings, ModelSpec, ModelStackBuilder};
use guidepost_runtime::CustomerRef;
use guidepost_runtime::{AgentRuntime, EmittingLatch, MemorySession, RuntimeConfig};
use guidepost_tools::registry::ToolRegistry;
use tokio_util::sync::CancellationToken;

/// Reference figures per turn (small, medium, large), measured on the same workload.
const REFERENCE: [(&str, f64, f64, f64, f64); 3] = [
    ("small", 9.6, 32_333.0, 60.0, 0.63),
    ("medium", 19.2, 63_531.0, 100.0, 0.81),
    ("large", 55.8, 181_985.0, 420.0, 1.56),
];

/// CPU time of this process (every thread), in nanoseconds.
fn process_cpu_ns() -> u64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return 0 };
    tasks
        .filter_map(|t| t.ok())
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next().and_then(|n| n.parse::<u64>().ok()))
        .sum()
}

/// How long a turn's process is left to settle before its CPU is read (see [`run_size`]).
const SETTLE: Duration = Duration::from_millis(25);

/// Figures of one turn.
pub(crate) struct Turn {
    calls: usize,
    embeddings: usize,
    prompt_tokens: u64,
    waves: usize,
    /// This process's CPU time over the turn: the engine's own work.
    pub(crate) cpu: Duration,
    wall: Duration,
    /// The model server's log of the turn, in arrival order.
    log: Vec<LoggedRequest>,
    /// In `stream` output mode: from the customer's message to the reply's first words.
    first_token: Option<Duration>,
    /// Whether a tool ran in the turn.
    tools_ran: bool,
}

/// A session that notes when the turn's first agent message (the streamed reply's first
/// words) arrives.
struct FirstWords<'a> {
    session: &'a MemorySession,
    started: Instant,
    first: std::sync::Mutex<Option<Duration>>,
}

#[async_trait::async_trait]
impl guidepost_runtime::EventSink for FirstWords<'_> {
    async fn emit(
        &self,
        event: guidepost_runtime::NewEvent,
        visibility: guidepost_runtime::events::Visibility,
    ) -> Option<String> {
        let words = matches!(&event.payload, guidepost_core::payload::EventPayload::Message(m)
            if m.tags.is_none() && !m.message.is_empty());
        if words {
            let mut first = self.first.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            first.get_or_insert_with(|| self.started.elapsed());
        }
        self.session.emit(event, visibility).await
    }
    async fn update(&self, event_id: &str, event: guidepost_runtime::NewEvent) {
        self.session.update(event_id, event).await;
    }
}

/// One request in the fake model server's log (`GET /_log`).
#[derive(serde::Deserialize)]
struct LoggedRequest {
    /// `chat` or `embeddings`.
    kind: String,
    /// The structured output's schema name (`None` for plain text and embeddings).
    schema: Option<String>,
    /// Prompt tokens.
    prompt_tokens: u64,
    /// Milliseconds since the fake server started, at arrival and at answer.
    start_ms: f64,
    end_ms: f64,
}

/// Sequential waves of chat calls: calls that overlap share a wave.
fn waves(requests: &[LoggedRequest]) -> usize {
    let mut chats: Vec<&LoggedRequest> = requests.iter().filter(|r| r.kind == "chat").collect();
    chats.sort_by(|a, b| a.start_ms.total_cmp(&b.start_ms));
    let mut count = 0;
    let mut wave_end = f64::NEG_INFINITY;
    for r in chats {
        if r.start_ms >= wave_end {
            count += 1;
            wave_end = r.end_ms;
        } else {
            wave_end = wave_end.max(r.end_ms);
        }
    }
    count
}

/// The turns of the long conversation whose prompt tokens the bench reports.
const LONG_TURNS: [usize; 3] = [1, 10, 50];

/// Runs the workload of `size`, or its messages over again up to `turns` turns.
async fn run_size(
    agents: &Path,
    size: &str,
    latency_ms: u64,
    turns: Option<usize>,
    streamed: bool,
    http: &reqwest::Client,
    progress: &indicatif::ProgressBar,
) -> Result<Vec<Turn>> {
    let (mut definition, messages) = crate::child::workload(agents, size)?;
    if streamed {
        definition.agent.output_mode = guidepost_core::OutputMode::Stream;
    }
    let (_server, port) = crate::child::fake_model(latency_ms)?;
    let base = format!("http://127.0.0.1:{port}");
    let spec: ModelSpec = format!("openai-compatible:{base}/v1#gpt-4.1").parse()?;
    let embedder: ModelSpec = format!("openai-compatible:{base}/v1#fake-embed").parse()?;
    let stack = ModelStackBuilder::new(ModelSettings::single(spec)).embedder_spec(embedder).build()?;
    let models = crate::models::runtime_models(&stack);
    let registry = ToolRegistry::from_definition(&definition)?;
    let runtime = AgentRuntime::new(Arc::new(definition), models, Arc::new(registry), RuntimeConfig::default());
    let session = MemorySession::new();
    let mut state = AgentState::default();
    let count = turns.unwrap_or(messages.len());
    let mut turns = Vec::new();
    for message in messages.iter().cycle().take(count) {
        http.delete(format!("{base}/_log")).send().await?;
        let input = session.customer_turn("bench", CustomerRef { id: "guest".into(), tags: vec![] }, message, &state);
        let cpu0 = process_cpu_ns();
        let started = Instant::now();
        let sink = FirstWords { session: &session, started, first: std::sync::Mutex::new(None) };
        let outcome = runtime.process(input, &sink, CancellationToken::new(), EmittingLatch::default()).await;
        let first_token = *sink.first.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let wall = started.elapsed();
        // What the turn set going finishes after it returns (connections reading the rest of
        // an answer, tasks that record a call's outcome): counted with the turn, as it would
        // be at any latency, by letting the process settle before reading its CPU.
        tokio::time::sleep(SETTLE).await;
        let cpu = Duration::from_nanos(process_cpu_ns().saturating_sub(cpu0));
        if let Some(error) = &outcome.trace.error {
            bail!("turn failed: {error}");
        }
        state = outcome.state;
        let mut log: Vec<LoggedRequest> = http.get(format!("{base}/_log")).send().await?.json().await?;
        log.sort_by(|a, b| a.start_ms.total_cmp(&b.start_ms));
        turns.push(Turn {
            calls: log.iter().filter(|r| r.kind == "chat").count(),
            embeddings: log.iter().filter(|r| r.kind == "embeddings").count(),
            prompt_tokens: log.iter().filter(|r| r.kind == "chat").map(|r| r.prompt_tokens).sum(),
            waves: waves(&log),
            cpu,
            wall,
            log,
            first_token: if streamed { first_token } else { None },
            tools_ran: outcome.trace.iterations.iter().any(|i| !i.tool_calls.is_empty()),
        });
        progress.inc(1);
    }
    Ok(turns)
}

/// The workload's conversation of `size` at `latency_ms` per call, run in this process.
pub(crate) async fn engine_turns(
    agents: &Path,
    size: &str,
    latency_ms: u64,
    http: &reqwest::Client,
) -> Result<Vec<Turn>> {
    run_size(agents, size, latency_ms, None, false, http, &indicatif::ProgressBar::hidden()).await
}

pub(crate) fn mean(values: impl Iterator<Item = f64>) -> f64 {
    let v: Vec<f64> = values.collect();
    if v.is_empty() { 0.0 } else { v.iter().sum::<f64>() / v.len() as f64 }
}

pub async fn run(
    agents: PathBuf,
    sizes: Vec<String>,
    latencies: Vec<u64>,
    out: Option<PathBuf>,
    over_http: bool,
    calls: bool,
) -> Result<ExitCode> {
    let http = guidepost_llm::http::client_builder().build()?;
    let mut report = String::from(
        "| size | latency | turn | model calls | embeddings | prompt tokens | waves | engine CPU ms | turn s |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    let mut summary = String::from(
        "| size | latency | model calls | prompt tokens | waves | engine CPU ms | turn s | engine CPU ms (stream mode) | first words s (stream mode, turns without tools) | reference calls | reference prompt tokens | reference CPU ms | reference turn s (200 ms) |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    let mut long = String::from(
        "| size | prompt tokens, turn 1 | turn 10 | turn 50 | turn 50 / turn 10 |\n|---|---|---|---|---|\n",
    );
    let mut timeline = String::from(
        "| size | latency | turn | call | schema | prompt tokens | start ms | end ms |\n|---|---|---|---|---|---|---|---|\n",
    );
    let mut served = String::from(
        "| size | latency | startup s | RSS idle MiB | RSS after the session MiB | turn s over HTTP | turn s in process |\n|---|---|---|---|---|---|---|\n",
    );
    // Per size and latency: the session, again in stream mode, again over HTTP; then the long
    // conversation.
    let mut total = 0;
    for size in &sizes {
        let turns = crate::child::workload(&agents, size)?.1.len() as u64;
        total += latencies.len() as u64 * turns * if over_http { 3 } else { 2 };
        total += LONG_TURNS.last().copied().unwrap_or(0) as u64;
    }
    let progress = crate::child::turn_bar(total);
    for size in &sizes {
        for &latency in &latencies {
            progress.set_message(format!("{size}, {latency} ms per call"));
            let turns = run_size(&agents, size, latency, None, false, &http, &progress).await?;
            // The same conversation in `stream` output mode: when the reply's first words
            // reach the customer.
            progress.set_message(format!("{size}, {latency} ms per call, stream mode"));
            let streamed = run_size(&agents, size, latency, None, true, &http, &progress).await?;
            let first_words: Vec<f64> = streamed
                .iter()
                .filter(|t| !t.tools_ran)
                .filter_map(|t| t.first_token.map(|d| d.as_secs_f64()))
                .collect();
            if over_http {
                let (_fake, port) = crate::child::fake_model(latency)?;
                let workload = crate::child::workload(&agents, size)?;
                progress.set_message(format!("{size}, {latency} ms per call, over HTTP"));
                let figures =
                    crate::bench_http::run(workload, &format!("http://127.0.0.1:{port}"), &http, &progress).await?;
                let _ = writeln!(
                    served,
                    "| {size} | {latency} ms | {:.2} | {:.0} | {:.0} | {:.3} | {:.3} |",
                    figures.startup.as_secs_f64(),
                    figures.rss_idle_mb,
                    figures.rss_after_mb,
                    mean(figures.turns.iter().map(Duration::as_secs_f64)),
                    mean(turns.iter().map(|t| t.wall.as_secs_f64())),
                );
            }
            for (i, t) in turns.iter().enumerate() {
                let zero = t.log.first().map_or(0.0, |r| r.start_ms);
                for (n, r) in t.log.iter().enumerate() {
                    let _ = writeln!(
                        timeline,
                        "| {size} | {latency} ms | {} | {} | {} | {} | {:.0} | {:.0} |",
                        i + 1,
                        n + 1,
                        r.schema.as_deref().unwrap_or(&r.kind),
                        r.prompt_tokens,
                        r.start_ms - zero,
                        r.end_ms - zero,
                    );
                }
                let _ = writeln!(
                    report,
                    "| {size} | {latency} ms | {} | {} | {} | {} | {} | {:.2} | {:.3} |",
                    i + 1,
                    t.calls,
                    t.embeddings,
                    t.prompt_tokens,
                    t.waves,
                    t.cpu.as_secs_f64() * 1000.0,
                    t.wall.as_secs_f64()
                );
            }
            let r = REFERENCE.iter().find(|r| r.0 == size);
            let _ = writeln!(
                summary,
                "| {size} | {latency} ms | {:.1} | {:.0} | {:.1} | {:.2} | {:.3} | {:.2} | {:.3} | {} | {} | {} | {} |",
                mean(turns.iter().map(|t| t.calls as f64)),
                mean(turns.iter().map(|t| t.prompt_tokens as f64)),
                mean(turns.iter().map(|t| t.waves as f64)),
                mean(turns.iter().map(|t| t.cpu.as_secs_f64() * 1000.0)),
                mean(turns.iter().map(|t| t.wall.as_secs_f64())),
                mean(streamed.iter().map(|t| t.cpu.as_secs_f64() * 1000.0)),
                mean(first_words.iter().copied()),
                r.map_or("-".into(), |r| format!("{:.1}", r.1)),
                r.map_or("-".into(), |r| format!("{:.0}", r.2)),
                r.map_or("-".into(), |r| format!("{:.0}", r.3)),
                r.map_or("-".into(), |r| format!("{:.2}", r.4)),
            );
        }
        progress.set_message(format!("{size}, a long conversation"));
        let conversation = run_size(&agents, size, 0, LONG_TURNS.last().copied(), false, &http, &progress).await?;
        let [first, tenth, last] =
            LONG_TURNS.map(|n| conversation.get(n.saturating_sub(1)).map_or(0, |t| t.prompt_tokens));
        let growth = last as f64 / tenth.max(1) as f64;
        let _ = writeln!(long, "| {size} | {first} | {tenth} | {last} | {growth:.2} |");
    }
    progress.finish_and_clear();
    let mut text = format!(
        "## Per turn (mean of the session's turns)\n\n{summary}\n## A long conversation: prompt tokens per turn (0 ms per call)\n\n{long}\n## Every turn\n\n{report}"
    );
    if calls {
        let _ = write!(text, "\n## Every model call (times from the turn's first call)\n\n{timeline}");
    }
    if over_http {
        let _ = write!(
            text,
            "\n## Over HTTP (`guidepost serve`, in-memory store; turn = customer message posted to `ready` of its turn, mean)\n\n{served}"
        );
    }
    outln!("{text}");
    if let Some(path) = out {
        std::fs::write(&path, &text).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}
