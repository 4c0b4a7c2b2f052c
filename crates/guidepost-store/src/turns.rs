//! Turns: one row per agent turn, from the customer message that started it to the state
//! it left. A turn is claimed by one worker through a lease (owner and expiry) that the
//! worker renews while it runs; a turn whose lease expired can be claimed again.

use guidepost_core::AgentState;
use serde_json::Value;
use sqlx::{AssertSqlSafe, Row};

use crate::direct::{Arg, Columns};
use crate::error::{Result, StoreError};
use crate::ids::{now_us, time_from_us};
use crate::{Backend, Store, commit};

/// Where a turn is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TurnState {
    /// Stored, not yet claimed.
    Pending,
    /// A worker holds it.
    Running,
    /// The reply was sent.
    Completed,
    /// A newer customer message replaced it before its reply.
    Cancelled,
    /// It failed.
    Failed,
}

impl TurnState {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Running => "running",
            Self::Completed => "completed",
            Self::Cancelled => "cancelled",
            Self::Failed => "failed",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "pending" => Self::Pending,
            "running" => Self::Running,
            "completed" => Self::Completed,
            "cancelled" => Self::Cancelled,
            "failed" => Self::Failed,
            _ => return None,
        })
    }

    /// Whether the turn is over.
    pub fn is_final(self) -> bool {
        matches!(self, Self::Completed | Self::Cancelled | Self::Failed)
    }
}

/// A turn to register with the events that start it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTurn {
    /// The turn's trace id (its id).
    pub id: String,
}

impl NewTurn {
    /// Inserts the turn; returns whether unfinished turns of the session were asked to stop.
    pub(crate) async fn insert(
        self,
        session_id: &str,
        trigger_offset: i64,
        tx: &mut sqlx::AnyConnection,
    ) -> Result<bool> {
        // The newer message supersedes the session's unfinished turns: a pending one will
        // not start, a running one stops unless it is already replying (the process that
        // runs it watches this flag).
        let superseded = sqlx::query(
            "UPDATE turns SET cancel_requested = 1 WHERE session_id = $1 AND status IN ('pending', 'running')",
        )
        .bind(session_id)
        .execute(&mut *tx)
        .await?
        .rows_affected()
            > 0;
        sqlx::query(
            "INSERT INTO turns (id, session_id, status, trigger_offset, created_us, attempts) VALUES ($1, $2, 'pending', $3, $4, 0)",
        )
        .bind(&self.id)
        .bind(session_id)
        .bind(trigger_offset)
        .bind(now_us())
        .execute(&mut *tx)
        .await?;
        Ok(superseded)
    }
}

/// What [`Store::try_claim_turn`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// The caller holds the turn now.
    Claimed,
    /// Another turn of the session holds a live lease: try again when it ends.
    Busy,
    /// The turn is over, unknown, or held by another worker's live lease.
    Gone,
}

/// How a turn ended, with the events that say so (its reply, tool results, final
/// statuses), committed together.
#[derive(Debug, Clone, Default)]
pub struct TurnEnd {
    /// The final status (completed when not given).
    pub status: Option<TurnState>,
    /// Events to append with it.
    pub events: Vec<crate::events::NewEventRecord>,
    /// The agent state it leaves (completed turns).
    pub state: Option<AgentState>,
    /// Its trace.
    pub trace: Option<Value>,
    /// Why it failed.
    pub error: Option<String>,
}

/// A stored turn.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnRecord {
    /// The turn's trace id.
    pub id: String,
    /// Its session.
    pub session_id: String,
    /// Where it is.
    pub status: TurnState,
    /// Offset of the event that started it.
    pub trigger_offset: u64,
    /// When it was stored.
    pub created: chrono::DateTime<chrono::Utc>,
    /// When a worker last claimed it.
    pub started: Option<chrono::DateTime<chrono::Utc>>,
    /// When it ended.
    pub finished: Option<chrono::DateTime<chrono::Utc>>,
    /// How many times a worker claimed it.
    pub attempts: i64,
    /// Why it failed.
    pub error: Option<String>,
    /// The agent state it left (completed turns).
    pub state: Option<AgentState>,
    /// What happened and why (the runtime's trace, as JSON).
    pub trace: Option<Value>,
}

