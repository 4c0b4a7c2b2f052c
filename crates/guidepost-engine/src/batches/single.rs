//! Single checks: one condition per call, answered `yes` or `no`.
//!
//! A small model asked to judge several conditions at once answers them alike (all true, or
//! all false), whatever each says. Asked about one statement at a time, after a worked
//! example of literal reading, it tells them apart far more often; and since every call of a
//! turn shares the same instructions, agent and conversation, a model that keeps the prompt
//! prefix of its previous call (the local models do) reads only the statement anew and
//! writes a single word.

use futures::future::join_all;
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
    /// The statement asked about (none for a choice).
    item: Option<&'a PromptItem>,
    /// For a choice: the question ([`CHOICE_QUESTION`] in the statements' language) and the
    /// statements, in the order asked, one of which is to be named.
    question: Option<&'a str>,
    choices: Vec<&'a str>,
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
    let anew = asked == Asked::Anew;
    let context =
        SingleContext { conversation, item: Some(item), question: None, choices: Vec::new(), latest, chinese, anew };
    render("single.j2", &context)
}

/// The requests whose beginning every single check of a conversation shares, read ahead
/// ([`ChatModel::read_ahead`]) while the customer writes: the instructions, the worked
/// example, the agent and `conversation` as it stands (none yet where a conversation opens;
/// the reply just sent, after a turn), once for each language among `conditions` (a
/// statement is asked under instructions in its own language, see [`render_single`]). A
/// model that keeps prompt prefixes then reads only the customer's new message and the
/// statement at the next check.
pub fn read_ahead_requests<'c>(
    conditions: impl IntoIterator<Item = &'c str>,
    conversation: &ConversationView,
    task: &TaskKind,
    temperature: f32,
) -> Result<Vec<guidepost_llm::ChatRequest>, BatchError> {
    let (mut chinese, mut other) = (false, false);
    for condition in conditions {
        if writes_chinese(condition) {
            chinese = true;
        } else {
            other = true;
        }
    }
    let languages = [(other, "The customer asks a question"), (chinese, "顾客提了一个问题")];
    let mut requests = Vec::new();
    for (_, statement) in languages.into_iter().filter(|(used, _)| *used) {
        let item = PromptItem::statement("1", statement);
        let prompt = render_single(&item, conversation, Asked::Now)?;
        requests.push(super::weighed_request(task.clone(), prompt, temperature, (SCHEMA_NAME.into(), answer_schema())));
    }
    Ok(requests)
}

/// Renders the prompt asking which of `statements` is true (numbered from 1, in this
/// order): the single check's instructions and conversation, with a numbered list in place
/// of the statement.
pub fn render_choice(statements: &[&str], conversation: &ConversationView) -> Result<RenderedPrompt, BatchError> {
    let latest = conversation.latest_customer_message();
    let chinese = writes_chinese(&statements.concat());
    let question = Some(if chinese { CHOICE_QUESTION_ZH } else { CHOICE_QUESTION });
    let choices = statements.to_vec();
    render("single.j2", &SingleContext { conversation, item: None, question, choices, latest, chinese, anew: false })
}

/// The statements a choice prompt lists, in the order asked: what a scripted test model
/// answers on (with the number of the one it picks, from 1).
pub fn choices_of(user: &str) -> Option<Vec<&str>> {
    let (_, rest) = user.rsplit_once(CHOICE_QUESTION).or_else(|| user.rsplit_once(CHOICE_QUESTION_ZH))?;
    let listed: Vec<&str> = rest
        .lines()
        .filter_map(|line| line.split_once(". ").filter(|(n, _)| n.parse::<usize>().is_ok()).map(|(_, text)| text))
        .collect();
    (!listed.is_empty()).then_some(listed)
}

/// The question a choice prompt asks, in English and in Chinese.
const CHOICE_QUESTION: &str = "Which one of these statements is true?";
const CHOICE_QUESTION_ZH: &str = "下面哪一条陈述成立？";

/// The schema name of a choice's answer.
pub const CHOICE_SCHEMA_NAME: &str = "Choice";

/// The most statements a choice offers: each is named by one digit.
pub const MAX_CHOICES: usize = 9;

