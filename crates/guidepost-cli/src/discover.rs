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

use anyhow::{Result, bail};
use guidepost_core::definition::text::decode;
use guidepost_core::definition::{Diagnostic, Loaded, SourceFile, load_agent, looks_like_definition};
use guidepost_core::files::{self, FileError, FolderWalk};
use guidepost_core::limits::Limits;

/// One agent found on disk.
pub struct FoundAgent {
    /// The file or directory that defines it.
    pub origin: PathBuf,
    /// Its files, read.
    pub sources: Vec<SourceFile>,
    /// Files that could not be decoded (too big, not UTF-8, control characters), each with a
    /// positioned diagnostic.
    pub unreadable: Vec<Diagnostic>,
}

impl FoundAgent {
    /// Loads and checks the agent; an unreadable file makes it fail with that file's
    /// diagnostic beside the others.
    pub fn load(&self) -> Loaded {
        if self.sources.is_empty() && !self.unreadable.is_empty() {
            return Loaded { definition: None, diagnostics: self.unreadable.clone() };
        }
        let mut loaded = load_agent(&self.sources);
        if !self.unreadable.is_empty() {
            loaded.definition = None;
            loaded.diagnostics.splice(0..0, self.unreadable.iter().cloned());
        }
        loaded
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

/// Reads a definition file through the one bounded reader: a file that is not a regular
/// file, too big, not UTF-8 or holding control characters is a diagnostic of that file.
fn read(path: &Path, limits: &Limits) -> std::result::Result<SourceFile, Diagnostic> {
    let name = path.display().to_string();
    let at_start = guidepost_core::definition::source::Span { line: 1, col: 1, len: 1 };
    match files::read(path, limits) {
        Ok(bytes) => decode(&name, bytes, limits),
        Err(FileError::Limit(error)) => Err(Diagnostic::error("limit", &name, at_start, error.to_string())),
        Err(error) => Err(Diagnostic::error("unreadable", &name, at_start, error.to_string())),
    }
}

/// A folder scan for agents: a [`FolderWalk`] (each real folder once, symlink loops refused,
/// bounded in files and links) and the rules of what makes an agent.
struct Scan<'a> {
    limits: &'a Limits,
    walk: FolderWalk<'a>,
}

impl Scan<'_> {
    fn files_under(&mut self, dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
        Ok(self.walk.files_under(dir, true, &is_definition_file, out)?)
    }

    fn discover_into(&mut self, path: &Path, out: &mut Vec<FoundAgent>) -> Result<()> {
        if !path.exists() {
            bail!("{} does not exist", path.display());
        }
        if !path.is_dir() {
            let (sources, unreadable) = split(vec![read(path, self.limits)]);
            out.push(FoundAgent { origin: path.to_path_buf(), sources, unreadable });
            return Ok(());
        }
        if let Some(root) = agent_root_file(path) {
            let mut files = Vec::new();
            self.files_under(path, &mut files)?;
            // The file with the agent section comes first, so diagnostics about a missing
            // agent section point at it.
            files.sort_by_key(|f| f != &root);
            let (sources, unreadable) = split(files.iter().map(|f| read(f, self.limits)).collect());
            out.push(FoundAgent { origin: path.to_path_buf(), sources, unreadable });
            return Ok(());
        }
        let Some(entered) = self.walk.enter(path)? else { return Ok(()) };
        for entry in self.walk.entries(path)? {
            if entry.is_dir() {
                self.discover_into(&entry, out)?;
            } else if is_definition_file(&entry) {
                match read(&entry, self.limits) {
                    Ok(source) if looks_like_definition(&source) => {
                        out.push(FoundAgent { origin: entry, sources: vec![source], unreadable: Vec::new() })
                    }
                    Ok(_) => {}
                    // A file that cannot even be read or decoded is reported rather than skipped.
                    Err(problem) => {
                        out.push(FoundAgent { origin: entry, sources: Vec::new(), unreadable: vec![problem] })
                    }
                }
            }
        }
        self.walk.leave(entered);
        Ok(())
    }
}

fn split(read: Vec<std::result::Result<SourceFile, Diagnostic>>) -> (Vec<SourceFile>, Vec<Diagnostic>) {
    let mut sources = Vec::new();
    let mut unreadable = Vec::new();
    for file in read {
        match file {
            Ok(source) => sources.push(source),
            Err(problem) => unreadable.push(problem),
        }
    }
    (sources, unreadable)
}

/// The file that makes a folder one agent: `agent.yaml` (or `.yml`, `.json`), whatever kind of
/// file it is (a FIFO named so is refused when read, not taken for a collection).
fn agent_root_file(dir: &Path) -> Option<PathBuf> {
    ["agent.yaml", "agent.yml", "agent.json"].iter().map(|n| dir.join(n)).find(|p| p.exists() && !p.is_dir())
}

fn scan<'a>(skipped: &'a [&'a str]) -> Scan<'a> {
    let limits = Limits::global();
    Scan { limits, walk: FolderWalk::new(limits, skipped) }
}

/// Finds every agent under the given paths.
pub fn discover(paths: &[PathBuf]) -> Result<Vec<FoundAgent>> {
    let mut out = Vec::new();
    for path in paths {
        scan(SKIPPED).discover_into(path, &mut out)?;
    }
    Ok(out)
}

/// Finds every agent under the current folder, leaving out test folders.
pub fn discover_here() -> Result<Vec<FoundAgent>> {
    let mut out = Vec::new();
    scan(SKIPPED_BY_DEFAULT).discover_into(Path::new("."), &mut out)?;
    Ok(out)
}
