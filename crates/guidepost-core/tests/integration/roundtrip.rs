//! A definition that validates round-trips file -> model -> file -> model unchanged, in
//! YAML and JSON.

use guidepost_core::AgentDefinition;
use guidepost_core::definition::file::*;
use guidepost_core::definition::{SourceFile, export, load_agent, to_yaml};
use guidepost_core::guideline::Criticality;
use guidepost_core::relationship::RelationshipKind;
use guidepost_core::tool::ParameterType;
use proptest::prelude::*;

use crate::common::{EXAMPLES, example};

fn reload_yaml(def: &AgentDefinition) -> AgentDefinition {
    let yaml = to_yaml(def).unwrap();
    let loaded = load_agent(&[SourceFile::new("export.yaml", yaml.clone())]);
    assert!(!loaded.has_errors(), "{yaml}\n{:?}", loaded.diagnostics);
    loaded.definition.unwrap()
}

fn reload_json(def: &AgentDefinition) -> AgentDefinition {
    let json = serde_json::to_string_pretty(&export(def)).unwrap();
    let loaded = load_agent(&[SourceFile::new("export.json", json.clone())]);
    assert!(!loaded.has_errors(), "{json}\n{:?}", loaded.diagnostics);
    loaded.definition.unwrap()
}

#[test]
fn examples_round_trip() {
    for name in EXAMPLES {
        let def = example(name);
        assert_eq!(reload_yaml(&def), def, "{name} (yaml)");
        assert_eq!(reload_json(&def), def, "{name} (json)");
    }
}

#[test]
fn idempotency_declarations_round_trip() {
    let yaml = "agent: {name: Rides}
services:
  - {name: rides, kind: openapi, url: 'http://127.0.0.1:9', idempotency_keys: true}
tools:
  - {name: book, service: native, consequential: true, idempotency_keys: true}
  - {name: pay, service: native, consequential: true}
";
    let loaded = load_agent(&[SourceFile::new("rides.yaml", yaml)]);
    assert!(!loaded.has_errors(), "{:?}", loaded.diagnostics);
    let def = loaded.definition.unwrap();
    assert!(def.services[0].idempotency_keys);
    let kinds: Vec<_> = def.tools.iter().map(|t| t.idempotency).collect();
    assert_eq!(kinds, [guidepost_core::tool::Idempotency::Keyed, guidepost_core::tool::Idempotency::Unknown]);
    assert_eq!(reload_yaml(&def), def);
    assert_eq!(reload_json(&def), def);
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[A-Za-z][A-Za-z ,.'?]{0,40}[a-z]",
        "[\u{4e00}-\u{4e50}]{2,12}",
        Just("yes".to_string()),
        Just("2024".to_string()),
        Just("a: b # not a comment".to_string()),
        Just("line one\nline two".to_string()),
    ]
}

/// condition, action, criticality, priority, tag indexes, tool indexes
type GuidelinePlan = (String, Option<String>, Option<Criticality>, Option<i32>, Vec<usize>, Vec<usize>);
/// title, conditions, states (kind, text), extra edges (from, to, condition)
type JourneyPlan = (String, Vec<String>, Vec<(u8, String)>, Vec<(usize, usize, Option<String>)>);

#[derive(Debug, Clone)]
struct Plan {
    tags: usize,
    tools: Vec<(Option<bool>, Vec<ParameterType>)>,
    guidelines: Vec<GuidelinePlan>,
    relationships: Vec<(usize, usize, RelationshipKind)>,
    journeys: Vec<JourneyPlan>,
}

