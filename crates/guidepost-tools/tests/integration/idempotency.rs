//! A call's idempotency key reaches every kind of service as that service's protocol
//! carries it (the `Idempotency-Key` header for OpenAPI and Parlant plugin services, the
//! request's `_meta` for MCP, the context for native tools), and each protocol's way of
//! saying "I perform each key once" (or "my repeats change nothing") is read.

use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use guidepost_core::tool::{Idempotency, ServiceKind, ToolId, ToolService};
use guidepost_tools::mcp::IDEMPOTENCY_META_KEY;
use guidepost_tools::{NativeTool, ToolRegistry};
use serde_json::{Value, json};

use super::common::{args, ctx, serve};

/// What a service received: the key of each call, `None` when it came without one.
type Received = Arc<Mutex<Vec<Option<String>>>>;

fn service(name: &str, kind: ServiceKind, url: String, keys: bool) -> ToolService {
    ToolService {
        name: name.into(),
        kind,
        url: Some(url),
        spec: None,
        command: Vec::new(),
        env: Default::default(),
        timeout_ms: Some(5000),
        idempotency_keys: keys,
    }
}

fn header_key(headers: &HeaderMap) -> Option<String> {
    headers.get("idempotency-key").and_then(|v| v.to_str().ok()).map(str::to_string)
}

async fn registry(services: Vec<ToolService>) -> ToolRegistry {
    let mut definition = super::common::example_agent("banking");
    definition.services.extend(services);
    let mut registry = ToolRegistry::from_definition(&definition).unwrap();
    registry.resolve_tools().await.unwrap();
    registry
}

fn openapi_document() -> Value {
    json!({
        "openapi": "3.0.3",
        "info": {"title": "Bookings", "version": "1"},
        "paths": {
            "/bookings": {"post": {
                "operationId": "book",
                "parameters": [{"name": "Idempotency-Key", "in": "header", "required": true, "schema": {"type": "string"}}],
                "requestBody": {"content": {"application/json": {"schema": {"type": "object", "required": ["pickup"], "properties": {"pickup": {"type": "string"}}}}}}
            }},
            "/cancellations": {"post": {
                "operationId": "cancel",
                "requestBody": {"content": {"application/json": {"schema": {"type": "object", "properties": {"booking": {"type": "string"}}}}}}
            }}
        }
    })
}

#[tokio::test]
async fn openapi_services_get_the_key_as_a_header_and_an_operation_that_declares_it_takes_it() {
    let received = Received::default();
    let router = Router::new()
        .route("/openapi.json", get(|| async { Json(openapi_document()) }))
        .route(
            "/bookings",
            post(|State(r): State<Received>, headers: HeaderMap, Json(body): Json<Value>| async move {
                r.lock().unwrap().push(header_key(&headers));
                Json(json!({"booked": body["pickup"]}))
            }),
        )
        .route(
            "/cancellations",
            post(|State(r): State<Received>, headers: HeaderMap| async move {
                r.lock().unwrap().push(header_key(&headers));
                StatusCode::NO_CONTENT
            }),
        )
        .with_state(received.clone());
    let addr = serve(router).await;
    let registry = registry(vec![service("bookings", ServiceKind::Openapi, format!("http://{addr}"), false)]).await;
    let book = ToolId::new("bookings", "book");
    let tool = registry.tool(&book).unwrap();
    assert_eq!(
        tool.parameters.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(),
        ["pickup"],
        "never asked of the model"
    );
    assert_eq!(registry.idempotency(&book), Idempotency::Keyed);
    let cancel = ToolId::new("bookings", "cancel");
    assert_eq!(registry.idempotency(&cancel), Idempotency::Unknown, "no declared header: it may act twice");

    let keyed = ctx().with_idempotency_key("0b8a6f3c-5d1e-5c2a-9f7e-4a1b2c3d4e5f");
    let booked = registry.call(&book, args(json!({"pickup": "12 Main Street"})), &keyed, None).await;
    assert_eq!(booked.result().data, json!({"booked": "12 Main Street"}));
    registry.call(&cancel, args(json!({"booking": "7"})), &keyed, None).await;
    registry.call(&cancel, args(json!({"booking": "7"})), &ctx(), None).await;
    let key = Some("0b8a6f3c-5d1e-5c2a-9f7e-4a1b2c3d4e5f".to_string());
    assert_eq!(*received.lock().unwrap(), [key.clone(), key, None]);
}

