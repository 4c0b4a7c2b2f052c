//! Opening GGUF models (one file or numbered slices) and reading their metadata.

use std::fs::File;
use std::io::{BufReader, Read, Seek};
use std::path::{Path, PathBuf};

use candle_core::quantized::gguf_file::{Content, Value};

use crate::error::LocalError;
use crate::multifile::MultiFile;

/// Where a GGUF model's bytes live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GgufSource {
    /// One `.gguf` file.
    File(PathBuf),
    /// Raw slices that form the GGUF when concatenated in this order.
    Parts(Vec<PathBuf>),
}

impl GgufSource {
    /// The files to read, in order.
    pub fn paths(&self) -> &[PathBuf] {
        match self {
            GgufSource::File(path) => std::slice::from_ref(path),
            GgufSource::Parts(paths) => paths,
        }
    }
}

/// A reader over a GGUF model, whatever its layout.
pub(crate) trait ReadSeek: Read + Seek + Send {}
impl<T: Read + Seek + Send> ReadSeek for T {}

/// Opens `source` and reads its header (metadata and tensor directory).
pub(crate) fn open(source: &GgufSource) -> Result<(Content, Box<dyn ReadSeek>), LocalError> {
    // Large buffer: the header holds ~150k small strings (the vocabulary and merges).
    const BUF: usize = 1 << 20;
    let mut reader: Box<dyn ReadSeek> = match source {
        GgufSource::File(path) => {
            let file = File::open(path).map_err(|e| LocalError::io(path, e))?;
            Box::new(BufReader::with_capacity(BUF, file))
        }
        GgufSource::Parts(paths) => {
            let first = paths.first().map_or_else(PathBuf::new, Clone::clone);
            let file = MultiFile::open(paths).map_err(|e| LocalError::io(first, e))?;
            Box::new(BufReader::with_capacity(BUF, file))
        }
    };
    let content = Content::read(&mut reader).map_err(|e| LocalError::Gguf(format!("{}: {e}", describe(source))))?;
    Ok((content, reader))
}

/// A short human description of the source for error messages.
pub(crate) fn describe(source: &GgufSource) -> String {
    match source {
        GgufSource::File(path) => path.display().to_string(),
        GgufSource::Parts(paths) => format!(
            "{} parts starting at {}",
            paths.len(),
            paths.first().map_or(Path::new(""), |p| p.as_path()).display()
        ),
    }
}

/// Typed access to GGUF metadata keys.
pub(crate) struct Metadata<'a>(pub(crate) &'a Content);

impl<'a> Metadata<'a> {
    fn get(&self, key: &str) -> Result<&'a Value, LocalError> {
        self.0.metadata.get(key).ok_or_else(|| LocalError::Gguf(format!("metadata key `{key}` is missing")))
    }

    /// A string value, `None` when the key is absent.
    pub(crate) fn opt_str(&self, key: &str) -> Option<&'a str> {
        self.0.metadata.get(key).and_then(|v| v.to_string().ok()).map(String::as_str)
    }

    /// A required string value.
    pub(crate) fn str(&self, key: &str) -> Result<&'a str, LocalError> {
        self.get(key)?.to_string().map(String::as_str).map_err(|e| LocalError::Gguf(format!("`{key}`: {e}")))
    }

    /// An unsigned integer value of any width, `None` when absent or not an integer.
    pub(crate) fn opt_u32(&self, key: &str) -> Option<u32> {
        let value = self.0.metadata.get(key)?;
        value
            .to_u32()
            .ok()
            .or_else(|| value.to_u64().ok().and_then(|v| u32::try_from(v).ok()))
            .or_else(|| value.to_i32().ok().and_then(|v| u32::try_from(v).ok()))
    }

    /// A floating-point value (any float width), `None` when absent or not a number.
    pub(crate) fn opt_f32(&self, key: &str) -> Option<f32> {
        match self.0.metadata.get(key)? {
            Value::F32(v) => Some(*v),
            Value::F64(v) => Some(*v as f32),
            other => integer(other).map(|v| v as f32),
        }
    }

    /// A required array of strings.
    pub(crate) fn str_array(&self, key: &str) -> Result<Vec<&'a str>, LocalError> {
        let values = self.get(key)?.to_vec().map_err(|e| LocalError::Gguf(format!("`{key}`: {e}")))?;
        values
            .iter()
            .map(|v| v.to_string().map(String::as_str).map_err(|e| LocalError::Gguf(format!("`{key}`: {e}"))))
            .collect()
    }

    /// An optional array of integers (any integer width).
    pub(crate) fn opt_i64_array(&self, key: &str) -> Result<Option<Vec<i64>>, LocalError> {
        let Some(value) = self.0.metadata.get(key) else {
            return Ok(None);
        };
        let values = value.to_vec().map_err(|e| LocalError::Gguf(format!("`{key}`: {e}")))?;
        values
            .iter()
            .map(|v| integer(v).ok_or_else(|| LocalError::Gguf(format!("`{key}`: not an integer array"))))
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }
}

fn integer(value: &Value) -> Option<i64> {
    match value {
        Value::U8(v) => Some(i64::from(*v)),
        Value::I8(v) => Some(i64::from(*v)),
        Value::U16(v) => Some(i64::from(*v)),
        Value::I16(v) => Some(i64::from(*v)),
        Value::U32(v) => Some(i64::from(*v)),
        Value::I32(v) => Some(i64::from(*v)),
        Value::U64(v) => i64::try_from(*v).ok(),
        Value::I64(v) => Some(*v),
        _ => None,
    }
}
