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

/// The longest free-text string (a rationale, a question, a free argument) a decision answer
/// may hold, in characters. Every such string recorded on the example and held-out suites is
/// shorter (the longest is 361); a small model that starts repeating a sentence is made to close
/// the string here instead of running to the answer's token limit with the JSON unfinished.
pub(crate) const DECISION_TEXT_CHARS: u64 = 480;

/// `schema` with every free-text string bounded to `max_chars` characters: strings with no
/// `enum`, `const`, `pattern`, `format` or `maxLength` of their own, wherever they sit
/// (properties, array items, alternatives, definitions). Values inside `enum`, `const`,
/// `default` and `examples` are data, not schemas, and are left alone.
pub(crate) fn with_bounded_free_text(schema: &Value, max_chars: u64) -> Value {
    let mut schema = schema.clone();
    bound_free_text(&mut schema, max_chars);
    schema
}

fn bound_free_text(node: &mut Value, max_chars: u64) {
    match node {
        Value::Object(object) => {
            let is_string = match object.get("type") {
                Some(Value::String(kind)) => kind == "string",
                Some(Value::Array(kinds)) => kinds.iter().any(|k| k == "string"),
                _ => false,
            };
            let constrained =
                ["enum", "const", "pattern", "format", "maxLength"].iter().any(|k| object.contains_key(*k));
            if is_string && !constrained {
                object.insert("maxLength".into(), json!(max_chars));
            }
            for (key, value) in object.iter_mut() {
                if !matches!(key.as_str(), "enum" | "const" | "default" | "examples") {
                    bound_free_text(value, max_chars);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|item| bound_free_text(item, max_chars)),
        _ => {}
    }
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
    fn free_text_is_bounded_and_constrained_strings_are_not() {
        let schema = json!({
            "type": "object",
            "properties": {
                "rationale": {"type": "string"},
                "decision": {"type": "string", "enum": ["yes", "no"]},
                "code": {"type": "string", "pattern": "^[A-Z]{3}$"},
                "short": {"type": "string", "maxLength": 10},
                "maybe": {"type": ["string", "null"]},
                "options": {"type": "array", "items": {"type": "string"}},
                "choice": {"anyOf": [{"$ref": "#/$defs/Note"}, {"type": "null"}]},
                "type": {"type": "string", "const": "x"}
            },
            "$defs": {"Note": {"type": "object", "properties": {"text": {"type": "string"}}}},
            "examples": [{"rationale": {"type": "string"}}]
        });
        let bounded = with_bounded_free_text(&schema, 480);
        let props = &bounded["properties"];
        assert_eq!(props["rationale"]["maxLength"], json!(480));
        assert_eq!(props["maybe"]["maxLength"], json!(480));
        assert_eq!(props["options"]["items"]["maxLength"], json!(480));
        assert_eq!(bounded["$defs"]["Note"]["properties"]["text"]["maxLength"], json!(480));
        assert_eq!(props["short"]["maxLength"], json!(10));
        for fixed in ["decision", "code", "type"] {
            assert!(props[fixed].get("maxLength").is_none(), "{fixed} was bounded");
        }
        assert!(bounded["examples"][0]["rationale"].get("maxLength").is_none());
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
