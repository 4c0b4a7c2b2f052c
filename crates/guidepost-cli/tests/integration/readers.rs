//! Every command reads the files and folders it is given the same bounded way: a FIFO, a
//! device or a socket where a definition, scenario, case or configuration file should be is
//! refused with an error naming it (instead of hanging on a FIFO or reading `/dev/zero`
//! forever), folders that link back into themselves are refused at once, and ids with
//! control characters are refused by `check` as the REST API refuses them.
//!
//! Each command runs under a time limit far above what it needs, so a reader that blocks
//! fails the test instead of hanging it.
#![cfg(unix)]

use std::path::Path;
use std::time::Duration;

use predicates::prelude::*;

use crate::{guidepost, repo_root};

const PATIENCE: Duration = Duration::from_secs(60);

fn mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success(), "mkfifo {}", path.display());
}

fn weather_scenario(agent: &str) -> String {
    let text = std::fs::read_to_string(repo_root().join("examples/scenarios/weather-demo.yaml")).unwrap();
    text.replace("agent: ../agents/weather.yaml", &format!("agent: {agent}"))
}

#[test]
fn a_fifo_among_agent_definitions_is_refused_by_check_and_serve_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let agents = dir.path().join("agents");
    std::fs::create_dir(&agents).unwrap();
    std::fs::copy(repo_root().join("examples/agents/weather.yaml"), agents.join("weather.yaml")).unwrap();
    mkfifo(&agents.join("pipe.yaml"));
    guidepost()
        .arg("check")
        .arg(&agents)
        .timeout(PATIENCE)
        .assert()
        .code(1)
        .stdout(predicate::str::contains("ok weather"))
        .stderr(predicate::str::contains("pipe.yaml is a FIFO (named pipe), not a regular file"));
    guidepost()
        .args(["serve", "--ephemeral", "--port", "0"])
        .arg(&agents)
        .env("GUIDEPOST_MODEL", "openai-compatible:http://127.0.0.1:9/v1#m")
        .timeout(PATIENCE)
        .assert()
        .failure()
        .stderr(predicate::str::contains("pipe.yaml is a FIFO (named pipe), not a regular file"))
        .stdout(predicate::str::contains("listening").not());
}

#[test]
fn ids_with_control_characters_are_refused_by_check() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("nul.yaml");
    // YAML escapes put a NUL or another control character in a value without one in the file.
    std::fs::write(
        &file,
        "agent:\n  id: \"we\\0ather\"\n  name: W\nguidelines:\n  - id: \"greet\\x07\"\n    condition: c\n    action: a\n",
    )
    .unwrap();
    guidepost()
        .arg("check")
        .arg(&file)
        .timeout(PATIENCE)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("error[invalid-id]: `we\\0ather` is not a valid agent id"))
        .stderr(predicate::str::contains("`greet\\u{7}` is not a valid guideline id"))
        .stderr(predicate::str::contains("control characters"));
}

#[test]
fn simulate_refuses_a_device_agent_a_fifo_scenario_and_a_folder_that_links_to_itself() {
    let dir = tempfile::tempdir().unwrap();
    let zero = dir.path().join("zero");
    std::fs::create_dir(&zero).unwrap();
    std::fs::write(zero.join("demo.yaml"), weather_scenario("/dev/zero")).unwrap();
    let simulate = |path: &Path| {
        let mut cmd = guidepost();
        cmd.arg("simulate")
            .arg(path)
            .args(["--cache", "replay-or-fail", "--recordings"])
            .arg(repo_root().join("examples/recordings"))
            .args(["--no-progress", "--no-artifacts"])
            .env("GUIDEPOST_REPORT_PEAK_MEMORY", "1")
            .timeout(PATIENCE);
        cmd
    };
    simulate(&zero)
        .assert()
        .failure()
        .stderr(predicate::str::contains("/dev/zero is a character device, not a regular file"));

    let fifo = dir.path().join("fifo.yaml");
    mkfifo(&fifo);
    simulate(&fifo).assert().failure().stderr(predicate::str::contains("fifo.yaml is a FIFO (named pipe)"));

    // Two links back to the folder itself: each path through them is a new path, so a walk
    // that follows them without remembering where it has been never ends.
    let looped = dir.path().join("looped");
    std::fs::create_dir(&looped).unwrap();
    let weather = repo_root().join("examples/agents/weather.yaml");
    std::fs::write(looped.join("demo.yaml"), weather_scenario(weather.to_str().unwrap())).unwrap();
    std::os::unix::fs::symlink(".", looped.join("a")).unwrap();
    std::os::unix::fs::symlink(".", looped.join("b")).unwrap();
    simulate(&looped).assert().failure().stderr(predicate::str::contains("symlink loop:"));
}

#[test]
fn eval_cases_and_the_configuration_file_as_fifos_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let cases = dir.path().join("cases");
    std::fs::create_dir(&cases).unwrap();
    mkfifo(&cases.join("more.yaml"));
    guidepost()
        .arg("eval")
        .arg(&cases)
        .timeout(PATIENCE)
        .assert()
        .failure()
        .stderr(predicate::str::contains("more.yaml is a FIFO (named pipe)"));

    let config = dir.path().join("guidepost.yaml");
    mkfifo(&config);
    guidepost()
        .args(["eval", "examples/eval", "--cache", "replay-or-fail", "--recordings", "examples/recordings"])
        .env("GUIDEPOST_CONFIG", &config)
        .timeout(PATIENCE)
        .assert()
        .failure()
        .stderr(predicate::str::contains("guidepost.yaml is a FIFO (named pipe)"));

    // A configuration nested past the depth limit is refused at its line before it is read.
    let deep = dir.path().join("deep.yaml");
    std::fs::write(&deep, format!("models: {}{}\n", "[".repeat(200), "]".repeat(200))).unwrap();
    guidepost()
        .args(["eval", "examples/eval", "--cache", "replay-or-fail", "--recordings", "examples/recordings"])
        .env("GUIDEPOST_CONFIG", &deep)
        .timeout(PATIENCE)
        .assert()
        .failure()
        .stderr(predicate::str::contains("deep.yaml:1:"))
        .stderr(predicate::str::contains("nesting depth limit"));
}
