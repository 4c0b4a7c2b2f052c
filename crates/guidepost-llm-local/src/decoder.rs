//! The decoder-only transformer of the Llama family over quantized GGUF weights: Llama and
//! SmolLM2 (`llama`), Qwen2 and Qwen2.5 (`qwen2`, biases on the query, key and value
//! projections) and Qwen3 (`qwen3`, a norm on each query and key head).
//!
//! Each block is pre-norm attention with grouped query heads and rotary positions, then a
//! SwiGLU feed-forward. Weights stay quantized, the token embedding included (rows are
//! dequantized as they are looked up, and a model whose output layer is tied to the embedding
//! shares one copy), so Qwen2.5-1.5B in Q4 takes about 1 GB instead of 3.
//!
//! The key/value cache outlives a prompt: [`Decoder::prefill`] keeps the part of the cache
//! that holds the longest prefix the new prompt shares with what was evaluated before, and
//! evaluates only the rest. Guidepost's prompts for one task share their instructions, so
//! on two CPU cores the second and later calls skip most of their prefill.
//!
//! A turn moves between kinds of prompt (the guideline checks, the tool decision, the
//! reply), and the next turn starts over with the checks. So the cache of a kind of prompt
//! the decoder leaves is kept aside ([`SAVED_PREFIXES`] of them, the most recently left
//! first), and a prompt that shares more with one of them than with the current cache
//! continues from it: the next turn's checks reuse the previous turn's agent and
//! conversation, the tool decision its instructions.

use std::io::{Read, Seek};
use std::sync::Arc;

use candle_core::quantized::gguf_file::Content;
use candle_core::quantized::{QMatMul, QTensor};
use candle_core::{DType, Device, Module, Tensor};

use crate::error::LocalError;
use crate::gguf::Metadata;
use crate::layers::{rms_norm, rope, softmax_last_dim};
use crate::requant::{RequantReport, requantize};

/// The architectures this decoder runs, from `general.architecture`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Family {
    /// Llama-style: no attention biases, interleaved rotary pairs (GGUF's Llama layout).
    Llama,
    /// Qwen2: biases on the query, key and value projections, rotary halves (NeoX layout).
    Qwen2,
    /// Qwen3: an RMS norm on every query and key head, rotary halves.
    Qwen3,
}

impl Family {
    fn from_architecture(arch: &str) -> Result<Self, LocalError> {
        match arch {
            "llama" => Ok(Self::Llama),
            "qwen2" => Ok(Self::Qwen2),
            "qwen3" => Ok(Self::Qwen3),
            other => Err(LocalError::UnsupportedArchitecture(other.to_string())),
        }
    }

    fn key(self) -> &'static str {
        match self {
            Self::Llama => "llama",
            Self::Qwen2 => "qwen2",
            Self::Qwen3 => "qwen3",
        }
    }
}

/// The shape of the network, from the GGUF metadata.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Hyperparameters {
    pub(crate) family: Family,
    pub(crate) layers: usize,
    pub(crate) heads: usize,
    pub(crate) kv_heads: usize,
    pub(crate) head_dim: usize,
    pub(crate) rms_eps: f64,
    pub(crate) rope_base: f32,
    /// Positions the rotary tables cover (the model's context, capped).
    pub(crate) positions: usize,
}

/// Rotary tables beyond this many positions are not precomputed (Qwen2.5 declares 32k;
/// Guidepost's prompts stay far below, and [`Decoder::prefill`] refuses longer inputs).
const MAX_POSITIONS: usize = 32_768;

