//! Reading case files: each problem is an error at its file and line.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use guidepost_core::AgentDefinition;

use crate::case::{Case, CaseFile, CaseSpec, Line, Suite};

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

/// The agents loaded so far: by file (canonical path) and the description a case gives it.
type Agents = HashMap<(PathBuf, Option<String>), usize>;

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
    let mut agents = Agents::new();
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

/// The line (from 1) of the first line of `text` that `matches`.
fn line_of(text: &str, matches: impl Fn(&str) -> bool) -> Option<usize> {
    text.lines().position(matches).map(|l| l + 1)
}

/// Reads one case file into `suite`, loading its agents unless an earlier file did. A file
/// `found` in a folder without a top-level `cases:` key is not a case file and is skipped.
fn load_file(path: &Path, found: bool, suite: &mut Suite, agents: &mut Agents) -> Result<(), Vec<CaseError>> {
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
    let top = |key: &str| line_of(&text, |l| l.starts_with(&format!("{key}:")));
    let named: Vec<(String, &PathBuf)> = match (&file.agent, file.agents.is_empty()) {
        (Some(_), false) => {
            return Err(vec![at(top("agents"), "give `agent` (one agent) or `agents` (several), not both".into())]);
        }
        (None, true) => {
            return Err(vec![at(Some(1), "no agent: give `agent: <file>` or `agents: {name: <file>}`".into())]);
        }
        (Some(one), true) => vec![(String::new(), one)],
        (None, false) => file.agents.iter().map(|(n, p)| (n.clone(), p)).collect(),
    };
    let mut errors = Vec::new();
    // Every agent the file names loads, whether or not a case is about it yet.
    for (name, agent_file) in &named {
        let agent_path = path.parent().unwrap_or(Path::new(".")).join(agent_file);
        if let Err(message) = agent_index(&agent_path, None, suite, agents) {
            let line = if name.is_empty() { top("agent") } else { top("agents") };
            errors.push(at(line, message));
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    for spec in file.cases {
        let line = line_of(&text, |l| l.trim_start().trim_start_matches("- ").trim() == format!("id: {}", spec.id));
        let chosen = match (&spec.agent, named.as_slice()) {
            (None, [(_, one)]) => Ok(*one),
            (None, _) => Err(format!("which agent? name one of {}", names(&named))),
            (Some(name), _) if file.agent.is_some() => {
                Err(format!("`agent: {name}` names one of the file's `agents`, and this file has one `agent`"))
            }
            (Some(name), _) => named
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, p)| *p)
                .ok_or_else(|| format!("no agent `{name}` in the file's `agents` ({})", names(&named))),
        };
        let agent_file = match chosen {
            Ok(agent_file) => agent_file,
            Err(problem) => {
                errors.push(at(line, format!("case `{}`: {problem}", spec.id)));
                continue;
            }
        };
        let agent_path = path.parent().unwrap_or(Path::new(".")).join(agent_file);
        let agent = match agent_index(&agent_path, spec.agent_description.as_deref(), suite, agents) {
            Ok(index) => index,
            Err(message) => {
                errors.push(at(line, message));
                continue;
            }
        };
        for problem in check(&spec, &suite.agents[agent].1) {
            errors.push(at(line, format!("case `{}`: {problem}", spec.id)));
        }
        suite.cases.push(Case { spec, origin: (path.to_path_buf(), line), agent });
    }
    if errors.is_empty() { Ok(()) } else { Err(errors) }
}

fn names(named: &[(String, &PathBuf)]) -> String {
    named.iter().map(|(n, _)| format!("`{n}`")).collect::<Vec<_>>().join(", ")
}

/// The index in `suite.agents` of the agent at `path`, with `description` in place of its
/// own when given; loaded now unless an earlier case loaded it.
fn agent_index(
    path: &Path,
    description: Option<&str>,
    suite: &mut Suite,
    agents: &mut Agents,
) -> Result<usize, String> {
    let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let key = (canonical.clone(), description.map(str::to_string));
    if let Some(index) = agents.get(&key) {
        return Ok(*index);
    }
    let plain = (canonical, None);
    let mut definition = match agents.get(&plain) {
        Some(index) => suite.agents[*index].1.clone(),
        None => {
            let definition = load_agent(path)?;
            suite.agents.push((path.to_path_buf(), definition.clone()));
            agents.insert(plain, suite.agents.len() - 1);
            definition
        }
    };
    if description.is_none() {
        return Ok(suite.agents.len() - 1);
    }
    definition.agent.description = description.map(str::to_string);
    suite.agents.push((path.to_path_buf(), definition));
    agents.insert(key, suite.agents.len() - 1);
    Ok(suite.agents.len() - 1)
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
    let before = spec.before_this_turn();
    if before.is_empty() {
        problems.push("the conversation must have a customer message to decide on".to_string());
    } else if spec.conversation[before.len()..].iter().any(|l| !matches!(l, Line::Tool(_))) {
        problems.push(
            "the conversation must end with a customer message (only tool calls of this turn may follow it)".into(),
        );
    }
    let guideline = |id: &str| definition.guideline(id).is_some();
    let entity = |id: &str| match id.strip_prefix("journey:") {
        Some(j) => definition.journey(j).is_some(),
        None => guideline(id),
    };
    for id in spec.expect.guidelines.keys().chain(&spec.state.applied) {
        if !guideline(id) {
            problems.push(format!("no guideline `{id}` in the agent"));
        }
    }
    for id in spec.expect.relationships.keys().chain(spec.matched.iter().flatten()) {
        if !entity(id) {
            problems.push(format!("`{id}` is neither a guideline of the agent nor journey:<id>"));
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
        if !entity(option) {
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
    let e = &spec.expect;
    if spec.matched.is_some() {
        // Resolution alone decides: only what it decides can be labelled.
        if !e.guidelines.is_empty() || !e.journeys.is_empty() || e.clarification.is_some() || !e.tools.is_empty() {
            problems
                .push("with `matched`, relational resolution alone decides: expect only `relationships`".to_string());
        }
        if e.relationships.is_empty() {
            problems.push("`matched` is given but `expect.relationships` is empty".to_string());
        }
    }
    let decisions = e.guidelines.len()
        + e.relationships.len()
        + e.journeys.len()
        + e.tools.len()
        + usize::from(e.clarification.is_some());
    if decisions == 0 {
        problems.push("`expect` holds no decision".to_string());
    }
    problems
}