/// Asks which one of `statements` is true, once in their order and once in reverse, and
/// returns how likely each is, averaged over the two askings. With `last_stays`, the last
/// statement (a "none of the above") stays last in both. A small model favours a
/// position in a list; asked both ways, that preference cancels out (one statement with a
/// last "none of these" is asked once: both orders are the same). A model that reports
/// no odds counts its pick as certain. Two statements at least and [`MAX_CHOICES`] at most.
///
/// Asked one at a time, a statement a small model reads as about the customer can be
/// denied when it is about something else: after a weather lookup that failed, the local
/// model answered no to both "the lookup returned the weather" and "the lookup failed"
/// (p(yes) 0.08 and 0.06). Asked which of the two is true, it named the failure (0.88 and
/// 0.66 in the two orders), and the successful lookups right as well.
pub async fn choose(
    model: &dyn ChatModel,
    task: TaskKind,
    temperature: f32,
    statements: &[&str],
    last_stays: bool,
    conversation: &ConversationView,
) -> CallOutcome<Vec<f32>> {
    let n = statements.len();
    if !(2..=MAX_CHOICES).contains(&n) {
        let error = BatchError::Prompt(format!("a choice needs 2 to {MAX_CHOICES} statements, not {n}"));
        return CallOutcome { answer: Err(error), usage: None, estimated_tokens: 0 };
    }
    let mut totals = vec![0f32; n];
    let mut usage: Option<Usage> = None;
    let mut estimated_tokens = 0;
    let labels: Vec<String> = (1..=n).map(|k| k.to_string()).collect();
    let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
    let schema = serde_json::json!({"type": "string", "enum": labels});
    let reversed: Vec<usize> =
        if last_stays { (0..n - 1).rev().chain(std::iter::once(n - 1)).collect() } else { (0..n).rev().collect() };
    let natural: Vec<usize> = (0..n).collect();
    // One statement and "none of these" read the same both ways: asked once.
    let orders: Vec<Vec<usize>> = if reversed == natural { vec![natural] } else { vec![natural, reversed] };
    // Both orders are asked at once (see [`evaluate`]).
    let calls = orders.iter().map(|order| {
        let asked: Vec<&str> = order.iter().map(|&i| statements[i]).collect();
        let prompt = render_choice(&asked, conversation);
        let schema = (CHOICE_SCHEMA_NAME.to_string(), schema.clone());
        call_weighed::<String>(model, task.clone(), prompt, temperature, schema)
    });
    let outcomes = join_all(calls).await;
    let mut failed = None;
    for (order, outcome) in orders.iter().zip(outcomes) {
        estimated_tokens += outcome.estimated_tokens;
        if let Some(u) = &outcome.usage {
            Usage::sum_into(&mut usage, u);
        }
        let (answer, decisions) = match outcome.answer {
            Ok(answer) => answer,
            Err(e) => {
                failed = failed.or(Some(e));
                continue;
            }
        };
        let picked = answer.trim().parse::<usize>().ok().filter(|k| (1..=n).contains(k));
        let odds = guidepost_llm::label_odds(&decisions, &labels);
        for (position, &statement) in order.iter().enumerate() {
            totals[statement] += match &odds {
                Some(p) => p[position],
                None => f32::from(u8::from(picked == Some(position + 1))),
            };
        }
    }
    if let Some(e) = failed {
        return CallOutcome { answer: Err(e), usage, estimated_tokens };
    }
    let probabilities = totals.into_iter().map(|t| t / orders.len() as f32).collect();
    CallOutcome { answer: Ok(probabilities), usage, estimated_tokens }
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
    /// Ask each statement in both polarities (it, then "it is not true that" it) and weigh the
    /// two answers together: how likely "yes" is becomes the mean of p(yes) to the statement
    /// and p(no) to its negation.
    pub both_ways: bool,
}

/// `statement` negated, for a check asked both ways: "It is not true that the customer
/// asks about refunds", "并非用户想知道天气".
pub fn negated(statement: &str) -> String {
    if writes_chinese(statement) {
        return format!("并非{statement}");
    }
    let mut chars = statement.chars();
    let lowered = match (chars.next(), chars.clone().next()) {
        // "The customer ..." reads on lowercased; "API ..." or "I ..." keeps its capital.
        (Some(first), Some(second)) if first.is_uppercase() && !second.is_uppercase() && second != ' ' => {
            first.to_lowercase().chain(chars).collect()
        }
        _ => statement.to_string(),
    };
    format!("It is not true that {lowered}")
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
    // Every statement (and negation) is asked at once: a model that keeps prompt prefixes
    // can read the questions waiting for it side by side, in one pass.
    let asked_per_item: Vec<Vec<PromptItem>> = items
        .iter()
        .map(|item| {
            let mut asked = vec![item.clone()];
            if ask.both_ways {
                // The negation's examples hold where the statement's do not.
                let examples = item
                    .examples
                    .iter()
                    .map(|e| guidepost_core::GuidelineExample { message: e.message.clone(), applies: !e.applies })
                    .collect();
                asked.push(PromptItem { condition: negated(&item.condition), examples, ..item.clone() });
            }
            asked
        })
        .collect();
    let calls = asked_per_item.iter().flatten().map(|asked| {
        let prompt = render_single(asked, conversation, ask.asked);
        let schema = (SCHEMA_NAME.to_string(), answer_schema());
        call_weighed::<String>(model, ask.task.clone(), prompt, ask.temperature, schema)
    });
    let mut outcomes = join_all(calls).await.into_iter();
    let mut usage: Option<Usage> = None;
    let mut estimated_tokens = 0;
    let mut verdicts = Vec::with_capacity(items.len());
    let mut failed = None;
    for (item, asked) in items.iter().zip(&asked_per_item) {
        let mut answers = Vec::with_capacity(asked.len());
        for outcome in outcomes.by_ref().take(asked.len()) {
            estimated_tokens += outcome.estimated_tokens;
            if let Some(u) = &outcome.usage {
                Usage::sum_into(&mut usage, u);
            }
            match outcome.answer {
                Ok((answer, decisions)) => answers.push(yes_odds(&answer, &decisions)),
                Err(e) => failed = failed.or(Some(e)),
            }
        }
        verdicts.push(weigh(&item.id, &answers, threshold));
    }
    match failed {
        Some(e) => CallOutcome { answer: Err(e), usage, estimated_tokens },
        None => CallOutcome { answer: Ok(verdicts), usage, estimated_tokens },
    }
}

