//! Turn semantics: status events, one reply for two quick messages, streaming, hooks.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use guidepost_core::EventKind;
use guidepost_core::reply_check::ReplyCheck;
use guidepost_llm::TaskKind;
use guidepost_llm::providers::scripted::ScriptedModel;
use guidepost_runtime::CustomerRef;
use guidepost_runtime::events::{EventSink, message_text, status_of};
use guidepost_runtime::{EngineHooks, HookAction, MemorySession, ResponseState, SessionRunner, TurnStatus};

use crate::support::*;

const SHOP: &str = r#"
agent: {name: Otto}
guidelines:
  - {id: refund, condition: The customer asks about refunds, action: Explain the 30-day refund policy}
  - {id: shipping, condition: The customer asks about shipping, action: Say that shipping takes 3 days}
"#;

fn shop_oracle() -> Oracle {
    Arc::new(|c: &str, _last: &str, prompt: &str| {
        let conversation = prompt.split("## Conversation").nth(1).unwrap_or("").to_lowercase();
        (c.contains("refunds") && conversation.contains("refund"))
            || (c.contains("shipping") && conversation.contains("shipping"))
    })
}

fn shop_reply(prompt: &str) -> String {
    let mut parts = Vec::new();
    if prompt.contains("30-day refund policy") {
        parts.push("You can return items within 30 days.");
    }
    if prompt.contains("shipping takes 3 days") {
        parts.push("Shipping takes 3 days.");
    }
    if parts.is_empty() { "How can I help?".into() } else { parts.join(" ") }
}

#[tokio::test]
async fn a_turn_emits_the_status_vocabulary_in_order() {
    let model = Arc::new(with_reply(with_matching(ScriptedModel::new(), shop_oracle()), shop_reply));
    let rt = runtime(inline(SHOP), model, Default::default());
    let session = MemorySession::new();
    let outcome = turn(&rt, &session, &Default::default(), "What is your refund policy?").await;
    assert_eq!(outcome.messages, ["You can return items within 30 days."]);
    let sequence: Vec<String> = session
        .events()
        .iter()
        .skip(1)
        .map(|e| match status_of(e) {
            Some((s, Some(stage))) => format!("{s}:{stage}"),
            Some((s, None)) => s,
            None => format!("{:?}", e.kind).to_lowercase(),
        })
        .collect();
    assert_eq!(
        sequence,
        ["acknowledged", "processing:Interpreting", "processing:Articulating", "typing", "message", "ready:completed"]
    );
    let events = session.events();
    let trace = &events[1].trace_id;
    assert!(events.iter().skip(1).all(|e| &e.trace_id == trace), "one trace id per turn");
    let offsets: Vec<u64> = events.iter().map(|e| e.offset).collect();
    assert_eq!(offsets, (0..events.len() as u64).collect::<Vec<_>>());
    let json = serde_json::to_value(&outcome.trace).unwrap();
    assert_eq!(json["iterations"][0]["matching"]["candidates"].as_array().map(Vec::len), Some(2));
}

#[tokio::test]
async fn a_second_message_during_a_turn_gets_one_reply_covering_both() {
    let inner = Arc::new(with_reply(with_matching(ScriptedModel::new(), shop_oracle()), shop_reply));
    let model = Arc::new(Slow { inner: inner.clone(), delay: Duration::from_millis(150) });
    let runner = SessionRunner::new(
        runtime(inline(SHOP), model, Default::default()),
        CustomerRef { id: "guest".into(), tags: vec![] },
    );
    let first = runner.post("What is your refund policy?").await;
    tokio::time::sleep(Duration::from_millis(60)).await;
    let second = runner.post("And how long does shipping take?").await;
    let (first, second) = (first.await, second.await);
    assert_eq!(first.status, TurnStatus::Cancelled);
    assert_eq!(second.status, TurnStatus::Completed);
    assert_eq!(second.messages, ["You can return items within 30 days. Shipping takes 3 days."]);
    let events = runner.session().events();
    let replies: Vec<&str> =
        events.iter().filter(|e| e.source == guidepost_core::EventSource::AiAgent).filter_map(message_text).collect();
    assert_eq!(replies.len(), 1, "{replies:?}");
    let first_trace = &events[1].trace_id;
    let first_statuses: Vec<String> =
        events.iter().filter(|e| &e.trace_id == first_trace).filter_map(|e| status_of(e).map(|s| s.0)).collect();
    assert_eq!(first_statuses.last().map(String::as_str), Some("ready"));
    assert!(first_statuses.contains(&"cancelled".to_string()));
    let compose = inner.requests_for(&TaskKind::Generation);
    assert_eq!(compose.len(), 1, "only the second turn composed");
    // both messages reach the reply, as the customer's one latest turn
    let last = compose[0].last_user_message();
    assert!(last.starts_with("What is your refund policy?\n\nAnd how long does shipping take?"), "{last}");
}

