//! The BERT encoder behind sentence embedders such as all-MiniLM-L6-v2: token, position and
//! segment embeddings, then post-norm blocks of self-attention and a GELU feed-forward.
//!
//! Weights come from a `model.safetensors` in the Hugging Face layout (`embeddings.*`,
//! `encoder.layer.<n>.*`, with or without a `bert.` prefix) and `config.json`.

use crate::layers::{Embedding, LayerNorm, Linear, Weights, softmax_last_dim};
use candle_core::{DType, Module, Tensor};
use serde::Deserialize;

use crate::error::LocalError;

/// The fields of `config.json` the encoder needs.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct BertConfig {
    pub(crate) vocab_size: usize,
    pub(crate) hidden_size: usize,
    pub(crate) num_hidden_layers: usize,
    pub(crate) num_attention_heads: usize,
    pub(crate) intermediate_size: usize,
    pub(crate) max_position_embeddings: usize,
    #[serde(default = "default_type_vocab")]
    pub(crate) type_vocab_size: usize,
    #[serde(default = "default_eps")]
    pub(crate) layer_norm_eps: f64,
    #[serde(default = "default_activation")]
    pub(crate) hidden_act: String,
}

fn default_type_vocab() -> usize {
    2
}

fn default_eps() -> f64 {
    1e-12
}

fn default_activation() -> String {
    "gelu".into()
}

struct Block {
    query: Linear,
    key: Linear,
    value: Linear,
    attention_out: Linear,
    attention_norm: LayerNorm,
    intermediate: Linear,
    output: Linear,
    output_norm: LayerNorm,
}

impl Block {
    fn load(config: &BertConfig, vb: &Weights) -> Result<Self, LocalError> {
        let h = config.hidden_size;
        let attention = vb.pp("attention");
        Ok(Self {
            query: Linear::load(h, h, &attention.pp("self").pp("query"))?,
            key: Linear::load(h, h, &attention.pp("self").pp("key"))?,
            value: Linear::load(h, h, &attention.pp("self").pp("value"))?,
            attention_out: Linear::load(h, h, &attention.pp("output").pp("dense"))?,
            attention_norm: LayerNorm::load(h, config.layer_norm_eps, &attention.pp("output").pp("LayerNorm"))?,
            intermediate: Linear::load(h, config.intermediate_size, &vb.pp("intermediate").pp("dense"))?,
            output: Linear::load(config.intermediate_size, h, &vb.pp("output").pp("dense"))?,
            output_norm: LayerNorm::load(h, config.layer_norm_eps, &vb.pp("output").pp("LayerNorm"))?,
        })
    }

    /// `x`: `[batch, len, hidden]`; `bias`: `[batch, 1, 1, len]`, 0 for real tokens and a large
    /// negative number for padding.
    fn forward(&self, x: &Tensor, bias: &Tensor, heads: usize) -> Result<Tensor, LocalError> {
        let (batch, len, hidden) = x.dims3()?;
        let head_dim = hidden / heads;
        let split = |t: Tensor| -> Result<Tensor, LocalError> {
            Ok(t.reshape((batch, len, heads, head_dim))?.transpose(1, 2)?.contiguous()?)
        };
        let q = split(self.query.forward(x)?)?;
        let k = split(self.key.forward(x)?)?;
        let v = split(self.value.forward(x)?)?;
        let scores = (q.matmul(&k.t()?)? / (head_dim as f64).sqrt())?.broadcast_add(bias)?;
        let weights = softmax_last_dim(&scores)?;
        let context = weights.matmul(&v)?.transpose(1, 2)?.reshape((batch, len, hidden))?;
        let x = self.attention_norm.forward(&(self.attention_out.forward(&context)? + x)?)?;
        let inner = self.intermediate.forward(&x)?.gelu_erf()?;
        Ok(self.output_norm.forward(&(self.output.forward(&inner)? + &x)?)?)
    }
}

/// A loaded encoder.
pub(crate) struct BertEncoder {
    words: Embedding,
    positions: Embedding,
    segments: Embedding,
    embedding_norm: LayerNorm,
    blocks: Vec<Block>,
    heads: usize,
    max_positions: usize,
}

