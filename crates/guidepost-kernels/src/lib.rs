//! Fused CPU kernels for the local models: the softmax over each row of a tensor, the RMS norm
//! of each row and rotary position embeddings, in `f32`, one pass per row and rows spread over
//! the rayon pool. The arithmetic is that of candle-nn's kernels, operation for operation, so a
//! model decodes the same tokens as it did on them.
//!
//! They are what a transformer runs on every layer besides its matrix products. Written as
//! tensor operations they take five single-threaded passes over memory; on a 1,000-token
//! prompt the attention scores alone are 13 million values per layer. This crate is small so
//! that it can be built at full optimisation in every profile at almost no build cost.
//!
//! The kernels take `f32` tensors (made contiguous first) and report any other dtype or a shape
//! that does not fit as an error.

use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, CustomOp1, CustomOp2, CustomOp3, Error, Layout, Result, Shape, Tensor};
use rayon::prelude::*;

pub mod quant;

/// The softmax over the last dimension of `x` (any shape, `f32`). A row whose values are all
/// minus infinity (nothing to attend to) comes out as zeros instead of NaN.
pub fn softmax_last_dim(x: &Tensor) -> Result<Tensor> {
    x.contiguous()?.apply_op1_no_bwd(&Softmax)
}

/// Attention weights from raw scores: the softmax over the last dimension of `scale * x`, each
/// row seeing only the keys up to its own position. `x` holds rows of `keys` scores (any
/// leading shape, `f32`), in blocks of `queries` rows: row `i` of a block is the query at
/// position `offset + i`, and its scores for keys after that position count as minus infinity.
/// This is what scaling, adding a causal mask and a softmax compute, in one pass and without the
/// mask's memory; a query sees at least its own key, so no row is empty.
pub fn causal_softmax_last_dim(x: &Tensor, queries: usize, offset: usize, scale: f32) -> Result<Tensor> {
    x.contiguous()?.apply_op1_no_bwd(&CausalSoftmax { queries, offset, scale })
}

/// `x / sqrt(mean(x²) + eps) * weight` over the last dimension of `x` (any shape, `f32`);
/// `weight` has the size of that dimension.
pub fn rms_norm(x: &Tensor, weight: &Tensor, eps: f32) -> Result<Tensor> {
    x.contiguous()?.apply_op2_no_bwd(&weight.contiguous()?, &RmsNorm { eps })
}

/// Rotary position embeddings of `x` (`[batch, heads, len, dim]`) by the angles whose cosines
/// and sines are `cos` and `sin` (`[len, dim / 2]`). With `pairs`, dimensions `2i` and `2i + 1`
/// rotate together (GGUF's Llama layout); otherwise `i` and `i + dim / 2` do (the NeoX layout).
pub fn rope(x: &Tensor, cos: &Tensor, sin: &Tensor, pairs: bool) -> Result<Tensor> {
    x.contiguous()?.apply_op3_no_bwd(&cos.contiguous()?, &sin.contiguous()?, &Rope { pairs })
}

/// The `f32` values of a contiguous tensor and the length of its last dimension.
fn rows<'a>(op: &str, storage: &'a CpuStorage, layout: &Layout) -> Result<(&'a [f32], usize)> {
    let CpuStorage::F32(data) = storage else {
        return Err(Error::Msg(format!("{op}: expected f32 values, got {:?}", storage.dtype())));
    };
    let Some((start, end)) = layout.contiguous_offsets() else {
        return Err(Error::Msg(format!("{op}: expected a contiguous tensor")));
    };
    let width = layout.dims().last().copied().unwrap_or(1).max(1);
    let values = data
        .get(start..end)
        .ok_or_else(|| Error::Msg(format!("{op}: values {start}..{end} lie outside storage of {}", data.len())))?;
    Ok((values, width))
}

struct Softmax;

