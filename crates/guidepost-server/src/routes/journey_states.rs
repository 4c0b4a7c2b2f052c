//! `/journeys/{journey_id}/states` and `/journeys/{journey_id}/transitions` (Guidepost's
//! extension): a journey's graph, built and changed while the server runs.

use axum::Json;
use axum::extract::Path;
use axum::response::Response;
use guidepost_core::journey::{END_STATE, START_STATE};
use guidepost_core::{Journey, JourneyState, StateKind, ToolId, Transition};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::dto::{CompositionModeDto, ToolIdDto};
use crate::error::{ApiError, ApiResult, FieldError};
use crate::extract::Body;
use crate::routes::operation::Operation;
use crate::routes::{created, no_content};
use crate::state::State;

/// What this resource serves, each operation declared once (see [`crate::routes::operation`]).
pub fn operations() -> Vec<Operation> {
    vec![
        Operation::get("/journeys/{journey_id}/states", list_states, "list_journey_states", "Lists a journey's states")
            .answers::<Vec<JourneyStateDto>>()
            .extension(),
        Operation::post(
            "/journeys/{journey_id}/states",
            create_state,
            "create_journey_state",
            "Adds a state to a journey",
        )
        .body::<JourneyStateParams>()
        .creates::<JourneyStateDto>()
        .extension(),
        Operation::get(
            "/journeys/{journey_id}/states/{state_id}",
            read_state,
            "read_journey_state",
            "Reads a journey state",
        )
        .answers::<JourneyStateDto>()
        .extension(),
        Operation::put(
            "/journeys/{journey_id}/states/{state_id}",
            replace_state,
            "replace_journey_state",
            "Replaces a journey state",
        )
        .body::<JourneyStateParams>()
        .answers::<JourneyStateDto>()
        .extension(),
        Operation::delete(
            "/journeys/{journey_id}/states/{state_id}",
            delete_state,
            "delete_journey_state",
            "Deletes a journey state with its transitions",
        )
        .no_content()
        .extension(),
        Operation::get(
            "/journeys/{journey_id}/transitions",
            list_transitions,
            "list_journey_transitions",
            "Lists a journey's transitions",
        )
        .answers::<Vec<TransitionDto>>()
        .extension(),
        Operation::post(
            "/journeys/{journey_id}/transitions",
            create_transition,
            "create_journey_transition",
            "Adds a transition",
        )
        .body::<TransitionParams>()
        .creates::<TransitionDto>()
        .extension(),
        Operation::delete(
            "/journeys/{journey_id}/transitions/{transition_id}",
            delete_transition,
            "delete_journey_transition",
            "Deletes a transition",
        )
        .no_content()
        .extension(),
    ]
}

/// What a state does, on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StateKindDto {
    /// Say something.
    Chat,
    /// Call tools.
    Tool,
    /// Route only.
    Fork,
    /// Run another journey inline.
    Journey,
}

/// A journey state (extension).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct JourneyStateDto {
    /// Id, unique within the journey.
    pub id: String,
    /// What it does.
    pub kind: StateKindDto,
    /// What to say (chat states).
    pub action: Option<String>,
    /// Tools to call (tool states).
    pub tools: Vec<ToolIdDto>,
    /// How to call them (tool states).
    pub instruction: Option<String>,
    /// The journey to run (journey states).
    pub journey: Option<String>,
    /// Extra context for the model.
    pub description: Option<String>,
    /// Labels copied onto sessions that reach it.
    pub labels: Vec<String>,
    /// Composition mode while it is current.
    pub composition_mode: Option<CompositionModeDto>,
}

fn state_dto(s: &JourneyState) -> JourneyStateDto {
    let (kind, action, tools, instruction, journey) = match &s.kind {
        StateKind::Chat { action } => (StateKindDto::Chat, Some(action.clone()), Vec::new(), None, None),
        StateKind::Tool { tools, instruction } => {
            (StateKindDto::Tool, None, tools.iter().map(Into::into).collect(), instruction.clone(), None)
        }
        StateKind::Fork => (StateKindDto::Fork, None, Vec::new(), None, None),
        StateKind::Journey { journey } => (StateKindDto::Journey, None, Vec::new(), None, Some(journey.clone())),
    };
    JourneyStateDto {
        id: s.id.clone(),
        kind,
        action,
        tools,
        instruction,
        journey,
        description: s.description.clone(),
        labels: s.labels.clone(),
        composition_mode: s.composition_mode.map(Into::into),
    }
}

/// A new journey state, or a state's replacement.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct JourneyStateParams {
    /// Id (generated when absent on creation).
    pub id: Option<String>,
    /// What it does.
    pub kind: StateKindDto,
    /// What to say (required for chat states).
    pub action: Option<String>,
    /// Tools to call (required for tool states).
    pub tools: Option<Vec<ToolIdDto>>,
    /// How to call them.
    pub instruction: Option<String>,
    /// The journey to run (required for journey states).
    pub journey: Option<String>,
    /// Extra context for the model.
    pub description: Option<String>,
    /// Labels.
    pub labels: Option<Vec<String>>,
    /// Composition mode while it is current.
    pub composition_mode: Option<CompositionModeDto>,
}

