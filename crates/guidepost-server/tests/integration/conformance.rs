//! Every operation of the reference API document, called on the server, and every
//! response checked against the document's schema for its status: a missing route, a
//! missing or mistyped field fails here.

use std::collections::BTreeSet;

use axum::routing::get;
use axum::{Json, Router};
use serde_json::{Value, json};

use super::support::TestServer;

fn reference() -> Value {
    // The reference server's own API document (Parlant 3.3.2's /openapi.json), kept with the
    // tests so a fresh clone has it.
    let path = format!("{}/tests/reference/parlant-3.3.2-openapi.json", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))).unwrap()
}

struct Conformance<'a> {
    server: &'a TestServer,
    doc: Value,
    covered: BTreeSet<String>,
    failures: Vec<String>,
}

impl Conformance<'_> {
    fn find(&self, id: &str) -> (String, String, Value) {
        for (path, ops) in self.doc["paths"].as_object().unwrap() {
            for (method, op) in ops.as_object().unwrap() {
                if op["operationId"] == id {
                    return (method.clone(), path.clone(), op.clone());
                }
            }
        }
        panic!("no operation {id} in the reference document");
    }

    fn validate(&mut self, id: &str, op: &Value, status: u16, body: &Value) {
        let content = &op["responses"][status.to_string()]["content"];
        if let Some(schema) = content.get("application/json").and_then(|c| c.get("schema")) {
            let mut rooted = schema.clone();
            if let Some(obj) = rooted.as_object_mut() {
                obj.insert("components".into(), self.doc["components"].clone());
            }
            if let Err(errors) = guidepost_llm::validate(&rooted, body) {
                self.failures.push(format!(
                    "{id} ({status}): response does not fit the reference schema: {errors:?}\n  body: {body}"
                ));
            }
        } else if status >= 400 && status != 422 {
            if !body["detail"].is_string() {
                self.failures.push(format!("{id} ({status}): error body is not {{\"detail\": text}}: {body}"));
            }
        } else if content.get("text/plain").is_some() && !body.is_string() {
            self.failures.push(format!("{id} ({status}): expected text, got {body}"));
        }
    }

    /// Calls operation `id` on `path` and checks the status and the body's shape.
    async fn call(&mut self, id: &str, path: &str, body: Option<Value>, expect: u16) -> Value {
        let (method, _, op) = self.find(id);
        let (status, value) = self.server.call(&method, path, body).await;
        if status != expect {
            self.failures
                .push(format!("{id}: {} {path} answered {status}, expected {expect}: {value}", method.to_uppercase()));
            return value;
        }
        if status != 404 && op["responses"].get(status.to_string()).is_none() {
            self.failures.push(format!("{id}: status {status} is not one the reference document lists"));
        }
        self.validate(id, &op, status, &value);
        if (200..300).contains(&status) {
            self.covered.insert(id.to_string());
        }
        value
    }
}