#[tokio::test]
async fn a_streamed_reply_reassembles_to_the_block_reply() {
    let text = "You can return items within 30 days, no questions asked.";
    let block_model = Arc::new(with_reply(with_matching(ScriptedModel::new(), shop_oracle()), move |_| text.into()));
    let block = turn(
        &runtime(inline(SHOP), block_model, Default::default()),
        &MemorySession::new(),
        &Default::default(),
        "Refunds?",
    )
    .await;

    let streaming_def = inline(&SHOP.replace("agent: {name: Otto}", "agent: {name: Otto, output_mode: stream}"));
    let scripted = Arc::new(with_reply(with_matching(ScriptedModel::new(), shop_oracle()), move |_| text.into()));
    let session = MemorySession::new();
    let streamed = turn(
        &runtime(streaming_def, Arc::new(Chunking(scripted)), Default::default()),
        &session,
        &Default::default(),
        "Refunds?",
    )
    .await;
    assert_eq!(streamed.messages, block.messages);
    let message = session
        .events()
        .into_iter()
        .rfind(|e| e.kind == EventKind::Message && e.source == guidepost_core::EventSource::AiAgent)
        .unwrap();
    let chunks = message.data["chunks"].as_array().unwrap();
    assert!(chunks.len() > 3, "streamed in several chunks");
    assert!(chunks.last().unwrap().is_null(), "a null chunk ends the stream");
    let joined: String = chunks.iter().filter_map(|c| c.as_str()).collect();
    assert_eq!(joined, text);
    assert_eq!(message.data["message"], text);
}

struct Polite;

#[async_trait]
impl EngineHooks for Polite {
    async fn on_message_generated(&self, message: &mut String, _state: &ResponseState) -> HookAction {
        message.push_str(" Anything else?");
        HookAction::Continue
    }
}

struct Silent;

#[async_trait]
impl EngineHooks for Silent {
    async fn on_generating_messages(&self, state: &mut ResponseState, events: &dyn EventSink) -> HookAction {
        assert!(state.prepared_to_respond);
        let typing = guidepost_runtime::NewEvent::status("hook", guidepost_core::session::Status::Typing);
        let _ = events.emit(typing, guidepost_runtime::events::Visibility::Live).await;
        HookAction::Bail
    }
}

#[tokio::test]
async fn hooks_edit_messages_and_can_drop_the_reply() {
    let model = Arc::new(with_reply(with_matching(ScriptedModel::new(), shop_oracle()), shop_reply));
    let rt = runtime(inline(SHOP), model.clone(), Default::default());
    let rt = Arc::into_inner(rt).unwrap().with_hooks(Arc::new(Polite));
    let outcome = turn(&rt, &MemorySession::new(), &Default::default(), "Shipping?").await;
    assert_eq!(outcome.messages, ["Shipping takes 3 days. Anything else?"]);

    // The same hook on a streamed reply: the finished message event carries its edit.
    let streaming = inline(&SHOP.replace("agent: {name: Otto}", "agent: {name: Otto, output_mode: stream}"));
    let rt =
        Arc::into_inner(runtime(streaming, model.clone(), Default::default())).unwrap().with_hooks(Arc::new(Polite));
    let session = MemorySession::new();
    let outcome = turn(&rt, &session, &Default::default(), "Shipping?").await;
    assert_eq!(outcome.messages, ["Shipping takes 3 days. Anything else?"]);
    let sent = session.events().into_iter().rev().find_map(|e| message_text(&e).map(str::to_string));
    assert_eq!(sent.as_deref(), Some("Shipping takes 3 days. Anything else?"));

    let rt = Arc::into_inner(runtime(inline(SHOP), model, Default::default())).unwrap().with_hooks(Arc::new(Silent));
    let session = MemorySession::new();
    let outcome = turn(&rt, &session, &Default::default(), "Shipping?").await;
    assert!(outcome.messages.is_empty());
    assert_eq!(outcome.status, TurnStatus::Completed);
    assert!(session.events().iter().any(|e| e.trace_id == "hook"), "hooks emit events");
    assert_eq!(status_of(session.events().last().unwrap()).map(|s| s.0), Some("ready".into()));
}

