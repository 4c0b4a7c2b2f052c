//! Writing a definition back in the authoring format.
//!
//! The export is canonical: every id is written out, relationships go to the top-level
//! list, parameters use the long form. Loading an export gives back the same definition.

use crate::agent::{DEFAULT_MAX_ENGINE_ITERATIONS, OutputMode};
use crate::definition::file::*;
use crate::guideline::{Criticality, Guideline};
use crate::journey::{Journey, START_STATE, StateKind, Transition};
use crate::model::AgentDefinition;
use crate::relationship::{Endpoint, TagMode};
use crate::tool::{FIXTURE_SERVICE, FixtureOutcome, Tool};

/// Converts a definition to a single definition file.
pub fn export(definition: &AgentDefinition) -> AgentFile {
    let a = &definition.agent;
    let agent = AgentSection {
        id: Some(a.id.clone()),
        name: a.name.clone(),
        description: a.description.clone(),
        max_engine_iterations: (a.max_engine_iterations != DEFAULT_MAX_ENGINE_ITERATIONS)
            .then_some(a.max_engine_iterations),
        composition_mode: (a.composition_mode != Default::default()).then_some(a.composition_mode),
        output_mode: (a.output_mode != OutputMode::Block).then_some(a.output_mode),
        tags: a.tags.clone(),
        preamble: (a.preamble != Default::default())
            .then(|| PreambleDecl { enabled: a.preamble.enabled, examples: a.preamble.examples.clone() }),
        no_match_reply: a.no_match_reply.clone(),
        language: a.language.clone(),
        fallback_reply: a.fallback_reply.clone(),
    };
    AgentFile {
        schema: None,
        agent: Some(agent),
        tags: definition
            .tags
            .iter()
            .map(|t| {
                TagDecl::Full(TagDetails {
                    name: t.name.clone(),
                    id: (t.id != t.name).then(|| t.id.clone()),
                    description: t.description.clone(),
                })
            })
            .collect(),
        guidelines: definition.guidelines.iter().filter(|g| g.journey.is_none()).map(guideline).collect(),
        relationships: definition
            .relationships
            .iter()
            .map(|r| RelationshipDecl {
                kind: r.kind,
                source: endpoint(&r.source),
                target: OneOrMany::One(endpoint(&r.target)),
                group: r.group.clone(),
            })
            .collect(),
        journeys: definition.journeys.iter().map(|j| journey(j, definition)).collect(),
        tools: definition.tools.iter().map(tool).collect(),
        services: definition
            .services
            .iter()
            .map(|s| ServiceDecl {
                name: s.name.clone(),
                kind: s.kind,
                url: s.url.clone(),
                spec: s.spec.clone(),
                command: s.command.clone(),
                env: s.env.clone(),
                timeout_ms: s.timeout_ms,
                idempotency_keys: s.idempotency_keys.then_some(true),
            })
            .collect(),
        variables: definition
            .variables
            .iter()
            .map(|v| VariableDecl {
                name: v.name.clone(),
                id: (v.id != v.name).then(|| v.id.clone()),
                description: v.description.clone(),
                tool: v.tool.as_ref().map(ToString::to_string),
                freshness: v.freshness.as_ref().map(crate::knowledge::Freshness::to_text),
                value: v.value.clone(),
                tags: v.tags.clone(),
            })
            .collect(),
        glossary: definition
            .terms
            .iter()
            .map(|t| TermDecl {
                name: t.name.clone(),
                id: Some(t.id.clone()),
                description: t.description.clone(),
                synonyms: t.synonyms.clone(),
                tags: t.tags.clone(),
            })
            .collect(),
        capabilities: definition
            .capabilities
            .iter()
            .map(|c| CapabilityDecl {
                title: c.title.clone(),
                id: Some(c.id.clone()),
                description: c.description.clone(),
                signals: c.signals.clone(),
                tags: c.tags.clone(),
            })
            .collect(),
        canned_responses: definition
            .canned_responses
            .iter()
            .map(|c| CannedResponseDecl {
                id: Some(c.id.clone()),
                template: c.template.clone(),
                fields: c
                    .fields
                    .iter()
                    .map(|f| CannedFieldDecl {
                        name: f.name.clone(),
                        description: f.description.clone(),
                        examples: f.examples.clone(),
                    })
                    .collect(),
                signals: c.signals.clone(),
                field_dependencies: c.field_dependencies.clone(),
                tags: c.tags.clone(),
            })
            .collect(),
    }
}

/// Converts a definition to YAML text.
pub fn to_yaml(definition: &AgentDefinition) -> Result<String, yaml_serde::Error> {
    yaml_serde::to_string(&export(definition))
}

