//! Events of a session: appended with dense offsets from 0 (the database enforces
//! uniqueness), soft-deleted, never renumbered. Waiters on the session wake after every
//! commit.

use guidepost_core::{Event, EventKind, EventSource};
use indexmap::IndexMap;
use serde_json::Value;
use sqlx::{AssertSqlSafe, Row};

use crate::direct::{Arg, Columns};
use crate::error::{Result, StoreError};
use crate::hub::AppendedEvent;
use crate::ids::{new_id, now_us, time_from_us};
use crate::turns::NewTurn;
use crate::{Backend, Store, commit};

/// An event to append; the store gives it an id, an offset and a time.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEventRecord {
    /// Who produced it.
    pub source: EventSource,
    /// What it carries.
    pub kind: EventKind,
    /// The trace it belongs to.
    pub trace_id: String,
    /// The payload.
    pub data: Value,
    /// Free-form metadata.
    pub metadata: IndexMap<String, Value>,
}

/// One page of a session's events (see [`Store::events_page`]).
#[derive(Debug, Clone, PartialEq)]
pub struct EventPage {
    /// The events, by offset.
    pub events: Vec<Event>,
    /// Where the next page starts, when there may be more.
    pub next_offset: Option<u64>,
}

impl EventPage {
    /// The page [`Store::events_page`] would read for `filter` right after one commit
    /// appended `appended` (in offset order), when that commit's events alone make it: the
    /// first of them is at or before `filter.min_offset`, so no event the filter could keep
    /// lies between it and them. `None` when the store must be read.
    pub fn of_appended(
        appended: &[AppendedEvent],
        filter: &EventFilter,
        max_events: usize,
        max_bytes: usize,
    ) -> Option<Self> {
        if appended.first()?.event.offset > filter.min_offset {
            return None;
        }
        let max_events = max_events.max(1);
        let mut events = Vec::new();
        let mut read = 0usize;
        for AppendedEvent { event, size } in appended.iter().filter(|a| filter.keeps(&a.event)) {
            // As the listing's statement bounds it: at most `max_events`, and each event that
            // starts before `max_bytes` were read.
            if events.len() >= max_events || read >= max_bytes {
                break;
            }
            read = read.saturating_add(*size);
            events.push(event.clone());
        }
        let full = events.len() >= max_events || read >= max_bytes;
        let next_offset = events.last().filter(|_| full).map(|e| e.offset + 1);
        Some(Self { events, next_offset })
    }
}

/// Which events a listing returns.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EventFilter {
    /// Offsets from this one on.
    pub min_offset: u64,
    /// Only from this source.
    pub source: Option<EventSource>,
    /// Only of these kinds (all when empty).
    pub kinds: Vec<EventKind>,
    /// Only of this trace.
    pub trace_id: Option<String>,
    /// Include soft-deleted events.
    pub include_deleted: bool,
    /// At most this many events (all when `None`).
    pub limit: Option<usize>,
}

impl EventFilter {
    /// Whether the filter keeps `event`.
    pub fn keeps(&self, event: &Event) -> bool {
        event.offset >= self.min_offset
            && (self.include_deleted || !event.deleted)
            && self.source.is_none_or(|s| s == event.source)
            && (self.kinds.is_empty() || self.kinds.contains(&event.kind))
            && self.trace_id.as_ref().is_none_or(|t| *t == event.trace_id)
    }
}

fn wire<T: serde::Serialize>(value: T) -> String {
    serde_json::to_value(value).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
}

fn parse<T: serde::de::DeserializeOwned>(text: &str, what: &str) -> Result<T> {
    serde_json::from_value(Value::String(text.to_string()))
        .map_err(|e| StoreError::Corrupt { what: what.to_string(), source: e })
}

