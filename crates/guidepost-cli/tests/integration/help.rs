use std::io::Read;
use std::process::{Command, Stdio};

use predicates::prelude::*;

use crate::guidepost;

/// Every subcommand `guidepost --help` lists.
fn subcommands() -> Vec<String> {
    let output = guidepost().arg("--help").output().unwrap();
    assert!(output.status.success());
    let text = String::from_utf8(output.stdout).unwrap();
    let commands: Vec<String> = text
        .split("Commands:")
        .nth(1)
        .and_then(|rest| rest.split("Options:").next())
        .unwrap_or_default()
        .lines()
        // A command's line starts two spaces in; deeper lines continue a wrapped description.
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next().map(String::from))
        .filter(|c| c != "help")
        .collect();
    assert!(commands.len() >= 10, "{text}");
    commands
}

#[test]
fn every_command_has_help() {
    let commands = subcommands();
    for expected in
        ["check", "graph", "serve", "export", "chat", "eval", "simulate", "bench", "load", "schema", "models", "tools"]
    {
        assert!(commands.iter().any(|c| c == expected), "`{expected}` missing from --help: {commands:?}");
    }
    for command in &commands {
        let output = guidepost().args([command, "--help"]).output().unwrap();
        let text = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{command} --help: {}", String::from_utf8_lossy(&output.stderr));
        assert!(text.contains("Usage: guidepost"), "{command} --help: {text}");
        // Help names what exists: no scripts where a subcommand does the job.
        assert!(!text.contains("scripts/"), "{command} --help mentions a script: {text}");
    }
    guidepost().args(["models", "fetch", "--help"]).assert().success().stdout(predicate::str::contains("--with-qwen"));
}

#[test]
fn output_survives_a_closed_pipe() {
    // `guidepost schema | head -1`: the reader goes away after one line.
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("guidepost"))
        .arg("schema")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 16];
    stdout.read_exact(&mut first).unwrap();
    drop(stdout);
    let status = child.wait().unwrap();
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(status.success(), "{status:?} {stderr}");
}

#[test]
fn logs_have_no_colour_codes_when_piped() {
    // No store yet: export says so and creates nothing.
    let dir = tempfile::tempdir().unwrap();
    let output = guidepost()
        .args(["export", "nobody", "--data-dir"])
        .arg(dir.path())
        .env("GUIDEPOST_LOG", "debug")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("no store at"), "{stderr}");
    assert!(!dir.path().join("guidepost.db").exists(), "export created a store");
    // An (empty) store: opening it logs at debug level.
    std::fs::write(dir.path().join("guidepost.db"), b"").unwrap();
    let output = guidepost()
        .args(["export", "nobody", "--data-dir"])
        .arg(dir.path())
        .env("GUIDEPOST_LOG", "debug")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("DEBUG"), "no log lines to look at: {stderr}");
    assert!(!stderr.contains('\u{1b}'), "{stderr}");
    assert!(stderr.contains("no agent `nobody`"), "{stderr}");
}

#[test]
fn a_taken_port_says_what_to_do() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let output = guidepost()
        .args(["serve", "examples/agents/weather.yaml", "--ephemeral", "--port", &port])
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(&format!("port {port} is in use")), "{stderr}");
    assert!(stderr.contains("--port"), "{stderr}");
}
