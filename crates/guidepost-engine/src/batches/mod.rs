//! One module per batch kind: its answer schema (reasoning fields before verdicts,
//! unknown fields rejected), its template, and how its answer becomes verdicts.

pub mod conditions;
pub mod direct;
pub mod disambiguation;
pub mod journey_selection;
pub mod low_criticality;
pub mod previously_applied;
pub mod single;

use std::collections::{BTreeMap, HashMap};

use guidepost_llm::{ChatModel, ChatRequest, TaskKind, TokenDecision, Usage};
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::catalog::MatchableGuideline;
use crate::categorize::Category;
use crate::config::VerdictStyle;
use crate::error::BatchError;
use crate::prompt::{ConversationView, PromptItem, RenderedPrompt, render};

/// A verdict on one item of a batch, by local id.
#[derive(Debug, Clone, PartialEq)]
pub struct LocalVerdict {
    /// The local id the prompt used.
    pub id: String,
    /// Whether the guideline applies.
    pub applies: bool,
    /// Why, when the schema asks for it.
    pub rationale: Option<String>,
    /// How likely the model found "yes", when it reports it (single checks).
    pub probability: Option<f32>,
}

/// An answer schema that yields per-item verdicts.
pub trait CheckAnswer: DeserializeOwned + JsonSchema {
    /// The verdicts in the answer.
    fn verdicts(self) -> Vec<LocalVerdict>;
}

/// A verdict mapped back to its guideline.
#[derive(Debug, Clone, PartialEq)]
pub struct GuidelineVerdict {
    /// Guideline id.
    pub guideline_id: String,
    /// Whether it applies.
    pub applies: bool,
    /// Why.
    pub rationale: Option<String>,
    /// How likely the model found "yes", when it reports it.
    pub probability: Option<f32>,
}

/// The outcome of one model call.
#[derive(Debug, Clone)]
pub struct CallOutcome<T> {
    /// The typed answer, or why there is none.
    pub answer: Result<T, BatchError>,
    /// Usage when the call returned.
    pub usage: Option<Usage>,
    /// Estimated prompt tokens.
    pub estimated_tokens: usize,
}

/// Sends `prompt` and parses the answer as `T`.
pub async fn call<T: DeserializeOwned + JsonSchema>(
    model: &dyn ChatModel,
    task: TaskKind,
    prompt: Result<RenderedPrompt, BatchError>,
    temperature: f32,
) -> CallOutcome<T> {
    let schema = (guidepost_llm::schema_name_for::<T>(), guidepost_llm::strict_schema_for::<T>());
    call_with_schema(model, task, prompt, temperature, schema).await
}

/// [`call`] with a schema built for this one call (`(name, schema)`); `T` must deserialize
/// from answers to it.
pub async fn call_with_schema<T: DeserializeOwned>(
    model: &dyn ChatModel,
    task: TaskKind,
    prompt: Result<RenderedPrompt, BatchError>,
    temperature: f32,
    schema: (String, serde_json::Value),
) -> CallOutcome<T> {
    let outcome = call_weighed(model, task, prompt, temperature, schema).await;
    CallOutcome {
        answer: outcome.answer.map(|(answer, _)| answer),
        usage: outcome.usage,
        estimated_tokens: outcome.estimated_tokens,
    }
}

/// [`call_with_schema`], with the answer's token decisions (how likely each option was,
/// where the model reports it).
pub async fn call_weighed<T: DeserializeOwned>(
    model: &dyn ChatModel,
    task: TaskKind,
    prompt: Result<RenderedPrompt, BatchError>,
    temperature: f32,
    (name, schema): (String, serde_json::Value),
) -> CallOutcome<(T, Vec<TokenDecision>)> {
    let prompt = match prompt {
        Ok(p) => p,
        Err(e) => return CallOutcome { answer: Err(e), usage: None, estimated_tokens: 0 },
    };
    let estimated_tokens = prompt.estimated_tokens();
    let req = weighed_request(task, prompt, temperature, (name.clone(), schema.clone()));
    match guidepost_llm::generate_weighed::<T>(model, req, name, schema).await {
        Ok((answer, usage, decisions)) => {
            CallOutcome { answer: Ok((answer, decisions)), usage: Some(usage), estimated_tokens }
        }
        Err(e) => CallOutcome { answer: Err(BatchError::Model(e)), usage: None, estimated_tokens },
    }
}

