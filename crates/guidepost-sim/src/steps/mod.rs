//! The step graph: milestones of the simulated customer ([`StepDefinition`]), their
//! preconditions, their runtime states, and the view of a run that preconditions and
//! satisfaction checks read ([`RunView`]).

pub mod expr;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::message::MessageRole;
use crate::observations::EngineExpectation;
use crate::observations::EngineObservations;
use crate::trajectory::StepTrace;
use expr::{Expr, ExprEnv, ExprValue, Function};

/// A step id.
pub type StepId = String;

/// A precondition checked in Rust code.
pub type PreconditionFn = Arc<dyn Fn(&RunView<'_>) -> bool + Send + Sync>;
/// A satisfaction check written in Rust code.
pub type SatisfactionFn = Arc<dyn Fn(&RunView<'_>, &StepDefinition) -> bool + Send + Sync>;

/// How a custom precondition is checked.
#[derive(Clone)]
pub enum CustomCheck {
    /// An expression of the [`expr`] language.
    Expr(Expr),
    /// A Rust closure (library API only).
    Closure(PreconditionFn),
}

impl fmt::Debug for CustomCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Expr(e) => write!(f, "Expr({e})"),
            Self::Closure(_) => f.write_str("Closure"),
        }
    }
}

/// Something that must hold before a step can be selected.
#[derive(Debug, Clone)]
pub enum Precondition {
    /// Another step is satisfied.
    StepSatisfied(StepId),
    /// A custom check.
    Custom {
        /// A name for reports.
        name: Option<String>,
        /// The check.
        check: CustomCheck,
    },
}

impl Precondition {
    /// Whether the precondition holds.
    pub fn holds(&self, view: &RunView<'_>) -> bool {
        match self {
            Self::StepSatisfied(id) => view.status(id) == StepStatus::Satisfied,
            Self::Custom { check: CustomCheck::Expr(e), .. } => e.holds(view),
            Self::Custom { check: CustomCheck::Closure(f), .. } => f(view),
        }
    }
}

/// How a step's satisfaction is decided after a turn spent on it.
///
/// Order: an expression or closure when given; else the engine expectations when the agent
/// reports engine observations; else the judge model, with `judge` (or the instruction) as
/// the criterion.
#[derive(Clone, Default)]
pub struct SatisfactionSpec {
    /// Engine expectations that must all hold (Guidepost agents).
    pub engine: Vec<EngineExpectation>,
    /// An expression over the run.
    pub expr: Option<Expr>,
    /// The criterion the judge checks; defaults to the step instruction.
    pub judge: Option<String>,
    /// A Rust check (library API only).
    pub closure: Option<SatisfactionFn>,
}

impl fmt::Debug for SatisfactionSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SatisfactionSpec")
            .field("engine", &self.engine)
            .field("expr", &self.expr)
            .field("judge", &self.judge)
            .field("closure", &self.closure.is_some())
            .finish()
    }
}

/// What happens when a step runs out of attempts or time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OnFailure {
    /// Stop the run with `step-failed`.
    #[default]
    Stop,
    /// Mark the step skipped and go on; steps that need it become blocked.
    Skip,
}

/// A milestone of the simulated customer.
#[derive(Debug, Clone)]
pub struct StepDefinition {
    /// Unique id.
    pub id: StepId,
    /// What the customer does in this step.
    pub instruction: String,
    /// Details to use (order numbers, dates ...).
    pub hints: Vec<String>,
    /// What must hold before the step can be selected.
    pub preconditions: Vec<Precondition>,
    /// Turns the step may take before it fails.
    pub max_attempts: Option<u32>,
    /// Time the step may take (from its first turn) before it fails.
    pub timeout: Option<Duration>,
    /// How satisfaction is decided.
    pub satisfaction: SatisfactionSpec,
    /// What a failure does.
    pub on_failure: OnFailure,
}

impl StepDefinition {
    /// A step with an id and an instruction and nothing else.
    pub fn new(id: impl Into<String>, instruction: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            instruction: instruction.into(),
            hints: Vec::new(),
            preconditions: Vec::new(),
            max_attempts: None,
            timeout: None,
            satisfaction: SatisfactionSpec::default(),
            on_failure: OnFailure::Stop,
        }
    }

    /// Adds a `stepSatisfied` precondition.
    pub fn after(mut self, step: impl Into<String>) -> Self {
        self.preconditions.push(Precondition::StepSatisfied(step.into()));
        self
    }
}