/// Whether running `from` inline would, through its journey states, run `target` again.
async fn runs_inline(state: &crate::state::AppState, from: &str, target: &str) -> ApiResult<bool> {
    let all = state.store.list::<Journey>().await?;
    let mut stack = vec![from.to_string()];
    let mut seen = std::collections::HashSet::new();
    while let Some(id) = stack.pop() {
        if id == target {
            return Ok(true);
        }
        if !seen.insert(id.clone()) {
            continue;
        }
        if let Some(j) = all.iter().find(|r| r.id == id) {
            stack.extend(j.entity.sub_journeys().map(str::to_string));
        }
    }
    Ok(false)
}

async fn build_state(
    state: &crate::state::AppState,
    journey_id: &str,
    id: String,
    p: &JourneyStateParams,
) -> ApiResult<JourneyState> {
    let kind = match p.kind {
        StateKindDto::Chat => match p.action.as_deref().filter(|a| !a.trim().is_empty()) {
            Some(action) => StateKind::Chat { action: action.to_string() },
            None => {
                return Err(ApiError::invalid(FieldError::body(
                    &["action"],
                    "missing",
                    "a chat state needs an action",
                )));
            }
        },
        StateKindDto::Tool => match p.tools.as_ref().filter(|t| !t.is_empty()) {
            Some(tools) => {
                StateKind::Tool { tools: tools.iter().map(ToolId::from).collect(), instruction: p.instruction.clone() }
            }
            None => return Err(ApiError::invalid(FieldError::body(&["tools"], "missing", "a tool state needs tools"))),
        },
        StateKindDto::Fork => StateKind::Fork,
        StateKindDto::Journey => match &p.journey {
            Some(j) => {
                state.store.require::<Journey>(j).await?;
                if runs_inline(state, j, journey_id).await? {
                    return Err(ApiError::invalid(
                        FieldError::body(
                            &["journey"],
                            "value_error",
                            format!("journey `{j}` runs `{journey_id}` inline (directly or through others): that would never end"),
                        )
                        .with_input(json!(j)),
                    ));
                }
                StateKind::Journey { journey: j.clone() }
            }
            None => {
                return Err(ApiError::invalid(FieldError::body(
                    &["journey"],
                    "missing",
                    "a journey state needs a journey",
                )));
            }
        },
    };
    Ok(JourneyState {
        id,
        kind,
        description: p.description.clone(),
        canned_responses: Vec::new(),
        composition_mode: p.composition_mode.map(Into::into),
        labels: p.labels.clone().unwrap_or_default(),
        metadata: Default::default(),
    })
}

/// `GET /journeys/{journey_id}/states` (extension)
pub async fn list_states(state: State, Path(id): Path<String>) -> ApiResult<Json<Vec<JourneyStateDto>>> {
    let journey = state.store.require::<Journey>(&id).await?.entity;
    Ok(Json(journey.states.iter().map(state_dto).collect()))
}

/// `POST /journeys/{journey_id}/states` (extension)
pub async fn create_state(
    state: State,
    Path(id): Path<String>,
    Body(params): Body<JourneyStateParams>,
) -> ApiResult<Response> {
    let sid = params.id.clone().unwrap_or_else(guidepost_store::ids::new_id);
    if !guidepost_core::ids::is_valid_id(&sid) || sid == START_STATE || sid == END_STATE {
        return Err(ApiError::invalid(
            FieldError::body(
                &["id"],
                "value_error",
                "a state id has no spaces, `:` or `/`, and is not `initial` or `end`",
            )
            .with_input(json!(sid)),
        ));
    }
    let new_state = build_state(&state, &id, sid.clone(), &params).await?;
    let record = state
        .store
        .update::<Journey>(&id, |r| {
            if r.entity.state(&sid).is_some() {
                return Err(guidepost_store::StoreError::AlreadyExists { kind: "journey state", id: sid.clone() });
            }
            r.entity.states.push(new_state.clone());
            Ok(())
        })
        .await?;
    let s = record.entity.state(&sid).map(state_dto).ok_or_else(|| ApiError::Internal("state vanished".into()))?;
    Ok(created(s))
}

/// `GET /journeys/{journey_id}/states/{state_id}` (extension)
pub async fn read_state(state: State, Path((id, sid)): Path<(String, String)>) -> ApiResult<Json<JourneyStateDto>> {
    let journey = state.store.require::<Journey>(&id).await?.entity;
    journey.state(&sid).map(|s| Json(state_dto(s))).ok_or(ApiError::NotFound { kind: "journey state", id: sid })
}

