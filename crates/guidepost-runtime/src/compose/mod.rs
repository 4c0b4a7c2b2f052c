//! Composing the reply from what preparation gathered.
//!
//! - `fluid`: one structured call that drafts the reply, checks the draft against the
//!   instructions and facts, and returns the corrected reply. In `stream` output mode the
//!   reply is generated as plain text and streamed instead (no separate self-check: the
//!   first words reach the customer at once).
//! - `canned_strict`: only approved templates are ever sent, rendered with their fields;
//!   when none fits, the configured no-match reply.
//! - `canned_composited`: a fluid reply written in the style of the approved templates.
//! - `canned_fluid`: a fluid reply, replaced by an approved template when one says exactly
//!   what is needed.

mod canned;
pub mod field_stream;

use futures::StreamExt;
use guidepost_core::agent::{CompositionMode, OutputMode};
use guidepost_core::reply_check::{
    Grounding, ReplyCheck, ReplyContext, ReplyProblem, check_reply, fallback_reply, without_customers_words,
};
use guidepost_core::{AgentDefinition, Criticality};
use guidepost_engine::{GuidelineMatch, MatchKind};
use guidepost_llm::{ChatModel, ChatRequest, LlmError, OutputFormat, Role, StreamEvent, TaskKind, Usage};
use serde::Deserialize;
use serde_json::{Value, json};

pub use canned::{Candidate, candidates};

use crate::prompt::render;
use crate::state::ResponseState;

const COMPOSE: &str = include_str!("../prompts/compose.j2");
const SELECT: &str = include_str!("../prompts/select_template.j2");

/// What composition produced.
#[derive(Debug, Clone, Default)]
pub struct Composed {
    /// The reply.
    pub text: String,
    /// The template used, in canned modes.
    pub template_id: Option<String>,
    /// Problems the self-check found in the draft.
    pub self_check: Vec<String>,
    /// The draft before the self-check, when there was one.
    pub draft: Option<String>,
    /// What the reply checks found in each reply the model wrote, in order (a reply asked
    /// for again after a problem has its own entry).
    pub reply_checks: Vec<Vec<ReplyProblem>>,
    /// Whether the text is the agent's fallback reply, sent because no reply the model
    /// wrote passed the reply checks.
    pub fallback: bool,
    /// The last reply the model wrote, when it goes out without the sentences that only said
    /// the customer's words again (see [`without_customers_words`]): the text is what was left.
    pub mended: Option<String>,
    /// Mode used.
    pub mode: CompositionMode,
    /// Model usage.
    pub usage: Vec<Usage>,
    /// The tracked guidelines the sent reply carries out, as the model reported them after
    /// writing it (guideline ids). `None` when no report was asked for or none came (a
    /// streamed or chosen reply, the fallback): then every tracked match counts as carried
    /// out.
    pub followed: Option<Vec<String>>,
}

/// The journey states whose modes and templates apply to this reply: the matched journey
/// nodes and every state the reply carries out (see [`ResponseState::reply_states`]).
pub(crate) fn turn_states(definition: &AgentDefinition, state: &ResponseState) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = state
        .all_matches()
        .filter_map(|m| match &m.kind {
            MatchKind::JourneyNode { journey, node } => Some((journey.clone(), node.clone())),
            _ => None,
        })
        .collect();
    for pair in state.reply_states(definition) {
        if !out.contains(&pair) {
            out.push(pair);
        }
    }
    out
}

/// The most restrictive composition mode among the agent, the matched guidelines and the
/// journey states of the reply; an agent in `canned_strict` always stays strict.
pub fn effective_mode(definition: &AgentDefinition, state: &ResponseState) -> CompositionMode {
    let mut mode = definition.agent.composition_mode;
    let mut consider = |m: Option<CompositionMode>| {
        if let Some(m) = m
            && m.strictness() > mode.strictness()
        {
            mode = m;
        }
    };
    for m in state.all_matches() {
        consider(definition.guideline(&m.guideline_id).and_then(|g| g.composition_mode));
    }
    for (journey, node) in turn_states(definition, state) {
        if let Some(j) = definition.journey(&journey) {
            consider(j.composition_mode);
            consider(j.state(&node).and_then(|s| s.composition_mode));
        }
    }
    mode
}

