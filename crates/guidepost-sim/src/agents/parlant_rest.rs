//! An agent behind the Parlant REST API (Parlant itself, or Guidepost's server).
//!
//! Per run: `POST /customers` (unless a customer id is given), `POST /sessions`. Per turn:
//! `POST /sessions/{id}/events` with `{kind: "message", source: "customer", message}`, then
//! long-poll `GET /sessions/{id}/events?min_offset=N&wait_for_data=S` (a 504 means "nothing
//! yet") until a `status` event with `data.status == "ready"` and
//! `data.data.stage == "completed"` arrives. Parlant writes an engine failure's `error` status
//! *after* that `ready`, so a turn that produced no message is polled once more for a short
//! while before it is taken as silent. The turn's events are then read once more without
//! waiting (streamed messages are complete by then) and folded by
//! [`parlant_events`](crate::agents::parlant_events) into an [`AgentTurn`] (messages,
//! preambles and tool calls in order, journey states attributed). Injected agent lines are
//! posted with source `human_agent_on_behalf_of_ai_agent`, which does not trigger processing.
//!
//! When the run ends, however it ended, the session and the customer the run created are
//! deleted (`DELETE /sessions/{id}`, `DELETE /customers/{id}`; a 404 counts as gone); a
//! deletion that fails is the run's cleanup error.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::agents::parlant_events::{JourneyStateIndex, is_agent_message, is_error_status, is_turn_end, turn_trace};
use crate::agents::{AgentFactory, AgentTurn, AgentUnderTest, parlant_events};
use crate::error::AgentError;

/// How to reach the server.
#[derive(Debug, Clone)]
pub struct ParlantRestConfig {
    /// Base URL, e.g. `http://127.0.0.1:8800`.
    pub base_url: String,
    /// The agent's id on the server.
    pub agent_id: String,
    /// An existing customer; when `None` a customer is created per run (and deleted after it).
    pub customer_id: Option<String>,
    /// Seconds of one long poll.
    pub wait_for_data: u64,
    /// Seconds to wait, after a turn ended without a message, for an `error` status.
    pub error_grace_secs: u64,
    /// Time limit of one turn.
    pub turn_timeout: Duration,
    /// State ids of the agent's definition, to name Parlant's journey nodes.
    pub journey_states: Arc<JourneyStateIndex>,
}

impl ParlantRestConfig {
    /// Defaults: a customer per run, 30 s polls, 1 s of grace for a late error, 180 s per
    /// turn, no definition.
    pub fn new(base_url: impl Into<String>, agent_id: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into().trim_end_matches('/').to_string(),
            agent_id: agent_id.into(),
            customer_id: None,
            wait_for_data: 30,
            error_grace_secs: 1,
            turn_timeout: Duration::from_secs(180),
            journey_states: Arc::default(),
        }
    }
}

/// One session on a Parlant-compatible server.
#[derive(Debug)]
pub struct ParlantRestAgent {
    config: ParlantRestConfig,
    http: reqwest::Client,
    session_id: Option<String>,
    created_customer: Option<String>,
    next_offset: u64,
}

fn transport(e: reqwest::Error) -> AgentError {
    AgentError::Transport(e.to_string())
}

impl ParlantRestAgent {
    /// An agent for `config` (no request is made until [`AgentUnderTest::start`]).
    pub fn new(config: ParlantRestConfig) -> Self {
        Self {
            config,
            http: guidepost_llm::http::client_builder().build().unwrap_or_default(),
            session_id: None,
            created_customer: None,
            next_offset: 0,
        }
    }

    /// The session id, once started.
    pub fn session_id(&self) -> Option<&str> {
        self.session_id.as_deref()
    }

    async fn post(&self, path: &str, body: Value) -> Result<Value, AgentError> {
        let url = format!("{}{path}", self.config.base_url);
        let response = self.http.post(&url).json(&body).send().await.map_err(transport)?;
        let status = response.status();
        let text = response.text().await.map_err(transport)?;
        if !status.is_success() {
            return Err(AgentError::Protocol(format!("POST {path} answered {status}: {}", excerpt(&text))));
        }
        serde_json::from_str(&text)
            .map_err(|e| AgentError::Protocol(format!("POST {path}: invalid JSON ({e}): {}", excerpt(&text))))
    }

    /// `DELETE path`; a 404 means it is already gone.
    async fn delete(&self, path: &str) -> Result<(), String> {
        let url = format!("{}{path}", self.config.base_url);
        let response = self.http.delete(&url).send().await.map_err(|e| format!("DELETE {path}: {e}"))?;
        let status = response.status();
        if status.is_success() || status.as_u16() == 404 {
            return Ok(());
        }
        let text = response.text().await.unwrap_or_default();
        Err(format!("DELETE {path} answered {status}: {}", excerpt(&text)))
    }

    /// Events from `min_offset`; `None` when the long poll timed out (504).
    async fn events(&self, session: &str, min_offset: u64, wait: u64) -> Result<Option<Vec<Value>>, AgentError> {
        let url =
            format!("{}/sessions/{session}/events?min_offset={min_offset}&wait_for_data={wait}", self.config.base_url);
        let response = self.http.get(&url).timeout(Duration::from_secs(wait + 15)).send().await.map_err(transport)?;
        let status = response.status();
        if status.as_u16() == 504 {
            return Ok(None);
        }
        let text = response.text().await.map_err(transport)?;
        if !status.is_success() {
            return Err(AgentError::Protocol(format!("GET events answered {status}: {}", excerpt(&text))));
        }
        match serde_json::from_str::<Value>(&text) {
            Ok(Value::Array(events)) => Ok(Some(events)),
            Ok(Value::Object(page)) => {
                Ok(Some(page.get("items").and_then(Value::as_array).cloned().unwrap_or_default()))
            }
            _ => Err(AgentError::Protocol(format!("GET events: not a list of events: {}", excerpt(&text)))),
        }
    }

