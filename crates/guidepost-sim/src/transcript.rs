//! Renders a run's traces as text for prompts, keeping the newest turns verbatim and condensing
//! older ones once a character budget is exceeded (so long runs never overflow a prompt).

use crate::trajectory::StepTrace;

/// Characters kept of each condensed older message.
const CONDENSED_CHARS: usize = 160;

/// Splits `traces` into a condensed digest of older turns and the newest turns that fit in
/// `budget` characters (at least the last one is always kept verbatim).
pub(crate) fn split_by_budget(traces: &[StepTrace], budget: usize, with_tools: bool) -> (String, &[StepTrace]) {
    let mut used = 0usize;
    let mut keep_from = traces.len();
    for (i, trace) in traces.iter().enumerate().rev() {
        let size = render_turn(trace, with_tools).len();
        if keep_from < traces.len() && used + size > budget {
            break;
        }
        used += size;
        keep_from = i;
    }
    let older = &traces[..keep_from];
    let digest = older
        .iter()
        .map(|t| {
            let agent = t.agent_texts().join(" ");
            format!("- Customer: {}\n  Agent: {}", condense(&t.user_message.text()), condense(&agent))
        })
        .collect::<Vec<_>>()
        .join("\n");
    (digest, &traces[keep_from..])
}

/// One turn as `Customer: ...` / `Agent: ...` lines (tool calls and results included when asked).
pub(crate) fn render_turn(trace: &StepTrace, with_tools: bool) -> String {
    let mut out = format!("Customer: {}", trace.user_message.text());
    for message in &trace.agent_messages {
        let text = if with_tools { message.render() } else { message.text() };
        if text.is_empty() || (!with_tools && message.role != crate::message::MessageRole::Assistant) {
            continue;
        }
        let label = if message.role == crate::message::MessageRole::Tool { "Tool" } else { "Agent" };
        out.push_str(&format!("\n{label}: {text}"));
    }
    out
}

/// The whole conversation for the ranker and the judge: a digest of old turns, then the newest
/// turns verbatim with tool calls.
pub(crate) fn render_conversation(traces: &[StepTrace], preamble: &[String], budget: usize) -> String {
    let (digest, recent) = split_by_budget(traces, budget, true);
    let mut parts: Vec<String> = preamble.iter().map(|p| format!("Agent: {p}")).collect();
    if !digest.is_empty() {
        parts.push(format!("(earlier turns, condensed)\n{digest}"));
    }
    parts.extend(recent.iter().map(|t| render_turn(t, true)));
    if parts.is_empty() { "(no messages yet)".to_string() } else { parts.join("\n---\n") }
}

fn condense(text: &str) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= CONDENSED_CHARS {
        flat
    } else {
        let cut: String = flat.chars().take(CONDENSED_CHARS).collect();
        format!("{cut}…")
    }
}
