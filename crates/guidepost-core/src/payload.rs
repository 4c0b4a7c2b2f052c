//! What session events carry, typed: each type here serializes to the `data` of an event
//! of the Parlant sessions API, byte for byte as clients read it.
//!
//! Customers, human agents and the AI agent write [`MessagePayload`]s; turns report their
//! progress and end with [`StatusPayload`]s; tool calls are [`ToolPayload`]s. Client
//! applications store anything they like as custom events ([`EventPayload::Custom`]).
//!
//! ```
//! use guidepost_core::payload::{EventPayload, MessagePayload, StatusPayload};
//! use guidepost_core::session::{ProcessingStage, Status};
//!
//! let reply = EventPayload::Message(MessagePayload::agent("otto", "Otto", "Hello!"));
//! assert_eq!(
//!     reply.to_data(),
//!     serde_json::json!({"message": "Hello!", "participant": {"id": "otto", "display_name": "Otto"}})
//! );
//! let working = StatusPayload::processing(ProcessingStage::Interpreting);
//! assert_eq!(working.status, Status::Processing);
//! assert_eq!(working.progress(), Some((Status::Processing, Some("Interpreting"))));
//! ```

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::session::{Event, EventKind, ProcessingStage, Status};

/// The tag of a short acknowledgement the agent sends before its reply.
pub const PREAMBLE_TAG: &str = "__preamble__";

/// What an event carries.
#[derive(Debug, Clone, PartialEq)]
pub enum EventPayload {
    /// Someone's message.
    Message(MessagePayload),
    /// A status change of the session's turn.
    Status(StatusPayload),
    /// Tools that ran.
    Tool(ToolPayload),
    /// Whatever a client application stores (kept as given).
    Custom(Value),
}

impl EventPayload {
    /// The event kind this payload is the `data` of.
    pub fn kind(&self) -> EventKind {
        match self {
            Self::Message(_) => EventKind::Message,
            Self::Status(_) => EventKind::Status,
            Self::Tool(_) => EventKind::Tool,
            Self::Custom(_) => EventKind::Custom,
        }
    }

    /// The event's `data`, as the sessions API shows it.
    pub fn to_data(&self) -> Value {
        // These types hold strings, numbers, maps with string keys and JSON values only:
        // they always serialize.
        let data = match self {
            Self::Message(m) => serde_json::to_value(m),
            Self::Status(s) => serde_json::to_value(s),
            Self::Tool(t) => serde_json::to_value(t),
            Self::Custom(v) => return v.clone(),
        };
        data.unwrap_or(Value::Null)
    }

    /// The status and stage of a progress report (see [`StatusPayload::progress`]).
    pub fn progress(&self) -> Option<(Status, Option<&str>)> {
        match self {
            Self::Status(s) => s.progress(),
            _ => None,
        }
    }

    /// Whether it is a status that says how far the turn has come (see
    /// [`StatusPayload::is_pulse`]).
    pub fn is_pulse(&self) -> bool {
        matches!(self, Self::Status(s) if s.is_pulse())
    }
}

/// Who wrote a message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Participant {
    /// The customer's, agent's or human agent's id (`null` when a human agent gave none).
    pub id: Option<String>,
    /// The name shown.
    pub display_name: String,
}

impl Participant {
    /// A participant with an id.
    pub fn new(id: &str, display_name: &str) -> Self {
        Self { id: Some(id.to_string()), display_name: display_name.to_string() }
    }
}

/// A message: the customer's, a human agent's or the AI agent's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessagePayload {
    /// The text (so far, while streamed).
    pub message: String,
    /// Who wrote it.
    pub participant: Participant,
    /// A customer message: whether moderation flagged it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flagged: Option<bool>,
    /// While streamed: the pieces so far; the last is `null` once the message is whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunks: Option<Vec<Option<String>>>,
    /// Tags, such as [`PREAMBLE_TAG`] for an acknowledgement sent before the reply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<Vec<String>>,
    /// The canned response sent, as `[[id, text]]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canned_responses: Option<Vec<(String, String)>>,
    /// The draft the reply was corrected from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draft: Option<String>,
    /// What the reply checks refused on the way, and whether the fallback reply went out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_checks: Option<Value>,
    /// The stages that lost work, when the turn is degraded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub degraded: Option<Value>,
}

