//! Access control: every operation with no key, a client key and an admin key gets what
//! the role allows and 401/403 otherwise, in protected and production modes; rate limits
//! answer 429 with `Retry-After`.

use std::time::Duration;

use axum::http::Method;
use guidepost_server::ServerOptions;
use guidepost_server::access::{Access, AccessPolicy, Role, access_of};
use guidepost_store::Store;
use serde_json::json;

use super::support::TestServer;

const ADMIN: &str = "admin-key-0123456789abcdef";
const CLIENT: &str = "client-key-0123456789abcdef";

async fn protected(production: bool, requests_per_minute: Option<u32>, messages: Option<u32>) -> TestServer {
    let mut access =
        AccessPolicy::with_keys([(ADMIN.to_string(), Role::Admin), (CLIENT.to_string(), Role::Client)], production);
    access.requests_per_minute = requests_per_minute;
    access.messages_per_session_per_minute = messages;
    let options = ServerOptions { access, ..ServerOptions::default() };
    TestServer::start_with_options(Store::ephemeral().await.unwrap(), Duration::ZERO, options).await
}

async fn walk(mut server: TestServer, production: bool) {
    let ops = guidepost_server::openapi::operations();
    let mut checked = 0;
    for op in &ops {
        let path = format!("{}?wait_for_data=0&wait_for_completion=0", op.path().replace('{', "x").replace('}', ""));
        let method = Method::from_bytes(op.method().to_uppercase().as_bytes()).unwrap();
        let access = access_of(&method, op.path());
        for (key, who) in [(None, "no key"), (Some(CLIENT), "client"), (Some(ADMIN), "admin")] {
            server.key = key.map(str::to_string);
            let body = (op.method() != "get" && op.method() != "delete").then(|| json!({}));
            let (status, value) = server.call(op.method(), &path, body).await;
            let allowed = match (access, who) {
                (Access::Public, _) | (_, "admin") => true,
                (Access::Customer, "client") => true,
                (Access::Customer, "no key") => production,
                _ => false,
            };
            if allowed {
                assert!(status != 401 && status != 403, "{who}: {} {} -> {status} {value}", op.method(), op.path());
            } else {
                let expected = if who == "no key" { 401 } else { 403 };
                assert_eq!(status, expected, "{who}: {} {} -> {value}", op.method(), op.path());
                assert!(value["detail"].is_string(), "{value}");
            }
            checked += 1;
        }
    }
    assert!(checked >= 3 * 84, "{checked}");
    server.key = Some("not-a-key-of-this-server".into());
    let (status, body) = server.call("get", "/agents/taxi", None).await;
    assert_eq!(status, 401, "{body}");
    assert!(!body.to_string().contains("not-a-key"), "the presented key is not repeated: {body}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roles_decide_every_operation_with_keys() {
    walk(protected(false, None, None).await, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn production_mode_opens_only_the_customer_facing_operations() {
    walk(protected(true, None, None).await, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_without_a_key_create_guest_sessions_and_post_only_customer_messages() {
    let mut server = protected(true, None, None).await;
    let (status, _) =
        server.call("post", "/sessions", Some(json!({"agent_id": "taxi", "customer_id": "someone"}))).await;
    assert_eq!(status, 401);
    let session = server.ok("post", "/sessions", Some(json!({"agent_id": "taxi"}))).await;
    let events = format!("/sessions/{}/events", session["id"].as_str().unwrap());
    let (status, _) = server.call("post", &events, Some(json!({"kind": "message", "source": "ai_agent"}))).await;
    assert_eq!(status, 403);
    let (status, _) = server
        .call("post", &events, Some(json!({"kind": "message", "source": "customer", "message": "hi", "participant": {"display_name": "CEO"}})))
        .await;
    assert_eq!(status, 403, "no participant override without an admin key");
    server.ok("post", &events, Some(json!({"kind": "message", "source": "customer", "message": "hi"}))).await;
    server.key = Some(CLIENT.into());
    server.ok("post", "/sessions", Some(json!({"agent_id": "taxi", "customer_id": "someone"}))).await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limits_answer_429_with_retry_after() {
    let mut server = protected(true, Some(5), Some(2)).await;
    let mut statuses = Vec::new();
    for _ in 0..6 {
        statuses.push(server.call("get", "/agents/taxi", None).await.0);
    }
    assert_eq!(statuses, [200, 200, 200, 200, 200, 429]);
    let resp = server.http.get(server.url("/agents/taxi")).send().await.unwrap();
    assert_eq!(resp.status(), 429);
    let wait: u64 = resp.headers()["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=13).contains(&wait), "{wait}");

    // An admin key is not limited; per-session message limits apply to everyone.
    server.key = Some(ADMIN.into());
    let session = server.ok("post", "/sessions", Some(json!({"agent_id": "taxi"}))).await;
    let events = format!("/sessions/{}/events", session["id"].as_str().unwrap());
    let mut statuses = Vec::new();
    for i in 0..3 {
        statuses.push(
            server
                .call(
                    "post",
                    &events,
                    Some(json!({"kind": "message", "source": "customer", "message": format!("m{i}")})),
                )
                .await
                .0,
        );
    }
    assert_eq!(statuses, [201, 201, 429]);
    server.stop().await;
}
