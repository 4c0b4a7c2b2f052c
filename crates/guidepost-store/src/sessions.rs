//! Sessions: one conversation between a customer and an agent. Each row keeps the next
//! event offset, so appending an event locks only its own session.

use crate::direct::{Arg, Columns};
use guidepost_core::Session;
use sqlx::AssertSqlSafe;

use crate::documents::{Cursor, Page, PageRequest, Sort};
use crate::error::{Result, StoreError};
use crate::{CAS_ATTEMPTS, Store};

/// Which sessions a listing or bulk deletion covers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionFilter {
    /// Only this agent's.
    pub agent_id: Option<String>,
    /// Only this customer's.
    pub customer_id: Option<String>,
    /// Only sessions carrying every one of these labels.
    pub labels: Vec<String>,
}

impl SessionFilter {
    fn keeps(&self, session: &Session) -> bool {
        self.labels.iter().all(|l| session.labels.contains(l))
    }
}

/// A stored session and its version.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionRecord {
    /// The session.
    pub session: Session,
    /// Incremented by every update.
    pub version: i64,
}

fn decode(row: &dyn Columns) -> Result<SessionRecord> {
    let id = row.text("id")?;
    let data = row.text("data")?;
    let session =
        serde_json::from_str(&data).map_err(|e| StoreError::Corrupt { what: format!("session `{id}`"), source: e })?;
    Ok(SessionRecord { session, version: row.int("version")? })
}

fn not_found(id: &str) -> StoreError {
    StoreError::NotFound { kind: "session", id: id.to_string() }
}

fn encode(session: &Session) -> Result<String> {
    serde_json::to_string(session)
        .map_err(|e| StoreError::Corrupt { what: format!("session `{}`", session.id), source: e })
}

impl Store {
    /// Stores a new session; `AlreadyExists` if its id is taken.
    pub async fn create_session(&self, session: &Session) -> Result<()> {
        let result = sqlx::query(
            "INSERT INTO sessions (id, agent_id, customer_id, created_us, next_offset, version, data) \
             VALUES ($1, $2, $3, $4, 0, 1, $5)",
        )
        .bind(&session.id)
        .bind(&session.agent_id)
        .bind(&session.customer_id)
        .bind(session.creation_utc.timestamp_micros())
        .bind(encode(session)?)
        .execute(self.writer()?)
        .await;
        match result {
            Err(e) if StoreError::is_unique_violation(&e) => {
                Err(StoreError::AlreadyExists { kind: "session", id: session.id.clone() })
            }
            other => other.map(|_| ()).map_err(Into::into),
        }
    }

    /// The session with this id.
    pub async fn get_session(&self, id: &str) -> Result<Option<SessionRecord>> {
        self.read_row("SELECT id, version, data FROM sessions WHERE id = $1", &[Arg::Text(id)], decode).await
    }

    /// The session with this id, or `NotFound`.
    pub async fn require_session(&self, id: &str) -> Result<SessionRecord> {
        self.get_session(id).await?.ok_or_else(|| not_found(id))
    }

    async fn filtered_sessions(&self, filter: &SessionFilter, sort: Sort) -> Result<Vec<SessionRecord>> {
        let order = match sort {
            Sort::Ascending => "ASC",
            Sort::Descending => "DESC",
        };
        let sql = format!(
            "SELECT id, version, data, created_us FROM sessions \
             WHERE (CAST($1 AS TEXT) IS NULL OR agent_id = $1) AND (CAST($2 AS TEXT) IS NULL OR customer_id = $2) \
             ORDER BY created_us {order}, id {order}"
        );
        let rows = sqlx::query(AssertSqlSafe(sql))
            .bind(filter.agent_id.clone())
            .bind(filter.customer_id.clone())
            .fetch_all(&self.reader)
            .await?;
        let mut out = Vec::with_capacity(rows.len());
        for row in &rows {
            let record = decode(row)?;
            if filter.keeps(&record.session) {
                out.push(record);
            }
        }
        Ok(out)
    }

    /// Every session the filter keeps, oldest first.
    pub async fn list_sessions(&self, filter: &SessionFilter) -> Result<Vec<SessionRecord>> {
        self.filtered_sessions(filter, Sort::Ascending).await
    }

    /// One page of the sessions the filter keeps.
    pub async fn page_sessions(&self, filter: &SessionFilter, request: &PageRequest) -> Result<Page<SessionRecord>> {
        let all = self.filtered_sessions(filter, request.sort).await?;
        let total_count = all.len() as u64;
        let key = |r: &SessionRecord| (r.session.creation_utc.timestamp_micros(), r.session.id.clone());
        let start = match &request.cursor {
            None => 0,
            Some(c) => {
                let at = (c.created_us, c.id.clone());
                all.iter()
                    .position(|r| match request.sort {
                        Sort::Ascending => key(r) > at,
                        Sort::Descending => key(r) < at,
                    })
                    .unwrap_or(all.len())
            }
        };
        let end = (start + request.limit as usize).min(all.len());
        let items: Vec<SessionRecord> = all[start..end].to_vec();
        let has_more = end < all.len();
        let next_cursor =
            if has_more { items.last().map(|r| Cursor::after(r.session.creation_utc, &r.session.id)) } else { None };
        Ok(Page { items, total_count, has_more, next_cursor })
    }

    /// Reads the session, lets `change` edit it, and writes it back (retrying if another
    /// writer got there first).
    pub async fn update_session(
        &self,
        id: &str,
        mut change: impl FnMut(&mut Session) -> Result<()>,
    ) -> Result<Session> {
        for _ in 0..CAS_ATTEMPTS {
            let mut record = self.require_session(id).await?;
            change(&mut record.session)?;
            record.session.id = id.to_string();
            let done = sqlx::query(
                "UPDATE sessions SET agent_id = $1, customer_id = $2, version = version + 1, data = $3 \
                 WHERE id = $4 AND version = $5",
            )
            .bind(&record.session.agent_id)
            .bind(&record.session.customer_id)
            .bind(encode(&record.session)?)
            .bind(id)
            .bind(record.version)
            .execute(self.writer()?)
            .await?;
            if done.rows_affected() == 1 {
                return Ok(record.session);
            }
        }
        Err(StoreError::Conflict { kind: "session", id: id.to_string() })
    }

    /// Deletes the session with its events and turns; `NotFound` if there was none.
    pub async fn delete_session(&self, id: &str) -> Result<()> {
        let mut tx = self.writer()?.begin().await?;
        for table in ["events", "turns"] {
            sqlx::query(AssertSqlSafe(format!("DELETE FROM {table} WHERE session_id = $1")))
                .bind(id)
                .execute(&mut *tx)
                .await?;
        }
        let done = sqlx::query("DELETE FROM sessions WHERE id = $1").bind(id).execute(&mut *tx).await?;
        if done.rows_affected() == 0 {
            return Err(not_found(id));
        }
        self.announce(&mut tx, id).await?;
        self.announce_stop(&mut tx, id).await?;
        tx.commit().await?;
        self.hub.notify(id);
        self.hub.notify_stop(id);
        Ok(())
    }

    /// Deletes every session the filter keeps; returns how many.
    pub async fn delete_sessions(&self, filter: &SessionFilter) -> Result<usize> {
        let sessions = self.list_sessions(filter).await?;
        for record in &sessions {
            match self.delete_session(&record.session.id).await {
                Ok(()) | Err(StoreError::NotFound { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(sessions.len())
    }
}
