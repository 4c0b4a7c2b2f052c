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
use futures::StreamExt;
use guidepost_conversation::{Post, is_whole};
use guidepost_core::payload::{EventPayload, Participant, StatusDetail, StatusPayload};
use guidepost_core::{Event, EventKind, EventSource};
use guidepost_store::{EventFilter, EventPage};
use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::dto::MetadataUpdate;
use crate::error::{ApiError, ApiResult, FieldError};
use crate::extract::{Body, Params};
use crate::routes::operation::{Operation, Param};
use crate::routes::{created, no_content};
use crate::state::State;

/// What this resource serves, each operation declared once (see [`crate::routes::operation`]).
pub fn operations() -> Vec<Operation> {
    vec![
        Operation::post(
            "/sessions/{session_id}/events",
            create,
            "create_event",
            "Adds an event; a customer message starts a turn",
        )
        .customer()
        .query([Param::new("moderation", "string", "auto, paranoid or none")])
        .body::<EventCreationParams>()
        .creates::<EventDto>(),
        Operation::get(
            "/sessions/{session_id}/events",
            list,
            "list_events",
            "Lists events; waits up to wait_for_data seconds for one (504 when none came); sse=true streams them",
        )
        .customer()
        .query([
            Param::new("min_offset", "integer", "From this offset on"),
            Param::new("source", "string", "Only from this source"),
            Param::new("correlation_id", "string", "Only of this trace"),
            Param::new("trace_id", "string", "Only of this trace"),
            Param::new("kinds", "string", "Comma-separated kinds"),
            Param::new("wait_for_data", "integer", "Seconds to wait for a matching event (default 60)"),
            Param::new("sse", "boolean", "Stream as server-sent events"),
        ])
        .answers::<Vec<EventDto>>(),
        Operation::delete(
            "/sessions/{session_id}/events",
            delete_many,
            "delete_events",
            "Soft-deletes events from min_offset on",
        )
        .query([Param::new("min_offset", "integer", "First offset to delete (required)").required()])
        .no_content(),
        Operation::get(
            "/sessions/{session_id}/events/{event_id}",
            read,
            "read_event",
            "Reads an event; waits for a streamed message to complete, or streams its chunks",
        )
        .customer()
        .query([
            Param::new("wait_for_completion", "boolean", "Wait until the message is complete"),
            Param::new("wait_for_data", "integer", "Seconds to wait (default 60)"),
            Param::new("sse", "boolean", "Stream its updates"),
        ])
        .answers::<EventDto>(),
        Operation::patch(
            "/sessions/{session_id}/events/{event_id}",
            update,
            "update_event",
            "Changes an event's metadata",
        )
        .body::<EventUpdateParams>()
        .answers::<EventDto>(),
    ]
}

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

impl From<EventSource> for EventSourceDto {
    fn from(source: EventSource) -> Self {
        match source {
            EventSource::Customer => Self::Customer,
            EventSource::CustomerUi => Self::CustomerUi,
            EventSource::HumanAgent => Self::HumanAgent,
            EventSource::HumanAgentOnBehalfOfAiAgent => Self::HumanAgentOnBehalfOfAiAgent,
            EventSource::AiAgent => Self::AiAgent,
            EventSource::System => Self::System,
        }
    }
}

impl From<EventKind> for EventKindDto {
    fn from(kind: EventKind) -> Self {
        match kind {
            EventKind::Message => Self::Message,
            EventKind::Tool => Self::Tool,
            EventKind::Status => Self::Status,
            EventKind::Custom => Self::Custom,
        }
    }
}