/// Everything composition reads.
pub struct ComposeInput<'a> {
    /// The agent.
    pub definition: &'a AgentDefinition,
    /// What the definition itself grounds (see [`Grounding::from_definition`]), found once
    /// per definition.
    pub definition_grounding: &'a Grounding,
    /// What preparation gathered.
    pub state: &'a ResponseState,
    /// The whole conversation as (speaker, text), which the reply checks read.
    pub history: &'a [(String, String)],
    /// The part of it the prompts show (see [`crate::history`]).
    pub shown: &'a [(String, String)],
    /// What stands in the prompts for the messages before `shown`.
    pub earlier: Option<&'a str>,
    /// The customer's name, when known.
    pub customer_name: Option<&'a str>,
    /// Whether the reply call drafts and self-checks before the final reply (see
    /// [`crate::RuntimeConfig::self_check`]).
    pub self_check: bool,
    /// The checks every composed reply must pass (see [`guidepost_core::reply_check`]).
    pub reply_checks: &'a [ReplyCheck],
    /// Now, for the dates a reply may state.
    pub now: chrono::DateTime<chrono::Utc>,
    /// Whether a fluid reply in `block` output mode is streamed, so its text can be shown
    /// while it is written; asked for whole otherwise.
    pub preview: bool,
}

impl ComposeInput<'_> {
    /// What a reply's facts may come from: the definition, this turn's tool results, the
    /// context variables, the glossary and the date (the conversation is added by the check).
    fn grounding(&self) -> Grounding {
        let mut grounding = self.definition_grounding.clone();
        for call in &self.state.tool_calls {
            grounding.add_tool_result(call.ok, &Value::Object(call.arguments.clone()), &call.result);
        }
        for value in self.state.context_variables.values() {
            grounding.add_json(value);
        }
        for term in &self.state.glossary_terms {
            grounding.add_json(&serde_json::to_value(term).unwrap_or_default());
        }
        grounding.add_date(self.now);
        grounding
    }

    /// The problems of a reply the model wrote.
    fn check(&self, reply: &str, grounding: &Grounding) -> Vec<ReplyProblem> {
        self.in_reply_context(grounding, |context| check_reply(reply, context))
    }

    /// A reply that failed its checks, without the sentences that only repeat the customer,
    /// when it then passes them (see [`without_customers_words`]).
    fn mended(&self, reply: &str, grounding: &Grounding) -> Option<String> {
        self.in_reply_context(grounding, |context| without_customers_words(reply, context))
    }

    /// `f` with what the checks of a reply hold it to.
    fn in_reply_context<T>(&self, grounding: &Grounding, f: impl FnOnce(&ReplyContext<'_>) -> T) -> T {
        let (missing, invalid) = self.state.tool_insights.most_pressing();
        let mut must_ask: Vec<String> = missing.iter().chain(&invalid).map(|m| m.display_name.clone()).collect();
        must_ask
            .extend(self.state.open_questions(self.definition).into_iter().map(|q| format!("the answer to \"{q}\"")));
        let failed_lookups = self.failed_lookups();
        let context = ReplyContext {
            history: self.history,
            grounding,
            language: self.definition.agent.language.as_deref(),
            checks: self.reply_checks,
            must_ask: &must_ask,
            failed_lookups: &failed_lookups,
        };
        f(&context)
    }

    /// The reply that says a request's outcome is being checked, in the language the reply
    /// was due in.
    pub fn outcome_check(&self) -> String {
        guidepost_core::reply_check::outcome_check_reply(self.reply_language().as_deref())
    }

    /// The language the reply is due in: the agent's, or the customer's where the agent
    /// answers in theirs (`None` when it cannot be told).
    fn reply_language(&self) -> Option<String> {
        let context = ReplyContext {
            history: self.history,
            grounding: &Grounding::new(),
            language: self.definition.agent.language.as_deref(),
            checks: &[],
            must_ask: &[],
            failed_lookups: &[],
        };
        context.expected_language()
    }

    /// The reply sent in strict mode when no template fits: the agent's `no_match_reply`, or
    /// a request to rephrase in the language the reply was due in.
    fn no_match(&self) -> String {
        guidepost_core::reply_check::no_match_reply(&self.definition.agent, self.reply_language().as_deref())
    }

    /// The tools whose calls this turn were lost: their service failed, timed out, could not
    /// be reached or the call panicked (`error_kind` of a failed call's result). A tool that
    /// answered with an error of its own (not found, invalid) is not among them.
    fn failed_lookups(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .state
            .tool_calls
            .iter()
            .filter(|c| !c.ok)
            .filter(|c| {
                let kind = c.result.pointer("/metadata/error_kind").and_then(Value::as_str).unwrap_or_default();
                matches!(kind, "service_error" | "timeout" | "unavailable" | "panicked")
            })
            .map(|c| c.tool.name.clone())
            .collect();
        out.dedup();
        out
    }

    /// The fallback reply, in the language the reply was due in.
    fn fallback(&self) -> String {
        fallback_reply(&self.definition.agent, self.reply_language().as_deref())
    }
}

