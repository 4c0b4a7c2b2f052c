//! The key/value cache: what each block keeps of the positions evaluated so far, and the
//! caches of other kinds of prompt kept aside.
//!
//! A block's keys and values live in buffers that grow in steps of [`GROWTH`] positions and
//! are written in place, position after position (`[capacity, kv_heads, head_dim]`, so the
//! first positions are one contiguous run). Attention reads them through views, without a
//! copy; a generated token writes one row instead of copying the whole cache, as joining
//! tensors did.
//!
//! A turn moves between kinds of prompt (the guideline checks, the tool decision, the reply),
//! and the next turn starts over with the checks. So the cache of a kind of prompt the
//! decoder leaves is kept aside ([`SAVED_PREFIXES`] of them, the most recently left last), and
//! a prompt that shares more with one of them than with the current cache continues from it.

use candle_core::{DType, Device, Tensor};

use crate::error::LocalError;

/// Buffers grow by whole multiples of this many positions.
pub(crate) const GROWTH: usize = 256;

/// How many caches of prompts the decoder moved away from it keeps aside, besides the
/// current one. Each holds its keys and values (about 57 KB per token for Qwen2.5-1.5B). A
/// turn on an agent with a journey and tools moves between four kinds of prompt (the checks,
/// the exits compared side by side, the tool decision, the reply), and the caches of a
/// conversation that ended stay until newer ones push them out; with three kept aside, the
/// weather agent's reply cache was the one pushed out and the reply read its whole prompt
/// again (399 new tokens instead of 217).
pub(crate) const SAVED_PREFIXES: usize = 4;

/// One block's keys and values.
pub(crate) struct LayerCache {
    /// `[capacity, kv_heads, head_dim]` each; `None` until the first position.
    buffers: Option<(Tensor, Tensor)>,
    /// Positions held.
    len: usize,
}

impl LayerCache {
    /// An empty cache.
    pub(crate) fn new() -> Self {
        Self { buffers: None, len: 0 }
    }

    /// Bytes the buffers take.
    pub(crate) fn bytes(&self) -> usize {
        self.buffers.as_ref().map_or(0, |(k, v)| (k.elem_count() + v.elem_count()) * k.dtype().size_in_bytes())
    }

    /// Keeps the first `positions` entries (the buffers stay, to be written over).
    pub(crate) fn truncate(&mut self, positions: usize) {
        self.len = self.len.min(positions);
    }

    /// Makes room for `positions` in all without growing again.
    pub(crate) fn reserve(&mut self, positions: usize, kv_heads: usize, head_dim: usize) -> Result<(), LocalError> {
        let capacity = self.buffers.as_ref().map_or(0, |(k, _)| k.dims()[0]);
        if positions <= capacity {
            return Ok(());
        }
        let capacity = positions.div_ceil(GROWTH) * GROWTH;
        let device = Device::Cpu;
        let keys = Tensor::zeros((capacity, kv_heads, head_dim), DType::F32, &device)?;
        let values = Tensor::zeros((capacity, kv_heads, head_dim), DType::F32, &device)?;
        if let Some((k, v)) = &self.buffers
            && self.len > 0
        {
            keys.slice_set(&k.narrow(0, 0, self.len)?, 0, 0)?;
            values.slice_set(&v.narrow(0, 0, self.len)?, 0, 0)?;
        }
        self.buffers = Some((keys, values));
        Ok(())
    }

    /// Appends the keys and values of new positions (`[1, kv_heads, len, head_dim]`) and
    /// returns views of every position held, `[1, kv_heads, positions, head_dim]`.
    pub(crate) fn append(&mut self, k: &Tensor, v: &Tensor) -> Result<(Tensor, Tensor), LocalError> {
        let (_, kv_heads, len, head_dim) = k.dims4()?;
        self.reserve(self.len + len, kv_heads, head_dim)?;
        let Some((keys, values)) = &self.buffers else {
            return Err(LocalError::Gguf("the key/value cache has no buffers after reserving room".into()));
        };
        let rows = |t: &Tensor| -> Result<Tensor, LocalError> { Ok(t.squeeze(0)?.transpose(0, 1)?.contiguous()?) };
        keys.slice_set(&rows(k)?, 0, self.len)?;
        values.slice_set(&rows(v)?, 0, self.len)?;
        self.len += len;
        let view =
            |t: &Tensor| -> Result<Tensor, LocalError> { Ok(t.narrow(0, 0, self.len)?.transpose(0, 1)?.unsqueeze(0)?) };
        Ok((view(keys)?, view(values)?))
    }

