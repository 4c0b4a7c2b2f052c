//! `/sessions/{session_id}/events`: what was said and done in a session.
//!
//! A customer message starts a turn (unless a human handles the session); so does an
//! `ai_agent` message without text, and an `ai_agent` message with `guidelines` makes the
//! agent say what they ask, now. Human agents' messages, custom and status events are
//! stored and start nothing.
//!
//! Listing long-polls: with `wait_for_data` > 0 the request waits for a matching event
//! and wakes the moment one is committed (no polling loop), answering 504 when none came.
//! `sse=true` streams events as `data:` lines instead.

use std::convert::Infallible;
use std::time::Duration;

use axum::Json;
use axum::extract::Path;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use guidepost_core::session::SessionMode;
use guidepost_core::{Agent, Customer, Event, EventKind, EventSource};
use guidepost_runtime::CustomerRef;
use guidepost_runtime::TurnInput;
use guidepost_store::turns::NewTurn;
use guidepost_store::{EventFilter, NewEventRecord};
use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::adapters::StoreSink;
use crate::dto::MetadataUpdate;
use crate::error::{ApiError, ApiResult, FieldError};
use crate::extract::{Body, Params};
use crate::routes::{created, no_content};
use crate::state::{AppState, State};

/// Longest accepted `wait_for_data`, in seconds.
pub const MAX_WAIT_SECS: u64 = 3600;

/// Who produced an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EventSourceDto {
    /// The customer.
    Customer,
    /// The customer's client application.
    CustomerUi,
    /// A human agent speaking as themselves.
    HumanAgent,
    /// A human agent speaking as the AI agent.
    HumanAgentOnBehalfOfAiAgent,
    /// The AI agent.
    AiAgent,
    /// The system.
    System,
}

/// What an event carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EventKindDto {
    /// A message.
    Message,
    /// Tool calls and results.
    Tool,
    /// A status change.
    Status,
    /// Anything a client stores.
    Custom,
}

/// Status values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SessionStatusDto {
    /// The message was received.
    Acknowledged,
    /// The turn was cancelled.
    Cancelled,
    /// The agent is working.
    Processing,
    /// A reply part was emitted; with stage `completed` the turn ended.
    Ready,
    /// The agent is writing.
    Typing,
    /// The turn failed.
    Error,
}

/// An event.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct EventDto {
    /// Id.
    pub id: String,
    /// Who produced it.
    pub source: EventSourceDto,
    /// What it carries.
    pub kind: EventKindDto,
    /// Position in the session, dense from 0.
    pub offset: u64,
    /// When it was created (ISO 8601).
    pub creation_utc: String,
    /// The trace it belongs to.
    pub trace_id: String,
    /// The same as `trace_id`.
    pub correlation_id: String,
    /// The payload.
    pub data: Value,
    /// Free-form metadata.
    pub metadata: IndexMap<String, Value>,
    /// Whether it was deleted (listings hide deleted events).
    pub deleted: bool,
}

fn wire<T: Serialize, U: serde::de::DeserializeOwned>(value: T) -> Option<U> {
    serde_json::to_value(value).ok().and_then(|v| serde_json::from_value(v).ok())
}

impl From<&Event> for EventDto {
    fn from(e: &Event) -> Self {
        Self {
            id: e.id.clone(),
            source: wire(e.source).unwrap_or(EventSourceDto::System),
            kind: wire(e.kind).unwrap_or(EventKindDto::Custom),
            offset: e.offset,
            creation_utc: e.creation_utc.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
            trace_id: e.trace_id.clone(),
            correlation_id: e.trace_id.clone(),
            data: e.data.clone(),
            metadata: e.metadata.clone(),
            deleted: e.deleted,
        }
    }
}

/// Someone speaking.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ParticipantDto {
    /// Their id.
    pub id: Option<String>,
    /// The name shown.
    pub display_name: String,
}

/// Why an operator asks the agent to say something.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum UtteranceRationaleDto {
    /// No reason given.
    Unspecified,
    /// To keep the customer company while something takes time.
    BuyTime,
    /// To follow up on the conversation.
    FollowUp,
}

