//! Running cases: each case's last customer message goes through the engine's matching pass
//! (and, when the case expects tool decisions, tool-call inference), and every expected
//! decision is compared with what was decided.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use guidepost_core::payload::{EventPayload, ToolCallPayload, ToolPayload};
use guidepost_core::{AgentState, JourneyPath, Tool, ToolId};
use guidepost_engine::record::{CandidateRecord, MatchingRecord, Verdict};
use guidepost_engine::{
    CompiledAgent, GuidelineMatcher, MatchKind, MatcherConfig, MatchingContext, MatchingOutcome, StagedToolResult,
};
use guidepost_llm::{ChatModel, Embedder};
use guidepost_runtime::events::Visibility;
use guidepost_runtime::state::StagedCall;
use guidepost_runtime::tool_calls::{InferenceInput, infer};
use guidepost_runtime::{EventSink, MemorySession, NewEvent};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::case::{Case, Line, Suite, ToolExpect, ToolLine};
use crate::meter::{Metered, Requests};

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
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    /// How likely the model found "yes" (a guideline's single check, when the model reports
    /// it): what `--calibrate` weighs thresholds against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probability: Option<f32>,
}

/// One model request made while deciding (a batch of single questions is one request per
/// question).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Call {
    /// The case.
    pub case: String,
    /// What the request decided: `matching`, `journey`, `tool`.
    pub task: String,
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Completion tokens.
    pub completion_tokens: u64,
    /// Prompt tokens the model reused from an earlier request (its prompt cache).
    #[serde(default)]
    pub cached_tokens: u64,
    /// Milliseconds.
    pub latency_ms: f64,
}

/// A case run that finished, and the case it ran as (to tell whether a resumed run may keep
/// its decisions).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Done {
    /// The case.
    pub case: String,
    /// The run (0-based).
    pub run: usize,
    /// A digest of the case and its agent definition: a case changed since is run again.
    pub fingerprint: String,
}

/// Everything a suite run decided. [`Report::json`](crate::Report::json) writes it beside the
/// figures, and a resumed run reads it back.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Outcome {
    /// Runs of each case.
    pub repeat: usize,
    /// Every decision of every run.
    pub decisions: Vec<Decided>,
    /// Every model request.
    pub calls: Vec<Call>,
    /// Each case's file and line, by id, in suite order.
    pub cases: Vec<(String, String)>,
    /// Model calls that failed (the case, what failed): their decisions count as wrong, and
    /// the run as broken (a provider down, a recording missing).
    pub errors: Vec<(String, String)>,
    /// The case runs finished, in the order they finished.
    pub done: Vec<Done>,
    /// The model of each task (`matching`, `journey`, `tool`), as the caller named them: a
    /// resumed run must use the same.
    pub models: Vec<(String, String)>,
    /// Wall time of the whole run, in seconds.
    pub seconds: f64,
}

impl Outcome {
    /// What a resumed run keeps of this (partial) outcome: the case runs of `suite` done
    /// already, for cases unchanged since (same case, same agent definition). Decisions, calls
    /// and errors of other case runs are dropped.
    pub fn kept_for(&self, suite: &Suite) -> Outcome {
        let current: HashMap<&str, String> =
            suite.cases.iter().map(|c| (c.spec.id.as_str(), fingerprint(c, &suite.agents[c.agent].1))).collect();
        let done: Vec<Done> =
            self.done.iter().filter(|d| current.get(d.case.as_str()) == Some(&d.fingerprint)).cloned().collect();
        let kept: HashSet<(&str, usize)> = done.iter().map(|d| (d.case.as_str(), d.run)).collect();
        let cases: HashSet<&str> = done.iter().map(|d| d.case.as_str()).collect();
        Outcome {
            repeat: self.repeat,
            decisions: self.decisions.iter().filter(|d| kept.contains(&(d.case.as_str(), d.run))).cloned().collect(),
            // Calls and errors are not kept per run: those of a case are kept when all its
            // runs are.
            calls: self.calls.iter().filter(|c| cases.contains(c.case.as_str())).cloned().collect(),
            cases: Vec::new(),
            errors: self.errors.iter().filter(|(c, _)| cases.contains(c.as_str())).cloned().collect(),
            done,
            models: self.models.clone(),
            seconds: self.seconds,
        }
    }
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
    evaluate_with(suite, models, options, Outcome::default(), &|_, _| {}).await
}

