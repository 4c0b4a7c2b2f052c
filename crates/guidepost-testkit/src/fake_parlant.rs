//! A fake Parlant 3.3.2 server: the routes, status codes, JSON fields and event sequence a
//! client of Parlant sees, with any agent behind it ([`ParlantBackend`]: scripted turns, or a
//! Guidepost engine).
//!
//! What it speaks, as Parlant 3.3.2 does:
//!
//! - `POST /customers` → 201, `GET /customers` (the `guest` customer first),
//!   `DELETE /customers/{id}` → 204 (404 `Item '<id>' not found`; deleting `guest` is a plain
//!   text 500);
//! - `GET /agents`, `GET /agents/{id}`;
//! - `POST /sessions` → 201 (an unknown agent is a 404), `GET /sessions`, `GET /sessions/{id}`,
//!   `DELETE /sessions/{id}` → 204; an unknown session is a 404
//!   `Session not found (id='<id>')`;
//! - `POST /sessions/{id}/events`: a customer message (trace id `<main>`) starts a turn; a
//!   message from `human_agent_on_behalf_of_ai_agent` is stored without processing;
//! - `GET /sessions/{id}/events?min_offset=&wait_for_data=&kinds=&source=&trace_id=`: a plain
//!   array as soon as a matching event exists; after `wait_for_data` seconds (default 60)
//!   without one, 504 `{"detail": "Request timed out"}`; `wait_for_data=0` answers at once.
//!
//! A turn, under one 32-hex trace id: `acknowledged`; then, once the agent has acted,
//! `typing` and the preamble message (tagged `__preamble__`) when there is one, `ready {}`,
//! `processing {stage: "Interpreting"}`; per group of tool calls `processing
//! {stage: "Considering tools"}` and one `tool` event (source `system`) per call; per message
//! `typing` and a message event (`data.message`, `data.participant`); last the `ready` status
//! with `stage: "completed"`, `matched_guidelines` (journey nodes as
//! `journey_node:<node>[:<edge>]`), `matched_journeys` and `matched_journey_states`
//! (`[{id: <node>}]`). A failed turn ends with that `ready` and then an `error` status, in
//! Parlant's order. Node ids are the state ids ([`NodeIds::StateIds`], an agent built with
//! explicit state ids) or opaque nanoids ([`NodeIds::Opaque`]); `end` stays `end`.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{Value, json};
use tokio::sync::Notify;

/// Something the agent did in a turn, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentAct {
    /// A preamble message (tagged `__preamble__`).
    Preamble(String),
    /// A message to the customer.
    Message(String),
    /// Tool calls, as Parlant's `tool` event entries: `{tool_id, arguments, result}` with
    /// `result` a ToolResult (`{data, metadata, control, canned_responses, …}`).
    ToolCalls(Vec<Value>),
}

/// A journey state the agent's turn went through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeVisit {
    /// The journey.
    pub journey: String,
    /// The state.
    pub state: String,
    /// The transition that entered it, when known.
    pub edge: Option<String>,
}

/// What the agent did in one turn.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FakeTurn {
    /// How long the agent takes before it acts.
    pub delay: Duration,
    /// Preambles, tool calls and messages, in order.
    pub acts: Vec<AgentAct>,
    /// Guidelines matched (ids), journey nodes apart.
    pub matched_guidelines: Vec<String>,
    /// Journeys active in the turn.
    pub journeys: Vec<String>,
    /// Journey states the turn went through, in order.
    pub journey_states: Vec<NodeVisit>,
    /// When set, the turn fails with this exception.
    pub error: Option<String>,
}

/// The session a turn belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionInfo {
    /// The session id.
    pub id: String,
    /// Its title (the simulator gives the conversation id).
    pub title: Option<String>,
    /// Its customer.
    pub customer_id: String,
}

/// A boxed future, as [`ParlantBackend`] returns.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// The agent behind the fake server.
pub trait ParlantBackend: Send + Sync + 'static {
    /// Answers `message`, the customer's latest message in `session`.
    fn turn(&self, session: SessionInfo, message: String) -> BoxFuture<FakeTurn>;

    /// A line posted as the agent (`human_agent_on_behalf_of_ai_agent`): it joins the
    /// conversation's history without being processed.
    fn agent_line(&self, session: SessionInfo, text: String) -> BoxFuture<()> {
        let _ = (session, text);
        Box::pin(async {})
    }
}