fn decode(row: &dyn Columns) -> Result<Event> {
    let id = row.text("id")?;
    let what = format!("event `{id}`");
    let data = row.text("data")?;
    let metadata = row.text("metadata")?;
    Ok(Event {
        source: parse(&row.text("source")?, &what)?,
        kind: parse(&row.text("kind")?, &what)?,
        offset: u64::try_from(row.int("offset")?).unwrap_or(0),
        creation_utc: time_from_us(row.int("created_us")?),
        trace_id: row.text("trace_id")?,
        data: serde_json::from_str(&data).map_err(|e| StoreError::Corrupt { what: what.clone(), source: e })?,
        metadata: serde_json::from_str(&metadata).map_err(|e| StoreError::Corrupt { what: what.clone(), source: e })?,
        deleted: row.int("deleted")? != 0,
        id,
    })
}

/// Events one statement inserts at most (seven or eight parameters each, well within
/// SQLite's and PostgreSQL's limits).
const INSERT_ROWS: usize = 64;

/// The events as they will be stored, with offsets from `first`, and the text of each one's
/// data and metadata.
fn prepared(first: i64, events: Vec<NewEventRecord>) -> (Vec<AppendedEvent>, Vec<(String, String)>) {
    let created = time_from_us(now_us());
    let mut stored = Vec::with_capacity(events.len());
    let mut texts = Vec::with_capacity(events.len());
    for (offset, event) in (first..).zip(events) {
        let data = event.data.to_string();
        let metadata = serde_json::to_string(&event.metadata).unwrap_or_else(|_| "{}".into());
        // What `LENGTH(data) + LENGTH(metadata)` counts in a listing: characters.
        let size = data.chars().count() + metadata.chars().count();
        let event = Event {
            id: new_id(),
            source: event.source,
            kind: event.kind,
            offset: u64::try_from(offset).unwrap_or(0),
            creation_utc: created,
            trace_id: event.trace_id,
            data: event.data,
            metadata: event.metadata,
            deleted: false,
        };
        stored.push(AppendedEvent { event, size });
        texts.push((data, metadata));
    }
    (stored, texts)
}

/// `INSERT INTO events ... VALUES` with one row per event of `rows`, the session as `$1`:
/// `offset(row)` gives a row's offset, `next()` each of its other parameters in turn.
fn insert_sql(rows: usize, offset: impl Fn(usize) -> String, mut next: impl FnMut() -> String) -> String {
    let values: Vec<String> = (0..rows)
        .map(|row| {
            let id = next();
            let offset = offset(row);
            let rest: Vec<String> = (0..6).map(|_| next()).collect();
            format!("({id}, $1, {offset}, {}, 0)", rest.join(", "))
        })
        .collect();
    format!(
        "INSERT INTO events (id, session_id, \"offset\", source, kind, created_us, trace_id, data, metadata, deleted) \
         VALUES {}",
        values.join(", ")
    )
}

/// An event's parameters after its id and offset, in [`insert_sql`]'s order.
fn bind_rest<'q>(
    query: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments>,
    e: &Event,
    (data, metadata): (String, String),
) -> sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments> {
    query
        .bind(wire(e.source))
        .bind(wire(e.kind))
        .bind(e.creation_utc.timestamp_micros())
        .bind(e.trace_id.clone())
        .bind(data)
        .bind(metadata)
}

/// Inserts `events` with offsets from `first`, a statement per [`INSERT_ROWS`] of them.
async fn insert_events(
    tx: &mut sqlx::AnyConnection,
    session_id: &str,
    first: i64,
    events: Vec<NewEventRecord>,
) -> Result<Vec<AppendedEvent>> {
    let (stored, texts) = prepared(first, events);
    let mut texts = texts.into_iter();
    for rows in stored.chunks(INSERT_ROWS) {
        let sql = {
            // Each row's id, then its offset, then the rest.
            let param = std::cell::Cell::new(1);
            let next = || {
                param.set(param.get() + 1);
                format!("${}", param.get())
            };
            insert_sql(rows.len(), |_| next(), next)
        };
        let mut query = sqlx::query(AssertSqlSafe(sql)).bind(session_id);
        for (AppendedEvent { event: e, .. }, texts) in rows.iter().zip(&mut texts) {
            query = query.bind(e.id.clone()).bind(i64::try_from(e.offset).unwrap_or(i64::MAX));
            query = bind_rest(query, e, texts);
        }
        query.execute(&mut *tx).await?;
    }
    Ok(stored)
}

