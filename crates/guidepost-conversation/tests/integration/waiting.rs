//! Waiting for what turns write: a wait wakes on the commit it waits for, answers at once
//! with no wait, times out when nothing comes, and ends at once when the service stops;
//! following a session yields its events in order.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use guidepost_conversation::{ConversationError, Post, is_whole};
use guidepost_core::EventKind;
use guidepost_core::payload::EventPayload;
use guidepost_store::EventFilter;
use serde_json::json;

use super::support::TestService;

fn custom(data: serde_json::Value) -> Post {
    Post::Client {
        source: guidepost_core::EventSource::CustomerUi,
        payload: Box::new(EventPayload::Custom(data)),
        metadata: Default::default(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_wakes_on_the_commit_it_waits_for_and_times_out_when_nothing_comes() {
    let service = Arc::new(TestService::start().await);
    let session = service.session("weather").await;
    let none = service.conversations.wait_for_events(&session, &EventFilter::default(), Duration::ZERO).await.unwrap();
    assert!(none.is_empty(), "no wait: an answer at once");
    let idle = service.conversations.wait_for_events(&session, &EventFilter::default(), Duration::from_secs(1)).await;
    assert!(matches!(idle, Err(ConversationError::Timeout)), "{idle:?}");

    let waiter = {
        let (service, session) = (service.clone(), session.clone());
        tokio::spawn(async move {
            let filter = EventFilter { kinds: vec![EventKind::Custom], ..EventFilter::default() };
            service.conversations.wait_for_events(&session, &filter, Duration::from_secs(60)).await
        })
    };
    // The waiter may subscribe before or after this commit: either way it sees the event.
    service.conversations.post(&session, custom(json!({"x": 1}))).await.unwrap();
    let woken = waiter.await.unwrap().unwrap();
    assert_eq!(woken.len(), 1);
    assert_eq!(woken[0].data, json!({"x": 1}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_wait_ends_when_the_service_stops() {
    let service = Arc::new(TestService::start().await);
    let session = service.session("weather").await;
    let waiter = {
        let (service, session) = (service.clone(), session.clone());
        tokio::spawn(async move {
            service.conversations.wait_for_events(&session, &EventFilter::default(), Duration::from_secs(3600)).await
        })
    };
    // Whether the wait began before the stop or after, it answers as on its timeout.
    service.conversations.shutdown(Duration::from_secs(10)).await;
    assert!(matches!(waiter.await.unwrap(), Err(ConversationError::Timeout)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn following_a_session_yields_its_turn_in_order_and_ends_when_idle() {
    let service = TestService::start().await;
    let session = service.session("taxi").await;
    let posted = service.say(&session, "I need a taxi").await;
    let events = service.until_ready(&session, &posted.trace_id).await;
    let followed: Vec<_> =
        service.conversations.follow_events(&session, EventFilter::default(), Duration::from_secs(1)).collect().await;
    let offsets: Vec<u64> = followed.iter().map(|e| e.offset).collect();
    assert_eq!(offsets, (0..offsets.len() as u64).collect::<Vec<_>>(), "dense offsets, in order");
    assert_eq!(followed, events, "the customer's message and every event of its turn");

    let reply = events.iter().find(|e| e.kind == EventKind::Message).unwrap();
    assert!(is_whole(reply), "a block reply is whole when it appears");
    let whole = service.conversations.wait_until_whole(&session, &reply.id, Duration::from_secs(1)).await.unwrap();
    assert_eq!(whole.id, reply.id);
    let updates: Vec<_> =
        service.conversations.follow_event(&session, &reply.id, Duration::from_secs(1)).collect().await;
    assert_eq!(updates.len(), 1, "a whole message is shown once");
    let missing = service.conversations.wait_until_whole(&session, "no-such-event", Duration::from_secs(1)).await;
    assert!(missing.unwrap_err().to_string().contains("no-such-event"));
}
