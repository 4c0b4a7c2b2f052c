//! Building agent definitions in Rust.
//!
//! The builder writes the same authoring structures a definition file holds and resolves
//! them with the same checks, so an agent built in code and one written in YAML are the
//! same [`AgentDefinition`] — and a mistake in code gets the same diagnostics.
//!
//! ```
//! use guidepost_core::builder::AgentBuilder;
//! use guidepost_core::tool::ParameterType;
//!
//! let mut agent = AgentBuilder::new("Rita").description("A taxi dispatcher");
//! agent.guideline("greet").when("The customer says hello").then("Greet them and offer a ride");
//! agent.tool("book_taxi").describe("Books a ride").param("pickup", ParameterType::String).native();
//!
//! let mut journey = agent.journey("book", "Book a taxi");
//! journey.condition("The customer wants a taxi");
//! journey
//!     .start()
//!     .chat("pickup", "Ask for the pickup address")
//!     .chat("confirm", "Repeat the address and ask to confirm").when("The customer gave the address")
//!     .tool("book", "book_taxi").when("The customer confirms")
//!     .end();
//! journey.done();
//!
//! let definition = agent.build().expect("valid");
//! assert_eq!(definition.journeys[0].states.len(), 3);
//! assert_eq!(definition.journeys[0].transitions[1].condition.as_deref(), Some("The customer gave the address"));
//! ```

use crate::definition::check::SpanTable;
use crate::definition::file::*;
use crate::definition::{Diagnostic, ParsedFile, Severity};
use crate::guideline::Criticality;
use crate::journey::END_STATE;
use crate::model::AgentDefinition;
use crate::relationship::RelationshipKind;
use crate::tool::{NATIVE_SERVICE, ParameterType};

/// Builds an [`AgentDefinition`] in code.
#[derive(Debug, Clone)]
pub struct AgentBuilder {
    file: AgentFile,
}

/// Errors found while building: the same diagnostics a definition file would get.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("the agent definition has {} error(s); first: {}", .0.len(), .0.first().map(|d| d.message.as_str()).unwrap_or(""))]
pub struct BuildError(pub Vec<Diagnostic>);

