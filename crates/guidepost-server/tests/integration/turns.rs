//! Turns over HTTP: what starts one, long polls and streams, traces and usage. The turn
//! lifecycle itself (a newer message, cancellation, resumption, shutdown, degraded turns) is
//! tested against the conversation service, in its own crate.

use std::time::Duration;

use guidepost_store::Store;
use serde_json::json;

use super::support::{TestServer, messages, ready};

async fn postgres_store() -> Option<Store> {
    let url = std::env::var("GUIDEPOST_TEST_DATABASE_URL").ok().filter(|u| !u.is_empty())?;
    let admin = Store::open_with(&url, 2).await.unwrap();
    let name = format!("gp_server_{}", uuid::Uuid::new_v4().simple());
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE \"{name}\""))).execute(admin.pool()).await.unwrap();
    admin.close().await;
    let base = url.rsplit_once('/').map_or(url.as_str(), |(b, _)| b).to_string();
    Some(Store::open(&format!("{base}/{name}")).await.unwrap())
}

async fn guideline_created_over_rest_applies_to_the_next_message(server: TestServer) {
    let session = server.session("weather").await;
    let first = server.turn(&session, "Should I bring umbrellas tomorrow?").await;
    let before = ready(&first);
    let created = server
        .ok(
            "post",
            "/guidelines",
            Some(json!({"condition": "The customer asks about umbrellas", "action": "Recommend a sturdy umbrella", "tags": ["agent:weather"]})),
        )
        .await;
    let id = created["id"].as_str().unwrap();
    assert!(!before["matched_guidelines"].to_string().contains(id));
    let events = server.turn(&session, "Which umbrellas do you like?").await;
    let matched = ready(&events)["matched_guidelines"].to_string();
    assert!(matched.contains(id), "the new guideline matched on the next message: {matched}");
    assert_eq!(messages(&events).len(), 1);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guideline_created_over_rest_applies_to_the_next_message() {
    guideline_created_over_rest_applies_to_the_next_message(TestServer::start().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guideline_created_over_rest_applies_to_the_next_message_on_postgres() {
    match postgres_store().await {
        Some(store) => {
            guideline_created_over_rest_applies_to_the_next_message(TestServer::start_with(store, Duration::ZERO).await)
                .await
        }
        None => eprintln!("skipped: GUIDEPOST_TEST_DATABASE_URL is not set"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_greeting_lets_the_agent_speak_first() {
    let server = TestServer::start().await;
    let s = server.ok("post", "/sessions?allow_greeting=true", Some(json!({"agent_id": "taxi"}))).await;
    let session = s["id"].as_str().unwrap();
    let (status, events) =
        server.call("get", &format!("/sessions/{session}/events?kinds=message&wait_for_data=30"), None).await;
    assert_eq!(status, 200);
    assert_eq!(events[0]["source"], "ai_agent", "{events}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_polls_wake_on_the_event_and_answer_504_when_idle() {
    let server = TestServer::start().await;
    let session = server.session("weather").await;
    let (status, body) = server.call("get", &format!("/sessions/{session}/events?wait_for_data=1"), None).await;
    assert_eq!((status, body), (504, json!({"detail": "Request timed out"})));
    let (status, body) = server.call("get", &format!("/sessions/{session}/events?wait_for_data=0"), None).await;
    assert_eq!((status, body), (200, json!([])));

    // A poll that waits an hour: answered with the event, it woke on it (at its end it would
    // have answered 504 with no events).
    let poll = {
        let url = server.url(&format!("/sessions/{session}/events?min_offset=0&wait_for_data=3600"));
        let http = server.http.clone();
        tokio::spawn(async move {
            let response = http.get(url).send().await.unwrap();
            (response.status().as_u16(), response.json::<serde_json::Value>().await.unwrap())
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    server
        .ok(
            "post",
            &format!("/sessions/{session}/events"),
            Some(json!({"kind": "custom", "source": "customer_ui", "data": {"x": 1}})),
        )
        .await;
    let (status, events) = poll.await.unwrap();
    assert_eq!(status, 200, "{events}");
    assert_eq!(events[0]["data"], json!({"x": 1}));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_streams_a_turn_as_data_lines() {
    let server = TestServer::start().await;
    let session = server.session("taxi").await;
    server.turn(&session, "I need a taxi").await;
    let resp = server
        .http
        .get(server.url(&format!("/sessions/{session}/events?sse=true&wait_for_data=1")))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let text = resp.text().await.unwrap();
    let events: Vec<serde_json::Value> =
        text.lines().filter_map(|l| l.strip_prefix("data: ")).map(|d| serde_json::from_str(d).unwrap()).collect();
    assert!(events.len() >= 5, "{text}");
    assert!(events.windows(2).all(|w| w[1]["offset"].as_u64() == w[0]["offset"].as_u64().map(|o| o + 1)));
    server.stop().await;
}

/// Streams the inner model's replies, holding each after its first piece until `gate` has
/// permits: a reader is sure to see the reply before it is whole, however slow the machine.
struct GatedStream {
    inner: std::sync::Arc<dyn guidepost_llm::ChatModel>,
    gate: std::sync::Arc<tokio::sync::Semaphore>,
}

#[async_trait::async_trait]
impl guidepost_llm::ChatModel for GatedStream {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }
    fn capabilities(&self) -> guidepost_llm::ModelCapabilities {
        self.inner.capabilities()
    }
    async fn complete(
        &self,
        req: guidepost_llm::ChatRequest,
    ) -> Result<guidepost_llm::ChatResponse, guidepost_llm::LlmError> {
        self.inner.complete(req).await
    }
    async fn stream(
        &self,
        req: guidepost_llm::ChatRequest,
    ) -> Result<guidepost_llm::TextStream, guidepost_llm::LlmError> {
        use futures::StreamExt;
        let mut inner = self.inner.stream(req).await?;
        let first = inner.next().await;
        let gate = self.gate.clone();
        let held = futures::stream::once(async move {
            let _open = gate.acquire().await;
        })
        .filter_map(|()| async { None });
        Ok(Box::pin(futures::stream::iter(first).chain(held).chain(inner)))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_reply_reaches_an_sse_reader_piece_by_piece() {
    let gate = std::sync::Arc::new(tokio::sync::Semaphore::new(0));
    let held = gate.clone();
    let server = TestServer::start_with_models(move |mut models| {
        models.generation = std::sync::Arc::new(GatedStream { inner: models.generation.clone(), gate: held });
        models
    })
    .await;
    server.ok("patch", "/agents/weather", Some(json!({"message_output_mode": "stream"}))).await;
    let session = server.session("weather").await;
    let path = format!("/sessions/{session}/events");
    server.ok("post", &path, Some(json!({"kind": "message", "source": "customer", "message": "Hello"}))).await;
    // The reply's event appears as soon as its first words do ...
    let listed = server.ok("get", &format!("{path}?kinds=message&source=ai_agent&wait_for_data=30"), None).await;
    let id = listed[0]["id"].as_str().unwrap().to_string();
    // ... and its readers follow it as it grows, until the closing `null` chunk. The model
    // goes on once the reader has the first piece.
    let resp = server.http.get(server.url(&format!("{path}/{id}?sse=true&wait_for_data=30"))).send().await.unwrap();
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let mut body = resp.bytes_stream();
    let mut updates: Vec<serde_json::Value> = Vec::new();
    let mut pending = String::new();
    use futures::StreamExt;
    while let Some(bytes) = body.next().await {
        pending.push_str(&String::from_utf8_lossy(&bytes.unwrap()));
        while let Some(end) = pending.find("\n\n") {
            let frame: String = pending.drain(..end + 2).collect();
            if let Some(data) = frame.lines().find_map(|l| l.strip_prefix("data: ")) {
                updates.push(serde_json::from_str(data).unwrap());
                if updates.len() == 1 {
                    // One permit opens the gate for good: each held stream gives it back.
                    gate.add_permits(1);
                }
            }
        }
    }
    let chunks = |v: &serde_json::Value| v["data"]["chunks"].as_array().cloned().unwrap_or_default();
    // Each update is the reply so far, longer than the one before; the first came before
    // the reply was whole.
    assert!(updates.len() >= 2, "the reply arrived in pieces: {updates:?}");
    assert!(updates.windows(2).all(|w| chunks(&w[1]).len() > chunks(&w[0]).len()), "{updates:?}");
    assert!(!chunks(&updates[0]).last().is_some_and(serde_json::Value::is_null), "{updates:?}");
    let last = updates.last().unwrap();
    let closed = chunks(last);
    assert!(closed.last().unwrap().is_null(), "the stream ends with the closing chunk: {last}");
    let text: String = closed.iter().filter_map(|c| c.as_str()).collect();
    assert_eq!(text, last["data"]["message"].as_str().unwrap());
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_triggers_utterances_human_messages_and_manual_sessions() {
    let server = TestServer::start().await;
    let session = server.session("taxi").await;
    let path = format!("/sessions/{session}/events");

    let first = server.ok("post", &path, Some(json!({"kind": "message", "source": "ai_agent"}))).await;
    assert_eq!((first["kind"].as_str(), first["source"].as_str()), (Some("status"), Some("ai_agent")));
    server.wait_ready(&session, first["trace_id"].as_str().unwrap()).await;

    let said = server
        .ok("post", &path, Some(json!({"kind": "message", "source": "ai_agent", "guidelines": [{"action": "Tell the customer a driver is on the way", "rationale": "follow_up"}]})))
        .await;
    assert_eq!(said["kind"], "message");
    assert!(!said["data"]["message"].as_str().unwrap().is_empty());

    let (status, body) =
        server.call("post", &path, Some(json!({"kind": "message", "source": "ai_agent", "message": "hi"}))).await;
    assert_eq!(status, 422, "{body}");
    let (status, body) =
        server.call("post", &path, Some(json!({"kind": "message", "source": "human_agent", "message": "Hello"}))).await;
    assert_eq!((status, body["detail"][0]["loc"][1].as_str()), (422, Some("participant")));

    server.ok("patch", &format!("/sessions/{session}"), Some(json!({"mode": "manual"}))).await;
    let before = server.ok("get", &format!("/sessions/{session}/turns"), None).await.as_array().unwrap().len();
    server.ok("post", &path, Some(json!({"kind": "message", "source": "customer", "message": "Are you there?"}))).await;
    server.ok("post", &path, Some(json!({"kind": "message", "source": "human_agent", "message": "Yes, Sam here.", "participant": {"display_name": "Sam"}}))).await;
    let after = server.ok("get", &format!("/sessions/{session}/turns"), None).await.as_array().unwrap().len();
    assert_eq!(before, after, "a session in manual mode starts no turns");

    let own = server.ok("post", "/sessions", Some(json!({"agent_id": "taxi", "customer_id": "user-4711"}))).await;
    assert_eq!(own["customer_id"], "user-4711", "an application's own customer id is kept as given");
    let usage = server.ok("get", &format!("/sessions/{session}/usage"), None).await;
    assert!(usage["model_calls"].as_u64().unwrap() > 0 && usage["prompt_tokens"].as_u64().unwrap() > 0, "{usage}");
    let turns = server.ok("get", &format!("/sessions/{session}/turns"), None).await;
    assert!(turns[0]["trace"]["iterations"].is_array(), "{turns}");
    server.stop().await;
}

/// Keeps what it is asked to read ahead; answers through the fake model.
struct ReadsAhead {
    inner: std::sync::Arc<dyn guidepost_llm::ChatModel>,
    read: std::sync::Arc<std::sync::Mutex<Vec<guidepost_llm::ChatRequest>>>,
}

#[async_trait::async_trait]
impl guidepost_llm::ChatModel for ReadsAhead {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }
    fn capabilities(&self) -> guidepost_llm::ModelCapabilities {
        self.inner.capabilities()
    }
    async fn complete(
        &self,
        req: guidepost_llm::ChatRequest,
    ) -> Result<guidepost_llm::ChatResponse, guidepost_llm::LlmError> {
        self.inner.complete(req).await
    }
    fn reads_ahead(&self) -> bool {
        true
    }
    async fn read_ahead(&self, req: guidepost_llm::ChatRequest) -> Result<bool, guidepost_llm::LlmError> {
        self.read.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(req);
        Ok(true)
    }
}

#[tokio::test]
async fn a_new_conversation_has_its_reply_prompt_read_ahead_while_the_customer_writes() {
    let read = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let kept = read.clone();
    let server = TestServer::start_with_models(move |mut models| {
        models.generation = std::sync::Arc::new(ReadsAhead { inner: models.generation.clone(), read: kept });
        models
    })
    .await;
    let seen = || read.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
    assert!(seen().is_empty());
    let session = server.session("weather").await;
    // In the background: the session is answered before it is read.
    let mut waited = 0;
    while seen().is_empty() && waited < 1200 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        waited += 1;
    }
    let requests = seen();
    assert_eq!(requests.len(), 1, "one reply prompt read ahead");
    assert!(requests[0].system_text().contains("小天"), "the agent's own: {}", requests[0].system_text());
    // The conversation goes on as before.
    let events = server.turn(&session, "你好").await;
    assert_eq!(messages(&events).len(), 1);
}

#[tokio::test]
async fn after_a_reply_the_next_tool_decision_is_read_ahead_with_it_while_the_customer_writes() {
    let read = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let kept = read.clone();
    let server = TestServer::start_with_models(move |mut models| {
        models.tool_inference = std::sync::Arc::new(ReadsAhead { inner: models.tool_inference.clone(), read: kept });
        models
    })
    .await;
    let seen = || read.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
    let session = server.session("weather").await;
    let events = server.turn(&session, "上海").await;
    let reply = messages(&events).pop().expect("a reply");
    // In the background, once the turn is committed: the conversation with the reply.
    let with_reply = |requests: &[guidepost_llm::ChatRequest]| {
        requests.iter().any(|r| r.last_user_message().contains(&format!("{reply}\n")))
    };
    let mut waited = 0;
    while !with_reply(&seen()) && waited < 1200 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        waited += 1;
    }
    let requests = seen();
    let ahead = requests.iter().find(|r| r.last_user_message().contains(&format!("{reply}\n"))).expect("read ahead");
    assert_eq!(ahead.task, guidepost_llm::TaskKind::ToolInference);
    assert!(ahead.last_user_message().contains("customer: 上海\n"), "{}", ahead.last_user_message());
    // The conversation goes on as before.
    let events = server.turn(&session, "那北京呢？").await;
    assert_eq!(messages(&events).len(), 1);
}
