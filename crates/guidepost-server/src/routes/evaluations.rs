//! `/evaluations`: a guideline reviewed before it goes live. Each payload is checked
//! against the store (the guideline it updates exists, its tools are known, it does not
//! repeat an existing guideline) and, as asked, the model proposes an action for a rule
//! that has none and the rule's properties: whether it holds continuously, and whether it
//! needs the customer to act (which the matcher reads as `metadata.customer_dependent`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::Path;
use axum::response::Response;
use guidepost_core::tool::Tool;
use guidepost_core::{Guideline, ToolService};
use guidepost_llm::{ChatModel, ChatRequest, TaskKind};
use guidepost_store::{Collection, Entity, Record, Write};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::sync::{Mutex, watch};

use crate::dto::ToolIdDto;
use crate::error::{ApiError, ApiResult, FieldError};
use crate::extract::{Body, Params};
use crate::routes::created;
use crate::routes::operation::{Operation, Param};
use crate::state::{AppState, State};

/// What this resource serves, each operation declared once (see [`crate::routes::operation`]).
pub fn operations() -> Vec<Operation> {
    vec![
        Operation::post("/evaluations", create, "create_evaluation", "Evaluates guidelines before they go live")
            .body::<EvaluationCreationParams>()
            .creates::<EvaluationDto>(),
        Operation::get(
            "/evaluations/{evaluation_id}",
            read,
            "read_evaluation",
            "Reads an evaluation, waiting for it to complete",
        )
        .query([Param::new("wait_for_completion", "integer", "Seconds to wait (default 60)")])
        .answers::<EvaluationDto>(),
    ]
}

const PROMPT: &str = include_str!("../prompts/evaluate_guideline.j2");

/// What is evaluated (only guidelines).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PayloadKindDto {
    /// A guideline.
    Guideline,
}

/// Whether the guideline is new or replaces one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OperationDto {
    /// A new guideline.
    Add,
    /// A change to `updated_id`.
    Update,
}

/// A guideline's condition and action.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct GuidelineContentDto {
    /// When it applies.
    pub condition: String,
    /// What the agent does.
    #[serde(default)]
    pub action: Option<String>,
}

/// A guideline to evaluate.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct GuidelinePayloadDto {
    /// Condition and action.
    pub content: GuidelineContentDto,
    /// Tools it may call.
    pub tool_ids: Vec<ToolIdDto>,
    /// New or a change.
    pub operation: OperationDto,
    /// The guideline it changes.
    #[serde(default)]
    pub updated_id: Option<String>,
    /// Propose an action when none is given.
    #[serde(default)]
    pub action_proposition: bool,
    /// Propose the guideline's properties.
    #[serde(default)]
    pub properties_proposition: bool,
    /// Propose journey-node properties (accepted; guidelines are not journey nodes here).
    #[serde(default)]
    pub journey_node_proposition: bool,
}

/// One thing to evaluate.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct PayloadDto {
    /// What it is.
    pub kind: PayloadKindDto,
    /// The guideline.
    pub guideline: Option<GuidelinePayloadDto>,
}

/// A new evaluation.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct EvaluationCreationParams {
    /// What to evaluate.
    pub payloads: Vec<PayloadDto>,
}

/// The result of one payload.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct InvoiceDto {
    /// The payload.
    pub payload: PayloadDto,
    /// A checksum of the payload (empty until evaluated).
    pub checksum: String,
    /// Whether the payload passed.
    pub approved: bool,
    /// What was proposed.
    pub data: Option<Value>,
    /// Why it did not pass.
    pub error: Option<String>,
}

/// An evaluation.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct EvaluationDto {
    /// Id.
    pub id: String,
    /// `pending`, `running`, `completed` or `failed`.
    pub status: String,
    /// Percent done.
    pub progress: f64,
    /// When it was created (ISO 8601).
    pub creation_utc: String,
    /// Why it failed.
    pub error: Option<String>,
    /// One per payload.
    pub invoices: Vec<InvoiceDto>,
}

/// A stored evaluation.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Evaluation {
    /// The evaluation as the wire shows it.
    pub dto: EvaluationDto,
}

impl Entity for Evaluation {
    const COLLECTION: Collection = Collection::Evaluations;
}

/// Evaluations running in this process, to wake readers waiting for completion.
#[derive(Default)]
pub struct RunningEvaluations(Mutex<HashMap<String, watch::Receiver<bool>>>);

#[derive(Debug, Deserialize)]
struct Proposal {
    continuous: bool,
    is_customer_dependent: bool,
    customer_action: Option<String>,
    agent_action: Option<String>,
    #[serde(default)]
    proposed_action: Option<String>,
}

