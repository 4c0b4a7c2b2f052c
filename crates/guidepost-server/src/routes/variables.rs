//! `/context-variables`: named values given to the model, per customer, per customer
//! tag (`tag:<id>`) or for everyone (`DEFAULT`).

use axum::Json;
use axum::extract::Path;
use axum::response::Response;
use guidepost_core::ContextVariable;
use guidepost_core::knowledge::Freshness;
use guidepost_store::values::VariableValue;
use guidepost_store::{Record, Write};
use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::dto::{TagsUpdate, ToolIdDto, non_empty};
use crate::error::{ApiError, ApiResult, FieldError};
use crate::extract::{Body, Params};
use crate::routes::operation::{Operation, Param};
use crate::routes::{created, no_content};
use crate::state::State;

/// What this resource serves, each operation declared once (see [`crate::routes::operation`]).
pub fn operations() -> Vec<Operation> {
    vec![
        Operation::post("/context-variables", create, "create_variable", "Creates a context variable")
            .body::<ContextVariableCreationParams>()
            .creates::<ContextVariableDto>(),
        Operation::get("/context-variables", list, "list_variables", "Lists context variables")
            .query([Param::new("tag_id", "string", "Only those with this tag")])
            .answers::<Vec<ContextVariableDto>>(),
        Operation::delete(
            "/context-variables",
            delete_many,
            "delete_variables",
            "Deletes the context variables with a tag (all without one)",
        )
        .query([Param::new("tag_id", "string", "Only those with this tag")])
        .no_content(),
        Operation::patch("/context-variables/{variable_id}", update, "update_variable", "Changes a context variable")
            .body::<ContextVariableUpdateParams>()
            .answers::<ContextVariableDto>(),
        Operation::get(
            "/context-variables/{variable_id}",
            read,
            "read_variable",
            "Reads a context variable with its values",
        )
        .query([Param::new("include_values", "boolean", "Include the values (default true)")])
        .answers::<ContextVariableReadResult>(),
        Operation::delete(
            "/context-variables/{variable_id}",
            delete,
            "delete_variable",
            "Deletes a context variable and its values",
        )
        .no_content(),
        Operation::get(
            "/context-variables/{variable_id}/{key}",
            read_value,
            "read_variable_value",
            "Reads a value (key: a customer id, tag:<id> or DEFAULT)",
        )
        .answers::<ContextVariableValueDto>(),
        Operation::put("/context-variables/{variable_id}/{key}", set_value, "update_variable_value", "Sets a value")
            .body::<ContextVariableValueParams>()
            .answers::<ContextVariableValueDto>(),
        Operation::delete("/context-variables/{variable_id}/{key}", delete_value, "delete_value", "Deletes a value")
            .no_content(),
    ]
}

/// A context variable.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ContextVariableDto {
    /// Id.
    pub id: String,
    /// Name, as the model sees it.
    pub name: String,
    /// What the value means.
    pub description: Option<String>,
    /// The tool that produces the value.
    pub tool_id: Option<ToolIdDto>,
    /// How long a tool-produced value stays fresh: a cron schedule (`0 * * * *`) or a
    /// duration (`90s`, `15m`, `2h`, `1d`).
    pub freshness_rules: Option<String>,
    /// Tag ids.
    pub tags: Vec<String>,
}

fn dto(r: &Record<ContextVariable>) -> ContextVariableDto {
    let v = &r.entity;
    ContextVariableDto {
        id: r.id.clone(),
        name: v.name.clone(),
        description: v.description.clone(),
        tool_id: v.tool.as_ref().map(Into::into),
        freshness_rules: v.freshness.as_ref().map(Freshness::to_text),
        tags: v.tags.clone(),
    }
}

/// A stored value.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ContextVariableValueDto {
    /// Id of the value.
    pub id: String,
    /// When it was last set (ISO 8601).
    pub last_modified: String,
    /// The value.
    pub data: Value,
}

impl From<&VariableValue> for ContextVariableValueDto {
    fn from(v: &VariableValue) -> Self {
        Self {
            id: v.id.clone(),
            last_modified: v.last_modified.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
            data: v.data.clone(),
        }
    }
}

/// A variable with its values.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ContextVariableReadResult {
    /// The variable.
    pub context_variable: ContextVariableDto,
    /// Values by key (absent with `include_values=false`).
    pub key_value_pairs: Option<IndexMap<String, ContextVariableValueDto>>,
}

/// A new context variable.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct ContextVariableCreationParams {
    /// Name.
    pub name: String,
    /// What the value means.
    pub description: Option<String>,
    /// The tool that produces the value.
    pub tool_id: Option<ToolIdDto>,
    /// How long a tool-produced value stays fresh: a cron schedule or a duration.
    pub freshness_rules: Option<String>,
    /// Tag ids.
    pub tags: Option<Vec<String>>,
}

/// Changes to a context variable.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct ContextVariableUpdateParams {
    /// New name.
    pub name: Option<String>,
    /// New description.
    pub description: Option<String>,
    /// New tool.
    pub tool_id: Option<ToolIdDto>,
    /// New freshness.
    pub freshness_rules: Option<String>,
    /// Tags to add and remove.
    pub tags: Option<TagsUpdate>,
}

/// A value to store.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct ContextVariableValueParams {
    /// The value (any JSON).
    pub data: Value,
}

