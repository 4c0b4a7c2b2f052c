//! Definitions over REST: export and import in the authoring format, and a journey built
//! state by state while the server runs, then walked in a conversation.

use guidepost_core::definition::{SourceFile, load_agent};
use serde_json::json;

use super::support::{TestServer, example, ready};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn definitions_export_and_import_in_the_authoring_format() {
    let server = TestServer::start().await;
    let resp = server.http.get(server.url("/agents/weather/definition")).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert!(resp.headers()["content-type"].to_str().unwrap().starts_with("application/yaml"));
    let yaml = resp.text().await.unwrap();
    let loaded = load_agent(&[SourceFile::new("weather.yaml", yaml.clone())]);
    assert!(!loaded.has_errors(), "{:?}", loaded.diagnostics);
    assert_eq!(loaded.definition.unwrap(), example("weather"));

    let json_export = server.ok("get", "/agents/weather/definition?format=json", None).await;
    assert_eq!(json_export["agent"]["id"], "weather");

    let smaller: String = {
        let mut def = example("weather");
        def.guidelines.retain(|g| g.id != "tone");
        guidepost_core::definition::to_yaml(&def).unwrap()
    };
    let report: serde_json::Value = server
        .http
        .put(server.url("/agents/weather/definition"))
        .header("content-type", "application/yaml")
        .body(smaller)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(report["removed"], 1, "{report}");
    let (status, _) = server.call("get", "/guidelines/weather.tone", None).await;
    assert_eq!(status, 404);

    let broken = "agent:\n  id: weather\n  name: W\nguidelines:\n  - condition: x\n    actoin: y\n";
    let resp = server.http.put(server.url("/agents/weather/definition")).body(broken).send().await.unwrap();
    assert_eq!(resp.status(), 422);
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(body["detail"][0]["loc"][1], "definition.yaml:6:5", "{body}");
    assert!(body["detail"][0]["msg"].as_str().unwrap().contains("actoin"));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_journey_built_over_rest_is_walked_in_the_next_conversation() {
    let server = TestServer::start().await;
    server.ok("post", "/agents", Some(json!({"id": "desk", "name": "Dora", "description": "Books tables"}))).await;
    let journey = server
        .ok(
            "post",
            "/journeys",
            Some(json!({"id": "booking", "title": "Book a table", "description": "Take a table booking", "conditions": ["The customer wants to book a table"], "tags": ["agent:desk"]})),
        )
        .await;
    assert_eq!(journey["conditions"].as_array().unwrap().len(), 1);
    let states = "/journeys/booking/states";
    server
        .ok("post", states, Some(json!({"id": "ask_size", "kind": "chat", "action": "Ask how many people are coming"})))
        .await;
    server.ok("post", states, Some(json!({"id": "confirm", "kind": "chat", "action": "Confirm the booking"}))).await;
    let (status, body) = server.call("post", states, Some(json!({"id": "bad", "kind": "chat"}))).await;
    assert_eq!((status, body["detail"][0]["loc"][1].as_str()), (422, Some("action")));
    let (status, body) =
        server.call("post", states, Some(json!({"id": "again", "kind": "journey", "journey": "booking"}))).await;
    assert_eq!(status, 422, "a journey cannot run itself inline: {body}");
    let transitions = "/journeys/booking/transitions";
    server.ok("post", transitions, Some(json!({"from": "initial", "to": "ask_size"}))).await;
    server
        .ok(
            "post",
            transitions,
            Some(json!({"from": "ask_size", "to": "confirm", "condition": "The customer said how many people"})),
        )
        .await;
    server.ok("post", transitions, Some(json!({"from": "confirm", "to": "end"}))).await;
    let (status, _) = server.call("post", transitions, Some(json!({"from": "nowhere", "to": "end"}))).await;
    assert_eq!(status, 422);

    let drawn = server.ok("get", "/journeys/booking?include_mermaid_chart=true", None).await;
    assert!(drawn["mermaid_chart"].as_str().unwrap().contains("Ask how many people"), "{drawn}");
    let listed = server.ok("get", states, None).await;
    assert_eq!(listed.as_array().unwrap().len(), 2);

    let session = server.session("desk").await;
    let events = server.turn(&session, "I want to book a table please").await;
    let done = ready(&events);
    assert_eq!(done["matched_journeys"], json!([{"id": "booking"}]), "{done}");
    assert!(done["matched_journey_states"].to_string().contains("booking.ask_size"), "{done}");

    let yaml = server.http.get(server.url("/agents/desk/definition")).send().await.unwrap().text().await.unwrap();
    let loaded = load_agent(&[SourceFile::new("desk.yaml", yaml.clone())]);
    assert!(!loaded.has_errors(), "{:?}\n{yaml}", loaded.diagnostics);
    let exported = loaded.definition.unwrap();
    assert_eq!(exported.journeys[0].states.len(), 2);

    server.ok("delete", "/journeys/booking/states/confirm", None).await;
    let after = server.ok("get", transitions, None).await;
    assert_eq!(after.as_array().unwrap().len(), 1, "the state's transitions went with it: {after}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_service_credentials_are_never_shown_and_survive_an_export_round_trip() {
    let store = guidepost_store::Store::ephemeral().await.unwrap();
    let server = TestServer::start_with(store.clone(), std::time::Duration::ZERO).await;
    let password = "s3cr3t-pass-0123";
    let token = "tok_0123456789abcdefghij";
    let yaml = format!(
        "agent: {{id: shop, name: Shop}}\nservices:\n  - name: orders\n    kind: openapi\n    spec: http://127.0.0.1:9/openapi.json?api_key={token}\n    url: http://me:{password}@127.0.0.1:9/api\n  - name: files\n    kind: mcp\n    command: [mcp-files]\n    env: {{FILES_TOKEN: {token}, FILES_ROOT: /srv}}\n"
    );
    let put = |body: String| {
        server.http.put(server.url("/agents/shop/definition")).header("content-type", "application/yaml").body(body)
    };
    assert!(put(yaml).send().await.unwrap().status().is_success());
    server
        .ok(
            "put",
            "/services/billing",
            Some(json!({"kind": "sdk", "sdk": {"url": format!("http://bill:{password}@127.0.0.1:9")}})),
        )
        .await;

    let services = server.ok("get", "/services", None).await.to_string();
    let exported = server.http.get(server.url("/agents/shop/definition")).send().await.unwrap().text().await.unwrap();
    let exported_json = server.ok("get", "/agents/shop/definition?format=json", None).await.to_string();
    for (what, text) in [("GET /services", &services), ("YAML export", &exported), ("JSON export", &exported_json)] {
        assert!(!text.contains(password) && !text.contains(token), "{what} shows a credential: {text}");
    }
    assert!(exported.contains("me:[redacted]@127.0.0.1:9/api"), "{exported}");
    assert!(exported.contains("FILES_ROOT: /srv"), "other settings stay: {exported}");

    // The exported definition put back keeps the stored credentials.
    assert!(put(exported).send().await.unwrap().status().is_success());
    let stored = |id: &'static str| {
        let store = store.clone();
        async move { store.require::<guidepost_core::ToolService>(id).await.unwrap().entity }
    };
    let orders = stored("shop.orders").await;
    assert_eq!(orders.url.as_deref(), Some(format!("http://me:{password}@127.0.0.1:9/api").as_str()));
    assert_eq!(orders.spec.as_deref(), Some(format!("http://127.0.0.1:9/openapi.json?api_key={token}").as_str()));
    assert_eq!(stored("shop.files").await.env["FILES_TOKEN"], token);
    server.stop().await;
}
