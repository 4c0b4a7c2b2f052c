//! `/capabilities`: what agents can do, offered when a customer seems to want it.

use axum::Json;
use axum::extract::Path;
use axum::response::Response;
use guidepost_core::Capability;
use guidepost_store::{Record, Write};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::dto::{TagsUpdate, non_empty};
use crate::error::ApiResult;
use crate::extract::{Body, Params};
use crate::routes::operation::{Operation, Param};
use crate::routes::{created, no_content};
use crate::state::State;

/// What this resource serves, each operation declared once (see [`crate::routes::operation`]).
pub fn operations() -> Vec<Operation> {
    vec![
        Operation::post("/capabilities", create, "create_capability", "Adds a capability")
            .body::<CapabilityCreationParams>()
            .creates::<CapabilityDto>(),
        Operation::get("/capabilities", list, "list_capabilities", "Lists capabilities")
            .query([Param::new("tag_id", "string", "Only those with this tag")])
            .answers::<Vec<CapabilityDto>>(),
        Operation::get("/capabilities/{capability_id}", read, "read_capability", "Reads a capability")
            .answers::<CapabilityDto>(),
        Operation::patch("/capabilities/{capability_id}", update, "update_capability", "Changes a capability")
            .body::<CapabilityUpdateParams>()
            .answers::<CapabilityDto>(),
        Operation::delete("/capabilities/{capability_id}", delete, "delete_capability", "Deletes a capability")
            .no_content(),
    ]
}

/// A capability.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct CapabilityDto {
    /// Id.
    pub id: String,
    /// Short title.
    pub title: String,
    /// What the agent can do.
    pub description: String,
    /// Phrases that signal a customer wants it.
    pub signals: Vec<String>,
    /// Tag ids.
    pub tags: Vec<String>,
}

impl From<&Capability> for CapabilityDto {
    fn from(c: &Capability) -> Self {
        Self {
            id: c.id.clone(),
            title: c.title.clone(),
            description: c.description.clone(),
            signals: c.signals.clone(),
            tags: c.tags.clone(),
        }
    }
}

/// A new capability.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct CapabilityCreationParams {
    /// Short title.
    pub title: String,
    /// What the agent can do.
    pub description: String,
    /// Phrases that signal a customer wants it.
    pub signals: Vec<String>,
    /// Tag ids.
    pub tags: Option<Vec<String>>,
}

/// Changes to a capability.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct CapabilityUpdateParams {
    /// New title.
    pub title: Option<String>,
    /// New description.
    pub description: Option<String>,
    /// New signals.
    pub signals: Option<Vec<String>>,
    /// Tags to add and remove.
    pub tags: Option<TagsUpdate>,
}

/// `POST /capabilities`
pub async fn create(state: State, Body(params): Body<CapabilityCreationParams>) -> ApiResult<Response> {
    non_empty(&params.title, "title")?;
    let tags = params.tags.clone().unwrap_or_default();
    state.check_tags(&tags).await?;
    let id = guidepost_store::ids::new_id();
    let c = Capability {
        id: id.clone(),
        title: params.title,
        description: params.description,
        signals: params.signals,
        tags,
    };
    state.store.apply(vec![Write::insert(&Record::new(id, c.clone()))?]).await?;
    Ok(created(CapabilityDto::from(&c)))
}

/// `GET /capabilities?tag_id=`
pub async fn list(state: State, params: Params) -> ApiResult<Json<Vec<CapabilityDto>>> {
    let tag = params.string("tag_id");
    let all = state.store.list::<Capability>().await?;
    Ok(Json(
        all.iter()
            .filter(|r| tag.as_ref().is_none_or(|t| r.entity.tags.contains(t)))
            .map(|r| CapabilityDto::from(&r.entity))
            .collect(),
    ))
}

/// `GET /capabilities/{capability_id}`
pub async fn read(state: State, Path(id): Path<String>) -> ApiResult<Json<CapabilityDto>> {
    Ok(Json(CapabilityDto::from(&state.store.require::<Capability>(&id).await?.entity)))
}

/// `PATCH /capabilities/{capability_id}`
pub async fn update(
    state: State,
    Path(id): Path<String>,
    Body(params): Body<CapabilityUpdateParams>,
) -> ApiResult<Json<CapabilityDto>> {
    if let Some(add) = params.tags.as_ref().and_then(|t| t.add.as_ref()) {
        state.check_tags(add).await?;
    }
    let record = state
        .store
        .update::<Capability>(&id, |r| {
            let c = &mut r.entity;
            if let Some(v) = &params.title {
                c.title.clone_from(v);
            }
            if let Some(v) = &params.description {
                c.description.clone_from(v);
            }
            if let Some(v) = &params.signals {
                c.signals.clone_from(v);
            }
            if let Some(u) = &params.tags {
                u.apply(&mut c.tags);
            }
            Ok(())
        })
        .await?;
    Ok(Json(CapabilityDto::from(&record.entity)))
}

/// `DELETE /capabilities/{capability_id}`
pub async fn delete(state: State, Path(id): Path<String>) -> ApiResult<Response> {
    state.store.delete::<Capability>(&id).await?;
    Ok(no_content())
}
