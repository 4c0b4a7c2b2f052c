//! `/relationships`: how guidelines, tags, journeys and tools bear on each other.
//!
//! On the wire a journey end is the journey's tag, `journey:<id>`, as the reference API
//! writes it; `dependency_any` relationships (from definition files) are listed with
//! kind `dependency`, the closest kind the wire has.

use axum::Json;
use axum::extract::Path;
use axum::response::Response;
use guidepost_core::relationship::{Endpoint, RelationshipKind, TagMode};
use guidepost_core::tool::{ParameterType, Tool};
use guidepost_core::{Guideline, Journey, Relationship, Tag, ToolId};
use guidepost_store::{Record, Write};
use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::dto::{GuidelineDto, TagDto, ToolIdDto};
use crate::error::{ApiError, ApiResult, FieldError};
use crate::extract::{Body, Params};
use crate::routes::operation::{Operation, Param};
use crate::routes::{created, no_content};
use crate::state::{AppState, State};

/// What this resource serves, each operation declared once (see [`crate::routes::operation`]).
pub fn operations() -> Vec<Operation> {
    vec![
        Operation::post("/relationships", create, "create_relationship", "Creates a relationship")
            .body::<RelationshipCreationParams>()
            .creates::<RelationshipDto>(),
        Operation::get("/relationships", list, "list_relationships", "Lists relationships")
            .query([
                Param::new("kind", "string", "Only of this kind"),
                Param::new("indirect", "boolean", "Include those through tags (default true)"),
                Param::new("guideline_id", "string", "Involving this guideline"),
                Param::new("tag_id", "string", "Involving this tag"),
                Param::new("tool_id", "string", "Involving this tool (service:name)"),
            ])
            .answers::<Vec<RelationshipDto>>(),
        Operation::get("/relationships/{relationship_id}", read, "read_relationship", "Reads a relationship")
            .answers::<RelationshipDto>(),
        Operation::delete("/relationships/{relationship_id}", delete, "delete_relationship", "Deletes a relationship")
            .no_content(),
    ]
}

/// What a relationship means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RelationshipKindDto {
    /// Source active implies target active.
    Entailment,
    /// Both active: only the source stays.
    Priority,
    /// The source is dropped unless the target is active.
    Dependency,
    /// Ask the customer which of the targets they mean.
    Disambiguation,
    /// Two tools decided together.
    Overlap,
    /// When the target tool runs, the source is evaluated again.
    Reevaluation,
}

impl From<RelationshipKind> for RelationshipKindDto {
    fn from(k: RelationshipKind) -> Self {
        match k {
            RelationshipKind::Entailment => Self::Entailment,
            RelationshipKind::Priority => Self::Priority,
            RelationshipKind::Dependency | RelationshipKind::DependencyAny => Self::Dependency,
            RelationshipKind::Disambiguation => Self::Disambiguation,
            RelationshipKind::Overlap => Self::Overlap,
            RelationshipKind::Reevaluation => Self::Reevaluation,
        }
    }
}

impl From<RelationshipKindDto> for RelationshipKind {
    fn from(k: RelationshipKindDto) -> Self {
        match k {
            RelationshipKindDto::Entailment => Self::Entailment,
            RelationshipKindDto::Priority => Self::Priority,
            RelationshipKindDto::Dependency => Self::Dependency,
            RelationshipKindDto::Disambiguation => Self::Disambiguation,
            RelationshipKindDto::Overlap => Self::Overlap,
            RelationshipKindDto::Reevaluation => Self::Reevaluation,
        }
    }
}

/// A tool parameter on the wire.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ToolParameterDto {
    /// `string`, `number`, `integer`, `boolean` or `array`.
    #[serde(rename = "type")]
    pub kind: String,
    /// What it means.
    pub description: Option<String>,
    /// Allowed values.
    #[serde(rename = "enum")]
    pub allowed: Option<Vec<Value>>,
}

/// A tool on the wire.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ToolDto {
    /// When it was registered (ISO 8601).
    pub creation_utc: String,
    /// Name in its service.
    pub name: String,
    /// What it does.
    pub description: String,
    /// Parameters by name.
    pub parameters: IndexMap<String, ToolParameterDto>,
    /// Names of the required parameters.
    pub required: Vec<String>,
}

impl ToolDto {
    /// The wire form of a tool.
    pub fn of(tool: &Tool, created: chrono::DateTime<chrono::Utc>) -> Self {
        Self {
            creation_utc: created.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
            name: tool.id.name.clone(),
            description: tool.description.clone().unwrap_or_default(),
            parameters: tool
                .parameters
                .iter()
                .map(|p| {
                    let kind = match p.kind {
                        ParameterType::Integer => "integer",
                        ParameterType::Number => "number",
                        ParameterType::Boolean => "boolean",
                        ParameterType::Array => "array",
                        _ => "string",
                    };
                    let allowed = (!p.allowed.is_empty()).then(|| p.allowed.clone());
                    (
                        p.name.clone(),
                        ToolParameterDto { kind: kind.into(), description: p.description.clone(), allowed },
                    )
                })
                .collect(),
            required: tool.parameters.iter().filter(|p| p.required).map(|p| p.name.clone()).collect(),
        }
    }
}

