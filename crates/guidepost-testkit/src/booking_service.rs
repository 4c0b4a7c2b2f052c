//! [`BookingService`]: a taxi booking service that counts what it is asked to do, for tests
//! of side effects done exactly once. It speaks two real tool protocols on one router: an
//! HTTP API described by its own OpenAPI document (`GET /openapi.json`, `POST /bookings`)
//! and an MCP server over streamable HTTP (`POST /mcp`, plain JSON-RPC), each offering
//! `book_taxi(pickup)`.
//!
//! Every request is recorded with the idempotency key it carried (the `Idempotency-Key`
//! header, or the MCP request's `_meta` entry `guidepost/idempotency-key`). A booking is made
//! when its request arrives; a service built [`BookingService::keyed`] makes one booking per
//! key and answers a repeat with the first booking, and says so (its OpenAPI operation
//! declares the `Idempotency-Key` header, its MCP tool lists `_meta` with that entry). Calls
//! can be held before they answer ([`BookingService::hold_next`]), so a test can stop the
//! process that sent one while it waits, synchronising on what the service received rather
//! than on time.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};
use tokio::sync::Notify;

/// The MCP `_meta` entry that carries a call's idempotency key.
pub const MCP_KEY: &str = "guidepost/idempotency-key";

/// One request the service received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    /// `openapi` or `mcp`.
    pub protocol: &'static str,
    /// The pickup address asked for.
    pub pickup: String,
    /// The idempotency key it carried.
    pub key: Option<String>,
}

#[derive(Default)]
struct Books {
    received: Vec<Received>,
    /// Bookings made: (booking number, pickup).
    bookings: Vec<(u64, String)>,
    /// Booking number by idempotency key (a keyed service).
    by_key: HashMap<String, u64>,
    /// Calls still to hold before answering.
    to_hold: usize,
    /// Calls held now.
    held: usize,
}

/// The service's state; cheap to share.
pub struct BookingService {
    keyed: bool,
    books: Mutex<Books>,
    changed: Notify,
    release: Notify,
}

impl BookingService {
    /// A service that cannot tell a repeated request from a new one: each request books.
    pub fn unkeyed() -> Arc<Self> {
        Self::new(false)
    }

    /// A service that books once per idempotency key and answers a repeat with that booking.
    pub fn keyed() -> Arc<Self> {
        Self::new(true)
    }

    fn new(keyed: bool) -> Arc<Self> {
        Arc::new(Self { keyed, books: Mutex::default(), changed: Notify::new(), release: Notify::new() })
    }

    fn books(&self) -> std::sync::MutexGuard<'_, Books> {
        self.books.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Holds the next `n` calls (after their booking is made) until [`Self::release`].
    pub fn hold_next(&self, n: usize) {
        self.books().to_hold = n;
    }

    /// Lets every held call answer.
    pub fn release(&self) {
        self.books().to_hold = 0;
        self.release.notify_waiters();
    }

    /// Every request received, in order.
    pub fn received(&self) -> Vec<Received> {
        self.books().received.clone()
    }

    /// Every booking made: (number, pickup).
    pub fn bookings(&self) -> Vec<(u64, String)> {
        self.books().bookings.clone()
    }

    /// How many calls are held now.
    pub fn held(&self) -> usize {
        self.books().held
    }

    /// Waits until `done` holds of the service (checked on every request and release).
    pub async fn until(&self, done: impl Fn(&BookingService) -> bool) {
        loop {
            let changed = self.changed.notified();
            if done(self) {
                return;
            }
            changed.await;
        }
    }

    /// Records a request and makes its booking; the booking's number.
    fn book(&self, protocol: &'static str, pickup: &str, key: Option<&str>) -> u64 {
        let mut books = self.books();
        books.received.push(Received { protocol, pickup: pickup.to_string(), key: key.map(str::to_string) });
        if self.keyed
            && let Some(number) = key.and_then(|k| books.by_key.get(k))
        {
            return *number;
        }
        let number = 1000 + books.bookings.len() as u64;
        books.bookings.push((number, pickup.to_string()));
        if self.keyed
            && let Some(key) = key
        {
            books.by_key.insert(key.to_string(), number);
        }
        number
    }

    /// Books, then waits while calls are to be held.
    async fn serve_booking(&self, protocol: &'static str, pickup: &str, key: Option<&str>) -> u64 {
        let number = self.book(protocol, pickup, key);
        // Waiting for the release starts before the hold is counted, so a release right
        // after it cannot be missed.
        let released = self.release.notified();
        let hold = {
            let mut books = self.books();
            let hold = books.to_hold > 0;
            if hold {
                books.to_hold -= 1;
                books.held += 1;
            }
            hold
        };
        if hold {
            // Counted as held until it answers, or until its caller goes away (the server
            // drops the request's future).
            let _holding = Holding(self);
            self.changed.notify_waiters();
            released.await;
        }
        self.changed.notify_waiters();
        number
    }