impl Hyperparameters {
    fn read(content: &Content) -> Result<Self, LocalError> {
        let md = Metadata(content);
        let family = Family::from_architecture(md.str("general.architecture")?)?;
        let key = |name: &str| format!("{}.{name}", family.key());
        let required = |name: &str| {
            md.opt_u32(&key(name))
                .map(|n| n as usize)
                .ok_or_else(|| LocalError::Gguf(format!("metadata key `{}` is missing", key(name))))
        };
        let heads = required("attention.head_count")?;
        let embedding = required("embedding_length")?;
        let kv_heads = md.opt_u32(&key("attention.head_count_kv")).map_or(heads, |n| n as usize);
        let head_dim = md.opt_u32(&key("attention.key_length")).map_or(embedding / heads.max(1), |n| n as usize);
        if heads == 0
            || kv_heads == 0
            || !heads.is_multiple_of(kv_heads)
            || head_dim == 0
            || !head_dim.is_multiple_of(2)
        {
            return Err(LocalError::Gguf(format!(
                "unusable attention shape: {heads} heads, {kv_heads} key/value heads, head size {head_dim}"
            )));
        }
        Ok(Self {
            family,
            layers: required("block_count")?,
            heads,
            kv_heads,
            head_dim,
            rms_eps: md.opt_f32(&key("attention.layer_norm_rms_epsilon")).map_or(1e-6, f64::from),
            rope_base: md.opt_f32(&key("rope.freq_base")).unwrap_or(10_000.0),
            positions: md.opt_u32(&key("context_length")).map_or(4096, |n| n as usize).min(MAX_POSITIONS),
        })
    }
}

/// Reads the model's tensors, requantizing types that candle runs without SIMD kernels to
/// Q8_0 when asked to.
struct TensorReader<'a, R> {
    content: &'a Content,
    reader: &'a mut R,
    device: &'a Device,
    requantize: bool,
    report: RequantReport,
}

impl<R: Read + Seek> TensorReader<'_, R> {
    fn has(&self, name: &str) -> bool {
        self.content.tensor_infos.contains_key(name)
    }

    fn quantized(&mut self, name: &str) -> Result<QTensor, LocalError> {
        let tensor = self.content.tensor(self.reader, name, self.device)?;
        if self.requantize { requantize(tensor, self.device, &mut self.report) } else { Ok(tensor) }
    }

    fn matmul(&mut self, name: &str) -> Result<QMatMul, LocalError> {
        Ok(QMatMul::from_qtensor(self.quantized(name)?)?)
    }

    /// A small tensor (norm weights, biases) as plain F32.
    fn f32(&mut self, name: &str) -> Result<Tensor, LocalError> {
        Ok(self.content.tensor(self.reader, name, self.device)?.dequantize(self.device)?)
    }

    fn optional_f32(&mut self, name: &str) -> Result<Option<Tensor>, LocalError> {
        if self.has(name) { self.f32(name).map(Some) } else { Ok(None) }
    }
}

/// One transformer block and its slice of the key/value cache.
struct Block {
    attn_norm: Tensor,
    wq: QMatMul,
    wk: QMatMul,
    wv: QMatMul,
    bq: Option<Tensor>,
    bk: Option<Tensor>,
    bv: Option<Tensor>,
    q_norm: Option<Tensor>,
    k_norm: Option<Tensor>,
    wo: QMatMul,
    ffn_norm: Tensor,
    gate: QMatMul,
    up: QMatMul,
    down: QMatMul,
    /// Keys and values of the positions evaluated so far, `[1, kv_heads, positions, head_dim]`.
    cache: Option<(Tensor, Tensor)>,
}

impl Block {
    fn load<R: Read + Seek>(tensors: &mut TensorReader<'_, R>, index: usize) -> Result<Self, LocalError> {
        let name = |part: &str| format!("blk.{index}.{part}");
        Ok(Self {
            attn_norm: tensors.f32(&name("attn_norm.weight"))?,
            wq: tensors.matmul(&name("attn_q.weight"))?,
            wk: tensors.matmul(&name("attn_k.weight"))?,
            wv: tensors.matmul(&name("attn_v.weight"))?,
            bq: tensors.optional_f32(&name("attn_q.bias"))?,
            bk: tensors.optional_f32(&name("attn_k.bias"))?,
            bv: tensors.optional_f32(&name("attn_v.bias"))?,
            q_norm: tensors.optional_f32(&name("attn_q_norm.weight"))?,
            k_norm: tensors.optional_f32(&name("attn_k_norm.weight"))?,
            wo: tensors.matmul(&name("attn_output.weight"))?,
            ffn_norm: tensors.f32(&name("ffn_norm.weight"))?,
            gate: tensors.matmul(&name("ffn_gate.weight"))?,
            up: tensors.matmul(&name("ffn_up.weight"))?,
            down: tensors.matmul(&name("ffn_down.weight"))?,
            cache: None,
        })
    }

