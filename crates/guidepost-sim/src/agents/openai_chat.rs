//! A model with a system prompt as the agent under test, behind any [`ChatModel`]: an
//! OpenAI-compatible endpoint (`OpenAiChat::compatible`), a hosted provider, or a whole
//! [`ModelStack`](guidepost_llm::ModelStack) so the agent's calls are recorded and replayed
//! like the simulator's. The adapter keeps the conversation and sends it whole every turn.

use std::sync::Arc;

use async_trait::async_trait;
use guidepost_llm::providers::openai_compat::OpenAiChat;
use guidepost_llm::{ChatModel, ChatRequest, TaskKind, UsageLedger};

use crate::agents::{AgentFactory, AgentTurn, AgentUnderTest};
use crate::error::AgentError;

/// The task kind of the agent's calls (names its recordings and usage).
pub fn agent_task() -> TaskKind {
    TaskKind::Other("agent_under_test".to_string())
}

/// A chat model playing the agent.
#[derive(Debug)]
pub struct ChatModelAgent {
    model: Arc<dyn ChatModel>,
    system_prompt: String,
    temperature: Option<f32>,
    history: Vec<(bool, String)>,
    ledger: Option<UsageLedger>,
}

impl ChatModelAgent {
    /// An agent answering through `model` with `system_prompt`.
    pub fn new(model: Arc<dyn ChatModel>, system_prompt: impl Into<String>) -> Self {
        Self { model, system_prompt: system_prompt.into(), temperature: Some(0.0), history: Vec::new(), ledger: None }
    }

    /// Sets the sampling temperature (`None`: provider default).
    pub fn temperature(mut self, temperature: Option<f32>) -> Self {
        self.temperature = temperature;
        self
    }

    fn request(&self) -> ChatRequest {
        let mut req = ChatRequest::new(agent_task()).system(self.system_prompt.clone());
        for (is_agent, text) in &self.history {
            req = if *is_agent { req.assistant(text.clone()) } else { req.user(text.clone()) };
        }
        if let Some(t) = self.temperature {
            req = req.temperature(t);
        }
        if let Some(ledger) = &self.ledger {
            req = req.ledger(ledger.clone());
        }
        req
    }
}

#[async_trait]
impl AgentUnderTest for ChatModelAgent {
    async fn reply(&mut self, customer_message: &str) -> Result<AgentTurn, AgentError> {
        self.history.push((false, customer_message.to_string()));
        let response = self.model.complete(self.request()).await?;
        let text = response.output.to_text();
        self.history.push((true, text.clone()));
        Ok(AgentTurn { usage: Some(response.usage), ..AgentTurn::text([text]) })
    }

    async fn inject_agent_message(&mut self, text: &str) -> Result<(), AgentError> {
        self.history.push((true, text.to_string()));
        Ok(())
    }
}

/// Makes [`ChatModelAgent`]s sharing one model.
#[derive(Debug, Clone)]
pub struct ChatModelAgentFactory {
    model: Arc<dyn ChatModel>,
    system_prompt: String,
    provider: String,
}

impl ChatModelAgentFactory {
    /// Agents answering through `model` (its middleware applies: record/replay, limits ...).
    pub fn new(model: Arc<dyn ChatModel>, system_prompt: impl Into<String>) -> Self {
        let provider = model.model_id().to_string();
        Self { model, system_prompt: system_prompt.into(), provider }
    }

    /// Agents behind an OpenAI-compatible endpoint (`base_url` up to `/v1`), without middleware.
    pub fn openai_compatible(
        base_url: &str,
        model: &str,
        api_key: Option<String>,
        system_prompt: impl Into<String>,
    ) -> Self {
        let mut chat = OpenAiChat::compatible(base_url, model);
        if let Some(key) = api_key {
            chat = chat.with_api_key(key);
        }
        let model: Arc<dyn ChatModel> = Arc::new(chat);
        Self { model, system_prompt: system_prompt.into(), provider: base_url.to_string() }
    }
}

#[async_trait]
impl AgentFactory for ChatModelAgentFactory {
    fn describe(&self) -> String {
        format!("chat model {}", self.model.model_id())
    }

    fn provider_key(&self) -> String {
        self.provider.clone()
    }

    async fn create(&self) -> Result<Box<dyn AgentUnderTest>, AgentError> {
        Ok(Box::new(ChatModelAgent::new(Arc::clone(&self.model), self.system_prompt.clone())))
    }
}
