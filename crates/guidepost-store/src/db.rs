//! Connecting to the database and bringing its schema up to date.
//!
//! One code path serves both backends: queries go through sqlx's `Any` driver with `$N`
//! placeholders, JSON documents are `TEXT`, times are microseconds in `BIGINT`. Only the
//! DDL differs, so each backend has its own migration folder.

use std::str::FromStr;
use std::time::Duration;

use sha2::{Digest, Sha256};
use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::{AnyPool, Row};

use crate::error::{Result, StoreError};
use crate::ids::now_us;

/// Which database the store runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// SQLite: a file, or memory.
    Sqlite,
    /// PostgreSQL.
    Postgres,
}

impl Backend {
    /// The backend a URL names.
    pub fn of_url(url: &str) -> Result<Self> {
        if url.starts_with("sqlite:") {
            Ok(Self::Sqlite)
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Ok(Self::Postgres)
        } else {
            Err(StoreError::UnsupportedUrl(redact(url)))
        }
    }

    /// Lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Sqlite => "sqlite",
            Self::Postgres => "postgres",
        }
    }
}

/// A URL with its password replaced, for messages.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &url[scheme + 3..at];
            match userinfo.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..scheme + 3], &url[at..]),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}

struct Migration {
    version: i64,
    description: &'static str,
    sqlite: &'static str,
    postgres: &'static str,
}

const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        description: "initial schema",
        sqlite: include_str!("../migrations/sqlite/0001_init.sql"),
        postgres: include_str!("../migrations/postgres/0001_init.sql"),
    },
    Migration {
        version: 2,
        description: "turn cancellation through the database",
        sqlite: include_str!("../migrations/sqlite/0002_turn_cancellation.sql"),
        postgres: include_str!("../migrations/postgres/0002_turn_cancellation.sql"),
    },
    Migration {
        version: 3,
        description: "tool calls recorded before they are sent and when they return",
        sqlite: include_str!("../migrations/sqlite/0003_tool_calls.sql"),
        postgres: include_str!("../migrations/postgres/0003_tool_calls.sql"),
    },
];

/// The version of the newest migration this build knows.
pub fn schema_version() -> i64 {
    MIGRATIONS.last().map_or(0, |m| m.version)
}

/// How many connections read a SQLite file beside its one writer. Each runs on a thread of its
/// own that sleeps between statements: two let a long read not hold up the others, and under
/// load wake less often than four did (`guidepost load --sessions 50`, five runs of each,
/// alternated: 6.7 ms of server CPU per turn against 7.1 ms).
const SQLITE_READERS: u32 = 2;

/// Pool options for SQLite connections. A SQLite connection lives in this process, on a thread
/// of its own, so it is not pinged before each use (a round trip to that thread, as long as
/// most statements take): a connection that stopped working fails its statement, and the pool
/// tests it again when it is given back.
fn sqlite_pool() -> AnyPoolOptions {
    AnyPoolOptions::new().test_before_acquire(false)
}

/// Opens the pools on `url`: one to write through and one to read from. SQLite writes through
/// one connection (writers never wait on each other's locks) and, for a file, reads on
/// connections of their own: in WAL mode a read sees the last commit and never holds up a
/// write, so a slow listing cannot stall the server. An in-memory database is one database
/// only on one connection, so it reads there too. PostgreSQL reads and writes through one
/// pool.
pub(crate) async fn connect(url: &str, max_connections: u32) -> Result<(AnyPool, AnyPool, Backend)> {
    let (pool, backend) = connect_writer(url, max_connections).await?;
    let reader = match backend {
        Backend::Sqlite if crate::health::sqlite_file(url).is_some() => connect_sqlite_readers(url).await?,
        _ => pool.clone(),
    };
    Ok((pool, reader, backend))
}

/// `sqlite::memory:` as a named in-memory database (`sqlite:file:NAME?mode=memory&cache=shared`),
/// other URLs as they are. Each connection to `sqlite::memory:` opens a database of its own,
/// so when the writer's connection is replaced (a request cancelled in the middle of a query
/// closes it) the replacement would open an empty one; every connection to a named database
/// reaches the same one, kept alive by [`memory_keeper`].
pub(crate) fn name_memory_database(url: &str) -> String {
    if url == "sqlite::memory:" || url == "sqlite://:memory:" {
        format!("sqlite:file:guidepost-memory-{}?mode=memory&cache=shared", uuid::Uuid::new_v4().simple())
    } else {
        url.to_string()
    }
}

