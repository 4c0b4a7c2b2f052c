//! The few neural-network layers the local models need, written over `candle_core` tensor
//! operations: normalisations, softmax, rotary positions, dense and embedding layers, and the
//! named weights of a safetensors file.
//!
//! Every function works in `f32` on tensors of any leading shape and normalises over the last
//! dimension. Matrix products stay in `candle_core`; softmax and RMS norm, which run on every
//! layer over every position, are fused kernels from `guidepost_kernels`; the rest is a few
//! element-wise tensor operations per call.

use std::collections::HashMap;
use std::sync::Arc;

use candle_core::{D, DType, Device, Module, Tensor};

use crate::error::LocalError;

/// `x / sqrt(mean(x²) + eps) * weight` over the last dimension (a fused kernel).
pub(crate) fn rms_norm(x: &Tensor, weight: &Tensor, eps: f64) -> Result<Tensor, LocalError> {
    Ok(guidepost_kernels::rms_norm(x, weight, eps as f32)?)
}

/// The softmax over the last dimension (a fused kernel); minus infinity masks a position.
pub(crate) fn softmax_last_dim(x: &Tensor) -> Result<Tensor, LocalError> {
    Ok(guidepost_kernels::softmax_last_dim(x)?)
}

/// Attention weights from raw scores (a fused kernel): the softmax of `scale * scores`, each of
/// the `queries` rows of a block (at positions from `offset`) seeing keys up to its own
/// position only.
pub(crate) fn causal_softmax(scores: &Tensor, queries: usize, offset: usize, scale: f32) -> Result<Tensor, LocalError> {
    Ok(guidepost_kernels::causal_softmax_last_dim(scores, queries, offset, scale)?)
}

/// Rotary positions (a fused kernel): `x`: `[batch, heads, len, dim]`; `cos`, `sin`:
/// `[len, dim / 2]`. With `pairs`, dimensions `2i` and `2i + 1` rotate together (GGUF's Llama
/// layout); otherwise `i` and `i + dim / 2` do (the NeoX layout of Qwen).
pub(crate) fn rope(x: &Tensor, cos: &Tensor, sin: &Tensor, pairs: bool) -> Result<Tensor, LocalError> {
    Ok(guidepost_kernels::rope(x, cos, sin, pairs)?)
}

/// `x · weightᵀ + bias` for `x` of shape `[..., in]` and `weight` of shape `[out, in]`.
#[derive(Debug, Clone)]
pub(crate) struct Linear {
    weight: Tensor,
    bias: Option<Tensor>,
}

impl Linear {
    /// The layer stored under `weights` as `weight` (`[out, in]`) and `bias` (`[out]`).
    pub(crate) fn load(inputs: usize, outputs: usize, weights: &Weights) -> Result<Self, LocalError> {
        Ok(Self { weight: weights.get(&[outputs, inputs], "weight")?, bias: Some(weights.get(&[outputs], "bias")?) })
    }
}

impl Module for Linear {
    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let weight = match x.dims() {
            [batch, _, _] => self.weight.broadcast_left(*batch)?.t()?,
            [outer, inner, _, _] => self.weight.broadcast_left((*outer, *inner))?.t()?,
            _ => self.weight.t()?,
        };
        let y = x.matmul(&weight)?;
        match &self.bias {
            Some(bias) => y.broadcast_add(bias),
            None => Ok(y),
        }
    }
}

/// `(x - mean) / sqrt(variance + eps) * weight + bias` over the last dimension.
#[derive(Debug, Clone)]
pub(crate) struct LayerNorm {
    weight: Tensor,
    bias: Tensor,
    eps: f64,
}

impl LayerNorm {
    /// A layer norm saved as `weight`/`bias` or, in older checkpoints, `gamma`/`beta`.
    pub(crate) fn load(size: usize, eps: f64, weights: &Weights) -> Result<Self, LocalError> {
        let (weight, bias) = if weights.contains("weight") {
            (weights.get(&[size], "weight")?, weights.get(&[size], "bias")?)
        } else {
            (weights.get(&[size], "gamma")?, weights.get(&[size], "beta")?)
        };
        Ok(Self { weight, bias, eps })
    }
}

impl Module for LayerNorm {
    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let centred = x.broadcast_sub(&x.mean_keepdim(D::Minus1)?)?;
        let variance = centred.sqr()?.mean_keepdim(D::Minus1)?;
        let normed = centred.broadcast_div(&(variance + self.eps)?.sqrt()?)?;
        normed.broadcast_mul(&self.weight)?.broadcast_add(&self.bias)
    }
}

/// A lookup table: ids of any shape become vectors of `[..., size]`.
#[derive(Debug, Clone)]
pub(crate) struct Embedding {
    table: Tensor,
}

impl Embedding {
    /// The table stored under `weights` as `weight` (`[count, size]`).
    pub(crate) fn load(count: usize, size: usize, weights: &Weights) -> Result<Self, LocalError> {
        Ok(Self { table: weights.get(&[count, size], "weight")? })
    }
}

impl Module for Embedding {
    fn forward(&self, ids: &Tensor) -> candle_core::Result<Tensor> {
        let mut shape = ids.dims().to_vec();
        shape.push(self.table.dim(1)?);
        self.table.index_select(&ids.flatten_all()?, 0)?.reshape(shape)
    }
}

