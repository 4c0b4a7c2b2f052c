//! Reads of a SQLite file on the calling thread.
//!
//! sqlx runs each SQLite statement on a thread of the connection's own and hands the rows
//! back: two thread wake-ups per statement. A point read (a session by id) took about 100 µs
//! of CPU that way against 2-4 µs on the calling thread (`examples/hop_cost.rs`, release build, a
//! file in WAL mode). The reads a turn and a long poll make are point reads and bounded
//! pages, so on a SQLite file they run here, on read-only connections kept beside sqlx's
//! pools: in WAL mode each statement sees the last commit and holds up no writer. Writes,
//! and reads that are unbounded (whole listings), stay with sqlx.
//!
//! The statements are the store's own: the same SQL with `$N` parameters as the other
//! backends, decoded by the same functions through [`Columns`].

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags, StatementStatus};
use sqlx::Row;
use sqlx::any::AnyRow;

use crate::error::{Result, StoreError};

/// A value bound to a statement's `$N` parameter (`N` is its place in the slice, from 1).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Arg<'a> {
    Text(&'a str),
    Int(i64),
}

/// A row's columns by name, whichever driver read it.
pub(crate) trait Columns {
    fn text(&self, name: &str) -> Result<String>;
    fn opt_text(&self, name: &str) -> Result<Option<String>>;
    fn int(&self, name: &str) -> Result<i64>;
    fn opt_int(&self, name: &str) -> Result<Option<i64>>;
    fn bytes(&self, name: &str) -> Result<Vec<u8>>;
}

impl Columns for AnyRow {
    fn text(&self, name: &str) -> Result<String> {
        Ok(self.try_get(name)?)
    }

    fn opt_text(&self, name: &str) -> Result<Option<String>> {
        Ok(self.try_get(name)?)
    }

    fn int(&self, name: &str) -> Result<i64> {
        Ok(self.try_get(name)?)
    }

    fn opt_int(&self, name: &str) -> Result<Option<i64>> {
        Ok(self.try_get(name)?)
    }

    fn bytes(&self, name: &str) -> Result<Vec<u8>> {
        Ok(self.try_get(name)?)
    }
}

impl Columns for rusqlite::Row<'_> {
    fn text(&self, name: &str) -> Result<String> {
        Ok(self.get(name)?)
    }

    fn opt_text(&self, name: &str) -> Result<Option<String>> {
        Ok(self.get(name)?)
    }

    fn int(&self, name: &str) -> Result<i64> {
        Ok(self.get(name)?)
    }

    fn opt_int(&self, name: &str) -> Result<Option<i64>> {
        Ok(self.get(name)?)
    }

    fn bytes(&self, name: &str) -> Result<Vec<u8>> {
        match self.get_ref(name)? {
            ValueRef::Blob(b) | ValueRef::Text(b) => Ok(b.to_vec()),
            other => Err(StoreError::Invalid(format!("column `{name}` holds {:?}, not bytes", other.data_type()))),
        }
    }
}

/// Connections kept idle at most; more are opened while more threads read at once.
const KEPT: usize = 4;

/// Statements each connection keeps prepared.
const PREPARED: usize = 64;

/// Read-only connections to a SQLite file, used on the thread that reads.
#[derive(Debug)]
pub(crate) struct DirectReader {
    path: PathBuf,
    idle: Mutex<Vec<Connection>>,
    /// Times a kept statement was prepared again before it ran (its text is what is kept;
    /// SQLite compiles it again when, say, a value bound to a subquery's LIMIT changed).
    reprepared: AtomicU64,
}

impl DirectReader {
    pub(crate) fn new(path: &Path) -> Self {
        Self { path: path.to_path_buf(), idle: Mutex::new(Vec::new()), reprepared: AtomicU64::new(0) }
    }

    fn connection(&self) -> Result<Connection> {
        if let Some(connection) = self.idle.lock().unwrap_or_else(PoisonError::into_inner).pop() {
            return Ok(connection);
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let connection = Connection::open_with_flags(&self.path, flags)?;
        connection.busy_timeout(Duration::from_secs(10))?;
        connection.pragma_update(None, "query_only", true)?;
        connection.set_prepared_statement_cache_capacity(PREPARED);
        Ok(connection)
    }

    fn give_back(&self, connection: Connection) {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        if idle.len() < KEPT {
            idle.push(connection);
        }
    }

    /// How many times a kept statement was prepared again so far.
    #[cfg(test)]
    pub(crate) fn reprepared(&self) -> u64 {
        self.reprepared.load(Ordering::Relaxed)
    }

    /// The rows `sql` reads with `args`, each made by `decode`.
    pub(crate) fn rows<T>(
        &self,
        sql: &str,
        args: &[Arg<'_>],
        decode: impl Fn(&dyn Columns) -> Result<T>,
    ) -> Result<Vec<T>> {
        let connection = self.connection()?;
        let rows = read(&connection, sql, args, decode, &self.reprepared);
        // A connection that failed may be broken: it is not kept.
        if rows.is_ok() {
            self.give_back(connection);
        }
        rows
    }
}

fn read<T>(
    connection: &Connection,
    sql: &str,
    args: &[Arg<'_>],
    decode: impl Fn(&dyn Columns) -> Result<T>,
    reprepared: &AtomicU64,
) -> Result<Vec<T>> {
    let mut statement = connection.prepare_cached(sql)?;
    for index in 1..=statement.parameter_count() {
        let name = statement.parameter_name(index).unwrap_or_default();
        let arg = name
            .strip_prefix('$')
            .and_then(|n| n.parse::<usize>().ok())
            .and_then(|n| n.checked_sub(1))
            .and_then(|n| args.get(n))
            .ok_or_else(|| StoreError::Invalid(format!("no value for the parameter `{name}` of `{sql}`")))?;
        match *arg {
            Arg::Text(text) => statement.raw_bind_parameter(index, text)?,
            Arg::Int(int) => statement.raw_bind_parameter(index, int)?,
        }
    }
    let mut rows = statement.raw_query();
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        out.push(decode(row)?);
    }
    drop(rows);
    let again = statement.reset_status(StatementStatus::RePrepare);
    if again > 0 {
        reprepared.fetch_add(u64::try_from(again).unwrap_or(0), Ordering::Relaxed);
    }
    Ok(out)
}
