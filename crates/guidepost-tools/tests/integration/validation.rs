//! Argument validation through the registry: every type, enums, missing required
//! parameters, defaults, hidden parameters, unknown arguments.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use guidepost_core::tool::{ParameterType, ToolId, ToolParameter};
use guidepost_tools::native::{NativeTool, parameter};
use guidepost_tools::{ProblemKind, ToolErrorKind, ToolOutcome, ToolRegistry};
use serde_json::{Value, json};

use super::common::{args, ctx};

/// A registry with `native:everything`, which echoes its arguments, and a counter of calls.
fn registry() -> (ToolRegistry, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    let optional = |name: &str, kind| ToolParameter { required: false, ..parameter(name, kind) };
    let tool = NativeTool::new("everything", move |args, _ctx| {
        counter.fetch_add(1, Ordering::SeqCst);
        async move { Ok::<_, String>(Value::Object(args)) }
    })
    .parameter(parameter("text", ParameterType::String))
    .parameter(optional("count", ParameterType::Integer))
    .parameter(optional("ratio", ParameterType::Number))
    .parameter(optional("flag", ParameterType::Boolean))
    .parameter(optional("day", ParameterType::Date))
    .parameter(optional("at", ParameterType::Datetime))
    .parameter(optional("wait", ParameterType::Timedelta))
    .parameter(optional("id", ParameterType::Uuid))
    .parameter(optional("file", ParameterType::Path))
    .parameter(ToolParameter { items: Some(ParameterType::Integer), ..optional("numbers", ParameterType::Array) })
    .parameter(ToolParameter {
        allowed: vec![json!("celsius"), json!("fahrenheit")],
        default: Some(json!("celsius")),
        ..optional("unit", ParameterType::String)
    })
    .parameter(ToolParameter { hidden: true, ..parameter("account", ParameterType::String) });
    let mut registry = ToolRegistry::new();
    registry.register_native(tool);
    (registry, calls)
}

#[tokio::test]
async fn every_type_is_coerced_and_defaults_are_filled() {
    let (registry, calls) = registry();
    let id = ToolId::new("native", "everything");
    let record = registry
        .call(
            &id,
            args(json!({
                "text": 12, "count": "7", "ratio": "0.5", "flag": "yes", "day": "2026-12-01",
                "at": "2026-12-01T18:30:00Z", "wait": "15m", "id": "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11",
                "file": "/tmp/x", "numbers": "[1, \"2\"]", "account": "acc-1", "unused_null": null
            }))
            .into_iter()
            .filter(|(k, _)| k != "unused_null")
            .collect(),
            &ctx(),
            None,
        )
        .await;
    let expected = json!({
        "text": "12", "count": 7, "ratio": 0.5, "flag": true, "day": "2026-12-01",
        "at": "2026-12-01T18:30:00+00:00", "wait": "15m", "id": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
        "file": "/tmp/x", "numbers": [1, 2], "unit": "celsius", "account": "acc-1"
    });
    assert_eq!(record.outcome, ToolOutcome::Ok(expected.into()));
    assert_eq!(record.arguments["unit"], json!("celsius"));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn every_problem_is_listed_and_the_tool_is_not_called() {
    let (registry, calls) = registry();
    let id = ToolId::new("native", "everything");
    let cases: Vec<(Value, Vec<(&str, ProblemKind)>)> = vec![
        (json!({"account": "a"}), vec![("text", ProblemKind::Missing)]),
        (json!({"text": "t"}), vec![("account", ProblemKind::Missing)]),
        (json!({"text": "t", "account": "a", "unit": "kelvin"}), vec![("unit", ProblemKind::Invalid)]),
        (json!({"text": "t", "account": "a", "count": "3.7"}), vec![("count", ProblemKind::Invalid)]),
        (json!({"text": "t", "account": "a", "ratio": "lots"}), vec![("ratio", ProblemKind::Invalid)]),
        (json!({"text": "t", "account": "a", "flag": "perhaps"}), vec![("flag", ProblemKind::Invalid)]),
        (json!({"text": "t", "account": "a", "day": "12/01/2026"}), vec![("day", ProblemKind::Invalid)]),
        (json!({"text": "t", "account": "a", "at": "noon"}), vec![("at", ProblemKind::Invalid)]),
        (json!({"text": "t", "account": "a", "wait": "a while"}), vec![("wait", ProblemKind::Invalid)]),
        (json!({"text": "t", "account": "a", "id": "1234"}), vec![("id", ProblemKind::Invalid)]),
        (json!({"text": "t", "account": "a", "numbers": [1, "x"]}), vec![("numbers", ProblemKind::Invalid)]),
        (json!({"text": "t", "account": "a", "colour": "red"}), vec![("colour", ProblemKind::Unknown)]),
        (
            json!({"count": "many", "unit": "kelvin", "extra": 1}),
            vec![
                ("extra", ProblemKind::Unknown),
                ("text", ProblemKind::Missing),
                ("count", ProblemKind::Invalid),
                ("unit", ProblemKind::Invalid),
                ("account", ProblemKind::Missing),
            ],
        ),
    ];
    for (input, expected) in cases {
        let record = registry.call(&id, args(input.clone()), &ctx(), None).await;
        let Some(ToolErrorKind::InvalidArguments { problems }) = record.outcome.error_kind() else {
            panic!("{input} should be rejected, got {:?}", record.outcome);
        };
        let got: Vec<(&str, ProblemKind)> = problems.iter().map(|p| (p.parameter.as_str(), p.problem)).collect();
        assert_eq!(got, expected, "{input}");
        let data = record.result().data;
        for (name, _) in &expected {
            assert!(data.as_str().unwrap().contains(&format!("`{name}`")), "{data} names {name}");
        }
        assert_eq!(record.arguments, args(input), "raw arguments are kept when rejected");
    }
    let hidden = registry.call(&id, args(json!({"text": "t"})), &ctx(), None).await;
    let Some(ToolErrorKind::InvalidArguments { problems }) = hidden.outcome.error_kind() else { panic!() };
    assert!(problems[0].hidden, "a missing hidden parameter is flagged hidden, so it is never asked for");
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}