/// Appends events to a session inside the caller's transaction (offsets from the
/// session's counter, which this locks).
pub(crate) async fn append_in(
    tx: &mut sqlx::AnyConnection,
    session_id: &str,
    events: Vec<NewEventRecord>,
) -> Result<Vec<AppendedEvent>> {
    if events.is_empty() {
        return Ok(Vec::new());
    }
    let count = i64::try_from(events.len()).unwrap_or(i64::MAX);
    let row = sqlx::query("UPDATE sessions SET next_offset = next_offset + $1 WHERE id = $2 RETURNING next_offset")
        .bind(count)
        .bind(session_id)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or_else(|| StoreError::NotFound { kind: "session", id: session_id.to_string() })?;
    let next: i64 = row.try_get("next_offset")?;
    insert_events(tx, session_id, next - count, events).await
}

/// SQLite: appends `events` to the session (and registers `turn`, superseding its unfinished
/// turns) on `connection` in one round trip, as a write of [`Store::on_writer`]: one script,
/// ending with [`commit::CLOSE`]. With `open` the script opens its savepoint
/// ([`commit::OPEN`]); without, it closes the one the caller opened. Returns the events as
/// stored and whether unfinished turns were superseded.
pub(crate) async fn run_append_script(
    connection: &mut sqlx::AnyConnection,
    session_id: String,
    events: Vec<NewEventRecord>,
    turn: Option<NewTurn>,
    open: bool,
) -> Result<(Vec<AppendedEvent>, bool)> {
    let count = events.len();
    let (mut stored, texts) = prepared(0, events);
    let sql = append_script(count, turn.is_some(), open);
    let mut query =
        sqlx::query(AssertSqlSafe(sql)).bind(session_id.clone()).bind(i64::try_from(count).unwrap_or(i64::MAX));
    for (AppendedEvent { event: e, .. }, texts) in stored.iter().zip(texts) {
        query = bind_rest(query.bind(e.id.clone()), e, texts);
    }
    if let Some(turn) = turn {
        query = query.bind(turn.id).bind(now_us());
    }
    let rows = query.fetch_all(&mut *connection).await?;
    let column = |name: &str| rows.iter().find_map(|row| row.try_get::<i64, _>(name).ok());
    let Some(next) = column("next_offset") else {
        // Nothing was written: the session is missing.
        return Err(StoreError::NotFound { kind: "session", id: session_id });
    };
    let first = next - i64::try_from(count).unwrap_or(i64::MAX);
    for (offset, appended) in (first..).zip(&mut stored) {
        appended.event.offset = u64::try_from(offset).unwrap_or(0);
    }
    Ok((stored, column("superseded").is_some_and(|n| n > 0)))
}

/// The script [`run_append_script`] runs: `count` events (their parameters from `$3` on,
/// seven each), then the turn's id and creation time when it registers one.
fn append_script(count: usize, turn: bool, open: bool) -> String {
    let param = std::cell::Cell::new(2);
    let next = || {
        param.set(param.get() + 1);
        format!("${}", param.get())
    };
    // $1 is the session, $2 how many events come.
    let mut sql = String::from(if open { commit::OPEN } else { "" });
    sql.push_str("UPDATE sessions SET next_offset = next_offset + $2 WHERE id = $1;\n");
    for start in (0..count).step_by(INSERT_ROWS) {
        let offset = |row: usize| format!("(SELECT next_offset FROM sessions WHERE id = $1) - $2 + {}", start + row);
        sql.push_str(&insert_sql((count - start).min(INSERT_ROWS), offset, next));
        sql.push_str(";\n");
    }
    if turn {
        // As `NewTurn::insert`: the session's unfinished turns are superseded first.
        let (id, created) = (next(), next());
        sql.push_str(&format!(
            "UPDATE turns SET cancel_requested = 1 WHERE session_id = $1 AND status IN ('pending', 'running');\n\
             SELECT changes() AS superseded;\n\
             INSERT INTO turns (id, session_id, status, trigger_offset, created_us, attempts) \
             VALUES ({id}, $1, 'pending', (SELECT next_offset FROM sessions WHERE id = $1) - 1, {created}, 0);\n"
        ));
    }
    sql.push_str("SELECT next_offset FROM sessions WHERE id = $1;\n");
    sql.push_str(commit::CLOSE);
    sql
}

