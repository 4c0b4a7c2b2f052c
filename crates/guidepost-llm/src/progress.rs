//! How far a turn's model calls have come while they run.
//!
//! A turn runs its work [`measured`] by a [`ModelProgress`]. Every call through a model stack
//! counts in it when it ends, and a provider that knows how far a call has come (the local
//! models: the prompt tokens read, the tokens written) reports it through a [`CallProgress`]
//! from [`call`]. The turn reads [`ModelProgress::snapshot`] to tell the customer's client
//! that it is working and how far it is, however long a call takes.
//!
//! ```
//! use std::sync::Arc;
//! use guidepost_core::payload::ModelStep;
//! use guidepost_llm::progress::{self, ModelProgress};
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let meter = Arc::new(ModelProgress::default());
//! progress::measured(meter.clone(), async {
//!     // What a provider does while it answers.
//!     let call = progress::call().expect("measured");
//!     call.reading(120, 537);
//! })
//! .await;
//! // The call ended: its work is no longer shown.
//! assert_eq!(meter.snapshot().1, None);
//! assert_eq!(progress::call().map(|_| ()), None, "outside a measured future nothing is reported");
//! # });
//! ```

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

pub use guidepost_core::payload::{ModelStep, ModelWork};

tokio::task_local! {
    static CURRENT: Arc<ModelProgress>;
}

/// Hears every report of a call's work, as it is made.
pub type Listener = Arc<dyn Fn(ModelWork) + Send + Sync>;

/// The model calls of one turn: how many ended, and how far the one under way has come.
#[derive(Default)]
pub struct ModelProgress {
    state: Mutex<State>,
    next_call: AtomicU64,
    listener: Option<Listener>,
}

impl std::fmt::Debug for ModelProgress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelProgress").field("state", &self.state).finish_non_exhaustive()
    }
}

#[derive(Debug, Default)]
struct State {
    /// Calls that ended.
    calls: u32,
    /// The work shown, and the call it belongs to.
    work: Option<(u64, ModelWork)>,
}

impl ModelProgress {
    /// A meter that also passes every report of a call's work to `listener` as it is made
    /// (to log it, or draw it as it happens), besides keeping the latest.
    pub fn with_listener(listener: Listener) -> Self {
        Self { listener: Some(listener), ..Self::default() }
    }

    /// The model calls that ended, and the work of the call under way when a provider
    /// reports it.
    pub fn snapshot(&self) -> (u32, Option<ModelWork>) {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        (state.calls, state.work.map(|(_, work)| work))
    }

    /// Counts a call that ended.
    pub fn call_ended(&self) {
        self.state.lock().unwrap_or_else(PoisonError::into_inner).calls += 1;
    }

    /// A reporter for one call under way.
    pub fn call(self: &Arc<Self>) -> CallProgress {
        CallProgress { meter: Arc::clone(self), id: self.next_call.fetch_add(1, Ordering::Relaxed) }
    }

    fn show(&self, id: u64, work: ModelWork) {
        if let Some(listener) = &self.listener {
            listener(work);
        }
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        // A call that only waits does not hide one the model works on.
        let busy_elsewhere = state.work.is_some_and(|(other, w)| other != id && w.step != ModelStep::Waiting);
        if work.step == ModelStep::Waiting && busy_elsewhere {
            return;
        }
        state.work = Some((id, work));
    }
}

/// What a provider reports of one call, while it runs. The work shown goes when it is
/// dropped.
#[derive(Debug)]
pub struct CallProgress {
    meter: Arc<ModelProgress>,
    id: u64,
}

impl CallProgress {
    /// The call waits for the model, busy with another call.
    pub fn waiting(&self) {
        self.meter.show(self.id, ModelWork { step: ModelStep::Waiting, done: 0, total: 0 });
    }

    /// The model has read `done` of the `total` prompt tokens it reads.
    pub fn reading(&self, done: usize, total: usize) {
        self.meter.show(self.id, work(ModelStep::Reading, done, total));
    }

    /// The model has written `done` tokens, of at most `limit`.
    pub fn writing(&self, done: usize, limit: usize) {
        self.meter.show(self.id, work(ModelStep::Writing, done, limit));
    }
}

fn work(step: ModelStep, done: usize, total: usize) -> ModelWork {
    let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    ModelWork { step, done: count(done.min(total)), total: count(total) }
}

impl Drop for CallProgress {
    fn drop(&mut self) {
        let mut state = self.meter.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.work.is_some_and(|(id, _)| id == self.id) {
            state.work = None;
        }
    }
}

/// Runs `future` with `meter` measuring the model calls it makes (those it awaits in its own
/// task).
pub async fn measured<F: Future>(meter: Arc<ModelProgress>, future: F) -> F::Output {
    CURRENT.scope(meter, future).await
}

/// The meter of the measured future this runs in, if any.
pub fn current() -> Option<Arc<ModelProgress>> {
    CURRENT.try_with(Arc::clone).ok()
}

/// A reporter for a call starting now, inside a measured future; `None` outside one.
pub fn call() -> Option<CallProgress> {
    current().map(|meter| meter.call())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[tokio::test]
    async fn the_call_the_model_works_on_is_shown_until_it_ends_and_ended_calls_count() {
        let meter = Arc::new(ModelProgress::default());
        let seen = measured(meter.clone(), async {
            let (first, second) = (call().unwrap(), call().unwrap());
            first.reading(10, 40);
            second.waiting();
            let reading = current().unwrap().snapshot().1;
            first.writing(3, 200);
            let writing = meter.snapshot().1;
            drop(first);
            current().unwrap().call_ended();
            second.waiting();
            let waiting = meter.snapshot();
            second.reading(500, 20);
            (reading, writing, waiting, meter.snapshot().1)
        })
        .await;
        assert_eq!(seen.0, Some(ModelWork { step: ModelStep::Reading, done: 10, total: 40 }), "a wait hides nothing");
        assert_eq!(seen.1, Some(ModelWork { step: ModelStep::Writing, done: 3, total: 200 }));
        assert_eq!(seen.2, (1, Some(ModelWork { step: ModelStep::Waiting, done: 0, total: 0 })));
        assert_eq!(seen.3, Some(ModelWork { step: ModelStep::Reading, done: 20, total: 20 }), "done within total");
        assert_eq!(meter.snapshot(), (1, None), "the last reporter went with its call");
    }
}
