//! [`AgentRuntime`]: one agent's turns, from the customer's message to the reply.
//!
//! A turn is prepared in iterations, as the response lifecycle describes: match
//! guidelines and walk journeys, infer and run tool calls for the tool-enabled matches,
//! then match again on what the tools returned (only what the new information can change)
//! until no new tool calls are made, or `max_engine_iterations` is reached. Then the reply
//! is composed and emitted, followed by the `ready` status that ends the turn.
//!
//! The stages live beside this file, one module each: `context` (variables, conversation,
//! glossary), `preparation` (matching in iterations), `tools` (tool calls) and `reply`
//! (preamble, composition, emission); `turn` holds what they share.

mod calls;
mod context;
mod preparation;
mod pulse;
mod reply;
mod tools;
mod turn;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use guidepost_core::payload::{EventPayload, IdRef, StatusDetail, StatusPayload};
use guidepost_core::reply_check::Grounding;
use guidepost_core::session::{ProcessingStage, Status};
use guidepost_core::{AgentDefinition, AgentState, Tool, ToolId};
use guidepost_engine::{GuidelineMatcher, MatchKind, MatchingContext};
use guidepost_tools::registry::ToolRegistry;
use tokio_util::sync::CancellationToken;

use crate::clock::{Clock, SystemClock};
use crate::config::{RuntimeConfig, RuntimeModels};
use crate::error::TurnError;
use crate::events::{EventSink, NewEvent, Visibility};
use crate::hooks::{EngineHooks, HookAction, NoHooks};
use crate::journal::{CallJournal, NoJournal};
use crate::retrieval::KnowledgeIndex;
use crate::state::ResponseState;
use crate::trace::CompositionTrace;
use crate::variables::{MemoryVariables, VariableStore};

pub use pulse::PULSE_EVERY;

pub use turn::{EmittingLatch, TurnInput, TurnOutcome, TurnStatus};
use turn::{Ending, Seen, Turn};