const COLUMNS: &str = "id, \"offset\", source, kind, created_us, trace_id, data, metadata, deleted";

/// The largest page of events read on the calling thread of a SQLite file (see
/// [`crate::direct`]): what a long poll or a listing sends at a time (100 events, 1 MiB)
/// fits well within it.
const DIRECT_PAGE_EVENTS: usize = 1000;
const DIRECT_PAGE_BYTES: usize = 4 << 20;

impl Store {
    /// Appends one event to the session and returns it as stored.
    pub async fn append_event(&self, session_id: &str, event: NewEventRecord) -> Result<Event> {
        let mut events = self.append_events(session_id, vec![event], None).await?;
        events.pop().ok_or_else(|| StoreError::Invalid("no event was appended".into()))
    }

    /// Appends events (and, when given, registers the turn they start) in one
    /// transaction. Offsets come from the session's counter, which the first statement
    /// locks, so concurrent appenders to one session queue and offsets stay dense.
    pub async fn append_events(
        &self,
        session_id: &str,
        events: Vec<NewEventRecord>,
        turn: Option<NewTurn>,
    ) -> Result<Vec<Event>> {
        let (stored, superseded) = match self.backend {
            Backend::Sqlite => self.append_in_one_trip(session_id, events, turn).await?,
            Backend::Postgres => self.append_in_transaction(session_id, events, turn).await?,
        };
        self.hub.notify_appended(session_id, &stored);
        if superseded {
            self.hub.notify_stop(session_id);
        }
        Ok(stored.into_iter().map(|e| e.event).collect())
    }

    /// SQLite: the append as one script, which the connection's thread runs at once (a
    /// round trip to it instead of one per statement), on the writer's connection in a task
    /// of its own (see [`Store::on_writer`]). Offsets come from the session's counter inside
    /// the script's transaction.
    async fn append_in_one_trip(
        &self,
        session_id: &str,
        events: Vec<NewEventRecord>,
        turn: Option<NewTurn>,
    ) -> Result<(Vec<AppendedEvent>, bool)> {
        let session = session_id.to_string();
        let appended = self
            .on_writer(move |connection| Box::pin(run_append_script(connection, session, events, turn, true)))
            .await;
        match appended {
            // A missing session fails the script on the offsets it has none for.
            Err(StoreError::Database(_)) if self.get_session(session_id).await?.is_none() => {
                Err(StoreError::NotFound { kind: "session", id: session_id.to_string() })
            }
            appended => appended,
        }
    }

    /// PostgreSQL: the append as a transaction, statement by statement.
    async fn append_in_transaction(
        &self,
        session_id: &str,
        events: Vec<NewEventRecord>,
        turn: Option<NewTurn>,
    ) -> Result<(Vec<AppendedEvent>, bool)> {
        let count = i64::try_from(events.len()).unwrap_or(i64::MAX);
        let mut tx = self.writer()?.begin().await?;
        let row = sqlx::query("UPDATE sessions SET next_offset = next_offset + $1 WHERE id = $2 RETURNING next_offset")
            .bind(count)
            .bind(session_id)
            .fetch_optional(&mut *tx)
            .await?;
        let Some(row) = row else {
            return Err(StoreError::NotFound { kind: "session", id: session_id.to_string() });
        };
        let next: i64 = row.try_get("next_offset")?;
        let first = next - count;
        let stored = insert_events(&mut tx, session_id, first, events).await?;
        let mut superseded = false;
        if let Some(turn) = turn {
            let trigger = stored.last().map_or(next - 1, |e| i64::try_from(e.event.offset).unwrap_or(0));
            superseded = turn.insert(session_id, trigger, &mut tx).await?;
        }
        self.announce(&mut tx, session_id).await?;
        if superseded {
            self.announce_stop(&mut tx, session_id).await?;
        }
        tx.commit().await?;
        Ok((stored, superseded))
    }

