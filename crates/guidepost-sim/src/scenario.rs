//! Scenario files: YAML documents describing a trajectory (goal, persona, step graph, limits),
//! an optional script mixing fixed and simulated turns with checkpoints, final expectations and
//! policies. The JSON Schema of the format is generated from [`ScenarioFile`]
//! ([`scenario_json_schema`]) and committed as `schema/scenario.schema.json`.
//!
//! ```yaml
//! id: taxi-happy-path
//! agent: ../agents/taxi.yaml          # agent definition, for journey coverage
//! goal: Book a taxi from 12 Oak Street to the central station for 18:30
//! persona: { name: Ann, description: A busy commuter who answers briefly }
//! max_turns: 8
//! step_graph:
//!   start: ask
//!   terminals: [confirm]
//!   steps:
//!     - id: ask
//!       instruction: Say you need a taxi
//!     - id: details
//!       instruction: Give the pickup address, destination and time when asked
//!       hints: [12 Oak Street, central station, 18:30]
//!       satisfied_when: { engine: [{ journey_state: { journey: book_taxi, state: confirm } }] }
//!     - id: confirm
//!       instruction: Confirm the details
//!       after: [details]
//! script:
//!   - customer: Hi, I need a taxi please
//!   - checkpoint: { expect: [{ journey_entered: book_taxi }] }
//!   - simulate: rest
//! expect:
//!   - tool_called: { tool: book_taxi, arguments: { pickup: 12 Oak Street } }
//! ```
//!
//! Errors name the file and line: syntax and shape errors with the line and column the YAML
//! parser reports, reference errors (unknown steps) with the step id and the line defining it.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use guidepost_core::AgentDefinition;
use guidepost_core::definition::MAX_PROBLEMS_PER_FILE;

use crate::error::{ScenarioError, SimError, SourceLocation};
use crate::observations::EngineExpectation;
use crate::policy::{ForbiddenAgentPhrases, Policy, RequireStepMatch};
use crate::reply_quality::{ReplyChecksSetting, ReplyQuality};
use crate::runner::{Budget, RunSetup, ScriptItem};
use crate::steps::expr::Expr;
use crate::steps::{CustomCheck, OnFailure, Precondition, SatisfactionSpec, StepDefinition, StepGraph};
use crate::trajectory::{LoopDetection, Persona, Trajectory};

/// A scenario file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScenarioFile {
    /// Scenario id; defaults to the file name without extension.
    #[serde(default)]
    pub id: Option<String>,
    /// What the scenario tests.
    #[serde(default)]
    pub description: Option<String>,
    /// The agent definition (path relative to this file) used for journey coverage.
    #[serde(default)]
    pub agent: Option<String>,
    /// Tags for filtering and reports.
    #[serde(default)]
    pub tags: Vec<String>,
    /// What the simulated customer wants.
    pub goal: String,
    /// Who the simulated customer is.
    pub persona: Persona,
    /// Customer turns at most.
    #[serde(default)]
    pub max_turns: Option<u32>,
    /// Loop detection limits.
    #[serde(default)]
    pub loop_detection: Option<LoopDetection>,
    /// Free data stored with each run.
    #[serde(default)]
    pub metadata: Map<String, Value>,
    /// Milestones of the customer.
    #[serde(default)]
    pub step_graph: Option<StepGraphFile>,
    /// Fixed and simulated turns, injected agent lines and checkpoints, in order. Without a
    /// script the whole run is simulated.
    #[serde(default)]
    pub script: Vec<ScriptItemFile>,
    /// Expectations on engine events checked when the run ends.
    #[serde(default)]
    pub expect: Vec<EngineExpectation>,
    /// Extra stop rules.
    #[serde(default)]
    pub policies: PoliciesFile,
    /// The reply checks every agent reply must pass (`true`, the default: all but
    /// `repeated`; `false`: none; or a list such as `[echo, customer_voice, invented_fact,
    /// wrong_language, repeated]`). A failed check, or an engine's fallback reply, stops the
    /// run with `policy-violation`.
    #[serde(default)]
    pub reply_checks: ReplyChecksSetting,
    /// Token and cost limits of one run.
    #[serde(default)]
    pub budget: Option<Budget>,
}

