//! Deliberately broken definitions and the diagnostics they must produce, with positions.

use std::path::PathBuf;

use guidepost_core::definition::Severity;

use crate::common::{load_paths, repo_root};

fn corpus_dir() -> PathBuf {
    repo_root().join("crates/guidepost-core/tests/corpus/broken")
}

/// Renders every diagnostic of one corpus case, as `guidepost check` shows them.
fn rendered(paths: &[PathBuf]) -> (String, bool) {
    let (loaded, sources) = load_paths(paths);
    let mut out = String::new();
    for d in &loaded.diagnostics {
        let source = sources.iter().find(|s| s.name == d.file).map(|s| s.text.as_str());
        out.push_str(&d.render(source));
        out.push('\n');
    }
    (out, loaded.definition.is_some())
}

fn case(name: &str) -> (String, bool) {
    rendered(&[corpus_dir().join(name)])
}

macro_rules! corpus_case {
    ($test:ident, $file:literal) => {
        #[test]
        fn $test() {
            let (text, loaded) = case($file);
            assert!(!loaded, "a broken definition must not load");
            insta::assert_snapshot!(stringify!($test), text);
        }
    };
}

corpus_case!(unknown_fields, "unknown_fields.yaml");
corpus_case!(invalid_values, "invalid_values.yaml");
corpus_case!(missing_fields, "missing_fields.yaml");
corpus_case!(unknown_references, "unknown_references.yaml");
corpus_case!(duplicates, "duplicates.yaml");
corpus_case!(journey_graph, "journey_graph.yaml");
corpus_case!(relationships, "relationships.yaml");
corpus_case!(empty_and_warnings, "empty_and_warnings.yaml");
corpus_case!(yaml_syntax, "syntax.yaml");
corpus_case!(json_syntax, "syntax.json");
corpus_case!(no_agent, "no_agent.yaml");
corpus_case!(templates, "templates.yaml");
corpus_case!(knock_on, "knock_on.yaml");
corpus_case!(yaml_syntax_after_wide_characters, "syntax_wide.yaml");

#[test]
fn split_agent_reports_the_file_of_each_problem() {
    let dir = corpus_dir().join("split_agent");
    let (text, loaded) = rendered(&[dir.join("agent.yaml"), dir.join("journeys.yaml")]);
    assert!(!loaded);
    assert!(text.contains("split_agent/journeys.yaml:1:1"), "{text}");
    insta::assert_snapshot!("split_agent", text);
}

/// Each category the format promises to catch has a code in the corpus.
#[test]
fn corpus_covers_every_category() {
    let mut codes = std::collections::BTreeSet::new();
    for entry in std::fs::read_dir(corpus_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            let (loaded, _) = load_paths(&[path]);
            codes.extend(loaded.diagnostics.iter().map(|d| (d.code, d.severity)));
        }
    }
    for expected in [
        ("unknown-field", Severity::Error),
        ("invalid-value", Severity::Error),
        ("invalid-type", Severity::Error),
        ("missing-field", Severity::Error),
        ("unknown-reference", Severity::Error),
        ("duplicate-id", Severity::Error),
        ("unreachable-state", Severity::Error),
        ("no-path-to-end", Severity::Error),
        ("transition-from-end", Severity::Error),
        ("tool-state-without-tool", Severity::Error),
        ("wrong-endpoint-kind", Severity::Error),
        ("cycle", Severity::Error),
        ("cycle", Severity::Warning),
        ("empty-text", Severity::Error),
        ("syntax", Severity::Error),
        ("missing-agent", Severity::Error),
        ("duplicate-condition", Severity::Warning),
        ("single-state-journey", Severity::Warning),
        ("invalid-template", Severity::Error),
    ] {
        assert!(codes.contains(&expected), "no corpus case produces {expected:?}; got {codes:?}");
    }
}