impl MessagePayload {
    /// A message `text` by `participant`, with nothing else.
    pub fn new(participant: Participant, text: &str) -> Self {
        Self {
            message: text.to_string(),
            participant,
            flagged: None,
            chunks: None,
            tags: None,
            canned_responses: None,
            draft: None,
            reply_checks: None,
            degraded: None,
        }
    }

    /// A whole message `text` by the AI agent.
    pub fn agent(agent_id: &str, agent_name: &str, text: &str) -> Self {
        Self::new(Participant::new(agent_id, agent_name), text)
    }

    /// A customer's message, as stored when it arrives: not flagged, no tags.
    pub fn customer(participant: Participant, text: &str) -> Self {
        Self { flagged: Some(false), tags: Some(Vec::new()), ..Self::new(participant, text) }
    }

    /// Whether it is the agent's acknowledgement sent before its reply.
    pub fn is_preamble(&self) -> bool {
        self.tags.as_ref().is_some_and(|tags| tags.iter().any(|t| t == PREAMBLE_TAG))
    }
}

/// A status event: `{"status": "processing", "data": {"stage": "Interpreting"}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatusPayload {
    /// The new status.
    pub status: Status,
    /// What goes with it.
    #[serde(default)]
    pub data: StatusDetail,
}

impl StatusPayload {
    /// A status with no details.
    pub fn new(status: Status) -> Self {
        Self { status, data: StatusDetail::default() }
    }

    /// A `processing` status with its stage.
    pub fn processing(stage: ProcessingStage) -> Self {
        let data = StatusDetail { stage: Some(stage.as_str().to_string()), ..StatusDetail::default() };
        Self { status: Status::Processing, data }
    }

    /// The `error` status of a failed turn, with why (without secrets).
    pub fn error(exception: &str) -> Self {
        let data = StatusDetail { exception: Some(exception.to_string()), ..StatusDetail::default() };
        Self { status: Status::Error, data }
    }

    /// The `ready` status that ends a turn (`stage: completed`), with what it matched.
    pub fn completed(mut detail: StatusDetail) -> Self {
        detail.stage = Some(COMPLETED.to_string());
        Self { status: Status::Ready, data: detail }
    }

    /// The `ready` status that ends a turn that matched nothing.
    pub fn completed_empty() -> Self {
        Self::completed(StatusDetail {
            matched_guidelines: Some(Vec::new()),
            matched_journeys: Some(Vec::new()),
            matched_journey_states: Some(Vec::new()),
            ..StatusDetail::default()
        })
    }

    /// The same status and stage, saying how far the turn has come: sent again and again
    /// while a model works, so a client never waits long without news.
    pub fn with_progress(&self, progress: TurnProgress) -> Self {
        let data = StatusDetail { stage: self.data.stage.clone(), progress: Some(progress), ..StatusDetail::default() };
        Self { status: self.status, data }
    }

    /// Whether it says how far the turn has come ([`with_progress`](Self::with_progress)):
    /// unlike the turn's other progress statuses, shown as often as it is sent.
    pub fn is_pulse(&self) -> bool {
        self.data.progress.is_some()
    }

    /// The status and stage when this reports progress (`acknowledged`, `processing` or
    /// `typing`): what a client watches while the turn works, shown once per turn (but for
    /// [pulses](Self::is_pulse)).
    pub fn progress(&self) -> Option<(Status, Option<&str>)> {
        matches!(self.status, Status::Acknowledged | Status::Processing | Status::Typing)
            .then(|| (self.status, self.data.stage.as_deref()))
    }

    /// Whether it is the `ready` status that ends a turn.
    pub fn ends_turn(&self) -> bool {
        self.status == Status::Ready && self.data.stage.as_deref() == Some(COMPLETED)
    }