fn schema(propose_action: bool) -> Value {
    let mut properties = json!({
        "continuous": {"type": "boolean"},
        "is_customer_dependent": {"type": "boolean"},
        "customer_action": {"type": ["string", "null"]},
        "agent_action": {"type": ["string", "null"]},
    });
    let mut required = vec!["continuous", "is_customer_dependent", "customer_action", "agent_action"];
    if propose_action {
        properties["proposed_action"] = json!({"type": "string"});
        required.push("proposed_action");
    }
    json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false})
}

async fn propose(model: &dyn ChatModel, p: &GuidelinePayloadDto) -> Result<Proposal, String> {
    let propose_action = p.action_proposition && p.content.action.as_deref().is_none_or(|a| a.trim().is_empty());
    let tools: Vec<String> = p.tool_ids.iter().map(|t| format!("{}:{}", t.service_name, t.tool_name)).collect();
    let prompt = guidepost_core::templates::render_prompt(
        "evaluate_guideline.j2",
        PROMPT,
        json!({"condition": p.content.condition, "action": p.content.action, "tools": tools, "propose_action": propose_action}),
    )
    .map_err(|e| e.to_string())?;
    let request = ChatRequest::new(TaskKind::Other("evaluation".into()))
        .user(prompt)
        .json_output("GuidelineEvaluation", schema(propose_action))
        .temperature(0.0);
    let response =
        model.complete(request).await.map_err(|e| format!("the model could not evaluate the guideline: {e}"))?;
    let value = response.output.as_json().cloned().ok_or("the model did not answer in JSON")?;
    serde_json::from_value(value).map_err(|e| format!("the model's evaluation does not fit: {e}"))
}

async fn check(state: &AppState, p: &GuidelinePayloadDto) -> Result<(), String> {
    if p.content.condition.trim().is_empty() {
        return Err("the condition is empty".into());
    }
    let guidelines = state.store.list::<Guideline>().await.map_err(|e| e.to_string())?;
    if p.operation == OperationDto::Update
        && let Some(id) = &p.updated_id
        && !guidelines.iter().any(|g| g.id == *id)
    {
        return Err(format!("guideline `{id}` does not exist"));
    }
    let same = |g: &Record<Guideline>| {
        g.entity.condition.trim().eq_ignore_ascii_case(p.content.condition.trim())
            && g.entity.action.as_deref().map(str::trim) == p.content.action.as_deref().map(str::trim)
            && Some(&g.id) != p.updated_id.as_ref()
    };
    if let Some(g) = guidelines.iter().find(|g| same(g)) {
        return Err(format!("guideline `{}` already says the same", g.id));
    }
    let tools = state.store.list::<Tool>().await.map_err(|e| e.to_string())?;
    let services = state.store.list::<ToolService>().await.map_err(|e| e.to_string())?;
    for t in &p.tool_ids {
        let declared = tools.iter().any(|r| r.entity.id.service == t.service_name && r.entity.id.name == t.tool_name);
        let served = services.iter().any(|r| r.entity.name == t.service_name && r.entity.kind.is_dynamic());
        if !declared && !served {
            return Err(format!(
                "tool `{}:{}` is not known: declare it or register its service",
                t.service_name, t.tool_name
            ));
        }
    }
    Ok(())
}

fn checksum(p: &PayloadDto) -> String {
    let text = serde_json::to_string(p).unwrap_or_default();
    Sha256::digest(text.as_bytes()).iter().take(16).map(|b| format!("{b:02x}")).collect()
}

async fn set_status(state: &AppState, id: &str, change: impl FnMut(&mut EvaluationDto)) {
    let mut change = change;
    if let Err(error) = state
        .store
        .update::<Evaluation>(id, |r| {
            change(&mut r.entity.dto);
            Ok(())
        })
        .await
    {
        tracing::error!(%error, evaluation = %id, "could not store the evaluation's progress");
    }
}

