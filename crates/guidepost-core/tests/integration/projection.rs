//! Journey projection, reproducing the worked weather example's projection.

use guidepost_core::agent::{Agent, CompositionMode, OutputMode};
use guidepost_core::journey::{Journey, JourneyState, StateKind, Transition};
use guidepost_core::projection::{NodeKind, ProjectedNode, project};
use guidepost_core::{AgentDefinition, ToolId};

use crate::common::{EXAMPLES, example};

fn definition_with(journey: Journey) -> AgentDefinition {
    AgentDefinition {
        agent: Agent {
            id: "weather".into(),
            name: "小天".into(),
            description: None,
            max_engine_iterations: 3,
            composition_mode: CompositionMode::Fluid,
            output_mode: OutputMode::Block,
            tags: vec![],
            preamble: Default::default(),
            no_match_reply: None,
            language: None,
            fallback_reply: None,
        },
        tags: vec![],
        guidelines: vec![],
        relationships: vec![],
        journeys: vec![journey],
        tools: vec![],
        services: vec![],
        variables: vec![],
        terms: vec![],
        capabilities: vec![],
        canned_responses: vec![],
    }
}

fn state(id: &str, kind: StateKind) -> JourneyState {
    JourneyState {
        id: id.into(),
        kind,
        description: None,
        canned_responses: vec![],
        composition_mode: None,
        labels: vec![],
        metadata: Default::default(),
    }
}

fn edge(id: &str, from: &str, to: &str, condition: Option<&str>) -> Transition {
    Transition { id: id.into(), from: from.into(), to: to.into(), condition: condition.map(Into::into) }
}

fn get_weather() -> StateKind {
    StateKind::Tool { tools: vec![ToolId::new("fixtures", "get_weather")], instruction: None }
}

fn summary(n: &ProjectedNode) -> (usize, &str, NodeKind, Option<&str>, Vec<&str>) {
    (
        n.index,
        n.guideline_id.as_str(),
        n.kind,
        n.condition.as_deref(),
        n.follow_ups.iter().map(String::as_str).collect(),
    )
}

/// The projection example of the guide: the start forks on whether the customer named a
/// city; asking for the city leads unconditionally to the weather tool.
#[test]
fn reproduces_the_guide_projection() {
    let journey = Journey {
        id: "weather".into(),
        title: "查询天气".into(),
        description: Some("帮助用户查询城市天气".into()),
        conditions: vec![],
        tags: vec![],
        labels: vec![],
        priority: 0,
        composition_mode: None,
        states: vec![
            state("node_get_weather", get_weather()),
            state("node_ask_city", StateKind::Chat { action: "友好地询问用户想查询哪个城市的天气".into() }),
        ],
        transitions: vec![
            edge("edge_001", "initial", "node_get_weather", Some("用户消息中包含城市名称")),
            edge("edge_002", "initial", "node_ask_city", Some("用户没有提到具体城市")),
            edge("edge_003", "node_ask_city", "node_get_weather", None),
        ],
    };
    let nodes = project(&definition_with(journey), "weather").unwrap();
    let got: Vec<_> = nodes.iter().map(summary).collect();
    assert_eq!(
        got,
        vec![
            (
                0,
                "journey_node:weather.initial",
                NodeKind::Fork,
                None,
                vec!["journey_node:weather.node_get_weather:edge_001", "journey_node:weather.node_ask_city:edge_002"]
            ),
            (
                1,
                "journey_node:weather.node_get_weather:edge_001",
                NodeKind::Tool,
                Some("用户消息中包含城市名称"),
                vec![]
            ),
            (
                2,
                "journey_node:weather.node_ask_city:edge_002",
                NodeKind::Chat,
                Some("用户没有提到具体城市"),
                vec!["journey_node:weather.node_get_weather:edge_003"]
            ),
            (3, "journey_node:weather.node_get_weather:edge_003", NodeKind::Tool, None, vec![]),
        ]
    );
    assert_eq!(nodes[1].tools, vec![ToolId::new("fixtures", "get_weather")]);
    assert_eq!(nodes[3].tools, vec![ToolId::new("fixtures", "get_weather")]);
    assert_eq!(nodes[2].action.as_deref(), Some("友好地询问用户想查询哪个城市的天气"));
    assert!(nodes.iter().all(|n| n.journey_id == "weather"));
}

