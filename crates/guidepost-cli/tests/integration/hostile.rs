//! `guidepost check` on hostile definition folders: every file gets a positioned error or
//! loads, folder scans stop at loops, and the process stays within its documented memory
//! (measured as its peak resident memory, `VmHWM`, reported at exit).

use std::path::Path;

use predicates::prelude::*;

use crate::guidepost;

/// The memory `guidepost check` may use on any of these inputs; see the limits table in the
/// README (16 MiB of expanded aliases, held a few times over while checking).
const PEAK_MEMORY_KIB: u64 = 200 * 1024;

fn write_hostile_files(dir: &Path) {
    let levels = 100_000;
    std::fs::write(
        dir.join("deep.yaml"),
        format!("agent: {{name: A}}\nguidelines: {}{}\n", "[".repeat(levels), "]".repeat(levels)),
    )
    .unwrap();
    std::fs::write(dir.join("block.yaml"), format!("agent: {{name: B}}\nguidelines:\n  {}x\n", "- ".repeat(levels)))
        .unwrap();
    std::fs::write(
        dir.join("deep.json"),
        format!("{{\"agent\": {}{}}}", "{\"a\": ".repeat(levels), "}".repeat(levels)),
    )
    .unwrap();
    let mut bomb = format!("agent: {{name: C}}\nmetadata:\n  a0: &a0 \"{}\"\n", "lol".repeat(340));
    for i in 1..10 {
        let p = i - 1;
        bomb.push_str(&format!(
            "  a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
        ));
    }
    std::fs::write(dir.join("laughs.yaml"), bomb).unwrap();
    std::fs::write(dir.join("nul.yaml"), "agent: {name: D}\nguidelines:\n  - {condition: a\0b, action: c}\n").unwrap();
    std::fs::write(dir.join("latin1.yaml"), b"agent: {name: caf\xE9}\n").unwrap();
    std::fs::write(dir.join("big.yaml"), format!("agent: {{name: E, description: \"{}\"}}\n", "x".repeat(5 << 20)))
        .unwrap();
    // Just within the alias-expanded limit: 6,000 copies of 1 KiB, which loads.
    let mut near = String::from("agent: {name: G}\nguidelines:\n  - condition: c\n    action: a\n    metadata:\n");
    near.push_str(&format!("      a0: &a0 \"{}\"\n", "lol".repeat(340)));
    for i in 1..4 {
        let p = i - 1;
        near.push_str(&format!("      a{i}: &a{i} [{}]\n", vec![format!("*a{p}"); 10].join(", ")));
    }
    near.push_str(&format!("      a4: [{}]\n", ["*a3"; 6].join(", ")));
    std::fs::write(dir.join("near_limit.yaml"), near).unwrap();
    std::fs::write(dir.join("bom.yaml"), "\u{feff}agent: {name: F}\nguidelines:\n  - {condition: a, action: b}\n")
        .unwrap();
}

fn peak_kib(stderr: &str) -> u64 {
    let line = stderr.lines().find_map(|l| l.strip_prefix("peak memory: ")).expect("peak memory reported");
    line.trim_end_matches(" kB").trim().parse().unwrap()
}

#[test]
fn hostile_files_fail_with_positions_within_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    write_hostile_files(dir.path());
    let out = guidepost()
        .args(["check"])
        .arg(dir.path())
        .env("GUIDEPOST_REPORT_PEAK_MEMORY", "1")
        .timeout(std::time::Duration::from_secs(60))
        .assert()
        .code(1)
        .get_output()
        .clone();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stdout.contains("checked 9 agent(s): 7 error(s)"), "{stdout}");
    assert!(stdout.contains("ok g ("), "the file just within the alias limit loads: {stdout}");
    assert!(stdout.contains("ok f ("), "the file with a byte-order mark loads: {stdout}");
    for (file, text) in [
        ("deep.yaml:2:", "nesting depth limit"),
        ("block.yaml:3:", "nesting depth limit"),
        ("deep.json:1:", "GUIDEPOST_MAX_NESTING_DEPTH"),
        ("laughs.yaml:", "GUIDEPOST_MAX_EXPANDED_BYTES"),
        ("nul.yaml:3:18", "a NUL byte"),
        ("latin1.yaml:1:18", "not valid UTF-8: byte 0xE9"),
        ("big.yaml:1:1", "GUIDEPOST_MAX_FILE_BYTES"),
    ] {
        let at = stderr.find(file).unwrap_or_else(|| panic!("no diagnostic at {file}: {stderr}"));
        let message = &stderr[stderr[..at].rfind("error[").unwrap()..at];
        assert!(message.contains(text), "{file}: {message}");
    }
    assert!(stderr.len() < 20_000, "{} bytes of diagnostics", stderr.len());
    let peak = peak_kib(&stderr);
    assert!(peak < PEAK_MEMORY_KIB, "peak memory {peak} KiB");
}

#[test]
fn raising_a_limit_through_its_variable_takes_effect() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a.yaml");
    std::fs::write(&file, "agent: {name: A, description: [[[[x]]]]}\n").unwrap();
    guidepost()
        .arg("check")
        .arg(&file)
        .env("GUIDEPOST_MAX_NESTING_DEPTH", "3")
        .assert()
        .code(1)
        .stderr(predicate::str::contains("nesting depth limit of 3"));
    guidepost()
        .arg("check")
        .arg(&file)
        .env("GUIDEPOST_MAX_NESTING_DEPTH", "many")
        .assert()
        .code(2)
        .stderr(predicate::str::contains("GUIDEPOST_MAX_NESTING_DEPTH: `many` is not a positive whole number"));
}

#[cfg(unix)]
#[test]
fn a_symlink_loop_in_a_definition_folder_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let agents = dir.path().join("agents");
    std::fs::create_dir_all(agents.join("sub")).unwrap();
    std::fs::write(agents.join("sub/a.yaml"), "agent: {name: A}\n").unwrap();
    std::os::unix::fs::symlink(&agents, agents.join("sub/back")).unwrap();
    std::os::unix::fs::symlink(&agents, agents.join("sub/again")).unwrap();
    let out = guidepost()
        .arg("check")
        .arg(&agents)
        .env("GUIDEPOST_REPORT_PEAK_MEMORY", "1")
        .timeout(std::time::Duration::from_secs(30))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("symlink loop:"))
        .stderr(predicate::str::contains("sub/again"))
        .get_output()
        .clone();
    let peak = peak_kib(&String::from_utf8_lossy(&out.stderr));
    assert!(peak < PEAK_MEMORY_KIB, "peak memory {peak} KiB");
}

#[cfg(unix)]
#[test]
fn a_folder_scan_is_bounded_in_files() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..30 {
        std::fs::write(dir.path().join(format!("f{i}.txt")), "").unwrap();
    }
    guidepost()
        .arg("check")
        .arg(dir.path())
        .env("GUIDEPOST_MAX_SCAN_FILES", "20")
        .assert()
        .code(2)
        .stderr(predicate::str::contains("files per folder scan limit of 20; raise it with GUIDEPOST_MAX_SCAN_FILES"));
}
