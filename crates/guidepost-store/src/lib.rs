//! Guidepost's storage: agents and their definitions, customers, sessions, events, turns,
//! context variable values and the embedding cache.
//!
//! One [`Store`] runs on SQLite (the embedded default: a file, or memory) or PostgreSQL
//! (to scale past one process), through one code path: runtime queries on sqlx's `Any`
//! driver, migrations per backend applied when the store opens.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! use guidepost_store::{Store, Record, Write};
//! use guidepost_core::Tag;
//!
//! let store = Store::open("sqlite::memory:").await?;
//! let tag = Record::new("vip", Tag { id: "vip".into(), name: "VIP".into(), description: None });
//! store.apply(vec![Write::insert(&tag)?]).await?;
//! let read = store.get::<Tag>("vip").await?.expect("stored");
//! assert_eq!(read.entity.name, "VIP");
//! assert_eq!(store.revision().await?, 1);
//! # Ok::<(), guidepost_store::StoreError>(())
//! # }).unwrap();
//! ```
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

mod commit;
pub mod db;
pub mod definitions;
mod direct;
pub mod documents;
pub mod embeddings;
pub mod error;
pub mod events;
mod health;
pub mod hub;
pub mod ids;
pub mod rates;
pub mod sessions;
pub mod tool_calls;
pub mod turns;
pub mod values;

use std::sync::Arc;

use sqlx::any::AnyArguments;
use sqlx::{AnyPool, AssertSqlSafe, Row};

use crate::direct::{Arg, Columns};

pub use db::Backend;
pub use documents::{Collection, Cursor, Entity, Origin, Page, PageRequest, Record, Sort, Write};
pub use error::{Result, StoreError};
pub use events::{EventFilter, EventPage, NewEventRecord};
pub use hub::{AppendedEvent, EventsChange, SessionHub};
pub use sessions::SessionFilter;
pub use turns::{TurnRecord, TurnState};

/// What [`Store::on_writer`]'s work returns: statements run on the writer's connection.
pub(crate) type WriterFuture<'c, T> = std::pin::Pin<Box<dyn Future<Output = Result<T>> + Send + 'c>>;

/// Updates retried this many times when a concurrent writer got there first.
const CAS_ATTEMPTS: usize = 16;

/// The store. Cheap to clone; every clone shares the pool and the wake-up hub.
#[derive(Clone)]
pub struct Store {
    /// Writes (and, on PostgreSQL and in memory, reads).
    pool: AnyPool,
    /// Reads: on a SQLite file, connections of their own beside the one writer.
    reader: AnyPool,
    backend: Backend,
    hub: Arc<SessionHub>,
    vector_search: bool,
    /// A SQLite store's file, looked at again before each write.
    file: Option<Arc<health::DatabaseFile>>,
    /// On a SQLite file: point reads on the calling thread.
    direct: Option<Arc<direct::DirectReader>>,
    /// In memory: the connection that keeps the database alive while the writer's
    /// connection is replaced.
    _memory: Option<AnyPool>,
    /// SQLite: the writes of [`Store::on_writer`] waiting to be committed together.
    group: Arc<commit::GroupCommit>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("backend", &self.backend).field("vector_search", &self.vector_search).finish()
    }
}

impl Store {
    /// Opens the database at `url` and applies pending migrations:
    /// `sqlite://PATH` (created if missing), `sqlite::memory:` or `postgres://...`.
    pub async fn open(url: &str) -> Result<Self> {
        Self::open_with(url, 16).await
    }

