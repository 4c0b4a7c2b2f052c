//! Tokenizers rebuilt from GGUF metadata.
//!
//! No LLM package Guidepost uses ships a `tokenizer.json`, so the tokenizer is rebuilt from
//! the `tokenizer.ggml.*` keys as a `tokenizer.json` document and loaded with `tokenizers`.
//! candle's own `TokenizerFromGguf` gets SmolLM2 wrong (it adds a prefix space after every
//! special token), hence this builder. Supported: the `gpt2` model type (byte-level BPE) with
//! the pre-tokenizer rules of llama.cpp for `pre` = `qwen2`, `smollm`, `llama-bpe` and the
//! plain GPT-2 rule otherwise.

use candle_core::quantized::gguf_file::Content;
use serde_json::{Map, Value, json};
use tokenizers::Tokenizer;

use crate::error::LocalError;
use crate::gguf::Metadata;

/// GGUF token type of control tokens (`<|im_start|>`): special, never produced by text.
const TOKEN_TYPE_CONTROL: i64 = 3;
/// GGUF token type of user-defined added tokens: matched in text, not special.
const TOKEN_TYPE_USER_DEFINED: i64 = 4;

/// Qwen2's split regex (also used by llama.cpp for `pre = qwen2`).
const QWEN2_REGEX: &str =
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Llama 3's split regex (`pre = llama-bpe`).
const LLAMA3_REGEX: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// A tokenizer built from GGUF metadata, with what constrained decoding needs to know.
pub struct GgufTokenizer {
    /// The `tokenizers` tokenizer.
    pub tokenizer: Tokenizer,
    /// The raw bytes of every token, special tokens prefixed by 0xFF (llguidance convention).
    pub token_bytes: Vec<Vec<u8>>,
    /// The token strings as stored in the GGUF.
    pub tokens: Vec<String>,
    /// `tokenizer.ggml.eos_token_id`, when present.
    pub eos_token_id: Option<u32>,
    /// `tokenizer.ggml.bos_token_id`, when present.
    pub bos_token_id: Option<u32>,
}

impl std::fmt::Debug for GgufTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GgufTokenizer")
            .field("vocab", &self.tokens.len())
            .field("eos_token_id", &self.eos_token_id)
            .finish()
    }
}

impl GgufTokenizer {
    /// Builds the tokenizer described by `content`'s metadata.
    pub fn from_gguf(content: &Content) -> Result<Self, LocalError> {
        let md = Metadata(content);
        let model = md.str("tokenizer.ggml.model")?;
        if model != "gpt2" {
            return Err(LocalError::Tokenizer(format!(
                "tokenizer model `{model}` is not supported (only `gpt2` byte-level BPE)"
            )));
        }
        let pre = md.opt_str("tokenizer.ggml.pre").unwrap_or("default");
        let tokens = md.str_array("tokenizer.ggml.tokens")?;
        let merges = md.str_array("tokenizer.ggml.merges")?;
        let types = md.opt_i64_array("tokenizer.ggml.token_type")?.unwrap_or_default();
        let document = tokenizer_json(&tokens, &merges, &types, pre)?;
        let tokenizer =
            Tokenizer::from_bytes(document.to_string().as_bytes()).map_err(|e| LocalError::Tokenizer(e.to_string()))?;
        let token_bytes = token_bytes(&tokens, &types);
        Ok(Self {
            tokenizer,
            token_bytes,
            tokens: tokens.iter().map(|t| (*t).to_string()).collect(),
            eos_token_id: md.opt_u32("tokenizer.ggml.eos_token_id"),
            bos_token_id: md.opt_u32("tokenizer.ggml.bos_token_id"),
        })
    }

    /// Token ids of `text`, special tokens written in the text (`<|im_start|>`) included.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, LocalError> {
        self.tokenizer
            .encode(text, false)
            .map(|e| e.get_ids().to_vec())
            .map_err(|e| LocalError::Tokenizer(e.to_string()))
    }

    /// The text of `ids`, special tokens left out.
    pub fn decode(&self, ids: &[u32]) -> Result<String, LocalError> {
        self.tokenizer.decode(ids, true).map_err(|e| LocalError::Tokenizer(e.to_string()))
    }

    /// The id of a token given by its exact string (`<|im_end|>`).
    pub fn token_id(&self, token: &str) -> Option<u32> {
        self.tokenizer.token_to_id(token)
    }
}