impl CustomOp1 for Softmax {
    fn name(&self) -> &'static str {
        "softmax-last-dim"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> Result<(CpuStorage, Shape)> {
        let (values, width) = rows(self.name(), storage, layout)?;
        let mut out = vec![0f32; values.len()];
        out.par_chunks_mut(width).zip(values.par_chunks(width)).for_each(|(out, row)| {
            let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            if max == f32::NEG_INFINITY {
                return;
            }
            for (o, &x) in out.iter_mut().zip(row) {
                *o = (x - max).exp();
            }
            let sum: f32 = out.iter().sum();
            out.iter_mut().for_each(|o| *o /= sum);
        });
        Ok((CpuStorage::F32(out), layout.shape().clone()))
    }
}

struct CausalSoftmax {
    queries: usize,
    offset: usize,
    scale: f32,
}

impl CustomOp1 for CausalSoftmax {
    fn name(&self) -> &'static str {
        "causal-softmax"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> Result<(CpuStorage, Shape)> {
        let (values, width) = rows(self.name(), storage, layout)?;
        let (queries, offset, scale) = (self.queries.max(1), self.offset, self.scale);
        if offset + queries > width {
            return Err(Error::Msg(format!(
                "causal-softmax: queries at positions {offset}..{} for {width} keys",
                offset + queries
            )));
        }
        let mut out = vec![0f32; values.len()];
        out.par_chunks_mut(width).zip(values.par_chunks(width)).enumerate().for_each(|(r, (out, row))| {
            let seen = offset + r % queries + 1;
            let (out, row) = (&mut out[..seen], &row[..seen]);
            let max = row.iter().map(|x| x * scale).fold(f32::NEG_INFINITY, f32::max);
            if max == f32::NEG_INFINITY {
                return;
            }
            for (o, &x) in out.iter_mut().zip(row) {
                *o = (x * scale - max).exp();
            }
            let sum: f32 = out.iter().sum();
            out.iter_mut().for_each(|o| *o /= sum);
        });
        Ok((CpuStorage::F32(out), layout.shape().clone()))
    }
}

struct RmsNorm {
    eps: f32,
}

impl CustomOp2 for RmsNorm {
    fn name(&self) -> &'static str {
        "rms-norm"
    }

    fn cpu_fwd(&self, s1: &CpuStorage, l1: &Layout, s2: &CpuStorage, l2: &Layout) -> Result<(CpuStorage, Shape)> {
        let (values, width) = rows(self.name(), s1, l1)?;
        let (weight, _) = rows(self.name(), s2, l2)?;
        if weight.len() != width {
            return Err(Error::Msg(format!("rms-norm: {} weights for rows of {width}", weight.len())));
        }
        let mut out = vec![0f32; values.len()];
        out.par_chunks_mut(width).zip(values.par_chunks(width)).for_each(|(out, row)| {
            let root_mean_square = (row.iter().map(|x| x * x).sum::<f32>() / width as f32 + self.eps).sqrt();
            for ((o, &x), &w) in out.iter_mut().zip(row).zip(weight) {
                *o = x / root_mean_square * w;
            }
        });
        Ok((CpuStorage::F32(out), l1.shape().clone()))
    }
}

struct Rope {
    pairs: bool,
}

