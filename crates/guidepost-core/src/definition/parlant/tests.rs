//! The import's mapping on answers no captured server gave: what it must not lose silently.

use std::collections::BTreeMap;

use serde_json::json;

use super::wire::*;
use super::*;
use crate::definition::{SourceFile, load_agent};

fn server() -> ParlantServer {
    let agent: AgentDto = serde_json::from_value(json!({"id": "a1", "name": "Ada", "tags": []})).unwrap();
    ParlantServer {
        url: "http://parlant".into(),
        agent,
        tags: Ok(vec![]),
        guidelines: Ok(vec![]),
        guideline_details: BTreeMap::new(),
        relationships: vec![],
        journeys: Ok(vec![]),
        charts: BTreeMap::new(),
        terms: Ok(vec![]),
        variables: Ok(vec![]),
        variable_values: BTreeMap::new(),
        canned_responses: Ok(vec![]),
        capabilities: Ok(vec![]),
        services: Ok(vec![]),
        service_tools: BTreeMap::new(),
    }
}

fn journey(chart: &str) -> ParlantServer {
    let mut s = server();
    s.guidelines = Ok(vec![
        serde_json::from_value(json!({"id": "c1", "condition": "The customer wants a refund", "tags": ["journey:j1"]}))
            .unwrap(),
    ]);
    s.journeys = Ok(vec![
        serde_json::from_value(json!({"id": "j1", "title": "Refund", "conditions": ["c1"], "tags": ["agent:a1"]}))
            .unwrap(),
    ]);
    s.charts.insert("j1".into(), Ok(chart.into()));
    s
}

fn checked(imported: &Imported) -> crate::AgentDefinition {
    let yaml = yaml_serde::to_string(&imported.file).unwrap();
    let loaded = load_agent(&[SourceFile::new("agent.yaml", yaml.clone())]);
    assert!(!loaded.has_errors(), "{:?}\n{yaml}", loaded.diagnostics);
    loaded.definition.unwrap()
}

fn lost(imported: &Imported, what: &str) -> bool {
    imported.losses.iter().any(|l| l.what.contains(what) || l.why.contains(what))
}

#[test]
fn a_tool_state_whose_tool_no_service_has_is_a_marked_chat_state() {
    let chart = "stateDiagram-v2\n    state \"Use the tool refund\" as N0\n    [*] --> N0\n    N0 --> [*]\nstyle N0 fill:#ffeeaa,stroke:#ffeeaa\n";
    let imported = import_agent(&journey(chart)).unwrap();
    let definition = checked(&imported);
    let state = &definition.journeys[0].states[0];
    assert!(matches!(state.kind, crate::journey::StateKind::Chat { .. }), "{state:?}");
    assert!(lost(&imported, "which service the tool `refund` is in"), "{:?}", imported.losses);
    assert_eq!(definition.journeys[0].conditions.len(), 1);
    assert!(definition.guidelines.is_empty(), "the condition is the journey's, not a guideline");
}

#[test]
fn a_tool_state_of_a_listed_tool_names_its_service() {
    let chart = "stateDiagram-v2\n    state \"Use the tool refund\" as N0\n    [*] --> N0\n    N0 --> [*]\nstyle N0 fill:#ffeeaa,stroke:#ffeeaa\n";
    let mut s = journey(chart);
    s.services =
        Ok(vec![serde_json::from_value(json!({"name": "money", "kind": "sdk", "url": "http://127.0.0.1:9"})).unwrap()]);
    s.service_tools.insert("money".into(), Ok(vec![serde_json::from_value(json!({"name": "refund"})).unwrap()]));
    let imported = import_agent(&s).unwrap();
    let definition = checked(&imported);
    let crate::journey::StateKind::Tool { tools, .. } = &definition.journeys[0].states[0].kind else {
        panic!("{:?}", definition.journeys[0].states[0]);
    };
    assert_eq!(tools[0].to_string(), "money:refund");
    assert!(imported.losses.is_empty(), "{:?}", imported.losses);
}

