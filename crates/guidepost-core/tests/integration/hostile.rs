//! Hostile definition files: each is refused with a positioned diagnostic that names the
//! limit, with little work (CPU time, which a busy machine does not inflate), on a small stack
//! (nothing recurses on the input), never by an abort and never by loading half of the file.

use std::time::Duration;

use guidepost_core::definition::text::decode;
use guidepost_core::definition::{Loaded, SourceFile, load_agent};
use guidepost_core::limits::Limits;

/// Loads on a thread with a 256 KiB stack (a recursive walk over 100,000 levels would
/// overflow it many times over); the definition and the CPU time the load took.
fn load_on_small_stack(name: &str, text: String) -> (Loaded, Duration) {
    let name = name.to_string();
    std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(move || guidepost_fuzz::cpu_time_of(|| load_agent(&[SourceFile::new(name, text)])))
        .unwrap()
        .join()
        .unwrap()
}

fn only_error(loaded: &Loaded) -> &guidepost_core::definition::Diagnostic {
    assert!(loaded.definition.is_none());
    assert_eq!(loaded.diagnostics.len(), 1, "{:#?}", loaded.diagnostics);
    &loaded.diagnostics[0]
}

/// `[[[...]]]`, `- - - x` and `{"a":{"a":...}}` 100,000 levels deep.
pub fn deep_files() -> Vec<(&'static str, String)> {
    const LEVELS: usize = 100_000;
    vec![
        ("flow.yaml", format!("agent: {{name: A}}\nguidelines: {}{}\n", "[".repeat(LEVELS), "]".repeat(LEVELS))),
        ("block.yaml", format!("agent: {{name: A}}\nguidelines:\n  {}x\n", "- ".repeat(LEVELS))),
        ("deep.json", format!("{{\"agent\": {}{}}}", "{\"a\": ".repeat(LEVELS), "}".repeat(LEVELS))),
    ]
}

#[test]
fn nesting_100k_levels_deep_is_refused_at_the_limit() {
    for (name, text) in deep_files() {
        let (loaded, took) = load_on_small_stack(name, text);
        let error = only_error(&loaded);
        assert_eq!(error.file, name);
        assert!(error.message.contains("nesting depth limit of 64"), "{name}: {}", error.message);
        assert!(error.message.contains("GUIDEPOST_MAX_NESTING_DEPTH"), "{}", error.message);
        // Refused at the first level too many, on the line where it is.
        assert!(error.line <= 3, "{name}: {error:?}");
        assert!(took < guidepost_fuzz::CASE_TIME, "{name} took {took:?} of CPU time");
    }
}

#[test]
fn aliases_nested_through_each_other_count_their_depth() {
    let mut text = String::from("agent: {name: A}\nx0: &x0 [1]\n");
    for i in 1..200 {
        text.push_str(&format!("x{i}: &x{i} [*x{}]\n", i - 1));
    }
    let (loaded, _) = load_on_small_stack("chain.yaml", text);
    assert!(only_error(&loaded).message.contains("nesting depth"), "{:?}", loaded.diagnostics);
}

/// A billion-laughs file of long strings: 1 KiB, repeated ten times per level, nine levels.
pub fn alias_bomb() -> String {
    let mut text = format!("agent: {{name: A}}\nmetadata:\n  a0: &a0 \"{}\"\n", "lol".repeat(340));
    for i in 1..10 {
        let p = i - 1;
        text.push_str(&format!(
            "  a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
        ));
    }
    text
}

#[test]
fn an_alias_bomb_is_bounded_in_bytes() {
    let text = alias_bomb();
    assert!(text.len() < 2_000);
    let (loaded, took) = load_on_small_stack("laughs.yaml", text);
    let error = only_error(&loaded);
    assert!(error.message.contains("alias-expanded size limit"), "{}", error.message);
    assert!(error.message.contains("GUIDEPOST_MAX_EXPANDED_BYTES"), "{}", error.message);
    assert!(took < guidepost_fuzz::CASE_TIME, "took {took:?} of CPU time");
}

#[test]
fn a_nul_byte_is_an_error_at_its_position_not_the_end_of_the_file() {
    let text = "agent: {name: A}\nguidelines:\n  - condition: a\0b\n    action: c\n  - condition: d\n    action: e\n";
    let (loaded, _) = load_on_small_stack("nul.yaml", text.to_string());
    let error = only_error(&loaded);
    assert_eq!((error.line, error.column), (3, 17), "{error:?}");
    assert!(error.message.contains("NUL"), "{}", error.message);
}

#[test]
fn a_byte_order_mark_is_accepted() {
    let text = "\u{feff}agent: {name: A}\nguidelines:\n  - {condition: a, action: b}\n";
    let (loaded, _) = load_on_small_stack("bom.yaml", text.to_string());
    assert!(loaded.diagnostics.is_empty(), "{:?}", loaded.diagnostics);
    assert_eq!(loaded.definition.unwrap().guidelines.len(), 1);
    let json = decode("bom.json", b"\xEF\xBB\xBF{\"agent\": {\"name\": \"A\"}}".to_vec(), &Limits::default()).unwrap();
    assert!(load_agent(&[json]).diagnostics.is_empty());
}

#[test]
fn crlf_and_mixed_line_endings_load_with_the_right_lines() {
    let text = "agent: {name: A}\r\nguidelines:\n  - {condition: a, action: b}\r\n  - {condition: c, actoin: d}\n";
    let loaded = load_agent(&[SourceFile::new("crlf.yaml", text)]);
    let error = loaded.diagnostics.iter().find(|d| d.code == "unknown-field").unwrap();
    assert_eq!(error.line, 4, "{error:?}");
}