/// What an operator asks the agent to say.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct AgentMessageGuidelineDto {
    /// What to do, in words.
    pub action: String,
    /// Why.
    pub rationale: Option<UtteranceRationaleDto>,
}

/// A new event.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct EventCreationParams {
    /// What it carries.
    pub kind: EventKindDto,
    /// Who produces it.
    pub source: EventSourceDto,
    /// The text of a message.
    pub message: Option<String>,
    /// The payload of a custom or status event.
    pub data: Option<Value>,
    /// Free-form metadata.
    pub metadata: Option<IndexMap<String, Value>>,
    /// For an `ai_agent` message: what the agent should say now.
    pub guidelines: Option<Vec<AgentMessageGuidelineDto>>,
    /// Who speaks (required for human agents).
    pub participant: Option<ParticipantDto>,
    /// The status of a status event.
    pub status: Option<SessionStatusDto>,
}

/// Changes to an event.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct EventUpdateParams {
    /// Metadata keys to set and unset.
    pub metadata: Option<MetadataUpdate>,
}

fn invalid(field: &str, msg: &str) -> ApiError {
    ApiError::invalid(FieldError::body(&[field], "value_error", msg))
}

/// `POST /sessions/{session_id}/events?moderation=`
pub async fn create(
    state: State,
    axum::Extension(caller): axum::Extension<crate::access::Caller>,
    Path(session_id): Path<String>,
    params: Params,
    Body(body): Body<EventCreationParams>,
) -> ApiResult<Response> {
    if !caller.is_admin() {
        let customer_facing = matches!(
            (body.kind, body.source),
            (EventKindDto::Message, EventSourceDto::Customer) | (EventKindDto::Custom, EventSourceDto::CustomerUi)
        );
        if !customer_facing || body.participant.is_some() {
            return Err(ApiError::Forbidden(
                "this caller may post only the customer's messages and customer_ui events, without a participant override"
                    .into(),
            ));
        }
    }
    if (body.kind, body.source) == (EventKindDto::Message, EventSourceDto::Customer)
        && let Some(limit) = state.access.messages_per_session_per_minute
        && let Err(wait) = state.limiter.take(&format!("session:{session_id}"), limit)
    {
        return Err(ApiError::TooManyRequests(wait));
    }
    params.choice::<String>("moderation", &["auto", "paranoid", "none"])?.map_or(Ok(()), |m| {
        if ["auto", "paranoid", "none"].contains(&m.as_str()) {
            Ok(())
        } else {
            Err(ApiError::invalid(
                FieldError::query("moderation", "enum", "Input should be 'auto', 'paranoid' or 'none'")
                    .with_input(json!(m)),
            ))
        }
    })?;
    let session = state.store.require_session(&session_id).await?.session;
    let trace = guidepost_store::ids::new_trace_id();
    let metadata = body.metadata.clone().unwrap_or_default();
    let record = |source: EventSource, kind: EventKind, data: Value| NewEventRecord {
        source,
        kind,
        trace_id: trace.clone(),
        data,
        metadata: metadata.clone(),
    };
    match (body.kind, body.source) {
        (EventKindDto::Message, EventSourceDto::Customer) => {
            let text = body.message.clone().ok_or_else(|| invalid("message", "a customer message needs `message`"))?;
            let (participant_id, name) = match &body.participant {
                Some(p) => (p.id.clone().unwrap_or_else(|| session.customer_id.clone()), p.display_name.clone()),
                None => (
                    session.customer_id.clone(),
                    state
                        .store
                        .get::<Customer>(&session.customer_id)
                        .await?
                        .map_or_else(|| session.customer_id.clone(), |c| c.entity.name),
                ),
            };
            let data = json!({"message": text, "participant": {"id": participant_id, "display_name": name}, "flagged": false, "tags": []});
            let starts = session.mode == SessionMode::Auto;
            let turn = starts.then(|| NewTurn { id: trace.clone() });
            let mut events = state
                .store
                .append_events(&session_id, vec![record(EventSource::Customer, EventKind::Message, data)], turn)
                .await?;
            if starts {
                state.turns.schedule(&session_id, &trace).await;
            }
            let event = events.pop().ok_or_else(|| ApiError::Internal("no event stored".into()))?;
            Ok(created(EventDto::from(&event)))
        }
        (EventKindDto::Message, EventSourceDto::AiAgent) => {
            if body.message.is_some() {
                return Err(invalid(
                    "message",
                    "an ai_agent event cannot carry `message`: the agent writes its own (give `guidelines` to say what it should say)",
                ));
            }
            match body.guidelines.as_ref().filter(|g| !g.is_empty()) {
                Some(guidelines) => utter(&state, &session, &trace, guidelines).await,
                None => {
                    let mut rx = state.store.hub().subscribe(&session_id);
                    state.store.append_events(&session_id, Vec::new(), Some(NewTurn { id: trace.clone() })).await?;
                    state.turns.schedule(&session_id, &trace).await;
                    let filter = EventFilter {
                        trace_id: Some(trace.clone()),
                        kinds: vec![EventKind::Status],
                        ..Default::default()
                    };
                    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
                    loop {
                        if let Some(first) = state.store.list_events(&session_id, &filter).await?.first() {
                            return Ok(created(EventDto::from(first)));
                        }
                        if !state.wait_for_change(&mut rx, deadline).await {
                            return Err(ApiError::Timeout);
                        }
                    }
                }
            }
        }
        (EventKindDto::Message, EventSourceDto::HumanAgent) => {
            let text =
                body.message.clone().ok_or_else(|| invalid("message", "a human agent message needs `message`"))?;
            let participant = body
                .participant
                .clone()
                .ok_or_else(|| invalid("participant", "a human agent message needs `participant.display_name`"))?;
            let data = json!({"message": text, "participant": {"id": participant.id, "display_name": participant.display_name}});
            let event = state
                .store
                .append_event(&session_id, record(EventSource::HumanAgent, EventKind::Message, data))
                .await?;
            Ok(created(EventDto::from(&event)))
        }
        (EventKindDto::Message, EventSourceDto::HumanAgentOnBehalfOfAiAgent) => {
            let text = body.message.clone().ok_or_else(|| invalid("message", "a message needs `message`"))?;
            let agent = state.store.get::<Agent>(&session.agent_id).await?.map(|a| a.entity);
            let data = json!({"message": text, "participant": {"id": session.agent_id, "display_name": agent.map(|a| a.name).unwrap_or_default()}});
            let event = state
                .store
                .append_event(&session_id, record(EventSource::HumanAgentOnBehalfOfAiAgent, EventKind::Message, data))
                .await?;
            Ok(created(EventDto::from(&event)))
        }
        (EventKindDto::Custom, source) => {
            let data = body.data.clone().unwrap_or(Value::Null);
            let source: EventSource = wire(source).unwrap_or(EventSource::System);
            let event = state.store.append_event(&session_id, record(source, EventKind::Custom, data)).await?;
            Ok(created(EventDto::from(&event)))
        }
        (EventKindDto::Status, source) => {
            let status = body.status.ok_or_else(|| invalid("status", "a status event needs `status`"))?;
            let data = match body.data.clone() {
                None => json!({}),
                Some(Value::Object(m)) => Value::Object(m),
                Some(_) => return Err(invalid("data", "the data of a status event must be an object")),
            };
            let source: EventSource = wire(source).unwrap_or(EventSource::System);
            let event = state
                .store
                .append_event(&session_id, record(source, EventKind::Status, json!({"status": status, "data": data})))
                .await?;
            Ok(created(EventDto::from(&event)))
        }
        (kind, source) => Err(ApiError::invalid(FieldError::body(
            &["kind"],
            "value_error",
            format!(
                "events of kind `{}` from `{}` cannot be created",
                serde_json::to_value(kind).unwrap_or_default().as_str().unwrap_or_default(),
                serde_json::to_value(source).unwrap_or_default().as_str().unwrap_or_default()
            ),
        ))),
    }
}