#[test]
fn an_unreadable_chart_keeps_the_journey_and_says_so() {
    let mut s = journey("");
    s.charts.insert("j1".into(), Err("GET /journeys/j1/mermaid answered HTTP 500".into()));
    let imported = import_agent(&s).unwrap();
    assert!(lost(&imported, "the states of journey `refund`"), "{:?}", imported.losses);
    let garbled = import_agent(&journey("flowchart\nA-->B")).unwrap();
    assert!(lost(&garbled, "could not be read"), "{:?}", garbled.losses);
}

#[test]
fn templates_tied_to_states_or_preambles_and_unknown_services_are_reported() {
    let mut s = server();
    s.canned_responses = Ok(vec![
        serde_json::from_value(json!({"id": "t1", "value": "Hi!", "tags": ["journey_node:n1"]})).unwrap(),
        serde_json::from_value(json!({"id": "t2", "value": "One moment", "tags": ["__preamble__"]})).unwrap(),
        serde_json::from_value(json!({"id": "t3", "value": "Bye", "tags": ["agent:other"]})).unwrap(),
    ]);
    s.services = Ok(vec![
        serde_json::from_value(json!({"name": "docs", "kind": "openapi", "url": "http://127.0.0.1:9/api"})).unwrap(),
        serde_json::from_value(json!({"name": "odd", "kind": "grpc", "url": "http://127.0.0.1:9"})).unwrap(),
    ]);
    let imported = import_agent(&s).unwrap();
    let definition = checked(&imported);
    assert!(definition.canned_responses.is_empty(), "another agent's template stays behind");
    assert!(lost(&imported, "\"Hi!\""), "{:?}", imported.losses);
    assert!(lost(&imported, "preamble"), "{:?}", imported.losses);
    assert_eq!(definition.services[0].spec.as_deref(), Some("http://127.0.0.1:9/api/openapi.json"));
    assert!(lost(&imported, "`grpc`"), "{:?}", imported.losses);
}

#[test]
fn lists_the_import_cannot_do_without_fail_it_and_others_are_reported() {
    let mut s = server();
    s.guidelines = Err("GET /guidelines answered HTTP 503".into());
    let err = import_agent(&s).unwrap_err();
    assert!(err.to_string().contains("guidelines"), "{err}");
    let mut s = server();
    s.terms = Err("GET /terms answered HTTP 500".into());
    s.relationships.push(RelationshipRead {
        of: RelationshipsOf::Tag("vip".into()),
        answer: Err("GET /relationships answered HTTP 500".into()),
    });
    let imported = import_agent(&s).unwrap();
    assert!(lost(&imported, "the glossary"), "{:?}", imported.losses);
    assert!(lost(&imported, "the relationships of tag `vip`"), "{:?}", imported.losses);
}

#[test]
fn relationships_to_another_agent_are_left_out_and_said() {
    let mut s = server();
    s.guidelines = Ok(vec![
        serde_json::from_value(
            json!({"id": "g1", "condition": "The customer is angry", "action": "Apologize", "tags": ["agent:a1"]}),
        )
        .unwrap(),
        serde_json::from_value(
            json!({"id": "g2", "condition": "The customer is happy", "action": "Thank them", "tags": ["agent:other"]}),
        )
        .unwrap(),
    ]);
    let relationship =
        json!({"id": "r1", "kind": "priority", "source_guideline": {"id": "g1"}, "target_guideline": {"id": "g2"}});
    s.relationships.push(RelationshipRead {
        of: RelationshipsOf::Guideline("g1".into()),
        answer: Ok(vec![serde_json::from_value(relationship).unwrap()]),
    });
    let imported = import_agent(&s).unwrap();
    let definition = checked(&imported);
    assert_eq!(definition.guidelines.len(), 1);
    assert!(definition.relationships.is_empty());
    assert!(lost(&imported, "belongs to another agent"), "{:?}", imported.losses);
}