const COLUMNS: &str =
    "id, session_id, status, trigger_offset, created_us, started_us, finished_us, attempts, error, state, trace";

fn decode(row: &dyn Columns) -> Result<TurnRecord> {
    let id = row.text("id")?;
    let what = format!("turn `{id}`");
    let status = row.text("status")?;
    let state = row.opt_text("state")?;
    let trace = row.opt_text("trace")?;
    Ok(TurnRecord {
        session_id: row.text("session_id")?,
        status: TurnState::parse(&status)
            .ok_or_else(|| StoreError::Invalid(format!("{what} has status `{status}`")))?,
        trigger_offset: u64::try_from(row.int("trigger_offset")?).unwrap_or(0),
        created: time_from_us(row.int("created_us")?),
        started: row.opt_int("started_us")?.map(time_from_us),
        finished: row.opt_int("finished_us")?.map(time_from_us),
        attempts: row.int("attempts")?,
        error: row.opt_text("error")?,
        state: state
            .map(|s| serde_json::from_str(&s).map_err(|e| StoreError::Corrupt { what: what.clone(), source: e }))
            .transpose()?,
        trace: trace
            .map(|s| serde_json::from_str(&s).map_err(|e| StoreError::Corrupt { what: what.clone(), source: e }))
            .transpose()?,
        id,
    })
}

/// Claims turn `$4` for `$1` until `$2`, the time now `$3`: when it is pending or its lease
/// expired.
const CLAIM: &str = "UPDATE turns SET status = 'running', lease_owner = $1, lease_until_us = $2, started_us = $3, \
                     attempts = attempts + 1 \
                     WHERE id = $4 AND (status = 'pending' OR (status = 'running' AND lease_until_us < $3))";

/// Whether turn `t` of the session of turn `me` (whose id is the parameter `me`, the time
/// now `now`) keeps `me` from starting: it holds a live lease, or it is older, unfinished and
/// acted on the world (a consequential tool call), so what it did must reach the customer
/// before a newer turn answers.
fn busy_condition(me: &str, now: &str) -> String {
    format!(
        "me.id = {me} AND t.id <> me.id AND ((t.status = 'running' AND t.lease_until_us >= {now}) OR \
         (t.status IN ('pending', 'running') \
         AND (t.created_us < me.created_us OR (t.created_us = me.created_us AND t.trigger_offset < me.trigger_offset)) \
         AND EXISTS (SELECT 1 FROM tool_calls c WHERE c.turn_id = t.id AND c.consequential = 1)))"
    )
}

/// Within a transaction: locks the session of turn `id` (its row on PostgreSQL) and returns
/// its id, in one statement; `None` when the turn is unknown.
async fn lock_session_of(tx: &mut sqlx::AnyConnection, id: &str) -> Result<Option<String>> {
    let row = sqlx::query(
        "UPDATE sessions SET version = version WHERE id = (SELECT session_id FROM turns WHERE id = $1) RETURNING id",
    )
    .bind(id)
    .fetch_optional(&mut *tx)
    .await?;
    Ok(row.map(|row| row.try_get("id")).transpose()?)
}

impl Store {
    /// The turn with this id.
    pub async fn get_turn(&self, id: &str) -> Result<Option<TurnRecord>> {
        self.read_row(&format!("SELECT {COLUMNS} FROM turns WHERE id = $1"), &[Arg::Text(id)], decode).await
    }

