//! Rendering prompt templates (minijinja), with a fallback that never fails a turn.

use std::sync::OnceLock;

use minijinja::Environment;
use minijinja::value::Serde;
use serde::Serialize;

/// The customer's latest message in a conversation given as (speaker, text).
pub(crate) fn last_customer(history: &[(String, String)]) -> Option<&str> {
    history.iter().rev().find(|(who, _)| who == "customer").map(|(_, text)| text.as_str())
}

fn environment() -> &'static Environment<'static> {
    static ENV: OnceLock<Environment<'static>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Environment::new();
        match minijinja::syntax::SyntaxConfig::builder().trim_blocks(true).lstrip_blocks(true).build() {
            Ok(syntax) => env.set_syntax(syntax),
            Err(err) => tracing::error!(error = %err, "prompt syntax configuration rejected"),
        }
        env
    })
}

/// Renders `template` with `context`. Templates are part of the program and tested, so a
/// rendering error is a bug; it is logged and the template's source is used as is rather
/// than failing the customer's turn.
pub fn render(template: &str, context: impl Serialize) -> String {
    match environment().render_str(template, Serde(context)) {
        Ok(text) => text,
        Err(err) => {
            tracing::error!(error = %err, "prompt template failed to render");
            template.to_string()
        }
    }
}

/// Values as they should read in a prompt: strings as themselves, everything else as JSON
/// (minijinja would print maps Python-style).
pub fn display_values(values: &indexmap::IndexMap<String, serde_json::Value>) -> indexmap::IndexMap<String, String> {
    values.iter().map(|(k, v)| (k.clone(), v.as_str().map_or_else(|| v.to_string(), str::to_string))).collect()
}