fn plan() -> impl Strategy<Value = Plan> {
    let parameter = prop_oneof![
        Just(ParameterType::String),
        Just(ParameterType::Integer),
        Just(ParameterType::Number),
        Just(ParameterType::Boolean),
        Just(ParameterType::Date),
    ];
    let tool = (proptest::option::of(any::<bool>()), proptest::collection::vec(parameter, 0..3));
    let criticality =
        proptest::option::of(prop_oneof![Just(Criticality::Low), Just(Criticality::Medium), Just(Criticality::High)]);
    let guideline = (
        text(),
        proptest::option::of(text()),
        criticality,
        proptest::option::of(-3i32..4),
        proptest::collection::vec(0usize..3, 0..2),
        proptest::collection::vec(0usize..3, 0..2),
    );
    let kind = prop_oneof![
        Just(RelationshipKind::Entailment),
        Just(RelationshipKind::Priority),
        Just(RelationshipKind::Dependency),
        Just(RelationshipKind::DependencyAny),
    ];
    let state = (0u8..3, text());
    let extra_edge = (0usize..6, 0usize..6, proptest::option::of(text()));
    let journey = (
        text(),
        proptest::collection::vec(text(), 0..3),
        proptest::collection::vec(state, 1..6),
        proptest::collection::vec(extra_edge, 0..4),
    );
    (
        0usize..4,
        proptest::collection::vec(tool, 0..3),
        proptest::collection::vec(guideline, 0..7),
        proptest::collection::vec((0usize..7, 0usize..7, kind), 0..6),
        proptest::collection::vec(journey, 0..3),
    )
        .prop_map(|(tags, tools, guidelines, relationships, journeys)| Plan {
            tags,
            tools,
            guidelines,
            relationships,
            journeys,
        })
}

