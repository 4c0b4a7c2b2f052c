//! The agents a simulation drives, behind one trait: [`AgentUnderTest`].
//!
//! - [`parlant_rest`]: any server speaking the Parlant REST API (Parlant, Guidepost's server);
//! - [`openai_chat`]: a model with a system prompt behind any OpenAI-compatible endpoint;
//! - [`jsonl_command`]: a command speaking JSON lines on stdin/stdout;
//! - [`in_process`]: a Guidepost engine in the same process (the trait it implements).

pub mod in_process;
pub mod jsonl_command;
pub mod openai_chat;
pub mod parlant_rest;

use async_trait::async_trait;
use guidepost_llm::Usage;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::AgentError;
use crate::message::{ContentPart, MessageContent, MessageRole, ModelMessage, ToolOutput};
use crate::observations::EngineObservations;
use crate::scenario::Scenario;

/// A tool call the agent made during a turn, with its result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallRecord {
    /// Call id (generated when the agent gives none).
    #[serde(default)]
    pub id: String,
    /// The tool.
    pub name: String,
    /// The arguments.
    #[serde(default)]
    pub arguments: Value,
    /// The result.
    #[serde(default)]
    pub result: Value,
    /// The error, when the call failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The agent's answer to one customer message.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AgentTurn {
    /// Messages to the customer, in order.
    pub messages: Vec<String>,
    /// Tool calls, in order.
    pub tool_calls: Vec<ToolCallRecord>,
    /// Engine state, when the agent is a Guidepost engine.
    pub observations: Option<EngineObservations>,
    /// Model usage of the agent, when it reports it.
    pub usage: Option<Usage>,
}

impl AgentTurn {
    /// A turn of plain messages.
    pub fn text(messages: impl IntoIterator<Item = impl Into<String>>) -> Self {
        Self { messages: messages.into_iter().map(Into::into).collect(), ..Self::default() }
    }

    /// The turn as AI SDK messages: an assistant message with the tool calls and a tool message
    /// with their results (when there were calls), then one assistant message per text.
    pub fn to_model_messages(&self, turn_index: u32) -> Vec<ModelMessage> {
        let mut out = Vec::new();
        if !self.tool_calls.is_empty() {
            let id = |i: usize, call: &ToolCallRecord| {
                if call.id.is_empty() { format!("call-{turn_index}-{i}") } else { call.id.clone() }
            };
            let calls = self
                .tool_calls
                .iter()
                .enumerate()
                .map(|(i, c)| ContentPart::ToolCall {
                    tool_call_id: id(i, c),
                    tool_name: c.name.clone(),
                    input: c.arguments.clone(),
                })
                .collect();
            let results = self
                .tool_calls
                .iter()
                .enumerate()
                .map(|(i, c)| ContentPart::ToolResult {
                    tool_call_id: id(i, c),
                    tool_name: c.name.clone(),
                    output: match &c.error {
                        Some(e) => ToolOutput::ErrorText(e.clone()),
                        None => ToolOutput::Json(c.result.clone()),
                    },
                })
                .collect();
            out.push(ModelMessage { role: MessageRole::Assistant, content: MessageContent::Parts(calls) });
            out.push(ModelMessage { role: MessageRole::Tool, content: MessageContent::Parts(results) });
        }
        out.extend(self.messages.iter().map(ModelMessage::assistant));
        out
    }
}

/// An agent being tested. One value serves one conversation; [`AgentFactory`] makes one per run.
#[async_trait]
pub trait AgentUnderTest: Send {
    /// Prepares the conversation (create a session, spawn a process ...).
    async fn start(&mut self, _conversation_id: &str) -> Result<(), AgentError> {
        Ok(())
    }

    /// Sends the customer's message and returns everything the agent did in answer.
    async fn reply(&mut self, customer_message: &str) -> Result<AgentTurn, AgentError>;

    /// Puts a line in the agent's mouth without asking the agent (a scripted agent turn), so the
    /// agent's own history matches what the customer saw.
    async fn inject_agent_message(&mut self, _text: &str) -> Result<(), AgentError> {
        Ok(())
    }

    /// Ends the conversation (close sessions, stop processes).
    async fn finish(&mut self) -> Result<(), AgentError> {
        Ok(())
    }
}

/// Makes one [`AgentUnderTest`] per run.
#[async_trait]
pub trait AgentFactory: Send + Sync {
    /// A short description for reports (`parlant-rest http://…`, `command ./agent.sh`).
    fn describe(&self) -> String;

    /// The provider key that concurrency caps apply to (the server or model behind the agent).
    fn provider_key(&self) -> String {
        self.describe()
    }

    /// A fresh agent for one run.
    async fn create(&self) -> Result<Box<dyn AgentUnderTest>, AgentError>;

    /// A fresh agent for one run of `scenario` (an in-process engine runs the scenario's own
    /// agent); the same as [`create`](Self::create) unless the factory cares.
    async fn create_for(&self, scenario: &Scenario) -> Result<Box<dyn AgentUnderTest>, AgentError> {
        let _ = scenario;
        self.create().await
    }
}