fn pre_tokenizer(pre: &str) -> (Value, Value) {
    let byte_level = |use_regex: bool| json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": use_regex});
    let split =
        |regex: &str| json!({"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": false});
    match pre {
        "qwen2" => (
            json!({"type": "NFC"}),
            json!({"type": "Sequence", "pretokenizers": [split(QWEN2_REGEX), byte_level(false)]}),
        ),
        "llama-bpe" | "llama3" => {
            (Value::Null, json!({"type": "Sequence", "pretokenizers": [split(LLAMA3_REGEX), byte_level(false)]}))
        }
        // llama.cpp's smollm rule: every digit on its own, then GPT-2's byte-level split.
        "smollm" => (
            Value::Null,
            json!({"type": "Sequence", "pretokenizers": [
                {"type": "Digits", "individual_digits": true},
                byte_level(true),
            ]}),
        ),
        "gpt2" | "default" => (Value::Null, byte_level(true)),
        other => {
            tracing::warn!(pre = other, "unknown GGUF pre-tokenizer; using GPT-2's byte-level split");
            (Value::Null, byte_level(true))
        }
    }
}

/// The `tokenizer.json` document for a byte-level BPE vocabulary.
fn tokenizer_json(tokens: &[&str], merges: &[&str], types: &[i64], pre: &str) -> Result<Value, LocalError> {
    let mut vocab = Map::with_capacity(tokens.len());
    let mut added = Vec::new();
    for (id, token) in tokens.iter().enumerate() {
        vocab.insert((*token).to_string(), json!(id));
        let kind = types.get(id).copied().unwrap_or(1);
        if kind == TOKEN_TYPE_CONTROL || kind == TOKEN_TYPE_USER_DEFINED {
            added.push(json!({
                "id": id,
                "content": token,
                "single_word": false,
                "lstrip": false,
                "rstrip": false,
                "normalized": false,
                "special": kind == TOKEN_TYPE_CONTROL,
            }));
        }
    }
    let merges = merges
        .iter()
        .map(|m| {
            m.split_once(' ')
                .map(|(a, b)| json!([a, b]))
                .ok_or_else(|| LocalError::Tokenizer(format!("malformed merge `{m}`")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let (normalizer, pre_tokenizer) = pre_tokenizer(pre);
    Ok(json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": added,
        "normalizer": normalizer,
        "pre_tokenizer": pre_tokenizer,
        "post_processor": null,
        "decoder": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
        "model": {
            "type": "BPE",
            "dropout": null,
            "unk_token": null,
            "continuing_subword_prefix": null,
            "end_of_word_suffix": null,
            "fuse_unk": false,
            "byte_fallback": false,
            "ignore_merges": false,
            "vocab": vocab,
            "merges": merges,
        },
    }))
}

/// GPT-2's byte-to-character table, inverted: the byte each printable character stands for.
fn byte_level_decoder() -> std::collections::HashMap<char, u8> {
    let mut map = std::collections::HashMap::with_capacity(256);
    let mut next = 0x100u32;
    for byte in 0..=255u8 {
        let c = char::from(byte);
        let printable = matches!(byte, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
        if printable {
            map.insert(c, byte);
        } else if let Some(c) = char::from_u32(next) {
            map.insert(c, byte);
            next += 1;
        }
    }
    map
}

/// The bytes each token stands for, as llguidance's token trie wants them.
fn token_bytes(tokens: &[&str], types: &[i64]) -> Vec<Vec<u8>> {
    let table = byte_level_decoder();
    tokens
        .iter()
        .enumerate()
        .map(|(id, token)| {
            let kind = types.get(id).copied().unwrap_or(1);
            if kind == TOKEN_TYPE_CONTROL {
                let mut bytes = vec![0xFF];
                bytes.extend_from_slice(token.as_bytes());
                return bytes;
            }
            if kind == TOKEN_TYPE_USER_DEFINED {
                return token.as_bytes().to_vec();
            }
            let decoded: Option<Vec<u8>> = token.chars().map(|c| table.get(&c).copied()).collect();
            decoded.unwrap_or_else(|| token.as_bytes().to_vec())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_level_table_covers_every_byte() {
        let table = byte_level_decoder();
        assert_eq!(table.len(), 256);
        assert_eq!(table.get(&'Ġ'), Some(&b' '));
        assert_eq!(table.get(&'Ċ'), Some(&b'\n'));
        assert_eq!(table.get(&'a'), Some(&b'a'));
    }

    #[test]
    fn control_tokens_get_the_special_marker() {
        let bytes = token_bytes(&["<|im_end|>", "Ġhi"], &[3, 1]);
        assert_eq!(bytes[0][0], 0xFF);
        assert_eq!(&bytes[0][1..], b"<|im_end|>");
        assert_eq!(bytes[1], b" hi");
    }
}
