//! Quantized matrix weights that candle may keep twice, and how Guidepost keeps them once.
//!
//! Where the CPU runs Guidepost's own tiles (AVX-512 VNNI and BF16), the transformer blocks'
//! Q4_K and Q6_K weights are packed into them at load ([`pack`], [`BlockWeight::Packed`]) and
//! candle never sees them; what follows is about the weights candle multiplies.
//!
//! On x86 CPUs with AVX2 or AVX-512, candle's quantized matrix product repacks a weight's
//! blocks into tiles of its own the first time the weight is used, keeps the tiles beside the
//! blocks, and from then on reads only the tiles (for Q4_K and, on AVX-512 VNNI, Q8_0 at
//! every batch size; Q6_K only for more than one row at a time). Qwen2.5-1.5B in Q4_K_M kept
//! about 1.1 GB of tiles beside its 1.1 GB of blocks after its first answer.
//!
//! [`StoredBlocks`] holds a weight's blocks for candle and counts how often candle reads
//! them directly. After a warm-up that runs every weight both one row and many rows at a time
//! ([`Decoder::load`](crate::decoder::Decoder::load)), the blocks of the weights candle never
//! read directly are released ([`BlockHandle::release`]): only the tiles stay. A weight that
//! is read directly (Q6_K one row at a time, or every weight on a CPU without the tiled
//! kernels) keeps its blocks. Should candle ever ask for released blocks, the product fails
//! with an error that says so instead of reading freed memory.
//!
//! A block's Q6_K weights are multiplied one row at a time too, when an answer is written
//! token by token, and candle reads the blocks for that (its tiles of 10 bits a value cost
//! more memory traffic than the 6.56-bit blocks when no second row shares them). Keeping the
//! blocks for that alone holds those weights twice: 163 MB of blocks beside 248 MB of tiles
//! for Qwen2.5-1.5B in Q4_K_M (half the layers' `ffn_down` and `attn_v`). [`BlockWeight`]
//! multiplies such a weight by one row as by two (the row twice, the first result kept), so
//! candle reads its tiles every time and the blocks are released with the others. A row then
//! comes out exactly as it would in a prompt, through the same kernel, so a token is evaluated
//! the same way whether it is generated or read.

use std::borrow::Cow;
use std::io::{Read, Seek, SeekFrom};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use candle_core::quantized::gguf_file::Content;
use candle_core::quantized::{GgmlDType, QMatMul, QStorage, QTensor, QuantizedType};
use candle_core::{CpuStorage, Device, Module, Tensor};
use guidepost_kernels::quant::{PackedWeight, QuantFormat};
use half::f16;

use crate::error::LocalError;

/// The blocks of one weight, shared between candle's tensor and the decoder's handle.
struct Shared {
    dtype: GgmlDType,
    blocks: RwLock<Option<Box<dyn QuantizedType>>>,
    /// Products candle computed from the blocks themselves (not from its tiles).
    direct_reads: AtomicUsize,
}

/// A weight's blocks as candle's quantized tensor sees them.
pub(crate) struct StoredBlocks(Arc<Shared>);

/// The decoder's handle on a weight's blocks.
#[derive(Clone)]
pub(crate) struct BlockHandle(Arc<Shared>);

impl BlockHandle {
    /// Whether candle computed a product from the blocks themselves since they were loaded.
    pub(crate) fn read_directly(&self) -> bool {
        self.0.direct_reads.load(Ordering::Relaxed) > 0
    }

    /// Frees the blocks and returns how many bytes they held. Call it only while no product
    /// runs, and only for a weight candle reads through its tiles.
    pub(crate) fn release(&self) -> usize {
        let mut blocks = self.0.blocks.write().unwrap_or_else(PoisonError::into_inner);
        blocks.take().map_or(0, |b| b.storage_size_in_bytes())
    }
}

fn released() -> candle_core::Error {
    candle_core::Error::Msg(
        "the weight's quantized blocks were released after candle repacked them, and candle asked for them again"
            .into(),
    )
}

