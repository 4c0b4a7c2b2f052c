//! Bringing an agent over from a running Parlant 3.3 server: what its REST API answers about
//! the agent ([`ParlantServer`], read by whoever speaks HTTP) becomes a definition file
//! ([`import_agent`]), with the list of what could not be carried over and why.
//!
//! Parlant's API shows most of an agent: guidelines (criticality, tags, metadata, tools),
//! relationships, journeys with their conditions and, through a Mermaid chart, their states
//! and transitions, glossary, context variables, canned responses, capabilities and tool
//! services. What lives only in the Python code of an SDK agent (matchers, hooks, retrievers,
//! field providers, policies) is not in the API and cannot come over.

pub mod chart;
mod guidelines;
mod journeys;
mod knowledge;
#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests;
pub mod wire;

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::agent::{CompositionMode, OutputMode};
use crate::definition::file::{AgentFile, AgentSection, TagDecl};
use wire::*;

/// A read that failed: the request and what the server (or the network) answered.
pub type Fetched<T> = Result<T, String>;

/// What a `GET /relationships?...` read asked about.
#[derive(Debug, Clone, PartialEq)]
pub enum RelationshipsOf {
    /// `?guideline_id=`.
    Guideline(String),
    /// `?tag_id=` (also `agent:<id>` and `journey:<id>`).
    Tag(String),
    /// `?tool_id=service:tool`.
    Tool(ToolIdDto),
}

/// One `GET /relationships?...` read.
#[derive(Debug, Clone)]
pub struct RelationshipRead {
    /// What it asked about.
    pub of: RelationshipsOf,
    /// What came back.
    pub answer: Fetched<Vec<RelationshipDto>>,
}

impl RelationshipRead {
    /// The tool asked about: the answer names tools without their service.
    pub fn tool(&self) -> Option<&ToolIdDto> {
        match &self.of {
            RelationshipsOf::Tool(id) => Some(id),
            _ => None,
        }
    }
}

/// What a Parlant server's REST API answered about one agent.
#[derive(Debug, Clone)]
pub struct ParlantServer {
    /// The server's base URL.
    pub url: String,
    /// The agent to bring over.
    pub agent: AgentDto,
    /// `GET /tags`.
    pub tags: Fetched<Vec<TagDto>>,
    /// `GET /guidelines`.
    pub guidelines: Fetched<Vec<GuidelineDto>>,
    /// `GET /guidelines/{id}` of the agent's guidelines (their tool associations).
    pub guideline_details: BTreeMap<String, Fetched<GuidelineDetailDto>>,
    /// `GET /relationships?...` by the agent's guidelines, tags, journeys and tools.
    pub relationships: Vec<RelationshipRead>,
    /// `GET /journeys`.
    pub journeys: Fetched<Vec<JourneyDto>>,
    /// `GET /journeys/{id}/mermaid` of the agent's journeys.
    pub charts: BTreeMap<String, Fetched<String>>,
    /// `GET /terms`.
    pub terms: Fetched<Vec<TermDto>>,
    /// `GET /context-variables`.
    pub variables: Fetched<Vec<ContextVariableDto>>,
    /// `GET /context-variables/{id}?include_values=true` of the agent's variables.
    pub variable_values: BTreeMap<String, Fetched<VariableReadDto>>,
    /// `GET /canned_responses`.
    pub canned_responses: Fetched<Vec<CannedResponseDto>>,
    /// `GET /capabilities`.
    pub capabilities: Fetched<Vec<CapabilityDto>>,
    /// `GET /services`.
    pub services: Fetched<Vec<ServiceDto>>,
    /// `GET /services/{name}`: each service's tools.
    pub service_tools: BTreeMap<String, Fetched<Vec<ToolDto>>>,
}

/// Which entities belong to an agent: those without tags (global), those tagged
/// `agent:<id>` or with one of the agent's own tags, and those tagged `journey:<id>` for one
/// of its journeys.
#[derive(Debug, Clone)]
pub struct AgentScope {
    agent_tag: String,
    own_tags: Vec<String>,
    journeys: HashSet<String>,
}

impl AgentScope {
    /// The scope of `agent`, before its journeys are known.
    pub fn new(agent: &AgentDto) -> Self {
        Self { agent_tag: format!("agent:{}", agent.id), own_tags: agent.tags.clone(), journeys: HashSet::new() }
    }

    /// Whether an entity with these tags belongs to the agent.
    pub fn includes(&self, tags: &[String]) -> bool {
        tags.is_empty()
            || tags.iter().any(|t| {
                *t == self.agent_tag
                    || self.own_tags.contains(t)
                    || t.strip_prefix("journey:").is_some_and(|j| self.journeys.contains(j))
            })
    }

