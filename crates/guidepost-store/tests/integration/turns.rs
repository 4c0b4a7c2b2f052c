use guidepost_core::{AgentState, EventKind, EventSource};
use guidepost_store::turns::{Claim, NewTurn, TurnEnd};
use guidepost_store::{NewEventRecord, Store, TurnState};
use serde_json::json;

use super::sessions::session;
use crate::store_test;

fn customer_message(trace: &str) -> NewEventRecord {
    NewEventRecord {
        source: EventSource::Customer,
        kind: EventKind::Message,
        trace_id: trace.into(),
        data: json!({"message": "hi"}),
        metadata: Default::default(),
    }
}

store_test!(a_turn_is_claimed_once_renewed_finished_and_leaves_its_state, |store: Store| async move {
    store.create_session(&session("s", "a", "guest")).await.unwrap();
    store.append_events("s", vec![customer_message("t1")], Some(NewTurn { id: "t1".into() })).await.unwrap();
    let turn = store.get_turn("t1").await.unwrap().unwrap();
    assert_eq!((turn.status, turn.trigger_offset), (TurnState::Pending, 0));
    assert_eq!(store.claimable_turns().await.unwrap().len(), 1);

    let (a, b) = tokio::join!(store.claim_turn("t1", "worker-a", 30_000), store.claim_turn("t1", "worker-b", 30_000));
    assert!(a.unwrap() ^ b.unwrap(), "exactly one worker claims the turn");
    assert!(store.claimable_turns().await.unwrap().is_empty());
    let owner = if store.renew_turn("t1", "worker-a", 30_000).await.unwrap() { "worker-a" } else { "worker-b" };
    assert!(store.renew_turn("t1", owner, 30_000).await.unwrap());

    assert_eq!(store.latest_agent_state("s").await.unwrap(), AgentState::default());
    let state = AgentState { trace_id: "t1".into(), applied_guideline_ids: vec!["greet".into()], ..Default::default() };
    store
        .finish_turn("t1", TurnState::Completed, Some(&state), Some(&json!({"matched": ["greet"]})), None)
        .await
        .unwrap();
    let done = store.get_turn("t1").await.unwrap().unwrap();
    assert_eq!((done.status, done.attempts), (TurnState::Completed, 1));
    assert_eq!(done.trace.unwrap()["matched"][0], "greet");
    assert_eq!(store.latest_agent_state("s").await.unwrap(), state);
    assert!(!store.renew_turn("t1", owner, 30_000).await.unwrap(), "a finished turn has no lease");
});

store_test!(an_expired_lease_lets_another_worker_take_the_turn, |store: Store| async move {
    store.create_session(&session("s", "a", "guest")).await.unwrap();
    store.append_events("s", vec![customer_message("t1")], Some(NewTurn { id: "t1".into() })).await.unwrap();
    assert!(store.claim_turn("t1", "dead", -1).await.unwrap());
    assert_eq!(store.claimable_turns().await.unwrap().len(), 1, "the lease already expired");
    assert!(store.claim_turn("t1", "alive", 30_000).await.unwrap());
    assert!(!store.renew_turn("t1", "dead", 30_000).await.unwrap(), "the first worker lost its lease");
    assert_eq!(store.get_turn("t1").await.unwrap().unwrap().attempts, 2);
});

store_test!(failed_and_cancelled_turns_leave_no_state, |store: Store| async move {
    store.create_session(&session("s", "a", "guest")).await.unwrap();
    store.append_events("s", vec![customer_message("t1")], Some(NewTurn { id: "t1".into() })).await.unwrap();
    store.finish_turn("t1", TurnState::Failed, None, None, Some("model down")).await.unwrap();
    assert_eq!(store.latest_agent_state("s").await.unwrap(), AgentState::default());
    assert_eq!(store.list_turns("s").await.unwrap()[0].error.as_deref(), Some("model down"));
});

store_test!(deleting_a_turns_message_takes_the_agent_back_to_the_state_before_it, |store: Store| async move {
    store.create_session(&session("s", "a", "guest")).await.unwrap();
    let state =
        |t: &str| AgentState { trace_id: t.into(), applied_guideline_ids: vec![t.into()], ..Default::default() };
    for t in ["t1", "t2"] {
        store.append_events("s", vec![customer_message(t)], Some(NewTurn { id: t.into() })).await.unwrap();
        store.finish_turn(t, TurnState::Completed, Some(&state(t)), None, None).await.unwrap();
    }
    assert_eq!(store.latest_agent_state("s").await.unwrap(), state("t2"));
    store.delete_events("s", 1).await.unwrap();
    assert_eq!(store.latest_agent_state("s").await.unwrap(), state("t1"));
});

store_test!(a_turn_handed_back_is_pending_again, |store: Store| async move {
    store.create_session(&session("s", "a", "guest")).await.unwrap();
    store.append_events("s", vec![customer_message("t1")], Some(NewTurn { id: "t1".into() })).await.unwrap();
    assert!(store.claim_turn("t1", "w", 30_000).await.unwrap());
    assert!(!store.hand_back_turn("t1", "someone else").await.unwrap());
    assert!(store.hand_back_turn("t1", "w").await.unwrap());
    assert_eq!(store.get_turn("t1").await.unwrap().unwrap().status, TurnState::Pending);
    assert_eq!(store.claimable_turns().await.unwrap().len(), 1);
});

