//! The simulated customer: one structured model call per turn that sees its persona, goal,
//! current step, turn budget and the whole conversation (older turns condensed past a budget),
//! and answers `{message, done, outcome}`. Its message is checked for role slips (speaking as
//! the agent, leaking reasoning) and re-asked once before the run is stopped.
//!
//! Usage is recorded in the customer's ledger from each answer (requests carry no ledger, so a
//! model stack's accounting never counts a call twice).

use std::sync::Arc;

use guidepost_llm::{ChatModel, ChatRequest, LlmError, TaskKind, UsageLedger, generate};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::prompts::render;
use crate::steps::StepDefinition;
use crate::trajectory::{StepTrace, Trajectory};
use crate::transcript::split_by_budget;

/// How the customer's conversation ended, in its own view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CustomerOutcome {
    /// The goal was met.
    GoalMet,
    /// The agent cannot help.
    GaveUp,
}

/// The customer model's structured answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CustomerReply {
    /// The next message (or the goodbye when `done`).
    pub message: String,
    /// Whether the customer ends the conversation.
    pub done: bool,
    /// Why it ends (null while not done).
    pub outcome: Option<CustomerOutcome>,
}

/// Settings of the simulated customer.
#[derive(Debug, Clone)]
pub struct CustomerOptions {
    /// Characters of conversation shown verbatim; older turns are condensed.
    pub history_budget_chars: usize,
    /// Sampling temperature.
    pub temperature: Option<f32>,
    /// Re-asks after a role slip before giving up.
    pub slip_retries: u32,
    /// Sampling temperature of a re-ask: a greedy model given nearly the same prompt tends to
    /// repeat the rejected message, so re-asks sample.
    pub retry_temperature: f32,
}

impl Default for CustomerOptions {
    fn default() -> Self {
        Self { history_budget_chars: 12_000, temperature: Some(0.0), slip_retries: 2, retry_temperature: 0.7 }
    }
}

/// Why the customer could not produce a message.
#[derive(Debug, thiserror::Error)]
pub enum CustomerError {
    /// The model failed.
    #[error(transparent)]
    Model(#[from] LlmError),
    /// The customer kept speaking as the agent (or leaking its reasoning).
    #[error("the simulated customer slipped out of its role: {0}")]
    RoleSlip(String),
}

/// The AI playing the customer.
#[derive(Debug, Clone)]
pub struct SimulatedCustomer {
    model: Arc<dyn ChatModel>,
    ledger: UsageLedger,
    options: CustomerOptions,
}

/// What the customer needs to know about the current turn.
#[derive(Debug, Clone, Copy)]
pub struct TurnContext<'a> {
    /// The trajectory.
    pub trajectory: &'a Trajectory,
    /// The traces so far.
    pub traces: &'a [StepTrace],
    /// Agent lines before the first customer turn (injected by a script).
    pub preamble: &'a [String],
    /// The selected step.
    pub step: Option<&'a StepDefinition>,
}

impl SimulatedCustomer {
    /// A customer answering through `model`, recording usage in `ledger`.
    pub fn new(model: Arc<dyn ChatModel>, ledger: UsageLedger, options: CustomerOptions) -> Self {
        Self { model, ledger, options }
    }

    /// The request for the next message (exposed for prompt snapshots).
    pub fn request(&self, ctx: TurnContext<'_>, correction: Option<&str>) -> ChatRequest {
        let trajectory = ctx.trajectory;
        let mut req = ChatRequest::new(TaskKind::Simulation)
            .system(render("customer_system", json!({"persona": trajectory.persona, "goal": trajectory.goal})));
        if correction.is_some() {
            req = req.temperature(self.options.retry_temperature);
        } else if let Some(t) = self.options.temperature {
            req = req.temperature(t);
        }
        let (earlier, recent) = split_by_budget(ctx.traces, self.options.history_budget_chars, false);
        // Role-flipped: the agent's words are the model's "user" turns, the customer's its own.
        let mut pending_agent: Vec<String> = ctx.preamble.to_vec();
        for trace in recent {
            if !pending_agent.is_empty() {
                req = req.user(pending_agent.join("\n\n"));
                pending_agent.clear();
            }
            req = req.assistant(trace.user_message.text());
            pending_agent = trace.agent_texts();
            if pending_agent.is_empty() {
                pending_agent.push("(the agent did not answer)".to_string());
            }
        }
        let turn = ctx.traces.len() + 1;
        let max_turns = trajectory.max_turns;
        let note = render(
            "customer_turn",
            json!({
                "turn": turn,
                "max_turns": max_turns,
                "turns_left": max_turns.map(|m| i64::from(m) - i64::try_from(turn).unwrap_or(i64::MAX) + 1),
                "earlier": earlier,
                "step": ctx.step.map(|s| json!({"instruction": s.instruction, "hints": s.hints})),
                "agent_waiting": !pending_agent.is_empty(),
                "opening": ctx.traces.is_empty() && ctx.preamble.is_empty(),
                "correction": correction,
            }),
        );
        let last = if pending_agent.is_empty() {
            format!("[simulation note]\n{note}")
        } else {
            format!("{}\n\n[simulation note]\n{note}", pending_agent.join("\n\n"))
        };
        req.user(last)
    }

