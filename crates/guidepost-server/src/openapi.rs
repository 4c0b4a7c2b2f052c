//! The server's own OpenAPI document, generated from the code: every operation is listed
//! here with the request and response types its handler uses, and their JSON Schemas come
//! from those types. Served at `GET /openapi.json`.

use std::sync::OnceLock;

use axum::Json;
use schemars::generate::{SchemaGenerator, SchemaSettings};
use schemars::{JsonSchema, Schema};
use serde_json::{Map, Value, json};

use crate::dto::{GuidelineDto, PageDto, TagDto};
use crate::routes::agents::{AgentCreationParams, AgentDto, AgentUpdateParams, ImportResultDto};
use crate::routes::canned_responses::{CannedResponseCreationParams, CannedResponseDto, CannedResponseUpdateParams};
use crate::routes::capabilities::{CapabilityCreationParams, CapabilityDto, CapabilityUpdateParams};
use crate::routes::customers::{CustomerCreationParams, CustomerDto, CustomerUpdateParams};
use crate::routes::evaluations::{EvaluationCreationParams, EvaluationDto};
use crate::routes::events::{EventCreationParams, EventDto, EventUpdateParams};
use crate::routes::guidelines::{GuidelineCreationParams, GuidelineUpdateParams, GuidelineWithRelationshipsDto};
use crate::routes::journeys::{
    JourneyCreationParams, JourneyDto, JourneyStateDto, JourneyStateParams, JourneyUpdateParams, TransitionDto,
    TransitionParams,
};
use crate::routes::relationships::{RelationshipCreationParams, RelationshipDto};
use crate::routes::services::{ServiceDto, ServiceUpdateParams};
use crate::routes::sessions::{SessionCreationParams, SessionDto, SessionUpdateParams, TurnDto, UsageDto};
use crate::routes::simulations::{SimulationDto, SimulationRunDto};
use crate::routes::tags::TagParams;
use crate::routes::terms::{TermCreationParams, TermDto, TermUpdateParams};
use crate::routes::variables::{
    ContextVariableCreationParams, ContextVariableDto, ContextVariableReadResult, ContextVariableUpdateParams,
    ContextVariableValueDto, ContextVariableValueParams,
};

type SchemaFn = fn(&mut SchemaGenerator) -> Schema;

/// What the listings that page on request answer, as the reference declares it: a page
/// when `limit` is given, else every item in a plain array.
#[derive(JsonSchema)]
#[schemars(untagged)]
#[allow(dead_code)]
enum PageOrList<T> {
    /// With `limit`.
    Page(PageDto<T>),
    /// Without `limit`.
    All(Vec<T>),
}

fn s<T: JsonSchema>(g: &mut SchemaGenerator) -> Schema {
    g.subschema_for::<T>()
}

/// One operation of the API.
pub struct Operation {
    /// HTTP method, lowercase.
    pub method: &'static str,
    /// Path with `{parameters}`.
    pub path: &'static str,
    /// The operation id (the reference's, for the compatible routes).
    pub id: &'static str,
    /// What it does.
    pub summary: &'static str,
    /// Query parameters: name, JSON type, description.
    pub query: &'static [(&'static str, &'static str, &'static str)],
    /// The request body's type.
    pub body: Option<SchemaFn>,
    /// Success status.
    pub status: u16,
    /// The success body's type (`None`: no body, or not JSON).
    pub response: Option<SchemaFn>,
    /// Whether it is a Guidepost extension (not in the reference API).
    pub extension: bool,
}

macro_rules! op {
    ($method:literal $path:literal $id:literal, $summary:literal, q: [$(($qn:literal, $qt:literal, $qd:literal)),*], body: $body:expr, $status:literal => $resp:expr $(, ext $ext:literal)?) => {
        Operation {
            method: $method,
            path: $path,
            id: $id,
            summary: $summary,
            query: &[$(($qn, $qt, $qd)),*],
            body: $body,
            status: $status,
            response: $resp,
            extension: false $(|| $ext)?,
        }
    };
}

