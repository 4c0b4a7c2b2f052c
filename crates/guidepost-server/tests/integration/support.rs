use std::time::Duration;

use guidepost_conversation::{RuntimeConfig, RuntimeModels};
use guidepost_llm::{ModelSettings, ModelSpec, ModelStackBuilder, TaskKind};
use guidepost_server::Server;
use guidepost_store::Store;
use guidepost_testkit::fake_openai::{FakeState, router};
use serde_json::{Value, json};

/// A running server with its fake model.
pub struct TestServer {
    pub base: String,
    /// The API key sent with [`TestServer::call`], if any.
    pub key: Option<String>,
    pub http: reqwest::Client,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    done: Option<tokio::task::JoinHandle<()>>,
}

pub async fn fake_model(latency: Duration) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, router(FakeState::new(latency))).await;
    });
    format!("http://{addr}")
}

pub fn models(fake: &str) -> RuntimeModels {
    let spec: ModelSpec = format!("openai-compatible:{fake}/v1#gpt-4.1").parse().unwrap();
    let embedder: ModelSpec = format!("openai-compatible:{fake}/v1#fake-embed").parse().unwrap();
    let stack = ModelStackBuilder::new(ModelSettings::single(spec)).embedder_spec(embedder).build().unwrap();
    RuntimeModels {
        matching: stack.model_for(&TaskKind::Matching),
        journey_selection: stack.model_for(&TaskKind::JourneySelection),
        tool_inference: stack.model_for(&TaskKind::ToolInference),
        generation: stack.model_for(&TaskKind::Generation),
        embedder: Some(stack.embedder()),
    }
}

pub fn example(name: &str) -> guidepost_core::AgentDefinition {
    let path = format!("{}/../../examples/agents/{name}.yaml", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap();
    guidepost_core::definition::load_agent(&[guidepost_core::definition::SourceFile::new(path, text)])
        .definition
        .unwrap()
}

impl TestServer {
    /// A server on an in-memory store with the example agents imported.
    pub async fn start() -> Self {
        Self::start_with(Store::ephemeral().await.unwrap(), Duration::ZERO).await
    }

    pub async fn start_with(store: Store, latency: Duration) -> Self {
        Self::start_with_options(store, latency, guidepost_server::ServerOptions::default()).await
    }

    pub async fn start_with_options(store: Store, latency: Duration, options: guidepost_server::ServerOptions) -> Self {
        Self::start_wrapped(store, latency, options, |m| m).await
    }

    /// A server on an in-memory store whose models are the fake's, wrapped by `wrap`.
    pub async fn start_with_models(wrap: impl FnOnce(RuntimeModels) -> RuntimeModels) -> Self {
        let store = Store::ephemeral().await.unwrap();
        Self::start_wrapped(store, Duration::ZERO, guidepost_server::ServerOptions::default(), wrap).await
    }

    async fn start_wrapped(
        store: Store,
        latency: Duration,
        options: guidepost_server::ServerOptions,
        wrap: impl FnOnce(RuntimeModels) -> RuntimeModels,
    ) -> Self {
        let fake = fake_model(latency).await;
        for name in ["weather", "taxi"] {
            store.import_definition(&example(name)).await.unwrap();
        }
        let server = Server::with_options(store.clone(), wrap(models(&fake)), RuntimeConfig::default(), options);
        server.start().await.unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let done = tokio::spawn(async move {
            server
                .run(listener, async move {
                    let _ = rx.await;
                })
                .await
                .unwrap();
        });
        Self {
            key: None,
            base: format!("http://{addr}"),
            http: guidepost_llm::http::client_builder().timeout(Duration::from_secs(120)).build().unwrap(),
            shutdown: Some(tx),
            done: Some(done),
        }
    }

    /// Stops the server gracefully and waits for it.
    pub async fn stop(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(done) = self.done.take() {
            let _ = tokio::time::timeout(Duration::from_secs(20), done).await;
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Sends a request; returns the status and the body (JSON when it is JSON, else a string).
    pub async fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let method = reqwest::Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
        let mut req = self.http.request(method, self.url(path));
        if let Some(b) = body {
            req = req.json(&b);
        }
        if let Some(key) = &self.key {
            req = req.bearer_auth(key);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap();
        let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        (status, value)
    }

    pub async fn ok(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let (status, value) = self.call(method, path, body).await;
        assert!((200..300).contains(&status), "{method} {path} -> {status}: {value}");
        value
    }

    /// Posts a customer message and waits for the `ready`/`completed` status of its turn;
    /// returns the turn's events.
    pub async fn turn(&self, session: &str, text: &str) -> Vec<Value> {
        let posted = self
            .ok(
                "post",
                &format!("/sessions/{session}/events"),
                Some(json!({"kind": "message", "source": "customer", "message": text})),
            )
            .await;
        let trace = posted["trace_id"].as_str().unwrap().to_string();
        self.wait_ready(session, &trace).await
    }

    pub async fn wait_ready(&self, session: &str, trace: &str) -> Vec<Value> {
        // A hang guard, not a measure: a turn on the fake model takes a fraction of a second,
        // and ten minutes is beyond any busy machine.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(600);
        loop {
            let (status, events) =
                self.call("get", &format!("/sessions/{session}/events?trace_id={trace}&wait_for_data=5"), None).await;
            if status == 200 {
                let events = events.as_array().unwrap().clone();
                if events.iter().any(|e| e["data"]["status"] == "ready" && e["data"]["data"]["stage"] == "completed") {
                    return events;
                }
                let last = events.last().map_or(0, |e| e["offset"].as_u64().unwrap() + 1);
                let _ = self
                    .call("get", &format!("/sessions/{session}/events?min_offset={last}&wait_for_data=2"), None)
                    .await;
            }
            assert!(tokio::time::Instant::now() < deadline, "no ready/completed for trace {trace}");
        }
    }

    pub async fn session(&self, agent: &str) -> String {
        let s = self.ok("post", "/sessions", Some(json!({"agent_id": agent}))).await;
        s["id"].as_str().unwrap().to_string()
    }
}

pub fn messages(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["kind"] == "message" && e["source"] == "ai_agent")
        .map(|e| e["data"]["message"].as_str().unwrap_or_default().to_string())
        .collect()
}

pub fn ready(events: &[Value]) -> Value {
    events
        .iter()
        .find(|e| e["data"]["status"] == "ready" && e["data"]["data"]["stage"] == "completed")
        .map(|e| e["data"]["data"].clone())
        .unwrap_or(Value::Null)
}
