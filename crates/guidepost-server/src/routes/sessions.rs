//! `/sessions`: conversations, and (our extension) the turns of each with what happened
//! and why, and the session's model usage.

use axum::Json;
use axum::extract::Path;
use axum::response::{IntoResponse, Response};
use guidepost_core::session::{GUEST_CUSTOMER, SessionMode};
use guidepost_core::{Agent, Session};
use guidepost_store::{SessionFilter, TurnRecord};
use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::dto::{LabelsUpdate, MetadataUpdate, PageDto, PageOrList};
use crate::error::{ApiError, ApiResult};
use crate::extract::{Body, Params};
use crate::routes::customers::{ensure_guest, page_request};
use crate::routes::operation::{Operation, Param};
use crate::routes::{created, no_content};
use crate::state::State;

/// What this resource serves, each operation declared once (see [`crate::routes::operation`]).
pub fn operations() -> Vec<Operation> {
    vec![
        Operation::post(
            "/sessions",
            create,
            "create_session",
            "Creates a session (the agent speaks first with allow_greeting=true)",
        )
        .customer()
        .query([Param::new("allow_greeting", "boolean", "Let the agent start the conversation")])
        .body::<SessionCreationParams>()
        .creates::<SessionDto>(),
        Operation::get("/sessions", list, "list_sessions", "Lists sessions: a plain array, or a page with limit")
            .query([
                Param::new("agent_id", "string", "Only this agent's"),
                Param::new("customer_id", "string", "Only this customer's"),
                Param::new("labels", "string", "Only sessions with every given label (repeatable)"),
                Param::new("limit", "integer", "Page size, 1 to 100"),
                Param::new("cursor", "string", "The next_cursor of the previous page"),
                Param::new("sort", "string", "asc or desc"),
            ])
            .answers::<PageOrList<SessionDto>>(),
        Operation::delete("/sessions", delete_many, "delete_sessions", "Deletes the sessions of an agent or customer")
            .query([
                Param::new("agent_id", "string", "Only this agent's"),
                Param::new("customer_id", "string", "Only this customer's"),
            ])
            .no_content(),
        Operation::get("/sessions/{session_id}", read, "read_session", "Reads a session")
            .customer()
            .answers::<SessionDto>(),
        Operation::delete("/sessions/{session_id}", delete, "delete_session", "Deletes a session with its events")
            .no_content(),
        Operation::patch("/sessions/{session_id}", update, "update_session", "Changes a session")
            .body::<SessionUpdateParams>()
            .answers::<SessionDto>(),
        Operation::get(
            "/sessions/{session_id}/turns",
            turns,
            "list_turns",
            "The session's turns with their traces (what matched and why, journey moves, tool calls, model usage)",
        )
        .answers::<Vec<TurnDto>>()
        .extension(),
        Operation::get("/sessions/{session_id}/turns/{trace_id}", turn, "read_turn", "One turn with its trace")
            .answers::<TurnDto>()
            .extension(),
        Operation::get("/sessions/{session_id}/usage", usage, "read_session_usage", "The session's model usage")
            .answers::<UsageDto>()
            .extension(),
    ]
}

/// Auto: the agent answers; manual: a human does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SessionModeDto {
    /// The agent replies to customer messages.
    Auto,
    /// Customer messages are stored but not answered.
    Manual,
}

/// Offsets clients have consumed.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct ConsumptionOffsetsDto {
    /// The client's offset.
    pub client: Option<u64>,
}

/// A session.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct SessionDto {
    /// Id.
    pub id: String,
    /// The agent.
    pub agent_id: String,
    /// The customer (`guest` when none was given).
    pub customer_id: String,
    /// When it was created (ISO 8601).
    pub creation_utc: String,
    /// Title.
    pub title: Option<String>,
    /// Auto or manual.
    pub mode: SessionModeDto,
    /// Offsets clients have consumed.
    pub consumption_offsets: ConsumptionOffsetsDto,
    /// Free-form metadata.
    pub metadata: IndexMap<String, Value>,
    /// Labels gathered from matched guidelines and journeys, and set by clients.
    pub labels: Vec<String>,
}

impl From<&Session> for SessionDto {
    fn from(s: &Session) -> Self {
        Self {
            id: s.id.clone(),
            agent_id: s.agent_id.clone(),
            customer_id: s.customer_id.clone(),
            creation_utc: s.creation_utc.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
            title: s.title.clone(),
            mode: match s.mode {
                SessionMode::Auto => SessionModeDto::Auto,
                SessionMode::Manual => SessionModeDto::Manual,
            },
            consumption_offsets: ConsumptionOffsetsDto {
                client: Some(s.consumption_offsets.get("client").copied().unwrap_or(0)),
            },
            metadata: s.metadata.clone(),
            labels: s.labels.clone(),
        }
    }
}

