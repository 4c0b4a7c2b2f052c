//! Prompt rendering. Every prompt is a minijinja template under `src/prompts/`, loaded at
//! compile time. A template renders its static instructions first, then the line
//! [`DYNAMIC_MARKER`], then the rest from the most to the least stable: agent, the items
//! checked (stable across turns for the same batch), the conversation window and tool
//! results. The static part becomes the system message, so providers cache the prefix.

use std::sync::OnceLock;

use guidepost_core::AgentDefinition;
use minijinja::Environment;
use serde::Serialize;

use crate::context::{HistoryMessage, MatchingContext};
use crate::error::BatchError;

/// Separates the static instructions from the per-turn part of a rendered template.
pub const DYNAMIC_MARKER: &str = "<<<DYNAMIC>>>";

/// The prompt templates, by name.
pub const TEMPLATES: [(&str, &str); 10] = [
    ("agent.j2", include_str!("prompts/agent.j2")),
    ("customer.j2", include_str!("prompts/customer.j2")),
    ("conversation.j2", include_str!("prompts/conversation.j2")),
    ("conditions.j2", include_str!("prompts/conditions.j2")),
    ("previously_applied.j2", include_str!("prompts/previously_applied.j2")),
    ("low_criticality.j2", include_str!("prompts/low_criticality.j2")),
    ("disambiguation.j2", include_str!("prompts/disambiguation.j2")),
    ("journey_selection.j2", include_str!("prompts/journey_selection.j2")),
    ("direct.j2", include_str!("prompts/direct.j2")),
    ("single.j2", include_str!("prompts/single.j2")),
];

fn environment() -> &'static Result<Environment<'static>, String> {
    static ENV: OnceLock<Result<Environment<'static>, String>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = guidepost_core::templates::prompt_environment();
        for (name, source) in TEMPLATES {
            env.add_template(name, source).map_err(|e| format!("{name}: {e}"))?;
        }
        Ok(env)
    })
}

/// A rendered prompt: static instructions and the per-turn part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderedPrompt {
    /// Instructions and output format: the same across turns (single checks name the agent
    /// here too, so the whole prefix a local model keeps is shared by a turn's checks).
    pub system: String,
    /// Agent, items, conversation and tool results.
    pub user: String,
}

impl RenderedPrompt {
    /// Estimated prompt tokens (characters / 4).
    pub fn estimated_tokens(&self) -> usize {
        guidepost_llm::estimate_tokens(&self.system) + guidepost_llm::estimate_tokens(&self.user)
    }
}

/// Renders template `name` with `ctx`.
pub fn render(name: &str, ctx: &impl Serialize) -> Result<RenderedPrompt, BatchError> {
    let env = environment().as_ref().map_err(|e| BatchError::Prompt(e.clone()))?;
    let template = env.get_template(name).map_err(|e| BatchError::Prompt(e.to_string()))?;
    let text = template.render(minijinja::value::Serde(ctx)).map_err(|e| BatchError::Prompt(format!("{name}: {e}")))?;
    let (system, user) = text.split_once(DYNAMIC_MARKER).unwrap_or(("", text.as_str()));
    Ok(RenderedPrompt { system: system.trim().to_string(), user: user.trim().to_string() })
}

/// A tool result as prompts show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolResultView {
    /// `service:name`.
    pub tool: String,
    /// Arguments, compact JSON.
    pub arguments: String,
    /// Result, compact JSON.
    pub result: String,
    /// Whether the call failed.
    pub failed: bool,
}

/// The per-turn part shared by every prompt of a pass: built once, rendered into each.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ConversationView {
    /// Agent name.
    pub agent_name: String,
    /// Agent description.
    pub agent_description: Option<String>,
    /// Customer name, when known.
    pub customer_name: Option<String>,
    /// Context variables as `name: value` lines.
    pub variables: Vec<(String, String)>,
    /// Summary of messages older than the window.
    pub summary: Option<String>,
    /// Messages older than the window that are not shown.
    pub elided: usize,
    /// The most recent messages, oldest first.
    pub history: Vec<HistoryMessage>,
    /// Tool results of this turn.
    pub tool_results: Vec<ToolResultView>,
}

impl ConversationView {
    /// The customer's latest message among those shown.
    pub fn latest_customer_message(&self) -> Option<&str> {
        self.history.iter().rev().find(|m| m.speaker == CUSTOMER_SPEAKER).map(|m| m.text.as_str())
    }