#[derive(Debug, Deserialize)]
struct FluidAnswer {
    #[serde(default)]
    draft: String,
    #[serde(default)]
    problems: Vec<String>,
    reply: String,
    #[serde(default)]
    template_id: Option<String>,
    #[serde(default)]
    fit: Option<String>,
    /// The numbers of the instructions the reply carries out, when asked.
    #[serde(default)]
    followed: Option<Vec<serde_json::Number>>,
}

#[derive(Debug, Deserialize)]
struct SelectAnswer {
    template_id: String,
    fit: String,
}

fn guideline_view(definition: &AgentDefinition, m: &GuidelineMatch) -> Option<Value> {
    // Journey steps are given as steps of their flow (see `flow_steps`).
    if matches!(m.kind, MatchKind::JourneyNode { .. }) {
        return None;
    }
    let action = m.action.as_deref()?;
    let critical = definition.guideline(&m.guideline_id).is_some_and(|g| g.criticality == Criticality::High);
    Some(json!({"condition": m.condition, "action": action, "critical": critical}))
}

/// The steps of each active journey to carry out in this reply, in order (see
/// [`ResponseState::reply_states`]; [`instructions`] places them). Flows at steps that say
/// the same give one instruction that names them all: a small model given the same
/// instruction twice (two flows at "Ask the customer if there is anything else you can help
/// with") does it twice or neither.
fn flow_steps(input: &ComposeInput<'_>) -> Vec<Value> {
    let d = input.definition;
    let mut steps: Vec<(&str, Vec<&str>)> = Vec::new();
    for (id, step) in input.state.reply_states(d) {
        let Some(journey) = d.journey(&id) else { continue };
        if let Some(guidepost_core::StateKind::Chat { action }) = journey.state(&step).map(|s| &s.kind) {
            match steps.iter_mut().find(|(said, _)| said.trim() == action.trim()) {
                Some((_, titles)) => titles.push(&journey.title),
                None => steps.push((action, vec![&journey.title])),
            }
        }
    }
    steps
        .into_iter()
        .map(|(action, titles)| {
            let quoted: Vec<String> = titles.iter().map(|t| format!("\"{t}\"")).collect();
            let condition = match quoted.split_last() {
                Some((last, rest)) if !rest.is_empty() => {
                    format!("the flows {} and {last} are at this step", rest.join(", "))
                }
                _ => format!("the flow {} is at this step", quoted.concat()),
            };
            json!({"condition": condition, "action": action, "critical": false})
        })
        .collect()
}

/// The instructions of the reply in the order the prompt numbers them, each with the id of
/// its guideline when the guideline is tracked: a reply that carries it out makes it applied
/// (see [`Composed::followed`]). The flows' steps that tell come first, the guidelines next,
/// and a step that asks the customer something last: a reply ends on what the customer is to
/// answer (a small model given the question first tends to write the customer's request back
/// instead of asking it, or to bury the question under what follows).
fn instructions(input: &ComposeInput<'_>) -> Vec<(Value, Option<String>)> {
    let d = input.definition;
    let (asking, telling): (Vec<Value>, Vec<Value>) = flow_steps(input)
        .into_iter()
        .partition(|v| v["action"].as_str().is_some_and(guidepost_engine::categorize::asks_customer));
    let mut out: Vec<(Value, Option<String>)> = telling.into_iter().map(|v| (v, None)).collect();
    out.extend(input.state.ordinary_matches.iter().chain(&input.state.tool_enabled_matches).filter_map(|m| {
        let view = guideline_view(d, m)?;
        let tracked = d.guideline(&m.guideline_id).is_some_and(guidepost_core::Guideline::is_tracked);
        Some((view, tracked.then(|| m.guideline_id.clone())))
    }));
    out.extend(asking.into_iter().map(|v| (v, None)));
    out
}