async fn plugin_server() -> String {
    let tools = json!({"tools": [{
        "name": "track_order", "creation_utc": "2026-11-21T13:17:13.257876Z", "description": "Tracks an order",
        "metadata": {}, "parameters": {"order_number": [{"type": "string", "description": "The order number"},
            {"hidden": false, "source": "any", "description": null, "significance": null, "examples": [],
             "precedence": 9223372036854775807i64, "display_name": null}]},
        "required": ["order_number"], "consequential": false, "overlap": 2
    }]});
    let app = Router::new().route(
        "/tools",
        get(move || {
            let t = tools.clone();
            async move { Json(t) }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    format!("http://{addr}")
}

fn id(v: &Value) -> String {
    v["id"].as_str().unwrap_or_default().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_reference_operation_answers_in_the_reference_shape() {
    let server = TestServer::start().await;
    let mut c = Conformance { server: &server, doc: reference(), covered: BTreeSet::new(), failures: Vec::new() };

    c.call("health_check_healthz_get", "/healthz", None, 200).await;

    let tag = id(&c.call("create_tag", "/tags", Some(json!({"name": "vip"})), 201).await);
    c.call("list_tags", "/tags?name=vip", None, 200).await;
    c.call("read_tag", &format!("/tags/{tag}"), None, 200).await;
    c.call("update_tag", &format!("/tags/{tag}"), Some(json!({"name": "very important"})), 200).await;

    let agent = id(&c
        .call("create_agent", "/agents", Some(json!({"name": "Ada", "description": "Helps", "tags": [tag]})), 201)
        .await);
    c.call("list_agents", "/agents", None, 200).await;
    c.call("read_agent", &format!("/agents/{agent}"), None, 200).await;
    c.call(
        "update_agent",
        &format!("/agents/{agent}"),
        Some(json!({"max_engine_iterations": 2, "composition_mode": "canned_fluid", "tags": {"remove": [tag]}})),
        200,
    )
    .await;

    let customer = id(&c
        .call(
            "create_customer",
            "/customers",
            Some(json!({"name": "Eve", "metadata": {"tier": "gold"}, "tags": [tag]})),
            201,
        )
        .await);
    c.call("list_customers", "/customers", None, 200).await;
    c.call("list_customers", "/customers?limit=1", None, 200).await;
    c.call("read_customer", &format!("/customers/{customer}"), None, 200).await;
    c.call(
        "update_customer",
        &format!("/customers/{customer}"),
        Some(json!({"metadata": {"set": {"plan": "x"}, "unset": ["tier"]}})),
        200,
    )
    .await;

    let g1 = id(&c.call("create_guideline", "/guidelines", Some(json!({"condition": "The customer asks about refunds", "action": "Explain the refund policy", "tags": [format!("agent:{agent}")], "criticality": "high", "metadata": {"k": 1}})), 201).await);
    let g2 = id(&c
        .call(
            "create_guideline",
            "/guidelines",
            Some(json!({"condition": "The customer is upset", "action": "Apologise"})),
            201,
        )
        .await);
    c.call("list_guidelines", &format!("/guidelines?tag_id=agent:{agent}"), None, 200).await;
    c.call("read_guideline", &format!("/guidelines/{g1}"), None, 200).await;
    c.call("update_guideline", &format!("/guidelines/{g1}"), Some(json!({"enabled": false, "labels": {"upsert": ["refunds"]}, "tool_associations": {"add": [{"service_name": "shop", "tool_name": "refund"}]}})), 200).await;

    let rel = id(&c
        .call(
            "create_relationship",
            "/relationships",
            Some(json!({"source_guideline": g1, "target_guideline": g2, "kind": "entailment"})),
            201,
        )
        .await);
    c.call(
        "create_relationship",
        "/relationships",
        Some(json!({"source_tag": tag, "target_guideline": g2, "kind": "priority"})),
        201,
    )
    .await;
    c.call("list_relationships", &format!("/relationships?guideline_id={g2}"), None, 200).await;
    c.call("read_relationship", &format!("/relationships/{rel}"), None, 200).await;

    let journey = id(&c.call("create_journey", "/journeys", Some(json!({"title": "Returns", "description": "Take a return", "conditions": ["The customer wants to return an item"]})), 201).await);
    c.call("list_journeys", "/journeys", None, 200).await;
    c.call("read_journey", &format!("/journeys/{journey}"), None, 200).await;
    c.call(
        "update_journey",
        &format!("/journeys/{journey}"),
        Some(json!({"title": "Returns and exchanges", "conditions": {"add": [g2]}})),
        200,
    )
    .await;
    c.call("journey_mermaid", &format!("/journeys/{journey}/mermaid"), None, 200).await;

    let term = id(&c
        .call(
            "create_term",
            "/terms",
            Some(json!({"name": "RMA", "description": "Return authorisation", "synonyms": ["return number"]})),
            201,
        )
        .await);
    c.call("list_terms", "/terms", None, 200).await;
    c.call("read_term", &format!("/terms/{term}"), None, 200).await;
    c.call("update_term", &format!("/terms/{term}"), Some(json!({"synonyms": ["return code"]})), 200).await;

    let cap = id(&c
        .call(
            "create_capability",
            "/capabilities",
            Some(json!({"title": "Refunds", "description": "Can refund orders", "signals": ["refund please"]})),
            201,
        )
        .await);
    c.call("list_capabilities", "/capabilities", None, 200).await;
    c.call("read_capability", &format!("/capabilities/{cap}"), None, 200).await;
    c.call("update_capability", &format!("/capabilities/{cap}"), Some(json!({"signals": ["money back"]})), 200).await;

    let canned = id(&c.call("create_canned_response", "/canned_responses", Some(json!({"value": "Your balance is {{balance}}.", "fields": [{"name": "balance", "description": "The balance", "examples": ["10"]}], "metadata": {"a": 1}})), 201).await);
    c.call("list_canned_responses", "/canned_responses", None, 200).await;
    c.call("read_canned_response", &format!("/canned_responses/{canned}"), None, 200).await;
    c.call(
        "update_canned_response",
        &format!("/canned_responses/{canned}"),
        Some(json!({"metadata": {"set": {"b": 2}}})),
        200,
    )
    .await;

    let var = id(&c
        .call(
            "create_variable",
            "/context-variables",
            Some(json!({"name": "plan", "description": "The plan", "freshness_rules": "0 * * * *"})),
            201,
        )
        .await);
    c.call("list_variables", "/context-variables", None, 200).await;
    c.call(
        "update_variable",
        &format!("/context-variables/{var}"),
        Some(json!({"description": "The customer's plan"})),
        200,
    )
    .await;
    c.call(
        "update_variable_value",
        &format!("/context-variables/{var}/{customer}"),
        Some(json!({"data": {"tier": "gold"}})),
        200,
    )
    .await;
    c.call("read_variable_value", &format!("/context-variables/{var}/{customer}"), None, 200).await;
    c.call("read_variable", &format!("/context-variables/{var}"), None, 200).await;
    c.call("delete_value", &format!("/context-variables/{var}/{customer}"), None, 204).await;

    let plugin = plugin_server().await;
    c.call("update_service", "/services/shop", Some(json!({"kind": "sdk", "sdk": {"url": plugin}})), 200).await;
    c.call("list_services", "/services", None, 200).await;
    let service = c.call("read_service", "/services/shop", None, 200).await;
    assert_eq!(service["tools"][0]["name"], "track_order", "{service}");

    let evaluation = c.call("create_evaluation", "/evaluations", Some(json!({"payloads": [{"kind": "guideline", "guideline": {"content": {"condition": "The customer asks where the order is", "action": "Ask for the order number"}, "tool_ids": [{"service_name": "shop", "tool_name": "track_order"}], "operation": "add", "properties_proposition": true}}]})), 201).await;
    let evaluated =
        c.call("read_evaluation", &format!("/evaluations/{}?wait_for_completion=30", id(&evaluation)), None, 200).await;
    assert_eq!(evaluated["status"], "completed", "{evaluated}");
    assert_eq!(evaluated["invoices"][0]["approved"], true, "{evaluated}");
    assert_eq!(
        evaluated["invoices"][0]["data"]["guideline"]["properties_proposition"]["customer_dependent_action_data"]["is_customer_dependent"],
        true,
        "{evaluated}"
    );

    let session = id(&c
        .call(
            "create_session",
            "/sessions",
            Some(json!({"agent_id": "taxi", "customer_id": customer, "title": "Ride"})),
            201,
        )
        .await);
    let guest_session = c.call("create_session", "/sessions", Some(json!({"agent_id": "weather"})), 201).await;
    assert_eq!(guest_session["customer_id"], "guest");
    c.call("list_sessions", "/sessions?agent_id=taxi", None, 200).await;
    c.call("list_sessions", "/sessions?limit=1&sort=desc", None, 200).await;
    c.call("read_session", &format!("/sessions/{session}"), None, 200).await;
    c.call(
        "update_session",
        &format!("/sessions/{session}"),
        Some(json!({"title": "Airport ride", "consumption_offsets": {"client": 1}, "labels": {"upsert": ["ride"]}})),
        200,
    )
    .await;

    let message = c
        .call(
            "create_event",
            &format!("/sessions/{session}/events"),
            Some(json!({"kind": "message", "source": "customer", "message": "I need a taxi from 12 Main Street"})),
            201,
        )
        .await;
    let trace = message["trace_id"].as_str().unwrap().to_string();
    server.wait_ready(&session, &trace).await;
    let events =
        c.call("list_events", &format!("/sessions/{session}/events?min_offset=0&wait_for_data=0"), None, 200).await;
    let event = id(&events[0]);
    c.call("read_event", &format!("/sessions/{session}/events/{event}"), None, 200).await;
    c.call(
        "update_event",
        &format!("/sessions/{session}/events/{event}"),
        Some(json!({"metadata": {"set": {"seen": true}}})),
        200,
    )
    .await;
    c.call(
        "create_event",
        &format!("/sessions/{session}/events"),
        Some(json!({"kind": "custom", "source": "customer_ui", "data": {"clicked": "book"}})),
        201,
    )
    .await;
    c.call(
        "create_event",
        &format!("/sessions/{session}/events"),
        Some(json!({"kind": "status", "source": "system", "status": "typing", "data": {}})),
        201,
    )
    .await;
    c.call("list_events", &format!("/sessions/{session}/events?min_offset=5&wait_for_data=1&kinds=custom"), None, 200)
        .await;
    c.call("list_events", &format!("/sessions/{session}/events?min_offset=1000&wait_for_data=1"), None, 504).await;
    // Offset 1 is the turn's second event (the customer's message, at 0, opens it): refused,
    // as the reference refuses to delete half a turn.
    c.call("delete_events", &format!("/sessions/{session}/events?min_offset=1"), None, 422).await;
    c.call("delete_events", &format!("/sessions/{session}/events?min_offset=7"), None, 204).await;

    // Error bodies in the reference's shapes.
    c.call("read_agent", "/agents/nobody", None, 404).await;
    c.call("create_guideline", "/guidelines", Some(json!({"condition": 5})), 422).await;
    c.call("create_guideline", "/guidelines", Some(json!({"condition": "x", "tags": ["no-such-tag"]})), 404).await;
    c.call("list_sessions", "/sessions?limit=1000", None, 422).await;

    c.call("delete_session", &format!("/sessions/{session}"), None, 204).await;
    c.call("delete_sessions", "/sessions?agent_id=weather", None, 204).await;
    c.call("delete_relationship", &format!("/relationships/{rel}"), None, 204).await;
    c.call("delete_journey", &format!("/journeys/{journey}"), None, 204).await;
    c.call("delete_guideline", &format!("/guidelines/{g1}"), None, 204).await;
    c.call("delete_term", &format!("/terms/{term}"), None, 204).await;
    c.call("delete_capability", &format!("/capabilities/{cap}"), None, 204).await;
    c.call("delete_canned_response", &format!("/canned_responses/{canned}"), None, 204).await;
    c.call("delete_variable", &format!("/context-variables/{var}"), None, 204).await;
    c.call("delete_variables", "/context-variables", None, 204).await;
    c.call("delete_service", "/services/shop", None, 204).await;
    c.call("delete_customer", &format!("/customers/{customer}"), None, 204).await;
    c.call("delete_agent", &format!("/agents/{agent}"), None, 204).await;
    c.call("delete_tag", &format!("/tags/{tag}"), None, 204).await;

    let all: BTreeSet<String> = c.doc["paths"]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|ops| ops.as_object().unwrap().values().map(|op| op["operationId"].as_str().unwrap().to_string()))
        .collect();
    let missing: Vec<&String> = all.difference(&c.covered).collect();
    assert_eq!(all.len(), 72);
    assert!(c.failures.is_empty(), "{} problems:\n{}", c.failures.len(), c.failures.join("\n"));
    assert!(missing.is_empty(), "operations never answered successfully: {missing:?}");
    server.stop().await;
}