/// The request [`call_weighed`] sends for `prompt`, its answer held to `schema`.
pub(crate) fn weighed_request(
    task: TaskKind,
    prompt: RenderedPrompt,
    temperature: f32,
    (name, schema): (String, serde_json::Value),
) -> ChatRequest {
    ChatRequest::new(task)
        .system(prompt.system)
        .user(prompt.user)
        .temperature(temperature)
        .output(guidepost_llm::OutputFormat::Json { name, schema, strict: true })
}

/// A schema object with one required boolean per key, in order. Keys read `"[3] <text>"`:
/// the model restates each item it judges (see [`key_number`]).
pub fn boolean_keys_schema(keys: &[String]) -> serde_json::Value {
    let properties: serde_json::Map<String, serde_json::Value> =
        keys.iter().map(|k| (k.clone(), serde_json::json!({"type": "boolean"}))).collect();
    serde_json::json!({"type": "object", "properties": properties, "required": keys, "additionalProperties": false})
}

/// The number a `"[3] <text>"` key starts with (`"3"`).
pub fn key_number(key: &str) -> Option<&str> {
    let rest = key.trim().strip_prefix('[')?;
    rest.split_once(']').map(|(n, _)| n.trim())
}

/// The template context of a guideline-check batch.
#[derive(Serialize)]
struct CheckContext<'a> {
    conversation: &'a ConversationView,
    items: Vec<PromptItem>,
}

/// Local ids `1..n` for `items`, and the prompt items.
pub fn local_items(items: &[&MatchableGuideline]) -> (Vec<PromptItem>, HashMap<String, String>) {
    let mut map = HashMap::new();
    let list = items
        .iter()
        .enumerate()
        .map(|(i, g)| {
            let id = (i + 1).to_string();
            map.insert(id.clone(), g.id.clone());
            PromptItem {
                id,
                condition: g.condition.clone(),
                action: g.action.clone(),
                description: g.description.clone(),
                waits: g.customer_dependent,
                examples: g.examples.clone(),
            }
        })
        .collect();
    (list, map)
}

/// The template of a guideline-check category.
pub fn template_of(category: Category) -> &'static str {
    match category {
        Category::Observational | Category::Actionable => "conditions.j2",
        Category::PreviouslyApplied => "previously_applied.j2",
        Category::PreviouslyAppliedCustomerDependent => "previously_applied.j2",
        Category::LowCriticality => "low_criticality.j2",
        Category::Disambiguation => "disambiguation.j2",
        Category::JourneyNodeSelection => "journey_selection.j2",
    }
}

/// Renders the prompt of a guideline-check batch.
pub fn render_checks(
    category: Category,
    items: &[&MatchableGuideline],
    conversation: &ConversationView,
) -> (Result<RenderedPrompt, BatchError>, HashMap<String, String>) {
    let (list, map) = local_items(items);
    (render(template_of(category), &CheckContext { conversation, items: list }), map)
}

/// The template context of a direct-check batch.
#[derive(Serialize)]
struct DirectContext<'a> {
    conversation: &'a ConversationView,
    items: &'a [PromptItem],
    /// Whether the items were applied before (must the agent follow them again?).
    reapply: bool,
}

/// Renders the prompt and answer schema of a direct-check batch of `category`.
pub fn render_direct(
    category: Category,
    items: &[&MatchableGuideline],
    conversation: &ConversationView,
) -> (Result<RenderedPrompt, BatchError>, serde_json::Value, HashMap<String, String>) {
    let (list, map) = local_items(items);
    let reapply = matches!(category, Category::PreviouslyApplied | Category::PreviouslyAppliedCustomerDependent);
    let prompt = render("direct.j2", &DirectContext { conversation, items: &list, reapply });
    (prompt, direct::answer_schema(&list), map)
}