/// The guide's simplified chain: start -> ask city -> weather tool -> show result.
#[test]
fn reproduces_the_guide_chain() {
    let journey = Journey {
        id: "weather".into(),
        title: "查询天气".into(),
        description: None,
        conditions: vec![],
        tags: vec![],
        labels: vec![],
        priority: 0,
        composition_mode: None,
        states: vec![
            state("node_ask_city", StateKind::Chat { action: "友好地询问用户想查询哪个城市的天气".into() }),
            state("node_get_weather", get_weather()),
            state(
                "node_show_result",
                StateKind::Chat {
                    action: "简洁友好地告诉用户天气情况：温度、天气状况、湿度".into()
                },
            ),
        ],
        transitions: vec![
            edge("edge_001", "initial", "node_ask_city", None),
            edge("edge_002", "node_ask_city", "node_get_weather", None),
            edge("edge_003", "node_get_weather", "node_show_result", Some("查询成功")),
        ],
    };
    let nodes = project(&definition_with(journey), "weather").unwrap();
    let got: Vec<_> = nodes.iter().map(summary).collect();
    assert_eq!(
        got,
        vec![
            (
                0,
                "journey_node:weather.initial",
                NodeKind::Fork,
                None,
                vec!["journey_node:weather.node_ask_city:edge_001"]
            ),
            (
                1,
                "journey_node:weather.node_ask_city:edge_001",
                NodeKind::Chat,
                None,
                vec!["journey_node:weather.node_get_weather:edge_002"]
            ),
            (
                2,
                "journey_node:weather.node_get_weather:edge_002",
                NodeKind::Tool,
                None,
                vec!["journey_node:weather.node_show_result:edge_003"]
            ),
            (3, "journey_node:weather.node_show_result:edge_003", NodeKind::Chat, Some("查询成功"), vec![]),
        ]
    );
}

/// The full example agent: cycles terminate (each transition followed once), every
/// transition yields one node guideline, `end` appears as end nodes.
#[test]
fn projects_the_weather_example_with_its_cycles() {
    let def = example("weather");
    let nodes = project(&def, "weather_lookup").unwrap();
    let journey = def.journey("weather_lookup").unwrap();
    assert_eq!(nodes.len(), journey.transitions.len() + 1);
    assert_eq!(nodes.iter().filter(|n| n.kind == NodeKind::End).count(), 2);
    for n in &nodes {
        for f in &n.follow_ups {
            assert!(nodes.iter().any(|m| &m.guideline_id == f), "dangling follow-up {f}");
        }
    }
    insta::assert_yaml_snapshot!("weather_projection", nodes);
}

#[test]
fn projection_is_deterministic() {
    for name in EXAMPLES {
        let def = example(name);
        for j in &def.journeys {
            assert_eq!(project(&def, &j.id), project(&example(name), &j.id));
        }
    }
}

#[test]
fn sub_journeys_are_inlined() {
    let yaml = r#"
agent: {name: Shop}
journeys:
  - id: verify
    title: Verify identity
    start: ask_email
    states:
      - {id: ask_email, chat: Ask for the email address, next: end}
  - id: refund
    title: Refund
    conditions: [The customer wants a refund]
    start: verify_first
    states:
      - {id: verify_first, journey: verify, next: ask_reason}
      - {id: ask_reason, chat: Ask why they want a refund, next: end}
"#;
    let def = guidepost_core::definition::load_agent(&[guidepost_core::definition::SourceFile::new("shop.yaml", yaml)])
        .definition
        .unwrap();
    let nodes = project(&def, "refund").unwrap();
    let ids: Vec<&str> = nodes.iter().map(|n| n.guideline_id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "journey_node:refund.initial",
            "journey_node:refund.verify_first:edge_001",
            "journey_node:refund.verify_first>ask_email:verify_first>edge_001",
            "journey_node:refund.verify_first>exit:verify_first>edge_002",
            "journey_node:refund.ask_reason:edge_002",
            "journey_node:refund.end:edge_003",
        ]
    );
    assert_eq!(nodes[2].sub_journey.as_deref(), Some("verify"));
    assert_eq!(nodes[2].kind, NodeKind::Chat);
}