/// Every operation the server serves.
pub fn operations() -> Vec<Operation> {
    vec![
        op!("get" "/healthz" "health_check_healthz_get", "Whether the server and its database answer", q: [], body: None, 200 => None),
        op!("get" "/metrics" "metrics", "Prometheus metrics", q: [], body: None, 200 => None, ext true),
        op!("get" "/openapi.json" "openapi", "This document", q: [], body: None, 200 => None, ext true),
        op!("post" "/agents" "create_agent", "Creates an agent", q: [], body: Some(s::<AgentCreationParams>), 201 => Some(s::<AgentDto>)),
        op!("get" "/agents" "list_agents", "Lists the agents", q: [], body: None, 200 => Some(s::<Vec<AgentDto>>)),
        op!("get" "/agents/{agent_id}" "read_agent", "Reads an agent", q: [], body: None, 200 => Some(s::<AgentDto>)),
        op!("patch" "/agents/{agent_id}" "update_agent", "Changes an agent", q: [], body: Some(s::<AgentUpdateParams>), 200 => Some(s::<AgentDto>)),
        op!("delete" "/agents/{agent_id}" "delete_agent", "Deletes an agent and what its definition files defined", q: [], body: None, 204 => None),
        op!("get" "/agents/{agent_id}/definition" "export_agent_definition", "The agent's definition in the authoring format (YAML, or JSON with format=json)", q: [("format", "string", "yaml (default) or json")], body: None, 200 => None, ext true),
        op!("put" "/agents/{agent_id}/definition" "import_agent_definition", "Replaces what the agent's definition defines with the YAML or JSON body", q: [], body: None, 200 => Some(s::<ImportResultDto>), ext true),
        op!("post" "/sessions" "create_session", "Creates a session (the agent speaks first with allow_greeting=true)", q: [("allow_greeting", "boolean", "Let the agent start the conversation")], body: Some(s::<SessionCreationParams>), 201 => Some(s::<SessionDto>)),
        op!("get" "/sessions" "list_sessions", "Lists sessions: a plain array, or a page with limit", q: [("agent_id", "string", "Only this agent's"), ("customer_id", "string", "Only this customer's"), ("labels", "string", "Only sessions with every given label (repeatable)"), ("limit", "integer", "Page size, 1 to 100"), ("cursor", "string", "The next_cursor of the previous page"), ("sort", "string", "asc or desc")], body: None, 200 => Some(s::<PageOrList<SessionDto>>)),
        op!("delete" "/sessions" "delete_sessions", "Deletes the sessions of an agent or customer", q: [("agent_id", "string", "Only this agent's"), ("customer_id", "string", "Only this customer's")], body: None, 204 => None),
        op!("get" "/sessions/{session_id}" "read_session", "Reads a session", q: [], body: None, 200 => Some(s::<SessionDto>)),
        op!("delete" "/sessions/{session_id}" "delete_session", "Deletes a session with its events", q: [], body: None, 204 => None),
        op!("patch" "/sessions/{session_id}" "update_session", "Changes a session", q: [], body: Some(s::<SessionUpdateParams>), 200 => Some(s::<SessionDto>)),
        op!("post" "/sessions/{session_id}/events" "create_event", "Adds an event; a customer message starts a turn", q: [("moderation", "string", "auto, paranoid or none")], body: Some(s::<EventCreationParams>), 201 => Some(s::<EventDto>)),
        op!("get" "/sessions/{session_id}/events" "list_events", "Lists events; waits up to wait_for_data seconds for one (504 when none came); sse=true streams them", q: [("min_offset", "integer", "From this offset on"), ("source", "string", "Only from this source"), ("correlation_id", "string", "Only of this trace"), ("trace_id", "string", "Only of this trace"), ("kinds", "string", "Comma-separated kinds"), ("wait_for_data", "integer", "Seconds to wait for a matching event (default 60)"), ("sse", "boolean", "Stream as server-sent events")], body: None, 200 => Some(s::<Vec<EventDto>>)),
        op!("delete" "/sessions/{session_id}/events" "delete_events", "Soft-deletes events from min_offset on", q: [("min_offset", "integer", "First offset to delete (required)")], body: None, 204 => None),
        op!("get" "/sessions/{session_id}/events/{event_id}" "read_event", "Reads an event; waits for a streamed message to complete, or streams its chunks", q: [("wait_for_completion", "boolean", "Wait until the message is complete"), ("wait_for_data", "integer", "Seconds to wait (default 60)"), ("sse", "boolean", "Stream its updates")], body: None, 200 => Some(s::<EventDto>)),
        op!("patch" "/sessions/{session_id}/events/{event_id}" "update_event", "Changes an event's metadata", q: [], body: Some(s::<EventUpdateParams>), 200 => Some(s::<EventDto>)),
        op!("get" "/sessions/{session_id}/turns" "list_turns", "The session's turns with their traces (what matched and why, journey moves, tool calls, model usage)", q: [], body: None, 200 => Some(s::<Vec<TurnDto>>), ext true),
        op!("get" "/sessions/{session_id}/turns/{trace_id}" "read_turn", "One turn with its trace", q: [], body: None, 200 => Some(s::<TurnDto>), ext true),
        op!("get" "/simulations" "list_simulations", "The simulator's runs in the server's --simulations folder, newest first", q: [], body: None, 200 => Some(s::<Vec<SimulationRunDto>>), ext true),
        op!("get" "/simulations/{conversation_id}" "read_simulation", "A simulated conversation with its steps and its suite's journey coverage", q: [], body: None, 200 => Some(s::<SimulationDto>), ext true),
        op!("get" "/sessions/{session_id}/usage" "read_session_usage", "The session's model usage", q: [], body: None, 200 => Some(s::<UsageDto>), ext true),
        op!("put" "/services/{name}" "update_service", "Creates or replaces a tool service", q: [], body: Some(s::<ServiceUpdateParams>), 200 => Some(s::<ServiceDto>)),
        op!("delete" "/services/{name}" "delete_service", "Deletes a tool service", q: [], body: None, 204 => None),
        op!("get" "/services/{name}" "read_service", "Reads a tool service with its tools, listed live (503 when it does not answer)", q: [], body: None, 200 => Some(s::<ServiceDto>)),
        op!("get" "/services" "list_services", "Lists the tool services", q: [], body: None, 200 => Some(s::<Vec<ServiceDto>>)),
        op!("post" "/tags" "create_tag", "Creates a tag", q: [], body: Some(s::<TagParams>), 201 => Some(s::<TagDto>)),
        op!("get" "/tags" "list_tags", "Lists tags", q: [("name", "string", "Only tags with this name")], body: None, 200 => Some(s::<Vec<TagDto>>)),
        op!("get" "/tags/{tag_id}" "read_tag", "Reads a tag", q: [], body: None, 200 => Some(s::<TagDto>)),
        op!("patch" "/tags/{tag_id}" "update_tag", "Renames a tag", q: [], body: Some(s::<TagParams>), 200 => Some(s::<TagDto>)),
        op!("delete" "/tags/{tag_id}" "delete_tag", "Deletes a tag", q: [], body: None, 204 => None),
        op!("post" "/terms" "create_term", "Adds a glossary term", q: [], body: Some(s::<TermCreationParams>), 201 => Some(s::<TermDto>)),
        op!("get" "/terms" "list_terms", "Lists glossary terms", q: [("tag_id", "string", "Only terms with this tag")], body: None, 200 => Some(s::<Vec<TermDto>>)),
        op!("get" "/terms/{term_id}" "read_term", "Reads a term", q: [], body: None, 200 => Some(s::<TermDto>)),
        op!("patch" "/terms/{term_id}" "update_term", "Changes a term", q: [], body: Some(s::<TermUpdateParams>), 200 => Some(s::<TermDto>)),
        op!("delete" "/terms/{term_id}" "delete_term", "Deletes a term", q: [], body: None, 204 => None),
        op!("post" "/customers" "create_customer", "Creates a customer", q: [], body: Some(s::<CustomerCreationParams>), 201 => Some(s::<CustomerDto>)),
        op!("get" "/customers" "list_customers", "Lists customers: a plain array, or a page with limit", q: [("limit", "integer", "Page size, 1 to 100"), ("cursor", "string", "The next_cursor of the previous page"), ("sort", "string", "asc or desc")], body: None, 200 => Some(s::<PageOrList<CustomerDto>>)),
        op!("get" "/customers/{customer_id}" "read_customer", "Reads a customer", q: [], body: None, 200 => Some(s::<CustomerDto>)),
        op!("patch" "/customers/{customer_id}" "update_customer", "Changes a customer", q: [], body: Some(s::<CustomerUpdateParams>), 200 => Some(s::<CustomerDto>)),
        op!("delete" "/customers/{customer_id}" "delete_customer", "Deletes a customer", q: [], body: None, 204 => None),
        op!("post" "/canned_responses" "create_canned_response", "Adds an approved reply template", q: [], body: Some(s::<CannedResponseCreationParams>), 201 => Some(s::<CannedResponseDto>)),
        op!("get" "/canned_responses" "list_canned_responses", "Lists canned responses", q: [("tags", "string", "Only those with every given tag (repeatable)")], body: None, 200 => Some(s::<Vec<CannedResponseDto>>)),
        op!("get" "/canned_responses/{canned_response_id}" "read_canned_response", "Reads a canned response", q: [], body: None, 200 => Some(s::<CannedResponseDto>)),
        op!("patch" "/canned_responses/{canned_response_id}" "update_canned_response", "Changes a canned response", q: [], body: Some(s::<CannedResponseUpdateParams>), 200 => Some(s::<CannedResponseDto>)),
        op!("delete" "/canned_responses/{canned_response_id}" "delete_canned_response", "Deletes a canned response", q: [], body: None, 204 => None),
        op!("post" "/context-variables" "create_variable", "Creates a context variable", q: [], body: Some(s::<ContextVariableCreationParams>), 201 => Some(s::<ContextVariableDto>)),
        op!("get" "/context-variables" "list_variables", "Lists context variables", q: [("tag_id", "string", "Only those with this tag")], body: None, 200 => Some(s::<Vec<ContextVariableDto>>)),
        op!("delete" "/context-variables" "delete_variables", "Deletes the context variables with a tag (all without one)", q: [("tag_id", "string", "Only those with this tag")], body: None, 204 => None),
        op!("patch" "/context-variables/{variable_id}" "update_variable", "Changes a context variable", q: [], body: Some(s::<ContextVariableUpdateParams>), 200 => Some(s::<ContextVariableDto>)),
        op!("get" "/context-variables/{variable_id}" "read_variable", "Reads a context variable with its values", q: [("include_values", "boolean", "Include the values (default true)")], body: None, 200 => Some(s::<ContextVariableReadResult>)),
        op!("delete" "/context-variables/{variable_id}" "delete_variable", "Deletes a context variable and its values", q: [], body: None, 204 => None),
        op!("get" "/context-variables/{variable_id}/{key}" "read_variable_value", "Reads a value (key: a customer id, tag:<id> or DEFAULT)", q: [], body: None, 200 => Some(s::<ContextVariableValueDto>)),
        op!("put" "/context-variables/{variable_id}/{key}" "update_variable_value", "Sets a value", q: [], body: Some(s::<ContextVariableValueParams>), 200 => Some(s::<ContextVariableValueDto>)),
        op!("delete" "/context-variables/{variable_id}/{key}" "delete_value", "Deletes a value", q: [], body: None, 204 => None),
        op!("post" "/guidelines" "create_guideline", "Creates a guideline", q: [], body: Some(s::<GuidelineCreationParams>), 201 => Some(s::<GuidelineDto>)),
        op!("get" "/guidelines" "list_guidelines", "Lists guidelines", q: [("tag_id", "string", "Only those with this tag")], body: None, 200 => Some(s::<Vec<GuidelineDto>>)),
        op!("get" "/guidelines/{guideline_id}" "read_guideline", "Reads a guideline with its relationships and tools", q: [], body: None, 200 => Some(s::<GuidelineWithRelationshipsDto>)),
        op!("patch" "/guidelines/{guideline_id}" "update_guideline", "Changes a guideline", q: [], body: Some(s::<GuidelineUpdateParams>), 200 => Some(s::<GuidelineWithRelationshipsDto>)),
        op!("delete" "/guidelines/{guideline_id}" "delete_guideline", "Deletes a guideline with its relationships", q: [], body: None, 204 => None),
        op!("post" "/relationships" "create_relationship", "Creates a relationship", q: [], body: Some(s::<RelationshipCreationParams>), 201 => Some(s::<RelationshipDto>)),
        op!("get" "/relationships" "list_relationships", "Lists relationships", q: [("kind", "string", "Only of this kind"), ("indirect", "boolean", "Include those through tags (default true)"), ("guideline_id", "string", "Involving this guideline"), ("tag_id", "string", "Involving this tag"), ("tool_id", "string", "Involving this tool (service:name)")], body: None, 200 => Some(s::<Vec<RelationshipDto>>)),
        op!("get" "/relationships/{relationship_id}" "read_relationship", "Reads a relationship", q: [], body: None, 200 => Some(s::<RelationshipDto>)),
        op!("delete" "/relationships/{relationship_id}" "delete_relationship", "Deletes a relationship", q: [], body: None, 204 => None),
        op!("post" "/journeys" "create_journey", "Creates a journey from condition texts", q: [], body: Some(s::<JourneyCreationParams>), 201 => Some(s::<JourneyDto>)),
        op!("get" "/journeys" "list_journeys", "Lists journeys", q: [("tag_id", "string", "Only those with this tag")], body: None, 200 => Some(s::<Vec<JourneyDto>>)),
        op!("get" "/journeys/{journey_id}" "read_journey", "Reads a journey (with its Mermaid diagram on request)", q: [("include_mermaid_chart", "boolean", "Add mermaid_chart")], body: None, 200 => Some(s::<JourneyDto>)),
        op!("patch" "/journeys/{journey_id}" "update_journey", "Changes a journey", q: [], body: Some(s::<JourneyUpdateParams>), 200 => Some(s::<JourneyDto>)),
        op!("delete" "/journeys/{journey_id}" "delete_journey", "Deletes a journey with its conditions and scoped guidelines", q: [], body: None, 204 => None),
        op!("get" "/journeys/{journey_id}/mermaid" "journey_mermaid", "The journey as a Mermaid state diagram", q: [], body: None, 200 => None),
        op!("get" "/journeys/{journey_id}/states" "list_journey_states", "Lists a journey's states", q: [], body: None, 200 => Some(s::<Vec<JourneyStateDto>>), ext true),
        op!("post" "/journeys/{journey_id}/states" "create_journey_state", "Adds a state to a journey", q: [], body: Some(s::<JourneyStateParams>), 201 => Some(s::<JourneyStateDto>), ext true),
        op!("get" "/journeys/{journey_id}/states/{state_id}" "read_journey_state", "Reads a journey state", q: [], body: None, 200 => Some(s::<JourneyStateDto>), ext true),
        op!("put" "/journeys/{journey_id}/states/{state_id}" "replace_journey_state", "Replaces a journey state", q: [], body: Some(s::<JourneyStateParams>), 200 => Some(s::<JourneyStateDto>), ext true),
        op!("delete" "/journeys/{journey_id}/states/{state_id}" "delete_journey_state", "Deletes a journey state with its transitions", q: [], body: None, 204 => None, ext true),
        op!("get" "/journeys/{journey_id}/transitions" "list_journey_transitions", "Lists a journey's transitions", q: [], body: None, 200 => Some(s::<Vec<TransitionDto>>), ext true),
        op!("post" "/journeys/{journey_id}/transitions" "create_journey_transition", "Adds a transition", q: [], body: Some(s::<TransitionParams>), 201 => Some(s::<TransitionDto>), ext true),
        op!("delete" "/journeys/{journey_id}/transitions/{transition_id}" "delete_journey_transition", "Deletes a transition", q: [], body: None, 204 => None, ext true),
        op!("post" "/evaluations" "create_evaluation", "Evaluates guidelines before they go live", q: [], body: Some(s::<EvaluationCreationParams>), 201 => Some(s::<EvaluationDto>)),
        op!("get" "/evaluations/{evaluation_id}" "read_evaluation", "Reads an evaluation, waiting for it to complete", q: [("wait_for_completion", "integer", "Seconds to wait (default 60)")], body: None, 200 => Some(s::<EvaluationDto>)),
        op!("post" "/capabilities" "create_capability", "Adds a capability", q: [], body: Some(s::<CapabilityCreationParams>), 201 => Some(s::<CapabilityDto>)),
        op!("get" "/capabilities" "list_capabilities", "Lists capabilities", q: [("tag_id", "string", "Only those with this tag")], body: None, 200 => Some(s::<Vec<CapabilityDto>>)),
        op!("get" "/capabilities/{capability_id}" "read_capability", "Reads a capability", q: [], body: None, 200 => Some(s::<CapabilityDto>)),
        op!("patch" "/capabilities/{capability_id}" "update_capability", "Changes a capability", q: [], body: Some(s::<CapabilityUpdateParams>), 200 => Some(s::<CapabilityDto>)),
        op!("delete" "/capabilities/{capability_id}" "delete_capability", "Deletes a capability", q: [], body: None, 204 => None),
    ]
}

