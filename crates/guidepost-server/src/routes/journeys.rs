//! `/journeys`: multi-step flows. The reference API manages only a journey's conditions;
//! Guidepost also exposes its states and transitions (`/journeys/{id}/states`,
//! `/journeys/{id}/transitions`), so a journey can be built and changed while the server
//! runs, and draws it (`/journeys/{id}/mermaid`, or `?include_mermaid_chart=true`).

use axum::Json;
use axum::extract::Path;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use guidepost_core::graph::{Format, journey_diagram};
use guidepost_core::journey::{END_STATE, JourneyCondition, START_STATE};
use guidepost_core::{Endpoint, Guideline, Journey, JourneyState, Relationship, StateKind, ToolId, Transition};
use guidepost_store::definitions::{CONDITION_OF, check_api_id, condition_guideline, journey_tag};
use guidepost_store::{Record, Write};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::dto::{CompositionModeDto, LabelsUpdate, TagsUpdate, ToolIdDto, non_empty};
use crate::error::{ApiError, ApiResult, FieldError};
use crate::extract::{Body, Params};
use crate::routes::{created, no_content};
use crate::state::State;

/// A journey.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct JourneyDto {
    /// Id.
    pub id: String,
    /// Title.
    pub title: String,
    /// What it is for.
    pub description: String,
    /// Ids of the observation guidelines that start it.
    pub conditions: Vec<String>,
    /// Tag ids.
    pub tags: Vec<String>,
    /// Composition mode while it is active.
    pub composition_mode: Option<CompositionModeDto>,
    /// Labels copied onto sessions where it is active.
    pub labels: Vec<String>,
    /// Numeric priority.
    pub priority: i32,
    /// The Mermaid diagram (only with `include_mermaid_chart=true`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mermaid_chart: Option<String>,
}

fn dto(j: &Journey) -> JourneyDto {
    JourneyDto {
        id: j.id.clone(),
        title: j.title.clone(),
        description: j.description.clone().unwrap_or_default(),
        conditions: j.conditions.iter().map(|c| c.id.clone()).collect(),
        tags: j.tags.clone(),
        composition_mode: j.composition_mode.map(Into::into),
        labels: j.labels.clone(),
        priority: j.priority,
        mermaid_chart: None,
    }
}

/// A new journey.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct JourneyCreationParams {
    /// Title.
    pub title: String,
    /// What it is for.
    pub description: String,
    /// Condition texts; each becomes an observation guideline whose id is listed.
    pub conditions: Vec<String>,
    /// Id (generated when absent).
    pub id: Option<String>,
    /// Tag ids.
    pub tags: Option<Vec<String>>,
    /// Composition mode while it is active.
    pub composition_mode: Option<CompositionModeDto>,
    /// Labels.
    pub labels: Option<Vec<String>>,
    /// Numeric priority (default 0).
    pub priority: Option<i32>,
}

/// Conditions to add and remove (guideline ids).
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
pub struct ConditionsUpdate {
    /// Guideline ids to add.
    pub add: Option<Vec<String>>,
    /// Guideline ids to remove.
    pub remove: Option<Vec<String>>,
}

/// Changes to a journey.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct JourneyUpdateParams {
    /// New title.
    pub title: Option<String>,
    /// New description.
    pub description: Option<String>,
    /// Conditions to add and remove.
    pub conditions: Option<ConditionsUpdate>,
    /// Tags to add and remove.
    pub tags: Option<TagsUpdate>,
    /// New composition mode.
    pub composition_mode: Option<CompositionModeDto>,
    /// Labels to add and remove.
    pub labels: Option<LabelsUpdate>,
    /// New priority.
    pub priority: Option<i32>,
}

/// `POST /journeys`
pub async fn create(state: State, Body(params): Body<JourneyCreationParams>) -> ApiResult<Response> {
    non_empty(&params.title, "title")?;
    let id = params.id.clone().unwrap_or_else(guidepost_store::ids::new_id);
    check_api_id(&id)?;
    let tags = params.tags.clone().unwrap_or_default();
    state.check_tags(&tags).await?;
    let mut writes = Vec::new();
    let mut conditions = Vec::new();
    for (i, text) in params.conditions.iter().enumerate() {
        if text.trim().is_empty() {
            return Err(ApiError::invalid(FieldError::new(
                vec![json!("body"), json!("conditions"), json!(i)],
                "string_too_short",
                "String should have at least 1 character",
            )));
        }
        let gid = guidepost_store::ids::new_id();
        let mut extra = serde_json::Map::new();
        extra.insert(CONDITION_OF.into(), Value::String(id.clone()));
        let g = condition_guideline(&gid, text, vec![journey_tag(&id)]);
        writes.push(Write::insert(&Record::new(gid.clone(), g).with_extra(extra))?);
        conditions.push(JourneyCondition { id: gid, condition: text.clone() });
    }
    let journey = Journey {
        id: id.clone(),
        title: params.title,
        description: Some(params.description),
        conditions,
        tags,
        labels: params.labels.unwrap_or_default(),
        priority: params.priority.unwrap_or(0),
        composition_mode: params.composition_mode.map(Into::into),
        states: Vec::new(),
        transitions: Vec::new(),
    };
    writes.push(Write::insert(&Record::new(id, journey.clone()))?);
    state.store.apply(writes).await?;
    Ok(created(dto(&journey)))
}

/// `GET /journeys?tag_id=`
pub async fn list(state: State, params: Params) -> ApiResult<Json<Vec<JourneyDto>>> {
    let tag = params.string("tag_id");
    let all = state.store.list::<Journey>().await?;
    Ok(Json(
        all.iter().filter(|r| tag.as_ref().is_none_or(|t| r.entity.tags.contains(t))).map(|r| dto(&r.entity)).collect(),
    ))
}

