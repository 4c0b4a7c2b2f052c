//! The judge model: decides whether a step's milestone was accomplished when the agent does not
//! report engine state (or the step asks for a judgement).

use std::sync::Arc;

use guidepost_llm::{ChatModel, ChatRequest, LlmError, TaskKind, UsageLedger, generate};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::prompts::render;
use crate::steps::StepDefinition;
use crate::trajectory::StepTrace;
use crate::transcript::render_conversation;

/// The judge's structured answer (reasoning before the verdict).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StepJudgement {
    /// Why.
    pub reasoning: String,
    /// Whether the milestone was accomplished.
    pub satisfied: bool,
}

/// The judge.
#[derive(Debug, Clone)]
pub struct Judge {
    model: Arc<dyn ChatModel>,
    ledger: UsageLedger,
    budget_chars: usize,
}

impl Judge {
    /// A judge answering through `model`, recording usage in `ledger`.
    pub fn new(model: Arc<dyn ChatModel>, ledger: UsageLedger) -> Self {
        Self { model, ledger, budget_chars: 16_000 }
    }

    /// The request judging `step` (exposed for prompt snapshots).
    pub fn request(&self, step: &StepDefinition, traces: &[StepTrace], preamble: &[String]) -> ChatRequest {
        let criterion = step.satisfaction.judge.clone().unwrap_or_else(|| step.instruction.clone());
        let prompt = render(
            "judge_step",
            json!({
                "criterion": criterion,
                "hints": step.hints,
                "conversation": render_conversation(traces, preamble, self.budget_chars),
            }),
        );
        ChatRequest::new(TaskKind::Judge).user(prompt).temperature(0.0)
    }

    /// Judges whether `step` is accomplished by the conversation so far.
    pub async fn step_satisfied(
        &self,
        step: &StepDefinition,
        traces: &[StepTrace],
        preamble: &[String],
    ) -> Result<StepJudgement, LlmError> {
        let req = self.request(step, traces, preamble);
        let (judgement, usage) = generate::<StepJudgement>(self.model.as_ref(), req).await?;
        self.ledger.record(&TaskKind::Judge, &usage);
        Ok(judgement)
    }
}