async fn run(state: Arc<AppState>, id: String, done: watch::Sender<bool>) {
    let model = state.conversations.models().matching.clone();
    let Ok(record) = state.store.require::<Evaluation>(&id).await else { return };
    set_status(&state, &id, |d| d.status = "running".into()).await;
    let mut invoices = record.entity.dto.invoices.clone();
    let total = invoices.len().max(1) as f64;
    for (i, invoice) in invoices.iter_mut().enumerate() {
        let payload = invoice.payload.clone();
        invoice.checksum = checksum(&payload);
        let Some(p) = payload.guideline.as_ref() else {
            invoice.error = Some("a guideline payload needs `guideline`".into());
            continue;
        };
        if let Err(e) = check(&state, p).await {
            invoice.error = Some(e);
            continue;
        }
        let needs_model = p.properties_proposition || (p.action_proposition && p.content.action.is_none());
        let mut data = json!({"action_proposition": null, "properties_proposition": null});
        if needs_model {
            match propose(model.as_ref(), p).await {
                Ok(proposal) => {
                    if p.action_proposition && p.content.action.is_none() {
                        data["action_proposition"] = json!(proposal.proposed_action);
                    }
                    if p.properties_proposition {
                        data["properties_proposition"] = json!({
                            "continuous": proposal.continuous,
                            "customer_dependent_action_data": {
                                "is_customer_dependent": proposal.is_customer_dependent,
                                "customer_action": proposal.customer_action,
                                "agent_action": proposal.agent_action,
                            },
                            "customer_dependent": proposal.is_customer_dependent,
                            "agent_intention_condition": null,
                            "internal_action": null,
                        });
                    }
                }
                Err(e) => {
                    invoice.error = Some(e);
                    continue;
                }
            }
        }
        invoice.approved = true;
        invoice.data = Some(json!({"guideline": data}));
        let progress = ((i + 1) as f64 / total * 100.0).round();
        set_status(&state, &id, |d| d.progress = progress).await;
    }
    set_status(&state, &id, |d| {
        d.invoices.clone_from(&invoices);
        d.status = "completed".into();
        d.progress = 100.0;
    })
    .await;
    let _ = done.send(true);
    state.evaluations.0.lock().await.remove(&id);
}

/// Evaluations a stopped process left unfinished are marked failed (their client can
/// create them again).
pub async fn fail_orphans(state: &AppState) -> guidepost_store::Result<()> {
    for record in state.store.list::<Evaluation>().await? {
        if matches!(record.entity.dto.status.as_str(), "pending" | "running") {
            set_status(state, &record.id, |d| {
                d.status = "failed".into();
                d.error = Some("the server stopped before the evaluation finished; create it again".into());
            })
            .await;
        }
    }
    Ok(())
}

/// `POST /evaluations`
pub async fn create(state: State, Body(params): Body<EvaluationCreationParams>) -> ApiResult<Response> {
    if params.payloads.is_empty() {
        return Err(ApiError::invalid(FieldError::body(
            &["payloads"],
            "too_short",
            "No payloads provided for the evaluation task.",
        )));
    }
    for (i, p) in params.payloads.iter().enumerate() {
        let Some(g) = &p.guideline else {
            return Err(ApiError::invalid(FieldError::new(
                vec![json!("body"), json!("payloads"), json!(i), json!("guideline")],
                "missing",
                "Field required",
            )));
        };
        if !(g.action_proposition || g.properties_proposition || g.journey_node_proposition) {
            return Err(ApiError::invalid(FieldError::new(
                vec![json!("body"), json!("payloads"), json!(i), json!("guideline")],
                "value_error",
                "At least one of action_proposition, properties_proposition or journey_node_proposition must be enabled",
            )));
        }
    }
    let id = guidepost_store::ids::new_id();
    let dto = EvaluationDto {
        id: id.clone(),
        status: "pending".into(),
        progress: 0.0,
        creation_utc: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
        error: None,
        invoices: params
            .payloads
            .into_iter()
            .map(|payload| InvoiceDto { payload, checksum: String::new(), approved: false, data: None, error: None })
            .collect(),
    };
    state.store.apply(vec![Write::insert(&Record::new(id.clone(), Evaluation { dto: dto.clone() }))?]).await?;
    let (tx, rx) = watch::channel(false);
    state.evaluations.0.lock().await.insert(id.clone(), rx);
    tokio::spawn(run(state.0.clone(), id, tx));
    Ok(created(dto))
}

/// `GET /evaluations/{evaluation_id}?wait_for_completion=`: waits (60 s by default) for
/// the evaluation to finish; 504 if it did not.
pub async fn read(state: State, Path(id): Path<String>, params: Params) -> ApiResult<Json<EvaluationDto>> {
    let wait = params.number::<u64>("wait_for_completion")?.unwrap_or(60).min(3600);
    let record = state.store.require::<Evaluation>(&id).await?;
    if wait == 0 || matches!(record.entity.dto.status.as_str(), "completed" | "failed") {
        return Ok(Json(record.entity.dto));
    }
    let rx = state.evaluations.0.lock().await.get(&id).cloned();
    if let Some(mut rx) = rx {
        let finished = tokio::time::timeout(Duration::from_secs(wait), rx.wait_for(|done| *done)).await;
        if finished.is_err() {
            return Err(ApiError::Timeout);
        }
    }
    let record = state.store.require::<Evaluation>(&id).await?;
    if matches!(record.entity.dto.status.as_str(), "completed" | "failed") {
        Ok(Json(record.entity.dto))
    } else {
        Err(ApiError::Timeout)
    }
}
