//! The turn lifecycle, without HTTP: what a newer message or a cancellation does to a turn
//! still preparing, a turn left by a process that died, shutdown's hand-back, the turn
//! timeout, and what a degraded turn commits, without the deployment's secrets.

use std::time::Duration;

use guidepost_conversation::{ConversationSettings, TurnSettings};
use guidepost_core::payload::StatusPayload;
use guidepost_core::{EventKind, EventSource};
use guidepost_store::turns::NewTurn;
use guidepost_store::{NewEventRecord, Store, TurnState};
use serde_json::json;

use super::support::{Gate, TestService, example, fake_model, models, replies, statuses};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_message_replaces_a_turn_still_preparing_and_one_reply_answers_both() {
    let gate = Gate::default();
    let fake = fake_model(Duration::ZERO).await;
    let service =
        TestService::start_with(Store::ephemeral().await.unwrap(), gate.guard(models(&fake)), Default::default()).await;
    let session = service.session("taxi").await;
    gate.close();
    let first = service.say(&session, "I need a taxi").await;
    gate.entered.notified().await;
    gate.open();
    let second = service.say(&session, "from 12 Main Street to the airport").await;
    let second_events = service.until_ready(&session, &second.trace_id).await;
    let first_events = service.until_ready(&session, &first.trace_id).await;
    assert!(statuses(&first_events).contains(&"cancelled".to_string()), "{first_events:?}");
    assert!(replies(&first_events).is_empty());
    assert_eq!(replies(&second_events).len(), 1, "one reply for both messages");
    let turns = service.store.list_turns(&session).await.unwrap();
    let states: Vec<TurnState> = turns.iter().map(|t| t.status).collect();
    assert_eq!(states, [TurnState::Cancelled, TurnState::Completed]);
    service.conversations.shutdown(Duration::from_secs(10)).await;
    assert_eq!(*service.recorded.ended.lock().unwrap(), [TurnState::Cancelled, TurnState::Completed]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_stops_a_turn_still_preparing_and_the_next_message_is_answered() {
    let gate = Gate::default();
    let fake = fake_model(Duration::ZERO).await;
    let service =
        TestService::start_with(Store::ephemeral().await.unwrap(), gate.guard(models(&fake)), Default::default()).await;
    let session = service.session("taxi").await;
    gate.close();
    let posted = service.say(&session, "I need a taxi").await;
    gate.entered.notified().await;
    assert_eq!(service.conversations.cancel(&session).await.unwrap(), 1);
    let events = service.until_ready(&session, &posted.trace_id).await;
    let statuses = statuses(&events);
    assert_eq!(
        statuses.iter().rev().take(2).rev().collect::<Vec<_>>(),
        ["cancelled", "ready:completed"],
        "{statuses:?}"
    );
    assert!(replies(&events).is_empty());
    assert_eq!(service.store.get_turn(&posted.trace_id).await.unwrap().unwrap().status, TurnState::Cancelled);
    // Nothing left to cancel; the session answers its next message.
    assert_eq!(service.conversations.cancel(&session).await.unwrap(), 0);
    gate.open();
    let next = service.turn(&session, "I need a taxi to the airport").await;
    assert_eq!(replies(&next).len(), 1);
    let unknown = service.conversations.cancel("no-such-session").await.unwrap_err();
    assert!(unknown.to_string().contains("no-such-session"), "{unknown}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_left_by_a_process_that_died_runs_when_the_next_one_starts() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("guidepost.db");
    let store = Store::open_sqlite_file(&path).await.unwrap();
    store.import_definition(&example("taxi")).await.unwrap();
    let session = guidepost_core::Session {
        id: "s1".into(),
        agent_id: "taxi".into(),
        customer_id: "guest".into(),
        creation_utc: chrono::Utc::now(),
        title: None,
        mode: Default::default(),
        consumption_offsets: Default::default(),
        metadata: Default::default(),
        labels: vec![],
    };
    store.create_session(&session).await.unwrap();
    let message = NewEventRecord {
        source: EventSource::Customer,
        kind: EventKind::Message,
        trace_id: "t1".into(),
        data: json!({"message": "I need a taxi", "participant": {"display_name": "Guest"}}),
        metadata: Default::default(),
    };
    store.append_events("s1", vec![message], Some(NewTurn { id: "t1".into() })).await.unwrap();
    // A worker that died mid-turn: claimed, lease already expired.
    assert!(store.claim_turn("t1", "dead-worker", -1).await.unwrap());
    store.close().await;

    let fake = fake_model(Duration::ZERO).await;
    let store = Store::open_sqlite_file(&path).await.unwrap();
    let service = TestService::start_with(store, models(&fake), Default::default()).await;
    let events = service.until_ready("s1", "t1").await;
    assert_eq!(replies(&events).len(), 1, "the resumed turn replied once: {events:?}");
    let turn = service.store.get_turn("t1").await.unwrap().unwrap();
    assert_eq!((turn.status, turn.attempts), (TurnState::Completed, 2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_hands_back_a_turn_still_preparing_and_the_next_process_answers_it_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("guidepost.db");
    let gate = Gate::default();
    let fake = fake_model(Duration::ZERO).await;
    let first = TestService::start_with(
        Store::open_sqlite_file(&path).await.unwrap(),
        gate.guard(models(&fake)),
        Default::default(),
    )
    .await;
    let session = first.session("taxi").await;
    gate.close();
    let posted = first.say(&session, "I need a taxi").await;
    gate.entered.notified().await;
    first.conversations.shutdown(Duration::from_secs(10)).await;
    let handed_back = first.store.get_turn(&posted.trace_id).await.unwrap().unwrap();
    assert_eq!((handed_back.status, handed_back.attempts), (TurnState::Pending, 1));
    let shown = statuses(&first.store.list_events(&session, &Default::default()).await.unwrap());
    assert_eq!(shown, ["acknowledged", "processing:Interpreting"], "progress only: nothing decided was written");
    assert!(first.recorded.ended.lock().unwrap().is_empty(), "a handed-back turn did not end");
    first.store.close().await;

    gate.open();
    let second =
        TestService::start_with(Store::open_sqlite_file(&path).await.unwrap(), models(&fake), Default::default()).await;
    let events = second.until_ready(&session, &posted.trace_id).await;
    assert_eq!(replies(&events).len(), 1, "{events:?}");
    let shown = statuses(&events);
    assert_eq!(shown.iter().filter(|s| *s == "acknowledged").count(), 1, "progress is not shown twice: {shown:?}");
    assert_eq!(shown.iter().filter(|s| *s == "processing:Interpreting").count(), 1, "{shown:?}");
    let turn = second.store.get_turn(&posted.trace_id).await.unwrap().unwrap();
    assert_eq!((turn.status, turn.attempts), (TurnState::Completed, 2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_that_prepares_past_the_timeout_fails_with_an_error_status() {
    let gate = Gate::default();
    let fake = fake_model(Duration::ZERO).await;
    let settings = ConversationSettings {
        turns: TurnSettings { turn_timeout: Duration::from_millis(200), ..TurnSettings::default() },
        ..ConversationSettings::default()
    };
    let service = TestService::start_with(Store::ephemeral().await.unwrap(), gate.guard(models(&fake)), settings).await;
    let session = service.session("taxi").await;
    gate.close();
    let posted = service.say(&session, "I need a taxi").await;
    let events = service.until_ready(&session, &posted.trace_id).await;
    let error = events
        .iter()
        .filter_map(StatusPayload::of)
        .find_map(|s| s.data.exception)
        .unwrap_or_else(|| panic!("an error status: {events:?}"));
    assert!(error.contains("took longer than"), "{error}");
    let turn = service.store.get_turn(&posted.trace_id).await.unwrap().unwrap();
    assert_eq!(turn.status, TurnState::Failed);
    assert!(turn.error.unwrap().contains("took longer than"));
}

/// A secret the deployment knows, not shaped like a key: only the service's redactor can
/// find it.
const PLANTED: &str = "gp-PLANTEDservicekey-4d8e1b6a0c";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_after_a_lost_matching_call_is_degraded_and_commits_no_secret() {
    use guidepost_testkit::models::{Held, Hold};
    let fake = fake_model(Duration::ZERO).await;
    let mut models = models(&fake);
    // Loses the first matching call of each customer turn, with a provider error that
    // echoes a key the deployment knows.
    let failed = std::sync::Mutex::new(std::collections::HashSet::new());
    models.matching = std::sync::Arc::new(Held::new(models.matching.clone(), move |req| {
        let conversation = req.messages.iter().map(|m| m.content.as_str()).collect::<Vec<_>>().join("\n");
        let turn = conversation.rsplit("customer: ").next().unwrap_or("").to_string();
        if req.task == guidepost_llm::TaskKind::Matching && failed.lock().unwrap().insert(turn) {
            Hold::Fail(guidepost_llm::LlmError::Http {
                status: 401,
                body: format!("Incorrect API key provided: {PLANTED}"),
                retry_after: None,
            })
        } else {
            Hold::Pass
        }
    }));
    let settings = ConversationSettings { secrets: vec![PLANTED.to_string()], ..ConversationSettings::default() };
    let service = TestService::start_with(Store::ephemeral().await.unwrap(), models, settings).await;
    let session = service.session("taxi").await;
    let events = service.turn(&session, "I need a taxi to the airport at 5pm").await;
    let everything = serde_json::to_string(&events).unwrap();
    assert!(!everything.contains("PLANTEDservicekey"), "the key leaked: {everything}");
    assert_eq!(replies(&events).len(), 1, "the reply went out: {everything}");
    let ready = events.iter().filter_map(StatusPayload::of).find(StatusPayload::ends_turn).unwrap();
    let degraded = ready.data.degraded.unwrap();
    assert_eq!(degraded[0]["stage"], "matching", "{everything}");
    assert_eq!(degraded[0]["failed"], 1, "{everything}");
    assert!(degraded[0]["attempted"].as_u64().unwrap() > 1, "{everything}");
    let message = events.iter().find(|e| e.kind == EventKind::Message && e.source == EventSource::AiAgent).unwrap();
    assert_eq!(message.data["degraded"][0]["stage"], "matching", "{message:?}");
    let turn = service.store.get_turn(&events[0].trace_id).await.unwrap().unwrap();
    let trace = turn.trace.unwrap().to_string();
    assert!(!trace.contains("PLANTEDservicekey"), "the trace keeps no key: {trace}");
    assert!(trace.contains("Incorrect API key provided: ***"), "the trace keeps the error, the key masked: {trace}");
}
