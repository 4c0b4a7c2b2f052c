//! The two template environments of the workspace: one for the prompts the program sends to
//! models (engine, runtime, server, simulator), one for the canned responses agents define.

use std::sync::{OnceLock, PoisonError, RwLock};

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
/// [`prompt_environment`]. A template is compiled the first time its name is rendered and kept;
/// a name rendered again with another source is compiled at each use instead.
pub fn render_prompt(
    name: &'static str,
    template: &'static str,
    context: impl serde::Serialize,
) -> Result<String, minijinja::Error> {
    static ENV: OnceLock<RwLock<Environment<'static>>> = OnceLock::new();
    let env = ENV.get_or_init(|| RwLock::new(prompt_environment()));
    {
        let kept = env.read().unwrap_or_else(PoisonError::into_inner);
        if let Ok(compiled) = kept.get_template(name) {
            if compiled.source() == template {
                return compiled.render(Serde(context));
            }
            return kept.render_named_str(name, template, Serde(context));
        }
    }
    let mut kept = env.write().unwrap_or_else(PoisonError::into_inner);
    if kept.get_template(name).is_err() {
        // A template that does not compile is not kept: its error is reported below.
        let _ = kept.add_template(name, template);
    }
    match kept.get_template(name) {
        Ok(compiled) if compiled.source() == template => compiled.render(Serde(context)),
        _ => kept.render_named_str(name, template, Serde(context)),
    }
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
    fn prompts_render_from_their_kept_template_and_a_name_reused_renders_its_own_source() {
        let first = render_prompt("kept.j2", "Hi {{ who }}", minijinja::context! { who => "Ada" });
        assert_eq!(first.ok().as_deref(), Some("Hi Ada"));
        let again = render_prompt("kept.j2", "Hi {{ who }}", minijinja::context! { who => "Lin" });
        assert_eq!(again.ok().as_deref(), Some("Hi Lin"));
        let other = render_prompt("kept.j2", "Bye {{ who }}", minijinja::context! { who => "Lin" });
        assert_eq!(other.ok().as_deref(), Some("Bye Lin"));
        assert!(render_prompt("broken.j2", "{% for x in %}", ()).is_err());
        assert!(render_prompt("broken.j2", "{% for x in %}", ()).is_err());
        let fixed =
            render_prompt("broken.j2", "{% for x in xs %}{{ x }}{% endfor %}", minijinja::context! { xs => [1, 2] });
        assert_eq!(fixed.ok().as_deref(), Some("12"));
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