    /// Keeps the first `positions` entries of the cache.
    fn truncate_cache(&mut self, positions: usize) -> Result<(), LocalError> {
        self.cache = match self.cache.take() {
            Some(_) if positions == 0 => None,
            Some((k, v)) if k.dim(2)? > positions => Some((k.narrow(2, 0, positions)?, v.narrow(2, 0, positions)?)),
            other => other,
        };
        Ok(())
    }

    fn forward(&mut self, x: &Tensor, pos: usize, rope: &Rope, hp: &Hyperparameters) -> Result<Tensor, LocalError> {
        let (batch, len, _) = x.dims3()?;
        let normed = rms_norm(x, &self.attn_norm, hp.rms_eps)?;
        let project = |w: &QMatMul, bias: &Option<Tensor>| -> Result<Tensor, LocalError> {
            let y = w.forward(&normed)?;
            Ok(match bias {
                Some(b) => y.broadcast_add(b)?,
                None => y,
            })
        };
        let heads = |t: Tensor, n: usize| -> Result<Tensor, LocalError> {
            Ok(t.reshape((batch, len, n, hp.head_dim))?.transpose(1, 2)?.contiguous()?)
        };
        let mut q = heads(project(&self.wq, &self.bq)?, hp.heads)?;
        let mut k = heads(project(&self.wk, &self.bk)?, hp.kv_heads)?;
        let v = heads(project(&self.wv, &self.bv)?, hp.kv_heads)?;
        if let Some(norm) = &self.q_norm {
            q = rms_norm(&q, norm, hp.rms_eps)?;
        }
        if let Some(norm) = &self.k_norm {
            k = rms_norm(&k, norm, hp.rms_eps)?;
        }
        let q = rope.apply(&q, pos)?;
        let k = rope.apply(&k, pos)?;
        let (k, v) = match self.cache.take() {
            Some((ck, cv)) => (Tensor::cat(&[&ck, &k], 2)?, Tensor::cat(&[&cv, &v], 2)?),
            None => (k, v),
        };
        self.cache = Some((k.clone(), v.clone()));

        let groups = hp.heads / hp.kv_heads;
        let k = repeat_heads(&k, groups)?;
        let v = repeat_heads(&v, groups)?;
        let scale = 1.0 / (hp.head_dim as f64).sqrt();
        let mut scores = (q.matmul(&k.t()?)? * scale)?;
        if len > 1 {
            scores = scores.broadcast_add(&causal_mask(len, pos, x.device())?)?;
        }
        let weights = softmax_last_dim(&scores)?;
        let attended = weights.matmul(&v)?.transpose(1, 2)?.reshape((batch, len, hp.heads * hp.head_dim))?;
        let x = (x + self.wo.forward(&attended)?)?;

        let normed = rms_norm(&x, &self.ffn_norm, hp.rms_eps)?;
        let hidden = (self.gate.forward(&normed)?.silu()? * self.up.forward(&normed)?)?;
        Ok((x + self.down.forward(&hidden)?)?)
    }
}

/// Each key/value head serves `groups` query heads: repeat it that many times.
fn repeat_heads(t: &Tensor, groups: usize) -> Result<Tensor, LocalError> {
    if groups == 1 {
        return Ok(t.clone());
    }
    let (batch, kv_heads, len, dim) = t.dims4()?;
    Ok(t.unsqueeze(2)?.expand((batch, kv_heads, groups, len, dim))?.reshape((batch, kv_heads * groups, len, dim))?)
}

/// `[len, pos + len]`: 0 where query `i` (at position `pos + i`) may see key `j`, minus
/// infinity for keys after it.
fn causal_mask(len: usize, pos: usize, device: &Device) -> Result<Tensor, LocalError> {
    let total = pos + len;
    let mask: Vec<f32> =
        (0..len).flat_map(|i| (0..total).map(move |j| if j > pos + i { f32::NEG_INFINITY } else { 0.0 })).collect();
    Ok(Tensor::from_vec(mask, (len, total), device)?)
}

