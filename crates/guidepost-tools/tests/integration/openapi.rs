//! OpenAPI tools against a small axum service that serves its own document.

use axum::extract::{Path, RawQuery};
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use guidepost_core::tool::{ParameterType, ServiceKind, ToolId, ToolService};
use guidepost_tools::{ToolErrorKind, ToolRegistry};
use serde_json::{Value, json};

use super::common::{args, ctx, serve};

fn document() -> Value {
    json!({
        "openapi": "3.0.3",
        "info": {"title": "Pets", "version": "1"},
        "servers": [{"url": "/api"}],
        "paths": {
            "/pets/{petId}": {
                "parameters": [{"name": "petId", "in": "path", "required": true, "schema": {"type": "integer"}}],
                "get": {"operationId": "get_pet", "summary": "Read one pet"}
            },
            "/pets": {
                "get": {
                    "operationId": "list_pets",
                    "description": "List pets",
                    "parameters": [
                        {"$ref": "#/components/parameters/Limit"},
                        {"name": "status", "in": "query", "schema": {"type": "string", "enum": ["available", "sold"]}},
                        {"name": "since", "in": "query", "schema": {"type": "string", "format": "date"}}
                    ]
                },
                "post": {
                    "operationId": "add_pet",
                    "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/NewPet"}}}}
                }
            },
            "/boom": {"get": {"operationId": "boom"}},
            "/untitled": {"get": {"summary": "no operationId, no tool"}}
        },
        "components": {
            "parameters": {"Limit": {"name": "limit", "in": "query", "description": "How many", "schema": {"type": "integer", "default": 10}}},
            "schemas": {"NewPet": {"type": "object", "required": ["name"], "properties": {
                "name": {"type": "string"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "vaccinated": {"type": "boolean"}
            }}}
        }
    })
}

async fn server() -> std::net::SocketAddr {
    let router = Router::new()
        .route("/openapi.json", get(|| async { Json(document()) }))
        .route("/openapi.yaml", get(|| async { yaml_serde::to_string(&document()).unwrap() }))
        .route(
            "/api/pets/{id}",
            get(|Path(id): Path<u64>| async move {
                if id == 99 {
                    tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
                }
                if id == 0 {
                    (StatusCode::NOT_FOUND, Json(json!({"error": "no pet 0"})))
                } else {
                    (StatusCode::OK, Json(json!({"id": id, "name": "Rex"})))
                }
            }),
        )
        .route(
            "/api/pets",
            get(|RawQuery(q): RawQuery| async move { Json(json!({"query": q})) })
                .post(|Json(body): Json<Value>| async move { (StatusCode::CREATED, Json(json!({"created": body}))) }),
        )
        .route("/api/boom", get(|| async { (StatusCode::INTERNAL_SERVER_ERROR, "database on fire") }));
    serve(router).await
}

fn service(spec: String) -> ToolService {
    ToolService {
        name: "pets".into(),
        kind: ServiceKind::Openapi,
        url: None,
        spec: Some(spec),
        command: Vec::new(),
        env: Default::default(),
        timeout_ms: Some(5000),
        idempotency_keys: false,
    }
}

async fn registry(spec: String) -> ToolRegistry {
    let mut definition = super::common::example_agent("banking");
    definition.services.push(service(spec));
    let mut registry = ToolRegistry::from_definition(&definition).unwrap();
    registry.resolve_tools().await.unwrap();
    registry
}

