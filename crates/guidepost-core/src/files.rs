//! Reading the files and folders a user names: the one way every command and service reads
//! them (agent definitions, scenarios, decision cases, recordings, the configuration file, API
//! key files, OpenAPI documents, simulation reports).
//!
//! A path someone typed can name anything: a FIFO that blocks the reader until a writer comes,
//! `/dev/zero` that never ends, a socket, a folder that links back to itself. So:
//!
//! - only regular files are read. The file is opened without blocking (a FIFO opens at once
//!   instead of waiting for a writer), then what was opened is checked; a FIFO, device, socket
//!   or folder is a [`FileError::NotRegular`] naming the path and what it is;
//! - a file is read within [`Limit::FileSize`], checked before reading and again while reading
//!   (a file that grows is cut at the limit and one byte, never read whole first);
//! - a folder walk ([`FolderWalk`]) enters each real folder once, however many links lead to
//!   it, refuses a link back into a folder it is inside ([`FileError::SymlinkLoop`]) and is
//!   bounded in files ([`Limit::FilesPerScan`]) and in links followed in a row
//!   ([`Limit::SymlinkDepth`]).
//!
//! ```
//! use guidepost_core::files::{self, FileError};
//! use guidepost_core::limits::Limits;
//!
//! let dir = std::env::temp_dir().join(format!("guidepost-files-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir).unwrap();
//! std::fs::write(dir.join("a.yaml"), "agent: {name: A}\n").unwrap();
//! assert_eq!(files::read_text(&dir.join("a.yaml"), &Limits::default()).unwrap(), "agent: {name: A}\n");
//! let error = files::read(&dir, &Limits::default()).unwrap_err();
//! assert!(matches!(error, FileError::NotRegular { kind: "a folder", .. }));
//! # std::fs::remove_dir_all(&dir).unwrap();
//! ```

use std::collections::HashSet;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::limits::{Limit, LimitExceeded, Limits};

/// Why a user-named file or folder could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// The file system refused (missing, no permission, ...).
    #[error("cannot read {path}: {source}")]
    Io {
        /// The path as given.
        path: String,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// Not a regular file.
    #[error(
        "{path} is {kind}, not a regular file; Guidepost reads only regular files (a FIFO, device or socket can \
         block or never end)"
    )]
    NotRegular {
        /// The path as given.
        path: String,
        /// What it is instead: `a FIFO (named pipe)`, `a character device`, `a folder` ...
        kind: &'static str,
    },
    /// Too big, too many files in a walk, too many links in a row.
    #[error(transparent)]
    Limit(#[from] LimitExceeded),
    /// A link that leads back into a folder the walk is inside.
    #[error("symlink loop: {link} leads back to {target}, which contains it; remove the link or point it elsewhere")]
    SymlinkLoop {
        /// The link.
        link: String,
        /// The folder it leads to.
        target: String,
    },
    /// A text file that is not UTF-8.
    #[error("{path} is not valid UTF-8 text (invalid byte at offset {offset}); save it as UTF-8")]
    NotUtf8 {
        /// The path as given.
        path: String,
        /// Where the first invalid byte is.
        offset: usize,
    },
}

impl FileError {
    /// Whether the file does not exist (callers that treat a missing file as "none yet").
    pub fn is_not_found(&self) -> bool {
        matches!(self, FileError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    }

    fn io(path: &Path, source: std::io::Error) -> Self {
        FileError::Io { path: path.display().to_string(), source }
    }
}

/// What a file-system entry is, in words for messages, or `None` for a regular file.
fn irregular_kind(file_type: std::fs::FileType) -> Option<&'static str> {
    if file_type.is_file() {
        return None;
    }
    if file_type.is_dir() {
        return Some("a folder");
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if file_type.is_fifo() {
            return Some("a FIFO (named pipe)");
        }
        if file_type.is_char_device() {
            return Some("a character device");
        }
        if file_type.is_block_device() {
            return Some("a block device");
        }
        if file_type.is_socket() {
            return Some("a socket");
        }
    }
    Some("not a file")
}