/// `GET /journeys/{journey_id}?include_mermaid_chart=`
pub async fn read(state: State, Path(id): Path<String>, params: Params) -> ApiResult<Json<JourneyDto>> {
    let journey = state.store.require::<Journey>(&id).await?.entity;
    let mut d = dto(&journey);
    if params.boolean("include_mermaid_chart")?.unwrap_or(false) {
        d.mermaid_chart = Some(journey_diagram(&journey, Format::Mermaid));
    }
    Ok(Json(d))
}

/// `GET /journeys/{journey_id}/mermaid`: the journey as a Mermaid `stateDiagram-v2`.
pub async fn mermaid(state: State, Path(id): Path<String>) -> ApiResult<Response> {
    let journey = state.store.require::<Journey>(&id).await?.entity;
    Ok(([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], journey_diagram(&journey, Format::Mermaid))
        .into_response())
}

/// `PATCH /journeys/{journey_id}`
pub async fn update(
    state: State,
    Path(id): Path<String>,
    Body(params): Body<JourneyUpdateParams>,
) -> ApiResult<Json<JourneyDto>> {
    if let Some(add) = params.tags.as_ref().and_then(|t| t.add.as_ref()) {
        state.check_tags(add).await?;
    }
    let mut added: Vec<Record<Guideline>> = Vec::new();
    for gid in params.conditions.iter().flat_map(|c| c.add.iter().flatten()) {
        added.push(state.store.require::<Guideline>(gid).await?);
    }
    let removed: Vec<String> = params.conditions.iter().flat_map(|c| c.remove.iter().flatten()).cloned().collect();
    let mut journey = state.store.require::<Journey>(&id).await?;
    let j = &mut journey.entity;
    if let Some(v) = &params.title {
        non_empty(v, "title")?;
        j.title.clone_from(v);
    }
    if let Some(v) = &params.description {
        j.description = Some(v.clone());
    }
    if let Some(u) = &params.tags {
        u.apply(&mut j.tags);
    }
    if let Some(v) = params.composition_mode {
        j.composition_mode = Some(v.into());
    }
    if let Some(u) = &params.labels {
        u.apply(&mut j.labels);
    }
    if let Some(v) = params.priority {
        j.priority = v;
    }
    let mut writes = Vec::new();
    for mut g in added {
        if !j.conditions.iter().any(|c| c.id == g.id) {
            j.conditions.push(JourneyCondition { id: g.id.clone(), condition: g.entity.condition.clone() });
        }
        let tag = journey_tag(&id);
        if !g.entity.tags.contains(&tag) {
            g.entity.tags.push(tag);
            writes.push(Write::replace(&g)?);
        }
    }
    for gid in &removed {
        j.conditions.retain(|c| c.id != *gid);
        if let Some(mut g) = state.store.get::<Guideline>(gid).await? {
            let elsewhere = state
                .store
                .list::<Journey>()
                .await?
                .iter()
                .any(|other| other.id != id && other.entity.conditions.iter().any(|c| c.id == *gid));
            if g.extra.get(CONDITION_OF).and_then(Value::as_str) == Some(id.as_str()) && !elsewhere {
                writes.push(Write::delete::<Guideline>(gid));
            } else {
                g.entity.tags.retain(|t| *t != journey_tag(&id));
                writes.push(Write::replace(&g)?);
            }
        }
    }
    writes.push(Write::replace(&journey)?);
    state.store.apply(writes).await?;
    Ok(Json(dto(&state.store.require::<Journey>(&id).await?.entity)))
}

/// `DELETE /journeys/{journey_id}`: with the condition guidelines created for it and the
/// guidelines scoped only to it (guidelines with other tags, or that another journey
/// starts on, lose the journey's tag instead), and the relationships it takes part in. A
/// journey another journey runs inline cannot be deleted (409).
pub async fn delete(state: State, Path(id): Path<String>) -> ApiResult<Response> {
    state.store.require::<Journey>(&id).await?;
    let journeys = state.store.list::<Journey>().await?;
    let runners: Vec<&str> = journeys
        .iter()
        .filter(|j| j.id != id && j.entity.sub_journeys().any(|s| s == id))
        .map(|j| j.id.as_str())
        .collect();
    if !runners.is_empty() {
        return Err(ApiError::Conflict(format!(
            "journey `{id}` is run inline by {}: change those first",
            runners.join(", ")
        )));
    }
    let mut writes = vec![Write::delete::<Journey>(&id)];
    let tag = journey_tag(&id);
    for mut g in state.store.list::<Guideline>().await? {
        let starts_another = journeys.iter().any(|j| j.id != id && j.entity.conditions.iter().any(|c| c.id == g.id));
        let created_for_it = g.extra.get(CONDITION_OF).and_then(Value::as_str) == Some(id.as_str());
        let tagged = g.entity.tags.contains(&tag);
        if !created_for_it && !tagged {
            continue;
        }
        let other_tags = g.entity.tags.iter().any(|t| *t != tag);
        if starts_another || (other_tags && !created_for_it) {
            g.entity.tags.retain(|t| *t != tag);
            writes.push(Write::replace(&g)?);
        } else {
            writes.push(Write::delete::<Guideline>(&g.id));
        }
    }
    let endpoint = Endpoint::Journey(id.clone());
    for r in state.store.list::<Relationship>().await? {
        if r.entity.source == endpoint || r.entity.target == endpoint {
            writes.push(Write::delete::<Relationship>(&r.id));
        }
    }
    state.store.apply(writes).await?;
    Ok(no_content())
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
