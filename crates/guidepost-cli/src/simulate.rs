//! `guidepost simulate`: simulated customers against an agent, with the Guidepost engine
//! plugged in for `--agent in-process`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Result;
use async_trait::async_trait;
use guidepost_core::payload::PREAMBLE_TAG;
use guidepost_core::reply_check::ReplyProblem;
use guidepost_core::{AgentState, Event, EventKind, EventSource};
use guidepost_engine::record::{JourneyDecision, JourneyRecord};
use guidepost_llm::Usage;
use guidepost_runtime::CustomerRef;
use guidepost_runtime::events::Visibility;
use guidepost_runtime::{AgentRuntime, EmittingLatch, EventSink, MemorySession, NewEvent, TurnOutcome};
use guidepost_sim::agents::ToolCallRecord;
use guidepost_sim::agents::in_process::{EngineEvent, EngineSession, EngineSessionFactory};
use guidepost_sim::observations::JourneyStateReached;
use guidepost_sim::{AgentError, Plugins, SimulateArgs};
use guidepost_tools::registry::ToolRegistry;
use tokio_util::sync::CancellationToken;

/// Opens sessions of [`AgentRuntime`]s for the simulator: one runtime per agent definition,
/// built when a scenario first names it, all on one model stack.
pub struct RuntimeSessions {
    models: guidepost_runtime::RuntimeModels,
    runtimes: tokio::sync::Mutex<HashMap<PathBuf, Arc<AgentRuntime>>>,
}

impl RuntimeSessions {
    /// Sessions whose runtimes use `models`.
    pub fn new(models: guidepost_runtime::RuntimeModels) -> Self {
        Self { models, runtimes: tokio::sync::Mutex::default() }
    }

    /// The runtime of the agent defined at `path`, loaded (and its tools discovered) once.
    pub async fn runtime(&self, path: &Path) -> Result<Arc<AgentRuntime>, AgentError> {
        let key = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        let mut runtimes = self.runtimes.lock().await;
        if let Some(runtime) = runtimes.get(&key) {
            return Ok(Arc::clone(runtime));
        }
        // Problems are rendered as `guidepost check` renders them.
        let definition =
            guidepost_sim::simulate::load_definition(path).map_err(|e| AgentError::Protocol(e.to_string()))?;
        let mut registry = ToolRegistry::from_definition(&definition)
            .map_err(|e| AgentError::Protocol(format!("the tools of {}: {e}", path.display())))?;
        for problem in registry.discover_tools().await {
            eprintln!("warning: {}: {problem}", path.display());
        }
        let runtime = Arc::new(AgentRuntime::new(
            Arc::new(definition),
            self.models.clone(),
            Arc::new(registry),
            crate::config_file::runtime_config().map_err(|e| AgentError::Protocol(format!("{e:#}")))?,
        ));
        runtimes.insert(key, Arc::clone(&runtime));
        Ok(runtime)
    }
}

/// One conversation with the engine, in memory.
pub struct RuntimeSession {
    runtime: Arc<AgentRuntime>,
    session: MemorySession,
    state: AgentState,
    id: String,
}

/// What one turn of the engine did: the events it emitted, in order, and its outcome.
pub struct EngineTurn {
    /// The turn's events after the customer's message (statuses, preambles, tool events,
    /// messages), as the engine emitted them.
    pub events: Vec<Event>,
    /// The outcome, with the trace of what matched and why.
    pub outcome: TurnOutcome,
}

impl RuntimeSession {
    /// A new conversation `id` with `runtime`.
    pub fn new(runtime: Arc<AgentRuntime>, id: &str) -> Self {
        Self { runtime, session: MemorySession::new(), state: AgentState::default(), id: id.to_string() }
    }