    /// Builds the view of `ctx`, keeping the last `window` messages, with the tool calls of
    /// earlier turns among them where they were made.
    pub fn build(definition: &AgentDefinition, ctx: &MatchingContext, window: usize) -> Self {
        let timeline = timeline(ctx);
        let messages: Vec<usize> =
            timeline.iter().enumerate().filter(|(_, m)| m.speaker != TOOL_SPEAKER).map(|(i, _)| i).collect();
        let elided = messages.len().saturating_sub(window.max(1));
        // The first entry shown is the first message kept; a call made before it is elided
        // with the messages around it.
        let first = messages.get(elided).copied().unwrap_or(timeline.len());
        Self {
            agent_name: definition.agent.name.clone(),
            agent_description: definition.agent.description.clone(),
            customer_name: ctx.customer_name.clone(),
            variables: ctx.variables.iter().map(|(k, v)| (k.clone(), compact(v))).collect(),
            summary: if elided > 0 { ctx.history_summary.clone() } else { None },
            elided,
            history: timeline.into_iter().skip(first).collect(),
            tool_results: ctx
                .staged_tool_results
                .iter()
                .map(|r| ToolResultView {
                    tool: r.tool.to_string(),
                    arguments: compact(&r.arguments),
                    result: shown_result(&r.result),
                    failed: r.result.get("metadata").and_then(|m| m.get("error_kind")).is_some(),
                })
                .collect(),
        }
    }
}

/// The speaker of the customer's messages in [`ConversationView::history`].
pub const CUSTOMER_SPEAKER: &str = "customer";

/// The speaker of a tool call of an earlier turn in [`ConversationView::history`].
pub const TOOL_SPEAKER: &str = "tool";

/// Characters of an earlier tool result shown in the conversation.
const EARLIER_RESULT_CHARS: usize = 600;

/// The conversation's messages with the tool calls of earlier turns where they were made
/// (speaker [`TOOL_SPEAKER`], `tool(arguments) -> result`): a condition about a balance the
/// agent looked up two turns ago is judged on that balance. Calls of this turn are shown
/// apart, as this turn's facts.
fn timeline(ctx: &MatchingContext) -> Vec<HistoryMessage> {
    let mut out = Vec::new();
    for e in &ctx.events {
        if let Some(message) = crate::context::history_message(e) {
            out.push(message);
        } else if e.kind == guidepost_core::EventKind::Tool && !e.deleted {
            let calls = e.data.get("tool_calls").and_then(serde_json::Value::as_array).into_iter().flatten();
            out.extend(
                calls.map(|call| HistoryMessage { speaker: TOOL_SPEAKER.to_string(), text: earlier_call(call) }),
            );
        }
    }
    out
}

/// One tool call of an earlier turn as `tool(arguments) -> result`.
fn earlier_call(call: &serde_json::Value) -> String {
    let tool = call.get("tool_id").and_then(serde_json::Value::as_str).unwrap_or("tool");
    let tool = tool.rsplit(':').next().unwrap_or(tool);
    let arguments = call.get("arguments").map(compact).unwrap_or_default();
    let result = call.get("result").map(shown_result).unwrap_or_default();
    format!("{tool}({arguments}) -> {}", guidepost_llm::excerpt(&result, EARLIER_RESULT_CHARS))
}

/// A tool result as prompts show it: the data the tool returned, or `the call failed with
/// error: <message>` for a failed call (small models read that as a failure; a bare
/// `FAILED:` prefix they overlook), without the envelope (metadata, control, canned response fields) a
/// model would otherwise read instead of the data.
fn shown_result(v: &serde_json::Value) -> String {
    let Some(envelope) = v.as_object().filter(|o| o.contains_key("data")) else { return compact(v) };
    let data = compact(&envelope["data"]);
    let failed = envelope.get("metadata").and_then(|m| m.get("error_kind")).is_some();
    if failed {
        format!("the call failed with error: {}", data.strip_prefix("Tool call error: ").unwrap_or(&data))
    } else {
        data
    }
}

