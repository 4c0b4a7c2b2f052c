//! A tiny MCP server over stdio, used by the integration tests as a child process. Not
//! meant for anything else.

mod handler;

use rmcp::ServiceExt;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let server = handler::FixtureServer.serve(rmcp::transport::stdio()).await?;
    server.waiting().await?;
    Ok(())
}