    /// As [`Store::open`], with at most `max_connections` PostgreSQL connections.
    pub async fn open_with(url: &str, max_connections: u32) -> Result<Self> {
        let url = db::name_memory_database(&normalize_sqlite_url(url));
        let path = health::sqlite_file(&url);
        // A file that exists but may not be written is refused before SQLite opens it
        // (read-only, it would serve reads and fail every write).
        if let Some(path) = path.as_deref().filter(|p| p.exists()) {
            health::DatabaseFile::opened(path)?;
        }
        let (pool, reader, backend) = db::connect(&url, max_connections).await?;
        let memory = db::memory_keeper(&url).await?;
        db::migrate(&pool, backend).await?;
        rates::prepare(&pool).await?;
        let file = match &path {
            Some(path) => {
                db::probe_write(&pool, path).await?;
                Some(Arc::new(health::DatabaseFile::opened(path)?))
            }
            None => None,
        };
        let direct = path.as_deref().map(|p| Arc::new(direct::DirectReader::new(p)));
        let vector_search = backend == Backend::Postgres && db::enable_pgvector(&pool).await;
        let hub = Arc::new(SessionHub::default());
        if backend == Backend::Postgres {
            listen(&url, hub.clone()).await?;
        }
        Ok(Self { pool, reader, backend, hub, vector_search, file, direct, _memory: memory, group: Arc::default() })
    }

    /// The pool to write through, once the store's file is known to be the one it opened and
    /// writable (SQLite); a removed, replaced or read-only file is [`StoreError::Unavailable`].
    pub(crate) fn writer(&self) -> Result<&AnyPool> {
        if let Some(file) = &self.file {
            file.check()?;
        }
        Ok(&self.pool)
    }

