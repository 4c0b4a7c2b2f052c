//! Requantizing slow tensor types to Q8_0 at load.
//!
//! candle 0.11 has SIMD kernels for Q4_0, Q8_0 and the K-quants only; Q4_1, Q5_0 and Q5_1 run
//! on a scalar path. SmolLM2 ships as Q4_1, and requantizing its tensors to Q8_0 makes it about
//! five times faster for about one second of load time.
//!
//! The model loaders read tensors straight from the GGUF reader, so the requantized tensors
//! are served through [`Overlay`]: a reader that appends their Q8_0 bytes after the end of the
//! original file, with the tensor directory pointing there. Each tensor is requantized on its
//! own, so the peak memory is the original file plus the Q8_0 copies.

use std::io::{self, Read, Seek, SeekFrom};

use candle_core::Device;
use candle_core::quantized::gguf_file::Content;
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

/// Converts every slow tensor of `content` to Q8_0 and returns a reader that serves the new
/// bytes. `content`'s tensor directory is updated to point at them.
pub(crate) fn requantize<R: Read + Seek>(
    content: &mut Content,
    mut reader: R,
    device: &Device,
) -> Result<(Overlay<R>, RequantReport), LocalError> {
    let base_len =
        reader.seek(SeekFrom::End(0)).map_err(|e| LocalError::Gguf(format!("cannot size the model file: {e}")))?;
    let mut names: Vec<String> = content
        .tensor_infos
        .iter()
        .filter(|(_, info)| is_slow(info.ggml_dtype))
        .filter(|(_, info)| {
            // Q8_0 blocks hold 32 values along the last dimension.
            info.shape.dims().last().is_some_and(|d| d % GgmlDType::Q8_0.block_size() == 0)
        })
        .map(|(name, _)| name.clone())
        .collect();
    names.sort();

    let mut extra = Vec::new();
    let mut report = RequantReport::default();
    for name in names {
        let tensor = content.tensor(&mut reader, &name, device)?;
        let q8 = QTensor::quantize(&tensor.dequantize(device)?, GgmlDType::Q8_0)?;
        let data = q8.data()?;
        let virtual_start = base_len + extra.len() as u64;
        let offset = virtual_start
            .checked_sub(content.tensor_data_offset)
            .ok_or_else(|| LocalError::Gguf("tensor data offset beyond the file end".into()))?;
        extra.extend_from_slice(&data);
        report.tensors += 1;
        report.bytes += data.len();
        if let Some(info) = content.tensor_infos.get_mut(&name) {
            info.ggml_dtype = GgmlDType::Q8_0;
            info.offset = offset;
        }
    }
    Ok((Overlay { base: reader, base_len, extra, pos: 0 }, report))
}

/// A reader over a base file followed by extra bytes held in memory.
pub(crate) struct Overlay<R> {
    base: R,
    base_len: u64,
    extra: Vec<u8>,
    pos: u64,
}

impl<R> Overlay<R> {
    fn total(&self) -> u64 {
        self.base_len + self.extra.len() as u64
    }
}

impl<R: Read + Seek> Read for Overlay<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.pos < self.base_len {
            let room = usize::try_from(self.base_len - self.pos).unwrap_or(usize::MAX);
            let want = buf.len().min(room);
            self.base.seek(SeekFrom::Start(self.pos))?;
            let n = self.base.read(&mut buf[..want])?;
            self.pos += n as u64;
            return Ok(n);
        }
        let start = usize::try_from(self.pos - self.base_len).unwrap_or(usize::MAX);
        let Some(rest) = self.extra.get(start..) else {
            return Ok(0);
        };
        let n = rest.len().min(buf.len());
        buf[..n].copy_from_slice(&rest[..n]);
        self.pos += n as u64;
        Ok(n)
    }
}

impl<R: Read + Seek> Seek for Overlay<R> {
    fn seek(&mut self, from: SeekFrom) -> io::Result<u64> {
        let target = match from {
            SeekFrom::Start(n) => Some(n),
            SeekFrom::End(d) => self.total().checked_add_signed(d),
            SeekFrom::Current(d) => self.pos.checked_add_signed(d),
        };
        let target = target.ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "seek before the start"))?;
        self.pos = target;
        Ok(target)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::io::Cursor;

    #[test]
    fn overlay_reads_past_the_base() {
        let mut overlay = Overlay { base: Cursor::new(b"abc".to_vec()), base_len: 3, extra: b"XYZ".to_vec(), pos: 0 };
        let mut all = Vec::new();
        overlay.read_to_end(&mut all).unwrap();
        assert_eq!(all, b"abcXYZ");
        assert_eq!(overlay.seek(SeekFrom::End(-4)).unwrap(), 2);
        let mut two = [0u8; 2];
        overlay.read_exact(&mut two).unwrap();
        assert_eq!(&two, b"cX");
    }
}
