//! Matching benchmark on the shared workloads (`bench/agents/*.json` in the repository, or the
//! directory in `GUIDEPOST_BENCH_AGENTS`): the five customer messages of each workload run
//! as one session against a zero-latency model that answers like the bench's fake LLM.
//!
//! Per turn it prints the model calls and prompt tokens spent on guideline matching and
//! journey selection, the sequential model waves, and the engine's CPU time with model
//! and embedder time excluded. Run: `cargo bench -p guidepost-engine --bench matching`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use guidepost_core::{AgentDefinition, AgentState, EventSource};
use guidepost_engine::context::events::message;
use guidepost_engine::{CompiledAgent, GuidelineMatcher, MatcherConfig, MatchingContext, StagedToolResult};
use guidepost_llm::providers::hashing::HashingEmbedder;
use guidepost_llm::{ChatModel, ChatRequest, ChatResponse, Embedder, LlmError, Output, TaskKind, Usage};
use serde_json::{Value, json};

// ---------------------------------------------------------------- workload conversion

fn load(path: &PathBuf) -> (AgentDefinition, Vec<String>) {
    guidepost_sim::workload::load(&std::fs::read_to_string(path).unwrap()).unwrap()
}

// ---------------------------------------------------------------- the fake model

fn has_number(s: &str) -> bool {
    s.split(|c: char| !c.is_ascii_digit()).any(|d| d.len() >= 3)
}

/// Answers like `fake_llm.py`: a condition applies when it shares a content word with
/// the last customer message; re-application is never asked for; journeys stay on a step
/// waiting for the customer until a number arrives, else take the first transition;
/// nothing is ambiguous.
#[derive(Default)]
struct FakeModel {
    prompts: Mutex<Vec<(TaskKind, String)>>,
    busy: Mutex<Duration>,
}

impl FakeModel {
    fn answer(req: &ChatRequest) -> Value {
        let prompt = req.messages.iter().map(|m| m.content.as_str()).collect::<Vec<_>>().join("\n");
        let schema = match &req.output {
            guidepost_llm::OutputFormat::Json { schema, .. } => schema.clone(),
            _ => Value::Null,
        };
        let users = req.messages.iter().filter(|m| m.role == guidepost_llm::Role::User).count();
        guidepost_testkit::fake_openai::answer(req.schema_name().unwrap_or(""), &schema, &prompt, users)
    }
}

#[async_trait]
impl ChatModel for FakeModel {
    fn model_id(&self) -> &str {
        "fake"
    }
    fn capabilities(&self) -> guidepost_llm::ModelCapabilities {
        guidepost_llm::ModelCapabilities::CAPABLE
    }
    async fn complete(&self, req: ChatRequest) -> Result<ChatResponse, LlmError> {
        let started = Instant::now();
        let value = Self::answer(&req);
        let prompt = req.messages.iter().map(|m| m.content.as_str()).collect::<Vec<_>>().join("\n");
        self.prompts.lock().unwrap().push((req.task.clone(), prompt));
        *self.busy.lock().unwrap() += started.elapsed();
        Ok(ChatResponse::new(Output::Json(value), Usage::new("fake")))
    }
}

struct TimedEmbedder {
    inner: HashingEmbedder,
    busy: Mutex<Duration>,
}

#[async_trait]
impl Embedder for TimedEmbedder {
    fn model_id(&self) -> &str {
        "hashing"
    }
    fn dimensions(&self) -> usize {
        self.inner.dimensions()
    }
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, LlmError> {
        let started = Instant::now();
        let out = self.inner.embed(texts).await;
        *self.busy.lock().unwrap() += started.elapsed();
        out
    }
}

// ---------------------------------------------------------------- the session

#[derive(Default, Clone)]
struct TurnFigures {
    matching_calls: usize,
    journey_calls: usize,
    prompt_tokens: usize,
    largest_prompt: usize,
    waves: u32,
    embeddings: u32,
    cpu: Duration,
    matched: usize,
}