    /// The agent's journeys, out of all the server's; remembers them for [`Self::includes`].
    pub fn journeys<'j>(&mut self, all: &'j [JourneyDto]) -> Vec<&'j JourneyDto> {
        let mine: Vec<&JourneyDto> = all.iter().filter(|j| self.includes(&j.tags)).collect();
        self.journeys.extend(mine.iter().map(|j| j.id.clone()));
        mine
    }
}

/// Something the import could not carry over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loss {
    /// What it is.
    pub what: String,
    /// Why it did not come over, and what the definition has instead.
    pub why: String,
}

/// The import: the definition file and what did not come over.
#[derive(Debug, Clone)]
pub struct Imported {
    /// The agent's definition.
    pub file: AgentFile,
    /// What could not be carried over, in the order it was met.
    pub losses: Vec<Loss>,
}

/// Why nothing could be imported.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// A list the import cannot do without could not be read.
    #[error("the server's {what} could not be read: {message}")]
    Unreadable {
        /// Which list.
        what: &'static str,
        /// What went wrong.
        message: String,
    },
}

/// What Parlant keeps in Python code, out of its REST API's sight.
pub const NEVER_IN_THE_API: &[(&str, &str)] = &[
    (
        "custom matchers, `on_match`/`on_message` hooks, retrievers and canned response field providers",
        "they are Python functions in the SDK process; the API does not show whether an agent has any",
    ),
    (
        "engine hooks, preamble configuration, perceived-performance and optimization policies, planners",
        "they configure the Parlant server process, not the agent the API describes",
    ),
    (
        "journey states' descriptions, labels, metadata, composition modes and state-scoped canned responses",
        "the API shows a journey's states only as a Mermaid chart of their actions and transitions",
    ),
    (
        "whether a relationship to a tag means all of its members or any of them",
        "the API names the tag only; the import writes `tag:` (all members, Parlant's default)",
    ),
    (
        "`depend_on_any` groups",
        "the API cannot express them: Parlant 3.3.2 answers HTTP 500 when asked about a guideline in one",
    ),
    ("customers, sessions and their events", "they are data, not part of an agent's definition"),
];

/// Brings `server.agent` over as a definition file.
pub fn import_agent(server: &ParlantServer) -> Result<Imported, ImportError> {
    let mut builder = Builder::new(server)?;
    let mut file = AgentFile { agent: Some(builder.agent_section()), ..AgentFile::default() };
    let mut journeys = journeys::import(&mut builder)?;
    file.guidelines = guidelines::import(&mut builder, &mut journeys)?;
    file.journeys = journeys.decls;
    file.relationships = guidelines::relationships(&mut builder);
    knowledge::import(&mut builder, &mut file);
    builder.attach_canned_responses(&mut file);
    file.tags = builder.used_tags.iter().map(|name| TagDecl::Name(name.clone())).collect();
    if let Some(agent) = file.agent.as_mut() {
        agent.tags = builder.agent_tag_names();
    }
    Ok(Imported { file, losses: builder.losses })
}

/// The state of one import.
pub(crate) struct Builder<'s> {
    pub server: &'s ParlantServer,
    pub scope: AgentScope,
    pub losses: Vec<Loss>,
    used_ids: HashSet<String>,
    /// Parlant guideline id → the imported guideline's id.
    pub guideline_ids: HashMap<String, String>,
    /// Parlant journey id → the imported journey's id.
    pub journey_ids: HashMap<String, String>,
    /// Parlant id of a journey's condition guideline → the imported journey's id.
    pub condition_journeys: HashMap<String, String>,
    /// Parlant guidelines placed in a journey for their dependency on it → its Parlant id.
    pub nested: HashMap<String, String>,
    /// Parlant guidelines of another agent's journey, left out.
    pub foreign: HashSet<String>,
    tag_names: HashMap<String, String>,
    /// Tag names the file uses, in the order first used.
    pub used_tags: Vec<String>,
    /// Known tools by name: the services that have a tool of that name.
    pub tool_services: BTreeMap<String, Vec<String>>,
    /// Canned responses tied to a guideline (Parlant guideline id → template ids) or to every
    /// state of a journey (imported journey id → template ids).
    pub guideline_templates: HashMap<String, Vec<String>>,
    pub journey_templates: HashMap<String, Vec<String>>,
}

