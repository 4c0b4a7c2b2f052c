//! `/terms`: the glossary.

use axum::Json;
use axum::extract::Path;
use axum::response::Response;
use guidepost_core::Term;
use guidepost_store::definitions::check_api_id;
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
        Operation::post("/terms", create, "create_term", "Adds a glossary term")
            .body::<TermCreationParams>()
            .creates::<TermDto>(),
        Operation::get("/terms", list, "list_terms", "Lists glossary terms")
            .query([Param::new("tag_id", "string", "Only terms with this tag")])
            .answers::<Vec<TermDto>>(),
        Operation::get("/terms/{term_id}", read, "read_term", "Reads a term").answers::<TermDto>(),
        Operation::patch("/terms/{term_id}", update, "update_term", "Changes a term")
            .body::<TermUpdateParams>()
            .answers::<TermDto>(),
        Operation::delete("/terms/{term_id}", delete, "delete_term", "Deletes a term").no_content(),
    ]
}

/// A glossary term.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct TermDto {
    /// Id.
    pub id: String,
    /// The term.
    pub name: String,
    /// What it means.
    pub description: String,
    /// Other words customers use for it.
    pub synonyms: Vec<String>,
    /// Tag ids.
    pub tags: Vec<String>,
}

impl From<&Term> for TermDto {
    fn from(t: &Term) -> Self {
        Self {
            id: t.id.clone(),
            name: t.name.clone(),
            description: t.description.clone(),
            synonyms: t.synonyms.clone(),
            tags: t.tags.clone(),
        }
    }
}

/// A new term.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct TermCreationParams {
    /// The term.
    pub name: String,
    /// What it means.
    pub description: String,
    /// Other words for it.
    #[serde(default)]
    pub synonyms: Option<Vec<String>>,
    /// Tag ids.
    pub tags: Option<Vec<String>>,
    /// Id (generated when absent).
    pub id: Option<String>,
}

/// Changes to a term.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct TermUpdateParams {
    /// New name.
    pub name: Option<String>,
    /// New description.
    pub description: Option<String>,
    /// New synonyms.
    pub synonyms: Option<Vec<String>>,
    /// Tags to add and remove.
    pub tags: Option<TagsUpdate>,
}

/// `POST /terms`
pub async fn create(state: State, Body(params): Body<TermCreationParams>) -> ApiResult<Response> {
    non_empty(&params.name, "name")?;
    let id = params.id.clone().unwrap_or_else(guidepost_store::ids::new_id);
    check_api_id(&id)?;
    let tags = params.tags.clone().unwrap_or_default();
    state.check_tags(&tags).await?;
    let term = Term {
        id: id.clone(),
        name: params.name,
        description: params.description,
        synonyms: params.synonyms.unwrap_or_default(),
        tags,
    };
    state.store.apply(vec![Write::insert(&Record::new(id, term.clone()))?]).await?;
    Ok(created(TermDto::from(&term)))
}

/// `GET /terms?tag_id=`
pub async fn list(state: State, params: Params) -> ApiResult<Json<Vec<TermDto>>> {
    let tag = params.string("tag_id");
    let all = state.store.list::<Term>().await?;
    Ok(Json(
        all.iter()
            .filter(|r| tag.as_ref().is_none_or(|t| r.entity.tags.contains(t)))
            .map(|r| TermDto::from(&r.entity))
            .collect(),
    ))
}

/// `GET /terms/{term_id}`
pub async fn read(state: State, Path(term_id): Path<String>) -> ApiResult<Json<TermDto>> {
    Ok(Json(TermDto::from(&state.store.require::<Term>(&term_id).await?.entity)))
}

/// `PATCH /terms/{term_id}`
pub async fn update(
    state: State,
    Path(term_id): Path<String>,
    Body(params): Body<TermUpdateParams>,
) -> ApiResult<Json<TermDto>> {
    if let Some(add) = params.tags.as_ref().and_then(|t| t.add.as_ref()) {
        state.check_tags(add).await?;
    }
    let record = state
        .store
        .update::<Term>(&term_id, |r| {
            let t = &mut r.entity;
            if let Some(v) = &params.name {
                t.name.clone_from(v);
            }
            if let Some(v) = &params.description {
                t.description.clone_from(v);
            }
            if let Some(v) = &params.synonyms {
                t.synonyms.clone_from(v);
            }
            if let Some(u) = &params.tags {
                u.apply(&mut t.tags);
            }
            Ok(())
        })
        .await?;
    Ok(Json(TermDto::from(&record.entity)))
}

/// `DELETE /terms/{term_id}`
pub async fn delete(state: State, Path(term_id): Path<String>) -> ApiResult<Response> {
    state.store.delete::<Term>(&term_id).await?;
    Ok(no_content())
}