/// Steps in graph order, a start step and terminal steps.
#[derive(Debug, Clone)]
pub struct StepGraph {
    /// Steps; their order is the graph order.
    pub steps: Vec<StepDefinition>,
    /// The step of the first turn.
    pub start: StepId,
    /// Steps whose satisfaction ends the run with `goal-reached`.
    pub terminals: Vec<StepId>,
}

impl StepGraph {
    /// The step with this id.
    pub fn step(&self, id: &str) -> Option<&StepDefinition> {
        self.steps.iter().find(|s| s.id == id)
    }
}

/// Runtime status of a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    /// Not selected yet.
    Idle,
    /// Selected at least once, not satisfied yet.
    InProgress,
    /// Done.
    Satisfied,
    /// Cannot become eligible (a step it needs failed or was skipped).
    Blocked,
    /// Ran out of attempts or time.
    Failed,
    /// Failed and skipped by its `on_failure` rule.
    Skipped,
}

impl StepStatus {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Idle => "idle",
            Self::InProgress => "in_progress",
            Self::Satisfied => "satisfied",
            Self::Blocked => "blocked",
            Self::Failed => "failed",
            Self::Skipped => "skipped",
        }
    }

    /// Whether the step can still be selected.
    pub fn is_open(self) -> bool {
        matches!(self, Self::Idle | Self::InProgress)
    }
}

/// The runtime state of one step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepRuntimeState {
    /// The step.
    pub step_id: StepId,
    /// Its status.
    pub status: StepStatus,
    /// Turns spent on it.
    pub attempts: u32,
    /// Last change.
    pub last_updated_at: DateTime<Utc>,
    /// When it was first selected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<DateTime<Utc>>,
}

/// The runtime states of all steps, in graph order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StepRuntime {
    states: Vec<StepRuntimeState>,
}

impl StepRuntime {
    /// All steps idle.
    pub fn new(graph: Option<&StepGraph>) -> Self {
        let now = Utc::now();
        let states = graph
            .map(|g| {
                g.steps
                    .iter()
                    .map(|s| StepRuntimeState {
                        step_id: s.id.clone(),
                        status: StepStatus::Idle,
                        attempts: 0,
                        last_updated_at: now,
                        started_at: None,
                    })
                    .collect()
            })
            .unwrap_or_default();
        Self { states }
    }

    /// The state of `id`.
    pub fn get(&self, id: &str) -> Option<&StepRuntimeState> {
        self.states.iter().find(|s| s.step_id == id)
    }

    fn get_mut(&mut self, id: &str) -> Option<&mut StepRuntimeState> {
        self.states.iter_mut().find(|s| s.step_id == id)
    }

    /// All states in graph order.
    pub fn states(&self) -> &[StepRuntimeState] {
        &self.states
    }

    /// Counts one more turn on `id` and marks it in progress.
    pub fn record_attempt(&mut self, id: &str) {
        if let Some(state) = self.get_mut(id) {
            let now = Utc::now();
            state.attempts += 1;
            state.started_at.get_or_insert(now);
            if state.status == StepStatus::Idle {
                state.status = StepStatus::InProgress;
            }
            state.last_updated_at = now;
        }
    }

    /// Sets the status of `id`.
    pub fn set_status(&mut self, id: &str, status: StepStatus) {
        if let Some(state) = self.get_mut(id) {
            state.status = status;
            state.last_updated_at = Utc::now();
        }
    }

    /// Marks open steps whose `stepSatisfied` preconditions can no longer hold as blocked.
    pub fn propagate_blocked(&mut self, graph: &StepGraph) {
        loop {
            let dead: BTreeSet<StepId> = self
                .states
                .iter()
                .filter(|s| matches!(s.status, StepStatus::Failed | StepStatus::Skipped | StepStatus::Blocked))
                .map(|s| s.step_id.clone())
                .collect();
            let newly: Vec<StepId> = graph
                .steps
                .iter()
                .filter(|s| self.get(&s.id).is_some_and(|st| st.status.is_open()))
                .filter(|s| {
                    s.preconditions.iter().any(|p| matches!(p, Precondition::StepSatisfied(d) if dead.contains(d)))
                })
                .map(|s| s.id.clone())
                .collect();
            if newly.is_empty() {
                return;
            }
            for id in newly {
                self.set_status(&id, StepStatus::Blocked);
            }
        }
    }