#[tokio::test]
async fn parlant_plugin_services_get_the_key_as_a_header_and_a_tool_says_it_takes_it_in_its_metadata() {
    let received = Received::default();
    let options = json!({"hidden": false, "source": "any", "description": null, "significance": null, "examples": [], "precedence": 1, "display_name": null});
    let listing = json!({"tools": [
        {"name": "book", "description": "Book", "metadata": {"idempotency_keys": true},
         "parameters": {"pickup": [{"type": "string"}, options.clone()]}, "required": ["pickup"], "consequential": true},
        {"name": "pay", "description": "Pay", "metadata": {},
         "parameters": {"amount": [{"type": "string"}, options]}, "required": ["amount"], "consequential": true}
    ]});
    let router = Router::new()
        .route("/tools", get(move || async move { Json(listing) }))
        .route(
            "/tools/{name}/calls",
            post(|State(r): State<Received>, headers: HeaderMap| async move {
                r.lock().unwrap().push(header_key(&headers));
                r#"{"result": {"data": "done"}}"#
            }),
        )
        .with_state(received.clone());
    let addr = serve(router).await;
    let plugin = service("plugin", ServiceKind::Parlant, format!("http://{addr}"), false);
    let listed = registry(vec![plugin.clone()]).await;
    assert_eq!(listed.idempotency(&ToolId::new("plugin", "book")), Idempotency::Keyed);
    assert_eq!(listed.idempotency(&ToolId::new("plugin", "pay")), Idempotency::Unknown);
    let keyed = ctx().with_idempotency_key("key-1");
    let paid = listed.call(&ToolId::new("plugin", "pay"), args(json!({"amount": "5"})), &keyed, None).await;
    assert_eq!(paid.result().data, json!("done"));
    assert_eq!(*received.lock().unwrap(), [Some("key-1".to_string())]);

    // The service's declaration covers every tool of it.
    let declared = registry(vec![ToolService { idempotency_keys: true, ..plugin }]).await;
    assert_eq!(declared.idempotency(&ToolId::new("plugin", "pay")), Idempotency::Keyed);
}

/// A streamable HTTP MCP server (plain JSON-RPC, no SDK) that records each call's `_meta`.
async fn mcp(State(received): State<Received>, headers: HeaderMap, body: String) -> Response {
    let message: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let Some(id) = message.get("id").cloned() else { return StatusCode::ACCEPTED.into_response() };
    let method = message["method"].as_str().unwrap_or_default();
    let schema = json!({"type": "object", "properties": {"pickup": {"type": "string"}}, "required": ["pickup"]});
    let result = match method {
        "initialize" => {
            json!({"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}, "serverInfo": {"name": "bookings", "version": "1"}})
        }
        "tools/list" => json!({"tools": [
            {"name": "book", "inputSchema": schema, "annotations": {"destructiveHint": true}, "_meta": {IDEMPOTENCY_META_KEY: true}},
            {"name": "set_seat", "inputSchema": schema, "annotations": {"destructiveHint": true, "idempotentHint": true}},
            {"name": "charge", "inputSchema": schema, "annotations": {"destructiveHint": true}}
        ]}),
        "tools/call" => {
            let key =
                message.pointer("/params/_meta").and_then(|m| m.get(IDEMPOTENCY_META_KEY)).and_then(Value::as_str);
            received.lock().unwrap().push(key.map(str::to_string));
            json!({"content": [{"type": "text", "text": "done"}]})
        }
        _ => json!({}),
    };
    let answer = json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string();
    let mut response = ([(header::CONTENT_TYPE, "application/json")], answer).into_response();
    if method == "initialize" || headers.contains_key("mcp-session-id") {
        response.headers_mut().insert("mcp-session-id", header::HeaderValue::from_static("s1"));
    }
    response
}

#[tokio::test]
async fn mcp_services_get_the_key_in_the_requests_meta_and_tools_say_how_repeats_behave() {
    let received = Received::default();
    let router = Router::new()
        .route("/mcp", post(mcp).get(|| async { StatusCode::METHOD_NOT_ALLOWED }))
        .with_state(received.clone());
    let addr = serve(router).await;
    let registry = registry(vec![service("rides", ServiceKind::Mcp, format!("http://{addr}/mcp"), false)]).await;
    let id = |name: &str| ToolId::new("rides", name);
    assert_eq!(registry.idempotency(&id("book")), Idempotency::Keyed);
    assert_eq!(registry.idempotency(&id("set_seat")), Idempotency::Repeatable);
    assert_eq!(registry.idempotency(&id("charge")), Idempotency::Unknown);
    assert!(registry.tool(&id("charge")).unwrap().consequential);
    let keyed = ctx().with_idempotency_key("key-2");
    let done = registry.call(&id("charge"), args(json!({"pickup": "x"})), &keyed, None).await;
    assert_eq!(done.result().data, json!("done"));
    registry.call(&id("charge"), args(json!({"pickup": "x"})), &ctx(), None).await;
    assert_eq!(*received.lock().unwrap(), [Some("key-2".to_string()), None]);
}

#[tokio::test]
async fn native_tools_read_the_key_from_their_context_and_fixtures_are_repeatable() {
    let mut registry = registry(Vec::new()).await;
    registry.register_native(
        NativeTool::new("book", |_args, ctx| async move { Ok::<_, String>(json!({"key": ctx.idempotency_key()})) })
            .consequential(true)
            .idempotency_keys(),
    );
    let book = ToolId::new("native", "book");
    assert_eq!(registry.idempotency(&book), Idempotency::Keyed);
    let done = registry.call(&book, args(json!({})), &ctx().with_idempotency_key("key-3"), None).await;
    assert_eq!(done.result().data, json!({"key": "key-3"}));
    let fixture = registry.tools().find(|t| t.fixture.is_some()).map(|t| t.id.clone()).unwrap();
    assert_eq!(registry.idempotency(&fixture), Idempotency::Repeatable, "a table changes nothing");
}