impl StoredBlocks {
    fn read<T>(&self, f: impl FnOnce(&dyn QuantizedType) -> T) -> Option<T> {
        let blocks = self.0.blocks.read().unwrap_or_else(PoisonError::into_inner);
        blocks.as_deref().map(f)
    }
}

impl QuantizedType for StoredBlocks {
    fn dtype(&self) -> GgmlDType {
        self.0.dtype
    }

    fn matmul_t(&self, mkn: (usize, usize, usize), lhs: &[f32], dst: &mut [f32]) -> candle_core::Result<()> {
        self.0.direct_reads.fetch_add(1, Ordering::Relaxed);
        self.read(|b| b.matmul_t(mkn, lhs, dst)).unwrap_or_else(|| Err(released()))
    }

    fn matmul_t_f16(&self, mkn: (usize, usize, usize), lhs: &[f16], dst: &mut [f16]) -> candle_core::Result<()> {
        self.0.direct_reads.fetch_add(1, Ordering::Relaxed);
        self.read(|b| b.matmul_t_f16(mkn, lhs, dst)).unwrap_or_else(|| Err(released()))
    }

    fn embedding(&self, ids: &[u32], rows: usize, hidden: usize) -> candle_core::Result<CpuStorage> {
        self.0.direct_reads.fetch_add(1, Ordering::Relaxed);
        self.read(|b| b.embedding(ids, rows, hidden)).unwrap_or_else(|| Err(released()))
    }

    fn dequantize(&self, elem_count: usize) -> candle_core::Result<CpuStorage> {
        self.0.direct_reads.fetch_add(1, Ordering::Relaxed);
        self.read(|b| b.dequantize(elem_count)).unwrap_or_else(|| Err(released()))
    }

    fn storage_size_in_bytes(&self) -> usize {
        self.read(|b| b.storage_size_in_bytes()).unwrap_or(0)
    }

    /// Where candle repacks the blocks from: only on a weight's first use, before the blocks
    /// could be released.
    fn as_ptr(&self) -> *const u8 {
        self.read(|b| b.as_ptr()).unwrap_or(std::ptr::null())
    }

    fn block_size(&self) -> usize {
        self.0.dtype.block_size()
    }

    fn from_float(&mut self, xs: &[f32]) {
        let mut blocks = self.0.blocks.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(b) = blocks.as_mut() {
            b.from_float(xs);
        }
    }

    fn from_float_imatrix(&mut self, xs: &[f32], imatrix_weights: &[f32], n_per_row: usize) {
        let mut blocks = self.0.blocks.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(b) = blocks.as_mut() {
            b.from_float_imatrix(xs, imatrix_weights, n_per_row);
        }
    }

    fn size(&self) -> usize {
        self.read(|b| b.size()).unwrap_or(0)
    }
}

/// `blocks` (of `dtype`, shaped `shape`) as a tensor candle multiplies by, and the handle that
/// can release them.
fn wrap(
    blocks: Box<dyn QuantizedType>,
    dtype: GgmlDType,
    shape: candle_core::Shape,
) -> Result<(QTensor, BlockHandle), LocalError> {
    let shared = Arc::new(Shared { dtype, blocks: RwLock::new(Some(blocks)), direct_reads: AtomicUsize::new(0) });
    let tensor = QTensor::new(QStorage::Cpu(Box::new(StoredBlocks(Arc::clone(&shared)))), shape)?;
    Ok((tensor, BlockHandle(shared)))
}

/// Reads tensor `name` of the GGUF `content` from `reader` into releasable blocks.
pub(crate) fn read<R: Read + Seek>(
    content: &Content,
    reader: &mut R,
    name: &str,
) -> Result<(QTensor, BlockHandle), LocalError> {
    let (dtype, shape, raw) = read_bytes(content, reader, name)?;
    wrap(dtype.from_data(Cow::Borrowed(&raw)), dtype, shape)
}

