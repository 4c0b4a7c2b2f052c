//! Tools written as Python functions (`python/guidepost`), served by `guidepost tools serve`
//! in a real Python process and called over HTTP: a conversation of the example agent
//! (`examples/python-tools`) that looks an order up, and the engine's tool registry reading
//! their descriptions, choices, results, errors and timeouts.

use std::process::Command;
use std::time::Duration;

use guidepost_core::tool::{ParameterSource, ParameterType, ServiceKind, ToolId, ToolService};
use guidepost_tools::{ToolContext, ToolEmission, ToolOutcome, ToolRegistry};
use serde_json::{Value, json};

use crate::repo_root;
use crate::serve::{Running, bin, fake_model, start};

/// `guidepost tools serve MODULES --port 0`, once it listens.
fn serve_tools(modules: &[&str]) -> Running {
    let mut cmd = Command::new(bin());
    cmd.args(["tools", "serve"]).args(modules).args(["--port", "0"]);
    start(cmd, "listening on ")
}

const PROBE: &str = r#"
import asyncio, datetime
from typing import Annotated, List, Literal, Optional
from guidepost import Param, ToolContext, ToolError, tool

async def rooms(context: ToolContext) -> List[str]:
    return [f"room for {context.customer_id}", "hall"]

@tool
def echo(context: ToolContext, n: int, r: float, yes: bool, no: bool, day: datetime.date,
         at: datetime.datetime, kind: Literal["a", "b"], nums: List[int], note: Optional[str] = None) -> dict:
    """Echoes its arguments.

    Args:
        n: A whole number.
    """
    return {"n": n, "r": r, "yes": yes, "no": no, "day": day, "at": at, "kind": kind, "nums": nums, "note": note,
            "types": [type(x).__name__ for x in (n, r, yes, no, day, at)],
            "ids": [context.agent_id, context.session_id, context.customer_id], "key": context.idempotency_key}

@tool
async def refuse() -> None:
    raise ToolError("the warehouse is closed")

@tool
def crash() -> None:
    raise RuntimeError("disk full")

@tool(timeout=0.3)
async def slow() -> str:
    await asyncio.sleep(30)
    return "late"

@tool(consequential=True)
async def book(context: ToolContext, room: Annotated[str, Param(choices=rooms, source="context")]) -> str:
    """Books a room."""
    await context.emit_message(f"booking {room}")
    return room
"#;

