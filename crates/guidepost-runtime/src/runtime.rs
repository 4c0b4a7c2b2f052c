//! [`AgentRuntime`]: one agent's turns, from the customer's message to the reply.
//!
//! A turn is prepared in iterations, as the response lifecycle describes: match
//! guidelines and walk journeys, infer and run tool calls for the tool-enabled matches,
//! then match again on what the tools returned (only what the new information can change)
//! until no new tool calls are made, or `max_engine_iterations` is reached. Then the reply
//! is composed and emitted, followed by the `ready` status that ends the turn.

use crate::history::{DEFAULT_HISTORY_TURNS, Earlier, PromptHistory};
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use guidepost_core::session::{ProcessingStage, Status};
use guidepost_core::{AgentDefinition, AgentState, Event, Tool, ToolId};
use guidepost_engine::{
    GuidelineMatcher, MatchKind, MatcherConfig, MatchingContext, MatchingOutcome, StagedToolResult,
};
use guidepost_llm::{ChatModel, Embedder, TaskKind, Usage, UsageLedger};
use guidepost_tools::context::ToolContext;
use guidepost_tools::registry::ToolRegistry;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::clock::{Clock, SystemClock};
use crate::compose::{ComposeInput, Written, compose};
use crate::error::{ConfigError, TurnError};
use crate::events::{
    EventSink, IdRef, MessageEvent, NewEvent, StatusDetail, StatusEvent, ToolCallEvent, ToolEvent, TurnEvent,
};
use crate::hooks::{EngineHooks, HookAction, NoHooks};
use crate::retrieval::KnowledgeIndex;
use crate::state::{ResponseState, StagedCall};
use crate::tool_calls::{InferenceInput, infer};
use crate::trace::{CompositionTrace, DegradedStage, IterationTrace, Stage, TurnTrace};
use crate::variables::{CustomerRef, MemoryVariables, VariableStore, load_variables};

const PREAMBLE: &str = include_str!("prompts/preamble.j2");

/// Models by role.
#[derive(Clone)]
pub struct RuntimeModels {
    /// Guideline matching.
    pub matching: Arc<dyn ChatModel>,
    /// Journey node selection.
    pub journey_selection: Arc<dyn ChatModel>,
    /// Tool-call inference.
    pub tool_inference: Arc<dyn ChatModel>,
    /// Reply composition.
    pub generation: Arc<dyn ChatModel>,
    /// Embeddings for journey prediction and glossary retrieval.
    pub embedder: Option<Arc<dyn Embedder>>,
}

impl RuntimeModels {
    /// The same model for every role.
    pub fn single(model: Arc<dyn ChatModel>, embedder: Option<Arc<dyn Embedder>>) -> Self {
        Self {
            matching: model.clone(),
            journey_selection: model.clone(),
            tool_inference: model.clone(),
            generation: model,
            embedder,
        }
    }
}

/// One turn's input.
#[derive(Debug, Clone, Default)]
pub struct TurnInput {
    /// The session.
    pub session_id: String,
    /// Who the customer is.
    pub customer: CustomerRef,
    /// The customer's name, when known.
    pub customer_name: Option<String>,
    /// The session's events so far, the customer's new message(s) included.
    pub events: Vec<Event>,
    /// The state the previous turn left.
    pub previous_state: AgentState,
    /// The turn's trace id (shared by every event it emits).
    pub trace_id: String,
}

/// How a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnStatus {
    /// A reply was sent (or deliberately none, when a hook bailed).
    Completed,
    /// A reply was sent, but a stage lost work to failures on the way (guideline matching,
    /// tool-call inference or tool calls; see [`TurnTrace::degraded`]): the reply may miss
    /// what the lost work would have brought. The `ready` status event and the message
    /// event carry the same list under `degraded`.
    Degraded,
    /// A newer customer message cancelled it before the reply was emitted.
    Cancelled,
    /// It failed; an `error` status was emitted.
    Failed,
}

impl TurnStatus {
    /// Whether the turn ran to its end and sent its reply (degraded or not), so its state
    /// carries over to the next turn.
    pub fn replied(self) -> bool {
        matches!(self, Self::Completed | Self::Degraded)
    }
}

/// What a turn produced.
#[derive(Debug, Clone)]
pub struct TurnOutcome {
    /// How it ended.
    pub status: TurnStatus,
    /// Messages sent.
    pub messages: Vec<String>,
    /// The state to give the next turn.
    pub state: AgentState,
    /// What happened and why.
    pub trace: TurnTrace,
}

/// Settings.
#[derive(Debug, Clone, Default)]
pub struct RuntimeConfig {
    /// Overrides the agent's `max_engine_iterations`.
    pub max_engine_iterations: Option<u32>,
    /// Matcher settings.
    pub matcher: MatcherConfig,
    /// Whether the reply call writes a draft and lists its problems before the final reply.
    /// `None` (the default) does so when the reply model follows compound instructions (see
    /// [`guidepost_llm::ModelCapabilities`]): a small model copies its draft from its own
    /// earlier messages, and the check then finds nothing wrong; asked for the reply alone,
    /// it follows the current step.
    pub self_check: Option<bool>,
    /// The checks every composed reply must pass before it is sent (see
    /// [`guidepost_core::reply_check`]); `None` (the default) runs them all.
    pub reply_checks: Option<Vec<guidepost_core::reply_check::ReplyCheck>>,
    /// How many of the customer's latest turns composition and tool inference see word for
    /// word; the turns before them are summed up by what was done and found in them (see
    /// [`crate::history`]). `None` means [`crate::history::DEFAULT_HISTORY_TURNS`].
    pub history_turns: Option<usize>,
}

impl RuntimeConfig {
    /// The defaults, with what the environment sets: `GUIDEPOST_HISTORY_TURNS` (see
    /// [`RuntimeConfig::history_turns`]). An unusable value is an error naming the variable.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// [`RuntimeConfig::from_env`] with the variables read through `var`.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let mut config = Self::default();
        let variable = "GUIDEPOST_HISTORY_TURNS";
        if let Some(value) = var(variable) {
            let turns = value
                .trim()
                .parse::<usize>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| ConfigError::HistoryTurns { variable, value: value.clone() })?;
            config.history_turns = Some(turns);
        }
        Ok(config)
    }
}

