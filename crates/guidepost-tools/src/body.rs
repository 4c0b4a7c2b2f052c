//! Reading HTTP bodies from tool services within [`Limit::ToolResultSize`]: a result or a
//! catalogue past the limit is refused as soon as it gets there, not read whole first.

use guidepost_core::limits::{Limit, Limits};

/// Reads `response`'s body as text, at most [`Limit::ToolResultSize`] bytes; `subject` names
/// the service and request in the error (`service `bank`: GET http://...`).
pub async fn read_capped(mut response: reqwest::Response, subject: &str) -> Result<String, String> {
    let limits = Limits::global();
    let max = limits.tool_result_size;
    let mut bytes = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| format!("{subject}: {e}"))? {
        if bytes.len() + chunk.len() > max {
            let what = format!("a body of more than {max} bytes");
            return Err(limits.exceeded(Limit::ToolResultSize, subject, what).to_string());
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Refuses a decoded value whose JSON text is larger than [`Limit::ToolResultSize`]
/// (for transports that hand over whole messages, like MCP).
pub fn check_size(value: &serde_json::Value, subject: &str) -> Result<(), String> {
    let limits = Limits::global();
    let size = serde_json::to_vec(value).map(|v| v.len()).unwrap_or(usize::MAX);
    limits
        .check_count(Limit::ToolResultSize, subject, u64::try_from(size).unwrap_or(u64::MAX))
        .map_err(|e| e.to_string())
}