/// The tensors of a safetensors file, in `f32`, seen from a prefix (`encoder.layer.0.`).
#[derive(Debug, Clone)]
pub(crate) struct Weights {
    tensors: Arc<HashMap<String, Tensor>>,
    prefix: String,
}

impl Weights {
    /// Reads every tensor of a safetensors file held in memory.
    pub(crate) fn from_safetensors(bytes: &[u8], device: &Device) -> Result<Self, LocalError> {
        let tensors = candle_core::safetensors::load_buffer(bytes, device)?;
        Ok(Self { tensors: Arc::new(tensors), prefix: String::new() })
    }

    /// The same tensors, one level further down (`pp("attention")`).
    pub(crate) fn pp(&self, name: impl AsRef<str>) -> Self {
        Self { tensors: Arc::clone(&self.tensors), prefix: format!("{}{}.", self.prefix, name.as_ref()) }
    }

    /// Whether a tensor of that name exists under the prefix.
    pub(crate) fn contains(&self, name: &str) -> bool {
        self.tensors.contains_key(&format!("{}{name}", self.prefix))
    }

    /// The tensor `name` under the prefix, checked to have `shape`, in `f32`.
    pub(crate) fn get(&self, shape: &[usize], name: &str) -> Result<Tensor, LocalError> {
        let full = format!("{}{name}", self.prefix);
        let tensor = self.tensors.get(&full).ok_or_else(|| LocalError::Weights(format!("no tensor `{full}`")))?;
        if tensor.dims() != shape {
            return Err(LocalError::Weights(format!(
                "tensor `{full}` has shape {:?}, expected {shape:?}",
                tensor.dims()
            )));
        }
        Ok(tensor.to_dtype(DType::F32)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(t: &Tensor) -> Vec<f32> {
        t.flatten_all().and_then(|t| t.to_vec1::<f32>()).unwrap_or_default()
    }

    fn close(a: &[f32], b: &[f32]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-5)
    }

    #[test]
    fn rms_norm_scales_each_row_to_unit_root_mean_square() -> Result<(), LocalError> {
        let x = Tensor::new(&[[3f32, 4.0], [1.0, -1.0]], &Device::Cpu)?;
        let weight = Tensor::new(&[1f32, 2.0], &Device::Cpu)?;
        let y = rms_norm(&x, &weight, 0.0)?;
        let r = (12.5f32).sqrt();
        assert!(close(&values(&y), &[3.0 / r, 8.0 / r, 1.0, -2.0]), "{:?}", values(&y));
        Ok(())
    }

    #[test]
    fn softmax_sums_to_one_and_ignores_masked_scores() -> Result<(), LocalError> {
        let x = Tensor::new(&[[1000f32, 1000.0, f32::NEG_INFINITY], [0.0, 2f32.ln(), 0.0]], &Device::Cpu)?;
        let y = softmax_last_dim(&x)?;
        assert!(close(&values(&y), &[0.5, 0.5, 0.0, 0.25, 0.5, 0.25]), "{:?}", values(&y));
        Ok(())
    }

    #[test]
    fn dense_layers_and_norms_compute_what_they_say() -> Result<(), LocalError> {
        let device = Device::Cpu;
        let mut tensors = HashMap::new();
        tensors.insert("dense.weight".to_string(), Tensor::new(&[[1f32, 0.0], [1.0, 1.0], [0.0, 2.0]], &device)?);
        tensors.insert("dense.bias".to_string(), Tensor::new(&[0f32, 0.5, -1.0], &device)?);
        tensors.insert("norm.gamma".to_string(), Tensor::new(&[1f32, 1.0], &device)?);
        tensors.insert("norm.beta".to_string(), Tensor::new(&[0f32, 1.0], &device)?);
        tensors.insert("words.weight".to_string(), Tensor::new(&[[0f32, 0.0], [1.0, 2.0]], &device)?);
        let weights = Weights { tensors: Arc::new(tensors), prefix: String::new() };

        let x = Tensor::new(&[[[1f32, 2.0]]], &device)?;
        let dense = Linear::load(2, 3, &weights.pp("dense"))?;
        assert_eq!(values(&dense.forward(&x)?), vec![1.0, 3.5, 3.0]);

        let norm = LayerNorm::load(2, 0.0, &weights.pp("norm"))?;
        assert!(close(&values(&norm.forward(&x)?), &[-1.0, 2.0]));

        let words = Embedding::load(2, 2, &weights.pp("words"))?;
        let looked_up = words.forward(&Tensor::new(&[[1u32, 0]], &device)?)?;
        assert_eq!((looked_up.dims(), values(&looked_up)), (&[1, 2, 2][..], vec![1.0, 2.0, 0.0, 0.0]));

        let wrong = Linear::load(3, 3, &weights.pp("dense")).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(wrong.contains("dense.weight") && wrong.contains("[3, 2]"), "{wrong}");
        let missing = Embedding::load(2, 2, &weights.pp("nowhere")).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(missing.contains("no tensor `nowhere.weight`"), "{missing}");
        Ok(())
    }
}