/// The prompt context shared by every mode.
fn context(input: &ComposeInput<'_>, structured: bool) -> Value {
    let d = input.definition;
    let guidelines: Vec<Value> = instructions(input).into_iter().map(|(v, _)| v).collect();
    let journeys: Vec<Value> = input
        .state
        .journey_paths
        .iter()
        .filter_map(|(id, path)| {
            let j = d.journey(id)?;
            let step = j.state(path.current()).map(|s| match &s.kind {
                guidepost_core::StateKind::Chat { action } => action.clone(),
                other => format!("{} {}", other.name(), s.id),
            });
            Some(json!({"title": j.title, "step": step}))
        })
        .collect();
    let finished: Vec<String> = input
        .state
        .previous_journey_paths
        .keys()
        .filter(|j| !input.state.journey_paths.contains_key(*j))
        .filter_map(|j| d.journey(j).map(|j| j.title.clone()))
        .collect();
    let tool_results: Vec<Value> = input
        .state
        .tool_calls
        .iter()
        .map(|c| json!({"tool": c.tool.name, "arguments": Value::Object(c.arguments.clone()).to_string(), "result": shown_result(c.result.get("data"))}))
        .collect();
    let not_run = tools_not_run(input);
    let (missing, invalid) = input.state.tool_insights.most_pressing();
    let missing: Vec<Value> = missing
        .iter()
        .chain(invalid.iter())
        .map(|m| {
            json!({
                "display_name": m.display_name,
                "description": m.description,
                "problem": m.problem,
                "choices": m.choices.iter().map(|c| c.as_str().map_or_else(|| c.to_string(), str::to_string)).collect::<Vec<_>>(),
            })
        })
        .collect();
    let history: Vec<Value> = input.shown.iter().map(|(s, t)| json!({"speaker": s, "text": t})).collect();
    json!({
        "language": d.agent.language.as_deref().map(guidepost_core::reply_check::language_name),
        "agent_name": d.agent.name,
        "agent_description": d.agent.description,
        "structured": structured,
        "guidelines": guidelines,
        "journeys": journeys,
        "finished": finished,
        "tool_results": tool_results,
        "not_run": not_run,
        "missing": missing,
        "variables": crate::prompt::display_values(&input.state.context_variables),
        "glossary": input.state.glossary_terms,
        "capabilities": input.state.capabilities,
        "history": history,
        "earlier": input.earlier,
    })
}

/// The tools of the tool steps where journeys rest after this turn's preparation, that made
/// no call in it: the step is waiting (a detail is missing, or its arguments were refused), so
/// the reply has no result from them and must not make one up. Described as the definition
/// describes them.
fn tools_not_run(input: &ComposeInput<'_>) -> Vec<String> {
    let d = input.definition;
    let mut out = Vec::new();
    for (id, path) in &input.state.journey_paths {
        let Some(guidepost_core::StateKind::Tool { tools, .. }) =
            d.journey(id).and_then(|j| j.state(path.current())).map(|s| &s.kind)
        else {
            continue;
        };
        for tool in tools {
            if input.state.tool_calls.iter().any(|c| &c.tool == tool) {
                continue;
            }
            let described =
                d.tools.iter().find(|t| &t.id == tool).and_then(|t| t.description.as_deref()).unwrap_or_default();
            let line = if described.is_empty() { tool.name.clone() } else { format!("{} ({described})", tool.name) };
            if !out.contains(&line) {
                out.push(line);
            }
        }
    }
    out
}

/// A tool result as the reply prompt shows it. A failure (`"Tool call error: <message>"` on
/// the wire) reads `failed: "<message>"`: given the wire text, small models paste it into
/// the reply, prefix and all.
fn shown_result(data: Option<&Value>) -> String {
    match data {
        Some(Value::String(text)) => match text.strip_prefix("Tool call error: ") {
            Some(message) => format!("failed: {}", Value::String(message.to_string())),
            None => Value::String(text.clone()).to_string(),
        },
        Some(other) => other.to_string(),
        None => Value::Null.to_string(),
    }
}

/// The schema of a written reply. `report` lists the numbers of the tracked instructions:
/// when there are any, `followed` says which of them the reply carries out (bounded, so a
/// small model cannot count on past the list).
fn fluid_schema(template_ids: &[String], self_check: bool, report: &[u64]) -> Value {
    let mut properties = serde_json::Map::new();
    if self_check {
        properties.insert("draft".into(), json!({"type": "string"}));
        properties.insert("problems".into(), json!({"type": "array", "items": {"type": "string"}}));
    }
    properties.insert("reply".into(), json!({"type": "string"}));
    if !template_ids.is_empty() {
        let mut ids: Vec<Value> = template_ids.iter().map(|i| json!(i)).collect();
        ids.push(json!("none"));
        properties.insert("template_id".into(), json!({"type": "string", "enum": ids}));
        properties.insert("fit".into(), json!({"type": "string", "enum": ["high", "partial", "low"]}));
    }
    if !report.is_empty() {
        properties.insert(
            "followed".into(),
            json!({"type": "array", "items": {"type": "integer", "enum": report}, "maxItems": report.len()}),
        );
    }
    let required: Vec<String> = properties.keys().cloned().collect();
    json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false})
}

