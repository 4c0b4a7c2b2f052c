//! The Parlant plugin protocol against an axum server that streams back-to-back JSON
//! objects in deliberately awkward chunks.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures::StreamExt;
use guidepost_core::tool::{Overlap, ParameterSource, ParameterType, ServiceKind, ToolId, ToolService};
use guidepost_tools::{Lifespan, ToolEmission, ToolErrorKind, ToolOutcome, ToolRegistry};
use serde_json::{Value, json};

use super::common::{args, ctx, serve};

const OPTIONS: &str = r#"{"hidden":false,"source":"any","description":null,"significance":null,"examples":[],"precedence":9223372036854775807,"display_name":null}"#;

fn tools() -> Value {
    let options: Value = serde_json::from_str(OPTIONS).unwrap();
    let tool = |name: &str, params: Value, required: Value| {
        json!({"name": name, "creation_utc": "2026-11-21T13:17:13.257876Z", "description": format!("{name} tool\n"),
               "metadata": {}, "parameters": params, "required": required, "consequential": false, "overlap": 2})
    };
    json!({"tools": [
        tool("track_order", json!({"order_number": [{"type": "string"}, options]}), json!(["order_number"])),
        tool("book_table", json!({
            "restaurant": [{"type": "string"}, {"hidden": true, "source": "context", "description": null, "significance": null,
                           "examples": [], "precedence": 9223372036854775807i64, "display_name": null}],
            "when": [{"type": "datetime"}, options],
            "guests": [{"type": "array", "item_type": "integer"}, options],
            "vip": [{"type": "boolean"}, options],
            "note": [{"type": "string"}, options]
        }), json!(["restaurant", "when", "guests"])),
        tool("boom", json!({}), json!([])),
        tool("boom_sync", json!({}), json!([])),
        tool("garbled", json!({}), json!([]))
    ]})
}

type Seen = Arc<Mutex<Vec<Value>>>;

/// A body written as the given pieces, each flushed separately after a short pause.
fn chunked(pieces: Vec<String>) -> Response {
    let stream = futures::stream::iter(pieces).then(|piece| async move {
        tokio::time::sleep(Duration::from_millis(3)).await;
        Ok::<_, Infallible>(piece)
    });
    ([("content-type", "text/plain; charset=utf-8")], Body::from_stream(stream)).into_response()
}

