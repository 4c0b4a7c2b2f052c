//! A turn that runs again (its process died, it was handed back, another replica took it
//! over) with the calls an earlier attempt recorded: a returned call is reused, a lost
//! lookup is asked again, a lost action is sent again only to a tool that recognizes a
//! repeat by its idempotency key and is otherwise reported as being checked; the earlier
//! attempt's decision stands when the rerun's model answers differently. A turn that acted
//! is not cancelled.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use guidepost_core::ToolId;
use guidepost_llm::TaskKind;
use guidepost_llm::providers::scripted::ScriptedModel;
use guidepost_runtime::journal::{
    CallJournal, CallSource, EntryState, JournalEntry, JournalError, RecordedOutcome, Sending, call_id,
};
use guidepost_runtime::{AgentRuntime, CustomerRef, EmittingLatch, MemorySession, TurnInput, TurnOutcome, TurnStatus};
use guidepost_tools::native::{NativeTool, parameter};
use guidepost_tools::{ToolResult, registry::ToolRegistry};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::support::*;

/// The store's journal semantics, in memory.
#[derive(Default)]
struct MemoryJournal {
    entries: Mutex<Vec<JournalEntry>>,
}

impl MemoryJournal {
    fn entries(&self) -> Vec<JournalEntry> {
        self.entries.lock().unwrap().clone()
    }
}

#[async_trait]
impl CallJournal for MemoryJournal {
    async fn recorded(&self, turn_id: &str) -> Result<Vec<JournalEntry>, JournalError> {
        Ok(self.entries().into_iter().filter(|e| e.turn_id == turn_id).collect())
    }

    async fn sending(&self, entry: &JournalEntry) -> Result<Sending, JournalError> {
        let mut entries = self.entries.lock().unwrap();
        match entries.iter().find(|e| e.call_id == entry.call_id) {
            Some(e) if e.state == EntryState::Started => Ok(Sending::Recorded),
            Some(e) => Ok(Sending::Settled(Box::new(e.clone()))),
            None => {
                entries.push(JournalEntry { state: EntryState::Started, ..entry.clone() });
                Ok(Sending::Recorded)
            }
        }
    }

    async fn ended(&self, entry: &JournalEntry, state: EntryState) -> Result<(), JournalError> {
        let mut entries = self.entries.lock().unwrap();
        if let Some(e) = entries.iter_mut().find(|e| e.call_id == entry.call_id)
            && e.state != EntryState::Unconfirmed
            && !matches!(e.state, EntryState::Returned(_))
        {
            e.state = state;
        }
        Ok(())
    }
}

const RIDES: &str = r#"
agent: {name: Rita}
guidelines:
  - id: book
    condition: The customer wants a taxi
    action: Book the taxi and tell them it is booked
    tools: [book_taxi]
tools:
  - name: book_taxi
    description: Book a taxi from an address
    service: native
    consequential: true
    parameters:
      pickup: {type: string, description: Where to pick the customer up}
"#;

/// Every call the booking service received: (pickup, idempotency key).
type Bookings = Arc<Mutex<Vec<(String, Option<String>)>>>;

fn rides(pickup: &'static str, keyed: bool, journal: Arc<MemoryJournal>) -> (Arc<AgentRuntime>, Bookings) {
    let definition = inline(RIDES);
    let inference = ScriptedModel::new().when_task(TaskKind::ToolInference).reply_with(move |_| {
        Ok(json!({"tools": [{"tool": "book_taxi", "rationale": "asked", "decision": "needs_to_run", "calls": [{"arguments": {"pickup": pickup}}]}]}))
    });
    let model = Arc::new(with_reply(
        with_matching(inference, Arc::new(|c: &str, last: &str, _: &str| c.contains("taxi") && last.contains("taxi"))),
        |p| if p.contains("booking") { "Your taxi is booked.".into() } else { "Done.".into() },
    ));
    let bookings = Bookings::default();
    let seen = bookings.clone();
    let mut tool = NativeTool::new("book_taxi", move |args, ctx| {
        let seen = seen.clone();
        async move {
            let pickup = args["pickup"].as_str().unwrap_or_default().to_string();
            seen.lock().unwrap().push((pickup.clone(), ctx.idempotency_key().map(str::to_string)));
            Ok::<_, String>(json!({"booking": 7, "pickup": pickup}))
        }
    })
    .consequential(true)
    .parameter(parameter("pickup", guidepost_core::tool::ParameterType::String));
    if keyed {
        tool = tool.idempotency_keys();
    }
    let mut registry: ToolRegistry = fixtures(&definition);
    registry.register_native(tool);
    let rt = AgentRuntime::new(
        Arc::new(definition),
        guidepost_runtime::RuntimeModels::single(model, None),
        Arc::new(registry),
        Default::default(),
    )
    .with_journal(journal);
    (Arc::new(rt), bookings)
}

fn input(session: &MemorySession) -> TurnInput {
    let guest = CustomerRef { id: "guest".into(), tags: vec![] };
    session.customer_turn("s1", guest, "I need a taxi from 12 Main Street", &Default::default())
}

