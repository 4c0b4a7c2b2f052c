use guidepost_store::Store;
use serde_json::json;

use crate::store_test;

store_test!(variable_values_by_key, |store: Store| async move {
    let at = chrono::Utc::now();
    let v = store.set_value("plan", "DEFAULT", &json!("basic"), at).await.unwrap();
    let again = store.set_value("plan", "DEFAULT", &json!({"tier": "gold"}), at).await.unwrap();
    assert_eq!(v.id, again.id, "setting a value again keeps its id");
    store.set_value("plan", "cust1", &json!(3), at).await.unwrap();
    assert_eq!(store.get_value("plan", "DEFAULT").await.unwrap().unwrap().data, json!({"tier": "gold"}));
    assert_eq!(store.list_values("plan").await.unwrap().len(), 2);
    assert!(store.delete_value("plan", "cust1").await.unwrap());
    assert!(!store.delete_value("plan", "cust1").await.unwrap());
    store.delete_values("plan").await.unwrap();
    assert!(store.list_values("plan").await.unwrap().is_empty());
});

store_test!(embeddings_are_cached_and_searched, |store: Store| async move {
    if store.backend() == guidepost_store::Backend::Postgres {
        let available = sqlx::query("SELECT 1 AS one FROM pg_available_extensions WHERE name = 'vector'")
            .fetch_optional(store.pool())
            .await
            .unwrap()
            .is_some();
        assert_eq!(store.has_vector_search(), available, "pgvector is used exactly when the server has it");
    }
    let texts = ["refund".to_string(), "weather".to_string(), "password".to_string()];
    let vectors = [vec![1.0f32, 0.0, 0.0], vec![0.0, 1.0, 0.0], vec![0.7, 0.7, 0.0]];
    for (t, v) in texts.iter().zip(&vectors) {
        store.cache_embedding("m", t, v).await.unwrap();
        store.cache_embedding("m", t, v).await.unwrap();
    }
    let cached = store.cached_embeddings("m", &[texts[1].clone(), "unknown".into()]).await.unwrap();
    assert_eq!(cached, vec![Some(vectors[1].clone()), None]);
    assert_eq!(store.cached_embeddings("other", &[texts[0].clone()]).await.unwrap(), vec![None]);
    let near = store.nearest_embeddings("m", &[0.9, 0.1, 0.0], 2).await.unwrap();
    assert_eq!(near.iter().map(|(t, _)| t.as_str()).collect::<Vec<_>>(), ["refund", "password"]);
    assert!(near[0].1 > near[1].1 && near[0].1 > 0.9);
});
