//! The two template environments of the workspace: one for the prompts the program sends to
//! models (engine, runtime, server, simulator), one for the canned responses agents define.

use std::sync::OnceLock;

use minijinja::syntax::SyntaxConfig;
use minijinja::value::Serde;
use minijinja::{Environment, UndefinedBehavior};

/// The environment prompt templates render in. A line holding only a block tag (`{% if %}`,
/// indented or not) leaves no blank line or indentation behind, so templates can be laid out
/// for reading; an undefined value renders as nothing.
pub fn prompt_environment() -> Environment<'static> {
    let mut env = Environment::new();
    if let Ok(syntax) = SyntaxConfig::builder().trim_blocks(true).lstrip_blocks(true).build() {
        env.set_syntax(syntax);
    }
    env
}

/// Renders the prompt template `name` (its source is `template`) with `context`, in the
/// [`prompt_environment`].
pub fn render_prompt(name: &str, template: &str, context: impl serde::Serialize) -> Result<String, minijinja::Error> {
    static ENV: OnceLock<Environment<'static>> = OnceLock::new();
    ENV.get_or_init(prompt_environment).render_named_str(name, template, Serde(context))
}

/// The environment canned responses render in: the Jinja syntax agent authors know, and an
/// undefined field is an error, so a template whose fields the turn does not have is left
/// out instead of being sent with a gap.
pub fn canned_environment() -> Environment<'static> {
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_block_tags_leave_no_blank_lines_or_indentation() {
        let text = prompt_environment()
            .render_str(
                "Rules:\n  {% for r in rules %}\n- {{ r }}\n  {% endfor %}\nEnd {{ missing }}.",
                minijinja::context! { rules => ["a", "b"] },
            )
            .unwrap_or_default();
        assert_eq!(text, "Rules:\n- a\n- b\nEnd .");
    }

    #[test]
    fn a_canned_response_with_a_missing_field_does_not_render() {
        let env = canned_environment();
        let ok = env.render_str("Balance: {{ balance }}", minijinja::context! { balance => 12 });
        assert_eq!(ok.ok().as_deref(), Some("Balance: 12"));
        let missing = env.render_str("Balance: {{ balance }}", minijinja::context! {});
        assert_eq!(missing.err().map(|e| e.kind()), Some(minijinja::ErrorKind::UndefinedError));
    }
}