impl AgentBuilder {
    /// Starts an agent with this name.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            file: AgentFile {
                agent: Some(AgentSection { name: name.into(), ..Default::default() }),
                ..Default::default()
            },
        }
    }

    fn section(&mut self) -> &mut AgentSection {
        self.file.agent.get_or_insert_with(Default::default)
    }

    /// Sets the language replies are written in (a code such as `zh`, or `customer`).
    pub fn language(mut self, code: impl Into<String>) -> Self {
        self.section().language = Some(code.into());
        self
    }

    /// Sets the reply sent when no composed reply passes the reply checks.
    pub fn fallback_reply(mut self, text: impl Into<String>) -> Self {
        self.section().fallback_reply = Some(text.into());
        self
    }

    /// Sets the stable id (default: a slug of the name).
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.section().id = Some(id.into());
        self
    }

    /// Sets the description the model reads as the agent's identity.
    pub fn description(mut self, text: impl Into<String>) -> Self {
        self.section().description = Some(text.into());
        self
    }

    /// Sets the bound on preparation iterations.
    pub fn max_engine_iterations(mut self, n: u32) -> Self {
        self.section().max_engine_iterations = Some(n);
        self
    }

    /// Sets the composition mode.
    pub fn composition_mode(mut self, mode: crate::agent::CompositionMode) -> Self {
        self.section().composition_mode = Some(mode);
        self
    }

    /// Declares a tag.
    pub fn tag(&mut self, name: impl Into<String>) -> &mut Self {
        self.file.tags.push(TagDecl::Name(name.into()));
        self
    }

    /// Adds a guideline with this id; set its condition with `when` and action with `then`.
    pub fn guideline(&mut self, id: impl Into<String>) -> GuidelineBuilder<'_> {
        self.file.guidelines.push(GuidelineDecl { id: Some(id.into()), ..Default::default() });
        let index = self.file.guidelines.len() - 1;
        GuidelineBuilder { decl: &mut self.file.guidelines[index] }
    }

    /// Adds a relationship. References use the file syntax (`greet`, `journey:book`,
    /// `tag:vip`, `any-tag:vip`, `tool:get_balance`).
    pub fn relate(
        &mut self,
        kind: RelationshipKind,
        source: impl Into<String>,
        target: impl Into<String>,
    ) -> &mut Self {
        self.file.relationships.push(RelationshipDecl {
            kind,
            source: source.into(),
            target: OneOrMany::One(target.into()),
            group: None,
        });
        self
    }

    /// Declares a tool; finish with [`ToolBuilder::native`], [`ToolBuilder::service`] or a
    /// fixture.
    pub fn tool(&mut self, name: impl Into<String>) -> ToolBuilder<'_> {
        self.file.tools.push(ToolDecl { name: name.into(), ..Default::default() });
        let index = self.file.tools.len() - 1;
        ToolBuilder { decl: &mut self.file.tools[index] }
    }

    /// Declares a tool service (MCP, OpenAPI, Parlant plugin server).
    pub fn service(&mut self, service: ServiceDecl) -> &mut Self {
        self.file.services.push(service);
        self
    }

    /// Adds a glossary term.
    pub fn term(&mut self, name: impl Into<String>, description: impl Into<String>) -> &mut Self {
        self.file.glossary.push(TermDecl { name: name.into(), description: description.into(), ..Default::default() });
        self
    }

    /// Adds a canned response template with an id.
    pub fn canned_response(&mut self, id: impl Into<String>, template: impl Into<String>) -> &mut Self {
        self.file.canned_responses.push(CannedResponseDecl {
            id: Some(id.into()),
            template: template.into(),
            ..Default::default()
        });
        self
    }

    /// Starts a journey; finish it with [`JourneyBuilder::done`].
    pub fn journey(&mut self, id: impl Into<String>, title: impl Into<String>) -> JourneyBuilder<'_> {
        JourneyBuilder {
            agent: self,
            decl: JourneyDecl { id: Some(id.into()), title: title.into(), ..Default::default() },
        }
    }

    /// The authoring structure built so far (what a definition file would hold).
    pub fn file(&self) -> &AgentFile {
        &self.file
    }

    /// Resolves and checks the definition.
    pub fn build(self) -> Result<AgentDefinition, BuildError> {
        let parsed = ParsedFile { name: "<builder>".into(), file: self.file, spans: SpanTable::default() };
        let (definition, diagnostics) = crate::definition::resolve_files(&[parsed]);
        let errors: Vec<Diagnostic> = diagnostics.into_iter().filter(|d| d.severity == Severity::Error).collect();
        match definition {
            Some(d) if errors.is_empty() => Ok(d),
            _ => Err(BuildError(errors)),
        }
    }
}

/// Sets the fields of one guideline.
pub struct GuidelineBuilder<'a> {
    decl: &'a mut GuidelineDecl,
}

impl GuidelineBuilder<'_> {
    /// When the guideline applies.
    pub fn when(self, condition: impl Into<String>) -> Self {
        self.decl.condition = condition.into();
        self
    }

    /// What the agent should do (omit for an observation).
    pub fn then(self, action: impl Into<String>) -> Self {
        self.decl.action = Some(action.into());
        self
    }

    /// Criticality.
    pub fn criticality(self, c: Criticality) -> Self {
        self.decl.criticality = Some(c);
        self
    }

    /// Numeric priority.
    pub fn priority(self, p: i32) -> Self {
        self.decl.priority = Some(p);
        self
    }

    /// A tool the agent may call when the guideline matches.
    pub fn tool(self, tool: impl Into<String>) -> Self {
        self.decl.tools.push(tool.into());
        self
    }

    /// A tag.
    pub fn tag(self, tag: impl Into<String>) -> Self {
        self.decl.tags.push(tag.into());
        self
    }

    /// When this matches, `target` applies too.
    pub fn entails(self, target: impl Into<String>) -> Self {
        self.decl.entails.push(target.into());
        self
    }

    /// When this and `target` both match, only this one stays.
    pub fn prioritize_over(self, target: impl Into<String>) -> Self {
        self.decl.priority_over.push(target.into());
        self
    }

    /// Applies only when `target` matches too.
    pub fn depends_on(self, target: impl Into<String>) -> Self {
        self.decl.depends_on.push(target.into());
        self
    }

    /// Evaluate again after `tool` runs.
    pub fn reevaluate_after(self, tool: impl Into<String>) -> Self {
        self.decl.reevaluate_after.push(tool.into());
        self
    }

    /// For an observation: the targets the customer may mean.
    pub fn disambiguates(self, target: impl Into<String>) -> Self {
        self.decl.disambiguates.push(target.into());
        self
    }
}

