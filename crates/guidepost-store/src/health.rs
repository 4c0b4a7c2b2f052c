//! Whether a SQLite store's file is still the one it opened.
//!
//! SQLite writes through the file it opened. When someone deletes that file, or moves another
//! one into its place, every write still succeeds, into a file no path leads to any more, and
//! everything is gone at the next start. A file made read-only cannot be opened for writing
//! again either. So the store remembers which file it opened (device and inode) and looks at
//! the path again before every write and every health check: a file that is gone, replaced or
//! no longer writable makes writes fail with [`StoreError::Unavailable`] (logged once) instead
//! of disappearing.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::error::{Result, StoreError};

/// The file of a SQLite store and what it was when the store opened it.
#[derive(Debug)]
pub(crate) struct DatabaseFile {
    path: PathBuf,
    identity: Identity,
    /// The problem logged last (each is logged once, not at every write).
    reported: Mutex<Option<String>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Identity {
    device: u64,
    inode: u64,
}

fn identity(meta: &std::fs::Metadata) -> Identity {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        Identity { device: meta.dev(), inode: meta.ino() }
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        Identity { device: 0, inode: 0 }
    }
}

/// Why a file at `path` with `meta` cannot be written, if it cannot: no write permission for
/// anyone (the owner made it read-only; even a process that could still write it should not).
fn read_only(path: &Path, meta: &std::fs::Metadata) -> Option<String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = meta.permissions().mode();
        (mode & 0o222 == 0).then(|| {
            format!(
                "the database file {} is read-only (mode {:o}); make it writable (chmod u+w) and start again",
                path.display(),
                mode & 0o777
            )
        })
    }
    #[cfg(not(unix))]
    {
        meta.permissions()
            .readonly()
            .then(|| format!("the database file {} is read-only; make it writable and start again", path.display()))
    }
}

impl DatabaseFile {
    /// The file at `path` as it is now, which must be writable.
    pub(crate) fn opened(path: &Path) -> Result<Self> {
        let meta = std::fs::metadata(path).map_err(|e| {
            StoreError::Unavailable(format!("cannot look at the database file {}: {e}", path.display()))
        })?;
        if let Some(problem) = read_only(path, &meta) {
            return Err(StoreError::Unavailable(problem));
        }
        Ok(Self { path: path.to_path_buf(), identity: identity(&meta), reported: Mutex::new(None) })
    }

    /// `Ok` while the path still leads to the file the store opened and it may be written.
    pub(crate) fn check(&self) -> Result<()> {
        let problem = match std::fs::metadata(&self.path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some(format!(
                "the database file {} was removed while the server ran; what is written now would be lost, so \
                 nothing is: restore the file or restart the server",
                self.path.display()
            )),
            Err(e) => Some(format!("cannot look at the database file {}: {e}", self.path.display())),
            Ok(meta) if identity(&meta) != self.identity => Some(format!(
                "the database file {} was replaced by another file while the server ran; nothing is written into \
                 either: restart the server to use the new file",
                self.path.display()
            )),
            Ok(meta) => read_only(&self.path, &meta),
        };
        let mut reported = self.reported.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match problem {
            None => {
                if reported.take().is_some() {
                    tracing::info!(path = %self.path.display(), "the database file is usable again");
                }
                Ok(())
            }
            Some(problem) => {
                if reported.as_deref() != Some(problem.as_str()) {
                    tracing::error!(path = %self.path.display(), "{problem}");
                    *reported = Some(problem.clone());
                }
                Err(StoreError::Unavailable(problem))
            }
        }
    }
}

/// The file a SQLite URL names (`sqlite://PATH?...`, `sqlite:PATH`), or `None` for memory and
/// other backends.
pub(crate) fn sqlite_file(url: &str) -> Option<PathBuf> {
    let rest = url.strip_prefix("sqlite://").or_else(|| url.strip_prefix("sqlite:"))?;
    let path = rest.split('?').next().unwrap_or_default();
    (!path.is_empty() && !path.starts_with(":memory:") && !rest.contains("mode=memory")).then(|| PathBuf::from(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_urls_name_their_file() {
        assert_eq!(sqlite_file("sqlite://.guidepost/g.db?mode=rwc"), Some(PathBuf::from(".guidepost/g.db")));
        assert_eq!(sqlite_file("sqlite:///tmp/g.db"), Some(PathBuf::from("/tmp/g.db")));
        assert_eq!(sqlite_file("sqlite::memory:"), None);
        assert_eq!(sqlite_file("postgres://u@h/db"), None);
    }
}