/// `PUT /journeys/{journey_id}/states/{state_id}` (extension): replaces the state.
pub async fn replace_state(
    state: State,
    Path((id, sid)): Path<(String, String)>,
    Body(params): Body<JourneyStateParams>,
) -> ApiResult<Json<JourneyStateDto>> {
    let new_state = build_state(&state, &id, sid.clone(), &params).await?;
    let record = state
        .store
        .update::<Journey>(&id, |r| match r.entity.states.iter_mut().find(|s| s.id == sid) {
            Some(s) => {
                let canned = std::mem::take(&mut s.canned_responses);
                *s = JourneyState { canned_responses: canned, ..new_state.clone() };
                Ok(())
            }
            None => Err(guidepost_store::StoreError::NotFound { kind: "journey state", id: sid.clone() }),
        })
        .await?;
    record.entity.state(&sid).map(|s| Json(state_dto(s))).ok_or(ApiError::NotFound { kind: "journey state", id: sid })
}

/// `DELETE /journeys/{journey_id}/states/{state_id}` (extension): with its transitions.
pub async fn delete_state(state: State, Path((id, sid)): Path<(String, String)>) -> ApiResult<Response> {
    state
        .store
        .update::<Journey>(&id, |r| {
            if r.entity.state(&sid).is_none() {
                return Err(guidepost_store::StoreError::NotFound { kind: "journey state", id: sid.clone() });
            }
            r.entity.states.retain(|s| s.id != sid);
            r.entity.transitions.retain(|t| t.from != sid && t.to != sid);
            Ok(())
        })
        .await?;
    Ok(no_content())
}

/// A transition (extension).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct TransitionDto {
    /// Id, unique within the journey.
    pub id: String,
    /// Source state (`initial` for the start).
    pub from: String,
    /// Target state (`end` to finish the journey).
    pub to: String,
    /// When it is taken; absent: once the source state is done.
    pub condition: Option<String>,
}

impl From<&Transition> for TransitionDto {
    fn from(t: &Transition) -> Self {
        Self { id: t.id.clone(), from: t.from.clone(), to: t.to.clone(), condition: t.condition.clone() }
    }
}

/// A new transition.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct TransitionParams {
    /// Id (generated when absent).
    pub id: Option<String>,
    /// Source state (`initial` for the start).
    pub from: String,
    /// Target state (`end` to finish the journey).
    pub to: String,
    /// When it is taken.
    pub condition: Option<String>,
}

/// `GET /journeys/{journey_id}/transitions` (extension)
pub async fn list_transitions(state: State, Path(id): Path<String>) -> ApiResult<Json<Vec<TransitionDto>>> {
    let journey = state.store.require::<Journey>(&id).await?.entity;
    Ok(Json(journey.transitions.iter().map(Into::into).collect()))
}

/// `POST /journeys/{journey_id}/transitions` (extension)
pub async fn create_transition(
    state: State,
    Path(id): Path<String>,
    Body(params): Body<TransitionParams>,
) -> ApiResult<Response> {
    let record = state.store.require::<Journey>(&id).await?;
    let j = &record.entity;
    if params.from != START_STATE && j.state(&params.from).is_none() {
        return Err(ApiError::invalid(
            FieldError::body(&["from"], "value_error", format!("journey `{id}` has no state `{}`", params.from))
                .with_input(json!(params.from)),
        ));
    }
    if params.to != END_STATE && j.state(&params.to).is_none() {
        return Err(ApiError::invalid(
            FieldError::body(&["to"], "value_error", format!("journey `{id}` has no state `{}`", params.to))
                .with_input(json!(params.to)),
        ));
    }
    let tid = params.id.clone().unwrap_or_else(|| format!("edge_{}", guidepost_store::ids::new_id()));
    let transition = Transition {
        id: tid.clone(),
        from: params.from,
        to: params.to,
        condition: params.condition.filter(|c| !c.trim().is_empty()),
    };
    state
        .store
        .update::<Journey>(&id, |r| {
            if r.entity.transitions.iter().any(|t| t.id == tid) {
                return Err(guidepost_store::StoreError::AlreadyExists { kind: "transition", id: tid.clone() });
            }
            r.entity.transitions.push(transition.clone());
            Ok(())
        })
        .await?;
    Ok(created(TransitionDto::from(&transition)))
}

/// `DELETE /journeys/{journey_id}/transitions/{transition_id}` (extension)
pub async fn delete_transition(state: State, Path((id, tid)): Path<(String, String)>) -> ApiResult<Response> {
    state
        .store
        .update::<Journey>(&id, |r| {
            if !r.entity.transitions.iter().any(|t| t.id == tid) {
                return Err(guidepost_store::StoreError::NotFound { kind: "transition", id: tid.clone() });
            }
            r.entity.transitions.retain(|t| t.id != tid);
            Ok(())
        })
        .await?;
    Ok(no_content())
}
