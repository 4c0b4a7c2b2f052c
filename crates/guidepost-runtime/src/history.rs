//! The conversation as composition and tool inference see it: the customer's latest turns word
//! for word and, for the turns before them, what the agent already knows (what it has done,
//! what its tools returned) instead of their transcript. A long conversation then costs about
//! as much per turn as a short one.
//!
//! Checks on a reply (grounding, the customer's own words) still read the whole conversation;
//! only the prompts are bounded.

use guidepost_core::{AgentDefinition, Event, EventKind};
use serde_json::Value;

/// How many of the customer's latest turns are shown word for word unless configured
/// otherwise (see [`crate::RuntimeConfig::history_turns`]).
pub const DEFAULT_HISTORY_TURNS: usize = 12;

/// At most this many things done and tool results stand for the hidden turns.
const EARLIER_FACTS: usize = 6;

/// An earlier tool result is cut to this many characters.
const RESULT_CHARS: usize = 300;

/// The conversation a prompt shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptHistory<'a> {
    /// The messages shown word for word, oldest first: from the customer's
    /// `history_turns`-th latest message on.
    pub shown: &'a [(String, String)],
    /// What stands for the messages before them; `None` when every message is shown.
    pub earlier: Option<String>,
}

/// What the engine knows of a conversation's earlier turns.
#[derive(Debug, Clone, Copy)]
pub struct Earlier<'a> {
    /// The agent (for the actions of applied guidelines).
    pub definition: &'a AgentDefinition,
    /// The session's events before this turn (its tool events).
    pub events: &'a [Event],
    /// Guidelines the agent has applied in this session, oldest first.
    pub applied_guideline_ids: &'a [String],
}

/// Bounds `conversation` to the customer's latest `turns` turns and sums up the rest.
pub fn bound<'a>(conversation: &'a [(String, String)], turns: usize, earlier: Earlier<'_>) -> PromptHistory<'a> {
    let customer_messages: Vec<usize> =
        conversation.iter().enumerate().filter(|(_, (who, _))| who == "customer").map(|(i, _)| i).collect();
    let turns = turns.max(1);
    let Some(&start) = customer_messages.len().checked_sub(turns).and_then(|first| customer_messages.get(first)) else {
        return PromptHistory { shown: conversation, earlier: None };
    };
    if start == 0 {
        return PromptHistory { shown: conversation, earlier: None };
    }
    let mut note = format!("({start} earlier messages of this conversation are not shown.");
    let done = already_done(earlier);
    if !done.is_empty() {
        note.push_str(&format!(" Done in them: {}.", done.join("; ")));
    }
    let results = earlier_tool_results(earlier.events);
    if !results.is_empty() {
        note.push_str(&format!(" Earlier tool results: {}.", results.join("; ")));
    }
    note.push(')');
    PromptHistory { shown: conversation.get(start..).unwrap_or(conversation), earlier: Some(note) }
}

/// The actions of the latest guidelines applied, oldest first.
fn already_done(earlier: Earlier<'_>) -> Vec<String> {
    let mut done: Vec<String> = Vec::new();
    for id in earlier.applied_guideline_ids.iter().rev() {
        let Some(action) = earlier.definition.guideline(id).and_then(|g| g.action.as_deref()) else { continue };
        let action = action.trim().trim_end_matches('.').to_string();
        if !action.is_empty() && !done.contains(&action) {
            done.push(action);
        }
        if done.len() == EARLIER_FACTS {
            break;
        }
    }
    done.reverse();
    done
}

/// The latest distinct tool calls of earlier turns as `tool(arguments) -> data`, oldest first.
fn earlier_tool_results(events: &[Event]) -> Vec<String> {
    let calls = events
        .iter()
        .filter(|e| e.kind == EventKind::Tool && !e.deleted)
        .filter_map(|e| e.data.get("tool_calls").and_then(Value::as_array))
        .flatten();
    let described: Vec<String> = calls
        .map(|call| {
            let tool = call.get("tool_id").and_then(Value::as_str).unwrap_or("tool");
            let arguments = call.get("arguments").map(Value::to_string).unwrap_or_default();
            let result =
                call.get("result").map(|r| r.get("data").unwrap_or(r)).map(Value::to_string).unwrap_or_default();
            format!("{tool}({arguments}) -> {}", guidepost_llm::excerpt(&result, RESULT_CHARS))
        })
        .collect();
    // The same call with the same result, made again, is said once (where it was last made).
    let mut unique: Vec<String> = Vec::new();
    for call in described.into_iter().rev() {
        if !unique.contains(&call) {
            unique.push(call);
        }
        if unique.len() == EARLIER_FACTS {
            break;
        }
    }
    unique.reverse();
    unique
}

