//! The case format: a YAML file of labelled decisions about one agent.
//!
//! ```yaml
//! agent: ../agents/weather.yaml          # relative to this file
//! cases:
//!   - id: city-in-the-opening
//!     description: The opening message names the city; the journey skips asking for it.
//!     conversation:                       # oldest first; the last customer message is decided on
//!       - customer: 北京明天天气怎么样？
//!     state:                              # the agent state before that message (optional)
//!       applied: [greet]
//!       journeys: {weather_lookup: [initial, ask_city]}
//!     variables: {tier: gold}             # context variable values (optional)
//!     expect:
//!       guidelines: {greet: false}        # guideline id: applies or not
//!       journeys: {weather_lookup: get_weather}   # state id, completed, exited or not_started
//!       tools: {get_weather: {location: 北京}}    # called with at least these arguments; false: not called
//! ```
//!
//! `expect` also takes `relationships` (like `guidelines`, for cases decided by relational
//! resolution: priorities, dependencies, entailment) and `clarification` (the guidelines or
//! `journey:<id>` a clarifying question offers; `[]` for no question).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use guidepost_core::AgentDefinition;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A case file as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CaseFile {
    /// The agent definition the cases are about, relative to this file.
    pub agent: PathBuf,
    /// The cases.
    pub cases: Vec<CaseSpec>,
}

/// One labelled decision point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CaseSpec {
    /// Unique within the suite.
    pub id: String,
    /// What the case checks, for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The conversation, oldest first, ending with the customer message the decisions are
    /// about.
    pub conversation: Vec<Line>,
    /// The agent state before the last customer message.
    #[serde(default)]
    pub state: StateSpec,
    /// Context variable values, by variable name.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub variables: Map<String, Value>,
    /// The right decisions.
    pub expect: Expect,
}

/// One line of the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Line {
    /// A customer message.
    Customer(String),
    /// An agent message.
    Agent(String),
    /// A tool the agent called earlier, with its result.
    Tool(ToolLine),
}

/// A tool call of an earlier turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolLine {
    /// The tool's name.
    pub name: String,
    /// Its arguments.
    #[serde(default)]
    pub arguments: Map<String, Value>,
    /// What it returned (its `data`).
    pub result: Value,
}

/// The agent state before the decided message.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StateSpec {
    /// Guidelines whose action was already carried out.
    #[serde(default)]
    pub applied: Vec<String>,
    /// Active journeys and the states they went through, from `initial`.
    #[serde(default)]
    pub journeys: BTreeMap<String, Vec<String>>,
}

/// The right decisions of a case; every entry is one decision.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// Whether each guideline applies now.
    #[serde(default)]
    pub guidelines: BTreeMap<String, bool>,
    /// Whether each guideline is followed after relational resolution (priorities,
    /// dependencies, entailment).
    #[serde(default)]
    pub relationships: BTreeMap<String, bool>,
    /// Where each journey stands after the message: a state id, `completed` (it reached its
    /// end), `exited` (it was left before its end) or `not_started`.
    #[serde(default)]
    pub journeys: BTreeMap<String, String>,
    /// The options a clarifying question offers (guideline ids, `journey:<id>`); `[]` when no
    /// question is due.
    #[serde(default)]
    pub clarification: Option<Vec<String>>,
    /// For each tool: `false` when it must not be called, or the arguments it must be called
    /// with (at least these).
    #[serde(default)]
    pub tools: BTreeMap<String, ToolExpect>,
}

/// What a tool-call decision must be.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum ToolExpect {
    /// `false`: not called (`true`: called, with any arguments).
    Called(bool),
    /// Called with at least these arguments.
    With(Map<String, Value>),
}

/// A case ready to run.
#[derive(Debug, Clone)]
pub struct Case {
    /// The case as written.
    pub spec: CaseSpec,
    /// The file it came from, and the line of its `id`.
    pub origin: (PathBuf, Option<usize>),
    /// Index of its agent in [`Suite::agents`].
    pub agent: usize,
}

/// Cases and the agents they are about.
#[derive(Debug, Clone, Default)]
pub struct Suite {
    /// The agent definitions, each loaded once.
    pub agents: Vec<(PathBuf, AgentDefinition)>,
    /// The cases, in file order.
    pub cases: Vec<Case>,
}