impl From<Event> for EventDto {
    fn from(e: Event) -> Self {
        Self {
            source: e.source.into(),
            kind: e.kind.into(),
            offset: e.offset,
            creation_utc: e.creation_utc.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
            correlation_id: e.trace_id.clone(),
            trace_id: e.trace_id,
            data: e.data,
            metadata: e.metadata,
            deleted: e.deleted,
            id: e.id,
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
    check_customer_event(&state, &session_id, &body).await?;
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
    // The service reads the session (404 when there is none).
    let post = post_of(body)?;
    let event = state.conversations.post(&session_id, post).await?;
    Ok(created(EventDto::from(event)))
}

/// Bounds on what a customer or their client posts (`customer` and `customer_ui` sources, any
/// kind): its size (413 beyond `--max-event-bytes`), and its share of the session's event rate
/// (`--session-message-limit`, 429), so `customer_ui` and `custom` events cannot be posted
/// past the limit messages have.
async fn check_customer_event(state: &State, session_id: &str, body: &EventCreationParams) -> ApiResult<()> {
    if !matches!(body.source, EventSourceDto::Customer | EventSourceDto::CustomerUi) {
        return Ok(());
    }
    let max = state.bounds.max_customer_event_bytes;
    crate::bounds::check_customer_event(body.message.as_deref(), body.data.as_ref(), body.metadata.as_ref(), max)?;
    if let Some(limit) = state.access.messages_per_session_per_minute
        && let Err(wait) = state.limiter.take(&format!("session:{session_id}"), limit).await
    {
        return Err(ApiError::TooManyRequests(wait));
    }
    Ok(())
}

/// What the body asks to post, checked for the fields its kind and source need.
fn post_of(body: EventCreationParams) -> ApiResult<Post> {
    let metadata = body.metadata.unwrap_or_default();
    let participant = |p: ParticipantDto| Participant { id: p.id, display_name: p.display_name };
    Ok(match (body.kind, body.source) {
        (EventKindDto::Message, EventSourceDto::Customer) => Post::CustomerMessage {
            text: body.message.ok_or_else(|| invalid("message", "a customer message needs `message`"))?,
            participant: body.participant.map(participant),
            metadata,
        },
        (EventKindDto::Message, EventSourceDto::AiAgent) => {
            if body.message.is_some() {
                return Err(invalid(
                    "message",
                    "an ai_agent event cannot carry `message`: the agent writes its own (give `guidelines` to say what it should say)",
                ));
            }
            match body.guidelines.filter(|g| !g.is_empty()) {
                Some(guidelines) => {
                    Post::Utterance { instructions: guidelines.into_iter().map(|g| g.action).collect() }
                }
                None => Post::AgentTurn,
            }
        }
        (EventKindDto::Message, EventSourceDto::HumanAgent) => {
            let text = body.message.ok_or_else(|| invalid("message", "a human agent message needs `message`"))?;
            let given = body
                .participant
                .ok_or_else(|| invalid("participant", "a human agent message needs `participant.display_name`"))?;
            Post::HumanAgentMessage { text, participant: participant(given), metadata }
        }
        (EventKindDto::Message, EventSourceDto::HumanAgentOnBehalfOfAiAgent) => Post::OnBehalfOfAgent {
            text: body.message.ok_or_else(|| invalid("message", "a message needs `message`"))?,
            metadata,
        },
        (EventKindDto::Custom, source) => Post::Client {
            source: wire(source).unwrap_or(EventSource::System),
            payload: Box::new(EventPayload::Custom(body.data.unwrap_or(Value::Null))),
            metadata,
        },
        (EventKindDto::Status, source) => {
            let status = body.status.ok_or_else(|| invalid("status", "a status event needs `status`"))?;
            let other = match body.data {
                None => Map::new(),
                Some(Value::Object(m)) => m,
                Some(_) => return Err(invalid("data", "the data of a status event must be an object")),
            };
            let status = wire(status).ok_or_else(|| invalid("status", "an unknown status"))?;
            Post::Client {
                source: wire(source).unwrap_or(EventSource::System),
                payload: Box::new(EventPayload::Status(StatusPayload {
                    status,
                    data: StatusDetail { other, ..StatusDetail::default() },
                })),
                metadata,
            }
        }
        (kind, source) => {
            return Err(ApiError::invalid(FieldError::body(
                &["kind"],
                "value_error",
                format!(
                    "events of kind `{}` from `{}` cannot be created",
                    serde_json::to_value(kind).unwrap_or_default().as_str().unwrap_or_default(),
                    serde_json::to_value(source).unwrap_or_default().as_str().unwrap_or_default()
                ),
            )));
        }
    })
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
    Ok(EventFilter { min_offset, source, kinds, trace_id, include_deleted: false, limit: None })
}

/// `GET /sessions/{session_id}/events?min_offset=&source=&kinds=&trace_id=&correlation_id=&wait_for_data=&sse=`
pub async fn list(state: State, Path(session_id): Path<String>, params: Params) -> ApiResult<Response> {
    let filter = event_filter(&params)?;
    let wait = u64::try_from(params.number::<i64>("wait_for_data")?.unwrap_or(60)).unwrap_or(0).min(MAX_WAIT_SECS);
    let sse = params.boolean("sse")?.unwrap_or(false);
    if sse {
        state.store.require_session(&session_id).await?;
        let events = state.conversations.follow_events(&session_id, filter, Duration::from_secs(wait));
        return Ok(Sse::new(events.map(sse_event)).keep_alive(KeepAlive::default()).into_response());
    }
    // Waits for the first page (if asked to), then sends the listing page by page from it.
    let page = (PAGE_EVENTS, PAGE_BYTES);
    let first = state.conversations.wait_for_page(&session_id, &filter, page, Duration::from_secs(wait)).await?;
    Ok(listing(&state, &session_id, filter, first))
}

/// Events the listing sends per page, and the bytes of data after which a page ends early.
const PAGE_EVENTS: usize = 100;
const PAGE_BYTES: usize = 1 << 20;

/// The events `filter` keeps, as one JSON array written page by page: however many and large
/// a session's events are, what the listing holds at a time is one page. A store failure
/// after the first page cuts the response short (the first one is a proper error).
fn listing(state: &State, session_id: &str, filter: EventFilter, first: EventPage) -> Response {
    let store = state.store.clone();
    let start = Listing { store, session_id: session_id.to_string(), filter, page: Some(first), written: 0 };
    let body = futures::stream::unfold(Some(start), |listing| async move {
        let mut listing = listing?;
        let Some(page) = listing.page.take() else {
            let end = if listing.written == 0 { "[]" } else { "]" };
            return Some((Ok(axum::body::Bytes::from_static(end.as_bytes())), None));
        };
        let mut chunk = Vec::new();
        for event in page.events {
            chunk.push(if listing.written == 0 { b'[' } else { b',' });
            listing.written += 1;
            if serde_json::to_writer(&mut chunk, &EventDto::from(event)).is_err() {
                chunk.extend_from_slice(b"null");
            }
        }
        if let Some(next) = page.next_offset {
            listing.filter.min_offset = next;
            match listing.store.events_page(&listing.session_id, &listing.filter, PAGE_EVENTS, PAGE_BYTES).await {
                Ok(next) => listing.page = Some(next),
                Err(error) => {
                    tracing::error!(%error, session_id = listing.session_id, "listing events failed after its first page");
                    return Some((Err(std::io::Error::other(error.to_string())), None));
                }
            }
        }
        Some((Ok(axum::body::Bytes::from(chunk)), Some(listing)))
    });
    let mut response = axum::body::Body::from_stream(body).into_response();
    response
        .headers_mut()
        .insert(axum::http::header::CONTENT_TYPE, axum::http::HeaderValue::from_static("application/json"));
    response
}

/// Where a listing written page by page stands.
struct Listing {
    store: guidepost_store::Store,
    session_id: String,
    filter: EventFilter,
    /// The page to write next; `None` once the last was written.
    page: Option<EventPage>,
    /// Events written so far.
    written: usize,
}

/// An event as a `data:` line of a stream.
fn sse_event(event: Event) -> Result<SseEvent, Infallible> {
    Ok(SseEvent::default().data(serde_json::to_string(&EventDto::from(event)).unwrap_or_default()))
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

/// `GET /sessions/{session_id}/events/{event_id}?wait_for_completion=&wait_for_data=&sse=`:
/// a streamed message can be awaited until complete, or followed chunk by chunk.
pub async fn read(
    state: State,
    Path((session_id, event_id)): Path<(String, String)>,
    params: Params,
) -> ApiResult<Response> {
    let wait_for_completion = params.boolean("wait_for_completion")?.unwrap_or(false);
    let wait = Duration::from_secs(params.number::<u64>("wait_for_data")?.unwrap_or(60).min(MAX_WAIT_SECS));
    let sse = params.boolean("sse")?.unwrap_or(false);
    state.store.require_session(&session_id).await?;
    let not_found = || ApiError::NotFound { kind: "event", id: event_id.clone() };
    let event = state.store.get_event(&session_id, &event_id).await?.ok_or_else(not_found)?;
    if sse {
        let updates = state.conversations.follow_event(&session_id, &event_id, wait);
        return Ok(Sse::new(updates.map(sse_event)).keep_alive(KeepAlive::default()).into_response());
    }
    if !wait_for_completion || is_whole(&event) {
        return Ok(Json(EventDto::from(event)).into_response());
    }
    let whole = state.conversations.wait_until_whole(&session_id, &event_id, wait).await?;
    Ok(Json(EventDto::from(whole)).into_response())
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
    Ok(Json(EventDto::from(event)))
}
