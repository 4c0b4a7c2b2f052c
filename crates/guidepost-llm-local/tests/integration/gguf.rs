//! A tiny synthetic GGUF, split into parts: multi-file reading, the tokenizer builder and the
//! architecture check, without any downloaded model.

use std::io::Cursor;

use candle_core::quantized::gguf_file::{self, Content, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{DType, Device, Tensor};
use guidepost_llm_local::{GgufSource, GgufTokenizer, LocalChatModel, LocalError, MultiFile};

use super::common::options;

fn strings(items: &[&str]) -> Value {
    Value::Array(items.iter().map(|s| Value::String((*s).to_string())).collect())
}

fn tiny_gguf(architecture: &str) -> Vec<u8> {
    let tokens = strings(&["a", "b", "ab", "Ġ", "<|im_end|>"]);
    let types = Value::Array([1, 1, 1, 1, 3].iter().map(|t| Value::I32(*t)).collect());
    let merges = strings(&["a b"]);
    let metadata = [
        ("general.architecture", Value::String(architecture.to_string())),
        ("tokenizer.ggml.model", Value::String("gpt2".into())),
        ("tokenizer.ggml.pre", Value::String("qwen2".into())),
        ("tokenizer.ggml.tokens", tokens),
        ("tokenizer.ggml.token_type", types),
        ("tokenizer.ggml.merges", merges),
        ("tokenizer.ggml.eos_token_id", Value::U32(4)),
    ];
    let embedding = Tensor::zeros((5, 32), DType::F32, &Device::Cpu).unwrap();
    let embedding = QTensor::quantize(&embedding, GgmlDType::Q4_1).unwrap();
    let metadata: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (*k, v)).collect();
    let mut out = Cursor::new(Vec::new());
    gguf_file::write(&mut out, &metadata, &[("token_embd.weight", &embedding)]).unwrap();
    out.into_inner()
}

/// Writes `bytes` as three part files named so that lexical order is wrong.
fn split(bytes: &[u8], dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let third = bytes.len() / 3;
    let chunks = [&bytes[..third], &bytes[third..2 * third], &bytes[2 * third..]];
    let mut paths: Vec<_> = [1, 2, 10]
        .iter()
        .zip(chunks)
        .map(|(n, chunk)| {
            let path = dir.join(format!("part{n}.bin"));
            std::fs::write(&path, chunk).unwrap();
            path
        })
        .collect();
    paths.sort(); // part1, part10, part2
    guidepost_llm_local::sort_by_part_number(&mut paths);
    paths
}

#[test]
fn parts_read_as_one_gguf_and_build_a_tokenizer() {
    let dir = tempfile::tempdir().unwrap();
    let paths = split(&tiny_gguf("llama"), dir.path());
    let mut reader = MultiFile::open(&paths).unwrap();
    let content = Content::read(&mut reader).unwrap();
    assert_eq!(content.tensor_infos["token_embd.weight"].ggml_dtype, GgmlDType::Q4_1);
    let tokenizer = GgufTokenizer::from_gguf(&content).unwrap();
    assert_eq!(tokenizer.encode("ab<|im_end|>").unwrap(), [2, 4]);
    assert_eq!(tokenizer.encode("a ba").unwrap(), [0, 3, 1, 0]);
    assert_eq!(tokenizer.eos_token_id, Some(4));
    assert_eq!(tokenizer.token_bytes[4][0], 0xFF, "control tokens are special for llguidance");
}

#[test]
fn unsupported_architectures_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let paths = split(&tiny_gguf("bert"), dir.path());
    let err = LocalChatModel::load_source("local:tiny", &GgufSource::Parts(paths), &options()).unwrap_err();
    assert!(matches!(&err, LocalError::UnsupportedArchitecture(arch) if arch == "bert"), "{err}");
}
