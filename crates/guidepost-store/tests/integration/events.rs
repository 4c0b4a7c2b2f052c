use std::time::Duration;

use guidepost_core::{EventKind, EventSource};
use guidepost_store::{EventFilter, NewEventRecord, Store, StoreError};
use serde_json::json;

use super::sessions::session;
use crate::store_test;

fn message(trace: &str, text: &str) -> NewEventRecord {
    NewEventRecord {
        source: EventSource::Customer,
        kind: EventKind::Message,
        trace_id: trace.into(),
        data: json!({"message": text, "participant": {"display_name": "Customer"}}),
        metadata: Default::default(),
    }
}

/// `count` customer messages (trace `small`), except those `big` picks: system events of
/// trace `big` whose data carries `pad`.
fn mixed(count: usize, big: impl Fn(usize) -> bool, pad: &str) -> Vec<NewEventRecord> {
    (0..count)
        .map(|n| {
            if big(n) {
                NewEventRecord {
                    source: EventSource::System,
                    kind: EventKind::Custom,
                    trace_id: "big".into(),
                    data: json!({"n": n, "pad": pad}),
                    metadata: Default::default(),
                }
            } else {
                message("small", &format!("m{n}"))
            }
        })
        .collect()
}

store_test!(offsets_stay_dense_and_unique_under_concurrent_appends, |store: Store| async move {
    store.create_session(&session("s", "a", "guest")).await.unwrap();
    let mut tasks = Vec::new();
    for i in 0..40 {
        let store = store.clone();
        tasks
            .push(tokio::spawn(async move { store.append_event("s", message(&format!("t{i}"), "hi")).await.unwrap() }));
    }
    let mut offsets = Vec::new();
    for t in tasks {
        offsets.push(t.await.unwrap().offset);
    }
    offsets.sort_unstable();
    assert_eq!(offsets, (0..40).collect::<Vec<u64>>());
    let listed = store.list_events("s", &EventFilter::default()).await.unwrap();
    assert_eq!(listed.iter().map(|e| e.offset).collect::<Vec<_>>(), (0..40).collect::<Vec<u64>>());
});

store_test!(the_database_refuses_a_duplicate_offset, |store: Store| async move {
    store.create_session(&session("s", "a", "guest")).await.unwrap();
    store.append_event("s", message("t", "hi")).await.unwrap();
    let duplicate = sqlx::query(
        "INSERT INTO events (id, session_id, \"offset\", source, kind, created_us, trace_id, data, metadata, deleted) \
         VALUES ('other', 's', 0, 'customer', 'message', 0, 't', '{}', '{}', 0)",
    )
    .execute(store.pool())
    .await;
    assert!(duplicate.is_err(), "a second event at offset 0 must be refused");
});

store_test!(appending_to_an_unknown_session_is_not_found, |store: Store| async move {
    let result = store.append_event("missing", message("t", "hi")).await;
    assert!(matches!(result, Err(StoreError::NotFound { kind: "session", .. })), "{result:?}");
    let with_turn =
        store.append_events("missing", vec![], Some(guidepost_store::turns::NewTurn { id: "t".into() })).await;
    assert!(matches!(with_turn, Err(StoreError::NotFound { kind: "session", .. })), "{with_turn:?}");
    // The failed appends left nothing open: what comes next is committed and seen by readers.
    store.create_session(&session("s", "a", "guest")).await.unwrap();
    store.append_event("s", message("t", "hi")).await.unwrap();
    let seen = store.list_events("s", &EventFilter::default()).await.unwrap();
    assert_eq!(seen.iter().map(|e| e.offset).collect::<Vec<_>>(), vec![0]);
    assert_eq!(store.events_page("s", &EventFilter::default(), 10, 1000).await.unwrap().events.len(), 1);
});