fn compact(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A guideline as a prompt lists it, under a short local id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PromptItem {
    /// Local id ("1", "2" ...), valid inside one prompt only.
    pub id: String,
    /// Condition.
    pub condition: String,
    /// Action, when any.
    pub action: Option<String>,
    /// Extra context.
    pub description: Option<String>,
    /// Whether completing the action waits on the customer.
    pub waits: bool,
    /// Labelled customer messages the agent's author gave for the condition.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub examples: Vec<guidepost_core::GuidelineExample>,
}

impl PromptItem {
    /// A bare statement under `id`: no action, context or examples (a journey's transition,
    /// a question asked on its own).
    pub fn statement(id: impl Into<String>, condition: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            condition: condition.into(),
            action: None,
            description: None,
            waits: false,
            examples: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use guidepost_core::EventSource;
    use guidepost_core::definition::{SourceFile, load_agent};

    use super::*;
    use crate::context::events::message;

    #[test]
    fn tool_results_show_their_data_or_failure_not_the_envelope() {
        let ok = serde_json::json!({"data": {"temp": 20}, "metadata": {}, "control": {}, "canned_responses": []});
        assert_eq!(shown_result(&ok), r#"{"temp":20}"#);
        let failed =
            serde_json::json!({"data": "Tool call error: no data for Paris", "metadata": {"error_kind": "failed"}});
        assert_eq!(shown_result(&failed), "the call failed with error: no data for Paris");
        assert_eq!(shown_result(&serde_json::json!({"temp": 20})), r#"{"temp":20}"#);
    }

    #[test]
    fn history_window_elides_older_messages_or_uses_the_summary() {
        let def = load_agent(&[SourceFile::new("a.yaml", "agent: { name: Otto }")]).definition.unwrap();
        let def = Arc::new(def);
        let events = (0..5).map(|i| message(EventSource::Customer, i, &format!("m{i}"))).collect();
        let mut ctx = MatchingContext::new(events, Default::default());
        let view = ConversationView::build(&def, &ctx, 2);
        assert_eq!(view.elided, 3);
        assert_eq!(view.history.iter().map(|m| m.text.as_str()).collect::<Vec<_>>(), vec!["m3", "m4"]);
        assert_eq!(view.summary, None);
        #[derive(Serialize)]
        struct Ctx<'a> {
            conversation: &'a ConversationView,
        }
        let text = render("conversation.j2", &Ctx { conversation: &view }).unwrap().user;
        assert!(text.contains("(3 earlier messages not shown)"), "{text}");
        ctx.history_summary = Some("the customer asked about shoes".into());
        let view = ConversationView::build(&def, &ctx, 2);
        let text = render("conversation.j2", &Ctx { conversation: &view }).unwrap().user;
        assert!(text.contains("(Earlier, summarized: the customer asked about shoes)"), "{text}");
        let all = ConversationView::build(&def, &ctx, 12);
        assert_eq!((all.elided, all.summary), (0, None));
    }

    #[test]
    fn tool_calls_of_earlier_turns_are_shown_where_they_were_made() {
        use crate::context::events::tool;
        let def = Arc::new(load_agent(&[SourceFile::new("a.yaml", "agent: { name: Otto }")]).definition.unwrap());
        let events = vec![
            message(EventSource::Customer, 0, "What is my balance?"),
            tool(
                1,
                "fixtures:get_balance",
                serde_json::json!({"account": "checking"}),
                serde_json::json!({"balance": 15000}),
            ),
            message(EventSource::AiAgent, 2, "You have $15,000."),
            message(EventSource::Customer, 3, "Anything I should know?"),
        ];
        let ctx = MatchingContext::new(events, Default::default());
        let view = ConversationView::build(&def, &ctx, 12);
        let lines: Vec<String> = view.history.iter().map(|m| format!("{}: {}", m.speaker, m.text)).collect();
        assert_eq!(
            lines,
            [
                "customer: What is my balance?",
                r#"tool: get_balance({"account":"checking"}) -> {"balance":15000}"#,
                "agent: You have $15,000.",
                "customer: Anything I should know?",
            ]
        );
        // The window counts messages; a call goes with the messages around it.
        let view = ConversationView::build(&def, &ctx, 2);
        assert_eq!(view.elided, 1);
        assert_eq!(view.history.len(), 2, "{:?}", view.history);
        let view = ConversationView::build(&def, &ctx, 3);
        assert_eq!((view.elided, view.history.len()), (0, 4));
    }

    #[test]
    fn unknown_templates_are_errors_not_panics() {
        assert!(matches!(render("missing.j2", &()), Err(BatchError::Prompt(_))));
    }
}
