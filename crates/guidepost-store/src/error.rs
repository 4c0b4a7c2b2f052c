//! What can go wrong in the store.

/// A store error. `NotFound`, `AlreadyExists` and `Invalid` are about what the caller
/// asked; the others are about the database.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// No entity of this kind has this id.
    #[error("{kind} `{id}` not found")]
    NotFound {
        /// What was looked for (`guideline`, `session`, ...).
        kind: &'static str,
        /// The id asked for.
        id: String,
    },
    /// An entity of this kind already has this id.
    #[error("{kind} `{id}` already exists")]
    AlreadyExists {
        /// What was created.
        kind: &'static str,
        /// The id that is taken.
        id: String,
    },
    /// The request cannot be carried out as asked.
    #[error("{0}")]
    Invalid(String),
    /// A concurrent writer changed the entity between read and write, too often to retry.
    #[error("{kind} `{id}` kept changing while it was being updated; try again")]
    Conflict {
        /// What was updated.
        kind: &'static str,
        /// Its id.
        id: String,
    },
    /// The database refused or failed.
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    /// A SQLite file refused or failed a read made on the calling thread.
    #[error("database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// A stored document does not decode (written by a newer version, or damaged).
    #[error("stored {what} does not decode: {source}")]
    Corrupt {
        /// Which document.
        what: String,
        /// The decoding error.
        #[source]
        source: serde_json::Error,
    },
    /// The store cannot be written safely: its file was removed, replaced or made read-only
    /// (the message says which and what to do). Nothing was written.
    #[error("the store is unavailable: {0}")]
    Unavailable(String),
    /// Deleting a session's events from `offset` on would leave the first events of a turn
    /// and delete the rest: the event there is not the first of its trace.
    #[error(
        "offset {offset} is in the middle of turn `{trace_id}`, whose first event is at offset {first}: events are \
         deleted from the first event of a turn on (min_offset={first} deletes that turn and everything after it)"
    )]
    SplitsTurn {
        /// The offset asked for (where the deletion would start).
        offset: u64,
        /// The trace of the first event at or after it.
        trace_id: String,
        /// The offset of that trace's first event.
        first: u64,
    },
    /// The database URL is not one the store can use.
    #[error("unsupported database URL `{0}`: use sqlite://PATH, sqlite::memory: or postgres://...")]
    UnsupportedUrl(String),
    /// A migration failed or the database holds a schema this build does not know.
    #[error("migration {version} ({description}) failed: {message}")]
    Migration {
        /// Migration version.
        version: i64,
        /// What it does.
        description: String,
        /// Why it failed.
        message: String,
    },
}

impl StoreError {
    /// Whether the error is a caller mistake (an unknown id, a taken id, an invalid
    /// request) rather than a database failure.
    pub fn is_client_error(&self) -> bool {
        matches!(self, Self::NotFound { .. } | Self::AlreadyExists { .. } | Self::Invalid(_) | Self::SplitsTurn { .. })
    }

    /// Whether the database reported a uniqueness violation.
    pub(crate) fn is_unique_violation(error: &sqlx::Error) -> bool {
        match error {
            sqlx::Error::Database(db) => {
                db.is_unique_violation()
                    || db.message().contains("UNIQUE constraint failed")
                    || db.code().as_deref() == Some("23505")
            }
            _ => false,
        }
    }
}

/// Store result.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;