store_test!(filters_soft_deletion_updates_and_wakeups, |store: Store| async move {
    store.create_session(&session("s", "a", "guest")).await.unwrap();
    let first = store.append_event("s", message("t1", "one")).await.unwrap();
    let status = NewEventRecord {
        source: EventSource::AiAgent,
        kind: EventKind::Status,
        trace_id: "t1".into(),
        data: json!({"status": "ready", "data": {}}),
        metadata: Default::default(),
    };
    store.append_events("s", vec![status, message("t2", "two")], None).await.unwrap();

    let only_status = EventFilter { kinds: vec![EventKind::Status], ..Default::default() };
    assert_eq!(store.list_events("s", &only_status).await.unwrap().len(), 1);
    let from_customer = EventFilter { source: Some(EventSource::Customer), ..Default::default() };
    assert_eq!(store.list_events("s", &from_customer).await.unwrap().len(), 2);
    let of_t1 = EventFilter { trace_id: Some("t1".into()), ..Default::default() };
    assert_eq!(store.list_events("s", &of_t1).await.unwrap().len(), 2);
    let from_2 = EventFilter { min_offset: 2, ..Default::default() };
    assert_eq!(store.list_events("s", &from_2).await.unwrap()[0].offset, 2);

    let mut woken = store.hub().subscribe("s");
    let waiter =
        tokio::spawn(async move { tokio::time::timeout(Duration::from_secs(120), woken.changed()).await.is_ok() });
    tokio::time::sleep(Duration::from_millis(50)).await;
    store.update_event_data("s", &first.id, &json!({"message": "one, edited"})).await.unwrap();
    assert!(waiter.await.unwrap(), "a waiter wakes when an event changes");
    let read = store.get_event("s", &first.id).await.unwrap().unwrap();
    assert_eq!(read.data["message"], "one, edited");

    let with_meta = store
        .update_event_metadata("s", &first.id, |m| {
            m.insert("seen".into(), json!(true));
        })
        .await
        .unwrap();
    assert_eq!(with_meta.metadata["seen"], json!(true));

    // Offsets 0 and 1 are trace t1, offset 2 is t2: deleting from 2 on deletes t2.
    assert_eq!(store.delete_events("s", 2).await.unwrap(), 1);
    assert_eq!(store.list_events("s", &EventFilter::default()).await.unwrap().len(), 2);
    let all = EventFilter { include_deleted: true, ..Default::default() };
    assert_eq!(store.list_events("s", &all).await.unwrap().len(), 3);
    let deleted = store.list_events("s", &all).await.unwrap().pop().unwrap();
    assert!(store.get_event("s", &deleted.id).await.unwrap().unwrap().deleted);
    let next = store.append_event("s", message("t3", "three")).await.unwrap();
    assert_eq!(next.offset, 3, "offsets of deleted events are never reused");
    assert!(matches!(store.update_event_data("s", "nope", &json!({})).await, Err(StoreError::NotFound { .. })));
});

store_test!(pages_are_bounded_by_count_and_by_bytes_and_chain_to_the_end, |store: Store| async move {
    store.create_session(&session("s", "a", "guest")).await.unwrap();
    // 600 events (more than one scan of the table), every third from the system and large.
    let events = mixed(600, |n| n % 3 == 0, &"p".repeat(1000));
    store.append_events("s", events, None).await.unwrap();

    // By count: pages of 70 chain through all 600, in order.
    let mut filter = EventFilter::default();
    let mut seen = Vec::new();
    loop {
        let page = store.events_page("s", &filter, 70, usize::MAX).await.unwrap();
        assert!(page.events.len() <= 70);
        seen.extend(page.events.iter().map(|e| e.offset));
        match page.next_offset {
            Some(next) => filter.min_offset = next,
            None => break,
        }
    }
    assert_eq!(seen, (0..600).collect::<Vec<u64>>());

    // By bytes: a page ends once 5,000 bytes of data were read, and the first event always comes.
    let big = EventFilter { source: Some(EventSource::System), ..Default::default() };
    let page = store.events_page("s", &big, 1000, 5000).await.unwrap();
    assert_eq!(page.events.len(), 5, "five events of about 1 KB each reach 5,000 bytes");
    assert!(page.events.iter().all(|e| e.source == EventSource::System));
    assert_eq!(page.next_offset, Some(13), "the next page starts after the last event read");
    let one = store.events_page("s", &big, 1000, 1).await.unwrap();
    assert_eq!(one.events.len(), 1);

    // Filters apply before the page is counted.
    let small = EventFilter { trace_id: Some("small".into()), min_offset: 590, ..Default::default() };
    let page = store.events_page("s", &small, 100, usize::MAX).await.unwrap();
    assert_eq!(page.events.iter().map(|e| e.offset).collect::<Vec<_>>(), vec![590, 592, 593, 595, 596, 598, 599]);
    assert_eq!(page.next_offset, None);
    let limited = EventFilter { limit: Some(3), ..Default::default() };
    assert_eq!(store.list_events("s", &limited).await.unwrap().len(), 3);
});

