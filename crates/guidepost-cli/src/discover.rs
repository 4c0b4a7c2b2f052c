//! Finding agent definitions on disk.
//!
//! A path is either a definition file (one agent) or a directory. A directory that holds
//! an `agent.yaml` (or `.yml`, `.json`) is one agent made of all definition files under
//! it; any other directory is a collection: each definition file directly in it is an
//! agent, and each subdirectory is searched the same way. A collection scan skips hidden
//! folders, build output (`target`, `node_modules`) and files that are not agent
//! definitions (scenarios, recordings, other configuration); a file named on the command
//! line is always loaded.

use std::collections::HashSet;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use guidepost_core::definition::text::decode;
use guidepost_core::definition::{Diagnostic, Loaded, SourceFile, load_agent, looks_like_definition};
use guidepost_core::limits::{Limit, Limits};

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

/// Reads a file of at most [`Limit::FileSize`] bytes; the size is checked before reading and
/// again while reading (the file may grow, or be a device that never ends).
pub fn read_bounded(path: &Path, limits: &Limits) -> Result<std::result::Result<Vec<u8>, Diagnostic>> {
    let name = path.display().to_string();
    let too_big = |size: u64| {
        let error = limits.exceeded(Limit::FileSize, &name, format!("{size} bytes"));
        Diagnostic::error(
            "limit",
            &name,
            guidepost_core::definition::source::Span { line: 1, col: 1, len: 1 },
            error.to_string(),
        )
    };
    let file = std::fs::File::open(path).with_context(|| format!("cannot read {name}"))?;
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    if size > limits.file_size {
        return Ok(Err(too_big(size)));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    file.take(limits.file_size.saturating_add(1))
        .read_to_end(&mut bytes)
        .with_context(|| format!("cannot read {name}"))?;
    if u64::try_from(bytes.len()).unwrap_or(u64::MAX) > limits.file_size {
        return Ok(Err(too_big(u64::try_from(bytes.len()).unwrap_or(u64::MAX))));
    }
    Ok(Ok(bytes))
}

/// A folder scan: bounded in files and symlink depth, and refusing symlink loops.
struct Scan<'a> {
    limits: &'a Limits,
    skipped: &'a [&'a str],
    /// Files looked at so far.
    files: usize,
    /// Canonical folders entered so far (a folder reached twice through links is scanned once).
    visited: HashSet<PathBuf>,
    /// Canonical folders from the scan's start down to the current one.
    ancestors: Vec<PathBuf>,
    /// Symbolic links followed to reach the current folder.
    links: usize,
}

/// What [`Scan::enter`] decided about a folder.
enum Entry {
    /// Scan it (and leave it with [`Scan::leave`]).
    Scan { via_link: bool },
    /// Already scanned through another path.
    Seen,
}

impl Scan<'_> {
    fn enter(&mut self, dir: &Path) -> Result<Entry> {
        let via_link = dir.symlink_metadata().map(|m| m.file_type().is_symlink()).unwrap_or(false);
        let real = dir.canonicalize().with_context(|| format!("cannot resolve {}", dir.display()))?;
        if self.ancestors.contains(&real) {
            bail!(
                "symlink loop: {} leads back to {}, which contains it; remove the link or point it elsewhere",
                dir.display(),
                real.display()
            );
        }
        if !self.visited.insert(real.clone()) {
            return Ok(Entry::Seen);
        }
        if via_link {
            self.links += 1;
            if self.links > self.limits.symlink_depth {
                let what = format!("{} symbolic links in a row", self.links);
                bail!(self.limits.exceeded(Limit::SymlinkDepth, dir.display().to_string(), what));
            }
        }
        self.ancestors.push(real);
        Ok(Entry::Scan { via_link })
    }

    fn leave(&mut self, via_link: bool) {
        self.ancestors.pop();
        if via_link {
            self.links -= 1;
        }
    }

    fn count_file(&mut self, path: &Path) -> Result<()> {
        self.files += 1;
        if self.files > self.limits.files_per_scan {
            let what = format!("more than {} files", self.limits.files_per_scan);
            bail!(self.limits.exceeded(Limit::FilesPerScan, format!("scan reaching {}", path.display()), what));
        }
        Ok(())
    }

    fn sorted_entries(&mut self, dir: &Path) -> Result<Vec<PathBuf>> {
        let skipped = self.skipped;
        let mut entries = Vec::new();
        for entry in std::fs::read_dir(dir).with_context(|| format!("cannot read directory {}", dir.display()))? {
            let Ok(entry) = entry else { continue };
            let p = entry.path();
            let hidden = p
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with('.') || (p.is_dir() && skipped.contains(&n)));
            if !hidden {
                self.count_file(&p)?;
                entries.push(p);
            }
        }
        entries.sort();
        Ok(entries)
    }

    fn files_under(&mut self, dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
        let Entry::Scan { via_link } = self.enter(dir)? else { return Ok(()) };
        for entry in self.sorted_entries(dir)? {
            if entry.is_dir() {
                self.files_under(&entry, out)?;
            } else if is_definition_file(&entry) {
                out.push(entry);
            }
        }
        self.leave(via_link);
        Ok(())
    }

    fn read(&self, path: &Path) -> Result<std::result::Result<SourceFile, Diagnostic>> {
        let name = path.display().to_string();
        Ok(read_bounded(path, self.limits)?.and_then(|bytes| decode(&name, bytes, self.limits)))
    }

    fn discover_into(&mut self, path: &Path, out: &mut Vec<FoundAgent>) -> Result<()> {
        if path.is_file() {
            let (sources, unreadable) = split(vec![self.read(path)?]);
            out.push(FoundAgent { origin: path.to_path_buf(), sources, unreadable });
            return Ok(());
        }
        if !path.is_dir() {
            bail!("{} does not exist", path.display());
        }
        if let Some(root) = agent_root_file(path) {
            let mut files = Vec::new();
            self.files_under(path, &mut files)?;
            // The file with the agent section comes first, so diagnostics about a missing
            // agent section point at it.
            files.sort_by_key(|f| f != &root);
            let read = files.iter().map(|f| self.read(f)).collect::<Result<Vec<_>>>()?;
            let (sources, unreadable) = split(read);
            out.push(FoundAgent { origin: path.to_path_buf(), sources, unreadable });
            return Ok(());
        }
        let Entry::Scan { via_link } = self.enter(path)? else { return Ok(()) };
        for entry in self.sorted_entries(path)? {
            if entry.is_dir() {
                self.discover_into(&entry, out)?;
            } else if is_definition_file(&entry) {
                match self.read(&entry)? {
                    Ok(source) if looks_like_definition(&source) => {
                        out.push(FoundAgent { origin: entry, sources: vec![source], unreadable: Vec::new() })
                    }
                    Ok(_) => {}
                    // A file that cannot even be decoded is reported rather than skipped.
                    Err(problem) => {
                        out.push(FoundAgent { origin: entry, sources: Vec::new(), unreadable: vec![problem] })
                    }
                }
            }
        }
        self.leave(via_link);
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

fn agent_root_file(dir: &Path) -> Option<PathBuf> {
    ["agent.yaml", "agent.yml", "agent.json"].iter().map(|n| dir.join(n)).find(|p| p.is_file())
}

fn scan<'a>(skipped: &'a [&'a str]) -> Scan<'a> {
    Scan { limits: Limits::global(), skipped, files: 0, visited: HashSet::new(), ancestors: Vec::new(), links: 0 }
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
