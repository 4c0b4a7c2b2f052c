//! The example agents load cleanly and deterministically.

use guidepost_core::definition::{SourceFile, load_agent};

use crate::common::{EXAMPLES, example, repo_root};

#[test]
fn examples_load_without_diagnostics() {
    for name in EXAMPLES {
        let def = example(name);
        assert_eq!(def.agent.id, name);
    }
}

#[test]
fn ids_are_stable_across_loads_and_file_names() {
    for name in EXAMPLES {
        let text = std::fs::read_to_string(repo_root().join(format!("examples/agents/{name}.yaml"))).unwrap();
        let a = load_agent(&[SourceFile::new("a.yaml", text.clone())]).definition.unwrap();
        let b = load_agent(&[SourceFile::new("elsewhere/b.yaml", text)]).definition.unwrap();
        assert_eq!(a, b, "{name}");
    }
}

#[test]
fn weather_agent_has_the_seed_structure() {
    let def = example("weather");
    let journey = def.journey("weather_lookup").unwrap();
    assert_eq!(journey.conditions.len(), 2);
    let states: Vec<&str> = journey.states.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(states, ["ask_city", "get_weather", "show_result", "suggest_cities", "ask_continue"]);
    assert_eq!(def.journey_guidelines("weather_lookup").count(), 2);
    assert_eq!(def.guidelines.iter().filter(|g| g.journey.is_none()).count(), 2);
    let tool = &def.tools[0];
    let fixture = tool.fixture.as_ref().unwrap();
    for city in ["北京", "Shanghai", "广州", "chengdu", "深圳", "Hangzhou"] {
        let args = [("location".to_string(), serde_json::json!(city))].into_iter().collect();
        assert!(matches!(fixture.outcome_for(&args), Some(guidepost_core::tool::FixtureOutcome::Result(_))), "{city}");
    }
    let args = [("location".to_string(), serde_json::json!("火星"))].into_iter().collect();
    assert!(matches!(fixture.outcome_for(&args), Some(guidepost_core::tool::FixtureOutcome::Error(_))));
}

#[test]
fn banking_premium_offer_is_reevaluated_after_the_balance_tool() {
    let def = example("banking");
    let r = def.relationships.iter().find(|r| r.kind == guidepost_core::RelationshipKind::Reevaluation).unwrap();
    assert_eq!(r.source, guidepost_core::Endpoint::Guideline("premium_offer".into()));
    assert_eq!(r.target, guidepost_core::Endpoint::Tool(guidepost_core::ToolId::new("fixtures", "get_balance")));
}