store_test!(a_whole_session_is_read_whole_however_many_events_it_holds, |store: Store| async move {
    store.create_session(&session("s", "a", "guest")).await.unwrap();
    // More events than a page read on the calling thread holds (1,000), and more bytes (4 MiB)
    // in the large ones, so a whole read must go on past both.
    let events = mixed(1300, |n| n % 100 == 7, &"é".repeat(400_000));
    store.append_events("s", events, None).await.unwrap();
    let all = store.list_events("s", &EventFilter::default()).await.unwrap();
    assert_eq!(all.iter().map(|e| e.offset).collect::<Vec<_>>(), (0..1300).collect::<Vec<u64>>());
    let page = store.events_page("s", &EventFilter::default(), usize::MAX, usize::MAX).await.unwrap();
    assert_eq!((page.events.len(), page.next_offset), (1300, None));
    // The big ones alone: 13 events of 400,000 characters, over 4 MiB, all read.
    let big = EventFilter { trace_id: Some("big".into()), ..Default::default() };
    let read = store.list_events("s", &big).await.unwrap();
    assert_eq!(read.iter().map(|e| e.offset).collect::<Vec<_>>(), (0..13).map(|k| k * 100 + 7).collect::<Vec<u64>>());
    // A filter that keeps few of them is answered whole too, from any offset.
    let late = EventFilter { trace_id: Some("small".into()), min_offset: 1290, ..Default::default() };
    let read = store.list_events("s", &late).await.unwrap();
    assert_eq!(read.iter().map(|e| e.offset).collect::<Vec<_>>(), (1290..1300).collect::<Vec<u64>>());
    // A bound above a direct page's still cuts where it says.
    let page = store.events_page("s", &EventFilter::default(), 1100, usize::MAX).await.unwrap();
    assert_eq!((page.events.len(), page.next_offset), (1100, Some(1100)));
});

