//! What can be posted to a session ([`Post`]) and what posting it does: a customer's message
//! is stored with the turn that answers it (unless a human handles the session), the agent
//! can be asked to take a turn or to say something now, and everything else is stored as
//! given.

use std::time::Duration;

use guidepost_core::payload::{EventPayload, MessagePayload, Participant};
use guidepost_core::session::SessionMode;
use guidepost_core::{Agent, Customer, Event, EventKind, EventSource, Session};
use guidepost_store::turns::NewTurn;
use guidepost_store::{EventFilter, NewEventRecord};
use indexmap::IndexMap;
use serde_json::Value;

use crate::error::{ConversationError, Result};
use crate::sink::StoreSink;
use crate::{Conversations, waiting};

/// How long [`Post::AgentTurn`] waits for the turn's first status.
pub const FIRST_STATUS_WAIT: Duration = Duration::from_secs(60);

/// Free-form metadata stored with an event.
pub type Metadata = IndexMap<String, Value>;

/// Something posted to a session. Who may post what is the caller's to decide.
#[derive(Debug, Clone, PartialEq)]
pub enum Post {
    /// The customer's message. It starts a turn, unless a human handles the session.
    CustomerMessage {
        /// What the customer said.
        text: String,
        /// Who speaks, when not the session's customer under their stored name (an id left
        /// out is the session's customer's).
        participant: Option<Participant>,
        /// Stored with the event.
        metadata: Metadata,
    },
    /// A human agent's message, in their own name. It starts nothing.
    HumanAgentMessage {
        /// What they said.
        text: String,
        /// Who they are.
        participant: Participant,
        /// Stored with the event.
        metadata: Metadata,
    },
    /// A human agent's message in the AI agent's name. It starts nothing.
    OnBehalfOfAgent {
        /// What they said.
        text: String,
        /// Stored with the event.
        metadata: Metadata,
    },
    /// Asks the agent to take a turn now, with no new message (as if the customer had just
    /// spoken). Posting answers with the turn's first status.
    AgentTurn,
    /// Asks the agent to say, now, what these instructions ask (no guideline matching, no
    /// tools). Posting answers with the message, once written.
    Utterance {
        /// What to say, in words (actions an operator wrote).
        instructions: Vec<String>,
    },
    /// A client application's own event: custom data, or a status it reports. Stored as
    /// given; it starts nothing.
    Client {
        /// Who produced it.
        source: EventSource,
        /// What it carries.
        payload: Box<EventPayload>,
        /// Stored with the event.
        metadata: Metadata,
    },
}

impl Conversations {
    /// Posts `post` to `session_id`, and answers with the event that stands for it: the
    /// stored message or event, the first status of the turn the agent was asked to take,
    /// or the message it was asked to say.
    pub async fn post(&self, session_id: &str, post: Post) -> Result<Event> {
        let session = self.store.require_session(session_id).await?.session;
        let trace_id = guidepost_store::ids::new_trace_id();
        let record = |source, payload: EventPayload, metadata| NewEventRecord {
            source,
            kind: payload.kind(),
            trace_id: trace_id.clone(),
            data: payload.to_data(),
            metadata,
        };
        match post {
            Post::CustomerMessage { text, participant, metadata } => {
                let participant = self.customer_participant(&session, participant).await?;
                let payload = EventPayload::Message(MessagePayload::customer(participant, &text));
                let starts = session.mode == SessionMode::Auto;
                let turn = starts.then(|| NewTurn { id: trace_id.clone() });
                let mut events = self
                    .store
                    .append_events(session_id, vec![record(EventSource::Customer, payload, metadata)], turn)
                    .await?;
                if starts {
                    self.scheduler.schedule(session_id, &trace_id).await;
                }
                events.pop().ok_or_else(|| ConversationError::Internal("no event stored".into()))
            }
            Post::HumanAgentMessage { text, participant, metadata } => {
                let payload = EventPayload::Message(MessagePayload::new(participant, &text));
                Ok(self.store.append_event(session_id, record(EventSource::HumanAgent, payload, metadata)).await?)
            }
            Post::OnBehalfOfAgent { text, metadata } => {
                let agent = self.store.get::<Agent>(&session.agent_id).await?.map(|a| a.entity);
                let name = agent.map(|a| a.name).unwrap_or_default();
                let payload =
                    EventPayload::Message(MessagePayload::new(Participant::new(&session.agent_id, &name), &text));
                let source = EventSource::HumanAgentOnBehalfOfAiAgent;
                Ok(self.store.append_event(session_id, record(source, payload, metadata)).await?)
            }
            Post::Client { source, payload, metadata } => {
                Ok(self.store.append_event(session_id, record(source, *payload, metadata)).await?)
            }
            Post::AgentTurn => self.first_status(session_id, &trace_id).await,
            Post::Utterance { instructions } => self.utter(&session, &trace_id, &instructions).await,
        }
    }

