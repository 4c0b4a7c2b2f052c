//! What posting to a session stores and starts: a customer's message and its turn (none in
//! a session a human handles), the agent asked to take a turn or to say something now, a
//! human agent's message, and a client's own events, as the sessions API shows them.

use guidepost_conversation::{ConversationError, Post};
use guidepost_core::payload::{EventPayload, Participant, StatusDetail, StatusPayload};
use guidepost_core::session::{SessionMode, Status};
use guidepost_core::{EventKind, EventSource};
use guidepost_store::{StoreError, TurnState};
use serde_json::json;

use super::support::{TestService, replies};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_customer_message_is_stored_in_the_wire_shape_and_answered_once() {
    let service = TestService::start().await;
    let session = service.session("taxi").await;
    let posted = service.say(&session, "I need a taxi").await;
    assert_eq!((posted.source, posted.kind, posted.offset), (EventSource::Customer, EventKind::Message, 0));
    assert_eq!(
        posted.data.to_string(),
        r#"{"message":"I need a taxi","participant":{"id":"guest","display_name":"guest"},"flagged":false,"tags":[]}"#,
        "the store does not know this customer: the id stands for the name"
    );
    let events = service.until_ready(&session, &posted.trace_id).await;
    assert_eq!(replies(&events).len(), 1);
    let turn = service.store.get_turn(&posted.trace_id).await.unwrap().unwrap();
    assert_eq!((turn.status, turn.attempts), (TurnState::Completed, 1));
    assert_eq!(turn.trigger_offset, 0);

    let named = Post::CustomerMessage {
        text: "And back?".into(),
        participant: Some(Participant { id: None, display_name: "Ada".into() }),
        metadata: [("channel".to_string(), json!("web"))].into_iter().collect(),
    };
    let posted = service.conversations.post(&session, named).await.unwrap();
    assert_eq!(posted.data["participant"], json!({"id": "guest", "display_name": "Ada"}));
    assert_eq!(posted.metadata["channel"], "web");
    service.until_ready(&session, &posted.trace_id).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_takes_a_turn_when_asked_or_to_greet_and_says_what_an_operator_asks() {
    let service = TestService::start().await;
    let session = service.session("taxi").await;
    let trace = service.conversations.start_agent_turn(&session).await.unwrap();
    let greeting = service.until_ready(&session, &trace).await;
    assert_eq!(replies(&greeting).len(), 1, "the agent speaks first: {greeting:?}");

    let first = service.conversations.post(&session, Post::AgentTurn).await.unwrap();
    assert_eq!((first.source, first.kind), (EventSource::AiAgent, EventKind::Status));
    assert_eq!(StatusPayload::of(&first).map(|s| s.status), Some(Status::Acknowledged));
    service.until_ready(&session, &first.trace_id).await;

    let state_before = service.store.latest_agent_state(&session).await.unwrap();
    let said = Post::Utterance { instructions: vec!["Tell the customer a driver is on the way".into()] };
    let said = service.conversations.post(&session, said).await.unwrap();
    assert_eq!((said.source, said.kind), (EventSource::AiAgent, EventKind::Message));
    assert!(!said.data["message"].as_str().unwrap().is_empty());
    assert_eq!(said.data["participant"]["id"], "taxi");
    assert_eq!(service.store.latest_agent_state(&session).await.unwrap(), state_before, "an utterance moves no state");
    let utterance = service.store.list_events(&session, &Default::default()).await.unwrap();
    let of_utterance: Vec<_> = utterance.iter().filter(|e| e.trace_id == said.trace_id).collect();
    assert!(of_utterance.iter().filter_map(|e| StatusPayload::of(e)).any(|s| s.ends_turn()), "{of_utterance:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn human_agents_and_clients_post_events_that_start_nothing() {
    let service = TestService::start().await;
    let session = service.session("taxi").await;
    let human = Post::HumanAgentMessage {
        text: "Sam here.".into(),
        participant: Participant { id: None, display_name: "Sam".into() },
        metadata: Default::default(),
    };
    let human = service.conversations.post(&session, human).await.unwrap();
    assert_eq!(human.source, EventSource::HumanAgent);
    assert_eq!(human.data, json!({"message": "Sam here.", "participant": {"id": null, "display_name": "Sam"}}));
    let on_behalf = Post::OnBehalfOfAgent { text: "On my way.".into(), metadata: Default::default() };
    let on_behalf = service.conversations.post(&session, on_behalf).await.unwrap();
    assert_eq!(on_behalf.source, EventSource::HumanAgentOnBehalfOfAiAgent);
    assert_eq!(on_behalf.data["participant"]["id"], "taxi");
    assert!(!on_behalf.data["participant"]["display_name"].as_str().unwrap().is_empty());

    let given = json!({"zeta": 1, "alpha": {"nested": [true]}});
    let custom = Post::Client {
        source: EventSource::CustomerUi,
        payload: Box::new(EventPayload::Custom(given.clone())),
        metadata: Default::default(),
    };
    let custom = service.conversations.post(&session, custom).await.unwrap();
    assert_eq!((custom.kind, custom.data.to_string()), (EventKind::Custom, given.to_string()));
    let serde_json::Value::Object(other) = given.clone() else { unreachable!() };
    let status = Post::Client {
        source: EventSource::System,
        payload: Box::new(EventPayload::Status(StatusPayload {
            status: Status::Typing,
            data: StatusDetail { other, ..StatusDetail::default() },
        })),
        metadata: Default::default(),
    };
    let status = service.conversations.post(&session, status).await.unwrap();
    assert_eq!(status.data.to_string(), json!({"status": "typing", "data": given}).to_string(), "kept as given");
    assert!(service.store.list_turns(&session).await.unwrap().is_empty(), "none of these starts a turn");

    service
        .store
        .update_session(&session, |s| {
            s.mode = SessionMode::Manual;
            Ok(())
        })
        .await
        .unwrap();
    service.say(&session, "Are you there?").await;
    assert!(service.store.list_turns(&session).await.unwrap().is_empty(), "a human handles this session");

    let missing = service.conversations.post("no-such-session", Post::AgentTurn).await.unwrap_err();
    assert!(matches!(missing, ConversationError::Store(StoreError::NotFound { kind: "session", .. })), "{missing:?}");
}