    /// The first `positions` entries, in buffers of their own.
    pub(crate) fn copy_prefix(&self, positions: usize) -> Result<Self, LocalError> {
        let positions = positions.min(self.len);
        let mut copy = Self::new();
        if let (Some((k, v)), true) = (&self.buffers, positions > 0) {
            let (_, kv_heads, head_dim) = k.dims3()?;
            copy.reserve(positions, kv_heads, head_dim)?;
            if let Some((keys, values)) = &copy.buffers {
                keys.slice_set(&k.narrow(0, 0, positions)?, 0, 0)?;
                values.slice_set(&v.narrow(0, 0, positions)?, 0, 0)?;
            }
            copy.len = positions;
        }
        Ok(copy)
    }
}

/// A cache: the tokens it holds and each block's keys and values for them.
pub(crate) struct Cache {
    pub(crate) tokens: Vec<u32>,
    pub(crate) layers: Vec<LayerCache>,
    /// How many of the first tokens were the prompt last read into it (the rest are its
    /// answer and the tokens drafted after it).
    pub(crate) prompt: usize,
}

impl Cache {
    /// An empty cache for `layers` blocks.
    pub(crate) fn empty(layers: usize) -> Self {
        Self { tokens: Vec::new(), layers: (0..layers).map(|_| LayerCache::new()).collect(), prompt: 0 }
    }

    /// Keeps the first `positions` tokens.
    pub(crate) fn truncate(&mut self, positions: usize) {
        self.tokens.truncate(positions);
        self.prompt = self.prompt.min(positions);
        self.layers.iter_mut().for_each(|l| l.truncate(positions));
    }

    /// Whether `prompt` is another kind of prompt than the one this cache holds (see
    /// [`another_kind`]).
    pub(crate) fn parts_from(&self, prompt: &[u32]) -> bool {
        let held_prompt = self.prompt.min(self.tokens.len());
        another_kind(shared_prefix(&self.tokens, prompt), held_prompt, self.tokens.len())
    }

    /// The first `positions` tokens, in buffers of their own.
    pub(crate) fn copy_prefix(&self, positions: usize) -> Result<Self, LocalError> {
        let positions = positions.min(self.tokens.len());
        Ok(Self {
            tokens: self.tokens[..positions].to_vec(),
            layers: self.layers.iter().map(|l| l.copy_prefix(positions)).collect::<Result<_, _>>()?,
            prompt: self.prompt.min(positions),
        })
    }

    /// Bytes the buffers take.
    pub(crate) fn bytes(&self) -> usize {
        self.layers.iter().map(LayerCache::bytes).sum()
    }
}

/// How many leading tokens `a` and `b` share.
pub(crate) fn shared_prefix(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// Most tokens of the prompt a cache was last read from that another prompt may leave out for
/// the two to count as the same kind of prompt. The checks of one turn differ in their
/// statement, a few dozen tokens (the answer after it does not count); a prompt
/// that asks something else about the same conversation (the exits compared side by side after
/// the checks) parts from it where its instructions differ, and cutting the checks' cache back
/// there made the check after it read the whole conversation again (195 new tokens where 14
/// were needed, measured on the weather agent's "那北京呢？").
pub(crate) const SAME_KIND_CUT: usize = 64;

/// Whether a prompt sharing `shared` tokens with a cache of `held` tokens, the first
/// `held_prompt` of them the prompt last read into it, is another kind of prompt: it keeps
/// less than half of the cache, or leaves out more than [`SAME_KIND_CUT`] tokens of that
/// prompt. Within a kind (the checks of one turn, which differ only in their statement) the
/// cache is simply cut back; across kinds the one left is worth keeping aside.
pub(crate) fn another_kind(shared: usize, held_prompt: usize, held: usize) -> bool {
    shared * 2 < held || held_prompt.saturating_sub(shared) > SAME_KIND_CUT
}

/// What the decoder does with the caches before evaluating a prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CachePlan {
    /// Continue from the current cache.
    Current,
    /// Continue from the saved cache at this index, which shares more with the prompt.
    Saved(usize),
}

/// Chooses the cache to continue from: a saved one only when it shares more with the
/// prompt than the current one does.
pub(crate) fn plan(current: &[u32], saved: &[&[u32]], prompt: &[u32]) -> CachePlan {
    let here = shared_prefix(current, prompt);
    let best = saved.iter().enumerate().map(|(i, tokens)| (i, shared_prefix(tokens, prompt))).max_by_key(|(_, n)| *n);
    match best {
        Some((i, n)) if n > here => CachePlan::Saved(i),
        _ => CachePlan::Current,
    }
}

/// The caches kept aside, the most recently left last.
#[derive(Default)]
pub(crate) struct SavedCaches(Vec<Cache>);

impl SavedCaches {
    /// The tokens of each, in order.
    pub(crate) fn tokens(&self) -> Vec<&[u32]> {
        self.0.iter().map(|c| c.tokens.as_slice()).collect()
    }

