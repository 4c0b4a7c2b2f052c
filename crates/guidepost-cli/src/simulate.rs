//! `guidepost simulate`: simulated customers against an agent, with the Guidepost engine
//! plugged in for `--agent in-process`.

use std::collections::BTreeSet;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use async_trait::async_trait;
use guidepost_core::definition::{SourceFile, load_agent};
use guidepost_core::{AgentState, EventKind, EventSource};
use guidepost_llm::{ModelStackBuilder, Usage};
use guidepost_runtime::knowledge::CustomerRef;
use guidepost_runtime::{AgentRuntime, EmittingLatch, EventSink, MemorySession, NewEvent, RuntimeConfig, TurnInput};
use guidepost_sim::agents::in_process::{EngineEvent, EngineSession, EngineSessionFactory};
use guidepost_sim::{AgentError, Plugins, SimulateArgs};
use guidepost_tools::registry::ToolRegistry;
use tokio_util::sync::CancellationToken;

/// Opens sessions of an [`AgentRuntime`] for the simulator.
pub struct RuntimeSessions {
    runtime: Arc<AgentRuntime>,
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
        format!("guidepost engine ({})", self.runtime.definition().agent.id)
    }

    async fn open(&self, conversation_id: &str) -> Result<Box<dyn EngineSession>, AgentError> {
        Ok(Box::new(RuntimeSession {
            runtime: self.runtime.clone(),
            session: MemorySession::new(),
            state: AgentState::default(),
            id: conversation_id.to_string(),
        }))
    }
}

/// What changed in the journeys between two states, as engine events: journeys entered,
/// states reached (every state added beyond the part of the path both share) and journeys
/// left.
fn journey_events(before: &AgentState, after: &AgentState) -> Vec<EngineEvent> {
    let mut events = Vec::new();
    for (journey, path) in &after.journey_paths {
        let old = before.journey_paths.get(journey);
        if old.is_none() {
            events.push(EngineEvent::JourneyEntered { journey: journey.clone() });
        }
        let shared = old.map_or(0, |o| o.states().iter().zip(path.states()).take_while(|(a, b)| a == b).count());
        let changed = old.is_none_or(|o| o != path);
        for state in path.states().iter().skip(shared.max(1)).filter(|_| changed) {
            events.push(EngineEvent::JourneyStateReached {
                journey: journey.clone(),
                state: state.clone(),
                edge: None,
            });
        }
    }
    let left: BTreeSet<&String> =
        before.journey_paths.keys().filter(|j| !after.journey_paths.contains_key(*j)).collect();
    for journey in left {
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
        events.extend(outcome.trace.matched.iter().map(|g| EngineEvent::GuidelineMatched { guideline: g.clone() }));
        events.extend(journey_events(&self.state, &outcome.state));
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
    let mut plugins = Plugins { registry: crate::models::registry(threads), ..Plugins::default() };
    if args.agent == "in-process" {
        let scenarios = guidepost_sim::load_scenarios(&args.scenarios)?;
        let path =
            args.definition.clone().or_else(|| scenarios.iter().find_map(|s| s.agent_definition.clone())).context(
                "`--agent in-process` needs the agent's definition: --definition PATH or `agent:` in the scenario",
            )?;
        let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
        let loaded = load_agent(&[SourceFile::new(path.display().to_string(), text)]);
        let Some(definition) = loaded.definition else {
            bail!("{} does not load; run `guidepost check {}`", path.display(), path.display());
        };
        let builder = ModelStackBuilder::from_env()?.registry(crate::models::registry(threads));
        let config = crate::models::local_friendly(guidepost_sim::simulate::stack_config(&args)?, &builder);
        let stack = builder.config(config).build()?;
        let mut registry = ToolRegistry::from_definition(&definition)?;
        for problem in registry.discover_tools().await {
            eprintln!("warning: {problem}");
        }
        let models = crate::models::runtime_models(&stack);
        let runtime = AgentRuntime::new(Arc::new(definition), models, Arc::new(registry), RuntimeConfig::default());
        plugins.engine = Some(Arc::new(RuntimeSessions { runtime: Arc::new(runtime) }));
    }
    match guidepost_sim::run(&args, plugins).await {
        Ok(outcome) => {
            println!("{}", guidepost_sim::output::summary::summarize_suite(&outcome.report));
            Ok(ExitCode::from(u8::try_from(outcome.report.exit_code(args.min_pass_rate)).unwrap_or(1)))
        }
        Err(err) => {
            eprintln!("error: {err}");
            Ok(ExitCode::from(2))
        }
    }
}