    /// Processes the customer's message; the agent state moves on only when the turn completed.
    pub async fn run_turn(&mut self, customer_message: &str) -> EngineTurn {
        let customer = CustomerRef { id: format!("sim-{}", self.id), tags: vec![] };
        let input = self.session.customer_turn(&self.id, customer, customer_message, &self.state);
        let trace_id = input.trace_id.clone();
        let outcome =
            self.runtime.process(input, &self.session, CancellationToken::new(), EmittingLatch::default()).await;
        if outcome.trace.error.is_none() {
            self.state = outcome.state.clone();
        }
        let events =
            self.session.events_of(&trace_id).into_iter().filter(|e| e.source != EventSource::Customer).collect();
        EngineTurn { events, outcome }
    }
}

/// Whether a message event is a preamble (tagged `__preamble__`).
pub fn is_preamble(event: &Event) -> bool {
    event.data["tags"].as_array().is_some_and(|tags| tags.iter().any(|t| t.as_str() == Some(PREAMBLE_TAG)))
}

/// The turn's preambles, tool calls and messages as engine events, in the order the engine
/// emitted them; tool calls read from the `tool` events' entries as every agent's are.
fn item_events(events: &[Event]) -> Vec<EngineEvent> {
    let mut out = Vec::new();
    for event in events {
        match event.kind {
            EventKind::Message if event.source == EventSource::AiAgent => {
                let text = event.data["message"].as_str().unwrap_or_default().to_string();
                if text.is_empty() {
                    continue;
                }
                out.push(if is_preamble(event) {
                    EngineEvent::Preamble { text }
                } else {
                    EngineEvent::Message { text }
                });
                if event.data["reply_checks"]["fallback"] == true {
                    let problems = event.data["reply_checks"]["problems"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .flat_map(|attempt| attempt.as_array().into_iter().flatten())
                        .filter_map(|p| serde_json::from_value::<ReplyProblem>(p.clone()).ok())
                        .map(|p| p.to_string())
                        .collect();
                    out.push(EngineEvent::ReplyFallback { problems });
                }
            }
            EventKind::Tool => out.extend(
                event.data["tool_calls"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|entry| EngineEvent::ToolCall(ToolCallRecord::from_parlant(entry))),
            ),
            _ => {}
        }
    }
    out
}

#[async_trait]
impl EngineSessionFactory for RuntimeSessions {
    fn describe(&self) -> String {
        "guidepost engine".to_string()
    }

    async fn open(
        &self,
        conversation_id: &str,
        definition: Option<&Path>,
    ) -> Result<Box<dyn EngineSession>, AgentError> {
        let path = definition.ok_or_else(|| {
            AgentError::Protocol(
                "`--agent in-process` needs the agent's definition: `agent:` in the scenario or --definition PATH"
                    .into(),
            )
        })?;
        Ok(Box::new(RuntimeSession::new(self.runtime(path).await?, conversation_id)))
    }
}

/// The journeys' moves this turn as engine events, from the engine's own decisions in the
/// order it made them: journeys entered, every state entered (a loop back to a visited state
/// included, even when it ends on the same path), and journeys completed. A journey the
/// customer abandoned just stops.
fn journey_events<'a>(decisions: impl IntoIterator<Item = &'a JourneyRecord>) -> Vec<EngineEvent> {
    let mut events = Vec::new();
    let reached = |journey: &str, state: &str| EngineEvent::JourneyStateReached {
        journey: journey.to_string(),
        state: state.to_string(),
        edge: None,
    };
    for record in decisions {
        let journey = record.journey_id.as_str();
        match &record.decision {
            JourneyDecision::Started { steps } => {
                events.push(EngineEvent::JourneyEntered { journey: journey.to_string() });
                events.extend(steps.iter().map(|s| reached(journey, s)));
            }
            JourneyDecision::Advanced { steps } => events.extend(steps.iter().map(|s| reached(journey, s))),
            JourneyDecision::Backtracked { to } => events.push(reached(journey, to)),
            JourneyDecision::Completed => {
                events.push(reached(journey, guidepost_core::journey::END_STATE));
                events.push(EngineEvent::JourneyCompleted { journey: journey.to_string() });
            }
            _ => {}
        }
    }
    events
}

