//! Fuzz targets: the tool-result decoders (a Parlant plugin's call stream, an MCP
//! `tools/call` result). Arbitrary bytes and mutated copies of the seeds in
//! `tests/corpus/<target>`, cut into arbitrary chunks, never panic, finish in bounded CPU
//! time and end in one outcome: a result, or a failure that names the service's URL (and, for a
//! broken stream, the offset). `GUIDEPOST_FUZZ_CASES` sets the inputs per run (see
//! `guidepost_fuzz`); `scripts/fuzz.sh` runs them for a given time.

use std::path::PathBuf;

use guidepost_fuzz::{self as fuzz, Mutation};
use guidepost_tools::mcp::outcome_from_mcp;
use guidepost_tools::parlant::CallStreamDecoder;
use guidepost_tools::{ToolErrorKind, ToolOutcome};
use proptest::prelude::*;

use super::common::ctx;

const URL: &str = "http://plugin.test/tools/t/calls";

fn seeds(target: &str) -> Vec<(String, Vec<u8>)> {
    let folder = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/corpus").join(target);
    let seeds = fuzz::corpus(&folder);
    assert!(seeds.len() >= 3, "the corpus is missing: {}", folder.display());
    seeds
}

fn mutation() -> impl Strategy<Value = Mutation> {
    any::<(u8, usize, usize, u8)>().prop_map(Mutation::from)
}

fn mutated(target: &str, index: prop::sample::Index, edits: &[Mutation]) -> Vec<u8> {
    fuzz::mutate_seed(&seeds(target), index.index(usize::MAX), edits)
}

/// Decodes `bytes` as a Parlant call stream cut at `cuts`.
fn check_parlant(bytes: Vec<u8>, cuts: &[usize]) {
    let mut at: Vec<usize> = cuts.iter().map(|c| if bytes.is_empty() { 0 } else { c % bytes.len() }).collect();
    at.sort_unstable();
    at.push(bytes.len());
    let context = ctx();
    let (outcome, spent) = fuzz::cpu_time_of(|| {
        let mut decoder = CallStreamDecoder::new(URL, 64 * 1024);
        let mut start = 0;
        for cut in at {
            if let Some(o) = decoder.push(&bytes[start..cut.max(start)], &context) {
                return o;
            }
            start = cut.max(start);
        }
        decoder.finish()
    });
    assert!(spent < fuzz::CASE_TIME, "took {spent:?} of CPU time");
    if let ToolOutcome::Error { message, kind } = &outcome {
        // The tool's own `error` object is its answer; anything else the stream holds is
        // the service failing to give one.
        let expected =
            if message.starts_with("the tool reported") { ToolErrorKind::Failed } else { ToolErrorKind::ServiceError };
        assert_eq!(kind, &expected, "{message}");
        assert!(
            message.contains(URL)
                || message.starts_with("the tool reported")
                || message.starts_with("malformed result")
                || message.starts_with("unexpected object")
                || message.starts_with("the stream held"),
            "{message}"
        );
    }
}

fn check_mcp(bytes: &[u8]) {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(bytes) else { return };
    let (outcome, spent) = fuzz::cpu_time_of(|| outcome_from_mcp(&value));
    assert!(spent < fuzz::CASE_TIME, "took {spent:?} of CPU time");
    if let ToolOutcome::Error { message, .. } = outcome {
        assert!(!message.is_empty() || value["content"].as_array().is_some_and(|c| !c.is_empty()));
    }
}

/// Any JSON value, a few levels deep, with the keys an MCP result uses among others.
fn json_value() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::Value;
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<f64>().prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        ".{0,40}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 64, 6, |inner| {
        let key = prop_oneof![
            Just("content".to_string()),
            Just("text".to_string()),
            Just("isError".to_string()),
            Just("structuredContent".to_string()),
            Just("type".to_string()),
            "[a-z]{1,6}",
        ];
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(serde_json::Value::Array),
            proptest::collection::btree_map(key, inner, 0..6)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: fuzz::cases(), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn fuzz_parlant_call_stream_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..4096), cuts in proptest::collection::vec(any::<usize>(), 0..8)) {
        check_parlant(bytes, &cuts);
    }

    #[test]
    fn fuzz_parlant_call_stream_mutated_seeds(seed in any::<prop::sample::Index>(), edits in proptest::collection::vec(mutation(), 1..8), cuts in proptest::collection::vec(any::<usize>(), 0..8)) {
        check_parlant(mutated("parlant_calls", seed, &edits), &cuts);
    }

    #[test]
    fn fuzz_mcp_result_any_json(value in json_value()) {
        check_mcp(value.to_string().as_bytes());
    }

    #[test]
    fn fuzz_mcp_result_mutated_seeds(seed in any::<prop::sample::Index>(), edits in proptest::collection::vec(mutation(), 1..8)) {
        check_mcp(&mutated("mcp_results", seed, &edits));
    }
}

#[test]
fn tool_result_seeds_decode_as_their_names_say() {
    for (name, bytes) in seeds("parlant_calls") {
        let mut decoder = CallStreamDecoder::new(URL, 64 * 1024);
        let outcome = decoder.push(&bytes, &ctx()).unwrap_or_else(|| decoder.finish());
        assert_eq!(outcome.is_ok(), name.starts_with("result"), "{name}: {outcome:?}");
    }
    for (name, bytes) in seeds("mcp_results") {
        let outcome = outcome_from_mcp(&serde_json::from_slice(&bytes).unwrap());
        assert_eq!(outcome.is_ok(), !name.starts_with("error"), "{name}: {outcome:?}");
    }
}
