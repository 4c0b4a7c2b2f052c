//! The decoder-only transformer of the Llama family over quantized GGUF weights: Llama and
//! SmolLM2 (`llama`), Qwen2 and Qwen2.5 (`qwen2`, biases on the query, key and value
//! projections) and Qwen3 (`qwen3`, a norm on each query and key head).
//!
//! Each block is pre-norm attention with grouped query heads and rotary positions, then a
//! SwiGLU feed-forward. Weights stay quantized, the token embedding included (rows are
//! dequantized as they are looked up), and each is held once: the blocks of the weights
//! candle multiplies through its own repacked tiles are released after loading
//! ([`crate::weights`]).
//!
//! The key/value cache outlives a prompt ([`crate::kv_cache`]): [`Decoder::prefill_guessing`] keeps
//! the part of the cache that holds the longest prefix the new prompt shares with what was
//! evaluated before, or with a cache of another kind of prompt kept aside, and evaluates only
//! the rest, in chunks of [`PREFILL_CHUNK`] positions so that the attention scores of a long
//! prompt never take more than a few tens of megabytes.

use std::io::{Read, Seek};
use std::sync::Arc;

use candle_core::quantized::gguf_file::Content;
use candle_core::quantized::{QMatMul, QTensor};
use candle_core::{DType, Device, Module, Tensor};

use crate::error::LocalError;
use crate::gguf::Metadata;
use crate::kv_cache::{self, Cache, CachePlan, LayerCache, SavedCaches, plan, shared_prefix};
use crate::layers::{causal_softmax, rms_norm, rope, softmax_last_dim};
use crate::requant::{RequantReport, is_slow, requantize};
use crate::weights::{self, BlockHandle, BlockWeight};

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
/// Guidepost's prompts stay far below, and [`Decoder::prefill_guessing`] refuses longer inputs).
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
    /// The blocks of every weight read so far.
    handles: Vec<BlockHandle>,
    /// Put the blocks' weights in Guidepost's tiles where they fit.
    packed: bool,
    /// Bytes of the weights in Guidepost's tiles.
    packed_bytes: usize,
}

impl<R: Read + Seek> TensorReader<'_, R> {
    fn has(&self, name: &str) -> bool {
        self.content.tensor_infos.contains_key(name)
    }

    /// A weight multiplied by, in blocks the decoder can release once candle has repacked
    /// them (see [`crate::weights`]).
    fn matmul(&mut self, name: &str) -> Result<QMatMul, LocalError> {
        Ok(QMatMul::from_qtensor(self.quantized(name)?)?)
    }

    /// A transformer block's weight (see [`BlockWeight`]): in Guidepost's tiles when asked
    /// for and they fit, else for candle.
    fn block_weight(&mut self, name: &str) -> Result<BlockWeight, LocalError> {
        let dtype = self.content.tensor_infos.get(name).map(|info| info.ggml_dtype);
        if self.packed && dtype.is_some_and(|d| !(self.requantize && is_slow(d))) {
            let (dtype, shape, raw) = weights::read_bytes(self.content, self.reader, name)?;
            if let Some(weight) = weights::pack(dtype, &shape, &raw) {
                self.packed_bytes += weight.bytes();
                return Ok(BlockWeight::Packed(weight));
            }
        }
        BlockWeight::new(self.quantized(name)?)
    }

    fn quantized(&mut self, name: &str) -> Result<QTensor, LocalError> {
        let slow = self.content.tensor_infos.get(name).is_some_and(|info| is_slow(info.ggml_dtype));
        let (tensor, handle) = if self.requantize && slow {
            let tensor = self.content.tensor(self.reader, name, self.device)?;
            weights::rewrap(&requantize(tensor, self.device, &mut self.report)?, self.device)?
        } else {
            weights::read(self.content, self.reader, name)?
        };
        self.handles.push(handle);
        Ok(tensor)
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
    wq: BlockWeight,
    wk: BlockWeight,
    wv: BlockWeight,
    bq: Option<Tensor>,
    bk: Option<Tensor>,
    bv: Option<Tensor>,
    q_norm: Option<Tensor>,
    k_norm: Option<Tensor>,
    wo: BlockWeight,
    ffn_norm: Tensor,
    gate: BlockWeight,
    up: BlockWeight,
    down: BlockWeight,
}