/// [`evaluate`], keeping the case runs `previous` finished (a resumed run: see
/// [`Outcome::kept_for`]) and telling `on_case` about each case run as it finishes, with the
/// outcome so far (to write it as the run goes).
pub async fn evaluate_with(
    suite: &Suite,
    models: &Models,
    options: &Options,
    previous: Outcome,
    on_case: &(dyn Fn(&CaseDone<'_>, &Outcome) + Sync),
) -> Outcome {
    let started = Instant::now();
    let agents: Vec<Arc<CompiledAgent>> =
        suite.agents.iter().map(|(_, definition)| Arc::new(CompiledAgent::new(Arc::new(definition.clone())))).collect();
    let repeat = options.repeat.max(1);
    let mut outcome = previous.kept_for(suite);
    outcome.repeat = repeat;
    outcome.cases = suite
        .cases
        .iter()
        .map(|c| {
            let place = format!("{}{}", c.origin.0.display(), c.origin.1.map(|l| format!(":{l}")).unwrap_or_default());
            (c.spec.id.clone(), place)
        })
        .collect();
    let earlier_seconds = outcome.seconds;
    let already: HashSet<(String, usize)> = outcome.done.iter().map(|d| (d.case.clone(), d.run)).collect();
    let runs: Vec<(usize, &Case)> = (0..repeat)
        .flat_map(|run| suite.cases.iter().map(move |case| (run, case)))
        .filter(|(run, case)| !already.contains(&(case.spec.id.clone(), *run)))
        .collect();
    let total = runs.len() + already.len();
    let shared = Mutex::new(outcome);
    let shared = &shared;
    let agents = &agents;
    futures::StreamExt::collect::<Vec<()>>(futures::StreamExt::buffer_unordered(
        futures::stream::iter(runs.into_iter().map(|(run, case)| async move {
            let case_started = Instant::now();
            let definition = &suite.agents[case.agent].1;
            let result = run_case(case, run, definition, &agents[case.agent], models, &options.matcher).await;
            let mut outcome = shared.lock().unwrap_or_else(PoisonError::into_inner);
            let right = result.decisions.iter().filter(|d| d.correct).count();
            let decisions = result.decisions.len();
            outcome.decisions.extend(result.decisions);
            outcome.calls.extend(result.calls);
            outcome.errors.extend(result.errors);
            outcome.done.push(Done { case: case.spec.id.clone(), run, fingerprint: fingerprint(case, definition) });
            outcome.seconds = earlier_seconds + started.elapsed().as_secs_f64();
            let done = CaseDone {
                case: &case.spec.id,
                run,
                finished: outcome.done.len(),
                total,
                decisions,
                right,
                seconds: case_started.elapsed().as_secs_f64(),
            };
            on_case(&done, &outcome);
        })),
        options.concurrency.max(1),
    ))
    .await;
    let mut outcome = std::mem::take(&mut *shared.lock().unwrap_or_else(PoisonError::into_inner));
    // In suite order, whatever order the runs finished in.
    let order: HashMap<&str, usize> = suite.cases.iter().enumerate().map(|(i, c)| (c.spec.id.as_str(), i)).collect();
    let position = |case: &str, run: usize| (run, order.get(case).copied().unwrap_or(usize::MAX));
    outcome.decisions.sort_by_key(|d| position(&d.case, d.run));
    outcome.calls.sort_by_key(|c| order.get(c.case.as_str()).copied().unwrap_or(usize::MAX));
    outcome.seconds = earlier_seconds + started.elapsed().as_secs_f64();
    outcome
}

/// A digest of `case` and its agent's definition (FNV-1a over their JSON).
fn fingerprint(case: &Case, definition: &guidepost_core::AgentDefinition) -> String {
    let text = format!(
        "{}\n{}",
        serde_json::to_string(&case.spec).unwrap_or_default(),
        serde_json::to_string(definition).unwrap_or_default()
    );
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}")
}

/// The session a case describes: its conversation up to the decided message as events, and
/// the state before it; with the tool calls of this turn, staged as the preparation loop
/// stages them.
async fn context_of(
    case: &Case,
    definition: &guidepost_core::AgentDefinition,
) -> (MatchingContext, Vec<StagedToolResult>) {
    let session = MemorySession::new();
    let agent = &definition.agent;
    let tool_id = |call: &ToolLine| {
        definition.tools.iter().find(|t| t.id.name == call.name).map_or_else(|| call.name.clone(), |t| t.id.to_string())
    };
    for (i, line) in case.spec.before_this_turn().iter().enumerate() {
        let trace = format!("line-{i}");
        match line {
            Line::Customer(text) => {
                session.customer_message(text, &trace);
            }
            Line::Agent(text) => {
                session.emit(NewEvent::message(&trace, &agent.id, &agent.name, text), Visibility::Held).await;
            }
            Line::Tool(call) => {
                let payload = ToolCallPayload {
                    tool_id: tool_id(call),
                    arguments: call.arguments.clone(),
                    result: tool_result(call),
                };
                let event = NewEvent::agent(&trace, EventPayload::Tool(ToolPayload { tool_calls: vec![payload] }));
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
    let previous = AgentState {
        trace_id: "before".into(),
        applied_guideline_ids: case.spec.state.applied.clone(),
        journey_paths,
        ..AgentState::default()
    };
    let mut ctx = MatchingContext::new(session.events(), previous);
    ctx.variables = case.spec.variables.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    let staged = case
        .spec
        .this_turn()
        .filter_map(|call| {
            let tool = definition.tools.iter().find(|t| t.id.name == call.name)?.id.clone();
            Some(StagedToolResult { tool, arguments: Value::Object(call.arguments.clone()), result: tool_result(call) })
        })
        .collect();
    (ctx, staged)
}

/// A tool line's result as a tool event carries it.
fn tool_result(call: &ToolLine) -> Value {
    json!({"data": call.result, "metadata": {}, "control": {}})
}

/// What one run of a case decided and cost.
pub(crate) struct CaseRun {
    pub decisions: Vec<Decided>,
    pub calls: Vec<Call>,
    pub errors: Vec<(String, String)>,
}

/// Runs `case` once: by relational resolution alone when it gives what matched; else a
/// matching pass on its last customer message (and one more with the tool calls of this
/// turn, as the preparation loop makes it), then tool-call inference when the case labels
/// tool decisions.
async fn run_case(
    case: &Case,
    run: usize,
    definition: &guidepost_core::AgentDefinition,
    agent: &Arc<CompiledAgent>,
    models: &Models,
    config: &MatcherConfig,
) -> CaseRun {
    if case.spec.matched.is_some() {
        let decisions = crate::resolution::decide(case, run, agent, config);
        return CaseRun { decisions, calls: Vec::new(), errors: Vec::new() };
    }
    let id = case.spec.id.clone();
    let requests = Requests::default();
    let matcher = GuidelineMatcher::new(
        agent.clone(),
        Metered::wrap(models.matching.clone(), &id, &requests),
        models.embedder.clone(),
        config.clone(),
    )
    .with_journey_model(Metered::wrap(models.journey_selection.clone(), &id, &requests));
    let (ctx, staged) = context_of(case, definition).await;
    let mut errors = Vec::new();
    let first = match matcher.match_turn(&ctx).await {
        Ok(first) => first,
        Err(error) => {
            let why = format!("matching failed: {error}");
            errors.push((id.clone(), why.clone()));
            return CaseRun { decisions: crate::decide::lost(case, run, &why), calls: requests.taken(), errors };
        }
    };
    let (last, ctx) = if staged.is_empty() {
        (None, ctx)
    } else {
        let ctx = ctx.with_tool_results(staged);
        match matcher.rematch(&ctx, &first).await {
            Ok(second) => (Some(second), ctx),
            Err(error) => {
                let why = format!("matching after this turn's tool calls failed: {error}");
                errors.push((id.clone(), why.clone()));
                return CaseRun { decisions: crate::decide::lost(case, run, &why), calls: requests.taken(), errors };
            }
        }
    };
    let passes: Vec<&MatchingOutcome> = std::iter::once(&first).chain(last.as_ref()).collect();
    for pass in &passes {
        if let Some(error) = pass.record.batches.iter().find_map(|b| b.error.clone()) {
            errors.push((id.clone(), format!("a matching call failed: {error}")));
        }
    }
    let mut decisions = crate::decide::matching(case, run, &passes, &ctx);
    if !case.spec.expect.tools.is_empty() {
        let tool_model = Metered::wrap(models.tool_inference.clone(), &id, &requests);
        let (tools, error) = tool_decisions(case, run, definition, &passes, &ctx, tool_model.as_ref()).await;
        decisions.extend(tools);
        errors.extend(error.map(|e| (id.clone(), e)));
    }
    CaseRun { decisions, calls: requests.taken(), errors }
}

/// The tool decisions of `case`: inference over the tool-enabled matches of the last pass that
/// an earlier pass of the turn had not enabled already (their tools ran: the calls of this
/// turn), knowing the calls made in this turn.
async fn tool_decisions(
    case: &Case,
    run: usize,
    definition: &guidepost_core::AgentDefinition,
    passes: &[&MatchingOutcome],
    ctx: &MatchingContext,
    model: &dyn ChatModel,
) -> (Vec<Decided>, Option<String>) {
    let Some((last, earlier)) = passes.split_last() else { return (Vec::new(), None) };
    let handled: HashSet<&str> =
        earlier.iter().flat_map(|p| p.tool_enabled().map(|m| m.guideline_id.as_str())).collect();
    let fresh: Vec<_> = last.tool_enabled().filter(|m| !handled.contains(m.guideline_id.as_str())).cloned().collect();
    let tools: HashMap<ToolId, Tool> = definition.tools.iter().map(|t| (t.id.clone(), t.clone())).collect();
    let conversation: Vec<(String, String)> = ctx.messages().into_iter().map(|m| (m.speaker, m.text)).collect();
    let staged: Vec<StagedCall> = ctx
        .staged_tool_results
        .iter()
        .map(|r| StagedCall {
            tool: r.tool.clone(),
            arguments: r.arguments.as_object().cloned().unwrap_or_default(),
            result: r.result.clone(),
            ok: true,
            duration_ms: 0,
            call_id: None,
            source: Default::default(),
        })
        .collect();
    let inference = infer(
        model,
        InferenceInput {
            definition,
            matches: &fresh,
            tools: &tools,
            history: &conversation,
            shown: &conversation,
            earlier: None,
            staged: &staged,
            variables: &ctx.variables,
        },
    )
    .await;
    let error = inference.traces.iter().find(|t| t.failed).map(|failed| {
        let why = failed.rationale.clone().unwrap_or_else(|| "the model call failed".into());
        format!("a tool-call decision failed: {why}")
    });
    let why = inference.traces.iter().filter_map(|t| t.rationale.clone()).collect::<Vec<_>>().join("; ");
    let why = if fresh.is_empty() { "no guideline or journey step calls for a tool now".to_string() } else { why };
    let mut out = Vec::new();
    for (tool, wanted) in &case.spec.expect.tools {
        let made = inference.calls.iter().find(|c| &c.tool.name == tool);
        let (expected, actual) = match (wanted, made) {
            (ToolExpect::Called(called), made) => (json!(called), json!(made.is_some())),
            (ToolExpect::With(arguments), Some(made)) => {
                // At least the expected arguments, with these values.
                let given: serde_json::Map<String, Value> =
                    arguments.keys().filter_map(|k| made.arguments.get(k).map(|v| (k.clone(), v.clone()))).collect();
                (json!(arguments), json!(given))
            }
            (ToolExpect::With(arguments), None) => (json!(arguments), json!(false)),
        };
        out.push(crate::decide::decided(
            case,
            run,
            Kind::Tool,
            tool,
            expected,
            actual,
            (!why.is_empty()).then(|| why.clone()),
        ));
    }
    (out, error)
}

/// The last record of `guideline` among `records` that is a verdict (not carried from an
/// earlier pass).
pub(crate) fn verdict_of<'r>(records: &[&'r MatchingRecord], guideline: &str) -> Option<&'r CandidateRecord> {
    records
        .iter()
        .rev()
        .find_map(|r| r.candidates.iter().rev().find(|c| c.guideline_id == guideline && c.verdict != Verdict::Carried))
}

/// Sorted options, for comparing clarifications.
pub(crate) fn sorted(options: &[String]) -> Value {
    let set: BTreeSet<&String> = options.iter().collect();
    json!(set)
}

/// Where journey `j` stands after the passes: its state; `completed` when it reached its
/// end; `exited` when it was active before and left otherwise; `not_started`.
pub(crate) fn journey_position(passes: &[&MatchingOutcome], ctx: &MatchingContext, j: &str) -> String {
    let completed = passes.iter().any(|p| {
        p.record
            .journeys
            .iter()
            .any(|r| r.journey_id == j && r.decision == guidepost_engine::record::JourneyDecision::Completed)
    });
    match passes.last().and_then(|p| p.journey_paths.get(j)) {
        Some(path) => path.current().to_string(),
        None if completed => "completed".into(),
        None if ctx.previous_state.journey_paths.contains_key(j) => "exited".into(),
        None => "not_started".into(),
    }
}

/// The options of the clarifying question among the matches, if one is asked.
pub(crate) fn clarification_options(outcome: &MatchingOutcome) -> Vec<String> {
    outcome
        .matches
        .iter()
        .find_map(|m| match &m.kind {
            MatchKind::Clarification { options, .. } => Some(options.clone()),
            _ => None,
        })
        .unwrap_or_default()
}
