//! `guidepost load`: many concurrent conversations over HTTP against `guidepost serve`.
//!
//! The server runs in a child process on a SQLite file or a PostgreSQL database, with the
//! fake OpenAI-compatible model in another. First one session alone (the baseline), then
//! either all sessions at once (`--sessions`), each holding the workload's conversation
//! turn after turn (post the customer message, long-poll until the `ready` status of its
//! turn), or, with `--saturation`, steps of rising offered load (see `load_steps.rs`). Prints
//! turns per second, latency percentiles beside the baseline, errors, the server's memory
//! at idle and at peak, its CPU time per turn beside the engine's own for the same turns
//! (measured in this process, as `guidepost bench` does), and where the server's time went
//! by kind of thread, in user and kernel mode.

use std::fmt::Write as _;

use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::child::{ChildProcess, first_line, rss_mb};
use crate::procstat::Snapshot;
use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

/// Options of `guidepost load`.
pub struct LoadOptions {
    pub agents: PathBuf,
    pub size: String,
    pub sessions: usize,
    pub latency_ms: u64,
    pub database_urls: Vec<String>,
    pub out: Option<PathBuf>,
    /// The `guidepost` binary that serves (default: this one), to compare two builds.
    pub server: Option<PathBuf>,
    /// Find the saturation point by steps of offered load instead of one run.
    pub saturation: bool,
    /// How long each step offers its load.
    pub step: Duration,
}

pub(crate) fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// How long a turn of the load may take before the run counts it as failed.
pub(crate) const TURN_LIMIT: Duration = Duration::from_secs(600);

/// One conversation with the server at `base`: a session with `agent`, then every message in
/// turn, each waited for until the `ready` status of its turn (long polling) for at most
/// `limit`. Returns each turn's latency as the client saw it, or the error.
pub(crate) async fn conversation(
    http: &reqwest::Client,
    base: &str,
    agent: &str,
    messages: &[String],
    limit: Duration,
    progress: &indicatif::ProgressBar,
) -> Result<Vec<Duration>> {
    let turns = observed_conversation(http, base, agent, messages, limit, &|_| progress.inc(1)).await?;
    Ok(turns.into_iter().map(|(_, took)| took).collect())
}

/// As [`conversation`], with when each turn started, telling `done` each turn's latency as
/// it ends.
pub(crate) async fn observed_conversation(
    http: &reqwest::Client,
    base: &str,
    agent: &str,
    messages: &[String],
    limit: Duration,
    done: &(dyn Fn(Duration) + Send + Sync),
) -> Result<Vec<(Instant, Duration)>> {
    let session: Value = http
        .post(format!("{base}/sessions"))
        .json(&json!({"agent_id": agent}))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    let sid = session["id"].as_str().context("no session id")?.to_string();
    let mut turns = Vec::new();
    for message in messages {
        let started = Instant::now();
        let (trace, mut next) = post_customer_message(http, base, &sid, message).await?;
        loop {
            if started.elapsed() > limit {
                bail!("no reply within {} s to {message:?}", limit.as_secs());
            }
            let resp =
                http.get(format!("{base}/sessions/{sid}/events?min_offset={next}&wait_for_data=60")).send().await?;
            if resp.status() == reqwest::StatusCode::GATEWAY_TIMEOUT {
                continue;
            }
            let events: Vec<Value> = resp.error_for_status()?.json().await?;
            next = events.last().and_then(|e| e["offset"].as_u64()).map_or(next, |o| o + 1);
            if events.iter().any(|e| {
                e["trace_id"] == trace.as_str()
                    && e["data"]["status"] == "ready"
                    && e["data"]["data"]["stage"] == "completed"
            }) {
                break;
            }
        }
        let took = started.elapsed();
        done(took);
        turns.push((started, took));
    }
    Ok(turns)
}