impl Block {
    fn load<R: Read + Seek>(tensors: &mut TensorReader<'_, R>, index: usize) -> Result<Self, LocalError> {
        let name = |part: &str| format!("blk.{index}.{part}");
        Ok(Self {
            attn_norm: tensors.f32(&name("attn_norm.weight"))?,
            wq: tensors.block_weight(&name("attn_q.weight"))?,
            wk: tensors.block_weight(&name("attn_k.weight"))?,
            wv: tensors.block_weight(&name("attn_v.weight"))?,
            bq: tensors.optional_f32(&name("attn_q.bias"))?,
            bk: tensors.optional_f32(&name("attn_k.bias"))?,
            bv: tensors.optional_f32(&name("attn_v.bias"))?,
            q_norm: tensors.optional_f32(&name("attn_q_norm.weight"))?,
            k_norm: tensors.optional_f32(&name("attn_k_norm.weight"))?,
            wo: tensors.block_weight(&name("attn_output.weight"))?,
            ffn_norm: tensors.f32(&name("ffn_norm.weight"))?,
            gate: tensors.block_weight(&name("ffn_gate.weight"))?,
            up: tensors.block_weight(&name("ffn_up.weight"))?,
            down: tensors.block_weight(&name("ffn_down.weight"))?,
        })
    }

    fn forward(
        &self,
        x: &Tensor,
        place: &Place<'_>,
        rope: &Rope,
        hp: &Hyperparameters,
        cache: &mut LayerCache,
    ) -> Result<Tensor, LocalError> {
        let (batch, len, _) = x.dims3()?;
        let normed = rms_norm(x, &self.attn_norm, hp.rms_eps)?;
        let project = |w: &BlockWeight, bias: &Option<Tensor>| -> Result<Tensor, LocalError> {
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
        let (q, k) = match place {
            Place::After(pos) => (rope.apply(&q, *pos)?, rope.apply(&k, *pos)?),
            Place::Tree { positions, .. } => (rope.apply_at(&q, positions)?, rope.apply_at(&k, positions)?),
        };
        let (k, v) = cache.append(&k, &v)?;

        // The query heads that share a key/value head attend together, as the rows of one
        // product: `[batch, kv_heads, groups * len, head_dim]` (heads are numbered key/value
        // head first), so the keys and values are never repeated.
        let groups = hp.heads / hp.kv_heads;
        let q = q.reshape((batch, hp.kv_heads, groups * len, hp.head_dim))?;
        let scores = q.matmul(&k.t()?)?;
        let scale = 1.0 / (hp.head_dim as f32).sqrt();
        let weights = match place {
            Place::After(pos) => causal_softmax(&scores, len, *pos, scale)?,
            Place::Tree { mask, .. } => softmax_last_dim(&(scores * f64::from(scale))?.broadcast_add(mask)?)?,
        };
        let attended = weights.matmul(&v)?.reshape((batch, hp.heads, len, hp.head_dim))?.transpose(1, 2)?.reshape((
            batch,
            len,
            hp.heads * hp.head_dim,
        ))?;
        let x = (x + self.wo.forward(&attended)?)?;

        let normed = rms_norm(&x, &self.ffn_norm, hp.rms_eps)?;
        let hidden = (self.gate.forward(&normed)?.silu()? * self.up.forward(&normed)?)?;
        Ok((x + self.down.forward(&hidden)?)?)
    }
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

    /// Rotates the rows of `x` (`[batch, heads, len, dim]`) each to its own position:
    /// `positions` holds `len` of them (`u32`).
    fn apply_at(&self, x: &Tensor, positions: &Tensor) -> Result<Tensor, LocalError> {
        let cos = self.cos.index_select(positions, 0)?;
        let sin = self.sin.index_select(positions, 0)?;
        rope(x, &cos, &sin, !self.halves)
    }
}

/// Where the positions of a pass sit and what each attends to.
enum Place<'a> {
    /// One run right after the cache, from this position on: each position attends to
    /// everything before it.
    After(usize),
    /// The tokens of several prompts' branches after the cache ([`Decoder::prefill_shared`]):
    /// each row at its own position (`positions`, `u32`), attending to the keys `mask` lets it
    /// (`0` or minus infinity, one row per query row of a key/value head's group).
    Tree { positions: &'a Tensor, mask: &'a Tensor },
}