/// Runs an agent's turns.
pub struct AgentRuntime {
    definition: Arc<AgentDefinition>,
    /// What the definition grounds in a reply, found once (it walks the whole definition).
    grounding: Grounding,
    matcher: GuidelineMatcher,
    tools: Arc<ToolRegistry>,
    tool_index: HashMap<ToolId, Tool>,
    models: RuntimeModels,
    hooks: Arc<dyn EngineHooks>,
    variables: Arc<dyn VariableStore>,
    journal: Arc<dyn CallJournal>,
    clock: Arc<dyn Clock>,
    knowledge: KnowledgeIndex,
    config: RuntimeConfig,
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
            grounding: Grounding::from_definition(&definition),
            definition,
            matcher,
            tools,
            tool_index,
            models,
            hooks: Arc::new(NoHooks),
            variables: Arc::new(MemoryVariables::default()),
            journal: Arc::new(NoJournal),
            clock: Arc::new(SystemClock),
            knowledge: KnowledgeIndex::default(),
            config,
        }
    }

    /// Reads ahead ([`guidepost_llm::ChatModel::read_ahead`]) what the first model calls of a
    /// conversation with this agent begin with, in the order the turn asks them: the single
    /// checks' instructions, the tool decision's where the agent's tools are decided in one
    /// batch, and the reply's. Called where a conversation opens, while the customer is still
    /// writing, so that a model which keeps prompt prefixes (a local one) reads only what the
    /// first message brings. Does nothing on models that keep nothing, that are busy with an
    /// answer or not loaded yet, or when answers are replayed. How many prompts a model read.
    pub async fn read_ahead(&self) -> usize {
        // In the order a turn asks them: the checks, the tool decision, the reply. The
        // customer's first message may come before all three are read (on two cores the taxi
        // agent's three took 7, 10 and 5 s; the customer wrote for 15), and what is left
        // unread is then read by the turn's last call instead of its first. A model that
        // keeps prompt prefixes keeps each aside for its call.
        let mut read = self.matcher.read_ahead().await;
        if self.first_turn_may_call_tools() {
            read += usize::from(self.read_tool_decision_ahead(&[], None).await);
        }
        let state = ResponseState::default();
        read + usize::from(self.read_reply_prompt_ahead(&state, &[], None, None, "the reply's").await)
    }

    /// Reads ahead the reply's prompt for `state`, with `conversation` as its prompts show it
    /// (`shown`; none at a conversation's opening) and the customer's name: the request a
    /// reply begins with before the customer's next message (see
    /// [`crate::compose::read_ahead_request`]). Whether the model read it.
    async fn read_reply_prompt_ahead(
        &self,
        state: &ResponseState,
        conversation: &[(String, String)],
        shown: Option<&crate::history::PromptHistory<'_>>,
        customer_name: Option<&str>,
        what: &str,
    ) -> bool {
        let input = crate::compose::ComposeInput {
            definition: &self.definition,
            definition_grounding: &self.grounding,
            state,
            history: conversation,
            shown: shown.map_or(&[][..], |h| h.shown),
            earlier: shown.and_then(|h| h.earlier.as_deref()),
            customer_name,
            self_check: self.self_check(),
            reply_checks: &[],
            now: self.clock.now(),
            preview: false,
        };
        read_ahead(self.models.generation.as_ref(), || crate::compose::read_ahead_request(&input), what).await
    }

    /// Whether the reply's model writes a draft and checks it before the reply: as configured,
    /// else where the model follows compound instructions.
    pub(super) fn self_check(&self) -> bool {
        self.config.self_check.unwrap_or_else(|| self.models.generation.capabilities().follows_compound_instructions)
    }

    /// Whether a conversation's first turn can call a tool: a guideline calls for one, or a
    /// journey has a tool step the turn that starts the journey can enter. A step that books,
    /// pays or sends (a consequential tool) is entered only from the question the customer was
    /// asked before it, never in the move that reached that question
    /// ([`guidepost_engine::journeys::paths::advance`]), so one that only questions lead to
    /// cannot run before the second turn. Where none can, the tool decision's prompt is not
    /// read ahead at the opening: the customer's writing time goes to the prompts the first
    /// turn asks (on two cores the taxi agent's tool decision took 10 of the 15 s, and its
    /// first reply then read 352 new tokens instead of 171). It is read after the first turn.
    fn first_turn_may_call_tools(&self) -> bool {
        if self.definition.guidelines.iter().any(|g| !g.tools.is_empty()) {
            return true;
        }
        let agent = self.matcher.agent();
        self.definition.journeys.iter().filter_map(|j| agent.journey(&j.id)).any(|graph| {
            // The root only routes (as every step that is not a question): a step it leads to
            // is entered by the first move.
            graph.nodes.values().filter(|n| !n.tools.is_empty()).any(|step| {
                !step.consequential
                    || graph
                        .nodes
                        .values()
                        .any(|from| from.edges.iter().any(|e| e.to == step.id) && !from.is_customer_dependent())
            })
        })
    }

    /// Reads ahead, after a turn, what the next turn's first model calls begin with:
    /// `input` is the session as the turn left it (its events, the reply included, and the
    /// state it committed), without a new message. The tool decision's prompt and the
    /// checks' show the conversation before what the next message brings, so a model that
    /// keeps prompt prefixes reads the reply it just wrote while the customer reads it and
    /// writes back; the next turn's calls read only the new message and their question. The
    /// reply's prompt is read last, as the next turn will likely lay it out (see
    /// [`read_reply_ahead_after`](Self::read_reply_ahead_after)).
    /// Called where a turn was committed, in the background; otherwise as
    /// [`read_ahead`](Self::read_ahead) (no variable is refreshed, no tool called). How many
    /// prompts a model read.
    pub async fn read_ahead_after(&self, input: &TurnInput) -> usize {
        if !self.reads_ahead_after() {
            return 0;
        }
        let mut ctx = MatchingContext::new(input.events.clone(), input.previous_state.clone());
        ctx.variables = crate::variables::stored_variables(
            &self.definition,
            self.variables.as_ref(),
            self.clock.as_ref(),
            &input.customer,
        )
        .await;
        ctx.customer_name = input.customer_name.clone();
        let conversation: Vec<(String, String)> = ctx.messages().into_iter().map(|m| (m.speaker, m.text)).collect();
        let history = self.prompt_history(input, &conversation);
        let read = usize::from(self.read_tool_decision_ahead(history.shown, history.earlier.as_deref()).await);
        let read = read + self.matcher.read_ahead_after(&ctx).await;
        // The reply's last: it is the turn's last call, and the longest to read.
        read + usize::from(self.read_reply_ahead_after(input, &ctx, &conversation, &history).await)
    }

    /// Reads ahead the reply's prompt as the next turn will likely lay it out: each active
    /// journey where the customer's answer to the question it rests at takes it, when that
    /// can be told from the journey alone (`JourneyGraph::after_answer`), where it stands
    /// otherwise; no guideline matched and no tool called. The reply's prompt
    /// gives the turn's instructions before the conversation, so a model that keeps prompt
    /// prefixes reads the whole conversation again in every reply (216 of its 397 tokens in
    /// the taxi's "At 7 pm."); where the guess holds, it reads only the new message. Nothing
    /// is read where no journey is active (the instructions are anyone's guess), and nothing
    /// depends on the guess: a wrong one parts from the real prompt at the instructions.
    async fn read_reply_ahead_after(
        &self,
        input: &TurnInput,
        ctx: &MatchingContext,
        conversation: &[(String, String)],
        history: &crate::history::PromptHistory<'_>,
    ) -> bool {
        let committed = &input.previous_state.journey_paths;
        if committed.is_empty() || !self.models.generation.reads_ahead() {
            return false;
        }
        let agent = self.matcher.agent();
        let journey_paths = committed
            .iter()
            .map(|(id, path)| {
                let answered =
                    agent.journey(id).and_then(|graph| graph.after_answer(path.current())).and_then(|steps| {
                        let states = path.states().iter().cloned().chain(steps.into_iter().map(str::to_string));
                        guidepost_core::JourneyPath::from_states(states.collect())
                    });
                (id.clone(), answered.unwrap_or_else(|| path.clone()))
            })
            .collect();
        let mut state = ResponseState {
            journey_paths,
            previous_journey_paths: committed.clone(),
            context_variables: ctx.variables.clone(),
            ..ResponseState::default()
        };
        // The terms and capabilities of the conversation so far (all of them, for an agent
        // with no more than a prompt takes).
        (state.glossary_terms, state.capabilities) = self.retrieve(&context::retrieval_query(conversation)).await;
        let name = input.customer_name.as_deref();
        self.read_reply_prompt_ahead(&state, conversation, Some(history), name, "the next reply's").await
    }

    /// Whether [`read_ahead_after`](Self::read_ahead_after) has anything to do: a model of the
    /// checks, the tool decision or the reply keeps prompt prefixes.
    pub fn reads_ahead_after(&self) -> bool {
        [&self.models.matching, &self.models.journey_selection, &self.models.tool_inference, &self.models.generation]
            .iter()
            .any(|m| m.reads_ahead())
    }

    /// Reads ahead the tool decision's prompt, up to the conversation `shown` (after what
    /// `earlier` stands for), where the agent's tools are decided in one batch.
    async fn read_tool_decision_ahead(&self, shown: &[(String, String)], earlier: Option<&str>) -> bool {
        let model = self.models.tool_inference.as_ref();
        let decision = || {
            let mut tools: Vec<Tool> = self.tool_index.values().cloned().collect();
            tools.sort_by(|a, b| a.id.cmp(&b.id));
            crate::tool_calls::read_ahead_request(model, &self.definition, &tools, shown, earlier)
        };
        read_ahead(model, decision, "the tool decision's").await
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

    /// Records tool calls in this journal, so that a turn that runs again reuses what an
    /// earlier attempt did (see [`crate::journal`]).
    pub fn with_journal(mut self, journal: Arc<dyn CallJournal>) -> Self {
        self.journal = journal;
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

    /// Runs `work` (the stages of a turn emitting to `sink`) with its model calls measured,
    /// sending pulses through `sink` while a model works on it and the turn is silent.
    async fn with_pulses<T>(
        &self,
        sink: &pulse::Paced<'_>,
        trace_id: &str,
        started: Instant,
        work: impl std::future::Future<Output = T>,
    ) -> T {
        let meter = Arc::new(guidepost_llm::progress::ModelProgress::default());
        let stop = CancellationToken::new();
        let working = async {
            let result = guidepost_llm::progress::measured(meter.clone(), work).await;
            stop.cancel();
            result
        };
        let every = self.config.pulse_every.unwrap_or(PULSE_EVERY);
        // On tokio's clock, which a test can drive.
        let started =
            tokio::time::Instant::now().checked_sub(started.elapsed()).unwrap_or_else(tokio::time::Instant::now);
        futures::join!(working, pulse::pulse(sink, &meter, trace_id, started, every, &stop)).0
    }

    fn max_iterations(&self) -> u32 {
        self.config.max_engine_iterations.unwrap_or(self.definition.agent.max_engine_iterations).max(1)
    }

    /// Processes one turn: emits its events to `sink` and returns what happened. A turn
    /// cancelled through `cancel` before its reply is emitted ends with `cancelled` and
    /// `ready`; once emitting has started (`latch`), it finishes.
    ///
    /// The turn runs as named stages (one module each): acknowledge, load the context, prepare
    /// (match, then infer and call tools, in iterations), and compose and emit the reply.
    pub async fn process(
        &self,
        input: TurnInput,
        sink: &dyn EventSink,
        cancel: CancellationToken,
        latch: EmittingLatch,
    ) -> TurnOutcome {
        let started = Instant::now();
        let paced = pulse::Paced::new(sink);
        let sink: &dyn EventSink = &paced;
        let mut turn = Turn::new(&self.definition, &input, sink, &cancel, &latch, "turn");
        let trace_id = input.trace_id.as_str();
        sink.emit(NewEvent::status(trace_id, Status::Acknowledged), Visibility::Live).await;
        let result = self.with_pulses(&paced, trace_id, started, self.run(&mut turn)).await;
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
                sink.emit(NewEvent::status(trace_id, Status::Cancelled), Visibility::Held).await;
                (TurnStatus::Cancelled, Vec::new())
            }
            Err(error) => {
                let text = error.scrubbed();
                tracing::error!(error = %text, trace_id, "turn failed");
                self.hooks.on_error(&error, &state, sink).await;
                sink.emit(failed(trace_id, &self.failure_notice(&input.events)), Visibility::Held).await;
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
        sink.emit(completed(trace_id, ready), Visibility::Held).await;
        let new_state = if status.replied() {
            self.next_state(&input, &state, &trace.composition)
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
        let paced = pulse::Paced::new(sink);
        let sink: &dyn EventSink = &paced;
        let mut turn = Turn::new(&self.definition, &input, sink, &cancel, &latch, "utterance");
        turn.state = ResponseState {
            journey_paths: input.previous_state.journey_paths.clone(),
            journey_answers: input.previous_state.journey_answers.clone(),
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
        sink.emit(NewEvent::status(&input.trace_id, Status::Typing), Visibility::Live).await;
        let reply = self.emit_reply(&mut turn, &conversation, &history);
        let result = self.with_pulses(&paced, &input.trace_id, started, reply).await;
        let Turn { ledger, mut trace, .. } = turn;
        trace.usage = ledger.totals();
        trace.duration_ms = started.elapsed().as_millis() as u64;
        let (status, messages) = match result {
            Ok(Ending::Sent(messages)) => (TurnStatus::Completed, messages),
            Ok(Ending::Cancelled) => (TurnStatus::Completed, Vec::new()),
            Err(error) => {
                let text = error.scrubbed();
                tracing::error!(error = %text, trace_id = %input.trace_id, "utterance failed");
                sink.emit(failed(&input.trace_id, &self.failure_notice(&input.events)), Visibility::Held).await;
                trace.error = Some(text);
                (TurnStatus::Failed, Vec::new())
            }
        };
        let nothing = NewEvent::agent(&input.trace_id, EventPayload::Status(StatusPayload::completed_empty()));
        sink.emit(nothing, Visibility::Held).await;
        TurnOutcome { status, messages, state: input.previous_state, trace }
    }

    /// The state for the next turn: journey paths, and the guidelines whose actions were
    /// carried out, added to those applied earlier. A matched, tracked guideline with an
    /// action counts as carried out when the reply's analysis (`followed`, reported with the
    /// reply) names it, and, without an analysis, whenever it matched; never a tool-enabled
    /// one whose tools did not run (a missing argument, say). What was not carried out stays
    /// new, so it is evaluated afresh next turn.
    ///
    /// The fallback reply ("Could you put it another way?") carried out nothing: the journeys
    /// have not asked what their new steps ask, and a step that books must not follow a
    /// question the customer never saw. Unless a tool acted in the turn (then the journeys
    /// stand past it), the state is the one the turn found, with the turn's trace id.
    fn next_state(&self, input: &TurnInput, state: &ResponseState, composition: &CompositionTrace) -> AgentState {
        if composition.fallback && state.tool_calls.is_empty() {
            return AgentState { trace_id: input.trace_id.clone(), ..input.previous_state.clone() };
        }
        let followed = composition.followed.as_deref();
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
            journey_answers: state.journey_answers.clone(),
        }
    }

    /// The stages of a turn after its acknowledgement.
    async fn run(&self, turn: &mut Turn<'_>) -> Result<Ending, TurnError> {
        let recorded = self.journal.recorded(turn.trace_id()).await.map_err(TurnError::Journal)?;
        turn.calls = calls::CallBook::new(recorded);
        if turn.calls.acted_before() {
            // An earlier attempt acted on the world: this one reports it whatever comes.
            turn.latch.set_acted();
        }
        if self.hooks.on_acknowledged(&mut turn.state, turn.sink).await == HookAction::Bail {
            return Ok(Ending::Sent(Vec::new()));
        }
        let (mut ctx, conversation, query) = self.load_context(turn).await;
        let seen = Seen { history: self.prompt_history(turn.input, &conversation), conversation: &conversation, query };
        turn.sink.emit(NewEvent::processing(turn.trace_id(), ProcessingStage::Interpreting), Visibility::Live).await;
        if self.hooks.on_preparing(&mut turn.state, turn.sink).await == HookAction::Bail {
            return Ok(Ending::Sent(Vec::new()));
        }
        if let Some(ending) = self.prepare(turn, &mut ctx, &seen).await? {
            return Ok(ending);
        }
        if self.hooks.on_generating_messages(&mut turn.state, turn.sink).await == HookAction::Bail {
            return Ok(Ending::Sent(Vec::new()));
        }
        turn.sink.emit(NewEvent::processing(turn.trace_id(), ProcessingStage::Articulating), Visibility::Live).await;
        turn.sink.emit(NewEvent::status(turn.trace_id(), Status::Typing), Visibility::Live).await;
        self.emit_reply(turn, &conversation, &seen.history).await
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
    NewEvent::agent(trace_id, EventPayload::Status(StatusPayload::error(exception)))
}

/// The `ready` status that ends a turn (`stage: completed`), with what it matched.
fn completed(trace_id: &str, detail: StatusDetail) -> NewEvent {
    NewEvent::agent(trace_id, EventPayload::Status(StatusPayload::completed(detail)))
}

/// Reads the request `request` builds ahead on `model`, when the model can use it and there is
/// a request; whether the model read it. Nothing depends on it: a failure is only logged,
/// naming `what` prompt it was.
async fn read_ahead(
    model: &dyn guidepost_llm::ChatModel,
    request: impl FnOnce() -> Result<Option<guidepost_llm::ChatRequest>, guidepost_llm::LlmError>,
    what: &str,
) -> bool {
    if !model.reads_ahead() {
        return false;
    }
    match request() {
        Ok(Some(request)) => model.read_ahead(request).await.unwrap_or_else(|error| {
            tracing::debug!(%error, "reading {what} prompt ahead failed");
            false
        }),
        Ok(None) => false,
        Err(error) => {
            tracing::warn!(%error, "{what} prompt to read ahead could not be rendered");
            false
        }
    }
}

#[cfg(test)]
mod fixtures {
    //! A small agent each stage's tests run on, with a scripted model.
    pub(super) use super::*;
    pub(super) use crate::events::MemorySession;
    pub(super) use crate::variables::CustomerRef;
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

    pub(in crate::runtime) fn runtime(model: ScriptedModel) -> AgentRuntime {
        let definition = load_agent(&[SourceFile::new("shop.yaml", SHOP)]).definition.unwrap();
        let tools = ToolRegistry::from_definition(&definition).unwrap();
        let models = RuntimeModels::single(Arc::new(model), None);
        AgentRuntime::new(Arc::new(definition), models, Arc::new(tools), RuntimeConfig::default())
    }

    pub(in crate::runtime) fn input(session: &MemorySession, text: &str) -> TurnInput {
        session.customer_turn("s1", CustomerRef { id: "guest".into(), tags: vec![] }, text, &AgentState::default())
    }
}