/// The step graph of a scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StepGraphFile {
    /// The step of the first turn.
    pub start: String,
    /// Steps whose satisfaction reaches the goal.
    #[serde(default)]
    pub terminals: Vec<String>,
    /// Steps in graph order.
    pub steps: Vec<StepFile>,
}

/// A step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StepFile {
    /// Unique id.
    pub id: String,
    /// What the customer does.
    pub instruction: String,
    /// Details to use.
    #[serde(default)]
    pub hints: Vec<String>,
    /// Shorthand for `step_satisfied` preconditions.
    #[serde(default)]
    pub after: Vec<String>,
    /// Preconditions.
    #[serde(default)]
    pub preconditions: Vec<PreconditionFile>,
    /// Turns the step may take.
    #[serde(default)]
    pub max_attempts: Option<u32>,
    /// Milliseconds the step may take from its first turn.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// How satisfaction is decided (default: the judge checks the instruction).
    #[serde(default)]
    pub satisfied_when: Option<SatisfiedWhenFile>,
    /// What a failure does.
    #[serde(default)]
    pub on_failure: OnFailure,
}

/// A precondition, as a one-key map.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum PreconditionFile {
    /// Another step is satisfied.
    StepSatisfied(String),
    /// An expression (see the expression language in `steps::expr`).
    Custom {
        /// A name for reports.
        #[serde(default)]
        name: Option<String>,
        /// The expression.
        expr: String,
    },
}

/// How a step's satisfaction is decided.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SatisfiedWhenFile {
    /// Engine expectations (used when the agent reports engine state).
    #[serde(default)]
    pub engine: Vec<EngineExpectation>,
    /// An expression over the run (takes precedence).
    #[serde(default)]
    pub expr: Option<String>,
    /// The judge's criterion (default: the instruction).
    #[serde(default)]
    pub judge: Option<String>,
}

/// A customer line: text, or text with the step it belongs to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum CustomerLineFile {
    /// Just the text.
    Text(String),
    /// Text and step.
    WithStep(CustomerLineWithStep),
}

/// A customer line that names its step. Unknown keys are refused: in a YAML flow mapping an
/// unquoted comma splits the text (`{ text: Thanks, bye!, step: s }` has a key `bye!`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CustomerLineWithStep {
    /// The line.
    pub text: String,
    /// The step.
    pub step: String,
}

/// How many turns to simulate: a number, or `rest` (until the run stops).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum SimulateFile {
    /// This many turns.
    Turns(u32),
    /// `rest`.
    Rest(RestKeyword),
}

/// The keyword `rest`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RestKeyword {
    /// Until the run stops.
    Rest,
}

/// A checkpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckpointFile {
    /// A name for reports.
    #[serde(default)]
    pub name: Option<String>,
    /// What must hold.
    pub expect: Vec<EngineExpectation>,
}

/// A script item, as a one-key map.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum ScriptItemFile {
    /// A fixed customer line.
    Customer(CustomerLineFile),
    /// A line put in the agent's mouth.
    Agent(String),
    /// Simulated turns.
    Simulate(SimulateFile),
    /// Assertions on engine events so far.
    Checkpoint(CheckpointFile),
}

/// Extra stop rules.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PoliciesFile {
    /// Stop with `policy-violation` when the agent says one of these.
    #[serde(default)]
    pub forbidden_agent_phrases: Vec<String>,
    /// Stop with `no-step-match` after more simulated turns in a row without a step.
    #[serde(default)]
    pub max_turns_without_step: Option<u32>,
}

/// A loaded, checked scenario.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Its id.
    pub id: String,
    /// Its file.
    pub path: PathBuf,
    /// The agent definition for coverage, resolved against the file's folder.
    pub agent_definition: Option<PathBuf>,
    /// The file as written.
    pub file: ScenarioFile,
    graph: Option<StepGraph>,
    script: Vec<ScriptItem>,
}

/// Reads YAML where enums are one-key maps (`- customer: Hello`, `- journey_entered: x`),
/// keeping the parser's line and column in errors.
pub fn from_yaml<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, yaml_serde::Error> {
    yaml_serde::with::singleton_map_recursive::deserialize(yaml_serde::Deserializer::from_str(text))
}