#[tokio::test]
async fn preambles_are_off_by_default_and_tagged_when_enabled() {
    let model = ScriptedModel::new()
        .when_task(TaskKind::Generation)
        .and(|r| prompt(r).contains("very short acknowledgement"))
        .reply_text("Let me check that for you.");
    let model = Arc::new(with_reply(with_matching(model, shop_oracle()), shop_reply));
    let session = MemorySession::new();
    turn(&runtime(inline(SHOP), model.clone(), Default::default()), &session, &Default::default(), "Refunds?").await;
    assert!(session.events().iter().all(|e| e.data.get("tags").is_none()), "no preamble unless enabled");

    let with_preamble =
        SHOP.replace("agent: {name: Otto}", "agent: {name: Otto, preamble: {enabled: true, examples: [On it!]}}");
    let session = MemorySession::new();
    let outcome =
        turn(&runtime(inline(&with_preamble), model, Default::default()), &session, &Default::default(), "Refunds?")
            .await;
    let messages: Vec<_> = session
        .events()
        .into_iter()
        .filter(|e| e.source == guidepost_core::EventSource::AiAgent && e.kind == EventKind::Message)
        .collect();
    assert_eq!(messages.len(), 2);
    assert_eq!(messages[0].data["message"], "Let me check that for you.");
    assert_eq!(messages[0].data["tags"], serde_json::json!(["__preamble__"]));
    assert_eq!(messages[1].data["message"], "You can return items within 30 days.");
    assert_eq!(outcome.messages, ["You can return items within 30 days."]);
}

/// A shop model that replies `first`, and `then` once the prompt carries `refusal`.
fn reasked(refusal: &'static str, first: &'static str, then: &'static str) -> Arc<ScriptedModel> {
    let reply = move |prompt: &str| if prompt.contains(refusal) { then } else { first }.to_string();
    Arc::new(with_reply(with_matching(ScriptedModel::new(), shop_oracle()), reply))
}

#[tokio::test]
async fn a_reply_that_opens_with_the_customers_request_goes_out_without_it_and_is_not_asked_for_again() {
    let written = "Hi! I want a refund for my lamp. Could you give me your order number, please?";
    let model = Arc::new(with_reply(with_matching(ScriptedModel::new(), shop_oracle()), move |_| written.into()));
    let rt = runtime(inline(SHOP), model.clone(), guidepost_tools::registry::ToolRegistry::new());
    let outcome = turn(&rt, &MemorySession::new(), &Default::default(), "Hi, I want a refund for my lamp.").await;
    assert_eq!(outcome.messages, ["Hi! Could you give me your order number, please?"]);
    assert_eq!(model.requests_for(&TaskKind::Generation).len(), 1, "no second call");
    let composition = &outcome.trace.composition;
    assert_eq!(composition.mended_from.as_deref(), Some(written));
    assert!(!composition.fallback);
    let refused: Vec<ReplyCheck> = composition.reply_checks.iter().flatten().map(|p| p.check).collect();
    assert_eq!(refused, [ReplyCheck::CustomerVoice], "the trace keeps what the checks found");
}