fn freshness(rule: &str) -> ApiResult<Freshness> {
    Freshness::parse(rule).map_err(|message| {
        ApiError::invalid(FieldError::body(&["freshness_rules"], "value_error", message).with_input(json!(rule)))
    })
}

/// `POST /context-variables`
pub async fn create(state: State, Body(params): Body<ContextVariableCreationParams>) -> ApiResult<Response> {
    non_empty(&params.name, "name")?;
    let tags = params.tags.clone().unwrap_or_default();
    state.check_tags(&tags).await?;
    let fresh = params.freshness_rules.as_deref().map(freshness).transpose()?;
    let id = guidepost_store::ids::new_id();
    let v = ContextVariable {
        id: id.clone(),
        name: params.name,
        description: params.description,
        tool: params.tool_id.as_ref().map(Into::into),
        freshness: fresh,
        value: None,
        tags,
    };
    let record = Record::new(id, v);
    state.store.apply(vec![Write::insert(&record)?]).await?;
    Ok(created(dto(&record)))
}

/// `GET /context-variables?tag_id=`
pub async fn list(state: State, params: Params) -> ApiResult<Json<Vec<ContextVariableDto>>> {
    let tag = params.string("tag_id");
    let all = state.store.list::<ContextVariable>().await?;
    Ok(Json(all.iter().filter(|r| tag.as_ref().is_none_or(|t| r.entity.tags.contains(t))).map(dto).collect()))
}

/// `DELETE /context-variables?tag_id=`: the variables with the tag (all without one), and
/// their values.
pub async fn delete_many(state: State, params: Params) -> ApiResult<Response> {
    let tag = params.string("tag_id");
    let all = state.store.list::<ContextVariable>().await?;
    let doomed: Vec<String> =
        all.iter().filter(|r| tag.as_ref().is_none_or(|t| r.entity.tags.contains(t))).map(|r| r.id.clone()).collect();
    state.store.apply(doomed.iter().map(|id| Write::delete::<ContextVariable>(id)).collect()).await?;
    for id in &doomed {
        state.store.delete_values(id).await?;
    }
    Ok(no_content())
}

/// `GET /context-variables/{variable_id}?include_values=`
pub async fn read(state: State, Path(id): Path<String>, params: Params) -> ApiResult<Json<ContextVariableReadResult>> {
    let record = state.store.require::<ContextVariable>(&id).await?;
    let values = if params.boolean("include_values")?.unwrap_or(true) {
        let values = state.store.list_values(&id).await?;
        Some(values.iter().map(|v| (v.key.clone(), ContextVariableValueDto::from(v))).collect())
    } else {
        None
    };
    Ok(Json(ContextVariableReadResult { context_variable: dto(&record), key_value_pairs: values }))
}

/// `PATCH /context-variables/{variable_id}`
pub async fn update(
    state: State,
    Path(id): Path<String>,
    Body(params): Body<ContextVariableUpdateParams>,
) -> ApiResult<Json<ContextVariableDto>> {
    if let Some(add) = params.tags.as_ref().and_then(|t| t.add.as_ref()) {
        state.check_tags(add).await?;
    }
    let fresh = params.freshness_rules.as_deref().map(freshness).transpose()?;
    let record = state
        .store
        .update::<ContextVariable>(&id, |r| {
            if let Some(v) = &params.name {
                r.entity.name.clone_from(v);
            }
            if let Some(v) = &params.description {
                r.entity.description = Some(v.clone());
            }
            if let Some(t) = &params.tool_id {
                r.entity.tool = Some(t.into());
            }
            if let Some(f) = &fresh {
                r.entity.freshness = Some(f.clone());
            }
            if let Some(u) = &params.tags {
                u.apply(&mut r.entity.tags);
            }
            Ok(())
        })
        .await?;
    Ok(Json(dto(&record)))
}

/// `DELETE /context-variables/{variable_id}`
pub async fn delete(state: State, Path(id): Path<String>) -> ApiResult<Response> {
    state.store.delete::<ContextVariable>(&id).await?;
    state.store.delete_values(&id).await?;
    Ok(no_content())
}

/// `GET /context-variables/{variable_id}/{key}`
pub async fn read_value(
    state: State,
    Path((id, key)): Path<(String, String)>,
) -> ApiResult<Json<ContextVariableValueDto>> {
    state.store.require::<ContextVariable>(&id).await?;
    let value = state.store.get_value(&id, &key).await?.ok_or(ApiError::NotFound { kind: "value", id: key })?;
    Ok(Json(ContextVariableValueDto::from(&value)))
}

/// `PUT /context-variables/{variable_id}/{key}`
pub async fn set_value(
    state: State,
    Path((id, key)): Path<(String, String)>,
    Body(params): Body<ContextVariableValueParams>,
) -> ApiResult<Json<ContextVariableValueDto>> {
    state.store.require::<ContextVariable>(&id).await?;
    let value = state.store.set_value(&id, &key, &params.data, chrono::Utc::now()).await?;
    Ok(Json(ContextVariableValueDto::from(&value)))
}

/// `DELETE /context-variables/{variable_id}/{key}`
pub async fn delete_value(state: State, Path((id, key)): Path<(String, String)>) -> ApiResult<Response> {
    state.store.require::<ContextVariable>(&id).await?;
    if !state.store.delete_value(&id, &key).await? {
        return Err(ApiError::NotFound { kind: "value", id: key });
    }
    Ok(no_content())
}