/// A problem with a case file, at its place.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}{}: {message}", file.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
pub struct CaseError {
    /// The file.
    pub file: PathBuf,
    /// The line, when known.
    pub line: Option<usize>,
    /// What is wrong.
    pub message: String,
}

/// The JSON Schema of case files.
pub fn schema() -> Value {
    serde_json::to_value(schemars::schema_for!(CaseFile)).unwrap_or(Value::Null)
}

/// Loads the case files at `paths` (files, or folders searched for `.yaml`/`.yml`).
/// Every problem is reported, each at its file and line.
pub fn load(paths: &[PathBuf]) -> Result<Suite, Vec<CaseError>> {
    let mut files = Vec::new();
    let mut errors = Vec::new();
    for path in paths {
        if let Err(e) = collect(path, &mut files) {
            errors.push(CaseError { file: path.clone(), line: None, message: e.to_string() });
        }
    }
    // A file named and also found in a folder is read once, as named.
    files.sort();
    files.dedup_by(|later, first| later.0 == first.0);
    let mut suite = Suite::default();
    let mut agents: HashMap<PathBuf, usize> = HashMap::new();
    let mut ids: HashMap<String, PathBuf> = HashMap::new();
    for (file, found) in files {
        match load_file(&file, found, &mut suite, &mut agents) {
            Ok(()) => {}
            Err(mut e) => errors.append(&mut e),
        }
    }
    for case in &suite.cases {
        if let Some(other) = ids.insert(case.spec.id.clone(), case.origin.0.clone()) {
            errors.push(CaseError {
                file: case.origin.0.clone(),
                line: case.origin.1,
                message: format!("case id `{}` is also used in {}", case.spec.id, other.display()),
            });
        }
    }
    if suite.cases.is_empty() && errors.is_empty() {
        errors.push(CaseError {
            file: paths.first().cloned().unwrap_or_default(),
            line: None,
            message: "no cases found".into(),
        });
    }
    if errors.is_empty() { Ok(suite) } else { Err(errors) }
}

/// The case files at `path`: the file itself, or the `.yaml`/`.yml` files directly in the
/// folder (subfolders, where the agents may live, are not searched). A file found in a folder
/// is `true`: it is skipped when it has no top-level `cases:` key (an agent beside its cases).
fn collect(path: &Path, out: &mut Vec<(PathBuf, bool)>) -> Result<(), guidepost_core::files::FileError> {
    let limits = guidepost_core::limits::Limits::global();
    let in_folder = path.is_dir();
    let found = guidepost_core::files::files_at(path, false, &guidepost_core::files::is_yaml, limits)?;
    out.extend(found.into_iter().map(|f| (f, in_folder)));
    Ok(())
}

/// Reads one case file into `suite`, loading its agent unless an earlier file did. A file
/// `found` in a folder without a top-level `cases:` key is not a case file and is skipped.
fn load_file(
    path: &Path,
    found: bool,
    suite: &mut Suite,
    agents: &mut HashMap<PathBuf, usize>,
) -> Result<(), Vec<CaseError>> {
    let at = |line: Option<usize>, message: String| CaseError { file: path.to_path_buf(), line, message };
    let limits = guidepost_core::limits::Limits::global();
    let bytes = guidepost_core::files::read(path, limits).map_err(|e| vec![at(None, e.to_string())])?;
    let name = path.display().to_string();
    let text = guidepost_core::definition::text::decode(&name, bytes, limits)
        .map_err(|d| vec![at(Some(d.line as usize), d.message)])?
        .text;
    if found && !text.lines().any(|l| l.starts_with("cases:")) {
        return Ok(());
    }
    // The bounded reader first: it refuses deep nesting and alias bombs at their line.
    if let Err(e) = guidepost_core::definition::source::parse_with(&text, limits) {
        return Err(vec![at(Some(e.span.line as usize), e.message)]);
    }
    let file: CaseFile =
        yaml_serde::with::singleton_map_recursive::deserialize(yaml_serde::Deserializer::from_str(&text))
            .map_err(|e: yaml_serde::Error| vec![at(e.location().map(|l| l.line()), e.to_string())])?;
    let agent_path = path.parent().unwrap_or(Path::new(".")).join(&file.agent);
    let key = std::fs::canonicalize(&agent_path).unwrap_or_else(|_| agent_path.clone());
    let agent = match agents.get(&key) {
        Some(index) => *index,
        None => {
            let definition = load_agent(&agent_path).map_err(|message| vec![at(None, message)])?;
            suite.agents.push((agent_path.clone(), definition));
            agents.insert(key, suite.agents.len() - 1);
            suite.agents.len() - 1
        }
    };
    let definition = &suite.agents[agent].1;
    let mut errors = Vec::new();
    for spec in file.cases {
        let line =
            text.lines().position(|l| l.trim_start().trim_start_matches("- ").trim() == format!("id: {}", spec.id));
        let line = line.map(|l| l + 1);
        for problem in check(&spec, definition) {
            errors.push(at(line, format!("case `{}`: {problem}", spec.id)));
        }
        suite.cases.push(Case { spec, origin: (path.to_path_buf(), line), agent });
    }
    if errors.is_empty() { Ok(()) } else { Err(errors) }
}