#[tokio::test]
async fn a_reply_that_only_repeats_the_customer_is_asked_for_once_more() {
    // The first answer parrots the customer; the re-ask carries the rejected reply.
    let model =
        reasked("it only repeats the customer's words", "OK. How long does shipping take?", "Shipping takes 3 days.");
    let rt = runtime(inline(SHOP), model.clone(), guidepost_tools::registry::ToolRegistry::new());
    let session = MemorySession::new();
    let outcome = turn(&rt, &session, &Default::default(), "How long does shipping take?").await;
    assert_eq!(outcome.messages, ["Shipping takes 3 days."]);
    let generation = model.requests_for(&TaskKind::Generation);
    assert_eq!(generation.len(), 2);
    // the re-ask is sampled (the same prompt at the same temperature gives the same reply)
    assert_eq!(generation[0].temperature, None);
    assert_eq!(generation[1].temperature, Some(0.7));

    // A reply the agent already sent word for word is asked for once more too.
    let model = reasked(
        "you already sent exactly this earlier",
        "Shipping takes 3 days.",
        "You can return items within 30 days.",
    );
    let rt = runtime(inline(SHOP), model.clone(), guidepost_tools::registry::ToolRegistry::new());
    let session = MemorySession::new();
    let first = turn(&rt, &session, &Default::default(), "How long does shipping take?").await;
    assert_eq!(first.messages, ["Shipping takes 3 days."]);
    let second = turn(&rt, &session, &first.state, "And refunds?").await;
    assert_eq!(second.messages, ["You can return items within 30 days."]);
    assert_eq!(model.requests_for(&TaskKind::Generation).len(), 3);

    // A reply that merely shares words with the customer is kept.
    let model = Arc::new(with_reply(with_matching(ScriptedModel::new(), shop_oracle()), shop_reply));
    let rt = runtime(inline(SHOP), model.clone(), guidepost_tools::registry::ToolRegistry::new());
    let outcome = turn(&rt, &MemorySession::new(), &Default::default(), "How long does shipping take?").await;
    assert_eq!(outcome.messages, ["Shipping takes 3 days."]);
    assert_eq!(model.requests_for(&TaskKind::Generation).len(), 1);
}

#[tokio::test]
async fn local_models_write_the_reply_without_a_draft_unless_asked_to() {
    let keys = |req: &guidepost_llm::ChatRequest| match &req.output {
        guidepost_llm::OutputFormat::Json { schema, .. } => {
            schema["properties"].as_object().unwrap().keys().cloned().collect::<Vec<_>>()
        }
        _ => Vec::new(),
    };
    // A small model is not asked which instructions its reply carried out.
    for (self_check, expected) in [(None, vec!["reply"]), (Some(true), vec!["draft", "problems", "reply"])] {
        let matching: Arc<ScriptedModel> = Arc::new(with_matching(ScriptedModel::new(), shop_oracle()));
        let generation = Arc::new(
            ScriptedModel::new()
                .with_capabilities(guidepost_llm::ModelCapabilities::small_constrained(None))
                .when_task(TaskKind::Generation)
                .and(|r| matches!(r.output, guidepost_llm::OutputFormat::Json { .. }))
                .reply_json(serde_json::json!({"draft": "Shipping takes 3 days.", "problems": [], "reply": "Shipping takes 3 days."}))
                .when_task(TaskKind::Generation)
                .reply_text("On it!"),
        );
        let models = guidepost_runtime::RuntimeModels {
            matching: matching.clone(),
            journey_selection: matching.clone(),
            tool_inference: matching,
            generation: generation.clone(),
            embedder: None,
        };
        let config = guidepost_runtime::RuntimeConfig { self_check, ..Default::default() };
        let rt = Arc::new(guidepost_runtime::AgentRuntime::new(
            Arc::new(inline(SHOP)),
            models,
            Arc::new(guidepost_tools::registry::ToolRegistry::new()),
            config,
        ));
        let outcome = turn(&rt, &MemorySession::new(), &Default::default(), "How long does shipping take?").await;
        assert_eq!(outcome.messages, ["Shipping takes 3 days."]);
        let compose: Vec<_> = generation
            .requests_for(&TaskKind::Generation)
            .into_iter()
            .filter(|r| matches!(r.output, guidepost_llm::OutputFormat::Json { .. }))
            .collect();
        assert_eq!(compose.len(), 1);
        assert_eq!(keys(&compose[0]), expected, "self_check {self_check:?}");
        assert_eq!(compose[0].system_text().contains("First write a draft"), self_check == Some(true));
    }
}

/// A session that also keeps every preview of the reply it was shown.
#[derive(Default)]
struct PreviewedSession {
    session: MemorySession,
    previews: std::sync::Mutex<Vec<String>>,
}