    /// Asks for the next message, re-asking after a role slip.
    pub async fn next_message(&self, ctx: TurnContext<'_>) -> Result<CustomerReply, CustomerError> {
        let last_agent = ctx.traces.last().map(|t| t.agent_texts().join("\n")).or_else(|| ctx.preamble.last().cloned());
        let mut correction: Option<String> = None;
        let mut rejections = 0;
        for _ in 0..=self.options.slip_retries {
            let req = self.request(ctx, correction.as_deref());
            let (mut reply, usage) = generate::<CustomerReply>(self.model.as_ref(), req).await?;
            self.ledger.record(&TaskKind::Simulation, &usage);
            reply.message = reply.message.trim().to_string();
            if reply.message.is_empty() && !reply.done {
                correction = Some("the message was empty.".to_string());
                continue;
            }
            match detect_role_slip(&reply.message, last_agent.as_deref()) {
                Some(slip) if !reply.done => {
                    // The count keeps each re-ask's prompt distinct, so a sampling model with a
                    // fixed seed does not draw the same message again.
                    rejections += 1;
                    let rejected: String = reply.message.chars().take(200).collect();
                    correction = Some(format!(
                        "{slip} (Rejected attempt {rejections}: \"{rejected}\".) Write something different."
                    ));
                }
                _ => return Ok(reply),
            }
        }
        Err(CustomerError::RoleSlip(correction.unwrap_or_default()))
    }
}

const AGENT_PHRASES: [&str; 9] = [
    "how can i help you",
    "how can i assist you",
    "how may i help you",
    "how may i assist you",
    "is there anything else i can help",
    "is there anything else i can do for you",
    "as an ai",
    "i'm here to help you",
    "i am here to help you",
];

const LABELS: [&str; 8] = ["assistant:", "agent:", "ai:", "support:", "customer:", "user:", "thought:", "reasoning:"];

/// Why `message` does not read as the customer's own words, if it does not.
///
/// ```
/// use guidepost_sim::customer::detect_role_slip;
/// assert!(detect_role_slip("How can I help you today?", None).is_some());
/// assert!(detect_role_slip("Agent: your taxi is booked", None).is_some());
/// assert!(detect_role_slip("I need a taxi to the airport at 6.", None).is_none());
/// let agent = Some("好的，不用了，谢谢。你还有其他城市想查询吗？");
/// assert!(detect_role_slip("不用了，谢谢。你还有其他城市想查询吗？", agent).is_some());
/// let confirming = Some("So that is a pickup at 12 Oak Street at 18:30, to the central station. Correct?");
/// assert!(detect_role_slip("12 Oak Street", confirming).is_none());
/// ```
pub fn detect_role_slip(message: &str, last_agent_message: Option<&str>) -> Option<String> {
    let lower = message.trim().to_lowercase();
    if let Some(label) = LABELS.iter().find(|l| lower.starts_with(*l)) {
        return Some(format!("it starts with the role label `{label}`."));
    }
    if lower.contains("<think>") || lower.contains("[simulation note]") {
        return Some("it contains reasoning or simulation notes.".to_string());
    }
    if let Some(phrase) = AGENT_PHRASES.iter().find(|p| lower.contains(*p)) {
        return Some(format!("it speaks as the agent (\"{phrase}\")."));
    }
    // The agent's last message, or most of it, word for word ("OK, no thanks. Anything else?"
    // back to an agent that said "Sure! OK, no thanks. Anything else?"); a short detail the
    // agent repeated while confirming it is not a slip.
    let letters = |s: &str| s.chars().filter(|c| c.is_alphanumeric()).flat_map(char::to_lowercase).collect::<String>();
    if let Some(agent) = last_agent_message {
        let (mine, theirs) = (letters(message), letters(agent));
        let (n, m) = (mine.chars().count(), theirs.chars().count());
        if n >= 6 && theirs.contains(&mine) && n * 10 >= m * 6 {
            let how = if n == m { "repeats" } else { "repeats most of" };
            return Some(format!("it {how} the agent's last message."));
        }
    }
    None
}