/// How a guideline-check batch asks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CheckSettings {
    /// The verdict style (resolved for the model).
    pub style: VerdictStyle,
    /// Sampling temperature.
    pub temperature: f32,
    /// Overrides the model's [`verdict_threshold`](guidepost_llm::ModelCapabilities::verdict_threshold)
    /// for single checks.
    pub threshold: Option<f32>,
    /// Single checks ask each condition in both polarities (see [`single::Ask::both_ways`]).
    pub both_ways: bool,
}

/// Runs one guideline-check batch of `category` and maps verdicts back to guideline ids.
/// Unknown local ids in the answer are ignored; items without a verdict are absent.
pub async fn evaluate_checks(
    model: &dyn ChatModel,
    category: Category,
    items: &[&MatchableGuideline],
    conversation: &ConversationView,
    settings: &CheckSettings,
) -> CallOutcome<Vec<GuidelineVerdict>> {
    let CheckSettings { style, temperature, threshold, both_ways } = *settings;
    let task = TaskKind::Matching;
    let checks = !matches!(category, Category::Disambiguation | Category::JourneyNodeSelection);
    let (outcome, map) =
        if style == VerdictStyle::Single && checks && category != Category::PreviouslyAppliedCustomerDependent {
            let (list, map) = local_items(items);
            // Followed before: it applies again only when the condition arises anew.
            let asked = if category == Category::PreviouslyApplied { single::Asked::Anew } else { single::Asked::Now };
            let ask = single::Ask { task: TaskKind::Matching, asked, temperature, threshold, both_ways };
            (single::evaluate(model, &ask, &list, conversation).await, map)
        } else if matches!(style, VerdictStyle::Direct | VerdictStyle::Single) && checks {
            let (prompt, schema, map) = render_direct(category, items, conversation);
            let schema = (direct::SCHEMA_NAME.to_string(), schema);
            let outcome = call_with_schema::<BTreeMap<String, bool>>(model, task, prompt, temperature, schema).await;
            let CallOutcome { answer, usage, estimated_tokens } = outcome;
            (CallOutcome { answer: answer.map(direct::verdicts), usage, estimated_tokens }, map)
        } else {
            let (prompt, map) = render_checks(category, items, conversation);
            (reasoned_checks(model, category, prompt, temperature).await, map)
        };
    let CallOutcome { answer, usage, estimated_tokens } = outcome;
    let answer = answer.map(|local| {
        let mut seen = std::collections::HashSet::new();
        local
            .into_iter()
            .filter_map(|v| {
                let guideline_id = map.get(v.id.trim().trim_start_matches('[').trim_end_matches(']'))?.clone();
                seen.insert(guideline_id.clone()).then_some(GuidelineVerdict {
                    guideline_id,
                    applies: v.applies,
                    rationale: v.rationale,
                    probability: v.probability,
                })
            })
            .collect()
    });
    CallOutcome { answer, usage, estimated_tokens }
}

/// A guideline-check batch with reasoning fields (the category's own schema).
async fn reasoned_checks(
    model: &dyn ChatModel,
    category: Category,
    prompt: Result<RenderedPrompt, BatchError>,
    temperature: f32,
) -> CallOutcome<Vec<LocalVerdict>> {
    let task = TaskKind::Matching;
    match category {
        Category::Observational | Category::Actionable => {
            to_verdicts(call::<conditions::ConditionChecks>(model, task, prompt, temperature).await)
        }
        Category::PreviouslyApplied | Category::PreviouslyAppliedCustomerDependent => {
            to_verdicts(call::<previously_applied::ReapplyChecks>(model, task, prompt, temperature).await)
        }
        Category::LowCriticality => {
            to_verdicts(call::<low_criticality::LowCriticalityChecks>(model, task, prompt, temperature).await)
        }
        Category::Disambiguation | Category::JourneyNodeSelection => CallOutcome {
            answer: Err(BatchError::Prompt(format!("{} is not a guideline-check batch", category.as_str()))),
            usage: None,
            estimated_tokens: 0,
        },
    }
}

fn to_verdicts<T: CheckAnswer>(outcome: CallOutcome<T>) -> CallOutcome<Vec<LocalVerdict>> {
    CallOutcome {
        answer: outcome.answer.map(CheckAnswer::verdicts),
        usage: outcome.usage,
        estimated_tokens: outcome.estimated_tokens,
    }
}