/// Loads an agent definition, its problems rendered as `guidepost check` renders them.
fn load_agent(path: &Path) -> Result<AgentDefinition, String> {
    let limits = guidepost_core::limits::Limits::global();
    let name = path.display().to_string();
    let bytes = guidepost_core::files::read(path, limits).map_err(|e| format!("agent {e}"))?;
    let source = guidepost_core::definition::text::decode(&name, bytes, limits).map_err(|d| d.render(None))?;
    let loaded = guidepost_core::definition::load_agent(std::slice::from_ref(&source));
    loaded.definition.ok_or_else(|| {
        let problems: Vec<String> = loaded.diagnostics.iter().map(|d| d.render(Some(&source.text))).collect();
        format!("agent {name} does not load:\n{}", problems.join("\n"))
    })
}

/// What in `spec` does not exist in the agent or cannot be decided.
fn check(spec: &CaseSpec, definition: &AgentDefinition) -> Vec<String> {
    let mut problems = Vec::new();
    if !matches!(spec.conversation.last(), Some(Line::Customer(_))) {
        problems.push("the conversation must end with a customer message".to_string());
    }
    let guideline = |id: &str| definition.guideline(id).is_some();
    for id in spec.expect.guidelines.keys().chain(spec.expect.relationships.keys()).chain(&spec.state.applied) {
        if !guideline(id) {
            problems.push(format!("no guideline `{id}` in the agent"));
        }
    }
    for (journey, path) in &spec.state.journeys {
        match definition.journey(journey) {
            None => problems.push(format!("no journey `{journey}` in the agent")),
            Some(j) => {
                if guidepost_core::JourneyPath::from_states(path.clone()).is_none() {
                    problems.push(format!("the path of journey `{journey}` must start at `initial`"));
                }
                for state in path.iter().skip(1).filter(|s| j.state(s).is_none()) {
                    problems.push(format!("journey `{journey}` has no state `{state}`"));
                }
            }
        }
    }
    for (journey, state) in &spec.expect.journeys {
        match definition.journey(journey) {
            None => problems.push(format!("no journey `{journey}` in the agent")),
            Some(j) => {
                let known = matches!(state.as_str(), "not_started" | "exited" | "completed" | "initial")
                    || j.state(state).is_some();
                if !known {
                    problems.push(format!(
                        "journey `{journey}` has no state `{state}` (a state id, completed, exited or not_started)"
                    ));
                }
            }
        }
    }
    for option in spec.expect.clarification.iter().flatten() {
        let known = match option.strip_prefix("journey:") {
            Some(j) => definition.journey(j).is_some(),
            None => guideline(option),
        };
        if !known {
            problems.push(format!("clarification option `{option}` is neither a guideline nor journey:<id>"));
        }
    }
    for tool in spec.expect.tools.keys() {
        if !definition.tools.iter().any(|t| &t.id.name == tool) {
            problems.push(format!("no tool `{tool}` in the agent"));
        }
    }
    for line in &spec.conversation {
        if let Line::Tool(call) = line
            && !definition.tools.iter().any(|t| t.id.name == call.name)
        {
            problems.push(format!("the conversation calls `{}`, which the agent does not have", call.name));
        }
    }
    let decisions = spec.expect.guidelines.len()
        + spec.expect.relationships.len()
        + spec.expect.journeys.len()
        + spec.expect.tools.len()
        + usize::from(spec.expect.clarification.is_some());
    if decisions == 0 {
        problems.push("`expect` holds no decision".to_string());
    }
    problems
}
