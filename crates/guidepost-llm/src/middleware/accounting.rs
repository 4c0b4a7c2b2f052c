//! Usage accounting: every answer's usage is recorded in the request's ledger (turn, and
//! through it the session) and in the stack's own ledger, and traced; every call that ends
//! counts in the [progress](crate::progress) of the turn that made it.

use async_trait::async_trait;
use futures::StreamExt;

use crate::error::LlmError;
use crate::ports::{ChatModel, TextStream};
use crate::request::{ChatRequest, ChatResponse, StreamEvent, TaskKind};
use crate::usage::{CallInProgress, Usage, UsageLedger};

/// Records usage after each answer. Outermost layer of a stack, so it sees the cache's answers
/// too (a replayed answer is recorded with the usage of its recording).
#[derive(Debug)]
pub struct Accounting<M> {
    inner: M,
    ledger: Option<UsageLedger>,
}

impl<M> Accounting<M> {
    /// Wraps `inner`; `ledger`, if any, receives every call besides the request's own ledger.
    pub fn new(inner: M, ledger: Option<UsageLedger>) -> Self {
        Self { inner, ledger }
    }
}

fn record(task: &TaskKind, usage: &Usage, request_ledger: Option<&UsageLedger>, own: Option<&UsageLedger>) {
    tracing::debug!(
        task = %task,
        model = %usage.model,
        prompt_tokens = usage.prompt_tokens,
        completion_tokens = usage.completion_tokens,
        cached_tokens = usage.cached_tokens,
        latency_ms = usage.latency.as_millis() as u64,
        calls = usage.calls,
        "model call"
    );
    if let Some(ledger) = request_ledger {
        ledger.record(task, usage);
    }
    if let Some(ledger) = own {
        ledger.record(task, usage);
    }
}

/// Marks a call as in flight in the request's ledger and the stack's own.
fn in_flight(task: &TaskKind, request_ledger: Option<&UsageLedger>, own: Option<&UsageLedger>) -> Vec<CallInProgress> {
    request_ledger.into_iter().chain(own).map(|l| l.start_call(task)).collect()
}

#[async_trait]
impl<M: ChatModel> ChatModel for Accounting<M> {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }
    fn capabilities(&self) -> crate::ModelCapabilities {
        self.inner.capabilities()
    }

    async fn read_ahead(&self, req: ChatRequest) -> Result<bool, LlmError> {
        self.inner.read_ahead(req).await
    }
    fn reads_ahead(&self) -> bool {
        self.inner.reads_ahead()
    }

    async fn complete(&self, req: ChatRequest) -> Result<ChatResponse, LlmError> {
        let task = req.task.clone();
        let ledger = req.ledger.clone();
        let _in_flight = in_flight(&task, ledger.as_ref(), self.ledger.as_ref());
        let meter = crate::progress::current();
        let response = self.inner.complete(req).await;
        if let Some(meter) = meter {
            meter.call_ended();
        }
        let response = response?;
        record(&task, &response.usage, ledger.as_ref(), self.ledger.as_ref());
        Ok(response)
    }

    async fn stream(&self, req: ChatRequest) -> Result<TextStream, LlmError> {
        let task = req.task.clone();
        let ledger = req.ledger.clone();
        let own = self.ledger.clone();
        let mut calls = in_flight(&task, ledger.as_ref(), own.as_ref());
        let meter = crate::progress::current();
        let inner = self.inner.stream(req).await.inspect_err(|_| {
            if let Some(meter) = &meter {
                meter.call_ended();
            }
        })?;
        // In flight until the answer is complete (or the stream is dropped).
        Ok(Box::pin(inner.inspect(move |item| {
            if let Ok(StreamEvent::Done(response)) = item {
                calls.clear();
                if let Some(meter) = &meter {
                    meter.call_ended();
                }
                record(&task, &response.usage, ledger.as_ref(), own.as_ref());
            }
        })))
    }
}