async fn utter(
    state: &AppState,
    session: &guidepost_core::Session,
    trace: &str,
    guidelines: &[AgentMessageGuidelineDto],
) -> ApiResult<Response> {
    let runtime = state.pool.runtime(&session.agent_id).await?;
    let customer = state.store.get::<Customer>(&session.customer_id).await?.map(|c| c.entity);
    let input = TurnInput {
        session_id: session.id.clone(),
        customer: CustomerRef {
            id: session.customer_id.clone(),
            tags: customer.as_ref().map(|c| c.tags.clone()).unwrap_or_default(),
        },
        customer_name: customer.map(|c| c.name),
        events: state.store.list_events(&session.id, &EventFilter::default()).await?,
        previous_state: state.store.latest_agent_state(&session.id).await?,
        trace_id: trace.to_string(),
    };
    let actions: Vec<String> = guidelines.iter().map(|g| g.action.clone()).collect();
    let sink = StoreSink::new(state.store.clone(), &session.id).with_redactor(state.redactor.clone());
    // In a task of its own: a client that goes away does not stop the message half-sent.
    let outcome = tokio::spawn(async move { runtime.utter(input, &actions, &sink).await })
        .await
        .map_err(|e| ApiError::Internal(format!("the utterance task failed: {e}")))?;
    if let Some(error) = outcome.trace.error {
        return Err(ApiError::Unavailable(format!(
            "the agent could not write the message: {}",
            state.redactor.redact(&error)
        )));
    }
    let filter =
        EventFilter { trace_id: Some(trace.to_string()), kinds: vec![EventKind::Message], ..Default::default() };
    let message = state
        .store
        .list_events(&session.id, &filter)
        .await?
        .pop()
        .ok_or_else(|| ApiError::Internal("no message emitted".into()))?;
    Ok(created(EventDto::from(&message)))
}