/// Opens `path` for reading if it is a regular file (links followed), without ever blocking:
/// what was opened is checked, so a file swapped for a FIFO between a look and the open is
/// still refused. No size limit: for model weights and other large files read in parts.
pub fn open_regular(path: &Path) -> Result<std::fs::File, FileError> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // Opening a FIFO for reading waits for a writer unless it is non-blocking; for a
        // regular file the flag changes nothing.
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = options.open(path).map_err(|e| FileError::io(path, e))?;
    let meta = file.metadata().map_err(|e| FileError::io(path, e))?;
    if let Some(kind) = irregular_kind(meta.file_type()) {
        return Err(FileError::NotRegular { path: path.display().to_string(), kind });
    }
    Ok(file)
}

/// Reads a regular file of at most [`Limit::FileSize`] bytes.
pub fn read(path: &Path, limits: &Limits) -> Result<Vec<u8>, FileError> {
    read_within(path, limits.file_size, Limit::FileSize, limits)
}

/// Reads a regular file of at most `max` bytes, `limit` being the limit that sets `max` (named
/// in the error).
pub fn read_within(path: &Path, max: u64, limit: Limit, limits: &Limits) -> Result<Vec<u8>, FileError> {
    let name = path.display().to_string();
    let file = open_regular(path)?;
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    if size > max {
        return Err(limits.exceeded(limit, name, format!("{size} bytes")).into());
    }
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    file.take(max.saturating_add(1)).read_to_end(&mut bytes).map_err(|e| FileError::io(path, e))?;
    if u64::try_from(bytes.len()).unwrap_or(u64::MAX) > max {
        return Err(limits.exceeded(limit, name, format!("more than {max} bytes")).into());
    }
    Ok(bytes)
}

/// Reads a regular UTF-8 text file of at most [`Limit::FileSize`] bytes; a leading byte-order
/// mark is dropped.
pub fn read_text(path: &Path, limits: &Limits) -> Result<String, FileError> {
    let bytes = read(path, limits)?;
    let text = String::from_utf8(bytes)
        .map_err(|e| FileError::NotUtf8 { path: path.display().to_string(), offset: e.utf8_error().valid_up_to() })?;
    Ok(match text.strip_prefix('\u{feff}') {
        Some(rest) => rest.to_string(),
        None => text,
    })
}

/// A walk through folders: each real folder entered once, links back into a folder being
/// walked refused, bounded in files and in links followed in a row.
#[derive(Debug)]
pub struct FolderWalk<'a> {
    limits: &'a Limits,
    skipped: &'a [&'a str],
    /// Entries looked at so far.
    files: usize,
    /// Canonical folders entered so far.
    visited: HashSet<PathBuf>,
    /// Canonical folders from the walk's start down to the current one.
    ancestors: Vec<PathBuf>,
    /// Symbolic links followed to reach the current folder.
    links: usize,
}

/// A folder entered by [`FolderWalk::enter`], to be left with [`FolderWalk::leave`].
#[derive(Debug)]
#[must_use = "leave the folder with FolderWalk::leave"]
pub struct Entered {
    via_link: bool,
}

