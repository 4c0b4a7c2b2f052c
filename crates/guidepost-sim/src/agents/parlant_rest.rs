//! An agent behind the Parlant REST API (Parlant itself, or Guidepost's server).
//!
//! Per run: `POST /customers` (unless a customer id is given), `POST /sessions`. Per turn:
//! `POST /sessions/{id}/events` with `{kind: "message", source: "customer", message}`, then
//! long-poll `GET /sessions/{id}/events?min_offset=N&wait_for_data=S` (a 504 means "nothing
//! yet") until a `status` event with `data.status == "ready"` and
//! `data.data.stage == "completed"` arrives. The turn's events are then read once more without
//! waiting (streamed messages are complete by then): `message` events from the agent become
//! its messages, `tool` events its tool calls, and the completed `ready` status's
//! `matched_guidelines`, `matched_journeys` and `matched_journey_states` become
//! [`EngineObservations`]. Injected agent lines are posted with source
//! `human_agent_on_behalf_of_ai_agent`, which does not trigger processing.

use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::agents::{AgentFactory, AgentTurn, AgentUnderTest, ToolCallRecord};
use crate::error::AgentError;
use crate::observations::{EngineObservations, JourneyStateReached, ToolCalled};

/// How to reach the server.
#[derive(Debug, Clone)]
pub struct ParlantRestConfig {
    /// Base URL, e.g. `http://127.0.0.1:8800`.
    pub base_url: String,
    /// The agent's id on the server.
    pub agent_id: String,
    /// An existing customer; when `None` a customer is created per run.
    pub customer_id: Option<String>,
    /// Seconds of one long poll.
    pub wait_for_data: u64,
    /// Time limit of one turn.
    pub turn_timeout: Duration,
}

impl ParlantRestConfig {
    /// Defaults: a customer per run, 30 s polls, 180 s per turn.
    pub fn new(base_url: impl Into<String>, agent_id: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into().trim_end_matches('/').to_string(),
            agent_id: agent_id.into(),
            customer_id: None,
            wait_for_data: 30,
            turn_timeout: Duration::from_secs(180),
        }
    }
}

/// One session on a Parlant-compatible server.
#[derive(Debug)]
pub struct ParlantRestAgent {
    config: ParlantRestConfig,
    http: reqwest::Client,
    session_id: Option<String>,
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
}

fn excerpt(text: &str) -> String {
    text.chars().take(300).collect()
}

fn offset_of(event: &Value) -> Option<u64> {
    event.get("offset").and_then(Value::as_u64)
}

fn is_turn_end(event: &Value) -> bool {
    event.get("kind").and_then(Value::as_str) == Some("status")
        && event.pointer("/data/status").and_then(Value::as_str) == Some("ready")
        && event.pointer("/data/data/stage").and_then(Value::as_str) == Some("completed")
}

fn is_error_status(event: &Value) -> bool {
    event.get("kind").and_then(Value::as_str) == Some("status")
        && event.pointer("/data/status").and_then(Value::as_str) == Some("error")
}

fn ids(value: Option<&Value>) -> Vec<String> {
    value
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|i| i.get("id").and_then(Value::as_str).or_else(|| i.as_str()).map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// Folds one turn's events into an [`AgentTurn`].
pub fn turn_from_events(events: &[Value]) -> Result<AgentTurn, AgentError> {
    let mut turn = AgentTurn::default();
    let mut seen = EngineObservations::default();
    let mut any_status = false;
    for event in events {
        let kind = event.get("kind").and_then(Value::as_str).unwrap_or_default();
        let source = event.get("source").and_then(Value::as_str).unwrap_or_default();
        match kind {
            "message" if source == "ai_agent" || source == "human_agent_on_behalf_of_ai_agent" => {
                let text = event.pointer("/data/message").and_then(Value::as_str).map(String::from).or_else(|| {
                    event
                        .pointer("/data/chunks")
                        .and_then(Value::as_array)
                        .map(|chunks| chunks.iter().filter_map(Value::as_str).collect())
                });
                if let Some(text) = text.filter(|t| !t.is_empty()) {
                    turn.messages.push(text);
                }
            }
            "tool" => {
                for call in event.pointer("/data/tool_calls").and_then(Value::as_array).into_iter().flatten() {
                    let name = call.get("tool_id").and_then(Value::as_str).unwrap_or("unknown").to_string();
                    let arguments = call.get("arguments").cloned().unwrap_or(Value::Null);
                    let result = call
                        .pointer("/result/data")
                        .cloned()
                        .or_else(|| call.get("result").cloned())
                        .unwrap_or(Value::Null);
                    seen.tools_called.push(ToolCalled { tool: name.clone(), arguments: arguments.clone() });
                    turn.tool_calls.push(ToolCallRecord { id: String::new(), name, arguments, result, error: None });
                }
            }
            "status" => {
                any_status = true;
                if event.pointer("/data/status").and_then(Value::as_str) == Some("error") {
                    let why = event
                        .pointer("/data/data/exception")
                        .map(|v| v.as_str().map(String::from).unwrap_or_else(|| v.to_string()));
                    return Err(AgentError::Reported(why.unwrap_or_else(|| "error status".into())));
                }
                if is_turn_end(event) {
                    let data = event.pointer("/data/data");
                    for id in ids(data.and_then(|d| d.get("matched_guidelines"))) {
                        match JourneyStateReached::from_node_guideline_id(&id) {
                            Some(state) => seen.journey_states.push(state),
                            None => seen.guidelines_matched.push(id),
                        }
                    }
                    seen.journeys_entered.extend(ids(data.and_then(|d| d.get("matched_journeys"))));
                    for id in ids(data.and_then(|d| d.get("matched_journey_states"))) {
                        if let Some(state) = JourneyStateReached::from_node_guideline_id(&id) {
                            seen.journey_states.push(state);
                        }
                    }
                }
            }
            _ => {}
        }
    }
    seen.journey_states.dedup();
    for state in &seen.journey_states {
        if state.state == guidepost_core::journey::END_STATE && !seen.journeys_completed.contains(&state.journey) {
            seen.journeys_completed.push(state.journey.clone());
        }
    }
    turn.observations = any_status.then_some(seen);
    Ok(turn)
}

#[async_trait]
impl AgentUnderTest for ParlantRestAgent {
    async fn start(&mut self, conversation_id: &str) -> Result<(), AgentError> {
        let customer_id = match &self.config.customer_id {
            Some(id) => id.clone(),
            None => {
                let customer =
                    self.post("/customers", json!({"name": format!("Simulated customer {conversation_id}")})).await?;
                customer
                    .get("id")
                    .and_then(Value::as_str)
                    .map(String::from)
                    .ok_or_else(|| AgentError::Protocol("customer without id".into()))?
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
        let deadline = Instant::now() + self.config.turn_timeout;
        let mut cursor = start;
        loop {
            if Instant::now() >= deadline {
                return Err(AgentError::Timeout(self.config.turn_timeout));
            }
            let Some(events) = self.events(&session, cursor, self.config.wait_for_data).await? else {
                continue;
            };
            if let Some(last) = events.iter().filter_map(offset_of).max() {
                cursor = cursor.max(last + 1);
            }
            if events.iter().any(|e| is_turn_end(e) || is_error_status(e)) {
                break;
            }
            if events.is_empty() {
                // A server that answers `[]` instead of 504 must not make us spin.
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        let events = self.events(&session, start, 0).await?.unwrap_or_default();
        self.next_offset = events.iter().filter_map(offset_of).max().map_or(cursor, |o| o + 1);
        turn_from_events(&events)
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
