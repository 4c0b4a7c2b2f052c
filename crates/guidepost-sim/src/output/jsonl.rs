//! `toJSONL`: one JSON line per step of a run, every line with the run's one conversation id
//! and the result-level fields (`completed`, `reason` as Tally names it, `guidepostReason`,
//! `summary`).

use serde_json::json;

use crate::runner::RunResult;

/// The JSONL lines of a run.
pub fn to_jsonl(result: &RunResult) -> Vec<String> {
    result
        .traces
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let mut metadata = json!({
                "completed": result.completed,
                "reason": result.reason.to_tally(result.completed),
                "guidepostReason": result.reason,
                "summary": result.summary,
            });
            if let (Some(end), Some(obj)) = (&t.end, metadata.as_object_mut()) {
                obj.insert("end".into(), serde_json::to_value(end).unwrap_or_default());
            }
            json!({
                "conversationId": result.conversation_id,
                "stepIndex": i,
                "turnIndex": t.turn_index,
                "stepId": t.step_id,
                "selection": t.selection,
                "input": t.user_message,
                "output": t.agent_messages,
                "timestamp": t.timestamp,
                "metadata": metadata,
            })
            .to_string()
        })
        .collect()
}