impl<'a> FolderWalk<'a> {
    /// A walk within `limits` that never enters folders named in `skipped` (nor hidden ones).
    pub fn new(limits: &'a Limits, skipped: &'a [&'a str]) -> Self {
        Self { limits, skipped, files: 0, visited: HashSet::new(), ancestors: Vec::new(), links: 0 }
    }

    /// Enters `dir`: `Ok(None)` when its real folder was walked already (through another link).
    pub fn enter(&mut self, dir: &Path) -> Result<Option<Entered>, FileError> {
        let via_link = dir.symlink_metadata().map(|m| m.file_type().is_symlink()).unwrap_or(false);
        let real = dir.canonicalize().map_err(|e| FileError::io(dir, e))?;
        if self.ancestors.contains(&real) {
            return Err(FileError::SymlinkLoop { link: dir.display().to_string(), target: real.display().to_string() });
        }
        if !self.visited.insert(real.clone()) {
            return Ok(None);
        }
        if via_link {
            self.links += 1;
            if self.links > self.limits.symlink_depth {
                let what = format!("{} symbolic links in a row", self.links);
                return Err(self.limits.exceeded(Limit::SymlinkDepth, dir.display().to_string(), what).into());
            }
        }
        self.ancestors.push(real);
        Ok(Some(Entered { via_link }))
    }

    /// Leaves the folder last entered.
    pub fn leave(&mut self, entered: Entered) {
        self.ancestors.pop();
        if entered.via_link {
            self.links -= 1;
        }
    }

    /// The entries of `dir`, sorted, without hidden ones and skipped folders, each counted
    /// against [`Limit::FilesPerScan`].
    pub fn entries(&mut self, dir: &Path) -> Result<Vec<PathBuf>, FileError> {
        let mut entries = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(|e| FileError::io(dir, e))? {
            let Ok(entry) = entry else { continue };
            let path = entry.path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            if name.starts_with('.') || (self.skipped.contains(&name) && path.is_dir()) {
                continue;
            }
            self.files += 1;
            if self.files > self.limits.files_per_scan {
                let what = format!("more than {} files", self.limits.files_per_scan);
                let subject = format!("scan reaching {}", path.display());
                return Err(self.limits.exceeded(Limit::FilesPerScan, subject, what).into());
            }
            entries.push(path);
        }
        entries.sort();
        Ok(entries)
    }

    /// The files under `dir` that `wanted` accepts (by name: a FIFO with a wanted name is
    /// listed, and refused when read), in subfolders too when `recursive`.
    pub fn files_under(
        &mut self,
        dir: &Path,
        recursive: bool,
        wanted: &dyn Fn(&Path) -> bool,
        out: &mut Vec<PathBuf>,
    ) -> Result<(), FileError> {
        let Some(entered) = self.enter(dir)? else { return Ok(()) };
        for entry in self.entries(dir)? {
            if entry.is_dir() {
                if recursive {
                    self.files_under(&entry, true, wanted, out)?;
                }
            } else if wanted(&entry) {
                out.push(entry);
            }
        }
        self.leave(entered);
        Ok(())
    }
}

/// The files `path` names: the path itself when it is not a folder (read it to find out
/// whether it is a regular file), or the files in the folder that `wanted` accepts (in
/// subfolders too when `recursive`), sorted. A path that does not exist is an error naming it.
pub fn files_at(
    path: &Path,
    recursive: bool,
    wanted: &dyn Fn(&Path) -> bool,
    limits: &Limits,
) -> Result<Vec<PathBuf>, FileError> {
    let meta = std::fs::metadata(path).map_err(|e| FileError::io(path, e))?;
    if !meta.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut out = Vec::new();
    FolderWalk::new(limits, &[]).files_under(path, recursive, wanted, &mut out)?;
    out.sort();
    Ok(out)
}

/// Whether `path` ends in `.yaml` or `.yml` (any case).
pub fn is_yaml(path: &Path) -> bool {
    matches!(path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase).as_deref(), Some("yaml" | "yml"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_over_the_limit_is_refused_naming_the_variable() {
        let dir = std::env::temp_dir().join(format!("guidepost-files-{}-big", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("big.yaml");
        std::fs::write(&file, "x".repeat(100)).unwrap();
        let limits = Limits { file_size: 10, ..Limits::default() };
        let error = read(&file, &limits).unwrap_err().to_string();
        assert!(error.contains("GUIDEPOST_MAX_FILE_BYTES") && error.contains("big.yaml"), "{error}");
        assert_eq!(read(&file, &Limits::default()).unwrap().len(), 100);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn devices_are_refused_without_reading() {
        let error = read(Path::new("/dev/zero"), &Limits::default()).unwrap_err();
        assert!(matches!(error, FileError::NotRegular { kind: "a character device", .. }), "{error}");
        assert!(error.to_string().starts_with("/dev/zero is a character device"), "{error}");
    }

    #[test]
    fn text_must_be_utf8() {
        let dir = std::env::temp_dir().join(format!("guidepost-files-{}-utf8", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("a"), b"ab\xFFc").unwrap();
        std::fs::write(dir.join("b"), "\u{feff}hi").unwrap();
        let error = read_text(&dir.join("a"), &Limits::default()).unwrap_err();
        assert!(matches!(error, FileError::NotUtf8 { offset: 2, .. }), "{error}");
        assert_eq!(read_text(&dir.join("b"), &Limits::default()).unwrap(), "hi");
        assert!(read_text(&dir.join("c"), &Limits::default()).unwrap_err().is_not_found());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