store_test!(deleting_a_session_deletes_its_events, |store: Store| async move {
    store.create_session(&session("s", "a", "guest")).await.unwrap();
    store.append_event("s", message("t", "hi")).await.unwrap();
    store.delete_session("s").await.unwrap();
    let left: i64 = sqlx::Row::try_get(
        &sqlx::query("SELECT COUNT(*) AS n FROM events WHERE session_id = 's'").fetch_one(store.pool()).await.unwrap(),
        "n",
    )
    .unwrap();
    assert_eq!(left, 0);
});

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_process_on_postgres_wakes_on_the_events_this_one_commits() {
    let Some(db) = crate::integration::support::postgres().await else { return };
    let other = Store::open_with(&db.url, 2).await.unwrap();
    db.store.create_session(&session("s", "a", "guest")).await.unwrap();
    let mut woken = other.hub().subscribe("s");
    let waiter =
        tokio::spawn(async move { tokio::time::timeout(Duration::from_secs(120), woken.changed()).await.is_ok() });
    tokio::time::sleep(Duration::from_millis(200)).await;
    db.store.append_event("s", message("t", "hi")).await.unwrap();
    assert!(waiter.await.unwrap(), "the other store's waiter woke through LISTEN/NOTIFY");
    assert_eq!(other.list_events("s", &EventFilter::default()).await.unwrap().len(), 1);
    other.close().await;
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_in_progress_on_a_sqlite_file_holds_up_neither_writes_nor_other_reads() {
    // A listing that takes its time holds a read transaction (a snapshot) on a connection.
    // On a SQLite file it reads on a connection of its own: the writer and other readers go on.
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_sqlite_file(&dir.path().join("g.db")).await.unwrap();
    store.create_session(&session("s", "a", "guest")).await.unwrap();
    store.append_event("s", message("t0", "before")).await.unwrap();
    let mut slow = store.read_pool().acquire().await.unwrap();
    sqlx::query("BEGIN").execute(&mut *slow).await.unwrap();
    let seen: i64 =
        sqlx::Row::get(&sqlx::query("SELECT COUNT(*) AS n FROM events").fetch_one(&mut *slow).await.unwrap(), "n");
    assert_eq!(seen, 1);
    let guard = Duration::from_secs(20);
    let written = tokio::time::timeout(guard, store.append_event("s", message("t1", "during"))).await;
    assert!(matches!(written, Ok(Ok(_))), "the write went on beside the read: {written:?}");
    let listed = tokio::time::timeout(guard, store.list_events("s", &EventFilter::default())).await.unwrap().unwrap();
    assert_eq!(listed.len(), 2, "another read sees the new commit");
    // The slow read keeps its snapshot.
    let still: i64 =
        sqlx::Row::get(&sqlx::query("SELECT COUNT(*) AS n FROM events").fetch_one(&mut *slow).await.unwrap(), "n");
    assert_eq!(still, 1);
    sqlx::query("COMMIT").execute(&mut *slow).await.unwrap();
}

store_test!(deleting_from_the_middle_of_a_turn_deletes_nothing, |store: Store| async move {
    store.create_session(&session("s", "a", "guest")).await.unwrap();
    let status = |trace: &str| NewEventRecord {
        source: EventSource::AiAgent,
        kind: EventKind::Status,
        trace_id: trace.into(),
        data: json!({"status": "ready", "data": {}}),
        metadata: Default::default(),
    };
    // t1 at 0-1, t2 at 2-4, a custom event of its own trace at 5.
    store.append_events("s", vec![message("t1", "one"), status("t1")], None).await.unwrap();
    store.append_events("s", vec![message("t2", "two"), status("t2"), status("t2")], None).await.unwrap();
    store.append_event("s", message("t3", "three")).await.unwrap();
    let listed = |store: Store| async move {
        store.list_events("s", &EventFilter::default()).await.unwrap().iter().map(|e| e.offset).collect::<Vec<_>>()
    };
    for middle in [1, 3, 4] {
        let refused = store.delete_events("s", middle).await;
        assert!(
            matches!(&refused, Err(StoreError::SplitsTurn { offset, first, .. }) if *offset == middle && *first == (if middle == 1 { 0 } else { 2 })),
            "{refused:?}"
        );
        assert_eq!(listed(store.clone()).await, [0, 1, 2, 3, 4, 5], "nothing deleted from {middle}");
    }
    let refusal = refused_message(&store, 3).await;
    assert!(refusal.contains("offset 3 is in the middle of turn `t2`"), "{refusal}");
    assert!(refusal.contains("min_offset=2"), "{refusal}");
    // From the first event of a turn, the turn and everything after it go.
    assert_eq!(store.delete_events("s", 2).await.unwrap(), 4);
    assert_eq!(listed(store.clone()).await, [0, 1]);
    // Past the end, or from a deleted offset whose next listed event starts nothing: nothing
    // to delete. From offset 1 the first listed event is t1's second: refused.
    assert_eq!(store.delete_events("s", 9).await.unwrap(), 0);
    assert!(matches!(store.delete_events("s", 1).await, Err(StoreError::SplitsTurn { .. })));
    // A deleted event no longer counts as its trace's first: t4 starts at 7 once 6 is gone.
    store.append_events("s", vec![message("t4", "four"), status("t4")], None).await.unwrap();
    store.append_events("s", vec![status("t4")], None).await.unwrap();
    assert!(matches!(store.delete_events("s", 7).await, Err(StoreError::SplitsTurn { first: 6, .. })));
    assert_eq!(store.delete_events("s", 0).await.unwrap(), 5);
    assert_eq!(listed(store.clone()).await, Vec::<u64>::new());
});

async fn refused_message(store: &Store, offset: u64) -> String {
    store.delete_events("s", offset).await.err().map(|e| e.to_string()).unwrap_or_default()
}

store_test!(rate_buckets_grant_their_budget_once, |store: Store| async move {
    // Three a minute: three takes are granted, the fourth waits (at most twenty seconds).
    for n in 0..3 {
        assert_eq!(store.take_rate_token("k", 3, true).await.unwrap(), Ok(()), "take {n}");
    }
    let wait = store.take_rate_token("k", 3, true).await.unwrap().unwrap_err();
    assert!(wait > Duration::ZERO && wait <= Duration::from_secs(20), "{wait:?}");
    // Looking takes nothing, and another key has its own budget.
    assert!(store.take_rate_token("k", 3, false).await.unwrap().is_err());
    for _ in 0..3 {
        assert_eq!(store.take_rate_token("other", 3, false).await.unwrap(), Ok(()));
    }
    assert_eq!(store.take_rate_token("other", 3, true).await.unwrap(), Ok(()));
    // Concurrent takes from many tasks grant exactly the budget.
    let mut tasks = Vec::new();
    for _ in 0..20 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move { store.take_rate_token("busy", 5, true).await.unwrap().is_ok() }));
    }
    let mut granted = 0;
    for task in tasks {
        granted += usize::from(task.await.unwrap());
    }
    assert_eq!(granted, 5);
    assert_eq!(store.prune_rate_buckets().await.unwrap(), 0, "buckets in use are kept");
});

