//! Tool calls: one row per call a turn decided, written before the call is sent and again
//! when it returns. A turn that runs again (its process died, it was handed back at
//! shutdown, another replica took its lease) reads what its earlier attempts recorded and
//! reuses it instead of acting twice.
//!
//! Sending is recorded only by the worker that holds the turn's lease, in a transaction
//! that holds the turn's row: a replica that takes the turn over either sees the call (it
//! claimed after the record) or makes the recording worker's transaction find the lease
//! gone (it claimed before). An outcome is recorded by whoever sent the call, lease or not:
//! it is a fact about the world, and the turn's holder is glad to read it.

use serde_json::Value;

use crate::direct::{Arg, Columns};
use crate::error::{Result, StoreError};
use crate::ids::{now_us, time_from_us};
use crate::{Backend, Store, commit};

/// Where a recorded call stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ToolCallState {
    /// Sent; no outcome recorded yet (it is running, or the process that sent it died).
    Started,
    /// Its outcome is recorded.
    Returned,
    /// An earlier attempt sent it and its outcome was lost; it was not sent again because
    /// its service cannot tell a repeat from a new call. Someone must check what happened.
    Unconfirmed,
}

impl ToolCallState {
    /// The stored name: `started`, `returned`, `unconfirmed`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Started => "started",
            Self::Returned => "returned",
            Self::Unconfirmed => "unconfirmed",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "started" => Self::Started,
            "returned" => Self::Returned,
            "unconfirmed" => Self::Unconfirmed,
            _ => return None,
        })
    }
}

/// A call about to be sent.
#[derive(Debug, Clone, PartialEq)]
pub struct NewToolCall {
    /// The call's id, which is also its idempotency key.
    pub id: String,
    /// The turn (trace id) that decided it.
    pub turn_id: String,
    /// The tool, `service:name`.
    pub tool: String,
    /// How many calls of this tool the turn decided before this one.
    pub occurrence: i64,
    /// The arguments it is sent with.
    pub arguments: Value,
    /// Whether the tool acts on the world (books, pays, sends).
    pub consequential: bool,
}

/// A recorded call.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredToolCall {
    /// The call's id (its idempotency key).
    pub id: String,
    /// Its turn.
    pub turn_id: String,
    /// The tool, `service:name`.
    pub tool: String,
    /// How many calls of this tool the turn decided before this one.
    pub occurrence: i64,
    /// The arguments it was sent with.
    pub arguments: Value,
    /// Whether the tool acts on the world.
    pub consequential: bool,
    /// Where it stands.
    pub state: ToolCallState,
    /// What it returned, once [`ToolCallState::Returned`].
    pub outcome: Option<Value>,
    /// How many times it was sent (more than once only to a service that recognizes a
    /// repeat by its idempotency key, or to a tool whose repeats have no further effect).
    pub sends: i64,
    /// The worker that sent it last.
    pub worker: String,
    /// When it was first sent.
    pub started: chrono::DateTime<chrono::Utc>,
    /// When its outcome was recorded.
    pub finished: Option<chrono::DateTime<chrono::Utc>>,
}

/// What [`Store::record_tool_call_sent`] found.
#[derive(Debug, Clone, PartialEq)]
pub enum Sending {
    /// Recorded: send it now.
    Recorded,
    /// The worker no longer holds the turn: nothing was recorded, and the call must not be
    /// sent.
    NotHolder,
    /// The call already has an outcome (another attempt recorded it meanwhile): use it.
    Settled(Box<StoredToolCall>),
}

const COLUMNS: &str = "id, turn_id, tool, occurrence, arguments, consequential, state, outcome, sends, worker, \
     started_us, finished_us";

fn decode(row: &dyn Columns) -> Result<StoredToolCall> {
    let id = row.text("id")?;
    let what = format!("tool call `{id}`");
    let state = row.text("state")?;
    let arguments = row.text("arguments")?;
    let outcome = row.opt_text("outcome")?;
    let json =
        |text: &str| serde_json::from_str(text).map_err(|e| StoreError::Corrupt { what: what.clone(), source: e });
    Ok(StoredToolCall {
        turn_id: row.text("turn_id")?,
        tool: row.text("tool")?,
        occurrence: row.int("occurrence")?,
        arguments: json(&arguments)?,
        consequential: row.int("consequential")? != 0,
        state: ToolCallState::parse(&state)
            .ok_or_else(|| StoreError::Invalid(format!("{what} has state `{state}`")))?,
        outcome: outcome.as_deref().map(json).transpose()?,
        sends: row.int("sends")?,
        worker: row.text("worker")?,
        started: time_from_us(row.int("started_us")?),
        finished: row.opt_int("finished_us")?.map(time_from_us),
        id,
    })
}