fn endpoint(e: &Endpoint) -> String {
    match e {
        Endpoint::Tag { tag, mode: TagMode::All } => format!("tag:{tag}"),
        Endpoint::Tag { tag, mode: TagMode::Any } => format!("any-tag:{tag}"),
        other => other.to_string(),
    }
}

fn guideline(g: &Guideline) -> GuidelineDecl {
    GuidelineDecl {
        id: Some(g.id.clone()),
        condition: g.condition.clone(),
        action: g.action.clone(),
        description: g.description.clone(),
        criticality: (g.criticality != Criticality::Medium).then_some(g.criticality),
        priority: (g.priority != 0).then_some(g.priority),
        enabled: (!g.enabled).then_some(false),
        track: (!g.track).then_some(false),
        tags: g.tags.clone(),
        labels: g.labels.clone(),
        tools: g.tools.iter().map(ToString::to_string).collect(),
        metadata: g.metadata.clone(),
        composition_mode: g.composition_mode,
        canned_responses: g.canned_responses.clone(),
        examples: g.examples.clone(),
        ..Default::default()
    }
}

fn transitions(list: Vec<&Transition>) -> Option<TransitionsDecl> {
    (!list.is_empty()).then(|| {
        TransitionsDecl::List(
            list.into_iter()
                .map(|t| {
                    TransitionDecl::Full(TransitionDetails {
                        to: t.to.clone(),
                        when: t.condition.clone(),
                        id: Some(t.id.clone()),
                    })
                })
                .collect(),
        )
    })
}

fn journey(j: &Journey, definition: &AgentDefinition) -> JourneyDecl {
    JourneyDecl {
        id: Some(j.id.clone()),
        title: j.title.clone(),
        description: j.description.clone(),
        conditions: j.conditions.iter().map(|c| c.condition.clone()).collect(),
        tags: j.tags.clone(),
        labels: j.labels.clone(),
        priority: (j.priority != 0).then_some(j.priority),
        composition_mode: j.composition_mode,
        start: transitions(j.transitions_from(START_STATE).collect()),
        states: j
            .states
            .iter()
            .map(|s| {
                let mut decl = StateDecl {
                    id: s.id.clone(),
                    description: s.description.clone(),
                    next: transitions(j.transitions_from(&s.id).collect()),
                    canned_responses: s.canned_responses.clone(),
                    composition_mode: s.composition_mode,
                    labels: s.labels.clone(),
                    metadata: s.metadata.clone(),
                    ..Default::default()
                };
                match &s.kind {
                    StateKind::Chat { action } => decl.chat = Some(action.clone()),
                    StateKind::Tool { tools, instruction } => {
                        decl.tool = Some(OneOrMany::Many(tools.iter().map(ToString::to_string).collect()));
                        decl.instruction = instruction.clone();
                    }
                    StateKind::Fork => decl.fork = true,
                    StateKind::Journey { journey } => decl.journey = Some(journey.clone()),
                }
                decl
            })
            .collect(),
        guidelines: definition.journey_guidelines(&j.id).map(guideline).collect(),
    }
}

fn tool(t: &Tool) -> ToolDecl {
    ToolDecl {
        name: t.id.name.clone(),
        description: t.description.clone(),
        service: (t.id.service != FIXTURE_SERVICE || t.fixture.is_none()).then(|| t.id.service.clone()),
        parameters: t
            .parameters
            .iter()
            .map(|p| {
                let details = ParameterDetails {
                    kind: Some(p.kind),
                    items: p.items,
                    description: p.description.clone(),
                    allowed: p.allowed.clone(),
                    required: Some(p.required),
                    default: p.default.clone(),
                    source: Some(p.source),
                    hidden: p.hidden,
                    examples: p.examples.clone(),
                    precedence: p.precedence,
                    display_name: p.display_name.clone(),
                    significance: p.significance.clone(),
                };
                (p.name.clone(), ParameterDecl::Full(Box::new(details)))
            })
            .collect(),
        consequential: t.consequential.then_some(true),
        idempotency_keys: (t.idempotency == crate::tool::Idempotency::Keyed).then_some(true),
        overlap: (t.overlap != Default::default()).then_some(t.overlap),
        fixture: t.fixture.as_ref().map(|f| FixtureDecl {
            cases: f
                .cases
                .iter()
                .map(|c| {
                    let (result, error) = outcome(&c.outcome);
                    FixtureCaseDecl { args: c.args.clone(), result, error }
                })
                .collect(),
            otherwise: f.otherwise.as_ref().map(|o| {
                let (result, error) = outcome(o);
                FixtureOutcomeDecl { result, error }
            }),
        }),
    }
}

fn outcome(o: &FixtureOutcome) -> (Option<serde_json::Value>, Option<String>) {
    match o {
        FixtureOutcome::Result(r) => (Some(r.clone()), None),
        FixtureOutcome::Error(e) => (None, Some(e.clone())),
    }
}
