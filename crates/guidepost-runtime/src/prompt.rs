//! Rendering prompt templates (minijinja). A template that fails to render is an error of
//! the stage that asked for it, never a prompt sent as its raw source.

use guidepost_llm::LlmError;
use serde::Serialize;

/// The customer's latest message in a conversation given as (speaker, text).
pub(crate) fn last_customer(history: &[(String, String)]) -> Option<&str> {
    history.iter().rev().find(|(who, _)| who == "customer").map(|(_, text)| text.as_str())
}

/// Renders the prompt template `name` (its source is `template`) with `context`. Templates
/// are part of the program and tested, so an error here is a bug; it fails the stage with
/// [`LlmError::Prompt`], which the turn's trace and error events name.
pub fn render(name: &'static str, template: &'static str, context: impl Serialize) -> Result<String, LlmError> {
    guidepost_core::templates::render_prompt(name, template, context).map_err(|err| {
        tracing::error!(template = name, error = %err, "prompt template failed to render");
        LlmError::Prompt { template: name.to_string(), detail: err.to_string() }
    })
}

/// Values as they should read in a prompt: strings as themselves, everything else as JSON
/// (minijinja would print maps Python-style).
pub fn display_values(values: &indexmap::IndexMap<String, serde_json::Value>) -> indexmap::IndexMap<String, String> {
    values.iter().map(|(k, v)| (k.clone(), v.as_str().map_or_else(|| v.to_string(), str::to_string))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_template_that_fails_to_render_is_an_error_naming_it() {
        let ok = render("greeting", "Hello {{ name }}!", serde_json::json!({"name": "Ada"}));
        assert_eq!(ok.ok().as_deref(), Some("Hello Ada!"));
        let broken = render("compose", "{% for x in %}", serde_json::json!({}));
        match broken {
            Err(LlmError::Prompt { template, detail }) => {
                assert_eq!(template, "compose");
                assert!(detail.contains("syntax error"), "{detail}");
            }
            other => panic!("expected a prompt error, got {other:?}"),
        }
        let failing = render("select", "{{ 1 / 0 }}", serde_json::json!({}));
        assert!(matches!(failing, Err(LlmError::Prompt { .. })), "{failing:?}");
    }
}
