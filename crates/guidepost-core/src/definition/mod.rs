//! The agent definition format: loading, checking and exporting definition files.
//!
//! ```
//! use guidepost_core::definition::{SourceFile, load_agent};
//!
//! let yaml = r#"
//! agent:
//!   name: Otto
//! guidelines:
//!   - id: greet
//!     condition: The customer greets
//!     action: Greet them back and offer help
//! "#;
//! let loaded = load_agent(&[SourceFile::new("otto.yaml", yaml)]);
//! let definition = loaded.definition.expect("valid");
//! assert_eq!(definition.guidelines[0].id, "greet");
//! ```

pub mod check;
pub mod diagnostic;
pub mod export;
pub mod file;
pub mod parlant;
mod resolve;
pub mod source;
pub mod text;

use std::sync::OnceLock;

pub use diagnostic::{Diagnostic, Severity};
pub use export::{export, to_yaml};
pub use file::AgentFile;
pub use resolve::ParsedFile;

use crate::model::AgentDefinition;

/// A definition file's name and text. The loader does no I/O: callers read files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFile {
    /// Name used in diagnostics (usually the path).
    pub name: String,
    /// The text.
    pub text: String,
}

impl SourceFile {
    /// Creates a source file.
    pub fn new(name: impl Into<String>, text: impl Into<String>) -> Self {
        Self { name: name.into(), text: text.into() }
    }

    fn is_json(&self) -> bool {
        self.name.to_ascii_lowercase().ends_with(".json")
    }
}

/// The result of loading an agent.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The definition, when there were no errors.
    pub definition: Option<AgentDefinition>,
    /// Every problem found, errors and warnings, sorted by position.
    pub diagnostics: Vec<Diagnostic>,
}

impl Loaded {
    /// Whether any diagnostic is an error.
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(|d| d.severity == Severity::Error)
    }
}

/// The JSON Schema of the definition format, generated from [`AgentFile`].
pub fn json_schema() -> &'static serde_json::Value {
    static SCHEMA: OnceLock<serde_json::Value> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        let schema = schemars::schema_for!(AgentFile);
        serde_json::to_value(&schema).unwrap_or(serde_json::Value::Bool(true))
    })
}

/// Whether a file found while scanning a folder is meant as an agent definition.
///
/// Folders hold other YAML and JSON too (scenarios, recordings, `package.json`, CI
/// configuration). A file counts when its top level is a mapping with at least one of the
/// definition format's sections (`agent` as a mapping, `guidelines`, `journeys`, ...) and no
/// key that a definition never has. A file that does not parse counts, so its syntax
/// error is reported rather than silently skipped. Files named explicitly are always loaded;
/// this only filters what a folder scan picks up.
pub fn looks_like_definition(source: &SourceFile) -> bool {
    let parsed = if source.is_json() { source::parse_json(&source.text) } else { source::parse(&source.text) };
    let Ok(node) = parsed else { return true };
    let source::Value::Map(entries) = &node.value else { return false };
    let sections: Vec<&str> = json_schema()
        .get("properties")
        .and_then(serde_json::Value::as_object)
        .map(|p| p.keys().map(String::as_str).collect())
        .unwrap_or_default();
    let mut known = 0;
    for (key, value) in entries {
        if key.text == "$schema" {
            continue;
        }
        if !sections.contains(&key.text.as_str()) {
            // A typo of a section name still counts as a definition (and `check` reports it).
            if check::did_you_mean(&key.text, sections.iter().copied()).is_none() {
                return false;
            }
            continue;
        }
        if key.text == "agent" && !matches!(value.value, source::Value::Map(_)) {
            return false;
        }
        known += 1;
    }
    known > 0
}

/// Structural problems reported per file; beyond them one diagnostic says how many more
/// there are, so that a file repeating one mistake (or an alias repeating it) cannot flood
/// the output.
pub const MAX_PROBLEMS_PER_FILE: usize = 200;

/// Parses and structurally checks one file.
///
/// Returns the file when it could be read into the authoring types (possibly with
/// structural problems: unknown fields are dropped, so semantic checks can still run and
/// report everything at once) and the problems found.
pub fn parse_file(source: &SourceFile) -> (Option<ParsedFile>, Vec<Diagnostic>) {
    let parsed = if source.is_json() { source::parse_json(&source.text) } else { source::parse(&source.text) };
    let node = match parsed {
        Ok(node) => node,
        Err(e) => return (None, vec![Diagnostic::error("syntax", &source.name, e.span, e.message)]),
    };
    if matches!(node.value, source::Value::Null) {
        return (
            Some(ParsedFile {
                name: source.name.clone(),
                file: AgentFile::default(),
                spans: check::SpanTable::default(),
            }),
            Vec::new(),
        );
    }
    let checked = check::check(&node, json_schema());
    let shown = checked.problems.len().min(MAX_PROBLEMS_PER_FILE);
    let hidden = checked.problems.len() - shown;
    let mut diagnostics: Vec<Diagnostic> = checked
        .problems
        .into_iter()
        .take(shown)
        .map(|p| Diagnostic::error(p.code, &source.name, p.span, p.message).with_hint_opt(p.hint))
        .collect();
    if hidden > 0 {
        diagnostics.push(Diagnostic::error(
            "too-many-problems",
            &source.name,
            node.span,
            format!("{hidden} more problems in this file are not shown (fix the first {shown} and check again)"),
        ));
    }
    match serde_json::from_value::<AgentFile>(checked.value) {
        Ok(file) => (Some(ParsedFile { name: source.name.clone(), file, spans: checked.spans }), diagnostics),
        Err(err) => {
            if diagnostics.is_empty() {
                diagnostics.push(Diagnostic::error(
                    "invalid-value",
                    &source.name,
                    node.span,
                    format!("the definition does not fit the format: {err}"),
                ));
            }
            (None, diagnostics)
        }
    }
}

/// Resolves already-parsed files into a definition (used by the builder API, which
/// produces authoring structures directly).
pub fn resolve_files(files: &[ParsedFile]) -> (Option<AgentDefinition>, Vec<Diagnostic>) {
    let (definition, mut diagnostics) = resolve::resolve(files);
    diagnostic::sort(&mut diagnostics);
    (definition, diagnostics)
}

/// Loads one agent from its files (one file, or the files of an agent directory).
///
/// Every file is parsed and checked even when an earlier one fails, so one run reports
/// everything that is wrong.
pub fn load_agent(sources: &[SourceFile]) -> Loaded {
    let mut diagnostics = Vec::new();
    let mut parsed = Vec::new();
    let mut unreadable = false;
    for source in sources {
        let (file, mut problems) = parse_file(source);
        diagnostics.append(&mut problems);
        match file {
            Some(file) => parsed.push(file),
            None => unreadable = true,
        }
    }
    let structural_errors = !diagnostics.is_empty();
    let definition = if unreadable {
        None
    } else {
        let (definition, mut problems) = resolve::resolve(&parsed);
        diagnostics.append(&mut problems);
        definition.filter(|_| !structural_errors)
    };
    // A value missing at the end of a file (`guidelines:` on its last line) is marked by the
    // scanner on the line after the last one: such positions point at the end of the file.
    for d in &mut diagnostics {
        if let Some(source) = sources.iter().find(|s| s.name == d.file) {
            let at = source::inside(&source.text, source::Span { line: d.line, col: d.column, len: d.len });
            (d.line, d.column) = (at.line, at.col);
        }
    }
    diagnostic::sort(&mut diagnostics);
    Loaded { definition, diagnostics }
}
