//! Prometheus metrics at `GET /metrics`: requests by route and status, turns by outcome,
//! turn and request durations, model usage, and what the server holds open.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use guidepost_conversation::TurnObserver;
use guidepost_llm::UsageTotals;
use guidepost_store::TurnState;

const BUCKETS: &[f64] = &[0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0];

/// A latency histogram with fixed buckets (seconds).
#[derive(Debug, Default)]
struct Histogram {
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    fn observe(&mut self, seconds: f64) {
        if self.counts.is_empty() {
            self.counts = vec![0; BUCKETS.len()];
        }
        for (i, b) in BUCKETS.iter().enumerate() {
            if seconds <= *b {
                self.counts[i] += 1;
            }
        }
        self.sum += seconds;
        self.count += 1;
    }

    fn render(&self, out: &mut String, name: &str, labels: &str) {
        let sep = if labels.is_empty() { "" } else { "," };
        for (i, b) in BUCKETS.iter().enumerate() {
            let n = self.counts.get(i).copied().unwrap_or(0);
            let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"{b}\"}} {n}");
        }
        let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {}", self.count);
        let braces = if labels.is_empty() { String::new() } else { format!("{{{labels}}}") };
        let _ = writeln!(out, "{name}_sum{braces} {}", self.sum);
        let _ = writeln!(out, "{name}_count{braces} {}", self.count);
    }
}

/// The server's counters.
#[derive(Debug)]
pub struct Metrics {
    started: Instant,
    requests: Mutex<BTreeMap<(String, String, u16), u64>>,
    request_seconds: Mutex<BTreeMap<String, Histogram>>,
    turns: Mutex<BTreeMap<String, u64>>,
    turn_seconds: Mutex<Histogram>,
    model_calls: AtomicU64,
    prompt_tokens: AtomicU64,
    completion_tokens: AtomicU64,
}

impl Default for Metrics {
    fn default() -> Self {
        Self {
            started: Instant::now(),
            requests: Mutex::default(),
            request_seconds: Mutex::default(),
            turns: Mutex::default(),
            turn_seconds: Mutex::default(),
            model_calls: AtomicU64::new(0),
            prompt_tokens: AtomicU64::new(0),
            completion_tokens: AtomicU64::new(0),
        }
    }
}

fn escape(label: &str) -> String {
    label.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

impl Metrics {
    /// One request answered.
    pub fn request(&self, method: &str, route: &str, status: u16, took: Duration) {
        *self
            .requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry((method.to_string(), route.to_string(), status))
            .or_default() += 1;
        self.request_seconds
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(route.to_string())
            .or_default()
            .observe(took.as_secs_f64());
    }

    /// The Prometheus text exposition, with `watched_sessions` sessions long-polled or
    /// streamed right now.
    pub fn render(&self, watched_sessions: usize) -> String {
        let mut out = String::new();
        out.push_str("# HELP guidepost_uptime_seconds Seconds since the server started.\n# TYPE guidepost_uptime_seconds gauge\n");
        let _ = writeln!(out, "guidepost_uptime_seconds {}", self.started.elapsed().as_secs_f64());
        out.push_str("# HELP guidepost_http_requests_total Requests answered, by method, route and status.\n# TYPE guidepost_http_requests_total counter\n");
        for ((method, route, status), n) in self.requests.lock().unwrap_or_else(PoisonError::into_inner).iter() {
            let _ = writeln!(
                out,
                "guidepost_http_requests_total{{method=\"{}\",route=\"{}\",status=\"{status}\"}} {n}",
                escape(method),
                escape(route)
            );
        }
        out.push_str("# HELP guidepost_http_request_duration_seconds Time to answer, by route.\n# TYPE guidepost_http_request_duration_seconds histogram\n");
        for (route, h) in self.request_seconds.lock().unwrap_or_else(PoisonError::into_inner).iter() {
            h.render(&mut out, "guidepost_http_request_duration_seconds", &format!("route=\"{}\"", escape(route)));
        }
        out.push_str("# HELP guidepost_turns_total Turns ended, by outcome.\n# TYPE guidepost_turns_total counter\n");
        for (status, n) in self.turns.lock().unwrap_or_else(PoisonError::into_inner).iter() {
            let _ = writeln!(out, "guidepost_turns_total{{status=\"{}\"}} {n}", escape(status));
        }
        out.push_str("# HELP guidepost_turn_duration_seconds Time from claiming a turn to its end.\n# TYPE guidepost_turn_duration_seconds histogram\n");
        self.turn_seconds.lock().unwrap_or_else(PoisonError::into_inner).render(
            &mut out,
            "guidepost_turn_duration_seconds",
            "",
        );
        for (name, help, value) in [
            ("guidepost_model_calls_total", "Model calls made by turns.", &self.model_calls),
            ("guidepost_prompt_tokens_total", "Prompt tokens sent by turns.", &self.prompt_tokens),
            ("guidepost_completion_tokens_total", "Completion tokens received by turns.", &self.completion_tokens),
        ] {
            let _ =
                writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}", value.load(Ordering::Relaxed));
        }
        let _ = writeln!(
            out,
            "# HELP guidepost_watched_sessions Sessions with a long poll or stream waiting.\n# TYPE guidepost_watched_sessions gauge\nguidepost_watched_sessions {watched_sessions}"
        );
        out
    }
}

impl TurnObserver for Metrics {
    fn turn_finished(&self, status: TurnState, took: Duration) {
        *self.turns.lock().unwrap_or_else(PoisonError::into_inner).entry(status.as_str().to_string()).or_default() += 1;
        self.turn_seconds.lock().unwrap_or_else(PoisonError::into_inner).observe(took.as_secs_f64());
    }

    fn model_usage(&self, usage: &UsageTotals) {
        self.model_calls.fetch_add(usage.calls, Ordering::Relaxed);
        self.prompt_tokens.fetch_add(usage.prompt_tokens, Ordering::Relaxed);
        self.completion_tokens.fetch_add(usage.completion_tokens, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_prometheus_text() {
        let m = Metrics::default();
        m.request("GET", "/agents", 200, Duration::from_millis(3));
        m.turn_finished(TurnState::Completed, Duration::from_millis(700));
        m.model_usage(&UsageTotals { calls: 3, prompt_tokens: 1200, completion_tokens: 80, ..UsageTotals::default() });
        let text = m.render(2);
        assert!(text.contains("guidepost_http_requests_total{method=\"GET\",route=\"/agents\",status=\"200\"} 1"));
        assert!(text.contains("guidepost_turns_total{status=\"completed\"} 1"));
        assert!(text.contains("guidepost_turn_duration_seconds_bucket{le=\"1\"} 1"));
        assert!(text.contains("guidepost_prompt_tokens_total 1200"));
        assert!(text.contains("guidepost_watched_sessions 2"));
    }
}
