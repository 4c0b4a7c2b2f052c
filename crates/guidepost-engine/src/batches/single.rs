//! Single checks: one condition per call, answered `yes` or `no`.
//!
//! A small model asked to judge several conditions at once answers them alike (all true, or
//! all false), whatever each says. Asked about one statement at a time, after a worked
//! example of literal reading, it tells them apart far more often; and since every call of a
//! turn shares the same instructions, agent and conversation, a model that keeps the prompt
//! prefix of its previous call (the local models do) reads only the statement anew and
//! writes a single word.

use serde::Serialize;

use super::{CallOutcome, LocalVerdict, call_weighed};
use crate::error::BatchError;
use crate::prompt::{ConversationView, PromptItem, RenderedPrompt, render};
use guidepost_llm::{ChatModel, TaskKind, TokenDecision, Usage};

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
    /// The customer's latest message, quoted again just before the statement: a small model
    /// reads the statement against it rather than against the agent's own words.
    latest: Option<&'a str>,
    /// The instructions in Chinese, for a statement written in Chinese.
    chinese: bool,
    /// Ask whether the statement holds in the latest message alone.
    anew: bool,
}

/// How a single check is asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Asked {
    /// Whether the statement holds as of the latest message.
    #[default]
    Now,
    /// Whether it holds in the latest message alone, not only earlier (for a guideline
    /// already followed, which applies again only when its condition arises anew).
    Anew,
}

/// Renders the prompt asking about `item`.
///
/// The instructions are given in the statement's language where Guidepost has them in it
/// (English, and Chinese): measured on the embedded local model, Chinese statements under English
/// instructions were judged no better than chance (AUC 0.50 on 132 labelled checks), and 0.83
/// under Chinese ones.
pub fn render_single(
    item: &PromptItem,
    conversation: &ConversationView,
    asked: Asked,
) -> Result<RenderedPrompt, BatchError> {
    let latest = conversation.latest_customer_message();
    let chinese = writes_chinese(&item.condition);
    render("single.j2", &SingleContext { conversation, item, latest, chinese, anew: asked == Asked::Anew })
}

/// The statement a single check's per-turn prompt asks about (in either language), without
/// its closing colon: what a scripted test model answers on.
pub fn statement_of(user: &str) -> Option<&str> {
    let (_, rest) = user.rsplit_once("Statement:\n- ").or_else(|| user.rsplit_once("陈述：\n- "))?;
    Some(rest.trim_end().trim_end_matches([':', '：']))
}

/// Whether `text` is written in Chinese: Han characters weigh more than the other letters
/// (one Han character counts as two: it is usually a syllable, often a word), and there is
/// no kana or hangul (Japanese and Korean use Han characters too). A Chinese name in an
/// English sentence leaves it English.
pub fn writes_chinese(text: &str) -> bool {
    let han = crate::touched::is_han;
    let kana_or_hangul = |c: char| matches!(c as u32, 0x3040..=0x30FF | 0x1100..=0x11FF | 0xAC00..=0xD7AF);
    if text.chars().any(kana_or_hangul) {
        return false;
    }
    let han_count = text.chars().filter(|c| han(*c)).count();
    let other_letters = text.chars().filter(|c| c.is_alphabetic() && !han(*c)).count();
    han_count > 0 && han_count * 2 > other_letters
}

/// How a batch of single checks is asked.
#[derive(Debug, Clone, PartialEq)]
pub struct Ask {
    /// The engine task the calls serve (guideline matching, or a journey's transitions).
    pub task: TaskKind,
    /// What each statement is asked about.
    pub asked: Asked,
    /// Sampling temperature.
    pub temperature: f32,
    /// The probability of "yes" from which an answer counts as yes, when the model reports
    /// how likely its answers were; `None` takes the model's declared
    /// [`verdict_threshold`](guidepost_llm::ModelCapabilities::verdict_threshold).
    pub threshold: Option<f32>,
}

/// Asks about each item in turn (in order, so a model's prompt-prefix cache is reused) and
/// returns the verdicts by local id, with the calls' usage summed. A call that fails fails
/// the batch: a partial set of verdicts would read as "does not apply" for the rest.
///
/// A model that reports how likely "yes" and "no" were is held to the threshold: the
/// verdict is yes only when "yes" was at least that likely, and the rationale gives the
/// probability. Otherwise the answer is taken as given.
pub async fn evaluate(
    model: &dyn ChatModel,
    ask: &Ask,
    items: &[PromptItem],
    conversation: &ConversationView,
) -> CallOutcome<Vec<LocalVerdict>> {
    let threshold = ask.threshold.unwrap_or_else(|| model.capabilities().verdict_threshold);
    let mut verdicts = Vec::with_capacity(items.len());
    let mut usage: Option<Usage> = None;
    let mut estimated_tokens = 0;
    for item in items {
        let prompt = render_single(item, conversation, ask.asked);
        let schema = (SCHEMA_NAME.to_string(), answer_schema());
        let outcome = call_weighed::<String>(model, ask.task.clone(), prompt, ask.temperature, schema).await;
        estimated_tokens += outcome.estimated_tokens;
        if let Some(u) = &outcome.usage {
            Usage::sum_into(&mut usage, u);
        }
        match outcome.answer {
            Ok((answer, decisions)) => verdicts.push(weigh(&item.id, &answer, &decisions, threshold)),
            Err(e) => return CallOutcome { answer: Err(e), usage, estimated_tokens },
        }
    }
    CallOutcome { answer: Ok(verdicts), usage, estimated_tokens }
}

/// The verdict on item `id` from the answer and, when reported, how likely "yes" was.
fn weigh(id: &str, answer: &str, decisions: &[TokenDecision], threshold: f32) -> LocalVerdict {
    match guidepost_llm::odds(decisions, "yes", "no") {
        Some(yes) => LocalVerdict {
            id: id.to_string(),
            applies: yes >= threshold,
            rationale: Some(format!("p(yes) {yes:.2}, yes from {threshold:.2}")),
            probability: Some(yes),
        },
        None => LocalVerdict {
            id: id.to_string(),
            applies: answer.trim().eq_ignore_ascii_case("yes"),
            rationale: None,
            probability: None,
        },
    }
}
