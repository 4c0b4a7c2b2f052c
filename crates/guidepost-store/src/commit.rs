//! Group commit on a SQLite store's one writer connection.
//!
//! Every write to a SQLite file ends with the file made durable (`fsync`), and on a busy server
//! that costs more CPU than the statements themselves: measured with `guidepost load
//! --sessions 50`, turning the sync off took 1.5 of 7.5 ms of server CPU per turn. So the
//! writes of [`crate::Store::on_writer`] queue here, and the ones that arrive while a commit
//! is under way are run together in the next transaction and made durable by one commit:
//! each in a savepoint of its own, so one write that fails is undone alone; each caller hears
//! back only once its write is durable (or, when the commit fails, that it was not stored).
//! A write that finds the queue idle runs at once, in a transaction of its own.
//!
//! No task waits for work: the caller that finds the queue idle starts one, which runs
//! batches until the queue is empty and ends.

use std::sync::{Arc, Mutex, PoisonError};

use sqlx::{AnyConnection, AnyPool};
use tokio::sync::oneshot;

use crate::{Result, StoreError, WriterFuture};

/// How a write's statements open its savepoint: the first statement it runs.
pub(crate) const OPEN: &str = "SAVEPOINT write;\n";
/// How a write's statements close its savepoint: the last statement it runs when it succeeds.
/// A write that fails leaves the savepoint to the batch, which undoes it.
pub(crate) const CLOSE: &str = "RELEASE write;";

/// At most this many writes share a transaction; more wait for the next.
const BATCH: usize = 64;

/// What a write does with its result once its batch's commit is known.
type Deliver = Box<dyn FnOnce(std::result::Result<(), String>) + Send>;
/// A write run: whether it succeeded, and how to hand its result over.
type Ran<'c> = std::pin::Pin<Box<dyn std::future::Future<Output = (bool, Deliver)> + Send + 'c>>;

/// A queued write.
trait Write: Send {
    /// Runs the write on the connection inside the batch's transaction; says whether it
    /// succeeded (its savepoint closed) and how to hand its result over.
    fn run<'c>(self: Box<Self>, connection: &'c mut AnyConnection) -> Ran<'c>;
    /// Tells the caller the write was not run, and why.
    fn fail(self: Box<Self>, message: String);
}

struct Pending<T, F> {
    work: F,
    sender: oneshot::Sender<Result<T>>,
}

impl<T, F> Write for Pending<T, F>
where
    T: Send + 'static,
    F: for<'c> FnOnce(&'c mut AnyConnection) -> WriterFuture<'c, T> + Send + 'static,
{
    fn run<'c>(self: Box<Self>, connection: &'c mut AnyConnection) -> Ran<'c> {
        let Pending { work, sender } = *self;
        Box::pin(async move {
            let done = work(connection).await;
            let ok = done.is_ok();
            let deliver: Deliver = Box::new(move |commit| {
                let result = match commit {
                    Ok(()) => done,
                    // A write that failed says why; one that did not was lost with the batch.
                    Err(message) => Err(done.err().unwrap_or(StoreError::Unavailable(message))),
                };
                let _ = sender.send(result);
            });
            (ok, deliver)
        })
    }

    fn fail(self: Box<Self>, message: String) {
        let _ = self.sender.send(Err(StoreError::Unavailable(message)));
    }
}

/// The writes waiting for the writer connection, and whether a task is running them.
#[derive(Default)]
pub(crate) struct GroupCommit {
    queue: Mutex<Queue>,
    /// The most writes one transaction held.
    #[cfg(test)]
    largest: std::sync::atomic::AtomicUsize,
}

#[derive(Default)]
struct Queue {
    jobs: Vec<Box<dyn Write>>,
    running: bool,
}

impl GroupCommit {
    /// Runs `work` on the writer connection of `pool`, in a batch's transaction, and returns
    /// its result once the batch is committed. `work` opens its savepoint with [`OPEN`] and,
    /// when it succeeds, closes it with [`CLOSE`].
    pub(crate) async fn run<T, F>(self: &Arc<Self>, pool: &AnyPool, work: F) -> Result<T>
    where
        T: Send + 'static,
        F: for<'c> FnOnce(&'c mut AnyConnection) -> WriterFuture<'c, T> + Send + 'static,
    {
        let (sender, receiver) = oneshot::channel::<Result<T>>();
        let start = {
            let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
            queue.jobs.push(Box::new(Pending { work, sender }));
            !std::mem::replace(&mut queue.running, true)
        };
        if start {
            let (group, pool) = (self.clone(), pool.clone());
            tokio::spawn(async move {
                let mut running = Running { group, idle: false };
                while let Some(jobs) = running.next_batch() {
                    #[cfg(test)]
                    running.group.largest.fetch_max(jobs.len(), std::sync::atomic::Ordering::Relaxed);
                    commit_batch(&pool, jobs).await;
                }
            });
        }
        // A dropped sender means the task running the batch ended before its commit.
        receiver.await.map_err(|_| StoreError::Database(sqlx::Error::WorkerCrashed))?
    }
}

/// The task running batches: when it ends, however it ends, the queue is idle again (writes
/// still queued after a panic are dropped, and their callers told the write was lost).
struct Running {
    group: Arc<GroupCommit>,
    /// The queue was found empty and left idle: a new write starts a task of its own.
    idle: bool,
}