/// Runs an agent's turns.
pub struct AgentRuntime {
    definition: Arc<AgentDefinition>,
    matcher: GuidelineMatcher,
    tools: Arc<ToolRegistry>,
    tool_index: HashMap<ToolId, Tool>,
    models: RuntimeModels,
    hooks: Arc<dyn EngineHooks>,
    variables: Arc<dyn VariableStore>,
    clock: Arc<dyn Clock>,
    knowledge: KnowledgeIndex,
    config: RuntimeConfig,
}

/// A flag that tells a running turn's owner whether it can still be cancelled: once the
/// reply is being emitted the turn finishes.
#[derive(Debug, Default, Clone)]
pub struct EmittingLatch(Arc<AtomicBool>);

impl EmittingLatch {
    /// Whether the reply is being emitted.
    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    fn set(&self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

enum Step<T> {
    Done(T),
    Cancelled,
}

/// How the stages of a turn ended, when it did not fail.
enum Ending {
    /// These messages were sent (none when a hook bailed, or the reply was empty).
    Sent(Vec<String>),
    /// A newer customer message cancelled the turn before its reply was emitted.
    Cancelled,
}

/// One turn in progress: what its stages read (the input, where events go, cancellation)
/// and what they build (the state, the trace, the model usage).
struct Turn<'a> {
    input: &'a TurnInput,
    sink: &'a dyn EventSink,
    cancel: &'a CancellationToken,
    latch: &'a EmittingLatch,
    tool_ctx: ToolContext,
    ledger: UsageLedger,
    state: ResponseState,
    trace: TurnTrace,
}

impl<'a> Turn<'a> {
    fn new(
        definition: &AgentDefinition,
        input: &'a TurnInput,
        sink: &'a dyn EventSink,
        cancel: &'a CancellationToken,
        latch: &'a EmittingLatch,
        what: &str,
    ) -> Self {
        Self {
            input,
            sink,
            cancel,
            latch,
            tool_ctx: ToolContext::new(&definition.agent.id, &input.session_id, &input.customer.id),
            ledger: UsageLedger::new(format!("{what} {}", input.trace_id)),
            state: ResponseState::default(),
            trace: TurnTrace { trace_id: input.trace_id.clone(), ..TurnTrace::default() },
        }
    }

    fn trace_id(&self) -> &str {
        &self.input.trace_id
    }
}

/// What the turn's prompts show of the conversation: all of it (matching has its own
/// window), the part composition and tool inference show, and the text retrieval embeds.
struct Seen<'c> {
    conversation: &'c [(String, String)],
    history: PromptHistory<'c>,
    query: String,
}

async fn cancellable<T>(cancel: &CancellationToken, fut: impl std::future::Future<Output = T>) -> Step<T> {
    tokio::select! {
        biased;
        _ = cancel.cancelled() => Step::Cancelled,
        v = fut => Step::Done(v),
    }
}

impl AgentRuntime {
    /// A runtime for `definition` with these models and tools.
    pub fn new(
        definition: Arc<AgentDefinition>,
        models: RuntimeModels,
        tools: Arc<ToolRegistry>,
        config: RuntimeConfig,
    ) -> Self {
        let compiled = Arc::new(guidepost_engine::CompiledAgent::new(definition.clone()));
        let matcher =
            GuidelineMatcher::new(compiled, models.matching.clone(), models.embedder.clone(), config.matcher.clone())
                .with_journey_model(models.journey_selection.clone());
        let tool_index = tools.tools().map(|t| (t.id.clone(), t.clone())).collect();
        Self {
            definition,
            matcher,
            tools,
            tool_index,
            models,
            hooks: Arc::new(NoHooks),
            variables: Arc::new(MemoryVariables::default()),
            clock: Arc::new(SystemClock),
            knowledge: KnowledgeIndex::default(),
            config,
        }
    }

    /// Uses these hooks.
    pub fn with_hooks(mut self, hooks: Arc<dyn EngineHooks>) -> Self {
        self.hooks = hooks;
        self
    }

    /// Uses this variable store.
    pub fn with_variables(mut self, store: Arc<dyn VariableStore>) -> Self {
        self.variables = store;
        self
    }

    /// Uses this clock.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The agent.
    pub fn definition(&self) -> &AgentDefinition {
        &self.definition
    }

    fn max_iterations(&self) -> u32 {
        self.config.max_engine_iterations.unwrap_or(self.definition.agent.max_engine_iterations).max(1)
    }

    /// Processes one turn: emits its events to `sink` and returns what happened. A turn
    /// cancelled through `cancel` before its reply is emitted ends with `cancelled` and
    /// `ready`; once emitting has started (`latch`), it finishes.
    ///
    /// The turn runs as named stages (see [`Turn`]): acknowledge, load the context, prepare
    /// (match, then infer and call tools, in iterations), and compose and emit the reply.
    pub async fn process(
        &self,
        input: TurnInput,
        sink: &dyn EventSink,
        cancel: CancellationToken,
        latch: EmittingLatch,
    ) -> TurnOutcome {
        let started = Instant::now();
        let mut turn = Turn::new(&self.definition, &input, sink, &cancel, &latch, "turn");
        let trace_id = input.trace_id.as_str();
        sink.emit(NewEvent::status(trace_id, Status::Acknowledged)).await;
        let result = self.run(&mut turn).await;
        let Turn { ledger, state, mut trace, .. } = turn;
        trace.usage = ledger.totals();
        trace.duration_ms = started.elapsed().as_millis() as u64;
        let (status, messages) = match result {
            Ok(Ending::Sent(messages)) if trace.is_degraded() => {
                for stage in &trace.degraded {
                    tracing::warn!(trace_id, %stage, "the reply went out with a degraded stage");
                }
                (TurnStatus::Degraded, messages)
            }
            Ok(Ending::Sent(messages)) => (TurnStatus::Completed, messages),
            Ok(Ending::Cancelled) => {
                trace.cancelled = true;
                sink.emit(NewEvent::status(trace_id, Status::Cancelled)).await;
                (TurnStatus::Cancelled, Vec::new())
            }
            Err(error) => {
                let text = error.scrubbed();
                tracing::error!(error = %text, trace_id, "turn failed");
                self.hooks.on_error(&error, &state, sink).await;
                sink.emit(failed(trace_id, &self.failure_notice(&input.events))).await;
                trace.error = Some(text);
                (TurnStatus::Failed, Vec::new())
            }
        };
        trace.matched = state.all_matches().map(|m| m.guideline_id.clone()).collect();
        let id = |id: String| IdRef { id };
        let ready = StatusDetail {
            matched_guidelines: Some(
                state
                    .all_matches()
                    .filter(|m| matches!(m.kind, MatchKind::Guideline))
                    .map(|m| id(m.guideline_id.clone()))
                    .collect(),
            ),
            matched_journeys: Some(state.journey_paths.keys().cloned().map(id).collect()),
            matched_journey_states: Some(
                state.journey_paths.iter().map(|(j, p)| id(format!("{j}.{}", p.current()))).collect(),
            ),
            degraded: trace.degraded_for_customers(),
            ..StatusDetail::default()
        };
        sink.emit(completed(trace_id, ready)).await;
        let new_state = if status.replied() {
            self.next_state(&input, &state, trace.composition.followed.as_deref())
        } else {
            input.previous_state.clone()
        };
        TurnOutcome { status, messages, state: new_state, trace }
    }