#[async_trait]
impl EngineSession for RuntimeSession {
    async fn process(&mut self, customer_message: &str) -> Result<Vec<EngineEvent>, AgentError> {
        let EngineTurn { events: emitted, outcome } = self.run_turn(customer_message).await;
        if let Some(error) = &outcome.trace.error {
            return Err(AgentError::Protocol(format!("the engine failed the turn: {error}")));
        }
        let mut events = item_events(&emitted);
        // Journey nodes are reported as the path they walked (below), in order; their node
        // guidelines would repeat the current state out of order.
        events.extend(
            outcome
                .trace
                .matched
                .iter()
                .filter(|g| JourneyStateReached::from_node_guideline_id(g).is_none())
                .map(|g| EngineEvent::GuidelineMatched { guideline: g.clone() }),
        );
        events.extend(journey_events(
            outcome.trace.iterations.iter().filter_map(|it| it.matching.as_ref()).flat_map(|m| m.journeys.iter()),
        ));
        let totals = &outcome.trace.usage;
        let mut usage = Usage::new("guidepost-engine");
        usage.calls = u32::try_from(totals.calls).unwrap_or(u32::MAX);
        usage.prompt_tokens = totals.prompt_tokens;
        usage.completion_tokens = totals.completion_tokens;
        usage.cached_tokens = totals.cached_tokens;
        usage.latency = totals.latency;
        events.push(EngineEvent::Usage(usage));
        Ok(events)
    }

    async fn append_agent_message(&mut self, text: &str) -> Result<(), AgentError> {
        let agent = &self.runtime.definition().agent;
        self.session.emit(NewEvent::message("injected", &agent.id, &agent.name, text), Visibility::Held).await;
        Ok(())
    }
}

/// `guidepost simulate`: runs the suite, prints its summary and returns the exit status.
pub async fn run(args: SimulateArgs, threads: Option<usize>) -> Result<ExitCode> {
    let replay_only =
        args.cache.parse::<guidepost_llm::CacheMode>().is_ok_and(|m| m == guidepost_llm::CacheMode::ReplayOrFail);
    let settings = crate::config_file::model_settings_from(crate::config_file::config_path().as_deref(), |var| {
        std::env::var(var).ok()
    })?;
    let mut plugins = Plugins {
        registry: crate::models::registry(threads, replay_only),
        settings: Some(settings),
        ..Plugins::default()
    };
    if args.agent == "in-process" {
        let builder = crate::config_file::stack_builder()?.registry(crate::models::registry(threads, replay_only));
        let config = crate::models::local_friendly(guidepost_sim::simulate::stack_config(&args)?, &builder);
        let stack = builder.config(config).build()?;
        plugins.engine = Some(Arc::new(RuntimeSessions::new(crate::models::runtime_models(&stack))));
    }
    match guidepost_sim::run(&args, plugins).await {
        Ok(outcome) => {
            outln!("{}", guidepost_sim::output::summary::summarize_suite(&outcome.report));
            let missed = outcome.report.missed_states();
            if args.require_full_coverage && !missed.is_empty() {
                outln!("Coverage incomplete (--require-full-coverage): {}", missed.join(", "));
            }
            // A stage that went on without its recorded answer is no result of the model.
            if crate::models::report_replay_misses() {
                return Ok(ExitCode::from(2));
            }
            Ok(ExitCode::from(u8::try_from(args.exit_code(&outcome.report)).unwrap_or(1)))
        }
        Err(err) => {
            eprintln!("error: {err}");
            Ok(ExitCode::from(2))
        }
    }
}

