//! Bounded under abuse: what a caller can post, how many events it can post to a session, and
//! how long a client that dawdles (headers that never end, a body that stalls, an idle
//! kept-alive connection) or how many at once can hold the server. Each wait here is a guard
//! far above the bound under test: a server without the bound fails the test instead of
//! passing slowly.

use std::time::Duration;

use guidepost_server::ServerOptions;
use guidepost_server::access::AccessPolicy;
use guidepost_server::bounds::Bounds;
use guidepost_store::Store;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::support::TestServer;

const GUARD: Duration = Duration::from_secs(20);

async fn server(bounds: Bounds, access: AccessPolicy) -> TestServer {
    let options = ServerOptions { bounds, access, ..ServerOptions::default() };
    TestServer::start_with_options(Store::ephemeral().await.unwrap(), Duration::ZERO, options).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn customer_events_are_bounded_in_size_and_in_rate_whatever_their_kind() {
    let mut access = AccessPolicy::default();
    access.messages_per_session_per_minute = Some(3);
    let bounds = Bounds { max_customer_event_bytes: 4096, ..Bounds::default() };
    let server = server(bounds, access).await;
    let session = server.session("weather").await;
    let events = format!("/sessions/{session}/events");
    let ui = |data: serde_json::Value| json!({"kind": "custom", "source": "customer_ui", "data": data});

    let (status, body) = server.call("post", &events, Some(ui(json!({"blob": "x".repeat(1_900_000)})))).await;
    assert_eq!(status, 413, "{body}");
    assert!(body["detail"].as_str().unwrap().contains("at most 4096 bytes"), "{body}");
    let long = json!({"kind": "message", "source": "customer", "message": "y".repeat(5000)});
    assert_eq!(server.call("post", &events, Some(long)).await.0, 413);
    let metadata = json!({"kind": "custom", "source": "customer", "data": {}, "metadata": {"m": "z".repeat(5000)}});
    assert_eq!(server.call("post", &events, Some(metadata)).await.0, 413);

    // Three events a minute from the customer's side, of any kind; the fourth waits.
    for n in 0..3 {
        assert_eq!(server.call("post", &events, Some(ui(json!({"n": n})))).await.0, 201);
    }
    let (status, body) = server.call("post", &events, Some(ui(json!({"n": 3})))).await;
    assert_eq!(status, 429, "customer_ui events count against the session's limit: {body}");
    let message = json!({"kind": "message", "source": "customer", "message": "Hi"});
    assert_eq!(server.call("post", &events, Some(message)).await.0, 429);
    // An event from the system is not the customer's, and not bounded so.
    let system = json!({"kind": "custom", "source": "system", "data": {"blob": "x".repeat(10_000)}});
    assert_eq!(server.call("post", &events, Some(system)).await.0, 201);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_listing_comes_whole_and_in_order() {
    let server = server(Bounds::default(), AccessPolicy::default()).await;
    let session = server.session("weather").await;
    let events = format!("/sessions/{session}/events");
    for n in 0..250 {
        let data = json!({"n": n, "pad": "p".repeat(8_000)});
        let body = json!({"kind": "custom", "source": "system", "data": data});
        assert_eq!(server.call("post", &events, Some(body)).await.0, 201);
    }
    // Several pages of a hundred events or a mebibyte each, as one array.
    let listed = server.ok("get", &format!("{events}?wait_for_data=0"), None).await;
    let offsets: Vec<u64> = listed.as_array().unwrap().iter().map(|e| e["offset"].as_u64().unwrap()).collect();
    assert_eq!(offsets, (0..250).collect::<Vec<_>>());
    let some = server.ok("get", &format!("{events}?min_offset=240&wait_for_data=0"), None).await;
    assert_eq!(some.as_array().unwrap().len(), 10);
    let none = server.ok("get", &format!("{events}?min_offset=999&wait_for_data=0"), None).await;
    assert_eq!(none, json!([]));
    server.stop().await;
}

/// Reads from `stream` until the server closes it; `true` when it did within the guard.
async fn closed_by_server(stream: &mut TcpStream) -> bool {
    let mut buf = [0u8; 4096];
    let until = tokio::time::Instant::now() + GUARD;
    loop {
        match tokio::time::timeout_at(until, stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => continue,
            Err(_) => return false,
        }
    }
}

fn address(server: &TestServer) -> String {
    server.base.trim_start_matches("http://").to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_and_idle_clients_are_dropped_and_long_polls_are_not() {
    let bounds =
        Bounds { header_timeout: Duration::from_secs(1), idle_timeout: Duration::from_secs(1), ..Bounds::default() };
    let server = server(bounds, AccessPolicy::default()).await;
    let addr = address(&server);

    // Headers that never end.
    let mut slow = TcpStream::connect(&addr).await.unwrap();
    slow.write_all(b"GET /agents HTTP/1.1\r\nHost: x\r\n").await.unwrap();
    assert!(closed_by_server(&mut slow).await, "a request whose headers never end is dropped");

    // A kept-alive connection left idle after its response.
    let mut idle = TcpStream::connect(&addr).await.unwrap();
    idle.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
    let mut first = vec![0u8; 1024];
    let n = idle.read(&mut first).await.unwrap();
    assert!(String::from_utf8_lossy(&first[..n]).starts_with("HTTP/1.1 200"));
    assert!(closed_by_server(&mut idle).await, "an idle kept-alive connection is closed");

    // A body that stops halfway.
    let mut stalled = TcpStream::connect(&addr).await.unwrap();
    stalled
        .write_all(b"POST /customers HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{\"name\":")
        .await
        .unwrap();
    assert!(closed_by_server(&mut stalled).await, "a stalled body is dropped");

    // A long poll waits longer than either timeout, for the server, and is answered.
    let session = server.session("weather").await;
    let (status, _) =
        server.call("get", &format!("/sessions/{session}/events?min_offset=99&wait_for_data=3"), None).await;
    assert_eq!(status, 504, "the long poll ran its course");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quiet_connections_are_closed_and_event_streams_are_not() {
    let bounds =
        Bounds { header_timeout: Duration::from_secs(1), idle_timeout: Duration::from_secs(1), ..Bounds::default() };
    let server = server(bounds, AccessPolicy::default()).await;
    let addr = address(&server);

    // A client that connects and never speaks.
    let mut silent = TcpStream::connect(&addr).await.unwrap();
    assert!(closed_by_server(&mut silent).await, "a connection that sends nothing is closed");
    // One that stops halfway through the HTTP/2 preface, and one that sends the preface and
    // then nothing.
    let mut partial = TcpStream::connect(&addr).await.unwrap();
    partial.write_all(b"PRI * HTTP/2.0\r\n").await.unwrap();
    assert!(closed_by_server(&mut partial).await, "a half-sent HTTP/2 preface is dropped");
    let mut h2 = TcpStream::connect(&addr).await.unwrap();
    h2.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").await.unwrap();
    assert!(closed_by_server(&mut h2).await, "an HTTP/2 connection that sends no request is closed");

    // An event stream sends nothing from the client for three times the bound, and still
    // delivers the event posted after that.
    let session = server.session("weather").await;
    let events = format!("/sessions/{session}/events");
    let existing = server.ok("get", &format!("{events}?wait_for_data=0"), None).await;
    let next = existing.as_array().unwrap().len();
    let response = server
        .http
        .get(server.url(&format!("{events}?sse=true&min_offset={next}&wait_for_data=60")))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let late = json!({"kind": "custom", "source": "system", "data": {"late": true}});
    assert_eq!(server.call("post", &events, Some(late)).await.0, 201);
    let mut body = response.bytes_stream();
    let mut seen = String::new();
    let until = tokio::time::Instant::now() + GUARD;
    use futures::StreamExt;
    while !seen.contains("\"late\"") {
        match tokio::time::timeout_at(until, body.next()).await {
            Ok(Some(Ok(chunk))) => seen.push_str(&String::from_utf8_lossy(&chunk)),
            other => panic!("the stream ended before the late event ({other:?}): {seen}"),
        }
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_the_cap_are_closed_and_a_freed_slot_is_used_again() {
    let bounds = Bounds { max_connections: 3, ..Bounds::default() };
    let server = server(bounds, AccessPolicy::default()).await;
    let addr = address(&server);
    let mut held = Vec::new();
    for _ in 0..3 {
        let mut stream = TcpStream::connect(&addr).await.unwrap();
        // Each is served: a first request goes through and the connection stays open.
        stream.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
        let mut buf = vec![0u8; 1024];
        let n = stream.read(&mut buf).await.unwrap();
        assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
        held.push(stream);
    }
    let mut extra = TcpStream::connect(&addr).await.unwrap();
    let _ = extra.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert!(closed_by_server(&mut extra).await, "the fourth connection is closed at once");

    // One of them goes; its slot serves the next connection.
    drop(held.pop());
    let until = tokio::time::Instant::now() + GUARD;
    loop {
        let mut next = TcpStream::connect(&addr).await.unwrap();
        let _ = next.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nconnection: close\r\n\r\n").await;
        let mut answer = Vec::new();
        let _ = tokio::time::timeout(GUARD, next.read_to_end(&mut answer)).await;
        if String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 200") {
            break;
        }
        assert!(tokio::time::Instant::now() < until, "the freed slot was never used again");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    server.stop().await;
}

const ADMIN: &str = "admin-key-0123456789abcdef";

fn production() -> AccessPolicy {
    AccessPolicy::with_keys([(ADMIN.to_string(), guidepost_server::access::Role::Admin)], true)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_that_match_nothing_are_rate_limited_per_address() {
    let server = server(Bounds::default(), production()).await;
    let get = |key: &'static str| server.http.get(server.url("/guidelines")).bearer_auth(key).send();
    // An admin is not a customer: its sessions are not bounded so.
    let padded = json!({"agent_id": "weather", "metadata": {"pad": "x".repeat(20_000)}});
    let admin = server.http.post(server.url("/sessions")).bearer_auth(ADMIN).json(&padded).send().await.unwrap();
    assert_eq!(admin.status(), 201);
    for n in 0..10 {
        let response = get("wrong-key-0123456789abcdef").await.unwrap();
        assert_eq!(response.status(), 401, "wrong key {n}");
    }
    let response = get("wrong-key-0123456789abcdef").await.unwrap();
    assert_eq!(response.status(), 429, "the eleventh wrong key in a minute waits");
    let wait: u64 = response.headers()["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=60).contains(&wait), "{wait}");
    // While the address waits, no key from it is tried, the right one included: a guesser
    // cannot tell a right key from a wrong one by the answer.
    assert_eq!(get(ADMIN).await.unwrap().status(), 429);
    // A caller without a key is not guessing and goes on, within the customer's bounds.
    let (status, body) = server.call("post", "/sessions", Some(json!({"agent_id": "weather"}))).await;
    assert_eq!(status, 201, "{body}");
    let padded = json!({"agent_id": "weather", "metadata": {"pad": "x".repeat(20_000)}});
    let (status, body) = server.call("post", "/sessions", Some(padded)).await;
    assert_eq!(status, 413, "an anonymous session is bounded as a customer's event is: {body}");
    server.stop().await;
}

async fn preflight(server: &TestServer, origin: &str) -> reqwest::header::HeaderMap {
    let response = server
        .http
        .request(reqwest::Method::OPTIONS, server.url("/sessions"))
        .header("origin", origin)
        .header("access-control-request-method", "POST")
        .header("access-control-request-headers", "authorization,content-type")
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success(), "{}", response.status());
    response.headers().clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_protected_server_lends_credentials_only_to_the_origins_it_names() {
    // Any origin, in production: `*`, never with credentials.
    let open_to_any = server(Bounds::default(), production()).await;
    let h = preflight(&open_to_any, "https://attacker.example").await;
    assert_eq!(h["access-control-allow-origin"], "*");
    assert!(h.get("access-control-allow-credentials").is_none(), "{h:?}");
    assert!(h["access-control-allow-headers"].to_str().unwrap().contains("authorization"));
    open_to_any.stop().await;

    // Named origins: those, with credentials; others are not allowed.
    let options = ServerOptions {
        access: production(),
        cors: guidepost_server::Cors::Origins(vec!["https://shop.example".into()]),
        ..ServerOptions::default()
    };
    let named = TestServer::start_with_options(Store::ephemeral().await.unwrap(), Duration::ZERO, options).await;
    let h = preflight(&named, "https://shop.example").await;
    assert_eq!(h["access-control-allow-origin"], "https://shop.example");
    assert_eq!(h["access-control-allow-credentials"], "true");
    let h = preflight(&named, "https://attacker.example").await;
    assert!(h.get("access-control-allow-origin").is_none(), "the browser refuses the call: {h:?}");
    named.stop().await;

    // An open development server echoes any origin, as the reference does.
    let open = server(Bounds::default(), AccessPolicy::default()).await;
    let h = preflight(&open, "http://localhost:3000").await;
    assert_eq!(h["access-control-allow-origin"], "http://localhost:3000");
    open.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_on_postgres_give_a_session_one_budget() {
    let Some(url) = std::env::var("GUIDEPOST_TEST_DATABASE_URL").ok().filter(|u| !u.is_empty()) else {
        eprintln!("skipped: GUIDEPOST_TEST_DATABASE_URL is not set");
        return;
    };
    let admin = Store::open_with(&url, 2).await.unwrap();
    let name = format!("gp_server_{}", uuid::Uuid::new_v4().simple());
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE \"{name}\""))).execute(admin.pool()).await.unwrap();
    let database = format!("{}/{name}", url.rsplit_once('/').map_or(url.as_str(), |(b, _)| b));
    let mut access = AccessPolicy::default();
    access.messages_per_session_per_minute = Some(4);
    let options = || ServerOptions { access: access.clone(), ..ServerOptions::default() };
    let first =
        TestServer::start_with_options(Store::open_with(&database, 4).await.unwrap(), Duration::ZERO, options()).await;
    let second =
        TestServer::start_with_options(Store::open_with(&database, 4).await.unwrap(), Duration::ZERO, options()).await;
    let session = first.session("weather").await;
    let events = format!("/sessions/{session}/events");
    let ui = |n: u32| Some(json!({"kind": "custom", "source": "customer_ui", "data": {"n": n}}));
    // Four a minute for the session, whichever replica takes them.
    for n in 0..2 {
        assert_eq!(first.call("post", &events, ui(n)).await.0, 201);
        assert_eq!(second.call("post", &events, ui(n + 2)).await.0, 201);
    }
    assert_eq!(second.call("post", &events, ui(4)).await.0, 429, "the second replica knows the first's four");
    assert_eq!(first.call("post", &events, ui(5)).await.0, 429);
    first.stop().await;
    second.stop().await;
    let _ = sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)")))
        .execute(admin.pool())
        .await;
    admin.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_a_trusted_proxy_each_client_has_its_own_budget() {
    let wrong = |server: &TestServer, forwarded: &str| {
        server
            .http
            .get(server.url("/guidelines"))
            .bearer_auth("wrong-key-0123456789abcdef")
            .header("x-forwarded-for", forwarded)
            .send()
    };
    // The test connects from 127.0.0.1: trusted, the header names the client.
    let proxies = guidepost_server::client::TrustedProxies(vec!["127.0.0.0/8".parse().unwrap()]);
    let options = ServerOptions { access: production(), trusted_proxies: proxies, ..ServerOptions::default() };
    let behind = TestServer::start_with_options(Store::ephemeral().await.unwrap(), Duration::ZERO, options).await;
    for _ in 0..10 {
        assert_eq!(wrong(&behind, "203.0.113.7").await.unwrap().status(), 401);
    }
    assert_eq!(wrong(&behind, "203.0.113.7").await.unwrap().status(), 429, "the guesser waits");
    assert_eq!(wrong(&behind, "203.0.113.8").await.unwrap().status(), 401, "another client behind the proxy does not");
    behind.stop().await;

    // Not trusted: the header is the caller's own claim, and changing it changes nothing.
    let direct = server(Bounds::default(), production()).await;
    for n in 0..10 {
        assert_eq!(wrong(&direct, &format!("203.0.113.{n}")).await.unwrap().status(), 401);
    }
    assert_eq!(wrong(&direct, "203.0.113.99").await.unwrap().status(), 429);
    direct.stop().await;
}
