//! Secrets never leave through a tool service's errors: a key in a spec URL's query, a
//! password in a service URL, a credential in a stdio service's environment, and a bearer
//! header a call sends, each echoed back by the service, appear in no error, no call outcome
//! and no log line.

use std::io::Write;
use std::sync::{Arc, Mutex};

use axum::http::{HeaderMap, StatusCode, Uri};
use guidepost_core::tool::{ServiceKind, ToolId, ToolService};
use guidepost_tools::ToolRegistry;
use serde_json::json;

use super::common::{args, ctx, serve};

const QUERY_KEY: &str = "PLANTEDquery0123456789";
const URL_PASSWORD: &str = "PLANTEDpassword0123456789";
const ENV_TOKEN: &str = "PLANTEDenvtoken0123456789";
const BEARER: &str = "PLANTEDbearer0123456789abcdef";

/// Log lines written while the guard lives, on this thread.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A service that rejects everything, echoing the URL and the authorization it got.
async fn echoing_server() -> String {
    let spec = json!({
        "openapi": "3.0.0",
        "info": {"title": "t", "version": "1"},
        "paths": {"/account": {"get": {
            "operationId": "account",
            "parameters": [{"name": "Authorization", "in": "header", "required": true, "schema": {"type": "string"}}],
            "responses": {"200": {"description": "ok"}}
        }}}
    });
    let router = axum::Router::new()
        .route(
            "/good/openapi.json",
            axum::routing::get(move || {
                let spec = spec.clone();
                async move { axum::Json(spec) }
            }),
        )
        .fallback(|uri: Uri, headers: HeaderMap| async move {
            let auth = headers.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
            (
                StatusCode::UNAUTHORIZED,
                format!("{{\"error\": \"bad credentials for {uri}\", \"authorization\": \"{auth}\"}}"),
            )
        });
    format!("http://{}", serve(router).await)
}

fn service(name: &str, kind: ServiceKind, url: Option<String>, spec: Option<String>) -> ToolService {
    ToolService {
        name: name.into(),
        kind,
        url,
        spec,
        command: vec![],
        env: Default::default(),
        timeout_ms: None,
        idempotency_keys: false,
    }
}

#[tokio::test]
async fn planted_credentials_appear_in_no_error_outcome_or_log_line() {
    let log = Captured::default();
    let writer = log.clone();
    let subscriber = tracing_subscriber::fmt().with_writer(move || writer.clone()).with_ansi(false).finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let base = echoing_server().await;
    let down = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let mut stdio = service("stdio", ServiceKind::Mcp, None, None);
    stdio.command = vec![format!("/nonexistent/mcp-{ENV_TOKEN}")];
    stdio.env.insert("SERVICE_TOKEN".into(), ENV_TOKEN.into());
    let services = vec![
        service(
            "keyed_spec",
            ServiceKind::Openapi,
            Some(base.clone()),
            Some(format!("{base}/openapi.json?api_key={QUERY_KEY}")),
        ),
        service("passworded", ServiceKind::Parlant, Some(format!("http://me:{URL_PASSWORD}@127.0.0.1:{down}")), None),
        stdio,
        service("bank", ServiceKind::Openapi, Some(base.clone()), Some(format!("{base}/good/openapi.json"))),
    ];
    let mut registry = ToolRegistry::for_services(&services).unwrap();
    let problems = registry.discover_tools().await;
    let mut said: Vec<String> = problems.iter().map(ToString::to_string).collect();
    assert_eq!(said.len(), 3, "{said:#?}");
    assert!(said.iter().any(|p| p.contains("`keyed_spec`") && p.contains("401")), "{said:#?}");

    // The model passes the bearer header as the declared parameter; the service echoes it.
    let record = registry
        .call(&ToolId::new("bank", "account"), args(json!({"Authorization": format!("Bearer {BEARER}")})), &ctx(), None)
        .await;
    assert!(!record.outcome.is_ok());
    said.push(format!("{:?}", record.outcome));
    said.push(serde_json::to_string(&record.result()).unwrap());
    said.push(String::from_utf8_lossy(&log.0.lock().unwrap()).into_owned());
    let everything = said.join("\n");
    assert!(everything.contains("[redacted]"), "{everything}");
    for planted in [QUERY_KEY, URL_PASSWORD, ENV_TOKEN, BEARER] {
        assert!(!everything.contains(planted), "{planted} leaked:\n{everything}");
    }
}
