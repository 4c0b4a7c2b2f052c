//! Bad input never yields a 500: wrong types, unknown ids, truncated and huge bodies,
//! invalid UTF-8 and garbage query parameters all get a 4xx that names the field.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use guidepost_conversation::RuntimeConfig;
use guidepost_server::Server;
use guidepost_store::Store;
use http_body_util::BodyExt;
use proptest::prelude::*;
use serde_json::{Value, json};
use tower::ServiceExt;

use super::support::{example, fake_model, models};

const TARGETS: &[(&str, &str)] = &[
    ("POST", "/agents"),
    ("PATCH", "/agents/taxi"),
    ("PUT", "/agents/taxi/definition"),
    ("POST", "/sessions"),
    ("PATCH", "/sessions/S"),
    ("POST", "/sessions/S/events"),
    ("PATCH", "/sessions/S/events/E"),
    ("POST", "/tags"),
    ("PATCH", "/tags/T"),
    ("POST", "/terms"),
    ("POST", "/customers"),
    ("PATCH", "/customers/guest"),
    ("POST", "/canned_responses"),
    ("POST", "/context-variables"),
    ("PUT", "/context-variables/V/DEFAULT"),
    ("POST", "/guidelines"),
    ("PATCH", "/guidelines/taxi.correction"),
    ("POST", "/relationships"),
    ("POST", "/journeys"),
    ("PATCH", "/journeys/taxi.book_taxi"),
    ("POST", "/journeys/taxi.book_taxi/states"),
    ("POST", "/journeys/taxi.book_taxi/transitions"),
    ("POST", "/evaluations"),
    ("POST", "/capabilities"),
    ("POST", "/nonexistent/ids/here"),
    ("GET", "/sessions/unknown-session/events/unknown"),
];

const FIELDS: &[&str] = &[
    "name",
    "id",
    "title",
    "description",
    "condition",
    "action",
    "tags",
    "metadata",
    "kind",
    "source",
    "message",
    "agent_id",
    "customer_id",
    "conditions",
    "payloads",
    "value",
    "fields",
    "signals",
    "data",
    "status",
    "guidelines",
    "participant",
    "from",
    "to",
    "mode",
    "labels",
    "priority",
    "criticality",
    "enabled",
    "composition_mode",
    "source_guideline",
    "target_guideline",
    "tool_id",
    "freshness_rules",
    "consumption_offsets",
    "max_engine_iterations",
];

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(|f| json!(f)),
        "\\PC{0,12}".prop_map(Value::String),
        Just(json!("taxi")),
        Just(json!("guest")),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(prop::sample::select(FIELDS).prop_map(str::to_string), inner, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

#[derive(Debug, Clone)]
enum BadBody {
    Json(Value),
    Truncated(Value, usize),
    Bytes(Vec<u8>),
    Huge,
}

fn bad_body() -> impl Strategy<Value = BadBody> {
    prop_oneof![
        4 => json_value().prop_map(BadBody::Json),
        2 => (json_value(), any::<usize>()).prop_map(|(v, n)| BadBody::Truncated(v, n)),
        2 => prop::collection::vec(any::<u8>(), 0..64).prop_map(BadBody::Bytes),
        1 => Just(BadBody::Huge),
    ]
}

fn bytes_of(body: &BadBody) -> Vec<u8> {
    match body {
        BadBody::Json(v) => v.to_string().into_bytes(),
        BadBody::Truncated(v, n) => {
            let text = v.to_string().into_bytes();
            let cut = if text.is_empty() { 0 } else { n % text.len() };
            text[..cut].to_vec()
        }
        BadBody::Bytes(b) => {
            let mut b = b.clone();
            b.push(0xff);
            b
        }
        BadBody::Huge => {
            let mut text = b"{\"name\": \"".to_vec();
            text.extend(std::iter::repeat_n(b'a', 3 * 1024 * 1024));
            text.extend(b"\"}");
            text
        }
    }
}

struct Fixture {
    rt: tokio::runtime::Runtime,
    app: axum::Router,
    session: String,
    event: String,
    tag: String,
    variable: String,
}

fn fixture() -> Fixture {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let (app, session, event, tag, variable) = rt.block_on(async {
        let store = Store::ephemeral().await.unwrap();
        store.import_definition(&example("taxi")).await.unwrap();
        let fake = fake_model(std::time::Duration::ZERO).await;
        let server = Server::new(store, models(&fake), RuntimeConfig::default());
        server.start().await.unwrap();
        let app = server.router();
        let call = |method: &'static str, uri: String, body: Value| {
            let app = app.clone();
            async move {
                let req = Request::builder()
                    .method(method)
                    .uri(uri)
                    .header("content-type", "application/json")
                    .body(Body::from(body.to_string()))
                    .unwrap();
                let resp = app.oneshot(req).await.unwrap();
                let bytes = resp.into_body().collect().await.unwrap().to_bytes();
                serde_json::from_slice::<Value>(&bytes).unwrap()
            }
        };
        let session = call("POST", "/sessions".into(), json!({"agent_id": "taxi", "labels": ["x"]})).await["id"]
            .as_str()
            .unwrap()
            .to_string();
        let event = call(
            "POST",
            format!("/sessions/{session}/events"),
            json!({"kind": "custom", "source": "customer_ui", "data": {}}),
        )
        .await["id"]
            .as_str()
            .unwrap()
            .to_string();
        let tag = call("POST", "/tags".into(), json!({"name": "t"})).await["id"].as_str().unwrap().to_string();
        let variable =
            call("POST", "/context-variables".into(), json!({"name": "v"})).await["id"].as_str().unwrap().to_string();
        (app, session, event, tag, variable)
    });
    Fixture { rt, app, session, event, tag, variable }
}