/// The JSON Schema of scenario files.
pub fn scenario_json_schema() -> Value {
    serde_json::to_value(schemars::schema_for!(ScenarioFile)).unwrap_or(Value::Bool(true))
}

impl Scenario {
    /// Reads and checks a scenario file, within [`Limit::FileSize`](guidepost_core::limits::Limit::FileSize).
    pub fn load(path: &Path) -> Result<Self, Vec<ScenarioError>> {
        let whole = |message: String| {
            vec![ScenarioError {
                location: SourceLocation { file: path.to_path_buf(), line: None, column: None },
                message,
            }]
        };
        let limits = guidepost_core::limits::Limits::global();
        let bytes = guidepost_core::files::read(path, limits).map_err(|e| whole(e.to_string()))?;
        Self::from_bytes(path, bytes, limits)
    }

    /// Decodes and checks a scenario file's bytes (named `path` in errors): its size,
    /// encoding and characters first, like a definition file's (invalid UTF-8, a NUL byte or
    /// another control character is an error at its line and column; a byte-order mark is
    /// skipped), then its YAML.
    pub fn from_bytes(
        path: &Path,
        bytes: Vec<u8>,
        limits: &guidepost_core::limits::Limits,
    ) -> Result<Self, Vec<ScenarioError>> {
        let name = path.display().to_string();
        let file = guidepost_core::definition::text::decode(&name, bytes, limits).map_err(|d| {
            vec![ScenarioError {
                location: SourceLocation {
                    file: path.to_path_buf(),
                    line: Some(d.line as usize),
                    column: Some(d.column as usize),
                },
                message: d.message,
            }]
        })?;
        Self::parse_within(path, &file.text, limits)
    }

    /// Parses and checks scenario `text` (named `path` in errors), within the process's
    /// [`Limits::global`](guidepost_core::limits::Limits::global).
    pub fn parse(path: &Path, text: &str) -> Result<Self, Vec<ScenarioError>> {
        Self::parse_within(path, text, guidepost_core::limits::Limits::global())
    }