    /// Takes out the cache at `index`.
    pub(crate) fn take(&mut self, index: usize) -> Option<Cache> {
        (index < self.0.len()).then(|| self.0.remove(index))
    }

    /// Keeps `cache` aside as the most recently left, in place of a saved one of the same
    /// kind, dropping the least recently left beyond [`SAVED_PREFIXES`].
    pub(crate) fn keep(&mut self, cache: Cache) {
        if cache.tokens.is_empty() {
            return;
        }
        self.0.retain(|c| c.parts_from(&cache.tokens));
        self.0.push(cache);
        if self.0.len() > SAVED_PREFIXES {
            self.0.remove(0);
        }
    }

    /// Bytes the caches take.
    pub(crate) fn bytes(&self) -> usize {
        self.0.iter().map(Cache::bytes).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(!another_kind(5, 6, 6));
        assert!(another_kind(1, 6, 6));
        // A prompt that keeps most of a long cache but parts from it well before the end of
        // the prompt read into it (the exits compared after the checks, sharing the
        // instructions' head only) is another kind: the checks' cache is kept aside for the
        // check that follows. A long answer after the prompt does not count.
        assert!(!another_kind(344, 354, 360));
        assert!(another_kind(301, 418, 421));
        assert!(!another_kind(571, 626, 700));
    }

    fn positions(from: usize, len: usize) -> Result<Tensor, LocalError> {
        // [1, kv_heads 2, len, head_dim 3], each value naming its position.
        let t = Tensor::arange(from as f32, (from + len) as f32, &Device::Cpu)?.reshape((1, 1, len, 1))?;
        Ok(t.broadcast_as((1, 2, len, 3))?.contiguous()?)
    }

    fn firsts(t: &Tensor) -> Result<Vec<f32>, LocalError> {
        Ok(t.narrow(1, 0, 1)?.narrow(3, 0, 1)?.flatten_all()?.to_vec1::<f32>()?)
    }

    #[test]
    fn appended_positions_read_back_in_order_across_growth() -> Result<(), LocalError> {
        let mut cache = LayerCache::new();
        let (k, v) = cache.append(&positions(0, 3)?, &positions(0, 3)?)?;
        assert_eq!(k.dims(), &[1, 2, 3, 3]);
        assert_eq!(firsts(&v)?, vec![0.0, 1.0, 2.0]);
        let before = cache.bytes();
        // Past the first buffer: it grows and keeps what it held.
        let (k, _) = cache.append(&positions(3, GROWTH)?, &positions(3, GROWTH)?)?;
        assert!(cache.bytes() > before);
        assert_eq!(firsts(&k)?, (0..GROWTH + 3).map(|p| p as f32).collect::<Vec<_>>());
        // Cut back and written over.
        cache.truncate(2);
        let (k, _) = cache.append(&positions(50, 1)?, &positions(50, 1)?)?;
        assert_eq!(firsts(&k)?, vec![0.0, 1.0, 50.0]);
        // A copy has buffers of its own.
        let copy = cache.copy_prefix(2)?;
        cache.truncate(0);
        cache.append(&positions(70, 2)?, &positions(70, 2)?)?;
        let mut copy = copy;
        let (k, _) = copy.append(&positions(9, 1)?, &positions(9, 1)?)?;
        assert_eq!(firsts(&k)?, vec![0.0, 1.0, 9.0]);
        Ok(())
    }

    #[test]
    fn caches_of_the_same_kind_replace_each_other_and_the_oldest_goes() {
        let mut saved = SavedCaches::default();
        let cache = |tokens: &[u32]| Cache { tokens: tokens.to_vec(), layers: Vec::new(), prompt: tokens.len() };
        saved.keep(cache(&[1, 2, 3, 4]));
        saved.keep(cache(&[1, 2, 3, 5]));
        assert_eq!(saved.tokens(), vec![&[1, 2, 3, 5][..]], "the same kind, kept once");
        for first in 10..11 + SAVED_PREFIXES as u32 {
            saved.keep(cache(&[first, 0, 0]));
        }
        assert_eq!(saved.tokens().len(), SAVED_PREFIXES);
        assert_eq!(saved.tokens()[0], &[11, 0, 0][..]);
        assert!(saved.take(7).is_none());
        // A prompt that parts from a cache long before the end of the prompt read into it is
        // another kind: both are kept. One that leaves out only its statement replaces it.
        let mut saved = SavedCaches::default();
        let checks: Vec<u32> = (0..400).collect();
        let compared: Vec<u32> = (0..300).chain(1000..1150).collect();
        saved.keep(cache(&checks));
        saved.keep(cache(&compared));
        assert_eq!(saved.tokens().len(), 2);
        let next_check: Vec<u32> = (0..390).chain(2000..2020).collect();
        saved.keep(cache(&next_check));
        assert_eq!(saved.tokens(), vec![&compared[..], &next_check[..]]);
    }
}