/// A prompt is evaluated this many positions at a time: the attention scores of a chunk
/// take `heads × chunk × positions` values, about 37 MB for Qwen2.5-1.5B at 3,000 positions.
pub(crate) const PREFILL_CHUNK: usize = 256;

/// Positions evaluated in one pass through the blocks: [`PREFILL_CHUNK`], or fewer where the
/// kernels chosen for the CPU cap the rows of a product ([`crate::options::rows_per_product`]).
/// Evaluating a long prompt in passes of 31 positions read it faster than multiplying each
/// weight by 256 rows in pieces of 31 (three prompts of 96-308 new tokens in the demo: 10-20 %
/// less time, one run each).
fn chunk_len() -> usize {
    crate::options::rows_per_product(PREFILL_CHUNK)
}

/// Most positions a shared pass ([`Decoder::prefill_shared`]) evaluates for the other
/// prompts, besides the first's.
pub(crate) const SHARED_ROWS: usize = 256;

/// A prompt to read in a shared pass ([`Decoder::prefill_shared`]) and the guess after it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Branch<'a> {
    pub(crate) prompt: &'a [u32],
    pub(crate) guess: &'a [u32],
}

/// The tokens of several prompts after a shared part, as a tree: a token two prompts share
/// (with everything before it) is one node. Nodes are numbered as they were made, so every
/// node comes after the one it descends from, and the first prompt's nodes come first, in
/// order.
#[derive(Debug, Default)]
struct Tree {
    tokens: Vec<u32>,
    parents: Vec<Option<usize>>,
    /// Positions after the shared part.
    depths: Vec<usize>,
    /// Whether the logits after the node are wanted (it ends a prompt or a guess).
    wanted: Vec<bool>,
    children: std::collections::HashMap<(Option<usize>, u32), usize>,
}

/// Where one prompt ends in a [`Tree`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Ends {
    /// The node of the prompt's last token.
    prompt: usize,
    /// The node of the guess's last token, when there is a guess.
    guess: Option<usize>,
    /// Nodes its prompt added (its tokens no earlier prompt had read).
    fresh: usize,
}

impl Tree {
    fn len(&self) -> usize {
        self.tokens.len()
    }

    /// Adds `prompt` (at least one token) and `guess` after it.
    fn insert(&mut self, prompt: &[u32], guess: &[u32]) -> Ends {
        let mut at = None;
        let mut fresh = 0;
        let mut ends = Ends { prompt: 0, guess: None, fresh: 0 };
        for (i, &token) in prompt.iter().chain(guess).enumerate() {
            let node = match self.children.get(&(at, token)) {
                Some(&node) => node,
                None => {
                    let node = self.tokens.len();
                    self.tokens.push(token);
                    self.parents.push(at);
                    self.depths.push(i);
                    self.wanted.push(false);
                    self.children.insert((at, token), node);
                    if i < prompt.len() {
                        fresh += 1;
                    }
                    node
                }
            };
            if i + 1 == prompt.len() {
                ends.prompt = node;
                self.wanted[node] = true;
            }
            if !guess.is_empty() && i + 1 == prompt.len() + guess.len() {
                ends.guess = Some(node);
                self.wanted[node] = true;
            }
            at = Some(node);
        }
        ends.fresh = fresh;
        ends
    }
}

/// What [`Decoder::prefill_guessing`] returns.
pub(crate) struct Prefill {
    /// The logits after the prompt.
    pub(crate) logits: Vec<f32>,
    /// The logits after the guess, when there was one.
    pub(crate) after_guess: Option<Vec<f32>>,
    /// Prompt tokens whose keys and values came from a cache.
    pub(crate) reused: usize,
}