    /// Sends one message that carries out `instructions` (actions an operator wrote), with
    /// no guideline matching and no tools: the reply is composed from the instructions,
    /// the conversation and the agent's identity, and emitted under `input.trace_id`,
    /// followed by the `ready` status. The agent state is left as it was.
    pub async fn utter(&self, input: TurnInput, instructions: &[String], sink: &dyn EventSink) -> TurnOutcome {
        let started = Instant::now();
        let (cancel, latch) = (CancellationToken::new(), EmittingLatch::default());
        let mut turn = Turn::new(&self.definition, &input, sink, &cancel, &latch, "utterance");
        turn.state = ResponseState {
            journey_paths: input.previous_state.journey_paths.clone(),
            previous_journey_paths: input.previous_state.journey_paths.clone(),
            ..ResponseState::default()
        };
        turn.state.ordinary_matches = instructions
            .iter()
            .enumerate()
            .map(|(i, action)| guidepost_engine::GuidelineMatch {
                guideline_id: format!("utterance:{i}"),
                kind: MatchKind::Guideline,
                condition: "The agent was asked to say this now".into(),
                action: Some(action.clone()),
                tools: Vec::new(),
                score: 10,
                rationale: "requested through the API".into(),
            })
            .collect();
        turn.state.prepared_to_respond = true;
        let ctx = MatchingContext::new(input.events.clone(), input.previous_state.clone());
        let conversation: Vec<(String, String)> = ctx.messages().into_iter().map(|m| (m.speaker, m.text)).collect();
        let history = self.prompt_history(&input, &conversation);
        sink.emit(NewEvent::status(&input.trace_id, Status::Typing)).await;
        let result = self.emit_reply(&mut turn, &conversation, &history).await;
        let Turn { ledger, mut trace, .. } = turn;
        trace.usage = ledger.totals();
        trace.duration_ms = started.elapsed().as_millis() as u64;
        let (status, messages) = match result {
            Ok(Ending::Sent(messages)) => (TurnStatus::Completed, messages),
            Ok(Ending::Cancelled) => (TurnStatus::Completed, Vec::new()),
            Err(error) => {
                let text = error.scrubbed();
                tracing::error!(error = %text, trace_id = %input.trace_id, "utterance failed");
                sink.emit(failed(&input.trace_id, &self.failure_notice(&input.events))).await;
                trace.error = Some(text);
                (TurnStatus::Failed, Vec::new())
            }
        };
        let nothing = StatusDetail {
            matched_guidelines: Some(Vec::new()),
            matched_journeys: Some(Vec::new()),
            matched_journey_states: Some(Vec::new()),
            ..StatusDetail::default()
        };
        sink.emit(completed(&input.trace_id, nothing)).await;
        TurnOutcome { status, messages, state: input.previous_state, trace }
    }

    /// The state for the next turn: journey paths, and the guidelines whose actions were
    /// carried out, added to those applied earlier. A matched, tracked guideline with an
    /// action counts as carried out when the reply's analysis (`followed`, reported with the
    /// reply) names it, and, without an analysis, whenever it matched; never a tool-enabled
    /// one whose tools did not run (a missing argument, say). What was not carried out stays
    /// new, so it is evaluated afresh next turn.
    fn next_state(&self, input: &TurnInput, state: &ResponseState, followed: Option<&[String]>) -> AgentState {
        let mut applied: Vec<String> = input.previous_state.applied_guideline_ids.clone();
        let done = |tool: &ToolId| {
            state.tool_insights.decisions.iter().any(|(t, d)| t == tool && *d != crate::state::ToolDecision::CannotRun)
        };
        for m in state.all_matches() {
            let tracked = self.definition.guideline(&m.guideline_id).is_some_and(guidepost_core::Guideline::is_tracked);
            let carried_out = m.tools.iter().all(done) && followed.is_none_or(|f| f.contains(&m.guideline_id));
            if tracked && carried_out && matches!(m.kind, MatchKind::Guideline) && !applied.contains(&m.guideline_id) {
                applied.push(m.guideline_id.clone());
            }
        }
        AgentState {
            trace_id: input.trace_id.clone(),
            applied_guideline_ids: applied,
            journey_paths: state.journey_paths.clone(),
        }
    }

    /// The stages of a turn after its acknowledgement.
    async fn run(&self, turn: &mut Turn<'_>) -> Result<Ending, TurnError> {
        if self.hooks.on_acknowledged(&mut turn.state, turn.sink).await == HookAction::Bail {
            return Ok(Ending::Sent(Vec::new()));
        }
        let (mut ctx, conversation, query) = self.load_context(turn).await;
        let seen = Seen { history: self.prompt_history(turn.input, &conversation), conversation: &conversation, query };
        turn.sink.emit(NewEvent::processing(turn.trace_id(), ProcessingStage::Interpreting)).await;
        if self.hooks.on_preparing(&mut turn.state, turn.sink).await == HookAction::Bail {
            return Ok(Ending::Sent(Vec::new()));
        }
        if let Some(ending) = self.prepare(turn, &mut ctx, &seen).await? {
            return Ok(ending);
        }
        if self.hooks.on_generating_messages(&mut turn.state, turn.sink).await == HookAction::Bail {
            return Ok(Ending::Sent(Vec::new()));
        }
        turn.sink.emit(NewEvent::processing(turn.trace_id(), ProcessingStage::Articulating)).await;
        turn.sink.emit(NewEvent::status(turn.trace_id(), Status::Typing)).await;
        self.emit_reply(turn, &conversation, &seen.history).await
    }