    /// The session's events the filter keeps, by offset (at most `filter.limit`).
    pub async fn list_events(&self, session_id: &str, filter: &EventFilter) -> Result<Vec<Event>> {
        let page = self.events_page(session_id, filter, filter.limit.unwrap_or(usize::MAX), usize::MAX).await?;
        Ok(page.events)
    }

    /// One page of the session's events the filter keeps, by offset: at most `max_events`,
    /// and no more once `max_bytes` of their data were read (the first always comes). What
    /// each event is and how large is read first, without its data; then only the events
    /// the page keeps are read whole. What is held is bounded by the page, not the session.
    pub async fn events_page(
        &self,
        session_id: &str,
        filter: &EventFilter,
        max_events: usize,
        max_bytes: usize,
    ) -> Result<EventPage> {
        // A page a long poll or a listing sends is read on this thread; so is a read of a
        // whole session (a turn's history, a stream's start) when it fits in such a page,
        // else it is read again through the pool.
        let bounded = max_events <= DIRECT_PAGE_EVENTS && max_bytes <= DIRECT_PAGE_BYTES;
        if !bounded && self.direct.is_some() {
            let (events, bytes) = (max_events.min(DIRECT_PAGE_EVENTS), max_bytes.min(DIRECT_PAGE_BYTES));
            let page = self.read_events_page(session_id, filter, events, bytes, true).await?;
            if page.next_offset.is_none() {
                return Ok(page);
            }
        }
        self.read_events_page(session_id, filter, max_events, max_bytes, bounded).await
    }

    /// [`Store::events_page`], on this thread when `direct` and the store is a SQLite file.
    async fn read_events_page(
        &self,
        session_id: &str,
        filter: &EventFilter,
        max_events: usize,
        max_bytes: usize,
        direct: bool,
    ) -> Result<EventPage> {
        // One statement: the innermost query picks the events the filter keeps (by offset, at
        // most `max_events`) with their sizes and no data, the next adds up their sizes in
        // order, and only those that start before `max_bytes` were reached are read whole.
        let mut conditions = vec!["session_id = $1".to_string(), "\"offset\" >= $2".to_string()];
        let mut texts: Vec<String> = Vec::new();
        if !filter.include_deleted {
            conditions.push("deleted = 0".into());
        }
        if let Some(source) = filter.source {
            texts.push(wire(source));
            conditions.push(format!("source = ${}", texts.len() + 2));
        }
        if !filter.kinds.is_empty() {
            let mut kinds = Vec::with_capacity(filter.kinds.len());
            for kind in &filter.kinds {
                texts.push(wire(kind));
                kinds.push(format!("${}", texts.len() + 2));
            }
            conditions.push(format!("kind IN ({})", kinds.join(", ")));
        }
        if let Some(trace_id) = &filter.trace_id {
            texts.push(trace_id.clone());
            conditions.push(format!("trace_id = ${}", texts.len() + 2));
        }
        let bytes = texts.len() + 3;
        let max_events = max_events.max(1);
        // The page's count is written into the statement: SQLite prepares a statement again
        // each time a value bound to a subquery's LIMIT changes (measured with
        // `sqlite3_stmt_status`: every long poll's read), and a page takes few distinct counts.
        let limit = i64::try_from(max_events).unwrap_or(i64::MAX);
        let sql = format!(
            "SELECT e.id, e.\"offset\", e.source, e.kind, e.created_us, e.trace_id, e.data, e.metadata, e.deleted, \
             w.running FROM (SELECT \"offset\", size, SUM(size) OVER (ORDER BY \"offset\") AS running FROM \
             (SELECT \"offset\", LENGTH(data) + LENGTH(metadata) AS size FROM events WHERE {} \
             ORDER BY \"offset\" LIMIT {limit}) AS kept) AS w \
             JOIN events AS e ON e.session_id = $1 AND e.\"offset\" = w.\"offset\" \
             WHERE w.running - w.size < ${bytes} ORDER BY e.\"offset\"",
            conditions.join(" AND ")
        );
        let mut args = vec![Arg::Text(session_id), Arg::Int(i64::try_from(filter.min_offset).unwrap_or(i64::MAX))];
        args.extend(texts.iter().map(|t| Arg::Text(t)));
        args.push(Arg::Int(i64::try_from(max_bytes).unwrap_or(i64::MAX)));
        let rows = self.read_rows_where(direct, &sql, &args, |row| Ok((decode(row)?, row.int("running")?))).await?;
        let read = rows.last().map_or(0, |(_, running)| *running);
        let events: Vec<Event> = rows.into_iter().map(|(event, _)| event).collect();
        // The page ended on its bounds (more may follow), or on the events the filter keeps.
        let full = events.len() >= max_events || usize::try_from(read).unwrap_or(usize::MAX) >= max_bytes;
        let next_offset = events.last().filter(|_| full).map(|e| e.offset + 1);
        Ok(EventPage { events, next_offset })
    }