/// What loading did besides reading the weights.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct LoadReport {
    /// What requantization to Q8_0 did.
    pub(crate) requantized: RequantReport,
    /// Bytes of quantized blocks released because candle reads the weights from its own
    /// repacked tiles.
    pub(crate) released_bytes: usize,
    /// Bytes of the weights held in Guidepost's tiles.
    pub(crate) packed_bytes: usize,
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
    /// The current cache: the tokens evaluated, in order, and their keys and values.
    cache: Cache,
    /// Caches of other kinds of prompt, kept aside.
    saved: SavedCaches,
}

impl Decoder {
    /// Loads the weights `content` describes from `reader`; with `requantize`, tensors of
    /// slow types become Q8_0 (see [`crate::requant`]).
    pub(crate) fn load<R: Read + Seek>(
        content: &Content,
        reader: &mut R,
        device: &Device,
        requantize: bool,
        packed: bool,
    ) -> Result<(Self, LoadReport), LocalError> {
        let hp = Hyperparameters::read(content)?;
        let mut tensors = TensorReader {
            content,
            reader,
            device,
            requantize,
            report: RequantReport::default(),
            handles: Vec::new(),
            packed,
            packed_bytes: 0,
        };
        // The embedding is looked up row by row, and stays as it is stored.
        let embedding = Arc::new(content.tensor(tensors.reader, "token_embd.weight", device)?);
        // A model without its own output layer reads the embedding backwards (tied weights).
        let output = if tensors.has("output.weight") {
            tensors.matmul("output.weight")?
        } else {
            QMatMul::from_arc(Arc::clone(&embedding))?
        };
        let output_handles = std::mem::take(&mut tensors.handles);
        let mut blocks = Vec::with_capacity(hp.layers);
        let mut block_handles = Vec::with_capacity(hp.layers);
        for i in 0..hp.layers {
            blocks.push(Block::load(&mut tensors, i)?);
            block_handles.push(std::mem::take(&mut tensors.handles));
        }
        let norm = tensors.f32("output_norm.weight")?;
        let report = tensors.report;
        let packed_bytes = tensors.packed_bytes;
        let hp_layers = hp.layers;
        let decoder = Self {
            rope: Rope::new(&hp, device)?,
            norm,
            embedding,
            blocks,
            output,
            hp,
            device: device.clone(),
            cache: Cache::empty(hp_layers),
            saved: SavedCaches::default(),
        };
        let released = decoder.release_repacked(&block_handles, &output_handles)?;
        crate::memory::return_free_memory();
        Ok((decoder, LoadReport { requantized: report, released_bytes: released, packed_bytes }))
    }

    /// Runs each weight once on many rows and once on one row, so that candle repacks every
    /// weight it has tiled kernels for, and releases the blocks of each weight candle did not
    /// read directly, block after block: they would be held twice otherwise, and releasing
    /// them as soon as each block is done keeps the memory at load near what stays. Returns
    /// the bytes released.
    fn release_repacked(&self, blocks: &[Vec<BlockHandle>], output: &[BlockHandle]) -> Result<usize, LocalError> {
        // 33 rows: candle's widest kernels start at 32 rows (fewer where the CPU's AMX tiles
        // are to stay unmade, see `crate::options::configure_kernels`).
        let rows = crate::options::rows_per_product(33).min(self.hp.positions.saturating_sub(1));
        if rows < 2 {
            return Ok(0);
        }
        let release = |handles: &[BlockHandle]| -> usize {
            handles.iter().filter(|h| !h.read_directly()).map(BlockHandle::release).sum()
        };
        let ids = Tensor::new(vec![0u32; rows], &self.device)?;
        let mut x = self.embedding.embedding(&ids)?.unsqueeze(0)?;
        let mut released = 0;
        for (block, handles) in self.blocks.iter().zip(blocks) {
            let mut cache = LayerCache::new();
            let y = block.forward(&x, &Place::After(0), &self.rope, &self.hp, &mut cache)?;
            block.forward(&y.narrow(1, rows - 1, 1)?, &Place::After(rows), &self.rope, &self.hp, &mut cache)?;
            released += release(handles);
            // Now, not after the last layer: freed blocks left to the allocator add up while
            // the next layers' tiles are made (see `crate::memory`).
            crate::memory::return_free_memory();
            x = y;
        }
        let last = rms_norm(&x.narrow(1, rows - 1, 1)?, &self.norm, self.hp.rms_eps)?;
        self.output.forward(&last)?;
        Ok(released + release(output))
    }

