//! The lints that keep panics and `unsafe` away from external input stay in force: the
//! workspace denies `unwrap`, `expect`, `panic!`, `todo!`, `unimplemented!` and `unsafe`;
//! every crate inherits those lints; and the only places that allow them are test modules
//! (plus one documented `unsafe` block that sets the local models' thread count).

use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn the_workspace_denies_panics_and_unsafe_and_every_crate_inherits_it() {
    let root = std::fs::read_to_string(workspace().join("Cargo.toml")).unwrap();
    for lint in [
        "unsafe_code = \"deny\"",
        "unwrap_used = \"deny\"",
        "expect_used = \"deny\"",
        "panic = \"deny\"",
        "todo = \"deny\"",
        "unimplemented = \"deny\"",
    ] {
        assert!(root.contains(lint), "the workspace no longer has {lint}");
    }
    let mut manifests: Vec<PathBuf> = std::fs::read_dir(workspace().join("crates"))
        .unwrap()
        .flatten()
        .map(|e| e.path().join("Cargo.toml"))
        .filter(|p| p.exists())
        .collect();
    manifests.push(workspace().join("examples/builder/Cargo.toml"));
    assert!(manifests.len() >= 11);
    for manifest in manifests {
        let text = std::fs::read_to_string(&manifest).unwrap();
        assert!(
            text.contains("[lints]\nworkspace = true"),
            "{} does not inherit the workspace lints",
            manifest.display()
        );
    }
}

#[test]
fn panics_and_unsafe_are_allowed_only_in_tests() {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(workspace().join("crates")).unwrap().flatten() {
        if entry.path().join("src").is_dir() {
            rust_files(&entry.path().join("src"), &mut files);
        }
    }
    let mut unsafe_allowed = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let allows_panics = line.contains("allow(")
                && ["clippy::unwrap_used", "clippy::expect_used", "clippy::panic"].iter().any(|l| line.contains(l));
            if allows_panics && !line.contains("cfg_attr(test") {
                let before = &lines[i.saturating_sub(3)..i];
                assert!(
                    before.iter().any(|l| l.contains("#[cfg(test)]")),
                    "{}:{}: panics allowed outside a test module: {line}",
                    file.display(),
                    i + 1
                );
            }
            if line.contains("allow(unsafe_code)") {
                unsafe_allowed.push(format!("{}", file.display()));
            }
        }
    }
    // The local model's two calls into the C library (setting the thread pools' environment
    // before they start, and handing freed heap pages back to the system), and its quantized
    // products' SIMD and AMX kernels (with the permission to use AMX) and the tasks that write
    // disjoint parts of one result.
    unsafe_allowed.sort();
    let expected = [
        "guidepost-kernels/src/quant/mod.rs",
        "guidepost-kernels/src/quant/simd.rs",
        "guidepost-llm-local/src/memory.rs",
        "guidepost-llm-local/src/options.rs",
    ];
    assert_eq!(unsafe_allowed.len(), expected.len(), "{unsafe_allowed:?}");
    for (file, name) in unsafe_allowed.iter().zip(expected) {
        assert!(file.ends_with(name), "{unsafe_allowed:?}");
    }
}