/// Plays scripted turns in order (a failed turn once they run out).
#[derive(Debug, Default)]
pub struct ScriptedBackend {
    turns: Mutex<VecDeque<FakeTurn>>,
}

impl ScriptedBackend {
    /// A backend playing `turns`.
    pub fn new(turns: impl IntoIterator<Item = FakeTurn>) -> Arc<Self> {
        Arc::new(Self { turns: Mutex::new(turns.into_iter().collect()) })
    }
}

impl ParlantBackend for ScriptedBackend {
    fn turn(&self, _session: SessionInfo, _message: String) -> BoxFuture<FakeTurn> {
        let next = self.turns.lock().unwrap_or_else(PoisonError::into_inner).pop_front();
        let turn =
            next.unwrap_or_else(|| FakeTurn { error: Some("no scripted turn left".into()), ..FakeTurn::default() });
        Box::pin(async move { turn })
    }
}

/// How journey node ids look.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum NodeIds {
    /// The state ids themselves (an agent built with explicit state ids).
    #[default]
    StateIds,
    /// Opaque 10-character ids, as Parlant generates.
    Opaque,
}

/// The agent the server hosts.
#[derive(Debug, Clone)]
pub struct FakeParlantOptions {
    /// The agent's id.
    pub agent_id: String,
    /// The agent's name.
    pub agent_name: String,
    /// How node ids look.
    pub node_ids: NodeIds,
}

/// A request the server received.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    /// `GET`, `POST` …
    pub method: String,
    /// Path and query.
    pub uri: String,
    /// The JSON body (`null` without one).
    pub body: Value,
}

struct Session {
    info: SessionInfo,
    agent_id: String,
    creation_utc: String,
    busy: Arc<tokio::sync::Mutex<()>>,
}

#[derive(Default)]
struct Store {
    customers: Vec<(String, String, String)>,
    sessions: Vec<Session>,
    events: HashMap<String, Vec<Value>>,
    requests: Vec<RecordedRequest>,
    counter: u64,
}

struct Shared {
    store: Mutex<Store>,
    notify: Notify,
    backend: Arc<dyn ParlantBackend>,
    options: FakeParlantOptions,
}

impl Shared {
    fn store(&self) -> std::sync::MutexGuard<'_, Store> {
        self.store.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A running fake server.
pub struct FakeParlant {
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    shared: Arc<Shared>,
}

impl FakeParlant {
    /// Serves `backend` on a free loopback port.
    pub async fn start(backend: Arc<dyn ParlantBackend>, options: FakeParlantOptions) -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        let shared = Arc::new(Shared { store: Mutex::default(), notify: Notify::new(), backend, options });
        let app = router(Arc::clone(&shared));
        tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::error!(error = %e, "the fake Parlant server stopped");
            }
        });
        Ok(Self { url, shared })
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.store().requests.clone()
    }

    /// Ids of the sessions that exist.
    pub fn sessions(&self) -> Vec<String> {
        self.shared.store().sessions.iter().map(|s| s.info.id.clone()).collect()
    }

    /// Ids of the customers that exist (`guest` left out).
    pub fn customers(&self) -> Vec<String> {
        self.shared.store().customers.iter().map(|c| c.0.clone()).collect()
    }
}

/// Serves `backend` on `127.0.0.1:port` (0 for any) and prints `listening <port>` once bound.
pub async fn serve(port: u16, backend: Arc<dyn ParlantBackend>, options: FakeParlantOptions) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    println!("listening {}", listener.local_addr()?.port());
    let shared = Arc::new(Shared { store: Mutex::default(), notify: Notify::new(), backend, options });
    axum::serve(listener, router(shared)).await
}

fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/agents", get(list_agents))
        .route("/agents/{id}", get(read_agent))
        .route("/customers", get(list_customers).post(create_customer))
        .route("/customers/{id}", axum::routing::delete(delete_customer))
        .route("/sessions", get(list_sessions).post(create_session))
        .route("/sessions/{id}", get(read_session).delete(delete_session))
        .route("/sessions/{id}/events", get(list_events).post(create_event))
        .layer(axum::middleware::from_fn_with_state(Arc::clone(&shared), record))
        .with_state(shared)
}

async fn record(
    State(shared): State<Arc<Shared>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let (parts, body) = request.into_parts();
    let bytes = axum::body::to_bytes(body, 1 << 20).await.unwrap_or_default();
    let recorded = RecordedRequest {
        method: parts.method.to_string(),
        uri: parts.uri.to_string(),
        body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    };
    shared.store().requests.push(recorded);
    next.run(axum::extract::Request::from_parts(parts, axum::body::Body::from(bytes))).await
}