#[test]
fn invalid_utf8_is_reported_with_its_position() {
    let error = decode("bad.yaml", b"agent:\n  name: caf\xE9\n".to_vec(), &Limits::default()).unwrap_err();
    assert_eq!((error.code, error.line, error.column), ("encoding", 2, 12));
    assert!(error.message.contains("0xE9"), "{}", error.message);
}

#[test]
fn one_mistake_repeated_by_aliases_does_not_flood_the_output() {
    let mut text = String::from("agent: {name: A}\nguidelines:\n  - &g {conditon: a, action: b}\n");
    for _ in 0..1_000 {
        text.push_str("  - *g\n");
    }
    let loaded = load_agent(&[SourceFile::new("many.yaml", text)]);
    assert!(loaded.diagnostics.len() <= 210, "{}", loaded.diagnostics.len());
    assert!(loaded.diagnostics.iter().any(|d| d.code == "too-many-problems"));
}

mod properties {
    use guidepost_core::definition::text::decode;
    use guidepost_core::definition::{SourceFile, load_agent};
    use guidepost_core::limits::Limits;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: guidepost_fuzz::cases().max(256), failure_persistence: None, ..ProptestConfig::default() })]

        /// Mutated copies of the hostile seeds (the fuzz target of the definition loader):
        /// decoded and loaded, or refused with a position inside the file, in bounded time.
        #[test]
        fn fuzz_definition_loader_mutated_seeds(
            seed in any::<prop::sample::Index>(),
            edits in proptest::collection::vec(
                (any::<u8>(), any::<usize>(), any::<usize>(), any::<u8>())
                    .prop_map(|(kind, at, len, token)| guidepost_fuzz::Mutation { kind, at, len, token }),
                1..8,
            ),
        ) {
            let folder = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/hostile");
            let seeds = guidepost_fuzz::corpus(&folder);
            prop_assert!(!seeds.is_empty());
            let bytes = guidepost_fuzz::mutate(&seeds[seed.index(seeds.len())].1, &edits);
            // Line breaks as YAML counts them: LF, CR LF, and a CR alone.
            let lines = bytes.iter().enumerate().filter(|(i, b)| **b == b'\n' || (**b == b'\r' && bytes.get(i + 1) != Some(&b'\n'))).count() as u32 + 1;
            let shown = String::from_utf8_lossy(&bytes[..bytes.len().min(600)]).into_owned();
            let (outcome, spent) = guidepost_fuzz::cpu_time_of(|| {
                decode("x.yaml", bytes, &Limits::default()).map(|source| load_agent(&[source]))
            });
            match outcome {
                Ok(loaded) => {
                    for d in &loaded.diagnostics {
                        prop_assert!(d.line >= 1 && d.line <= lines, "{d:?} in {lines} lines: {shown:?}");
                    }
                }
                Err(d) => prop_assert!(d.line >= 1 && d.line <= lines && d.column >= 1, "{d:?}"),
            }
            prop_assert!(spent < guidepost_fuzz::CASE_TIME, "took {spent:?} of CPU time");
        }

        /// Any bytes: decoded or refused with a position inside the file, never a panic.
        #[test]
        fn decoding_any_bytes_gives_a_file_or_a_positioned_error(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let lines = bytes.iter().filter(|b| **b == b'\n').count() as u32 + 1;
            match decode("x.yaml", bytes, &Limits::default()) {
                Ok(source) => { let _ = load_agent(&[source]); }
                Err(d) => prop_assert!(d.line >= 1 && d.line <= lines && d.column >= 1, "{d:?}"),
            }
        }

        /// Brackets, dashes, anchors and aliases in any order, nested up to 400 deep, load on a
        /// 256 KiB stack: nothing recurses on the input.
        #[test]
        fn any_nesting_loads_on_a_small_stack(tokens in proptest::collection::vec(
            prop_oneof![Just("["), Just("]"), Just("{"), Just("}"), Just("- "), Just("\n  "), Just("&a "), Just("*a"), Just(", "), Just("k: ")],
            0..400,
        )) {
            let text = format!("agent: {{name: A}}\nmetadata:\n  x: {}", tokens.concat());
            let loaded = std::thread::Builder::new()
                .stack_size(256 * 1024)
                .spawn(move || load_agent(&[SourceFile::new("n.yaml", text)]).diagnostics.len())
                .unwrap()
                .join();
            prop_assert!(loaded.is_ok());
        }
    }
}

/// The checked-in seeds (`tests/corpus/hostile`): each is refused with a positioned error,
/// except the two that are harmless (a byte-order mark, mixed line endings).
#[test]
fn the_hostile_corpus_seeds_load_or_fail_as_expected() {
    let dir = crate::common::repo_root().join("crates/guidepost-core/tests/corpus/hostile");
    let mut seen = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let loaded = match decode(&name, std::fs::read(&path).unwrap(), &Limits::default()) {
            Ok(source) => load_on_small_stack(&name, source.text).0,
            Err(d) => Loaded { definition: None, diagnostics: vec![d] },
        };
        let harmless = matches!(name.as_str(), "byte_order_mark.yaml" | "mixed_line_endings.yaml");
        assert_eq!(loaded.definition.is_some(), harmless, "{name}: {:?}", loaded.diagnostics);
        assert!(loaded.diagnostics.iter().all(|d| d.line >= 1 && d.column >= 1), "{name}");
        seen += 1;
    }
    assert_eq!(seen, 6);
}
