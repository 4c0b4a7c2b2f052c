//! `/journeys`: multi-step flows. The reference API manages only a journey's conditions;
//! Guidepost also exposes its states and transitions (in [`super::journey_states`]), so a
//! journey can be built and changed while the server runs, and draws it
//! (`/journeys/{id}/mermaid`, or `?include_mermaid_chart=true`).

use axum::Json;
use axum::extract::Path;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use guidepost_core::graph::{Format, journey_diagram};
use guidepost_core::journey::JourneyCondition;
use guidepost_core::{Endpoint, Guideline, Journey, Relationship};
use guidepost_store::definitions::{CONDITION_OF, check_api_id, condition_guideline, journey_tag};
use guidepost_store::{Record, Write};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::dto::{CompositionModeDto, LabelsUpdate, TagsUpdate, non_empty};
use crate::error::{ApiError, ApiResult, FieldError};
use crate::extract::{Body, Params};
use crate::routes::operation::{self, Operation, Param};
use crate::routes::{created, no_content};
use crate::state::State;

/// What this resource serves, each operation declared once (see [`crate::routes::operation`]).
pub fn operations() -> Vec<Operation> {
    vec![
        Operation::post("/journeys", create, "create_journey", "Creates a journey from condition texts")
            .body::<JourneyCreationParams>()
            .creates::<JourneyDto>(),
        Operation::get("/journeys", list, "list_journeys", "Lists journeys")
            .query([Param::new("tag_id", "string", "Only those with this tag")])
            .answers::<Vec<JourneyDto>>(),
        Operation::get(
            "/journeys/{journey_id}",
            read,
            "read_journey",
            "Reads a journey (with its Mermaid diagram on request)",
        )
        .query([Param::new("include_mermaid_chart", "boolean", "Add mermaid_chart")])
        .answers::<JourneyDto>(),
        Operation::patch("/journeys/{journey_id}", update, "update_journey", "Changes a journey")
            .body::<JourneyUpdateParams>()
            .answers::<JourneyDto>(),
        Operation::delete(
            "/journeys/{journey_id}",
            delete,
            "delete_journey",
            "Deletes a journey with its conditions and scoped guidelines",
        )
        .no_content(),
        Operation::get(
            "/journeys/{journey_id}/mermaid",
            mermaid,
            "journey_mermaid",
            "The journey as a Mermaid state diagram",
        )
        .content(operation::text),
    ]
}

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
