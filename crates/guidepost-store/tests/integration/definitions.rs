use guidepost_core::{Agent, Guideline, Journey};
use guidepost_store::definitions::{agent_tag, condition_guideline, journey_tag};
use guidepost_store::{Record, Store, StoreError, Write};

use super::support::{example, load_yaml};
use crate::store_test;

store_test!(every_example_survives_import_and_export, |store: Store| async move {
    for name in ["weather", "taxi", "banking", "otto"] {
        let original = example(name);
        let report = store.import_definition(&original).await.unwrap();
        assert!(report.created > 5, "{name}: {report:?}");
        let exported = store.export_definition(&original.agent.id).await.unwrap();
        assert_eq!(exported, original, "{name}: export gives back the definition");
        let yaml = guidepost_core::definition::to_yaml(&exported).unwrap();
        let reloaded = load_yaml(&format!("{name}.yaml"), &yaml);
        assert_eq!(reloaded, original, "{name}: the exported YAML loads to the same definition");
    }
});

store_test!(imports_are_idempotent_and_follow_the_files, |store: Store| async move {
    let weather = example("weather");
    store.import_definition(&weather).await.unwrap();
    let revision = store.revision().await.unwrap();
    let again = store.import_definition(&weather).await.unwrap();
    assert_eq!((again.created, again.updated, again.removed), (0, 0, 0), "{again:?}");
    assert_eq!(store.revision().await.unwrap(), revision, "an unchanged import writes nothing");

    store
        .update::<Guideline>("weather.greet", |r| {
            r.entity.action = Some("Say hi".into());
            Ok(())
        })
        .await
        .unwrap();
    let replaced = store.import_definition(&weather).await.unwrap();
    assert_eq!(replaced.replaced_edits, ["weather.greet"]);
    assert_eq!(
        store.require::<Guideline>("weather.greet").await.unwrap().entity.action,
        weather.guideline("greet").unwrap().action
    );

    let mut smaller = weather.clone();
    smaller.guidelines.retain(|g| g.id != "tone");
    let report = store.import_definition(&smaller).await.unwrap();
    assert_eq!(report.removed, 1);
    assert!(store.get::<Guideline>("weather.tone").await.unwrap().is_none());
    assert_eq!(store.export_definition("weather").await.unwrap(), smaller);
});

store_test!(agents_with_the_same_ids_do_not_collide, |store: Store| async move {
    let a = load_yaml(
        "a.yaml",
        "agent: { id: a, name: A }\nguidelines:\n  - { id: greet, condition: The customer greets, action: Say hello }\n",
    );
    let b = load_yaml(
        "b.yaml",
        "agent: { id: b, name: B }\nguidelines:\n  - { id: greet, condition: The customer greets, action: Say bonjour }\n",
    );
    store.import_definition(&a).await.unwrap();
    store.import_definition(&b).await.unwrap();
    let da = store.agent_definition("a").await.unwrap();
    let db = store.agent_definition("b").await.unwrap();
    assert_eq!(da.guidelines.len(), 1);
    assert_eq!(da.guidelines[0].action.as_deref(), Some("Say hello"));
    assert_eq!(db.guidelines[0].action.as_deref(), Some("Say bonjour"));
    assert_eq!(store.export_definition("a").await.unwrap(), a);
});

store_test!(scope_follows_tags, |store: Store| async move {
    let a = load_yaml("a.yaml", "agent: { id: a, name: A, tags: [vip] }\ntags: [vip]\n");
    let b = load_yaml("b.yaml", "agent: { id: b, name: B }\n");
    store.import_definition(&a).await.unwrap();
    store.import_definition(&b).await.unwrap();
    let g = |id: &str, tags: Vec<String>| {
        let mut g = condition_guideline(id, "The customer is upset", tags);
        g.action = Some("Apologise".into());
        Write::insert(&Record::new(id, g)).unwrap()
    };
    let journey = Journey {
        id: "j".into(),
        title: "Returns".into(),
        description: None,
        conditions: vec![guidepost_core::journey::JourneyCondition {
            id: "jc".into(),
            condition: "wants to return".into(),
        }],
        tags: vec![agent_tag("a")],
        labels: vec![],
        priority: 0,
        composition_mode: None,
        states: vec![],
        transitions: vec![],
    };
    store
        .apply(vec![
            g("everyone", vec![]),
            g("only_a", vec![agent_tag("a")]),
            g("vip_scope", vec!["a.vip".into()]),
            g("in_journey", vec![journey_tag("j")]),
            Write::insert(&Record::new(
                "jc",
                condition_guideline("jc", "wants to return", vec![agent_tag("a"), journey_tag("j")]),
            ))
            .unwrap(),
            Write::insert(&Record::new("j", journey)).unwrap(),
        ])
        .await
        .unwrap();
    let ids = |d: &guidepost_core::AgentDefinition| d.guidelines.iter().map(|g| g.id.clone()).collect::<Vec<_>>();
    let da = store.agent_definition("a").await.unwrap();
    let db = store.agent_definition("b").await.unwrap();
    assert_eq!(ids(&da), ["everyone", "only_a", "vip_scope", "in_journey"]);
    assert_eq!(ids(&db), ["everyone"], "journey-scoped guidelines follow their journey's scope");
    assert_eq!(da.guideline("in_journey").unwrap().journey.as_deref(), Some("j"));
    assert_eq!(da.journeys[0].conditions[0].condition, "wants to return");
    assert!(
        da.guidelines.iter().all(|g| g.tags.iter().all(|t| !t.contains(':'))),
        "system tags are not in the definition"
    );
    assert!(matches!(store.agent_definition("nobody").await, Err(StoreError::NotFound { kind: "agent", .. })));
    assert!(store.get::<Agent>("a").await.unwrap().is_some());
});

store_test!(ids_shared_across_kinds_export_as_they_were_written, |store: Store| async move {
    let yaml = "agent: { id: a, name: A }\ntags: [billing]\nguidelines:\n  - { id: billing, condition: The customer asks about a bill, action: Explain it, tags: [billing] }\njourneys:\n  - id: billing\n    title: Billing\n    conditions: [The customer disputes a charge]\n    start: ask\n    states:\n      - { id: ask, chat: Ask which charge, next: end }\n";
    let a = load_yaml("a.yaml", yaml);
    store.import_definition(&a).await.unwrap();
    assert_eq!(store.export_definition("a").await.unwrap(), a);
});

store_test!(an_import_reads_only_its_own_agents_documents, |store: Store| async move {
    // A restart imports every agent again; each import must cost its own documents, not the
    // whole collection (10,000 agents read 10,000 times over took minutes). Shown here by a
    // damaged document of another agent, which an import that reads only its own never sees.
    let weather = example("weather");
    store.import_definition(&weather).await.unwrap();
    let other = load_yaml(
        "other.yaml",
        "agent: { id: other, name: O }\nguidelines:\n  - { id: greet, condition: The customer greets, action: Say hi }\n",
    );
    store.import_definition(&other).await.unwrap();
    sqlx::query("UPDATE documents SET data = 'not json' WHERE collection = 'guidelines' AND id = 'other.greet'")
        .execute(store.pool())
        .await
        .unwrap();
    let again = store.import_definition(&weather).await.unwrap();
    assert_eq!((again.created, again.updated, again.removed), (0, 0, 0), "{again:?}");
    assert!(again.unchanged > 5, "{again:?}");
    let mut smaller = weather.clone();
    smaller.guidelines.retain(|g| g.id != "tone");
    assert_eq!(store.import_definition(&smaller).await.unwrap().removed, 1);
});
