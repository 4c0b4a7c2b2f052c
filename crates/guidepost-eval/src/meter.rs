//! Every model request a case makes, one by one: a check batch of single questions is many
//! requests, and each is counted with its own latency and tokens.

use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use guidepost_llm::{ChatModel, ChatRequest, ChatResponse, LlmError, ModelCapabilities, TaskKind};

use crate::run::Call;

/// The requests of one case run, as [`Metered`] models record them.
#[derive(Debug, Clone, Default)]
pub(crate) struct Requests(Arc<Mutex<Vec<Call>>>);

impl Requests {
    /// The requests recorded so far, in the order they were answered.
    pub fn taken(&self) -> Vec<Call> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }

    fn push(&self, call: Call) {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).push(call);
    }
}

/// A model whose answered requests are recorded, for `case`.
pub(crate) struct Metered {
    inner: Arc<dyn ChatModel>,
    case: String,
    requests: Requests,
}

impl Metered {
    /// `inner`, recording into `requests` under `case`.
    pub fn wrap(inner: Arc<dyn ChatModel>, case: &str, requests: &Requests) -> Arc<dyn ChatModel> {
        Arc::new(Self { inner, case: case.to_string(), requests: requests.clone() })
    }
}

/// The name reports give a task.
pub(crate) fn task_name(task: &TaskKind) -> String {
    match task {
        TaskKind::Matching => "matching".into(),
        TaskKind::JourneySelection => "journey".into(),
        TaskKind::ToolInference => "tool".into(),
        other => other.as_str().to_string(),
    }
}

#[async_trait]
impl ChatModel for Metered {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }

    fn capabilities(&self) -> ModelCapabilities {
        self.inner.capabilities()
    }

    async fn read_ahead(&self, req: ChatRequest) -> Result<bool, LlmError> {
        self.inner.read_ahead(req).await
    }
    fn reads_ahead(&self) -> bool {
        self.inner.reads_ahead()
    }

    async fn complete(&self, req: ChatRequest) -> Result<ChatResponse, LlmError> {
        let task = task_name(&req.task);
        let response = self.inner.complete(req).await?;
        let usage = &response.usage;
        self.requests.push(Call {
            case: self.case.clone(),
            task,
            prompt_tokens: usage.prompt_tokens,
            completion_tokens: usage.completion_tokens,
            cached_tokens: usage.cached_tokens,
            latency_ms: usage.latency.as_secs_f64() * 1000.0,
        });
        Ok(response)
    }

    fn needs_warm_up(&self) -> bool {
        self.inner.needs_warm_up()
    }

    async fn warm_up(&self) -> Result<(), LlmError> {
        self.inner.warm_up().await
    }
}
