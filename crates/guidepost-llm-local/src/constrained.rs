//! Structured answers by constrained decoding with llguidance.
//!
//! A JSON schema is compiled into a grammar; at every step the grammar says which tokens may
//! come next, every other token's logit is set to minus infinity, and the chosen token is fed
//! back to the grammar. The answer is therefore always JSON that conforms to the schema (for
//! the schema features llguidance supports). Tokens the grammar forces are fed to the model in
//! one batch without sampling.

use std::sync::Arc;

use llguidance::api::TopLevelGrammar;
use llguidance::toktrie::{SimpleVob, TokEnv, TokRxInfo, TokTrie, TokenId, TokenizerEnv};
use llguidance::{Matcher, ParserFactory};
use serde_json::{Value, json};
use tokenizers::Tokenizer;

use crate::error::LocalError;
use crate::tokenizer::GgufTokenizer;

/// The llguidance view of a model's vocabulary, built once per model.
pub(crate) struct GrammarCompiler {
    factory: ParserFactory,
}

/// The tokenizer environment llguidance needs: the token trie plus canonical tokenization.
struct GgufTokEnv {
    trie: TokTrie,
    tokenizer: Tokenizer,
}

impl TokenizerEnv for GgufTokEnv {
    fn tok_trie(&self) -> &TokTrie {
        &self.trie
    }

    fn tokenize_bytes(&self, s: &[u8]) -> Vec<TokenId> {
        match std::str::from_utf8(s) {
            Ok(text) => match self.tokenizer.encode(text, false) {
                Ok(encoding) => encoding.get_ids().to_vec(),
                Err(_) => self.trie.greedy_tokenize(s),
            },
            Err(_) => self.trie.greedy_tokenize(s),
        }
    }
}

impl GrammarCompiler {
    /// Builds the token trie for `tokenizer`, whose model emits `vocab_size` logits, treating
    /// every id in `stop_ids` as end of sequence.
    pub(crate) fn new(tokenizer: &GgufTokenizer, vocab_size: usize, stop_ids: &[u32]) -> Result<Self, LocalError> {
        let size = vocab_size.max(tokenizer.token_bytes.len());
        let mut words = tokenizer.token_bytes.clone();
        // Ids the model has but the vocabulary does not name (padding rows) get an
        // unmatchable special spelling, as llguidance's own loaders do.
        for id in words.len()..size {
            let mut bytes = vec![TokTrie::SPECIAL_TOKEN_MARKER];
            bytes.extend_from_slice(format!("[{id}]").as_bytes());
            words.push(bytes);
        }
        let size_u32 = u32::try_from(size).map_err(|_| LocalError::Grammar("vocabulary too large".into()))?;
        let eos = stop_ids.first().copied().ok_or_else(|| LocalError::Grammar("the model has no stop token".into()))?;
        let trie = TokTrie::from(&TokRxInfo::new(size_u32, eos), &words).with_eos_tokens(stop_ids);
        let env: TokEnv = Arc::new(GgufTokEnv { trie, tokenizer: tokenizer.tokenizer.clone() });
        let mut factory = ParserFactory::new_simple(&env).map_err(|e| LocalError::Grammar(e.to_string()))?;
        factory.quiet();
        Ok(Self { factory })
    }

    /// A fresh matcher for answers conforming to `schema`.
    pub(crate) fn matcher(&self, schema: &Value) -> Result<Matcher, LocalError> {
        let grammar = TopLevelGrammar::from_json_schema(with_guidance_options(schema));
        let matcher = Matcher::new(self.factory.create_parser(grammar));
        match matcher.get_error() {
            Some(error) => Err(LocalError::Schema(error)),
            None => Ok(matcher),
        }
    }
}

/// `schema` with Guidepost's llguidance options: a fixed JSON layout (`{"a": 1, "b": 2}`), so
/// a small model cannot wander off into whitespace, and `oneOf` read as `anyOf`.
pub(crate) fn with_guidance_options(schema: &Value) -> Value {
    let mut schema = schema.clone();
    if let Some(object) = schema.as_object_mut() {
        object.entry("x-guidance").or_insert_with(|| {
            json!({
                "whitespace_flexible": false,
                "item_separator": ", ",
                "key_separator": ": ",
                "coerce_one_of": true,
            })
        });
    }
    schema
}

/// The allowed token with the highest logit.
pub(crate) fn masked_argmax(logits: &[f32], mask: &SimpleVob) -> Option<u32> {
    let mut best: Option<(u32, f32)> = None;
    mask.iter_set_entries(|i| {
        if let (Some(&logit), Ok(id)) = (logits.get(i), u32::try_from(i))
            && best.is_none_or(|(_, b)| logit > b)
        {
            best = Some((id, logit));
        }
    });
    best.map(|(id, _)| id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guidance_options_are_added_once() {
        let schema = json!({"type": "object"});
        let with = with_guidance_options(&schema);
        assert_eq!(with["x-guidance"]["whitespace_flexible"], json!(false));
        let custom = json!({"type": "object", "x-guidance": {"whitespace_flexible": true}});
        assert_eq!(with_guidance_options(&custom)["x-guidance"]["whitespace_flexible"], json!(true));
    }

    #[test]
    fn argmax_respects_the_mask() {
        let mut mask = SimpleVob::alloc(4);
        mask.allow_token(1);
        mask.allow_token(3);
        assert_eq!(masked_argmax(&[9.0, 1.0, 8.0, 2.0], &mask), Some(3));
        assert_eq!(masked_argmax(&[9.0, 1.0], &SimpleVob::alloc(2)), None);
    }
}
