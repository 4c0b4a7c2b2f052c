//! Prompt templates of the simulated customer, the step ranker and the judge. They live as
//! template files in `src/prompts/` so a change shows up in review as a diff; snapshot tests pin
//! their rendering.

use std::sync::OnceLock;

use minijinja::Environment;
use serde::Serialize;

const TEMPLATES: [(&str, &str); 4] = [
    ("customer_system", include_str!("prompts/customer_system.j2")),
    ("customer_turn", include_str!("prompts/customer_turn.j2")),
    ("ranker", include_str!("prompts/ranker.j2")),
    ("judge_step", include_str!("prompts/judge_step.j2")),
];

fn environment() -> &'static Environment<'static> {
    static ENV: OnceLock<Environment<'static>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = guidepost_core::templates::prompt_environment();
        for (name, source) in TEMPLATES {
            if let Err(err) = env.add_template(name, source) {
                tracing::error!(template = name, %err, "invalid prompt template");
            }
        }
        env
    })
}

/// Renders the template `name` with `context`. A template error (a bug, caught by the snapshot
/// tests) renders as its message so a run never panics on it.
pub(crate) fn render(name: &str, context: impl Serialize) -> String {
    match environment().get_template(name).and_then(|t| t.render(minijinja::value::Serde(&context))) {
        Ok(text) => text.trim().to_string(),
        Err(err) => {
            tracing::error!(template = name, %err, "prompt template failed");
            format!("(prompt template {name} failed: {err})")
        }
    }
}