    /// Stage: the turn's context. Context variables (tools refreshing stale ones), the
    /// conversation as every prompt of the turn shows it (by the matcher's rules), and the
    /// glossary terms and capabilities relevant to its latest messages.
    async fn load_context(&self, turn: &mut Turn<'_>) -> (MatchingContext, Vec<(String, String)>, String) {
        let input = turn.input;
        turn.state.previous_journey_paths = input.previous_state.journey_paths.clone();
        turn.state.context_variables = load_variables(
            &self.definition,
            self.variables.as_ref(),
            self.clock.as_ref(),
            &self.tools,
            &input.customer,
            &turn.tool_ctx,
        )
        .await;
        let mut ctx = MatchingContext::new(input.events.clone(), input.previous_state.clone());
        ctx.variables = turn.state.context_variables.clone();
        ctx.customer_name = input.customer_name.clone();
        let conversation: Vec<(String, String)> = ctx.messages().into_iter().map(|m| (m.speaker, m.text)).collect();
        let query = conversation.iter().rev().take(6).map(|(_, t)| t.as_str()).collect::<Vec<_>>().join("\n");
        (turn.state.glossary_terms, turn.state.capabilities) = self.retrieve(&query).await;
        (ctx, conversation, query)
    }

    /// Stage: preparation, in iterations. Each matches (the first pass over everything, later
    /// passes over what the new tool results can change), then infers and runs the calls of
    /// the tool-enabled matches not handled yet; it ends when no tool ran, a hook bails or
    /// `max_engine_iterations` is reached. `Some` when the turn ends here (cancelled).
    async fn prepare(
        &self,
        turn: &mut Turn<'_>,
        ctx: &mut MatchingContext,
        seen: &Seen<'_>,
    ) -> Result<Option<Ending>, TurnError> {
        let mut previous: Option<MatchingOutcome> = None;
        let mut handled: BTreeSet<String> = BTreeSet::new();
        let max = self.max_iterations();
        for iteration in 1..=max {
            let iteration_started = Instant::now();
            turn.state.iterations = iteration;
            if self.hooks.on_iteration_start(iteration, &mut turn.state, turn.sink).await == HookAction::Bail {
                break;
            }
            let outcome = match self.match_pass(turn, ctx, previous.as_ref(), iteration, seen).await? {
                Step::Cancelled => return Ok(Some(Ending::Cancelled)),
                Step::Done(Some(outcome)) => outcome,
                // A later pass lost every call: the turn goes on with what the earlier passes
                // decided (the reply is marked degraded).
                Step::Done(None) => {
                    turn.trace.iterations.push(IterationTrace {
                        iteration,
                        duration_ms: iteration_started.elapsed().as_millis() as u64,
                        ..IterationTrace::default()
                    });
                    break;
                }
            };
            let mut record = outcome.record.clone();
            for batch in &mut record.batches {
                batch.error = batch.error.as_deref().map(scrub);
            }
            let mut it = IterationTrace { iteration, matching: Some(record), ..IterationTrace::default() };
            let fresh: Vec<_> =
                outcome.tool_enabled().filter(|m| !handled.contains(&m.guideline_id)).cloned().collect();
            handled.extend(fresh.iter().map(|m| m.guideline_id.clone()));
            previous = Some(outcome);
            let ran_tools = match self.tool_stage(turn, ctx, &fresh, &mut it, seen).await {
                Step::Cancelled => return Ok(Some(Ending::Cancelled)),
                Step::Done(ran) => ran,
            };
            it.duration_ms = iteration_started.elapsed().as_millis() as u64;
            turn.trace.iterations.push(it);
            let bail = self.hooks.on_iteration_end(iteration, &mut turn.state, turn.sink).await == HookAction::Bail;
            if !ran_tools || bail {
                break;
            }
            if iteration == max {
                tracing::warn!(
                    trace_id = turn.trace_id(),
                    max,
                    "max_engine_iterations reached with tool results not yet matched on"
                );
            }
        }
        turn.state.prepared_to_respond = true;
        turn.trace.tool_insights = turn.state.tool_insights.clone();
        Ok(None)
    }

    /// Stage: one matching pass, its usage and failures recorded and its matches absorbed
    /// into the turn's state. `None` when a later pass lost every call (recorded as a
    /// degraded stage); an error when the first pass did.
    async fn match_pass(
        &self,
        turn: &mut Turn<'_>,
        ctx: &MatchingContext,
        previous: Option<&MatchingOutcome>,
        iteration: u32,
        seen: &Seen<'_>,
    ) -> Result<Step<Option<MatchingOutcome>>, TurnError> {
        let matching = match previous {
            None => {
                // The preamble, when enabled, is written while the first pass matches.
                let preamble = self.preamble(seen.conversation, turn.sink, turn.trace_id(), &turn.ledger);
                let first = async { futures::join!(self.matcher.match_turn(ctx), preamble).0 };
                cancellable(turn.cancel, first).await
            }
            Some(p) => cancellable(turn.cancel, self.matcher.rematch(ctx, p)).await,
        };
        let outcome = match matching {
            Step::Cancelled => return Ok(Step::Cancelled),
            Step::Done(Ok(outcome)) => outcome,
            Step::Done(Err(guidepost_engine::EngineError::AllBatchesFailed { first, failed }))
                if previous.is_some() =>
            {
                turn.trace.degraded.push(DegradedStage {
                    stage: Stage::Matching,
                    iteration,
                    failed,
                    attempted: failed,
                    error: scrub(&first.to_string()),
                });
                return Ok(Step::Done(None));
            }
            Step::Done(Err(error)) => return Err(TurnError::Matching(error)),
        };
        let failed_batches: Vec<&str> = outcome.record.batches.iter().filter_map(|b| b.error.as_deref()).collect();
        if let Some(first) = failed_batches.first() {
            turn.trace.degraded.push(DegradedStage {
                stage: Stage::Matching,
                iteration,
                failed: failed_batches.len(),
                attempted: outcome.record.model_calls(),
                error: scrub(first),
            });
        }
        for batch in &outcome.record.batches {
            if let Some(usage) = &batch.usage {
                let task = match batch.category {
                    guidepost_engine::Category::JourneyNodeSelection => TaskKind::JourneySelection,
                    _ => TaskKind::Matching,
                };
                turn.ledger.record(&task, usage);
            }
        }
        turn.state.absorb(&outcome);
        Ok(Step::Done(Some(outcome)))
    }

