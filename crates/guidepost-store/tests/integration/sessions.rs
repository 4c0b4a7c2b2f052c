use guidepost_core::Session;
use guidepost_store::{Cursor, PageRequest, SessionFilter, Sort, Store, StoreError};

use crate::store_test;

pub fn session(id: &str, agent: &str, customer: &str) -> Session {
    Session::new(id, agent, customer)
}

store_test!(sessions_are_filtered_paged_updated_and_deleted, |store: Store| async move {
    for i in 0..7 {
        let mut s = session(&format!("s{i}"), if i % 2 == 0 { "a" } else { "b" }, "guest");
        s.creation_utc = chrono::DateTime::from_timestamp(1_700_000_000 + i, 0).unwrap();
        if i < 3 {
            s.labels = vec!["vip".into()];
        }
        store.create_session(&s).await.unwrap();
    }
    assert!(matches!(store.create_session(&session("s0", "a", "guest")).await, Err(StoreError::AlreadyExists { .. })));
    let of_a = store.list_sessions(&SessionFilter { agent_id: Some("a".into()), ..Default::default() }).await.unwrap();
    assert_eq!(of_a.iter().map(|r| r.session.id.as_str()).collect::<Vec<_>>(), ["s0", "s2", "s4", "s6"]);
    let vip = store.list_sessions(&SessionFilter { labels: vec!["vip".into()], ..Default::default() }).await.unwrap();
    assert_eq!(vip.len(), 3);

    let mut seen = Vec::new();
    let mut cursor: Option<Cursor> = None;
    loop {
        let page = store
            .page_sessions(
                &SessionFilter::default(),
                &PageRequest { limit: 3, cursor: cursor.clone(), sort: Sort::Descending },
            )
            .await
            .unwrap();
        assert_eq!(page.total_count, 7);
        seen.extend(page.items.iter().map(|r| r.session.id.clone()));
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    assert_eq!(seen, ["s6", "s5", "s4", "s3", "s2", "s1", "s0"]);

    let updated = store
        .update_session("s1", |s| {
            s.title = Some("Refund".into());
            s.consumption_offsets.insert("client".into(), 4);
            Ok(())
        })
        .await
        .unwrap();
    assert_eq!(updated.title.as_deref(), Some("Refund"));
    let read = store.require_session("s1").await.unwrap();
    assert_eq!((read.session.consumption_offsets.get("client"), read.version), (Some(&4), 2));

    store.delete_session("s1").await.unwrap();
    assert!(store.get_session("s1").await.unwrap().is_none());
    assert!(matches!(store.delete_session("s1").await, Err(StoreError::NotFound { .. })));
    let removed =
        store.delete_sessions(&SessionFilter { agent_id: Some("a".into()), ..Default::default() }).await.unwrap();
    assert_eq!(removed, 4);
    assert_eq!(store.list_sessions(&SessionFilter::default()).await.unwrap().len(), 2);
});

#[tokio::test]
async fn an_in_memory_store_keeps_its_data_when_its_connection_is_replaced() {
    let store = Store::ephemeral().await.unwrap();
    store.create_session(&session("kept", "a", "guest")).await.unwrap();
    // A request cancelled in the middle of a query closes the writer's connection; the pool
    // opens another, which must reach the same database.
    let connection = store.pool().acquire().await.unwrap();
    connection.close().await.unwrap();
    assert!(store.get_session("kept").await.unwrap().is_some(), "the session is gone with the connection");
    let other = Store::ephemeral().await.unwrap();
    assert!(other.get_session("kept").await.unwrap().is_none(), "two in-memory stores share a database");
}
