use guidepost_core::{EventKind, EventSource};
use guidepost_store::tool_calls::{NewToolCall, Sending, ToolCallState};
use guidepost_store::turns::{Claim, NewTurn};
use guidepost_store::{NewEventRecord, Store};
use serde_json::json;

use super::sessions::session;
use crate::store_test;

fn customer_message(trace: &str) -> NewEventRecord {
    NewEventRecord {
        source: EventSource::Customer,
        kind: EventKind::Message,
        trace_id: trace.into(),
        data: json!({"message": "book it"}),
        metadata: Default::default(),
    }
}

fn booking(turn: &str) -> NewToolCall {
    NewToolCall {
        id: format!("{turn}-call"),
        turn_id: turn.into(),
        tool: "bookings:book_taxi".into(),
        occurrence: 0,
        arguments: json!({"pickup": "12 Main Street"}),
        consequential: true,
    }
}

store_test!(a_call_is_recorded_by_the_turns_holder_before_it_is_sent_and_ends_once, |store: Store| async move {
    store.create_session(&session("s", "a", "guest")).await.unwrap();
    store.append_events("s", vec![customer_message("t1")], Some(NewTurn { id: "t1".into() })).await.unwrap();
    let call = booking("t1");
    assert_eq!(
        store.record_tool_call_sent(&call, "w1").await.unwrap(),
        Sending::NotHolder,
        "nobody holds the turn yet"
    );
    assert!(store.tool_calls_of_turn("t1").await.unwrap().is_empty());
    assert!(store.claim_turn("t1", "w1", 30_000).await.unwrap());
    assert_eq!(store.record_tool_call_sent(&call, "w2").await.unwrap(), Sending::NotHolder, "only the holder records");
    assert_eq!(store.record_tool_call_sent(&call, "w1").await.unwrap(), Sending::Recorded);
    assert!(store.turn_has_acted("t1").await.unwrap());
    let recorded = store.tool_calls_of_turn("t1").await.unwrap();
    assert_eq!(recorded.len(), 1);
    assert_eq!((recorded[0].state, recorded[0].sends, recorded[0].outcome.clone()), (ToolCallState::Started, 1, None));
    assert_eq!(recorded[0].arguments, json!({"pickup": "12 Main Street"}));
    // Sent again (a service that recognizes repeats by the key): counted, not duplicated.
    assert_eq!(store.record_tool_call_sent(&call, "w1").await.unwrap(), Sending::Recorded);
    assert_eq!(store.tool_calls_of_turn("t1").await.unwrap()[0].sends, 2);

    let outcome = json!({"ok": {"data": {"booking": 7}}});
    assert!(store.record_tool_call_end(&call.id, ToolCallState::Returned, Some(&outcome)).await.unwrap());
    assert!(
        !store
            .record_tool_call_end(&call.id, ToolCallState::Returned, Some(&json!({"ok": {"data": 8}})))
            .await
            .unwrap(),
        "the first outcome stands"
    );
    assert!(!store.record_tool_call_end(&call.id, ToolCallState::Unconfirmed, None).await.unwrap());
    let Sending::Settled(settled) = store.record_tool_call_sent(&call, "w1").await.unwrap() else {
        panic!("a call with an outcome is not sent again")
    };
    assert_eq!((settled.state, settled.outcome), (ToolCallState::Returned, Some(outcome)));
});

store_test!(
    a_replica_that_takes_the_turn_over_sees_the_calls_and_the_old_holder_records_no_more,
    |store: Store| async move {
        store.create_session(&session("s", "a", "guest")).await.unwrap();
        store.append_events("s", vec![customer_message("t1")], Some(NewTurn { id: "t1".into() })).await.unwrap();
        // The first holder's lease already ran out when it recorded its call.
        assert!(store.claim_turn("t1", "stalled", 30_000).await.unwrap());
        assert_eq!(store.record_tool_call_sent(&booking("t1"), "stalled").await.unwrap(), Sending::Recorded);
        sqlx::query("UPDATE turns SET lease_until_us = 0 WHERE id = 't1'").execute(store.pool()).await.unwrap();
        assert!(store.claim_turn("t1", "replica", 30_000).await.unwrap());
        let seen = store.tool_calls_of_turn("t1").await.unwrap();
        assert_eq!(seen.len(), 1, "the new holder finds the call");
        let later = NewToolCall { id: "t1-second".into(), occurrence: 1, ..booking("t1") };
        assert_eq!(store.record_tool_call_sent(&later, "stalled").await.unwrap(), Sending::NotHolder);
        // The new holder cannot tell whether it went through: unconfirmed. The old holder's
        // answer, arriving after all, replaces that.
        assert!(store.record_tool_call_end(&seen[0].id, ToolCallState::Unconfirmed, None).await.unwrap());
        assert_eq!(store.tool_calls_in_state(ToolCallState::Unconfirmed, 10).await.unwrap().len(), 1);
        let outcome = json!({"ok": {"data": {"booking": 7}}});
        assert!(store.record_tool_call_end(&seen[0].id, ToolCallState::Returned, Some(&outcome)).await.unwrap());
        assert!(store.tool_calls_in_state(ToolCallState::Unconfirmed, 10).await.unwrap().is_empty());
    }
);

store_test!(a_newer_turn_waits_for_an_older_one_that_acted, |store: Store| async move {
    store.create_session(&session("s", "a", "guest")).await.unwrap();
    store.append_events("s", vec![customer_message("t1")], Some(NewTurn { id: "t1".into() })).await.unwrap();
    assert!(store.claim_turn("t1", "dead", 30_000).await.unwrap());
    assert_eq!(store.record_tool_call_sent(&booking("t1"), "dead").await.unwrap(), Sending::Recorded);
    sqlx::query("UPDATE turns SET lease_until_us = 0 WHERE id = 't1'").execute(store.pool()).await.unwrap();
    store.append_events("s", vec![customer_message("t2")], Some(NewTurn { id: "t2".into() })).await.unwrap();
    assert_eq!(
        store.try_claim_turn("t2", "w", 30_000).await.unwrap(),
        Claim::Busy,
        "the booking of t1 must reach the customer before t2 answers"
    );
    assert_eq!(store.try_claim_turn("t1", "w", 30_000).await.unwrap(), Claim::Claimed);
    assert!(store.commit_turn("t1", "w", Default::default()).await.unwrap());
    assert_eq!(store.try_claim_turn("t2", "w", 30_000).await.unwrap(), Claim::Claimed);
});