    /// The status payload of a stored status event, if it has one.
    pub fn of(event: &Event) -> Option<Self> {
        (event.kind == EventKind::Status).then(|| serde_json::from_value(event.data.clone()).ok()).flatten()
    }
}

/// The stage of the `ready` status that ends a turn.
pub const COMPLETED: &str = "completed";

/// The details of a status event; each is present only where it applies.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct StatusDetail {
    /// `processing`: what the engine works on; the turn's last `ready`: `completed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<String>,
    /// `error`: why the turn failed, without secrets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exception: Option<String>,
    /// The last `ready`: the guidelines the reply followed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matched_guidelines: Option<Vec<IdRef>>,
    /// The last `ready`: the journeys active after the turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matched_journeys: Option<Vec<IdRef>>,
    /// The last `ready`: their states, as `journey.state`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matched_journey_states: Option<Vec<IdRef>>,
    /// The last `ready` of a degraded turn: the stages that lost work.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub degraded: Option<Value>,
    /// A progress status sent while a model works on the turn: how far it has come.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<TurnProgress>,
    /// Fields a client application gave a status event it posted, kept as given.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// How far a turn has come, on the progress statuses it sends while a model works on it
/// (`{"elapsed_ms": 14200, "model_calls": 3, "model": {"step": "reading", "done": 120,
/// "total": 537}}`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct TurnProgress {
    /// Milliseconds since the turn started.
    pub elapsed_ms: u64,
    /// Model calls the turn has finished.
    pub model_calls: u32,
    /// The model call under way, when its model says how far it has come.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelWork>,
}

/// How far a model call under way has come.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelWork {
    /// What it does.
    pub step: ModelStep,
    /// `reading`: prompt tokens read so far; `writing`: tokens written so far.
    pub done: u32,
    /// `reading`: the prompt tokens it reads (those not read by an earlier call); `writing`:
    /// the most it may write.
    pub total: u32,
}

/// What a model call under way does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModelStep {
    /// It waits for the model, busy with another call.
    Waiting,
    /// The model reads the prompt.
    Reading,
    /// The model writes the answer.
    Writing,
}

impl ModelWork {
    /// How far it has come, in words: `reading the prompt: 120 of 537 tokens`.
    pub fn describe(&self) -> String {
        match self.step {
            ModelStep::Waiting => "waiting for the model".to_string(),
            ModelStep::Reading => format!("reading the prompt: {} of {} tokens", self.done, self.total),
            ModelStep::Writing => format!("writing: {} tokens", self.done),
        }
    }
}

/// `{"id": ...}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdRef {
    /// The id.
    pub id: String,
}

/// Tools that ran, with what they were given and what they returned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolPayload {
    /// The calls, in order.
    pub tool_calls: Vec<ToolCallPayload>,
}