#[async_trait::async_trait]
impl guidepost_runtime::EventSink for PreviewedSession {
    async fn emit(
        &self,
        event: guidepost_runtime::NewEvent,
        visibility: guidepost_runtime::events::Visibility,
    ) -> Option<String> {
        self.session.emit(event, visibility).await
    }
    async fn update(&self, event_id: &str, event: guidepost_runtime::NewEvent) {
        self.session.update(event_id, event).await;
    }
    async fn preview(&self, _trace_id: &str, text: &str) {
        self.previews.lock().unwrap().push(text.to_string());
    }
    fn wants_preview(&self) -> bool {
        true
    }
}

#[tokio::test]
async fn a_block_reply_is_previewed_while_written_and_previewed_anew_when_refused() {
    let model =
        reasked("it only repeats the customer's words", "OK. How long does shipping take?", "Shipping takes 3 days.");
    let rt = runtime(inline(SHOP), model.clone(), guidepost_tools::registry::ToolRegistry::new());
    let sink = PreviewedSession::default();
    let input = sink.session.customer_turn(
        "s1",
        guidepost_runtime::CustomerRef { id: "guest".into(), tags: vec![] },
        "How long does shipping take?",
        &Default::default(),
    );
    let outcome = rt
        .process(input, &sink, tokio_util::sync::CancellationToken::new(), guidepost_runtime::EmittingLatch::default())
        .await;
    assert_eq!(outcome.messages, ["Shipping takes 3 days."]);
    let previews = sink.previews.lock().unwrap().clone();
    // The refused reply grows, is withdrawn (an empty preview), and the sent one grows.
    let restart = previews.iter().position(String::is_empty).expect("a restart");
    assert_eq!(previews[restart - 1], "OK. How long does shipping take?");
    assert_eq!(previews.last().unwrap(), "Shipping takes 3 days.");
    for pair in previews[..restart].windows(2).chain(previews[restart + 1..].windows(2)) {
        assert!(pair[1].starts_with(&pair[0]) && pair[1].len() > pair[0].len(), "{previews:?}");
    }
    assert!(previews.len() > 4, "written in pieces: {previews:?}");
    // The preview is not part of the session: only the checked reply is a message.
    let messages: Vec<String> =
        sink.session.events().iter().filter_map(guidepost_runtime::events::message_text).map(str::to_string).collect();
    assert_eq!(messages, ["How long does shipping take?", "Shipping takes 3 days."]);
}

#[tokio::test]
async fn a_streamed_reply_that_fails_its_schema_is_asked_for_whole_and_its_preview_withdrawn() {
    let reply = "Shipping takes 3 days.";
    let model = Arc::new(
        with_matching(ScriptedModel::new(), shop_oracle())
            .when_task(TaskKind::Generation)
            .times(1)
            .reply_text("{\"draft\": \"Shipping takes\", \"problems\": [], \"reply\": \"Shipping ta")
            .when_task(TaskKind::Generation)
            .reply_json(serde_json::json!({"draft": reply, "problems": [], "reply": reply})),
    );
    let rt = runtime(inline(SHOP), model.clone(), guidepost_tools::registry::ToolRegistry::new());
    let sink = PreviewedSession::default();
    let input = sink.session.customer_turn(
        "s1",
        guidepost_runtime::CustomerRef { id: "guest".into(), tags: vec![] },
        "How long does shipping take?",
        &Default::default(),
    );
    let outcome = rt
        .process(input, &sink, tokio_util::sync::CancellationToken::new(), guidepost_runtime::EmittingLatch::default())
        .await;
    assert_eq!(outcome.messages, [reply]);
    assert_eq!(model.requests_for(&TaskKind::Generation).len(), 2, "streamed once, then asked whole");
    let previews = sink.previews.lock().unwrap().clone();
    assert_eq!(previews.last().map(String::as_str), Some(""), "what was shown is withdrawn: {previews:?}");
}

/// The number a reply prompt gives the instruction containing `text`.
fn instruction_number(prompt: &str, text: &str) -> Option<u64> {
    let section = prompt.split("## Instructions\n").nth(1)?;
    section.lines().find(|l| l.contains(text)).and_then(|l| l.split_once(". ")).and_then(|(n, _)| n.parse().ok())
}

