//! `/tags`: labels that scope guidelines, journeys and the rest to agents.

use axum::Json;
use axum::extract::Path;
use axum::response::Response;
use guidepost_core::Tag;
use guidepost_store::{Record, Write};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::dto::TagDto;
use crate::error::{ApiError, ApiResult, FieldError};
use crate::extract::{Body, Params};
use crate::routes::operation::{Operation, Param};
use crate::routes::{created, no_content};
use crate::state::State;

/// What this resource serves, each operation declared once (see [`crate::routes::operation`]).
pub fn operations() -> Vec<Operation> {
    vec![
        Operation::post("/tags", create, "create_tag", "Creates a tag").body::<TagParams>().creates::<TagDto>(),
        Operation::get("/tags", list, "list_tags", "Lists tags")
            .query([Param::new("name", "string", "Only tags with this name")])
            .answers::<Vec<TagDto>>(),
        Operation::get("/tags/{tag_id}", read, "read_tag", "Reads a tag").answers::<TagDto>(),
        Operation::patch("/tags/{tag_id}", update, "update_tag", "Renames a tag")
            .body::<TagParams>()
            .answers::<TagDto>(),
        Operation::delete("/tags/{tag_id}", delete, "delete_tag", "Deletes a tag").no_content(),
    ]
}

/// A new tag, or a tag's new name.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct TagParams {
    /// Name, 1 to 50 characters.
    pub name: String,
}

fn check_name(name: &str) -> ApiResult<()> {
    let n = name.chars().count();
    if n == 0 || n > 50 {
        let (kind, msg) = if n == 0 {
            ("string_too_short", "String should have at least 1 character")
        } else {
            ("string_too_long", "String should have at most 50 characters")
        };
        return Err(ApiError::invalid(FieldError::body(&["name"], kind, msg).with_input(serde_json::json!(name))));
    }
    Ok(())
}

/// `POST /tags`
pub async fn create(state: State, Body(params): Body<TagParams>) -> ApiResult<Response> {
    check_name(&params.name)?;
    let id = guidepost_store::ids::new_id();
    let tag = Tag { id: id.clone(), name: params.name, description: None };
    state.store.apply(vec![Write::insert(&Record::new(id, tag.clone()))?]).await?;
    Ok(created(TagDto::from(&tag)))
}

/// `GET /tags?name=`
pub async fn list(state: State, params: Params) -> ApiResult<Json<Vec<TagDto>>> {
    let name = params.string("name");
    let tags = state.store.list::<Tag>().await?;
    Ok(Json(
        tags.iter()
            .filter(|r| name.as_ref().is_none_or(|n| *n == r.entity.name))
            .map(|r| TagDto::from(&r.entity))
            .collect(),
    ))
}

/// `GET /tags/{tag_id}`
pub async fn read(state: State, Path(tag_id): Path<String>) -> ApiResult<Json<TagDto>> {
    Ok(Json(TagDto::from(&state.store.require::<Tag>(&tag_id).await?.entity)))
}

/// `PATCH /tags/{tag_id}`
pub async fn update(
    state: State,
    Path(tag_id): Path<String>,
    Body(params): Body<TagParams>,
) -> ApiResult<Json<TagDto>> {
    check_name(&params.name)?;
    let record = state
        .store
        .update::<Tag>(&tag_id, |r| {
            r.entity.name.clone_from(&params.name);
            Ok(())
        })
        .await?;
    Ok(Json(TagDto::from(&record.entity)))
}

/// `DELETE /tags/{tag_id}`
pub async fn delete(state: State, Path(tag_id): Path<String>) -> ApiResult<Response> {
    state.store.delete::<Tag>(&tag_id).await?;
    Ok(no_content())
}
