//! Our own OpenAPI document: generated from the code, served, and true to the router.

use std::collections::BTreeSet;

use guidepost_server::access::access_of;
use serde_json::Value;

use super::support::TestServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_served_document_lists_every_route_and_every_route_exists() {
    let server = TestServer::start().await;
    let doc = server.ok("get", "/openapi.json", None).await;
    assert_eq!(doc["openapi"], "3.1.0");
    let ops: Vec<(String, String, Value)> = doc["paths"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(path, ops)| {
            ops.as_object().unwrap().iter().map(move |(m, op)| (m.clone(), path.clone(), op.clone()))
        })
        .collect();
    assert!(ops.len() >= 72 + 12, "{} operations", ops.len());
    for (method, path, op) in &ops {
        let concrete = path.replace('{', "x").replace('}', "");
        if op["operationId"] == "list_events" || op["operationId"] == "read_evaluation" {
            continue;
        }
        let (status, body) =
            server.call(method, &format!("{concrete}?wait_for_data=0&wait_for_completion=0"), None).await;
        assert_ne!(
            (status, body.clone()),
            (404, serde_json::json!({"detail": "Not Found"})),
            "{method} {path} is not routed"
        );
        assert_ne!(status, 405, "{method} {path} is not routed");
        assert!(status < 500, "{method} {path} -> {status} {body}");
        for (code, response) in op["responses"].as_object().unwrap() {
            if let Some(schema) = response.pointer("/content/application~1json/schema/$ref").and_then(Value::as_str) {
                let pointer = schema.trim_start_matches('#');
                assert!(doc.pointer(pointer).is_some(), "{method} {path} {code}: dangling {schema}");
            }
        }
    }
    let (status, body) = server.call("get", "/no/such/route", None).await;
    assert_eq!((status, body), (404, serde_json::json!({"detail": "Not Found"})));
    let metrics = server.http.get(server.url("/metrics")).send().await.unwrap().text().await.unwrap();
    assert!(
        metrics.contains("guidepost_http_requests_total{method=\"GET\",route=\"/openapi.json\",status=\"200\"}"),
        "{metrics}"
    );
    server.stop().await;
}

/// The router, the access check and the document are built from the same declarations:
/// what the server serves is what the document lists (but the web page), each operation
/// once, under one id, with a summary, and the access check reads the declared access.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_declared_operations_are_the_documents_and_the_routers() {
    let server = TestServer::start().await;
    let doc = server.ok("get", "/openapi.json", None).await;
    let documented: BTreeSet<(String, String, String)> = doc["paths"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(path, ops)| {
            ops.as_object().unwrap().iter().map(move |(method, op)| {
                (method.clone(), path.clone(), op["operationId"].as_str().unwrap_or_default().to_string())
            })
        })
        .collect();
    let operations = guidepost_server::routes::operations();
    let declared: BTreeSet<(String, String, String)> = operations
        .iter()
        .filter(|op| op.documented)
        .map(|op| (op.method().to_string(), op.path().to_string(), op.id.to_string()))
        .collect();
    let undocumented: Vec<_> = declared.symmetric_difference(&documented).collect();
    assert!(undocumented.is_empty(), "declared and documented differ: {undocumented:?}");
    assert_eq!(declared.len(), operations.iter().filter(|op| op.documented).count(), "an operation declared twice");
    let mut ids = BTreeSet::new();
    let mut routes = BTreeSet::new();
    for op in &operations {
        assert!(!op.id.is_empty() && !op.summary.is_empty(), "{} {} has no id or summary", op.method(), op.path());
        assert!(ids.insert(op.id), "operation id {} declared twice", op.id);
        assert!(routes.insert((op.method(), op.path())), "{} {} declared twice", op.method(), op.path());
        assert_eq!(op.http_method().as_str().to_ascii_lowercase(), op.method(), "{}", op.id);
        assert_eq!(access_of(op.http_method(), op.path()), op.access, "{} {}", op.method(), op.path());
        if !op.documented {
            // The web page's routes are served, only not described.
            let concrete = op.path().replace("{name}", "app.js");
            let (status, _) = server.call(op.method(), &concrete, None).await;
            assert_eq!(status, 200, "{} {} is not served", op.method(), op.path());
        }
    }
    assert!(operations.iter().any(|op| !op.documented), "the web page is declared beside the API");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browsers_from_another_origin_may_call_the_api() {
    let server = TestServer::start().await;
    let resp = server
        .http
        .request(reqwest::Method::OPTIONS, server.url("/sessions/abc/events?min_offset=3&wait_for_data=60"))
        .header("origin", "http://localhost:3000")
        .header("access-control-request-method", "GET")
        .header("access-control-request-headers", "x-fern-language,x-fern-runtime,x-fern-runtime-version,content-type")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let h = resp.headers();
    assert_eq!(h["access-control-allow-origin"], "http://localhost:3000");
    let allowed = h["access-control-allow-headers"].to_str().unwrap().to_lowercase();
    assert!(allowed.contains("x-fern-runtime-version") && allowed.contains("content-type"), "{allowed}");
    let resp = server.http.get(server.url("/agents")).header("origin", "http://localhost:3000").send().await.unwrap();
    assert_eq!(resp.headers()["access-control-allow-origin"], "http://localhost:3000");
    server.stop().await;
}

/// A list where the document declares an object (a struct would also take the list of its
/// fields) is a 422 naming the field, and changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_where_the_document_declares_objects_are_refused() {
    let server = TestServer::start().await;
    let session = server.session("taxi").await;
    let customer = server.ok("post", "/customers", Some(serde_json::json!({"name": "Alice"}))).await;
    let customer = customer["id"].as_str().unwrap().to_string();
    for (path, body, field) in [
        (format!("/sessions/{session}"), serde_json::json!({"labels": [null, null]}), "labels"),
        (format!("/customers/{customer}"), serde_json::json!({"tags": [null, null]}), "tags"),
        (format!("/customers/{customer}"), serde_json::json!({"metadata": [null, null]}), "metadata"),
    ] {
        let (status, answer) = server.call("patch", &path, Some(body.clone())).await;
        assert_eq!(status, 422, "{path} {body}: {answer}");
        assert_eq!(answer["detail"][0]["loc"], serde_json::json!(["body", field]), "{answer}");
    }
    let (status, answer) = server.call("patch", &format!("/sessions/{session}"), Some(serde_json::json!([null]))).await;
    assert_eq!((status, answer["detail"][0]["loc"].clone()), (422, serde_json::json!(["body"])), "{answer}");
    let read = server.ok("get", &format!("/sessions/{session}"), None).await;
    assert_eq!(read["labels"], serde_json::json!([]));
    server.stop().await;
}
