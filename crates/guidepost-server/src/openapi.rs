//! The server's own OpenAPI document, generated from the code: every operation is declared
//! beside its handler (each resource's `operations()`, see [`crate::routes::operation`]),
//! with the request and response types its handler uses, and their JSON Schemas come from
//! those types. This module assembles them with the answers every operation of a kind may
//! give, the components and the document's info. Served at `GET /openapi.json`.

use std::sync::OnceLock;

use axum::Json;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

use crate::routes::{Operation, Unavailable};

/// Every operation the document lists: all the server serves but the web page.
pub fn operations() -> Vec<Operation> {
    crate::routes::operations().into_iter().filter(|op| op.documented).collect()
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
    if op.method() != "get" {
        out.push((409, "Conflicts with what is stored (an id already taken, a change that would break a journey)"));
    }
    if op.body.is_some() || matches!(op.method(), "put" | "post") {
        out.push((413, "The body, or an event's data, is over the size limit"));
    }
    if op.unavailable != Unavailable::Never {
        out.push((503, "A tool service or the database does not answer"));
    }
    out
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
            .path()
            .split('/')
            .filter_map(|seg| seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
            .map(|name| json!({"name": name, "in": "path", "required": true, "schema": {"type": "string"}}))
            .collect();
        parameters.extend(op.query.iter().map(|p| {
            json!({"name": p.name, "in": "query", "required": p.required, "description": p.description, "schema": {"type": p.kind}})
        }));
        let mut responses = Map::new();
        let ok = match op.response {
            Some(f) => {
                json!({"description": "Success", "content": {"application/json": {"schema": f(&mut generator)}}})
            }
            None => json!({"description": "Success"}),
        };
        responses.insert(op.status.to_string(), ok);
        if op.path().contains('{') || op.body.is_some() || op.query.iter().any(|p| p.name.ends_with("_id")) {
            responses.insert(
                "404".into(),
                json!({"description": "Not found: the path's item, or one the request refers to (a tag, an agent, a customer)", "content": {"application/json": {"schema": error_body()}}}),
            );
        }
        if op.body.is_some() || !op.query.is_empty() || op.path().contains('{') {
            responses.insert("422".into(), json!({"description": "Validation error", "content": {"application/json": {"schema": validation_body()}}}));
        }
        if op.query.iter().any(|p| p.name.starts_with("wait_for")) {
            responses.insert("504".into(), json!({"description": "Nothing arrived in time", "content": {"application/json": {"schema": error_body()}}}));
        }
        if op.query.iter().any(|p| p.name == "sse")
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
        if let Some(content) = op.content.map(|content| content()) {
            for (code, response) in responses.iter_mut() {
                if code == &op.status.to_string() || (op.unavailable == Unavailable::SameBody && code == "503") {
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
        if op.may_create
            && let Some(ok) = operation["responses"].get("200").cloned()
        {
            operation["responses"]["201"] = ok;
        }
        if let Some(content) = op.request_content {
            operation["requestBody"] = json!({"required": true, "content": content()});
        }
        if let Some(body) = op.body {
            operation["requestBody"] =
                json!({"required": true, "content": {"application/json": {"schema": body(&mut generator)}}});
        }
        if op.extension {
            operation["x-guidepost-extension"] = json!(true);
        }
        let entry = paths.entry(op.path().to_string()).or_insert_with(|| json!({}));
        entry[op.method()] = operation;
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
