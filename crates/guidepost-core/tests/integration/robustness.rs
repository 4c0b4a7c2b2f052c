//! No input panics the loader: random bytes, random YAML, and mangled examples.

use guidepost_core::definition::{SourceFile, load_agent};
use proptest::prelude::*;

use crate::common::{EXAMPLES, repo_root};

const KEYS: &[&str] = &[
    "agent",
    "name",
    "guidelines",
    "journeys",
    "states",
    "start",
    "next",
    "to",
    "when",
    "tool",
    "chat",
    "fork",
    "journey",
    "condition",
    "action",
    "tools",
    "tags",
    "id",
    "relationships",
    "kind",
    "source",
    "target",
    "parameters",
    "type",
    "fixture",
    "cases",
    "args",
    "result",
    "error",
    "entails",
    "depends_on",
    "priority",
    "criticality",
    "end",
    "initial",
];

fn yaml_value() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        "[a-z_ ]{0,12}".prop_map(serde_json::Value::from),
        proptest::sample::select(KEYS).prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(5, 64, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..5).prop_map(serde_json::Value::Array),
            proptest::collection::vec((proptest::sample::select(KEYS), inner), 0..6)
                .prop_map(|kv| serde_json::Value::Object(kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    #[test]
    fn random_bytes_do_not_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512), json in any::<bool>()) {
        let text = String::from_utf8_lossy(&bytes).to_string();
        let name = if json { "x.json" } else { "x.yaml" };
        let _ = load_agent(&[SourceFile::new(name, text)]);
    }

    #[test]
    fn random_yaml_does_not_panic(value in yaml_value()) {
        let text = yaml_serde::to_string(&value).unwrap();
        let loaded = load_agent(&[SourceFile::new("x.yaml", text)]);
        for d in &loaded.diagnostics {
            prop_assert!(d.line >= 1 && d.column >= 1);
        }
    }

    #[test]
    fn mangled_examples_do_not_panic(which in 0usize..4, cut in any::<proptest::sample::Index>(), len in 0usize..40, insert in "[\\[\\]{}:,\\-#&*! \n]{0,3}") {
        let path = repo_root().join(format!("examples/agents/{}.yaml", EXAMPLES[which]));
        let text = std::fs::read_to_string(path).unwrap();
        let chars: Vec<char> = text.chars().collect();
        let at = cut.index(chars.len());
        let end = (at + len).min(chars.len());
        let mangled: String = chars[..at].iter().chain(insert.chars().collect::<Vec<_>>().iter()).chain(chars[end..].iter()).collect();
        let _ = load_agent(&[SourceFile::new("mangled.yaml", mangled)]);
    }
}
