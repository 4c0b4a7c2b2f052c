//! The Parlant REST adapter against a fake server speaking the real routes (axum).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use guidepost_sim::agents::AgentUnderTest;
use guidepost_sim::agents::parlant_rest::{ParlantRestAgent, ParlantRestConfig};
use guidepost_sim::{AgentError, JourneyStateReached};
use serde_json::{Value, json};
use tokio::sync::Notify;

#[derive(Default)]
struct Server {
    events: Mutex<Vec<Value>>,
    posted: Mutex<Vec<(String, Value)>>,
    polls: Mutex<Vec<String>>,
    notify: Notify,
    turn_delay: Mutex<Duration>,
}

fn event(offset: usize, kind: &str, source: &str, data: Value) -> Value {
    json!({"id": format!("e{offset}"), "source": source, "kind": kind, "offset": offset, "creation_utc": "2026-01-01T00:00:00Z",
        "trace_id": "t", "correlation_id": "t", "data": data, "metadata": {}, "deleted": false})
}

impl Server {
    fn push(&self, kind: &str, source: &str, data: Value) -> Value {
        let mut events = self.events.lock().unwrap();
        let e = event(events.len(), kind, source, data);
        events.push(e.clone());
        drop(events);
        self.notify.notify_waiters();
        e
    }
}

async fn create_customer(State(s): State<Arc<Server>>, Json(body): Json<Value>) -> (StatusCode, Json<Value>) {
    s.posted.lock().unwrap().push(("/customers".into(), body));
    (
        StatusCode::CREATED,
        Json(json!({"id": "cust-1", "creation_utc": "2026-01-01T00:00:00Z", "name": "x", "metadata": {}, "tags": []})),
    )
}

async fn create_session(State(s): State<Arc<Server>>, Json(body): Json<Value>) -> (StatusCode, Json<Value>) {
    s.posted.lock().unwrap().push(("/sessions".into(), body.clone()));
    (
        StatusCode::CREATED,
        Json(json!({"id": "sess-1", "agent_id": body["agent_id"], "customer_id": body["customer_id"],
        "creation_utc": "2026-01-01T00:00:00Z", "mode": "auto", "consumption_offsets": {}, "metadata": {}})),
    )
}

async fn create_event(State(s): State<Arc<Server>>, Path(session): Path<String>, Json(body): Json<Value>) -> Response {
    if session != "sess-1" {
        return (StatusCode::NOT_FOUND, Json(json!({"detail": "Session not found"}))).into_response();
    }
    s.posted.lock().unwrap().push((format!("/sessions/{session}/events"), body.clone()));
    let source = body["source"].as_str().unwrap_or_default().to_string();
    let created = s.push("message", &source, json!({"message": body["message"], "participant": {"display_name": "x"}}));
    if source == "customer" {
        let server = Arc::clone(&s);
        let text = body["message"].as_str().unwrap_or_default().to_string();
        tokio::spawn(async move {
            let delay = *server.turn_delay.lock().unwrap();
            server.push("status", "ai_agent", json!({"status": "acknowledged", "data": {}}));
            tokio::time::sleep(delay).await;
            if text.contains("explode") {
                server.push("status", "ai_agent", json!({"status": "error", "data": {"exception": "engine exploded"}}));
                return;
            }
            server.push("tool", "ai_agent", json!({"tool_calls": [{"tool_id": "fixtures:book_taxi",
                "arguments": {"pickup": "Oak St"}, "result": {"data": {"booking_id": "TX-1"}, "metadata": {}, "control": {}}}]}));
            server.push(
                "message",
                "ai_agent",
                json!({"message": "Let me check", "participant": {"display_name": "Rita"}, "tags": ["__preamble__"]}),
            );
            server.push("status", "ai_agent", json!({"status": "ready", "data": {"stage": "Articulating"}}));
            server.push(
                "message",
                "ai_agent",
                json!({"message": format!("Booked for {text}"), "participant": {"display_name": "Rita"}}),
            );
            server.push(
                "status",
                "ai_agent",
                json!({"status": "ready", "data": {"stage": "completed",
                "matched_guidelines": [{"id": "correction"}, {"id": "journey_node:book_taxi.dropoff:edge_002"}],
                "matched_journeys": [{"id": "book_taxi"}],
                "matched_journey_states": [{"id": "journey_node:book_taxi.dropoff:edge_002"}]}}),
            );
        });
    }
    (StatusCode::CREATED, Json(created)).into_response()
}