/// A new session.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct SessionCreationParams {
    /// The agent.
    pub agent_id: String,
    /// The customer (default `guest`).
    pub customer_id: Option<String>,
    /// Title.
    pub title: Option<String>,
    /// Free-form metadata.
    pub metadata: Option<IndexMap<String, Value>>,
    /// Labels.
    pub labels: Option<Vec<String>>,
}

/// Changes to a session.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct SessionUpdateParams {
    /// Offsets a client consumed.
    pub consumption_offsets: Option<ConsumptionOffsetsDto>,
    /// New title.
    pub title: Option<String>,
    /// Auto or manual.
    pub mode: Option<SessionModeDto>,
    /// Hand the session to another customer.
    pub customer_id: Option<String>,
    /// Hand the session to another agent.
    pub agent_id: Option<String>,
    /// Metadata keys to set and unset.
    pub metadata: Option<MetadataUpdate>,
    /// Labels to add and remove.
    pub labels: Option<LabelsUpdate>,
}

/// `POST /sessions?allow_greeting=`: with `allow_greeting=true` the agent speaks first.
pub async fn create(
    state: State,
    axum::Extension(caller): axum::Extension<crate::access::Caller>,
    params: Params,
    Body(body): Body<SessionCreationParams>,
) -> ApiResult<Response> {
    let greet = params.boolean("allow_greeting")?.unwrap_or(false);
    if caller.is_anonymous() && body.customer_id.as_deref().is_some_and(|c| c != GUEST_CUSTOMER) {
        return Err(ApiError::Unauthorized("without an API key only guest sessions can be created".into()));
    }
    if !caller.is_admin() {
        let max = state.bounds.max_customer_event_bytes;
        crate::bounds::check_customer_session(
            body.title.as_deref(),
            body.metadata.as_ref(),
            body.labels.as_ref(),
            max,
        )?;
    }
    state.store.require::<Agent>(&body.agent_id).await?;
    let customer_id = body.customer_id.clone().unwrap_or_else(|| GUEST_CUSTOMER.to_string());
    // As on the reference server, a customer id the store does not know is kept as given
    // (applications pass their own user ids); the agent addresses such a customer by id only.
    if customer_id == GUEST_CUSTOMER {
        ensure_guest(&state.store).await?;
    }
    guidepost_store::definitions::check_api_id(&customer_id)?;
    let session = Session {
        id: guidepost_store::ids::new_id(),
        agent_id: body.agent_id,
        customer_id,
        creation_utc: chrono::Utc::now(),
        title: body.title,
        mode: SessionMode::Auto,
        consumption_offsets: IndexMap::new(),
        metadata: body.metadata.unwrap_or_default(),
        labels: dedup(body.labels.unwrap_or_default()),
    };
    state.store.create_session(&session).await?;
    if greet {
        state.conversations.start_agent_turn(&session.id).await?;
    } else {
        state.conversations.read_ahead(&session.agent_id);
    }
    Ok(created(SessionDto::from(&session)))
}

fn dedup(labels: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(labels.len());
    for l in labels {
        if !out.contains(&l) {
            out.push(l);
        }
    }
    out
}

fn filter(params: &Params) -> SessionFilter {
    SessionFilter {
        agent_id: params.string("agent_id"),
        customer_id: params.string("customer_id"),
        labels: params.list("labels"),
    }
}

/// `GET /sessions?agent_id=&customer_id=&labels=&limit=&cursor=&sort=`: a plain array, or
/// a page with `limit`.
pub async fn list(state: State, params: Params) -> ApiResult<Response> {
    let filter = filter(&params);
    match page_request(&params)? {
        None => {
            let all = state.store.list_sessions(&filter).await?;
            Ok(Json(all.iter().map(|r| SessionDto::from(&r.session)).collect::<Vec<_>>()).into_response())
        }
        Some(request) => {
            let page = state.store.page_sessions(&filter, &request).await?;
            Ok(Json(PageDto {
                items: page.items.iter().map(|r| SessionDto::from(&r.session)).collect(),
                total_count: page.total_count,
                has_more: page.has_more,
                next_cursor: page.next_cursor.map(|c| c.encode()),
            })
            .into_response())
        }
    }
}

/// `DELETE /sessions?agent_id=&customer_id=`
pub async fn delete_many(state: State, params: Params) -> ApiResult<Response> {
    state.store.delete_sessions(&filter(&params)).await?;
    Ok(no_content())
}

/// `GET /sessions/{session_id}`
pub async fn read(state: State, Path(id): Path<String>) -> ApiResult<Json<SessionDto>> {
    Ok(Json(SessionDto::from(&state.store.require_session(&id).await?.session)))
}