/// Sets the fields of one tool.
pub struct ToolBuilder<'a> {
    decl: &'a mut ToolDecl,
}

impl ToolBuilder<'_> {
    /// What the tool does.
    pub fn describe(self, text: impl Into<String>) -> Self {
        self.decl.description = Some(text.into());
        self
    }

    /// A required parameter of this type.
    pub fn param(self, name: impl Into<String>, kind: ParameterType) -> Self {
        self.decl.parameters.insert(name.into(), ParameterDecl::Type(kind));
        self
    }

    /// A parameter with details.
    pub fn param_with(self, name: impl Into<String>, details: ParameterDetails) -> Self {
        self.decl.parameters.insert(name.into(), ParameterDecl::Full(Box::new(details)));
        self
    }

    /// Marks the tool consequential.
    pub fn consequential(self) -> Self {
        self.decl.consequential = Some(true);
        self
    }

    /// Declares that the tool performs a call once per idempotency key (the key of each
    /// call is in its context), so a call whose outcome was lost may be sent again.
    pub fn idempotency_keys(self) -> Self {
        self.decl.idempotency_keys = Some(true);
        self
    }

    /// The tool is a Rust function registered with the tool runtime.
    pub fn native(self) {
        self.decl.service = Some(NATIVE_SERVICE.to_string());
    }

    /// The tool is served by a declared service.
    pub fn service(self, name: impl Into<String>) {
        self.decl.service = Some(name.into());
    }

    /// The tool answers from a table.
    pub fn fixture(self, fixture: FixtureDecl) {
        self.decl.service = None;
        self.decl.fixture = Some(fixture);
    }
}

/// Builds one journey.
pub struct JourneyBuilder<'a> {
    agent: &'a mut AgentBuilder,
    decl: JourneyDecl,
}

impl<'a> JourneyBuilder<'a> {
    /// Adds an activation condition.
    pub fn condition(&mut self, text: impl Into<String>) -> &mut Self {
        self.decl.conditions.push(text.into());
        self
    }

    /// Sets the description.
    pub fn description(&mut self, text: impl Into<String>) -> &mut Self {
        self.decl.description = Some(text.into());
        self
    }

    /// Adds a guideline that applies only while the journey is active.
    pub fn guideline(
        &mut self,
        id: impl Into<String>,
        condition: impl Into<String>,
        action: impl Into<String>,
    ) -> &mut Self {
        self.decl.guidelines.push(GuidelineDecl {
            id: Some(id.into()),
            condition: condition.into(),
            action: Some(action.into()),
            ..Default::default()
        });
        self
    }

    /// Walks from the start state: each step adds a transition from where the walk is.
    pub fn start(&mut self) -> Walk<'_, 'a> {
        Walk { journey: self, at: crate::journey::START_STATE.to_string(), last: None }
    }

    /// Walks from an existing state.
    pub fn from(&mut self, state: impl Into<String>) -> Walk<'_, 'a> {
        Walk { journey: self, at: state.into(), last: None }
    }

    fn ensure_state(&mut self, id: &str, make: impl FnOnce() -> StateDecl) {
        if !self.decl.states.iter().any(|s| s.id == id) {
            self.decl.states.push(make());
        }
    }

    /// Adds a transition and returns where it is, so `when` can set its condition.
    fn add_transition(&mut self, from: &str, to: &str) -> Option<(Option<usize>, usize)> {
        let target = TransitionDecl::Full(TransitionDetails { to: to.to_string(), when: None, id: None });
        if from == crate::journey::START_STATE {
            let list = match self.decl.start.get_or_insert_with(|| TransitionsDecl::List(Vec::new())) {
                TransitionsDecl::List(list) => list,
                TransitionsDecl::To(_) => return None,
            };
            list.push(target);
            return Some((None, list.len() - 1));
        }
        let state = self.decl.states.iter().position(|s| s.id == from)?;
        let list = match self.decl.states[state].next.get_or_insert_with(|| TransitionsDecl::List(Vec::new())) {
            TransitionsDecl::List(list) => list,
            TransitionsDecl::To(_) => return None,
        };
        list.push(target);
        Some((Some(state), list.len() - 1))
    }

    fn set_condition(&mut self, at: (Option<usize>, usize), condition: String) {
        let list = match at.0 {
            None => self.decl.start.as_mut(),
            Some(state) => self.decl.states.get_mut(state).and_then(|s| s.next.as_mut()),
        };
        if let Some(TransitionsDecl::List(list)) = list
            && let Some(TransitionDecl::Full(t)) = list.get_mut(at.1)
        {
            t.when = Some(condition);
        }
    }