#[test]
fn a_conversation_looks_an_order_up_through_a_python_tool() {
    let tools = serve_tools(&["examples/python-tools/shop_tools.py"]);
    let dir = tempfile::tempdir().unwrap();
    let agent = std::fs::read_to_string(repo_root().join("examples/python-tools/agent.yaml")).unwrap();
    assert!(agent.contains("url: http://127.0.0.1:8089"), "the example names its tool server");
    std::fs::write(dir.path().join("agent.yaml"), agent.replace("http://127.0.0.1:8089", &tools.url)).unwrap();

    let fake = fake_model();
    let output = Command::new(bin())
        .current_dir(repo_root())
        .arg("chat")
        .arg(dir.path())
        .args(["--message", "Hi, where is my order 12345?"])
        .env("GUIDEPOST_MODEL", format!("openai-compatible:{}/v1#gpt-4.1", fake.url))
        .env("GUIDEPOST_EMBEDDER", format!("openai-compatible:{}/v1#fake-embed", fake.url))
        .output()
        .unwrap();
    let console = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "{console}\n--- tool server\n{}", tools.stderr_so_far());
    assert!(
        console.contains(r#"tool track_order({"order_number":"12345"}) → {"order_number":"12345","title":"The Left Hand of Darkness","status":"shipped""#),
        "the Python function's result reached the engine:\n{console}"
    );
    assert!(console.contains("Page> "), "the agent replied:\n{console}");
    let mut log = String::new();
    for _ in 0..50 {
        log.push_str(&tools.stderr_so_far());
        if log.contains("call track_order: ok") {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(log.contains("call track_order: ok"), "the tool server logged the call:\n{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_tools_reach_the_engine_with_their_types_choices_errors_and_timeouts() {
    let dir = tempfile::tempdir().unwrap();
    let probe = dir.path().join("probe_tools.py");
    std::fs::write(&probe, PROBE).unwrap();
    let server = serve_tools(&[probe.to_str().unwrap()]);
    let service = ToolService {
        name: "probe".into(),
        kind: ServiceKind::Parlant,
        url: Some(server.url.clone()),
        spec: None,
        command: Vec::new(),
        env: Default::default(),
        timeout_ms: None,
        idempotency_keys: false,
    };
    let mut registry = ToolRegistry::for_services(&[service]).unwrap();
    assert!(registry.discover_tools().await.is_empty());
    let names: Vec<String> = registry.tools().map(|t| t.id.to_string()).collect();
    assert_eq!(names, ["probe:echo", "probe:refuse", "probe:crash", "probe:slow", "probe:book"]);

    let echo = registry.tool(&ToolId::new("probe", "echo")).unwrap();
    assert_eq!(echo.description.as_deref(), Some("Echoes its arguments."));
    let kinds: Vec<(String, ParameterType, bool)> =
        echo.parameters.iter().map(|p| (p.name.clone(), p.kind, p.required)).collect();
    let t = |name: &str, kind, required| (name.to_string(), kind, required);
    assert_eq!(
        kinds,
        [
            t("n", ParameterType::Integer, true),
            t("r", ParameterType::Number, true),
            t("yes", ParameterType::Boolean, true),
            t("no", ParameterType::Boolean, true),
            t("day", ParameterType::Date, true),
            t("at", ParameterType::Datetime, true),
            t("kind", ParameterType::String, true),
            t("nums", ParameterType::Array, true),
            t("note", ParameterType::String, false),
        ]
    );
    assert_eq!(echo.parameters[0].description.as_deref(), Some("A whole number."));
    assert_eq!(echo.parameters[6].allowed, [json!("a"), json!("b")]);
    assert_eq!(echo.parameters[7].items, Some(ParameterType::Integer));

    let ctx = ToolContext::new("ag1", "se1", "cu1");
    let call = |name: &str, args: Value| {
        let registry = &registry;
        let ctx = ctx.clone();
        let id = ToolId::new("probe", name);
        async move { registry.call(&id, args.as_object().unwrap().clone(), &ctx, None).await }
    };

    let args = json!({"n": 3, "r": 2.5, "yes": true, "no": false, "day": "2026-12-01",
                      "at": "2026-12-01T10:00:00+00:00", "kind": "b", "nums": [1, 2]});
    let record = call("echo", args).await;
    let ToolOutcome::Ok(result) = record.outcome else { panic!("{:?}", record.outcome) };
    assert_eq!(
        result.data,
        json!({"n": 3, "r": 2.5, "yes": true, "no": false, "day": "2026-12-01", "at": "2026-12-01T10:00:00+00:00",
               "kind": "b", "nums": [1, 2], "note": null,
               "types": ["int", "float", "bool", "bool", "date", "datetime"], "ids": ["ag1", "se1", "cu1"], "key": null})
    );

    for (tool, expected) in
        [("refuse", "the warehouse is closed"), ("crash", "RuntimeError: disk full"), ("slow", "timed out after 0.3 s")]
    {
        let record = call(tool, json!({})).await;
        let ToolOutcome::Error { message, .. } = &record.outcome else { panic!("{tool}: {:?}", record.outcome) };
        assert!(message.contains(expected), "{tool}: {message}");
    }

    let book = registry.resolve_tool(&ToolId::new("probe", "book"), &ctx).await.unwrap();
    assert!(book.consequential);
    assert_eq!(book.parameters[0].allowed, [json!("room for cu1"), json!("hall")]);
    assert_eq!(book.parameters[0].source, ParameterSource::Context);
    let record = call("book", json!({"room": "hall"})).await;
    assert_eq!(record.emissions, [ToolEmission::Message("booking hall".into())]);
    let ToolOutcome::Ok(result) = record.outcome else { panic!("{:?}", record.outcome) };
    assert_eq!(result.data, json!("hall"));
}