/// Precomputed rotary tables.
struct Rope {
    cos: Tensor,
    sin: Tensor,
    /// NeoX layout (the two halves of a head rotate together) instead of interleaved pairs.
    halves: bool,
}

impl Rope {
    fn new(hp: &Hyperparameters, device: &Device) -> Result<Self, LocalError> {
        let half = hp.head_dim / 2;
        let inverse: Vec<f32> =
            (0..half).map(|i| 1.0 / hp.rope_base.powf(2.0 * i as f32 / hp.head_dim as f32)).collect();
        let inverse = Tensor::from_vec(inverse, (1, half), device)?;
        let positions =
            Tensor::arange(0u32, hp.positions as u32, device)?.to_dtype(DType::F32)?.reshape((hp.positions, 1))?;
        let angles = positions.broadcast_mul(&inverse)?;
        Ok(Self { cos: angles.cos()?, sin: angles.sin()?, halves: hp.family != Family::Llama })
    }

    fn apply(&self, x: &Tensor, pos: usize) -> Result<Tensor, LocalError> {
        let len = x.dim(2)?;
        let cos = self.cos.narrow(0, pos, len)?;
        let sin = self.sin.narrow(0, pos, len)?;
        rope(x, &cos, &sin, !self.halves)
    }
}

/// How many caches of prompts the decoder moved away from it keeps aside, besides the
/// current one. Each holds its keys and values (about 57 KB per token for Qwen2.5-1.5B).
pub(crate) const SAVED_PREFIXES: usize = 3;

/// A key/value cache kept aside: the tokens it holds and each block's keys and values.
struct SavedCache {
    tokens: Vec<u32>,
    blocks: Vec<Option<(Tensor, Tensor)>>,
}

/// How many leading tokens `a` and `b` share.
fn shared_prefix(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// Whether a prompt sharing `shared` tokens with a cache of `held` tokens is another kind
/// of prompt: it keeps less than half of the cache. Within a kind (the checks of one turn,
/// which differ only in their statement) the cache is simply cut back; across kinds the one
/// left is worth keeping aside.
fn another_kind(shared: usize, held: usize) -> bool {
    shared * 2 < held
}

/// What [`Decoder::prefill`] does with the caches before evaluating a prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CachePlan {
    /// Continue from the current cache.
    Current,
    /// Continue from the saved cache at this index, which shares more with the prompt.
    Saved(usize),
}

/// Chooses the cache to continue from: a saved one only when it shares more with the
/// prompt than the current one does.
fn plan(current: &[u32], saved: &[&[u32]], prompt: &[u32]) -> CachePlan {
    let here = shared_prefix(current, prompt);
    let best = saved.iter().enumerate().map(|(i, tokens)| (i, shared_prefix(tokens, prompt))).max_by_key(|(_, n)| *n);
    match best {
        Some((i, n)) if n > here => CachePlan::Saved(i),
        _ => CachePlan::Current,
    }
}

/// A loaded decoder with its key/value cache.
pub(crate) struct Decoder {
    hp: Hyperparameters,
    embedding: Arc<QTensor>,
    blocks: Vec<Block>,
    norm: Tensor,
    output: QMatMul,
    rope: Rope,
    device: Device,
    /// The tokens whose keys and values the cache holds, in order.
    cached: Vec<u32>,
    /// Caches of other kinds of prompt, kept aside, the most recently left last.
    saved: Vec<SavedCache>,
}

