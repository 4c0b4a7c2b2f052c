//! The Guidepost engine behind a fake Parlant 3.3.2 server
//! ([`guidepost_testkit::fake_parlant`]), in the test process, so the simulator's Parlant
//! client can be compared, scenario for scenario, with the same agent run in process. Each Parlant session is one
//! in-memory engine conversation (named by the session's title, which the simulator sets to
//! its conversation id, so the engine sees the same conversation either way); the turn's
//! preambles, tool events and messages are passed on in the order the engine emitted them, and
//! the journey states it walked become Parlant's journey nodes (`journey_node:<state>:<edge>`).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use guidepost_cli::simulate::{EngineTurn, RuntimeSession, RuntimeSessions, is_preamble};
use guidepost_core::journey::START_STATE;
use guidepost_core::{EventKind, EventSource};
use guidepost_engine::record::{JourneyDecision, JourneyRecord};
use guidepost_llm::{ModelSettings, ModelSpec, ModelStackBuilder};
use guidepost_sim::agents::in_process::EngineSession;
use guidepost_sim::observations::JourneyStateReached;
use guidepost_testkit::fake_parlant::{
    AgentAct, BoxFuture, FakeParlant, FakeParlantOptions, FakeTurn, NodeIds, NodeVisit, ParlantBackend, SessionInfo,
};
use tokio::sync::Mutex;

/// The engine conversations of the server's sessions, opened on first use.
#[derive(Clone)]
struct EngineBackend {
    runtime: Arc<guidepost_runtime::AgentRuntime>,
    sessions: Arc<Mutex<HashMap<String, Arc<Mutex<RuntimeSession>>>>>,
}

impl EngineBackend {
    async fn session(&self, info: &SessionInfo) -> Arc<Mutex<RuntimeSession>> {
        let mut sessions = self.sessions.lock().await;
        let conversation = info.title.clone().unwrap_or_else(|| info.id.clone());
        Arc::clone(
            sessions
                .entry(info.id.clone())
                .or_insert_with(|| Arc::new(Mutex::new(RuntimeSession::new(Arc::clone(&self.runtime), &conversation)))),
        )
    }
}

/// The states the engine's journey decisions walked, each with the transition that entered it
/// (looked up in the definition from the state before).
fn visits<'a>(
    definition: &guidepost_core::AgentDefinition,
    records: impl IntoIterator<Item = &'a JourneyRecord>,
) -> Vec<NodeVisit> {
    let mut out = Vec::new();
    for record in records {
        let journey = definition.journeys.iter().find(|j| j.id == record.journey_id);
        let mut previous = record.path_before.as_ref().map_or(START_STATE.to_string(), |p| p.current().to_string());
        let mut visit = |state: &str, previous: &mut String, walked: bool| {
            let edge = walked
                .then(|| journey.and_then(|j| j.transitions.iter().find(|t| &t.from == previous && t.to == state)))
                .flatten()
                .map(|t| t.id.clone());
            out.push(NodeVisit { journey: record.journey_id.clone(), state: state.to_string(), edge });
            *previous = state.to_string();
        };
        match &record.decision {
            JourneyDecision::Started { steps } | JourneyDecision::Advanced { steps } => {
                for step in steps {
                    visit(step, &mut previous, true);
                }
            }
            JourneyDecision::Backtracked { to } => visit(to, &mut previous, false),
            JourneyDecision::Completed => visit(guidepost_core::journey::END_STATE, &mut previous, true),
            _ => {}
        }
    }
    out
}

fn fake_turn(definition: &guidepost_core::AgentDefinition, turn: EngineTurn) -> FakeTurn {
    let EngineTurn { events, outcome } = turn;
    let mut acts = Vec::new();
    for event in &events {
        match event.kind {
            EventKind::Message if event.source == EventSource::AiAgent => {
                let text = event.data["message"].as_str().unwrap_or_default().to_string();
                acts.push(if is_preamble(event) { AgentAct::Preamble(text) } else { AgentAct::Message(text) });
            }
            EventKind::Tool => {
                acts.push(AgentAct::ToolCalls(event.data["tool_calls"].as_array().cloned().unwrap_or_default()));
            }
            _ => {}
        }
    }
    let records: Vec<&JourneyRecord> =
        outcome.trace.iterations.iter().filter_map(|it| it.matching.as_ref()).flat_map(|m| m.journeys.iter()).collect();
    let journey_states = visits(definition, records.iter().copied());
    let mut journeys: Vec<String> = Vec::new();
    for journey in journey_states.iter().map(|v| &v.journey).chain(outcome.state.journey_paths.keys()) {
        if !journeys.contains(journey) {
            journeys.push(journey.clone());
        }
    }
    FakeTurn {
        acts,
        matched_guidelines: outcome
            .trace
            .matched
            .iter()
            .filter(|g| JourneyStateReached::from_node_guideline_id(g).is_none())
            .cloned()
            .collect(),
        journeys,
        journey_states,
        error: outcome.trace.error.clone(),
        ..FakeTurn::default()
    }
}

impl ParlantBackend for EngineBackend {
    fn turn(&self, session: SessionInfo, message: String) -> BoxFuture<FakeTurn> {
        let this = self.clone();
        Box::pin(async move {
            let session = this.session(&session).await;
            let turn = session.lock().await.run_turn(&message).await;
            fake_turn(this.runtime.definition(), turn)
        })
    }

    fn agent_line(&self, session: SessionInfo, text: String) -> BoxFuture<()> {
        let this = self.clone();
        Box::pin(async move {
            let session = this.session(&session).await;
            let mut session = session.lock().await;
            if let Err(e) = session.append_agent_message(&text).await {
                tracing::warn!(error = %e, "could not add the agent's line");
            }
        })
    }
}

/// How the engine behind the fake server reaches its models.
pub enum EngineModels<'a> {
    /// Every answer from these recordings (`replay-or-fail`).
    Recordings(&'a Path),
    /// An OpenAI-compatible server at this base URL (the rule-based fake model).
    Server(&'a str),
}

/// Starts the fake Parlant server with the agent defined at `definition` behind it, on the
/// current runtime; journey nodes are named by their state ids.
pub async fn start(definition: &Path, models: EngineModels<'_>) -> FakeParlant {
    let builder = match models {
        EngineModels::Recordings(dir) => {
            let registry = guidepost_cli::models::registry(None, true);
            ModelStackBuilder::new(ModelSettings::default()).registry(registry).config(guidepost_llm::StackConfig {
                recordings: Some(dir.to_path_buf()),
                cache_mode: guidepost_llm::CacheMode::ReplayOrFail,
                ..guidepost_llm::StackConfig::default()
            })
        }
        EngineModels::Server(url) => {
            let spec: ModelSpec = format!("openai-compatible:{url}/v1#gpt-4.1").parse().unwrap();
            let embedder: ModelSpec = format!("openai-compatible:{url}/v1#fake-embed").parse().unwrap();
            ModelStackBuilder::new(ModelSettings::single(spec)).embedder_spec(embedder)
        }
    };
    let stack = builder.build().unwrap();
    let sessions = RuntimeSessions::new(guidepost_cli::models::runtime_models(&stack));
    let runtime = sessions.runtime(definition).await.unwrap();
    let agent = &runtime.definition().agent;
    let options =
        FakeParlantOptions { agent_id: agent.id.clone(), agent_name: agent.name.clone(), node_ids: NodeIds::StateIds };
    let backend = Arc::new(EngineBackend { runtime: Arc::clone(&runtime), sessions: Arc::default() });
    FakeParlant::start(backend, options).await.unwrap()
}