impl<'s> Builder<'s> {
    fn new(server: &'s ParlantServer) -> Result<Self, ImportError> {
        let mut builder = Self {
            server,
            scope: AgentScope::new(&server.agent),
            losses: Vec::new(),
            used_ids: HashSet::new(),
            guideline_ids: HashMap::new(),
            journey_ids: HashMap::new(),
            condition_journeys: HashMap::new(),
            nested: HashMap::new(),
            foreign: HashSet::new(),
            tag_names: HashMap::new(),
            used_tags: Vec::new(),
            tool_services: BTreeMap::new(),
            guideline_templates: HashMap::new(),
            journey_templates: HashMap::new(),
        };
        match &server.tags {
            Ok(tags) => builder.tag_names = tags.iter().map(|t| (t.id.clone(), t.name.clone())).collect(),
            Err(e) => builder.lose("tag names", format!("{e}; tagged entities keep their tags' ids")),
        }
        builder.collect_tools();
        Ok(builder)
    }

    /// Notes something that did not come over.
    pub fn lose(&mut self, what: impl Into<String>, why: impl Into<String>) {
        self.losses.push(Loss { what: what.into(), why: why.into() });
    }

    /// A fresh id from `text` (its first significant words), else `fallback`.
    pub fn fresh_id(&mut self, text: &str, fallback: &str) -> String {
        let base = id_words(text).unwrap_or_else(|| fallback.to_string());
        let mut id = base.clone();
        let mut n = 2;
        while !self.used_ids.insert(id.clone()) {
            id = format!("{base}_{n}");
            n += 1;
        }
        id
    }

    /// The tag names of an entity's tags: `agent:`, `journey:` and other built-in tags are
    /// left out (they are what the file's structure says).
    pub fn tag_refs(&mut self, tags: &[String]) -> Vec<String> {
        let mut out = Vec::new();
        for tag in tags {
            if tag.contains(':') || tag.starts_with("__") {
                continue;
            }
            let name = self.tag_names.get(tag).cloned().unwrap_or_else(|| tag.clone());
            if !self.used_tags.contains(&name) {
                self.used_tags.push(name.clone());
            }
            out.push(name);
        }
        out
    }

    fn agent_tag_names(&mut self) -> Vec<String> {
        let tags = self.server.agent.tags.clone();
        self.tag_refs(&tags)
    }

    /// `service:tool` for a tool known by name; None (and a loss) when no service or several
    /// have it.
    pub fn tool_ref(&mut self, name: &str, known: Option<&ToolIdDto>, context: &str) -> Option<String> {
        if let Some(id) = known.filter(|id| id.tool_name == name) {
            return Some(format!("{}:{}", id.service_name, id.tool_name));
        }
        match self.tool_services.get(name).map(Vec::as_slice) {
            Some([service]) => Some(format!("{service}:{name}")),
            Some(many) if many.len() > 1 => {
                let services = many.join(", ");
                self.lose(
                    context.to_string(),
                    format!("the tool `{name}` is in several services ({services}) and the API does not say which"),
                );
                None
            }
            _ => {
                self.lose(context.to_string(), format!("the API does not say which service the tool `{name}` is in"));
                None
            }
        }
    }

    fn collect_tools(&mut self) {
        let add = |service: &str, tool: &str, map: &mut BTreeMap<String, Vec<String>>| {
            let services = map.entry(tool.to_string()).or_default();
            if !services.iter().any(|s| s == service) {
                services.push(service.to_string());
            }
        };
        let mut map = BTreeMap::new();
        for (service, tools) in &self.server.service_tools {
            for tool in tools.iter().flatten() {
                add(service, &tool.name, &mut map);
            }
        }
        for detail in self.server.guideline_details.values().flatten() {
            for a in &detail.tool_associations {
                add(&a.tool_id.service_name, &a.tool_id.tool_name, &mut map);
            }
        }
        for variable in self.server.variables.iter().flatten() {
            if let Some(t) = &variable.tool_id {
                add(&t.service_name, &t.tool_name, &mut map);
            }
        }
        for read in &self.server.relationships {
            if let Some(t) = read.tool() {
                add(&t.service_name, &t.tool_name, &mut map);
            }
        }
        self.tool_services = map;
    }

    fn agent_section(&mut self) -> AgentSection {
        let agent = &self.server.agent;
        let composition_mode = agent.composition_mode.as_deref().and_then(|m| self.composition(m, "the agent"));
        let output_mode = match agent.message_output_mode.as_deref() {
            Some("stream") => Some(OutputMode::Stream),
            _ => None,
        };
        AgentSection {
            id: Some(agent.id.clone()).filter(|id| crate::ids::is_valid_id(id)),
            name: agent.name.clone(),
            description: agent.description.clone().filter(|d| !d.trim().is_empty()),
            max_engine_iterations: agent.max_engine_iterations.filter(|n| *n != 3).map(|n| n.clamp(1, 10)),
            composition_mode: composition_mode.filter(|m| *m != CompositionMode::Fluid),
            output_mode,
            ..AgentSection::default()
        }
    }