    /// The satisfied steps and attempts per step (the seed's `StepsSnapshot`).
    pub fn snapshot(&self) -> (BTreeSet<StepId>, BTreeMap<StepId, u32>) {
        let satisfied =
            self.states.iter().filter(|s| s.status == StepStatus::Satisfied).map(|s| s.step_id.clone()).collect();
        let attempts = self.states.iter().map(|s| (s.step_id.clone(), s.attempts)).collect();
        (satisfied, attempts)
    }
}

/// A read-only view of a run: traces, step states and engine observations so far. Custom
/// preconditions and satisfaction checks read it.
#[derive(Debug, Clone, Copy)]
pub struct RunView<'a> {
    /// The traces so far (including the current turn's, during satisfaction checks).
    pub traces: &'a [StepTrace],
    /// Step states.
    pub steps: &'a StepRuntime,
    /// Engine observations of all turns so far.
    pub observations: &'a EngineObservations,
}

impl RunView<'_> {
    /// The status of `id` (idle for unknown ids).
    pub fn status(&self, id: &str) -> StepStatus {
        self.steps.get(id).map_or(StepStatus::Idle, |s| s.status)
    }

    fn any_message(&self, role: MessageRole, needle: &str, last_only: bool) -> bool {
        let needle = needle.to_lowercase();
        let traces = if last_only { &self.traces[self.traces.len().saturating_sub(1)..] } else { self.traces };
        traces.iter().any(|t| {
            let messages: Vec<String> = match role {
                MessageRole::User => vec![t.user_message.text()],
                _ => t.agent_texts(),
            };
            messages.iter().any(|m| m.to_lowercase().contains(&needle))
        })
    }
}

impl ExprEnv for RunView<'_> {
    fn call(&self, function: Function, args: &[String]) -> ExprValue {
        let arg = |i: usize| args.get(i).map(String::as_str).unwrap_or_default();
        let expect = |e: EngineExpectation| ExprValue::Bool(e.holds(self.observations));
        match function {
            Function::Satisfied => ExprValue::Bool(self.status(arg(0)) == StepStatus::Satisfied),
            Function::Status => ExprValue::Str(self.status(arg(0)).as_str().to_string()),
            Function::Attempts => ExprValue::Num(f64::from(self.steps.get(arg(0)).map_or(0, |s| s.attempts))),
            Function::AgentSaid => ExprValue::Bool(self.any_message(MessageRole::Assistant, arg(0), false)),
            Function::CustomerSaid => ExprValue::Bool(self.any_message(MessageRole::User, arg(0), false)),
            Function::LastAgentSaid => ExprValue::Bool(self.any_message(MessageRole::Assistant, arg(0), true)),
            Function::ToolCalled => {
                let in_traces = self.traces.iter().flat_map(|t| &t.agent_messages).any(|m| {
                    matches!(&m.content, crate::message::MessageContent::Parts(parts) if parts.iter().any(|p|
                        matches!(p, crate::message::ContentPart::ToolCall { tool_name, .. }
                            if crate::observations::tool_name_matches(tool_name, arg(0)))))
                });
                ExprValue::Bool(in_traces || self.observations.tool_was_called(arg(0)))
            }
            Function::JourneyEntered => expect(EngineExpectation::JourneyEntered(arg(0).into())),
            Function::JourneyCompleted => expect(EngineExpectation::JourneyCompleted(arg(0).into())),
            Function::JourneyState => {
                expect(EngineExpectation::JourneyState { journey: arg(0).into(), state: arg(1).into() })
            }
            Function::GuidelineMatched => expect(EngineExpectation::GuidelineMatched(arg(0).into())),
        }
    }

    fn turns(&self) -> u32 {
        u32::try_from(self.traces.len()).unwrap_or(u32::MAX)
    }
}
