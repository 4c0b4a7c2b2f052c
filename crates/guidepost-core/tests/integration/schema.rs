//! The committed JSON Schema matches the one generated from the types.

use crate::common::repo_root;

#[test]
fn committed_schema_matches_the_types() {
    let generated = serde_json::to_string_pretty(guidepost_core::definition::json_schema()).unwrap() + "\n";
    let path = repo_root().join("schema/agent.schema.json");
    if std::env::var_os("GUIDEPOST_UPDATE_SCHEMA").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "schema/agent.schema.json is out of date: run `cargo run -p guidepost-cli -- schema > schema/agent.schema.json` \
         (or the tests with GUIDEPOST_UPDATE_SCHEMA=1) and commit it"
    );
}

#[test]
fn schema_has_the_documented_shape() {
    let schema = guidepost_core::definition::json_schema();
    assert_eq!(schema["title"], "Guidepost agent definition");
    let props = schema["properties"].as_object().unwrap();
    for key in ["agent", "guidelines", "journeys", "tools", "relationships", "variables", "glossary"] {
        assert!(props.contains_key(key), "{key}");
    }
    assert_eq!(schema["additionalProperties"], false);
    // Reasoning order is preserved: fields keep their declaration order.
    let guideline = schema["$defs"]["GuidelineDecl"]["properties"].as_object().unwrap();
    let keys: Vec<&String> = guideline.keys().take(3).collect();
    assert_eq!(keys, ["id", "condition", "action"]);
}