    /// Positions the model can attend over.
    pub(crate) fn positions(&self) -> usize {
        self.hp.positions
    }

    /// Evaluates a whole prompt, reusing the cached keys and values of the longest prefix it
    /// shares with the current cache or one kept aside, and `guess` after it in the same
    /// pass: the tokens the answer is expected to start with. Returns the logits after the
    /// prompt and after the guess; when the guess turns out wrong, [`rewind`](Self::rewind) to
    /// the prompt's length. `on_read` hears how many of the tokens to evaluate are done, and
    /// of how many, as each layer finishes a chunk.
    pub(crate) fn prefill_guessing(
        &mut self,
        prompt: &[u32],
        guess: &[u32],
        on_read: &mut dyn FnMut(usize, usize),
    ) -> Result<Prefill, LocalError> {
        let reuse = self.take_up(prompt, guess.len())?;
        let tokens: Vec<u32> = prompt[reuse..].iter().chain(guess).copied().collect();
        let last_of_prompt = prompt.len() - reuse - 1;
        let mut wanted = vec![last_of_prompt];
        if !guess.is_empty() {
            wanted.push(tokens.len() - 1);
        }
        let mut logits = self.evaluate(&tokens, &wanted, on_read)?.into_iter();
        let after_prompt = logits.next().unwrap_or_default();
        Ok(Prefill { logits: after_prompt, after_guess: logits.next(), reused: reuse })
    }

    /// Readies the cache for `prompt` and `more` positions after it: continues the cache (the
    /// current one or one kept aside) that shares the longest prefix with it, cut back to
    /// that prefix (at most all but the prompt's last token, whose logits are the answer).
    /// Returns how many of the prompt's tokens the cache holds.
    fn take_up(&mut self, prompt: &[u32], more: usize) -> Result<usize, LocalError> {
        let total = prompt.len() + more;
        if prompt.is_empty() || total > self.hp.positions {
            return Err(LocalError::ContextOverflow {
                prompt_tokens: total,
                max_tokens: 0,
                context: self.hp.positions,
            });
        }
        if let CachePlan::Saved(i) = plan(&self.cache.tokens, &self.saved.tokens(), prompt)
            && let Some(chosen) = self.saved.take(i)
        {
            let left = std::mem::replace(&mut self.cache, chosen);
            self.saved.keep(left);
        }
        let shared = shared_prefix(&self.cache.tokens, prompt);
        let reuse = shared.min(prompt.len() - 1);
        // Another kind of prompt cuts the cache back to little, or leaves out much of the
        // prompt read into it: the cache is kept aside whole, and the part shared goes on in
        // a copy.
        if self.cache.parts_from(prompt) {
            let copy = self.cache.copy_prefix(reuse)?;
            let left = std::mem::replace(&mut self.cache, copy);
            self.saved.keep(left);
        }
        self.cache.truncate(reuse);
        self.cache.prompt = prompt.len();
        self.reserve(total + kv_cache::GROWTH)?;
        Ok(reuse)
    }

