//! `guidepost bench`, over HTTP: the same workload through `guidepost serve` in a child
//! process (startup time, resident memory when idle and after the session, and each turn's
//! latency as a client sees it: from posting the customer message to the `ready` status of
//! its turn), beside the in-process figures.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::child::{ChildProcess, rss_mb};
use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

/// What one run over HTTP measured.
pub struct HttpFigures {
    /// From spawning `guidepost serve` to its `listening on` line.
    pub startup: Duration,
    /// Resident memory once ready, before any turn, in MiB.
    pub rss_idle_mb: f64,
    /// Resident memory after the session, in MiB.
    pub rss_after_mb: f64,
    /// Each turn, as the client saw it.
    pub turns: Vec<Duration>,
}

/// Runs the workload at `path` through `guidepost serve` against the fake model at
/// `fake_base`.
pub async fn run(
    workload: (guidepost_core::AgentDefinition, Vec<String>),
    fake_base: &str,
    http: &reqwest::Client,
) -> Result<HttpFigures> {
    let (definition, messages) = workload;
    let dir = std::env::temp_dir().join(format!("guidepost-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let file = dir.join(format!("{}.yaml", definition.agent.id));
    std::fs::write(&file, guidepost_core::definition::to_yaml(&definition)?)?;

    let started = Instant::now();
    let mut child = Command::new(std::env::current_exe()?)
        .args(["serve", "--ephemeral", "--port", "0"])
        .arg(&file)
        .env("GUIDEPOST_MODEL", format!("openai-compatible:{fake_base}/v1#gpt-4.1"))
        .env("GUIDEPOST_EMBEDDER", format!("openai-compatible:{fake_base}/v1#fake-embed"))
        .env_remove("GUIDEPOST_DATABASE_URL")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("starting guidepost serve")?;
    let stdout = child.stdout.take().context("server stdout")?;
    let server = ChildProcess(child);
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line)?;
    let startup = started.elapsed();
    let Some(base) = line.trim().strip_prefix("listening on ").map(str::to_string) else {
        bail!("guidepost serve did not start (first line: {line:?})");
    };
    let pid = server.0.id();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let rss_idle_mb = rss_mb(pid);

    let session: Value = http
        .post(format!("{base}/sessions"))
        .json(&json!({"agent_id": definition.agent.id}))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    let sid = session["id"].as_str().context("no session id")?.to_string();
    let mut turns = Vec::new();
    for message in messages {
        let t0 = Instant::now();
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
            let resp =
                http.get(format!("{base}/sessions/{sid}/events?min_offset={next}&wait_for_data=60")).send().await?;
            if resp.status() == reqwest::StatusCode::GATEWAY_TIMEOUT {
                bail!("no reply within 60 s to {message:?}");
            }
            let events: Vec<Value> = resp.error_for_status()?.json().await?;
            next = events.last().and_then(|e| e["offset"].as_u64()).map_or(next, |o| o + 1);
            let done = events.iter().any(|e| {
                e["trace_id"] == trace.as_str()
                    && e["data"]["status"] == "ready"
                    && e["data"]["data"]["stage"] == "completed"
            });
            if done {
                break;
            }
        }
        turns.push(t0.elapsed());
    }
    let rss_after_mb = rss_mb(pid);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(HttpFigures { startup, rss_idle_mb, rss_after_mb, turns })
}
