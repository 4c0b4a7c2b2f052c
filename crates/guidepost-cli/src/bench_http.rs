//! `guidepost bench`, over HTTP: the same workload through `guidepost serve` in a child
//! process (startup time, resident memory when idle and after the session, and each turn's
//! latency as a client sees it: from posting the customer message to the `ready` status of
//! its turn), beside the in-process figures.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::child::{ChildProcess, rss_mb};
use anyhow::{Context, Result, bail};

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
    progress: &indicatif::ProgressBar,
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

    let turns =
        crate::load::conversation(http, &base, &definition.agent.id, &messages, Duration::from_secs(60), progress)
            .await?;
    let rss_after_mb = rss_mb(pid);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(HttpFigures { startup, rss_idle_mb, rss_after_mb, turns })
}