/// A `guidepost serve` in a child process with its fake model, and what is needed to talk
/// to it.
pub(crate) struct Served {
    pub base: String,
    pub pid: u32,
    pub agent: String,
    pub messages: Vec<String>,
    pub http: reqwest::Client,
    pub store: String,
    pub rss_idle: f64,
    _server: ChildProcess,
    _fake: ChildProcess,
    dir: PathBuf,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Posts a customer message to session `sid` of the server at `base`: the turn's trace id
/// and the offset of the first event after the message.
pub(crate) async fn post_customer_message(
    http: &reqwest::Client,
    base: &str,
    sid: &str,
    message: &str,
) -> Result<(String, u64)> {
    let posted: Value = http
        .post(format!("{base}/sessions/{sid}/events"))
        .json(&json!({"kind": "message", "source": "customer", "message": message}))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    let trace = posted["trace_id"].as_str().context("the posted message has no trace id")?.to_string();
    Ok((trace, posted["offset"].as_u64().unwrap_or(0) + 1))
}

/// Starts the fake model and the server (on a fresh SQLite file, or on `database_url`).
pub(crate) async fn serve(options: &LoadOptions, database_url: Option<&str>) -> Result<Served> {
    let (definition, messages) = crate::child::workload(&options.agents, &options.size)?;
    let dir = std::env::temp_dir().join(format!("guidepost-load-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let file = dir.join(format!("{}.yaml", definition.agent.id));
    std::fs::write(&file, guidepost_core::definition::to_yaml(&definition)?)?;
    let exe = match &options.server {
        Some(path) => path.clone(),
        None => std::env::current_exe()?,
    };
    let (fake, fake_port) = crate::child::fake_model(options.latency_ms)?;
    let fake_base = format!("http://127.0.0.1:{fake_port}");
    let mut serve = Command::new(&exe);
    serve.args(["serve", "--port", "0"]).arg(&file);
    let store = match database_url {
        Some(url) => {
            serve.args(["--database-url", url]);
            "PostgreSQL".to_string()
        }
        None => {
            serve.arg("--data-dir").arg(dir.join("data"));
            "SQLite file".to_string()
        }
    };
    let mut server = serve
        .env("GUIDEPOST_MODEL", format!("openai-compatible:{fake_base}/v1#gpt-4.1"))
        .env("GUIDEPOST_EMBEDDER", format!("openai-compatible:{fake_base}/v1#fake-embed"))
        .env_remove("GUIDEPOST_DATABASE_URL")
        .env_remove("GUIDEPOST_API_KEYS")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {} serve", exe.display()))?;
    let base = first_line(&mut server, "listening on ")?;
    let pid = server.id();
    let server = ChildProcess(server);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let http = guidepost_llm::http::client_builder()
        .timeout(Duration::from_secs(120))
        .pool_idle_timeout(Duration::from_secs(90))
        .build()?;
    Ok(Served {
        base,
        pid,
        agent: definition.agent.id.clone(),
        messages,
        http,
        store,
        rss_idle: rss_mb(pid),
        _server: server,
        _fake: fake,
        dir,
    })
}

impl Served {
    /// One session alone, `conversations` times over: every turn's latency in seconds,
    /// sorted.
    pub(crate) async fn baseline(&self, conversations: usize, progress: &indicatif::ProgressBar) -> Result<Vec<f64>> {
        progress.set_message(format!("{}: one session alone", self.store));
        let mut latencies = Vec::new();
        for _ in 0..conversations {
            let turns = conversation(&self.http, &self.base, &self.agent, &self.messages, TURN_LIMIT, progress).await?;
            latencies.extend(turns.iter().map(Duration::as_secs_f64));
        }
        latencies.sort_by(f64::total_cmp);
        Ok(latencies)
    }
}

/// Times the engine's conversation is run for its CPU per turn: one run's five turns varied
/// by a fifth between runs of the same build.
const ENGINE_RUNS: usize = 3;

/// The engine's own CPU per turn for this workload and latency, in milliseconds: the same
/// conversation run in this process against the fake model (as `guidepost bench` does),
/// [`ENGINE_RUNS`] times, the mean over every turn.
pub(crate) async fn engine_cpu_ms(options: &LoadOptions) -> Result<f64> {
    let http = guidepost_llm::http::client_builder().build()?;
    let mut cpu = Vec::new();
    for _ in 0..ENGINE_RUNS {
        let turns = crate::bench::engine_turns(&options.agents, &options.size, options.latency_ms, &http).await?;
        cpu.extend(turns.iter().map(|t| t.cpu.as_secs_f64() * 1000.0));
    }
    Ok(crate::bench::mean(cpu.into_iter()))
}

struct Run {
    store: String,
    turns: usize,
    errors: usize,
    first_error: Option<String>,
    wall: Duration,
    latencies: Vec<f64>,
    baseline: Vec<f64>,
    rss_idle: f64,
    rss_peak: f64,
    before: Snapshot,
    after: Snapshot,
}

async fn run_all_at_once(
    options: &LoadOptions,
    database_url: Option<&str>,
    progress: &indicatif::ProgressBar,
) -> Result<Run> {
    let served = serve(options, database_url).await?;
    let pid = served.pid;
    let baseline = served.baseline(1, progress).await?;
    let peak = Arc::new(AtomicU64::new(served.rss_idle.to_bits()));
    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = {
        let (peak, sampling) = (peak.clone(), sampling.clone());
        tokio::spawn(async move {
            while sampling.load(Ordering::SeqCst) {
                let now = rss_mb(pid);
                if now > f64::from_bits(peak.load(Ordering::SeqCst)) {
                    peak.store(now.to_bits(), Ordering::SeqCst);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    let before = Snapshot::take(pid);
    let started = Instant::now();
    progress.set_message(format!("{}: {} sessions at once", served.store, options.sessions));
    let mut tasks = Vec::with_capacity(options.sessions);
    for _ in 0..options.sessions {
        let (http, base, agent, messages) =
            (served.http.clone(), served.base.clone(), served.agent.clone(), served.messages.clone());
        let progress = progress.clone();
        tasks.push(tokio::spawn(
            async move { conversation(&http, &base, &agent, &messages, TURN_LIMIT, &progress).await },
        ));
    }
    let mut latencies = Vec::new();
    let (mut errors, mut first_error) = (0usize, None);
    for task in tasks {
        match task.await {
            Ok(Ok(l)) => latencies.extend(l.iter().map(Duration::as_secs_f64)),
            Ok(Err(e)) => {
                errors += 1;
                first_error.get_or_insert_with(|| format!("{e:#}"));
            }
            Err(e) => {
                errors += 1;
                first_error.get_or_insert_with(|| e.to_string());
            }
        }
    }
    let wall = started.elapsed();
    let after = Snapshot::take(pid);
    sampling.store(false, Ordering::SeqCst);
    let _ = sampler.await;
    latencies.sort_by(f64::total_cmp);
    Ok(Run {
        store: served.store.clone(),
        turns: latencies.len(),
        errors,
        first_error,
        wall,
        latencies,
        baseline,
        rss_idle: served.rss_idle,
        rss_peak: f64::from_bits(peak.load(Ordering::SeqCst)),
        before,
        after,
    })
}

pub async fn run(options: LoadOptions) -> Result<ExitCode> {
    let mut stores: Vec<Option<String>> = vec![None];
    stores.extend(options.database_urls.iter().cloned().map(Some));
    let engine = engine_cpu_ms(&options).await?;
    let text = if options.saturation {
        crate::load_steps::run(&options, &stores, engine).await?
    } else {
        all_at_once(&options, &stores, engine).await?
    };
    outln!("{text}");
    if let Some(path) = &options.out {
        std::fs::write(path, &text).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The report of the engine's CPU beside the server's.
pub(crate) fn split(engine_ms: f64, server_ms: f64) -> String {
    format!(
        "Server CPU per turn {server_ms:.2} ms: the engine's own work {engine_ms:.2} ms (the same turns in this \
         process), the rest {:.2} ms; server / engine = {:.2}.\n",
        server_ms - engine_ms,
        server_ms / engine_ms.max(f64::MIN_POSITIVE)
    )
}

async fn all_at_once(options: &LoadOptions, stores: &[Option<String>], engine: f64) -> Result<String> {
    let mut table = String::from(
        "| store | sessions | turns | errors | turns/s | p50 s | p95 s | p99 s | single session p50 s | RSS idle MiB | RSS peak MiB | server CPU ms/turn |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    let mut notes = String::new();
    // Each store: one session alone, then all of them, a turn per message of the workload.
    let messages = crate::child::workload(&options.agents, &options.size)?.1.len();
    let turns_per_store = (options.sessions as u64 + 1) * messages as u64;
    let progress = crate::child::turn_bar(turns_per_store * stores.len() as u64);
    for store in stores {
        let run = run_all_at_once(options, store.as_deref(), &progress).await?;
        let cpu_ms = run.after.total_since(&run.before).total() * 1000.0 / run.turns.max(1) as f64;
        let _ = writeln!(
            table,
            "| {} | {} | {} | {} | {:.1} | {:.2} | {:.2} | {:.2} | {:.2} | {:.0} | {:.0} | {:.1} |",
            run.store,
            options.sessions,
            run.turns,
            run.errors,
            run.turns as f64 / run.wall.as_secs_f64(),
            percentile(&run.latencies, 0.50),
            percentile(&run.latencies, 0.95),
            percentile(&run.latencies, 0.99),
            percentile(&run.baseline, 0.50),
            run.rss_idle,
            run.rss_peak,
            cpu_ms,
        );
        if let Some(e) = &run.first_error {
            let _ = writeln!(notes, "- {}: first error: {e}", run.store);
        }
        let _ = write!(
            notes,
            "\n### {}: where the server's CPU went\n\n{}\n{}",
            run.store,
            split(engine, cpu_ms),
            crate::procstat::table(&run.after.since(&run.before), run.turns)
        );
    }
    progress.finish_and_clear();
    Ok(format!(
        "## {} sessions x {}-turn conversations over HTTP, {} workload, {} ms per model call\n\n{table}{notes}",
        options.sessions, messages, options.size, options.latency_ms
    ))
}
