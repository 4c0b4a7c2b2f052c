//! A tiny MCP server over stdio (newline-delimited JSON-RPC), used by the integration tests
//! as a child process. Not meant for anything else.

mod handler;

use std::sync::Arc;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::Mutex;

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::io::Result<()> {
    let stdout = Arc::new(Mutex::new(tokio::io::stdout()));
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut running = tokio::task::JoinSet::new();
    while let Some(line) = lines.next_line().await? {
        if line.trim().is_empty() {
            continue;
        }
        let stdout = Arc::clone(&stdout);
        // Requests run concurrently: a slow tool call does not hold up the others.
        running.spawn(async move {
            let answer = match serde_json::from_str(&line) {
                Ok(message) => handler::handle(&message).await,
                Err(e) => Some(handler::parse_error(&e.to_string())),
            };
            if let Some(answer) = answer {
                let mut out = stdout.lock().await;
                let _ = out.write_all(format!("{answer}\n").as_bytes()).await;
                let _ = out.flush().await;
            }
        });
    }
    while running.join_next().await.is_some() {}
    Ok(())
}