async fn attempt(rt: &AgentRuntime, session: &MemorySession, input: &TurnInput) -> TurnOutcome {
    rt.process(input.clone(), session, CancellationToken::new(), EmittingLatch::default()).await
}

/// The booking an earlier attempt sent, as its record stands.
fn earlier(input: &TurnInput, pickup: &str, state: EntryState) -> JournalEntry {
    let tool = ToolId::new("native", "book_taxi");
    JournalEntry {
        call_id: call_id(&input.trace_id, &tool, 0),
        turn_id: input.trace_id.clone(),
        tool,
        occurrence: 0,
        arguments: json!({"pickup": pickup}).as_object().cloned().unwrap(),
        consequential: true,
        state,
    }
}

fn sources(outcome: &TurnOutcome) -> Vec<CallSource> {
    outcome.trace.iterations.iter().flat_map(|i| &i.tool_calls).map(|c| c.source).collect()
}

#[tokio::test]
async fn a_call_that_returned_is_reused_when_the_turn_runs_again() {
    let journal = Arc::new(MemoryJournal::default());
    let (rt, bookings) = rides("12 Main Street", false, journal.clone());
    let session = MemorySession::new();
    let input = input(&session);
    let first = attempt(&rt, &session, &input).await;
    assert_eq!(first.status, TurnStatus::Completed);
    let key = call_id(&input.trace_id, &ToolId::new("native", "book_taxi"), 0);
    assert_eq!(*bookings.lock().unwrap(), [("12 Main Street".to_string(), Some(key.clone()))], "sent with its key");
    assert!(matches!(journal.entries()[0].state, EntryState::Returned(RecordedOutcome::Ok(_))));

    let again = attempt(&rt, &session, &input).await;
    assert_eq!(bookings.lock().unwrap().len(), 1, "the rerun did not book again");
    assert_eq!(sources(&again), [CallSource::Replayed]);
    assert_eq!(again.trace.iterations[0].tool_calls[0].result["data"]["booking"], 7);
    assert_eq!(again.trace.iterations[0].tool_calls[0].call_id.as_deref(), Some(key.as_str()));
    assert_eq!(again.status, TurnStatus::Completed);
}

#[tokio::test]
async fn a_lost_action_is_not_sent_again_to_a_tool_that_takes_no_key_and_the_customer_is_told_it_is_checked() {
    let journal = Arc::new(MemoryJournal::default());
    let (rt, bookings) = rides("12 Main Street", false, journal.clone());
    let session = MemorySession::new();
    let input = input(&session);
    journal.entries.lock().unwrap().push(earlier(&input, "12 Main Street", EntryState::Started));
    let outcome = attempt(&rt, &session, &input).await;
    assert!(bookings.lock().unwrap().is_empty(), "not sent again");
    assert_eq!(sources(&outcome), [CallSource::Unconfirmed]);
    assert_eq!(journal.entries()[0].state, EntryState::Unconfirmed, "marked for checking");
    assert_eq!(outcome.status, TurnStatus::Degraded);
    assert_eq!(outcome.trace.degraded[0].stage, guidepost_runtime::Stage::ToolCalls);
    assert!(outcome.trace.degraded[0].error.contains("being checked"), "{:?}", outcome.trace.degraded);
    assert!(outcome.trace.composition.outcome_check);
    let [reply] = outcome.messages.as_slice() else { panic!("one reply: {:?}", outcome.messages) };
    assert!(reply.contains("checking") && reply.contains("don't send it again"), "{reply}");
    let message = session.events().into_iter().rev().find(|e| e.kind == guidepost_core::EventKind::Message).unwrap();
    assert_eq!(message.data["degraded"][0]["stage"], "tool_calls", "the event says so too");
}

#[tokio::test]
async fn a_lost_action_is_sent_again_with_the_same_key_to_a_tool_that_takes_one() {
    let journal = Arc::new(MemoryJournal::default());
    let (rt, bookings) = rides("12 Main Street", true, journal.clone());
    let session = MemorySession::new();
    let input = input(&session);
    let lost = earlier(&input, "12 Main Street", EntryState::Started);
    journal.entries.lock().unwrap().push(lost.clone());
    let outcome = attempt(&rt, &session, &input).await;
    assert_eq!(*bookings.lock().unwrap(), [("12 Main Street".to_string(), Some(lost.call_id.clone()))]);
    assert_eq!(sources(&outcome), [CallSource::Resent]);
    assert_eq!(outcome.status, TurnStatus::Completed);
    assert!(matches!(journal.entries()[0].state, EntryState::Returned(_)));
}

