//! What a turn starts from, read from the store: the session's customer, its events so far
//! and the state the previous turn left ([`turn_input`]), for turns and utterances alike.

use guidepost_core::session::GUEST_NAME;
use guidepost_core::{Customer, Session};
use guidepost_runtime::{CustomerRef, TurnInput};
use guidepost_store::{EventFilter, Store, StoreError};

/// A part of a turn's input that could not be read.
#[derive(Debug, thiserror::Error)]
#[error("{what} cannot be read: {source}")]
pub struct InputError {
    /// What: `the customer`, `the session's events`, `the agent state`.
    pub what: &'static str,
    /// Why.
    #[source]
    pub source: StoreError,
}

/// The input of turn `trace_id` of `session`: who the customer is (by name when the store
/// knows one other than the guest's), the session's events so far, the new message(s)
/// included, and the state the previous turn left.
pub async fn turn_input(store: &Store, session: &Session, trace_id: &str) -> Result<TurnInput, InputError> {
    let read = |what| move |source| InputError { what, source };
    let customer =
        store.get::<Customer>(&session.customer_id).await.map_err(read("the customer"))?.map(|record| record.entity);
    let events = store.list_events(&session.id, &EventFilter::default()).await.map_err(read("the session's events"))?;
    let previous_state = store.latest_agent_state(&session.id).await.map_err(read("the agent state"))?;
    Ok(TurnInput {
        session_id: session.id.clone(),
        customer: CustomerRef {
            id: session.customer_id.clone(),
            tags: customer.as_ref().map(|c| c.tags.clone()).unwrap_or_default(),
        },
        customer_name: customer.map(|c| c.name).filter(|n| !n.is_empty() && n != GUEST_NAME),
        events,
        previous_state,
        trace_id: trace_id.to_string(),
    })
}
