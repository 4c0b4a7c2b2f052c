//! Fuzz target: the scenario loader. Arbitrary bytes and mutated copies of the seeds in
//! `tests/corpus/scenarios` either load or fail with errors that name the file (and a line
//! and column for every problem of encoding or characters), within bounded CPU time, never a
//! panic. `GUIDEPOST_FUZZ_CASES` sets the inputs per run (see `guidepost_fuzz`);
//! `scripts/fuzz.sh` runs it for a given time.

use std::path::{Path, PathBuf};

use guidepost_core::limits::Limits;
use guidepost_fuzz::{self as fuzz, Mutation};
use guidepost_sim::scenario::Scenario;
use proptest::prelude::*;

fn seeds() -> Vec<(String, Vec<u8>)> {
    let folder = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/scenarios");
    let seeds = fuzz::corpus(&folder);
    assert!(seeds.len() >= 4, "the corpus is missing: {}", folder.display());
    seeds
}

fn mutation() -> impl Strategy<Value = Mutation> {
    any::<(u8, usize, usize, u8)>().prop_map(Mutation::from)
}

/// Loads `bytes`; checks the outcome's shape and the time taken.
fn check(bytes: Vec<u8>) {
    let path = Path::new("fuzz/scenario.yaml");
    let decodes = std::str::from_utf8(&bytes).is_ok_and(|t| {
        !guidepost_core::definition::text::strip_bom(t)
            .chars()
            .any(guidepost_core::definition::text::is_forbidden_control)
    });
    let (result, spent) = fuzz::cpu_time_of(|| Scenario::from_bytes(path, bytes, &Limits::default()));
    assert!(spent < fuzz::CASE_TIME, "took {spent:?} of CPU time");
    if let Err(errors) = result {
        assert!(!errors.is_empty());
        for e in &errors {
            assert_eq!(e.location.file, path);
            assert!(!e.message.trim().is_empty());
            if !decodes {
                assert!(e.location.line.is_some() && e.location.column.is_some(), "{e}");
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: fuzz::cases(), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn fuzz_scenario_loader_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..4096)) {
        check(bytes);
    }

    #[test]
    fn fuzz_scenario_loader_mutated_seeds(seed in any::<prop::sample::Index>(), edits in proptest::collection::vec(mutation(), 1..8)) {
        let seeds = seeds();
        let (_, bytes) = &seeds[seed.index(seeds.len())];
        check(fuzz::mutate(bytes, &edits));
    }
}

#[test]
fn every_seed_loads_or_fails_with_a_position() {
    for (name, bytes) in seeds() {
        let result = Scenario::from_bytes(Path::new(&name), bytes, &Limits::default());
        if name == "alias_bomb.yaml" {
            let errors = result.err().unwrap_or_default();
            assert!(!errors.is_empty(), "the alias bomb is refused");
        } else {
            assert!(result.is_ok(), "{name}: {:?}", result.err());
        }
    }
    let nul = Scenario::from_bytes(Path::new("n.yaml"), b"id: x\ngoal: a\0b\n".to_vec(), &Limits::default());
    let errors = nul.err().unwrap_or_default();
    assert_eq!((errors[0].location.line, errors[0].location.column), (Some(2), Some(8)), "{errors:?}");
}

/// Loads `text` as a scenario within the default limits; its errors and the CPU time taken.
fn load_timed(text: &str) -> (Vec<String>, std::time::Duration) {
    let (result, took) = fuzz::cpu_time_of(|| {
        Scenario::from_bytes(Path::new("hostile.yaml"), text.as_bytes().to_vec(), &Limits::default())
    });
    (result.err().unwrap_or_default().iter().map(ToString::to_string).collect(), took)
}

const HEAD: &str = "goal: g\npersona: {description: p}\n";

#[test]
fn nested_aliases_are_refused_by_their_expanded_size_not_replayed() {
    // 3.4 KB: a list of 1,000 values, used 10 times in a list used 10 times in a list used
    // 250 times (2.5 million values once expanded; it took 16 s and gigabytes to load).
    let mut text = format!("{HEAD}metadata:\n  a0: &a0 [{}]\n", vec!["1"; 1000].join(","));
    text.push_str(&format!("  a1: &a1 [{}]\n", ["*a0"; 10].join(", ")));
    text.push_str(&format!("  a2: &a2 [{}]\n", ["*a1"; 10].join(", ")));
    text.push_str(&format!("  b: [{}]\n", vec!["*a2"; 250].join(", ")));
    let (errors, took) = load_timed(&text);
    assert!(took < fuzz::CASE_TIME, "took {took:?} of CPU time");
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].starts_with("hostile.yaml:7:"), "{}", errors[0]);
    assert!(errors[0].contains("values (check for alias loops)"), "{}", errors[0]);
}

#[test]
fn deep_flow_nesting_is_refused_at_the_nesting_limit_in_linear_time() {
    // 100,000 `[`: the YAML reader behind scenarios takes time quadratic in this depth
    // (40,000 took 4.5 s) before its own recursion limit applies.
    let (errors, took) = load_timed(&format!("{HEAD}metadata:\n  x: {}\n", "[".repeat(100_000)));
    assert!(took < fuzz::CASE_TIME, "took {took:?} of CPU time");
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].starts_with("hostile.yaml:4:"), "{}", errors[0]);
    assert!(errors[0].contains("GUIDEPOST_MAX_NESTING_DEPTH"), "{}", errors[0]);
}

#[test]
fn many_step_problems_are_found_in_linear_time_and_reported_up_to_the_cap() {
    // 15,000 steps with one id, each naming an unknown step: 29,999 problems, each placed at
    // its step's line (found by one scan of the file, not one per problem, and duplicates
    // found in a set, not by comparing each step with the ones before).
    let mut text = format!("{HEAD}step_graph:\n  start: s0\n  steps:\n");
    for i in 0..15_000 {
        text.push_str(&format!("    - id: s0\n      instruction: x\n      after: [missing{i}]\n"));
    }
    let (errors, took) = load_timed(&text);
    assert!(took < fuzz::CASE_TIME, "took {took:?} of CPU time");
    assert_eq!(errors.len(), guidepost_core::definition::MAX_PROBLEMS_PER_FILE + 1);
    assert!(errors[0].starts_with("hostile.yaml:6: step `s0`"), "{}", errors[0]);
    assert!(errors.last().unwrap().contains("and 29799 more problem(s) not shown"), "{errors:?}");
}

#[test]
fn a_deeply_nested_step_expression_is_an_error_not_a_stack_overflow() {
    let expr = format!("{}turns > 1{}", "(".repeat(200_000), ")".repeat(200_000));
    let text = format!(
        "{HEAD}step_graph:\n  start: s0\n  steps:\n    - id: s0\n      instruction: x\n      satisfied_when: {{expr: '{expr}'}}\n"
    );
    let (errors, took) = load_timed(&text);
    assert!(took < fuzz::CASE_TIME, "took {took:?} of CPU time");
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].starts_with("hostile.yaml:6:"), "{}", errors[0]);
    assert!(errors[0].contains("nested more than 64 levels deep"), "{}", &errors[0][errors[0].len() - 200..]);
}