impl Running {
    fn next_batch(&mut self) -> Option<Vec<Box<dyn Write>>> {
        let mut queue = self.group.queue.lock().unwrap_or_else(PoisonError::into_inner);
        if queue.jobs.is_empty() {
            queue.running = false;
            self.idle = true;
            return None;
        }
        let take = queue.jobs.len().min(BATCH);
        let rest = queue.jobs.split_off(take);
        Some(std::mem::replace(&mut queue.jobs, rest))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if !self.idle {
            let mut queue = self.group.queue.lock().unwrap_or_else(PoisonError::into_inner);
            queue.jobs.clear();
            queue.running = false;
        }
    }
}

/// Runs `jobs` in one transaction, each in its savepoint, commits, and hands each its result.
async fn commit_batch(pool: &AnyPool, jobs: Vec<Box<dyn Write>>) {
    let not_run = |jobs: Vec<Box<dyn Write>>, e: sqlx::Error| {
        let message = format!("the write was not run: the database could not start it ({e})");
        for job in jobs {
            job.fail(message.clone());
        }
    };
    let mut connection = match pool.acquire().await {
        Ok(connection) => connection,
        Err(e) => return not_run(jobs, e),
    };
    if let Err(e) = sqlx::query("BEGIN IMMEDIATE").execute(&mut *connection).await {
        return not_run(jobs, e);
    }
    let mut delivers = Vec::with_capacity(jobs.len());
    for job in jobs {
        let (ok, deliver) = job.run(&mut connection).await;
        if !ok {
            // Undo what the write did before it failed (harmless when it never opened its
            // savepoint: the writes before it all closed theirs).
            let _ = sqlx::raw_sql("ROLLBACK TO write; RELEASE write;").execute(&mut *connection).await;
        }
        delivers.push(deliver);
    }
    let commit = match sqlx::query("COMMIT").execute(&mut *connection).await {
        Ok(_) => Ok(()),
        Err(e) => {
            let _ = sqlx::query("ROLLBACK").execute(&mut *connection).await;
            Err(format!("the write was not stored: its commit failed ({e})"))
        }
    };
    drop(connection);
    for deliver in delivers {
        deliver(commit.clone());
    }
}

#[cfg(test)]
mod tests {
    use guidepost_core::{EventKind, EventSource, Session};
    use serde_json::json;

    use super::*;
    use crate::Store;
    use crate::events::{EventFilter, NewEventRecord};

    fn message(text: &str) -> NewEventRecord {
        NewEventRecord {
            source: EventSource::Customer,
            kind: EventKind::Message,
            trace_id: text.to_string(),
            data: json!({ "message": text }),
            metadata: Default::default(),
        }
    }

    /// Writes that fail amid others sharing their transaction are undone alone: an append to
    /// a missing session, and a write that inserted a session before failing.
    #[tokio::test]
    async fn writes_committed_together_fail_alone() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_sqlite_file(&dir.path().join("store.db")).await.unwrap();
        store.create_session(&Session::new("s", "a", "c")).await.unwrap();
        let mut writes = tokio::task::JoinSet::new();
        for n in 0..60 {
            let store = store.clone();
            writes.spawn(async move {
                match n % 6 {
                    0 => ("missing", store.append_event("nobody", message("lost")).await.map(|_| ())),
                    1 => {
                        let half = store
                            .on_writer(move |connection| {
                                Box::pin(async move {
                                    let script = format!(
                                        "{OPEN}INSERT INTO sessions (id, agent_id, customer_id, created_us, version, \
                                         next_offset, data) VALUES ('half{n}', 'a', 'c', 0, 0, 0, '{{}}');\n\
                                         SELECT * FROM no_such_table;\n{CLOSE}"
                                    );
                                    sqlx::raw_sql(sqlx::AssertSqlSafe(script)).execute(&mut *connection).await?;
                                    Ok(())
                                })
                            })
                            .await;
                        ("half", half)
                    }
                    _ => ("kept", store.append_event("s", message(&format!("m{n}"))).await.map(|_| ())),
                }
            });
        }
        let mut outcomes = std::collections::BTreeMap::<(&str, bool), usize>::new();
        while let Some(done) = writes.join_next().await {
            let (what, result) = done.unwrap();
            *outcomes.entry((what, result.is_ok())).or_default() += 1;
        }
        assert_eq!(outcomes, [(("half", false), 10), (("kept", true), 40), (("missing", false), 10)].into());
        let events = store.list_events("s", &EventFilter::default()).await.unwrap();
        assert_eq!(events.iter().map(|e| e.offset).collect::<Vec<_>>(), (0..40).collect::<Vec<u64>>());
        for n in (1..60).step_by(6) {
            assert!(store.get_session(&format!("half{n}")).await.unwrap().is_none(), "half{n} was kept");
        }
        assert!(
            store.group.largest.load(std::sync::atomic::Ordering::Relaxed) > 1,
            "the writes never shared a transaction"
        );
        // The connection is left with no transaction open: a write alone still commits.
        store.append_event("s", message("after")).await.unwrap();
        assert_eq!(store.list_events("s", &EventFilter::default()).await.unwrap().len(), 41);
    }
}