/// The type, shape and stored bytes of tensor `name` of the GGUF `content`.
pub(crate) fn read_bytes<R: Read + Seek>(
    content: &Content,
    reader: &mut R,
    name: &str,
) -> Result<(GgmlDType, candle_core::Shape, Vec<u8>), LocalError> {
    let info =
        content.tensor_infos.get(name).ok_or_else(|| LocalError::Gguf(format!("the model has no tensor `{name}`")))?;
    let dtype = info.ggml_dtype;
    let elements = info.shape.elem_count();
    if !elements.is_multiple_of(dtype.block_size()) {
        return Err(LocalError::Gguf(format!(
            "tensor `{name}`: {elements} values do not fill blocks of {}",
            dtype.block_size()
        )));
    }
    let bytes = elements / dtype.block_size() * dtype.type_size();
    let start = content.tensor_data_offset.saturating_add(info.offset);
    let mut raw = vec![0u8; bytes];
    reader
        .seek(SeekFrom::Start(start))
        .and_then(|_| reader.read_exact(&mut raw))
        .map_err(|e| LocalError::Gguf(format!("tensor `{name}`: {bytes} bytes at offset {start}: {e}")))?;
    Ok((dtype, info.shape.clone(), raw))
}

/// Whether candle multiplies weights of `dtype` through its tiles only when there is more
/// than one row (Q6_K on x86 with AVX2; see `select` in candle's `repack_x86.rs`).
fn tiled_only_for_many_rows(dtype: GgmlDType) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        dtype == GgmlDType::Q6K && is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = dtype;
        false
    }
}

/// A weight of a transformer block, multiplied by the many rows of a prompt and by the one
/// row of a generated token: in Guidepost's own tiles where the CPU runs them
/// ([`guidepost_kernels::quant`]: Q4_K and Q6_K, one compact copy, AMX tiles for many rows),
/// else by candle; a weight candle tiles only for many rows is multiplied by one row as by two
/// (see the module documentation).
pub(crate) enum BlockWeight {
    /// Candle's quantized product.
    Candle { matmul: QMatMul, one_row_as_two: bool },
    /// Guidepost's tiles.
    Packed(PackedWeight),
}

impl BlockWeight {
    pub(crate) fn new(tensor: QTensor) -> Result<Self, LocalError> {
        let one_row_as_two = tiled_only_for_many_rows(tensor.dtype());
        Ok(Self::Candle { matmul: QMatMul::from_qtensor(tensor)?, one_row_as_two })
    }

    /// `x` (`[..., rows, k]`) times the weight's transpose.
    pub(crate) fn forward(&self, x: &Tensor) -> Result<Tensor, LocalError> {
        let rank = x.rank();
        let rows: usize = x.dims().iter().take(rank.saturating_sub(1)).product();
        match self {
            Self::Packed(weight) => {
                let values = x.flatten_all()?.to_dtype(candle_core::DType::F32)?.to_vec1::<f32>()?;
                let product = weight.matmul(&values, rows).map_err(|e| LocalError::Gguf(e.to_string()))?;
                let mut shape = x.dims().to_vec();
                if let Some(last) = shape.last_mut() {
                    *last = weight.rows();
                }
                Ok(Tensor::from_vec(product, shape, x.device())?)
            }
            Self::Candle { matmul, one_row_as_two } => {
                if !one_row_as_two || rows != 1 || rank < 2 {
                    return Ok(matmul.forward(x)?);
                }
                let pair = Tensor::cat(&[x, x], rank - 2)?;
                Ok(matmul.forward(&pair)?.narrow(rank - 2, 0, 1)?)
            }
        }
    }
}

/// The weight `raw` (stored as `dtype`, shaped `shape`) in Guidepost's tiles, when the CPU runs
/// them and the type and shape fit; `None` otherwise (candle multiplies it then).
pub(crate) fn pack(dtype: GgmlDType, shape: &candle_core::Shape, raw: &[u8]) -> Option<PackedWeight> {
    let format = match dtype {
        GgmlDType::Q4K => QuantFormat::Q4K,
        GgmlDType::Q6K => QuantFormat::Q6K,
        _ => return None,
    };
    let &[rows, columns] = shape.dims() else { return None };
    match PackedWeight::pack(format, raw, rows, columns) {
        Ok(weight) => Some(weight),
        Err(e) => {
            tracing::debug!(error = %e, "weight left to candle");
            None
        }
    }
}