    /// Starts a turn of the agent in `session_id` with no new message (a greeting, or an
    /// operator's nudge). Returns its trace id.
    pub async fn start_agent_turn(&self, session_id: &str) -> Result<String> {
        let trace_id = guidepost_store::ids::new_trace_id();
        self.store.append_events(session_id, Vec::new(), Some(NewTurn { id: trace_id.clone() })).await?;
        self.scheduler.schedule(session_id, &trace_id).await;
        Ok(trace_id)
    }

    /// Who a customer message is from: the participant given (the session's customer when
    /// it names no id), or the session's customer under their stored name (their id when
    /// the store does not know them).
    async fn customer_participant(&self, session: &Session, given: Option<Participant>) -> Result<Participant> {
        Ok(match given {
            Some(p) => Participant { id: p.id.or_else(|| Some(session.customer_id.clone())), ..p },
            None => {
                let name = self
                    .store
                    .get::<Customer>(&session.customer_id)
                    .await?
                    .map_or_else(|| session.customer_id.clone(), |c| c.entity.name);
                Participant::new(&session.customer_id, &name)
            }
        })
    }

    /// Starts a turn of the agent under `trace_id` and waits for its first status.
    async fn first_status(&self, session_id: &str, trace_id: &str) -> Result<Event> {
        let mut changes = self.store.hub().subscribe(session_id);
        self.store.append_events(session_id, Vec::new(), Some(NewTurn { id: trace_id.to_string() })).await?;
        self.scheduler.schedule(session_id, trace_id).await;
        let filter =
            EventFilter { trace_id: Some(trace_id.to_string()), kinds: vec![EventKind::Status], ..Default::default() };
        let deadline = tokio::time::Instant::now() + FIRST_STATUS_WAIT;
        loop {
            if let Some(first) = self.store.list_events(session_id, &filter).await?.into_iter().next() {
                return Ok(first);
            }
            if !waiting::changed(&mut changes, deadline, self.scheduler.stopping()).await {
                return Err(ConversationError::Timeout);
            }
        }
    }

    /// Has the agent say what `instructions` ask, now, under `trace_id`; the message.
    async fn utter(&self, session: &Session, trace_id: &str, instructions: &[String]) -> Result<Event> {
        let runtime = self.agents.runtime(&session.agent_id).await?;
        let input = crate::input::turn_input(&self.store, session, trace_id).await.map_err(|e| e.source)?;
        let sink = StoreSink::new(self.store.clone(), &session.id, self.redactor.clone());
        let instructions = instructions.to_vec();
        // In a task of its own: a caller that goes away does not stop the message half-sent.
        let outcome = tokio::spawn(async move { runtime.utter(input, &instructions, &sink).await })
            .await
            .map_err(|e| ConversationError::Internal(format!("the utterance task failed: {e}")))?;
        if let Some(error) = outcome.trace.error {
            return Err(ConversationError::Unavailable(self.redactor.text(&error)));
        }
        let filter =
            EventFilter { trace_id: Some(trace_id.to_string()), kinds: vec![EventKind::Message], ..Default::default() };
        self.store
            .list_events(&session.id, &filter)
            .await?
            .pop()
            .ok_or_else(|| ConversationError::Internal("no message emitted".into()))
    }
}
