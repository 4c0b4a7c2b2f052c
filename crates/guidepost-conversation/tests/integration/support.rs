use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use guidepost_conversation::{ConversationSettings, Conversations, Post, RuntimeConfig, RuntimeModels, TurnObserver};
use guidepost_core::payload::StatusPayload;
use guidepost_core::{Event, EventKind, EventSource, Session};
use guidepost_llm::{ChatModel, ModelSettings, ModelSpec, ModelStackBuilder, TaskKind};
use guidepost_store::{EventFilter, Store, TurnState};
use guidepost_testkit::fake_openai::{FakeState, router};
use guidepost_testkit::models::{Held, Hold};

/// A fake OpenAI-compatible model server on a free port, answering after `latency`.
pub async fn fake_model(latency: Duration) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, router(FakeState::new(latency))).await;
    });
    format!("http://{addr}")
}

/// The fake's models, over its real wire protocol.
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

/// A gate on the matching calls of turns: while closed, every matching call is held
/// forever (the turn stays in preparation); open, calls pass.
#[derive(Clone, Default)]
pub struct Gate {
    closed: Arc<AtomicBool>,
    /// Notified whenever a call is held.
    pub entered: Arc<tokio::sync::Notify>,
}

impl Gate {
    pub fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
    }

    pub fn open(&self) {
        self.closed.store(false, Ordering::SeqCst);
    }

    /// `models` with their matching calls behind this gate.
    pub fn guard(&self, mut models: RuntimeModels) -> RuntimeModels {
        let closed = self.closed.clone();
        let held = Held::new(models.matching.clone(), move |req| {
            if req.task == TaskKind::Matching && closed.load(Ordering::SeqCst) { Hold::Forever } else { Hold::Pass }
        });
        let entered = self.entered.clone();
        let notify = held.entered.clone();
        // Forwards the model's notification to the gate's, which outlives each service.
        tokio::spawn(async move {
            loop {
                notify.notified().await;
                entered.notify_one();
            }
        });
        models.matching = Arc::new(held) as Arc<dyn ChatModel>;
        models
    }
}

/// Every turn end the service reported.
#[derive(Default)]
pub struct Recorded {
    pub ended: Mutex<Vec<TurnState>>,
    pub model_calls: Mutex<u64>,
}

impl TurnObserver for Recorded {
    fn turn_finished(&self, status: TurnState, _took: Duration) {
        self.ended.lock().unwrap().push(status);
    }

    fn model_usage(&self, usage: &guidepost_llm::UsageTotals) {
        *self.model_calls.lock().unwrap() += usage.calls;
    }
}

/// The service on a store with the weather and taxi agents.
pub struct TestService {
    pub conversations: Conversations,
    pub store: Store,
    pub recorded: Arc<Recorded>,
}

impl TestService {
    /// On an in-memory store, with the fake's models answering at once.
    pub async fn start() -> Self {
        let fake = fake_model(Duration::ZERO).await;
        Self::start_with(Store::ephemeral().await.unwrap(), models(&fake), ConversationSettings::default()).await
    }

    /// On `store` (the example agents imported when it has none), with these models and
    /// settings (an observer that records turn ends replaces the settings' one).
    pub async fn start_with(store: Store, models: RuntimeModels, mut settings: ConversationSettings) -> Self {
        if store.agent_ids().await.unwrap().is_empty() {
            for name in ["weather", "taxi"] {
                store.import_definition(&example(name)).await.unwrap();
            }
        }
        let recorded = Arc::new(Recorded::default());
        settings.observer = recorded.clone();
        let conversations = Conversations::new(store.clone(), models, RuntimeConfig::default(), settings);
        conversations.start().await;
        Self { conversations, store, recorded }
    }

    /// A new session with `agent`, for the guest.
    pub async fn session(&self, agent: &str) -> String {
        let session = Session {
            id: guidepost_store::ids::new_id(),
            agent_id: agent.into(),
            customer_id: "guest".into(),
            creation_utc: chrono::Utc::now(),
            title: None,
            mode: Default::default(),
            consumption_offsets: Default::default(),
            metadata: Default::default(),
            labels: vec![],
        };
        self.store.create_session(&session).await.unwrap();
        session.id
    }

    /// Posts a customer message; the stored event.
    pub async fn say(&self, session: &str, text: &str) -> Event {
        let post = Post::CustomerMessage { text: text.into(), participant: None, metadata: Default::default() };
        self.conversations.post(session, post).await.unwrap()
    }

    /// Waits for the `ready`/`completed` status of turn `trace`; the turn's events.
    pub async fn until_ready(&self, session: &str, trace: &str) -> Vec<Event> {
        let filter = EventFilter { trace_id: Some(trace.into()), ..Default::default() };
        let mut seen: Vec<Event> = Vec::new();
        loop {
            let next = EventFilter { min_offset: seen.last().map_or(0, |e| e.offset + 1), ..filter.clone() };
            let events = self.conversations.wait_for_events(session, &next, Duration::from_secs(60)).await.unwrap();
            seen.extend(events);
            if seen.iter().filter_map(StatusPayload::of).any(|s| s.ends_turn()) {
                return seen;
            }
        }
    }

    /// Posts a customer message and waits for its turn's end; the turn's events.
    pub async fn turn(&self, session: &str, text: &str) -> Vec<Event> {
        let posted = self.say(session, text).await;
        self.until_ready(session, &posted.trace_id).await
    }
}

/// The agent's messages among `events`.
pub fn replies(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e.kind == EventKind::Message && e.source == EventSource::AiAgent)
        .map(|e| e.data["message"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// The statuses among `events`, in order (`processing` with its stage).
pub fn statuses(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(StatusPayload::of)
        .map(|s| {
            let status = serde_json::to_value(s.status).unwrap().as_str().unwrap().to_string();
            match s.data.stage {
                Some(stage) => format!("{status}:{stage}"),
                None => status,
            }
        })
        .collect()
}