    /// Reads `first` as [`prefill_guessing`](Self::prefill_guessing) does, and in the same
    /// passes those of `others` that continue the part of the cache `first` keeps: each
    /// other prompt's tokens after that part sit at their own positions and see only that
    /// part and their own prompt's tokens, and tokens several prompts share there (the
    /// customer's new message before each check's statement) are evaluated once. One pass
    /// streams the weights once, however many rows it holds; a few rows more cost far less
    /// than a pass of their own.
    ///
    /// The cache ends as `prefill_guessing` leaves it for `first`. Each other prompt read gets,
    /// by its index in `others`, what its own `prefill_guessing` would have returned (its
    /// `reused`: its tokens evaluated for an earlier prompt of the pass, or cached), but not
    /// its keys and values: an answer that needs a pass of its own reads its prompt again.
    pub(crate) fn prefill_shared(
        &mut self,
        first: Branch<'_>,
        others: &[Branch<'_>],
        on_read: &mut dyn FnMut(usize, usize),
    ) -> Result<(Prefill, Vec<(usize, Prefill)>), LocalError> {
        let reuse = self.take_up(first.prompt, first.guess.len())?;
        let mut tree = Tree::default();
        let first_ends = tree.insert(&first.prompt[reuse..], first.guess);
        let first_len = tree.len();
        let mut read = Vec::new();
        for (i, other) in others.iter().enumerate() {
            let len = other.prompt.len() + other.guess.len();
            let continues = other.prompt.len() > reuse && other.prompt[..reuse] == first.prompt[..reuse];
            if continues && len <= self.hp.positions && tree.len() + (len - reuse) <= first_len + SHARED_ROWS {
                read.push((i, tree.insert(&other.prompt[reuse..], other.guess)));
            }
        }
        let result = self.evaluate_tree(&tree, reuse, on_read);
        let logits = match result {
            Ok(logits) => logits,
            Err(e) => {
                self.forget();
                return Err(e);
            }
        };
        self.cache.truncate(reuse + first_len);
        let prefill = |ends: &Ends, reused: usize| Prefill {
            logits: logits.get(&ends.prompt).cloned().unwrap_or_default(),
            after_guess: ends.guess.and_then(|node| logits.get(&node).cloned()),
            reused,
        };
        let others_read =
            read.iter().map(|(i, ends)| (*i, prefill(ends, others[*i].prompt.len() - ends.fresh))).collect::<Vec<_>>();
        Ok((prefill(&first_ends, reuse), others_read))
    }

    /// Evaluates the tokens of `tree` after the first `reuse` positions of the cache, in
    /// chunks, and returns the logits after each token that ends a prompt or a guess in it,
    /// by node. The cache holds every node's keys and values afterwards, in node order.
    fn evaluate_tree(
        &mut self,
        tree: &Tree,
        reuse: usize,
        on_read: &mut dyn FnMut(usize, usize),
    ) -> Result<std::collections::HashMap<usize, Vec<f32>>, LocalError> {
        let groups = (self.hp.heads / self.hp.kv_heads).max(1);
        let layers = self.blocks.len().max(1);
        let mut logits = std::collections::HashMap::new();
        let chunk = chunk_len();
        let mut start = 0;
        while start < tree.len() {
            let end = (start + chunk).min(tree.len());
            let nodes = start..end;
            let tokens: Vec<u32> = nodes.clone().map(|n| tree.tokens[n]).collect();
            let positions: Vec<u32> = nodes.clone().map(|n| (reuse + tree.depths[n]) as u32).collect();
            // Each row sees the cache before the branches, then itself and the nodes it
            // descends from.
            let keys = reuse + end;
            let mut mask = vec![f32::NEG_INFINITY; nodes.len() * keys];
            for (row, n) in mask.chunks_mut(keys).zip(nodes.clone()) {
                row[..reuse].fill(0.0);
                let mut at = Some(n);
                while let Some(m) = at {
                    row[reuse + m] = 0.0;
                    at = tree.parents[m];
                }
            }
            let rows = nodes.len();
            let mask = Tensor::from_vec(mask.repeat(groups), (groups * rows, keys), &self.device)?;
            let positions = Tensor::new(positions.as_slice(), &self.device)?;
            let place = Place::Tree { positions: &positions, mask: &mask };
            let mut on_layer = |layer: usize| on_read(start + rows * layer / layers, tree.len());
            let x = self.hidden(&tokens, &place, &mut on_layer)?;
            self.cache.tokens.extend_from_slice(&tokens);
            for n in nodes.filter(|n| tree.wanted[*n]) {
                logits.insert(n, self.logits_after(&x.narrow(1, n - start, 1)?)?);
            }
            start = end;
        }
        Ok(logits)
    }

    /// How many of `prompt`'s first tokens a cache holds already (the current one or one kept
    /// aside).
    pub(crate) fn cached_prefix(&self, prompt: &[u32]) -> usize {
        std::iter::once(self.cache.tokens.as_slice())
            .chain(self.saved.tokens())
            .map(|tokens| shared_prefix(tokens, prompt))
            .max()
            .unwrap_or(0)
    }

    /// Forgets every position from `positions` on (a guess that turned out wrong).
    pub(crate) fn rewind(&mut self, positions: usize) {
        self.cache.truncate(positions);
    }

    /// Makes room in the current cache for `positions` in all.
    fn reserve(&mut self, positions: usize) -> Result<(), LocalError> {
        let positions = positions.min(self.hp.positions);
        for layer in &mut self.cache.layers {
            layer.reserve(positions, self.hp.kv_heads, self.hp.head_dim)?;
        }
        Ok(())
    }

    /// Bytes the key/value caches take: the current one and those kept aside.
    pub(crate) fn cache_bytes(&self) -> (usize, usize) {
        (self.cache.bytes(), self.saved.bytes())
    }

    /// Positions the current cache holds (the prompt and the answer evaluated so far, and
    /// any drafted tokens not yet taken back).
    pub(crate) fn evaluated(&self) -> usize {
        self.cache.tokens.len()
    }

    /// Evaluates `tokens` after everything evaluated so far, then `draft` after them in the
    /// same pass (tokens the answer may go on with), and returns the logits after the last of
    /// `tokens` and, for each drafted token, the hidden state after it: its logits, through
    /// [`logits_after`](Self::logits_after), only once the answer gets that far (the output
    /// layer is a large share of a pass, row by row). Drafted tokens the answer does not take
    /// are taken back with [`rewind`](Self::rewind).
    pub(crate) fn step_drafting(
        &mut self,
        tokens: &[u32],
        draft: &[u32],
    ) -> Result<(Vec<f32>, Vec<Tensor>), LocalError> {
        let last = tokens.len().saturating_sub(1);
        let all: Vec<u32> = tokens.iter().chain(draft).copied().collect();
        let pos = self.cache.tokens.len();
        if draft.is_empty() || all.len() > chunk_len() {
            let logits = self.evaluate(tokens, &[last], &mut |_, _| {})?.into_iter().next().unwrap_or_default();
            return Ok((logits, Vec::new()));
        }
        if pos + all.len() > self.hp.positions {
            return Err(LocalError::ContextOverflow {
                prompt_tokens: pos + all.len(),
                max_tokens: 0,
                context: self.hp.positions,
            });
        }
        let hidden = match self.hidden(&all, &Place::After(pos), &mut |_| {}) {
            Ok(x) => x,
            Err(e) => {
                self.forget();
                return Err(e);
            }
        };
        self.cache.tokens.extend_from_slice(&all);
        let after = self.logits_after(&hidden.narrow(1, last, 1)?)?;
        let drafted = (last + 1..all.len()).map(|row| hidden.narrow(1, row, 1)).collect::<Result<Vec<_>, _>>()?;
        Ok((after, drafted))
    }

    /// The logits after one position, from its hidden state (see
    /// [`step_drafting`](Self::step_drafting)).
    pub(crate) fn logits_after(&self, hidden: &Tensor) -> Result<Vec<f32>, LocalError> {
        let normed = rms_norm(hidden, &self.norm, self.hp.rms_eps)?;
        Ok(self.output.forward(&normed)?.flatten_all()?.to_dtype(DType::F32)?.to_vec1()?)
    }

    /// Evaluates `tokens` after everything evaluated so far, in chunks of
    /// [`PREFILL_CHUNK`], and returns the logits after each of the tokens at the indices
    /// `wanted` (ascending). `on_read(done, total)` follows the layers through the chunks.
    fn evaluate(
        &mut self,
        tokens: &[u32],
        wanted: &[usize],
        on_read: &mut dyn FnMut(usize, usize),
    ) -> Result<Vec<Vec<f32>>, LocalError> {
        let pos = self.cache.tokens.len();
        if tokens.is_empty() || pos + tokens.len() > self.hp.positions {
            return Err(LocalError::ContextOverflow {
                prompt_tokens: pos + tokens.len(),
                max_tokens: 0,
                context: self.hp.positions,
            });
        }
        let mut logits = Vec::with_capacity(wanted.len());
        let chunk_len = chunk_len();
        for (i, chunk) in tokens.chunks(chunk_len).enumerate() {
            let start = i * chunk_len;
            let rows: Vec<usize> =
                wanted.iter().filter(|&&w| (start..start + chunk.len()).contains(&w)).map(|w| w - start).collect();
            let layers = self.blocks.len().max(1);
            let mut on_layer = |layer: usize| on_read(start + chunk.len() * layer / layers, tokens.len());
            // On failure the cache no longer matches its tokens: start over next time.
            match self.run(chunk, self.cache.tokens.len(), &rows, &mut on_layer) {
                Ok(l) => {
                    self.cache.tokens.extend_from_slice(chunk);
                    logits.extend(l);
                }
                Err(e) => {
                    self.forget();
                    return Err(e);
                }
            }
        }
        Ok(logits)
    }

    /// Runs `tokens` at positions from `pos` and returns the logits after each of the tokens
    /// at the indices `rows` (one row at a time through the output layer, which candle
    /// multiplies by directly). `on_layer` hears how many layers are done.
    fn run(
        &mut self,
        tokens: &[u32],
        pos: usize,
        rows: &[usize],
        on_layer: &mut dyn FnMut(usize),
    ) -> Result<Vec<Vec<f32>>, LocalError> {
        let x = self.hidden(tokens, &Place::After(pos), on_layer)?;
        rows.iter().map(|&row| self.logits_after(&x.narrow(1, row, 1)?)).collect()
    }

    /// Runs `tokens` at positions from `pos` through every block and returns their hidden
    /// states. `on_layer` hears how many layers are done.
    fn hidden(
        &mut self,
        tokens: &[u32],
        place: &Place<'_>,
        on_layer: &mut dyn FnMut(usize),
    ) -> Result<Tensor, LocalError> {
        let ids = Tensor::new(tokens, &self.device)?;
        let mut x = self.embedding.embedding(&ids)?.unsqueeze(0)?;
        for (i, (block, cache)) in self.blocks.iter().zip(&mut self.cache.layers).enumerate() {
            x = block.forward(&x, place, &self.rope, &self.hp, cache)?;
            on_layer(i + 1);
        }
        Ok(x)
    }

    /// Empties the current cache (the caches kept aside are whole, and stay).
    pub(crate) fn forget(&mut self) {
        self.cache = Cache::empty(self.blocks.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tree_holds_each_shared_beginning_once_and_the_first_prompt_first() {
        let mut tree = Tree::default();
        let a = tree.insert(&[1, 2, 3], &[9]);
        let b = tree.insert(&[1, 2, 4, 5], &[]);
        let c = tree.insert(&[1, 2, 3], &[8]);
        assert_eq!(tree.tokens, vec![1, 2, 3, 9, 4, 5, 8]);
        assert_eq!(tree.parents, vec![None, Some(0), Some(1), Some(2), Some(1), Some(4), Some(2)]);
        assert_eq!(tree.depths, vec![0, 1, 2, 3, 2, 3, 3]);
        assert_eq!(a, Ends { prompt: 2, guess: Some(3), fresh: 3 });
        assert_eq!(b, Ends { prompt: 5, guess: None, fresh: 2 });
        assert_eq!(c, Ends { prompt: 2, guess: Some(6), fresh: 0 });
        assert_eq!(tree.wanted, vec![false, false, true, true, false, true, true]);
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