fn event_filter(params: &Params) -> ApiResult<EventFilter> {
    let source = params.choice::<EventSource>(
        "source",
        &["customer", "customer_ui", "human_agent", "human_agent_on_behalf_of_ai_agent", "ai_agent", "system"],
    )?;
    let mut kinds = Vec::new();
    for text in params.list("kinds") {
        for k in text.split(',').map(str::trim).filter(|k| !k.is_empty()) {
            let kind = serde_json::from_value::<EventKind>(Value::String(k.to_string())).map_err(|_| {
                ApiError::invalid(
                    FieldError::query(
                        "kinds",
                        "enum",
                        "Input should be a comma-separated list of 'message', 'tool', 'status', 'custom'",
                    )
                    .with_input(json!(k)),
                )
            })?;
            kinds.push(kind);
        }
    }
    let trace_id = params.string("trace_id").or_else(|| params.string("correlation_id")).filter(|t| !t.is_empty());
    let min_offset = u64::try_from(params.number::<i64>("min_offset")?.unwrap_or(0)).unwrap_or(0);
    Ok(EventFilter { min_offset, source, kinds, trace_id, include_deleted: false })
}

/// `GET /sessions/{session_id}/events?min_offset=&source=&kinds=&trace_id=&correlation_id=&wait_for_data=&sse=`
pub async fn list(state: State, Path(session_id): Path<String>, params: Params) -> ApiResult<Response> {
    let filter = event_filter(&params)?;
    let wait = u64::try_from(params.number::<i64>("wait_for_data")?.unwrap_or(60)).unwrap_or(0).min(MAX_WAIT_SECS);
    let sse = params.boolean("sse")?.unwrap_or(false);
    state.store.require_session(&session_id).await?;
    if sse {
        return Ok(stream(state.0.clone(), session_id, filter, wait).into_response());
    }
    let mut rx = state.store.hub().subscribe(&session_id);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(wait);
    loop {
        let events = state.store.list_events(&session_id, &filter).await?;
        if !events.is_empty() || wait == 0 {
            return Ok(Json(events.iter().map(EventDto::from).collect::<Vec<_>>()).into_response());
        }
        if !state.wait_for_change(&mut rx, deadline).await {
            state.store.require_session(&session_id).await?;
            return Err(ApiError::Timeout);
        }
    }
}