impl Store {
    /// Records that `worker` sends `call` now, only while it holds the call's turn (the turn
    /// is running under its lease). The first send inserts the call; a send again (same id,
    /// no outcome yet) counts it. See [`Sending`].
    pub async fn record_tool_call_sent(&self, call: &NewToolCall, worker: &str) -> Result<Sending> {
        let arguments = serde_json::to_string(&call.arguments)
            .map_err(|e| StoreError::Corrupt { what: format!("tool call `{}`", call.id), source: e })?;
        let call = call.clone();
        let worker = worker.to_string();
        if self.backend == Backend::Sqlite {
            // As a write of `on_writer`: its transaction holds the database's write lock.
            return self
                .on_writer(move |connection| {
                    Box::pin(async move {
                        sqlx::query(commit::OPEN).execute(&mut *connection).await?;
                        let sending = record_sent(connection, call, arguments, worker).await?;
                        sqlx::query(commit::CLOSE).execute(&mut *connection).await?;
                        Ok(sending)
                    })
                })
                .await;
        }
        let mut tx = self.writer()?.begin().await?;
        let sending = record_sent(&mut tx, call, arguments, worker).await?;
        tx.commit().await?;
        Ok(sending)
    }

    /// Records how a call ended: what it returned ([`ToolCallState::Returned`], with
    /// `outcome`), or that its outcome is lost and it was not sent again
    /// ([`ToolCallState::Unconfirmed`]). A returned outcome stands once recorded; it
    /// replaces an unconfirmed one (a sender that was thought dead answered after all).
    /// Returns whether anything changed.
    pub async fn record_tool_call_end(&self, id: &str, state: ToolCallState, outcome: Option<&Value>) -> Result<bool> {
        let guard = match state {
            ToolCallState::Started => return Ok(false),
            ToolCallState::Returned => "state IN ('started', 'unconfirmed')",
            ToolCallState::Unconfirmed => "state = 'started'",
        };
        let update = sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE tool_calls SET state = $2, outcome = $3, finished_us = $4 WHERE id = $1 AND {guard}"
        )))
        .bind(id.to_string())
        .bind(state.as_str())
        .bind(outcome.map(Value::to_string))
        .bind(now_us());
        Ok(self.write_statement(update).await? == 1)
    }

    /// The calls recorded for a turn, in the order they were first sent.
    pub async fn tool_calls_of_turn(&self, turn_id: &str) -> Result<Vec<StoredToolCall>> {
        let sql = format!("SELECT {COLUMNS} FROM tool_calls WHERE turn_id = $1 ORDER BY started_us, tool, occurrence");
        self.read_rows(&sql, &[Arg::Text(turn_id)], decode).await
    }

    /// Calls in `state` across every turn, oldest first (at most `limit`): for an operator
    /// looking for outcomes to check.
    pub async fn tool_calls_in_state(&self, state: ToolCallState, limit: i64) -> Result<Vec<StoredToolCall>> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM tool_calls WHERE state = $1 ORDER BY started_us, id LIMIT $2"
        )))
        .bind(state.as_str())
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(|row| decode(row)).collect()
    }

    /// Whether the turn sent a consequential call (it acted on the world): such a turn runs
    /// to its reply, so the customer hears what was done, even when a newer message came.
    pub async fn turn_has_acted(&self, turn_id: &str) -> Result<bool> {
        let row = sqlx::query("SELECT 1 AS one FROM tool_calls WHERE turn_id = $1 AND consequential = 1 LIMIT 1")
            .bind(turn_id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.is_some())
    }
}

/// Within a transaction: [`Store::record_tool_call_sent`]'s statements.
async fn record_sent(
    tx: &mut sqlx::AnyConnection,
    call: NewToolCall,
    arguments: String,
    worker: String,
) -> Result<Sending> {
    // Holds the turn's row until the commit: a claim by another worker waits for this
    // record, or this finds the lease gone.
    let held = sqlx::query(
        "UPDATE turns SET lease_owner = lease_owner WHERE id = $1 AND status = 'running' AND lease_owner = $2",
    )
    .bind(&call.turn_id)
    .bind(&worker)
    .execute(&mut *tx)
    .await?;
    if held.rows_affected() != 1 {
        return Ok(Sending::NotHolder);
    }
    let inserted = sqlx::query(
        "INSERT INTO tool_calls (id, turn_id, tool, occurrence, arguments, consequential, state, sends, worker, \
         started_us) VALUES ($1, $2, $3, $4, $5, $6, 'started', 1, $7, $8) ON CONFLICT (id) DO NOTHING",
    )
    .bind(&call.id)
    .bind(&call.turn_id)
    .bind(&call.tool)
    .bind(call.occurrence)
    .bind(arguments)
    .bind(i64::from(call.consequential))
    .bind(&worker)
    .bind(now_us())
    .execute(&mut *tx)
    .await?;
    if inserted.rows_affected() == 1 {
        return Ok(Sending::Recorded);
    }
    let again = sqlx::query("UPDATE tool_calls SET sends = sends + 1, worker = $2 WHERE id = $1 AND state = 'started'")
        .bind(&call.id)
        .bind(&worker)
        .execute(&mut *tx)
        .await?;
    if again.rows_affected() == 1 {
        return Ok(Sending::Recorded);
    }
    let row = sqlx::query(sqlx::AssertSqlSafe(format!("SELECT {COLUMNS} FROM tool_calls WHERE id = $1")))
        .bind(&call.id)
        .fetch_one(&mut *tx)
        .await?;
    Ok(Sending::Settled(Box::new(decode(&row)?)))
}
