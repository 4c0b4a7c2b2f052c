use std::collections::HashSet;

use guidepost_core::{Customer, Tag};
use guidepost_store::{Cursor, PageRequest, Record, Sort, Store, StoreError, Write};

use crate::store_test;

fn tag(id: &str, name: &str) -> Record<Tag> {
    Record::new(id, Tag { id: id.into(), name: name.into(), description: None })
}

fn customer(id: &str) -> Record<Customer> {
    Record::new(
        id,
        Customer {
            id: id.into(),
            creation_utc: chrono::Utc::now(),
            name: id.into(),
            metadata: Default::default(),
            tags: vec![],
        },
    )
}

store_test!(documents_are_created_read_updated_and_deleted, |store: Store| async move {
    assert_eq!(store.revision().await.unwrap(), 0);
    store.apply(vec![Write::insert(&tag("vip", "VIP")).unwrap()]).await.unwrap();
    assert_eq!(store.revision().await.unwrap(), 1, "a definition change bumps the revision");
    let read = store.require::<Tag>("vip").await.unwrap();
    assert_eq!((read.entity.name.as_str(), read.version), ("VIP", 1));

    let again = store.apply(vec![Write::insert(&tag("vip", "other")).unwrap()]).await;
    assert!(matches!(again, Err(StoreError::AlreadyExists { kind: "tag", .. })), "{again:?}");
    assert_eq!(store.require::<Tag>("vip").await.unwrap().entity.name, "VIP", "a failed batch writes nothing");

    let updated = store
        .update::<Tag>("vip", |r| {
            r.entity.name = "Very important".into();
            Ok(())
        })
        .await
        .unwrap();
    assert_eq!(updated.version, 2);
    let stale = store.apply(vec![Write::replace(&read).unwrap()]).await;
    assert!(matches!(stale, Err(StoreError::Conflict { .. })), "a write from an old version is refused: {stale:?}");

    store.delete::<Tag>("vip").await.unwrap();
    assert!(store.get::<Tag>("vip").await.unwrap().is_none());
    assert!(matches!(store.delete::<Tag>("vip").await, Err(StoreError::NotFound { kind: "tag", .. })));
    let refused = store.update::<Tag>("vip", |_| Ok(())).await;
    assert!(matches!(refused, Err(StoreError::NotFound { .. })));
});

store_test!(customers_do_not_bump_the_definition_revision, |store: Store| async move {
    store.apply(vec![Write::insert(&customer("c1")).unwrap()]).await.unwrap();
    assert_eq!(store.revision().await.unwrap(), 0);
});

store_test!(a_failing_batch_is_rolled_back_whole, |store: Store| async move {
    store.apply(vec![Write::insert(&tag("a", "A")).unwrap()]).await.unwrap();
    let batch = vec![Write::insert(&tag("b", "B")).unwrap(), Write::insert(&tag("a", "again")).unwrap()];
    assert!(store.apply(batch).await.is_err());
    assert!(store.get::<Tag>("b").await.unwrap().is_none());
    assert_eq!(store.revision().await.unwrap(), 1);
});

store_test!(concurrent_updates_are_never_lost, |store: Store| async move {
    store.apply(vec![Write::insert(&tag("counter", "0")).unwrap()]).await.unwrap();
    let mut tasks = Vec::new();
    for _ in 0..12 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            store
                .update::<Tag>("counter", |r| {
                    let n: u32 = r.entity.name.parse().unwrap();
                    r.entity.name = (n + 1).to_string();
                    Ok(())
                })
                .await
                .unwrap();
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(store.require::<Tag>("counter").await.unwrap().entity.name, "12");
});

store_test!(pages_walk_every_document_once_in_both_orders, |store: Store| async move {
    let mut writes = Vec::new();
    for i in 0..23 {
        let mut c = customer(&format!("c{i:02}"));
        // Several share a creation time: the id breaks the tie.
        c.created = chrono::DateTime::from_timestamp(1_700_000_000 + i64::from(i / 3), 0).unwrap();
        writes.push(Write::insert(&c).unwrap());
    }
    store.apply(writes).await.unwrap();
    for sort in [Sort::Ascending, Sort::Descending] {
        let mut seen = Vec::new();
        let mut cursor: Option<Cursor> = None;
        loop {
            let page = store.page::<Customer>(&PageRequest { limit: 5, cursor: cursor.clone(), sort }).await.unwrap();
            assert_eq!(page.total_count, 23);
            assert_eq!(page.has_more, page.next_cursor.is_some());
            seen.extend(page.items.iter().map(|r| r.id.clone()));
            match page.next_cursor {
                Some(c) => cursor = Some(Cursor::decode(&c.encode()).unwrap()),
                None => break,
            }
        }
        assert_eq!(seen.len(), 23, "{sort:?}: {seen:?}");
        assert_eq!(seen.iter().collect::<HashSet<_>>().len(), 23);
        let mut expected: Vec<String> = (0..23).map(|i| format!("c{i:02}")).collect();
        if sort == Sort::Descending {
            expected.reverse();
        }
        assert_eq!(seen, expected);
    }
});