impl CustomOp3 for Rope {
    fn name(&self) -> &'static str {
        "rope"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
        s3: &CpuStorage,
        l3: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let (values, width) = rows(self.name(), s1, l1)?;
        let (cos, half) = rows(self.name(), s2, l2)?;
        let (sin, _) = rows(self.name(), s3, l3)?;
        let len = match l1.dims() {
            [_, _, len, _] => *len,
            dims => return Err(Error::Msg(format!("rope: expected [batch, heads, len, dim], got {dims:?}"))),
        };
        if width != 2 * half || cos.len() != len * half || sin.len() != cos.len() {
            return Err(Error::Msg(format!(
                "rope: {} angles and {} sines for {len} positions of {width} dimensions",
                cos.len(),
                sin.len()
            )));
        }
        let mut out = vec![0f32; values.len()];
        let pairs = self.pairs;
        out.par_chunks_mut(len * width).zip(values.par_chunks(len * width)).for_each(|(out, head)| {
            let positions = out.chunks_mut(width).zip(head.chunks(width)).zip(cos.chunks(half).zip(sin.chunks(half)));
            for ((out, row), (cos, sin)) in positions {
                if pairs {
                    let pairs = out.chunks_exact_mut(2).zip(row.chunks_exact(2)).zip(cos.iter().zip(sin));
                    for ((out, pair), (&c, &s)) in pairs {
                        if let ([o0, o1], &[a, b]) = (out, pair) {
                            *o0 = a * c - b * s;
                            *o1 = a * s + b * c;
                        }
                    }
                } else {
                    let (out_first, out_second) = out.split_at_mut(half);
                    let (first, second) = row.split_at(half);
                    let halves = out_first.iter_mut().zip(out_second).zip(first.iter().zip(second));
                    for (((o0, o1), (&a, &b)), (&c, &s)) in halves.zip(cos.iter().zip(sin)) {
                        *o0 = a * c - b * s;
                        *o1 = a * s + b * c;
                    }
                }
            }
        });
        Ok((CpuStorage::F32(out), l1.shape().clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{D, Device};

    fn values(t: &Tensor) -> Vec<f32> {
        t.flatten_all().and_then(|t| t.to_vec1::<f32>()).unwrap_or_default()
    }

    fn max_difference(a: &Tensor, b: &Tensor) -> f32 {
        values(a).iter().zip(values(b)).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
    }

    #[test]
    fn softmax_matches_the_definition_on_random_scores() -> Result<()> {
        let x = Tensor::randn(0f32, 4.0, (3, 5, 37), &Device::Cpu)?;
        let exp = x.exp()?;
        let expected = exp.broadcast_div(&exp.sum_keepdim(D::Minus1)?)?;
        assert!(max_difference(&softmax_last_dim(&x)?, &expected) < 1e-6);
        Ok(())
    }

    #[test]
    fn softmax_keeps_large_scores_finite_and_masked_rows_empty() -> Result<()> {
        let x = Tensor::new(&[[1000f32, 1000.0, f32::NEG_INFINITY], [f32::NEG_INFINITY; 3]], &Device::Cpu)?;
        assert_eq!(values(&softmax_last_dim(&x)?), vec![0.5, 0.5, 0.0, 0.0, 0.0, 0.0]);
        Ok(())
    }

    #[test]
    fn softmax_reads_a_transposed_tensor_by_its_logical_rows() -> Result<()> {
        let x = Tensor::new(&[[0f32, 1.0], [0.0, 1.0]], &Device::Cpu)?.t()?;
        assert_eq!(values(&softmax_last_dim(&x)?), vec![0.5, 0.5, 0.5, 0.5]);
        Ok(())
    }

    #[test]
    fn causal_softmax_is_a_scaled_masked_softmax() -> Result<()> {
        // Two blocks (heads) of three queries at positions 2, 3, 4 over five keys.
        let x = Tensor::randn(0f32, 3.0, (2, 3, 5), &Device::Cpu)?;
        let mask: Vec<f32> =
            (0..3).flat_map(|i| (0..5).map(move |j| if j > 2 + i { f32::NEG_INFINITY } else { 0.0 })).collect();
        let mask = Tensor::from_vec(mask, (3, 5), &Device::Cpu)?;
        let expected = softmax_last_dim(&(x.clone() * 0.5)?.broadcast_add(&mask)?)?;
        let got = causal_softmax_last_dim(&x, 3, 2, 0.5)?;
        assert!(max_difference(&got, &expected) < 1e-6);
        assert_eq!(values(&got)[3..5], [0.0, 0.0], "the first query sees keys 0 to 2");
        let err = causal_softmax_last_dim(&x, 3, 3, 0.5).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("positions 3..6 for 5 keys"), "{err}");
        Ok(())
    }

    #[test]
    fn rms_norm_matches_the_definition_on_random_rows() -> Result<()> {
        let x = Tensor::randn(0f32, 2.0, (2, 7, 64), &Device::Cpu)?;
        let weight = Tensor::randn(0f32, 1.0, 64, &Device::Cpu)?;
        let scale = (x.sqr()?.mean_keepdim(D::Minus1)? + 1e-6)?.sqrt()?.recip()?;
        let expected = x.broadcast_mul(&scale)?.broadcast_mul(&weight)?;
        assert!(max_difference(&rms_norm(&x, &weight, 1e-6)?, &expected) < 1e-5);
        Ok(())
    }

    /// One head of four dimensions at one position, rotated by angles 0.5 and 0.25.
    fn rotation(pairs: bool) -> Result<Vec<f32>> {
        let x = Tensor::new(&[1f32, 2.0, 3.0, 4.0], &Device::Cpu)?.reshape((1, 1, 1, 4))?;
        let angles = Tensor::new(&[[0.5f32, 0.25]], &Device::Cpu)?;
        Ok(values(&rope(&x, &angles.cos()?, &angles.sin()?, pairs)?))
    }

    fn close(a: &[f32], b: &[f32]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-6)
    }