#[tokio::test]
async fn only_what_the_reply_carried_out_counts_as_applied() {
    let definition = inline(SHOP);
    // The reply answers about shipping and leaves the refund for later: it says so.
    let model =
        Arc::new(with_matching(ScriptedModel::new(), shop_oracle()).when_task(TaskKind::Generation).reply_with(|r| {
            let p = prompt(r);
            assert!(p.contains("\"followed\": [<the numbers, among "), "{p}");
            let schema = match &r.output {
                guidepost_llm::OutputFormat::Json { schema, .. } => schema.clone(),
                other => panic!("{other:?}"),
            };
            assert!(schema.pointer("/properties/followed").is_some(), "{schema}");
            // The first reply covers shipping alone; the second, the refund.
            let (reply, number) = match instruction_number(&p, "shipping takes 3 days") {
                Some(n) => ("Shipping takes 3 days. Anything else?", n),
                None => ("Refunds are accepted within 30 days.", instruction_number(&p, "30-day").unwrap()),
            };
            // A number outside the list is ignored.
            Ok(serde_json::json!({"draft": "", "problems": [], "reply": reply, "followed": [number, 9]}))
        }));
    let registry = fixtures(&definition);
    let rt = runtime(definition, model.clone(), registry);
    let session = MemorySession::new();
    let first = turn(&rt, &session, &Default::default(), "Two questions: refunds and shipping?").await;
    assert_eq!(first.trace.composition.followed.as_deref(), Some(&["shipping".to_string()][..]));
    assert_eq!(first.state.applied_guideline_ids, ["shipping"]);

    // Next turn, the refund is still new (asked as a condition again), shipping is asked as
    // a guideline already followed.
    let before = model.calls(&TaskKind::Matching);
    let second = turn(&rt, &session, &first.state, "And about refunds and shipping again?").await;
    let matching: Vec<String> = model.requests_for(&TaskKind::Matching).iter().map(prompt).collect();
    let later = &matching[before..];
    let reapply: Vec<&String> = later.iter().filter(|p| p.contains("## Guidelines already followed (")).collect();
    assert!(reapply.iter().any(|p| p.contains("Say that shipping takes 3 days")), "{later:#?}");
    assert!(reapply.iter().all(|p| !p.contains("30-day refund")), "{later:#?}");
    assert!(second.state.applied_guideline_ids.contains(&"refund".to_string()));
}

#[tokio::test]
async fn the_reply_prompt_read_ahead_is_how_the_first_reply_prompt_begins() {
    let matching: Arc<ScriptedModel> = Arc::new(with_matching(ScriptedModel::new(), shop_oracle()));
    let generation = Arc::new(
        ScriptedModel::new()
            .with_capabilities(guidepost_llm::ModelCapabilities::small_constrained(None))
            .when_task(TaskKind::Generation)
            .reply_json(serde_json::json!({"reply": "Shipping takes 3 days."})),
    );
    let models = guidepost_runtime::RuntimeModels {
        matching: matching.clone(),
        journey_selection: matching.clone(),
        tool_inference: matching.clone(),
        generation: generation.clone(),
        embedder: None,
    };
    let rt = Arc::new(guidepost_runtime::AgentRuntime::new(
        Arc::new(inline(SHOP)),
        models,
        Arc::new(guidepost_tools::registry::ToolRegistry::new()),
        guidepost_runtime::RuntimeConfig::default(),
    ));
    // The capable matching model is asked nothing ahead; the small reply model reads its prompt.
    assert_eq!(rt.read_ahead().await, 1);
    assert!(matching.read_ahead_requests().is_empty());
    let read = generation.read_ahead_requests();
    assert_eq!(read.len(), 1);
    assert!(generation.requests().is_empty(), "reading ahead asks nothing");

    let outcome = turn(&rt, &MemorySession::new(), &Default::default(), "How long does shipping take?").await;
    assert_eq!(outcome.messages, ["Shipping takes 3 days."]);
    let asked = generation.requests_for(&TaskKind::Generation).remove(0);
    let (ahead, now) = (read[0].system_text(), asked.system_text());
    let shared = ahead.chars().zip(now.chars()).take_while(|(a, b)| a == b).count();
    // Everything before the instructions the turn brings.
    let head = now.find("## Instructions").expect("the turn's instructions");
    assert!(shared >= head, "shared {shared} characters, the head is {head}:\n{ahead}\n---\n{now}");
}
