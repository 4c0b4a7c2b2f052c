//! Reply quality in every simulated conversation: each agent reply passes the reply checks
//! of [`guidepost_core::reply_check`] (no echo of the customer, the agent's own voice, no
//! figure from nowhere, the agent's language), and no reply is an engine's fallback.
//!
//! The checks run on what the customer saw, whatever the agent: an in-process engine, a
//! Parlant server, a bare model or a command. Facts are grounded in the agent definition
//! (when the scenario names one), the tool results of the conversation and the
//! conversation itself. A failed check stops the run with `policy-violation`.

use std::sync::Arc;

use guidepost_core::AgentDefinition;
use guidepost_core::reply_check::{Grounding, ReplyCheck, ReplyContext, check_reply};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::message::{ContentPart, MessageContent, ToolOutput};
use crate::policy::{Policy, PolicyContext, PolicyDecision};
use crate::trajectory::{StepTrace, StopReason};

/// A scenario's `reply_checks`: `true` (the default) runs every check but `repeated` (an
/// agent may ask again what the customer left unanswered; loop detection covers the rest),
/// `false` none, a list the ones named.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum ReplyChecksSetting {
    /// Every check, or none.
    All(bool),
    /// These checks.
    Only(Vec<ReplyCheck>),
}

impl Default for ReplyChecksSetting {
    fn default() -> Self {
        Self::All(true)
    }
}

impl ReplyChecksSetting {
    /// The checks to run.
    pub fn checks(&self) -> Vec<ReplyCheck> {
        match self {
            Self::All(true) => ReplyCheck::ALL.into_iter().filter(|c| *c != ReplyCheck::Repeated).collect(),
            Self::All(false) => Vec::new(),
            Self::Only(list) => list.clone(),
        }
    }
}

/// The reply-quality stop rule.
#[derive(Debug, Clone)]
pub struct ReplyQuality {
    /// The checks to run.
    pub checks: Vec<ReplyCheck>,
    /// The agent's definition: its language and the facts it states.
    pub definition: Option<Arc<AgentDefinition>>,
}

impl ReplyQuality {
    fn grounding(&self, traces: &[StepTrace]) -> Grounding {
        let mut grounding = self.definition.as_deref().map(Grounding::from_definition).unwrap_or_default();
        let last = traces.len().saturating_sub(1);
        for (n, trace) in traces.iter().enumerate() {
            grounding.add_date(trace.timestamp);
            // A call's arguments come in one message, its result in a later one: paired by id.
            let mut arguments: std::collections::HashMap<&str, &Value> = std::collections::HashMap::new();
            for message in &trace.agent_messages {
                let MessageContent::Parts(parts) = &message.content else { continue };
                for part in parts {
                    match part {
                        ContentPart::ToolCall { input, tool_call_id, .. } => {
                            grounding.add_json(input);
                            arguments.insert(tool_call_id.as_str(), input);
                        }
                        ContentPart::ToolResult { output, tool_call_id, .. } => {
                            let (ok, value) = match output {
                                ToolOutput::Json(v) => (true, v.clone()),
                                ToolOutput::Text(t) => (true, Value::String(t.clone())),
                                ToolOutput::ErrorJson(v) => (false, v.clone()),
                                ToolOutput::ErrorText(t) => (false, Value::String(t.clone())),
                            };
                            // Only the latest turn's results can be denied by its reply.
                            if n == last {
                                let asked = arguments.get(tool_call_id.as_str()).copied().unwrap_or(&Value::Null);
                                grounding.add_tool_result(ok, asked, &value);
                            } else {
                                grounding.add_json(&value);
                            }
                        }
                        ContentPart::Text { .. } => {}
                    }
                }
            }
        }
        grounding
    }
}

impl Policy for ReplyQuality {
    fn name(&self) -> &str {
        "reply_checks"
    }

    fn evaluate(&self, ctx: &PolicyContext<'_>) -> PolicyDecision {
        let traces = ctx.view.traces;
        let Some((last, earlier)) = traces.split_last() else {
            return PolicyDecision::Continue;
        };
        let turn = last.turn_index + 1;
        if let Some(fallback) = last.observations.as_ref().and_then(|o| o.reply_fallbacks.first()) {
            return violation(format!(
                "Turn {turn}: the engine sent its fallback reply because every reply it wrote failed its checks ({fallback})"
            ));
        }
        if self.checks.is_empty() {
            return PolicyDecision::Continue;
        }
        let mut history: Vec<(String, String)> = Vec::new();
        for trace in earlier {
            history.push(("customer".into(), trace.user_message.text()));
            history.extend(trace.agent_texts().into_iter().map(|t| ("agent".to_string(), t)));
        }
        history.push(("customer".into(), last.user_message.text()));
        let grounding = self.grounding(traces);
        let language = self.definition.as_deref().and_then(|d| d.agent.language.as_deref());
        for message in last.agent_messages.iter().filter(|m| !m.is_preamble()) {
            let text = message.text();
            if text.is_empty() || message.role != crate::message::MessageRole::Assistant {
                continue;
            }
            let context = ReplyContext {
                history: &history,
                grounding: &grounding,
                language,
                checks: &self.checks,
                must_ask: &[],
                failed_lookups: &[],
            };
            if let Some(problem) = check_reply(&text, &context).first() {
                return violation(format!(
                    "Turn {turn}: the reply \"{}\" failed a reply check: {problem}",
                    excerpt(&text)
                ));
            }
            history.push(("agent".into(), text));
        }
        PolicyDecision::Continue
    }
}

fn violation(summary: String) -> PolicyDecision {
    PolicyDecision::Stop { reason: StopReason::PolicyViolation, completed: false, summary }
}

fn excerpt(text: &str) -> String {
    guidepost_llm::excerpt(text, 160)
}