    /// Parses and checks scenario `text` within `limits`.
    ///
    /// The YAML is read twice: first by the bounded reader of definition files, which
    /// refuses nesting deeper than [`Limit::NestingDepth`](guidepost_core::limits::Limit::NestingDepth)
    /// and aliases that expand past [`Limit::ExpandedSize`](guidepost_core::limits::Limit::ExpandedSize)
    /// (or 200,000 values) at their line and column, then into [`ScenarioFile`]. The second
    /// reader has no such bounds of its own: it takes time quadratic in the depth of `[`/`{`
    /// nesting, and replays an alias once per use, so a 3 KB file of nested aliases took
    /// seconds and gigabytes.
    pub fn parse_within(
        path: &Path,
        text: &str,
        limits: &guidepost_core::limits::Limits,
    ) -> Result<Self, Vec<ScenarioError>> {
        let at = |line: Option<usize>, column: Option<usize>| SourceLocation { file: path.to_path_buf(), line, column };
        if let Err(e) = guidepost_core::definition::source::parse_with(text, limits) {
            return Err(vec![ScenarioError {
                location: at(Some(e.span.line as usize), Some(e.span.col as usize)),
                message: e.message,
            }]);
        }
        let file: ScenarioFile = from_yaml(text).map_err(|e| {
            let loc = e.location();
            vec![ScenarioError {
                location: at(loc.as_ref().map(|l| l.line()), loc.as_ref().map(|l| l.column())),
                message: e.to_string(),
            }]
        })?;
        // The line of each step's `id: ...`, found in one pass when the first error needs it.
        let mut id_lines: Option<HashMap<&str, usize>> = None;
        let mut line_of = |needle: &str| id_lines.get_or_insert_with(|| step_id_lines(text)).get(needle).copied();
        let mut errors = Vec::new();
        let mut error = |step: Option<&str>, message: String| {
            errors.push(ScenarioError { location: at(step.and_then(&mut line_of), None), message });
        };
        let graph = file.step_graph.as_ref().map(|g| compile_graph(g, &mut error));
        let step_ids: HashSet<&str> =
            file.step_graph.iter().flat_map(|g| g.steps.iter().map(|s| s.id.as_str())).collect();
        let known = |id: &str| step_ids.contains(id);
        let mut script = Vec::new();
        for (i, item) in file.script.iter().enumerate() {
            script.push(match item {
                ScriptItemFile::Customer(CustomerLineFile::Text(text)) => {
                    ScriptItem::Customer { text: text.clone(), step: None }
                }
                ScriptItemFile::Customer(CustomerLineFile::WithStep(CustomerLineWithStep { text, step })) => {
                    if !known(step) {
                        error(None, format!("script item {}: unknown step `{step}`", i + 1));
                    }
                    ScriptItem::Customer { text: text.clone(), step: Some(step.clone()) }
                }
                ScriptItemFile::Agent(text) => ScriptItem::Agent { text: text.clone() },
                ScriptItemFile::Simulate(SimulateFile::Turns(n)) => ScriptItem::Simulate { turns: Some(*n) },
                ScriptItemFile::Simulate(SimulateFile::Rest(_)) => ScriptItem::Simulate { turns: None },
                ScriptItemFile::Checkpoint(c) => ScriptItem::Checkpoint {
                    name: c.name.clone().unwrap_or_else(|| format!("checkpoint {}", i + 1)),
                    expect: c.expect.clone(),
                },
            });
        }
        if file.goal.trim().is_empty() {
            error(None, "`goal` is empty".to_string());
        }
        if !errors.is_empty() {
            if errors.len() > MAX_PROBLEMS_PER_FILE {
                let more = errors.len() - MAX_PROBLEMS_PER_FILE;
                errors.truncate(MAX_PROBLEMS_PER_FILE);
                errors.push(ScenarioError {
                    location: at(None, None),
                    message: format!("and {more} more problem(s) not shown"),
                });
            }
            return Err(errors);
        }
        let id = file.id.clone().unwrap_or_else(|| {
            path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "scenario".into())
        });
        let agent_definition = file.agent.as_ref().map(|a| path.parent().unwrap_or(Path::new(".")).join(a));
        Ok(Self { id, path: path.to_path_buf(), agent_definition, file, graph, script })
    }

    /// The step graph, compiled.
    pub fn graph(&self) -> Option<&StepGraph> {
        self.graph.as_ref()
    }

    /// The run setup of trial `trial`. The conversation id is `<scenario id>-trial<trial>`.
    pub fn setup(&self, trial: u32) -> RunSetup {
        self.setup_for(trial, None)
    }

    /// The run setup of trial `trial`, with the agent's definition for the reply checks (its
    /// language, and the facts it states).
    pub fn setup_for(&self, trial: u32, definition: Option<Arc<AgentDefinition>>) -> RunSetup {
        let mut policies: Vec<Arc<dyn Policy>> =
            vec![Arc::new(ReplyQuality { checks: self.file.reply_checks.checks(), definition })];
        if !self.file.policies.forbidden_agent_phrases.is_empty() {
            policies
                .push(Arc::new(ForbiddenAgentPhrases { phrases: self.file.policies.forbidden_agent_phrases.clone() }));
        }
        if let Some(n) = self.file.policies.max_turns_without_step {
            policies.push(Arc::new(RequireStepMatch { max_turns_without_step: n }));
        }
        RunSetup {
            scenario_id: self.id.clone(),
            trial,
            trajectory: Trajectory {
                goal: self.file.goal.clone(),
                persona: self.file.persona.clone(),
                steps: self.graph.clone(),
                max_turns: self.file.max_turns,
                conversation_id: format!("{}-trial{trial}", self.id),
                metadata: self.file.metadata.clone(),
                loop_detection: self.file.loop_detection.unwrap_or_default(),
            },
            script: self.script.clone(),
            expect: self.file.expect.clone(),
            policies,
        }
    }
}

/// The line (from 1) of the first `id: <step>` line of each step id in a scenario's text
/// (plain, double- or single-quoted).
fn step_id_lines(text: &str) -> HashMap<&str, usize> {
    let mut lines = HashMap::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim_start().trim_start_matches("- ").trim();
        let Some(id) = line.strip_prefix("id: ") else { continue };
        let id = ['"', '\''].iter().find_map(|q| id.strip_prefix(*q).and_then(|r| r.strip_suffix(*q))).unwrap_or(id);
        lines.entry(id).or_insert(i + 1);
    }
    lines
}