impl Decoder {
    /// Loads the weights `content` describes from `reader`; with `requantize`, tensors of
    /// slow types become Q8_0 (see [`crate::requant`]).
    pub(crate) fn load<R: Read + Seek>(
        content: &Content,
        reader: &mut R,
        device: &Device,
        requantize: bool,
    ) -> Result<(Self, RequantReport), LocalError> {
        let hp = Hyperparameters::read(content)?;
        let mut tensors = TensorReader { content, reader, device, requantize, report: RequantReport::default() };
        // The embedding is looked up row by row, and stays as it is stored.
        let embedding = Arc::new(content.tensor(tensors.reader, "token_embd.weight", device)?);
        // A model without its own output layer reads the embedding backwards (tied weights).
        let output = if tensors.has("output.weight") {
            tensors.matmul("output.weight")?
        } else {
            QMatMul::from_arc(Arc::clone(&embedding))?
        };
        let blocks = (0..hp.layers).map(|i| Block::load(&mut tensors, i)).collect::<Result<Vec<_>, _>>()?;
        let norm = tensors.f32("output_norm.weight")?;
        let report = tensors.report;
        let decoder = Self {
            rope: Rope::new(&hp, device)?,
            norm,
            embedding,
            blocks,
            output,
            hp,
            device: device.clone(),
            cached: Vec::new(),
            saved: Vec::new(),
        };
        Ok((decoder, report))
    }

    /// Positions the model can attend over.
    pub(crate) fn positions(&self) -> usize {
        self.hp.positions
    }

    /// Evaluates a whole prompt and returns the logits after its last token, reusing the
    /// cached keys and values of the longest prefix it shares with the previous evaluation.
    /// Returns the logits and how many prompt tokens came from the cache.
    pub(crate) fn prefill(&mut self, prompt: &[u32]) -> Result<(Vec<f32>, usize), LocalError> {
        if prompt.is_empty() || prompt.len() > self.hp.positions {
            return Err(LocalError::ContextOverflow {
                prompt_tokens: prompt.len(),
                max_tokens: 0,
                context: self.hp.positions,
            });
        }
        let saved: Vec<&[u32]> = self.saved.iter().map(|c| c.tokens.as_slice()).collect();
        if let CachePlan::Saved(i) = plan(&self.cached, &saved, prompt) {
            let chosen = self.saved.remove(i);
            let left = self.take_cache();
            self.keep_aside(left);
            for (block, cache) in self.blocks.iter_mut().zip(chosen.blocks) {
                block.cache = cache;
            }
            self.cached = chosen.tokens;
        }
        let shared = shared_prefix(&self.cached, prompt);
        // Another kind of prompt cuts the cache back to little: a copy is kept aside first (the
        // tensors are shared, not copied).
        if another_kind(shared, self.cached.len()) {
            let left = SavedCache {
                tokens: self.cached.clone(),
                blocks: self.blocks.iter().map(|b| b.cache.clone()).collect(),
            };
            self.keep_aside(left);
        }
        // At least the last prompt token is evaluated: its logits are the answer.
        let reuse = shared.min(prompt.len() - 1);
        for block in &mut self.blocks {
            block.truncate_cache(reuse)?;
        }
        self.cached.truncate(reuse);
        let logits = self.step(&prompt[reuse..])?;
        Ok((logits, reuse))
    }

    /// Evaluates `tokens` after everything evaluated so far and returns the logits after the
    /// last of them.
    pub(crate) fn step(&mut self, tokens: &[u32]) -> Result<Vec<f32>, LocalError> {
        let pos = self.cached.len();
        if tokens.is_empty() || pos + tokens.len() > self.hp.positions {
            return Err(LocalError::ContextOverflow {
                prompt_tokens: pos + tokens.len(),
                max_tokens: 0,
                context: self.hp.positions,
            });
        }
        // On failure the cache no longer matches `cached`: start over next time.
        let result = self.run(tokens, pos);
        match &result {
            Ok(_) => self.cached.extend_from_slice(tokens),
            Err(_) => self.forget(),
        }
        result
    }

    fn run(&mut self, tokens: &[u32], pos: usize) -> Result<Vec<f32>, LocalError> {
        let ids = Tensor::new(tokens, &self.device)?;
        let mut x = self.embedding.embedding(&ids)?.unsqueeze(0)?;
        for block in &mut self.blocks {
            x = block.forward(&x, pos, &self.rope, &self.hp)?;
        }
        let last = x.narrow(1, tokens.len() - 1, 1)?;
        let last = rms_norm(&last, &self.norm, self.hp.rms_eps)?;
        let logits = self.output.forward(&last)?;
        Ok(logits.flatten_all()?.to_dtype(DType::F32)?.to_vec1()?)
    }

