//! Helpers shared by the integration tests.

use std::net::SocketAddr;

use guidepost_core::definition::{SourceFile, load_agent};
use guidepost_core::model::AgentDefinition;
use guidepost_tools::ToolContext;
use serde_json::{Map, Value};

/// The arguments object of a `json!` literal.
pub fn args(value: Value) -> Map<String, Value> {
    value.as_object().cloned().expect("arguments must be a JSON object")
}

/// A context for tests.
pub fn ctx() -> ToolContext {
    ToolContext::new("ag1", "se1", "cu1")
}

/// Serves `router` on 127.0.0.1 on a free port and returns its address.
pub async fn serve(router: axum::Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, router).await.unwrap();
    });
    addr
}

/// Loads an example agent from `examples/agents/<name>.yaml`.
pub fn example_agent(name: &str) -> AgentDefinition {
    let path = format!("{}/../../examples/agents/{name}.yaml", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap();
    let loaded = load_agent(&[SourceFile::new(path, text)]);
    assert!(!loaded.has_errors(), "{:?}", loaded.diagnostics);
    loaded.definition.unwrap()
}
