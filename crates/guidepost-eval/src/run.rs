//! Running cases: each case's last customer message goes through the engine's matching pass
//! (and, when the case expects tool decisions, tool-call inference), and every expected
//! decision is compared with what was decided.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Instant;

use guidepost_core::payload::{EventPayload, ToolCallPayload, ToolPayload};
use guidepost_core::{AgentState, JourneyPath, Tool, ToolId};
use guidepost_engine::{CompiledAgent, GuidelineMatcher, MatchKind, MatcherConfig, MatchingContext, MatchingOutcome};
use guidepost_llm::{ChatModel, Embedder, Usage};
use guidepost_runtime::events::Visibility;
use guidepost_runtime::tool_calls::{InferenceInput, infer};
use guidepost_runtime::{EventSink, MemorySession, NewEvent};
use serde::Serialize;
use serde_json::{Value, json};

use crate::case::{Case, Line, Suite, ToolExpect};

/// The models a suite runs against.
#[derive(Clone)]
pub struct Models {
    /// Guideline checks.
    pub matching: Arc<dyn ChatModel>,
    /// Journey steps.
    pub journey_selection: Arc<dyn ChatModel>,
    /// Tool-call decisions.
    pub tool_inference: Arc<dyn ChatModel>,
    /// Journey prediction (none: every journey is considered).
    pub embedder: Option<Arc<dyn Embedder>>,
}

/// How a suite runs.
#[derive(Debug, Clone)]
pub struct Options {
    /// Runs of each case (pass^k counts the cases right in every run).
    pub repeat: usize,
    /// Cases run at once.
    pub concurrency: usize,
    /// The matcher's settings.
    pub matcher: MatcherConfig,
}

impl Default for Options {
    fn default() -> Self {
        Self { repeat: 1, concurrency: 1, matcher: MatcherConfig::default() }
    }
}

/// The kinds of decision a case can label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Whether a guideline's condition holds now (the check's verdict).
    Guideline,
    /// Where a journey stands after the message.
    Journey,
    /// Whether a guideline is followed after relational resolution.
    Relationship,
    /// Whether a clarifying question is due, and what it offers.
    Disambiguation,
    /// Whether a tool is called, and with what.
    Tool,
}

impl Kind {
    /// Every kind, in report order.
    pub const ALL: [Kind; 5] = [Kind::Guideline, Kind::Journey, Kind::Relationship, Kind::Disambiguation, Kind::Tool];

    /// The name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Guideline => "guideline",
            Kind::Journey => "journey",
            Kind::Relationship => "relationship",
            Kind::Disambiguation => "disambiguation",
            Kind::Tool => "tool",
        }
    }
}

/// One decision of one run of a case.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Decided {
    /// The case.
    pub case: String,
    /// The run (0-based).
    pub run: usize,
    /// The kind.
    pub kind: Kind,
    /// What was decided about: a guideline, journey or tool id (`clarification` for the
    /// question).
    pub subject: String,
    /// The right decision.
    pub expected: Value,
    /// The engine's.
    pub actual: Value,
    /// Whether they agree.
    pub correct: bool,
    /// Why the engine decided so (the model's rationale, or the error).
    pub rationale: Option<String>,
}

/// One model call made while deciding.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Call {
    /// The case.
    pub case: String,
    /// What the call decided: `matching`, `journey`, `tool`.
    pub task: String,
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Completion tokens.
    pub completion_tokens: u64,
    /// Milliseconds.
    pub latency_ms: f64,
}

/// Everything a suite run decided.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Outcome {
    /// Runs of each case.
    pub repeat: usize,
    /// Every decision of every run.
    pub decisions: Vec<Decided>,
    /// Every model call.
    pub calls: Vec<Call>,
    /// Each case's file and line, by id, in suite order.
    pub cases: Vec<(String, String)>,
    /// Model calls that failed (the case, what failed): their decisions count as wrong, and
    /// the run as broken (a provider down, a recording missing).
    pub errors: Vec<(String, String)>,
    /// Wall time of the whole run, in seconds.
    pub seconds: f64,
}