/// Reply text as composition writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written<'a> {
    /// More of the reply.
    Text(&'a str),
    /// The reply written so far was refused by a check; a new one follows.
    Restart,
}

/// Composes the reply. `on_written` receives the reply's text as it is generated: in
/// `stream` output mode, the message itself; otherwise the draft of a fluid reply (the `reply`
/// field of the structured answer, as it is streamed), before its checks decide whether it is
/// sent.
pub async fn compose(
    model: &dyn ChatModel,
    input: ComposeInput<'_>,
    output: OutputMode,
    on_written: &mut (dyn FnMut(Written<'_>) + Send),
) -> Result<Composed, LlmError> {
    let mode = effective_mode(input.definition, input.state);
    let fields = canned::fields(input.definition, input.state, input.customer_name);
    match mode {
        CompositionMode::CannedStrict => {
            // Chosen, not written: the template is passed on whole once it is chosen.
            let composed = select_strict(model, &input, &fields).await?;
            on_written(Written::Text(&composed.text));
            Ok(composed)
        }
        CompositionMode::Fluid if output == OutputMode::Stream => stream_fluid(model, &input, on_written).await,
        CompositionMode::Fluid | CompositionMode::CannedComposited | CompositionMode::CannedFluid => {
            let cands = if mode == CompositionMode::Fluid {
                Vec::new()
            } else {
                candidates(input.definition, input.state, &fields)
            };
            let mut ctx = context(&input, input.self_check);
            ctx["json_reply"] = json!(true);
            // The tracked guidelines among the instructions, by number: the answer says which
            // ones the reply carries out. A model that does not follow compound instructions
            // is not asked (its list would be noise, and cost it output tokens); every match
            // of its replies counts as carried out.
            let reports = model.capabilities().follows_compound_instructions;
            let tracked: Vec<Option<String>> =
                instructions(&input).into_iter().map(|(_, id)| id.filter(|_| reports)).collect();
            let numbers: Vec<usize> =
                tracked.iter().enumerate().filter(|(_, id)| id.is_some()).map(|(i, _)| i + 1).collect();
            ctx["tracked_numbers"] = json!(numbers);
            let choices: Vec<String> = if mode == CompositionMode::CannedFluid {
                cands.iter().map(|c| c.id.clone()).collect()
            } else {
                Vec::new()
            };
            if mode == CompositionMode::CannedComposited {
                ctx["style_templates"] = json!(cands.iter().map(|c| c.text.clone()).collect::<Vec<_>>());
            }
            if mode == CompositionMode::CannedFluid {
                ctx["template_choices"] =
                    json!(cands.iter().map(|c| json!({"id": c.id, "text": c.text})).collect::<Vec<_>>());
            }
            let mut usage = Vec::new();
            let grounding = input.grounding();
            let chosen_template = |answer: &FluidAnswer| match (answer.template_id.as_deref(), answer.fit.as_deref()) {
                (Some(id), Some("high")) if id != "none" => cands.iter().find(|c| c.id == id),
                _ => None,
            };
            let mut answer = fluid_call(model, &input, &ctx, &choices, None, &mut usage, on_written).await?;
            let mut reply_checks = Vec::new();
            let mut fallback = false;
            // The reply as the model wrote it, when it goes out without some of its sentences.
            let mut mended = None;
            // A reply that fails a check (an echo, the customer's voice, a figure from
            // nowhere, the wrong language) is asked for once more with the reason; when the
            // second fails too, the fallback reply goes out instead, marked as such. A reply
            // whose only fault is a sentence that says the customer's words again goes out
            // without it, when it then passes (no second call).
            if chosen_template(&answer).is_none() {
                let problems = input.check(&answer.reply, &grounding);
                if let Some(kept) = (!problems.is_empty()).then(|| input.mended(&answer.reply, &grounding)).flatten() {
                    reply_checks.push(problems);
                    mended = Some(std::mem::replace(&mut answer.reply, kept));
                } else if !problems.is_empty() {
                    ctx["rejected_echo"] = json!(answer.reply.trim());
                    ctx["rejected_why"] =
                        json!(problems.iter().map(ReplyProblem::explanation).collect::<Vec<_>>().join(" Also, "));
                    reply_checks.push(problems);
                    // Sampled: asked again at the same temperature, a model tends to give the
                    // very same reply, refusal note or not.
                    on_written(Written::Restart);
                    answer = fluid_call(model, &input, &ctx, &choices, Some(RETRY_TEMPERATURE), &mut usage, on_written)
                        .await?;
                    if chosen_template(&answer).is_none() {
                        let problems = input.check(&answer.reply, &grounding);
                        if let Some(kept) =
                            (!problems.is_empty()).then(|| input.mended(&answer.reply, &grounding)).flatten()
                        {
                            mended = Some(std::mem::replace(&mut answer.reply, kept));
                        } else {
                            // Saying again what the agent already said (a question the customer
                            // left unanswered), or not asking for a missing detail, is poor but
                            // not unsafe; the rest is.
                            fallback =
                                problems.iter().any(|p| !matches!(p.check, ReplyCheck::Repeated | ReplyCheck::Unasked));
                        }
                        reply_checks.push(problems);
                    }
                }
            }
            let chosen = chosen_template(&answer);
            let followed = match &answer.followed {
                _ if fallback => (!tracked_numbers(&ctx).is_empty()).then(Vec::new),
                Some(numbers) => Some(followed_ids(numbers, &tracked)),
                None => None,
            };
            let text = match chosen {
                Some(c) => c.text.clone(),
                None if fallback => input.fallback(),
                None => answer.reply.trim().to_string(),
            };
            Ok(Composed {
                text,
                template_id: chosen.map(|c| c.id.clone()),
                self_check: answer.problems,
                draft: (!answer.draft.is_empty()).then_some(answer.draft),
                reply_checks,
                fallback,
                mended,
                mode,
                usage,
                followed,
            })
        }
    }
}

/// The numbers of the tracked instructions, as `compose` put them in the prompt context.
fn tracked_numbers(ctx: &Value) -> Vec<u64> {
    ctx["tracked_numbers"].as_array().map(|a| a.iter().filter_map(Value::as_u64).collect()).unwrap_or_default()
}

/// The tracked guidelines among the instructions numbered `numbers` (1-based, as the prompt
/// lists them); numbers outside the list or of untracked instructions are ignored.
fn followed_ids(numbers: &[serde_json::Number], tracked: &[Option<String>]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for n in numbers {
        let Some(index) = n.as_u64().and_then(|n| usize::try_from(n).ok()).and_then(|n| n.checked_sub(1)) else {
            continue;
        };
        if let Some(Some(id)) = tracked.get(index)
            && !out.contains(id)
        {
            out.push(id.clone());
        }
    }
    out
}

/// The sampling temperature of a reply asked for again after a repetition.
const RETRY_TEMPERATURE: f32 = 0.7;

async fn fluid_call(
    model: &dyn ChatModel,
    input: &ComposeInput<'_>,
    ctx: &Value,
    choices: &[String],
    temperature: Option<f32>,
    usage: &mut Vec<guidepost_llm::Usage>,
    on_written: &mut (dyn FnMut(Written<'_>) + Send),
) -> Result<FluidAnswer, LlmError> {
    let mut request = conversation_request(render("compose.j2", COMPOSE, ctx.clone())?, input, reply_note(ctx)).output(
        OutputFormat::Json {
            name: "reply".into(),
            schema: fluid_schema(choices, input.self_check, &tracked_numbers(ctx)),
            strict: true,
        },
    );
    if let Some(t) = temperature {
        request = request.temperature(t);
    }
    let parse = |response: &guidepost_llm::ChatResponse| -> Option<FluidAnswer> {
        response.output.as_json().and_then(|v| serde_json::from_value(v.clone()).ok())
    };
    // Streamed when someone watches, so the reply can be shown while it is written. An
    // answer that breaks off or does not fit its schema is asked for again whole (where a bad
    // answer is sent back with the reason), after a restart of what was shown.
    if input.preview {
        match streamed_reply(model, request.clone(), on_written).await {
            Ok(response) => {
                usage.push(response.usage.clone());
                if let Some(answer) = parse(&response) {
                    return Ok(answer);
                }
                tracing::warn!("the streamed reply did not fit its schema; asking again");
            }
            Err(error) => tracing::warn!(%error, "the streamed reply failed; asking again"),
        }
        on_written(Written::Restart);
    }
    let response = model.complete(request).await?;
    usage.push(response.usage.clone());
    parse(&response).ok_or_else(|| LlmError::SchemaViolation {
        errors: vec!["the reply answer did not fit its schema".into()],
        answer: response.output.to_text(),
    })
}

/// The request a fluid reply to `input` begins with (the agent and how to write, before the
/// instructions the turn brings), for reading ahead where a conversation opens (see
/// [`crate::AgentRuntime::read_ahead`]); `None` where the agent's replies are chosen, not
/// written.
pub(crate) fn read_ahead_request(input: &ComposeInput<'_>) -> Result<Option<ChatRequest>, LlmError> {
    if effective_mode(input.definition, input.state) == CompositionMode::CannedStrict {
        return Ok(None);
    }
    let mut ctx = context(input, input.self_check);
    ctx["json_reply"] = json!(true);
    ctx["tracked_numbers"] = json!(Vec::<usize>::new());
    let system = render("compose.j2", COMPOSE, ctx)?;
    let schema = fluid_schema(&[], input.self_check, &[]);
    Ok(Some(conversation_request(system, input, None).output(OutputFormat::Json {
        name: "reply".into(),
        schema,
        strict: true,
    })))
}

/// Streams a structured reply request, passing on the `reply` field's text as it arrives.
async fn streamed_reply(
    model: &dyn ChatModel,
    request: ChatRequest,
    on_written: &mut (dyn FnMut(Written<'_>) + Send),
) -> Result<guidepost_llm::ChatResponse, LlmError> {
    let mut stream = model.stream(request).await?;
    let mut reader = field_stream::FieldStream::new("reply");
    while let Some(event) = stream.next().await {
        match event? {
            StreamEvent::Delta(piece) => {
                let text = reader.push(&piece);
                if !text.is_empty() {
                    on_written(Written::Text(&text));
                }
            }
            StreamEvent::Done(response) => return Ok(response),
        }
    }
    Err(LlmError::InvalidResponse { detail: "the reply stream ended without its answer".into(), body: String::new() })
}

/// The compose request: the rendered rules as the system message, then the conversation the
/// prompt shows as the chat turns it was (what stands for older messages first, customer
/// messages as user turns, agent messages as assistant turns), and a note on the customer's
/// latest turn naming what the reply must do now.
///
/// With the whole conversation inside one prompt, small models answer with the agent's
/// previous message (word for word, even when they can name the step they are at); as chat
/// turns, with the step restated beside the message it answers, they move on.
fn conversation_request(system: String, input: &ComposeInput<'_>, note: Option<String>) -> ChatRequest {
    let mut request = ChatRequest::new(TaskKind::Generation).system(system.trim_end());
    let mut turns: Vec<(Role, String)> = Vec::new();
    let earlier = input.earlier.map(|text| ("earlier".to_string(), text.to_string()));
    for (speaker, text) in earlier.iter().chain(input.shown) {
        let (role, text) = match speaker.as_str() {
            "customer" | "earlier" => (Role::User, text.to_string()),
            "agent" => (Role::Assistant, text.to_string()),
            other => (Role::Assistant, format!("[{other}] {text}")),
        };
        match turns.last_mut() {
            Some((last, joined)) if *last == role => {
                joined.push_str("\n\n");
                joined.push_str(&text);
            }
            _ => turns.push((role, text)),
        }
    }
    // Chat APIs expect the customer to speak first and last.
    if turns.first().is_none_or(|(role, _)| *role != Role::User) {
        turns.insert(0, (Role::User, "(The conversation begins.)".to_string()));
    }
    if turns.last().is_some_and(|(role, _)| *role != Role::User) {
        turns.push((Role::User, "(The customer has not written since.)".to_string()));
    }
    if let (Some(note), Some((_, last))) = (note, turns.last_mut()) {
        last.push_str("\n\n");
        last.push_str(&note);
    }
    for (role, text) in turns {
        request = match role {
            Role::User => request.user(text),
            _ => request.assistant(text),
        };
    }
    request
}

/// The note on the customer's latest turn: the actions the reply must carry out, why a
/// previous attempt was refused, and what the tools run for the message returned.
///
/// The tool results are here, after the conversation, not among the rules before it: a
/// model that keeps prompt prefixes then reads the rules and the conversation once, before
/// the tools have run (see `AgentRuntime::read_reply_ahead_after`), and only this note when
/// their results are in.
fn reply_note(ctx: &Value) -> Option<String> {
    let name = ctx["agent_name"].as_str().unwrap_or("the agent");
    let actions: Vec<String> = ctx["guidelines"]
        .as_array()
        .map(|list| list.iter().filter_map(|g| g["action"].as_str()).map(str::to_string).collect())
        .unwrap_or_default();
    let mut parts = Vec::new();
    if !actions.is_empty() {
        let numbered: Vec<String> = actions.iter().enumerate().map(|(i, a)| format!("{}. {a}", i + 1)).collect();
        parts.push(format!("Your reply must do this now: {}", numbered.join(" ")));
    }
    if let (Some(rejected), Some(why)) = (ctx["rejected_echo"].as_str(), ctx["rejected_why"].as_str()) {
        parts.push(format!("Your previous reply was \"{rejected}\": {why} Write a reply that answers this message."));
    }
    let mut body = parts.join(" ");
    if let Some(results) = ctx["tool_results"].as_array().filter(|r| !r.is_empty()) {
        body.push_str("\n\n## Tool results");
        for r in results {
            let field = |key: &str| r[key].as_str().unwrap_or_default().to_string();
            body.push_str(&format!("\n- {}({}): {}", field("tool"), field("arguments"), field("result")));
        }
    }
    let body = body.trim();
    (!body.is_empty()).then(|| format!("(Note for {name}, not from the customer. {body})"))
}

async fn stream_fluid(
    model: &dyn ChatModel,
    input: &ComposeInput<'_>,
    on_written: &mut (dyn FnMut(Written<'_>) + Send),
) -> Result<Composed, LlmError> {
    let ctx = context(input, false);
    let system = render("compose.j2", COMPOSE, ctx.clone())? + "\nWrite only the reply.";
    let request = conversation_request(system, input, reply_note(&ctx));
    let mut stream = model.stream(request).await?;
    let mut text = String::new();
    let mut usage = Vec::new();
    while let Some(event) = stream.next().await {
        match event? {
            StreamEvent::Delta(delta) => {
                on_written(Written::Text(&delta));
                text.push_str(&delta);
            }
            StreamEvent::Done(response) => {
                if text.is_empty() {
                    text = response.output.to_text();
                    on_written(Written::Text(&text));
                }
                usage.push(response.usage);
            }
        }
    }
    // Already sent as it was written: the checks can only report what they find.
    let problems = input.check(&text, &input.grounding());
    Ok(Composed {
        text: text.trim().to_string(),
        mode: CompositionMode::Fluid,
        usage,
        reply_checks: if problems.is_empty() { Vec::new() } else { vec![problems] },
        ..Composed::default()
    })
}

async fn select_strict(model: &dyn ChatModel, input: &ComposeInput<'_>, fields: &Value) -> Result<Composed, LlmError> {
    let no_match = input.no_match();
    let cands = candidates(input.definition, input.state, fields);
    if cands.is_empty() {
        return Ok(Composed { text: no_match, mode: CompositionMode::CannedStrict, ..Composed::default() });
    }
    // The one template of a journey step the reply carries out, its fields filled: it is that
    // step's approved reply, and there is nothing to choose between.
    if let [only] = cands.as_slice()
        && turn_states(input.definition, input.state).iter().any(|(journey, node)| {
            input
                .definition
                .journey(journey)
                .and_then(|j| j.state(node))
                .is_some_and(|s| s.canned_responses.contains(&only.id))
        })
    {
        return Ok(Composed {
            text: only.text.clone(),
            template_id: Some(only.id.clone()),
            mode: CompositionMode::CannedStrict,
            ..Composed::default()
        });
    }
    let mut ctx = context(input, false);
    ctx["templates"] = json!(cands.iter().map(|c| json!({"id": c.id, "text": c.text})).collect::<Vec<_>>());
    let mut ids: Vec<Value> = cands.iter().map(|c| json!(c.id)).collect();
    ids.push(json!("none"));
    let schema = json!({
        "type": "object",
        "properties": {"template_id": {"type": "string", "enum": ids}, "fit": {"type": "string", "enum": ["high", "partial", "low"]}},
        "required": ["template_id", "fit"],
        "additionalProperties": false
    });
    let request = ChatRequest::new(TaskKind::Generation)
        .user(render("select_template.j2", SELECT, ctx)?)
        .output(OutputFormat::Json { name: "template_choice".into(), schema, strict: true });
    let response = model.complete(request).await?;
    let usage = vec![response.usage.clone()];
    let answer: Option<SelectAnswer> = response.output.as_json().and_then(|v| serde_json::from_value(v.clone()).ok());
    // Only an approved template, exactly as rendered, or the no-match reply is ever sent.
    let chosen = answer
        .filter(|a| a.fit == "high" || a.fit == "partial")
        .and_then(|a| cands.iter().find(|c| c.id == a.template_id));
    Ok(match chosen {
        Some(c) => Composed {
            text: c.text.clone(),
            template_id: Some(c.id.clone()),
            mode: CompositionMode::CannedStrict,
            usage,
            ..Composed::default()
        },
        None => Composed { text: no_match, mode: CompositionMode::CannedStrict, usage, ..Composed::default() },
    })
}