    /// Stage: the tool calls of `fresh` (tool-enabled matches not handled yet in this turn):
    /// inferred, run, staged for the next pass and emitted as a `tool` event. Whether any
    /// ran.
    async fn tool_stage(
        &self,
        turn: &mut Turn<'_>,
        ctx: &mut MatchingContext,
        fresh: &[guidepost_engine::GuidelineMatch],
        it: &mut IterationTrace,
        seen: &Seen<'_>,
    ) -> Step<bool> {
        if fresh.is_empty() {
            return Step::Done(false);
        }
        let iteration = it.iteration;
        turn.sink.emit(NewEvent::processing(turn.trace_id(), ProcessingStage::ConsideringTools)).await;
        let inference = infer(
            self.models.tool_inference.as_ref(),
            InferenceInput {
                definition: &self.definition,
                matches: fresh,
                tools: &self.tool_index,
                history: seen.conversation,
                shown: seen.history.shown,
                earlier: seen.history.earlier.as_deref(),
                staged: &turn.state.tool_calls,
                variables: &turn.state.context_variables,
            },
        );
        let inference = match cancellable(turn.cancel, inference).await {
            Step::Cancelled => return Step::Cancelled,
            Step::Done(i) => i,
        };
        for usage in &inference.usage {
            turn.ledger.record(&TaskKind::ToolInference, usage);
        }
        let insights = &mut turn.state.tool_insights;
        insights.decisions.extend(inference.insights.decisions);
        insights.missing.extend(inference.insights.missing);
        insights.invalid.extend(inference.insights.invalid.into_iter().map(|mut insight| {
            if let Some(value) = insight.invalid_value.as_mut() {
                scrub_json(value);
            }
            insight
        }));
        let failed: Vec<&crate::trace::InferenceTrace> = inference.traces.iter().filter(|t| t.failed).collect();
        if let Some(first) = failed.first() {
            turn.trace.degraded.push(DegradedStage {
                stage: Stage::ToolInference,
                iteration,
                failed: failed.len(),
                attempted: inference.traces.iter().filter(|t| t.model_call).count(),
                error: scrub(first.rationale.as_deref().unwrap_or("the model call failed")),
            });
        }
        it.tool_inference = inference
            .traces
            .into_iter()
            .map(|mut t| {
                t.rationale = t.rationale.as_deref().map(scrub);
                t
            })
            .collect();
        if inference.calls.is_empty() {
            return Step::Done(false);
        }
        let records = match cancellable(turn.cancel, self.tools.call_many(inference.calls, &turn.tool_ctx, None)).await
        {
            Step::Cancelled => return Step::Cancelled,
            Step::Done(r) => r,
        };
        let lost: Vec<String> = records
            .iter()
            .filter_map(|r| match &r.outcome {
                guidepost_tools::ToolOutcome::Error { message, kind } if lost_call(kind) => {
                    Some(format!("{}: {message}", r.tool))
                }
                _ => None,
            })
            .collect();
        if let Some(first) = lost.first() {
            turn.trace.degraded.push(DegradedStage {
                stage: Stage::ToolCalls,
                iteration,
                failed: lost.len(),
                attempted: records.len(),
                error: scrub(first),
            });
        }
        let mut event_calls = Vec::new();
        for record in records {
            // The call has run with what the model inferred; from here on (the event, the
            // trace, the logs, the next prompts) its arguments and result carry no secrets.
            // The services' own credentials too: a service may echo the ones it was called with.
            let known = self.tools.secrets();
            let mut result = serde_json::to_value(record.outcome.to_result(&record.tool)).unwrap_or(Value::Null);
            guidepost_llm::secrets::scrub_json(&mut result, known);
            let mut arguments = record.arguments;
            arguments.values_mut().for_each(|v| guidepost_llm::secrets::scrub_json(v, known));
            let call = StagedCall {
                tool: record.tool.clone(),
                arguments: arguments.clone(),
                ok: record.outcome.is_ok(),
                result: result.clone(),
                duration_ms: record.duration.as_millis() as u64,
            };
            event_calls.push(ToolCallEvent { tool_id: record.tool.to_string(), arguments: arguments.clone(), result });
            ctx.staged_tool_results.push(StagedToolResult {
                tool: record.tool,
                arguments: Value::Object(call.arguments.clone()),
                result: call.result.clone(),
            });
            it.tool_calls.push(call.clone());
            turn.state.tool_calls.push(call);
        }
        let event = TurnEvent::Tool(ToolEvent { tool_calls: event_calls });
        turn.sink.emit(NewEvent::from_turn(turn.trace_id(), event)).await;
        let query = format!(
            "{}\n{}",
            seen.query,
            turn.state.tool_calls.iter().map(|c| c.result.to_string()).collect::<Vec<_>>().join("\n")
        );
        (turn.state.glossary_terms, turn.state.capabilities) = self.retrieve(&query).await;
        Step::Done(true)
    }

    /// The glossary terms and capabilities relevant to `query`, retrieved side by side (one
    /// wave of embedding calls, when the agent has more of either than a prompt takes).
    async fn retrieve(&self, query: &str) -> (Vec<guidepost_core::Term>, Vec<guidepost_core::Capability>) {
        let embedder = self.models.embedder.as_deref();
        futures::join!(
            self.knowledge.terms(&self.definition, embedder, query),
            self.knowledge.capabilities(&self.definition, embedder, query)
        )
    }

