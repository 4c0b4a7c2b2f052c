//! Requantizing slow tensor types to Q8_0 at load.
//!
//! candle 0.11 has SIMD kernels for Q4_0, Q8_0 and the K-quants only; Q4_1, Q5_0 and Q5_1 run
//! on a scalar path. SmolLM2 ships as Q4_1, and requantizing its tensors to Q8_0 makes it about
//! five times faster for about one second of load time. Each tensor is converted as it is
//! read, so the peak memory is one tensor in F32 beside the model.

use candle_core::Device;
use candle_core::quantized::{GgmlDType, QTensor};

use crate::error::LocalError;

/// Tensor types that run without SIMD kernels in candle and are worth requantizing.
pub(crate) fn is_slow(dtype: GgmlDType) -> bool {
    matches!(dtype, GgmlDType::Q4_1 | GgmlDType::Q5_0 | GgmlDType::Q5_1)
}

/// What requantization did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RequantReport {
    /// Tensors converted to Q8_0.
    pub tensors: usize,
    /// Bytes of Q8_0 data written.
    pub bytes: usize,
}

/// `tensor` as Q8_0 when it is of a slow type whose rows fit Q8_0's blocks of 32; otherwise
/// `tensor` itself. Conversions are counted in `report`.
pub(crate) fn requantize(tensor: QTensor, device: &Device, report: &mut RequantReport) -> Result<QTensor, LocalError> {
    let fits = tensor.shape().dims().last().is_some_and(|d| d % GgmlDType::Q8_0.block_size() == 0);
    if !is_slow(tensor.dtype()) || !fits {
        return Ok(tensor);
    }
    let q8 = QTensor::quantize(&tensor.dequantize(device)?, GgmlDType::Q8_0)?;
    report.tensors += 1;
    report.bytes += q8.storage_size_in_bytes();
    Ok(q8)
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Tensor;

    #[test]
    fn slow_types_become_q8_and_others_stay() -> Result<(), LocalError> {
        let device = Device::Cpu;
        let values = Tensor::arange(0f32, 64.0, &device)?.reshape((2, 32))?;
        let mut report = RequantReport::default();
        let q41 = QTensor::quantize(&values, GgmlDType::Q4_1)?;
        let converted = requantize(q41, &device, &mut report)?;
        assert_eq!(converted.dtype(), GgmlDType::Q8_0);
        assert_eq!(report.tensors, 1);
        assert!(report.bytes > 0);
        let q8 = QTensor::quantize(&values, GgmlDType::Q8_0)?;
        assert_eq!(requantize(q8, &device, &mut report)?.dtype(), GgmlDType::Q8_0);
        assert_eq!(report.tensors, 1, "an already fast tensor is not counted");
        // Values survive within quantization error.
        let back = converted.dequantize(&device)?.flatten_all()?.to_vec1::<f32>()?;
        assert!((back[63] - 63.0).abs() < 3.0, "{}", back[63]);
        Ok(())
    }
}
