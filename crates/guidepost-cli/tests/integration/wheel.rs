//! The Python wheel as a Python team uses it: `pip install` into a fresh virtual environment,
//! then the `guidepost` command it put on the PATH, run with nothing but that environment's
//! `bin` on the PATH (no cargo, no rustc): `check`, `serve` answering a conversation over
//! HTTP, a replayed `simulate`, and `tools serve` serving the example's Python tools from the
//! installed package.
//!
//! The wheel comes from `GUIDEPOST_WHEEL`: `scripts/test.sh` builds it from the suite's own
//! debug build with `scripts/wheel.sh --from-debug-build` and sets `GUIDEPOST_REQUIRE_WHEEL=1`.
//! Without a wheel the test says so and passes, unless it is required.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

use crate::repo_root;
use crate::serve::{fake_model, start};

fn wheel() -> Option<PathBuf> {
    match std::env::var("GUIDEPOST_WHEEL") {
        Ok(path) if !path.is_empty() => {
            let path = PathBuf::from(path);
            assert!(path.is_file(), "GUIDEPOST_WHEEL names no file: {}", path.display());
            Some(path)
        }
        _ => {
            assert!(
                std::env::var("GUIDEPOST_REQUIRE_WHEEL").as_deref() != Ok("1"),
                "GUIDEPOST_WHEEL is not set: build it with `scripts/wheel.sh --from-debug-build`"
            );
            eprintln!("skipped: no wheel (GUIDEPOST_WHEEL; scripts/wheel.sh --from-debug-build builds one)");
            None
        }
    }
}

/// A virtual environment with the wheel installed.
pub struct Installed {
    _dir: tempfile::TempDir,
    pub bin: PathBuf,
}

impl Installed {
    /// `program` from the environment, found through a PATH that holds only the
    /// environment's `bin`, with a clean environment (the model cache's location kept).
    pub fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new(program);
        cmd.env_clear().env("PATH", &self.bin).current_dir(repo_root());
        for var in ["HOME", "GUIDEPOST_MODELS_DIR", "TMPDIR", "LANG"] {
            if let Some(value) = std::env::var_os(var) {
                cmd.env(var, value);
            }
        }
        cmd
    }
}

fn run(cmd: &mut Command, what: &str) -> Output {
    let output = cmd.output().unwrap_or_else(|e| panic!("{what}: cannot start: {e}"));
    assert!(
        output.status.success(),
        "{what} failed ({}):\n--- stdout\n{}\n--- stderr\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// Installs the wheel into a new virtual environment, from the file alone (no index).
pub fn install(wheel: &Path) -> Installed {
    let dir = tempfile::tempdir().unwrap();
    let venv = dir.path().join("venv");
    let python = std::env::var("GUIDEPOST_PYTHON").unwrap_or_else(|_| "python3".into());
    run(Command::new(&python).args(["-m", "venv"]).arg(&venv), "python3 -m venv");
    let bin = venv.join("bin");
    run(
        Command::new(bin.join("python"))
            .args(["-m", "pip", "install", "--quiet", "--no-index", "--disable-pip-version-check"])
            .arg(wheel),
        "pip install of the wheel",
    );
    for tool in ["cargo", "rustc"] {
        assert!(!bin.join(tool).exists(), "{tool} is in the environment");
    }
    Installed { _dir: dir, bin }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wheel_installs_a_guidepost_command_that_checks_serves_and_simulates() {
    let Some(wheel) = wheel() else { return };
    let env = install(&wheel);
    assert!(env.bin.join("guidepost").is_file(), "pip put the command in the environment's bin");

    let version = run(env.command("guidepost").arg("--version"), "guidepost --version");
    assert_eq!(String::from_utf8_lossy(&version.stdout).trim(), concat!("guidepost ", env!("CARGO_PKG_VERSION")));
    let through_python = run(env.command("python").args(["-m", "guidepost", "--version"]), "python -m guidepost");
    assert_eq!(through_python.stdout, version.stdout, "python -m guidepost runs the same command");

    let check = run(env.command("guidepost").args(["check", "examples/agents"]), "guidepost check");
    let report = String::from_utf8_lossy(&check.stdout);
    assert!(report.contains("checked 4 agent(s): 0 error(s)"), "{report}");

    // `serve`, reached over HTTP: one conversation turn, its model the fake OpenAI server.
    let fake = fake_model();
    let mut serve = env.command("guidepost");
    serve
        .args(["serve", "examples/agents", "--ephemeral", "--port", "0"])
        .env("GUIDEPOST_MODEL", format!("openai-compatible:{}/v1#gpt-4.1", fake.url))
        .env("GUIDEPOST_EMBEDDER", format!("openai-compatible:{}/v1#fake-embed", fake.url));
    let server = start(serve, "listening on ");
    let http = guidepost_llm::http::client_builder().build().unwrap();
    let base = &server.url;
    let agents: Value = http.get(format!("{base}/agents")).send().await.unwrap().json().await.unwrap();
    let mut names: Vec<&str> = agents.as_array().unwrap().iter().map(|a| a["id"].as_str().unwrap()).collect();
    names.sort_unstable();
    assert_eq!(names, ["banking", "otto", "taxi", "weather"]);
    let session: Value = http
        .post(format!("{base}/sessions"))
        .json(&json!({"agent_id": "otto"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let sid = session["id"].as_str().unwrap();
    let posted = http
        .post(format!("{base}/sessions/{sid}/events"))
        .json(&json!({"kind": "message", "source": "customer", "message": "Where is my order 12345?"}))
        .send()
        .await
        .unwrap();
    assert!(posted.status().is_success(), "{}", posted.text().await.unwrap());
    let mut reply = None;
    for _ in 0..12 {
        let url = format!("{base}/sessions/{sid}/events?kinds=message&source=ai_agent&wait_for_data=5");
        let response = http.get(url).send().await.unwrap();
        if response.status().is_success() {
            let events: Value = response.json().await.unwrap();
            if let Some(first) = events.as_array().and_then(|e| e.first()) {
                reply = first["data"]["message"].as_str().map(str::to_string);
                break;
            }
        }
    }
    let reply = reply.unwrap_or_else(|| panic!("no reply; server log:\n{}", server.stderr_so_far()));
    assert!(!reply.trim().is_empty());
    drop(server);

    let simulate = run(
        env.command("guidepost").args([
            "simulate",
            "examples/scenarios/weather-demo.yaml",
            "--cache",
            "replay-or-fail",
            "--recordings",
            "examples/recordings",
            "--no-progress",
            "--no-artifacts",
        ]),
        "guidepost simulate (replayed)",
    );
    let summary = String::from_utf8_lossy(&simulate.stdout);
    assert!(summary.contains("Runs: 1 passed, 0 failed"), "{summary}");

    // The tool server runs on the environment's own Python and package.
    let mut tools = env.command("guidepost");
    tools.args(["tools", "serve", "examples/python-tools/shop_tools.py", "--port", "0"]);
    let tools = start(tools, "listening on ");
    let listed: Value = http.get(format!("{}/tools", tools.url)).send().await.unwrap().json().await.unwrap();
    let names: Vec<&str> = listed["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["track_order", "arrange_return"]);
}
