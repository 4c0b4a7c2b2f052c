//! Discovery of tool services that accept a connection and never answer, or are down: each
//! costs its own discovery budget, is reported with its name and the limit, and leaves the
//! other services' tools available.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt;
use tokio::sync::watch;

use guidepost_core::tool::{ServiceKind, ToolId, ToolService};
use guidepost_tools::ToolRegistry;
use serde_json::json;

use super::common::{args, ctx, serve};

/// Accepts connections and reads from them until the client hangs up, answering nothing; its
/// base url, and the connections open now and the most that were open at once.
async fn silent_server() -> (String, Arc<watch::Sender<(usize, usize)>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let open = Arc::new(watch::Sender::new((0usize, 0usize)));
    let counter = open.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            counter.send_modify(|(now, most)| {
                *now += 1;
                *most = (*most).max(*now);
            });
            let counter = counter.clone();
            tokio::spawn(async move {
                let mut buffer = [0u8; 4096];
                while matches!(socket.read(&mut buffer).await, Ok(n) if n > 0) {}
                counter.send_modify(|(now, _)| *now -= 1);
            });
        }
    });
    (format!("http://{addr}"), open)
}

fn service(
    name: &str,
    kind: ServiceKind,
    url: Option<String>,
    spec: Option<String>,
    command: Vec<String>,
) -> ToolService {
    ToolService { name: name.into(), kind, url, spec, command, env: Default::default(), timeout_ms: None }
}

#[tokio::test]
async fn hung_services_cost_one_budget_each_and_are_named() {
    let (silent, open) = silent_server().await;
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
    let mut registry = ToolRegistry::for_services(&services).unwrap().with_discovery_timeout(Duration::from_secs(2));
    let started = Instant::now();
    let problems = registry.discover_tools().await;
    // A budget is never cut short (a lower bound holds however busy the machine is) ...
    assert!(started.elapsed() >= Duration::from_secs(2), "{:?}", started.elapsed());
    // ... and the services are asked concurrently, one budget for all of them: the three
    // silent HTTP services held their connections open at the same time. One after the
    // other, each connection would close at its budget before the next one opened.
    assert_eq!(open.borrow().1, 3, "connections open at once");
    let texts: Vec<String> = problems.iter().map(ToString::to_string).collect();
    assert_eq!(texts.len(), 4, "{texts:#?}");
    for name in ["spec_url", "plugin", "mcp_http", "mcp_stdio"] {
        let text = texts.iter().find(|t| t.contains(&format!("`{name}`"))).unwrap_or_else(|| panic!("{texts:#?}"));
        assert!(text.contains("tool discovery time limit of 2 s"), "{text}");
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
    let problems = registry.discover_tools().await;
    assert_eq!(problems.len(), 1);
    // Refused at once: a service waited on until its budget ran out would be reported as
    // over the time limit.
    let text = problems[0].to_string();
    assert!(text.contains("tool service `down` is unavailable"), "{text}");
    assert!(!text.contains("time limit"), "{text}");
}