    /// The session's turns, oldest first.
    pub async fn list_turns(&self, session_id: &str) -> Result<Vec<TurnRecord>> {
        let rows = sqlx::query(AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM turns WHERE session_id = $1 ORDER BY created_us, id"
        )))
        .bind(session_id)
        .fetch_all(&self.reader)
        .await?;
        rows.iter().map(|row| decode(row)).collect()
    }

    /// Claims the turn for `owner` until `lease_ms` from now, if it is pending or its lease
    /// expired. Returns whether this caller got it.
    pub async fn claim_turn(&self, id: &str, owner: &str, lease_ms: i64) -> Result<bool> {
        Ok(self.try_claim_turn(id, owner, lease_ms).await? == Claim::Claimed)
    }

    /// Claims the turn for `owner` until `lease_ms` from now, unless another turn of its
    /// session holds a live lease (one turn at a time per session, across processes: the
    /// session row is locked while deciding). See [`Claim`].
    pub async fn try_claim_turn(&self, id: &str, owner: &str, lease_ms: i64) -> Result<Claim> {
        if self.backend == Backend::Sqlite {
            return self.try_claim_in_one_trip(id, owner, lease_ms).await;
        }
        let mut tx = self.writer()?.begin().await?;
        // Serializes claims on the session: the row lock on PostgreSQL.
        let Some(session_id) = lock_session_of(&mut tx, id).await? else {
            return Ok(Claim::Gone);
        };
        // Read the clock once the session is ours: a claim that waited for another turn's
        // end starts after it.
        let now = now_us();
        let busy = sqlx::query(AssertSqlSafe(format!(
            "SELECT 1 AS one FROM turns t, turns me WHERE t.session_id = $1 AND {}",
            busy_condition("$2", "$3")
        )))
        .bind(&session_id)
        .bind(id)
        .bind(now)
        .fetch_optional(&mut *tx)
        .await?
        .is_some();
        if busy {
            return Ok(Claim::Busy);
        }
        let done =
            sqlx::query(CLAIM).bind(owner).bind(now + lease_ms * 1000).bind(now).bind(id).execute(&mut *tx).await?;
        if done.rows_affected() != 1 {
            return Ok(Claim::Gone);
        }
        tx.commit().await?;
        Ok(Claim::Claimed)
    }

    /// SQLite: the claim in one round trip to the connection's thread, as a write of
    /// [`Store::on_writer`] (whose transaction holds the database's write lock, which
    /// serializes claims across processes): one script claims the turn unless its session is
    /// busy and says what happened.
    async fn try_claim_in_one_trip(&self, id: &str, owner: &str, lease_ms: i64) -> Result<Claim> {
        let (id, owner) = (id.to_string(), owner.to_string());
        self.on_writer(move |connection| {
            Box::pin(async move {
                // Read the clock once the lock is ours, as above.
                let now = now_us();
                let script = format!(
                    "{open}{CLAIM} AND NOT EXISTS (SELECT 1 FROM turns t, turns me WHERE t.session_id = me.session_id AND {busy});\n\
                     SELECT changes() AS claimed, EXISTS (SELECT 1 FROM turns WHERE id = $4) AS present, \
                     EXISTS (SELECT 1 FROM turns t, turns me WHERE t.session_id = me.session_id AND {busy}) AS busy;\n\
                     {close}",
                    open = commit::OPEN,
                    close = commit::CLOSE,
                    busy = busy_condition("$4", "$3")
                );
                let rows = sqlx::query(AssertSqlSafe(script))
                    .bind(owner)
                    .bind(now + lease_ms * 1000)
                    .bind(now)
                    .bind(id)
                    .fetch_all(&mut *connection)
                    .await?;
                let flag = |name: &str| rows.iter().find_map(|row| row.try_get::<i64, _>(name).ok()).unwrap_or(0) != 0;
                Ok(if flag("claimed") {
                    Claim::Claimed
                } else if flag("present") && flag("busy") {
                    Claim::Busy
                } else {
                    Claim::Gone
                })
            })
        })
        .await
    }

    /// Asks the session's unfinished turns to stop, as a newer message does: a pending one
    /// will not start, a running one stops unless it is already replying (the process that
    /// runs it watches the flag and wakes on the notification). How many were asked.
    pub async fn cancel_turns(&self, session_id: &str) -> Result<u64> {
        let done = sqlx::query(
            "UPDATE turns SET cancel_requested = 1 WHERE session_id = $1 AND status IN ('pending', 'running')",
        )
        .bind(session_id)
        .execute(self.writer()?)
        .await?;
        self.stopped(session_id).await;
        self.changed(session_id).await;
        Ok(done.rows_affected())
    }

    /// Whether a newer message or a cancellation asked this turn to stop (or the turn is
    /// gone).
    pub async fn turn_cancel_requested(&self, id: &str) -> Result<bool> {
        let asked = self
            .read_row("SELECT cancel_requested FROM turns WHERE id = $1", &[Arg::Text(id)], |row| {
                row.int("cancel_requested")
            })
            .await?;
        Ok(asked.is_none_or(|asked| asked != 0))
    }

    /// Ends a turn `owner` holds: appends its events and records its end in one
    /// transaction, only if `owner` still holds the lease. Returns false (and writes
    /// nothing) when the lease was lost: another worker runs the turn again.
    pub async fn commit_turn(&self, id: &str, owner: &str, end: TurnEnd) -> Result<bool> {
        self.end_turn(id, Some(owner), end).await
    }

    /// Closes a turn no worker holds (replaced by a newer message before it started, or
    /// left running by a process that died, its lease expired): appends its events and
    /// records its end, only if it is still pending or its lease expired.
    pub async fn close_unheld_turn(&self, id: &str, end: TurnEnd) -> Result<bool> {
        self.end_turn(id, None, end).await
    }

    async fn end_turn(&self, id: &str, owner: Option<&str>, end: TurnEnd) -> Result<bool> {
        let what = format!("turn `{id}`");
        let state = end
            .state
            .as_ref()
            .map(serde_json::to_string)
            .transpose()
            .map_err(|e| StoreError::Corrupt { what: what.clone(), source: e })?;
        let guard = match owner {
            Some(_) => "status = 'running' AND lease_owner = $7",
            None => "(status = 'pending' OR (status = 'running' AND lease_until_us < $7))",
        };
        let sql = format!(
            "UPDATE turns SET status = $1, finished_us = $2, state = $3, trace = $4, error = $5, lease_owner = NULL, \
             lease_until_us = NULL WHERE id = $6 AND {guard}"
        );
        let status = end.status.unwrap_or(TurnState::Completed).as_str();
        let trace = end.trace.as_ref().map(Value::to_string);
        let (error, turn, holder) = (end.error, id.to_string(), owner.map(str::to_string));
        let bind = move |sql: String, now: i64| {
            let query =
                sqlx::query(AssertSqlSafe(sql)).bind(status).bind(now).bind(state).bind(trace).bind(error).bind(turn);
            match holder {
                Some(owner) => query.bind(owner),
                None => query.bind(now),
            }
        };
        if self.backend == Backend::Sqlite {
            // The clock is read when the write runs, inside its batch's transaction (which holds
            // the write lock): a claim that waits for this end reads it after, so the turns'
            // recorded times never overlap.
            let events = end.events;
            let ended = self
                .on_writer(move |connection| {
                    Box::pin(async move {
                        let ended = bind(format!("{}{sql} RETURNING session_id", commit::OPEN), now_us());
                        let rows = ended.fetch_all(&mut *connection).await?;
                        let Some(session_id) = rows.iter().find_map(|row| row.try_get::<String, _>("session_id").ok())
                        else {
                            // The turn is gone, or the lease was lost: nothing was written.
                            sqlx::query(commit::CLOSE).execute(&mut *connection).await?;
                            return Ok(None);
                        };
                        let appended = if events.is_empty() {
                            sqlx::query(commit::CLOSE).execute(&mut *connection).await?;
                            Vec::new()
                        } else {
                            crate::events::run_append_script(connection, session_id.clone(), events, None, false)
                                .await?
                                .0
                        };
                        Ok(Some((session_id, appended)))
                    })
                })
                .await?;
            let Some((session_id, appended)) = ended else {
                return Ok(false);
            };
            self.hub.notify_appended(&session_id, &appended);
            return Ok(true);
        }
        let mut tx = self.writer()?.begin().await?;
        // Lock the session first (as appending does), so ending and appending never deadlock.
        let Some(session_id) = lock_session_of(&mut tx, id).await? else {
            return Ok(false);
        };
        let done = bind(sql, now_us()).execute(&mut *tx).await?;
        if done.rows_affected() != 1 {
            return Ok(false);
        }
        let appended = crate::events::append_in(&mut tx, &session_id, end.events).await?;
        self.announce(&mut tx, &session_id).await?;
        tx.commit().await?;
        self.hub.notify_appended(&session_id, &appended);
        Ok(true)
    }

    /// Whether the session has a turn stored after this one (a newer message came).
    pub async fn newer_turn_exists(&self, id: &str) -> Result<bool> {
        let newer = self
            .read_row(
                "SELECT 1 AS one FROM turns t, turns me WHERE me.id = $1 AND t.session_id = me.session_id \
                 AND t.id <> me.id AND (t.created_us > me.created_us \
                 OR (t.created_us = me.created_us AND t.trigger_offset > me.trigger_offset)) LIMIT 1",
                &[Arg::Text(id)],
                |row| row.int("one"),
            )
            .await?;
        Ok(newer.is_some())
    }

    /// Extends the lease of a turn `owner` holds. Returns false when the lease was lost.
    pub async fn renew_turn(&self, id: &str, owner: &str, lease_ms: i64) -> Result<bool> {
        let renew = sqlx::query(
            "UPDATE turns SET lease_until_us = $1 WHERE id = $2 AND lease_owner = $3 AND status = 'running'",
        )
        .bind(now_us() + lease_ms * 1000)
        .bind(id.to_string())
        .bind(owner.to_string());
        Ok(self.write_statement(renew).await? == 1)
    }

    /// Gives a claimed turn back (the process is stopping before the turn replied): it
    /// is pending again, for the next worker to claim.
    pub async fn hand_back_turn(&self, id: &str, owner: &str) -> Result<bool> {
        let done = sqlx::query(
            "UPDATE turns SET status = 'pending', lease_owner = NULL, lease_until_us = NULL \
             WHERE id = $1 AND lease_owner = $2 AND status = 'running'",
        )
        .bind(id)
        .bind(owner)
        .execute(self.writer()?)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Records how the turn ended, with the state it left and its trace.
    pub async fn finish_turn(
        &self,
        id: &str,
        status: TurnState,
        state: Option<&AgentState>,
        trace: Option<&Value>,
        error: Option<&str>,
    ) -> Result<()> {
        let state = state
            .map(serde_json::to_string)
            .transpose()
            .map_err(|e| StoreError::Corrupt { what: format!("turn `{id}`"), source: e })?;
        let done = sqlx::query(
            "UPDATE turns SET status = $1, finished_us = $2, state = $3, trace = $4, error = $5, lease_owner = NULL, \
             lease_until_us = NULL WHERE id = $6",
        )
        .bind(status.as_str())
        .bind(now_us())
        .bind(state)
        .bind(trace.map(Value::to_string))
        .bind(error)
        .bind(id)
        .execute(self.writer()?)
        .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound { kind: "turn", id: id.to_string() });
        }
        Ok(())
    }

    /// The state the session's last completed turn left (the empty state before any).
    pub async fn latest_agent_state(&self, session_id: &str) -> Result<AgentState> {
        // A turn whose customer message was deleted no longer counts: deleting the end of a
        // conversation takes the agent back to where it stood before it.
        let state = self
            .read_row(
                "SELECT t.state AS state FROM turns t LEFT JOIN events e ON e.session_id = t.session_id \
                 AND e.\"offset\" = t.trigger_offset \
                 WHERE t.session_id = $1 AND t.status = 'completed' AND t.state IS NOT NULL \
                 AND (e.id IS NULL OR e.deleted = 0) \
                 ORDER BY t.finished_us DESC, t.created_us DESC LIMIT 1",
                &[Arg::Text(session_id)],
                |row| row.text("state"),
            )
            .await?;
        match state {
            None => Ok(AgentState::default()),
            Some(text) => serde_json::from_str(&text)
                .map_err(|e| StoreError::Corrupt { what: format!("agent state of session `{session_id}`"), source: e }),
        }
    }

    /// Turns that are pending, or running with an expired lease: work a worker may take.
    pub async fn claimable_turns(&self) -> Result<Vec<TurnRecord>> {
        let rows = sqlx::query(AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM turns WHERE status = 'pending' OR (status = 'running' AND lease_until_us < $1) \
             ORDER BY created_us"
        )))
        .bind(now_us())
        .fetch_all(&self.reader)
        .await?;
        rows.iter().map(|row| decode(row)).collect()
    }
}
