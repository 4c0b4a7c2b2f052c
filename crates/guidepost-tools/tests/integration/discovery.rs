//! Discovery of tool services that accept a connection and never answer, or are down: each
//! costs its own discovery budget, is reported with its name and the limit, and leaves the
//! other services' tools available.

use std::time::{Duration, Instant};

use guidepost_core::tool::{ServiceKind, ToolId, ToolService};
use guidepost_tools::ToolRegistry;
use serde_json::json;

use super::common::{args, ctx, serve};

/// Accepts connections and reads from them forever, answering nothing.
async fn silent_server() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    format!("http://{addr}")
}

fn service(
    name: &str,
    kind: ServiceKind,
    url: Option<String>,
    spec: Option<String>,
    command: Vec<String>,
) -> ToolService {
    ToolService {
        name: name.into(),
        kind,
        url,
        spec,
        command,
        env: Default::default(),
        timeout_ms: None,
        idempotency_keys: false,
    }
}

#[tokio::test]
async fn hung_services_cost_one_budget_each_and_are_named() {
    let silent = silent_server().await;
    let spec = json!({
        "openapi": "3.0.0",
        "info": {"title": "t", "version": "1"},
        "paths": {"/ping": {"get": {"operationId": "ping", "responses": {"200": {"description": "ok"}}}}}
    });
    let working = serve(axum::Router::new().route(
        "/openapi.json",
        axum::routing::get(move || {
            let spec = spec.clone();
            async move { axum::Json(spec) }
        }),
    ))
    .await;
    let services = vec![
        service("spec_url", ServiceKind::Openapi, Some(silent.clone()), Some(format!("{silent}/openapi.json")), vec![]),
        service("plugin", ServiceKind::Parlant, Some(silent.clone()), None, vec![]),
        service("mcp_http", ServiceKind::Mcp, Some(format!("{silent}/mcp")), None, vec![]),
        service("mcp_stdio", ServiceKind::Mcp, None, None, vec!["sleep".into(), "3600".into()]),
        service(
            "working",
            ServiceKind::Openapi,
            Some(format!("http://{working}")),
            Some(format!("http://{working}/openapi.json")),
            vec![],
        ),
    ];
    let mut registry =
        ToolRegistry::for_services(&services).unwrap().with_discovery_timeout(Duration::from_millis(500));
    let started = Instant::now();
    let problems = registry.discover_tools().await;
    let took = started.elapsed();
    // Concurrently, one budget for all of them (plus slack), not one after the other.
    assert!(took >= Duration::from_millis(500) && took < Duration::from_secs(3), "{took:?}");
    let texts: Vec<String> = problems.iter().map(ToString::to_string).collect();
    assert_eq!(texts.len(), 4, "{texts:#?}");
    for name in ["spec_url", "plugin", "mcp_http", "mcp_stdio"] {
        let text = texts.iter().find(|t| t.contains(&format!("`{name}`"))).unwrap_or_else(|| panic!("{texts:#?}"));
        assert!(text.contains("tool discovery time limit of 500ms"), "{text}");
        assert!(text.contains("GUIDEPOST_DISCOVERY_TIMEOUT_SECS"), "{text}");
    }
    // The service that answered has its tools; a hung one's tools are unavailable.
    assert!(registry.tool(&ToolId::new("working", "ping")).is_some());
    assert!(registry.tools().all(|t| t.id.service != "spec_url"));
    let record = registry.call(&ToolId::new("spec_url", "ping"), args(json!({})), &ctx(), None).await;
    assert!(!record.outcome.is_ok(), "{:?}", record.outcome);
}

#[tokio::test]
async fn a_service_that_is_down_is_reported_at_once() {
    // A port nobody listens on.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let down = format!("http://127.0.0.1:{port}");
    let services = vec![service("down", ServiceKind::Parlant, Some(down), None, vec![])];
    let mut registry = ToolRegistry::for_services(&services).unwrap().with_discovery_timeout(Duration::from_secs(20));
    let started = Instant::now();
    let problems = registry.discover_tools().await;
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(problems.len(), 1);
    assert!(problems[0].to_string().contains("tool service `down` is unavailable"), "{}", problems[0]);
}
