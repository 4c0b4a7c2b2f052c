//! `/agents`: the agents, and (our extension) their whole definition as YAML or JSON.

use axum::Json;
use axum::extract::Path;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use guidepost_core::agent::{Agent, DEFAULT_MAX_ENGINE_ITERATIONS, Preamble};
use guidepost_core::definition::{SourceFile, load_agent, to_yaml};
use guidepost_store::definitions::check_api_id;
use guidepost_store::{Record, Write};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::dto::{CompositionModeDto, OutputModeDto, TagsUpdate, non_empty};
use crate::error::{ApiError, ApiResult, FieldError};
use crate::extract::{Body, Params, RawBody};
use crate::routes::operation::{Operation, Param};
use crate::routes::{created, no_content};
use crate::state::State;

/// What this resource serves, each operation declared once (see [`crate::routes::operation`]).
pub fn operations() -> Vec<Operation> {
    vec![
        Operation::post("/agents", create, "create_agent", "Creates an agent")
            .body::<AgentCreationParams>()
            .creates::<AgentDto>(),
        Operation::get("/agents", list, "list_agents", "Lists the agents").answers::<Vec<AgentDto>>(),
        Operation::get("/agents/{agent_id}", read, "read_agent", "Reads an agent").customer().answers::<AgentDto>(),
        Operation::patch("/agents/{agent_id}", update, "update_agent", "Changes an agent")
            .body::<AgentUpdateParams>()
            .answers::<AgentDto>(),
        Operation::delete(
            "/agents/{agent_id}",
            delete,
            "delete_agent",
            "Deletes an agent and what its definition files defined",
        )
        .no_content(),
        Operation::get(
            "/agents/{agent_id}/definition",
            export,
            "export_agent_definition",
            "The agent's definition in the authoring format (YAML, or JSON with format=json)",
        )
        .query([Param::new("format", "string", "yaml (default) or json")])
        .content(definition_content)
        .extension(),
        Operation::put(
            "/agents/{agent_id}/definition",
            import,
            "import_agent_definition",
            "Replaces what the agent's definition defines with the YAML or JSON body",
        )
        .answers::<ImportResultDto>()
        .request_content(definition_body)
        .may_create()
        .extension(),
    ]
}

/// What the definition export answers: YAML, or JSON with `format=json`.
fn definition_content() -> serde_json::Value {
    json!({"application/yaml": {"schema": {"type": "string"}}, "application/json": {"schema": {"type": "object"}}})
}

/// What the definition import takes: a definition file in YAML, or the same in JSON.
fn definition_body() -> serde_json::Value {
    json!({
        "application/yaml": {"schema": {"type": "string", "description": "An agent definition file"}},
        "application/json": {"schema": {"type": "object", "description": "An agent definition in JSON"}}
    })
}

/// An agent.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct AgentDto {
    /// Id.
    pub id: String,
    /// Name, also the name the model answers as.
    pub name: String,
    /// What the agent is for.
    pub description: Option<String>,
    /// Upper bound on preparation iterations per reply.
    pub max_engine_iterations: u32,
    /// How replies are composed.
    pub composition_mode: CompositionModeDto,
    /// Whether replies are streamed.
    pub message_output_mode: OutputModeDto,
    /// Tag ids: entities with one of them are in the agent's scope.
    pub tags: Vec<String>,
}

impl From<&Agent> for AgentDto {
    fn from(a: &Agent) -> Self {
        Self {
            id: a.id.clone(),
            name: a.name.clone(),
            description: a.description.clone(),
            max_engine_iterations: a.max_engine_iterations,
            composition_mode: a.composition_mode.into(),
            message_output_mode: a.output_mode.into(),
            tags: a.tags.clone(),
        }
    }
}

/// A new agent.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct AgentCreationParams {
    /// Name.
    pub name: String,
    /// Id (generated when absent).
    pub id: Option<String>,
    /// What the agent is for.
    pub description: Option<String>,
    /// Upper bound on preparation iterations per reply (default 3).
    pub max_engine_iterations: Option<u32>,
    /// How replies are composed (default `fluid`).
    pub composition_mode: Option<CompositionModeDto>,
    /// Whether replies are streamed (default `block`).
    pub message_output_mode: Option<OutputModeDto>,
    /// Tag ids.
    pub tags: Option<Vec<String>>,
}

/// Changes to an agent.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct AgentUpdateParams {
    /// New name.
    pub name: Option<String>,
    /// New description.
    pub description: Option<String>,
    /// New bound on preparation iterations.
    pub max_engine_iterations: Option<u32>,
    /// New composition mode.
    pub composition_mode: Option<CompositionModeDto>,
    /// New output mode.
    pub message_output_mode: Option<OutputModeDto>,
    /// Tags to add and remove.
    pub tags: Option<TagsUpdate>,
}

/// `POST /agents`
pub async fn create(state: State, Body(params): Body<AgentCreationParams>) -> ApiResult<Response> {
    non_empty(&params.name, "name")?;
    let id = params.id.clone().unwrap_or_else(guidepost_store::ids::new_id);
    check_api_id(&id)?;
    let tags = params.tags.clone().unwrap_or_default();
    state.check_tags(&tags).await?;
    let agent = Agent {
        id: id.clone(),
        name: params.name,
        description: params.description,
        max_engine_iterations: params.max_engine_iterations.unwrap_or(DEFAULT_MAX_ENGINE_ITERATIONS),
        composition_mode: params.composition_mode.map(Into::into).unwrap_or_default(),
        output_mode: params.message_output_mode.map(Into::into).unwrap_or_default(),
        tags,
        preamble: Preamble::default(),
        no_match_reply: None,
        language: None,
        fallback_reply: None,
    };
    state.store.apply(vec![Write::insert(&Record::new(id, agent.clone()))?]).await?;
    Ok(created(AgentDto::from(&agent)))
}