impl BertEncoder {
    /// Loads the encoder from `vb` (the root of the safetensors file).
    pub(crate) fn load(config: &BertConfig, vb: &Weights) -> Result<Self, LocalError> {
        if config.hidden_act != "gelu" {
            return Err(LocalError::UnsupportedArchitecture(format!(
                "BERT with the `{}` activation (only `gelu` is supported)",
                config.hidden_act
            )));
        }
        if config.num_attention_heads == 0 || !config.hidden_size.is_multiple_of(config.num_attention_heads) {
            return Err(LocalError::UnsupportedArchitecture(format!(
                "BERT with {} heads over {} dimensions",
                config.num_attention_heads, config.hidden_size
            )));
        }
        let vb = if vb.contains("embeddings.word_embeddings.weight") { vb.clone() } else { vb.pp("bert") };
        let h = config.hidden_size;
        let embeddings = vb.pp("embeddings");
        let blocks = (0..config.num_hidden_layers)
            .map(|i| Block::load(config, &vb.pp("encoder").pp("layer").pp(i.to_string())))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            words: Embedding::load(config.vocab_size, h, &embeddings.pp("word_embeddings"))?,
            positions: Embedding::load(config.max_position_embeddings, h, &embeddings.pp("position_embeddings"))?,
            segments: Embedding::load(config.type_vocab_size, h, &embeddings.pp("token_type_embeddings"))?,
            embedding_norm: LayerNorm::load(h, config.layer_norm_eps, &embeddings.pp("LayerNorm"))?,
            blocks,
            heads: config.num_attention_heads,
            max_positions: config.max_position_embeddings,
        })
    }

    /// The last hidden states, `[batch, len, hidden]`, of token ids `[batch, len]` with their
    /// segment ids and attention mask (1 for tokens, 0 for padding).
    pub(crate) fn forward(&self, ids: &Tensor, segments: &Tensor, mask: &Tensor) -> Result<Tensor, LocalError> {
        let (_, len) = ids.dims2()?;
        if len > self.max_positions {
            return Err(LocalError::Tokenizer(format!(
                "{len} tokens is more than the encoder's {} positions",
                self.max_positions
            )));
        }
        let positions = Tensor::arange(0u32, len as u32, ids.device())?.unsqueeze(0)?;
        let x = self
            .words
            .forward(ids)?
            .broadcast_add(&self.positions.forward(&positions)?)?
            .add(&self.segments.forward(segments)?)?;
        let mut x = self.embedding_norm.forward(&x)?;
        let bias = attention_bias(mask)?;
        for block in &self.blocks {
            x = block.forward(&x, &bias, self.heads)?;
        }
        Ok(x)
    }
}

/// `[batch, 1, 1, len]`: 0 where the mask is 1, a large negative number where it is 0.
fn attention_bias(mask: &Tensor) -> Result<Tensor, LocalError> {
    let mask = mask.to_dtype(DType::F32)?;
    let bias = ((mask.ones_like()? - mask)? * -1e4)?;
    Ok(bias.unsqueeze(1)?.unsqueeze(1)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    #[test]
    fn padding_is_hidden_from_attention() -> Result<(), LocalError> {
        let mask = Tensor::new(&[[1u32, 1, 0]], &Device::Cpu)?;
        let bias = attention_bias(&mask)?;
        assert_eq!(bias.dims(), &[1, 1, 1, 3]);
        assert_eq!(bias.flatten_all()?.to_vec1::<f32>()?, vec![0.0, 0.0, -1e4]);
        Ok(())
    }

    #[test]
    fn the_config_reads_minilm() -> Result<(), serde_json::Error> {
        let config: BertConfig = serde_json::from_str(
            r#"{"vocab_size": 30522, "hidden_size": 384, "num_hidden_layers": 6, "num_attention_heads": 12,
                "intermediate_size": 1536, "max_position_embeddings": 512, "hidden_act": "gelu", "model_type": "bert"}"#,
        )?;
        assert_eq!((config.hidden_size, config.type_vocab_size), (384, 2));
        assert!((config.layer_norm_eps - 1e-12).abs() < 1e-20);
        Ok(())
    }
}
