//! Side effects exactly once, as an operator meets them: an agent books taxis through a
//! consequential tool of a booking service that counts what it is asked (over real HTTP:
//! an OpenAPI service or an MCP server), and the server running the turn is killed
//! (`kill -9`) during the booking, killed after the booking returned while the reply is
//! being written, or stopped with SIGTERM during the booking; a replica on PostgreSQL takes
//! over the turn of one killed during the booking. After the restart (or takeover) the
//! service has made one booking, and the customer gets one reply that says what happened.
//!
//! Every step waits for an event (a call held by the booking service or the model, a log
//! line, a process exit, a committed event), never for a time.

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use guidepost_testkit::booking_service::BookingService;
use guidepost_testkit::fake_openai::{FakeState, REPLY};
use serde_json::{Value, json};

use crate::durability::{exactly_one_reply, is_ready, post, postgres_database, until};
use crate::serve::{FakeModel, Running, bin, fake_model_from, serve_router, start};

/// How the booking service is reached.
#[derive(Clone, Copy)]
enum Protocol {
    OpenApi,
    Mcp,
}

/// The booking service, on a runtime of its own.
struct Service {
    bookings: Arc<BookingService>,
    url: String,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Drop for Service {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// An agent that books taxis through the booking service, the model it talks to, and where
/// its servers keep their data.
struct Rides {
    service: Service,
    model: Arc<FakeState>,
    fake: FakeModel,
    agents: tempfile::TempDir,
    storage: Vec<String>,
    _data: Option<tempfile::TempDir>,
}

/// Where the servers keep their data.
enum Storage {
    Sqlite,
    Postgres(String),
}

impl Rides {
    fn new(protocol: Protocol, keyed: bool, storage: Storage) -> Self {
        let bookings = if keyed { BookingService::keyed() } else { BookingService::unkeyed() };
        let (url, runtime) = serve_router(bookings.router());
        let service = Service { bookings, url, runtime: Some(runtime) };
        let model = FakeState::new(Duration::ZERO);
        let fake = fake_model_from(model.clone());
        let agents = tempfile::tempdir().unwrap();
        let url = &service.url;
        let declared = match protocol {
            Protocol::OpenApi => format!("{{name: bookings, kind: openapi, url: '{url}', spec: '{url}/openapi.json'}}"),
            Protocol::Mcp => format!("{{name: bookings, kind: mcp, url: '{url}/mcp'}}"),
        };
        let agent = format!(
            "agent: {{id: rides, name: Rita, language: en}}
guidelines:
  - id: book
    condition: The customer wants a taxi
    action: Book the taxi and tell them the booking number
    tools: ['bookings:book_taxi']
services:
  - {declared}
"
        );
        std::fs::write(agents.path().join("rides.yaml"), agent).unwrap();
        let (storage, data) = match storage {
            Storage::Sqlite => {
                let data = tempfile::tempdir().unwrap();
                (vec!["--data-dir".to_string(), data.path().to_str().unwrap().to_string()], Some(data))
            }
            Storage::Postgres(url) => (vec!["--database-url".to_string(), url], None),
        };
        Self { service, model, fake, agents, storage, _data: data }
    }

    fn bookings(&self) -> &BookingService {
        &self.service.bookings
    }

    /// A server for the agent, with its conversation service's progress in the log.
    fn serve(&self) -> Running {
        let mut cmd = Command::new(bin());
        cmd.arg("serve")
            .arg(self.agents.path())
            .args(["--port", "0", "--turn-lease-secs", "2"])
            // A hang guard: the SIGTERM test lets the booking answer once the server waits for it.
            .args(["--shutdown-grace-secs", "600"])
            .args(&self.storage)
            .env("GUIDEPOST_MODEL", format!("openai-compatible:{}/v1#gpt-4.1", self.fake.url))
            .env("GUIDEPOST_EMBEDDER", format!("openai-compatible:{}/v1#fake-embed", self.fake.url))
            .env("GUIDEPOST_LOG", "warn,guidepost_conversation=info")
            .env_remove("GUIDEPOST_DATABASE_URL");
        start(cmd, "listening on ")
    }
}

fn http() -> reqwest::Client {
    guidepost_llm::http::client_builder().timeout(Duration::from_secs(60)).build().unwrap()
}

/// Opens a session on `server` and asks for a taxi; `(session, trace)`.
async fn ask_for_a_taxi(http: &reqwest::Client, server: &Running) -> (String, String) {
    let session = post(http, format!("{}/sessions", server.url), json!({"agent_id": "rides"})).await;
    let session = session["id"].as_str().unwrap().to_string();
    let message = post(
        http,
        format!("{}/sessions/{session}/events", server.url),
        json!({"kind": "message", "source": "customer", "message": "I need a taxi from 120 Main Street"}),
    )
    .await;
    (session, message["trace_id"].as_str().unwrap().to_string())
}

/// `event`, or a failure that shows the server's log after 90 s (a bound on a hang, not a
/// measure).
async fn within<T>(what: &str, server: &Running, event: impl std::future::Future<Output = T>) -> T {
    match tokio::time::timeout(Duration::from_secs(90), event).await {
        Ok(v) => v,
        Err(_) => panic!("{what} did not happen; server log:\n{}", server.stderr_so_far()),
    }
}

fn kill_9(server: &mut Running) {
    server.child.kill().unwrap();
    server.child.wait().unwrap();
}

/// What the customer saw of the turn and what its trace says of its booking.
struct Answered {
    /// The one reply's text.
    reply: String,
    /// The one tool event's call.
    tool_call: Value,
    /// The booking as the turn's trace records it.
    traced: Value,
    /// The turn as the server lists it.
    turn: Value,
}

/// Waits for the turn to be answered on `server`; checks it got one reply, after one tool
/// event with one booking call, and one trace entry for that call.
async fn answered(http: &reqwest::Client, server: &Running, session: &str, trace: &str) -> Answered {
    let all = until(http, &server.url, session, trace, is_ready).await;
    exactly_one_reply(&all, trace);
    let of_trace: Vec<&Value> = all.iter().filter(|e| e["trace_id"] == trace).collect();
    let tools: Vec<&&Value> = of_trace.iter().filter(|e| e["kind"] == "tool").collect();
    assert_eq!(tools.len(), 1, "one tool event: {of_trace:#?}");
    let reply = of_trace.iter().find(|e| e["kind"] == "message" && e["source"] == "ai_agent").unwrap();
    assert!(tools[0]["offset"].as_u64() < reply["offset"].as_u64(), "the tool event comes before the reply");
    let calls = tools[0]["data"]["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1, "one booking call: {calls:#?}");
    assert_eq!(calls[0]["tool_id"], "bookings:book_taxi");
    let turn: Value = http
        .get(format!("{}/sessions/{session}/turns/{trace}", server.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(turn["status"], "completed", "{turn:#}");
    let traced: Vec<Value> = turn["trace"]["iterations"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|i| i["tool_calls"].as_array().cloned().unwrap_or_default())
        .collect();
    assert_eq!(traced.len(), 1, "one booking call in the trace: {traced:#?}");
    Answered {
        reply: reply["data"]["message"].as_str().unwrap().to_string(),
        tool_call: calls[0].clone(),
        traced: traced[0].clone(),
        turn,
    }
}

/// The one key the service received (every request carried the same one).
fn the_key(rides: &Rides) -> String {
    let received = rides.bookings().received();
    let keys: Vec<Option<String>> = received.iter().map(|r| r.key.clone()).collect();
    let first = keys.first().cloned().flatten().unwrap_or_else(|| panic!("no key sent: {received:?}"));
    assert!(keys.iter().all(|k| k.as_deref() == Some(first.as_str())), "one key throughout: {received:?}");
    first
}

/// The reply a customer gets when a booking's outcome is lost and it was not sent again.
fn being_checked() -> String {
    guidepost_core::reply_check::outcome_check_reply(Some("en"))
}

/// Kills the server running the turn while the service holds its booking; the `next` server
/// (a restart, or a replica already running) answers the turn.
async fn kill_during_the_booking(rides: &Rides, replica: Option<Running>) -> (Answered, Running) {
    let http = http();
    let mut first = rides.serve();
    rides.bookings().hold_next(1);
    let (session, trace) = ask_for_a_taxi(&http, &first).await;
    within("the booking", &first, rides.bookings().until(|s| s.held() == 1)).await;
    kill_9(&mut first);
    // The held booking answers a process that is gone.
    rides.bookings().release();
    within("the end of the held booking", &first, rides.bookings().until(|s| s.held() == 0)).await;
    let next = replica.unwrap_or_else(|| rides.serve());
    let answered = answered(&http, &next, &session, &trace).await;
    assert_eq!(answered.turn["attempts"], 2, "{:#}", answered.turn);
    (answered, next)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_booking_lost_to_a_kill_is_not_sent_again_to_a_service_without_keys_and_the_customer_hears_it_is_checked() {
    let rides = Rides::new(Protocol::OpenApi, false, Storage::Sqlite);
    let (answered, _server) = kill_during_the_booking(&rides, None).await;
    assert_eq!(rides.bookings().received().len(), 1, "sent once: {:?}", rides.bookings().received());
    assert_eq!(rides.bookings().bookings().len(), 1);
    let key = the_key(&rides);
    assert_eq!(answered.reply, being_checked(), "the reply says the outcome is being checked");
    assert_eq!(
        (answered.traced["source"].as_str(), answered.traced["call_id"].as_str()),
        (Some("unconfirmed"), Some(key.as_str()))
    );
    assert_eq!(answered.turn["trace"]["composition"]["outcome_check"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_booking_lost_to_a_kill_is_sent_again_with_its_key_to_an_mcp_service_that_honours_keys_and_books_once() {
    let rides = Rides::new(Protocol::Mcp, true, Storage::Sqlite);
    let (answered, _server) = kill_during_the_booking(&rides, None).await;
    let received = rides.bookings().received();
    assert_eq!(received.len(), 2, "sent again after the restart: {received:?}");
    assert!(received.iter().all(|r| r.protocol == "mcp" && r.pickup == "120"), "{received:?}");
    assert_eq!(rides.bookings().bookings(), [(1000, "120".to_string())], "one booking");
    let key = the_key(&rides);
    assert_eq!(
        (answered.traced["source"].as_str(), answered.traced["call_id"].as_str()),
        (Some("resent"), Some(key.as_str()))
    );
    assert_eq!(answered.tool_call["result"]["data"]["booking"], 1000, "{:#}", answered.tool_call);
    assert!(answered.reply.starts_with(REPLY), "the model's reply, from the booking: {}", answered.reply);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_booking_made_before_a_kill_during_the_reply_is_reused_not_made_again() {
    let rides = Rides::new(Protocol::OpenApi, false, Storage::Sqlite);
    let http = http();
    let mut first = rides.serve();
    rides.model.hold_next("reply", 1);
    let (session, trace) = ask_for_a_taxi(&http, &first).await;
    // The reply is being written: the booking returned.
    within("the reply", &first, rides.model.until_held(1)).await;
    assert_eq!(rides.bookings().bookings().len(), 1);
    kill_9(&mut first);
    rides.model.release();
    let second = rides.serve();
    let answered = answered(&http, &second, &session, &trace).await;
    assert_eq!(answered.turn["attempts"], 2, "{:#}", answered.turn);
    assert_eq!(rides.bookings().received().len(), 1, "sent once: {:?}", rides.bookings().received());
    assert_eq!(rides.bookings().bookings(), [(1000, "120".to_string())]);
    let key = the_key(&rides);
    assert_eq!(
        (answered.traced["source"].as_str(), answered.traced["call_id"].as_str()),
        (Some("replayed"), Some(key.as_str()))
    );
    assert_eq!(answered.tool_call["result"]["data"]["booking"], 1000, "{:#}", answered.tool_call);
    assert!(answered.reply.starts_with(REPLY), "the model's reply, from the booking: {}", answered.reply);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_during_a_booking_waits_for_it_and_the_next_start_reuses_it() {
    let rides = Rides::new(Protocol::OpenApi, false, Storage::Sqlite);
    let http = http();
    let mut first = rides.serve();
    rides.bookings().hold_next(1);
    let (session, trace) = ask_for_a_taxi(&http, &first).await;
    within("the booking", &first, rides.bookings().until(|s| s.held() == 1)).await;
    let pid = first.child.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let waiting = first.wait_for_stderr("waiting for the turn's running tool calls", Duration::from_secs(60));
    assert!(waiting.is_ok(), "the server did not wait for the booking: {waiting:#?}");
    rides.bookings().release();
    let status = first.child.wait().unwrap();
    assert!(status.success(), "{status}");
    let log = first.stderr_so_far();
    assert!(!log.contains("tool calls still running at shutdown"), "{log}");
    assert_eq!(rides.bookings().bookings().len(), 1);

    let second = rides.serve();
    let answered = answered(&http, &second, &session, &trace).await;
    assert_eq!(answered.turn["attempts"], 2, "{:#}", answered.turn);
    assert_eq!(rides.bookings().received().len(), 1, "sent once: {:?}", rides.bookings().received());
    assert_eq!(rides.bookings().bookings(), [(1000, "120".to_string())]);
    let key = the_key(&rides);
    assert_eq!(
        (answered.traced["source"].as_str(), answered.traced["call_id"].as_str()),
        (Some("replayed"), Some(key.as_str()))
    );
    assert!(answered.reply.starts_with(REPLY), "the model's reply, from the booking: {}", answered.reply);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_that_takes_over_a_turn_killed_during_a_booking_does_not_book_again() {
    let Some(db) = postgres_database().await else { return };
    let rides = Rides::new(Protocol::OpenApi, false, Storage::Postgres(db));
    let replica = rides.serve();
    let (answered, _replica) = kill_during_the_booking(&rides, Some(replica)).await;
    assert_eq!(rides.bookings().received().len(), 1, "sent once: {:?}", rides.bookings().received());
    assert_eq!(rides.bookings().bookings().len(), 1);
    let key = the_key(&rides);
    assert_eq!(answered.reply, being_checked());
    assert_eq!(
        (answered.traced["source"].as_str(), answered.traced["call_id"].as_str()),
        (Some("unconfirmed"), Some(key.as_str()))
    );
}
