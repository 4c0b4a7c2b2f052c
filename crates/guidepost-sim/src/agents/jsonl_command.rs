//! An agent that is a command speaking JSON lines on stdin/stdout.
//!
//! # Line protocol
//!
//! The simulator starts the command once per run (through `sh -c`), writes one JSON object per
//! line to its stdin and reads one JSON object per line from its stdout. Lines on stdout that are
//! not JSON objects are ignored (logged), so the command may print diagnostics to stderr or
//! even stdout.
//!
//! Simulator → command:
//!
//! ```text
//! {"type":"start","conversation_id":"taxi-happy-path-trial0"}
//! {"type":"customer_message","text":"I need a taxi"}        ← the command must answer
//! {"type":"agent_message","text":"Hello! Where to?"}        ← a scripted agent line; no answer
//! {"type":"end"}                                             ← then stdin is closed
//! ```
//!
//! Command → simulator, one line per `customer_message`:
//!
//! ```text
//! {"type":"reply","messages":["Where should I pick you up?"],
//!  "tool_calls":[{"name":"book_taxi","arguments":{"pickup":"Oak St"},"result":{"id":"TX-1"}}],
//!  "observations":{"journeys_entered":["book_taxi"],"guidelines_matched":["greet"],
//!                  "journey_states":[{"journey":"book_taxi","state":"pickup"}],
//!                  "tools_called":[{"tool":"book_taxi","arguments":{"pickup":"Oak St"}}]},
//!  "usage":{"model":"m","prompt_tokens":10,"completion_tokens":5}}
//! {"type":"error","message":"what went wrong"}
//! ```
//!
//! `tool_calls`, `observations` and `usage` are optional. A tool's `name` may be `service:name`
//! (or give `service` apart). `messages` and `tool_calls` say nothing of their relative order
//! (the tool calls are taken as made before the messages); a command that knows the order
//! answers with `items` instead, in order:
//!
//! ```text
//! {"type":"reply","items":[{"type":"preamble","text":"One moment."},
//!   {"type":"tool_call","name":"book_taxi","arguments":{"pickup":"Oak St"},"result":{"id":"TX-1"}},
//!   {"type":"message","text":"Booked."}]}
//! ```
//!
//! A command that exits, or does not answer within the turn timeout, fails the turn.

use std::process::Stdio;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::agents::{AgentFactory, AgentTurn, AgentUnderTest, ToolCallRecord, TurnItem};
use crate::error::AgentError;
use crate::observations::EngineObservations;

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum AgentLine {
    Reply(Box<ReplyLine>),
    Error { message: String },
}

#[derive(Debug, Deserialize)]
struct ReplyLine {
    #[serde(default)]
    items: Vec<TurnItem>,
    #[serde(default)]
    messages: Vec<String>,
    #[serde(default)]
    tool_calls: Vec<ToolCallRecord>,
    #[serde(default)]
    observations: Option<EngineObservations>,
    #[serde(default)]
    usage: Option<UsageLine>,
}

#[derive(Debug, Deserialize)]
struct UsageLine {
    #[serde(default)]
    model: String,
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
}

/// A running command.
#[derive(Debug)]
pub struct JsonlCommandAgent {
    command: String,
    child: Option<Child>,
    stdin: Option<ChildStdin>,
    stdout: Option<Lines<BufReader<ChildStdout>>>,
}

impl JsonlCommandAgent {
    /// An agent running `command` (a shell command line) once started.
    pub fn new(command: impl Into<String>) -> Self {
        Self { command: command.into(), child: None, stdin: None, stdout: None }
    }

    async fn send(&mut self, value: Value) -> Result<(), AgentError> {
        let stdin = self.stdin.as_mut().ok_or_else(|| AgentError::Protocol("the command was not started".into()))?;
        let mut line = value.to_string();
        line.push('\n');
        stdin
            .write_all(line.as_bytes())
            .await
            .map_err(|e| AgentError::Transport(format!("writing to the command: {e}")))?;
        stdin.flush().await.map_err(|e| AgentError::Transport(format!("writing to the command: {e}")))
    }

    async fn read_reply(&mut self) -> Result<AgentTurn, AgentError> {
        let stdout = self.stdout.as_mut().ok_or_else(|| AgentError::Protocol("the command was not started".into()))?;
        loop {
            let line = stdout
                .next_line()
                .await
                .map_err(|e| AgentError::Transport(format!("reading from the command: {e}")))?
                .ok_or_else(|| AgentError::Transport("the command closed its output".into()))?;
            let trimmed = line.trim();
            if !trimmed.starts_with('{') {
                tracing::debug!(line = trimmed, "ignoring a non-JSON line from the agent command");
                continue;
            }
            return match serde_json::from_str::<AgentLine>(trimmed) {
                Ok(AgentLine::Reply(reply)) => Ok(AgentTurn {
                    items: reply
                        .items
                        .into_iter()
                        .chain(reply.tool_calls.into_iter().map(|call| TurnItem::ToolCall(Box::new(call))))
                        .chain(reply.messages.into_iter().map(|text| TurnItem::Message { text }))
                        .map(|item| match item {
                            TurnItem::ToolCall(call) => TurnItem::ToolCall(Box::new(call.normalized())),
                            other => other,
                        })
                        .collect(),
                    observations: reply.observations,
                    usage: reply.usage.map(|u| {
                        let mut usage = guidepost_llm::Usage::new(u.model);
                        usage.prompt_tokens = u.prompt_tokens;
                        usage.completion_tokens = u.completion_tokens;
                        usage
                    }),
                }),
                Ok(AgentLine::Error { message }) => Err(AgentError::Reported(message)),
                Err(e) => Err(AgentError::Protocol(format!("invalid line from the command ({e}): {trimmed}"))),
            };
        }
    }
}

#[async_trait]
impl AgentUnderTest for JsonlCommandAgent {
    async fn start(&mut self, conversation_id: &str) -> Result<(), AgentError> {
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(&self.command)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| AgentError::Transport(format!("cannot start `{}`: {e}", self.command)))?;
        self.stdin = child.stdin.take();
        self.stdout = child.stdout.take().map(|out| BufReader::new(out).lines());
        self.child = Some(child);
        self.send(json!({"type": "start", "conversation_id": conversation_id})).await
    }

    async fn reply(&mut self, customer_message: &str) -> Result<AgentTurn, AgentError> {
        self.send(json!({"type": "customer_message", "text": customer_message})).await?;
        self.read_reply().await
    }

    async fn inject_agent_message(&mut self, text: &str) -> Result<(), AgentError> {
        self.send(json!({"type": "agent_message", "text": text})).await
    }

    async fn finish(&mut self) -> Result<(), AgentError> {
        if self.stdin.is_some() {
            let _ = self.send(json!({"type": "end"})).await;
        }
        self.stdin = None;
        if let Some(mut child) = self.child.take() {
            match tokio::time::timeout(std::time::Duration::from_secs(2), child.wait()).await {
                Ok(_) => {}
                Err(_) => {
                    let _ = child.kill().await;
                }
            }
        }
        Ok(())
    }
}

/// Makes one [`JsonlCommandAgent`] (one process) per run.
#[derive(Debug, Clone)]
pub struct JsonlCommandFactory {
    /// The shell command line.
    pub command: String,
}

#[async_trait]
impl AgentFactory for JsonlCommandFactory {
    fn describe(&self) -> String {
        format!("command `{}`", self.command)
    }

    async fn create(&self) -> Result<Box<dyn AgentUnderTest>, AgentError> {
        Ok(Box::new(JsonlCommandAgent::new(self.command.clone())))
    }
}
