//! `/services`: tool services (Parlant tool servers, OpenAPI, MCP) available to every
//! agent. Reading a service lists its tools live; one that does not answer is a 503.

use axum::Json;
use axum::extract::Path;
use axum::response::Response;
use guidepost_conversation::agents::DISCOVERY_TIMEOUT;
use guidepost_core::tool::{ServiceKind, ToolService};
use guidepost_store::{Origin, Record, Write};
use guidepost_tools::registry::ToolRegistry;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::error::{ApiError, ApiResult, FieldError};
use crate::extract::Body;
use crate::routes::no_content;
use crate::routes::operation::{Operation, Unavailable};
use crate::routes::relationships::ToolDto;
use crate::state::{AppState, State};

/// What this resource serves, each operation declared once (see [`crate::routes::operation`]).
pub fn operations() -> Vec<Operation> {
    vec![
        Operation::put("/services/{name}", put, "update_service", "Creates or replaces a tool service")
            .body::<ServiceUpdateParams>()
            .answers::<ServiceDto>(),
        Operation::delete("/services/{name}", delete, "delete_service", "Deletes a tool service").no_content(),
        Operation::get(
            "/services/{name}",
            read,
            "read_service",
            "Reads a tool service with its tools, listed live (503 when it does not answer)",
        )
        .answers::<ServiceDto>()
        .unavailable(Unavailable::Error),
        Operation::get("/services", list, "list_services", "Lists the tool services").answers::<Vec<ServiceDto>>(),
    ]
}

/// How a service is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ServiceKindDto {
    /// A Parlant tool server (the plugin protocol).
    Sdk,
    /// An HTTP API described by an OpenAPI document.
    Openapi,
    /// An MCP server over HTTP.
    Mcp,
}

/// A tool service.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ServiceDto {
    /// Name, the first part of its tools' ids.
    pub name: String,
    /// How it is reached.
    pub kind: ServiceKindDto,
    /// Where.
    pub url: String,
    /// Its tools (listed live when the service is read).
    pub tools: Option<Vec<ToolDto>>,
}

/// Where a Parlant tool server is.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct SdkServiceParams {
    /// Base URL.
    pub url: String,
}

/// Where an OpenAPI service is.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct OpenApiServiceParams {
    /// Base URL of the API.
    pub url: String,
    /// The OpenAPI document (URL or path).
    pub source: String,
}

/// Where an MCP server is.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct McpServiceParams {
    /// URL of the MCP endpoint.
    pub url: String,
}

/// A service to create or replace.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct ServiceUpdateParams {
    /// How it is reached; the matching section below is required.
    pub kind: ServiceKindDto,
    /// For `sdk`.
    pub sdk: Option<SdkServiceParams>,
    /// For `openapi`.
    pub openapi: Option<OpenApiServiceParams>,
    /// For `mcp`.
    pub mcp: Option<McpServiceParams>,
}

fn kind_dto(kind: ServiceKind) -> Option<ServiceKindDto> {
    match kind {
        ServiceKind::Parlant => Some(ServiceKindDto::Sdk),
        ServiceKind::Openapi => Some(ServiceKindDto::Openapi),
        ServiceKind::Mcp => Some(ServiceKindDto::Mcp),
        ServiceKind::Fixture | ServiceKind::Native => None,
    }
}

fn dto(s: &ToolService, tools: Option<Vec<ToolDto>>) -> Option<ServiceDto> {
    // The URL as it may be shown: its password or token redacted.
    let url = guidepost_tools::registry::shown_service(s).url.unwrap_or_default();
    Some(ServiceDto { name: s.name.clone(), kind: kind_dto(s.kind)?, url, tools })
}

async fn tools_of(service: &ToolService) -> ApiResult<Vec<ToolDto>> {
    let mut registry = ToolRegistry::for_services(std::slice::from_ref(service)).map_err(|e| {
        ApiError::invalid(FieldError::body(&[], "value_error", format!("service `{}`: {e}", service.name)))
    })?;
    let problems = tokio::time::timeout(DISCOVERY_TIMEOUT, registry.discover_tools()).await.map_err(|_| {
        ApiError::Unavailable(format!("service `{}` did not list its tools within {DISCOVERY_TIMEOUT:?}", service.name))
    })?;
    if let Some(problem) = problems.first() {
        return Err(ApiError::Unavailable(format!("service `{}` is unavailable: {problem}", service.name)));
    }
    let now = chrono::Utc::now();
    Ok(registry.tools().filter(|t| t.id.service == service.name).map(|t| ToolDto::of(t, now)).collect())
}

