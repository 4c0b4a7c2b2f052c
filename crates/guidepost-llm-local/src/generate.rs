//! The generation loop: quantized weights, prefill, greedy or sampled decoding, stop tokens,
//! and (optionally) a grammar that masks the logits at every step.

use std::io::{Read, Seek};
use std::time::{Duration, Instant};

use candle_core::quantized::gguf_file::Content;
use candle_core::{Device, Tensor};
use candle_transformers::generation::LogitsProcessor;
use candle_transformers::models::{quantized_llama, quantized_qwen2, quantized_qwen3};
use llguidance::Matcher;

use crate::constrained::masked_argmax;
use crate::error::LocalError;
use crate::gguf::Metadata;

/// The loaded transformer, by architecture.
pub(crate) enum Weights {
    /// `general.architecture = llama` (SmolLM2, Llama, Mistral-style models).
    Llama(quantized_llama::ModelWeights),
    /// `general.architecture = qwen2` (Qwen2 / Qwen2.5).
    Qwen2(quantized_qwen2::ModelWeights),
    /// `general.architecture = qwen3` (Qwen3). No packaged Qwen3 model exists to test it with.
    Qwen3(quantized_qwen3::ModelWeights),
}

impl Weights {
    /// Loads the weights of `content` from `reader`, choosing the loader by architecture.
    pub(crate) fn load<R: Read + Seek>(content: Content, reader: &mut R, device: &Device) -> Result<Self, LocalError> {
        let arch = Metadata(&content).str("general.architecture")?.to_string();
        match arch.as_str() {
            "llama" => Ok(Self::Llama(quantized_llama::ModelWeights::from_gguf(content, reader, device)?)),
            "qwen2" => Ok(Self::Qwen2(quantized_qwen2::ModelWeights::from_gguf(content, reader, device)?)),
            "qwen3" => Ok(Self::Qwen3(quantized_qwen3::ModelWeights::from_gguf(content, reader, device)?)),
            other => Err(LocalError::UnsupportedArchitecture(other.to_string())),
        }
    }

    fn clear_kv_cache(&mut self) {
        match self {
            Self::Llama(m) => m.clear_kv_cache(),
            Self::Qwen2(m) => m.clear_kv_cache(),
            Self::Qwen3(m) => m.clear_kv_cache(),
        }
    }

    /// Runs `ids` at positions `pos..` and returns the logits after the last one.
    fn forward(&mut self, ids: &[u32], pos: usize, device: &Device) -> Result<Vec<f32>, LocalError> {
        let input = Tensor::new(ids, device)?.unsqueeze(0)?;
        let logits = match self {
            Self::Llama(m) => m.forward(&input, pos)?,
            Self::Qwen2(m) => m.forward(&input, pos)?,
            Self::Qwen3(m) => m.forward(&input, pos)?,
        };
        Ok(logits.squeeze(0)?.to_dtype(candle_core::DType::F32)?.to_vec1()?)
    }
}

/// How to decode.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct DecodeParams {
    pub(crate) max_tokens: usize,
    /// `None` or `<= 0`: greedy (deterministic).
    pub(crate) temperature: Option<f64>,
    pub(crate) seed: u64,
    /// Stop sequences in the text.
    pub(crate) stop: Vec<String>,
}

/// Why generation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishReason {
    /// A stop token, a stop sequence, or the end of the grammar.
    Stop,
    /// The token limit.
    Length,
}

/// The result of one generation.
#[derive(Debug, Clone, PartialEq)]
pub struct Generation {
    /// The generated token ids, stop token excluded.
    pub token_ids: Vec<u32>,
    /// The decoded text (cut before a stop sequence).
    pub text: String,
    /// Prompt length in tokens.
    pub prompt_tokens: usize,
    /// Time spent on the prompt.
    pub prefill: Duration,
    /// Time spent generating.
    pub decode: Duration,
    /// Why it ended.
    pub finish: FinishReason,
}

/// A loaded model ready to generate.
pub(crate) struct Generator {
    pub(crate) weights: Weights,
    pub(crate) device: Device,
    pub(crate) stop_ids: Vec<u32>,
    pub(crate) context_length: usize,
}

