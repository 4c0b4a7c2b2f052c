//! What the benchmarks need around them: the workload, child processes (`guidepost serve`
//! and the fake model server, each killed when dropped), what /proc says about them, and the
//! progress line they show while they run.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use anyhow::{Context, Result, bail};

/// The workload of `size` (`small`, `medium`, `large`) from `agents/<size>.json`: the agent
/// and the customer messages of its conversation.
pub fn workload(agents: &std::path::Path, size: &str) -> Result<(guidepost_core::AgentDefinition, Vec<String>)> {
    let path = agents.join(format!("{size}.json"));
    if !path.is_file() {
        bail!(
            "no workload `{size}` at {} (the workloads are in bench/agents of the repository: run from its root, \
             or give --agents DIR)",
            path.display()
        );
    }
    let text = guidepost_core::files::read_text(&path, guidepost_core::limits::Limits::global())?;
    guidepost_sim::workload::load(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// A progress line on standard error counting `total` turns, redrawn in place while a
/// benchmark runs. Nothing is drawn when standard error is not a terminal (a file, a pipe, a
/// CI log), so the tables the benchmark prints stay alone.
pub fn turn_bar(total: u64) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::with_draw_target(Some(total), indicatif::ProgressDrawTarget::stderr());
    if let Ok(style) = indicatif::ProgressStyle::with_template("[{elapsed_precise}] {bar:30} {pos}/{len} turns {msg}") {
        bar.set_style(style);
    }
    bar.enable_steady_tick(std::time::Duration::from_millis(500));
    bar
}

/// The signals that ask the process to stop (Ctrl-C, and SIGTERM on Unix), listened for from
/// the moment this is made: one that comes before [`StopSignals::recv`] is awaited is not lost,
/// and does not end the process the default way, leaving its child processes behind.
pub struct StopSignals {
    #[cfg(unix)]
    interrupt: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    terminate: Option<tokio::signal::unix::Signal>,
}

impl StopSignals {
    /// Starts listening (within a Tokio runtime).
    pub fn listen() -> Self {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Self { interrupt: signal(SignalKind::interrupt()).ok(), terminate: signal(SignalKind::terminate()).ok() }
        }
        #[cfg(not(unix))]
        Self {}
    }

    /// Waits for the first of them. Which one came.
    pub async fn recv(&mut self) -> &'static str {
        #[cfg(unix)]
        {
            async fn next(signal: Option<&mut tokio::signal::unix::Signal>) {
                match signal {
                    Some(signal) => {
                        signal.recv().await;
                    }
                    None => std::future::pending().await,
                }
            }
            tokio::select! {
                () = next(self.interrupt.as_mut()) => "Ctrl-C",
                () = next(self.terminate.as_mut()) => "SIGTERM",
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            "Ctrl-C"
        }
    }
}

/// Runs `work` (a benchmark) until it ends or the process is asked to stop: then `work` is
/// dropped, and with it the child processes it started (servers, the fake model), each
/// killed and reaped, instead of being left running.
pub async fn until_stopped<T>(work: impl std::future::Future<Output = Result<T>>) -> Result<T> {
    let mut signals = StopSignals::listen();
    tokio::select! {
        result = work => result,
        signal = signals.recv() => bail!("stopped by {signal}; the servers it started were stopped too"),
    }
}

/// A child process, killed and reaped when dropped.
pub struct ChildProcess(pub Child);

impl Drop for ChildProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Reads the child's first line of standard output, which must start with `prefix`, and
/// returns the rest.
pub fn first_line(child: &mut Child, prefix: &str) -> Result<String> {
    let stdout = child.stdout.take().context("no stdout")?;
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line)?;
    line.trim()
        .strip_prefix(prefix)
        .map(str::to_string)
        .with_context(|| format!("expected `{prefix}...`, got {line:?}"))
}

/// Resident memory of a process in MiB (NaN where /proc cannot say).
pub fn rss_mb(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

/// The benchmark's fake model server, `guidepost-fake-llm`, beside this binary.
fn fake_model_binary() -> Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let dir = exe.parent().context("the guidepost binary has no folder")?;
    let fake = dir.join(format!("guidepost-fake-llm{}", std::env::consts::EXE_SUFFIX));
    if !fake.is_file() {
        bail!(
            "the benchmark's fake model server is not built ({} is missing): build it beside guidepost with \
             `cargo build --release -p guidepost-cli -p guidepost-testkit` (or without --release for a debug build)",
            fake.display()
        );
    }
    Ok(fake)
}

/// Starts the fake model server with `latency_ms` per answer and returns it with its port.
pub fn fake_model(latency_ms: u64) -> Result<(ChildProcess, u16)> {
    let mut child = Command::new(fake_model_binary()?)
        .args(["--port", "0", "--latency-ms", &latency_ms.to_string()])
        .stdout(Stdio::piped())
        .spawn()
        .context("starting the fake model server")?;
    let port = first_line(&mut child, "listening ")?;
    let port = port.parse().with_context(|| format!("the fake model server reported port {port:?}"))?;
    Ok((ChildProcess(child), port))
}