    /// Adds the journey to the agent.
    pub fn done(self) {
        self.agent.file.journeys.push(self.decl);
    }
}

/// A walk through a journey: `chat`, `tool`, `fork` and `to` add a transition from the
/// current state to a (new or existing) state and move there; `when` sets the condition of
/// the transition just added; `end` finishes the walk with a transition to `end`.
pub struct Walk<'j, 'a> {
    journey: &'j mut JourneyBuilder<'a>,
    at: String,
    last: Option<(Option<usize>, usize)>,
}

impl Walk<'_, '_> {
    fn step(mut self, to: &str) -> Self {
        self.last = self.journey.add_transition(&self.at, to);
        self.at = to.to_string();
        self
    }

    /// Goes to a chat state (created on first use).
    pub fn chat(self, id: &str, action: impl Into<String>) -> Self {
        let action = action.into();
        self.journey.ensure_state(id, || StateDecl { id: id.to_string(), chat: Some(action), ..Default::default() });
        self.step(id)
    }

    /// Goes to a tool state (created on first use).
    pub fn tool(self, id: &str, tool: impl Into<String>) -> Self {
        let tool = tool.into();
        self.journey.ensure_state(id, || StateDecl {
            id: id.to_string(),
            tool: Some(OneOrMany::One(tool)),
            ..Default::default()
        });
        self.step(id)
    }

    /// Goes to a fork state (created on first use).
    pub fn fork(self, id: &str) -> Self {
        self.journey.ensure_state(id, || StateDecl { id: id.to_string(), fork: true, ..Default::default() });
        self.step(id)
    }

    /// Goes to an existing state (e.g. back to an earlier question).
    pub fn to(self, id: &str) -> Self {
        self.step(id)
    }

    /// Sets the condition of the transition just added.
    pub fn when(self, condition: impl Into<String>) -> Self {
        if let Some(at) = self.last {
            self.journey.set_condition(at, condition.into());
        }
        self
    }

    /// Ends the walk with an unconditional transition to `end`.
    pub fn end(self) {
        let _ = self.step(END_STATE);
    }

    /// Ends the walk with a conditional transition to `end`.
    pub fn end_when(self, condition: impl Into<String>) {
        let _ = self.step(END_STATE).when(condition);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::definition::{SourceFile, load_agent};

    /// The builder and the file format produce the same definition.
    #[test]
    fn builder_matches_the_file_format() {
        let mut agent = AgentBuilder::new("Rita").id("taxi").description("Dispatcher");
        agent.guideline("greet").when("The customer says hello").then("Greet them");
        agent.tool("book_taxi").param("pickup", ParameterType::String).native();
        let mut j = agent.journey("book", "Book a taxi");
        j.condition("The customer wants a taxi");
        j.start().chat("pickup", "Ask for the pickup").tool("book", "book_taxi").when("Pickup given").end();
        j.from("pickup").end_when("The customer gives up");
        j.done();
        let built = agent.build().unwrap();
        let yaml = r#"
agent: {id: taxi, name: Rita, description: Dispatcher}
guidelines:
  - {id: greet, condition: The customer says hello, action: Greet them}
tools:
  - {name: book_taxi, service: native, parameters: {pickup: string}}
journeys:
  - id: book
    title: Book a taxi
    conditions: [The customer wants a taxi]
    start: pickup
    states:
      - id: pickup
        chat: Ask for the pickup
        next: [{to: book, when: Pickup given}, {to: end, when: The customer gives up}]
      - {id: book, tool: book_taxi, next: end}
"#;
        let from_file = load_agent(&[SourceFile::new("taxi.yaml", yaml)]).definition.unwrap();
        assert_eq!(built, from_file);
    }

    #[test]
    fn builder_reports_the_same_problems() {
        let mut agent = AgentBuilder::new("Bad");
        agent.guideline("g").when("x").then("y").tool("missing_tool");
        let mut j = agent.journey("j", "J");
        j.start().chat("a", "Hi").to("nowhere");
        j.done();
        let err = agent.build().unwrap_err();
        let messages: Vec<&str> = err.0.iter().map(|d| d.message.as_str()).collect();
        assert!(messages.contains(&"unknown tool `missing_tool`"), "{messages:?}");
        assert!(messages.contains(&"transition to unknown state `nowhere`"), "{messages:?}");
    }
}