    #[test]
    fn rope_in_halves_rotates_dimension_i_with_i_plus_half() -> Result<()> {
        let (c0, s0, c1, s1) = (0.5f32.cos(), 0.5f32.sin(), 0.25f32.cos(), 0.25f32.sin());
        let expected = [1.0 * c0 - 3.0 * s0, 2.0 * c1 - 4.0 * s1, 1.0 * s0 + 3.0 * c0, 2.0 * s1 + 4.0 * c1];
        assert!(close(&rotation(false)?, &expected), "{:?}", rotation(false)?);
        Ok(())
    }

    #[test]
    fn rope_in_pairs_rotates_neighbouring_dimensions() -> Result<()> {
        let (c0, s0, c1, s1) = (0.5f32.cos(), 0.5f32.sin(), 0.25f32.cos(), 0.25f32.sin());
        let expected = [1.0 * c0 - 2.0 * s0, 1.0 * s0 + 2.0 * c0, 3.0 * c1 - 4.0 * s1, 3.0 * s1 + 4.0 * c1];
        assert!(close(&rotation(true)?, &expected), "{:?}", rotation(true)?);
        Ok(())
    }

    #[test]
    fn rope_rotates_every_head_and_position_by_its_own_angles() -> Result<()> {
        let x = Tensor::randn(0f32, 1.0, (2, 3, 5, 8), &Device::Cpu)?;
        let angles = Tensor::randn(0f32, 2.0, (5, 4), &Device::Cpu)?;
        let (cos, sin) = (angles.cos()?, angles.sin()?);
        let first = x.narrow(D::Minus1, 0, 4)?;
        let second = x.narrow(D::Minus1, 4, 4)?;
        let expected = Tensor::cat(
            &[
                &(first.broadcast_mul(&cos)? - second.broadcast_mul(&sin)?)?,
                &(first.broadcast_mul(&sin)? + second.broadcast_mul(&cos)?)?,
            ],
            D::Minus1,
        )?;
        assert!(max_difference(&rope(&x, &cos, &sin, false)?, &expected) < 1e-6);
        let err = rope(&x, &cos.narrow(0, 0, 4)?, &sin, false).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("for 5 positions of 8 dimensions"), "{err}");
        Ok(())
    }

    #[test]
    fn wrong_inputs_are_errors_that_say_what_is_wrong() -> Result<()> {
        let x = Tensor::new(&[[1f64, 2.0]], &Device::Cpu)?;
        let err = softmax_last_dim(&x).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("expected f32"), "{err}");
        let x = Tensor::new(&[[1f32, 2.0]], &Device::Cpu)?;
        let weight = Tensor::new(&[1f32, 2.0, 3.0], &Device::Cpu)?;
        let err = rms_norm(&x, &weight, 1e-6).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("3 weights for rows of 2"), "{err}");
        Ok(())
    }
}
