//! Offline token counting with OpenAI's `o200k_base` encoding (bundled, no network), used for
//! prompt budgets and the tokens-per-minute limiter.
//!
//! Other models tokenize differently; counts here are estimates good to a few percent for
//! English prose, which is what budgets need.

use std::sync::OnceLock;

use tiktoken_rs::CoreBPE;

use crate::request::ChatMessage;

/// Tokens a chat message costs beyond its content (role and separators), as OpenAI counts.
const PER_MESSAGE_OVERHEAD: usize = 4;
/// Tokens that prime the assistant's answer.
const REPLY_PRIMER: usize = 3;

fn bpe() -> Option<&'static CoreBPE> {
    static BPE: OnceLock<Option<CoreBPE>> = OnceLock::new();
    BPE.get_or_init(|| match tiktoken_rs::o200k_base() {
        Ok(bpe) => Some(bpe),
        Err(error) => {
            tracing::warn!(%error, "o200k_base unavailable; estimating tokens as chars/4");
            None
        }
    })
    .as_ref()
}

/// The number of `o200k_base` tokens in `text` (special tokens counted as text).
///
/// ```
/// assert_eq!(guidepost_llm::count_tokens("hello world"), 2);
/// ```
pub fn count_tokens(text: &str) -> usize {
    match bpe() {
        Some(bpe) => bpe.encode_with_special_tokens(text).len(),
        None => estimate_tokens(text),
    }
}

/// The prompt tokens of a conversation: content plus per-message overhead.
pub fn count_message_tokens(messages: &[ChatMessage]) -> usize {
    messages.iter().map(|m| count_tokens(&m.content) + PER_MESSAGE_OVERHEAD).sum::<usize>() + REPLY_PRIMER
}

/// A cheap estimate (one token per four characters, rounded up) for when exactness does not
/// matter and the tokenizer should not be loaded (scripted models).
pub fn estimate_tokens(text: &str) -> usize {
    text.chars().count().div_ceil(4)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_sane() {
        assert_eq!(count_tokens(""), 0);
        assert_eq!(count_tokens("hello world"), 2);
        let prose = "The customer wants to cancel their subscription and asks about refunds.";
        let n = count_tokens(prose);
        assert!((10..=20).contains(&n), "{n}");
        // special tokens in user text are counted, never rejected
        assert!(count_tokens("<|endoftext|>") >= 1);
        let messages = [ChatMessage::system("Be brief."), ChatMessage::user("hello world")];
        assert_eq!(
            count_message_tokens(&messages),
            count_tokens("Be brief.") + 2 + 2 * PER_MESSAGE_OVERHEAD + REPLY_PRIMER
        );
        assert_eq!(estimate_tokens("abcde"), 2);
    }
}