    /// Takes the current cache out of the blocks, leaving them empty.
    fn take_cache(&mut self) -> SavedCache {
        SavedCache {
            tokens: std::mem::take(&mut self.cached),
            blocks: self.blocks.iter_mut().map(|b| b.cache.take()).collect(),
        }
    }

    /// Keeps `cache` aside as the most recently left, in place of a saved one of the same
    /// kind, dropping the least recently left beyond [`SAVED_PREFIXES`].
    fn keep_aside(&mut self, cache: SavedCache) {
        if cache.tokens.is_empty() {
            return;
        }
        self.saved.retain(|c| another_kind(shared_prefix(&c.tokens, &cache.tokens), c.tokens.len()));
        self.saved.push(cache);
        if self.saved.len() > SAVED_PREFIXES {
            self.saved.remove(0);
        }
    }

    /// Empties the current cache (the caches kept aside are whole, and stay).
    pub(crate) fn forget(&mut self) {
        for block in &mut self.blocks {
            block.cache = None;
        }
        self.cached.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mask_hides_later_positions_only() -> Result<(), LocalError> {
        let mask = causal_mask(2, 3, &Device::Cpu)?.to_vec2::<f32>()?;
        assert_eq!(mask[0], vec![0.0, 0.0, 0.0, 0.0, f32::NEG_INFINITY]);
        assert_eq!(mask[1], vec![0.0; 5]);
        Ok(())
    }

    #[test]
    fn a_prompt_continues_from_the_cache_that_shares_most_with_it() {
        let checks: &[u32] = &[1, 2, 3, 4, 5, 6];
        let tools: &[u32] = &[1, 9, 9, 9];
        // The next check shares more with the checks' cache kept aside than with the tool
        // decision's current one.
        assert_eq!(plan(tools, &[checks], &[1, 2, 3, 4, 7]), CachePlan::Saved(0));
        assert_eq!(plan(tools, &[checks], &[1, 9, 9, 8]), CachePlan::Current);
        // A tie stays with the current cache.
        assert_eq!(plan(&[1, 2], &[&[1, 2, 3]], &[1, 2, 5]), CachePlan::Current);
        assert_eq!(plan(&[], &[tools, checks], &[1, 2, 3]), CachePlan::Saved(1));
        // The checks of one turn differ in their statement only: the same kind of prompt.
        assert!(!another_kind(5, 6));
        assert!(another_kind(1, 6));
    }

    #[test]
    fn heads_repeat_in_groups() -> Result<(), LocalError> {
        let t = Tensor::arange(0f32, 4.0, &Device::Cpu)?.reshape((1, 2, 1, 2))?;
        let r = repeat_heads(&t, 2)?;
        assert_eq!(r.dims(), &[1, 4, 1, 2]);
        let values = r.flatten_all()?.to_vec1::<f32>()?;
        assert_eq!(values, vec![0.0, 1.0, 0.0, 1.0, 2.0, 3.0, 2.0, 3.0]);
        Ok(())
    }

    #[test]
    fn rotary_tables_start_at_identity() -> Result<(), LocalError> {
        let hp = Hyperparameters {
            family: Family::Qwen2,
            layers: 1,
            heads: 1,
            kv_heads: 1,
            head_dim: 4,
            rms_eps: 1e-6,
            rope_base: 10_000.0,
            positions: 8,
        };
        let rope = Rope::new(&hp, &Device::Cpu)?;
        let x = Tensor::new(&[[[[1f32, 2.0, 3.0, 4.0]]]], &Device::Cpu)?;
        // Position 0 does not rotate.
        assert_eq!(rope.apply(&x, 0)?.flatten_all()?.to_vec1::<f32>()?, vec![1.0, 2.0, 3.0, 4.0]);
        // Rotation keeps each pair's length.
        let y = rope.apply(&x, 5)?.flatten_all()?.to_vec1::<f32>()?;
        let pair = |a: f32, b: f32| (a * a + b * b).sqrt();
        assert!((pair(y[0], y[2]) - pair(1.0, 3.0)).abs() < 1e-4, "{y:?}");
        assert!((pair(y[1], y[3]) - pair(2.0, 4.0)).abs() < 1e-4, "{y:?}");
        Ok(())
    }
}