/// `tensor`'s blocks copied into releasable blocks (for a tensor converted at load).
pub(crate) fn rewrap(tensor: &QTensor, device: &Device) -> Result<(QTensor, BlockHandle), LocalError> {
    let dtype = tensor.dtype();
    let data = tensor.data()?;
    let QStorage::Cpu(blocks) = QStorage::from_data(data, device, dtype)? else {
        return Err(LocalError::Gguf("quantized weights live on the CPU only".into()));
    };
    wrap(blocks, dtype, tensor.shape().clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::quantized::QMatMul;
    use candle_core::{Module, Tensor};

    fn weight(dtype: GgmlDType) -> Result<(QTensor, Tensor), LocalError> {
        let device = Device::Cpu;
        let values = Tensor::arange(0f32, 32.0 * 512.0, &device)?.reshape((32, 512))?;
        let values = ((values / 1000.0)?.sin()? * 0.5)?;
        Ok((QTensor::quantize(&values, dtype)?, values))
    }

    #[test]
    fn wrapped_blocks_multiply_as_the_originals_do() -> Result<(), LocalError> {
        let device = Device::Cpu;
        let (original, _) = weight(GgmlDType::Q6K)?;
        let x = Tensor::arange(0f32, 3.0 * 512.0, &device)?.reshape((3, 512))?.cos()?;
        let expected = QMatMul::from_qtensor(weight(GgmlDType::Q6K)?.0)?.forward(&x)?;
        let (wrapped, handle) = rewrap(&original, &device)?;
        let got = QMatMul::from_qtensor(wrapped)?.forward(&x)?;
        let diff = (expected - got)?.abs()?.max_all()?.to_scalar::<f32>()?;
        assert!(diff < 1e-4, "{diff}");
        assert!(handle.release() > 0, "the blocks were held");
        Ok(())
    }

    #[test]
    fn released_blocks_fail_a_direct_read_with_a_clear_error() -> Result<(), LocalError> {
        let device = Device::Cpu;
        let (original, _) = weight(GgmlDType::Q8_0)?;
        let (wrapped, handle) = rewrap(&original, &device)?;
        assert!(handle.release() > 0);
        assert_eq!(handle.release(), 0, "released once");
        let err = wrapped.dequantize(&device).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("released"), "{err}");
        Ok(())
    }

    #[test]
    fn a_q6k_block_weight_is_read_through_the_tiles_for_one_row_too() -> Result<(), LocalError> {
        let device = Device::Cpu;
        let (original, values) = weight(GgmlDType::Q6K)?;
        let (wrapped, handle) = rewrap(&original, &device)?;
        let w = BlockWeight::new(wrapped)?;
        let rows = Tensor::arange(0f32, 33.0 * 512.0, &device)?.reshape((1, 33, 512))?.cos()?;
        let many = w.forward(&rows)?;
        let one = w.forward(&rows.narrow(1, 5, 1)?)?;
        assert_eq!(one.dims(), &[1, 1, 32]);
        if tiled_only_for_many_rows(GgmlDType::Q6K) {
            assert!(!handle.read_directly(), "candle read the Q6_K blocks themselves for one row");
            // One row comes out exactly as it does among many.
            let diff = (many.narrow(1, 5, 1)? - &one)?.abs()?.max_all()?.to_scalar::<f32>()?;
            assert_eq!(diff, 0.0);
        }
        let expected = rows.narrow(1, 5, 1)?.broadcast_matmul(&values.t()?)?;
        let diff = (expected - one)?.abs()?.max_all()?.to_scalar::<f32>()?;
        assert!(diff < 0.2, "{diff}");
        Ok(())
    }
}