    /// The service's OpenAPI document.
    pub fn openapi(&self) -> Value {
        let mut parameters = Vec::new();
        if self.keyed {
            parameters.push(
                json!({"name": "Idempotency-Key", "in": "header", "required": true, "schema": {"type": "string"}}),
            );
        }
        json!({
            "openapi": "3.0.3",
            "info": {"title": "Taxi bookings", "version": "1"},
            "paths": {"/bookings": {"post": {
                "operationId": "book_taxi",
                "summary": "Book a taxi from a pickup address",
                "parameters": parameters,
                "requestBody": {"required": true, "content": {"application/json": {"schema": {
                    "type": "object", "required": ["pickup"],
                    "properties": {"pickup": {"type": "string", "description": "Where to pick the customer up"}}
                }}}}
            }}}
        })
    }

    /// The router: `GET /openapi.json`, `POST /bookings`, `POST /mcp`.
    pub fn router(self: &Arc<Self>) -> axum::Router {
        axum::Router::new()
            .route("/openapi.json", get(|State(s): State<Arc<Self>>| async move { Json(s.openapi()) }))
            .route("/bookings", post(http_booking))
            .route("/mcp", post(mcp).get(|| async { StatusCode::METHOD_NOT_ALLOWED }))
            .with_state(self.clone())
    }
}

/// A held call: no longer held once dropped.
struct Holding<'a>(&'a BookingService);

impl Drop for Holding<'_> {
    fn drop(&mut self) {
        self.0.books().held -= 1;
        self.0.changed.notify_waiters();
    }
}

async fn http_booking(State(service): State<Arc<BookingService>>, headers: HeaderMap, body: Json<Value>) -> Response {
    let key = headers.get("idempotency-key").and_then(|v| v.to_str().ok()).map(str::to_string);
    let Some(pickup) = body.get("pickup").and_then(Value::as_str) else {
        return (StatusCode::UNPROCESSABLE_ENTITY, Json(json!({"error": "pickup is required"}))).into_response();
    };
    let number = service.serve_booking("openapi", pickup, key.as_deref()).await;
    (StatusCode::CREATED, Json(json!({"booking": number, "pickup": pickup, "status": "confirmed"}))).into_response()
}

/// One JSON-RPC message of the streamable HTTP transport.
async fn mcp(State(service): State<Arc<BookingService>>, headers: HeaderMap, body: String) -> Response {
    let Ok(message) = serde_json::from_str::<Value>(&body) else {
        return (StatusCode::BAD_REQUEST, "not JSON").into_response();
    };
    let Some(id) = message.get("id").cloned() else { return StatusCode::ACCEPTED.into_response() };
    let method = message.get("method").and_then(Value::as_str).unwrap_or_default();
    let result = match method {
        "initialize" => json!({
            "protocolVersion": message.pointer("/params/protocolVersion").and_then(Value::as_str).unwrap_or("2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "taxi-bookings", "version": "1.0.0"}
        }),
        "ping" => json!({}),
        "tools/list" => {
            let mut tool = json!({
                "name": "book_taxi",
                "description": "Book a taxi from a pickup address",
                "inputSchema": {"type": "object", "required": ["pickup"], "properties": {"pickup": {"type": "string"}}},
                "annotations": {"destructiveHint": true, "idempotentHint": false}
            });
            if service.keyed {
                tool["_meta"] = json!({MCP_KEY: true});
            }
            json!({"tools": [tool]})
        }
        "tools/call" => {
            let key = message.pointer("/params/_meta").and_then(|m| m.get(MCP_KEY)).and_then(Value::as_str);
            let pickup = message.pointer("/params/arguments/pickup").and_then(Value::as_str).unwrap_or_default();
            let number = service.serve_booking("mcp", pickup, key).await;
            let booking = json!({"booking": number, "pickup": pickup, "status": "confirmed"});
            json!({"content": [{"type": "text", "text": booking.to_string()}], "structuredContent": booking})
        }
        other => {
            let error = json!({"code": -32601, "message": format!("method not found: {other}")});
            return Json(json!({"jsonrpc": "2.0", "id": id, "error": error})).into_response();
        }
    };
    let answer = json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string();
    let mut response = ([(header::CONTENT_TYPE, "application/json")], answer).into_response();
    if method == "initialize" || headers.contains_key("mcp-session-id") {
        response.headers_mut().insert("mcp-session-id", header::HeaderValue::from_static("bookings-session"));
    }
    response
}