/// One tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallPayload {
    /// `service:name`.
    pub tool_id: String,
    /// The arguments.
    pub arguments: Map<String, Value>,
    /// The result envelope (data, metadata, control, canned fields).
    pub result: Value,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn payloads_serialize_to_the_sessions_api_shapes() {
        let status = |s: StatusPayload| EventPayload::Status(s).to_data();
        assert_eq!(status(StatusPayload::new(Status::Acknowledged)), json!({"status": "acknowledged", "data": {}}));
        assert_eq!(
            status(StatusPayload::processing(ProcessingStage::ConsideringTools)),
            json!({"status": "processing", "data": {"stage": "Considering tools"}})
        );
        assert_eq!(
            status(StatusPayload::error("the model is down")),
            json!({"status": "error", "data": {"exception": "the model is down"}})
        );
        assert_eq!(
            status(StatusPayload::completed_empty()).to_string(),
            r#"{"status":"ready","data":{"stage":"completed","matched_guidelines":[],"matched_journeys":[],"matched_journey_states":[]}}"#
        );
        let customer = MessagePayload::customer(Participant::new("guest", "Guest"), "Hi");
        assert_eq!(
            EventPayload::Message(customer).to_data().to_string(),
            r#"{"message":"Hi","participant":{"id":"guest","display_name":"Guest"},"flagged":false,"tags":[]}"#
        );
        let human = MessagePayload::new(Participant { id: None, display_name: "Sam".into() }, "Sam here");
        assert_eq!(
            EventPayload::Message(human).to_data(),
            json!({"message": "Sam here", "participant": {"id": null, "display_name": "Sam"}})
        );
        let mut streamed = MessagePayload::agent("otto", "Otto", "Hel");
        streamed.chunks = Some(vec![Some("Hel".into()), None]);
        streamed.degraded = Some(json!([{"stage": "matching"}]));
        assert_eq!(
            EventPayload::Message(streamed).to_data().to_string(),
            r#"{"message":"Hel","participant":{"id":"otto","display_name":"Otto"},"chunks":["Hel",null],"degraded":[{"stage":"matching"}]}"#
        );
        let mut arguments = Map::new();
        arguments.insert("city".into(), json!("Paris"));
        let call = ToolCallPayload { tool_id: "fixtures:get_weather".into(), arguments, result: json!({"data": 12}) };
        assert_eq!(
            EventPayload::Tool(ToolPayload { tool_calls: vec![call] }).to_data(),
            json!({"tool_calls": [{"tool_id": "fixtures:get_weather", "arguments": {"city": "Paris"}, "result": {"data": 12}}]})
        );
    }

    #[test]
    fn a_pulse_repeats_the_status_and_stage_with_how_far_the_turn_has_come() {
        let working = StatusPayload::processing(ProcessingStage::ConsideringTools);
        let progress = TurnProgress {
            elapsed_ms: 14_200,
            model_calls: 3,
            model: Some(ModelWork { step: ModelStep::Reading, done: 120, total: 537 }),
        };
        let pulse = working.with_progress(progress.clone());
        assert!(pulse.is_pulse() && !working.is_pulse());
        assert_eq!(pulse.progress(), working.progress());
        let data = EventPayload::Status(pulse.clone()).to_data();
        assert_eq!(
            data.to_string(),
            r#"{"status":"processing","data":{"stage":"Considering tools","progress":{"elapsed_ms":14200,"model_calls":3,"model":{"step":"reading","done":120,"total":537}}}}"#
        );
        let read: StatusPayload = serde_json::from_value(data).unwrap();
        assert_eq!(read, pulse);
        let typing = StatusPayload::new(Status::Typing).with_progress(TurnProgress { elapsed_ms: 1, ..progress });
        assert_eq!(
            EventPayload::Status(typing).to_data(),
            json!({"status": "typing", "data": {"progress": {"elapsed_ms": 1, "model_calls": 3, "model": {"step": "reading", "done": 120, "total": 537}}}})
        );
        assert_eq!(ModelWork { step: ModelStep::Writing, done: 12, total: 400 }.describe(), "writing: 12 tokens");
    }

    #[test]
    fn a_client_status_keeps_its_fields_in_their_order() {
        let given = json!({"zeta": 1, "stage": "custom", "alpha": [true]});
        let Value::Object(fields) = given.clone() else { unreachable!() };
        let posted =
            StatusPayload { status: Status::Typing, data: StatusDetail { other: fields, ..StatusDetail::default() } };
        assert_eq!(EventPayload::Status(posted).to_data(), json!({"status": "typing", "data": given}));
    }

    #[test]
    fn stored_statuses_read_back_with_their_progress() {
        let event = Event {
            id: "e".into(),
            source: crate::session::EventSource::AiAgent,
            kind: EventKind::Status,
            offset: 0,
            creation_utc: chrono::Utc::now(),
            trace_id: "t".into(),
            data: json!({"status": "processing", "data": {"stage": "Articulating"}}),
            metadata: Default::default(),
            deleted: false,
        };
        let read = StatusPayload::of(&event).unwrap();
        assert_eq!(read.progress(), Some((Status::Processing, Some("Articulating"))));
        let ready = StatusPayload::completed_empty();
        assert!(ready.ends_turn() && ready.progress().is_none());
        let not_status = Event { kind: EventKind::Message, ..event };
        assert_eq!(StatusPayload::of(&not_status), None);
    }
}