fn compile_graph(file: &StepGraphFile, error: &mut impl FnMut(Option<&str>, String)) -> StepGraph {
    let mut ids: HashSet<&str> = HashSet::with_capacity(file.steps.len());
    for step in &file.steps {
        let id = step.id.as_str();
        if !ids.insert(id) {
            error(Some(id), format!("step `{id}` is defined twice"));
        }
    }
    if !ids.contains(file.start.as_str()) {
        error(None, format!("`start` names unknown step `{}`", file.start));
    }
    for terminal in &file.terminals {
        if !ids.contains(terminal.as_str()) {
            error(None, format!("`terminals` names unknown step `{terminal}`"));
        }
    }
    let steps = file
        .steps
        .iter()
        .map(|s| {
            let mut step = StepDefinition::new(&s.id, &s.instruction);
            step.hints.clone_from(&s.hints);
            step.max_attempts = s.max_attempts;
            step.timeout = s.timeout_ms.map(Duration::from_millis);
            step.on_failure = s.on_failure;
            let mut problems: Vec<String> = Vec::new();
            let mut syntax_problems: Vec<String> = Vec::new();
            let mut check_ref = |r: &str, what: &str| {
                if !ids.contains(r) {
                    problems.push(format!("step `{}`: {what} names unknown step `{r}`", s.id));
                }
                if r == s.id {
                    problems.push(format!("step `{}`: {what} names the step itself", s.id));
                }
            };
            for after in &s.after {
                check_ref(after, "`after`");
                step.preconditions.push(Precondition::StepSatisfied(after.clone()));
            }
            for pre in &s.preconditions {
                match pre {
                    PreconditionFile::StepSatisfied(r) => {
                        check_ref(r, "a `step_satisfied` precondition");
                        step.preconditions.push(Precondition::StepSatisfied(r.clone()));
                    }
                    PreconditionFile::Custom { name, expr } => match Expr::parse(expr) {
                        Ok(e) => {
                            for r in e.step_references() {
                                check_ref(&r, "a custom precondition");
                            }
                            step.preconditions
                                .push(Precondition::Custom { name: name.clone(), check: CustomCheck::Expr(e) });
                        }
                        Err(e) => syntax_problems.push(format!("step `{}`: {e}", s.id)),
                    },
                }
            }
            for problem in problems.into_iter().chain(syntax_problems) {
                error(Some(&s.id), problem);
            }
            if let Some(when) = &s.satisfied_when {
                let expr = when.expr.as_ref().and_then(|source| match Expr::parse(source) {
                    Ok(e) => Some(e),
                    Err(e) => {
                        error(Some(&s.id), format!("step `{}`: satisfied_when: {e}", s.id));
                        None
                    }
                });
                step.satisfaction =
                    SatisfactionSpec { engine: when.engine.clone(), expr, judge: when.judge.clone(), closure: None };
            }
            step
        })
        .collect();
    StepGraph { steps, start: file.start.clone(), terminals: file.terminals.clone() }
}

/// Loads the scenario files among `paths` (files, or folders searched recursively for
/// `.yaml`/`.yml`), in path order. All problems of all files are reported together.
pub fn load_scenarios(paths: &[PathBuf]) -> Result<Vec<Scenario>, SimError> {
    let limits = guidepost_core::limits::Limits::global();
    let mut files = Vec::new();
    for path in paths {
        let found = guidepost_core::files::files_at(path, true, &guidepost_core::files::is_yaml, limits)?;
        files.extend(found);
    }
    files.sort();
    files.dedup();
    let mut scenarios = Vec::new();
    let mut errors = Vec::new();
    for file in files {
        match Scenario::load(&file) {
            Ok(s) => scenarios.push(s),
            Err(mut e) => errors.append(&mut e),
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    for s in &scenarios {
        if !seen.insert(s.id.clone()) {
            errors.push(ScenarioError {
                location: SourceLocation { file: s.path.clone(), line: None, column: None },
                message: format!("scenario id `{}` is used by another file", s.id),
            });
        }
    }
    if errors.is_empty() { Ok(scenarios) } else { Err(SimError::Scenarios(errors)) }
}