    /// The conversation as this turn's composition and tool inference show it.
    fn prompt_history<'a>(&self, input: &TurnInput, conversation: &'a [(String, String)]) -> PromptHistory<'a> {
        let earlier = Earlier {
            definition: &self.definition,
            events: &input.events,
            applied_guideline_ids: &input.previous_state.applied_guideline_ids,
        };
        crate::history::bound(conversation, self.config.history_turns.unwrap_or(DEFAULT_HISTORY_TURNS), earlier)
    }

    /// Sends a short acknowledgement tagged `__preamble__` (only when the agent enables
    /// preambles). A failure to write one is logged and skipped: it never delays or fails
    /// the reply.
    async fn preamble(
        &self,
        conversation: &[(String, String)],
        sink: &dyn EventSink,
        trace_id: &str,
        ledger: &UsageLedger,
    ) {
        let agent = &self.definition.agent;
        if !agent.preamble.enabled {
            return;
        }
        let last = crate::prompt::last_customer(conversation).unwrap_or("");
        let prompt = match crate::prompt::render(
            "preamble.j2",
            PREAMBLE,
            json!({"agent_name": agent.name, "agent_description": agent.description, "examples": agent.preamble.examples, "last_message": last}),
        ) {
            Ok(prompt) => prompt,
            Err(error) => return tracing::warn!(%error, "no preamble"),
        };
        let request =
            guidepost_llm::ChatRequest::new(TaskKind::Generation).user(prompt).max_tokens(40).temperature(0.2);
        match self.models.generation.complete(request).await {
            Ok(response) => {
                ledger.record(&TaskKind::Generation, &response.usage);
                let text = response.output.to_text().trim().trim_matches('"').to_string();
                if text.is_empty() {
                    return;
                }
                let mut event = MessageEvent::new(&agent.id, &agent.name, &text);
                event.tags = Some(vec!["__preamble__".to_string()]);
                sink.emit(NewEvent::from_turn(trace_id, TurnEvent::Message(event))).await;
            }
            Err(error) => tracing::warn!(error = %scrub(&error.to_string()), "no preamble: the model call failed"),
        }
    }

    /// Stage: composes the reply and emits it, streamed as it is written in `stream` output
    /// mode (the message event exists from its first words, and the turn can no longer be
    /// cancelled), shown to the sink's preview otherwise.
    async fn emit_reply(
        &self,
        turn: &mut Turn<'_>,
        conversation: &[(String, String)],
        history: &PromptHistory<'_>,
    ) -> Result<Ending, TurnError> {
        let input = turn.input;
        let (sink, cancel, latch) = (turn.sink, turn.cancel, turn.latch);
        let state = &turn.state;
        let trace_id = &input.trace_id;
        let agent = &self.definition.agent;
        let streaming = agent.output_mode == guidepost_core::OutputMode::Stream;
        // Reply text as it is written; `None` when a refused reply is written anew.
        let (chunk_tx, mut chunk_rx) = tokio::sync::mpsc::unbounded_channel::<Option<String>>();
        let compose_input = ComposeInput {
            definition: &self.definition,
            state,
            history: conversation,
            shown: history.shown,
            earlier: history.earlier.as_deref(),
            customer_name: input.customer_name.as_deref(),
            self_check: self
                .config
                .self_check
                .unwrap_or_else(|| self.models.generation.capabilities().follows_compound_instructions),
            reply_checks: self.config.reply_checks.as_deref().unwrap_or(&guidepost_core::reply_check::ReplyCheck::ALL),
            now: self.clock.now(),
            preview: sink.wants_preview(),
        };
        let model = self.models.generation.as_ref();
        let output_mode = agent.output_mode;
        // The chunk sender lives inside this future, so the forwarder below sees the end of
        // the stream as soon as composition returns.
        let composing = async move {
            let mut on_written = move |written: Written<'_>| {
                let _ = chunk_tx.send(match written {
                    Written::Text(text) => Some(text.to_string()),
                    Written::Restart => None,
                });
            };
            compose(model, compose_input, output_mode, &mut on_written).await
        };
        // A streamed reply is emitted while it is generated: the message event exists from
        // the first chunk, so the turn can no longer be cancelled from then on.
        let forward = async {
            let mut event_id: Option<String> = None;
            let mut chunks: Vec<Option<String>> = Vec::new();
            // In `block` mode the sink's preview gets the reply while it is written; the
            // message event follows once its checks pass.
            let mut preview = String::new();
            while let Some(chunk) = chunk_rx.recv().await {
                if !streaming {
                    match chunk {
                        Some(piece) => preview.push_str(&piece),
                        None => preview.clear(),
                    }
                    sink.preview(trace_id, &preview).await;
                    continue;
                }
                // A streamed reply is never refused and written anew.
                let Some(chunk) = chunk else { continue };
                chunks.push(Some(chunk));
                let text: String = chunks.iter().flatten().map(String::as_str).collect();
                let mut message = MessageEvent::new(&agent.id, &agent.name, &text);
                message.chunks = Some(chunks.clone());
                let event = NewEvent::from_turn(trace_id, TurnEvent::Message(message));
                match &event_id {
                    None => {
                        latch.set();
                        event_id = Some(sink.emit(event).await);
                    }
                    Some(id) => sink.update(id, event.data).await,
                }
            }
            (event_id, chunks)
        };
        let (composed, (stream_event, mut chunks)) = if streaming {
            let mut both = std::pin::pin!(async { futures::join!(composing, forward) });
            let finished = tokio::select! {
                biased;
                _ = cancel.cancelled() => None,
                v = &mut both => Some(v),
            };
            match finished {
                Some(v) => v,
                None if !latch.is_set() => return Ok(Ending::Cancelled),
                // Emitting already started: the reply is finished, then the turn ends.
                None => both.await,
            }
        } else {
            let composed = match cancellable(cancel, async { futures::join!(composing, forward).0 }).await {
                Step::Cancelled => return Ok(Ending::Cancelled),
                Step::Done(c) => c,
            };
            (composed, (None, Vec::new()))
        };
        let mut composed = composed.map_err(TurnError::Composition)?;
        for usage in &composed.usage {
            turn.ledger.record(&TaskKind::Generation, usage);
        }
        let state = &turn.state;
        let trace = &mut turn.trace;
        trace.composition = CompositionTrace {
            mode: serde_json::to_value(composed.mode)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
            template_id: composed.template_id.clone(),
            self_check: composed.self_check.clone(),
            reply_checks: composed.reply_checks.clone(),
            fallback: composed.fallback,
            followed: composed.followed.clone(),
            model_calls: composed.usage.iter().map(|u| u.calls).sum(),
            prompt_tokens: composed.usage.iter().map(|u: &Usage| u.prompt_tokens).sum(),
        };
        if let Some(draft) = composed.draft.as_mut() {
            let _ = self.hooks.on_draft_generated(draft, state).await;
        }
        latch.set();
        let mut text = composed.text.clone();
        // The hook sees the whole reply on both paths. A streamed reply was shown as it was
        // written; an edit replaces its text in the finished message event.
        let _ = self.hooks.on_message_generated(&mut text, state).await;
        if streaming {
            chunks.push(None);
            let mut message = MessageEvent::new(&agent.id, &agent.name, &text);
            message.chunks = Some(chunks);
            message.degraded = trace.degraded_for_customers();
            let event = NewEvent::from_turn(trace_id, TurnEvent::Message(message));
            match stream_event {
                Some(id) => sink.update(&id, event.data).await,
                None => {
                    sink.emit(event).await;
                }
            }
        } else {
            if text.trim().is_empty() {
                return Ok(Ending::Sent(Vec::new()));
            }
            let mut message = MessageEvent::new(&agent.id, &agent.name, &text);
            message.canned_responses = composed.template_id.as_ref().map(|id| vec![(id.clone(), text.clone())]);
            // What the checks refused, and the draft the reply was corrected from, stay in the
            // trace: the customer sees which checks refused a reply, never its text.
            if composed.fallback || !composed.reply_checks.is_empty() {
                let problems: Vec<Value> = composed
                    .reply_checks
                    .iter()
                    .map(|reply| reply.iter().map(|p| json!({"check": p.check.name()})).collect())
                    .collect();
                message.reply_checks = Some(json!({"fallback": composed.fallback, "problems": problems}));
            }
            message.degraded = trace.degraded_for_customers();
            sink.emit(NewEvent::from_turn(trace_id, TurnEvent::Message(message))).await;
        }
        self.hooks.on_messages_emitted(state, sink).await;
        Ok(Ending::Sent(vec![text]))
    }
}
impl AgentRuntime {
    /// What the customer's `error` status says: that something failed, in the agent's
    /// language (or the customer's, for an agent that follows it). The error itself goes to
    /// the turn's trace and the log.
    fn failure_notice(&self, events: &[guidepost_core::Event]) -> String {
        let language = match self.definition.agent.language.as_deref().filter(|l| *l != "customer") {
            Some(code) => Some(code.to_string()),
            None => events
                .iter()
                .rev()
                .filter(|e| e.source == guidepost_core::EventSource::Customer)
                .filter_map(crate::events::message_text)
                .find_map(guidepost_core::reply_check::detect_language)
                .map(|code| code.to_string()),
        };
        guidepost_core::reply_check::failure_notice(language.as_deref())
    }
}

