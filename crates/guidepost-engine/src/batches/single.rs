//! Single checks: one condition per call, answered `yes` or `no`.
//!
//! A small model asked to judge several conditions at once answers them alike (all true, or
//! all false), whatever each says. Asked about one statement at a time, after a worked
//! example of literal reading, it tells them apart far more often; and since every call of a
//! turn shares the same instructions, agent and conversation, a model that keeps the prompt
//! prefix of its previous call (the local models do) reads only the statement anew and
//! writes a single word.

use serde::Serialize;

use super::{CallOutcome, LocalVerdict, call_with_schema};
use crate::error::BatchError;
use crate::prompt::{ConversationView, PromptItem, RenderedPrompt, render};
use guidepost_llm::{ChatModel, TaskKind, Usage};

/// The schema name of a single-check answer.
pub const SCHEMA_NAME: &str = "Verdict";

/// The answer schema: `"yes"` or `"no"`.
pub fn answer_schema() -> serde_json::Value {
    serde_json::json!({"type": "string", "enum": ["yes", "no"]})
}

#[derive(Serialize)]
struct SingleContext<'a> {
    conversation: &'a ConversationView,
    item: &'a PromptItem,
}

/// Renders the prompt asking about `item`.
pub fn render_single(item: &PromptItem, conversation: &ConversationView) -> Result<RenderedPrompt, BatchError> {
    render("single.j2", &SingleContext { conversation, item })
}

/// Asks about each item in turn as `task` (guideline matching, or the transitions of a
/// journey) (in order, so a model's prompt-prefix cache is reused) and
/// returns the verdicts by local id, with the calls' usage summed. A call that fails fails
/// the batch: a partial set of verdicts would read as "does not apply" for the rest.
pub async fn evaluate(
    model: &dyn ChatModel,
    task: TaskKind,
    items: &[PromptItem],
    conversation: &ConversationView,
    temperature: f32,
) -> CallOutcome<Vec<LocalVerdict>> {
    let mut verdicts = Vec::with_capacity(items.len());
    let mut usage: Option<Usage> = None;
    let mut estimated_tokens = 0;
    for item in items {
        let prompt = render_single(item, conversation);
        let schema = (SCHEMA_NAME.to_string(), answer_schema());
        let outcome = call_with_schema::<String>(model, task.clone(), prompt, temperature, schema).await;
        estimated_tokens += outcome.estimated_tokens;
        if let Some(u) = &outcome.usage {
            Usage::sum_into(&mut usage, u);
        }
        match outcome.answer {
            Ok(answer) => verdicts.push(LocalVerdict {
                id: item.id.clone(),
                applies: answer.trim().eq_ignore_ascii_case("yes"),
                rationale: None,
            }),
            Err(e) => return CallOutcome { answer: Err(e), usage, estimated_tokens },
        }
    }
    CallOutcome { answer: Ok(verdicts), usage, estimated_tokens }
}