#[tokio::test]
async fn operations_become_typed_tools() {
    let addr = server().await;
    for spec in [format!("http://{addr}/openapi.json"), format!("http://{addr}/openapi.yaml")] {
        let registry = registry(spec).await;
        let names: Vec<String> =
            registry.tools().filter(|t| t.id.service == "pets").map(|t| t.id.name.clone()).collect();
        assert_eq!(names, ["get_pet", "list_pets", "add_pet", "boom"]);
        let list = registry.tool(&ToolId::new("pets", "list_pets")).unwrap();
        let limit = &list.parameters[0];
        assert_eq!((limit.name.as_str(), limit.kind, limit.required), ("limit", ParameterType::Integer, false));
        assert_eq!(limit.default, Some(json!(10)));
        assert_eq!(limit.description.as_deref(), Some("How many"));
        assert_eq!(list.parameters[1].allowed, vec![json!("available"), json!("sold")]);
        assert_eq!(list.parameters[2].kind, ParameterType::Date);
        let add = registry.tool(&ToolId::new("pets", "add_pet")).unwrap();
        assert!(add.consequential);
        assert_eq!(add.parameters.iter().filter(|p| p.required).count(), 1);
        assert_eq!(add.parameters[1].items, Some(ParameterType::String));
        assert_eq!(
            registry.tool(&ToolId::new("pets", "get_pet")).unwrap().description.as_deref(),
            Some("Read one pet")
        );
    }
}

#[tokio::test]
async fn calls_build_requests_and_map_statuses() {
    let addr = server().await;
    let registry = registry(format!("http://{addr}/openapi.json")).await;
    let pet = registry.call(&ToolId::new("pets", "get_pet"), args(json!({"petId": "7"})), &ctx(), None).await;
    assert_eq!(pet.result().data, json!({"id": 7, "name": "Rex"}));

    let listed = registry
        .call(&ToolId::new("pets", "list_pets"), args(json!({"status": "Sold", "since": "2026-01-02"})), &ctx(), None)
        .await;
    assert_eq!(listed.result().data, json!({"query": "limit=10&status=sold&since=2026-01-02"}));

    let added = registry
        .call(
            &ToolId::new("pets", "add_pet"),
            args(json!({"name": "Tom & Jerry", "vaccinated": "yes", "tags": ["a"]})),
            &ctx(),
            None,
        )
        .await;
    assert_eq!(added.result().data, json!({"created": {"name": "Tom & Jerry", "tags": ["a"], "vaccinated": true}}));

    let missing = registry.call(&ToolId::new("pets", "get_pet"), args(json!({"petId": 0})), &ctx(), None).await;
    let text = missing.result().data.as_str().unwrap().to_string();
    assert!(text.contains("HTTP 404 Not Found from GET /pets/0") && text.contains("no pet 0"), "{text}");
    assert_eq!(missing.outcome.error_kind(), Some(&ToolErrorKind::Failed), "a 404 is the tool's answer");

    let boom = registry.call(&ToolId::new("pets", "boom"), args(json!({})), &ctx(), None).await;
    assert_eq!(boom.outcome.error_kind(), Some(&ToolErrorKind::ServiceError), "a 500 is the service's failure");
    let text = boom.result().data.as_str().unwrap().to_string();
    assert!(text.contains("HTTP 500") && text.contains("database on fire"), "{text}");
}

#[tokio::test]
async fn an_unreachable_document_is_a_clear_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let mut definition = super::common::example_agent("banking");
    definition.services.push(service(format!("http://{addr}/openapi.json")));
    let mut registry = ToolRegistry::from_definition(&definition).unwrap();
    let err = registry.resolve_tools().await.unwrap_err().to_string();
    assert!(err.contains("`pets` is unavailable") && err.contains(&addr.to_string()), "{err}");
    let call = registry.call(&ToolId::new("pets", "boom"), args(json!({})), &ctx(), None).await;
    assert_eq!(call.outcome.error_kind(), Some(&ToolErrorKind::Unavailable));
}