/// Cuts `text` into pieces at awkward byte offsets (inside strings, escapes and UTF-8).
fn awkward(text: &str) -> Vec<String> {
    let bytes = text.as_bytes();
    let mut pieces = Vec::new();
    let mut start = 0;
    let mut size = 1;
    while start < bytes.len() {
        let mut end = (start + size).min(bytes.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        pieces.push(text[start..end].to_string());
        start = end;
        size = size % 13 + 2;
    }
    pieces
}

async fn call(State(seen): State<Seen>, Path(name): Path<String>, Json(body): Json<Value>) -> Response {
    seen.lock().unwrap().push(json!({"tool": name, "body": body}));
    match name.as_str() {
        "track_order" => {
            let order = body["arguments"]["order_number"].as_str().unwrap_or_default().to_string();
            let stream = [
                r#"{"status": "typing", "data": {"stage": "Looking up order } {"}}"#.to_string(),
                r#"{"message": "One moment, checking order \"}\" \u5317\u4eac..."}"#.to_string(),
                r#"{"custom": {"order_lookup": "[{"}}"#.to_string(),
                r#"{"status": "ready", "data": {"stage": "completed"}}"#.to_string(),
                format!(
                    r#"{{"result":{{"data":{{"order_number":"{order}","status":"shipped","note":"北京 {{\"x\": [1]}}"}},"metadata":{{"carrier":"toy-post"}},"control":{{"lifespan":"response"}},"canned_responses":[],"canned_response_fields":{{}},"guidelines":[{{"action":"mention the carrier"}}]}}}}"#
                ),
            ]
            .concat();
            chunked(awkward(&stream))
        }
        "book_table" => chunked(vec![format!(r#"{{"result":{{"data":{}}}}}"#, body["arguments"])]),
        "boom" => chunked(vec![r#"{"message": "about to fail"}"#.into(), r#"{"error": "kaboom"}"#.into()]),
        "boom_sync" => (
            StatusCode::INTERNAL_SERVER_ERROR,
            Json(json!({"detail": ["Traceback (most recent call last):\n", "  File \"toy.py\", line 57\n", "ValueError: sync kaboom\n"]})),
        )
            .into_response(),
        _ => chunked(vec![r#"{"message": "hi"}"#.into(), r#"{"message": "no result follows"#.into()]),
    }
}

async fn resolve(Path(name): Path<String>, RawQuery(query): RawQuery) -> Response {
    let mut tool = tools()["tools"].as_array().unwrap().iter().find(|t| t["name"] == json!(name)).cloned().unwrap();
    let customer = query
        .unwrap_or_default()
        .split('&')
        .find_map(|kv| kv.strip_prefix("customer_id="))
        .unwrap_or_default()
        .to_string();
    tool["parameters"]["restaurant"][0]["enum"] = json!([format!("Chez Toy ({customer})"), "Rust Bistro"]);
    Json(json!({"tool": tool})).into_response()
}

async fn server() -> (String, Seen) {
    let seen: Seen = Arc::default();
    let router = Router::new()
        .route("/tools", get(|| async { Json(tools()) }))
        .route("/tools/{name}/resolve", get(resolve))
        .route("/tools/{name}/calls", post(call))
        .with_state(seen.clone());
    let addr = serve(router).await;
    // A path on the registered URL is dropped, as Parlant does.
    (format!("http://{addr}/ignored/prefix"), seen)
}

async fn registry(url: String) -> ToolRegistry {
    let mut definition = super::common::example_agent("banking");
    definition.services.push(ToolService {
        name: "toys".into(),
        kind: ServiceKind::Parlant,
        url: Some(url),
        spec: None,
        command: Vec::new(),
        env: Default::default(),
        timeout_ms: Some(5000),
        idempotency_keys: false,
    });
    let mut registry = ToolRegistry::from_definition(&definition).unwrap();
    registry.resolve_tools().await.unwrap();
    registry
}

#[tokio::test]
async fn lists_and_resolves_tools() {
    let (url, _) = server().await;
    let registry = registry(url).await;
    let book = registry.tool(&ToolId::new("toys", "book_table")).unwrap();
    assert_eq!(book.description.as_deref(), Some("book_table tool"));
    assert_eq!(book.overlap, Overlap::Auto);
    let restaurant = &book.parameters[0];
    assert!(restaurant.hidden && restaurant.source == ParameterSource::Context && restaurant.required);
    assert_eq!(book.parameters[2].items, Some(ParameterType::Integer));
    assert!(restaurant.allowed.is_empty());
    let resolved = registry.resolve_tool(&book.id, &ctx()).await.unwrap();
    assert_eq!(resolved.parameters[0].allowed, vec![json!("Chez Toy (cu1)"), json!("Rust Bistro")]);
}

#[tokio::test]
async fn streams_emissions_and_the_result_across_awkward_chunks() {
    let (url, seen) = server().await;
    let registry = registry(url).await;
    let record =
        registry.call(&ToolId::new("toys", "track_order"), args(json!({"order_number": 12345})), &ctx(), None).await;
    let ToolOutcome::Ok(result) = &record.outcome else { panic!("{:?}", record.outcome) };
    assert_eq!(result.data["order_number"], json!("12345"));
    assert_eq!(result.data["note"], json!("北京 {\"x\": [1]}"));
    assert_eq!(result.metadata["carrier"], json!("toy-post"));
    assert_eq!(result.control.lifespan, Some(Lifespan::Response));
    assert_eq!(result.guidelines[0].action, "mention the carrier");
    assert_eq!(
        record.emissions,
        vec![
            ToolEmission::Status { status: "typing".into(), data: json!({"stage": "Looking up order } {"}) },
            ToolEmission::Message("One moment, checking order \"}\" 北京...".into()),
            ToolEmission::Custom(json!({"order_lookup": "[{"})),
            ToolEmission::Status { status: "ready".into(), data: json!({}) },
        ]
    );
    let body = &seen.lock().unwrap()[0]["body"];
    assert_eq!(
        body,
        &json!({"agent_id": "ag1", "session_id": "se1", "customer_id": "cu1", "arguments": {"order_number": "12345"}, "engine_context_id": null})
    );
}

#[tokio::test]
async fn encodes_arguments_like_parlant() {
    let (url, _) = server().await;
    let registry = registry(url).await;
    let record = registry
        .call(
            &ToolId::new("toys", "book_table"),
            args(json!({"restaurant": "Rust Bistro", "when": "2026-12-01T19:00:00Z", "guests": ["2", 3], "vip": "no"})),
            &ctx(),
            None,
        )
        .await;
    assert_eq!(
        record.result().data,
        json!({"restaurant": "Rust Bistro", "when": "2026-12-01T19:00:00+00:00", "guests": ["2", "3"], "vip": "", "note": null})
    );
}

#[tokio::test]
async fn failures_become_error_results() {
    let (url, _) = server().await;
    let registry = registry(url).await;
    let boom = registry.call(&ToolId::new("toys", "boom"), args(json!({})), &ctx(), None).await;
    assert_eq!(boom.outcome, ToolOutcome::failed("the tool reported an error: kaboom"));
    assert_eq!(boom.emissions, vec![ToolEmission::Message("about to fail".into())]);
    let sync = registry.call(&ToolId::new("toys", "boom_sync"), args(json!({})), &ctx(), None).await;
    let text = sync.result().data.as_str().unwrap().to_string();
    assert!(text.contains("HTTP 500") && text.ends_with("ValueError: sync kaboom"), "{text}");
    let garbled = registry.call(&ToolId::new("toys", "garbled"), args(json!({})), &ctx(), None).await;
    assert_eq!(garbled.outcome.error_kind(), Some(&ToolErrorKind::ServiceError));
    assert_eq!(sync.outcome.error_kind(), Some(&ToolErrorKind::ServiceError), "an HTTP 500 is the service's failure");
    assert!(garbled.result().data.as_str().unwrap().contains("ended early"));
    let missing = registry.call(&ToolId::new("toys", "track_order"), args(json!({})), &ctx(), None).await;
    assert!(matches!(missing.outcome.error_kind(), Some(ToolErrorKind::InvalidArguments { .. })));
}

#[tokio::test]
async fn declared_tools_keep_their_declaration_and_unreachable_services_are_reported() {
    let (url, _) = server().await;
    let mut definition = super::common::example_agent("banking");
    let mut declared = definition.tools[0].clone();
    declared.id = ToolId::new("toys", "track_order");
    declared.description = Some("Curated description".into());
    declared.parameters = Vec::new();
    declared.fixture = None;
    definition.tools.push(declared.clone());
    declared.id = ToolId::new("dead", "ping");
    definition.tools.push(declared);
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    for (name, url) in [("toys", url), ("dead", format!("http://{dead}"))] {
        definition.services.push(ToolService {
            name: name.into(),
            kind: ServiceKind::Parlant,
            url: Some(url),
            spec: None,
            command: Vec::new(),
            env: Default::default(),
            timeout_ms: None,
            idempotency_keys: false,
        });
    }
    let mut registry = ToolRegistry::from_definition(&definition).unwrap();
    let errors = registry.discover_tools().await;
    assert_eq!(errors.len(), 1);
    let text = errors[0].to_string();
    assert!(text.contains("`dead` is unavailable") && text.contains(&format!("GET http://{dead}/tools")), "{text}");
    let track = registry.tool(&ToolId::new("toys", "track_order")).unwrap();
    assert_eq!(track.description.as_deref(), Some("Curated description"));
    assert_eq!(track.parameters.len(), 1, "discovered parameters fill an empty declaration");
    let call = registry.call(&ToolId::new("dead", "ping"), args(json!({})), &ctx(), None).await;
    assert_eq!(call.outcome.error_kind(), Some(&ToolErrorKind::Unavailable));
    let text = call.result().data.as_str().unwrap().to_string();
    assert!(text.contains(&format!("cannot reach http://{dead}/tools/ping/calls")), "{text}");
}