/// Runs the session once; returns figures per turn.
fn run_session(
    definition: &AgentDefinition,
    messages: &[String],
    config: &MatcherConfig,
    count_tokens: bool,
) -> Vec<TurnFigures> {
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let model = Arc::new(FakeModel::default());
    let embedder = Arc::new(TimedEmbedder { inner: HashingEmbedder::new(256), busy: Mutex::new(Duration::ZERO) });
    let agent = Arc::new(CompiledAgent::new(Arc::new(definition.clone())));
    let matcher =
        GuidelineMatcher::new(agent, model.clone(), Some(embedder.clone() as Arc<dyn Embedder>), config.clone());
    let mut events = Vec::new();
    let mut state = AgentState::default();
    let mut figures = Vec::new();
    for text in messages {
        events.push(message(EventSource::Customer, events.len() as u64, text));
        let busy_before = *model.busy.lock().unwrap() + *embedder.busy.lock().unwrap();
        let prompts_before = model.prompts.lock().unwrap().len();
        let started = Instant::now();
        let ctx = MatchingContext::new(events.clone(), state.clone());
        let mut outcome = runtime.block_on(matcher.match_turn(&ctx)).unwrap();
        let mut waves = outcome.record.waves;
        let mut embeddings = outcome.record.embedding_calls;
        // The preparation loop: a tool-enabled journey node whose parameter is in the
        // message runs, and matching runs again with the result staged.
        let tool = outcome.tool_enabled().flat_map(|m| m.tools.iter().cloned()).next();
        if let Some(tool) = tool.filter(|_| has_number(text)) {
            let number: String = text.chars().filter(char::is_ascii_digit).collect();
            let ctx = ctx.with_tool_results(vec![StagedToolResult {
                tool,
                arguments: json!({ "value": number }),
                result: json!({"status": "shipped", "eta_days": 2}),
            }]);
            outcome = runtime.block_on(matcher.rematch(&ctx, &outcome)).unwrap();
            waves += outcome.record.waves;
            embeddings += outcome.record.embedding_calls;
        }
        let elapsed = started.elapsed();
        let busy = *model.busy.lock().unwrap() + *embedder.busy.lock().unwrap() - busy_before;
        let prompts: Vec<(TaskKind, String)> = model.prompts.lock().unwrap()[prompts_before..].to_vec();
        let tokens: Vec<usize> = if count_tokens {
            prompts.iter().map(|(_, p)| guidepost_llm::count_tokens(p)).collect()
        } else {
            Vec::new()
        };
        figures.push(TurnFigures {
            matching_calls: prompts.iter().filter(|(t, _)| *t == TaskKind::Matching).count(),
            journey_calls: prompts.iter().filter(|(t, _)| *t == TaskKind::JourneySelection).count(),
            prompt_tokens: tokens.iter().sum(),
            largest_prompt: tokens.iter().copied().max().unwrap_or(0),
            waves,
            embeddings,
            cpu: elapsed.saturating_sub(busy),
            matched: outcome.matches.len(),
        });
        events.push(message(EventSource::AiAgent, events.len() as u64, "Sure, I can help you with that."));
        for m in outcome.matches.iter().filter(|m| m.action.is_some()) {
            if !state.applied_guideline_ids.contains(&m.guideline_id) {
                state.applied_guideline_ids.push(m.guideline_id.clone());
            }
        }
        state.journey_paths = outcome.journey_paths.clone();
    }
    figures
}

fn main() {
    let dir = std::env::var("GUIDEPOST_BENCH_AGENTS")
        .map_or_else(|_| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../bench/agents")), PathBuf::from);
    if !dir.join("small.json").exists() {
        println!("no workloads in {} (set GUIDEPOST_BENCH_AGENTS); nothing to measure", dir.display());
        return;
    }
    let repetitions: u32 = std::env::var("GUIDEPOST_BENCH_REPS").ok().and_then(|r| r.parse().ok()).unwrap_or(30);
    let config = MatcherConfig::default();
    let reference = [("small", 7.8, 60), ("medium", 17.4, 100), ("large", 54.0, 420)];
    println!("config: {config:?}\n");
    let mut summary = Vec::new();
    for (size, ref_calls, ref_cpu) in reference {
        let (definition, messages) = load(&dir.join(format!("{size}.json")));
        let figures = run_session(&definition, &messages, &config, true);
        // CPU: best and median of `repetitions` warm runs per turn (the first run warms
        // caches; wall time minus model and embedder time on a single-threaded runtime).
        let mut samples: Vec<Vec<Duration>> = vec![Vec::new(); figures.len()];
        for _ in 0..repetitions.max(1) {
            for (i, f) in run_session(&definition, &messages, &config, false).iter().enumerate() {
                samples[i].push(f.cpu);
            }
        }
        for s in &mut samples {
            s.sort();
        }
        let cpu: Vec<Duration> = samples.iter().map(|s| s.first().copied().unwrap_or_default()).collect();
        let median: Vec<Duration> = samples.iter().map(|s| s.get(s.len() / 2).copied().unwrap_or_default()).collect();
        println!("## {size}: {} guidelines, {} journeys", definition.guidelines.len(), definition.journeys.len());
        println!(
            "| turn | matching calls | journey calls | prompt tokens | largest prompt | waves | embeddings | matches | engine CPU ms (best) | (median) |"
        );
        println!("|---|---|---|---|---|---|---|---|---|---|");
        for (i, f) in figures.iter().enumerate() {
            println!(
                "| {} | {} | {} | {} | {} | {} | {} | {} | {:.3} | {:.3} |",
                i + 1,
                f.matching_calls,
                f.journey_calls,
                f.prompt_tokens,
                f.largest_prompt,
                f.waves,
                f.embeddings,
                f.matched,
                cpu[i].as_secs_f64() * 1000.0,
                median[i].as_secs_f64() * 1000.0
            );
        }
        let n = figures.len() as f64;
        let calls = figures.iter().map(|f| f.matching_calls + f.journey_calls).sum::<usize>() as f64 / n;
        let tokens = figures.iter().map(|f| f.prompt_tokens).sum::<usize>() as f64 / n;
        let waves = figures.iter().map(|f| f.waves).max().unwrap_or(0);
        let cpu_mean = cpu.iter().map(Duration::as_secs_f64).sum::<f64>() / n * 1000.0;
        let median_mean = median.iter().map(Duration::as_secs_f64).sum::<f64>() / n * 1000.0;
        println!();
        summary.push((size, calls, tokens, waves, cpu_mean, median_mean, ref_calls, ref_cpu));
    }
    println!("## per turn, mean of 5 turns (matching + journey selection only)");
    println!(
        "| size | calls (Guidepost) | calls (reference) | prompt tokens | max waves | engine CPU ms best / median | CPU ms (reference, whole turn) |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (size, calls, tokens, waves, cpu, median, ref_calls, ref_cpu) in summary {
        println!("| {size} | {calls:.1} | {ref_calls} | {tokens:.0} | {waves} | {cpu:.3} / {median:.3} | {ref_cpu} |");
    }
}