    /// SQLite: runs `work` on the writer's connection (the only one, so nothing else of this
    /// process writes meanwhile) inside a transaction it may share with other writes, and
    /// returns its result once that transaction is committed (see [`commit`]). `work` opens
    /// its savepoint with [`commit::OPEN`] and, when it succeeds, closes it with
    /// [`commit::CLOSE`]; when it fails, what it wrote is undone. It runs in a task of its
    /// own, so a caller that stops waiting cannot leave a transaction open.
    pub(crate) async fn on_writer<T, F>(&self, work: F) -> Result<T>
    where
        T: Send + 'static,
        F: for<'c> FnOnce(&'c mut sqlx::AnyConnection) -> WriterFuture<'c, T> + Send + 'static,
    {
        let pool = self.writer()?;
        self.group.run(pool, work).await
    }

    /// Runs one statement that writes and returns how many rows it changed. On SQLite it is a
    /// write of [`Store::on_writer`], committed with the writes around it (one statement needs
    /// no savepoint: SQLite undoes a statement that fails, alone); elsewhere it runs through
    /// the pool.
    pub(crate) async fn write_statement(
        &self,
        query: sqlx::query::Query<'static, sqlx::Any, AnyArguments>,
    ) -> Result<u64> {
        if self.backend != Backend::Sqlite {
            return Ok(query.execute(self.writer()?).await?.rows_affected());
        }
        self.on_writer(move |connection| {
            Box::pin(async move { Ok(query.execute(&mut *connection).await?.rows_affected()) })
        })
        .await
    }

    /// Whether the store can be read and written: the database answers and, for a SQLite file,
    /// the file is still the one the store opened and writable.
    pub async fn health(&self) -> Result<()> {
        self.ping().await?;
        self.writer().map(|_| ())
    }

    /// A SQLite file at `path` (created, with its folder, if missing).
    pub async fn open_sqlite_file(path: &std::path::Path) -> Result<Self> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| StoreError::Invalid(format!("cannot create {}: {e}", dir.display())))?;
        }
        Self::open(&format!("sqlite://{}?mode=rwc", path.display())).await
    }

    /// A store in memory, gone when the process ends.
    pub async fn ephemeral() -> Result<Self> {
        Self::open("sqlite::memory:").await
    }

    /// Which database this is.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Whether nearest-neighbour search runs in the database (PostgreSQL with pgvector).
    pub fn has_vector_search(&self) -> bool {
        self.vector_search
    }

    /// The wake-up hub of session events.
    pub fn hub(&self) -> &Arc<SessionHub> {
        &self.hub
    }

    /// The pool, for code that needs a backend-specific feature.
    pub fn pool(&self) -> &AnyPool {
        &self.pool
    }

    /// The pool reads go through: on a SQLite file, read-only connections beside the writer
    /// (the same pool as [`Store::pool`] otherwise).
    pub fn read_pool(&self) -> &AnyPool {
        &self.reader
    }

    /// Closes the pools, waiting for connections to be returned.
    pub async fn close(&self) {
        self.reader.close().await;
        self.pool.close().await;
        if let Some(memory) = &self._memory {
            memory.close().await;
        }
    }

    /// Whether the database answers.
    pub async fn ping(&self) -> Result<()> {
        sqlx::query("SELECT 1 AS one").fetch_one(&self.reader).await?;
        Ok(())
    }

    /// The rows a read of `sql` with `args` finds, each made by `decode`: on a SQLite file
    /// on this thread (see [`direct`]), else through the read pool. For point reads and
    /// bounded pages only: a read here holds up the thread until it ends.
    pub(crate) async fn read_rows<T>(
        &self,
        sql: &str,
        args: &[Arg<'_>],
        decode: impl Fn(&dyn Columns) -> Result<T>,
    ) -> Result<Vec<T>> {
        self.read_rows_where(true, sql, args, decode).await
    }

    /// As [`Store::read_rows`], on this thread only when `bounded` says the read is small
    /// enough to hold the thread for; else through the read pool, whose connections have
    /// threads of their own.
    pub(crate) async fn read_rows_where<T>(
        &self,
        bounded: bool,
        sql: &str,
        args: &[Arg<'_>],
        decode: impl Fn(&dyn Columns) -> Result<T>,
    ) -> Result<Vec<T>> {
        if let Some(direct) = self.direct.as_ref().filter(|_| bounded) {
            return direct.rows(sql, args, decode);
        }
        let mut query = sqlx::query(AssertSqlSafe(sql.to_string()));
        for arg in args {
            query = match *arg {
                Arg::Text(text) => query.bind(text.to_string()),
                Arg::Int(int) => query.bind(int),
            };
        }
        let rows = query.fetch_all(&self.reader).await?;
        rows.iter().map(|row| decode(row)).collect()
    }

    /// The first row [`Store::read_rows`] finds, if any.
    pub(crate) async fn read_row<T>(
        &self,
        sql: &str,
        args: &[Arg<'_>],
        decode: impl Fn(&dyn Columns) -> Result<T>,
    ) -> Result<Option<T>> {
        Ok(self.read_rows(sql, args, decode).await?.into_iter().next())
    }

    /// The definition revision: bumped by every change to a definition entity.
    pub async fn revision(&self) -> Result<i64> {
        let revision = self
            .read_row("SELECT revision FROM definition_revision WHERE id = 1", &[], |row| row.int("revision"))
            .await?;
        revision.ok_or_else(|| StoreError::Invalid("the definition revision row is missing".into()))
    }

    /// Applies writes in one transaction: all or none.
    pub async fn apply(&self, writes: Vec<Write>) -> Result<()> {
        if writes.is_empty() {
            return Ok(());
        }
        let definition = writes.iter().any(Write::touches_definition);
        let mut tx = self.writer()?.begin().await?;
        if definition {
            // First, so that on PostgreSQL concurrent definition writers queue on this row
            // instead of deadlocking on the documents they touch.
            sqlx::query("UPDATE definition_revision SET revision = revision + 1 WHERE id = 1")
                .execute(&mut *tx)
                .await?;
        }
        for write in writes {
            write.apply(&mut tx).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// The document with this id.
    pub async fn get<T: Entity>(&self, id: &str) -> Result<Option<Record<T>>> {
        let sql = "SELECT id, created_us, origin, version, data FROM documents WHERE collection = $1 AND id = $2";
        let args = [Arg::Text(T::COLLECTION.name()), Arg::Text(id)];
        self.read_row(sql, &args, Record::from_row).await
    }

    /// The document with this id, or `NotFound`.
    pub async fn require<T: Entity>(&self, id: &str) -> Result<Record<T>> {
        self.get(id).await?.ok_or_else(|| StoreError::NotFound { kind: T::COLLECTION.noun(), id: id.to_string() })
    }

    /// Every document of the collection, oldest first.
    pub async fn list<T: Entity>(&self) -> Result<Vec<Record<T>>> {
        let rows = sqlx::query(
            "SELECT id, created_us, origin, version, data FROM documents WHERE collection = $1 ORDER BY created_us, id",
        )
        .bind(T::COLLECTION.name())
        .fetch_all(&self.reader)
        .await?;
        rows.iter().map(|row| Record::from_row(row)).collect()
    }

    /// Documents that came from this origin, oldest first (one indexed query, whatever else
    /// the collection holds).
    pub async fn list_from<T: Entity>(&self, origin: &Origin) -> Result<Vec<Record<T>>> {
        let rows = sqlx::query(
            "SELECT id, created_us, origin, version, data FROM documents WHERE origin = $1 AND collection = $2 \
             ORDER BY created_us, id",
        )
        .bind(origin.encode())
        .bind(T::COLLECTION.name())
        .fetch_all(&self.reader)
        .await?;
        rows.iter().map(|row| Record::from_row(row)).collect()
    }

    /// Every document that came from this origin, in any collection, keyed by collection
    /// name and id (one indexed query).
    pub(crate) async fn rows_from(
        &self,
        origin: &Origin,
    ) -> Result<std::collections::HashMap<(String, String), sqlx::any::AnyRow>> {
        let rows =
            sqlx::query("SELECT collection, id, created_us, origin, version, data FROM documents WHERE origin = $1")
                .bind(origin.encode())
                .fetch_all(&self.reader)
                .await?;
        let mut out = std::collections::HashMap::with_capacity(rows.len());
        for row in rows {
            out.insert((row.try_get::<String, _>("collection")?, row.try_get::<String, _>("id")?), row);
        }
        Ok(out)
    }

    /// One page of the collection in creation order.
    pub async fn page<T: Entity>(&self, request: &PageRequest) -> Result<Page<Record<T>>> {
        let total: i64 = sqlx::query("SELECT COUNT(*) AS n FROM documents WHERE collection = $1")
            .bind(T::COLLECTION.name())
            .fetch_one(&self.reader)
            .await?
            .try_get("n")?;
        let (cmp, order) = match request.sort {
            Sort::Ascending => (">", "ASC"),
            Sort::Descending => ("<", "DESC"),
        };
        let fetch = i64::from(request.limit) + 1;
        let rows = match &request.cursor {
            Some(c) => {
                let sql = format!(
                    "SELECT id, created_us, origin, version, data FROM documents WHERE collection = $1 \
                     AND (created_us {cmp} $2 OR (created_us = $2 AND id {cmp} $3)) \
                     ORDER BY created_us {order}, id {order} LIMIT $4"
                );
                sqlx::query(AssertSqlSafe(sql))
                    .bind(T::COLLECTION.name())
                    .bind(c.created_us)
                    .bind(&c.id)
                    .bind(fetch)
                    .fetch_all(&self.reader)
                    .await?
            }
            None => {
                let sql = format!(
                    "SELECT id, created_us, origin, version, data FROM documents WHERE collection = $1 \
                     ORDER BY created_us {order}, id {order} LIMIT $2"
                );
                sqlx::query(AssertSqlSafe(sql)).bind(T::COLLECTION.name()).bind(fetch).fetch_all(&self.reader).await?
            }
        };
        let mut items: Vec<Record<T>> = rows.iter().map(|row| Record::from_row(row)).collect::<Result<_>>()?;
        let has_more = items.len() > request.limit as usize;
        items.truncate(request.limit as usize);
        let next_cursor = if has_more { items.last().map(|r| Cursor::after(r.created, &r.id)) } else { None };
        Ok(Page { items, total_count: u64::try_from(total).unwrap_or(0), has_more, next_cursor })
    }

    /// Reads the document, lets `change` edit it, and writes it back if nobody wrote it in
    /// between (retrying from a fresh read otherwise). `change` may refuse with an error.
    pub async fn update<T: Entity>(
        &self,
        id: &str,
        mut change: impl FnMut(&mut Record<T>) -> Result<()>,
    ) -> Result<Record<T>> {
        for _ in 0..CAS_ATTEMPTS {
            let mut record = self.require::<T>(id).await?;
            change(&mut record)?;
            match self.apply(vec![Write::replace(&record)?]).await {
                Ok(()) => {
                    record.version += 1;
                    return Ok(record);
                }
                Err(StoreError::Conflict { .. }) => continue,
                Err(e) => return Err(e),
            }
        }
        Err(StoreError::Conflict { kind: T::COLLECTION.noun(), id: id.to_string() })
    }

    /// Deletes the document; `NotFound` if there was none.
    pub async fn delete<T: Entity>(&self, id: &str) -> Result<()> {
        self.require::<T>(id).await?;
        self.apply(vec![Write::delete::<T>(id)]).await
    }
}

/// The channel every process of a PostgreSQL store listens on; the payload is a session id
/// (its events changed) or [`STOP_PREFIX`] and a session id (its unfinished turns were asked
/// to stop).
pub const NOTIFY_CHANNEL: &str = "guidepost_sessions";

/// Marks a notification that asks a session's unfinished turns to stop.
pub const STOP_PREFIX: &str = "stop:";

/// Relays the database's notifications to the hub, so long polls and streams in this
/// process wake on events other processes commit. After a lost connection every waiter is
/// woken (they re-read; nothing is missed).
async fn listen(url: &str, hub: Arc<SessionHub>) -> Result<()> {
    let mut listener = sqlx::postgres::PgListener::connect(url).await?;
    listener.listen(NOTIFY_CHANNEL).await?;
    tokio::spawn(async move {
        loop {
            match listener.try_recv().await {
                Ok(Some(n)) => match n.payload().strip_prefix(STOP_PREFIX) {
                    Some(session_id) => hub.notify_stop(session_id),
                    None => hub.notify(n.payload()),
                },
                Ok(None) => {
                    tracing::warn!("the notification connection to PostgreSQL was lost and restored");
                    hub.notify_all();
                }
                Err(error) => {
                    tracing::warn!(%error, "waiting for PostgreSQL notifications failed; retrying");
                    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                    hub.notify_all();
                }
            }
        }
    });
    Ok(())
}

impl Store {
    /// Within a transaction: on PostgreSQL, tells every process (at commit) that the
    /// session's events or turns changed.
    pub(crate) async fn announce(&self, tx: &mut sqlx::AnyConnection, session_id: &str) -> Result<()> {
        if self.backend == Backend::Postgres {
            sqlx::query("SELECT pg_notify($1, $2)").bind(NOTIFY_CHANNEL).bind(session_id).execute(&mut *tx).await?;
        }
        Ok(())
    }

    /// Within a transaction: on PostgreSQL, tells every process (at commit) that the
    /// session's unfinished turns were asked to stop.
    pub(crate) async fn announce_stop(&self, tx: &mut sqlx::AnyConnection, session_id: &str) -> Result<()> {
        if self.backend == Backend::Postgres {
            sqlx::query("SELECT pg_notify($1, $2)")
                .bind(NOTIFY_CHANNEL)
                .bind(format!("{STOP_PREFIX}{session_id}"))
                .execute(&mut *tx)
                .await?;
        }
        Ok(())
    }

    /// Wakes this process's waiters on the session and, on PostgreSQL, every other
    /// process's (for changes made outside a transaction).
    pub(crate) async fn changed(&self, session_id: &str) {
        self.hub.notify(session_id);
        self.notify_others(session_id.to_string()).await;
    }

    /// Wakes this process's running turns of the session and, on PostgreSQL, every other
    /// process's: they were asked to stop.
    pub(crate) async fn stopped(&self, session_id: &str) {
        self.hub.notify_stop(session_id);
        self.notify_others(format!("{STOP_PREFIX}{session_id}")).await;
    }

    async fn notify_others(&self, payload: String) {
        if self.backend == Backend::Postgres {
            let sent =
                sqlx::query("SELECT pg_notify($1, $2)").bind(NOTIFY_CHANNEL).bind(&payload).execute(&self.pool).await;
            if let Err(error) = sent {
                tracing::warn!(%error, payload, "could not notify the other processes of a change");
            }
        }
    }
}

/// `sqlite:PATH` and `sqlite://PATH` without a mode open read-write and create the file.
fn normalize_sqlite_url(url: &str) -> String {
    if url.starts_with("sqlite:") && !url.contains(":memory:") && !url.contains("mode=") {
        let sep = if url.contains('?') { '&' } else { '?' };
        format!("{url}{sep}mode=rwc")
    } else {
        url.to_string()
    }
}