async fn find(state: &AppState, name: &str) -> ApiResult<Record<ToolService>> {
    if let Some(r) = state.store.get::<ToolService>(name).await? {
        return Ok(r);
    }
    state
        .store
        .list::<ToolService>()
        .await?
        .into_iter()
        .find(|r| r.entity.name == name && kind_dto(r.entity.kind).is_some())
        .ok_or(ApiError::NotFound { kind: "service", id: name.to_string() })
}

/// `PUT /services/{name}`: creates or replaces the service and lists its tools.
pub async fn put(
    state: State,
    Path(name): Path<String>,
    Body(params): Body<ServiceUpdateParams>,
) -> ApiResult<Json<ServiceDto>> {
    guidepost_store::definitions::check_api_id(&name)?;
    let missing = |section: &str| {
        ApiError::invalid(FieldError::body(
            &[section],
            "missing",
            format!("a `{section}` service needs its `{section}` section"),
        ))
    };
    let (kind, url, spec) = match params.kind {
        ServiceKindDto::Sdk => (ServiceKind::Parlant, params.sdk.ok_or_else(|| missing("sdk"))?.url, None),
        ServiceKindDto::Openapi => {
            let o = params.openapi.ok_or_else(|| missing("openapi"))?;
            (ServiceKind::Openapi, o.url, Some(o.source))
        }
        ServiceKindDto::Mcp => (ServiceKind::Mcp, params.mcp.ok_or_else(|| missing("mcp"))?.url, None),
    };
    let web = |u: &str| u.starts_with("http://") || u.starts_with("https://");
    if let Some(source) = &spec
        && !web(source)
    {
        return Err(ApiError::invalid(
            FieldError::body(&["openapi", "source"], "value_error", "the OpenAPI document must be an http(s) URL")
                .with_input(json!(source)),
        ));
    }
    if !web(&url) {
        return Err(ApiError::invalid(
            FieldError::body(&[], "value_error", "the service URL must start with http:// or https://")
                .with_input(json!(url)),
        ));
    }
    let service = ToolService {
        name: name.clone(),
        kind,
        url: Some(url),
        spec,
        command: Vec::new(),
        env: Default::default(),
        timeout_ms: None,
        idempotency_keys: false,
    };
    let tools = match tools_of(&service).await {
        Ok(t) => Some(t),
        Err(e) => {
            tracing::warn!(service = %name, error = %e, "registered a tool service that does not answer yet");
            Some(Vec::new())
        }
    };
    let record = match state.store.get::<ToolService>(&name).await? {
        Some(existing) => Record { entity: service.clone(), origin: Origin::Api, ..existing },
        None => Record::new(name.clone(), service.clone()),
    };
    state.store.apply(vec![Write::upsert(&record)?]).await?;
    dto(&service, tools).map(Json).ok_or_else(|| ApiError::Internal("service kind".into()))
}

/// `GET /services`
pub async fn list(state: State) -> ApiResult<Json<Vec<ServiceDto>>> {
    let all = state.store.list::<ToolService>().await?;
    Ok(Json(all.iter().filter_map(|r| dto(&r.entity, None)).collect()))
}

/// `GET /services/{name}`: with its tools, listed live.
pub async fn read(state: State, Path(name): Path<String>) -> ApiResult<Json<ServiceDto>> {
    let record = find(&state, &name).await?;
    let tools = tools_of(&record.entity).await?;
    dto(&record.entity, Some(tools)).map(Json).ok_or(ApiError::NotFound { kind: "service", id: name })
}

/// `DELETE /services/{name}`
pub async fn delete(state: State, Path(name): Path<String>) -> ApiResult<Response> {
    let record = find(&state, &name).await?;
    state.store.apply(vec![Write::delete::<ToolService>(&record.id)]).await?;
    Ok(no_content())
}