    /// The session's event with this id (soft-deleted ones too).
    pub async fn get_event(&self, session_id: &str, event_id: &str) -> Result<Option<Event>> {
        let sql = format!("SELECT {COLUMNS} FROM events WHERE session_id = $1 AND id = $2");
        self.read_row(&sql, &[Arg::Text(session_id), Arg::Text(event_id)], decode).await
    }

    /// Replaces an event's data (a streamed message growing its chunks).
    pub async fn update_event_data(&self, session_id: &str, event_id: &str, data: &Value) -> Result<()> {
        let done = sqlx::query("UPDATE events SET data = $1 WHERE session_id = $2 AND id = $3")
            .bind(data.to_string())
            .bind(session_id)
            .bind(event_id)
            .execute(self.writer()?)
            .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound { kind: "event", id: event_id.to_string() });
        }
        self.changed(session_id).await;
        Ok(())
    }

    /// Lets `change` edit an event's metadata and stores it.
    pub async fn update_event_metadata(
        &self,
        session_id: &str,
        event_id: &str,
        change: impl FnOnce(&mut IndexMap<String, Value>),
    ) -> Result<Event> {
        let mut tx = self.writer()?.begin().await?;
        let row = sqlx::query(AssertSqlSafe(format!("SELECT {COLUMNS} FROM events WHERE session_id = $1 AND id = $2")))
            .bind(session_id)
            .bind(event_id)
            .fetch_optional(&mut *tx)
            .await?;
        let Some(row) = row else {
            return Err(StoreError::NotFound { kind: "event", id: event_id.to_string() });
        };
        let mut event = decode(&row)?;
        change(&mut event.metadata);
        sqlx::query("UPDATE events SET metadata = $1 WHERE session_id = $2 AND id = $3")
            .bind(serde_json::to_string(&event.metadata).unwrap_or_else(|_| "{}".into()))
            .bind(session_id)
            .bind(event_id)
            .execute(&mut *tx)
            .await?;
        self.announce(&mut tx, session_id).await?;
        tx.commit().await?;
        self.hub.notify(session_id);
        Ok(event)
    }

    /// Soft-deletes one event (a reply withdrawn before its turn runs again).
    pub async fn delete_event(&self, session_id: &str, event_id: &str) -> Result<()> {
        sqlx::query("UPDATE events SET deleted = 1 WHERE session_id = $1 AND id = $2")
            .bind(session_id)
            .bind(event_id)
            .execute(self.writer()?)
            .await?;
        self.changed(session_id).await;
        Ok(())
    }

    /// Soft-deletes the session's events from `min_offset` on; returns how many.
    ///
    /// The deletion must start at the first event of a turn: when the first event still
    /// listed at or after `min_offset` belongs to a trace with an event before it, nothing is
    /// deleted and the error is [`StoreError::SplitsTurn`], as in the reference API (a client
    /// can never leave half a turn behind). The check and the deletion are one statement, so
    /// an event appended meanwhile cannot slip between them.
    pub async fn delete_events(&self, session_id: &str, min_offset: u64) -> Result<u64> {
        let from = i64::try_from(min_offset).unwrap_or(i64::MAX);
        let done = sqlx::query(
            "UPDATE events SET deleted = 1 WHERE session_id = $1 AND \"offset\" >= $2 AND deleted = 0 \
             AND NOT EXISTS (SELECT 1 FROM events AS earlier WHERE earlier.session_id = $1 \
                 AND earlier.deleted = 0 AND earlier.\"offset\" < $2 \
                 AND earlier.trace_id = (SELECT here.trace_id FROM events AS here WHERE here.session_id = $1 \
                     AND here.deleted = 0 AND here.\"offset\" >= $2 ORDER BY here.\"offset\" LIMIT 1))",
        )
        .bind(session_id)
        .bind(from)
        .execute(self.writer()?)
        .await?;
        if done.rows_affected() == 0 {
            // Nothing was deleted: nothing to delete, or the start splits a turn.
            if let Some((offset, trace_id, first)) = self.turn_split_at(session_id, from).await? {
                return Err(StoreError::SplitsTurn { offset, trace_id, first });
            }
            return Ok(0);
        }
        self.changed(session_id).await;
        Ok(done.rows_affected())
    }

    /// When deleting from `from` on would split a turn: the first listed event's offset at or
    /// after `from`, its trace, and the offset of that trace's first listed event.
    async fn turn_split_at(&self, session_id: &str, from: i64) -> Result<Option<(u64, String, u64)>> {
        let at = sqlx::query(
            "SELECT \"offset\", trace_id FROM events WHERE session_id = $1 AND deleted = 0 AND \"offset\" >= $2 \
             ORDER BY \"offset\" LIMIT 1",
        )
        .bind(session_id)
        .bind(from)
        .fetch_optional(&self.pool)
        .await?;
        let Some(at) = at else { return Ok(None) };
        let trace_id: String = at.try_get("trace_id")?;
        let offset: i64 = at.try_get("offset")?;
        let first: Option<i64> = sqlx::query(
            "SELECT MIN(\"offset\") AS first FROM events WHERE session_id = $1 AND deleted = 0 AND trace_id = $2",
        )
        .bind(session_id)
        .bind(&trace_id)
        .fetch_one(&self.pool)
        .await?
        .try_get("first")?;
        Ok(first
            .filter(|first| *first < offset)
            .map(|first| (u64::try_from(offset).unwrap_or(0), trace_id, u64::try_from(first).unwrap_or(0))))
    }
}