/// `PATCH /sessions/{session_id}`
pub async fn update(
    state: State,
    Path(id): Path<String>,
    Body(params): Body<SessionUpdateParams>,
) -> ApiResult<Json<SessionDto>> {
    if let Some(agent) = &params.agent_id {
        state.store.require::<Agent>(agent).await?;
    }
    if let Some(customer) = &params.customer_id {
        guidepost_store::definitions::check_api_id(customer)?;
    }
    let session = state
        .store
        .update_session(&id, |s| {
            if let Some(client) = params.consumption_offsets.as_ref().and_then(|c| c.client) {
                s.consumption_offsets.insert("client".into(), client);
            }
            if let Some(t) = &params.title {
                s.title = Some(t.clone());
            }
            if let Some(m) = params.mode {
                s.mode = match m {
                    SessionModeDto::Auto => SessionMode::Auto,
                    SessionModeDto::Manual => SessionMode::Manual,
                };
            }
            if let Some(c) = &params.customer_id {
                s.customer_id.clone_from(c);
            }
            if let Some(a) = &params.agent_id {
                s.agent_id.clone_from(a);
            }
            if let Some(m) = &params.metadata {
                m.apply(&mut s.metadata);
            }
            if let Some(l) = &params.labels {
                l.apply(&mut s.labels);
            }
            Ok(())
        })
        .await?;
    Ok(Json(SessionDto::from(&session)))
}

/// `DELETE /sessions/{session_id}`
pub async fn delete(state: State, Path(id): Path<String>) -> ApiResult<Response> {
    state.store.delete_session(&id).await?;
    Ok(no_content())
}

/// One turn (extension): how it ended, the state it left and its trace (matches with
/// rationales, journey moves, tool calls, model usage).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct TurnDto {
    /// The turn's trace id (shared by its events).
    pub trace_id: String,
    /// `pending`, `running`, `completed`, `cancelled` or `failed`.
    pub status: String,
    /// Offset of the event that started it.
    pub trigger_offset: u64,
    /// When it was stored (ISO 8601).
    pub creation_utc: String,
    /// When a worker last took it.
    pub started_utc: Option<String>,
    /// When it ended.
    pub finished_utc: Option<String>,
    /// How many times a worker took it.
    pub attempts: i64,
    /// Why it failed.
    pub error: Option<String>,
    /// Journey paths and applied guidelines it left.
    pub state: Option<Value>,
    /// What happened and why.
    pub trace: Option<Value>,
}

fn time(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

impl From<&TurnRecord> for TurnDto {
    fn from(t: &TurnRecord) -> Self {
        Self {
            trace_id: t.id.clone(),
            status: t.status.as_str().to_string(),
            trigger_offset: t.trigger_offset,
            creation_utc: time(t.created),
            started_utc: t.started.map(time),
            finished_utc: t.finished.map(time),
            attempts: t.attempts,
            error: t.error.clone(),
            state: t.state.as_ref().and_then(|s| serde_json::to_value(s).ok()),
            trace: t.trace.clone(),
        }
    }
}

/// `GET /sessions/{session_id}/turns` (extension)
pub async fn turns(state: State, Path(id): Path<String>) -> ApiResult<Json<Vec<TurnDto>>> {
    state.store.require_session(&id).await?;
    Ok(Json(state.store.list_turns(&id).await?.iter().map(TurnDto::from).collect()))
}

/// `GET /sessions/{session_id}/turns/{trace_id}` (extension)
pub async fn turn(state: State, Path((id, trace)): Path<(String, String)>) -> ApiResult<Json<TurnDto>> {
    state.store.require_session(&id).await?;
    match state.store.get_turn(&trace).await? {
        Some(t) if t.session_id == id => Ok(Json(TurnDto::from(&t))),
        _ => Err(ApiError::NotFound { kind: "turn", id: trace }),
    }
}

/// The model usage of a session (extension).
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
pub struct UsageDto {
    /// Turns that ran.
    pub turns: u64,
    /// Model calls.
    pub model_calls: u64,
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Completion tokens.
    pub completion_tokens: u64,
    /// Estimated cost in US dollars (0 for local models and unknown prices).
    pub cost_usd: f64,
}

/// `GET /sessions/{session_id}/usage` (extension)
pub async fn usage(state: State, Path(id): Path<String>) -> ApiResult<Json<UsageDto>> {
    state.store.require_session(&id).await?;
    let mut total = UsageDto::default();
    for t in state.store.list_turns(&id).await? {
        let Some(usage) = t.trace.as_ref().and_then(|tr| tr.get("usage")) else { continue };
        total.turns += 1;
        let n = |k: &str| usage.get(k).and_then(Value::as_u64).unwrap_or(0);
        total.model_calls += n("calls");
        total.prompt_tokens += n("prompt_tokens");
        total.completion_tokens += n("completion_tokens");
        total.cost_usd += usage.get("cost_usd").and_then(Value::as_f64).unwrap_or(0.0);
    }
    Ok(Json(total))
}
