//! `/healthz` and `/metrics`.

use std::time::Instant;

use axum::Json;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::state::State;

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
