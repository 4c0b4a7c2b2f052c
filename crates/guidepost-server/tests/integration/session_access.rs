//! The access matrix over real HTTP: every session-scoped and customer-scoped operation ×
//! {no key, client key, admin key} × {a guest session, a named customer's session}, in
//! production mode, with keys outside it, and on an open server. Each cell gets a fresh
//! session holding a customer message, so no cell depends on what another did; a refusal
//! never carries the session's content, and an allowed customer-facing call really reaches
//! the session (2xx, its message in what is read).

use std::time::Duration;

use axum::http::Method;
use guidepost_server::ServerOptions;
use guidepost_server::access::{Access, AccessPolicy, Role, access_of};
use guidepost_store::Store;
use serde_json::{Value, json};

use super::support::TestServer;

const ADMIN: &str = "admin-key-0123456789abcdef";
const CLIENT: &str = "client-key-0123456789abcdef";

/// How the server is protected.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Mode {
    /// Keys and `--production`: callers without a key reach guest sessions.
    Production,
    /// Keys without `--production`: callers without a key reach nothing but public routes.
    Keys,
    /// No keys, not production: a development server, open to all.
    Open,
}

async fn server(mode: Mode) -> TestServer {
    let mut access = match mode {
        Mode::Open => AccessPolicy::open(),
        _ => AccessPolicy::with_keys(
            [(ADMIN.to_string(), Role::Admin), (CLIENT.to_string(), Role::Client)],
            mode == Mode::Production,
        ),
    };
    // The matrix makes a few hundred calls: rate limits are another test's subject.
    access.requests_per_minute = None;
    access.messages_per_session_per_minute = None;
    let options = ServerOptions { access, ..ServerOptions::default() };
    let mut server = TestServer::start_with_options(Store::ephemeral().await.unwrap(), Duration::ZERO, options).await;
    server.key = Some(ADMIN.into());
    server.ok("post", "/customers", Some(json!({"id": "alice", "name": "Alice"}))).await;
    server
}

/// A fresh session of `customer` with one customer message in it.
struct Target {
    customer: &'static str,
    session: String,
    event: String,
    trace: String,
    /// The message's text, which only callers who reach the session may read.
    secret: String,
}

async fn target(server: &mut TestServer, customer: &'static str, cell: usize) -> Target {
    server.key = Some(ADMIN.into());
    let session = server.ok("post", "/sessions", Some(json!({"agent_id": "taxi", "customer_id": customer}))).await;
    let session = session["id"].as_str().unwrap().to_string();
    let secret = format!("private-{customer}-{cell}-12 Elm Street");
    let event = server
        .ok(
            "post",
            &format!("/sessions/{session}/events"),
            Some(json!({"kind": "message", "source": "customer", "message": secret})),
        )
        .await;
    Target {
        customer,
        session,
        event: event["id"].as_str().unwrap().to_string(),
        trace: event["trace_id"].as_str().unwrap().to_string(),
        secret,
    }
}

/// The operations the matrix covers: every one that names a session or a customer, and
/// creating, listing and deleting sessions (by customer).
fn scoped_operations() -> Vec<(String, String)> {
    guidepost_server::openapi::operations()
        .iter()
        .filter(|op| {
            op.path().contains("{session_id}") || op.path().contains("{customer_id}") || op.path() == "/sessions"
        })
        .map(|op| (op.method().to_string(), op.path().to_string()))
        .collect()
}

/// The request of one cell: the path with the target's ids, and a body a customer-facing
/// call would send.
fn request(method: &str, path: &str, t: &Target) -> (String, Option<Value>) {
    let mut url = path
        .replace("{session_id}", &t.session)
        .replace("{event_id}", &t.event)
        .replace("{trace_id}", &t.trace)
        .replace("{customer_id}", t.customer);
    let body = match (method, path) {
        ("post", "/sessions") => Some(json!({"agent_id": "taxi", "customer_id": t.customer})),
        ("post", "/sessions/{session_id}/events") => {
            Some(json!({"kind": "message", "source": "customer", "message": "and one more thing"}))
        }
        ("get" | "delete", "/sessions") => {
            url.push_str(&format!("?customer_id={}", t.customer));
            None
        }
        ("get", _) => {
            url.push_str("?wait_for_data=0");
            None
        }
        ("delete", "/sessions/{session_id}/events") => {
            url.push_str("?min_offset=0");
            None
        }
        ("delete", _) => None,
        _ => Some(json!({})),
    };
    (url, body)
}

/// Whether a caller reaches the operation on the target, by the documented matrix.
fn expected(mode: Mode, who: &str, access: Access, customer: &str) -> Result<(), u16> {
    match (mode, who, access) {
        (Mode::Open, _, _) | (_, "admin", _) => Ok(()),
        (_, "client", Access::Customer) => Ok(()),
        (_, "client", _) => Err(403),
        (Mode::Production, _, Access::Customer) if customer == "guest" => Ok(()),
        _ => Err(401),
    }
}

async fn matrix(mode: Mode) {
    let mut server = server(mode).await;
    let operations = scoped_operations();
    assert!(operations.len() >= 17, "{operations:?}");
    let mut cells = 0;
    for (method, path) in &operations {
        let access = access_of(&Method::from_bytes(method.to_uppercase().as_bytes()).unwrap(), path);
        for customer in ["guest", "alice"] {
            for (key, who) in [(None, "no key"), (Some(CLIENT), "client"), (Some(ADMIN), "admin")] {
                cells += 1;
                let t = target(&mut server, customer, cells).await;
                let (url, body) = request(method, path, &t);
                server.key = key.map(str::to_string);
                let (status, value) = server.call(method, &url, body).await;
                let cell = format!("{mode:?}, {who}, {customer}'s session: {method} {url} -> {status} {value}");
                match expected(mode, who, access, customer) {
                    Err(refusal) => {
                        assert_eq!(status, refusal, "{cell}");
                        assert!(value["detail"].is_string(), "{cell}");
                        assert!(
                            !value.to_string().contains(&t.secret),
                            "a refusal shows nothing of the session: {cell}"
                        );
                    }
                    Ok(()) if access == Access::Customer => {
                        // The customer-facing calls are sent as a widget sends them: they succeed.
                        assert!((200..300).contains(&status), "{cell}");
                        if method == "get" && path.contains("events") {
                            assert!(value.to_string().contains(&t.secret), "the caller reads the session: {cell}");
                        }
                    }
                    Ok(()) => {
                        // Administrative calls with an empty body may be invalid, never refused.
                        assert!(status != 401 && status != 403 && status < 500, "{cell}");
                    }
                }
            }
        }
    }
    assert_eq!(cells, operations.len() * 6);

    // Streams are refused the same way as long polls.
    let alice = target(&mut server, "alice", 0).await;
    let guest = target(&mut server, "guest", 0).await;
    server.key = None;
    for t in [&alice, &guest] {
        let url = format!("/sessions/{}/events?sse=true", t.session);
        let response = server.http.get(server.url(&url)).send().await.unwrap();
        let reaches = mode == Mode::Open || (mode == Mode::Production && t.customer == "guest");
        if reaches {
            assert_eq!(response.status(), 200, "{mode:?}: {url}");
        } else {
            assert_eq!(response.status(), 401, "{mode:?}: {url}");
            assert!(!response.text().await.unwrap().contains(&t.secret));
        }
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_production_callers_without_a_key_reach_guest_sessions_only() {
    matrix(Mode::Production).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_keys_outside_production_callers_without_a_key_reach_no_session() {
    matrix(Mode::Keys).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_server_lets_everyone_reach_every_session() {
    matrix(Mode::Open).await;
}
