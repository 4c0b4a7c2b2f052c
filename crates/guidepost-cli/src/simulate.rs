//! `guidepost simulate`: simulated customers against an agent, with the Guidepost engine
//! plugged in for `--agent in-process`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Result;
use async_trait::async_trait;
use guidepost_core::definition::{SourceFile, load_agent};
use guidepost_core::{AgentState, EventKind, EventSource};
use guidepost_engine::record::{JourneyDecision, JourneyRecord};
use guidepost_llm::{ModelStackBuilder, Usage};
use guidepost_runtime::knowledge::CustomerRef;
use guidepost_runtime::{AgentRuntime, EmittingLatch, EventSink, MemorySession, NewEvent, RuntimeConfig};
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
    /// The runtime of the agent defined at `path`, loaded (and its tools discovered) once.
    async fn runtime(&self, path: &Path) -> Result<Arc<AgentRuntime>, AgentError> {
        let key = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        let mut runtimes = self.runtimes.lock().await;
        if let Some(runtime) = runtimes.get(&key) {
            return Ok(Arc::clone(runtime));
        }
        let text = std::fs::read_to_string(path)
            .map_err(|e| AgentError::Protocol(format!("reading the agent definition {}: {e}", path.display())))?;
        let loaded = load_agent(&[SourceFile::new(path.display().to_string(), text)]);
        let definition = loaded.definition.ok_or_else(|| {
            AgentError::Protocol(format!("{} does not load; run `guidepost check {}`", path.display(), path.display()))
        })?;
        let mut registry = ToolRegistry::from_definition(&definition)
            .map_err(|e| AgentError::Protocol(format!("the tools of {}: {e}", path.display())))?;
        for problem in registry.discover_tools().await {
            eprintln!("warning: {}: {problem}", path.display());
        }
        let runtime = Arc::new(AgentRuntime::new(
            Arc::new(definition),
            self.models.clone(),
            Arc::new(registry),
            RuntimeConfig::default(),
        ));
        runtimes.insert(key, Arc::clone(&runtime));
        Ok(runtime)
    }
}

struct RuntimeSession {
    runtime: Arc<AgentRuntime>,
    session: MemorySession,
    state: AgentState,
    id: String,
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
        Ok(Box::new(RuntimeSession {
            runtime: self.runtime(path).await?,
            session: MemorySession::new(),
            state: AgentState::default(),
            id: conversation_id.to_string(),
        }))
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
        let customer = CustomerRef { id: format!("sim-{}", self.id), tags: vec![] };
        let input = self.session.customer_turn(&self.id, customer, customer_message, &self.state);
        let outcome =
            self.runtime.process(input, &self.session, CancellationToken::new(), EmittingLatch::default()).await;
        if let Some(error) = &outcome.trace.error {
            return Err(AgentError::Protocol(format!("the engine failed the turn: {error}")));
        }
        let mut events: Vec<EngineEvent> = Vec::new();
        for it in &outcome.trace.iterations {
            for call in &it.tool_calls {
                let error = (!call.ok).then(|| call.result.get("data").map(ToString::to_string).unwrap_or_default());
                events.push(EngineEvent::ToolCall {
                    tool: call.tool.to_string(),
                    arguments: serde_json::Value::Object(call.arguments.clone()),
                    result: call.result.clone(),
                    error,
                });
            }
        }
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
        events.extend(outcome.messages.iter().map(|m| EngineEvent::Message { text: m.clone() }));
        let totals = &outcome.trace.usage;
        let mut usage = Usage::new("guidepost-engine");
        usage.calls = u32::try_from(totals.calls).unwrap_or(u32::MAX);
        usage.prompt_tokens = totals.prompt_tokens;
        usage.completion_tokens = totals.completion_tokens;
        usage.cached_tokens = totals.cached_tokens;
        usage.latency = totals.latency;
        events.push(EngineEvent::Usage(usage));
        self.state = outcome.state;
        Ok(events)
    }

    async fn append_agent_message(&mut self, text: &str) -> Result<(), AgentError> {
        let agent = &self.runtime.definition().agent;
        let mut event = NewEvent::message("injected", &agent.id, &agent.name, text);
        event.source = EventSource::AiAgent;
        event.kind = EventKind::Message;
        self.session.emit(event).await;
        Ok(())
    }
}

pub async fn run(args: SimulateArgs, threads: Option<usize>) -> Result<ExitCode> {
    let replay_only =
        args.cache.parse::<guidepost_llm::CacheMode>().is_ok_and(|m| m == guidepost_llm::CacheMode::ReplayOrFail);
    let mut plugins = Plugins { registry: crate::models::registry(threads, replay_only), ..Plugins::default() };
    if args.agent == "in-process" {
        let builder = ModelStackBuilder::from_env()?.registry(crate::models::registry(threads, replay_only));
        let config = crate::models::local_friendly(guidepost_sim::simulate::stack_config(&args)?, &builder);
        let stack = builder.config(config).build()?;
        plugins.engine = Some(Arc::new(RuntimeSessions {
            models: crate::models::runtime_models(&stack),
            runtimes: tokio::sync::Mutex::default(),
        }));
    }
    match guidepost_sim::run(&args, plugins).await {
        Ok(outcome) => {
            outln!("{}", guidepost_sim::output::summary::summarize_suite(&outcome.report));
            let missed = outcome.report.missed_states();
            if args.require_full_coverage && !missed.is_empty() {
                outln!("Coverage incomplete (--require-full-coverage): {}", missed.join(", "));
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
    use guidepost_engine::record::{JourneyDecision, JourneyRecord};
    use guidepost_sim::agents::in_process::EngineEvent;

    use super::journey_events;

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