fn error_body() -> Value {
    json!({"type": "object", "properties": {"detail": {"type": "string"}}, "required": ["detail"]})
}

fn validation_body() -> Value {
    json!({
        "type": "object",
        "properties": {"detail": {"type": "array", "items": {
            "type": "object",
            "properties": {
                "loc": {"type": "array", "items": {"anyOf": [{"type": "string"}, {"type": "integer"}]}},
                "msg": {"type": "string"},
                "type": {"type": "string"},
                "input": {}
            },
            "required": ["loc", "msg", "type"]
        }}},
        "required": ["detail"]
    })
}

/// The answers any operation of its kind may give besides its own: refused keys and roles,
/// rate limits, writes that collide with what is stored, bodies over the size limit, and an
/// unavailable dependency.
fn generic_responses(op: &Operation) -> Vec<(u16, &'static str)> {
    let mut out = vec![
        (401, "No API key where one is needed, or a key that matches none"),
        (403, "The API key's role does not allow this operation"),
        (429, "Too many requests or failed authentications: retry after the Retry-After header's seconds"),
    ];
    if op.method != "get" {
        out.push((409, "Conflicts with what is stored (an id already taken, a change that would break a journey)"));
    }
    if op.body.is_some() || matches!(op.method, "put" | "post") {
        out.push((413, "The body, or an event's data, is over the size limit"));
    }
    if matches!(op.id, "read_service" | "health_check_healthz_get") {
        out.push((503, "A tool service or the database does not answer"));
    }
    out
}

