//! `guidepost chat`: talk to an agent in the terminal, seeing what the engine decided.

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Result, bail};
use guidepost_core::AgentState;
use guidepost_runtime::CustomerRef;
use guidepost_runtime::{AgentRuntime, EmittingLatch, MemorySession, TurnInput, TurnOutcome, TurnStatus};
use guidepost_tools::registry::ToolRegistry;
use tokio_util::sync::CancellationToken;

use crate::discover::discover;
use crate::progress::{Activity, LiveReply, ObservedSink, TurnProgress};

/// Options of `guidepost chat`.
pub struct ChatOptions {
    pub path: PathBuf,
    pub agent: Option<String>,
    pub model: Option<String>,
    pub embedder: Option<String>,
    pub threads: Option<usize>,
    pub messages: Vec<String>,
    pub quiet: bool,
}

fn describe(outcome: &TurnOutcome, runtime: &AgentRuntime, elapsed: std::time::Duration) -> Vec<String> {
    let def = runtime.definition();
    let mut lines = Vec::new();
    if !outcome.trace.matched.is_empty() {
        lines.push(format!("matched: {}", outcome.trace.matched.join(", ")));
    }
    for (journey, path) in &outcome.state.journey_paths {
        let title = def.journey(journey).map_or(journey.as_str(), |j| j.title.as_str());
        lines.push(format!("journey {title}: {}", path.states().join(" → ")));
    }
    for it in &outcome.trace.iterations {
        for call in &it.tool_calls {
            let data = call.result.get("data").cloned().unwrap_or_default();
            let mut shown = data.to_string();
            if shown.chars().count() > 120 {
                shown = shown.chars().take(117).collect::<String>() + "...";
            }
            lines.push(format!(
                "tool {}({}) → {shown} ({} ms)",
                call.tool.name,
                serde_json::Value::Object(call.arguments.clone()),
                call.duration_ms
            ));
        }
    }
    for missing in &outcome.trace.tool_insights.missing {
        lines.push(format!("missing for {}: {}", missing.tool.name, missing.parameter));
    }
    let composition = &outcome.trace.composition;
    let last = composition.reply_checks.len().saturating_sub(1);
    for (attempt, problems) in composition.reply_checks.iter().enumerate().filter(|(_, p)| !p.is_empty()) {
        let found: Vec<String> = problems.iter().map(ToString::to_string).collect();
        match &composition.mended_from {
            Some(written) if attempt == last => lines.push(format!(
                "reply {} sent without its opening, which repeated the customer ({}); the model wrote: {written}",
                attempt + 1,
                found.join("; ")
            )),
            _ => lines.push(format!("reply {} refused: {}", attempt + 1, found.join("; "))),
        }
    }
    if composition.fallback {
        lines.push("fallback reply sent: no reply the model wrote passed the checks".to_string());
    }
    let usage = &outcome.trace.usage;
    let cached = if usage.cached_tokens > 0 {
        format!(" ({} reused from the call before)", usage.cached_tokens)
    } else {
        String::new()
    };
    lines.push(format!(
        "{} model calls, {} prompt tokens{cached}, {:.1} s",
        usage.calls,
        usage.prompt_tokens,
        elapsed.as_secs_f64()
    ));
    lines
}