impl Generator {
    /// Generates after `prompt`. `decode` turns ids into text; `on_text` receives each new
    /// piece of text as soon as it is complete UTF-8.
    pub(crate) fn generate(
        &mut self,
        prompt: &[u32],
        params: &DecodeParams,
        mut grammar: Option<&mut Matcher>,
        decode: &dyn Fn(&[u32]) -> Result<String, LocalError>,
        on_text: &mut dyn FnMut(&str),
    ) -> Result<Generation, LocalError> {
        if prompt.is_empty() {
            return Err(LocalError::Tokenizer("the prompt is empty".into()));
        }
        if prompt.len() + params.max_tokens > self.context_length {
            return Err(LocalError::ContextOverflow {
                prompt_tokens: prompt.len(),
                max_tokens: params.max_tokens,
                context: self.context_length,
            });
        }
        let mut sampler = match params.temperature {
            Some(t) if t > 0.0 => Some(LogitsProcessor::new(params.seed, Some(t), None)),
            _ => None,
        };
        self.weights.clear_kv_cache();
        let start = Instant::now();
        let mut logits = self.weights.forward(prompt, 0, &self.device)?;
        let prefill = start.elapsed();
        let start = Instant::now();
        let mut pos = prompt.len();
        let mut out: Vec<u32> = Vec::new();
        let mut emitted = 0usize; // bytes of text already passed to `on_text`
        let mut text = String::new();
        let finish = loop {
            if out.len() >= params.max_tokens {
                break FinishReason::Length;
            }
            let next = match grammar.as_deref_mut() {
                Some(matcher) => {
                    let mask = matcher.compute_mask().map_err(|e| LocalError::Grammar(e.to_string()))?;
                    match &mut sampler {
                        None => masked_argmax(&logits, &mask),
                        Some(sampler) => {
                            let mut masked = vec![f32::NEG_INFINITY; logits.len()];
                            mask.iter_set_entries(|i| {
                                if let (Some(m), Some(l)) = (masked.get_mut(i), logits.get(i)) {
                                    *m = *l;
                                }
                            });
                            Some(sampler.sample(&Tensor::new(masked, &self.device)?)?)
                        }
                    }
                    .ok_or_else(|| LocalError::Grammar("no token is allowed here".into()))?
                }
                None => match &mut sampler {
                    None => argmax(&logits).ok_or_else(|| LocalError::Gguf("the model returned no logits".into()))?,
                    Some(sampler) => sampler.sample(&Tensor::new(logits.as_slice(), &self.device)?)?,
                },
            };
            if self.stop_ids.contains(&next) {
                break FinishReason::Stop;
            }
            let mut feed = vec![next];
            if let Some(matcher) = grammar.as_deref_mut() {
                matcher.consume_token(next).map_err(|e| LocalError::Grammar(e.to_string()))?;
                if !matcher.is_stopped() {
                    feed.extend(matcher.consume_ff_tokens());
                }
            }
            out.extend_from_slice(&feed);
            text = decode(&out)?;
            if let Some(cut) = params.stop.iter().filter_map(|s| text.find(s.as_str())).min() {
                text.truncate(cut);
                emit(&text, &mut emitted, on_text);
                break FinishReason::Stop;
            }
            emit(&text, &mut emitted, on_text);
            if grammar.as_deref().is_some_and(Matcher::is_stopped) {
                break FinishReason::Stop;
            }
            logits = self.weights.forward(&feed, pos, &self.device)?;
            pos += feed.len();
        };
        if finish == FinishReason::Length {
            emit(&text, &mut emitted, on_text);
        }
        Ok(Generation { token_ids: out, text, prompt_tokens: prompt.len(), prefill, decode: start.elapsed(), finish })
    }
}

/// Passes the part of `text` after `emitted` bytes to `on_text`, unless it ends inside an
/// incomplete UTF-8 sequence (decoded as U+FFFD), which the next token completes.
fn emit(text: &str, emitted: &mut usize, on_text: &mut dyn FnMut(&str)) {
    if text.ends_with('\u{FFFD}') || !text.is_char_boundary(*emitted) {
        return;
    }
    if let Some(piece) = text.get(*emitted..)
        && !piece.is_empty()
    {
        on_text(piece);
        *emitted = text.len();
    }
}

fn argmax(logits: &[f32]) -> Option<u32> {
    logits.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).and_then(|(i, _)| u32::try_from(i).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emit_waits_for_complete_characters() {
        let mut seen = String::new();
        let mut emitted = 0;
        emit("ab", &mut emitted, &mut |p| seen.push_str(p));
        emit("ab\u{FFFD}", &mut emitted, &mut |p| seen.push_str(p));
        emit("abé", &mut emitted, &mut |p| seen.push_str(p));
        assert_eq!(seen, "abé");
    }

    #[test]
    fn argmax_picks_the_largest_logit() {
        assert_eq!(argmax(&[1.0, 3.0, 2.0]), Some(1));
        assert_eq!(argmax(&[]), None);
    }
}
