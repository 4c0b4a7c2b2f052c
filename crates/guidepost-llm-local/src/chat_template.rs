//! Chat templates: the Jinja template a GGUF carries in `tokenizer.chat_template`, rendered
//! with minijinja the way Hugging Face renders it (`trim_blocks`, `lstrip_blocks`, Python
//! string methods).

use minijinja::{Environment, ErrorKind, context};
use serde::Serialize;

use crate::error::LocalError;

/// ChatML, used when a model carries no template.
const CHATML: &str = "{% for message in messages %}<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

/// One message as the template sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TemplateMessage {
    /// `system`, `user` or `assistant`.
    pub role: String,
    /// The text.
    pub content: String,
}

impl TemplateMessage {
    /// A message with `role` and `content`.
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Self {
        Self { role: role.into(), content: content.into() }
    }
}

/// A compiled chat template.
pub struct ChatTemplate {
    env: Environment<'static>,
    bos_token: String,
    eos_token: String,
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTemplate").finish_non_exhaustive()
    }
}

impl ChatTemplate {
    /// Compiles `source` (ChatML when `None`).
    pub fn new(
        source: Option<&str>,
        bos_token: impl Into<String>,
        eos_token: impl Into<String>,
    ) -> Result<Self, LocalError> {
        let mut env = Environment::new();
        let syntax = minijinja::syntax::SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .build()
            .map_err(|e| LocalError::Template(e.to_string()))?;
        env.set_syntax(syntax);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", |message: String| -> Result<String, minijinja::Error> {
            Err(minijinja::Error::new(ErrorKind::InvalidOperation, message))
        });
        env.add_template_owned("chat", source.unwrap_or(CHATML).to_string())
            .map_err(|e| LocalError::Template(e.to_string()))?;
        Ok(Self { env, bos_token: bos_token.into(), eos_token: eos_token.into() })
    }

    /// The prompt text for `messages`, ending with the assistant's opening when
    /// `add_generation_prompt` is set.
    pub fn render(&self, messages: &[TemplateMessage], add_generation_prompt: bool) -> Result<String, LocalError> {
        let template = self.env.get_template("chat").map_err(|e| LocalError::Template(e.to_string()))?;
        template
            .render(context! {
                messages => minijinja::Value::from(minijinja::value::Serde(messages)),
                add_generation_prompt => add_generation_prompt,
                bos_token => &self.bos_token,
                eos_token => &self.eos_token,
            })
            .map_err(|e| LocalError::Template(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn chatml_fallback_renders_a_generation_prompt() {
        let template = ChatTemplate::new(None, "", "<|im_end|>").unwrap();
        let text = template
            .render(&[TemplateMessage::new("system", "Be brief."), TemplateMessage::new("user", "Hi")], true)
            .unwrap();
        assert_eq!(
            text,
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
        );
    }

    #[test]
    fn python_string_methods_work() {
        let source = "{% for m in messages %}{{ m.content.strip().upper() }}{% endfor %}";
        let template = ChatTemplate::new(Some(source), "", "").unwrap();
        let text = template.render(&[TemplateMessage::new("user", "  hi ")], false).unwrap();
        assert_eq!(text, "HI");
    }
}