/// How likely "yes" was, and whether the model reported it (else the answer counts as
/// certain).
fn yes_odds(answer: &str, decisions: &[TokenDecision]) -> (f32, bool) {
    match guidepost_llm::odds(decisions, "yes", "no") {
        Some(yes) => (yes, true),
        None => (if answer.trim().eq_ignore_ascii_case("yes") { 1.0 } else { 0.0 }, false),
    }
}

/// The verdict on item `id` from its answers: the statement's, and its negation's when asked
/// both ways (its "no" weighs for the statement). Held to `threshold` when the model reported
/// how likely its answers were; otherwise a single answer is taken as given.
fn weigh(id: &str, answers: &[(f32, bool)], threshold: f32) -> LocalVerdict {
    let reported = answers.iter().all(|(_, reported)| *reported);
    let p = match answers {
        [(yes, _), (negated_yes, _)] => (yes + (1.0 - negated_yes)) / 2.0,
        [(yes, _), ..] => *yes,
        [] => 0.0,
    };
    if !reported && answers.len() == 1 {
        return LocalVerdict { id: id.to_string(), applies: p >= 0.5, rationale: None, probability: None };
    }
    let applies = p >= threshold;
    let verdict = if applies { "yes" } else { "no" };
    let rationale = match answers {
        [(yes, _), (negated_yes, _)] => {
            format!("{verdict}: p(yes) {p:.2} (asked {yes:.2}, its negation {negated_yes:.2}), yes from {threshold:.2}")
        }
        _ => format!("{verdict}: p(yes) {p:.2}, yes from {threshold:.2}"),
    };
    LocalVerdict { id: id.to_string(), applies, rationale: Some(rationale), probability: reported.then_some(p) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_statements_of_one_evaluation_are_asked_at_once() {
        let scripted = guidepost_llm::providers::scripted::ScriptedModel::new().on(TaskKind::Matching, |req| {
            let statement = statement_of(req.last_user_message()).unwrap_or_default();
            let holds = statement.contains("refund") != statement.contains("not true");
            Ok(serde_json::json!(if holds { "yes" } else { "no" }))
        });
        let model = guidepost_testkit::models::InFlight::new(std::sync::Arc::new(scripted), |_| true);
        let items = [
            PromptItem::statement("1", "The customer asks for a refund"),
            PromptItem::statement("2", "The customer is angry"),
            PromptItem::statement("3", "The customer names a product"),
        ];
        let conversation = conversation_of("Penny");
        let ask =
            Ask { task: TaskKind::Matching, asked: Asked::Now, temperature: 0.0, threshold: None, both_ways: true };
        let outcome = evaluate(&model, &ask, &items, &conversation).await;
        let verdicts = outcome.answer.unwrap();
        // Answers come back in the order asked, each weighed with its negation's.
        let applies: Vec<(&str, bool)> = verdicts.iter().map(|v| (v.id.as_str(), v.applies)).collect();
        assert_eq!(applies, vec![("1", true), ("2", false), ("3", false)]);
        assert_eq!(outcome.usage.map(|u| u.calls), Some(6));
        // Three statements, each asked both ways: all six calls were in flight together.
        assert_eq!(model.most_in_flight(), 6);
    }

    /// The empty conversation of an agent named `name`.
    fn conversation_of(name: &str) -> ConversationView {
        let source = format!("agent: {{ name: {name} }}");
        let definition =
            guidepost_core::definition::load_agent(&[guidepost_core::definition::SourceFile::new("a.yaml", &source)])
                .definition
                .unwrap();
        let ctx = crate::MatchingContext::new(Vec::new(), Default::default());
        ConversationView::build(&std::sync::Arc::new(definition), &ctx, 4)
    }

    #[test]
    fn the_choice_prompt_lists_the_statements_in_the_order_asked() {
        let conversation = conversation_of("小天");
        let prompt = render_choice(&["天气工具返回了天气", "天气工具查询失败"], &conversation).unwrap();
        assert_eq!(choices_of(&prompt.user), Some(vec!["天气工具返回了天气", "天气工具查询失败"]));
        assert!(prompt.user.contains("下面哪一条陈述成立？"), "{}", prompt.user);
        let english = render_choice(&["The lookup failed", "The lookup found it"], &conversation).unwrap();
        assert_eq!(choices_of(&english.user), Some(vec!["The lookup failed", "The lookup found it"]));
    }
}