#[cfg(test)]
mod tests {
    use super::*;
    use guidepost_core::EventSource;
    use serde_json::json;

    fn conversation(turns: usize) -> Vec<(String, String)> {
        (0..turns)
            .flat_map(|i| {
                [("customer".to_string(), format!("question {i}")), ("agent".to_string(), format!("answer {i}"))]
            })
            .collect()
    }

    fn definition() -> AgentDefinition {
        let yaml = r#"
agent: {id: a, name: A}
guidelines:
  - {id: greet, condition: the customer says hello, action: Greet the customer.}
  - {id: ask_city, condition: the customer wants the weather, action: Ask for the city}
"#;
        let loaded =
            guidepost_core::definition::load_agent(&[guidepost_core::definition::SourceFile::new("agent.yaml", yaml)]);
        loaded.definition.unwrap_or_else(|| panic!("{:?}", loaded.diagnostics))
    }

    fn tool_event(city: &str, n: usize) -> Event {
        Event {
            id: format!("e{n}"),
            source: EventSource::AiAgent,
            kind: EventKind::Tool,
            offset: n as u64,
            creation_utc: chrono::Utc::now(),
            trace_id: format!("t{n}"),
            data: json!({"tool_calls": [{"tool_id": "weather:get_weather", "arguments": {"city": city}, "result": {"data": {"temperature": n}, "metadata": {}}}]}),
            metadata: Default::default(),
            deleted: false,
        }
    }

    #[test]
    fn a_short_conversation_is_shown_whole() {
        let definition = definition();
        let messages = conversation(3);
        let earlier = Earlier { definition: &definition, events: &[], applied_guideline_ids: &[] };
        assert_eq!(bound(&messages, 3, earlier), PromptHistory { shown: &messages[..], earlier: None });
        assert_eq!(bound(&messages, 12, earlier).earlier, None);
    }

    #[test]
    fn older_turns_give_way_to_what_was_done_and_found_in_them() {
        let definition = definition();
        let messages = conversation(50);
        let events: Vec<Event> = (0..9).map(|n| tool_event(&format!("city{n}"), n)).collect();
        let applied = vec!["greet".to_string(), "ask_city".to_string(), "unknown".to_string()];
        let earlier = Earlier { definition: &definition, events: &events, applied_guideline_ids: &applied };
        let bounded = bound(&messages, 12, earlier);
        assert_eq!(bounded.shown.len(), 24);
        assert_eq!(bounded.shown.first().map(|(_, t)| t.as_str()), Some("question 38"));
        let note = bounded.earlier.unwrap_or_default();
        assert!(note.starts_with("(76 earlier messages of this conversation are not shown."), "{note}");
        assert!(note.contains("Done in them: Greet the customer; Ask for the city."), "{note}");
        assert!(note.contains(r#"weather:get_weather({"city":"city8"}) -> {"temperature":8}"#), "{note}");
        assert!(!note.contains("city2"), "only the latest six results: {note}");
        let repeated: Vec<Event> = (0..4).map(|n| tool_event("Paris", 7 + (n % 2))).collect();
        let earlier = Earlier { definition: &definition, events: &repeated, applied_guideline_ids: &[] };
        let note = bound(&messages, 12, earlier).earlier.unwrap_or_default();
        assert_eq!(note.matches("Paris").count(), 2, "a call made again with the same result is said once: {note}");
    }

    #[test]
    fn the_bound_keeps_prompts_flat_as_the_conversation_grows() {
        let definition = definition();
        let earlier = Earlier { definition: &definition, events: &[], applied_guideline_ids: &[] };
        let size = |turns: usize| {
            let messages = conversation(turns);
            let bounded = bound(&messages, 12, earlier);
            bounded.shown.iter().map(|(_, t)| t.len()).sum::<usize>() + bounded.earlier.map_or(0, |e| e.len())
        };
        assert!(size(50) as f64 <= size(12) as f64 * 1.5, "{} vs {}", size(50), size(12));
        assert!(
            size(200) as f64 <= size(50) as f64 * 1.1,
            "only the numbers grow a digit: {} vs {}",
            size(200),
            size(50)
        );
    }
}
