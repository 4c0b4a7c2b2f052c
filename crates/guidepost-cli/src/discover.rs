//! Finding agent definitions on disk.
//!
//! A path is either a definition file (one agent) or a directory. A directory that holds
//! an `agent.yaml` (or `.yml`, `.json`) is one agent made of all definition files under
//! it; any other directory is a collection: each definition file directly in it is an
//! agent, and each subdirectory is searched the same way. A collection scan skips hidden
//! folders, build output (`target`, `node_modules`) and files that are not agent
//! definitions (scenarios, recordings, other configuration); a file named on the command
//! line is always loaded.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use guidepost_core::definition::{Loaded, SourceFile, load_agent, looks_like_definition};

/// One agent found on disk.
pub struct FoundAgent {
    /// The file or directory that defines it.
    pub origin: PathBuf,
    /// Its files, read.
    pub sources: Vec<SourceFile>,
}

impl FoundAgent {
    /// Loads and checks the agent.
    pub fn load(&self) -> Loaded {
        load_agent(&self.sources)
    }
}

fn is_definition_file(path: &Path) -> bool {
    matches!(
        path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase).as_deref(),
        Some("yaml" | "yml" | "json")
    )
}

/// Folders a scan never enters: build output and installed packages.
const SKIPPED: &[&str] = &["target", "node_modules"];
/// Folders a scan of the current folder (no path given) also leaves out: test corpora hold
/// deliberately broken agents.
const SKIPPED_BY_DEFAULT: &[&str] = &["target", "node_modules", "tests", "fixtures", "testdata"];

fn sorted_entries(dir: &Path, skipped: &[&str]) -> Result<Vec<PathBuf>> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read directory {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            !p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with('.') || (p.is_dir() && skipped.contains(&n)))
        })
        .collect();
    entries.sort();
    Ok(entries)
}

fn read(path: &Path) -> Result<SourceFile> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    Ok(SourceFile::new(path.display().to_string(), text))
}

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    for entry in sorted_entries(dir, SKIPPED)? {
        if entry.is_dir() {
            files_under(&entry, out)?;
        } else if is_definition_file(&entry) {
            out.push(entry);
        }
    }
    Ok(())
}

fn agent_root_file(dir: &Path) -> Option<PathBuf> {
    ["agent.yaml", "agent.yml", "agent.json"].iter().map(|n| dir.join(n)).find(|p| p.is_file())
}

fn discover_into(path: &Path, skipped: &[&str], out: &mut Vec<FoundAgent>) -> Result<()> {
    if path.is_file() {
        out.push(FoundAgent { origin: path.to_path_buf(), sources: vec![read(path)?] });
        return Ok(());
    }
    if !path.is_dir() {
        bail!("{} does not exist", path.display());
    }
    if let Some(root) = agent_root_file(path) {
        let mut files = Vec::new();
        files_under(path, &mut files)?;
        // The file with the agent section comes first, so diagnostics about a missing
        // agent section point at it.
        files.sort_by_key(|f| f != &root);
        let sources = files.iter().map(|f| read(f)).collect::<Result<Vec<_>>>()?;
        out.push(FoundAgent { origin: path.to_path_buf(), sources });
        return Ok(());
    }
    for entry in sorted_entries(path, skipped)? {
        if entry.is_dir() {
            discover_into(&entry, skipped, out)?;
        } else if is_definition_file(&entry) {
            let source = read(&entry)?;
            if looks_like_definition(&source) {
                out.push(FoundAgent { origin: entry, sources: vec![source] });
            }
        }
    }
    Ok(())
}

/// Finds every agent under the given paths.
pub fn discover(paths: &[PathBuf]) -> Result<Vec<FoundAgent>> {
    let mut out = Vec::new();
    for path in paths {
        discover_into(path, SKIPPED, &mut out)?;
    }
    Ok(out)
}

/// Finds every agent under the current folder, leaving out test folders.
pub fn discover_here() -> Result<Vec<FoundAgent>> {
    let mut out = Vec::new();
    discover_into(Path::new("."), SKIPPED_BY_DEFAULT, &mut out)?;
    Ok(out)
}