    /// A composition mode from its REST name.
    pub fn composition(&mut self, mode: &str, of: &str) -> Option<CompositionMode> {
        match mode {
            "fluid" => Some(CompositionMode::Fluid),
            "canned_fluid" => Some(CompositionMode::CannedFluid),
            "composited_canned" => Some(CompositionMode::CannedComposited),
            "strict_canned" => Some(CompositionMode::CannedStrict),
            other => {
                self.lose(format!("the composition mode of {of}"), format!("`{other}` is not a mode Guidepost knows"));
                None
            }
        }
    }

    fn attach_canned_responses(&mut self, file: &mut AgentFile) {
        for g in file.guidelines.iter_mut().chain(file.journeys.iter_mut().flat_map(|j| j.guidelines.iter_mut())) {
            let parlant = self.guideline_ids.iter().find(|(_, ours)| Some(*ours) == g.id.as_ref()).map(|(p, _)| p);
            if let Some(templates) = parlant.and_then(|p| self.guideline_templates.get(p)) {
                g.canned_responses.extend(templates.iter().cloned());
            }
        }
        for j in &mut file.journeys {
            if let Some(templates) = j.id.as_ref().and_then(|id| self.journey_templates.get(id)) {
                for state in &mut j.states {
                    state.canned_responses.extend(templates.iter().cloned());
                }
            }
        }
    }
}

/// Why Parlant 3.3.2 answers a read of a guideline with an error, where that is known.
/// `relationships`: the error answered a read of the guideline's relationships, else of the
/// guideline.
pub(crate) fn known_cause(error: &str, relationships: bool) -> &'static str {
    if error.contains("HTTP 404") && error.contains("Item 'journey:") {
        " (Parlant 3.3.2 answers so for a guideline related to a journey, directly or through other guidelines)"
    } else if error.contains("HTTP 500") && relationships {
        " (Parlant 3.3.2 answers so for a guideline in a `depend_on_any` group, which its API cannot express)"
    } else if error.contains("HTTP 500") {
        " (Parlant 3.3.2 answers so for a guideline in a relationship its API cannot express: a `depend_on_any` group or a `reevaluate_after` tool)"
    } else {
        ""
    }
}

/// Words that say little about a rule, left out of ids made from its text.
const FILLER: &[&str] = &[
    "the",
    "a",
    "an",
    "customer",
    "customers",
    "user",
    "agent",
    "assistant",
    "is",
    "are",
    "was",
    "be",
    "to",
    "of",
    "for",
    "and",
    "or",
    "in",
    "on",
    "at",
    "with",
    "about",
    "their",
    "them",
    "they",
    "it",
    "its",
    "that",
    "this",
    "has",
    "have",
    "when",
    "if",
    "you",
    "your",
    "use",
    "tool",
];

/// `asks_refund` from "The customer asks for a refund": up to five significant words.
fn id_words(text: &str) -> Option<String> {
    let words: Vec<String> = text
        .split(|c: char| !c.is_alphanumeric())
        .map(str::to_lowercase)
        .filter(|w| !w.is_empty() && !FILLER.contains(&w.as_str()))
        .take(5)
        .collect();
    (!words.is_empty()).then(|| words.join("_"))
}

#[cfg(test)]
mod unit_tests {
    use super::*;

    #[test]
    fn ids_come_from_the_significant_words() {
        assert_eq!(id_words("The customer asks for a refund").as_deref(), Some("asks_refund"));
        assert_eq!(id_words("用户想知道天气").as_deref(), Some("用户想知道天气"));
        assert_eq!(id_words("The customer"), None);
    }

    #[test]
    fn scope_follows_parlant_tags() {
        let agent = AgentDto {
            id: "bakery".into(),
            name: "Crumb".into(),
            description: None,
            max_engine_iterations: None,
            composition_mode: None,
            message_output_mode: None,
            tags: vec!["vip".into()],
        };
        let mut scope = AgentScope::new(&agent);
        let t = |tags: &[&str]| tags.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(scope.includes(&[]));
        assert!(scope.includes(&t(&["agent:bakery"])));
        assert!(scope.includes(&t(&["vip"])));
        assert!(!scope.includes(&t(&["agent:night"])));
        assert!(!scope.includes(&t(&["journey:j1"])));
        let journey = |id: &str, tags: &[&str]| JourneyDto {
            id: id.into(),
            title: id.into(),
            description: None,
            conditions: vec![],
            tags: t(tags),
            composition_mode: None,
            labels: vec![],
            priority: 0,
        };
        let all = [journey("j1", &["agent:bakery"]), journey("j2", &["agent:night"])];
        assert_eq!(scope.journeys(&all).len(), 1);
        assert!(scope.includes(&t(&["journey:j1"])));
        assert!(!scope.includes(&t(&["journey:j2"])));
    }
}