#[tokio::test]
async fn the_earlier_decision_stands_when_the_rerun_decides_other_arguments() {
    let journal = Arc::new(MemoryJournal::default());
    // This attempt's model writes the address another way; the earlier booking was sent.
    let (rt, bookings) = rides("12 Main St", true, journal.clone());
    let session = MemorySession::new();
    let input = input(&session);
    journal.entries.lock().unwrap().push(earlier(&input, "12 Main Street", EntryState::Started));
    let outcome = attempt(&rt, &session, &input).await;
    let sent = bookings.lock().unwrap().clone();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].0, "12 Main Street", "resent as first sent, not as this attempt phrased it");
    assert_eq!(outcome.trace.iterations[0].tool_calls[0].arguments["pickup"], "12 Main Street");
}

#[tokio::test]
async fn a_recorded_booking_the_rerun_does_not_decide_still_reaches_the_reply() {
    let journal = Arc::new(MemoryJournal::default());
    // This attempt's model decides no call at all.
    let definition = inline(RIDES);
    let model = ScriptedModel::new().when_task(TaskKind::ToolInference).reply_json(json!({"tools": [
        {"tool": "book_taxi", "rationale": "unsure", "decision": "cannot_run", "calls": []}
    ]}));
    let model = Arc::new(with_reply(
        with_matching(model, Arc::new(|c: &str, last: &str, _: &str| c.contains("taxi") && last.contains("taxi"))),
        |p| {
            if p.contains("\"booking\":7") || p.contains("\"booking\": 7") { "Booked.".into() } else { "Sorry.".into() }
        },
    ));
    let mut registry = fixtures(&definition);
    let calls = Arc::new(Mutex::new(0));
    let counted = calls.clone();
    registry.register_native(
        NativeTool::new("book_taxi", move |_, _| {
            *counted.lock().unwrap() += 1;
            async { Ok::<_, String>(json!({"booking": 8})) }
        })
        .consequential(true),
    );
    let rt = AgentRuntime::new(
        Arc::new(definition),
        guidepost_runtime::RuntimeModels::single(model, None),
        Arc::new(registry),
        Default::default(),
    )
    .with_journal(journal.clone());
    let session = MemorySession::new();
    let input = input(&session);
    let result = RecordedOutcome::Ok(Box::new(ToolResult::new(json!({"booking": 7}))));
    journal.entries.lock().unwrap().push(earlier(&input, "12 Main Street", EntryState::Returned(result)));
    let outcome = rt.process(input.clone(), &session, CancellationToken::new(), EmittingLatch::default()).await;
    assert_eq!(*calls.lock().unwrap(), 0);
    assert_eq!(sources(&outcome), [CallSource::Replayed]);
    assert_eq!(outcome.messages, ["Booked."], "the reply knows of the booking");
    let tool_events: Vec<Value> =
        session.events().into_iter().filter(|e| e.kind == guidepost_core::EventKind::Tool).map(|e| e.data).collect();
    assert_eq!(tool_events.len(), 1);
    assert_eq!(tool_events[0]["tool_calls"][0]["result"]["data"]["booking"], 7);
}

#[tokio::test]
async fn a_turn_that_sent_a_consequential_call_is_not_cancelled() {
    let journal = Arc::new(MemoryJournal::default());
    let definition = inline(RIDES);
    let inference = ScriptedModel::new().when_task(TaskKind::ToolInference).reply_json(json!({"tools": [
        {"tool": "book_taxi", "rationale": "asked", "decision": "needs_to_run", "calls": [{"arguments": {"pickup": "12 Main Street"}}]}
    ]}));
    let model = Arc::new(with_reply(
        with_matching(inference, Arc::new(|c: &str, last: &str, _: &str| c.contains("taxi") && last.contains("taxi"))),
        |_| "Your taxi is booked.".into(),
    ));
    let (entered, release) = (Arc::new(tokio::sync::Notify::new()), Arc::new(tokio::sync::Notify::new()));
    let (e, r) = (entered.clone(), release.clone());
    let mut registry = fixtures(&definition);
    registry.register_native(
        NativeTool::new("book_taxi", move |_, _| {
            let (e, r) = (e.clone(), r.clone());
            async move {
                e.notify_one();
                r.notified().await;
                Ok::<_, String>(json!({"booking": 7}))
            }
        })
        .consequential(true),
    );
    let rt = AgentRuntime::new(
        Arc::new(definition),
        guidepost_runtime::RuntimeModels::single(model, None),
        Arc::new(registry),
        Default::default(),
    )
    .with_journal(journal);
    let session = Arc::new(MemorySession::new());
    let input = input(&session);
    let (cancel, latch) = (CancellationToken::new(), EmittingLatch::default());
    let running = {
        let (rt, session, cancel, latch) = (Arc::new(rt), session.clone(), cancel.clone(), latch.clone());
        tokio::spawn(async move { rt.process(input, session.as_ref(), cancel, latch).await })
    };
    entered.notified().await;
    assert!(latch.has_acted() && !latch.can_cancel());
    // A newer message asks the turn to stop while the booking runs.
    cancel.cancel();
    release.notify_one();
    let outcome = running.await.unwrap();
    assert_eq!(outcome.status, TurnStatus::Completed, "{:?}", outcome.trace);
    assert_eq!(outcome.messages, ["Your taxi is booked."]);
}
