//! `/guidelines`: condition-action rules and observations.

use axum::Json;
use axum::extract::Path;
use axum::response::Response;
use guidepost_core::{Endpoint, Guideline, Journey, Relationship, ToolId};
use guidepost_store::definitions::check_api_id;
use guidepost_store::{Record, Write};
use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::dto::{
    CompositionModeDto, CriticalityDto, GuidelineDto, LabelsUpdate, MetadataUpdate, TagsUpdate, ToolIdDto, non_empty,
};
use crate::error::ApiResult;
use crate::extract::{Body, Params};
use crate::routes::operation::{Operation, Param};
use crate::routes::relationships::{RelationshipDto, relationship_dto, touches};
use crate::routes::{created, no_content};
use crate::state::{AppState, State};

/// What this resource serves, each operation declared once (see [`crate::routes::operation`]).
pub fn operations() -> Vec<Operation> {
    vec![
        Operation::post("/guidelines", create, "create_guideline", "Creates a guideline")
            .body::<GuidelineCreationParams>()
            .creates::<GuidelineDto>(),
        Operation::get("/guidelines", list, "list_guidelines", "Lists guidelines")
            .query([Param::new("tag_id", "string", "Only those with this tag")])
            .answers::<Vec<GuidelineDto>>(),
        Operation::get(
            "/guidelines/{guideline_id}",
            read,
            "read_guideline",
            "Reads a guideline with its relationships and tools",
        )
        .answers::<GuidelineWithRelationshipsDto>(),
        Operation::patch("/guidelines/{guideline_id}", update, "update_guideline", "Changes a guideline")
            .body::<GuidelineUpdateParams>()
            .answers::<GuidelineWithRelationshipsDto>(),
        Operation::delete(
            "/guidelines/{guideline_id}",
            delete,
            "delete_guideline",
            "Deletes a guideline with its relationships",
        )
        .no_content(),
    ]
}

/// A new guideline.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct GuidelineCreationParams {
    /// Id (generated when absent).
    pub id: Option<String>,
    /// When it applies.
    pub condition: String,
    /// What the agent does; leave out for an observation.
    pub action: Option<String>,
    /// Extra context for the model.
    pub description: Option<String>,
    /// How much care it gets (default `medium`).
    pub criticality: Option<CriticalityDto>,
    /// Free-form metadata.
    pub metadata: Option<IndexMap<String, Value>>,
    /// Whether it is matched at all (default true).
    pub enabled: Option<bool>,
    /// Tag ids (`agent:<id>` ties it to one agent, `journey:<id>` to one journey).
    pub tags: Option<Vec<String>>,
    /// Composition mode while it is matched.
    pub composition_mode: Option<CompositionModeDto>,
    /// `false`: never treated as already applied (default true).
    pub track: Option<bool>,
    /// Labels copied onto sessions where it matched.
    pub labels: Option<Vec<String>>,
    /// Numeric priority (default 0).
    pub priority: Option<i32>,
}

/// Tools to associate and dissociate.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
pub struct ToolAssociationsUpdate {
    /// Tools to add.
    pub add: Option<Vec<ToolIdDto>>,
    /// Tools to remove.
    pub remove: Option<Vec<ToolIdDto>>,
}

/// Changes to a guideline.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct GuidelineUpdateParams {
    /// New condition.
    pub condition: Option<String>,
    /// New action.
    pub action: Option<String>,
    /// New description.
    pub description: Option<String>,
    /// New criticality.
    pub criticality: Option<CriticalityDto>,
    /// Tools to associate and dissociate.
    pub tool_associations: Option<ToolAssociationsUpdate>,
    /// Enable or disable.
    pub enabled: Option<bool>,
    /// Tags to add and remove.
    pub tags: Option<TagsUpdate>,
    /// Metadata keys to set and unset.
    pub metadata: Option<MetadataUpdate>,
    /// New composition mode.
    pub composition_mode: Option<CompositionModeDto>,
    /// Labels to add and remove.
    pub labels: Option<LabelsUpdate>,
    /// New priority.
    pub priority: Option<i32>,
}

/// A tool a guideline may call.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ToolAssociationDto {
    /// Id of the association.
    pub id: String,
    /// The guideline.
    pub guideline_id: String,
    /// The tool.
    pub tool_id: ToolIdDto,
}

/// A guideline with the relationships it takes part in and its tools.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct GuidelineWithRelationshipsDto {
    /// The guideline.
    pub guideline: GuidelineDto,
    /// Relationships it is a source or target of (directly or through its tags).
    pub relationships: Vec<RelationshipDto>,
    /// Tools it may call.
    pub tool_associations: Vec<ToolAssociationDto>,
}

fn association(g: &Guideline, tool: &ToolId) -> ToolAssociationDto {
    ToolAssociationDto {
        id: guidepost_core::ids::derive_id(&["tool-association", &g.id, &tool.to_string()]),
        guideline_id: g.id.clone(),
        tool_id: tool.into(),
    }
}

async fn with_relationships(state: &AppState, record: &Record<Guideline>) -> ApiResult<GuidelineWithRelationshipsDto> {
    let g = &record.entity;
    let mut relationships = Vec::new();
    for r in state.store.list::<Relationship>().await? {
        if touches(&r.entity, &Endpoint::Guideline(record.id.clone()), &g.tags) {
            relationships.push(relationship_dto(state, &r.entity).await?);
        }
    }
    Ok(GuidelineWithRelationshipsDto {
        guideline: dto(record),
        relationships,
        tool_associations: g.tools.iter().map(|t| association(g, t)).collect(),
    })
}