/// A relationship with its ends spelled out.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct RelationshipDto {
    /// Id.
    pub id: String,
    /// The source, when it is a guideline.
    pub source_guideline: Option<GuidelineDto>,
    /// The source, when it is a tag (or a journey, as `journey:<id>`).
    pub source_tag: Option<TagDto>,
    /// The target, when it is a guideline.
    pub target_guideline: Option<GuidelineDto>,
    /// The target, when it is a tag (or a journey).
    pub target_tag: Option<TagDto>,
    /// The source, when it is a tool.
    pub source_tool: Option<ToolDto>,
    /// The target, when it is a tool.
    pub target_tool: Option<ToolDto>,
    /// What it means.
    pub kind: RelationshipKindDto,
}

/// A new relationship: one source and one target.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct RelationshipCreationParams {
    /// Source guideline id.
    pub source_guideline: Option<String>,
    /// Source tag id (`journey:<id>` for a journey).
    pub source_tag: Option<String>,
    /// Source tool.
    pub source_tool: Option<ToolIdDto>,
    /// Target guideline id.
    pub target_guideline: Option<String>,
    /// Target tag id.
    pub target_tag: Option<String>,
    /// Target tool.
    pub target_tool: Option<ToolIdDto>,
    /// What it means.
    pub kind: RelationshipKindDto,
}

enum End {
    Guideline(GuidelineDto),
    Tag(TagDto),
    Tool(ToolDto),
}

async fn end(state: &AppState, e: &Endpoint) -> ApiResult<End> {
    Ok(match e {
        Endpoint::Guideline(id) => match state.store.get::<Guideline>(id).await? {
            Some(r) => End::Guideline(crate::routes::guidelines::dto(&r)),
            None => {
                End::Guideline(GuidelineDto::from(&guidepost_store::definitions::condition_guideline(id, "", vec![])))
            }
        },
        Endpoint::Journey(id) => {
            let tag = format!("journey:{id}");
            End::Tag(TagDto { id: tag.clone(), name: tag })
        }
        Endpoint::Tag { tag, .. } => match state.store.get::<Tag>(tag).await? {
            Some(r) => End::Tag(TagDto::from(&r.entity)),
            None => End::Tag(TagDto { id: tag.clone(), name: tag.clone() }),
        },
        Endpoint::Tool(id) => End::Tool(tool_dto(state, id).await?),
    })
}

async fn tool_dto(state: &AppState, id: &ToolId) -> ApiResult<ToolDto> {
    let found = state.store.list::<Tool>().await?.into_iter().find(|r| r.entity.id == *id);
    Ok(match found {
        Some(r) => ToolDto::of(&r.entity, r.created),
        None => ToolDto {
            creation_utc: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
            name: id.name.clone(),
            description: String::new(),
            parameters: IndexMap::new(),
            required: Vec::new(),
        },
    })
}

/// The wire form of a relationship.
pub async fn relationship_dto(state: &AppState, r: &Relationship) -> ApiResult<RelationshipDto> {
    let mut dto = RelationshipDto {
        id: r.id.clone(),
        source_guideline: None,
        source_tag: None,
        target_guideline: None,
        target_tag: None,
        source_tool: None,
        target_tool: None,
        kind: r.kind.into(),
    };
    match end(state, &r.source).await? {
        End::Guideline(g) => dto.source_guideline = Some(g),
        End::Tag(t) => dto.source_tag = Some(t),
        End::Tool(t) => dto.source_tool = Some(t),
    }
    match end(state, &r.target).await? {
        End::Guideline(g) => dto.target_guideline = Some(g),
        End::Tag(t) => dto.target_tag = Some(t),
        End::Tool(t) => dto.target_tool = Some(t),
    }
    Ok(dto)
}

/// Whether `r` involves `endpoint` directly, or (indirectly) through one of `tags`.
pub fn touches(r: &Relationship, endpoint: &Endpoint, tags: &[String]) -> bool {
    let through_tag = |e: &Endpoint| match e {
        Endpoint::Tag { tag, .. } => tags.contains(tag),
        Endpoint::Journey(j) => tags.contains(&format!("journey:{j}")),
        _ => false,
    };
    r.source == *endpoint || r.target == *endpoint || through_tag(&r.source) || through_tag(&r.target)
}