/// `GET /agents`
pub async fn list(state: State) -> ApiResult<Json<Vec<AgentDto>>> {
    let agents = state.store.list::<Agent>().await?;
    Ok(Json(agents.iter().map(|r| AgentDto::from(&r.entity)).collect()))
}

/// `GET /agents/{agent_id}`
pub async fn read(state: State, Path(agent_id): Path<String>) -> ApiResult<Json<AgentDto>> {
    Ok(Json(AgentDto::from(&state.store.require::<Agent>(&agent_id).await?.entity)))
}

/// `PATCH /agents/{agent_id}`
pub async fn update(
    state: State,
    Path(agent_id): Path<String>,
    Body(params): Body<AgentUpdateParams>,
) -> ApiResult<Json<AgentDto>> {
    if let Some(name) = &params.name {
        non_empty(name, "name")?;
    }
    if let Some(add) = params.tags.as_ref().and_then(|t| t.add.as_ref()) {
        state.check_tags(add).await?;
    }
    let record = state
        .store
        .update::<Agent>(&agent_id, |r| {
            let a = &mut r.entity;
            if let Some(name) = &params.name {
                a.name.clone_from(name);
            }
            if let Some(d) = &params.description {
                a.description = Some(d.clone());
            }
            if let Some(m) = params.max_engine_iterations {
                a.max_engine_iterations = m;
            }
            if let Some(m) = params.composition_mode {
                a.composition_mode = m.into();
            }
            if let Some(m) = params.message_output_mode {
                a.output_mode = m.into();
            }
            if let Some(t) = &params.tags {
                t.apply(&mut a.tags);
            }
            Ok(())
        })
        .await?;
    Ok(Json(AgentDto::from(&record.entity)))
}

/// `DELETE /agents/{agent_id}`: the agent, and what its definition files defined.
pub async fn delete(state: State, Path(agent_id): Path<String>) -> ApiResult<Response> {
    state.store.require::<Agent>(&agent_id).await?;
    state.store.delete_agent(&agent_id).await?;
    Ok(no_content())
}

/// `GET /agents/{agent_id}/definition?format=yaml|json` (extension): the agent's
/// definition as it runs now, in the authoring format `guidepost check` reads.
pub async fn export(state: State, Path(agent_id): Path<String>, params: Params) -> ApiResult<Response> {
    let mut definition = state.store.export_definition(&agent_id).await?;
    // Tool services' credentials are not shown; importing this back keeps the stored ones.
    definition.services = definition.services.iter().map(guidepost_tools::registry::shown_service).collect();
    let format = params.string("format").unwrap_or_else(|| "yaml".into());
    let file = guidepost_core::definition::export(&definition);
    match format.as_str() {
        "yaml" => {
            let text = to_yaml(&definition).map_err(|e| ApiError::Internal(format!("exporting YAML: {e}")))?;
            Ok(([(header::CONTENT_TYPE, "application/yaml; charset=utf-8")], text).into_response())
        }
        "json" => Ok(Json(file).into_response()),
        other => Err(ApiError::invalid(
            FieldError::query("format", "enum", "Input should be 'yaml' or 'json'").with_input(json!(other)),
        )),
    }
}

/// What an import did.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ImportResultDto {
    /// The agent.
    pub agent_id: String,
    /// Entities created.
    pub created: usize,
    /// Entities changed.
    pub updated: usize,
    /// Entities unchanged.
    pub unchanged: usize,
    /// Entities no longer defined, deleted.
    pub removed: usize,
}

/// `PUT /agents/{agent_id}/definition` (extension): replaces what the agent's definition
/// defines with the YAML or JSON body (the format's `agent.id` must be this agent's).
/// Problems are a 422 naming `definition:line:column`.
pub async fn import(
    state: State,
    Path(agent_id): Path<String>,
    headers: HeaderMap,
    body: RawBody,
) -> ApiResult<Response> {
    let body = body.text()?;
    let json = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|v| v.contains("json"));
    let name = if json { "definition.json" } else { "definition.yaml" };
    let loaded = load_agent(&[SourceFile::new(name, body)]);
    let errors: Vec<FieldError> = loaded
        .diagnostics
        .iter()
        .filter(|d| d.severity == guidepost_core::definition::Severity::Error)
        .map(|d| {
            FieldError::new(
                vec![json!("body"), json!(format!("{}:{}:{}", d.file, d.line, d.column))],
                d.code,
                d.message.clone(),
            )
        })
        .collect();
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    let Some(mut definition) = loaded.definition else {
        return Err(ApiError::invalid(FieldError::body(&[], "value_error", "the definition does not load")));
    };
    if definition.agent.id != agent_id {
        if definition.agent.id == guidepost_core::ids::slug(&definition.agent.name).unwrap_or_default() {
            definition.agent.id.clone_from(&agent_id);
        } else {
            return Err(ApiError::invalid(FieldError::body(
                &["agent", "id"],
                "value_error",
                format!("the definition is agent `{}`, not `{agent_id}`", definition.agent.id),
            )));
        }
    }
    let report = state.store.import_definition(&definition).await?;
    let status = if report.created > 0 && report.updated == 0 && report.unchanged == 0 {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((
        status,
        Json(ImportResultDto {
            agent_id: report.agent_id,
            created: report.created,
            updated: report.updated,
            unchanged: report.unchanged,
            removed: report.removed,
        }),
    )
        .into_response())
}