async fn list_events(
    State(s): State<Arc<Server>>,
    Path(_session): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let min: usize = q.get("min_offset").and_then(|v| v.parse().ok()).unwrap_or(0);
    let wait: u64 = q.get("wait_for_data").and_then(|v| v.parse().ok()).unwrap_or(60);
    s.polls.lock().unwrap().push(format!("min_offset={min}&wait_for_data={wait}"));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(wait);
    loop {
        let notified = s.notify.notified();
        let found: Vec<Value> = s.events.lock().unwrap().iter().skip(min).cloned().collect();
        if !found.is_empty() || wait == 0 {
            return Json(Value::Array(found)).into_response();
        }
        if tokio::time::timeout_at(deadline, notified).await.is_err() {
            return (StatusCode::GATEWAY_TIMEOUT, Json(json!({"detail": "Request timed out"}))).into_response();
        }
    }
}

async fn serve() -> (String, Arc<Server>) {
    let state = Arc::new(Server::default());
    let app = Router::new()
        .route("/customers", post(create_customer))
        .route("/sessions", post(create_session))
        .route("/sessions/{id}/events", post(create_event).get(list_events))
        .with_state(Arc::clone(&state));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), state)
}

#[tokio::test]
async fn drives_a_session_over_the_parlant_routes() {
    let (url, server) = serve().await;
    *server.turn_delay.lock().unwrap() = Duration::from_millis(1200);
    let mut config = ParlantRestConfig::new(format!("{url}/"), "agent-1");
    config.wait_for_data = 1;
    let mut agent = ParlantRestAgent::new(config);
    agent.start("conv-1").await.unwrap();
    assert_eq!(agent.session_id(), Some("sess-1"));

    let turn = agent.reply("Oak St").await.unwrap();
    assert_eq!(turn.messages, ["Let me check", "Booked for Oak St"]);
    assert_eq!(turn.tool_calls[0].name, "fixtures:book_taxi");
    assert_eq!(turn.tool_calls[0].arguments, json!({"pickup": "Oak St"}));
    assert_eq!(turn.tool_calls[0].result, json!({"booking_id": "TX-1"}));
    let seen = turn.observations.unwrap();
    assert_eq!(seen.guidelines_matched, ["correction"]);
    assert_eq!(seen.journeys_entered, ["book_taxi"]);
    assert_eq!(
        seen.journey_states,
        [JourneyStateReached { journey: "book_taxi".into(), state: "dropoff".into(), edge: Some("edge_002".into()) }]
    );
    assert!(seen.tool_was_called("book_taxi"));
    // The first poll waited past the server's 1 s long-poll window: a 504, then polling again.
    assert!(server.polls.lock().unwrap().iter().filter(|p| p.ends_with("wait_for_data=1")).count() >= 2);

    *server.turn_delay.lock().unwrap() = Duration::from_millis(10);
    agent.inject_agent_message("By the way, we have a new app.").await.unwrap();
    let second = agent.reply("the station").await.unwrap();
    assert_eq!(second.messages, ["Let me check", "Booked for the station"], "earlier turns are not repeated");

    let posted = server.posted.lock().unwrap().clone();
    assert_eq!(posted[0].1["name"], "Simulated customer conv-1");
    assert_eq!(posted[1].1, json!({"agent_id": "agent-1", "customer_id": "cust-1", "title": "conv-1"}));
    assert_eq!(posted[2].1, json!({"kind": "message", "source": "customer", "message": "Oak St"}));
    assert_eq!(posted[3].1["source"], "human_agent_on_behalf_of_ai_agent");

    let err = agent.reply("explode now").await.unwrap_err();
    assert_eq!(err, AgentError::Reported("engine exploded".into()));
}
