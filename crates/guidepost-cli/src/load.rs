//! `guidepost load`: many concurrent conversations over HTTP against `guidepost serve`.
//!
//! The server runs in a child process on a SQLite file or a PostgreSQL database, with the
//! fake OpenAI-compatible model in another. First one session alone (the baseline), then
//! all sessions at once, each holding the workload's conversation turn after turn: post the
//! customer message, long-poll until the `ready` status of its turn. Prints turns per
//! second, latency percentiles beside the baseline, errors, the server's memory at idle
//! and at peak, and its CPU time per turn.

use std::fmt::Write as _;

use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::child::{ChildProcess, first_line, rss_mb};
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
}

fn cpu_seconds(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return f64::NAN };
    let Some(rest) = stat.rsplit(')').next() else { return f64::NAN };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// How long a turn of the load may take before the run counts it as failed.
const TURN_LIMIT: Duration = Duration::from_secs(600);

/// One conversation with the server at `base`: a session with `agent`, then every message in
/// turn, each waited for until the `ready` status of its turn (long polling) for at most
/// `limit`, counted on `progress` as it ends. Returns each turn's latency as the client saw
/// it, or the error.
pub(crate) async fn conversation(
    http: &reqwest::Client,
    base: &str,
    agent: &str,
    messages: &[String],
    limit: Duration,
    progress: &indicatif::ProgressBar,
) -> Result<Vec<Duration>> {
    let session: Value = http
        .post(format!("{base}/sessions"))
        .json(&json!({"agent_id": agent}))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    let sid = session["id"].as_str().context("no session id")?.to_string();
    let mut latencies = Vec::new();
    for message in messages {
        let started = Instant::now();
        let posted: Value = http
            .post(format!("{base}/sessions/{sid}/events"))
            .json(&json!({"kind": "message", "source": "customer", "message": message}))
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        let trace = posted["trace_id"].as_str().context("no trace id")?.to_string();
        let mut next = posted["offset"].as_u64().unwrap_or(0) + 1;
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
        latencies.push(started.elapsed());
        progress.inc(1);
    }
    Ok(latencies)
}

struct Run {
    store: String,
    sessions: usize,
    turns: usize,
    errors: usize,
    first_error: Option<String>,
    wall: Duration,
    latencies: Vec<f64>,
    baseline: Vec<f64>,
    rss_idle: f64,
    rss_peak: f64,
    cpu: f64,
}

async fn run_one(options: &LoadOptions, store: Option<&str>, progress: &indicatif::ProgressBar) -> Result<Run> {
    let (definition, messages) = crate::child::workload(&options.agents, &options.size)?;
    let dir = std::env::temp_dir().join(format!("guidepost-load-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let file = dir.join(format!("{}.yaml", definition.agent.id));
    std::fs::write(&file, guidepost_core::definition::to_yaml(&definition)?)?;
    let exe = std::env::current_exe()?;

    let (_fake, fake_port) = crate::child::fake_model(options.latency_ms)?;
    let fake_base = format!("http://127.0.0.1:{fake_port}");

    let mut serve = Command::new(&exe);
    serve.args(["serve", "--port", "0"]).arg(&file);
    let store_name = match store {
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
        .context("starting guidepost serve")?;
    let base = first_line(&mut server, "listening on ")?;
    let pid = server.id();
    let _server = ChildProcess(server);
    progress.set_message(format!("{store_name}: one session alone"));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss_idle = rss_mb(pid);

    let http = guidepost_llm::http::client_builder()
        .timeout(Duration::from_secs(120))
        .pool_idle_timeout(Duration::from_secs(90))
        .build()?;
    let baseline: Vec<f64> = conversation(&http, &base, &definition.agent.id, &messages, TURN_LIMIT, progress)
        .await?
        .iter()
        .map(Duration::as_secs_f64)
        .collect();

    let peak = Arc::new(AtomicU64::new(rss_idle.to_bits()));
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
    let cpu0 = cpu_seconds(pid);
    let started = Instant::now();
    progress.set_message(format!("{store_name}: {} sessions at once", options.sessions));
    let mut tasks = Vec::with_capacity(options.sessions);
    for _ in 0..options.sessions {
        let (http, base, agent, messages) = (http.clone(), base.clone(), definition.agent.id.clone(), messages.clone());
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
    let cpu = cpu_seconds(pid) - cpu0;
    sampling.store(false, Ordering::SeqCst);
    let _ = sampler.await;
    latencies.sort_by(f64::total_cmp);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(Run {
        store: store_name,
        sessions: options.sessions,
        turns: latencies.len(),
        errors,
        first_error,
        wall,
        latencies,
        baseline,
        rss_idle,
        rss_peak: f64::from_bits(peak.load(Ordering::SeqCst)),
        cpu,
    })
}

pub async fn run(options: LoadOptions) -> Result<ExitCode> {
    let mut stores: Vec<Option<String>> = vec![None];
    stores.extend(options.database_urls.iter().cloned().map(Some));
    let mut table = String::from(
        "| store | sessions | turns | errors | turns/s | p50 s | p95 s | p99 s | single session p50 s | RSS idle MiB | RSS peak MiB | server CPU ms/turn |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    let mut notes = String::new();
    // Each store: one session alone, then all of them, a turn per message of the workload.
    let messages = crate::child::workload(&options.agents, &options.size)?.1.len() as u64;
    let turns_per_store = (options.sessions as u64 + 1) * messages;
    let progress = crate::child::turn_bar(turns_per_store * stores.len() as u64);
    for store in &stores {
        let run = run_one(&options, store.as_deref(), &progress).await?;
        let mut baseline = run.baseline.clone();
        baseline.sort_by(f64::total_cmp);
        let _ = writeln!(
            table,
            "| {} | {} | {} | {} | {:.1} | {:.2} | {:.2} | {:.2} | {:.2} | {:.0} | {:.0} | {:.1} |",
            run.store,
            run.sessions,
            run.turns,
            run.errors,
            run.turns as f64 / run.wall.as_secs_f64(),
            percentile(&run.latencies, 0.50),
            percentile(&run.latencies, 0.95),
            percentile(&run.latencies, 0.99),
            percentile(&baseline, 0.50),
            run.rss_idle,
            run.rss_peak,
            run.cpu * 1000.0 / run.turns.max(1) as f64,
        );
        if let Some(e) = &run.first_error {
            let _ = writeln!(notes, "- {}: first error: {e}", run.store);
        }
    }
    progress.finish_and_clear();
    let text = format!(
        "## {} sessions x {}-turn conversations over HTTP, {} workload, {} ms per model call\n\n{table}{notes}",
        options.sessions, messages, options.size, options.latency_ms
    );
    outln!("{text}");
    if let Some(path) = &options.out {
        std::fs::write(path, &text).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}