#[cfg(test)]
mod tests {
    use guidepost_core::payload::{EventPayload, MessagePayload, PREAMBLE_TAG, ToolCallPayload, ToolPayload};
    use guidepost_engine::record::{JourneyDecision, JourneyRecord};
    use guidepost_runtime::events::Visibility;
    use guidepost_runtime::{EventSink, MemorySession, NewEvent};
    use guidepost_sim::agents::in_process::EngineEvent;
    use serde_json::json;

    use super::{item_events, journey_events};

    #[tokio::test]
    async fn the_turns_items_keep_the_engines_order_and_its_preamble() {
        let session = MemorySession::new();
        let mut preamble = MessagePayload::agent("weather", "小天", "稍等一下。");
        preamble.tags = Some(vec![PREAMBLE_TAG.to_string()]);
        session.emit(NewEvent::agent("t", EventPayload::Message(preamble)), Visibility::Held).await;
        let mut arguments = serde_json::Map::new();
        arguments.insert("location".into(), json!("北京"));
        let call = ToolCallPayload {
            tool_id: "fixtures:get_weather".into(),
            arguments,
            result: json!({"data": {"temperature": 15}, "metadata": {}, "control": {}, "canned_responses": [], "canned_response_fields": {}}),
        };
        session
            .emit(NewEvent::agent("t", EventPayload::Tool(ToolPayload { tool_calls: vec![call] })), Visibility::Held)
            .await;
        session.emit(NewEvent::message("t", "weather", "小天", "北京15度。"), Visibility::Held).await;
        let events = item_events(&session.events());
        assert!(matches!(&events[0], EngineEvent::Preamble { text } if text == "稍等一下。"));
        assert!(matches!(&events[1], EngineEvent::ToolCall(call)
            if call.name == "get_weather" && call.service.as_deref() == Some("fixtures") && call.result == json!({"temperature": 15})));
        assert!(matches!(&events[2], EngineEvent::Message { text } if text == "北京15度。"));
        assert_eq!(events.len(), 3);
    }

    fn record(decision: JourneyDecision) -> JourneyRecord {
        JourneyRecord {
            journey_id: "weather".into(),
            decision,
            path_before: None,
            path_after: None,
            rationale: String::new(),
            fast_path: None,
            batch: None,
            correction: None,
        }
    }

    fn steps(s: &[&str]) -> Vec<String> {
        s.iter().map(|s| s.to_string()).collect()
    }

    fn reached(events: &[EngineEvent]) -> Vec<&str> {
        events
            .iter()
            .filter_map(|e| match e {
                EngineEvent::JourneyStateReached { state, .. } => Some(state.as_str()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn journey_events_follow_the_engines_decisions() {
        let turn = [
            record(JourneyDecision::Started { steps: steps(&["ask"]) }),
            record(JourneyDecision::Stayed),
            record(JourneyDecision::Advanced { steps: steps(&["lookup"]) }),
            record(JourneyDecision::Advanced { steps: steps(&["show", "more"]) }),
        ];
        let events = journey_events(&turn);
        assert!(matches!(&events[0], EngineEvent::JourneyEntered { journey } if journey == "weather"));
        assert_eq!(reached(&events), ["ask", "lookup", "show", "more"]);
        // A loop back to a visited step is reported even when it ends on the same path.
        let looped = journey_events(&[
            record(JourneyDecision::Advanced { steps: steps(&["lookup"]) }),
            record(JourneyDecision::Advanced { steps: steps(&["show", "more"]) }),
        ]);
        assert_eq!(reached(&looped), ["lookup", "show", "more"]);
        let back = journey_events(&[record(JourneyDecision::Backtracked { to: "ask".into() })]);
        assert_eq!(reached(&back), ["ask"]);
        // Completion reports the end; an abandoned journey reports nothing.
        let done = journey_events(&[record(JourneyDecision::Completed)]);
        assert_eq!(reached(&done), ["end"]);
        assert!(matches!(done.last(), Some(EngineEvent::JourneyCompleted { journey }) if journey == "weather"));
        assert!(journey_events(&[record(JourneyDecision::Exited)]).is_empty());
    }
}