#[cfg(test)]
mod tests {
    use guidepost_core::Session;
    use serde_json::json;

    use super::*;

    #[tokio::test]
    async fn pages_read_on_the_calling_thread_run_without_being_prepared_again() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_sqlite_file(&dir.path().join("store.db")).await.unwrap();
        let session = Session::new("s", "a", "c");
        store.create_session(&session).await.unwrap();
        let event = |n: usize| NewEventRecord {
            source: EventSource::Customer,
            kind: EventKind::Message,
            trace_id: format!("t{n}"),
            data: json!({"message": format!("m{n}")}),
            metadata: Default::default(),
        };
        store.append_events("s", (0..30).map(event).collect(), None).await.unwrap();
        // As long polls and turns read: pages from moving offsets, whole sessions, filtered.
        for offset in 0..20 {
            let filter = EventFilter { min_offset: offset, ..Default::default() };
            let page = store.events_page("s", &filter, 100, 1 << 20).await.unwrap();
            assert_eq!(page.events.len(), 30 - usize::try_from(offset).unwrap());
            assert_eq!(store.list_events("s", &filter).await.unwrap().len(), page.events.len());
            let traced = EventFilter { trace_id: Some(format!("t{offset}")), ..Default::default() };
            assert_eq!(store.events_page("s", &traced, 10, 1 << 20).await.unwrap().events.len(), 1);
        }
        let direct = store.direct.as_ref().expect("a SQLite file is read on the calling thread");
        assert_eq!(direct.reprepared(), 0, "a kept statement was compiled again");
    }
}