async fn endpoint_of(
    state: &AppState,
    side: &str,
    guideline: &Option<String>,
    tag: &Option<String>,
    tool: &Option<ToolIdDto>,
) -> ApiResult<Endpoint> {
    let given = [guideline.is_some(), tag.is_some(), tool.is_some()].iter().filter(|g| **g).count();
    if given != 1 {
        return Err(ApiError::invalid(FieldError::body(
            &[],
            "value_error",
            format!("give exactly one of {side}_guideline, {side}_tag and {side}_tool"),
        )));
    }
    if let Some(id) = guideline {
        state.store.require::<Guideline>(id).await?;
        return Ok(Endpoint::Guideline(id.clone()));
    }
    if let Some(tag) = tag {
        if let Some(journey) = tag.strip_prefix("journey:") {
            state.store.require::<Journey>(journey).await?;
            return Ok(Endpoint::Journey(journey.to_string()));
        }
        state.check_tags(std::slice::from_ref(tag)).await?;
        return Ok(Endpoint::Tag { tag: tag.clone(), mode: TagMode::All });
    }
    match tool {
        Some(t) => Ok(Endpoint::Tool(t.into())),
        None => Err(ApiError::Internal("no endpoint".into())),
    }
}

/// `POST /relationships`
pub async fn create(state: State, Body(params): Body<RelationshipCreationParams>) -> ApiResult<Response> {
    let source =
        endpoint_of(&state, "source", &params.source_guideline, &params.source_tag, &params.source_tool).await?;
    let target =
        endpoint_of(&state, "target", &params.target_guideline, &params.target_tag, &params.target_tool).await?;
    let kind: RelationshipKind = params.kind.into();
    let tools = matches!(source, Endpoint::Tool(_)) as u8 + matches!(target, Endpoint::Tool(_)) as u8;
    let valid = match kind {
        RelationshipKind::Overlap => tools == 2,
        RelationshipKind::Reevaluation => matches!(target, Endpoint::Tool(_)) && !matches!(source, Endpoint::Tool(_)),
        _ => tools == 0,
    };
    if !valid {
        return Err(ApiError::invalid(
            FieldError::body(
                &["kind"],
                "value_error",
                format!("a `{}` relationship cannot join these ends", kind.as_str()),
            )
            .with_input(json!(kind.as_str())),
        ));
    }
    let id = guidepost_store::ids::new_id();
    let r = Relationship { id: id.clone(), kind, source, target, group: None };
    state.store.apply(vec![Write::insert(&Record::new(id, r.clone()))?]).await?;
    Ok(created(relationship_dto(&state, &r).await?))
}

/// `GET /relationships?kind=&indirect=&guideline_id=&tag_id=&tool_id=`
pub async fn list(state: State, params: Params) -> ApiResult<Json<Vec<RelationshipDto>>> {
    let kind = params.choice::<RelationshipKindDto>(
        "kind",
        &["entailment", "priority", "dependency", "disambiguation", "overlap", "reevaluation"],
    )?;
    let indirect = params.boolean("indirect")?.unwrap_or(true);
    let mut filter: Option<(Endpoint, Vec<String>)> = None;
    if let Some(g) = params.string("guideline_id") {
        let record = state.store.require::<Guideline>(&g).await?;
        let tags = if indirect { record.entity.tags } else { Vec::new() };
        filter = Some((Endpoint::Guideline(g), tags));
    } else if let Some(t) = params.string("tag_id") {
        let endpoint = match t.strip_prefix("journey:") {
            Some(j) => Endpoint::Journey(j.to_string()),
            None => Endpoint::Tag { tag: t.clone(), mode: TagMode::All },
        };
        filter = Some((endpoint, vec![t]));
    } else if let Some(t) = params.string("tool_id") {
        let id = ToolId::parse(&t).ok_or_else(|| {
            ApiError::invalid(
                FieldError::query("tool_id", "value_error", "write a tool id as service_name:tool_name")
                    .with_input(json!(t)),
            )
        })?;
        filter = Some((Endpoint::Tool(id), Vec::new()));
    }
    let mut out = Vec::new();
    for r in state.store.list::<Relationship>().await? {
        let r = r.entity;
        if kind.is_some_and(|k| RelationshipKindDto::from(r.kind) != k) {
            continue;
        }
        let tag_mode_any = |e: &Endpoint| matches!(e, Endpoint::Tag { mode: TagMode::Any, .. });
        let keep = match &filter {
            None => true,
            Some((endpoint, tags)) => {
                touches(&r, endpoint, tags)
                    || (matches!(endpoint, Endpoint::Tag { .. })
                        && (tag_mode_any(&r.source) || tag_mode_any(&r.target))
                        && touches(&r, endpoint, tags))
            }
        };
        if keep {
            out.push(relationship_dto(&state, &r).await?);
        }
    }
    Ok(Json(out))
}

/// `GET /relationships/{relationship_id}`
pub async fn read(state: State, Path(id): Path<String>) -> ApiResult<Json<RelationshipDto>> {
    let r = state.store.require::<Relationship>(&id).await?;
    Ok(Json(relationship_dto(&state, &r.entity).await?))
}

/// `DELETE /relationships/{relationship_id}`
pub async fn delete(state: State, Path(id): Path<String>) -> ApiResult<Response> {
    state.store.delete::<Relationship>(&id).await?;
    Ok(no_content())
}