    fn session(&self) -> Result<String, AgentError> {
        self.session_id.clone().ok_or_else(|| AgentError::Protocol("the session was not started".into()))
    }

    /// Waits for the end of the turn whose events start at `start`; returns the offset after
    /// the last event seen.
    async fn wait_for_turn_end(&self, session: &str, start: u64) -> Result<u64, AgentError> {
        let deadline = Instant::now() + self.config.turn_timeout;
        let mut cursor = start;
        loop {
            if Instant::now() >= deadline {
                return Err(AgentError::Timeout(self.config.turn_timeout));
            }
            let Some(events) = self.events(session, cursor, self.config.wait_for_data).await? else {
                continue;
            };
            if let Some(last) = events.iter().filter_map(offset_of).max() {
                cursor = cursor.max(last + 1);
            }
            if events.iter().any(|e| is_turn_end(e) || is_error_status(e)) {
                return Ok(cursor);
            }
            if events.is_empty() {
                // A server that answers `[]` instead of 504 must not make us spin.
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

fn excerpt(text: &str) -> String {
    text.chars().take(300).collect()
}

fn offset_of(event: &Value) -> Option<u64> {
    event.get("offset").and_then(Value::as_u64)
}

#[async_trait]
impl AgentUnderTest for ParlantRestAgent {
    async fn start(&mut self, conversation_id: &str) -> Result<(), AgentError> {
        let customer_id = match &self.config.customer_id {
            Some(id) => id.clone(),
            None => {
                let customer =
                    self.post("/customers", json!({"name": format!("Simulated customer {conversation_id}")})).await?;
                let id = customer
                    .get("id")
                    .and_then(Value::as_str)
                    .map(String::from)
                    .ok_or_else(|| AgentError::Protocol("customer without id".into()))?;
                self.created_customer = Some(id.clone());
                id
            }
        };
        let session = self
            .post(
                "/sessions",
                json!({"agent_id": self.config.agent_id, "customer_id": customer_id, "title": conversation_id}),
            )
            .await?;
        let id = session
            .get("id")
            .and_then(Value::as_str)
            .ok_or_else(|| AgentError::Protocol("session without id".into()))?;
        self.session_id = Some(id.to_string());
        Ok(())
    }

    async fn reply(&mut self, customer_message: &str) -> Result<AgentTurn, AgentError> {
        let session = self.session()?;
        let posted = self
            .post(
                &format!("/sessions/{session}/events"),
                json!({"kind": "message", "source": "customer", "message": customer_message}),
            )
            .await?;
        let start = offset_of(&posted).map_or(self.next_offset, |o| o + 1);
        let cursor = self.wait_for_turn_end(&session, start).await?;
        let mut events = self.events(&session, start, 0).await?.unwrap_or_default();
        let trace = turn_trace(&events).map(String::from);
        let of_turn = |e: &Value| trace.is_none() || e.get("trace_id").and_then(Value::as_str) == trace.as_deref();
        let silent = !events.iter().any(|e| of_turn(e) && (is_agent_message(e) || is_error_status(e)));
        if silent && self.config.error_grace_secs > 0 {
            // Parlant emits the completed `ready` before the `error` of a failed turn.
            let next = events.iter().filter_map(offset_of).max().map_or(cursor, |o| o + 1);
            if let Some(late) = self.events(&session, next, self.config.error_grace_secs).await? {
                events.extend(late);
            }
        }
        self.next_offset = events.iter().filter_map(offset_of).max().map_or(cursor, |o| o + 1);
        parlant_events::turn_from_events(&events, &self.config.journey_states)
    }

    async fn inject_agent_message(&mut self, text: &str) -> Result<(), AgentError> {
        let session = self.session()?;
        let posted = self
            .post(
                &format!("/sessions/{session}/events"),
                json!({"kind": "message", "source": "human_agent_on_behalf_of_ai_agent", "message": text}),
            )
            .await?;
        if let Some(o) = offset_of(&posted) {
            self.next_offset = o + 1;
        }
        Ok(())
    }

    async fn finish(&mut self) -> Result<(), AgentError> {
        let mut problems = Vec::new();
        if let Some(session) = self.session_id.take()
            && let Err(e) = self.delete(&format!("/sessions/{session}")).await
        {
            problems.push(format!("session {session} was left on the server ({e})"));
        }
        if let Some(customer) = self.created_customer.take()
            && let Err(e) = self.delete(&format!("/customers/{customer}")).await
        {
            problems.push(format!("customer {customer} was left on the server ({e})"));
        }
        if problems.is_empty() { Ok(()) } else { Err(AgentError::Cleanup(problems.join("; "))) }
    }
}

/// Makes one [`ParlantRestAgent`] (one session) per run.
#[derive(Debug, Clone)]
pub struct ParlantRestFactory {
    /// The server and agent.
    pub config: ParlantRestConfig,
}

#[async_trait]
impl AgentFactory for ParlantRestFactory {
    fn describe(&self) -> String {
        format!("parlant-rest {} agent {}", self.config.base_url, self.config.agent_id)
    }

    fn provider_key(&self) -> String {
        self.config.base_url.clone()
    }

    async fn create(&self) -> Result<Box<dyn AgentUnderTest>, AgentError> {
        Ok(Box::new(ParlantRestAgent::new(self.config.clone())))
    }
}