/// The `error` status of a failed turn; `exception` is what the customer may read.
fn failed(trace_id: &str, exception: &str) -> NewEvent {
    let data = StatusDetail { exception: Some(exception.to_string()), ..StatusDetail::default() };
    NewEvent::from_turn(trace_id, TurnEvent::Status(StatusEvent { status: Status::Error, data }))
}

/// The `ready` status that ends a turn (`stage: completed`), with what it matched.
fn completed(trace_id: &str, mut detail: StatusDetail) -> NewEvent {
    detail.stage = Some("completed".to_string());
    NewEvent::from_turn(trace_id, TurnEvent::Status(StatusEvent { status: Status::Ready, data: detail }))
}

/// Whether a failed tool call cost the turn its result: it timed out, panicked, could not
/// reach its service, or its service failed (an HTTP 5xx, 401 or 429, a result over the size
/// limit or one that does not decode). A tool that answered with a failure of its own (an
/// error fixture, a 404) gave the reply a fact to use, and invalid arguments are the model's
/// inference at work, not a loss.
fn lost_call(kind: &guidepost_tools::ToolErrorKind) -> bool {
    use guidepost_tools::ToolErrorKind as K;
    matches!(kind, K::Timeout { .. } | K::ServiceError | K::Panicked | K::Unavailable)
}

/// `text` without secrets, for traces and events: the credentials the process's
/// environment holds, URL credentials and key-shaped words (see
/// [`guidepost_llm::secrets::scrub`]).
pub(crate) fn scrub(text: &str) -> String {
    guidepost_llm::secrets::scrub(text)
}