fn now() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

/// A deterministic 10-character id over `[0-9A-Za-z]`, like Parlant's.
fn nanoid(seed: &str) -> String {
    const ALPHABET: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut n: u64 = 0xcbf2_9ce4_8422_2325;
    for b in seed.bytes() {
        n = (n ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    (0..10)
        .map(|_| {
            let c = ALPHABET[usize::try_from(n % 62).unwrap_or(0)];
            n = (n / 62) ^ n.rotate_left(17);
            char::from(c)
        })
        .collect()
}

fn next_id(store: &mut Store, kind: &str) -> String {
    store.counter += 1;
    nanoid(&format!("{kind}-{}", store.counter))
}

fn detail(status: StatusCode, text: String) -> Response {
    (status, Json(json!({"detail": text}))).into_response()
}

fn no_content() -> Response {
    (StatusCode::NO_CONTENT, [(header::CONTENT_TYPE, "application/json")]).into_response()
}

fn agent_json(options: &FakeParlantOptions) -> Value {
    json!({"id": options.agent_id, "name": options.agent_name, "description": null, "max_engine_iterations": 3,
        "composition_mode": "fluid", "message_output_mode": "block", "tags": []})
}

async fn list_agents(State(s): State<Arc<Shared>>) -> Response {
    Json(json!([agent_json(&s.options)])).into_response()
}

async fn read_agent(State(s): State<Arc<Shared>>, Path(id): Path<String>) -> Response {
    if id != s.options.agent_id {
        return detail(StatusCode::NOT_FOUND, format!("Item '{id}' not found"));
    }
    Json(agent_json(&s.options)).into_response()
}

fn customer_json(id: &str, created: &str, name: &str) -> Value {
    json!({"id": id, "creation_utc": created, "name": name, "metadata": {}, "tags": []})
}

async fn create_customer(State(s): State<Arc<Shared>>, Json(body): Json<Value>) -> Response {
    let Some(name) = body.get("name").and_then(Value::as_str).map(String::from) else {
        return (
            StatusCode::UNPROCESSABLE_ENTITY,
            Json(json!({"detail": [{"type": "missing", "loc": ["body", "name"], "msg": "Field required", "input": body}]})),
        )
            .into_response();
    };
    let mut store = s.store();
    let id = next_id(&mut store, "customer");
    let created = now();
    store.customers.push((id.clone(), created.clone(), name.clone()));
    (StatusCode::CREATED, Json(customer_json(&id, &created, &name))).into_response()
}

async fn list_customers(State(s): State<Arc<Shared>>) -> Response {
    let store = s.store();
    let mut all = vec![customer_json("guest", &now(), "Guest")];
    all.extend(store.customers.iter().map(|(id, created, name)| customer_json(id, created, name)));
    Json(Value::Array(all)).into_response()
}

async fn delete_customer(State(s): State<Arc<Shared>>, Path(id): Path<String>) -> Response {
    if id == "guest" {
        return (StatusCode::INTERNAL_SERVER_ERROR, "Internal Server Error").into_response();
    }
    let mut store = s.store();
    let before = store.customers.len();
    store.customers.retain(|c| c.0 != id);
    if store.customers.len() == before {
        return detail(StatusCode::NOT_FOUND, format!("Item '{id}' not found"));
    }
    no_content()
}

fn session_json(session: &Session) -> Value {
    json!({"id": session.info.id, "agent_id": session.agent_id, "customer_id": session.info.customer_id,
        "creation_utc": session.creation_utc, "title": session.info.title, "mode": "auto",
        "consumption_offsets": {"client": 0}, "metadata": {}, "labels": []})
}

async fn create_session(State(s): State<Arc<Shared>>, Json(body): Json<Value>) -> Response {
    let agent_id = body.get("agent_id").and_then(Value::as_str).unwrap_or_default().to_string();
    if agent_id != s.options.agent_id {
        return detail(StatusCode::NOT_FOUND, format!("Item '{agent_id}' not found"));
    }
    let customer_id = body.get("customer_id").and_then(Value::as_str).unwrap_or("guest").to_string();
    let title = body.get("title").and_then(Value::as_str).map(String::from);
    let mut store = s.store();
    let id = next_id(&mut store, "session");
    let session = Session {
        info: SessionInfo { id: id.clone(), title, customer_id },
        agent_id,
        creation_utc: now(),
        busy: Arc::default(),
    };
    let out = session_json(&session);
    store.sessions.push(session);
    store.events.insert(id, Vec::new());
    (StatusCode::CREATED, Json(out)).into_response()
}

async fn list_sessions(State(s): State<Arc<Shared>>) -> Response {
    Json(Value::Array(s.store().sessions.iter().map(session_json).collect())).into_response()
}

fn session_not_found(id: &str) -> Response {
    detail(StatusCode::NOT_FOUND, format!("Session not found (id='{id}')"))
}

async fn read_session(State(s): State<Arc<Shared>>, Path(id): Path<String>) -> Response {
    match s.store().sessions.iter().find(|x| x.info.id == id) {
        Some(session) => Json(session_json(session)).into_response(),
        None => session_not_found(&id),
    }
}

async fn delete_session(State(s): State<Arc<Shared>>, Path(id): Path<String>) -> Response {
    let mut store = s.store();
    let before = store.sessions.len();
    store.sessions.retain(|x| x.info.id != id);
    if store.sessions.len() == before {
        return session_not_found(&id);
    }
    store.events.remove(&id);
    no_content()
}

/// Appends an event to the session's log (nothing when the session is gone).
fn append(shared: &Shared, session: &str, source: &str, kind: &str, trace: &str, data: Value) -> Option<Value> {
    let mut store = shared.store();
    let counter = store.counter + 1;
    store.counter = counter;
    let events = store.events.get_mut(session)?;
    let event = json!({"id": nanoid(&format!("event-{counter}")), "source": source, "kind": kind,
        "offset": events.len(), "creation_utc": now(), "trace_id": trace, "correlation_id": trace,
        "data": data, "metadata": {}, "deleted": false});
    events.push(event.clone());
    drop(store);
    shared.notify.notify_waiters();
    Some(event)
}

async fn create_event(State(s): State<Arc<Shared>>, Path(id): Path<String>, Json(body): Json<Value>) -> Response {
    let found = s.store().sessions.iter().find(|x| x.info.id == id).map(|x| (x.info.clone(), Arc::clone(&x.busy)));
    let Some((info, busy)) = found else { return session_not_found(&id) };
    let kind = body.get("kind").and_then(Value::as_str).unwrap_or_default();
    let source = body.get("source").and_then(Value::as_str).unwrap_or_default().to_string();
    let Some(message) = body.get("message").and_then(Value::as_str).map(String::from) else {
        return detail(StatusCode::UNPROCESSABLE_ENTITY, "Missing 'message' field for event".into());
    };
    if kind != "message" {
        return detail(StatusCode::UNPROCESSABLE_ENTITY, "Only message events are supported by this fake".into());
    }
    let agent = json!({"id": s.options.agent_id, "display_name": s.options.agent_name});
    let created = match source.as_str() {
        "customer" => {
            let name = s.store().customers.iter().find(|c| c.0 == info.customer_id).map(|c| c.2.clone());
            let participant = json!({"id": info.customer_id, "display_name": name.unwrap_or_else(|| "Guest".into())});
            let data = json!({"message": message, "participant": participant, "flagged": false, "tags": []});
            let event = append(&s, &id, "customer", "message", "<main>", data);
            tokio::spawn(run_turn(Arc::clone(&s), info, busy, message));
            event
        }
        "human_agent_on_behalf_of_ai_agent" => {
            s.backend.agent_line(info, message.clone()).await;
            append(&s, &id, &source, "message", "<main>", json!({"message": message, "participant": agent}))
        }
        _ => {
            return detail(
                StatusCode::UNPROCESSABLE_ENTITY,
                "Only \"customer\", \"human_agent\", and \"human_agent_on_behalf_of_ai_agent\" sources are supported for direct posting.".into(),
            );
        }
    };
    match created {
        Some(event) => (StatusCode::CREATED, Json(event)).into_response(),
        None => session_not_found(&id),
    }
}

fn node_id(options: &FakeParlantOptions, journey: &str, state: &str) -> String {
    match options.node_ids {
        NodeIds::StateIds => state.to_string(),
        NodeIds::Opaque if state == "end" => state.to_string(),
        NodeIds::Opaque => nanoid(&format!("node-{journey}-{state}")),
    }
}

async fn run_turn(s: Arc<Shared>, info: SessionInfo, busy: Arc<tokio::sync::Mutex<()>>, message: String) {
    let _one_at_a_time = busy.lock().await;
    let session = info.id.clone();
    let trace = {
        let mut store = s.store();
        store.counter += 1;
        format!("{:016x}{:016x}", store.counter.wrapping_mul(0x9e37_79b9_7f4a_7c15), store.counter)
    };
    let status = |status: &str, data: Value| json!({"status": status, "data": data});
    let emit = |source: &str, kind: &str, data: Value| append(&s, &session, source, kind, &trace, data);
    if emit("ai_agent", "status", status("acknowledged", json!({}))).is_none() {
        return;
    }
    let turn = s.backend.turn(info, message).await;
    tokio::time::sleep(turn.delay).await;
    let participant = json!({"id": s.options.agent_id, "display_name": s.options.agent_name});
    let mut acts = turn.acts.iter().peekable();
    if let Some(AgentAct::Preamble(text)) = acts.peek() {
        emit("ai_agent", "status", status("typing", json!({})));
        emit("ai_agent", "message", json!({"message": text, "participant": participant, "tags": ["__preamble__"]}));
        acts.next();
    }
    emit("ai_agent", "status", status("ready", json!({})));
    emit("ai_agent", "status", status("processing", json!({"stage": "Interpreting"})));
    for act in acts {
        match act {
            AgentAct::ToolCalls(calls) => {
                emit("ai_agent", "status", status("processing", json!({"stage": "Considering tools"})));
                for call in calls {
                    emit("system", "tool", json!({"tool_calls": [call]}));
                }
            }
            AgentAct::Message(text) | AgentAct::Preamble(text) => {
                let mut data = json!({"message": text, "participant": participant});
                if matches!(act, AgentAct::Preamble(_)) {
                    data["tags"] = json!(["__preamble__"]);
                }
                emit("ai_agent", "status", status("typing", json!({})));
                emit("ai_agent", "message", data);
            }
        }
    }
    let mut guidelines: Vec<Value> = turn.matched_guidelines.iter().map(|g| json!({"id": g})).collect();
    let mut states = Vec::new();
    for visit in &turn.journey_states {
        let node = node_id(&s.options, &visit.journey, &visit.state);
        let edge = visit.edge.as_ref().map(|e| match s.options.node_ids {
            NodeIds::StateIds => e.clone(),
            NodeIds::Opaque => nanoid(&format!("edge-{}-{e}", visit.journey)),
        });
        guidelines.push(json!({"id": match edge { Some(e) => format!("journey_node:{node}:{e}"), None => format!("journey_node:{node}") }}));
        states.push(json!({"id": node}));
    }
    let journeys: Vec<Value> = turn.journeys.iter().map(|j| json!({"id": j})).collect();
    emit(
        "ai_agent",
        "status",
        status(
            "ready",
            json!({"stage": "completed", "matched_guidelines": guidelines, "matched_journeys": journeys, "matched_journey_states": states}),
        ),
    );
    if let Some(exception) = &turn.error {
        emit("ai_agent", "status", status("error", json!({"exception": exception})));
    }
}

async fn list_events(
    State(s): State<Arc<Shared>>,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let min: i64 = q.get("min_offset").and_then(|v| v.parse().ok()).unwrap_or(0);
    let wait: i64 = q.get("wait_for_data").and_then(|v| v.parse().ok()).unwrap_or(60);
    let kinds: Vec<String> =
        q.get("kinds").map(|k| k.split(',').filter(|k| !k.is_empty()).map(String::from).collect()).unwrap_or_default();
    let wanted = |e: &Value| {
        e["offset"].as_i64().is_some_and(|o| o >= min)
            && (kinds.is_empty() || kinds.iter().any(|k| e["kind"] == k.as_str()))
            && q.get("source").is_none_or(|src| e["source"] == src.as_str())
            && q.get("trace_id").is_none_or(|t| e["trace_id"] == t.as_str())
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(u64::try_from(wait.max(0)).unwrap_or(0));
    loop {
        let notified = s.notify.notified();
        let found: Option<Vec<Value>> =
            s.store().events.get(&id).map(|events| events.iter().filter(|e| wanted(e)).cloned().collect());
        let Some(found) = found else { return session_not_found(&id) };
        if !found.is_empty() || wait <= 0 {
            return Json(Value::Array(found)).into_response();
        }
        if tokio::time::timeout_at(deadline, notified).await.is_err() {
            return detail(StatusCode::GATEWAY_TIMEOUT, "Request timed out".into());
        }
    }
}
