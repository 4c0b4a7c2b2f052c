//! The in-process Guidepost agent: the contract between the simulator and the response engine.
//!
//! The engine implements [`EngineSession`] (one conversation) and [`EngineSessionFactory`]
//! (one session per run); the CLI plugs the factory in with [`InProcessFactory`] (or
//! [`AgentTarget::InProcess`](crate::AgentTarget::InProcess)). [`InProcessAgent`] turns the
//! engine's events into an [`AgentTurn`] with [`EngineObservations`], so step satisfaction and
//! checkpoints read the engine's own state and coverage sees every journey state and guideline.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use guidepost_llm::Usage;
use serde::{Deserialize, Serialize};

use crate::agents::{AgentFactory, AgentTurn, AgentUnderTest, ToolCallRecord};
use crate::error::AgentError;
use crate::observations::{EngineObservations, JourneyStateReached, ToolCalled};
use crate::scenario::Scenario;

/// What the engine reports while processing one customer message, in the order it happened
/// (the order of messages, preambles and tool calls is the order of the turn's items).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum EngineEvent {
    /// A message to the customer.
    Message {
        /// Its text.
        text: String,
    },
    /// A preamble: a short acknowledgement sent while the reply was being prepared (the
    /// engine tags its message `__preamble__`).
    Preamble {
        /// Its text.
        text: String,
    },
    /// A tool call and its result, in the form every agent reports
    /// ([`ToolCallRecord::from_parlant`] reads the engine's `tool` event entries).
    ToolCall(ToolCallRecord),
    /// A guideline matched (ids of projected journey nodes are reported as states instead).
    GuidelineMatched {
        /// The guideline id.
        guideline: String,
    },
    /// A journey became active.
    JourneyEntered {
        /// The journey id.
        journey: String,
    },
    /// A journey moved to a state (forward, fast-forward or backtrack).
    JourneyStateReached {
        /// The journey id.
        journey: String,
        /// The state id.
        state: String,
        /// The transition taken, when known.
        edge: Option<String>,
    },
    /// A journey reached `end`.
    JourneyCompleted {
        /// The journey id.
        journey: String,
    },
    /// Model usage of the turn.
    Usage(Usage),
    /// The reply sent was the agent's fallback: no reply the model wrote passed the reply
    /// checks.
    ReplyFallback {
        /// What the checks found, one line per problem.
        problems: Vec<String>,
    },
}

/// One conversation with the in-process engine.
#[async_trait]
pub trait EngineSession: Send {
    /// Processes the customer's message and returns the turn's events.
    async fn process(&mut self, customer_message: &str) -> Result<Vec<EngineEvent>, AgentError>;

    /// Appends an agent line to the session without processing (scripted agent turns).
    async fn append_agent_message(&mut self, text: &str) -> Result<(), AgentError>;
}

/// Makes engine sessions, one per run.
#[async_trait]
pub trait EngineSessionFactory: Send + Sync {
    /// A description for reports (agent name, definition file).
    fn describe(&self) -> String;

    /// A new session for `conversation_id`, of the agent defined at `definition` (the
    /// scenario's `agent`, or `--definition`); `None` when the run names no definition.
    async fn open(
        &self,
        conversation_id: &str,
        definition: Option<&Path>,
    ) -> Result<Box<dyn EngineSession>, AgentError>;
}

/// Folds engine events into an [`AgentTurn`].
pub fn turn_from_engine_events(events: Vec<EngineEvent>) -> AgentTurn {
    let mut turn = AgentTurn::default();
    let mut seen = EngineObservations::default();
    let mut usage: Option<Usage> = None;
    for event in events {
        match event {
            EngineEvent::Message { text } => turn.push_message(text),
            EngineEvent::Preamble { text } => turn.push_preamble(text),
            EngineEvent::ToolCall(call) => {
                seen.tools_called.push(ToolCalled { tool: call.tool_id(), arguments: call.arguments.clone() });
                turn.push_tool_call(call);
            }
            EngineEvent::GuidelineMatched { guideline } => {
                match JourneyStateReached::from_node_guideline_id(&guideline) {
                    Some(state) => seen.journey_states.push(state),
                    None => seen.guidelines_matched.push(guideline),
                }
            }
            EngineEvent::JourneyEntered { journey } => seen.journeys_entered.push(journey),
            EngineEvent::JourneyStateReached { journey, state, edge } => {
                seen.journey_states.push(JourneyStateReached { journey, state, edge })
            }
            EngineEvent::JourneyCompleted { journey } => seen.journeys_completed.push(journey),
            EngineEvent::ReplyFallback { problems } => seen.reply_fallbacks.push(problems.join("; ")),
            EngineEvent::Usage(u) => match &mut usage {
                Some(total) => total.absorb(&u),
                None => usage = Some(u),
            },
        }
    }
    turn.observations = Some(seen);
    turn.usage = usage;
    turn
}

/// Adapts an [`EngineSession`] to [`AgentUnderTest`].
pub struct InProcessAgent {
    factory: Arc<dyn EngineSessionFactory>,
    definition: Option<PathBuf>,
    session: Option<Box<dyn EngineSession>>,
}

impl std::fmt::Debug for InProcessAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InProcessAgent").field("engine", &self.factory.describe()).finish()
    }
}

impl InProcessAgent {
    /// An agent whose session `factory` opens at start, for the agent defined at `definition`.
    pub fn new(factory: Arc<dyn EngineSessionFactory>, definition: Option<PathBuf>) -> Self {
        Self { factory, definition, session: None }
    }

    fn session(&mut self) -> Result<&mut Box<dyn EngineSession>, AgentError> {
        self.session.as_mut().ok_or_else(|| AgentError::Protocol("the engine session was not opened".into()))
    }
}

#[async_trait]
impl AgentUnderTest for InProcessAgent {
    async fn start(&mut self, conversation_id: &str) -> Result<(), AgentError> {
        self.session = Some(self.factory.open(conversation_id, self.definition.as_deref()).await?);
        Ok(())
    }

    async fn reply(&mut self, customer_message: &str) -> Result<AgentTurn, AgentError> {
        let events = self.session()?.process(customer_message).await?;
        Ok(turn_from_engine_events(events))
    }

    async fn inject_agent_message(&mut self, text: &str) -> Result<(), AgentError> {
        self.session()?.append_agent_message(text).await
    }
}

/// The [`AgentFactory`] of in-process engines.
#[derive(Clone)]
pub struct InProcessFactory {
    /// Opens engine sessions.
    pub sessions: Arc<dyn EngineSessionFactory>,
    /// The agent definition of every run (`--definition`); otherwise each scenario's own.
    pub definition: Option<PathBuf>,
}

impl std::fmt::Debug for InProcessFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InProcessFactory").field("engine", &self.sessions.describe()).finish()
    }
}

#[async_trait]
impl AgentFactory for InProcessFactory {
    fn describe(&self) -> String {
        format!("in-process {}", self.sessions.describe())
    }

    fn provider_key(&self) -> String {
        "in-process".to_string()
    }

    async fn create(&self) -> Result<Box<dyn AgentUnderTest>, AgentError> {
        Ok(Box::new(InProcessAgent::new(Arc::clone(&self.sessions), self.definition.clone())))
    }

    async fn create_for(&self, scenario: &Scenario) -> Result<Box<dyn AgentUnderTest>, AgentError> {
        let definition = self.definition.clone().or_else(|| scenario.agent_definition.clone());
        Ok(Box::new(InProcessAgent::new(Arc::clone(&self.sessions), definition)))
    }
}
