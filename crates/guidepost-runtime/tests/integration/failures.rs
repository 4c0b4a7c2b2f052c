//! Failures never pass for success, and customers see only what they may: a tool service that
//! answers an HTTP error status of its own, a result over the size limit or an unreachable
//! service makes the turn degraded and the reply say the lookup could not be done; refused
//! drafts, provider error texts and tool-service credentials stay out of the customer's
//! events (the turn's trace has what happened, redacted).

use std::sync::Arc;

use axum::Json;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;
use guidepost_core::EventKind;
use guidepost_llm::providers::scripted::ScriptedModel;
use guidepost_llm::{LlmError, TaskKind};
use guidepost_runtime::events::{message_text, status_of};
use guidepost_runtime::{MemorySession, Stage, TurnStatus};
use guidepost_tools::registry::ToolRegistry;
use serde_json::json;

use crate::support::*;

const PASSWORD: &str = "s3cr3t-pass-0123";

/// An order service: `/orders/{id}` answers with the status the id names (`500`, `503`,
/// `401`), 2 MiB for `huge`, and an order that echoes the authorization it was sent for `ok`.
async fn order_service() -> String {
    let doc = json!({
        "openapi": "3.0.3",
        "info": {"title": "Orders", "version": "1"},
        "paths": {"/orders/{id}": {"get": {"operationId": "track_order", "summary": "Where an order is",
            "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}]}}}
    });
    let router = axum::Router::new().route("/openapi.json", get(move || std::future::ready(Json(doc.clone())))).route(
        "/orders/{id}",
        get(|axum::extract::Path(id): axum::extract::Path<String>, headers: HeaderMap| async move {
            let auth = headers.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
            match id.as_str() {
                "huge" => (StatusCode::OK, Json(json!({"rows": "x".repeat(2 << 20)}))),
                "ok" => (StatusCode::OK, Json(json!({"status": "shipped", "seen_authorization": auth}))),
                code => {
                    let status = code.parse().ok().and_then(|c| StatusCode::from_u16(c).ok());
                    (status.unwrap_or(StatusCode::BAD_REQUEST), Json(json!({"error": "order backend down"})))
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    format!("127.0.0.1:{}", addr.port())
}

fn shop(service: &str) -> String {
    format!(
        r#"
agent: {{name: Otto}}
guidelines:
  - id: track
    condition: The customer asks where their order is
    action: Look the order up and tell them where it is
    tools: [orders:track_order]
services:
  - name: orders
    kind: openapi
    spec: http://{service}/openapi.json
    url: http://me:{PASSWORD}@{service}
"#
    )
}

fn orders_oracle() -> Oracle {
    Arc::new(|c: &str, last: &str, _: &str| c.contains("order") && last.contains("order"))
}

/// A model that asks for the order the customer named and replies as if all were well,
/// unless told the lookup failed.
fn optimistic() -> Arc<ScriptedModel> {
    let model = ScriptedModel::new().when_task(TaskKind::ToolInference).reply_with(|r| {
        let last = last_customer(&prompt(r));
        let id = last.rsplit(' ').next().unwrap_or_default().trim_end_matches('?').to_string();
        Ok(json!({"tools": [{"tool": "track_order", "rationale": "asked", "decision": "needs_to_run", "calls": [{"arguments": {"id": id}}]}]}))
    });
    Arc::new(with_reply(with_matching(model, orders_oracle()), |p| {
        if p.contains("hides_failed_lookup") || p.contains("failed this turn") {
            "Sorry, I could not look your order up right now. Please try again in a few minutes.".into()
        } else {
            "Everything looks fine with your order!".into()
        }
    }))
}

async fn registry_for(definition: &guidepost_core::AgentDefinition) -> ToolRegistry {
    let mut registry = ToolRegistry::from_definition(definition).unwrap();
    registry.resolve_tools().await.unwrap();
    registry
}

/// Everything the customer's events carry, as text.
fn customer_view(session: &MemorySession) -> String {
    session.events().iter().map(|e| e.data.to_string()).collect::<Vec<_>>().join("\n")
}

#[tokio::test]
async fn a_failing_tool_service_degrades_the_turn_and_the_reply_says_so() {
    let service = order_service().await;
    let definition = inline(&shop(&service));
    let registry = registry_for(&definition).await;
    let rt = runtime(definition, optimistic(), registry);
    for (order, what) in [("500", "HTTP 500"), ("503", "HTTP 503"), ("401", "HTTP 401"), ("huge", "tool result size")] {
        let session = MemorySession::new();
        let outcome = turn(&rt, &session, &Default::default(), &format!("Where is my order {order}")).await;
        assert_eq!(outcome.status, TurnStatus::Degraded, "{order}");
        let lost = &outcome.trace.degraded[0];
        assert_eq!((lost.stage, lost.failed), (Stage::ToolCalls, 1), "{order}");
        assert!(lost.error.contains(what), "{order}: {}", lost.error);
        assert_eq!(
            outcome.messages,
            ["Sorry, I could not look your order up right now. Please try again in a few minutes."],
            "{order}: the reply may not pass the failure off as an answer"
        );
        let refused = &outcome.trace.composition.reply_checks[0][0];
        assert_eq!(refused.check.name(), "hides_failed_lookup", "{order}");

        // The customer's events say a lookup was lost and which checks refused a reply, but
        // neither the refused text nor the service's error.
        let events = session.events();
        let message = events.iter().find(|e| e.kind == EventKind::Message && e.data["participant"]["id"].is_string());
        let message = message.unwrap();
        assert_eq!(message.data["degraded"][0]["stage"], "tool_calls", "{}", message.data);
        assert_eq!(message.data["reply_checks"]["problems"][0][0], json!({"check": "hides_failed_lookup"}));
        let view = customer_view(&session);
        for hidden in ["Everything looks fine", "\"draft\"", "first error", "\"error\":"] {
            assert!(!view.contains(hidden), "{order}: `{hidden}` reached the customer: {view}");
        }
        assert!(!view.contains(PASSWORD), "{order}: the service's password leaked: {view}");
    }

    // Unreachable: the same agent, its service gone.
    let gone = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("127.0.0.1:{}", listener.local_addr().unwrap().port())
    };
    let mut definition = inline(&shop(&service));
    definition.services[0].url = Some(format!("http://me:{PASSWORD}@{gone}"));
    let registry = registry_for(&definition).await;
    let rt = runtime(definition, optimistic(), registry);
    let session = MemorySession::new();
    let outcome = turn(&rt, &session, &Default::default(), "Where is my order ok").await;
    assert_eq!(outcome.status, TurnStatus::Degraded);
    assert!(outcome.messages[0].starts_with("Sorry, I could not"), "{:?}", outcome.messages);
    let trace = serde_json::to_string(&outcome.trace).unwrap();
    assert!(!trace.contains(PASSWORD), "the trace carries no credential: {trace}");
}

#[tokio::test]
async fn a_working_service_leaves_the_turn_normal_and_its_credentials_out_of_the_tool_event() {
    let service = order_service().await;
    let definition = inline(&shop(&service));
    let registry = registry_for(&definition).await;
    let rt = runtime(definition, optimistic(), registry);
    let session = MemorySession::new();
    let outcome = turn(&rt, &session, &Default::default(), "Where is my order ok").await;
    assert_eq!(outcome.status, TurnStatus::Completed);
    assert_eq!(outcome.messages, ["Everything looks fine with your order!"]);
    let tool = session.events().into_iter().find(|e| e.kind == EventKind::Tool).unwrap();
    let result = &tool.data["tool_calls"][0]["result"]["data"];
    assert_eq!(result["status"], "shipped");
    // The service echoed the Basic authorization built from its URL's password.
    assert_eq!(result["seen_authorization"], "Basic [redacted]", "{result}");
    assert!(!customer_view(&session).contains(PASSWORD));
}

#[tokio::test]
async fn a_failed_turn_tells_the_customer_in_the_agents_language_and_keeps_the_error_for_the_trace() {
    let key = "sk-proj-PLANTEDkey0123456789abcdefXYZ";
    let unauthorized = LlmError::Http {
        status: 401,
        body: format!("Incorrect API key provided: {key}; as base64 {}", {
            use base64::Engine as _;
            base64::engine::general_purpose::STANDARD.encode(key)
        }),
        retry_after: None,
    };
    let model = ScriptedModel::new().when_task(TaskKind::Matching).fail(unauthorized);
    let model = Arc::new(with_reply(model, |_| "unused".into()));
    let definition = inline(
        "agent: {name: 小天, language: zh}\nguidelines:\n  - {id: greet, condition: 用户在打招呼, action: 问好}\n",
    );
    let rt = runtime(definition, model, ToolRegistry::default());
    let session = MemorySession::new();
    let outcome = turn(&rt, &session, &Default::default(), "你好").await;
    assert_eq!(outcome.status, TurnStatus::Failed);
    let events = session.events();
    let error = events.iter().find(|e| status_of(e).is_some_and(|(s, _)| s == "error")).unwrap();
    let exception = error.data["data"]["exception"].as_str().unwrap();
    assert_eq!(exception, guidepost_core::reply_check::failure_notice(Some("zh")));
    assert!(exception.starts_with("抱歉"), "{exception}");
    let view = customer_view(&session);
    assert!(!view.contains("401") && !view.contains("Incorrect API key"), "{view}");
    // The trace keeps what failed, without the key in any form.
    let trace_error = outcome.trace.error.clone().unwrap();
    assert!(trace_error.contains("401"), "{trace_error}");
    assert!(!trace_error.contains("PLANTEDkey"), "{trace_error}");
    assert!(!trace_error.contains("UExBTlRFRGtleTAxMjM0NTY3ODlh"), "the base64 form leaked: {trace_error}");
    assert!(events.iter().all(|e| message_text(e).is_none() || e.source == guidepost_core::EventSource::Customer));
}