/// One case run, as it finishes (for progress displays).
#[derive(Debug, Clone, PartialEq)]
pub struct CaseDone<'a> {
    /// The case.
    pub case: &'a str,
    /// The run (0-based).
    pub run: usize,
    /// Case runs finished so far, this one included, and how many there are.
    pub finished: usize,
    /// See `finished`.
    pub total: usize,
    /// Its decisions, and how many were right.
    pub decisions: usize,
    /// See `decisions`.
    pub right: usize,
    /// Seconds it took.
    pub seconds: f64,
}

/// Runs every case of `suite` `options.repeat` times.
pub async fn evaluate(suite: &Suite, models: &Models, options: &Options) -> Outcome {
    evaluate_with(suite, models, options, &|_| {}).await
}

/// [`evaluate`], telling `on_case` about each case run as it finishes.
pub async fn evaluate_with(
    suite: &Suite,
    models: &Models,
    options: &Options,
    on_case: &(dyn Fn(&CaseDone<'_>) + Sync),
) -> Outcome {
    let started = Instant::now();
    let matchers: Vec<GuidelineMatcher> = suite
        .agents
        .iter()
        .map(|(_, definition)| {
            GuidelineMatcher::new(
                Arc::new(CompiledAgent::new(Arc::new(definition.clone()))),
                models.matching.clone(),
                models.embedder.clone(),
                options.matcher.clone(),
            )
            .with_journey_model(models.journey_selection.clone())
        })
        .collect();
    let runs: Vec<(usize, &Case)> =
        (0..options.repeat.max(1)).flat_map(|run| suite.cases.iter().map(move |case| (run, case))).collect();
    let total = runs.len();
    let finished = std::sync::atomic::AtomicUsize::new(0);
    let finished = &finished;
    let results: Vec<CaseRun> = futures::StreamExt::collect(futures::StreamExt::buffered(
        futures::stream::iter(runs.into_iter().map(|(run, case)| {
            let matcher = &matchers[case.agent];
            let definition = &suite.agents[case.agent].1;
            async move {
                let started = Instant::now();
                let result = run_case(case, run, definition, matcher, models).await;
                on_case(&CaseDone {
                    case: &case.spec.id,
                    run,
                    finished: finished.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1,
                    total,
                    decisions: result.decisions.len(),
                    right: result.decisions.iter().filter(|d| d.correct).count(),
                    seconds: started.elapsed().as_secs_f64(),
                });
                result
            }
        })),
        options.concurrency.max(1),
    ))
    .await;
    let mut outcome = Outcome { repeat: options.repeat.max(1), ..Outcome::default() };
    for result in results {
        outcome.decisions.extend(result.decisions);
        outcome.calls.extend(result.calls);
        outcome.errors.extend(result.errors);
    }
    outcome.cases = suite
        .cases
        .iter()
        .map(|c| {
            let place = format!("{}{}", c.origin.0.display(), c.origin.1.map(|l| format!(":{l}")).unwrap_or_default());
            (c.spec.id.clone(), place)
        })
        .collect();
    outcome.seconds = started.elapsed().as_secs_f64();
    outcome
}

/// The session a case describes: its conversation as events, and the state before its last
/// message.
async fn context_of(case: &Case, definition: &guidepost_core::AgentDefinition) -> MatchingContext {
    let session = MemorySession::new();
    let agent = &definition.agent;
    for (i, line) in case.spec.conversation.iter().enumerate() {
        let trace = format!("line-{i}");
        match line {
            Line::Customer(text) => {
                session.customer_message(text, &trace);
            }
            Line::Agent(text) => {
                session.emit(NewEvent::message(&trace, &agent.id, &agent.name, text), Visibility::Held).await;
            }
            Line::Tool(call) => {
                let tool_id = definition
                    .tools
                    .iter()
                    .find(|t| t.id.name == call.name)
                    .map_or_else(|| call.name.clone(), |t| t.id.to_string());
                let call = ToolCallPayload {
                    tool_id,
                    arguments: call.arguments.clone(),
                    result: json!({"data": call.result, "metadata": {}, "control": {}}),
                };
                let event = NewEvent::agent(&trace, EventPayload::Tool(ToolPayload { tool_calls: vec![call] }));
                session.emit(event, Visibility::Held).await;
            }
        }
    }
    let journey_paths = case
        .spec
        .state
        .journeys
        .iter()
        .filter_map(|(j, states)| JourneyPath::from_states(states.clone()).map(|p| (j.clone(), p)))
        .collect();
    let previous =
        AgentState { trace_id: "before".into(), applied_guideline_ids: case.spec.state.applied.clone(), journey_paths };
    let mut ctx = MatchingContext::new(session.events(), previous);
    ctx.variables = case.spec.variables.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    ctx
}

/// What one run of a case decided and cost.
struct CaseRun {
    decisions: Vec<Decided>,
    calls: Vec<Call>,
    errors: Vec<(String, String)>,
}

async fn run_case(
    case: &Case,
    run: usize,
    definition: &guidepost_core::AgentDefinition,
    matcher: &GuidelineMatcher,
    models: &Models,
) -> CaseRun {
    let ctx = context_of(case, definition).await;
    let expect = &case.spec.expect;
    let id = case.spec.id.clone();
    let decided = |kind, subject: &str, expected: Value, actual: Value, rationale: Option<String>| {
        let correct = expected == actual;
        Decided { case: id.clone(), run, kind, subject: subject.to_string(), expected, actual, correct, rationale }
    };
    let mut calls = Vec::new();
    let mut errors = Vec::new();
    let outcome = match matcher.match_turn(&ctx).await {
        Ok(outcome) => outcome,
        Err(error) => {
            // Every decision of the case is lost with the pass.
            let why = Some(format!("matching failed: {error}"));
            let mut out = Vec::new();
            for (g, applies) in &expect.guidelines {
                out.push(decided(Kind::Guideline, g, json!(applies), Value::Null, why.clone()));
            }
            for (g, applies) in &expect.relationships {
                out.push(decided(Kind::Relationship, g, json!(applies), Value::Null, why.clone()));
            }
            for (j, state) in &expect.journeys {
                out.push(decided(Kind::Journey, j, json!(state), Value::Null, why.clone()));
            }
            if let Some(options) = &expect.clarification {
                out.push(decided(Kind::Disambiguation, "clarification", sorted(options), Value::Null, why.clone()));
            }
            for tool in expect.tools.keys() {
                out.push(decided(Kind::Tool, tool, json!("?"), Value::Null, why.clone()));
            }
            errors.push((id.clone(), format!("matching failed: {error}")));
            return CaseRun { decisions: out, calls, errors };
        }
    };
    if let Some(error) = outcome.record.batches.iter().find_map(|b| b.error.clone()) {
        errors.push((id.clone(), format!("a matching call failed: {error}")));
    }
    for batch in &outcome.record.batches {
        if let Some(usage) = &batch.usage {
            let task =
                if batch.category == guidepost_engine::Category::JourneyNodeSelection { "journey" } else { "matching" };
            calls.push(call(&id, task, usage));
        }
    }
    let mut out = Vec::new();
    for (g, applies) in &expect.guidelines {
        let candidate = outcome.record.candidates.iter().rev().find(|c| &c.guideline_id == g);
        let actual = candidate.is_some_and(|c| c.verdict == guidepost_engine::record::Verdict::Matched);
        let why = candidate.and_then(|c| c.rationale.clone()).or_else(|| candidate.map(|c| format!("{:?}", c.verdict)));
        out.push(decided(Kind::Guideline, g, json!(applies), json!(actual), why));
    }
    for (g, applies) in &expect.relationships {
        let actual = outcome.matches.iter().any(|m| &m.guideline_id == g && matches!(m.kind, MatchKind::Guideline));
        let why = outcome
            .record
            .resolutions
            .iter()
            .filter(|r| matches!(&r.entity, guidepost_engine::catalog::Entity::Guideline(id) if id == g))
            .map(|r| format!("{:?}: {:?}", r.effect, r.reason))
            .next();
        out.push(decided(Kind::Relationship, g, json!(applies), json!(actual), why));
    }
    for (j, state) in &expect.journeys {
        let actual = journey_position(&outcome, &ctx, j);
        let why = outcome.record.journeys.iter().find(|r| &r.journey_id == j).map(|r| r.rationale.clone());
        out.push(decided(Kind::Journey, j, json!(state), json!(actual), why));
    }
    if let Some(options) = &expect.clarification {
        let asked: Vec<String> = outcome
            .matches
            .iter()
            .find_map(|m| match &m.kind {
                MatchKind::Clarification { options, .. } => Some(options.clone()),
                _ => None,
            })
            .unwrap_or_default();
        let why = outcome
            .matches
            .iter()
            .find(|m| matches!(m.kind, MatchKind::Clarification { .. }))
            .map(|m| m.rationale.clone());
        out.push(decided(Kind::Disambiguation, "clarification", sorted(options), sorted(&asked), why));
    }
    if !expect.tools.is_empty() {
        let fresh: Vec<_> = outcome.tool_enabled().cloned().collect();
        let tools: HashMap<ToolId, Tool> = definition.tools.iter().map(|t| (t.id.clone(), t.clone())).collect();
        let conversation: Vec<(String, String)> = ctx.messages().into_iter().map(|m| (m.speaker, m.text)).collect();
        let inference = infer(
            models.tool_inference.as_ref(),
            InferenceInput {
                definition,
                matches: &fresh,
                tools: &tools,
                history: &conversation,
                shown: &conversation,
                earlier: None,
                staged: &[],
                variables: &ctx.variables,
            },
        )
        .await;
        calls.extend(inference.usage.iter().map(|u| call(&id, "tool", u)));
        if let Some(failed) = inference.traces.iter().find(|t| t.failed) {
            let why = failed.rationale.clone().unwrap_or_else(|| "the model call failed".into());
            errors.push((id.clone(), format!("a tool-call decision failed: {why}")));
        }
        let why = inference.traces.iter().filter_map(|t| t.rationale.clone()).collect::<Vec<_>>().join("; ");
        for (tool, wanted) in &expect.tools {
            let made = inference.calls.iter().find(|c| &c.tool.name == tool);
            let (expected, actual) = match (wanted, made) {
                (ToolExpect::Called(called), made) => (json!(called), json!(made.is_some())),
                (ToolExpect::With(arguments), Some(made)) => {
                    // At least the expected arguments, with these values.
                    let given: serde_json::Map<String, Value> = arguments
                        .keys()
                        .filter_map(|k| made.arguments.get(k).map(|v| (k.clone(), v.clone())))
                        .collect();
                    (json!(arguments), json!(given))
                }
                (ToolExpect::With(arguments), None) => (json!(arguments), json!(false)),
            };
            out.push(decided(Kind::Tool, tool, expected, actual, (!why.is_empty()).then(|| why.clone())));
        }
    }
    CaseRun { decisions: out, calls, errors }
}

/// Where journey `j` stands after the pass: its state; `completed` when it reached its end;
/// `exited` when it was active before and left otherwise; `not_started`.
fn journey_position(outcome: &MatchingOutcome, ctx: &MatchingContext, j: &str) -> String {
    let completed = outcome
        .record
        .journeys
        .iter()
        .any(|r| r.journey_id == j && r.decision == guidepost_engine::record::JourneyDecision::Completed);
    match outcome.journey_paths.get(j) {
        Some(path) => path.current().to_string(),
        None if completed => "completed".into(),
        None if ctx.previous_state.journey_paths.contains_key(j) => "exited".into(),
        None => "not_started".into(),
    }
}

fn sorted(options: &[String]) -> Value {
    let set: BTreeSet<&String> = options.iter().collect();
    json!(set)
}

fn call(case: &str, task: &str, usage: &Usage) -> Call {
    Call {
        case: case.to_string(),
        task: task.to_string(),
        prompt_tokens: usage.prompt_tokens,
        completion_tokens: usage.completion_tokens,
        latency_ms: usage.latency.as_secs_f64() * 1000.0,
    }
}
