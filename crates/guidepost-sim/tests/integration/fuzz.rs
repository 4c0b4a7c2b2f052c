//! Fuzz target: the scenario loader. Arbitrary bytes and mutated copies of the seeds in
//! `tests/corpus/scenarios` either load or fail with errors that name the file (and a line
//! and column for every problem of encoding or characters), within a bounded time, never a
//! panic. `GUIDEPOST_FUZZ_CASES` sets the inputs per run (see `guidepost_core::fuzz`);
//! `scripts/fuzz.sh` runs it for a given time.

use std::path::{Path, PathBuf};
use std::time::Instant;

use guidepost_core::fuzz::{self, Mutation};
use guidepost_core::limits::Limits;
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
    let started = Instant::now();
    let result = Scenario::from_bytes(path, bytes, &Limits::default());
    assert!(started.elapsed() < fuzz::CASE_TIME, "took {:?}", started.elapsed());
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
