//! `/canned_responses`: approved reply templates.

use axum::Json;
use axum::extract::Path;
use axum::response::Response;
use guidepost_core::CannedResponse;
use guidepost_core::knowledge::CannedField;
use guidepost_store::{Record, Write};
use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::dto::{MetadataUpdate, TagsUpdate, non_empty};
use crate::error::ApiResult;
use crate::extract::{Body, Params};
use crate::routes::operation::{Operation, Param};
use crate::routes::{created, no_content};
use crate::state::State;

/// What this resource serves, each operation declared once (see [`crate::routes::operation`]).
pub fn operations() -> Vec<Operation> {
    vec![
        Operation::post("/canned_responses", create, "create_canned_response", "Adds an approved reply template")
            .body::<CannedResponseCreationParams>()
            .creates::<CannedResponseDto>(),
        Operation::get("/canned_responses", list, "list_canned_responses", "Lists canned responses")
            .query([Param::new("tags", "string", "Only those with every given tag (repeatable)")])
            .answers::<Vec<CannedResponseDto>>(),
        Operation::get(
            "/canned_responses/{canned_response_id}",
            read,
            "read_canned_response",
            "Reads a canned response",
        )
        .answers::<CannedResponseDto>(),
        Operation::patch(
            "/canned_responses/{canned_response_id}",
            update,
            "update_canned_response",
            "Changes a canned response",
        )
        .body::<CannedResponseUpdateParams>()
        .answers::<CannedResponseDto>(),
        Operation::delete(
            "/canned_responses/{canned_response_id}",
            delete,
            "delete_canned_response",
            "Deletes a canned response",
        )
        .no_content(),
    ]
}

/// A field a template fills.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct CannedResponseFieldDto {
    /// Name as used in the template.
    pub name: String,
    /// What it holds.
    pub description: String,
    /// Example values.
    pub examples: Vec<String>,
}

/// A canned response.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct CannedResponseDto {
    /// Id.
    pub id: String,
    /// When it was created (ISO 8601).
    pub creation_utc: String,
    /// The template (Jinja syntax).
    pub value: String,
    /// Declared fields.
    pub fields: Vec<CannedResponseFieldDto>,
    /// Tag ids.
    pub tags: Vec<String>,
    /// Phrases that describe when the template fits.
    pub signals: Vec<String>,
    /// Free-form metadata.
    pub metadata: IndexMap<String, Value>,
    /// Fields that must be available for the template to be a candidate.
    pub field_dependencies: Vec<String>,
}

fn metadata_of(r: &Record<CannedResponse>) -> IndexMap<String, Value> {
    match r.extra.get("metadata") {
        Some(Value::Object(m)) => m.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        _ => IndexMap::new(),
    }
}

impl From<&Record<CannedResponse>> for CannedResponseDto {
    fn from(r: &Record<CannedResponse>) -> Self {
        let c = &r.entity;
        Self {
            id: r.id.clone(),
            creation_utc: r.created.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
            value: c.template.clone(),
            fields: c
                .fields
                .iter()
                .map(|f| CannedResponseFieldDto {
                    name: f.name.clone(),
                    description: f.description.clone().unwrap_or_default(),
                    examples: f.examples.clone(),
                })
                .collect(),
            tags: c.tags.clone(),
            signals: c.signals.clone(),
            metadata: metadata_of(r),
            field_dependencies: c.field_dependencies.clone(),
        }
    }
}

fn fields(dtos: &[CannedResponseFieldDto]) -> Vec<CannedField> {
    dtos.iter()
        .map(|f| CannedField {
            name: f.name.clone(),
            description: Some(f.description.clone()).filter(|d| !d.is_empty()),
            examples: f.examples.clone(),
        })
        .collect()
}

/// A new canned response.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct CannedResponseCreationParams {
    /// The template.
    pub value: String,
    /// Declared fields.
    pub fields: Vec<CannedResponseFieldDto>,
    /// Tag ids.
    pub tags: Option<Vec<String>>,
    /// Phrases that describe when it fits.
    pub signals: Option<Vec<String>>,
    /// Free-form metadata.
    pub metadata: Option<IndexMap<String, Value>>,
    /// Fields that must be available.
    pub field_dependencies: Option<Vec<String>>,
}

/// Changes to a canned response.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct CannedResponseUpdateParams {
    /// New template.
    pub value: Option<String>,
    /// New fields.
    pub fields: Option<Vec<CannedResponseFieldDto>>,
    /// Tags to add and remove.
    pub tags: Option<TagsUpdate>,
    /// Metadata keys to set and unset.
    pub metadata: Option<MetadataUpdate>,
}

/// `POST /canned_responses`
pub async fn create(state: State, Body(params): Body<CannedResponseCreationParams>) -> ApiResult<Response> {
    non_empty(&params.value, "value")?;
    let tags = params.tags.clone().unwrap_or_default();
    state.check_tags(&tags).await?;
    let id = guidepost_store::ids::new_id();
    let c = CannedResponse {
        id: id.clone(),
        template: params.value,
        fields: fields(&params.fields),
        signals: params.signals.unwrap_or_default(),
        field_dependencies: params.field_dependencies.unwrap_or_default(),
        tags,
    };
    let mut extra = serde_json::Map::new();
    extra.insert("metadata".into(), serde_json::to_value(params.metadata.unwrap_or_default()).unwrap_or_default());
    let record = Record::new(id, c).with_extra(extra);
    state.store.apply(vec![Write::insert(&record)?]).await?;
    Ok(created(CannedResponseDto::from(&record)))
}

/// `GET /canned_responses?tags=a&tags=b`: those carrying any of the listed tags (all
/// without a filter).
pub async fn list(state: State, params: Params) -> ApiResult<Json<Vec<CannedResponseDto>>> {
    let tags = params.list("tags");
    let all = state.store.list::<CannedResponse>().await?;
    Ok(Json(
        all.iter().filter(|r| tags.iter().all(|t| r.entity.tags.contains(t))).map(CannedResponseDto::from).collect(),
    ))
}

/// `GET /canned_responses/{canned_response_id}`
pub async fn read(state: State, Path(id): Path<String>) -> ApiResult<Json<CannedResponseDto>> {
    Ok(Json(CannedResponseDto::from(&state.store.require::<CannedResponse>(&id).await?)))
}

/// `PATCH /canned_responses/{canned_response_id}`
pub async fn update(
    state: State,
    Path(id): Path<String>,
    Body(params): Body<CannedResponseUpdateParams>,
) -> ApiResult<Json<CannedResponseDto>> {
    if let Some(add) = params.tags.as_ref().and_then(|t| t.add.as_ref()) {
        state.check_tags(add).await?;
    }
    let record = state
        .store
        .update::<CannedResponse>(&id, |r| {
            if let Some(v) = &params.value {
                r.entity.template.clone_from(v);
            }
            if let Some(f) = &params.fields {
                r.entity.fields = fields(f);
            }
            if let Some(u) = &params.tags {
                u.apply(&mut r.entity.tags);
            }
            if let Some(m) = &params.metadata {
                let mut metadata = metadata_of(r);
                m.apply(&mut metadata);
                r.extra.insert("metadata".into(), serde_json::to_value(metadata).unwrap_or_default());
            }
            Ok(())
        })
        .await?;
    Ok(Json(CannedResponseDto::from(&record)))
}

/// `DELETE /canned_responses/{canned_response_id}`
pub async fn delete(state: State, Path(id): Path<String>) -> ApiResult<Response> {
    state.store.delete::<CannedResponse>(&id).await?;
    Ok(no_content())
}