/// `value` without secrets in any of its strings (see [`scrub`]): tool-call arguments, tool
/// results and argument values, which a customer, a model or a tool service filled.
pub(crate) fn scrub_json(value: &mut Value) {
    guidepost_llm::secrets::scrub_json(value, &[]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{MemorySession, message_text};
    use guidepost_core::definition::{SourceFile, load_agent};
    use guidepost_llm::providers::scripted::ScriptedModel;

    /// Each stage of a turn, run alone on a scripted model.
    const SHOP: &str = r#"
agent: {name: Otto}
guidelines:
  - {id: shipping, condition: The customer asks about shipping, action: Say that shipping takes 3 days}
  - id: weather
    condition: The customer asks about the weather
    action: Look up the weather and tell them
    tools: [get_weather]
variables:
  - {name: plan, value: premium}
glossary:
  - {name: express, description: Delivery in one day}
tools:
  - name: get_weather
    description: Current weather for a city
    parameters:
      city: {type: string, description: The city}
    fixture:
      cases:
        - {args: {city: Paris}, result: {temperature: 12}}
"#;

    fn runtime(model: ScriptedModel) -> AgentRuntime {
        let definition = load_agent(&[SourceFile::new("shop.yaml", SHOP)]).definition.unwrap();
        let tools = ToolRegistry::from_definition(&definition).unwrap();
        let models = RuntimeModels::single(Arc::new(model), None);
        AgentRuntime::new(Arc::new(definition), models, Arc::new(tools), RuntimeConfig::default())
    }

    fn input(session: &MemorySession, text: &str) -> TurnInput {
        session.customer_turn("s1", CustomerRef { id: "guest".into(), tags: vec![] }, text, &AgentState::default())
    }

    #[tokio::test]
    async fn load_context_reads_variables_the_conversation_and_the_glossary() {
        let rt = runtime(ScriptedModel::new());
        let session = MemorySession::new();
        let input = input(&session, "How long is shipping?");
        let (cancel, latch) = (CancellationToken::new(), EmittingLatch::default());
        let mut turn = Turn::new(rt.definition(), &input, &session, &cancel, &latch, "test");
        let (ctx, conversation, query) = rt.load_context(&mut turn).await;
        assert_eq!(ctx.variables.get("plan"), Some(&json!("premium")));
        assert_eq!(conversation, [("customer".to_string(), "How long is shipping?".to_string())]);
        assert_eq!(query, "How long is shipping?");
        assert_eq!(turn.state.glossary_terms.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["express"]);
        assert_eq!(turn.ledger.totals().calls, 0, "no model call");
    }

    #[tokio::test]
    async fn match_pass_absorbs_the_matches_and_records_their_usage() {
        let model = ScriptedModel::new().when_task(TaskKind::Matching).reply_with(|req| {
            let applies =
                |n: &str| req.last_user_message().contains(&format!("[{n}] The customer asks about shipping"));
            Ok(json!({"checks": [
                {"id": "1", "rationale": "r", "applies": applies("1")},
                {"id": "2", "rationale": "r", "applies": applies("2")},
            ]}))
        });
        let rt = runtime(model);
        let session = MemorySession::new();
        let input = input(&session, "How long is shipping?");
        let (cancel, latch) = (CancellationToken::new(), EmittingLatch::default());
        let mut turn = Turn::new(rt.definition(), &input, &session, &cancel, &latch, "test");
        let (ctx, conversation, query) = rt.load_context(&mut turn).await;
        let seen = Seen { history: rt.prompt_history(&input, &conversation), conversation: &conversation, query };
        let Ok(Step::Done(Some(outcome))) = rt.match_pass(&mut turn, &ctx, None, 1, &seen).await else {
            panic!("the pass failed")
        };
        assert_eq!(outcome.matches.iter().map(|m| m.guideline_id.as_str()).collect::<Vec<_>>(), ["shipping"]);
        assert!(turn.state.all_matches().any(|m| m.guideline_id == "shipping"));
        assert_eq!(turn.ledger.totals().calls, 1);
        assert!(turn.trace.degraded.is_empty());
    }

    #[tokio::test]
    async fn tool_stage_runs_the_inferred_calls_and_stages_their_results() {
        let model = ScriptedModel::new().when_task(TaskKind::ToolInference).reply_json(json!({"tools": [
            {"tool": "get_weather", "rationale": "asked", "decision": "needs_to_run", "calls": [{"arguments": {"city": "Paris"}}]}
        ]}));
        let rt = runtime(model);
        let session = MemorySession::new();
        let input = input(&session, "What's the weather in Paris?");
        let (cancel, latch) = (CancellationToken::new(), EmittingLatch::default());
        let mut turn = Turn::new(rt.definition(), &input, &session, &cancel, &latch, "test");
        let (mut ctx, conversation, query) = rt.load_context(&mut turn).await;
        let seen = Seen { history: rt.prompt_history(&input, &conversation), conversation: &conversation, query };
        let weather = rt.definition().guideline("weather").unwrap();
        let fresh = [guidepost_engine::GuidelineMatch {
            guideline_id: "weather".into(),
            kind: MatchKind::Guideline,
            condition: weather.condition.clone(),
            action: weather.action.clone(),
            tools: weather.tools.clone(),
            score: 10,
            rationale: "asked".into(),
        }];
        let mut it = IterationTrace { iteration: 1, ..IterationTrace::default() };
        assert!(matches!(rt.tool_stage(&mut turn, &mut ctx, &fresh, &mut it, &seen).await, Step::Done(true)));
        assert_eq!(turn.state.tool_calls.len(), 1);
        assert_eq!(turn.state.tool_calls[0].result["data"], json!({"temperature": 12}));
        assert_eq!(ctx.staged_tool_results.len(), 1, "the next pass sees the result");
        assert_eq!(it.tool_calls.len(), 1);
        let tool_events = session.events().into_iter().filter(|e| e.kind == guidepost_core::EventKind::Tool).count();
        assert_eq!(tool_events, 1);
        // Nothing fresh: no call, nothing run.
        assert!(matches!(rt.tool_stage(&mut turn, &mut ctx, &[], &mut it, &seen).await, Step::Done(false)));
    }

    #[tokio::test]
    async fn emit_reply_sends_the_composed_message_and_traces_it() {
        let reply = "Shipping takes 3 days.";
        let model = ScriptedModel::new()
            .when_task(TaskKind::Generation)
            .reply_json(json!({"draft": reply, "problems": [], "reply": reply}));
        let rt = runtime(model);
        let session = MemorySession::new();
        let input = input(&session, "How long is shipping?");
        let (cancel, latch) = (CancellationToken::new(), EmittingLatch::default());
        let mut turn = Turn::new(rt.definition(), &input, &session, &cancel, &latch, "test");
        let (_, conversation, _) = rt.load_context(&mut turn).await;
        let history = rt.prompt_history(&input, &conversation);
        let Ok(Ending::Sent(sent)) = rt.emit_reply(&mut turn, &conversation, &history).await else {
            panic!("no reply")
        };
        assert_eq!(sent, [reply]);
        assert!(latch.is_set(), "emitting started: the turn can no longer be cancelled");
        assert_eq!(session.events().iter().rev().find_map(message_text), Some(reply));
        assert_eq!(turn.trace.composition.model_calls, 1);
        assert_eq!(turn.ledger.totals().calls, 1);
    }

    #[test]
    fn the_history_bound_comes_from_the_environment_and_is_checked() {
        let config = RuntimeConfig::from_vars(|_| None).unwrap();
        assert_eq!(config.history_turns, None);
        let config =
            RuntimeConfig::from_vars(|name| (name == "GUIDEPOST_HISTORY_TURNS").then(|| " 20 ".into())).unwrap();
        assert_eq!(config.history_turns, Some(20));
        for bad in ["0", "-3", "twelve", ""] {
            let err = RuntimeConfig::from_vars(|_| Some(bad.into())).unwrap_err().to_string();
            assert!(err.contains("GUIDEPOST_HISTORY_TURNS") && err.contains(&format!("`{bad}`")), "{err}");
        }
    }
}
