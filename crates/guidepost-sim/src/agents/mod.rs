//! The agents a simulation drives, behind one trait: [`AgentUnderTest`].
//!
//! - [`parlant_rest`]: any server speaking the Parlant REST API (Parlant, Guidepost's server);
//! - [`openai_chat`]: a model with a system prompt behind any OpenAI-compatible endpoint;
//! - [`jsonl_command`]: a command speaking JSON lines on stdin/stdout;
//! - [`in_process`]: a Guidepost engine in the same process (the trait it implements).
//!
//! Every kind answers a customer message with an [`AgentTurn`]: an ordered list of
//! [`TurnItem`]s (messages, preambles, tool calls in one form, [`ToolCallRecord`]).

pub mod in_process;
pub mod jsonl_command;
pub mod openai_chat;
pub mod parlant_events;
pub mod parlant_rest;
mod turn;

pub use turn::{AgentTurn, ToolCallRecord, TurnItem};

use async_trait::async_trait;

use crate::error::AgentError;
use crate::scenario::Scenario;

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

    /// Ends the conversation: closes sessions, deletes what the agent created on a server,
    /// stops processes. Called once per run however it ended (also when [`start`](Self::start)
    /// failed half-way); an error is kept in the run's result as its cleanup error.
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