/// For a named in-memory database, a connection held for the store's life (never used for
/// queries): the database lives while one connection to it is open.
pub(crate) async fn memory_keeper(url: &str) -> Result<Option<AnyPool>> {
    if !(url.starts_with("sqlite:") && url.contains("mode=memory")) {
        return Ok(None);
    }
    let options = AnyConnectOptions::from_str(url).map_err(|_| StoreError::UnsupportedUrl(redact(url)))?;
    let pool = sqlite_pool()
        .max_connections(1)
        .min_connections(1)
        .max_lifetime(None)
        .idle_timeout(None)
        .connect_with(options)
        .await?;
    Ok(Some(pool))
}

/// Read-only connections to a SQLite file (opened after the writer made sure it exists and is
/// in WAL mode).
async fn connect_sqlite_readers(url: &str) -> Result<AnyPool> {
    let read_only = url.replace("mode=rwc", "mode=ro");
    let options = AnyConnectOptions::from_str(&read_only).map_err(|_| StoreError::UnsupportedUrl(redact(url)))?;
    let pool = sqlite_pool()
        .acquire_timeout(Duration::from_secs(30))
        .max_connections(SQLITE_READERS)
        .min_connections(0)
        .after_connect(|conn, _| {
            Box::pin(async move {
                for pragma in ["PRAGMA busy_timeout = 10000", "PRAGMA query_only = ON"] {
                    sqlx::Executor::execute(&mut *conn, pragma).await?;
                }
                Ok(())
            })
        })
        .connect_with(options)
        .await?;
    Ok(pool)
}

async fn connect_writer(url: &str, max_connections: u32) -> Result<(AnyPool, Backend)> {
    sqlx::any::install_default_drivers();
    let backend = Backend::of_url(url)?;
    let options = AnyConnectOptions::from_str(url).map_err(|_| StoreError::UnsupportedUrl(redact(url)))?;
    let pool_options = match backend {
        Backend::Sqlite => sqlite_pool(),
        Backend::Postgres => AnyPoolOptions::new(),
    }
    .acquire_timeout(Duration::from_secs(30));
    let pool_options = match backend {
        // The one connection is kept for the life of the pool: an in-memory database lives
        // only as long as its connection. Every connection gets the pragmas: WAL lets
        // readers of other processes (a backup, `sqlite3`) work beside the server, foreign
        // keys make deleting a session delete its events and turns.
        Backend::Sqlite => {
            pool_options.max_connections(1).min_connections(1).max_lifetime(None).idle_timeout(None).after_connect(
                |conn, _| {
                    Box::pin(async move {
                        for pragma in
                            ["PRAGMA journal_mode = WAL", "PRAGMA foreign_keys = ON", "PRAGMA busy_timeout = 10000"]
                        {
                            sqlx::Executor::execute(&mut *conn, pragma).await?;
                        }
                        Ok(())
                    })
                },
            )
        }
        Backend::Postgres => pool_options.max_connections(max_connections.max(2)),
    };
    let pool = pool_options.connect_with(options).await?;
    Ok((pool, backend))
}

/// Writes once (a change to nothing) to prove the database file can be written: a read-only
/// file or folder would otherwise serve reads and fail every write later.
pub(crate) async fn probe_write(pool: &AnyPool, path: &std::path::Path) -> Result<()> {
    sqlx::query("UPDATE definition_revision SET revision = revision WHERE id = 1").execute(pool).await.map_err(
        |e| {
            StoreError::Unavailable(format!(
                "the database file {} cannot be written ({e}); make it and its folder writable and start again",
                path.display()
            ))
        },
    )?;
    Ok(())
}

fn checksum(sql: &str) -> String {
    hex::encode(Sha256::digest(sql.as_bytes()))
}