store_test!(one_turn_at_a_time_per_session_and_only_its_holder_commits_it, |store: Store| async move {
    store.create_session(&session("s", "a", "guest")).await.unwrap();
    store.append_events("s", vec![customer_message("t1")], Some(NewTurn { id: "t1".into() })).await.unwrap();
    assert_eq!(store.try_claim_turn("t1", "w1", 30_000).await.unwrap(), Claim::Claimed);
    assert!(!store.turn_cancel_requested("t1").await.unwrap());
    store.append_events("s", vec![customer_message("t2")], Some(NewTurn { id: "t2".into() })).await.unwrap();
    assert!(store.turn_cancel_requested("t1").await.unwrap(), "a newer message asks the running turn to stop");
    assert!(store.newer_turn_exists("t1").await.unwrap());
    assert!(!store.newer_turn_exists("t2").await.unwrap());
    assert_eq!(store.try_claim_turn("t2", "w2", 30_000).await.unwrap(), Claim::Busy, "t1 holds the session");

    let reply = |t: &str| TurnEnd {
        status: Some(TurnState::Completed),
        events: vec![NewEventRecord {
            source: EventSource::AiAgent,
            kind: EventKind::Message,
            trace_id: t.into(),
            data: json!({"message": "done"}),
            metadata: Default::default(),
        }],
        state: Some(AgentState { trace_id: t.into(), ..Default::default() }),
        ..TurnEnd::default()
    };
    assert!(!store.commit_turn("t1", "not-the-holder", reply("t1")).await.unwrap(), "only the holder commits");
    assert_eq!(store.list_events("s", &Default::default()).await.unwrap().len(), 2, "a refused commit writes nothing");
    assert!(store.commit_turn("t1", "w1", reply("t1")).await.unwrap());
    assert!(!store.commit_turn("t1", "w1", reply("t1")).await.unwrap(), "a turn is committed once");
    let offsets: Vec<u64> =
        store.list_events("s", &Default::default()).await.unwrap().iter().map(|e| e.offset).collect();
    assert_eq!(offsets, [0, 1, 2]);

    assert_eq!(store.try_claim_turn("t2", "w2", 30_000).await.unwrap(), Claim::Claimed, "the session is free again");
    assert!(
        !store.close_pending_turn("t2", TurnEnd::default()).await.unwrap(),
        "a claimed turn is not closed as pending"
    );
    assert_eq!(store.try_claim_turn("missing", "w2", 30_000).await.unwrap(), Claim::Gone);
});

store_test!(concurrent_claims_on_one_session_let_one_turn_run, |store: Store| async move {
    store.create_session(&session("s", "a", "guest")).await.unwrap();
    for t in ["t1", "t2", "t3", "t4"] {
        store.append_events("s", vec![customer_message(t)], Some(NewTurn { id: t.into() })).await.unwrap();
    }
    let mut tasks = Vec::new();
    for (i, t) in ["t1", "t2", "t3", "t4"].iter().enumerate() {
        let store = store.clone();
        let t = t.to_string();
        tasks.push(tokio::spawn(async move { store.try_claim_turn(&t, &format!("w{i}"), 30_000).await.unwrap() }));
    }
    let mut claimed = 0;
    for task in tasks {
        if task.await.unwrap() == Claim::Claimed {
            claimed += 1;
        }
    }
    assert_eq!(claimed, 1, "exactly one turn of the session runs at a time");
});

store_test!(cancelling_a_sessions_turns_flags_the_unfinished_ones_and_wakes_its_watchers, |store: Store| async move {
    store.create_session(&session("s", "a", "guest")).await.unwrap();
    store.create_session(&session("other", "a", "guest")).await.unwrap();
    store.append_events("s", vec![customer_message("t1")], Some(NewTurn { id: "t1".into() })).await.unwrap();
    store.finish_turn("t1", TurnState::Completed, None, None, None).await.unwrap();
    store.append_events("s", vec![customer_message("t2")], Some(NewTurn { id: "t2".into() })).await.unwrap();
    assert!(store.claim_turn("t2", "w", 30_000).await.unwrap());
    store.append_events("other", vec![customer_message("t3")], Some(NewTurn { id: "t3".into() })).await.unwrap();
    let watching = store.hub().subscribe("s");
    assert!(!store.turn_cancel_requested("t2").await.unwrap());
    assert_eq!(store.cancel_turns("s").await.unwrap(), 1, "only the running turn is unfinished");
    assert!(watching.has_changed().unwrap(), "the session's watchers wake");
    assert!(store.turn_cancel_requested("t2").await.unwrap());
    assert!(!store.turn_cancel_requested("t3").await.unwrap(), "another session's turn runs on");
    assert_eq!(store.cancel_turns("nobody").await.unwrap(), 0);
});