#[tokio::test]
async fn reads_a_yaml_document_from_a_file_and_honours_the_service_timeout() {
    let addr = server().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pets.yaml");
    let mut doc = document();
    doc.as_object_mut().unwrap().remove("servers");
    std::fs::write(&path, yaml_serde::to_string(&doc).unwrap()).unwrap();
    let mut service = service(path.display().to_string());
    service.url = Some(format!("http://{addr}/api/"));
    // Long enough for the answer of a busy machine, short of the hour pet 99 takes.
    service.timeout_ms = Some(5_000);
    let mut definition = super::common::example_agent("banking");
    definition.services.push(service);
    let mut registry = ToolRegistry::from_definition(&definition).unwrap();
    registry.resolve_tools().await.unwrap();
    let timed_out = registry.call(&ToolId::new("pets", "get_pet"), args(json!({"petId": 99})), &ctx(), None).await;
    assert_eq!(timed_out.outcome.error_kind(), Some(&ToolErrorKind::Timeout { after_ms: 5_000 }));
    let pet = registry.call(&ToolId::new("pets", "get_pet"), args(json!({"petId": 1})), &ctx(), None).await;
    assert_eq!(pet.result().data, json!({"id": 1, "name": "Rex"}));

    let mut broken = super::common::example_agent("banking");
    broken.services.push(self::service(dir.path().join("missing.json").display().to_string()));
    let mut registry = ToolRegistry::from_definition(&broken).unwrap();
    let err = registry.resolve_tools().await.unwrap_err().to_string();
    assert!(err.contains("misconfigured") && err.contains("missing.json"), "{err}");
}

/// A service whose one operation answers with the status it is asked for, or a body over the
/// result size limit.
async fn failing_service() -> std::net::SocketAddr {
    let doc = json!({
        "openapi": "3.0.3",
        "info": {"title": "Flaky", "version": "1"},
        "paths": {
            "/status/{code}": {"get": {"operationId": "status", "parameters": [
                {"name": "code", "in": "path", "required": true, "schema": {"type": "integer"}}]}},
            "/huge": {"get": {"operationId": "huge"}}
        }
    });
    serve(
        Router::new()
            .route("/openapi.json", get(move || std::future::ready(Json(doc.clone()))))
            .route(
                "/status/{code}",
                get(|Path(code): Path<u16>| async move {
                    (StatusCode::from_u16(code).unwrap(), Json(json!({"error": format!("answered {code}")})))
                }),
            )
            .route("/huge", get(|| async { Json(json!({"rows": "x".repeat(2 << 20)})) })),
    )
    .await
}

#[tokio::test]
async fn a_service_that_fails_is_told_from_a_tool_that_answers_with_an_error() {
    let addr = failing_service().await;
    let mut flaky = service(format!("http://{addr}/openapi.json"));
    flaky.url = Some(format!("http://{addr}"));
    let mut registry = ToolRegistry::for_services(&[flaky]).unwrap();
    registry.resolve_tools().await.unwrap();
    let status = |code: u16| {
        let registry = &registry;
        async move { registry.call(&ToolId::new("pets", "status"), args(json!({"code": code})), &ctx(), None).await.outcome }
    };
    for code in [500, 502, 503, 401, 403, 429] {
        assert_eq!(status(code).await.error_kind(), Some(&ToolErrorKind::ServiceError), "HTTP {code}");
    }
    for code in [400, 404, 409, 422] {
        assert_eq!(status(code).await.error_kind(), Some(&ToolErrorKind::Failed), "HTTP {code} is the tool's answer");
    }
    let huge = registry.call(&ToolId::new("pets", "huge"), args(json!({})), &ctx(), None).await;
    assert_eq!(huge.outcome.error_kind(), Some(&ToolErrorKind::ServiceError), "{:?}", huge.outcome);
    assert!(huge.result().data.as_str().unwrap().contains("GUIDEPOST_MAX_TOOL_RESULT_BYTES"));

    // The same service, gone: unreachable.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut gone = service(format!("http://{addr}/openapi.json"));
    gone.url = Some(format!("http://127.0.0.1:{port}"));
    let mut registry = ToolRegistry::for_services(&[gone]).unwrap();
    registry.resolve_tools().await.unwrap();
    let call = registry.call(&ToolId::new("pets", "status"), args(json!({"code": 200})), &ctx(), None).await;
    assert_eq!(call.outcome.error_kind(), Some(&ToolErrorKind::Unavailable));
}
