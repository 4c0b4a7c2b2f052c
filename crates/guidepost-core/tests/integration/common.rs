use std::path::{Path, PathBuf};

use guidepost_core::AgentDefinition;
use guidepost_core::definition::{Loaded, SourceFile, load_agent};

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Reads files with names relative to the repository root, so diagnostics are stable.
pub fn read_sources(paths: &[PathBuf]) -> Vec<SourceFile> {
    let root = repo_root().canonicalize().unwrap();
    paths
        .iter()
        .map(|p| {
            let abs = p.canonicalize().unwrap();
            let name = abs.strip_prefix(&root).unwrap_or(&abs).display().to_string();
            SourceFile::new(name, std::fs::read_to_string(&abs).unwrap())
        })
        .collect()
}

pub fn load_paths(paths: &[PathBuf]) -> (Loaded, Vec<SourceFile>) {
    let sources = read_sources(paths);
    (load_agent(&sources), sources)
}

pub fn example(name: &str) -> AgentDefinition {
    let path = repo_root().join("examples/agents").join(format!("{name}.yaml"));
    let (loaded, _) = load_paths(&[path]);
    assert!(loaded.diagnostics.is_empty(), "{:?}", loaded.diagnostics);
    loaded.definition.unwrap()
}

pub const EXAMPLES: [&str; 4] = ["weather", "taxi", "banking", "otto"];