/// Builds a valid definition file from a plan: references only to declared entities,
/// relationships only from earlier to later guidelines (no cycles), journeys as a chain
/// with extra forward or backward edges (every state reachable and able to finish).
fn build(plan: &Plan) -> AgentFile {
    let tag_names: Vec<String> = (0..plan.tags).map(|i| format!("tag{i}")).collect();
    let tools: Vec<ToolDecl> = plan
        .tools
        .iter()
        .enumerate()
        .map(|(i, (consequential, params))| ToolDecl {
            name: format!("tool{i}"),
            description: Some(format!("Tool number {i}")),
            service: None,
            parameters: params.iter().enumerate().map(|(p, t)| (format!("p{p}"), ParameterDecl::Type(*t))).collect(),
            consequential: *consequential,
            idempotency_keys: None,
            overlap: None,
            fixture: Some(FixtureDecl {
                cases: vec![FixtureCaseDecl {
                    args: Default::default(),
                    result: Some(serde_json::json!({"ok": i})),
                    error: None,
                }],
                otherwise: None,
            }),
        })
        .collect();
    let n = plan.guidelines.len();
    let mut guidelines: Vec<GuidelineDecl> = plan
        .guidelines
        .iter()
        .enumerate()
        .map(|(i, (condition, action, criticality, priority, tags, tool_refs))| GuidelineDecl {
            id: Some(format!("g{i}")),
            condition: format!("{condition} {i}"),
            action: action.clone(),
            criticality: *criticality,
            priority: *priority,
            tags: tags
                .iter()
                .filter(|t| **t < plan.tags)
                .map(|t| tag_names[*t].clone())
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect(),
            tools: tool_refs
                .iter()
                .filter(|t| **t < tools.len())
                .map(|t| format!("tool{t}"))
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect(),
            ..Default::default()
        })
        .collect();
    let mut relationships = Vec::new();
    for (a, b, kind) in &plan.relationships {
        let (a, b) = (a.min(b), a.max(b));
        if *b >= n || a == b {
            continue;
        }
        // Disambiguation, reevaluation and overlap need special endpoints; the plan uses
        // the kinds that relate guidelines.
        relationships.push(RelationshipDecl {
            kind: *kind,
            source: format!("g{a}"),
            target: OneOrMany::One(format!("g{b}")),
            group: None,
        });
    }
    relationships.dedup_by(|x, y| x.kind == y.kind && x.source == y.source && x.target == y.target);
    let journeys = plan
        .journeys
        .iter()
        .enumerate()
        .map(|(j, (title, conditions, states, extra))| {
            let ids: Vec<String> = (0..states.len()).map(|s| format!("s{s}")).collect();
            let mut decls: Vec<StateDecl> = states
                .iter()
                .enumerate()
                .map(|(s, (kind, action))| {
                    let mut d = StateDecl { id: ids[s].clone(), ..Default::default() };
                    match (kind, tools.is_empty()) {
                        (1, false) => d.tool = Some(OneOrMany::One("tool0".into())),
                        (2, _) if s > 0 => d.fork = true,
                        _ => d.chat = Some(action.clone()),
                    }
                    d
                })
                .collect();
            let mut edges: Vec<Vec<TransitionDecl>> = (0..states.len())
                .map(|s| vec![TransitionDecl::To(ids.get(s + 1).cloned().unwrap_or_else(|| "end".into()))])
                .collect();
            for (from, to, when) in extra {
                if *from < states.len() && *to < states.len() {
                    let when = when.clone().map(|w| format!("{w} ({from}->{to})"));
                    edges[*from].push(TransitionDecl::Full(TransitionDetails {
                        to: ids[*to].clone(),
                        when: when.or_else(|| Some(format!("condition {from} {to}"))),
                        id: None,
                    }));
                }
            }
            for (d, e) in decls.iter_mut().zip(edges) {
                d.next = Some(TransitionsDecl::List(e));
            }
            let mut seen = std::collections::BTreeSet::new();
            JourneyDecl {
                id: Some(format!("j{j}")),
                title: title.clone(),
                conditions: conditions.iter().filter(|c| seen.insert((*c).clone())).cloned().collect(),
                start: Some(TransitionsDecl::To(ids[0].clone())),
                states: decls,
                guidelines: vec![GuidelineDecl {
                    id: Some(format!("j{j}_scoped")),
                    condition: format!("Scoped condition {j}"),
                    action: Some("Scoped action".into()),
                    ..Default::default()
                }],
                ..Default::default()
            }
        })
        .collect();
    guidelines.truncate(n);
    AgentFile {
        agent: Some(AgentSection {
            name: "Generated".into(),
            description: Some("A generated agent".into()),
            ..Default::default()
        }),
        tags: tag_names.into_iter().map(TagDecl::Name).collect(),
        guidelines,
        relationships,
        journeys,
        tools,
        ..Default::default()
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, .. ProptestConfig::default() })]

    #[test]
    fn generated_definitions_round_trip(plan in plan()) {
        let file = build(&plan);
        let yaml = yaml_serde::to_string(&file).unwrap();
        let loaded = load_agent(&[SourceFile::new("generated.yaml", yaml.clone())]);
        prop_assert!(!loaded.has_errors(), "{}\n{:#?}", yaml, loaded.diagnostics);
        let model = loaded.definition.unwrap();
        let again = reload_yaml(&model);
        prop_assert_eq!(&again, &model);
        prop_assert_eq!(reload_json(&model), model);
    }
}

#[test]
fn labelled_examples_round_trip_and_an_empty_one_is_an_error_at_its_line() {
    let yaml = "agent: { name: Otto }\nguidelines:\n  - id: refund\n    condition: The customer asks for a refund\n    examples:\n      - { message: Can I get my money back?, applies: true }\n      - { message: Where is my parcel?, applies: false }\n";
    let loaded = load_agent(&[SourceFile::new("a.yaml", yaml)]);
    let def = loaded.definition.unwrap();
    let examples = &def.guideline("refund").unwrap().examples;
    assert_eq!(examples.len(), 2);
    assert!(examples[0].applies && !examples[1].applies);
    assert_eq!(reload_yaml(&def), def);
    assert_eq!(reload_json(&def), def);
    let empty = yaml.replace("Where is my parcel?", "\"\"");
    let loaded = load_agent(&[SourceFile::new("a.yaml", empty.as_str())]);
    let error = loaded.diagnostics.iter().find(|d| d.code == "empty-text").expect("an empty example is an error");
    assert!(error.render(Some(&empty)).contains("a.yaml:7"), "{}", error.render(Some(&empty)));
}