/// Applies the migrations the database lacks, in order, each in its own transaction. On
/// PostgreSQL an advisory lock keeps replicas that start together from racing.
pub(crate) async fn migrate(pool: &AnyPool, backend: Backend) -> Result<()> {
    let mut conn = pool.acquire().await?;
    if backend == Backend::Postgres {
        sqlx::query("SELECT pg_advisory_lock(7283645501)").execute(&mut *conn).await?;
    }
    let result = apply_migrations(&mut conn, backend).await;
    if backend == Backend::Postgres {
        sqlx::query("SELECT pg_advisory_unlock(7283645501)").execute(&mut *conn).await?;
    }
    result
}

async fn apply_migrations(conn: &mut sqlx::AnyConnection, backend: Backend) -> Result<()> {
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS guidepost_migrations (version BIGINT PRIMARY KEY, description TEXT NOT NULL, \
         checksum TEXT NOT NULL, applied_us BIGINT NOT NULL)",
    )
    .execute(&mut *conn)
    .await?;
    let rows = sqlx::query("SELECT version, checksum FROM guidepost_migrations ORDER BY version")
        .fetch_all(&mut *conn)
        .await?;
    let mut applied = Vec::new();
    for row in rows {
        applied.push((row.try_get::<i64, _>("version")?, row.try_get::<String, _>("checksum")?));
    }
    if let Some((newest, _)) = applied.last()
        && *newest > schema_version()
    {
        return Err(StoreError::Migration {
            version: *newest,
            description: "unknown".into(),
            message: format!(
                "the database was migrated by a newer Guidepost (schema {newest}, this build knows {})",
                schema_version()
            ),
        });
    }
    for migration in MIGRATIONS {
        let sql = match backend {
            Backend::Sqlite => migration.sqlite,
            Backend::Postgres => migration.postgres,
        };
        let sum = checksum(sql);
        if let Some((_, stored)) = applied.iter().find(|(v, _)| *v == migration.version) {
            if *stored != sum {
                return Err(StoreError::Migration {
                    version: migration.version,
                    description: migration.description.into(),
                    message: "the applied migration differs from this build's (edited after release?)".into(),
                });
            }
            continue;
        }
        let fail = |e: sqlx::Error| StoreError::Migration {
            version: migration.version,
            description: migration.description.into(),
            message: e.to_string(),
        };
        let mut tx = sqlx::Connection::begin(&mut *conn).await?;
        sqlx::raw_sql(sql).execute(&mut *tx).await.map_err(fail)?;
        sqlx::query(
            "INSERT INTO guidepost_migrations (version, description, checksum, applied_us) VALUES ($1, $2, $3, $4)",
        )
        .bind(migration.version)
        .bind(migration.description)
        .bind(sum)
        .bind(now_us())
        .execute(&mut *tx)
        .await
        .map_err(fail)?;
        tx.commit().await.map_err(fail)?;
        tracing::info!(version = migration.version, description = migration.description, "migration applied");
    }
    Ok(())
}

/// On PostgreSQL, installs pgvector when the server has it and gives the embedding cache
/// a vector column. Returns whether vector search is available; without it, nearest
/// neighbours are found by exact search in the process.
pub(crate) async fn enable_pgvector(pool: &AnyPool) -> bool {
    if let Err(e) = sqlx::query("CREATE EXTENSION IF NOT EXISTS vector").execute(pool).await {
        tracing::info!(error = %e, "pgvector is not available; embeddings are searched exactly in the process");
        return false;
    }
    match sqlx::query("ALTER TABLE embeddings ADD COLUMN IF NOT EXISTS embedding vector").execute(pool).await {
        Ok(_) => true,
        Err(e) => {
            tracing::warn!(error = %e, "pgvector is installed but the embedding column could not be added");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_name_their_backend() {
        assert_eq!(Backend::of_url("sqlite::memory:").ok(), Some(Backend::Sqlite));
        assert_eq!(Backend::of_url("sqlite://x.db?mode=rwc").ok(), Some(Backend::Sqlite));
        assert_eq!(Backend::of_url("postgres://u@h/db").ok(), Some(Backend::Postgres));
        assert!(Backend::of_url("mysql://u@h/db").is_err());
    }

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(redact("postgres://me:secret@host:5432/db"), "postgres://me:***@host:5432/db");
        assert_eq!(redact("postgres://me@host/db"), "postgres://me@host/db");
        assert_eq!(redact("sqlite::memory:"), "sqlite::memory:");
    }
}