/// The wire form of a stored guideline.
pub fn dto(record: &Record<Guideline>) -> GuidelineDto {
    let mut d = GuidelineDto::from(&record.entity);
    d.id.clone_from(&record.id);
    d
}

/// `POST /guidelines`
pub async fn create(state: State, Body(params): Body<GuidelineCreationParams>) -> ApiResult<Response> {
    non_empty(&params.condition, "condition")?;
    let id = params.id.clone().unwrap_or_else(guidepost_store::ids::new_id);
    check_api_id(&id)?;
    let tags = params.tags.clone().unwrap_or_default();
    state.check_tags(&tags).await?;
    let g = Guideline {
        id: id.clone(),
        condition: params.condition,
        action: params.action.filter(|a| !a.trim().is_empty()),
        description: params.description,
        criticality: params.criticality.map(Into::into).unwrap_or_default(),
        enabled: params.enabled.unwrap_or(true),
        tags,
        labels: params.labels.unwrap_or_default(),
        metadata: params.metadata.unwrap_or_default(),
        priority: params.priority.unwrap_or(0),
        track: params.track.unwrap_or(true),
        tools: Vec::new(),
        composition_mode: params.composition_mode.map(Into::into),
        journey: None,
        canned_responses: Vec::new(),
        examples: Vec::new(),
    };
    let record = Record::new(id, g);
    state.store.apply(vec![Write::insert(&record)?]).await?;
    Ok(created(dto(&record)))
}

/// `GET /guidelines?tag_id=`
pub async fn list(state: State, params: Params) -> ApiResult<Json<Vec<GuidelineDto>>> {
    let tag = params.string("tag_id");
    let all = state.store.list::<Guideline>().await?;
    Ok(Json(all.iter().filter(|r| tag.as_ref().is_none_or(|t| r.entity.tags.contains(t))).map(dto).collect()))
}

/// `GET /guidelines/{guideline_id}`
pub async fn read(state: State, Path(id): Path<String>) -> ApiResult<Json<GuidelineWithRelationshipsDto>> {
    let record = state.store.require::<Guideline>(&id).await?;
    Ok(Json(with_relationships(&state, &record).await?))
}

/// `PATCH /guidelines/{guideline_id}`
pub async fn update(
    state: State,
    Path(id): Path<String>,
    Body(params): Body<GuidelineUpdateParams>,
) -> ApiResult<Json<GuidelineWithRelationshipsDto>> {
    if let Some(c) = &params.condition {
        non_empty(c, "condition")?;
    }
    if let Some(add) = params.tags.as_ref().and_then(|t| t.add.as_ref()) {
        state.check_tags(add).await?;
    }
    let record = state
        .store
        .update::<Guideline>(&id, |r| {
            let g = &mut r.entity;
            if let Some(v) = &params.condition {
                g.condition.clone_from(v);
            }
            if let Some(v) = &params.action {
                g.action = Some(v.clone()).filter(|a| !a.trim().is_empty());
            }
            if let Some(v) = &params.description {
                g.description = Some(v.clone());
            }
            if let Some(v) = params.criticality {
                g.criticality = v.into();
            }
            if let Some(u) = &params.tool_associations {
                for t in u.add.iter().flatten() {
                    let t = ToolId::from(t);
                    if !g.tools.contains(&t) {
                        g.tools.push(t);
                    }
                }
                for t in u.remove.iter().flatten() {
                    let t = ToolId::from(t);
                    g.tools.retain(|x| *x != t);
                }
            }
            if let Some(v) = params.enabled {
                g.enabled = v;
            }
            if let Some(u) = &params.tags {
                u.apply(&mut g.tags);
            }
            if let Some(u) = &params.metadata {
                u.apply(&mut g.metadata);
            }
            if let Some(v) = params.composition_mode {
                g.composition_mode = Some(v.into());
            }
            if let Some(u) = &params.labels {
                u.apply(&mut g.labels);
            }
            if let Some(v) = params.priority {
                g.priority = v;
            }
            Ok(())
        })
        .await?;
    Ok(Json(with_relationships(&state, &record).await?))
}

/// `DELETE /guidelines/{guideline_id}`: with the relationships it takes part in, and out
/// of the conditions of any journey it starts.
pub async fn delete(state: State, Path(id): Path<String>) -> ApiResult<Response> {
    state.store.require::<Guideline>(&id).await?;
    let mut writes = vec![Write::delete::<Guideline>(&id)];
    let endpoint = Endpoint::Guideline(id.clone());
    for r in state.store.list::<Relationship>().await? {
        if r.entity.source == endpoint || r.entity.target == endpoint {
            writes.push(Write::delete::<Relationship>(&r.id));
        }
    }
    for mut j in state.store.list::<Journey>().await? {
        if j.entity.conditions.iter().any(|c| c.id == id) {
            j.entity.conditions.retain(|c| c.id != id);
            writes.push(Write::replace(&j)?);
        }
    }
    state.store.apply(writes).await?;
    Ok(no_content())
}
