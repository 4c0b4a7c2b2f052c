//! How much one caller can make the server hold, and for how long: the size of what a
//! customer posts, and the connections it serves (how long it waits for a request's headers,
//! how long for a client that stalls in the middle of a request, how many at once).
//!
//! Anyone who can reach a customer-facing server can open connections and post events, so
//! each of these has a small default and a flag of `guidepost serve` to change it.

use std::time::Duration;

use serde_json::Value;

use crate::error::ApiError;

/// The bounds a server keeps to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bounds {
    /// Bytes one event from a customer or their client (`customer`, `customer_ui`) may carry:
    /// its message, data and metadata as JSON (`--max-event-bytes`; 413 beyond).
    pub max_customer_event_bytes: usize,
    /// How long a request's headers may take to arrive, from the connection's opening or the
    /// end of the previous response (so an idle kept-alive connection is closed after it too;
    /// `--header-timeout-secs`).
    pub header_timeout: Duration,
    /// How long a client may stall in the middle of a request: between two pieces of its
    /// body, or not reading the response it is sent (`--idle-timeout-secs`). A long poll or an
    /// event stream waiting on the server is not a stall.
    pub idle_timeout: Duration,
    /// Connections served at once; one more is closed as soon as it is accepted
    /// (`--max-connections`).
    pub max_connections: usize,
}

impl Default for Bounds {
    fn default() -> Self {
        Self {
            max_customer_event_bytes: 16 * 1024,
            header_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
            max_connections: 1024,
        }
    }
}

/// Checks the size of an event a customer or their client posts: its message, data and
/// metadata, as JSON. 413 beyond `max` bytes.
pub fn check_customer_event(
    message: Option<&str>,
    data: Option<&Value>,
    metadata: Option<&indexmap::IndexMap<String, Value>>,
    max: usize,
) -> Result<(), ApiError> {
    let size = message
        .map_or(0, str::len)
        .saturating_add(data.map_or(0, json_len))
        .saturating_add(metadata.map_or(0, json_len));
    if size > max {
        return Err(ApiError::Oversized(format!(
            "an event from the customer carries at most {max} bytes (message, data and metadata as JSON); this \
             one carries {size} (the server's --max-event-bytes)"
        )));
    }
    Ok(())
}

/// Checks the size of a session created by a caller without an admin key (a customer's
/// application or, in production, anyone): its title, metadata and labels, as JSON. 413
/// beyond `max` bytes, the same bound as a customer's event.
pub fn check_customer_session(
    title: Option<&str>,
    metadata: Option<&indexmap::IndexMap<String, Value>>,
    labels: Option<&Vec<String>>,
    max: usize,
) -> Result<(), ApiError> {
    let size = title
        .map_or(0, str::len)
        .saturating_add(metadata.map_or(0, json_len))
        .saturating_add(labels.map_or(0, json_len));
    if size > max {
        return Err(ApiError::Oversized(format!(
            "a session created without an admin key carries at most {max} bytes (title, metadata and labels as \
             JSON); this one carries {size} (the server's --max-event-bytes)"
        )));
    }
    Ok(())
}

/// The length of a value's JSON text (`usize::MAX` when it does not serialize).
fn json_len<T: serde::Serialize>(value: &T) -> usize {
    serde_json::to_vec(value).map_or(usize::MAX, |v| v.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_customer_event_is_measured_whole() {
        let data = serde_json::json!({"blob": "x".repeat(100)});
        assert!(check_customer_event(Some("hello"), Some(&data), None, 200).is_ok());
        let error = check_customer_event(Some(&"y".repeat(150)), Some(&data), None, 200).unwrap_err();
        assert_eq!(error.status(), axum::http::StatusCode::PAYLOAD_TOO_LARGE);
        assert!(error.to_string().contains("--max-event-bytes"), "{error}");
    }

    #[test]
    fn a_customer_session_is_measured_whole() {
        let labels = vec!["l".repeat(50); 2];
        assert!(check_customer_session(Some("title"), None, Some(&labels), 200).is_ok());
        let metadata: indexmap::IndexMap<String, Value> = [("m".to_string(), Value::from("z".repeat(150)))].into();
        let error = check_customer_session(Some("title"), Some(&metadata), Some(&labels), 200).unwrap_err();
        assert_eq!(error.status(), axum::http::StatusCode::PAYLOAD_TOO_LARGE);
    }
}