fn stream(
    state: std::sync::Arc<AppState>,
    session_id: String,
    mut filter: EventFilter,
    wait: u64,
) -> Sse<impl futures::Stream<Item = Result<SseEvent, Infallible>>> {
    let events = async_stream::stream! {
        let mut rx = state.store.hub().subscribe(&session_id);
        loop {
            let batch = match state.store.list_events(&session_id, &filter).await {
                Ok(b) => b,
                Err(error) => {
                    tracing::warn!(%error, session_id, "an event stream ended on a store error");
                    break;
                }
            };
            for e in &batch {
                filter.min_offset = e.offset + 1;
                let json = serde_json::to_string(&EventDto::from(e)).unwrap_or_default();
                yield Ok(SseEvent::default().data(json));
            }
            if !batch.is_empty() {
                continue;
            }
            let deadline = tokio::time::Instant::now() + Duration::from_secs(wait.max(1));
            if !state.wait_for_change(&mut rx, deadline).await {
                break;
            }
        }
    };
    Sse::new(events).keep_alive(KeepAlive::default())
}

/// `DELETE /sessions/{session_id}/events?min_offset=`: soft-deletes from that offset on.
pub async fn delete_many(state: State, Path(session_id): Path<String>, params: Params) -> ApiResult<Response> {
    let min = params
        .number::<u64>("min_offset")?
        .ok_or_else(|| ApiError::invalid(FieldError::query("min_offset", "missing", "Field required")))?;
    state.store.require_session(&session_id).await?;
    state.store.delete_events(&session_id, min).await?;
    Ok(no_content())
}

fn complete(event: &Event) -> bool {
    match event.data.get("chunks").and_then(Value::as_array) {
        Some(chunks) => chunks.last().is_some_and(Value::is_null),
        None => true,
    }
}

/// `GET /sessions/{session_id}/events/{event_id}?wait_for_completion=&wait_for_data=&sse=`:
/// a streamed message can be awaited until complete, or followed chunk by chunk.
pub async fn read(
    state: State,
    Path((session_id, event_id)): Path<(String, String)>,
    params: Params,
) -> ApiResult<Response> {
    let wait_for_completion = params.boolean("wait_for_completion")?.unwrap_or(false);
    let wait = params.number::<u64>("wait_for_data")?.unwrap_or(60).min(MAX_WAIT_SECS);
    let sse = params.boolean("sse")?.unwrap_or(false);
    state.store.require_session(&session_id).await?;
    let not_found = || ApiError::NotFound { kind: "event", id: event_id.clone() };
    let event = state.store.get_event(&session_id, &event_id).await?.ok_or_else(not_found)?;
    if sse {
        let st = state.0.clone();
        let (sid, eid) = (session_id.clone(), event_id.clone());
        let updates = async_stream::stream! {
            let mut rx = st.store.hub().subscribe(&sid);
            let mut last: Option<Value> = None;
            loop {
                let Ok(Some(e)) = st.store.get_event(&sid, &eid).await else { break };
                if last.as_ref() != Some(&e.data) {
                    last = Some(e.data.clone());
                    yield Ok::<_, Infallible>(SseEvent::default().data(serde_json::to_string(&EventDto::from(&e)).unwrap_or_default()));
                }
                if complete(&e) {
                    break;
                }
                let deadline = tokio::time::Instant::now() + Duration::from_secs(wait.max(1));
                if !st.wait_for_change(&mut rx, deadline).await {
                    break;
                }
            }
        };
        return Ok(Sse::new(updates).keep_alive(KeepAlive::default()).into_response());
    }
    if !wait_for_completion || complete(&event) {
        return Ok(Json(EventDto::from(&event)).into_response());
    }
    let mut rx = state.store.hub().subscribe(&session_id);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(wait);
    loop {
        let e = state.store.get_event(&session_id, &event_id).await?.ok_or_else(not_found)?;
        if complete(&e) {
            return Ok(Json(EventDto::from(&e)).into_response());
        }
        if !state.wait_for_change(&mut rx, deadline).await {
            return Err(ApiError::Timeout);
        }
    }
}

/// `PATCH /sessions/{session_id}/events/{event_id}`
pub async fn update(
    state: State,
    Path((session_id, event_id)): Path<(String, String)>,
    Body(params): Body<EventUpdateParams>,
) -> ApiResult<Json<EventDto>> {
    state.store.require_session(&session_id).await?;
    let event = state
        .store
        .update_event_metadata(&session_id, &event_id, |m| {
            if let Some(u) = &params.metadata {
                u.apply(m);
            }
        })
        .await?;
    Ok(Json(EventDto::from(&event)))
}
