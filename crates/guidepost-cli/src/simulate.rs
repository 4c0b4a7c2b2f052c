//! `guidepost simulate`: simulated customers against an agent, with the Guidepost engine
//! plugged in for `--agent in-process`.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Result;
use async_trait::async_trait;
use guidepost_core::definition::{SourceFile, load_agent};
use guidepost_core::{AgentState, EventKind, EventSource};
use guidepost_llm::{ModelStackBuilder, Usage};
use guidepost_runtime::knowledge::CustomerRef;
use guidepost_runtime::{AgentRuntime, EmittingLatch, EventSink, MemorySession, NewEvent, RuntimeConfig, TurnInput};
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

/// What changed in the journeys between two states, as engine events: journeys entered,
/// states reached (every state added beyond the part of the path both share, or the state a
/// loop went back to) and journeys that `completed` (their end reached this turn).
fn journey_events(before: &AgentState, after: &AgentState, completed: &BTreeSet<String>) -> Vec<EngineEvent> {
    let mut events = Vec::new();
    for (journey, path) in &after.journey_paths {
        let old = before.journey_paths.get(journey);
        if old.is_none() {
            events.push(EngineEvent::JourneyEntered { journey: journey.clone() });
        }
        let shared = old.map_or(0, |o| o.states().iter().zip(path.states()).take_while(|(a, b)| a == b).count());
        let changed = old.is_none_or(|o| o != path);
        // A loop back to a visited state truncates the path to it: that state is reached
        // again although nothing is added beyond the shared part.
        let from = if changed && shared >= path.states().len() { shared.saturating_sub(1) } else { shared };
        for state in path.states().iter().skip(from.max(1)).filter(|_| changed) {
            events.push(EngineEvent::JourneyStateReached {
                journey: journey.clone(),
                state: state.clone(),
                edge: None,
            });
        }
    }
    // A journey that left by reaching its end completed; one the customer abandoned (or that
    // relational resolution switched off) just stops.
    let left: BTreeSet<&String> = before
        .journey_paths
        .keys()
        .filter(|j| !after.journey_paths.contains_key(*j) && completed.contains(*j))
        .collect();
    for journey in left {
        events.push(EngineEvent::JourneyStateReached {
            journey: journey.clone(),
            state: guidepost_core::journey::END_STATE.to_string(),
            edge: None,
        });
        events.push(EngineEvent::JourneyCompleted { journey: journey.clone() });
    }
    events
}

#[async_trait]
impl EngineSession for RuntimeSession {
    async fn process(&mut self, customer_message: &str) -> Result<Vec<EngineEvent>, AgentError> {
        let trace_id = uuid::Uuid::new_v4().simple().to_string();
        self.session.customer_message(customer_message, &trace_id);
        let input = TurnInput {
            session_id: self.id.clone(),
            customer: CustomerRef { id: format!("sim-{}", self.id), tags: vec![] },
            customer_name: None,
            events: self.session.events(),
            previous_state: self.state.clone(),
            trace_id,
        };
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
        let completed: BTreeSet<String> = outcome
            .trace
            .iterations
            .iter()
            .filter_map(|it| it.matching.as_ref())
            .flat_map(|m| m.journeys.iter())
            .filter(|j| j.decision == guidepost_engine::record::JourneyDecision::Completed)
            .map(|j| j.journey_id.clone())
            .collect();
        events.extend(journey_events(&self.state, &outcome.state, &completed));
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
            println!("{}", guidepost_sim::output::summary::summarize_suite(&outcome.report));
            let missed = outcome.report.missed_states();
            if args.require_full_coverage && !missed.is_empty() {
                println!("Coverage incomplete (--require-full-coverage): {}", missed.join(", "));
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
    #![allow(clippy::unwrap_used)]
    use guidepost_core::{AgentState, JourneyPath};
    use guidepost_sim::agents::in_process::EngineEvent;

    use std::collections::BTreeSet;

    use super::journey_events;

    fn state(path: &[&str]) -> AgentState {
        let mut state = AgentState::default();
        let path = JourneyPath::from_states(path.iter().map(|s| s.to_string()).collect()).unwrap();
        state.journey_paths.insert("weather".into(), path);
        state
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
    fn journey_events_report_new_states_loops_and_completion() {
        let shown = state(&["initial", "ask", "lookup", "show", "more"]);
        let none = BTreeSet::new();
        let forward = journey_events(&state(&["initial", "ask"]), &shown, &none);
        assert_eq!(reached(&forward), ["lookup", "show", "more"]);
        // Looping back to the visited tool step truncates the path: the step is reached again.
        let again = journey_events(&shown, &state(&["initial", "ask", "lookup"]), &none);
        assert_eq!(reached(&again), ["lookup"]);
        assert!(journey_events(&shown, &shown, &none).is_empty(), "no change, no event");
        // A journey that left without completing (the customer abandoned it) reports nothing.
        assert!(journey_events(&shown, &AgentState::default(), &none).is_empty());
        let done = journey_events(&shown, &AgentState::default(), &BTreeSet::from(["weather".to_string()]));
        assert_eq!(reached(&done), ["end"]);
        assert!(matches!(done.last(), Some(EngineEvent::JourneyCompleted { journey }) if journey == "weather"));
    }
}
