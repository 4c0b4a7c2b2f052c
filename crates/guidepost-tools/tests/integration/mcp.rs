//! MCP servers written from the specification (no SDK shared with the client): over
//! streamable HTTP (in this process) and over stdio (the `guidepost-mcp-fixture` binary as
//! a child process).

use std::time::Duration;

use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use guidepost_core::tool::{ParameterType, ServiceKind, ToolId, ToolService};
use guidepost_tools::{ToolCallRequest, ToolErrorKind, ToolOutcome, ToolRegistry, ToolResult};
use serde_json::{Value, json};

use super::common::{args, ctx, serve};

#[path = "../../src/bin/guidepost-mcp-fixture/handler.rs"]
mod handler;

/// The session id the fixture hands out at `initialize` and expects afterwards.
const SESSION: &str = "fixture-session-1";

/// One POSTed JSON-RPC message: a JSON response for a request, 202 for a notification. A
/// request after `initialize` without the session header is refused, as the streamable HTTP
/// transport prescribes.
async fn mcp_post(headers: HeaderMap, body: String) -> Response {
    let message: Value = match serde_json::from_str(&body) {
        Ok(message) => message,
        Err(e) => return (StatusCode::BAD_REQUEST, axum::Json(handler::parse_error(&e.to_string()))).into_response(),
    };
    let initializing = message.get("method").and_then(Value::as_str) == Some("initialize");
    let session = headers.get("mcp-session-id").and_then(|v| v.to_str().ok());
    if !initializing && session != Some(SESSION) {
        return (StatusCode::BAD_REQUEST, "missing or unknown Mcp-Session-Id").into_response();
    }
    match handler::handle(&message).await {
        Some(answer) => {
            let mut response = ([(header::CONTENT_TYPE, "application/json")], answer.to_string()).into_response();
            if initializing && let Ok(value) = SESSION.parse() {
                response.headers_mut().insert("mcp-session-id", value);
            }
            response
        }
        None => StatusCode::ACCEPTED.into_response(),
    }
}

async fn http_server() -> String {
    // No server-initiated stream: GET (and DELETE) are 405, which the transport allows.
    let router = axum::Router::new().route(
        "/mcp",
        post(mcp_post)
            .get(|| async { StatusCode::METHOD_NOT_ALLOWED })
            .delete(|| async { StatusCode::METHOD_NOT_ALLOWED }),
    );
    let addr = serve(router).await;
    format!("http://{addr}/mcp")
}

fn service(url: Option<String>, command: Vec<String>) -> ToolService {
    ToolService {
        name: "mcp".into(),
        kind: ServiceKind::Mcp,
        url,
        spec: None,
        command,
        env: Default::default(),
        timeout_ms: None,
        idempotency_keys: false,
    }
}

async fn registry(service: ToolService) -> ToolRegistry {
    let mut definition = super::common::example_agent("banking");
    definition.services.push(service);
    let mut registry = ToolRegistry::from_definition(&definition).unwrap();
    registry.resolve_tools().await.unwrap();
    registry
}

async fn exercise(registry: &ToolRegistry) {
    let names: Vec<String> = registry.tools().filter(|t| t.id.service == "mcp").map(|t| t.id.name.clone()).collect();
    assert_eq!(names, ["echo", "add", "weather", "sleep", "gather"]);
    let weather = registry.tool(&ToolId::new("mcp", "weather")).unwrap();
    assert_eq!(weather.parameters[1].allowed, vec![json!("celsius"), json!("fahrenheit")]);
    assert!(weather.parameters[0].required && !weather.parameters[1].required);
    assert_eq!(registry.tool(&ToolId::new("mcp", "add")).unwrap().parameters[0].kind, ParameterType::Integer);

    let echo = registry.call(&ToolId::new("mcp", "echo"), args(json!({"text": "hi {there}"})), &ctx(), None).await;
    assert_eq!(echo.outcome, ToolOutcome::Ok(ToolResult::new(json!("hi {there}"))));
    let sum = registry.call(&ToolId::new("mcp", "add"), args(json!({"a": "2", "b": 40})), &ctx(), None).await;
    assert_eq!(sum.result().data, json!({"sum": 42}));
    let paris = registry.call(&ToolId::new("mcp", "weather"), args(json!({"city": "Paris"})), &ctx(), None).await;
    assert_eq!(paris.result().data, json!({"city": "Paris", "temperature": 18, "unit": "celsius"}));
    let mars = registry.call(&ToolId::new("mcp", "weather"), args(json!({"city": "Mars"})), &ctx(), None).await;
    assert_eq!(mars.outcome, ToolOutcome::failed("no weather data for Mars"));
    let invalid = registry
        .call(&ToolId::new("mcp", "weather"), args(json!({"city": "Paris", "unit": "kelvin"})), &ctx(), None)
        .await;
    assert!(matches!(invalid.outcome.error_kind(), Some(ToolErrorKind::InvalidArguments { .. })));

    let slow = registry
        .call(&ToolId::new("mcp", "sleep"), args(json!({"ms": 3000})), &ctx(), Some(Duration::from_millis(150)))
        .await;
    assert_eq!(slow.outcome.error_kind(), Some(&ToolErrorKind::Timeout { after_ms: 150 }));

    // Three calls at once: the server answers each only once all three are in flight
    // together, which calls made one after the other never are.
    let calls = (0..3).map(|_| ToolCallRequest::new(ToolId::new("mcp", "gather"), args(json!({"n": 3})))).collect();
    let records = registry.call_many(calls, &ctx(), None).await;
    for record in &records {
        assert_eq!(record.outcome, ToolOutcome::Ok(ToolResult::new(json!({"together": 3}))), "{records:?}");
    }
}

#[tokio::test]
async fn streamable_http_server() {
    let url = http_server().await;
    exercise(&registry(service(Some(url), Vec::new())).await).await;
}

#[tokio::test]
async fn stdio_server() {
    let command = vec![env!("CARGO_BIN_EXE_guidepost-mcp-fixture").to_string()];
    exercise(&registry(service(None, command)).await).await;
}

#[tokio::test]
async fn unreachable_servers_are_clear_errors() {
    let mut definition = super::common::example_agent("banking");
    definition.services.push(service(None, vec!["/nonexistent/guidepost-mcp".into()]));
    let mut registry = ToolRegistry::from_definition(&definition).unwrap();
    let err = registry.resolve_tools().await.unwrap_err().to_string();
    assert!(err.contains("cannot start command `/nonexistent/guidepost-mcp`"), "{err}");
}