fn check_response(status: StatusCode, bytes: &[u8], what: &str) -> Result<(), TestCaseError> {
    prop_assert!(status.as_u16() < 500, "{what} -> {status}: {}", String::from_utf8_lossy(bytes));
    if status.is_client_error() {
        let body: Value = serde_json::from_slice(bytes)
            .map_err(|e| TestCaseError::fail(format!("{what}: {status} body is not JSON: {e}")))?;
        match &body["detail"] {
            Value::String(s) => prop_assert!(!s.is_empty()),
            Value::Array(errors) => {
                prop_assert!(!errors.is_empty(), "{what}: empty detail");
                for e in errors {
                    let loc =
                        e["loc"].as_array().ok_or_else(|| TestCaseError::fail(format!("{what}: no loc in {e}")))?;
                    prop_assert!(
                        matches!(loc.first().and_then(Value::as_str), Some("body" | "query" | "path")),
                        "{what}: {e}"
                    );
                    prop_assert!(e["msg"].is_string() && e["type"].is_string(), "{what}: {e}");
                }
            }
            other => prop_assert!(false, "{what}: detail is {other}"),
        }
    }
    Ok(())
}

fn fixture_ref() -> &'static Fixture {
    static F: std::sync::OnceLock<Fixture> = std::sync::OnceLock::new();
    F.get_or_init(fixture)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn request_bodies_never_get_a_server_error(target in prop::sample::select(TARGETS), body in bad_body()) {
        let f = fixture_ref();
        let (method, path) = target;
        let path = path.replace("/sessions/S", &format!("/sessions/{}", f.session)).replace("/events/E", &format!("/events/{}", f.event))
            .replace("/tags/T", &format!("/tags/{}", f.tag)).replace("/context-variables/V", &format!("/context-variables/{}", f.variable));
        let bytes = bytes_of(&body);
        let app = f.app.clone();
        let what = format!("{method} {path} with {body:?}").chars().take(300).collect::<String>();
        let (status, out) = f.rt.block_on(async move {
            let req = Request::builder().method(method).uri(&path).header("content-type", "application/json").body(Body::from(bytes)).unwrap();
            let resp = app.oneshot(req).await.unwrap();
            let status = resp.status();
            (status, resp.into_body().collect().await.unwrap().to_bytes())
        });
        check_response(status, &out, &what)?;
        if matches!(body, BadBody::Huge) && method != "GET" && !what.contains("/nonexistent/") {
            prop_assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
        }
    }

    #[test]
    fn query_parameters_never_get_a_server_error(
        path in prop::sample::select(&["/customers", "/sessions", "/sessions/S/events", "/relationships", "/context-variables/V", "/tags", "/guidelines", "/canned_responses", "/journeys/taxi.book_taxi"][..]),
        name in prop::sample::select(&["limit", "cursor", "sort", "min_offset", "kinds", "source", "trace_id", "include_values", "indirect", "kind", "tag_id", "labels", "guideline_id", "tool_id", "sse", "include_mermaid_chart", "agent_id"][..]),
        value in "\\PC{0,16}",
    ) {
        let f = fixture_ref();
        let path = path.replace("/sessions/S", &format!("/sessions/{}", f.session)).replace("/context-variables/V", &format!("/context-variables/{}", f.variable));
        let encoded: String = form_urlencoded::byte_serialize(value.as_bytes()).collect();
        let uri = format!("{path}?{name}={encoded}&wait_for_data=0");
        let app = f.app.clone();
        let what = uri.clone();
        let (status, out) = f.rt.block_on(async move {
            let req = Request::builder().method("GET").uri(&uri).body(Body::empty()).unwrap();
            let resp = app.oneshot(req).await.unwrap();
            let status = resp.status();
            if resp.headers().get("content-type").is_some_and(|c| c == "text/event-stream") {
                return (status, axum::body::Bytes::new());
            }
            (status, resp.into_body().collect().await.unwrap().to_bytes())
        });
        check_response(status, &out, &what)?;
    }
}

#[test]
fn unknown_ids_are_404_everywhere() {
    let f = fixture_ref();
    let app = f.app.clone();
    f.rt.block_on(async move {
        for (method, path) in [
            ("GET", "/agents/nope"),
            ("GET", "/sessions/nope"),
            ("GET", "/sessions/nope/events?wait_for_data=0"),
            ("DELETE", "/sessions/nope"),
            ("GET", "/guidelines/nope"),
            ("DELETE", "/tags/nope"),
            ("GET", "/journeys/nope/mermaid"),
            ("GET", "/context-variables/nope"),
            ("GET", "/customers/nope"),
            ("GET", "/relationships/nope"),
            ("GET", "/services/nope"),
            ("GET", "/evaluations/nope"),
            ("GET", "/canned_responses/nope"),
            ("GET", "/capabilities/nope"),
            ("GET", "/terms/nope"),
        ] {
            let req = Request::builder().method(method).uri(path).body(Body::empty()).unwrap();
            let resp = app.clone().oneshot(req).await.unwrap();
            assert_eq!(resp.status(), StatusCode::NOT_FOUND, "{method} {path}");
            let body: Value = serde_json::from_slice(&resp.into_body().collect().await.unwrap().to_bytes()).unwrap();
            assert!(body["detail"].as_str().unwrap().contains("nope"), "{method} {path}: {body}");
        }
    });
}
