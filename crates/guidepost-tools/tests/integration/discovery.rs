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

fn spec_service(name: &str, spec: String) -> ToolService {
    service(name, ServiceKind::Openapi, Some("http://127.0.0.1:9".into()), Some(spec), vec![])
}

/// Each problem the discovery of `services` reported, by service name.
async fn discovery_problems(services: Vec<ToolService>) -> Vec<(String, String)> {
    let names: Vec<String> = services.iter().map(|s| s.name.clone()).collect();
    let mut registry = ToolRegistry::for_services(&services).unwrap().with_discovery_timeout(Duration::from_secs(60));
    let problems = registry.discover_tools().await;
    names
        .into_iter()
        .map(|name| {
            let text = problems
                .iter()
                .map(ToString::to_string)
                .find(|t| t.contains(&format!("`{name}`")))
                .unwrap_or_else(|| panic!("no problem reported for {name}: {problems:?}"));
            (name, text)
        })
        .collect()
}

#[cfg(unix)]
#[tokio::test]
async fn an_openapi_spec_that_is_a_device_or_a_fifo_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("spec.yaml");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let problems = discovery_problems(vec![
        spec_service("zero", "/dev/zero".into()),
        spec_service("pipe", fifo.display().to_string()),
    ])
    .await;
    assert!(problems[0].1.contains("/dev/zero is a character device, not a regular file"), "{:?}", problems[0]);
    assert!(problems[1].1.contains("spec.yaml is a FIFO (named pipe)"), "{:?}", problems[1]);
}

#[tokio::test]
async fn deeply_nested_specs_are_refused_by_their_depth_local_or_remote() {
    let levels = 200_000;
    let deep_json = format!("{{\"openapi\": \"3.0.0\", \"paths\": {}{}}}", "[".repeat(levels), "]".repeat(levels));
    let deep_yaml = format!("openapi: 3.0.0\npaths:\n{}x\n", "  - ".repeat(2_000));
    let remote = deep_json.clone();
    let addr = serve(axum::Router::new().route(
        "/openapi.json",
        axum::routing::get(move || {
            let body = remote.clone();
            async move { body }
        }),
    ))
    .await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("deep.json"), &deep_json).unwrap();
    std::fs::write(dir.path().join("deep.yaml"), &deep_yaml).unwrap();
    let problems = discovery_problems(vec![
        spec_service("remote", format!("http://{addr}/openapi.json")),
        spec_service("local_json", dir.path().join("deep.json").display().to_string()),
        spec_service("local_yaml", dir.path().join("deep.yaml").display().to_string()),
    ])
    .await;
    for (name, text) in problems {
        assert!(text.contains("nesting depth limit"), "{name}: {text}");
        assert!(text.contains("GUIDEPOST_MAX_NESTING_DEPTH"), "{name}: {text}");
    }
}