store_test!(a_commit_hands_its_waiters_the_pages_a_read_would_give, |store: Store| async move {
    use guidepost_store::EventPage;
    store.create_session(&session("s", "a", "guest")).await.unwrap();
    store.append_events("s", vec![message("t0", "before"), message("t0", "before, again")], None).await.unwrap();
    let mut changes = store.hub().subscribe("s");
    // Sizes count characters, as the listing's statement does: text outside ASCII included.
    let batch: Vec<NewEventRecord> = (0..9)
        .map(|n| match n % 3 {
            0 => NewEventRecord {
                source: EventSource::AiAgent,
                kind: EventKind::Status,
                trace_id: "t1".into(),
                data: json!({"status": "typing", "data": {"n": n}}),
                metadata: Default::default(),
            },
            1 => message("t1", &"北京多云，".repeat(n * 20)),
            _ => message("t2", &format!("m{n}")),
        })
        .collect();
    let stored = store.append_events("s", batch, None).await.unwrap();
    assert_eq!(stored.first().map(|e| e.offset), Some(2));
    let change = changes.borrow_and_update().clone();
    if store.backend() == guidepost_store::Backend::Postgres {
        // On PostgreSQL the store also hears its commits through LISTEN, the one before this
        // too: the counter may be further on, and when the echo of this commit came back
        // before this read, it replaced the change (a waiter then reads the store).
        if change.appended.is_none() {
            assert!(change.count >= 2, "{change:?}");
            return;
        }
    } else {
        assert_eq!(change.count, 1);
    }
    let appended = change.appended.expect("an append hands over what it appended");
    assert_eq!(appended.iter().map(|a| a.event.clone()).collect::<Vec<_>>(), stored);

    let filters = [
        EventFilter { min_offset: 2, ..Default::default() },
        EventFilter { min_offset: 5, ..Default::default() },
        EventFilter { min_offset: 11, ..Default::default() },
        EventFilter { min_offset: 2, kinds: vec![EventKind::Message], ..Default::default() },
        EventFilter { min_offset: 3, source: Some(EventSource::AiAgent), ..Default::default() },
        EventFilter { min_offset: 2, trace_id: Some("t2".into()), ..Default::default() },
    ];
    for filter in &filters {
        for bounds in [(100, usize::MAX), (2, usize::MAX), (100, 150), (100, 1), (1, 1)] {
            let from_change = EventPage::of_appended(&appended, filter, bounds.0, bounds.1)
                .unwrap_or_else(|| panic!("the change makes the page from offset {}", filter.min_offset));
            let read = store.events_page("s", filter, bounds.0, bounds.1).await.unwrap();
            assert_eq!(from_change, read, "{filter:?} {bounds:?}");
        }
    }
    // Events before the batch may be kept: only the store knows them.
    let earlier = EventFilter { min_offset: 1, ..Default::default() };
    assert_eq!(EventPage::of_appended(&appended, &earlier, 100, usize::MAX), None);

    // Any other change hands over nothing.
    store.update_event_data("s", &stored[0].id, &json!({"status": "ready", "data": {}})).await.unwrap();
    let change = changes.borrow_and_update().clone();
    assert!(change.count >= 2 && change.appended.is_none(), "{change:?}");
});
