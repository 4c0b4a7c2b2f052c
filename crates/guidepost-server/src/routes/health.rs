//! `/healthz`, `/metrics` and the operation that serves `/openapi.json`.

use std::time::Instant;

use axum::Json;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::routes::operation::{self, Operation, Unavailable};
use crate::state::State;

/// What this resource serves, each operation declared once (see [`crate::routes::operation`]).
pub fn operations() -> Vec<Operation> {
    vec![
        Operation::get("/healthz", healthz, "health_check_healthz_get", "Whether the server and its database answer")
            .public()
            .content(report)
            .unavailable(Unavailable::SameBody),
        Operation::get("/metrics", metrics, "metrics", "Prometheus metrics").content(operation::text).extension(),
        Operation::get("/openapi.json", crate::openapi::serve, "openapi", "This document")
            .public()
            .content(operation::any_object)
            .extension(),
    ]
}

/// The health report's content, the same on 200 and 503.
fn report() -> Value {
    let status = json!({"type": "string", "enum": ["healthy", "unhealthy"]});
    json!({"application/json": {"schema": {
        "type": "object",
        "properties": {"status": status, "checks": {"type": "object"}},
        "required": ["status", "checks"]
    }}})
}

/// `GET /healthz`: the event loop's responsiveness and the database's, in the reference's
/// vocabulary (`healthy`/`unhealthy`); 503 when the database does not answer or cannot be
/// written (a SQLite file removed, replaced or made read-only while the server runs).
pub async fn healthz(state: State) -> Response {
    let started = Instant::now();
    tokio::task::yield_now().await;
    let loop_ms = started.elapsed().as_secs_f64() * 1000.0;
    let db_started = Instant::now();
    let db = state.store.health().await;
    let db_ms = db_started.elapsed().as_secs_f64() * 1000.0;
    let healthy = db.is_ok();
    let body = json!({
        "status": if healthy && loop_ms < 500.0 { "healthy" } else { "unhealthy" },
        "checks": {
            "event_loop": {"status": if loop_ms < 500.0 { "healthy" } else { "unhealthy" }, "latency_ms": loop_ms},
            "database": {
                "status": if healthy { "healthy" } else { "unhealthy" },
                "latency_ms": db_ms,
                "backend": state.store.backend().name(),
                "error": db.err().map(|e| e.to_string()),
            }
        }
    });
    let status = if healthy { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    (status, Json(body)).into_response()
}

/// `GET /metrics`: Prometheus text.
pub async fn metrics(state: State) -> Response {
    let text = state.metrics.render(state.store.hub().watched());
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], text).into_response()
}