/// The bodies of the operations whose answer is not one of the API's types: text, YAML, the
/// health report (the same on 200 and 503).
fn other_content(id: &str) -> Option<Value> {
    let text = json!({"schema": {"type": "string"}});
    match id {
        "journey_mermaid" | "metrics" => Some(json!({"text/plain": text})),
        "export_agent_definition" => {
            Some(json!({"application/yaml": text, "application/json": {"schema": {"type": "object"}}}))
        }
        "openapi" => Some(json!({"application/json": {"schema": {"type": "object"}}})),
        "health_check_healthz_get" => {
            let status = json!({"type": "string", "enum": ["healthy", "unhealthy"]});
            Some(json!({"application/json": {"schema": {
                "type": "object",
                "properties": {"status": status, "checks": {"type": "object"}},
                "required": ["status", "checks"]
            }}}))
        }
        _ => None,
    }
}

/// The document.
pub fn document() -> &'static Value {
    static DOC: OnceLock<Value> = OnceLock::new();
    DOC.get_or_init(build)
}

fn build() -> Value {
    let mut generator =
        SchemaSettings::draft2020_12().with(|s| s.definitions_path = "/components/schemas".into()).into_generator();
    let mut paths = Map::new();
    for op in operations() {
        let mut parameters: Vec<Value> = op
            .path
            .split('/')
            .filter_map(|seg| seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
            .map(|name| json!({"name": name, "in": "path", "required": true, "schema": {"type": "string"}}))
            .collect();
        parameters.extend(op.query.iter().map(|(name, kind, description)| {
            let required = op.id == "delete_events" && *name == "min_offset";
            json!({"name": name, "in": "query", "required": required, "description": description, "schema": {"type": kind}})
        }));
        let mut responses = Map::new();
        let ok = match op.response {
            Some(f) => {
                json!({"description": "Success", "content": {"application/json": {"schema": f(&mut generator)}}})
            }
            None => json!({"description": "Success"}),
        };
        responses.insert(op.status.to_string(), ok);
        if op.path.contains('{') || op.body.is_some() || op.query.iter().any(|(n, _, _)| n.ends_with("_id")) {
            responses.insert(
                "404".into(),
                json!({"description": "Not found: the path's item, or one the request refers to (a tag, an agent, a customer)", "content": {"application/json": {"schema": error_body()}}}),
            );
        }
        if op.body.is_some() || !op.query.is_empty() || op.path.contains('{') {
            responses.insert("422".into(), json!({"description": "Validation error", "content": {"application/json": {"schema": validation_body()}}}));
        }
        if op.query.iter().any(|(n, _, _)| n.starts_with("wait_for")) {
            responses.insert("504".into(), json!({"description": "Nothing arrived in time", "content": {"application/json": {"schema": error_body()}}}));
        }
        if op.query.iter().any(|(n, _, _)| *n == "sse")
            && let Some(content) = responses.get_mut(&op.status.to_string()).and_then(|r| r.get_mut("content"))
        {
            content["text/event-stream"] = json!({"schema": {"type": "string", "description": "Server-sent events, one `data:` line of JSON each"}});
        }
        for (code, description) in generic_responses(&op) {
            responses.insert(
                code.to_string(),
                json!({"description": description, "content": {"application/json": {"schema": error_body()}}}),
            );
        }
        if let Some(content) = other_content(op.id) {
            for (code, response) in responses.iter_mut() {
                if code == &op.status.to_string() || (op.id == "health_check_healthz_get" && code == "503") {
                    response["content"] = content.clone();
                }
            }
        }
        let mut operation = json!({
            "operationId": op.id,
            "summary": op.summary,
            "parameters": parameters,
            "responses": responses,
        });
        if op.id == "import_agent_definition" {
            // 201 when the definition created the agent, 200 when it changed or kept one.
            if let Some(ok) = operation["responses"].get("200").cloned() {
                operation["responses"]["201"] = ok;
            }
            operation["requestBody"] = json!({"required": true, "content": {
                "application/yaml": {"schema": {"type": "string", "description": "An agent definition file"}},
                "application/json": {"schema": {"type": "object", "description": "An agent definition in JSON"}}
            }});
        }
        if let Some(body) = op.body {
            operation["requestBody"] =
                json!({"required": true, "content": {"application/json": {"schema": body(&mut generator)}}});
        }
        if op.extension {
            operation["x-guidepost-extension"] = json!(true);
        }
        let entry = paths.entry(op.path.to_string()).or_insert_with(|| json!({}));
        entry[op.method] = operation;
    }
    let schemas = generator.take_definitions(true);
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Guidepost API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "The Parlant 3.3-compatible REST API of Guidepost, with Guidepost's extensions (marked x-guidepost-extension)."
        },
        "paths": paths,
        "components": {"schemas": schemas}
    })
}

/// `GET /openapi.json`
pub async fn serve() -> Json<Value> {
    Json(document().clone())
}