pub async fn run(options: ChatOptions) -> Result<ExitCode> {
    let mut found = discover(std::slice::from_ref(&options.path))?;
    if let Some(wanted) = &options.agent {
        found.retain(|f| f.load().definition.is_some_and(|d| &d.agent.id == wanted));
    }
    let agent = match found.len() {
        1 => found.remove(0),
        0 => bail!("no agent found at {}", options.path.display()),
        n => bail!("{n} agents found at {}; pick one with --agent <id>", options.path.display()),
    };
    let loaded = agent.load();
    let Some(definition) = loaded.definition else {
        for d in &loaded.diagnostics {
            let source = agent.sources.iter().find(|s| s.name == d.file).map(|s| s.text.as_str());
            eprintln!("{}", d.render(source));
        }
        bail!("{} does not load; fix the errors above", agent.origin.display());
    };
    let started = Instant::now();
    let ledger = guidepost_llm::UsageLedger::new("chat");
    let stack = crate::models::stack_observed(
        options.model.as_deref(),
        options.embedder.as_deref(),
        options.threads,
        None,
        Some(ledger.clone()),
        None,
        true,
    )?;
    // Local weights load now, where a wait is expected, not inside the first turn.
    let to_load = stack.models_to_warm_up();
    if !to_load.is_empty() {
        if !options.quiet {
            eprintln!("loading {} ...", to_load.join(", "));
        }
        let loading = Instant::now();
        stack.warm_up().await.map_err(|e| anyhow::anyhow!("loading the models: {e}"))?;
        if !options.quiet {
            eprintln!("loaded in {:.1} s", loading.elapsed().as_secs_f64());
        }
    }
    let mut registry = ToolRegistry::from_definition(&definition)?;
    for problem in registry.discover_tools().await {
        eprintln!("warning: {problem}");
    }
    let models = crate::models::runtime_models(&stack);
    let name = definition.agent.name.clone();
    let config = guidepost_cli::config_file::runtime_config()?;
    let runtime = Arc::new(AgentRuntime::new(Arc::new(definition), models, Arc::new(registry), config));
    if !options.quiet {
        eprintln!(
            "{name} is ready ({:.1} s). Type a message; an empty line or Ctrl-D quits.",
            started.elapsed().as_secs_f64()
        );
    }
    let session = MemorySession::new();
    let mut state = AgentState::default();
    let interactive = options.messages.is_empty() && std::io::stdin().is_terminal();
    if interactive {
        // While the first message is typed, the model reads what its first calls begin with.
        let runtime = Arc::clone(&runtime);
        tokio::spawn(async move { runtime.read_ahead().await });
    }
    let mut scripted = options.messages.into_iter();
    let stdin = std::io::stdin();
    let mut lines = stdin.lock().lines();
    let mut failed = false;
    let mut degraded = false;
    loop {
        let text = if let Some(m) = scripted.next() {
            outln!("you> {m}");
            m
        } else {
            if interactive {
                out!("you> ");
                let _ = std::io::stdout().flush();
            }
            match lines.next() {
                Some(Ok(line)) if !line.trim().is_empty() => line,
                _ => break,
            }
        };
        let input = session.customer_turn("terminal", CustomerRef { id: "guest".into(), tags: vec![] }, &text, &state);
        let turn_started = Instant::now();
        let status = Arc::new(std::sync::Mutex::new(Activity::default()));
        // On a terminal the reply is printed while it is written.
        let live = (!options.quiet && std::io::stdout().is_terminal()).then(|| Arc::new(LiveReply::new(&name)));
        let mut sink = ObservedSink::new(&session, Arc::clone(&status));
        if let Some(live) = &live {
            sink = sink.with_live_reply(Arc::clone(live));
        }
        let paused = live.as_ref().map(|l| Arc::clone(&l.started)).unwrap_or_default();
        let progress = (!options.quiet).then(|| TurnProgress::start(status, ledger.clone(), paused));
        let outcome = runtime.process(input, &sink, CancellationToken::new(), EmittingLatch::default()).await;
        if let Some(progress) = progress {
            progress.finish().await;
        }
        let printed = live.as_ref().and_then(|l| l.finish());
        if outcome.status.replied() {
            state = outcome.state.clone();
            if interactive {
                // While the reply is read and the next message typed, the model reads the
                // conversation so far, as the next turn's first calls begin with it.
                let runtime = Arc::clone(&runtime);
                let after = TurnInput {
                    session_id: "terminal".into(),
                    customer: CustomerRef { id: "guest".into(), tags: vec![] },
                    customer_name: None,
                    events: session.events(),
                    previous_state: state.clone(),
                    trace_id: String::new(),
                };
                tokio::spawn(async move { runtime.read_ahead_after(&after).await });
            }
        }
        if !options.quiet {
            for line in describe(&outcome, &runtime, turn_started.elapsed()) {
                outln!("  · {line}");
            }
        }
        match (&outcome.status, &outcome.trace.error) {
            (TurnStatus::Failed, Some(error)) => {
                eprintln!("error: {error}");
                failed = true;
            }
            _ => {
                for m in &outcome.messages {
                    // Printed already while it was written.
                    if printed.as_deref().map(str::trim) == Some(m.trim()) {
                        continue;
                    }
                    if printed.is_some() {
                        outln!("  (sent instead:)");
                    }
                    outln!("{name}> {m}");
                }
            }
        }
        // A reply that lost a stage never passes for a normal one, --quiet or not.
        for stage in &outcome.trace.degraded {
            eprintln!("degraded: {stage}");
            degraded = true;
        }
    }
    Ok(exit_code(failed, degraded))
}

/// 1 when a turn failed, 3 when every turn replied but one of them degraded, else 0.
fn exit_code(failed: bool, degraded: bool) -> ExitCode {
    match (failed, degraded) {
        (true, _) => ExitCode::FAILURE,
        (false, true) => ExitCode::from(DEGRADED_EXIT),
        (false, false) => ExitCode::SUCCESS,
    }
}

/// The exit status of a chat whose replies all went out, one of them degraded.
pub const DEGRADED_EXIT: u8 = 3;
